"""The table of schedule-language transformations, by name.

A transformation module (:mod:`~polyc.schedule.transforms`,
:mod:`~polyc.schedule.fusion`, :mod:`~polyc.schedule.affine`,
:mod:`~polyc.schedule.unroll`, :mod:`~polyc.schedule.promotion`,
:mod:`~polyc.schedule.tensorize`, :mod:`~polyc.schedule.gpu_schedule`) registers
each of its functions with :func:`transform`; :mod:`polyc.schedule.language`
imports those modules, so that importing the language fills the table, and
looks transformations up here (:func:`lookup`).  This module imports no
transformation module: the import graph of the package stays acyclic.
"""

from __future__ import annotations

import difflib
import importlib
from typing import Callable, Iterable

from ..errors import ScheduleError

#: Transformations by name: ``fn(schedule, *args, **kwargs)`` returning a new
#: ``isl.Schedule``, or ``(isl.Schedule, Program)`` when the transformation
#: adds statements (promotion).  Filled by :func:`transform`.
TRANSFORMS: dict[str, Callable] = {}
#: ``"checked"`` (the result is checked against the dependences) or
#: ``"structural"`` (cannot change the order of any two instances).
KINDS: dict[str, str] = {}

#: The transformation methods of :class:`polyc.schedule.language.Schedule`,
#: in documentation order; a recipe step may name only these (or
#: ``with_reassociation``).
METHODS = ("tile", "split", "reorder", "interchange", "fuse", "distribute", "skew",
           "shift", "reverse", "parallel", "vectorize", "unroll", "unroll_and_jam",
           "isolate_full_tiles", "sink", "wavefront", "promote", "tensorize", "mark",
           "map_to_blocks", "map_to_threads", "promote_shared", "promote_registers")


#: The schedule class (:class:`polyc.schedule.language.Schedule`), set when
#: the language module is imported: modules the language itself uses
#: lazily (:mod:`polyc.picture`, through ``Schedule.plot``) reach it here
#: without importing the language back.
SCHEDULE_CLASS: list = []


def schedule_class():
    """The :class:`polyc.schedule.language.Schedule` class (the language
    module is loaded on first use: ``polyc.Schedule`` is itself lazy)."""
    if not SCHEDULE_CLASS:
        importlib.import_module(__package__ + ".language")
    return SCHEDULE_CLASS[0]


def transform(name: str, kind: str = "checked"):
    """Register a transformation function under ``name`` (a decorator);
    ``kind`` is ``"checked"`` or ``"structural"`` (see :data:`KINDS`)."""
    def deco(fn):
        TRANSFORMS[name] = fn
        KINDS[name] = kind
        return fn
    return deco


def lookup(name: str) -> Callable:
    """The transformation registered as ``name``; raises
    :class:`~polyc.errors.ScheduleError` listing the known ones otherwise."""
    fn = TRANSFORMS.get(name)
    if fn is None:
        raise ScheduleError(f"unknown transformation {name!r}{did_you_mean(name, TRANSFORMS)}; "
                            f"known: {', '.join(sorted(TRANSFORMS))}")
    return fn


def did_you_mean(name, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the choice closest to a misspelt
    ``name`` (ignoring case, difflib's ratio at least 0.5: ``SO`` for
    ``S0``, ``m_tiel`` for ``m_tile``), else ``""``: the hint of the
    schedule language's errors for a typo in a loop, statement or
    transformation name."""
    if not isinstance(name, str):
        return ""
    choices = list(dict.fromkeys(choices))
    close = difflib.get_close_matches(name, choices, 1, 0.5)     # the case as written first
    if not close:
        folded = {c.casefold(): c for c in reversed(choices)}
        close = [folded[c] for c in difflib.get_close_matches(name.casefold(), list(folded),
                                                             1, 0.5)]
    return f" (did you mean {close[0]!r}?)" if close else ""
