"""``polyc.tune(...)``: the public entry of the tuner (:func:`tune`) and its
dry run (:func:`candidates`).  A session is :func:`polyc.tune.search.run_session`;
shape classes are :mod:`polyc.tune.classes`."""

from __future__ import annotations

import math
import random

from ..config import Config, config_or_env
from ..errors import PolycError
from . import autorecipe, feasible, space
from . import classes as cl
from .db import Database
from .executors import make_executor
from .search import (
    Budget,
    Trial,
    TuneResult,
    _automatic_recipe,
    _Session,
    budget_of,
    run_session,
)
from .sizes import sizes_list
from .sources import check_memory, tuned_program

__all__ = ["tune", "candidates"]


def tune(kernel_or_source, sizes_or_classes, *, budget="quick", executor=None, db=None,
         config: Config | None = None, name: str | None = None, seed: int = 0,
         progress: bool | None = None, record: bool = True, classes=None,
         dtype=None, _faults=None) -> TuneResult:
    """Search schedule recipes of a program for the fastest at the given sizes.

    ``kernel_or_source``: TC source (``name`` picks the definition), an
    einsum string (``"ij,jk->ik"``: the kernel ``polyc.einsum`` compiles;
    sizes per label, ``{"i": 512, ...}``), a compiled kernel or an
    ``ir.Program``.  ``dtype``: the element type of the source's floating
    arguments, as ``polyc.compile(dtype=)``, or an einsum's computation type
    (default float64, numpy's).  ``sizes_or_classes``: a dict of
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
    :class:`~polyc.errors.BindingError` for sizes that miss a parameter or
    name one the program does not have,
    :class:`~polyc.errors.ShapeError` for sizes whose tensors do not fit in
    memory twice,
    :class:`~polyc.errors.ScheduleError` for a class isl cannot read,
    :class:`~polyc.errors.PolycError` for a bad budget or executor, a
    database that cannot be written (``record=True``), or when the default
    schedule itself fails its check.  Ctrl-C stops the session;
    what was measured is already recorded.
    """
    config = config_or_env(config, "polyc.tune").replace(use_tuned=False)
    if config.target != "c":
        raise PolycError("polyc.tune tunes C kernels for now; the CUDA mapping options are "
                         "not in the search space yet")
    program, sizes_or_classes = tuned_program(kernel_or_source, name, sizes_or_classes, dtype)
    by_class = cl.requested(program, sizes_or_classes, classes)
    sizes = sizes_list(program, [x for v in by_class.values() for x in v]
                        if by_class else sizes_or_classes)
    b = budget_of(budget)
    check_memory(program, sizes)
    if db is None and record:
        db = Database(config=config)
    elif db is not None and not isinstance(db, Database):
        db = Database(db)
    if record:              # before anything is measured (it failed at the first record)
        db.check_writable()
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
               seed: int = 0, count: int = 20, config: Config | None = None,
               dtype=None, notes: list | None = None) -> list[Trial]:
    """The dry run of :func:`tune`: the first ``count`` candidates of the
    model's ranking, each built as a checked schedule (status ``"legal"``,
    or why it was pruned), with its model score, then the perturbations of
    the automatic schedule's recipe (:mod:`polyc.tune.autorecipe`; no
    score).  Nothing is compiled or recorded.  ``notes``: a list to which
    the knobs not proposed, and why, are appended as lines
    (:func:`polyc.tune.space.notes`: simd on a band with loops below it;
    :mod:`polyc.tune.feasible`: a parallel or simd mark, or the GEMM
    intrinsic, the schedule language refuses on that band)."""
    config = (config or Config.from_env()).replace(use_tuned=False)
    program, sizes_or_classes = tuned_program(kernel_or_source, name, sizes_or_classes, dtype)
    # shape classes: ranked as the generic session is, on every class's sizes
    # (their sizes were refused as lacking every parameter)
    by_class = cl.requested(program, sizes_or_classes, None)
    sizes = sizes_list(program, [x for v in by_class.values() for x in v]
                       if by_class else sizes_or_classes)
    b = budget_of(budget)
    s = _Session(program, sizes, Budget(math.inf, b.measured, b.sampled, b.first,
                                        b.neighbours), None, None, config, seed, None, None)
    s.analyse()
    if notes is not None:
        notes.extend(space.notes({st: i[0] for st, i in s.infos.items() if i}))
        for (st, r), fs in s.feasible.items():
            notes.extend(line for f in fs for line in f.notes)
            if r and (st, r) not in s.choices and s.infos[st][0]:
                notes.append(feasible.REDUNDANT.format(start=st))
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

