"""Recipes: the transformations a :class:`~polyc.schedule.language.Schedule`
went through, as JSON, and their replay.

A recipe is ``{"format": "polyc-recipe-1", "program": NAME, "fingerprint":
SHA256, "start": "source"|"isl", "steps": [{"op": "tile", "args": [...],
"kwargs": {...}}, ...]}``, plus ``"tree"`` (isl's text of the starting tree)
when the schedule started from a given tree rather than from ``start``
(``kernel.schedule``, :meth:`Schedule.from_text`), and ``"updates"`` (the
statements of a loop program written ``X = X + e`` that the program read
as updates ``X += e``, :func:`polyc.schedule.parts.as_updates`; replay reads
them so again).  Loops appear as
``{"loop": [target, name]}`` when they were named, ``{"path": [...],
"member": k}`` otherwise; tuples become lists.  The fingerprint is the
program's :meth:`~polyc.ir.Program.fingerprint` (domains, access relations,
statements), so a recipe replayed on another program is refused by name.  Replaying the steps on
the same program rebuilds the same isl tree, hence byte-identical generated
code.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path

from ..errors import RecipeMismatchError, ScheduleError
from ..ir import Program
from .parts import as_updates, updates_read
from .registry import METHODS, did_you_mean, lookup
from .tree import Loop

FORMAT = "polyc-recipe-1"


def program_fingerprint(program: Program) -> str:
    """:meth:`Program.fingerprint` without the preconditions polyc derives
    and without the program's name (its statements, domains and access
    relations): a recipe names statements and loops, never the definition,
    so it replays on the same definition renamed, and tuning records (keyed
    by it, :mod:`polyc.tune.db`) survive the rename.  Tensors are part of
    the access relations: renaming one is another program."""
    return program.replace(preconditions=None, name="").fingerprint()


def legacy_fingerprint(program: Program) -> str:
    """:func:`program_fingerprint` with the program's name, as recipes and
    tuning records written before the name was left out carry it; replay
    and the tuning database's reader still accept it."""
    return program.replace(preconditions=None).fingerprint()


def encode_value(v):
    if isinstance(v, Loop):
        if v.spec is not None:
            return {"loop": list(v.spec)}
        return {"path": list(v.path), "member": v.member}
    if isinstance(v, (list, tuple)):
        return [encode_value(x) for x in v]
    if isinstance(v, dict):
        return {str(k): encode_value(x) for k, x in v.items()}
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    try:
        import numpy as np
        if isinstance(v, np.integer):
            return int(v)
        if isinstance(v, np.ndarray) and v.dtype.kind in "iu":
            return [int(x) for x in v.reshape(-1)] if v.ndim == 1 else v.tolist()
    except ImportError:  # pragma: no cover
        pass
    raise ScheduleError(f"cannot record argument {v!r} ({type(v).__name__}) in a recipe; "
                        f"pass loops, strings and integers")


def decode_value(v):
    if isinstance(v, dict):
        if set(v) == {"loop"}:
            return tuple(v["loop"])
        if "path" in v and set(v) <= {"path", "member"}:
            return {"path": list(v["path"]), "member": int(v.get("member", 0))}
        return {k: decode_value(x) for k, x in v.items()}
    if isinstance(v, list):
        return [decode_value(x) for x in v]
    return v


def encode_step(op: str, args, kwargs) -> dict:
    return {"op": op, "args": [encode_value(a) for a in args],
            "kwargs": {k: encode_value(v) for k, v in kwargs.items()}}


def step_text(step: dict) -> str:
    """One recipe step as text, ``tile([S0.m, S0.n], [64, 64])``: loops as
    ``target.name`` (or their tree path), other values as Python literals."""
    def show(v) -> str:
        if isinstance(v, dict) and set(v) == {"loop"}:
            v = v["loop"]
        if isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(x, str)
                                                                for x in v):
            return f"{v[0]}.{v[1]}"
        if isinstance(v, dict) and "path" in v:
            return f"path {list(v['path'])}[{v.get('member', 0)}]"
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(show(x) for x in v) + "]"
        return repr(v)
    args = [show(a) for a in step.get("args", [])]
    args += [f"{k}={show(v)}" for k, v in step.get("kwargs", {}).items()]
    return f"{step.get('op')}({', '.join(args)})"


def decode_args(args, kwargs):
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        raise ScheduleError("recipe step: 'args' must be a list and 'kwargs' an object")
    return [decode_value(a) for a in args], {k: decode_value(v) for k, v in kwargs.items()}


