"""``x = np.maximum(x, e)`` (and ``np.minimum``, either argument order, and
``max``/``min`` of integers) in a ``@polyc.kernel`` is a max/min reduction
update: parallel over the other loops and vectorised as a reduction, where
it used to be an assignment that kept the whole nest sequential (on CUDA one
block of one thread).  Results are numpy's, NaN included (exact equality)."""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from polyc.config import Config

RNG = np.random.default_rng(41)


def rowmax(A, out):
    M, N = A.shape
    for i in range(M):
        out[i] = -np.inf
        for j in range(N):
            out[i] = np.maximum(out[i], A[i, j])


def scaled_min(A, out):
    M, N = A.shape
    for i in range(M):
        for j in range(N):
            out[0] = np.minimum(A[i, j] * 2.0, out[0])


def int_max(A, out):
    M, N = A.shape
    for i in range(M):
        for j in range(N):
            out[0] = max(out[0], A[i, j] + 1)


def scalar_max(A, out):
    m = A[0]
    for j in range(A.shape[0]):
        m = np.maximum(m, A[j])
    out[0] = m


def float_builtin_max(A, out):
    # Python's max of floats keeps its first operand when the second is NaN
    # (max(nan, 1.0) is nan, max(1.0, nan) 1.0): no update, an assignment
    for j in range(A.shape[0]):
        out[0] = max(out[0], A[j])


def self_reading(A, out):
    # the accumulator is also read in the other operand: stays an assignment
    for j in range(A.shape[0]):
        out[0] = np.maximum(out[0], A[j] - out[0] * 0.5)


def _run(fn, *args, config=None):
    k = polyc.kernel(fn) if config is None else polyc.kernel(config=config)(fn)
    k(*args)
    return k


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_row_maximum_is_a_parallel_vector_reduction(dtype):
    A = RNG.standard_normal((37, 300)).astype(dtype)
    A[3, 5] = np.nan
    out = np.empty(37, dtype)
    k = _run(rowmax, A, out)
    np.testing.assert_array_equal(out, A.max(axis=1))
    text = k.explain()
    assert "marked        parallel" in text and "simd reduction" in text


def test_minimum_either_order_and_integer_max():
    A = RNG.standard_normal((20, 50)).astype(np.float32)
    out = np.array([np.inf], np.float32)
    k = _run(scaled_min, A, out)
    assert out[0] == (A * np.float32(2.0)).min()
    assert "simd reduction" in k.explain()
    A[4, 4] = np.nan
    out[0] = np.inf
    _run(scaled_min, A, out)
    assert np.isnan(out[0])
    B = RNG.integers(-1000, 1000, (30, 40)).astype(np.int32)
    oi = np.array([-10**6], np.int32)
    k = _run(int_max, B, oi)
    assert oi[0] == B.max() + 1 and "simd reduction" in k.explain()


def test_scalar_accumulator_and_what_stays_an_assignment():
    x = RNG.standard_normal(200)
    out = np.zeros(1)
    _run(scalar_max, x, out)
    assert out[0] == x.max()
    x[7] = np.nan
    _run(scalar_max, x, out)
    assert np.isnan(out[0])
    out[0] = -np.inf
    k = _run(float_builtin_max, x, out)
    assert out[0] == np.nanmax(x) and "simd reduction" not in k.explain()
    y = RNG.standard_normal(64)
    out[0] = -1.0
    _run(self_reading, y, out)
    want = -1.0
    for v in y:
        want = np.maximum(want, v - want * 0.5)
    assert out[0] == want


@pytest.mark.parametrize("mode", [{}, {"emulate_reverse": True}, {"emulate_checks": True}])
def test_global_minimum_is_a_grid_reduction_on_the_cuda_emulator(mode):
    A = RNG.standard_normal((33, 70)).astype(np.float32)
    config = Config.from_env(target="cuda", emulate=True, **mode)
    out = np.array([np.inf], np.float32)
    k = _run(scaled_min, A, out, config=config)
    assert out[0] == (A * np.float32(2.0)).min()
    text = k.explain()
    assert "one block of one thread" not in text and "reduction of S0 over the grid" in text
    A[2, 9] = np.nan
    out = np.empty(33, np.float32)
    _run(rowmax, A, out, config=config)
    np.testing.assert_array_equal(out, A.max(axis=1))


def builtin_extrema(A, B):
    for i in range(A.shape[0]):
        B[i, 0] = max(A[i], 0.0)
        B[i, 1] = max(0.0, A[i])
        B[i, 2] = min(1.0, A[i], 0.5 * A[i])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_builtin_max_and_min_of_floats_are_pythons(dtype):
    """``max(a, b)`` is ``b if b > a else a`` (``min`` with ``<``), as
    Python's builtins: a NaN first operand is kept (C's fmax, which polyc
    used, dropped it: ``max(nan, 0.0)`` gave 0.0), a NaN second one not."""
    A = np.array([np.nan, -1.0, 2.0, -0.0, 0.0, np.inf, -np.inf, 0.3], dtype)
    got, want = np.zeros((8, 3), dtype), np.zeros((8, 3), dtype)
    _run(builtin_extrema, A, got)
    builtin_extrema(A, want)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
