"""Long float32 sums under ``@polyc.jit`` accumulate in float64
(``polyc/graph/accumulate.py``): ``sum mean var std`` of 2M values near 100
were 0.1% (sum, mean) and 30% (var) off with a float32 accumulator, where
numpy's pairwise sums are within 1e-7; they are now within a float32
rounding or two of the exact value (numpy's own sums along a strided axis,
which it adds in order, are not).  A sum of products of two arrays stays
a float32 contraction on the GEMM micro-kernel."""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from polyc.graph.accumulate import WIDE_FROM


def _stats(x):
    return (x.sum(), x.mean(), x.var(), x.std(), x.sum(axis=0), x.mean(axis=-2, keepdims=True),
            np.std(x, axis=0, ddof=1), np.linalg.norm(x - 100, axis=0))


@pytest.mark.parametrize("rows", [2_000_000, WIDE_FROM])
def test_long_float32_reductions_are_accurate(rows):
    rng = np.random.default_rng(5)
    x = (rng.random((rows, 2)) + 100).astype(np.float32)
    got = polyc.jit(_stats)(x)
    want = _stats(x)
    exact = _stats(x.astype(np.float64))
    for g, w, e in zip(got, want, exact):
        assert np.asarray(g).dtype == np.asarray(w).dtype == np.float32
        np.testing.assert_allclose(g, e, rtol=3e-7)   # (numpy's x.sum(axis=0) is 0.5% off)


def test_a_long_sum_of_products_stays_on_the_gemm_micro_kernel():
    rng = np.random.default_rng(6)
    a = rng.standard_normal((4, WIDE_FROM)).astype(np.float32)
    b = rng.standard_normal((WIDE_FROM, 3)).astype(np.float32)
    f = polyc.jit(lambda p, q: (p[:, :, None] * q[None]).sum(1))
    np.testing.assert_allclose(f(a, b), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)
    assert "GEMM micro-kernel" in f.explain(a, b)


def test_a_plan_traced_short_is_not_reused_for_a_long_reduction():
    """The plan of a short float32 reduction is guarded: traced on 100
    values, a call on 2M traces again and accumulates in float64 (it
    reused the float32 plan: x.var() 3.6% off); a short call after the
    long one is still right, and rows within the guard reuse the plan."""
    rng = np.random.default_rng(7)
    f = polyc.jit(lambda x: (x.mean(), x.var(), x.sum(axis=(0, 1))))
    for shape in [(100, 1, 2), (1_000_000, 1, 2), (50, 1, 2), (3, 200, 4), (2000, 500, 1)]:
        x = (rng.random(shape) + 100).astype(np.float32)
        exact = (x.astype(np.float64).mean(), x.astype(np.float64).var(),
                 x.astype(np.float64).sum(axis=(0, 1)))
        for g, e in zip(f(x), exact):
            np.testing.assert_allclose(g, e, rtol=3e-7)
    g = polyc.jit(lambda x: np.exp(x) / np.exp(x).sum(axis=-1, keepdims=True))
    for n in (512, 1024):
        y = rng.standard_normal((4, n)).astype(np.float32)
        np.testing.assert_allclose(g(y), np.exp(y) / np.exp(y).sum(-1, keepdims=True),
                                   rtol=1e-5)
    assert sum(len(p) for p in g._plans.values()) == 1
