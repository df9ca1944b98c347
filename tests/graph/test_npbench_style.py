"""numpy programs in the style of NPBench's kernels (spcl/npbench: deep
learning, stencils, physics, PolyBench ports), written small for these
tests, under ``@polyc.jit`` and compared with plain numpy (``check``:
structure, shapes, dtypes, values within ``polyc.testing``'s tolerances).
Each case is an idiom that went wrong or was refused."""

from __future__ import annotations

import re

import numpy as np
import pytest

import polyc
from polyc.errors import UnsupportedError

from .test_ops import F32, F64, check, rand

# -- a GEMM over a run of digits that leaves part of a dimension unscanned --

def _window_sum(x, w):
    # npbench's conv2d: one output pixel is the sum over a K x K window and the
    # channels; the window x[:, i:i + K, j:j + K] leaves the rest of each axis
    return np.sum(x[:, 0:2, 1:3, :, np.newaxis] * w[np.newaxis, :, :, :], axis=(1, 2, 3))


def _last_axis_slice(x, w):
    return np.sum(x[:, :, 0:2, None] * w[None], axis=(1, 2))


def test_gemm_over_a_window_of_two_axes():
    # the (kh, kw, c) reduction digits were merged into one GEMM k with the
    # window's extents as if they were the array's: 2 * c * kh + ... instead
    # of W * c * kh + ...; every output was wrong (err 0.3 on values near 1)
    check(_window_sum, rand((2, 3, 4, 2), F32), rand((2, 2, 2, 3), F32, seed=1),
          reduction_length=8)
    check(_last_axis_slice, rand((3, 2, 3), F64), rand((2, 2, 4), F64, seed=1),
          reduction_length=4)


def test_conv2d_loop_of_window_sums():
    # npbench's conv2d as written there: a Python loop over the output pixels,
    # into a buffer made by np.empty without like= (polyc.graph.creating)
    def conv2d(x, w):
        k = w.shape[0]
        out = np.empty((x.shape[0], x.shape[1] - k + 1, x.shape[2] - k + 1, w.shape[3]),
                       dtype=np.float32)
        for i in range(out.shape[1]):
            for j in range(out.shape[2]):
                out[:, i, j, :] = np.sum(x[:, i:i + k, j:j + k, :, np.newaxis] *
                                         w[np.newaxis, :, :, :], axis=(1, 2, 3))
        return out
    check(conv2d, rand((1, 3, 3, 2), F32), rand((2, 2, 2, 2), F32, seed=1),
          reduction_length=8)


def test_loop_kernel_gemm_rows_over_part_of_an_axis():
    # @polyc.kernel: C's rows (i, j) with j over range(nj - 1) of C's nj were
    # one GEMM row index of stride nj - 1 (wrong rows of C); i stays a loop
    @polyc.kernel
    def part_rows(C, A, B):
        ni, nj, nl = C.shape
        nk = B.shape[0]
        for i in range(ni):
            for j in range(nj - 1):
                for l in range(nl):
                    for k in range(nk):
                        C[i, j, l] += A[i, j, k] * B[k, l]
    rng = np.random.default_rng(0)
    C, A, B = rng.random((3, 4, 5)), rng.random((3, 4, 6)), rng.random((6, 5))
    want = C.copy()
    part_rows.py_func(want, A, B)
    part_rows(C, A, B)
    np.testing.assert_allclose(C, want, rtol=1e-12, atol=1e-12)
    assert re.search(r"polyc_gemm\w*_f64\(", part_rows.source)   # still a GEMM call


# -- boolean selections computed with, stored back, reduced later -----------

def _nbody_inverse_cube(pos):
    # npbench's nbody: inv_r3[inv_r3 > 0] = inv_r3[inv_r3 > 0] ** (-1.5)
    x = pos[:, 0:1]
    inv_r3 = (x.T - x) ** 2 + 0.0
    inv_r3[inv_r3 > 0] = inv_r3[inv_r3 > 0] ** (-1.5)
    return inv_r3


def _radial_means(data, radius):
    # npbench's azimint_naive: the selection bound to a name, reduced later
    rmax = radius.max()
    res = np.zeros_like(data, shape=(2,))
    for i in range(2):
        mask = np.logical_and(rmax * i / 2 <= radius, radius < rmax * (i + 1) / 2)
        values = data[mask]
        res[i] = values.mean()
    return res


