"""A few rows through a weight matrix from the public API: TC definitions,
einsum and ``@polyc.jit`` numpy at 1 to 16 rows, B row-major (``x @ W``) and
column-major (``x @ W.T``), with the bias + ReLU epilogue folded into the
store, float32 and float64, against numpy.  The weights are above the sizes
where the GEMM takes its few-rows path (gemm_few.h: 128 KiB of B for the row
stream, 256 KiB for the dot kernel; tests/unit/test_gemm_few.py checks the
kernels themselves at every edge).  Tolerances: K-scaled, as
``polyc.testing.assert_close``."""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from polyc import testing

XW = "def f(float(M, K) A, float(K, N) B) -> (C) { C(m, n) +=! A(m, k) * B(k, n) }"
XWT = "def f(float(M, K) A, float(N, K) W) -> (C) { C(m, n) +=! A(m, k) * W(n, k) }"
LINEAR = """def f(float(M, K) A, float(N, K) W, float(N) b) -> (C) {
    C(m, n) +=! A(m, k) * W(n, k)
    C(m, n) = fmax(C(m, n) + b(n), 0.0)
}"""
RNG = np.random.default_rng(7)


def _data(shape, dtype):
    return RNG.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_tc_both_layouts(dtype):
    xw, xwt = polyc.compile(XW, dtype=dtype), polyc.compile(XWT, dtype=dtype)
    for M in (1, 2, 3, 5, 16, 17):
        for K, N in ((640, 700), (1100, 96), (37, 4100)):
            A, B = _data((M, K), dtype), _data((K, N), dtype)
            W = np.ascontiguousarray(B.T)
            ref = (A.astype(np.float64) @ B).astype(dtype)
            testing.assert_close(xw(A, B), ref, reduction_length=K, name=f"x @ W {M}x{K}x{N}")
            testing.assert_close(xwt(A, W), ref, reduction_length=K,
                                 name=f"x @ W.T {M}x{K}x{N}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_linear_with_bias_and_relu(dtype):
    k = polyc.compile(LINEAR, dtype=dtype)
    for M in (1, 4, 9):
        A, W, b = _data((M, 768), dtype), _data((1000, 768), dtype), _data(1000, dtype)
        ref = np.maximum(A.astype(np.float64) @ W.T + b, 0).astype(dtype)
        testing.assert_close(k(A, W, b), ref, reduction_length=768, name=f"linear {M}")


def test_einsum_and_jit_one_token():
    x = _data((1, 3072), "float32")
    w = _data((3072, 768), "float32")
    testing.assert_close(polyc.einsum("mk,kn->mn", x, w),
                         (x.astype(np.float64) @ w).astype(np.float32), reduction_length=3072)
    wt = np.ascontiguousarray(w.T)

    @polyc.jit
    def proj(x, w, wt):
        return np.tanh(x @ w) + x @ wt.T

    ref = (np.tanh(x.astype(np.float64) @ w) + x.astype(np.float64) @ w).astype(np.float32)
    testing.assert_close(proj(x, w, wt), ref, reduction_length=3072)
