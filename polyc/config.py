"""Configuration: one frozen dataclass, the only reader of environment variables.

Each field's metadata says whether it changes generated code (``codegen``);
those fields enter the cache key through :meth:`Config.codegen_key`.  A field
that changes the schedule of a kernel changes its code, so it is ``codegen``
too (``time_tiling``, ``fusion``, ...).  The fusion planner's options
(``plan``, ``peak_gflops``, ``peak_gbs``) change which groups
:func:`polyc.jit` compiles, never the code of one kernel: they are not
``codegen`` (a ``Jitted`` keeps its configuration with its plans, see
:mod:`polyc.graph.jit`).  tests/unit/test_config_keys.py classifies every field.
"""

from __future__ import annotations

import difflib
import inspect
import math
import os
import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from .errors import BindingError, PolycError

#: A sanitizer name as ``-fsanitize=`` takes it (``address``, ``undefined``,
#: ``signed-integer-overflow``, ...): letters, digits and dashes only.
_SANITIZER_NAME = re.compile(r"^[a-z][a-z0-9-]*$")

#: The fusion strategies of the automatic scheduler (``Config.fusion``);
#: :func:`polyc.schedule.initial.auto_schedule` documents each.
FUSION_STRATEGIES = ("isl", "max", "min", "smart", "preserve_coincident")


#: Code generation targets (``Config.target``).
TARGETS = ("c", "cuda")
_CUDA_ARCH = re.compile(r"^sm_([0-9]{2,3})[a-z]?$")


def cuda_arch_number(arch: str) -> int:
    """The compute capability of a ``Config.cuda_arch`` as a number:
    ``"sm_90"`` and ``"sm_90a"`` (Hopper's architecture-specific features)
    are 90; ``"sm_120f"`` is 120.  ``arch`` must match ``sm_NN[x]``."""
    return int(_CUDA_ARCH.match(arch).group(1))

#: ``POLYC_CUDA_EMULATE`` values that turn the emulator on (``0`` or unset: off):
#: plain, instrumented (``emulate_checks``), threads in reverse (``emulate_reverse``).
CUDA_EMULATE_MODES = ("1", "checks", "reverse")

#: How generated parallel loops hand out iterations (``Config.omp_schedule``).
OMP_SCHEDULES = ("auto", "dynamic", "static")

#: What idle OpenMP threads do (``Config.wait_policy``); see polyc/threads.py.
WAIT_POLICIES = ("short", "passive", "active")


def _env(name: str) -> str | None:
    v = os.environ.get(name)
    return v if v not in (None, "") else None


def _opt(help: str, codegen: bool):
    return {"help": help, "codegen": codegen}


