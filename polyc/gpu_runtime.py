"""Loading and launching CUDA kernels with pycuda (the CUDA launcher; the
argument binder is the target-free :class:`polyc.binder.Binder`).

:class:`CudaKernel` is what ``polyc.compile(..., target="cuda")`` returns
without ``Config.emulate``.  nvcc builds the cubin when the kernel is
compiled (so a machine with nvcc but no GPU still proves the source
compiles, and ptxas's resources are known); the first call imports pycuda,
retains the device's primary context (shared with torch and CuPy) and loads
the cubin (``module_from_buffer``).  pycuda is the ``cuda`` extra and is
never imported for ``target="c"``.

A call takes numpy arrays like a C kernel: the arguments are checked by the
target-free :class:`polyc.binder.Binder`, copied to the device explicitly,
the host loop nest runs in Python launching each kernel with its grid and
block (from the mapping's isl expressions, clamped to CUDA's grid limits:
the kernels stride over their indices, so any grid is correct), and the
written tensors are copied back.  Device arrays (``__cuda_array_interface__``:
torch CUDA tensors, CuPy, pycuda, Numba) go in and come out without copies
(:mod:`polyc.gpu_arrays`).
"""

from __future__ import annotations

import logging
import sys

import numpy as np

from polyc.backends.base import backend
from polyc.backends.c.emit import arguments
from polyc.backends.cuda.emit import CudaSource, launch_name

from . import gpu_arrays
from . import loopnest as L
from .binder import Binder, _py
from .errors import DeviceError, PolycError, ToolMissingError

log = logging.getLogger(__name__)

#: CUDA's grid limits (x, y, z).
MAX_GRID = (2 ** 31 - 1, 65535, 65535)

#: Call plans kept per kernel (one per distinct shapes and dtypes of torch arguments).
_MAX_PLANS = 64


def host_source(cuda: CudaSource) -> str:
    """Python source of ``host(launch, <params>)``: the host loop nest of
    ``cuda`` calling ``launch(function name, grid, block, host_values)``.  Every
    expression comes from isl (names are parameters and ``c<k>``)."""
    lines = ["def host(launch" + "".join(f", p_{p}" for p in cuda.params) + "):"]

    def go(n: L.Node, depth: int) -> None:
        pad = "    " * depth
        if isinstance(n, L.For):
            it = "p_" + n.iterator
            lines.append(f"{pad}{it} = {_py(n.init)}")
            lines.append(f"{pad}while {_py(n.cond)}:")
            go(n.body, depth + 1)
            lines.append(f"{pad}    {it} += {int(n.step)}")
        elif isinstance(n, L.If):
            lines.append(f"{pad}if {_py(n.cond)}:")
            go(n.then, depth + 1)
            if n.otherwise is not None:
                lines.append(f"{pad}else:")
                go(n.otherwise, depth + 1)
        elif isinstance(n, L.Block):
            for ch in n.children:
                go(ch, depth)
        elif isinstance(n, L.Launch):
            s = cuda.launches[launch_name(n)]
            grid = ", ".join(_py(x) for x in s.grid)
            block = ", ".join(_py(x) for x in s.block)
            hosts = "".join(f"p_{h}, " for h in s.host_iterators)
            lines.append(f"{pad}launch({s.name!r}, ({grid}), ({block}), ({hosts}))")
        else:
            raise AssertionError(f"unexpected host node {type(n).__name__}")
        lines.append(f"{pad}pass")
    go(cuda.host, 1)
    return "\n".join(lines) + "\n"


def has_gpu() -> bool:
    """Whether pycuda is installed and sees a CUDA device (never raises)."""
    try:
        import pycuda.driver as drv
        drv.init()
        return drv.Device.count() > 0
    except Exception:
        return False


def _pycuda():
    drv = sys.modules.get("pycuda.driver")     # imported already: no import machinery per call
    if drv is not None:
        return drv
    try:
        import pycuda.driver as drv
    except ImportError:
        raise ToolMissingError(
            "running target='cuda' kernels needs pycuda (pip install 'polyc[cuda]'; pycuda "
            "ships as source: build it where the CUDA headers are, with CUDA_ROOT set to "
            "the toolkit); without a GPU, Config(emulate=True) runs them on the CPU") from None
    return drv


def _attributes(fn) -> str:
    """What the driver says of a loaded function (for a launch error)."""
    try:
        return (f"the loaded function has {fn.num_regs} registers per thread, "
                f"{fn.shared_size_bytes} B static shared memory, {fn.local_size_bytes} B "
                f"local memory, and takes at most {fn.max_threads_per_block} threads per block")
    except Exception as e:          # noqa: BLE001 -- a diagnostic only
        return f"its attributes could not be read ({e})"


