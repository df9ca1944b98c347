"""Device arrays in and out of a ``target="cuda"`` kernel, without copies.

A call of :class:`polyc.gpu_runtime.CudaKernel` whose tensor arguments are
device arrays — any object with ``__cuda_array_interface__`` (version 2 or
3): torch CUDA tensors, CuPy arrays, pycuda ``GPUArray``s, Numba device
arrays, polyc's own :class:`DeviceArray` — runs on them where they are:

* each argument's shape, dtype and data pointer come from its interface
  (`Numba's CUDA Array Interface <https://numba.readthedocs.io/en/stable/
  cuda/cuda_array_interface.html>`_); the shapes, dtypes and sizes are
  checked like host arrays (:meth:`polyc.binder.Binder.bind_shapes`);
* the arrays must be C-contiguous (``strides`` absent or row-major); a
  strided view is refused (call ``.contiguous()``): copying it would hide
  a device-to-device copy per call;
* the outputs are allocated on the device, of the first device argument's
  kind: torch tensors on its device when it is a torch tensor (torch
  allocates them: its caching allocator, its streams), CuPy arrays for
  CuPy, else :class:`DeviceArray` (pycuda memory that any consumer of the
  interface reads, e.g. ``torch.as_tensor(a, device="cuda")``); ``out=``
  takes device arrays too;
* host and device arrays are not mixed in one call: the error names the
  host argument (move it with ``torch.as_tensor(x, device="cuda")`` or
  ``cupy.asarray(x)``, or pass every tensor on the host, which polyc copies);
* a kernel that gathers through an index tensor copies that index tensor
  to the host to check its values (the only copy);
* the call synchronises the device before returning (the launches run on
  the legacy default stream, which torch's default stream waits for).

Errors: :class:`~polyc.errors.BindingError`, :class:`~polyc.errors.DTypeError`,
:class:`~polyc.errors.ShapeError` as for host arrays.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np

from .errors import BindingError, DeviceError, DTypeError, ShapeError

#: (driver module, device 0's primary context): the context torch and CuPy
#: use, retained once per driver
_PRIMARY: tuple = (None, None)


@contextlib.contextmanager
def on_device(drv):
    """Make device 0's primary context current for the block, then pop it
    again, so that no context is left on the stack (pycuda aborts a process
    that exits with one pushed).  Raises :class:`~polyc.errors.DeviceError`
    when CUDA has no device."""
    global _PRIMARY
    if _PRIMARY[0] is not drv:
        try:
            drv.init()
            if drv.Device.count() == 0:
                raise DeviceError("no CUDA device is present; Config(emulate=True) runs "
                                  "target='cuda' kernels on the CPU")
            _PRIMARY = (drv, drv.Device(0).retain_primary_context())
        except drv.Error as e:
            raise DeviceError(f"CUDA could not open device 0: {e}") from None
    _PRIMARY[1].push()
    try:
        yield _PRIMARY[1]
    finally:
        drv.Context.pop()


def host_view(a: np.ndarray) -> np.ndarray:
    """``a`` (C-contiguous) as a type the buffer protocol knows: a dtype
    without a buffer format (ml_dtypes' bfloat16) is viewed as the unsigned
    integer of its size, the bits being what the device reads."""
    a = np.ascontiguousarray(a)
    if a.dtype.kind == "V" or a.dtype.char not in np.typecodes["All"]:
        return a.view(np.dtype(f"u{a.dtype.itemsize}"))
    return a


def interface(obj) -> dict | None:
    """``obj.__cuda_array_interface__``, or ``None`` for anything else (a
    torch CPU tensor's attribute raises: also ``None``)."""
    try:
        return getattr(obj, "__cuda_array_interface__", None)
    except (AttributeError, RuntimeError, TypeError):
        return None


def is_device(obj) -> bool:
    """Whether ``obj`` lives on a GPU: it has ``__cuda_array_interface__``,
    or it is a torch CUDA tensor (torch refuses the interface for some
    dtypes, bfloat16 among them: :class:`DeviceArg` says so)."""
    return interface(obj) is not None or bool(getattr(obj, "is_cuda", False))


class DeviceArray:
    """A C-contiguous array in device memory that polyc allocated (pycuda's
    ``mem_alloc``), exposing ``__cuda_array_interface__``; ``get()`` copies
    it to a numpy array.  The memory is freed with the object."""

    def __init__(self, shape: tuple[int, ...], dtype, drv, zero: bool = False):
        self.shape = tuple(int(x) for x in shape)
        self.dtype = np.dtype(dtype)
        self.nbytes = math.prod(self.shape) * self.dtype.itemsize
        self._drv = drv
        with on_device(drv):
            self.allocation = drv.mem_alloc(max(self.nbytes, 1))
            if zero and self.nbytes:
                drv.memset_d8(self.allocation, 0, self.nbytes)

    @property
    def ptr(self) -> int:
        return int(self.allocation)

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False),
                "strides": None, "version": 3}

    def get(self) -> np.ndarray:
        host = np.empty(self.shape, self.dtype)
        if self.nbytes:
            with on_device(self._drv):
                self._drv.memcpy_dtoh(host_view(host), self.allocation)
        return host

    def __repr__(self) -> str:
        return f"<polyc.DeviceArray {self.dtype} {self.shape} at {self.ptr:#x}>"


