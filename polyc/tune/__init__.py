"""Autotuning over checked schedule recipes (:func:`tune`).

:mod:`~polyc.tune.space` (knobs and recipes), :mod:`~polyc.tune.model` (the
analytical ranking), :mod:`~polyc.tune.measure` (checking in a child
process, round-robin timing), :mod:`~polyc.tune.executors` (inline, process
pool, dask), :mod:`~polyc.tune.db` (the append-only database),
:mod:`~polyc.tune.search` (the session), :mod:`~polyc.tune.classes` (shape
classes), :mod:`~polyc.tune.api` (:func:`tune`), :mod:`~polyc.tune.use`
(what ``polyc.compile`` reads back).  See ``docs/tuning.md``.
"""

import sys
import types

from .api import candidates, tune
from .db import Database, TuningWarning
from .executors import DaskExecutor, InlineExecutor, PoolExecutor
from .search import Budget, TuneResult

__all__ = ["tune", "candidates", "TuneResult", "Budget", "Database", "TuningWarning",
           "InlineExecutor", "PoolExecutor", "DaskExecutor"]


class _CallableModule(types.ModuleType):
    """``polyc.tune(...)`` calls :func:`tune`; ``polyc.tune.Database`` and the
    submodules stay reachable as attributes."""

    def __call__(self, *args, **kwargs):
        return tune(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
