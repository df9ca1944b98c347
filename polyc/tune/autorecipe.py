"""The automatic schedule's own knobs: perturbations of its recipe.

The automatic pipeline builds its schedule from the schedule language
(:mod:`polyc.schedule.auto`), so a compiled kernel's ``schedule.to_recipe()``
is the starting tree and the steps (``reorder``, ``tile`` with its sizes,
``vectorize``, ``mark(..., "parallel")``...).  :func:`neighbours` changes one
knob of such a recipe at a time, the way :func:`polyc.tune.space.neighbours`
does for the tuner's own knobs:

- one tile size of a ``tile`` step halved or doubled (within
  :data:`polyc.tune.space.TILE_LADDER`), or every size of the step at once;
- a ``tile`` step dropped (the band untiled; later steps that name its tile
  loops name the loops it tiled instead);
- a ``vectorize`` step dropped;
- the parallel mark moved off the outer loops (a ``mark`` step dropped);
- of a tensorized kernel (:mod:`polyc.schedule.tensorize_recipe`): the rows
  of C per call of a ``tensorize(..., rows=R)`` step halved or doubled, or a
  ``tensorize`` step dropped (the group's own loops instead of the call).

The recipes replay through :meth:`polyc.Schedule.replay`, which checks every
step against the exact dependences: a perturbation the dependences forbid is
refused (``illegal``) before anything is compiled and counted like the
search space's own.
"""

from __future__ import annotations

import copy

from ..errors import IllegalScheduleError, PolycError
from ..ir import Program
from .space import TILE_LADDER

#: Perturbed recipes of the automatic schedule proposed per round.
MAX_NEIGHBOURS = 12


def automatic(program: Program, config) -> dict | None:
    """The automatic schedule of ``program`` under ``config`` as a recipe
    (``kernel.schedule.to_recipe()`` without compiling), or ``None`` when the
    code is not generated from the replay of a recipe with steps
    (array-contracted programs, whose trees are rewritten after it; a
    tensorized program whose steps do not carry over to the source
    statements, :mod:`polyc.schedule.tensorize_recipe`)."""
    from ..pipeline import lower
    auto = lower(program, config).auto_schedule()
    return auto.to_recipe() if auto is not None else None


def _size_label(step: dict) -> str:
    loops = step["args"][0]
    names = [_loop_text(a).split(".")[-1] for a in loops] if isinstance(loops, list) else []
    return f"tile({','.join(names)})"


def _halve(v: int) -> int | None:
    smaller = [t for t in TILE_LADDER if t < v]
    return smaller[-1] if smaller else None


def _double(v: int) -> int | None:
    larger = [t for t in TILE_LADDER if t > v]
    return larger[0] if larger else None


