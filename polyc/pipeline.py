"""The compilation pipeline, in order.  The one place that spells it out.

``compile_program(program, config) -> Kernel``:

1. preconditions (``bounds``): parameter values keeping every access in bounds;
2. dependences (``dependence.compute``): exact flow/anti/output relations;
3. schedule (``schedule.initial``): isl's scheduler, or the source order when
   ``Config.schedule == "identity"``;
4. band optimisation (``schedule.tile``): member order, tiling, simd marks;
5. parallel marks (``schedule.marks``): the outermost coincident loops;
6. legality (``schedule.legality.check``) of the final schedule;
7. AST (``astgen``): isl AST -> LoopNest;
8. C source (``backends.c.emit``);
9. build and load (``backends.c.build``, through the disk cache);
10. the callable ``runtime.Kernel``.

With ``Config.dump`` (or ``POLYC_DUMP=1``) every stage is printed to stderr.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import islpy as isl

from . import astgen, bounds, dependence
from .config import Config
from .dependence import Dependences
from .ir import Program
from .loopnest import Node, format_loopnest
from .schedule import initial, legality, marks, tile


@dataclass(frozen=True)
class Lowered:
    """Every stage up to the loop nest (no C involved)."""
    program: Program
    deps: Dependences
    schedule: isl.Schedule
    loopnest: Node


def _dump(config: Config, title: str, text) -> None:
    if config.dump:
        print(f"=== polyc: {title} ===\n{text}", file=sys.stderr)


def lower(program: Program, config: Config | None = None) -> Lowered:
    """Steps 1-7: from an ``ir.Program`` to a checked schedule and its LoopNest."""
    config = config or Config.from_env()
    program = program.replace(preconditions=bounds.preconditions(program))   # 1
    _dump(config, "program", program)
    deps = dependence.compute(program)                                        # 2
    _dump(config, "dependences", deps)
    if config.schedule == "identity":                                         # 3
        sched = initial.identity_schedule(program)
    else:
        sched = initial.auto_schedule(program, deps)
        _dump(config, "isl schedule", sched)
        sched = tile.optimize_bands(sched, program, config, deps)             # 4
        if config.parallel:
            sched = marks.mark_parallel(sched)                                # 5
    _dump(config, "schedule", sched)
    legality.check(sched, deps, program, what="the generated schedule")       # 6
    nest = astgen.generate(program, sched)                                    # 7
    _dump(config, "loop nest", format_loopnest(nest))
    return Lowered(program, deps, sched, nest)


def compile_program(program: Program, config: Config | None = None):
    """Compile ``program`` to a callable :class:`polyc.runtime.Kernel`.

    Raises :class:`~polyc.errors.IllegalScheduleError` (a polyc bug if the
    automatic schedule is wrong), :class:`~polyc.errors.CompileError` when the
    C compiler fails, :class:`~polyc.errors.ToolMissingError` without one.
    """
    from polyc.backends.c import build, emit

    from .runtime import Kernel
    config = config or Config.from_env()
    low = lower(program, config)
    source = emit.emit(low.program, low.loopnest)                             # 8
    _dump(config, "C source", source.text)
    lib = build.build_library(source.text, config=config)                     # 9
    return Kernel(low.program, low.schedule, low.loopnest, source, lib, config)  # 10