def make_recipe(schedule) -> dict:
    out = {"format": FORMAT, "program": schedule.base.name,
           "fingerprint": program_fingerprint(schedule.base), "start": schedule.start}
    updates = updates_read(schedule.base)
    if updates:
        out["updates"] = updates            # X = X + e read as X += e
    if getattr(schedule, "origin", None) is not None:
        out["tree"] = schedule.origin       # the starting tree, in isl's text form
    out["steps"] = [dict(s) for s in schedule.recipe]
    return out


def replay_step(schedule, step: dict):
    """Apply one recipe step (``{"op", "args", "kwargs"}``, as JSON decodes
    it) to ``schedule``; returns the new schedule.  Raises
    :class:`ScheduleError` for an op that is not a transformation method."""
    op = step.get("op")
    args, kwargs = decode_args(step.get("args", []), step.get("kwargs", {}))
    if op == "with_reassociation":
        return schedule.with_reassociation(*args)
    if op not in METHODS:
        raise ScheduleError(f"recipe step {step!r}: unknown transformation {op!r}"
                            f"{did_you_mean(op, METHODS)}")
    try:
        # (a step is data: arguments that do not fit are the recipe's error,
        # not a TypeError of the caller)
        inspect.signature(lookup(op)).bind(schedule, *args, **kwargs)
    except TypeError as e:
        raise ScheduleError(f"recipe step {step!r}: {e}") from None
    return schedule.apply(op, *args, **kwargs)


def load(recipe) -> dict:
    """A recipe from a dict, a list of steps, JSON text, or a path to a JSON
    file."""
    if isinstance(recipe, (dict, list)):
        data = recipe
    elif isinstance(recipe, Path) or (isinstance(recipe, str)
                                      and not recipe.lstrip().startswith(("{", "["))):
        try:
            text = Path(recipe).read_text()
        except OSError as e:
            raise ScheduleError(f"cannot read recipe {recipe}: {e.strerror}") from None
        data = _parse(text, str(recipe))
    elif isinstance(recipe, str):
        data = _parse(recipe, "recipe")
    else:
        raise ScheduleError(f"a recipe is a dict, a JSON string or a file path, "
                            f"not {type(recipe).__name__}")
    if isinstance(data, list):
        data = {"format": FORMAT, "steps": data}
    if not isinstance(data, dict) or data.get("format", FORMAT) != FORMAT:
        raise ScheduleError(f"not a polyc recipe (expected format {FORMAT!r})")
    if not isinstance(data.get("steps", []), list):
        raise ScheduleError("recipe: 'steps' must be a list")
    return data


def _parse(text: str, where: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ScheduleError(f"{where}: invalid JSON at line {e.lineno} column {e.colno}: "
                            f"{e.msg}") from None


def replay(cls, program: Program, recipe):
    """Apply the steps of ``recipe`` to ``program`` from the recipe's start
    schedule.  Raises :class:`RecipeMismatchError` (a :class:`ScheduleError`)
    when the recipe's fingerprint is another program's."""
    data = load(recipe)
    updates = data.get("updates")
    if updates:
        # a loop program's X = X + e, which the recipe's program read as the
        # update X += e (the automatic schedule of a tensorized trmm)
        if not isinstance(updates, list) or not all(isinstance(x, str) for x in updates):
            raise ScheduleError("recipe: 'updates' must be a list of statement names")
        program = as_updates(program, set(updates))
    fp = data.get("fingerprint")
    if fp is not None and fp != program_fingerprint(program) \
            and fp != legacy_fingerprint(program):
        raise RecipeMismatchError(
            f"the recipe was made for program {data.get('program', '?')!r} "
            f"(fingerprint {str(fp)[:12]}), not for {program.name!r} "
            f"(fingerprint {program_fingerprint(program)[:12]}); record it again on "
            f"this program")
    tree_text = data.get("tree")
    if tree_text is not None:
        # the recipe starts from a given tree (a compiled kernel's schedule,
        # or one read from text): rebuild that, checked
        if not isinstance(tree_text, str):
            raise ScheduleError("recipe: 'tree' must be a schedule tree in isl's text form")
        s = cls.from_program(program).from_text(tree_text)
        s.start = data.get("start", "isl")
    else:
        s = cls.from_program(program, start=data.get("start", "source"))
    for k, step in enumerate(data.get("steps", [])):
        if not isinstance(step, dict):
            raise ScheduleError(f"recipe step {k}: expected an object, got {step!r}")
        s = replay_step(s, step)
    return s
