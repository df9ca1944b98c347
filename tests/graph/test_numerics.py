"""``np.gradient``, ``np.nanvar`` and ``np.nanstd`` under :func:`polyc.jit`
(polyc/graph/numerics.py) against numpy: spacings as scalars, as evenly and
unevenly spaced coordinates (captured or passed), both edge orders, several
axes, integer inputs, several shapes of one plan; NaNs left out of the
moments."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import polyc
from polyc.errors import UnsupportedError

from .test_ops import F32, F64, check, rand

_X = np.cumsum(np.abs(rand((10,), F64, seed=90)) + 0.1)


@pytest.mark.parametrize("fn", [
    lambda y, x: np.gradient(y),
    lambda y, x: np.gradient(y, 0.5, edge_order=2),
    lambda y, x: np.gradient(y, x),                     # passed coordinates
    lambda y, x: np.gradient(y, x, edge_order=2),
    lambda y, x: np.gradient(y, _X[::-1]),              # captured, decreasing
    lambda y, x: np.gradient(y, np.linspace(0.0, 1.0, 10), edge_order=2),   # even: one spacing
])
def test_gradient_1d(fn):
    check(fn, rand((10,), F32, seed=91), _X, reduction_length=4)


@pytest.mark.parametrize("dtype", [F32, F64])
def test_gradient_along_axes(dtype):
    """The gradient of a 2-D field along both axes (a tuple), along one with
    coordinates; integers in float64."""
    check(lambda u: np.gradient(u, 0.1, 0.2), rand((6, 7), dtype, seed=93), reduction_length=4)
    check(lambda y: np.gradient(y, _X, axis=0), rand((10, 3), dtype, seed=92),
          reduction_length=4)
    check(lambda a: np.gradient(a), (np.arange(8) ** 2).astype(np.int32))


def test_gradient_one_plan_serves_several_lengths():
    f = polyc.jit(lambda y: np.gradient(y, 0.25))
    for n in (9, 5, 2):
        y = rand((n,), F64, seed=94 + n)
        polyc.testing.assert_close(f(y), np.gradient(y, 0.25))


def test_gradient_of_too_short_an_axis_is_numpys_value_error():
    with pytest.raises(ValueError, match="too small"):
        polyc.jit(lambda y: np.gradient(y, edge_order=2))(rand((2,), F64, seed=95))


@pytest.mark.parametrize("fn", [
    lambda x: np.nanvar(x),
    lambda x: np.nanvar(x, axis=0),
    lambda x: np.nanstd(x, axis=1, ddof=1, keepdims=True),
    lambda x: np.nanvar(x, axis=(0, 1), ddof=30),       # no degree of freedom left: NaN
])
def test_nanvar_nanstd(fn):
    x = rand((4, 6), F32, seed=96)
    x[1, 2] = np.nan
    x[3, :] = np.nan                # a row of NaNs only: NaN, as numpy (which warns)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        check(fn, x, reduction_length=6)


def test_nanstd_of_integers_is_std():
    check(lambda a: np.nanstd(a, axis=0), np.arange(12, dtype=np.int32).reshape(3, 4))


def _gaussian_on_a_grid(x, y):
    X, Y = np.meshgrid(x, y)
    xi, yi = np.meshgrid(x, y, indexing="ij", sparse=True)
    return np.exp(-(X ** 2 + Y ** 2)), xi * yi, np.meshgrid(x, y, np.arange(3))[2]


def _joined(a, b):
    return (*np.broadcast_arrays(a[:, None], b, 1.0), np.append(a, b), np.append(a, 5),
            np.append(a[:, None], a[:, None], axis=1))


def test_meshgrid_broadcast_arrays_append():
    """numpy's grids and joins (they were refused): values, shapes and
    dtypes (a scalar appended or broadcast is numpy's array of it), and one
    plan for grids of other lengths."""
    x, y = rand((4,), F64, seed=97), rand((6,), F32, seed=98)
    check(_gaussian_on_a_grid, x, y)
    check(_joined, rand((3,), F32, seed=99), rand((4,), F32, seed=100))
    f = polyc.jit(_gaussian_on_a_grid)
    for n, m in ((5, 2), (1, 3)):
        x, y = rand((n,), F64, seed=n), rand((m,), F32, seed=m)
        for a, e in zip(f(x, y), _gaussian_on_a_grid(x, y)):
            polyc.testing.assert_close(a, e)


def _norms(x):
    vn, mn = np.linalg.vector_norm, np.linalg.matrix_norm
    return (vn(x), vn(x, axis=-1, ord=1), vn(x, axis=(0, 2), ord=np.inf, keepdims=True),
            mn(x), mn(x, ord=1, keepdims=True))


def test_vector_norm_and_matrix_norm():
    """numpy 2's linalg.vector_norm (every axis as one vector for None or a
    tuple) and matrix_norm (the last two axes); they were refused."""
    check(_norms, rand((2, 3, 4), F32, seed=101), reduction_length=24)


def _tone_curves(x):
    return (np.interp(x, [0, 0.5, 1], [0, 0.8, 1]),
            np.interp(x, np.array([0.0, 0.25, 0.25, 1.0]), [1.0, 2.0, 3.0, 4.0], left=-1, right=9),
            np.interp(x.astype(np.int32), [0, 1], [10, 20]), np.interp(x, [0.3], [7.0]),
            np.interp(x, [0.0, 1.0], [0.0, np.inf]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_interp_at_constant_points_is_numpys(dtype):
    """``np.interp`` of a traced array at constant points (a tone curve):
    numpy's values bit for bit, NaN, infinities, the sample points
    themselves, ``left``/``right``, a repeated point and one point; it
    was refused as a function polyc does not cover."""
    x = (np.random.default_rng(21).random((6, 7)) * 1.4 - 0.2).astype(dtype)
    x[0, :6] = [0, 0.5, 1, np.nan, -np.inf, np.inf]
    with np.errstate(invalid="ignore"):
        want = _tone_curves(x)
        got = polyc.jit(_tone_curves)(x)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)
    with pytest.raises(UnsupportedError, match="traced xp"):
        polyc.jit(lambda a, p: np.interp(a, p, p))(x[0], np.array([0.0, 1.0]))


def test_interp_at_the_most_points_compiles():
    """``np.interp`` at 256 points (the documented limit): the chain of one
    comparison per point nested deeper than polyc's parser allows (a
    ParseError from about 128 points); the segment is now found by an
    unrolled binary search."""
    xp = np.sort(np.random.default_rng(22).random(256))
    xp[10] = xp[11]                                  # a repeated point
    fp = np.cos(7 * xp)
    x = np.random.default_rng(23).random((5, 9)) * 1.2 - 0.1
    x[0, :4] = [xp[0], xp[10], xp[-1], np.nan]
    fn = lambda a: np.interp(a, xp, fp, left=-2.0)  # noqa: E731
    np.testing.assert_array_equal(polyc.jit(fn)(x), fn(x))
    with pytest.raises(UnsupportedError, match="more than 256 sample points"):
        polyc.jit(lambda a: np.interp(a, np.arange(257.0), np.arange(257.0)))(x)
