"""Device arrays in and out of ``target="cuda"`` kernels without copies
(:mod:`polyc.gpu_arrays`), checked without a GPU: pycuda is a fake driver
that records launches and allocations, and the device arrays are objects
exposing ``__cuda_array_interface__`` at made-up addresses.  What is
checked: the kernel receives the callers' own pointers (no copy to or from
the device), outputs are allocated on the device (zero-filled when partly
written), and every misuse is a clear error.  On a GPU,
``test_device.py::test_torch_cuda_tensors_in_and_out`` runs torch tensors."""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from polyc import gpu_arrays
from polyc.errors import BindingError, DTypeError, ShapeError

from .test_mapping import fake_pycuda

SOFTMAX = """def softmax(float(N, C) I) -> (O, mx, s) {
    mx(n) max=! I(n, c)
    s(n) +=! exp(I(n, c) - mx(n))
    O(n, c) = exp(I(n, c) - mx(n)) / s(n)
}"""
MM = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }"


class Dev:
    """A device array at a made-up address (what torch, CuPy and pycuda
    expose)."""
    _next = [0x7f0000000000]

    def __init__(self, shape, dtype="float32", strides=None, readonly=False):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self.ptr = Dev._next[0]
        Dev._next[0] += 1 << 24
        self.strides, self.readonly = strides, readonly

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.dtype.str, "version": 3,
                "data": (self.ptr, self.readonly), "strides": self.strides}


@pytest.fixture
def fake(monkeypatch):
    drv = fake_pycuda(monkeypatch)
    drv.allocated, drv.zeroed, drv.copies = [], [], 0

    class Alloc:
        def __init__(self, n):
            self.n, self.addr = n, 0x100000000 + sum(a.n for a in drv.allocated)
            drv.allocated.append(self)

        def __int__(self):
            return self.addr

    drv.mem_alloc = Alloc
    drv.memset_d8 = lambda dst, value, n: drv.zeroed.append((int(dst), value, n))
    to_device = drv.to_device

    def counted(arr):
        drv.copies += 1
        return to_device(arr)
    drv.to_device = counted
    return drv


def _pointers(launch):
    return [int(a) for a in launch[1] if isinstance(a, np.uintp)]


def test_device_arrays_go_in_and_come_out_without_copies(fake):
    k = polyc.compile(SOFTMAX, target="cuda")
    x = Dev((33, 70))
    o, mx, s = k(x)
    assert fake.copies == 0
    assert all(isinstance(a, gpu_arrays.DeviceArray) for a in (o, mx, s))
    assert (o.shape, mx.shape, s.shape) == ((33, 70), (33,), (33,))
    (launch,) = fake.launches                       # one row kernel
    assert [int(a) for a in launch[1][:2]] == [33, 70]
    assert _pointers(launch) == [x.ptr, o.ptr, mx.ptr, s.ptr]
    assert launch[2] == (33, 1, 1) and launch[3] == (70, 1, 1)
    # out= device arrays are written in place
    fake.launches.clear()
    outs = (Dev((33, 70)), Dev((33,)), Dev((33,)))
    got = k(x, out=outs)
    assert got == outs and _pointers(fake.launches[0]) == [x.ptr] + [a.ptr for a in outs]
    cai = o.__cuda_array_interface__
    assert cai["data"][0] == o.ptr and cai["typestr"] == "<f4" and cai["strides"] is None


def test_an_output_the_statements_write_in_part_is_zero_filled(fake):
    src = "def f(float(N) A) -> (float(N) B) { B(i) = A(i) + 1 where i in 0:N - 1 }"
    k = polyc.compile(src, target="cuda")
    b = k(Dev((9,)))
    assert b.shape == (9,)
    assert (b.ptr, 0, 9 * 4) in fake.zeroed


@pytest.mark.parametrize("call, error, match", [
    (lambda k: k(Dev((4, 5)), np.ones((5, 3), np.float32)), BindingError,
     "argument B is a host ndarray while other tensors of the call are device arrays"),
    (lambda k: k(Dev((4, 5), strides=(4, 16)), Dev((5, 3))), BindingError,
     "not C-contiguous"),
    (lambda k: k(Dev((4, 5), "float64"), Dev((5, 3))), DTypeError, "expected dtype float32"),
    (lambda k: k(Dev((4, 5)), Dev((6, 3))), ShapeError, "dimension 0 has extent 6"),
    (lambda k: k(Dev((4, 5)), Dev((5, 3)), out=Dev((4, 4))), ShapeError,
     r"expected shape \(4, 3\)"),
    (lambda k: k(Dev((4, 5)), Dev((5, 3)), out=np.empty((4, 3), np.float32)), BindingError,
     "expected a device array"),
    (lambda k: k(Dev((4, 5)), Dev((5, 3)), out=Dev((4, 3), readonly=True)), BindingError,
     "read-only"),
])
def test_misuse_of_device_arrays_is_a_clear_error(fake, call, error, match):
    k = polyc.compile(MM, target="cuda")
    with pytest.raises(error, match=match):
        call(k)
    assert not fake.launches


def test_an_output_aliasing_an_input_is_refused(fake):
    k = polyc.compile(MM, target="cuda")
    a, b = Dev((4, 5)), Dev((5, 3))
    alias = Dev((4, 3))
    alias.ptr = a.ptr
    with pytest.raises(BindingError, match="shares device memory with argument A"):
        k(a, b, out=alias)


def test_a_gpu_tensor_without_the_interface_is_a_clear_error(fake):
    """torch gives no ``__cuda_array_interface__`` for a bfloat16 CUDA
    tensor: the error says what to do instead."""
    class Bf16Cuda:
        is_cuda, dtype = True, "torch.bfloat16"

        @property
        def __cuda_array_interface__(self):
            raise TypeError("Got unsupported ScalarType BFloat16")
    k = polyc.compile(MM, target="cuda")
    with pytest.raises(BindingError, match="has no __cuda_array_interface__"):
        k(Bf16Cuda(), Dev((5, 3)))
