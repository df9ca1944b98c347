"""Knobs to a checked schedule: :func:`build` applies a candidate's knobs
(:class:`polyc.tune.space.Knobs`) as registered schedule-language
transformations, one by one, so that every candidate is a recipe checked
against the exact dependences; a refusal is a :class:`Refused` (counted as
pruned by :mod:`polyc.tune.search`).  Takes a ``Program`` and the tuned
bands' :class:`~polyc.tune.space.BandInfo`; returns a :class:`polyc.Schedule`.
"""

from __future__ import annotations

import re

import islpy as isl

from ..errors import IllegalScheduleError, PolycError, ScheduleError
from ..ir import Program


class Refused(Exception):
    """A candidate the schedule language refused: ``kind`` is ``"illegal"``
    (it breaks a dependence; :class:`IllegalScheduleError`) or
    ``"inapplicable"`` (a :class:`ScheduleError`: a loop that is not
    innermost, names that clash); ``reason`` is the language's message."""

    def __init__(self, kind: str, reason: str, step: str):
        super().__init__(f"{kind} at {step}: {reason}")
        self.kind, self.reason, self.step = kind, reason, step


def _tile_name(name: str) -> str:
    return re.sub(r"\W+", "_", name).strip("_") + "_tile"


def _shares_reduction(info, member: int) -> bool:
    """Whether band member ``member`` scans the reduction of an update (an
    iterator of it that the update's write does not index) of a band that
    runs other statements too."""
    if len(info.statements) < 2:
        return False
    for st in info.statements:
        if st.name not in info.updates:
            continue
        written = {it for a in st.accesses if a.write and a.coefs is not None
                   for d in a.coefs for it in d}
        if set(st.members[member]) - written:
            return True
    return False


def build(program: Program, knobs, infos: list, base=None):
    """The :class:`polyc.Schedule` of ``knobs`` (a
    :class:`polyc.tune.space.Knobs`; ``infos``: the
    :class:`~polyc.tune.space.BandInfo` of its start's tuned bands): the
    registered transformations applied one by one (each checked):
    ``with_reassociation``, then per band ``tensorize`` or ``reorder``,
    ``tile``, ``distribute`` (a simd mark on a reduction loop of a band that
    also runs other statements, its initialisation, with reassociation:
    each statement gets its own copy of the loop, in program order),
    ``vectorize``,
    ``parallel``, ``unroll``.  ``base``: the starting schedule when already
    built.  Raises :class:`Refused`."""
    from ..schedule.language import Schedule
    s = base if base is not None else Schedule.from_program(program, start=knobs.start)
    step = "with_reassociation"
    try:
        if knobs.reassociate:
            s = s.with_reassociation(True)
        for info, b in zip(infos, knobs.bands):
            if not b.order:         # below a tensorized band (space.UNTOUCHED)
                continue
            if b.tensorize:
                step = "tensorize"
                s = s.tensorize(info.specs[0], "gemm")
                continue
            specs = [info.specs[j] for j in b.order]
            names = [s_[1] for s_ in specs]
            if list(b.order) != sorted(b.order):
                step = "reorder"
                s = s.reorder(specs)
            tiled = [p for p, t in enumerate(b.tiles) if t]
            if tiled:
                step = "tile"
                s = s.tile([specs[p] for p in tiled], [b.tiles[p] for p in tiled],
                           names=[_tile_name(names[p]) for p in tiled])
            inner = specs[-1]
            if b.vectorize and s.reassociate and _shares_reduction(info, b.order[-1]):
                # a reduction loop is vectorized only when it scans one update
                # and nothing else: the statements beside it (its
                # initialisation) get a copy of the loop of their own
                step = "distribute"
                s = s.distribute(inner, *[[x.name] for x in program.statements
                                          if x.name in {st.name for st in info.statements}])
            if b.vectorize:
                step = "vectorize"
                s = s.vectorize(inner)
            if b.parallel:
                step = "parallel"
                outer = specs[0]
                if tiled and tiled[0] == 0:
                    outer = (specs[0][0], _tile_name(names[0]))
                s = s.parallel(outer)
            if b.unroll > 1:
                step = "unroll"
                s = s.unroll(inner, b.unroll)
    except IllegalScheduleError as e:
        raise Refused("illegal", str(e).splitlines()[0], step) from None
    except (ScheduleError, PolycError, isl.Error) as e:
        raise Refused("inapplicable", str(e).splitlines()[0], step) from None
    return s