def neighbours(recipe: dict) -> list[tuple[str, dict]]:
    """``(label, recipe)`` for each one-knob change of ``recipe`` (see the
    module docstring), at most :data:`MAX_NEIGHBOURS`: the rows per call,
    then tile sizes, then the dropped steps."""
    steps = recipe.get("steps", [])
    out: list[tuple[str, dict]] = []

    def variant(label: str, new_steps: list) -> None:
        r = dict(recipe)
        r["steps"] = new_steps
        out.append((f"auto recipe: {label}", r))

    for i, st in enumerate(steps):
        rows = st.get("kwargs", {}).get("rows", 0) if st.get("op") == "tensorize" else 0
        if isinstance(rows, int) and rows > 1:
            for new in (rows // 2, rows * 2):
                s2 = copy.deepcopy(steps)
                s2[i]["kwargs"]["rows"] = new
                variant(f"tensorize({_loop_text(st['args'][0])}) rows {rows} -> {new}", s2)
    for i, st in enumerate(steps):
        if st.get("op") != "tile" or len(st.get("args", [])) < 2:
            continue
        sizes = st["args"][1]
        if not isinstance(sizes, list) or not all(isinstance(v, int) for v in sizes):
            continue
        name = _size_label(st)
        for fn, word in ((_halve, "/2"), (_double, "*2")):
            new = [fn(v) for v in sizes]
            if all(v is not None for v in new) and len(sizes) > 1:
                s2 = copy.deepcopy(steps)
                s2[i]["args"][1] = new
                variant(f"{name} {'x'.join(map(str, sizes))} -> {'x'.join(map(str, new))}", s2)
            for j, v in enumerate(sizes):
                w = fn(v)
                if w is None:
                    continue
                s2 = copy.deepcopy(steps)
                s2[i]["args"][1][j] = w
                variant(f"{name} {'x'.join(map(str, sizes))} -> "
                        f"{'x'.join(map(str, s2[i]['args'][1]))}", s2)
        variant(f"{name} dropped", steps[:i] + _untiled(st, steps[i + 1:]))
    for i, st in enumerate(steps):
        if st.get("op") == "tensorize":
            variant(f"tensorize({_loop_text(st['args'][0])}) dropped",
                    steps[:i] + steps[i + 1:])
        elif st.get("op") == "vectorize":
            variant(f"vectorize({_loop_text(st['args'][0])}) dropped", steps[:i] + steps[i + 1:])
        elif st.get("op") == "mark" and str(st["args"][1]).startswith("parallel"):
            variant(f"parallel mark on {_loop_text(st['args'][0])} dropped",
                    steps[:i] + steps[i + 1:])
    return out[:MAX_NEIGHBOURS]


def _untiled(tile_step: dict, later: list) -> list:
    """``later`` steps with the tile loops of ``tile_step`` (``m_tile``, or
    its ``names=``) named as the loops it tiled (``m``): once the tile step
    is dropped, a parallel mark on the outer tile loop goes to the outer
    loop itself (it was refused: no loop ``m_tile``)."""
    loops = tile_step["args"][0] if tile_step.get("args") else []
    tiled = [a["loop"] if isinstance(a, dict) and "loop" in a else a for a in loops]
    names = tile_step.get("kwargs", {}).get("names") or []
    rename: dict[str, str] = {}
    for j, lp in enumerate(tiled):
        if not (isinstance(lp, (list, tuple)) and len(lp) == 2 and isinstance(lp[1], str)):
            continue
        n = lp[1]
        for t in (f"{n}_tile", f"{n.split('|')[0].lstrip('-')}_tile",
                  names[j] if j < len(names) and isinstance(names[j], str) else None):
            if t:
                rename.setdefault(t, n)

    def fix(v):
        if isinstance(v, list) and len(v) == 2 and all(isinstance(x, str) for x in v):
            return [v[0], rename.get(v[1], v[1])]
        if isinstance(v, list):
            return [fix(x) for x in v]
        if isinstance(v, dict):
            return {k: fix(x) for k, x in v.items()}
        return v
    if not rename:
        return later
    out = []
    for s in later:
        new = fix(copy.deepcopy(s))
        if (new.get("op") == "mark" and new != s and len(new.get("args", [])) == 2
                and str(new["args"][1]).startswith("parallel_collapse")):
            # the tile loops it collapsed were one band; the loops they tiled
            # need not be (correlation's S8: 'asks for 2 collapsed loops but
            # the band below has 1'): a parallel mark on the outer one
            new["args"][1] = "parallel"
        out.append(new)
    return out


def _loop_text(arg) -> str:
    """A recipe's loop argument as text: ``C.m``, or its tree path."""
    if isinstance(arg, dict) and "loop" in arg:
        arg = arg["loop"]
    if isinstance(arg, (list, tuple)) and len(arg) == 2 and all(isinstance(x, str) for x in arg):
        return ".".join(arg)
    if isinstance(arg, dict) and "path" in arg:
        return f"path {arg['path']} member {arg.get('member', 0)}"
    return str(arg)


def build(program: Program, recipe: dict):
    """The checked :class:`polyc.Schedule` of ``recipe``; raises
    :class:`polyc.tune.space.Refused` (``illegal`` or ``inapplicable``) when
    a step is refused."""
    from ..schedule.language import Schedule
    from .space import Refused
    try:
        return Schedule.replay(program, recipe)
    except IllegalScheduleError as e:
        raise Refused("illegal", str(e).splitlines()[0], "replay") from None
    except PolycError as e:
        raise Refused("inapplicable", str(e).splitlines()[0], "replay") from None
