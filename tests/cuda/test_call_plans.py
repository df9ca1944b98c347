"""Call plans of ``target="cuda"`` kernels on torch tensors
(:class:`polyc.gpu_arrays.DeviceCallPlan`), checked without a GPU: pycuda is the
fake driver of test_mapping and torch is a stand-in module whose CUDA
tensors are made-up addresses.  What is checked: the first call binds and
leaves a plan; a call with the same shapes, dtypes and device replays the
same launches with new outputs without binding again; other shapes, an
``out=``, a gathering kernel or a tensor that is not a plain CUDA tensor
take the full binding; calls return without synchronising unless
``Config.gpu_sync`` is set or torch's current stream is a side stream.
On a GPU, test_device.py::test_torch_calls_replay_their_plan_asynchronously
runs real torch tensors."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

import polyc
from polyc import gpu_arrays
from polyc.config import Config

from .test_mapping import fake_pycuda

MM = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }"
BAG = """def bag(int64(B, L) I, float(N, D) LUT) -> (O) {
    O(b, d) +=! LUT(I(b, l), d)
}"""


class _Tensor:
    """A C-contiguous 'CUDA tensor' at a made-up address."""
    _next = [0x7e0000000000]

    def __init__(self, shape, dtype="float32", requires_grad=False, contiguous=True):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self.ptr = _Tensor._next[0]
        _Tensor._next[0] += 1 << 24
        self.is_cuda, self.requires_grad, self._contiguous = True, requires_grad, contiguous
        self.device = "cuda:0"

    def is_contiguous(self):
        return self._contiguous

    def get_device(self):
        return 0

    def data_ptr(self):
        return self.ptr

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.dtype.str, "version": 3,
                "data": (self.ptr, False), "strides": None}


class _Stream:
    def __init__(self, handle):
        self.cuda_stream, self.waited = handle, 0

    def synchronize(self):
        self.waited += 1


@pytest.fixture
def fake(monkeypatch):
    drv = fake_pycuda(monkeypatch)
    drv.syncs = 0

    def synchronize():
        drv.syncs += 1
    monkeypatch.setattr(drv.Context, "synchronize", staticmethod(synchronize))
    torch = types.ModuleType("torch")
    torch.Tensor = _Tensor
    torch.float32, torch.int64 = np.dtype("float32"), np.dtype("int64")
    torch.empty = torch.zeros = lambda shape, dtype, device: _Tensor(shape, dtype)
    torch.stream = _Stream(0)
    torch.cuda = types.SimpleNamespace(current_stream=lambda: torch.stream)
    monkeypatch.setitem(sys.modules, "torch", torch)
    drv.torch = torch
    return drv


def _ptrs(launch):
    return [int(a) for a in launch[1] if isinstance(a, np.uintp)]


def test_a_second_call_replays_the_plan_without_binding(fake, monkeypatch):
    k = polyc.compile(MM, target="cuda")
    a, b = _Tensor((30, 12)), _Tensor((12, 7))
    c = k(a, b)
    assert isinstance(c, _Tensor) and c.shape == (30, 7) and len(k._plans) == 1
    first = list(fake.launches)
    assert _ptrs(first[0]) == [a.ptr, b.ptr, c.ptr] and fake.syncs == 0
    monkeypatch.setattr(gpu_arrays, "bind", lambda *a, **k: pytest.fail("bound again"))
    fake.launches.clear()
    a2, b2 = _Tensor((30, 12)), _Tensor((12, 7))
    c2 = k(a2, b2)
    assert c2.shape == (30, 7) and c2.ptr != c.ptr
    assert [(n, tuple(int(x) for x in args if not isinstance(x, np.uintp)), g, blk)
            for n, args, g, blk in fake.launches] == [
        (n, tuple(int(x) for x in args if not isinstance(x, np.uintp)), g, blk)
        for n, args, g, blk in first]
    assert _ptrs(fake.launches[0]) == [a2.ptr, b2.ptr, c2.ptr] and fake.syncs == 0


@pytest.mark.parametrize("case", ["other shape", "out", "requires grad", "not contiguous",
                                  "host array"])
def test_calls_a_plan_does_not_cover_bind_in_full(fake, case):
    k = polyc.compile(MM, target="cuda")
    k(_Tensor((30, 12)), _Tensor((12, 7)))
    calls = []
    real = gpu_arrays.bind

    def counted(*args, **kw):
        calls.append(1)
        return real(*args, **kw)
    gpu_arrays.bind, saved = counted, real
    try:
        if case == "other shape":
            k(_Tensor((31, 12)), _Tensor((12, 7)))
            assert len(k._plans) == 2
        elif case == "out":
            k(_Tensor((30, 12)), _Tensor((12, 7)), out=_Tensor((30, 7)))
        elif case == "requires grad":
            k(_Tensor((30, 12), requires_grad=True), _Tensor((12, 7)))
        elif case == "not contiguous":
            k(_Tensor((30, 12), contiguous=False), _Tensor((12, 7)))
        else:
            with pytest.raises(polyc.errors.BindingError, match="host ndarray"):
                k(_Tensor((30, 12)), np.ones((12, 7), np.float32))
    finally:
        gpu_arrays.bind = saved
    assert calls == [1]


def test_a_gathering_kernel_checks_its_indices_every_call(fake):
    k = polyc.compile(BAG, target="cuda")
    fake.memcpy_dtoh = lambda dst, src: dst.fill(0)       # the indices, read back
    k(_Tensor((4, 3), "int64"), _Tensor((10, 5)))
    assert not k._plans


def test_sync_when_asked_and_around_a_side_stream(fake):
    k = polyc.compile(MM, target="cuda", config=Config(target="cuda", gpu_sync=True))
    k(_Tensor((30, 12)), _Tensor((12, 7)))
    k(_Tensor((30, 12)), _Tensor((12, 7)))
    assert fake.syncs == 2
    k = polyc.compile(MM, target="cuda")
    fake.torch.stream = side = _Stream(0x1234)
    fake.syncs = 0
    k(_Tensor((30, 12)), _Tensor((12, 7)))
    k(_Tensor((30, 12)), _Tensor((12, 7)))
    assert side.waited == 2 and fake.syncs == 2