@dataclass(frozen=True)
class Config:
    """Options of one compilation.  Build with :meth:`Config.from_env` to pick
    up ``POLYC_*`` variables, then override with :meth:`replace`."""

    tile_sizes: tuple[int, ...] | None = field(default=None, metadata=_opt(
        "tile sizes of permutable bands, outermost first (the last repeats); "
        "None derives them from the cache sizes", True))
    tiling: bool = field(default=True, metadata=_opt(
        "tile permutable bands of two or more members", True))
    parallel: bool = field(default=True, metadata=_opt(
        "mark the outermost coincident loop '#pragma omp parallel for'", True))
    simd: bool = field(default=True, metadata=_opt(
        "mark coincident stride-1 innermost loops '#pragma omp simd'", True))
    schedule: str = field(default="isl", metadata=_opt(
        "'isl' (isl's scheduler) or 'identity' (the source order, untransformed)", True))
    cc: str = field(default="cc", metadata=_opt(
        "C compiler (CC / POLYC_CC)", True))
    cflags: tuple[str, ...] = field(default=(
        "-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-std=c99"),
        metadata=_opt("flags of the C compiler", True))
    cache_dir: str = field(default="", metadata=_opt(
        "disk cache directory (POLYC_CACHE_DIR); empty = the user cache dir", False))
    disk_cache: bool = field(default=True, metadata=_opt(
        "keep built kernels on disk (POLYC_NO_DISK_CACHE=1 turns it off)", False))
    num_threads: int | None = field(default=None, metadata=_opt(
        "OpenMP threads per call (POLYC_NUM_THREADS, else OMP_NUM_THREADS, else all cores)", False))
    dump: bool = field(default=False, metadata=_opt(
        "print every pipeline stage to stderr (POLYC_DUMP=1)", False))
    sanitize: tuple[str, ...] = field(default=(), metadata=_opt(
        "sanitizers to build generated C with (POLYC_SANITIZE=address,undefined): "
        "adds -fsanitize=..., -fno-sanitize-recover=all, -fno-omit-frame-pointer, -g; "
        "'address' needs its runtime preloaded (see README, 'Sanitized execution')", True))
    compile_timeout: float | None = field(default=None, metadata=_opt(
        "seconds the C compiler may run before it is killed and CompileTimeoutError "
        "is raised (POLYC_COMPILE_TIMEOUT); None = no limit", False))
    fusion: str = field(default="isl", metadata=_opt(
        "fusion strategy of the automatic scheduler (POLYC_FUSION): 'isl' (the default: "
        "isl's own clustering, which fuses strongly connected components when the "
        "merged band keeps its full depth and shortens a dependence distance; a chain "
        "of row-wise statements that no dependence or reuse crosses, such as a softmax "
        "or a normalisation, is instead fused along its parallel row loops and runs one "
        "row at a time: polyc.schedule.rowfuse), 'max' (fuse wherever legal: each "
        "connected component scheduled as a whole, then sibling nests and independent "
        "components fused as deep as their loops go), 'min' (no fusion: each strongly "
        "connected component of the dependence graph its own loop nest), 'smart' "
        "(Pluto's default smartfuse: cut between consecutive components of different "
        "loop depth, fuse within), 'preserve_coincident' (Tensor Comprehensions' "
        "Preserve3Coincident: fuse only while at least three outer parallel loops, or "
        "as many as the fused statements had, survive); see "
        "polyc.schedule.initial.auto_schedule", True))
    allow_skewing: bool = field(default=True, metadata=_opt(
        "let the automatic scheduler produce skewed loops (t+i); False keeps every "
        "loop a single source iterator (Tensor Comprehensions' allowSkewing=false), "
        "at the cost of wavefront parallelism and tiling of stencils", True))
    outer_coincidence: bool = field(default=True, metadata=_opt(
        "ask isl's scheduler for an outermost parallel (coincident) loop in every band "
        "where one exists (isl's schedule_outer_coincidence)", True))
    time_tiling: bool = field(default=False, metadata=_opt(
        "when the outermost loop of a nest is sequential (a time loop), prefer isl's "
        "permutable skewed band (no outer coincidence) so that it tiles, and run the "
        "tiles as a wavefront (parallel along the second tile loop); off by default: "
        "its skewed point loops are not vectorised, and on PolyBench's stencils it "
        "measured 2-5x slower than the parallel spatial loops it replaces", True))

    tensorize: bool = field(default=True, metadata=_opt(
        "call hand-written intrinsics for statements whose access relations match "
        "one (polyc.intrinsics: a += product contraction becomes batched calls to "
        "the packed, register-blocked GEMM of backends/c/intrinsics/gemm.h); "
        "POLYC_TENSORIZE=0 turns it off", True))
    row_block: int = field(default=0, metadata=_opt(
        "rows per block of a row-blocked chain through GEMM calls, such as attention "
        "(POLYC_ROW_BLOCK): the chain runs one block of rows at a time, each GEMM "
        "call computing that block's rows (polyc.schedule.rowfuse.row_blocked); 0 "
        "(the default) picks 64 rounded up to a multiple of the GEMM micro-kernel's "
        "rows (70 with AVX-512, 66 with AVX2), 1 turns row blocking off", True))
    triangle_rows: int = field(default=0, metadata=_opt(
        "rows of C per GEMM call over a triangular domain (POLYC_TRIANGLE_ROWS): "
        "each call computes the full part of a block of that many rows and the "
        "diagonal edge keeps its loops (polyc.callbox); 0 (the default): a domain "
        "that is a band of its box (a triangle of C, or of an operand in the "
        "reduction) is one call over the band (polyc_gemmt), any other triangle "
        "takes blocks of the smallest multiple of the micro-kernel's rows of at "
        "least 24 (28 with AVX-512, 24 with AVX2); 1 keeps triangular domains on "
        "loops", True))
    contract: bool = field(default=True, metadata=_opt(
        "array contraction: a temporary whose every dependence stays inside one "
        "iteration of a loop becomes a buffer declared in that loop's body (a scalar "
        "for one element) instead of an allocated array (polyc.schedule.contraction); "
        "POLYC_CONTRACT=0 turns it off", True))

    target: str = field(default="c", metadata=_opt(
        "what the kernel is generated for (polyc.compile(target=...), the CLI's "
        "--target): 'c' (C with OpenMP, built with Config.cc) or 'cuda' (CUDA "
        "kernels mapped from the schedule tree, polyc.schedule.gpu_mapping; built "
        "with nvcc, launched with pycuda, or emulated on the CPU: Config.emulate)", True))
    emulate: bool = field(default=False, metadata=_opt(
        "with target='cuda': run the mapped kernels on the CPU (POLYC_CUDA_EMULATE=1): "
        "the same loop nest printed as C, each launch a loop over its blocks and "
        "threads (backends/cuda/emulate.py), so a mapping is checked without a GPU", True))
    emulate_reverse: bool = field(default=False, metadata=_opt(
        "with emulate: run the threads of each emulated block in reverse order (a "
        "mapping that depends on the order of threads gives other results; "
        "POLYC_CUDA_EMULATE=reverse)", True))
    emulate_checks: bool = field(default=False, metadata=_opt(
        "with emulate: instrumented emulation (POLYC_CUDA_EMULATE=checks): every access of "
        "a global tensor checked in bounds, and a shadow of each tensor a launch writes "
        "flags two threads of the launch touching one element when one writes it (a race); "
        "the first violation raises IllegalScheduleError", True))
    gpu_block: tuple[int, ...] = field(default=(), metadata=_opt(
        "threads per block per mapped loop, innermost last (POLYC_GPU_BLOCK=8,32; "
        "outer loops it does not cover get one thread); empty: 256 threads, 32 along "
        "the innermost loop (polyc.schedule.gpu_mapping.DEFAULT_BLOCK)", True))
    gpu_promote: bool = field(default=True, metadata=_opt(
        "with target='cuda': tile a kernel's sequential loops (the k of a matmul) and "
        "copy the box of each input one k-tile iteration reads into shared memory "
        "(polyc.schedule.gpu_promotion; POLYC_GPU_PROMOTE=0 turns it off)", True))
    gpu_rows: bool = field(default=True, metadata=_opt(
        "with target='cuda': run a streaming program whose statements share independent "
        "row loops (softmax, layer norm: polyc.schedule.rowfuse) as one kernel, a block per "
        "row, its statements as phases on the block's threads with barriers where "
        "dependences cross threads and reductions by the whole block "
        "(polyc.schedule.gpu_rows; POLYC_GPU_ROWS=0 turns it off)", True))
    gpu_tensor_cores: bool = field(default=True, metadata=_opt(
        "with target='cuda': run contractions of float16/bfloat16 operands into a float32 "
        "accumulator on tensor cores (WMMA m16n16k16, backends/cuda/wmma.py; bfloat16 needs "
        "sm_80 or newer); POLYC_GPU_TENSOR_CORES=0 maps them like any other loop nest", True))
    gpu_simt_gemm: bool = field(default=True, metadata=_opt(
        "with target='cuda': run float32 contractions on the register-tiled SIMT GEMM "
        "(8 x 8 elements of C per thread, backends/cuda/wmma.py); POLYC_GPU_SIMT_GEMM=0 maps "
        "them like any other loop nest (a thread per element of C)", True))
    gpu_sync: bool = field(default=False, metadata=_opt(
        "with target='cuda': a call on device arrays waits for its launches before it "
        "returns, so that a kernel failing on the device raises in its own call "
        "(POLYC_CUDA_SYNC=1); by default it returns once they are queued on the legacy "
        "default stream, as torch's operators do (polyc.gpu_arrays)", False))
    cuda_arch: str = field(default="sm_90", metadata=_opt(
        "the GPU architecture nvcc compiles for (POLYC_CUDA_ARCH; sm_75 and newer)", True))

    use_tuned: bool = field(default=True, metadata=_opt(
        "compile with the best schedule recipe the tuning database holds for the program "
        "on this machine and toolchain (polyc.tune; POLYC_USE_TUNED=0 turns it off)", False))
    omp_schedule: str = field(default="auto", metadata=_opt(
        "how the iterations of a generated parallel loop are handed to the threads "
        "(POLYC_OMP_SCHEDULE): 'auto' (the default: dynamic chunks of about trip / (4 * "
        "threads) iterations, taken as threads become free, for a loop that runs once per "
        "call or whose iterations do uneven work (triangular, skewed), so a core slowed by "
        "another process or the long rows of a triangle do not stall the team; static "
        "blocks inside a sequential loop over even work, where each thread keeps its rows "
        "in its own caches from one outer iteration to the next), 'dynamic' or 'static' "
        "everywhere.  The GEMM intrinsic always distributes its blocks dynamically", True))
    wait_policy: str = field(default="short", metadata=_opt(
        "what OpenMP threads do between kernel calls (POLYC_WAIT_POLICY), applied before "
        "the first kernel loads unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set: 'short' "
        "(the default: spin about 1,000 times, microseconds, then sleep: calls in a "
        "loop stay cheap and no core is left spinning next to numpy's BLAS), "
        "'passive' (sleep at once: a few microseconds more per parallel region), "
        "'active' (spin long: libgomp's default of about 300,000 times)", False))

    plan: str = field(default="model", metadata=_opt(
        "how polyc.jit's fusion planner decides (POLYC_PLAN): 'model' (polyhedral "
        "feedback and the roofline) or 'measure' (also time the merged group against "
        "its parts and keep the faster, recording both times)", False))
    peak_gflops: float = field(default=150.0, metadata=_opt(
        "FMA peak (GFLOP/s, all cores) of the planner's roofline (POLYC_PEAK_GFLOPS; "
        "python -m benchmarks.peak measures it)", False))
    peak_gbs: float = field(default=20.0, metadata=_opt(
        "memory bandwidth (GB/s) of the planner's roofline (POLYC_PEAK_GBS: the STREAM "
        "triad of python -m benchmarks.peak)", False))

    def __post_init__(self):
        if self.omp_schedule not in OMP_SCHEDULES:
            raise PolycError(f"Config.omp_schedule must be one of {', '.join(OMP_SCHEDULES)}, "
                             f"got {self.omp_schedule!r} (e.g. POLYC_OMP_SCHEDULE=static)")
        if self.wait_policy not in WAIT_POLICIES:
            raise PolycError(f"Config.wait_policy must be one of {', '.join(WAIT_POLICIES)}, "
                             f"got {self.wait_policy!r} (e.g. POLYC_WAIT_POLICY=passive)")
        nt = self.num_threads
        if nt is not None and (isinstance(nt, bool) or not isinstance(nt, int) or nt < 1):
            raise PolycError(f"Config.num_threads must be a positive number of threads or "
                             f"None (all cores), got {nt!r} (e.g. POLYC_NUM_THREADS=2)")
        if self.target not in TARGETS:
            raise PolycError(f"Config.target must be one of {', '.join(TARGETS)}, got "
                             f"{self.target!r} (e.g. polyc compile --target cuda)")
        if not _CUDA_ARCH.match(str(self.cuda_arch)) or cuda_arch_number(self.cuda_arch) < 75:
            raise PolycError(f"Config.cuda_arch must name an architecture sm_75 or newer "
                             f"(sm_80, sm_90, ...), got {self.cuda_arch!r} "
                             f"(e.g. POLYC_CUDA_ARCH=sm_80)")
        gb = self.gpu_block
        if isinstance(gb, int) and not isinstance(gb, bool):
            gb = (gb,)
        if (not isinstance(gb, (tuple, list)) or len(gb) > 3
                or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in gb)):
            raise PolycError(f"Config.gpu_block must be up to 3 positive thread counts, "
                             f"innermost last, got {gb!r} (e.g. POLYC_GPU_BLOCK=8,32)")
        object.__setattr__(self, "gpu_block", tuple(gb))
        rb = self.row_block
        if isinstance(rb, bool) or not isinstance(rb, int) or rb < 0:
            raise PolycError(f"Config.row_block must be a number of rows >= 0 (0: automatic, "
                             f"1: off), got {rb!r} (e.g. POLYC_ROW_BLOCK=64)")
        tr = self.triangle_rows
        if isinstance(tr, bool) or not isinstance(tr, int) or tr < 0:
            raise PolycError(f"Config.triangle_rows must be a number of rows >= 0 (0: "
                             f"automatic, 1: off), got {tr!r} (e.g. POLYC_TRIANGLE_ROWS=56)")
        if self.plan not in ("model", "measure"):
            raise PolycError(f"Config.plan must be 'model' or 'measure', got {self.plan!r} "
                             f"(e.g. POLYC_PLAN=measure)")
        for name in ("peak_gflops", "peak_gbs"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise PolycError(f"Config.{name} must be a positive number, got {v!r}")
        if self.schedule not in ("isl", "identity"):      # a typo ran isl's scheduler
            raise PolycError(f"Config.schedule must be 'isl' or 'identity', got "
                             f"{self.schedule!r}")
        if self.fusion not in FUSION_STRATEGIES:
            raise PolycError(f"Config.fusion must be one of {', '.join(FUSION_STRATEGIES)}, "
                             f"got {self.fusion!r} (e.g. POLYC_FUSION=smart or "
                             f"polyc compile --fusion smart)")
        for name in ("allow_skewing", "outer_coincidence", "time_tiling", "tensorize",
                     "emulate", "emulate_reverse", "emulate_checks", "gpu_promote",
                     "gpu_rows", "gpu_tensor_cores", "gpu_simt_gemm", "gpu_sync"):
            if not isinstance(getattr(self, name), bool):
                raise PolycError(f"Config.{name} must be True or False, got "
                                 f"{getattr(self, name)!r}")
        san = self.sanitize
        if isinstance(san, str):
            san = san.split(",")
        names = tuple(dict.fromkeys(n.strip() for n in san if n and n.strip()))
        bad = [n for n in names if not _SANITIZER_NAME.match(n)]
        if bad:
            raise PolycError(f"Config.sanitize: {bad[0]!r} is not a sanitizer name; "
                             f"use names as -fsanitize= takes them, e.g. "
                             f"POLYC_SANITIZE=address,undefined")
        object.__setattr__(self, "sanitize", names)
        t = self.compile_timeout
        if t is not None:
            if (isinstance(t, bool) or not isinstance(t, (int, float))
                    or not math.isfinite(t) or t <= 0):
                raise PolycError(f"Config.compile_timeout must be a positive number of "
                                 f"seconds or None (no limit), got {t!r}; "
                                 f"e.g. POLYC_COMPILE_TIMEOUT=300")
            object.__setattr__(self, "compile_timeout", float(t))

    @classmethod
    def from_env(cls, **overrides) -> "Config":
        kw: dict = {}
        cc = _env("POLYC_CC") or _env("CC")
        if cc:
            kw["cc"] = cc
        if _env("POLYC_CACHE_DIR"):
            kw["cache_dir"] = _env("POLYC_CACHE_DIR")
        if _env("POLYC_NO_DISK_CACHE") == "1":
            kw["disk_cache"] = False
        nt = _env("POLYC_NUM_THREADS")
        if nt is not None:
            if not (nt.strip().isdigit() and int(nt) > 0):
                raise PolycError(f"POLYC_NUM_THREADS={nt!r} is not a positive number of "
                                 f"threads; set it to e.g. 2, or unset it to use every core")
            kw["num_threads"] = int(nt)
        else:
            # OpenMP's own list syntax ("4,2": nested levels): the first level is ours;
            # anything else is the OpenMP runtime's business, not an error of polyc's
            first = (_env("OMP_NUM_THREADS") or "").split(",")[0].strip()
            if first.isdigit() and int(first) > 0:
                kw["num_threads"] = int(first)
        for var, name, allowed in (("POLYC_OMP_SCHEDULE", "omp_schedule", OMP_SCHEDULES),
                                   ("POLYC_WAIT_POLICY", "wait_policy", WAIT_POLICIES)):
            value = _env(var)
            if value is not None:
                if value.lower() not in allowed:
                    raise PolycError(f"{var}={value!r} is not one of {', '.join(allowed)}; "
                                     f"set one of those, or unset it")
                kw[name] = value.lower()
        if _env("POLYC_USE_TUNED") == "0":
            kw["use_tuned"] = False
        if _env("POLYC_TENSORIZE") == "0":
            kw["tensorize"] = False
        for var, name in (("POLYC_ROW_BLOCK", "row_block"),
                          ("POLYC_TRIANGLE_ROWS", "triangle_rows")):
            rows = _env(var)
            if rows:
                if not rows.strip().isdigit():
                    raise PolycError(f"{var}={rows!r} is not a number of rows; set a "
                                     f"number >= 0 (0: automatic, 1: off), or unset it")
                kw[name] = int(rows)
        emu = _env("POLYC_CUDA_EMULATE")
        if emu is not None and emu.strip().lower() not in ("", "0"):
            emu = emu.strip().lower()
            if emu not in CUDA_EMULATE_MODES:
                raise PolycError(f"POLYC_CUDA_EMULATE={emu!r} is not one of 0, "
                                 f"{', '.join(CUDA_EMULATE_MODES)}; set one of those "
                                 f"(1: emulate the CUDA kernels on the CPU), or unset it")
            kw["emulate"] = True
            kw["emulate_checks"] = emu == "checks"
            kw["emulate_reverse"] = emu == "reverse"
        if _env("POLYC_GPU_PROMOTE") == "0":
            kw["gpu_promote"] = False
        if _env("POLYC_GPU_ROWS") == "0":
            kw["gpu_rows"] = False
        if _env("POLYC_GPU_TENSOR_CORES") == "0":
            kw["gpu_tensor_cores"] = False
        if _env("POLYC_GPU_SIMT_GEMM") == "0":
            kw["gpu_simt_gemm"] = False
        if _env("POLYC_CUDA_SYNC") == "1":
            kw["gpu_sync"] = True
        if _env("POLYC_CUDA_ARCH"):
            kw["cuda_arch"] = _env("POLYC_CUDA_ARCH")
        gb = _env("POLYC_GPU_BLOCK")
        if gb:
            parts = [x.strip() for x in gb.split(",")]
            if not all(x.isdigit() for x in parts):
                raise PolycError(f"POLYC_GPU_BLOCK={gb!r} is not a list of thread counts; "
                                 f"set e.g. 8,32 or unset it")
            kw["gpu_block"] = tuple(int(x) for x in parts)
        if _env("POLYC_CONTRACT") == "0":
            kw["contract"] = False
        if _env("POLYC_DUMP") == "1":
            kw["dump"] = True
        if _env("POLYC_SANITIZE"):
            kw["sanitize"] = tuple(_env("POLYC_SANITIZE").split(","))
        timeout = _env("POLYC_COMPILE_TIMEOUT")
        if timeout:
            try:
                kw["compile_timeout"] = float(timeout)
            except ValueError:
                raise PolycError(f"POLYC_COMPILE_TIMEOUT={timeout!r} is not a number of "
                                 f"seconds; set it to e.g. 300, or unset it for no "
                                 f"limit") from None
        if _env("POLYC_PLAN"):
            kw["plan"] = _env("POLYC_PLAN")
        for var, name in (("POLYC_PEAK_GFLOPS", "peak_gflops"), ("POLYC_PEAK_GBS", "peak_gbs")):
            if _env(var):
                try:
                    kw[name] = float(_env(var))
                except ValueError:
                    raise PolycError(f"{var}={_env(var)!r} is not a number") from None
        fusion = _env("POLYC_FUSION")
        if fusion:
            if fusion not in FUSION_STRATEGIES:
                raise PolycError(f"POLYC_FUSION={fusion!r} is not a fusion strategy; choose "
                                 f"one of {', '.join(FUSION_STRATEGIES)}, or unset it")
            kw["fusion"] = fusion
        kw.update(overrides)
        return cls(**kw)

    def replace(self, **kw) -> "Config":
        return replace(self, **kw)

    def codegen_key(self) -> tuple:
        """The values of every field that changes generated code."""
        return tuple((f.name, getattr(self, f.name)) for f in fields(self)
                     if f.metadata.get("codegen"))

    def resolved_cache_dir(self) -> Path:
        if self.cache_dir:
            return Path(self.cache_dir)
        from platformdirs import user_cache_dir
        return Path(user_cache_dir("polyc"))


#: Names a user may reach for, and the field that holds that option.
_ALIASES = {"threads": "num_threads", "nthreads": "num_threads", "n_threads": "num_threads",
            "compiler": "cc", "flags": "cflags", "cache": "cache_dir", "tile": "tile_sizes",
            "tiles": "tile_sizes", "vectorize": "simd", "openmp": "parallel"}
_dataclass_init = Config.__init__


def _checked_init(self, *args, **kw) -> None:
    """``Config(...)``: an unknown option is a :class:`~polyc.errors.BindingError`
    (also a ``TypeError``) naming the option it probably meant."""
    names = [f.name for f in fields(Config)]
    unknown = [k for k in kw if k not in names]
    if unknown:
        hints = []
        for k in unknown:
            guess = _ALIASES.get(k) or next(iter(difflib.get_close_matches(k, names, 1)), None)
            hints.append(f"{k!r}" + (f" (did you mean {guess}?)" if guess else ""))
        raise BindingError(f"polyc.Config has no option {', '.join(hints)}; its options are "
                           f"{', '.join(names)}")
    _dataclass_init(self, *args, **kw)


_checked_init.__doc__ = _dataclass_init.__doc__
_checked_init.__signature__ = inspect.signature(_dataclass_init)
Config.__init__ = _checked_init


def config_or_env(config, who: str) -> Config:
    """``config`` itself, or :meth:`Config.from_env` for ``None``, for the
    public entry point ``who`` (``polyc.compile``...); raises
    :class:`~polyc.errors.PolycError` for anything else (a string or a dict
    failed later with an AttributeError)."""
    if config is None:
        return Config.from_env()
    if not isinstance(config, Config):
        raise PolycError(f"{who}: config must be a polyc.Config (e.g. "
                         f"polyc.Config.from_env(fusion='max')), got {type(config).__name__} "
                         f"{config!r}")
    return config
