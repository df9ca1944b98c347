"""Post-operations of the GEMM call (polyc.gemm_post, docs/tensorize.md
"Post-operations") from the public API: the elementwise statement after a
contraction folded into the call (``explain`` says so) and the result
against numpy, through TC definitions and through ``@polyc.jit`` (a
convolution's batch norm, residual add and ReLU in plain numpy)."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

import polyc
from polyc import testing

FOLDED = "applied by the call to each tile of C once its sum is final"

ROW = """def lin(float(M, K) W, float(K, N) X, float(M) b, float(M) s) -> (O) {
    O(i, j) +=! W(i, k) * X(k, j)
    O(i, j) = O(i, j) * s(i) + b(i)
}"""

FULL = """def lin(float(M, K) W, float(K, N) X, float(N) c, float(M, N) R) -> (O) {
    O(i, j) +=! W(i, k) * X(k, j)
    O(i, j) = fmax(c(j) + O(i, j) + R(i, j), 0)
}"""

# the multiplication after an addition: not C * mul + add, so not folded
AFTER = """def lin(float(M, K) W, float(K, N) X, float(M) b, float(M) s) -> (O) {
    O(i, j) +=! W(i, k) * X(k, j)
    O(i, j) = (O(i, j) + b(i)) * s(i)
}"""


def _explain_line(kernel) -> str:
    return next(line for line in kernel.explain().splitlines()
                if "tensorized onto gemm" in line)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 1, 1), (37, 50, 70), (130, 300, 41)])
def test_per_row_scale_and_shift(dtype, shape):
    M, K, N = shape
    kernel = polyc.compile(ROW.replace("float", "float" if dtype == np.float32 else "double"))
    line = _explain_line(kernel)
    assert FOLDED in line and "* s (per row)" in line and "+ b (per row)" in line
    rng = np.random.default_rng(M + N)
    W, X = rng.standard_normal((M, K)).astype(dtype), rng.standard_normal((K, N)).astype(dtype)
    b, s = rng.standard_normal(M).astype(dtype), rng.standard_normal(M).astype(dtype)
    got = kernel(W, X, b, s)
    want = (W.astype(np.float64) @ X) * s[:, None] + b[:, None]
    testing.assert_close(got, want.astype(dtype), reduction_length=K)


def test_per_column_and_full_operands_with_relu():
    kernel = polyc.compile(FULL)
    line = _explain_line(kernel)
    assert FOLDED in line and "+ R (per element)" in line and "relu" in line
    rng = np.random.default_rng(1)
    W, X = rng.standard_normal((40, 64)).astype(np.float32), \
        rng.standard_normal((64, 90)).astype(np.float32)
    c = rng.standard_normal(90).astype(np.float32)
    R = rng.standard_normal((40, 90)).astype(np.float32)
    want = np.maximum(c[None, :] + (W @ X) + R, 0)
    testing.assert_close(kernel(W, X, c, R), want, reduction_length=64)


def test_other_orders_keep_their_loops():
    kernel = polyc.compile(AFTER)
    assert FOLDED not in _explain_line(kernel)
    rng = np.random.default_rng(2)
    W, X = rng.standard_normal((9, 8)).astype(np.float32), \
        rng.standard_normal((8, 7)).astype(np.float32)
    b, s = rng.standard_normal(9).astype(np.float32), rng.standard_normal(9).astype(np.float32)
    testing.assert_close(kernel(W, X, b, s), ((W @ X) + b[:, None]) * s[:, None],
                         reduction_length=8)


def conv3x3(x, w):
    win = sliding_window_view(np.pad(x, ((0, 0), (1, 1), (1, 1))), (3, 3), axis=(1, 2))
    return np.einsum("chwij,kcij->khw", win, w)


def block(x, w1, s1, b1, w2, s2, b2):
    y = np.maximum(conv3x3(x, w1) * s1[:, None, None] + b1[:, None, None], 0.0)
    y = conv3x3(y, w2) * s2[:, None, None] + b2[:, None, None]
    return np.maximum(y + x, 0.0)


def _inputs(c, hw, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((c, hw, hw)).astype(np.float32)
    w = [(rng.standard_normal((c, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
         for _ in range(2)]
    s1, b1, s2, b2 = (rng.standard_normal(c).astype(np.float32) for _ in range(4))
    return [x, w[0], s1, b1, w[1], s2, b2]


@pytest.mark.parametrize("c,hw", [(16, 14), (24, 9)])
def test_resnet_block_in_four_kernels(c, hw):
    """The block's batch norms, residual and ReLUs are the convolutions'
    post-operations: two pads and two GEMM calls, each folding one."""
    jitted = polyc.jit(block)
    args = _inputs(c, hw)
    testing.assert_close(jitted(*args), block(*args), reduction_length=9 * c)
    plan = jitted.plan(*args)
    assert len(plan.groups) <= 4         # (small sizes: fewer, the nests in sequence)
    assert sum(k.explain().count(FOLDED) for k in plan.kernels) == 2


def test_nan_in_the_residual_propagates_as_numpy_does():
    """numpy's maximum keeps NaN (the post-operations' ReLU mode 2)."""
    jitted = polyc.jit(block)
    args = _inputs(16, 14, seed=3)
    args[0][3, 5, 7] = np.nan
    got, want = jitted(*args), block(*args)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(got).any()
    ok = ~np.isnan(want)
    testing.assert_close(got[ok], want[ok], reduction_length=9 * 16)
