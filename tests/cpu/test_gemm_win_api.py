"""Convolutions through the window path from the public API: TC definitions
(valid, zero-padded by a guarded read, batched, with a following ReLU), and
``@polyc.jit`` numpy over windows, at output widths whose rows the GEMM
joins across the input's pitch (7, 12, 28, 56) and one it does not (32),
with channel counts that give the GEMM more slivers than its small path
takes; float32 and float64, against numpy in float64.  The kernels
themselves, at every edge, are checked by tests/unit/test_gemm_win.py.
Tolerances: K-scaled, as ``polyc.testing.assert_close``."""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from polyc import testing

CONV = """def conv(float(N, C, HP, WP) I, float(K, C, KH, KW) W) -> (O) {
    O(n, k, h, w) +=! I(n, c, h + kh, w + kw) * W(k, c, kh, kw)
}"""
CONV_RELU = """def conv(float(N, C, HP, WP) I, float(K, C, KH, KW) W) -> (O) {
    O(n, k, h, w) +=! I(n, c, h + kh, w + kw) * W(k, c, kh, kw)
    O(n, k, h, w) = fmax(O(n, k, h, w), 0.0)
}"""
RNG = np.random.default_rng(3)


def _ref(I, W):
    """Valid 2-D cross-correlation in float64 (N, C, HP, WP) x (K, C, KH, KW)."""
    n, c, hp, wp = I.shape
    k, _, kh, kw = W.shape
    win = np.lib.stride_tricks.sliding_window_view(I.astype(np.float64), (kh, kw), (2, 3))
    return np.einsum("nchwij,kcij->nkhw", win, W.astype(np.float64))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_tc_convolutions(dtype):
    k = polyc.compile(CONV, dtype=dtype)
    for n, c, kout, out, kh in ((1, 16, 64, 56, 3), (2, 8, 70, 12, 3), (1, 32, 96, 7, 3),
                                (1, 8, 64, 28, 2), (1, 4, 80, 32, 3)):
        I = RNG.standard_normal((n, c, out + kh - 1, out + kh - 1)).astype(dtype)
        W = RNG.standard_normal((kout, c, kh, kh)).astype(dtype)
        testing.assert_close(k(I, W), _ref(I, W).astype(dtype), reduction_length=c * kh * kh,
                             name=f"conv {n}x{c}x{out} -> {kout}")


def test_tc_convolution_with_relu():
    k = polyc.compile(CONV_RELU)
    I = RNG.standard_normal((1, 16, 30, 30)).astype(np.float32)
    W = RNG.standard_normal((64, 16, 3, 3)).astype(np.float32)
    testing.assert_close(k(I, W), np.maximum(_ref(I, W), 0).astype(np.float32),
                         reduction_length=144)


def test_jit_numpy_windows():
    @polyc.jit
    def conv(x, w):
        win = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(1, 2))
        return np.einsum("chwij,kcij->khw", win, w)

    x = RNG.standard_normal((16, 30, 30)).astype(np.float32)
    w = RNG.standard_normal((64, 16, 3, 3)).astype(np.float32)
    testing.assert_close(conv(x, w), _ref(x[None], w)[0].astype(np.float32),
                         reduction_length=144)


WEIRD_CONV = """def weirdconv(float(B, IP, H, W) input, float(OP, IP, KH, KW) weight) -> (output) {
    output(b, op, h, w) +=! input(b, ip, 2*h + 3*w + kh, 2*w + kw) * weight(op, ip, kh, kw)
}"""


def test_tc_weird_conv_is_tensorized():
    """TC's WeirdConv (test_inference.cc): its domain's bounds hold on sizes
    given by integer divisions, and the GEMM mark's check of the loops above
    it took minutes on them; a call per batch element, against numpy."""
    k = polyc.compile(WEIRD_CONV)
    assert "polyc_gemmx_f32(" in k.source
    I = RNG.standard_normal((2, 3, 23, 9)).astype(np.float32)
    W = RNG.standard_normal((4, 3, 2, 3)).astype(np.float32)
    oh, ow = (23 - 2 - 3 * ((9 - 3) // 2)) // 2 + 1, (9 - 3) // 2 + 1
    h, w, kh, kw = np.ix_(range(oh), range(ow), range(2), range(3))
    win = I.astype(np.float64)[:, :, 2 * h + 3 * w + kh, 2 * w + kw]     # b ip h w kh kw
    want = np.einsum("bihwyx,oiyx->bohw", win, W.astype(np.float64))
    testing.assert_close(k(I, W), want.astype(np.float32), reduction_length=18)
