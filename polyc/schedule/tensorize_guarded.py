"""Guarded products under a tensorize mark: ``C += cond ? A * B : 0`` with
an affine ``cond`` (a causal mask, a triangular operand) matched as the
product over the instances where ``cond`` holds, as the automatic pipeline
(:mod:`polyc.schedule.tensorize_auto`) matches it.  Used by
:mod:`polyc.schedule.tensorize` when a mark is checked or lowered without
the automatic pipeline's match (a kernel's schedule or recipe replayed) and
by ``Schedule.tensorize`` on such a statement; takes a ``Program`` and
statement names, returns a :class:`~polyc.intrinsics.GemmMatch` or ``None``.
"""

from __future__ import annotations

from ..ir import Program
from .parts import guarded_product


def guarded_fold(program: Program, main: str, names, parallel: bool, rows: int = 0):
    """The match of ``main`` as a guarded product over the instances where
    its condition holds, with the other statements of ``names`` (its
    initialisation...) folded as
    :func:`polyc.schedule.tensorize._split_fold` folds a part; ``None`` when
    ``main`` is no guarded product or the product does not match."""
    from .tensorize import _split_fold
    g = guarded_product(program, program.statement(main))
    if g is None:
        return None
    m = _split_fold(program, main, [x for x in names if x != main], parallel,
                    {main: g.domain}, rows)
    return None if isinstance(m, str) else m
