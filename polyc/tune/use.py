"""Compiling with what tuning found: the tuning database's best recipe for a
program (:func:`tuned_schedule`), used by
:func:`polyc.pipeline.compile_programs` when ``Config.use_tuned`` is set."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

from ..errors import PolycError
from .db import ALL_SIZES, FILENAME, Database, TuningWarning, family_of, key_info

log = logging.getLogger(__name__)


def tuned(program, config):
    """``(generic, versions, note)`` from the tuning database for ``program``
    on this machine, toolchain, target and polyc version: ``generic`` is the
    :class:`polyc.Schedule` replayed from the newest best record of the
    class ``"all"`` (``None``: the automatic schedule; a ``{"auto": {...}}``
    dict: the automatic schedule with those ``Config`` options), ``versions`` the
    :class:`polyc.versioned.Version` of each class recorded as a version
    (newest record per class, at most :data:`~polyc.versioned.MAX_VERSIONS`),
    ``note`` what ``explain`` says.  A recipe that no longer applies is
    ignored with a :class:`TuningWarning`.  ``(None, [], "")`` without
    records; never raises for a database problem."""
    path = Path(config.resolved_cache_dir()) / FILENAME
    if not path.is_file():
        return None, [], ""
    try:
        db = Database(path)
        bests = db.class_bests(family_of(key_info(program, config, ALL_SIZES)),
                               canon=lambda text: _canonical(program, text))
        if not bests:       # records written before the key left out the def's name
            bests = db.class_bests(family_of(key_info(program, config, ALL_SIZES, legacy=True)),
                                   canon=lambda text: _canonical(program, text))
    except (PolycError, OSError) as e:
        log.warning("tuning database %s not read: %s", path, e)
        return None, [], ""
    generic, note = None, ""
    rec = bests.get(ALL_SIZES)
    if rec is not None:
        generic, note = _replayed(program, rec, path)
    from ..versioned import MAX_VERSIONS, Version, narrowed, shape_class
    versions = []
    for key, r in bests.items():
        if key == ALL_SIZES or not r.get("version"):
            continue
        # shown as written when tuned (records before canonical keys: their key)
        text = r.get("class_text", r["keyinfo"].get("class", key))
        text = text if isinstance(text, str) else key
        try:
            cls = shape_class(program, text)
        except PolycError as e:
            note += f"\nversion {text} ignored: {e}"
            continue
        if r.get("recipe") is not None:
            # replayed as it was tuned and as the versioned kernel lowers it: on
            # the program narrowed to the class (isl's schedule of tr with N = 1
            # is not the generic one: a recipe of one need not apply to the other)
            s, why = _replayed(narrowed(program, cls), r, path)
            if s is None:
                note += f"\nversion {text} ignored: {why}"
                continue
        versions.append(Version(cls, r.get("recipe"), str(r.get("why", ""))))
    return generic, versions[:MAX_VERSIONS], note.strip()


def _canonical(program, text: str) -> str:
    """The class key of a recorded class ``text`` (the text itself when the
    program no longer reads it: the record is then ignored with the reason)."""
    from ..versioned import canonical_text
    try:
        return canonical_text(program, text)
    except PolycError:
        return text


def _replayed(program, rec, path):
    where = f"{path} (record {rec['id'][:12]}, {rec.get('label', '?')})"
    speed = rec.get("speedup")
    gain = f", {speed:.2f}x the automatic schedule when tuned" if isinstance(
        speed, (int, float)) else ""
    if rec.get("recipe") is None:
        return None, f"tuned: the automatic schedule is the best recorded in {where}"
    if not isinstance(rec["recipe"], dict):     # (a string would be read as a file's path)
        return None, (f"tuned recipe in {where} ignored: a {type(rec['recipe']).__name__}, "
                      f"not a recipe object")
    if "auto" in rec["recipe"]:
        from ..config import Config
        from .space import auto_config
        try:
            auto_config(rec["recipe"], Config())
        except PolycError as e:
            return None, f"tuned recipe in {where} ignored: {e}"
        opts = ", ".join(f"{k}={v}" for k, v in rec["recipe"]["auto"].items())
        return rec["recipe"], f"tuned: the automatic schedule with {opts}, from {where}{gain}"
    from ..schedule.language import Schedule
    try:
        s = Schedule.replay(program, rec["recipe"])
    except PolycError as e:
        why = str(e).splitlines()[0]
        warnings.warn(f"the tuned recipe of {program.name} in {where} no longer applies: "
                      f"{why}; compiling with the automatic schedule", TuningWarning,
                      stacklevel=4)
        return None, f"tuned recipe in {where} ignored: {why}"
    return s, f"tuned: schedule recipe from {where}{gain}"


def tuned_schedule(program, config):
    """``(schedule, note)`` of :func:`tuned` for the class ``"all"`` (what
    ``polyc explain`` describes); the note also lists the recorded versions
    by shape class, which ``polyc.compile`` builds into the kernel besides."""
    generic, versions, note = tuned(program, config)
    if versions:
        lines = [f"versions by shape class ({len(versions)}, compiled into the kernel before "
                 f"the generic version explained above):"]
        lines += [f"  {v.cls.text}" + (f" — {v.why}" if v.why else "") for v in versions]
        note = "\n".join(x for x in (note, *lines) if x)
    return generic, note
