"""``x = x + e`` is the reduction update ``x += e`` (``e + x``, ``x - e``,
``x * e``, chains ``x + e1 - e2``): before, only the augmented spelling was
one, so ``y[i] = y[i] + A[i, j] * x[j]`` kept its ``j`` loop sequential and
unvectorised and ``C[i, j] = C[i, j] + A[i, k] * B[k, j]`` was not matched
as a GEMM.  An assignment that ``+=`` would not make an update (the
accumulator read in ``e``, an integer target of a float ``e``, a half
array) stays the assignment as written.

Tolerance: float64, relative 1e-11 of the output's magnitude (an update's
terms may be reassociated, as ``+=``'s are); integers exact."""

from __future__ import annotations

import numpy as np
import pytest

import polyc

RNG = np.random.default_rng(5)


def matvec(A, x, y):
    n, m = A.shape
    for i in range(n):
        for j in range(m):
            y[i] = y[i] + A[i, j] * x[j]


def gemm(A, B, C):
    n, k = A.shape
    m = B.shape[1]
    for i in range(n):
        for j in range(m):
            for p in range(k):
                C[i, j] = C[i, j] + A[i, p] * B[p, j]


def chains(A, x, y):
    n, m = A.shape
    for i in range(n):
        s = 0.0
        for j in range(m):
            s = A[i, j] * x[j] + s
        for j in range(m):
            y[i] = y[i] - A[i, j] + 0.5 * x[j] - 1.0
        for j in range(m):
            x[i] = x[i] * (1.0 + 0.01 * A[i, j]) * 0.999
        y[i] = y[i] + s


def not_updates(A, x, y):
    n, m = A.shape
    for i in range(n):
        for j in range(m):
            y[i] = y[i] + y[i] * A[i, j] * 0.01      # reads the accumulator
        for j in range(m):
            x[i] = A[i, j] - x[i]                    # not x op e


def _close(got, want, rtol):
    scale = max(float(np.max(np.abs(want))), 1e-300)
    assert np.max(np.abs(got.astype(float) - want.astype(float))) <= rtol * scale, (got, want)


def _both(fn, *args, rtol=1e-11):
    k = polyc.kernel(fn)
    got = [a.copy() for a in args]
    want = [a.copy() for a in args]
    k(*got)
    fn(*want)
    for g, w in zip(got, want):
        _close(g, w, rtol)
    return k


def test_spelled_matvec_is_a_vector_reduction():
    k = _both(matvec, RNG.random((37, 50)), RNG.random(50), RNG.random(37))
    assert [s.kind for s in k.program.statements] == ["update"]
    assert "simd reduction" in k.explain()


def test_spelled_gemm_is_matched():
    k = _both(gemm, RNG.random((20, 30)), RNG.random((30, 25)), RNG.random((20, 25)))
    assert "tensorize:gemm:" in str(k.schedule)


@pytest.mark.parametrize("dtype", ["float64", "int64"])
def test_chains_and_operand_orders(dtype):
    if dtype == "int64":
        args = (RNG.integers(-5, 5, (9, 9)), RNG.integers(-5, 5, 9), RNG.integers(-5, 5, 9))
        k = polyc.kernel(matvec)
        got, want = [a.copy() for a in args], [a.copy() for a in args]
        k(*got)
        matvec(*want)
        assert all(np.array_equal(g, w) for g, w in zip(got, want))
        assert [s.kind for s in k.program.statements] == ["update"]
        return
    k = _both(chains, RNG.random((12, 12)), RNG.random(12), RNG.random(12))
    assert [s.kind for s in k.program.statements].count("update") == 4


def test_what_is_not_an_update_stays_an_assignment():
    k = _both(not_updates, RNG.random((8, 6)), RNG.random(8), RNG.random(8))
    assert [s.kind for s in k.program.statements] == ["assign", "assign"]
    # an integer target of a float term truncates at every step, as Python
    ints = (RNG.integers(0, 10, (5, 7)), RNG.integers(0, 10, 5), RNG.integers(0, 10, 5))
    k = polyc.kernel(lambda_free_truncating)
    got, want = [a.copy() for a in ints], [a.copy() for a in ints]
    k(*got)
    lambda_free_truncating(*want)
    assert all(np.array_equal(g, w) for g, w in zip(got, want))
    assert [s.kind for s in k.program.statements] == ["assign"]


def lambda_free_truncating(A, x, y):
    n, m = A.shape
    for i in range(n):
        for j in range(m):
            y[i] = y[i] + A[i, j] * 0.7
