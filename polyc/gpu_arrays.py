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
* the launches run on the legacy default stream, which torch's and CuPy's
  default streams order with, and the call returns once they are queued,
  as torch's own operators do (``Config.gpu_sync`` waits for them, so that
  a failing kernel raises in its own call); when torch's current stream is
  another stream, which the legacy stream does not order, the call waits
  for that stream before launching and for the launches before returning;
* a call on torch tensors alone (no ``out=``, no index tensor whose values
  must be checked) leaves a :class:`DeviceCallPlan` keyed by :func:`torch_key`:
  a later call with the same shapes, dtypes and device replays its launches
  on new outputs without binding again.

Errors: :class:`~polyc.errors.BindingError`, :class:`~polyc.errors.DTypeError`,
:class:`~polyc.errors.ShapeError` as for host arrays.
"""

from __future__ import annotations

import contextlib
import math
import sys
from dataclasses import dataclass

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
            scratch = allocate(shape, t.dtype, first, drv, zero=False)
            keep.append(scratch)
            ptrs.append(data_ptr(scratch))
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
    if out is not None:         # partly written outputs start at zero, as fresh ones do
        for a, t in zip(args, outs):
            if t.name in binder.partial and a.nbytes:
                drv.memset_d8(a.ptr, 0, a.nbytes)
    return results, args


def allocate(shape, dtype, like, drv, zero: bool):
    """A device array for an output, of ``like``'s kind (torch, CuPy, else
    :class:`DeviceArray`)."""
    tensor = _torch_tensor_type()
    if tensor is not None and isinstance(like, tensor):
        torch = sys.modules["torch"]
        dt = getattr(torch, np.dtype(dtype).name)
        return (torch.zeros if zero else torch.empty)(tuple(shape), dtype=dt,
                                                       device=like.device)
    if type(like).__module__.split(".")[0] == "cupy":
        import cupy
        return (cupy.zeros if zero else cupy.empty)(tuple(shape), dtype=dtype)
    return DeviceArray(shape, dtype, drv, zero=zero)


def data_ptr(obj) -> int:
    """The device address of an array this module allocated or accepted."""
    if isinstance(obj, DeviceArray):
        return obj.ptr
    if hasattr(obj, "data_ptr") and getattr(obj, "is_cuda", False):
        return int(obj.data_ptr())          # torch: also for dtypes without the interface
    return int(interface(obj)["data"][0])


def _torch_tensor_type():
    torch = sys.modules.get("torch")
    return None if torch is None else torch.Tensor


def torch_key(args: tuple) -> tuple | None:
    """What a :class:`DeviceCallPlan` is keyed by: each torch tensor's dtype, shape
    and device and each size argument's value, or ``None`` unless every
    tensor argument is a C-contiguous torch CUDA tensor that does not
    require grad (the arrays :func:`bind` takes in place)."""
    tensor = _torch_tensor_type()
    if tensor is None:
        return None
    key: list = []
    seen = False
    for a in args:
        if isinstance(a, tensor):
            if not a.is_cuda or a.requires_grad or not a.is_contiguous():
                return None
            key.append((a.dtype, a.shape, a.get_device()))
            seen = True
        elif isinstance(a, (int, np.integer)) and not isinstance(a, (bool, np.bool_)):
            key.append(int(a))
        else:
            return None
    return tuple(key) if seen else None


def side_stream(args: tuple):
    """torch's current stream when the arguments are torch tensors and it is
    not the legacy default stream polyc launches on, else ``None``."""
    tensor = _torch_tensor_type()
    if tensor is None or not any(isinstance(a, tensor) for a in args):
        return None
    stream = sys.modules["torch"].cuda.current_stream()
    return stream if stream.cuda_stream != 0 else None


@dataclass(frozen=True)
class DeviceCallPlan:
    """The device side's call plan (the CPU kernels' is
    :class:`polyc.callplan.CallPlan`): the launches of a call on torch
    tensors and how to bind another call of the same :func:`torch_key`:
    ``slots`` gives, in the kernels' tensor order, where each pointer
    comes from (``("arg", i)``: argument ``i``; ``("out", k)``; ``("tmp",
    j)``), ``outputs`` and ``scratch`` the (shape, torch dtype,
    zero-filled) of each array to allocate on ``device``."""
    slots: tuple[tuple[str, int], ...]
    outputs: tuple[tuple, ...]
    scratch: tuple[tuple, ...]
    device: object
    launches: tuple

    @classmethod
    def of(cls, binder, args, results, scratch, launches) -> "DeviceCallPlan":
        p = binder.program
        where = {name: i for i, name in enumerate(p.signature)}
        slots, k, j = [], 0, 0
        for t in (t for t in p.tensors if t.role != "local"):
            if t.role in ("input", "inout"):
                slots.append(("arg", where[t.name]))
            elif t.role == "output":
                slots.append(("out", k))
                k += 1
            else:
                slots.append(("tmp", j))
                j += 1
        outs = tuple((tuple(r.shape), r.dtype, t.name in binder.partial)
                     for r, t in zip(results, binder.outputs))
        tmps = tuple((tuple(a.shape), a.dtype, False) for a in scratch)
        device = next(a.device for a in args if hasattr(a, "device"))
        return cls(tuple(slots), outs, tmps, device, tuple(launches))

    def bind(self, args: tuple) -> tuple[list, list, list[int]]:
        """New outputs and scratch on the plan's device, and the pointers
        of a call on ``args`` (which have the plan's key)."""
        torch = sys.modules["torch"]
        new = [(torch.zeros if zero else torch.empty)(shape, dtype=dt, device=self.device)
               for shape, dt, zero in self.outputs]
        tmp = [torch.empty(shape, dtype=dt, device=self.device)
               for shape, dt, _ in self.scratch]
        ptrs = [(args if kind == "arg" else new if kind == "out" else tmp)[i].data_ptr()
                for kind, i in self.slots]
        return new, tmp, ptrs
