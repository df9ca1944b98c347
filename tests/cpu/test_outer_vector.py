"""Outer-loop vectorisation around short inner loops (backends/c/outersimd.py):
a loop whose body is a short reduction (pairwise distances over 3
coordinates, RBF's kernel sum) runs in strips of 16 iterations, one SIMD
lane each, inside the short loop.  Every case is checked against float64
numpy, on sizes that leave a partial strip, and the source says which
form it got; where the strip-mined copy keeps each element's order of
summation, its results are bit for bit those of the scalar kernel."""

from __future__ import annotations

import numpy as np
import pytest

import polyc

MARK = "vectorised around its short inner loops"

PDIST = """def pdist(float(N, R) X, float(M, R) Y) -> (D) {
  D(i, j) +=! (X(i, r) - Y(j, r)) * (X(i, r) - Y(j, r))
}"""


def _pdist64(x, y):
    d = x[:, None, :].astype(np.float64) - y[None, :, :].astype(np.float64)
    return (d * d).sum(-1)


@pytest.mark.parametrize("n,m,r", [(5, 37, 3), (70, 16, 1), (3, 1, 15), (9, 33, 16),
                                   (4, 50, 40)])
def test_pairwise_distance(n, m, r):
    """Below 16 coordinates the strips run (the tail of 37 is 5 lanes); from
    16 up the scalar copy with its vector reduction over the coordinates."""
    rng = np.random.default_rng(n * m + r)
    x = rng.standard_normal((n, r)).astype(np.float32)
    y = rng.standard_normal((m, r)).astype(np.float32)
    k = polyc.compile(PDIST)
    assert MARK in k.source
    assert "polyc_lane < 16" in k.source and "polyc_lane < polyc_nl" in k.source
    d = k(x, y)
    np.testing.assert_allclose(d, _pdist64(x, y), rtol=2e-5, atol=2e-5)
    if r < 16:
        # each lane sums its element's coordinates in order: the scalar result
        scalar = polyc.compile(PDIST, config=polyc.Config(simd=False))
        assert MARK not in scalar.source
        np.testing.assert_array_equal(d, scalar(x, y))


@pytest.mark.parametrize("op", ["+=!", "*=!"])
def test_reduction_along_the_vector_loop(op):
    """``S(i)`` accumulates along the strip-mined loop: one partial result
    per lane, combined after the loop (a sum and a product)."""
    src = f"""def f(float(N, R) X, float(M, R) Y) -> (T, S) {{
      T(i, j) +=! (X(i, r) - Y(j, r)) * (X(i, r) - Y(j, r))
      S(i) {op} exp(-0.01 * T(i, j))
    }}"""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((37, 3)).astype(np.float32)
    y = rng.standard_normal((83, 3)).astype(np.float32)
    k = polyc.compile(src)
    assert MARK in k.source
    t, s = k(x, y)
    t64 = _pdist64(x, y)
    e = np.exp(-0.01 * t64)
    np.testing.assert_allclose(t, t64, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(s, e.sum(1) if op == "+=!" else e.prod(1), rtol=2e-5)


@pytest.mark.parametrize("n,m", [(70, 37), (5, 3), (64, 129)])
def test_rbf_kernel_sum_in_the_graph_layer(n, m):
    """``sum_j exp(-|x_i - y_j|^2)`` traced from numpy: the squared distance
    is contracted to one scalar per (i, j), one element per lane here."""
    def rbf(x, y):
        d = x[:, None, :] - y[None, :, :]
        return np.exp(-(d * d).sum(-1)).sum(-1)
    f = polyc.jit(rbf)
    rng = np.random.default_rng(n + m)
    x = rng.standard_normal((n, 3)).astype(np.float32)
    y = rng.standard_normal((m, 3)).astype(np.float32)
    out = f(x, y)
    kernels = f.plan(x, y).kernels
    assert len(kernels) == 1 and MARK in kernels[0].source
    np.testing.assert_allclose(out, rbf(x.astype(np.float64), y.astype(np.float64)),
                               rtol=1e-5, atol=1e-6)


def test_short_elementwise_loop_keeps_its_own_vector_loop():
    """A short loop that is not a reduction (an elementwise row of 7) is a
    vector loop itself: the loop around it is not strip-mined."""
    src = """def f(float(N, H, W) X, float(H) s) -> (O) {
      O(n, h, w) = X(n, h, w) * s(h) + X(n, h, 0)
    }"""
    k = polyc.compile(src)
    assert MARK not in k.source
    x = np.random.default_rng(0).standard_normal((3, 20, 7)).astype(np.float32)
    s = np.arange(20, dtype=np.float32)
    np.testing.assert_allclose(k(x, s), x * s[None, :, None] + x[:, :, :1], rtol=1e-6)


def test_nothing_vectorised_without_simd():
    src = PDIST
    k = polyc.compile(src, config=polyc.Config(simd=False))
    assert "omp simd" not in k.source and MARK not in k.source
