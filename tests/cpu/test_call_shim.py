"""The warm-call shim (polyc.backends.c.callshim): its key agrees with
CallPlan.key, it refuses what is not an array instead of crashing, and
without it calls take ctypes (tests/cpu/test_call_plans.py runs every
warm-call test on both paths)."""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from polyc.backends.c import callshim
from polyc.callplan import CallPlan
from polyc.errors import PolycError

RNG = np.random.default_rng(12)
MM = "def mm(float(M, K) A, float(K, N) B) -> (C) { C(m, n) +=! A(m, k) * B(k, n) }"
TWO = "def two(float(N) A) -> (B, C) { B(i) = A(i) * 2\n C(i) = A(i) + 1 }"


@pytest.fixture(autouse=True)
def fresh_shim_state(monkeypatch):
    monkeypatch.delenv("POLYC_CALL_SHIM", raising=False)
    monkeypatch.setattr(callshim, "_state", {})


def _shim_kernel(src=MM):
    k = polyc.compile(src)
    if k._shim is None:
        pytest.skip("the call shim cannot be built here (no Python.h)")
    return k



def test_the_call_shim_is_built_where_the_headers_are(monkeypatch):
    """Where the interpreter's headers are installed (CI, this machine) the
    shim is built and used; POLYC_CALL_SHIM=0 turns it off."""
    import sysconfig
    from pathlib import Path
    if (Path(sysconfig.get_paths()["include"]) / "Python.h").exists():
        k = polyc.compile(MM)
        assert k._shim is not None
        k(np.ones((2, 3), np.float32), np.ones((3, 4), np.float32))
        (plan,) = k._plans.values()
        assert plan.shim is k._shim and plan.entry
    monkeypatch.setenv("POLYC_CALL_SHIM", "0")
    assert polyc.compile(MM)._shim is None


KEY_CASES = [
    (np.ones((5, 3), np.float32), np.ones((3, 4), np.float32)),
    (np.ones((5, 3), np.float32), np.ones((3, 4), np.float64)),          # dtype
    (np.ones((5, 3), np.float32), np.ones((4, 3), np.float32).T),        # not C-contiguous
    (np.ones((5, 3), np.float32), np.ones((3, 4), np.float32).view(np.matrix)),  # subclass
    (np.ones((5, 3), np.float32), [[1.0] * 4] * 3),                      # not an array
    (np.ones((5, 3), np.float32),),                                      # too few
    (np.ones((5, 3), np.float32), np.ones((3, 4), np.dtype("<f4"))),     # an equal dtype
    (np.ones((0, 3), np.float32), np.ones((3, 4), np.float32)),          # empty
    (np.frombuffer(bytearray(61), np.uint8)[1:].view(np.float32).reshape(5, 3),
     np.ones((3, 4), np.float32)),                                       # unaligned
]


@pytest.mark.parametrize("case", range(len(KEY_CASES)))
def test_the_shims_key_is_the_python_key(case):
    k = _shim_kernel()
    args = KEY_CASES[case]
    assert k._shim.key(args, tuple(k.binder.signature_kinds)) == CallPlan.key(k.binder, args)


def test_the_shims_key_takes_sizes_as_exact_ints():
    k = _shim_kernel("def s(float(N) A, int64 M) -> (B) { B(i) = A(i) * M }")
    A = np.ones(3, np.float32)
    kinds = tuple(k.binder.signature_kinds)
    for args in ((A, 4), (A, True), (A, 4.0), (A, np.int64(4))):
        assert k._shim.key(args, kinds) == CallPlan.key(k.binder, args)
    np.testing.assert_array_equal(k(A, 4), A * 4)
    np.testing.assert_array_equal(k(A, 5), A * 5)


def test_the_shim_refuses_what_is_not_an_array():
    """Bad slots raise TypeError; nothing reaches the C function."""
    k = _shim_kernel()
    A, B = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    k(A, B)
    (plan,) = k._plans.values()
    out = [np.empty((2, 4), np.float32)]
    with pytest.raises(TypeError):
        k._shim.run(plan.entry, plan.params_at, 1, plan.slots, (A, [1.0]), out, [])
    with pytest.raises(TypeError):
        k._shim.run(plan.entry, plan.params_at, 1, plan.slots, (A,), out, [])
    with pytest.raises(TypeError):
        k._shim.run(plan.entry, plan.params_at, 1, b"\x07\0\0\0\0\0\0\0", (A, B), out, [])
    with pytest.raises(ValueError):
        k._shim.run(0, plan.params_at, 1, plan.slots, (A, B), out, [])
    k._shim.run(plan.entry, plan.params_at, 1, plan.slots, (A, B), out, [])
    np.testing.assert_array_equal(out[0], A @ B)


def test_a_bad_call_shim_setting_is_an_error(monkeypatch):
    monkeypatch.setenv("POLYC_CALL_SHIM", "yes")
    with pytest.raises(PolycError, match="POLYC_CALL_SHIM"):
        polyc.compile(MM)


def test_without_the_shim_calls_take_ctypes(monkeypatch, caplog):
    """A shim that cannot be built (no Python.h) is logged once and calls
    still run, through ctypes."""
    import logging

    from polyc.errors import CompileError

    def fail(config):
        raise CompileError("Python.h: No such file or directory")
    monkeypatch.setenv("POLYC_CALL_SHIM", "1")
    monkeypatch.setattr(callshim, "_build", fail)
    with caplog.at_level(logging.INFO, logger="polyc.backends.c.callshim"):
        k = polyc.compile(MM)
        k2 = polyc.compile(TWO)
    assert k._shim is None and k2._shim is None
    assert sum("call shim is not available" in r.message for r in caplog.records) == 1
    A, B = RNG.standard_normal((5, 3), np.float32), RNG.standard_normal((3, 4), np.float32)
    for _ in range(2):
        np.testing.assert_allclose(k(A, B), A @ B, rtol=1e-5)
