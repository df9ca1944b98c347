"""The compilation pipeline of ``target="cuda"``, in order.

``compile_gpu(program, config) -> kernel``:

1. preconditions (``bounds``), as for C; then contractions of half
   operands onto tensor cores (``tensor_cores``);
2. dependences (``dependence.compute``);
3. schedule (``schedule.initial``) with outer coincidence, so that the
   outermost member of each band is parallel where one can be;
4. mapping (``schedule.gpu_mapping``): kernels, host loops, tile loops to
   blocks and point loops to threads; a streaming program of rows
   (``schedule.rowfuse``) instead becomes one kernel with a block per row
   (``schedule.gpu_rows``, ``Config.gpu_rows``): its statements are phases
   of the block, with barriers where dependences cross threads and
   reductions by the whole block;
5. legality of the whole tree (``schedule.legality.check``) and the proof
   of the mapping (``schedule.gpu_verify.verify``); then promotion of the
   inputs each k-tile iteration reads to shared memory
   (``schedule.gpu_promotion``, ``Config.gpu_promote``);
6. AST (``astgen``): a LoopNest with ``Launch`` nodes and mapped loops;
7. CUDA source (``backends.cuda.emit``, through ``backends.base.backend("cuda")``);
8. with ``Config.emulate``: the same kernels as C, built and run on the CPU
   (an :class:`EmulatedKernel`); otherwise nvcc builds a cubin
   (``backends.cuda.build``) that pycuda loads and launches
   (``polyc.gpu_runtime.CudaKernel``).

Step 1b (``tensor_cores``, ``Config.gpu_tensor_cores``): contractions of
float16/bfloat16 operands into float32 become calls of the tensor-core GEMM
(``backends/cuda/wmma.py``), each its own launch.  The C backend's
micro-kernel tensorization, row fusion and array contraction do not run
here.
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from . import astgen, bounds, dependence
from .config import Config
from .intrinsics import SIMT_GEMM_DTYPES, match_round_store, tensor_core_support
from .ir import Program
from .lowered import Lowered, with_mapping
from .runtime import Kernel
from .schedule import (
    gpu_mapping,
    gpu_promotion,
    gpu_rows,
    gpu_schedule,
    gpu_verify,
    initial,
    legality,
    rowfuse,
    tensorize_auto,
)


@dataclass(frozen=True)
class GpuLowered(Lowered):
    """:class:`~polyc.lowered.Lowered` plus the mapping: ``kernels`` (one
    :class:`~polyc.schedule.gpu_mapping.KernelMapping` per launch),
    ``mapped`` (the schedule with its GPU marks; ``schedule`` is the tree
    before mapping, which :attr:`Kernel.schedule` shows and explains)."""
    kernels: tuple = ()
    mapped: object = None

    def mapping_report(self) -> str:
        return gpu_mapping.describe(list(self.kernels))


def lower_gpu(program: Program, config: Config | None = None,
              kept_off: frozenset = frozenset()) -> GpuLowered:
    """Steps 1-6.  Raises :class:`~polyc.errors.IllegalScheduleError` when
    the mapping fails its proof (a polyc bug), with a witness.  A GEMM call
    the mapping cannot give a launch of its own (every thread of a block
    makes the call: one inside a one-thread kernel, below host loops that
    carry dependences, would wait at its barriers for threads that do not
    exist) is lowered again as loops (``kept_off``), and ``explain`` says so."""
    config = config or Config.from_env()
    source = program
    if program.preconditions is None:
        program = program.replace(preconditions=bounds.preconditions(program))  # 1
    program, notes = tensor_cores(program, config, kept_off)                  # 1b
    deps = dependence.compute(program)                                        # 2
    if config.schedule == "identity":                                         # 3
        sched = initial.annotate(initial.identity_schedule(program), deps.all())
    else:
        sched = initial.auto_schedule(program, deps, config.replace(outer_coincidence=True))
    rows = None
    if config.gpu_rows and config.schedule != "identity" and config.fusion == "isl":
        # streaming rows: one kernel, a block per row (polyc.schedule.gpu_rows)
        fused = rowfuse.row_fused(sched, program, deps)
        rows = None if fused is None else gpu_rows.map_schedule(
            fused, program, deps, config.gpu_block)
        if rows is not None:
            sched = fused
    if rows is not None:
        mapped, kernels = rows                                                # 4
    else:
        mapped, kernels = gpu_mapping.map_schedule(sched, program, block=config.gpu_block,
                                                   promote=config.gpu_promote,
                                                   deps=deps.all())           # 4
    calls = {st.name for st in program.statements
             if st.kind == "intrinsic" and getattr(st.intrinsic, "operand_dtype", "")}
    stranded = frozenset(st for k in kernels if not k.intrinsic
                         for st in k.statements if st in calls)
    if stranded:
        return lower_gpu(source, config, kept_off | stranded)
    legality.check(mapped, deps, program, what="the GPU schedule")            # 5
    gpu_verify.verify(mapped, kernels, deps, program)
    view = (program, sched, deps)
    mapped, promoted = gpu_promotion.promote_shared(mapped, program, kernels)  # 5b
    gpu_verify.verify_buffers(promoted)
    nest = astgen.generate(promoted, mapped)                                  # 6
    return GpuLowered(promoted, deps, sched, nest, view=view, kernels=tuple(kernels),
                      mapped=mapped, tensorized=notes)


def tensor_cores(program: Program, config: Config,
                 kept_off: frozenset = frozenset()) -> tuple[Program, dict]:
    """``program`` with each contraction of float16/bfloat16 operands into a
    float32 accumulator (a half output's, :mod:`polyc.halfprec`) replaced by
    a call of the tensor-core GEMM (``tensorize_auto.find(...,
    tensor_cores=True)`` then ``contract``; the mapping gives each call a
    launch of its own), and per update statement what happened, for
    ``explain``.  Nothing changes without half tensors, with
    ``Config.gpu_tensor_cores`` off, under ``schedule="identity"`` or on an
    architecture without tensor cores for the operands (the reason is in
    the notes)."""
    if not (config.gpu_tensor_cores or config.gpu_simt_gemm) or config.schedule == "identity":
        return program, {}
    matches, notes = tensorize_auto.find(program, parallel=False, tensor_cores=True)
    kept = []
    on = dict.fromkeys(SIMT_GEMM_DTYPES, config.gpu_simt_gemm)
    for m in matches:
        if not on.get(m.operand_dtype, config.gpu_tensor_cores):
            notes.pop(m.statement, None)        # switched off: mapped as loops, no note
            continue
        why = tensor_core_support(m.operand_dtype, config.cuda_arch)
        if m.statement in kept_off:
            why = ("the mapping could not give the call a launch of its own (its loops "
                   "carry dependences, so it would run in a one-thread kernel)")
        if why is None:
            m = match_round_store(program, m)
            kept.append(m)
            notes[m.statement] = m.describe()
        else:
            notes[m.statement] = f"{m.statement} not on tensor cores: {why}"
    notes = {k: v.replace(" not tensorized: ", " not on tensor cores: ") for k, v in notes.items()}
    if not kept:
        return program, notes
    out = tensorize_auto.contract(program, kept)
    # a float32 accumulator whose rounding store a call took over is not needed
    used = {r.get_tuple_name(isl.dim_type.out) for st in out.statements
            for r in (st.write, *st.reads)}
    return out.replace(tensors=tuple(t for t in out.tensors
                                     if t.role != "temp" or t.name in used)), notes


def lower_gpu_schedule(schedule, config: Config | None = None) -> GpuLowered:
    """The lowering of a user :class:`~polyc.schedule.language.Schedule`:
    its mapping as written (``map_to_blocks``, ``map_to_threads``,
    ``promote_shared``, ``promote_registers``), the loops it does not map
    mapped automatically (:func:`polyc.schedule.gpu_schedule.finalize`),
    proven (:func:`polyc.schedule.gpu_verify.verify`), then the AST.  Raises
    :class:`~polyc.errors.IllegalScheduleError` (with a witness) for a
    mapping that joins two threads by a dependence,
    :class:`~polyc.errors.ScheduleError` for one a kernel cannot have,
    :class:`~polyc.errors.UnsupportedError` for a ``tensorize`` mark (a C
    intrinsic)."""
    from .errors import UnsupportedError
    from .schedule import tensorize
    config = config or Config.from_env()
    schedule.check("the user schedule")
    if tensorize.marks(schedule.isl):
        raise UnsupportedError(
            "the schedule tensorizes onto a C micro-kernel, which target='cuda' does not "
            "have; remove the tensorize step or compile for target='c'")
    program, deps = schedule.program, schedule.deps
    mapped, kernels = gpu_schedule.finalize(schedule.isl, program, deps,
                                            block=config.gpu_block)
    gpu_verify.verify(legality.without_extensions(mapped), kernels, deps, program)
    gpu_verify.verify_buffers(program)
    nest = astgen.generate(program, mapped)
    return GpuLowered(program, deps, schedule.isl, nest, kernels=tuple(kernels), mapped=mapped)


class EmulatedKernel(Kernel):
    """A ``target="cuda"`` kernel run by the CPU emulator
    (``Config(emulate=True)``): called like any :class:`~polyc.runtime.Kernel`
    with numpy arrays; ``cuda_source`` is the CUDA text the same mapping
    prints, ``source`` the emulator's C; :meth:`explain` adds the mapping
    report."""

    def __init__(self, program, source, library, config, *, lowered, cuda, user_schedule=None):
        super().__init__(program, source, library, config, lowered=lowered,
                         user_schedule=user_schedule)
        self.cuda = cuda
        self._report = None
        try:        # set when a tensor-core block's threads could not start
            import ctypes
            self._wmma_error = ctypes.c_int.in_dll(library.cdll, "polyc_wmma_error")
        except ValueError:
            self._wmma_error = None
        if config.emulate_checks:
            import ctypes
            self._report = (ctypes.c_int64 * 6).in_dll(library.cdll, "polyc_emu_report")
            self.SERIAL_WORK = 1 << 62      # the checks' state is not thread-safe

    def __call__(self, *args, **kwargs):
        out = super().__call__(*args, **kwargs)
        if self._wmma_error is not None and self._wmma_error.value:
            from .errors import DeviceError
            self._wmma_error.value = 0
            raise DeviceError(
                "the CUDA emulator could not start the 256 POSIX threads of a tensor-core "
                "block (raise the process limit, ulimit -u, or compile with "
                "Config(gpu_tensor_cores=False)); the outputs are incomplete")
        if self._report is not None and self._report[0]:
            report = list(self._report)
            for i in range(6):
                self._report[i] = 0
            raise self._violation(report)
        return out

    def _violation(self, report: list) -> Exception:
        """The error of an instrumented run's first violation."""
        from .errors import IllegalScheduleError
        kind, kernel, tensor, at, a, b = report
        names = list(self.cuda.kernel_names)
        fn = names[kernel] if 0 <= kernel < len(names) else "?"
        tname = self._source.tensors[tensor] if 0 <= tensor < len(self._source.tensors) else "?"
        if kind == 1:
            return IllegalScheduleError(
                f"emulated CUDA kernel {fn} accessed {tname} out of bounds: element {at} of "
                f"{b} (thread {a - 1} of the launch, counted over the grid); a polyc bug")
        if kind == 2:
            who = "several threads" if a < 0 else f"thread {a - 1}"
            return IllegalScheduleError(
                f"emulated CUDA kernel {fn} has a race on {tname}: element {at} is touched "
                f"by {who} and by thread {b - 1} of one launch (threads counted over the "
                "grid), one of them writing it; nothing orders two threads of a launch")
        return MemoryError(f"the instrumented emulation could not allocate the race shadow of "
                           f"{tname} ({at} elements); run it at smaller sizes")

    @property
    def cuda_source(self) -> str:
        return self.cuda.text

    @property
    def kernels(self) -> tuple:
        """The :class:`~polyc.schedule.gpu_mapping.KernelMapping` of each launch."""
        return self._lowered.kernels

    def explain(self, json: bool = False):
        out = super().explain(json=json)
        return with_mapping(out, self._lowered, emulated=True)

    def time(self, *args, repeat: int = 10) -> float:
        """Refused: an emulated kernel has no device time (``CudaKernel.time``
        measures the launches on a GPU).  Raises :class:`UnsupportedError`."""
        from .errors import UnsupportedError
        raise UnsupportedError(
            "this target='cuda' kernel runs on the CPU emulator (Config.emulate), which "
            "has no device time to measure; compile it without emulate where a GPU and "
            "pycuda are, or time the C kernel (target='c') with your own timer")

    def __repr__(self) -> str:
        return super().__repr__().replace("<polyc.Kernel", "<polyc.Kernel cuda (emulated)")


#: Lowered GPU kernels (mapping and CUDA source) by the ``key`` given to
#: :func:`compile_gpu` (:func:`polyc.pipeline.lowered_key`, which covers
#: ``Config.target`` and every GPU option): a second compile skips isl.
_LOWERED: dict = {}


def compile_gpu(program: Program, config: Config, key: str | None = None, *,
                schedule=None):
    """Compile ``program`` for ``target="cuda"``: an :class:`EmulatedKernel`
    with ``Config.emulate``, else a :class:`polyc.gpu_runtime.CudaKernel`.
    ``key`` (:func:`polyc.pipeline.lowered_key` of ``program`` with its
    preconditions) memoises the lowering in this process; ``schedule``: a
    user :class:`~polyc.schedule.language.Schedule` of ``program``, lowered
    by :func:`lower_gpu_schedule`.
    Raises what :func:`lower_gpu` raises, :class:`~polyc.errors.CompileError`
    (nvcc's or the C compiler's stderr), :class:`~polyc.errors.ToolMissingError`
    without nvcc or pycuda, :class:`~polyc.errors.DeviceError` without a GPU."""
    from polyc.backends.base import backend
    if program.preconditions is None:
        program = program.replace(preconditions=bounds.preconditions(program))
    if key is not None and key in _LOWERED and not config.dump:
        low, cuda = _LOWERED[key]
    else:
        low = (lower_gpu(program, config) if schedule is None
               else lower_gpu_schedule(schedule, config))
        cuda = backend("cuda").emit(low.program, low.loopnest, config, kernels=low.kernels)
        if key is not None:
            _LOWERED[key] = low, cuda
    if config.emulate:
        from polyc.backends.cuda.emulate import emulation_source
        source = emulation_source(low.program, cuda, low.loopnest, list(low.kernels),
                                  reverse=config.emulate_reverse, checks=config.emulate_checks)
        lib = backend("c").build(source.text, config)
        return EmulatedKernel(program, source, lib, config, lowered=low, cuda=cuda,
                              user_schedule=schedule)
    from .gpu_runtime import CudaKernel
    return CudaKernel(program, cuda, config, lowered=low, user_schedule=schedule)
