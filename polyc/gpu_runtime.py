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

    def _launcher(self, module, pvals, device):
        """``launch(function, grid, block, host values)`` for the host loop
        nest: sizes as int64, grids clamped to CUDA's limits."""
        ints = [np.int64(v) for v in pvals]
        drv = _pycuda()

        def launch(k, grid, block, hosts):
            if min(grid) <= 0 or min(block) <= 0:
                return
            grid = tuple(int(min(g, m)) for g, m in zip(grid, MAX_GRID))
            fn = module.get_function(k)
            block = tuple(int(b) for b in block)
            try:
                fn(*ints, *[np.int64(h) for h in hosts], *device, grid=grid, block=block)
            except drv.Error as e:
                raise DeviceError(f"CUDA kernel {self.name} ({k}) failed to launch with grid "
                                  f"{grid} and block {block}: {e}; {_attributes(fn)}") from None
        return launch

    def time(self, *args, repeat: int = 10) -> float:
        """Seconds one run of the kernel's launches takes on the device: the
        median of ``repeat`` runs (after one warm-up), each timed with CUDA
        events around the host loop nest, the arguments copied to the
        device once beforehand (copies excluded; the outputs are not copied
        back).  Raises what a call raises."""
        drv = _pycuda()
        with gpu_arrays.on_device(drv):
            return self._time(drv, args, repeat)

    def _time(self, drv, args, repeat: int) -> float:
        module = self._load()
        pvals, buffers, _, _ = self.binder.bind(args, None)
        device = [drv.to_device(gpu_arrays.host_view(b)) for b in buffers]
        launch = self._launcher(module, pvals, device)
        times = []
        try:
            self._host(launch, *pvals)
            for _ in range(max(1, int(repeat))):
                start, end = drv.Event(), drv.Event()
                start.record()
                self._host(launch, *pvals)
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
        launch = self._launcher(module, pvals, device)
        try:
            self._host(launch, *pvals)
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
        """A call on device arrays, without copies (:mod:`polyc.gpu_arrays`)."""
        module = self._load()
        drv = _pycuda()
        pvals, ptrs, results, keep = gpu_arrays.bind(self.binder, args, out, drv)
        if not self.binder.all_empty(pvals):
            launch = self._launcher(module, pvals, [np.uintp(p) for p in ptrs])
            try:
                self._host(launch, *pvals)
                drv.Context.synchronize()
            except drv.Error as e:
                raise DeviceError(f"CUDA kernel {self.name} failed: {e}") from None
        del keep                         # scratch temporaries, freed after the launches
        if not self.program.outputs:
            return None
        return results[0] if len(results) == 1 else tuple(results)

    def _results(self, results, copies):
        for tmp, dst in copies:
            dst[...] = tmp
        if not self.program.outputs:
            return None
        return results[0] if len(results) == 1 else tuple(results)

    def __repr__(self) -> str:
        sig = ", ".join(self.program.signature)
        return f"<polyc.Kernel cuda {self.name}({sig})>"
