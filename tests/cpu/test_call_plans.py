"""The warm-call fast path (polyc.callplan.CallPlan): a call at a signature
that already passed every check skips them, and must still return fresh,
correct outputs; anything else takes the checked path with its errors."""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from polyc.backends.c import callshim
from polyc.callplan import CallPlan
from polyc.errors import BindingError, DTypeError, ShapeError

RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True, params=["shim", "ctypes"])
def call_path(request, monkeypatch):
    """Every test on both warm-call paths: the C call shim and ctypes."""
    monkeypatch.setenv("POLYC_CALL_SHIM", "1" if request.param == "shim" else "0")
    monkeypatch.setattr(callshim, "_state", {})
    return request.param
MM = "def mm(float(M, K) A, float(K, N) B) -> (C) { C(m, n) +=! A(m, k) * B(k, n) }"
TWO = "def two(float(N) A) -> (B, C) { B(i) = A(i) * 2\n C(i) = A(i) + 1 }"


def test_repeated_calls_return_fresh_correct_outputs():
    k = polyc.compile(MM)
    A, B = RNG.standard_normal((5, 3), np.float32), RNG.standard_normal((3, 4), np.float32)
    first = k(A, B)
    assert len(k._plans) == 1
    for _ in range(3):
        A[...] = RNG.standard_normal(A.shape)
        C = k(A, B)
        assert C is not first and not np.shares_memory(C, first)
        np.testing.assert_allclose(C, A @ B, rtol=1e-5)
    assert len(k._plans) == 1


def test_several_outputs_and_sizes():
    k = polyc.compile(TWO)
    for n in (0, 1, 7, 7, 1000, 7):
        A = RNG.standard_normal(n).astype(np.float32)
        B, C = k(A)
        np.testing.assert_array_equal(B, A * 2)
        np.testing.assert_array_equal(C, A + 1)
    assert len(k._plans) == 4


def test_checked_path_still_rejects_bad_calls_after_a_plan():
    k = polyc.compile(MM)
    A, B = np.ones((5, 3), np.float32), np.ones((3, 4), np.float32)
    k(A, B)
    k(A, B)
    with pytest.raises(ShapeError):
        k(A, np.ones((4, 4), np.float32))
    with pytest.raises(DTypeError):
        k(A.astype(np.float64), B)
    with pytest.raises(BindingError):
        k(A)
    with pytest.raises(BindingError):
        k(A.tolist(), B)


def test_views_and_out_take_the_checked_path():
    k = polyc.compile(MM)
    A, B = RNG.standard_normal((6, 3), np.float32), RNG.standard_normal((3, 4), np.float32)
    k(A[::2], B)
    assert CallPlan.key(k.binder, (A[::2], B)) is None        # not contiguous
    np.testing.assert_allclose(k(A[::2], B), A[::2] @ B, rtol=1e-5)
    out = np.empty((6, 4), np.float32)
    assert k(A, B, out=out) is out
    np.testing.assert_allclose(out, A @ B, rtol=1e-5)


def test_out_of_a_partly_written_output_is_zero_filled_like_a_fresh_one():
    """``k(x, out=o)`` gives what ``k(x)`` gives: the elements no statement
    writes are zero, not ``o``'s old contents (contiguous ``out`` and one
    filled through a temporary)."""
    k = polyc.compile("def f(float(N) x) -> (float(N) y) { y(i) = x(i) * 2.0 where i in 1:N }")
    x = np.arange(1, 6, dtype=np.float32)
    want = np.array([0, 4, 6, 8, 10], np.float32)
    np.testing.assert_array_equal(k(x), want)
    o = np.full(5, 9.0, np.float32)
    assert k(x, out=o) is o
    np.testing.assert_array_equal(o, want)
    big = np.full(10, 9.0, np.float32)
    k(x, out=big[::2])
    np.testing.assert_array_equal(big[::2], want)
    np.testing.assert_array_equal(big[1::2], 9.0)


