"""Compiling with what tuning found: the tuning database's best recipe for a
program (:func:`tuned_schedule`), used by
:func:`polyc.pipeline.compile_programs` when ``Config.use_tuned`` is set."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

from ..errors import PolycError
from .db import ALL_SIZES, FILENAME, Database, TuningWarning, key_info, key_of

log = logging.getLogger(__name__)


def tuned_schedule(program, config):
    """``(schedule, note)``: the :class:`polyc.Schedule` replayed from the
    newest ``best`` record of ``program`` for this machine, toolchain, target
    and polyc version (shape class ``"all"``), with a note for ``explain``;
    ``(None, note)`` when the record says the automatic schedule is best or
    its recipe no longer applies (a :class:`TuningWarning` says why);
    ``(None, "")`` without a record.  Never raises for a database problem."""
    path = Path(config.resolved_cache_dir()) / FILENAME
    if not path.is_file():
        return None, ""
    db = Database(path)
    try:
        rec = db.best(key_of(key_info(program, config, ALL_SIZES)))
    except (PolycError, OSError) as e:
        log.warning("tuning database %s not read: %s", path, e)
        return None, ""
    if rec is None:
        return None, ""
    where = f"{path} (record {rec['id'][:12]}, {rec.get('label', '?')})"
    speed = rec.get("speedup")
    gain = f", {speed:.2f}x the automatic schedule when tuned" if isinstance(
        speed, (int, float)) else ""
    if rec.get("recipe") is None:
        return None, f"tuned: the automatic schedule is the best recorded in {where}"
    from ..schedule.language import Schedule
    try:
        s = Schedule.replay(program, rec["recipe"])
    except PolycError as e:
        why = str(e).splitlines()[0]
        warnings.warn(f"the tuned recipe of {program.name} in {where} no longer applies: "
                      f"{why}; compiling with the automatic schedule", TuningWarning,
                      stacklevel=3)
        return None, f"tuned recipe in {where} ignored: {why}"
    return s, f"tuned: schedule recipe from {where}{gain}"
