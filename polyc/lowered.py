"""The result of lowering: :class:`Lowered`, every stage of one compilation
up to the loop nest (``ir.Program``, ``Dependences``, the checked
``isl.Schedule``, the LoopNest), :func:`with_notes`, which adds what
tensorization and row fusion did to an explanation, and :func:`with_mapping`,
which adds a ``target="cuda"`` kernel's GPU mapping report (for both the
emulated and the pycuda kernels, so neither imports the other's module).

:mod:`polyc.pipeline` makes these; :class:`polyc.runtime.Kernel` keeps one
(or re-lowers on demand) and explains it.  This module imports neither, so
the runtime never imports the driver.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import islpy as isl

from .dependence import Dependences
from .ir import Program
from .loopnest import Node


@dataclass(frozen=True)
class Lowered:
    """Every stage up to the loop nest (no C involved)."""
    program: Program
    deps: Dependences
    schedule: isl.Schedule
    loopnest: Node
    #: per update statement: the intrinsic it calls, or why it calls none
    tensorized: dict = field(default_factory=dict)
    #: what row fusion did (polyc.schedule.rowfuse), or ""
    row_fusion: str = ""
    #: temporaries contracted to per-iteration buffers
    #: (polyc.schedule.contraction.Contraction)
    contracted: tuple = ()
    #: ``(program, schedule, deps)`` of the source program when code
    #: generation saw another one: tensorize marks lowered to calls
    #: (:func:`polyc.schedule.tensorize.lower_marks`); ``None`` otherwise.
    #: ``deps`` may be a function computing them (the source program's,
    #: before array contraction), called when first asked for
    view: tuple | None = None

    #: the automatic schedule as a schedule-language ``Schedule`` (its
    #: recipe: the starting tree and the steps of
    #: :mod:`polyc.schedule.auto`) when the code was generated from its tree;
    #: for a tensorized program a function of the source program's
    #: dependences making it
    #: (:func:`polyc.schedule.tensorize_recipe.source_schedule`, called when
    #: first asked for; it may give ``None``); ``None`` for a user schedule.
    #: After array contraction it is the recipe of the program before it
    #: (compiling the recipe contracts the same temporaries again)
    auto: object = None
    #: temporaries stored in one window per thread
    #: (:func:`polyc.schedule.windows.thread_windows`)
    windows: tuple = ()

    def auto_schedule(self):
        """The automatic schedule with its steps (:attr:`auto`), or ``None``."""
        if callable(self.auto):
            _, _, deps = self.schedule_view()
            object.__setattr__(self, "auto", self.auto(deps))
        return self.auto

    def as_schedule(self):
        """The :class:`polyc.Schedule` this compilation shows: the automatic
        recipe (:meth:`auto_schedule`) when there is one, else the tree of
        :meth:`schedule_view` wrapped with derived loop names."""
        auto = self.auto_schedule()
        if auto is not None:
            return auto
        from .schedule.language import Schedule
        return Schedule.from_isl(*self.schedule_view())

    def schedule_view(self) -> tuple:
        """``(program, isl.Schedule, Dependences)`` a :class:`polyc.Schedule`
        of this compilation shows: the source statements with their
        tensorize marks, not the calls."""
        if self.view is None:
            return self.program, self.schedule, self.deps
        program, schedule, deps = self.view
        if callable(deps):
            deps = deps()
            object.__setattr__(self, "view", (program, schedule, deps))
        return program, schedule, deps


#: What the GEMM micro-kernel of each build is (``polyc_gemm_isa()``).
ISA_TEXT = {
    "avx512": "AVX-512 (14 x 32 f32 / 14 x 16 f64 register tile)",
    "avx2": "AVX2 + FMA (6 x 16 f32 / 6 x 8 f64 register tile)",
    "portable": ("portable C (4 x 8 plain loops): this CPU, or Config.cflags, lacks "
                 "AVX2 and FMA, so the GEMM runs several times below the vector peak"),
}


def with_notes(explained, low: Lowered | None, *, isa: str | None = None):
    """``explained`` (the text or JSON dict of :func:`polyc.schedule.explain.explain`)
    with what tensorization and row fusion did in ``low`` (``None``: a user
    schedule, neither ran): the JSON keys ``"tensorize"`` (statement -> line),
    ``"row_fusion"`` (a line, or ``""``), ``"windows"`` (lines) and ``"isa"`` (the GEMM
    micro-kernel the intrinsics library runs: ``"avx512"``, ``"avx2"``,
    ``"portable"``, or ``None`` when the kernel calls no GEMM), or text
    sections."""
    notes = dict(low.tensorized) if low is not None else {}
    rows = low.row_fusion if low is not None else ""
    contracted = low.contracted if low is not None else ()
    windows = low.windows if low is not None else ()
    if isinstance(explained, dict):
        explained["tensorize"] = notes
        explained["row_fusion"] = rows
        explained["contracted"] = [c.to_dict() for c in contracted]
        explained["windows"] = [w.describe() for w in windows]
        explained["isa"] = isa
        return explained
    if notes:
        explained += "\ntensorization (polyc.intrinsics):\n" + "\n".join(
            f"  {v}" for v in notes.values())
    if isa is not None:
        explained += f"\n  gemm micro-kernel: {ISA_TEXT.get(isa, isa)}\n"
    if rows:
        explained += f"\nrow fusion (polyc.schedule.rowfuse):\n  {rows}\n"
    if contracted:
        explained += "\narray contraction (polyc.schedule.contraction):\n" + "\n".join(
            f"  {c.describe()}" for c in contracted) + "\n"
    if windows:
        explained += "\nthread windows (polyc.schedule.windows):\n" + "\n".join(
            f"  {w.describe()}" for w in windows) + "\n"
    return explained


def with_mapping(explained, low, *, emulated: bool, resources=None):
    """``explained`` with the GPU mapping report of ``low`` (a
    :class:`polyc.gpu_pipeline.GpuLowered`): the JSON key ``"gpu"``
    (``{"kernels": [...], "emulated": bool, "resources": ...}``) or a text
    section; ``resources``: ptxas's report per CUDA function."""
    kernels = [{"index": k.index, "statements": list(k.statements),
                "tile": list(k.tile), "blocks": list(k.block_axes),
                "threads": list(k.thread_axes), "reduction": k.reduction or None,
                "host_loops": k.host_depth, **k.launch_sizes(low.program),
                "phases": list(k.rows) or None, "barriers": list(k.barriers) or None,
                "text": k.describe()}
               for k in low.kernels]
    if isinstance(explained, dict):
        explained["gpu"] = {"kernels": kernels, "emulated": emulated,
                            "resources": resources}
        return explained
    text = explained + "\nGPU mapping (polyc.schedule.gpu_mapping)"
    text += " [emulated on the CPU]:\n" if emulated else ":\n"
    for k in kernels:
        text += f"  {k['text']}\n"
        if k["grid"] or k["block"]:
            grid = " x ".join(f"[{g}]" for g in k["grid"]) or "1"
            block = " x ".join(f"[{b}]" for b in k["block"]) or "1"
            text += f"    blocks {grid}, threads per block {block} (outermost member first)\n"
    if resources:
        text += "".join(f"  ptxas {name}: {r}\n" for name, r in sorted(resources.items()))
    return text