def test_out_takes_the_fast_path_and_keeps_the_checked_paths_semantics(monkeypatch):
    """A contiguous ``out=`` of the right shape and dtype that shares no
    memory with an argument takes the plan (no ``Binder.bind``); an ``out``
    that overlaps an input, a wrong one, or a view takes the checked path:
    the result is computed from the inputs as they were, errors as before."""
    k = polyc.compile(MM)
    A, B = RNG.standard_normal((4, 4), np.float32), RNG.standard_normal((4, 4), np.float32)
    out = np.empty((4, 4), np.float32)
    assert k(A, B, out=out) is out                  # the first call makes the plan
    assert len(k._plans) == 1
    binds = []
    real_bind = type(k.binder).bind
    monkeypatch.setattr(type(k.binder), "bind",
                        lambda self, *a: binds.append(1) or real_bind(self, *a))
    for _ in range(3):
        A[...] = RNG.standard_normal(A.shape)
        assert k(A, B, out=out) is out
        np.testing.assert_allclose(out, A @ B, rtol=1e-5)
    assert binds == []
    for aliased in (A, B):                          # out is an input: read as it was
        want = A @ B
        assert k(A, B, out=aliased) is aliased
        np.testing.assert_allclose(aliased, want, rtol=1e-5)
    assert len(binds) == 2
    with pytest.raises(ShapeError):
        k(A, B, out=np.empty((4, 5), np.float32))
    with pytest.raises(DTypeError):
        k(A, B, out=np.empty((4, 4), np.float64))
    ro = np.empty((4, 4), np.float32)
    ro.setflags(write=False)
    with pytest.raises(BindingError, match="read-only"):
        k(A, B, out=ro)
    two = polyc.compile(TWO)
    x = RNG.standard_normal(7).astype(np.float32)
    b, c = np.empty(7, np.float32), np.empty(7, np.float32)
    two(x)
    got = two(x, out=(b, c))
    assert got[0] is b and got[1] is c
    np.testing.assert_allclose(b, x * 2)
    np.testing.assert_allclose(c, x + 1)
    buf = np.empty(8, np.float32)
    with pytest.raises(BindingError, match="share memory"):
        two(x, out=(buf[:7], buf[1:]))


def test_plans_are_bounded():
    k = polyc.compile(TWO)
    for n in range(CallPlan.MAX_PLANS + 10):
        A = np.arange(n, dtype=np.float32)
        np.testing.assert_array_equal(k(A)[0], A * 2)
    assert len(k._plans) == CallPlan.MAX_PLANS


def test_gathers_have_no_plans():
    """An index tensor's values are checked on every call."""
    k = polyc.compile("def emb(float(V, D) LUT, int32(B) I) -> (O) { O(b, d) = LUT(I(b), d) }")
    assert k._plans is None
    LUT = np.ones((4, 2), np.float32)
    k(LUT, np.array([0, 3], np.int32))
    with pytest.raises(BindingError):
        k(LUT, np.array([0, 4], np.int32))


def test_read_only_and_empty_arrays_on_the_fast_path():
    """Pointers of read-only or empty arrays come from the array interface."""
    k = polyc.compile(MM)
    A, B = RNG.standard_normal((5, 3), np.float32), RNG.standard_normal((3, 4), np.float32)
    A.flags.writeable = False
    for _ in range(2):
        np.testing.assert_allclose(k(A, B), A @ B, rtol=1e-5)
    E = np.ones((5, 0), np.float32)
    for _ in range(2):
        np.testing.assert_array_equal(k(E, np.ones((0, 4), np.float32)), np.zeros((5, 4)))


def test_concurrent_calls_share_a_plan_safely():
    """ctypes releases the GIL during the C call: each call has its own
    pointer array, so threads on one plan never see each other's data."""
    from concurrent.futures import ThreadPoolExecutor
    k = polyc.compile(TWO)
    k(np.ones(4096, np.float32))

    def one(seed):
        A = np.random.default_rng(seed).standard_normal(4096).astype(np.float32)
        for _ in range(20):
            B, C = k(A)
            if not (np.array_equal(B, A * 2) and np.array_equal(C, A + 1)):
                return False
        return True
    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(one, range(8)))


def test_temporaries_are_kept_per_plan_and_thread():
    # a temporary that no loop contracts (each O(i) reads every T(j)) is an
    # allocated array; warm calls reuse this thread's copy of it, and threads
    # calling at once each get their own
    from concurrent.futures import ThreadPoolExecutor
    from dataclasses import replace

    from polyc import api
    from polyc.config import Config
    from polyc.pipeline import compile_program
    prog = api.program("def a2a(float(N) X) -> (O, T) { T(i) = X(i) * 2.0\n"
                       " O(i) +=! T(j) * X(i) }")
    prog = prog.replace(tensors=tuple(replace(t, role="temp") if t.name == "T" else t
                                      for t in prog.tensors))
    k = compile_program(prog, Config.from_env())
    assert "T" in k._source.tensors
    x = RNG.standard_normal(300).astype(np.float32)
    k(x)
    k(x)
    (plan,) = k._plans.values()
    first = plan.scratch.temps[0]
    np.testing.assert_allclose(k(x), (2 * x).sum() * x, rtol=1e-4)
    assert plan.scratch.temps[0] is first

    def call(seed):
        y = np.random.default_rng(seed).standard_normal(300).astype(np.float32)
        return all(np.allclose(k(y), (2 * y).sum() * y, rtol=1e-4) for _ in range(50))
    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(call, range(8)))

