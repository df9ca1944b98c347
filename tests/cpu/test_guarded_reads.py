"""Guarded reads (issue 15, item 4): a read inside a branch of ``c ? a : b``
with an affine condition happens only where its branch is taken, so the
access relation, the in-bounds preconditions and the dependences use that
part of the domain; a condition that is not affine keeps the whole domain,
and explain() says which is which.  Results against numpy (exact for
sums of at most a few products in float64; float32 within
polyc.testing.assert_close)."""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from polyc.testing import assert_close

RNG = np.random.default_rng(15)

CAUSAL = """
def causal(float(T) x, float(K) w) -> (y) {
    y(t) +=! (t - k >= 0 ? x(t - k) * w(k) : 0.0) where t in 0:T, k in 0:K
}
"""
SHIFT = """
def shift(double(N) x) -> (y) {
    y(i) = (i + 1 < N ? x(i + 1) : 0.0) + (i >= 1 ? x(i - 1) : 0.0) where i in 0:N
}
"""
PAD = """
def pad(float(H, W) I, float(3, 3) F) -> (O) {
    O(h, w) +=! (h + kh - 1 >= 0 && h + kh - 1 < H && w + kw - 1 >= 0 && w + kw - 1 < W
                 ? I(h + kh - 1, w + kw - 1) : 0.0) * F(kh, kw)
        where h in 0:H, w in 0:W, kh in 0:3, kw in 0:3
}
"""
GATHER = """
def gather(float(V, D) E, int32(N) I) -> (O) {
    O(n, d) = (n >= 1 ? E(I(n - 1), d) : 0.0) where n in 0:N, d in 0:D
}
"""
MASKED = """
def masked(double(N) x, double(N) m) -> (y) {
    y(i) = (m(i) > 0.0 ? x(i) : 0.0) where i in 0:N
}
"""


def _causal_ref(x, w):
    return np.array([sum(x[t - k] * w[k] for k in range(len(w)) if t - k >= 0)
                     for t in range(len(x))])


@pytest.mark.parametrize("T,K", [(1, 1), (5, 3), (64, 7), (3, 5)])
def test_causal_convolution(T, K):
    k = polyc.compile(CAUSAL)
    x, w = RNG.standard_normal(T).astype(np.float32), RNG.standard_normal(K).astype(np.float32)
    assert_close(k(x, w), _causal_ref(x, w), reduction_length=K)
    # the read x(t - k) happens only for k <= t: nothing to require of T and K
    print(k.program.preconditions)
    assert k.program.preconditions.is_equal(k.program.context.params())
    text = k.explain()
    assert "S0: x(t - k)  only where t - k >= 0" in text


def test_shift_reads_its_neighbours_where_they_exist():
    k = polyc.compile(SHIFT)
    for n in (1, 2, 9):
        x = RNG.standard_normal(n)
        want = np.zeros(n)
        want[:-1] += x[1:]
        want[1:] += x[:-1]
        np.testing.assert_array_equal(k(x), want)


def test_zero_padding_convolution():
    k = polyc.compile(PAD)
    img = RNG.standard_normal((6, 7)).astype(np.float32)
    f = RNG.standard_normal((3, 3)).astype(np.float32)
    padded = np.pad(img, 1)
    want = sum(padded[kh:kh + 6, kw:kw + 7] * f[kh, kw] for kh in range(3) for kw in range(3))
    assert_close(k(img, f), want, reduction_length=9)
    print(k.program.preconditions)
    assert k.program.preconditions.is_equal(k.program.context.params())


def test_guarded_gather():
    k = polyc.compile(GATHER)
    e = RNG.standard_normal((10, 4)).astype(np.float32)
    idx = RNG.integers(0, 10, 6).astype(np.int32)
    want = np.zeros((6, 4), np.float32)
    want[1:] = e[idx[:-1]]
    np.testing.assert_array_equal(k(e, idx), want)