class DeviceArg:
    """One device array argument: ``shape``, ``dtype``, ``ptr`` (the data
    pointer) and ``obj`` (the caller's object)."""

    def __init__(self, name: str, obj):
        cai = interface(obj)
        if cai is None:
            raise BindingError(
                f"argument {name}: this {type(obj).__name__} of dtype "
                f"{getattr(obj, 'dtype', '?')} is on the GPU but has no "
                "__cuda_array_interface__ (torch gives none for bfloat16), so polyc cannot "
                "use it in place; convert it (x.to(torch.float16) or x.float()) or pass it "
                "on the host")
        self.name, self.obj = name, obj
        self.shape = tuple(int(x) for x in cai["shape"])
        try:
            self.dtype = np.dtype(cai["typestr"])
        except TypeError:
            raise BindingError(f"argument {name}: device array of element type "
                               f"{cai['typestr']!r}, which numpy does not know") from None
        self.ptr = int(cai["data"][0]) if cai.get("data") else 0
        if cai.get("mask") is not None:
            raise BindingError(f"argument {name}: masked device arrays are not supported")
        strides = cai.get("strides")
        if strides is not None and tuple(strides) != _c_strides(self.shape, self.dtype):
            raise BindingError(
                f"argument {name}: a device array with strides {tuple(strides)} (not "
                f"C-contiguous for shape {self.shape}); pass a contiguous one "
                "(.contiguous() in torch, cupy.ascontiguousarray)")
        self.read_only = bool(cai["data"][1]) if cai.get("data") else False

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    def overlaps(self, other: "DeviceArg") -> bool:
        return (self.nbytes and other.nbytes and self.ptr < other.ptr + other.nbytes
                and other.ptr < self.ptr + self.nbytes)


def _c_strides(shape: tuple[int, ...], dtype: np.dtype) -> tuple[int, ...]:
    out, step = [], dtype.itemsize
    for n in reversed(shape):
        out.append(step)
        step *= max(n, 1)
    return tuple(reversed(out))