def _escape_steps(z, c):
    # npbench's mandelbrot1 (real-valued here): a mask object reused by
    # several selections, a scalar and a selection expression stored under it
    z, n = z.copy(), np.zeros_like(z)
    for it in range(2):
        inside = np.less(abs(z), 2.0)
        n[inside] = it
        z[inside] = z[inside] ** 2 + c[inside]
    return z, n


def _rows_selected(x, w):
    y = x.copy()
    m = x[:, 0] > 0
    y[m] = np.sqrt(np.abs(x[m])) * w + 2 * x[m]     # w: the dimension after the mask's
    assert (x[m].dtype, x[m].ndim) == (x.dtype, 2)
    return y, (x[m] * w).sum(), np.max(x[m] - 1)


def test_boolean_selections_in_elementwise_arithmetic():
    # each was refused ('boolean indexing ... is not supported') unless one
    # reduction method followed the subscript at once
    rng = np.random.default_rng(3)
    check(_nbody_inverse_cube, rng.standard_normal((5, 3)))
    check(_radial_means, rng.random(24), rng.random(24), reduction_length=24)
    check(_escape_steps, rng.random(6) * 2, rng.random(6))
    check(_rows_selected, rand((5, 3), F64, seed=4), rand((3,), F64, seed=5),
          reduction_length=15)


def test_boolean_selections_whose_size_matters_are_refused():
    x = rand((4, 3), F32, seed=6)
    cases = [
        (lambda a: a[a > 0], "returns x\\[mask\\]"),
        (lambda a: len(a[a > 0]), "len\\(\\) of x\\[mask\\]"),
        (lambda a: a[a > 0] + a, "np.add of x\\[mask\\] and an array of shape \\(4, 3\\)"),
        (lambda a: np.concatenate([a[a > 0], a.ravel()]), "np.concatenate of x\\[mask\\]"),
        (lambda a: a[a > 0] * a[a < 0], "two different masks"),
    ]
    for fn, message in cases:
        with pytest.raises(UnsupportedError, match=message):
            polyc.jit(fn)(x)

    def other_key(a):
        y = a.copy()
        y[a < 0] = a[a > 0]
        return y
    with pytest.raises(UnsupportedError, match="assigned under another key"):
        polyc.jit(other_key)(x)


def test_a_numpy_buffer_made_inside_is_traced():
    # npbench creates its outputs with np.empty(shape, dtype) and fills them
    # (was a TraceError naming like=x): polyc.graph.creating
    def fill(x):
        out = np.empty((x.shape[0], 2), dtype=np.float32)
        out[:, 0] = x.sum(axis=1)
        out[:, 1] = x[:, 0]
        return out
    check(fill, rand((3, 4), F32))


# -- np.histogram with a number of equal bins --------------------------------

def _azimint_hist(data, radius, on_edges):
    # npbench's azimint_hist: the weighted histogram over the plain one
    return (np.histogram(radius, 5, weights=data)[0] / np.histogram(radius, 5)[0],
            np.histogram(radius, 3, range=(0.2, 0.7))[1], *np.histogram(on_edges, 4))


def test_histogram_of_equal_bins_is_numpys():
    # was: 'np.histogram is not supported by polyc.jit'; on_edges: elements
    # on the bins' edges (numpy's corrections of a bin within an ulp)
    rng = np.random.default_rng(7)
    check(_azimint_hist, rng.random(40), rng.random(40), np.linspace(0, 1, 41),
          reduction_length=40)
    with pytest.raises(UnsupportedError, match="bins='auto'"):
        polyc.jit(lambda a: np.histogram(a, bins="auto"))(rng.random(8))


def test_selection_by_a_constant_mask_is_a_gather():
    # a numpy mask's positions are known while tracing: x[keep] is an array of
    # its count of rows (was refused unless a reduction followed at once)
    keep = np.array([True, False, True, True, False, True])

    def rows(a):
        y = a.copy()
        y[keep] = a[keep] * 2 + 1
        return a[keep], y
    check(rows, rand((6, 3), F64, seed=8))


def test_linspace_between_traced_endpoints():
    # was: 'np.linspace is not supported by polyc.jit'
    check(lambda a: (np.linspace(a.min(), a.max(), 7), *np.linspace(0, a.max(), 4,
                                                                      endpoint=False,
                                                                      retstep=True)),
          rand((9,), F64, seed=9))