def test_a_condition_that_is_not_affine_is_an_over_approximation():
    k = polyc.compile(MASKED)
    x, m = RNG.standard_normal(20), RNG.standard_normal(20)
    np.testing.assert_array_equal(k(x, m), np.where(m > 0, x, 0.0))
    text = k.explain()
    assert "condition m(i) > 0.0 is not affine: assumed on the whole domain" in text
    rec = k.explain(json=True)["guarded_reads"]
    assert rec == [{"statement": "S0", "read": "x(i)", "conditions": ["m(i) > 0.0"],
                    "restricted": False, "not_affine": ["m(i) > 0.0"]}]


# A guarded read bounds range inference only where its condition holds
# (TC-LANGUAGE.md): the taps of a zero-padded convolution without `where kh`
# were narrowed to kh = kw = 1 by the read I(h + kh - 1, ...), a silent wrong
# result; a boundary stencil with no `where` at all was refused.
SAME_NO_TAP_WHERE = """
def same(float(B, C, H, W) x, float(O, C, KH, KW) w) -> (y) {
    y(b, o, h, ww) +=! (h + kh - KH / 2 >= 0 && h + kh - KH / 2 < H
                        && ww + kw - KW / 2 >= 0 && ww + kw - KW / 2 < W)
                       ? x(b, c, h + kh - KH / 2, ww + kw - KW / 2) * w(o, c, kh, kw) : 0.0
        where h in 0:H, ww in 0:W
}
"""
STENCIL_NO_WHERE = """
def smooth(double(N) x) -> (y, d) {
    y(i) = (i > 0 && i < N - 1) ? (x(i - 1) + x(i) + x(i + 1)) / 3.0 : x(i)
    d(i) = i > 0 ? x(i) - x(i - 1) : x(i)
}
"""


def _same_ref(x, w):
    B, C, H, W = x.shape
    O, _, KH, KW = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (KH // 2, KH - 1 - KH // 2),
                                       (KW // 2, KW - 1 - KW // 2)))
    y = np.zeros((B, O, H, W))
    for kh in range(KH):
        for kw in range(KW):
            y += np.einsum("bchw,oc->bohw", xp[:, :, kh:kh + H, kw:kw + W], w[:, :, kh, kw])
    return y


def test_guarded_reads_do_not_narrow_the_taps_of_a_padded_convolution():
    k = polyc.compile(SAME_NO_TAP_WHERE)
    for shape, wshape in [((2, 3, 6, 7), (4, 3, 3, 5)), ((1, 2, 2, 1), (1, 2, 3, 3))]:
        x = RNG.standard_normal(shape).astype(np.float32)
        w = RNG.standard_normal(wshape).astype(np.float32)
        assert_close(k(x, w), _same_ref(x, w), dtype=np.float32, reduction_length=w[0].size)


@pytest.mark.parametrize("N", [0, 1, 2, 3, 10])
def test_boundary_stencil_ranges_from_guarded_reads(N):
    k = polyc.compile(STENCIL_NO_WHERE)
    x = RNG.standard_normal(N)
    y, d = k(x)
    ry, rd = x.copy(), x.copy()
    ry[1:-1] = (x[:-2] + x[1:-1] + x[2:]) / 3.0
    rd[1:] = x[1:] - x[:-1]
    np.testing.assert_allclose(y, ry, rtol=1e-12)
    np.testing.assert_allclose(d, rd, rtol=1e-12)


def test_a_side_no_guarded_read_bounds_comes_from_the_unguarded_bound():
    # x(i) under i < 3 bounds i from below only: the upper side is x's extent
    k = polyc.compile("def f(float(N) x) -> (y) { y(i) = i < 3 ? x(i) : 0.0 }")
    x = RNG.standard_normal(7)
    np.testing.assert_array_equal(k(x.astype(np.float32)),
                                  np.where(np.arange(7) < 3, x, 0).astype(np.float32))
    # x(i - 1) under i > 0 bounds i from above only: from below, i >= 1
    with pytest.raises(polyc.errors.SemanticError, match="starts at 1.*where i in 0:"):
        polyc.compile("def f(float(N) x) -> (y) { y(i) = i > 0 ? x(i - 1) : 0.0 }")