def bind(binder, args: tuple, out, drv) -> tuple[list[int], list[int], list, list]:
    """Bind a call whose tensors are device arrays (module docstring):
    returns the parameter values, the data pointers in the kernel's tensor
    order (``binder.program``'s tensors but local ones), the results to
    return, and the scratch arrays to keep alive until the launches end."""
    p = binder.program
    binder._count(args)
    dev: dict[str, DeviceArg] = {}
    meta: list = []
    first = None
    for name, arg in zip(p.signature, args):
        if name not in binder.inputs:
            meta.append(arg)
            continue
        if not is_device(arg):
            raise BindingError(
                f"argument {name} is a host {type(arg).__name__} while other tensors of the "
                "call are device arrays; pass every tensor on the device (torch.as_tensor("
                "x, device='cuda'), cupy.asarray(x)) or every tensor on the host")
        dev[name] = DeviceArg(name, arg)
        first = arg if first is None else first
        meta.append((dev[name].shape, dev[name].dtype))
    pvals, shapes = binder.bind_shapes(tuple(meta))
    if binder.gathers:              # the index tensors' values, checked on the host
        host = {}
        for index, _, _ in binder.gathers:
            d = dev[index]
            host[index] = np.empty(d.shape, d.dtype)
            if d.nbytes:
                drv.memcpy_dtoh(host[index], d.ptr)
        all_shapes = {n: d.shape for n, d in dev.items()}
        all_shapes.update({t.name: sh for t, sh in zip(binder.outputs, shapes)})
        binder._check_gathers(host, pvals, all_shapes)
    for t in p.tensors:
        if t.role == "inout" and dev[t.name].read_only:
            raise BindingError(f"argument {t.name}: the kernel updates it in place, but the "
                               "device array is read-only")
    results, outs = _outputs(binder, shapes, out, first, drv)
    for o in outs:
        for d in dev.values():
            if o.overlaps(d):
                raise BindingError(f"out {o.name} shares device memory with argument "
                                   f"{d.name}; pass distinct arrays")
    ptrs, keep = [], []
    k = j = 0
    for t in (t for t in p.tensors if t.role != "local"):
        if t.role in ("input", "inout"):
            ptrs.append(dev[t.name].ptr)
        elif t.role == "output":
            ptrs.append(outs[k].ptr)
            k += 1
        else:                       # a temporary: scratch on the device
            shape = tuple(max(0, int(fn(*pvals))) for fn in binder.temp_shapes[j])
            scratch = DeviceArray(shape, t.dtype, drv)
            keep.append(scratch)
            ptrs.append(scratch.ptr)
            j += 1
    return pvals, ptrs, results, keep


def _outputs(binder, shapes, out, like, drv) -> tuple[list, list[DeviceArg]]:
    outs = binder.outputs
    if out is None:
        results = [allocate(s, t.dtype, like, drv, zero=t.name in binder.partial)
                   for s, t in zip(shapes, outs)]
    else:
        given = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        if len(given) != len(outs):
            raise BindingError(f"out: expected {len(outs)} array(s) "
                               f"({', '.join(t.name for t in outs)}), got {len(given)}")
        for arr, t in zip(given, outs):
            if not is_device(arr):
                raise BindingError(f"out {t.name}: expected a device array (the arguments "
                                   f"are on the device), got {type(arr).__name__}")
        results = list(given)
    args = [DeviceArg(t.name, r) for r, t in zip(results, outs)]
    for a, shape, t in zip(args, shapes, outs):
        if a.dtype != np.dtype(t.dtype):
            raise DTypeError(f"out {t.name}: expected dtype {t.dtype}, got {a.dtype}")
        if a.shape != tuple(shape):
            raise ShapeError(f"out {t.name}: expected shape {tuple(shape)}, got {a.shape}")
        if a.read_only:
            raise BindingError(f"out {t.name}: the device array is read-only")
    for i, a in enumerate(args):
        for b in args[:i]:
            if a.overlaps(b):
                raise BindingError(f"out {b.name} and out {a.name} share device memory; "
                                   "each output needs its own array")
    return results, args


def allocate(shape, dtype, like, drv, zero: bool):
    """A device array for an output, of ``like``'s kind (torch, CuPy, else
    :class:`DeviceArray`)."""
    mod = type(like).__module__.split(".")[0]
    if mod == "torch":
        import torch
        dt = getattr(torch, np.dtype(dtype).name)
        return (torch.zeros if zero else torch.empty)(tuple(shape), dtype=dt,
                                                       device=like.device)
    if mod == "cupy":
        import cupy
        return (cupy.zeros if zero else cupy.empty)(tuple(shape), dtype=dtype)
    return DeviceArray(shape, dtype, drv, zero=zero)