class CudaKernel:
    """A compiled ``target="cuda"`` kernel (see the module docstring).
    Attributes: ``program``, ``cuda_source``, ``cubin`` (bytes),
    ``resources`` (ptxas's report per kernel), ``kernels`` (the mapping),
    ``loopnest``."""

    def __init__(self, program, cuda: CudaSource, config, *, lowered, user_schedule=None):
        self.program = program
        self._user_schedule = user_schedule
        self.cuda = cuda
        self.config = config
        self._lowered = lowered
        # the kernels' arguments are the lowered program's tensors: a float32
        # accumulator that a tensor-core call took over is neither passed nor
        # allocated (passing it made every WMMA launch fail on a device with
        # CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: "too many arguments")
        used = set(cuda.tensors)
        self.binder = Binder(program.replace(tensors=tuple(
            t for t in program.tensors if t.role != "temp" or t.name in used)))
        bound = [t.name for t in arguments(self.binder.program)]
        if bound != list(cuda.tensors):
            raise PolycError(f"internal error: the CUDA kernels of {program.name} take tensors "
                             f"{list(cuda.tensors)}, the binder passes {bound}")
        threads = {name: s.threads for name, s in cuda.launches.items()}
        self._built = backend("cuda").build(cuda.text, config, threads=threads)
        namespace: dict = {"min": min, "max": max}
        exec(compile(host_source(cuda), "<polyc host>", "exec"), namespace)  # noqa: S102
        self._host = namespace["host"]
        self._module = None
        self._functions: dict = {}          # name -> prepared pycuda Function
        self._plans: dict = {}              # torch_key -> gpu_arrays.DeviceCallPlan

    @property
    def name(self) -> str:
        return self.program.name

    @property
    def cuda_source(self) -> str:
        return self.cuda.text

    source = cuda_source

    @property
    def cubin(self) -> bytes:
        return self._built.cubin

    @property
    def resources(self) -> dict:
        return dict(self._built.resources)

    @property
    def kernels(self) -> tuple:
        return self._lowered.kernels

    @property
    def loopnest(self):
        return self._lowered.loopnest

    @property
    def schedule(self):
        """The user's :class:`polyc.Schedule` (``schedule=``), or the
        automatic one before mapping."""
        if self._user_schedule is not None:
            return self._user_schedule
        return self._lowered.as_schedule()

    def explain(self, json: bool = False):
        from polyc.schedule.explain import explain

        from .lowered import with_mapping
        out = explain(self.schedule, as_json=json,
                      config=self.config if self._user_schedule is None else None)
        res = {k: str(v) for k, v in self._built.resources.items()}
        return with_mapping(out, self._lowered, emulated=False, resources=res)

    def _load(self):
        """The loaded module (call with the primary context current:
        :func:`polyc.gpu_arrays.on_device`)."""
        if self._module is not None:
            return self._module
        drv = _pycuda()
        try:
            self._module = drv.module_from_buffer(self._built.cubin)
        except drv.Error as e:
            raise DeviceError(f"CUDA could not load kernel {self.name}: {e}") from None
        return self._module

    def _function(self, module, name: str):
        """Kernel ``name`` of the loaded module, prepared (pycuda's
        ``Function.prepare``) for its parameters: int64 sizes and host loop
        values, then one pointer per tensor; looked up once."""
        fn = self._functions.get(name)
        if fn is None:
            s = self.cuda.launches[name]
            fmt = ("q" * (len(self.cuda.params) + len(s.host_iterators))
                   + "P" * len(self.cuda.tensors))
            fn = self._functions[name] = module.get_function(name).prepare(fmt)
        return fn

    def _launches(self, module, pvals) -> list[tuple]:
        """The launches of the host loop nest at ``pvals``, in order: (name,
        prepared function, grid clamped to CUDA's limits, block, int64
        arguments); empty grids and blocks are left out."""
        out: list[tuple] = []
        ints = tuple(int(v) for v in pvals)

        def record(k, grid, block, hosts):
            if min(grid) <= 0 or min(block) <= 0:
                return
            grid = tuple(int(min(g, m)) for g, m in zip(grid, MAX_GRID))
            out.append((k, self._function(module, k), grid, tuple(int(b) for b in block),
                        ints + tuple(int(h) for h in hosts)))
        self._host(record, *pvals)
        return out

    def _run(self, drv, launches: list[tuple], ptrs: list[int]) -> None:
        """Queue ``launches`` on the legacy default stream with the tensors
        at ``ptrs`` (the kernels' tensor order)."""
        for k, fn, grid, block, head in launches:
            try:
                fn.prepared_call(grid, block, *head, *ptrs)
            except drv.Error as e:
                raise DeviceError(f"CUDA kernel {self.name} ({k}) failed to launch with grid "
                                  f"{grid} and block {block}: {e}; {_attributes(fn)}") from None

    def time(self, *args, repeat: int = 10) -> float:
        """Seconds one run of the kernel's launches takes on the device: the
        median of ``repeat`` runs (after one warm-up), each timed with CUDA
        events around the launches of the host loop nest, the arguments
        copied to the device once beforehand (copies excluded; the outputs
        are not copied back).  Raises what a call raises."""
        drv = _pycuda()
        with gpu_arrays.on_device(drv):
            return self._time(drv, args, repeat)

    def _time(self, drv, args, repeat: int) -> float:
        module = self._load()
        pvals, buffers, _, _ = self.binder.bind(args, None)
        device = [drv.to_device(gpu_arrays.host_view(b)) for b in buffers]
        launches = self._launches(module, pvals)
        ptrs = [int(d) for d in device]
        times = []
        try:
            self._run(drv, launches, ptrs)
            for _ in range(max(1, int(repeat))):
                start, end = drv.Event(), drv.Event()
                start.record()
                self._run(drv, launches, ptrs)
                end.record()
                end.synchronize()
                times.append(end.time_since(start) / 1e3)
        except drv.Error as e:
            raise DeviceError(f"CUDA kernel {self.name} failed: {e}") from None
        finally:
            for dev in device:
                dev.free()
        return float(np.median(times))

    def __call__(self, *args, out=None):
        if out is None and self._plans:
            plan = self._plans.get(gpu_arrays.torch_key(args))
            if plan is not None:
                drv = _pycuda()
                with gpu_arrays.on_device(drv):
                    return self._replay(drv, plan, args)
        if any(gpu_arrays.is_device(a) for a in args) or (
                out is not None and all(gpu_arrays.is_device(o) for o in (
                    out if isinstance(out, (tuple, list)) else (out,)))):
            with gpu_arrays.on_device(_pycuda()):
                return self._call_on_device(args, out)
        pvals, buffers, results, copies = self.binder.bind(args, out)
        if self.binder.all_empty(pvals):
            return self._results(results, copies)
        drv = _pycuda()
        with gpu_arrays.on_device(drv):
            self._run_on_copies(drv, pvals, buffers)
        return self._results(results, copies)

    def _run_on_copies(self, drv, pvals, buffers) -> None:
        """Copy ``buffers`` in, run the host loop nest, copy the written
        tensors back into ``buffers``."""
        module = self._load()
        inputs = {t.name for t in self.program.tensors if t.role == "input"}
        names = list(self.cuda.tensors)
        device = [drv.to_device(gpu_arrays.host_view(b)) for b in buffers]
        try:
            self._run(drv, self._launches(module, pvals), [int(d) for d in device])
            drv.Context.synchronize()
            for name, buf, dev in zip(names, buffers, device):
                if name not in inputs:
                    drv.memcpy_dtoh(gpu_arrays.host_view(buf), dev)
        except drv.Error as e:
            raise DeviceError(f"CUDA kernel {self.name} failed: {e}") from None
        finally:
            for dev in device:
                dev.free()

    def _call_on_device(self, args, out):
        """A call on device arrays, without copies (:mod:`polyc.gpu_arrays`).
        A call on torch tensors alone (no ``out=``, no index tensor to
        check) leaves a plan for calls with the same shapes and dtypes:
        :meth:`_replay`."""
        module = self._load()
        drv = _pycuda()
        pvals, ptrs, results, keep = gpu_arrays.bind(self.binder, args, out, drv)
        launches = [] if self.binder.all_empty(pvals) else self._launches(module, pvals)
        side = gpu_arrays.side_stream(args)
        if side is not None:
            side.synchronize()
        self._run(drv, launches, ptrs)
        key = None if out is not None or self.binder.gathers else gpu_arrays.torch_key(args)
        if key is not None and len(self._plans) < _MAX_PLANS:
            self._plans[key] = gpu_arrays.DeviceCallPlan.of(self.binder, args, results, keep,
                                                            launches)
        self._finish(drv, keep, side)
        if not self.program.outputs:
            return None
        return results[0] if len(results) == 1 else tuple(results)

    def _replay(self, drv, plan, args):
        """A call on torch tensors of the shapes and dtypes of an earlier
        call: that call's launches, on new outputs and scratch."""
        results, scratch, ptrs = plan.bind(args)
        side = gpu_arrays.side_stream(args)
        if side is not None:
            side.synchronize()
        self._run(drv, plan.launches, ptrs)
        self._finish(drv, scratch, side)
        if not self.program.outputs:
            return None
        return results[0] if len(results) == 1 else tuple(results)

    def _finish(self, drv, scratch, side) -> None:
        """Return from a call on device arrays: at once, the launches queued
        on the legacy default stream (torch's and CuPy's default streams
        order after them), unless ``Config.gpu_sync`` is set, a scratch
        array is polyc's own memory (freed here), or torch's current stream
        is another stream, ``side`` (which the default stream does not order)."""
        if (self.config.gpu_sync or side is not None
                or any(isinstance(a, gpu_arrays.DeviceArray) for a in scratch)):
            try:
                drv.Context.synchronize()
            except drv.Error as e:
                raise DeviceError(f"CUDA kernel {self.name} failed: {e}") from None

    def _results(self, results, copies):
        for tmp, dst in copies:
            dst[...] = tmp
        if not self.program.outputs:
            return None
        return results[0] if len(results) == 1 else tuple(results)

    def __repr__(self) -> str:
        sig = ", ".join(self.program.signature)
        return f"<polyc.Kernel cuda {self.name}({sig})>"
