"""``polyc.tune(...)``: the public entry of the tuner (:func:`tune`) and its
dry run (:func:`candidates`).  A session is :func:`polyc.tune.search.run_session`;
shape classes are :mod:`polyc.tune.classes`."""

from __future__ import annotations

import math
import random

from ..config import Config, config_or_env
from ..errors import BindingError, PolycError
from . import autorecipe
from . import classes as cl
from .db import Database
from .executors import make_executor
from .search import (
    Budget,
    Trial,
    TuneResult,
    _automatic_recipe,
    _Session,
    _size_value,
    budget_of,
    resolve_program,
    run_session,
    sizes_list,
)

__all__ = ["tune", "candidates"]


def tune(kernel_or_source, sizes_or_classes, *, budget="quick", executor=None, db=None,
         config: Config | None = None, name: str | None = None, seed: int = 0,
         progress: bool | None = None, record: bool = True, classes=None,
         _faults=None) -> TuneResult:
    """Search schedule recipes of a program for the fastest at the given sizes.

    ``kernel_or_source``: TC source (``name`` picks the definition), a
    compiled kernel or an ``ir.Program``.  ``sizes_or_classes``: a dict of
    size parameters, or a list of them (each candidate is timed at every
    one; ratios are combined by geometric mean): the result holds for every
    size (shape class ``"all"``).  Or a dict from shape class (isl
    constraints over the sizes, e.g. ``"M = 1"``, ``"M mod 16 = 0"``; see
    :mod:`polyc.versioned`) to its representative sizes (a dict or a list of
    1-3): the generic version is tuned on all of them, then each class,
    seeded with the generic best, under its own context; a class becomes a
    version of the kernel only when it measures at least 10% faster than the
    generic version on its sizes (:mod:`polyc.tune.classes`).
    ``classes="lattice"`` with a list of sizes groups them into the classes
    of :func:`polyc.tune.classes.lattice` first.
    ``budget``: ``"quick"`` (60 s, at most 12 measured candidates),
    ``"max"`` (600 s, 60) or seconds, per session (the generic one and each
    class).  ``executor``: ``None``/``"inline"``, ``"pool"``,
    ``"dask://HOST:PORT"``, a ``distributed.Client`` or an executor object
    (:mod:`polyc.tune.executors`).  ``db``: a :class:`~polyc.tune.db.Database`,
    a path, or ``None`` for the one in the cache directory; ``record=False``
    writes nothing.  ``progress``: a tqdm bar (default: when stderr is a
    terminal).

    Returns a :class:`TuneResult` (``classes``: one
    :class:`~polyc.tune.classes.ClassOutcome` per class).  Raises
    :class:`~polyc.errors.BindingError` for sizes that miss a parameter,
    :class:`~polyc.errors.ScheduleError` for a class isl cannot read,
    :class:`~polyc.errors.PolycError` for a bad budget or executor, or when
    the default schedule itself fails its check.  Ctrl-C stops the session;
    what was measured is already recorded.
    """
    config = config_or_env(config, "polyc.tune").replace(use_tuned=False)
    if config.target != "c":
        raise PolycError("polyc.tune tunes C kernels for now; the CUDA mapping options are "
                         "not in the search space yet")
    program = _program(kernel_or_source, name, sizes_or_classes)
    by_class = cl.requested(program, sizes_or_classes, classes)
    sizes = sizes_list(program, [x for v in by_class.values() for x in v]
                        if by_class else sizes_or_classes)
    b = budget_of(budget)
    if db is None and record:
        db = Database(config=config)
    elif db is not None and not isinstance(db, Database):
        db = Database(db)
    ex = make_executor(executor)
    try:
        result = run_session(program, sizes, b, ex, db if record else None, config, seed,
                             progress, _faults)
        if by_class:
            result.classes = cl.tune_classes(program, by_class, result, b, ex,
                                             db if record else None, config, seed, progress)
    finally:
        if ex is not executor:
            ex.close()
    if db is not None and not record:
        result.database = ""
    return result


def candidates(kernel_or_source, sizes_or_classes, *, budget="quick", name: str | None = None,
               seed: int = 0, count: int = 20, config: Config | None = None) -> list[Trial]:
    """The dry run of :func:`tune`: the first ``count`` candidates of the
    model's ranking, each built as a checked schedule (status ``"legal"``,
    or why it was pruned), with its model score, then the perturbations of
    the automatic schedule's recipe (:mod:`polyc.tune.autorecipe`; no
    score).  Nothing is compiled or recorded."""
    config = (config or Config.from_env()).replace(use_tuned=False)
    program = _program(kernel_or_source, name, sizes_or_classes)
    sizes = sizes_list(program, sizes_or_classes)
    b = budget_of(budget)
    s = _Session(program, sizes, Budget(math.inf, b.measured, b.sampled, b.first,
                                        b.neighbours), None, None, config, seed, None, None)
    s.analyse()
    ranked = s.ranked(random.Random(seed))[:count]
    kept = s.legal(ranked, count)
    # the automatic recipe's perturbations (no model score)
    auto = _automatic_recipe(program, config)
    if auto is not None:
        s.trees.add(autorecipe.build(program, auto).to_text())
        kept += s.legal_recipes(autorecipe.neighbours(auto), count)
    for t in kept:
        t.status = "legal"
    return s.trials


def _program(target, name, sizes_or_classes):
    """:func:`resolve_program`; a TC definition whose indices scale by a size
    (``h*S + kh``, which ``polyc.compile`` specialises per value of ``S``) is
    lowered with the value the tuning sizes give that size, as the kernel
    lowers it for that value.  Raises :class:`BindingError` when the sizes
    lack it or give it several values (tune each value on its own)."""
    if not isinstance(target, str):
        return resolve_program(target, name)
    from ..api import program
    from ..frontend import tc
    module = tc.require_definitions(tc.parse(target, "<tc>"))
    defs = [d for d in module.defs if name is None or d.name == name]
    needs = tc.needs_specialization(defs[0]) if len(defs) == 1 else frozenset()
    if not needs:
        return resolve_program(target, name)
    points = sizes_or_classes if isinstance(sizes_or_classes, (list, tuple)) else [
        sizes_or_classes]
    if (isinstance(sizes_or_classes, dict) and sizes_or_classes
            and all(isinstance(v, (dict, list)) for v in sizes_or_classes.values())):
        points = [q for v in sizes_or_classes.values()     # shape classes: their sizes
                  for q in ([v] if isinstance(v, dict) else v)]
    fixed = {}
    for n in sorted(needs):
        values = {q.get(n) for q in points if isinstance(q, dict)}
        if None in values or not values:
            raise BindingError(f"polyc.tune: {defs[0].name} scales an index by size {n} "
                               f"(a kernel per value of {n}): give {n} in the sizes")
        if len(values) > 1:
            raise BindingError(f"polyc.tune: {defs[0].name} is compiled once per value of "
                               f"{n}; tune each value on its own, not {sorted(values)}")
        fixed[n] = _size_value(n, values.pop())
    return program(target, defs[0].name, sizes=fixed)
