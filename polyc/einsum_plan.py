"""Contraction paths of multi-operand einsums: numpy's ``optimize=`` as data.

Owns the step between a validated einsum call and its kernels when the call
is contracted pairwise.  Takes a subscripts string (or an
:class:`~polyc.frontend.einsum.EinsumSpec`), the operands' shapes and dtypes,
and numpy's ``optimize`` argument; returns a list of :class:`ContractionStep`,
each an ordinary einsum of one or two operands (more only for a one-step
plan) that :mod:`polyc.einsum_call` compiles like any other einsum, and that
the graph layer can turn into one operation each.  Never touches arrays.

The path follows numpy's rules: ``optimize=False`` (or ``None``) is one step
over all operands (one loop nest); ``True`` is ``'greedy'``; ``'greedy'`` and
``'optimal'`` ask opt_einsum's ``contract_path`` for that strategy, except
that calls with one or two operands, or without a summed label, stay one
step (numpy's rule too); ``(name, memory_limit)`` bounds the size of the
intermediates; ``['einsum_path', (0, 1), ...]`` is taken as it is and
validated as numpy validates it.  Positions follow numpy's and opt_einsum's
convention: each step removes the operands at its positions from the current
list and appends its result at the end.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import ir
from .errors import (
    BindingError,
    EinsumError,
    IncompletePathError,
    PathIndexError,
    PathNameError,
)
from .frontend.einsum import EinsumSpec, labels_text, parse, subscripts_from_sublists

#: The named strategies numpy's ``einsum`` accepts (``True`` is ``'greedy'``).
STRATEGIES = ("greedy", "optimal")


@dataclass(frozen=True)
class ContractionStep:
    """One contraction of a path.

    ``operands`` are positions (ascending) in the list of operands that are
    current before this step: the inputs first, each step's result appended
    at the end after its operands are removed.  ``subscripts`` is the
    step's explicit einsum (``"ij,jk->ik"``; dimensions under ``...`` stay
    ``...``, an intermediate has them first); the last step's output is the
    call's output.  ``shape`` and ``dtype`` are the result's (``dtype`` is
    also the type the step computes in).  ``flops`` is the step's cost in
    numpy's and opt_einsum's model: the product of the sizes of every label
    it touches, times the number of multiplications per term plus one when
    it sums.  ``scaling`` is the number of distinct labels it touches (its
    loop nest's depth).
    """
    operands: tuple[int, ...]
    subscripts: str
    shape: tuple[int, ...]
    dtype: str
    flops: int
    scaling: int


@dataclass(frozen=True)
class Optimize:
    """numpy's ``optimize`` argument, normalised (hashable): ``strategy``
    is ``None`` (one step), a strategy name (checked only when a search is
    needed, as numpy does), or ``'explicit'`` with ``path``."""
    strategy: str | None
    memory_limit: int | None = None
    path: tuple[tuple[int, ...], ...] = ()


def normalize_optimize(optimize: Any) -> Optimize:
    """:class:`Optimize` from numpy's ``optimize`` argument: ``False``,
    ``None``, ``True``, a strategy name, ``(name, memory_limit)`` or
    ``['einsum_path', (i, j), ...]``.

    Raises :class:`~polyc.errors.BindingError` (a ``TypeError``) where numpy
    raises ``TypeError``: an argument of another kind, a contraction that is
    not a sequence, a position that is not an integer.
    """
    if optimize is True:
        return Optimize("greedy")
    if optimize is False or optimize is None:
        return Optimize(None)
    if isinstance(optimize, str):
        return Optimize(optimize)
    try:
        n = len(optimize)
    except TypeError:
        raise BindingError(f"Did not understand the path: {optimize!r} (optimize must be "
                           "False, True, 'greedy', 'optimal', (name, memory_limit) or "
                           "['einsum_path', (i, j), ...])") from None
    if n and isinstance(optimize[0], str) and optimize[0] == "einsum_path":
        return Optimize("explicit", path=tuple(_path_step(k, s)
                                              for k, s in enumerate(optimize[1:])))
    if (n == 2 and isinstance(optimize[0], str)
            and isinstance(optimize[1], (int, float, np.integer, np.floating))):
        return Optimize(optimize[0], memory_limit=int(optimize[1]))
    raise BindingError(f"Did not understand the path: {optimize!r}")


def _path_step(k: int, step: Any) -> tuple[int, ...]:
    try:
        items = tuple(step)
    except TypeError:
        raise BindingError(f"'{type(step).__name__}' object is not iterable: contraction {k} "
                           "of the einsum_path must be a tuple of operand positions, "
                           f"got {step!r}") from None
    out = []
    for item in items:
        try:
            out.append(operator.index(item))
        except TypeError:
            raise BindingError(f"'{type(item).__name__}' object cannot be interpreted as an "
                               f"integer (contraction {k} of the einsum_path, "
                               f"{step!r})") from None
    return tuple(out)


def plan_contraction(subscripts: str | bytes, shapes: Sequence[Sequence[int]],
                     dtypes: Sequence[Any], optimize: Any = False, *, dtype: Any = None,
                     out_dtype: Any = None) -> list[ContractionStep]:
    """The pairwise contractions that ``numpy.einsum(subscripts, ...,
    optimize=optimize)`` would run for operands of these ``shapes`` and
    ``dtypes``, as :class:`ContractionStep` data.

    The last step computes in the call's computation type: ``dtype`` if
    given, else ``np.result_type`` of ``dtypes`` and ``out_dtype``.  An
    intermediate computes in ``dtype`` if given, else in numpy's result type
    of its own operands (float32 operands give a float32 intermediate even
    when another operand is float64, as in numpy), replaced by the call's
    computation type where polyc does not compute in it (int8 + int8).

    >>> [s.subscripts for s in plan_contraction("ij,jk,kl->il",
    ...     [(200, 200)] * 3, ["float64"] * 3, optimize=True)]
    ['ij,jk->ik', 'kl,ik->il']

    Raises :class:`~polyc.errors.EinsumError` for subscripts numpy rejects,
    :class:`~polyc.errors.BindingError` for an ``optimize`` numpy does not
    understand, :class:`~polyc.errors.PathNameError` (a ``KeyError``) for an
    unknown strategy name, :class:`~polyc.errors.PathIndexError` (an
    ``IndexError``) for a position past the operands left,
    :class:`~polyc.errors.IncompletePathError` (a ``RuntimeError``) for a
    path that leaves several operands, and ``EinsumError`` for a negative,
    repeated or missing position (numpy computes a wrong result or fails
    with an unrelated message there).
    """
    opt = normalize_optimize(optimize)
    spec = parse(subscripts, shapes)
    names = tuple(np.dtype(d).name for d in dtypes)
    if len(names) != spec.nop:
        raise EinsumError(f"einsum has {spec.nop} operands but {len(names)} dtypes were given")
    if dtype is not None:
        final = np.dtype(dtype).name
    else:
        final = np.result_type(*names, *([] if out_dtype is None else [out_dtype])).name
    return list(plan_for_spec(spec, names, opt, final, dtype is not None))


@functools.lru_cache(maxsize=1024)
def plan_for_spec(spec: EinsumSpec, dtypes: tuple[Any, ...], opt: Optimize, final: str,
                  forced: bool) -> tuple[ContractionStep, ...]:
    """:func:`plan_contraction` of a parsed spec (remembered: a hot call
    repeats it).  ``dtypes`` are the operands' (numpy dtypes or names);
    ``final`` is the call's computation type; ``forced`` says it was given
    as ``dtype=`` (then every step computes in it)."""
    path = _path(spec, opt)
    current = [(labels, shape, dt) for labels, shape, dt
               in zip(spec.input_labels, spec.shapes, dtypes)]
    steps = []
    for k, positions in enumerate(path):
        taken = _check_positions(k, positions, len(current))
        last = k == len(path) - 1
        ops = [current[p] for p in taken]
        rest = [current[p] for p in range(len(current)) if p not in taken]
        sizes: dict[str, int] = {}
        for labels, shape, _ in ops:
            for lab, n in zip(labels, shape):
                if lab not in sizes or sizes[lab] == 1:
                    sizes[lab] = n
        if last and rest:
            raise IncompletePathError(f"Invalid einsum_path is specified: {len(rest)} more "
                                      "operands has to be contracted.")
        if last:
            out_labels = spec.output_labels
        else:
            keep = set(spec.output_labels).union(*(labels for labels, _, _ in rest))
            seen = list(dict.fromkeys(lab for labels, _, _ in ops for lab in labels))
            out_labels = tuple(sorted((lab for lab in seen if len(lab) > 1),
                                      key=lambda lab: int(lab[1:]))
                               + [lab for lab in seen if len(lab) == 1 and lab in keep])
        if forced or last:
            dt = final
        else:
            dt = np.result_type(*[d for _, _, d in ops]).name
            dt = dt if dt in ir.C_TYPES else final
        shape = tuple(sizes[lab] for lab in out_labels)
        summed = any(lab not in out_labels for lab in sizes)
        flops = math.prod(sizes.values()) * (max(1, len(ops) - 1) + summed)
        subscripts = (",".join(labels_text(labels) for labels, _, _ in ops) + "->"
                      + labels_text(out_labels))
        steps.append(ContractionStep(taken, subscripts, shape, dt, flops, len(sizes)))
        current = rest + [(out_labels, shape, dt)]
    if len(current) != 1:      # an empty path on several operands
        raise IncompletePathError(f"Invalid einsum_path is specified: {len(current) - 1} "
                                  "more operands has to be contracted.")
    return tuple(steps)


def _check_positions(k: int, positions: tuple[int, ...], n: int) -> tuple[int, ...]:
    where = f"contraction {k} of the einsum_path, {positions}"
    if not positions:
        raise EinsumError(f"{where}, names no operand")
    if any(p < 0 for p in positions):
        raise EinsumError(f"{where}, has a negative position: positions count from 0 in the "
                          f"list of the {n} operands left")
    if any(p >= n for p in positions):
        raise PathIndexError(f"pop index out of range: {where}, names position "
                             f"{max(positions)} but {n} operand(s) are left")
    if len(set(positions)) != len(positions):
        raise EinsumError(f"{where}, names an operand twice")
    return tuple(sorted(positions))


def _path(spec: EinsumSpec, opt: Optimize) -> tuple[tuple[int, ...], ...]:
    """The path as positions: opt_einsum's for a named strategy."""
    everything = (tuple(range(spec.nop)),)
    if opt.strategy is None:
        return everything
    if opt.strategy == "explicit":
        # numpy runs an empty path on one operand by returning the operand
        # itself, not its einsum; polyc contracts it
        return opt.path if opt.path or spec.nop > 1 else everything
    if spec.nop <= 2 or set(spec.output_labels) == set(spec.labels):
        return everything        # nothing to order (numpy's rule, checked first)
    if opt.strategy not in STRATEGIES:
        raise PathNameError(f"Path name {opt.strategy} not found (optimize must be False, "
                            "True, 'greedy', 'optimal', (name, memory_limit) or "
                            "['einsum_path', (i, j), ...])")
    import opt_einsum  # imported on first use: `import polyc` stays cheap

    limit = opt.memory_limit
    if limit is None and opt.strategy == "optimal":
        limit = _numpy_memory_limit(spec)
    if limit is not None and limit < 1:
        return everything        # no intermediate fits (opt_einsum refuses such limits)
    path, _ = opt_einsum.contract_path(_symbolic(spec), *spec.shapes, shapes=True,
                                       optimize=opt.strategy, memory_limit=limit)
    return tuple(tuple(int(p) for p in step) for step in path)


def _numpy_memory_limit(spec: EinsumSpec) -> int:
    """numpy's default bound on an intermediate: the largest input or output."""
    sizes = spec.label_sizes
    return max(math.prod(sizes[lab] for lab in labels)
               for labels in spec.input_labels + (spec.output_labels,))


def _symbolic(spec: EinsumSpec) -> str:
    """The spec as an explicit subscripts string of single symbols (the
    generated ``...`` labels get letters the call does not use), for
    opt_einsum and for reports."""
    used = {lab for lab in spec.labels if len(lab) == 1}
    free = (c for c in (_symbol(i) for i in range(len(used) + len(spec.labels) + 1))
            if c not in used)
    symbol = {lab: lab if len(lab) == 1 else next(free) for lab in spec.labels}
    return (",".join("".join(symbol[lab] for lab in labels) for labels in spec.input_labels)
            + "->" + "".join(symbol[lab] for lab in spec.output_labels))


def _symbol(i: int) -> str:
    """opt_einsum's i-th symbol (letters, then other Unicode characters)."""
    from opt_einsum import get_symbol
    return get_symbol(i)


def einsum_path(subscripts: Any, *operands: Any, optimize: Any = "greedy"
                ) -> tuple[list, str]:
    """numpy's ``einsum_path`` for polyc: ``(path, report)``.

    ``path`` is ``['einsum_path', (i, j), ...]``, the path
    :func:`polyc.einsum` takes with the same ``optimize`` (pass it back as
    ``optimize=path`` to reuse it); ``report`` is a printable summary in
    numpy's layout: naive and optimised FLOP counts, the largest
    intermediate, and each step's scaling, type and subscripts.  Accepts
    the interleaved form too.  Raises what :func:`plan_contraction` raises.
    """
    if not isinstance(subscripts, (str, bytes)):
        subscripts, operands = subscripts_from_sublists((subscripts,) + operands)
    arrays = [np.asarray(op) for op in operands]
    if not arrays:
        raise EinsumError("must specify the einstein sum subscripts string and at least "
                          "one operand")
    steps = plan_contraction(subscripts, [a.shape for a in arrays],
                             [a.dtype for a in arrays], optimize)
    spec = parse(subscripts, [a.shape for a in arrays])
    return ["einsum_path"] + [s.operands for s in steps], _report(spec, steps)


def _report(spec: EinsumSpec, steps: Sequence[ContractionStep]) -> str:
    sizes = spec.label_sizes
    summed = bool(spec.reduction_labels)
    naive = math.prod(sizes.values()) * (max(1, spec.nop - 1) + summed)
    optimized = sum(s.flops for s in steps)
    scaling = [s.scaling for s in steps]
    lines = [
        f"  Complete contraction:  {spec.canonical}",
        f"         Naive scaling:  {len(sizes)}",
        f"     Optimized scaling:  {max(scaling)}",
        f"      Naive FLOP count:  {naive:.3e}",
        f"  Optimized FLOP count:  {optimized:.3e}",
        f"   Theoretical speedup:  {naive / max(optimized, 1):.3f}",
        f"  Largest intermediate:  {max(math.prod(s.shape) for s in steps):.3e} elements",
        "-" * 74,
        f"{'scaling':>7} {'dtype':>8}  {'current':<28} remaining",
        "-" * 74,
    ]
    remaining = [labels_text(labels) for labels in spec.input_labels]
    out = labels_text(spec.output_labels)
    for s, scale in zip(steps, scaling):
        remaining = [r for p, r in enumerate(remaining) if p not in s.operands]
        remaining.append(s.subscripts.split("->")[1])
        lines.append(f"{scale:>7} {s.dtype:>8}  {s.subscripts:<28} "
                     f"{','.join(remaining)}->{out}")
    return "\n".join(lines)

