"""``any all diag diagonal convolve correlate cross isclose nansum nanmean
nanmax nanmin atleast_*d column_stack dstack rot90 trapezoid sinc linalg.norm``, the
ufuncs ``logical_xor signbit deg2rad rad2deg float_power``, ``np.fix``,
integer shifts by a constant, ``select``, and the ufunc methods ``outer``,
``accumulate`` and the logical ``reduce`` in ``@polyc.jit``, each against plain numpy (``check``:
shapes, dtypes, values within ``polyc.testing``'s tolerances)."""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from polyc.errors import UnsupportedError

from .test_ops import F32, F64, check, rand


def _logic(x):
    return (np.any(x > 0, axis=1), np.all(x > -0.9, axis=0), (x > 0).any(), x.all(),
            np.any(x, axis=(0, 1), keepdims=True), np.isclose(x, x * 1.000001),
            np.isclose(x, x + 1e-3, atol=1e-2), np.logical_xor(x > 0, x < 0.5),
            np.signbit(x))


def _diagonals(x):
    return (np.diag(x[0]), np.diag(x[0], 2), np.diag(x[1, :3], -1), np.diag(x),
            np.diag(x, 1), np.diagonal(x), np.diagonal(x, -2), np.trace(x[:, :5]))


def _signals(x):
    a, v = x[0], x[1, :3]
    return (np.convolve(a, v), np.convolve(a, v, "same"), np.convolve(a, v, "valid"),
            np.convolve(v, a), np.correlate(a, v), np.correlate(a, v, "full"),
            np.correlate(a, v, "same"), np.trapezoid(x, axis=1), np.trapezoid(x[0], dx=0.5),
            np.trapezoid(x, x=np.arange(6.0) ** 2, axis=-1), np.sinc(x))


def _nans(x):
    y = np.where(x > 0.6, np.nan, x)
    return (np.nansum(y, axis=0), np.nanmean(y, axis=1), np.nanmax(y, axis=1),
            np.nanmin(y), np.nansum(y))


def _layout(x):
    return (np.atleast_2d(x[0]), np.atleast_3d(x), np.atleast_3d(x[0]), np.atleast_1d(x),
            np.column_stack([x[0], x[1]]), np.column_stack([x, x[:, :1]]),
            np.dstack([x, x]), np.rot90(x), np.rot90(x, 2), np.rot90(x, 3),
            np.rot90(x, -1, axes=(1, 0)), np.cross(x[:, :3], x[:, 2:5]),
            np.cross(x[:, :2], x[:, 3:5]), np.cross(x[:2, :3], x[2:4, :3], axis=0))


def _ufunc_methods(x):
    return (np.add.outer(x[0], x[1]), np.multiply.outer(x[0, :2], x[:2]),
            np.maximum.outer(x[0], x[1, :3]), np.add.accumulate(x, axis=1),
            np.multiply.accumulate(1 + x / 10), np.maximum.accumulate(x, axis=1),
            np.minimum.accumulate(x), np.deg2rad(x), np.rad2deg(x),
            np.float_power(np.abs(x), 1.5), np.fix(x * 3),
            np.logical_and.reduce(x > -0.5), np.logical_or.reduce(x > 0.5, axis=1),
            np.logical_and.reduce(x, axis=(0, 1), keepdims=True))


def _select(x):
    return (np.select([x < -0.5, x > 0.5], [x * 2, x * 3], default=0.0),
            np.select([x < 0], [1], default=0), np.select([x > 0, x > -0.5], [x, 2 * x], -1.0))


@pytest.mark.parametrize("dtype", [F32, F64])
def test_select(dtype):
    """``np.select``: the first condition's choice, else the default (with
    numpy's dtypes: Python scalars are weak)."""
    check(_select, rand((4, 6), dtype, seed=41))


@pytest.mark.parametrize("fn", [_logic, _diagonals, _signals, _nans, _layout, _ufunc_methods])
@pytest.mark.parametrize("dtype", [F32, F64])
def test_more_functions(fn, dtype):
    check(fn, rand((4, 6), dtype, seed=40), reduction_length=6)


def test_integer_shifts_by_a_constant():
    i = np.array([[7, -7, 0, 1 << 20], [-1, 5, 3, -(1 << 30)]], np.int64)
    check(lambda a: (a >> 1, a >> 3, a << 2, np.right_shift(a, 4), np.left_shift(a, 1)), i)
    s = np.array([[1, 63, 64, -1], [70, 0, 2, 5]], np.int64)
    check(lambda a, b: (a >> b, a << b), i, s)       # counts beyond the width: numpy's 0/-1
    with pytest.raises(TypeError, match="shift"):
        polyc.jit(lambda a: a >> 1)(i.astype(np.float64))


def test_nan_max_of_a_slice_of_nans_is_nan():
    x = np.array([[np.nan, np.nan], [1.0, np.nan]])
    with np.errstate(invalid="ignore"), pytest.warns(RuntimeWarning):
        want = np.nanmax(x, axis=1)
    np.testing.assert_array_equal(polyc.jit(lambda a: np.nanmax(a, axis=1))(x), want)


def test_convolve_and_correlate_of_a_longer_second_operand():
    # (correlate of a longer second operand was refused: numpy reverses its
    # correlate of the operands swapped, test_numpy_api_probe.py)
    a, v = rand((3,), F64, seed=41), rand((5,), F64, seed=42)
    check(lambda p, q: np.convolve(p, q, "same"), a, v)
    check(lambda p, q: np.correlate(p, q, "full"), a, v)


def test_running_maximum_propagates_nan_bit_for_bit():
    x = np.array([[1.0, np.nan, 3.0, 0.5], [2.0, 1.0, -np.inf, 4.0]])
    i = np.array([[3, 1, 4, 1, 5], [9, 2, 6, 5, 3]], np.int32)
    for f in (lambda a: np.maximum.accumulate(a, axis=1), lambda a: np.minimum.accumulate(a)):
        np.testing.assert_array_equal(polyc.jit(f)(x), f(x))
        got = polyc.jit(f)(i)
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, f(i))


def _norms(x):
    v = x[0]
    return (np.linalg.norm(x, "fro"), np.linalg.norm(x, 1), np.linalg.norm(x, -1),
            np.linalg.norm(x, np.inf), np.linalg.norm(x, -np.inf, keepdims=True),
            np.linalg.norm(x[None], 1, axis=(2, 1)), np.linalg.norm(v, 3),
            np.linalg.norm(v, 0), np.linalg.norm(v, -2), np.linalg.norm(x, 0.5, axis=1))


def _edges(x):
    n = x.shape[0]
    m = (x > 0) + (x < 0.5)                   # booleans: logical or, and
    return (x.clip(min=0), x.clip(max=0.25), np.where(m * (x > -0.5), x, 0.0),
            np.split(x, n // 2)[0], np.repeat(x[0], n // 2))


@pytest.mark.parametrize("fn", [_norms, _edges])
@pytest.mark.parametrize("dtype", [F32, F64])
def test_matrix_norms_boolean_arithmetic_and_counts_from_extents(fn, dtype):
    check(fn, rand((4, 6), dtype, seed=80), reduction_length=24)


def test_float16_mean_accumulates_in_float32_as_numpy():
    """70000 ones in float16: the sum overflows float16 (65504), the mean
    (numpy sums float16 in float32) is 1."""
    x = np.ones((2, 70000), np.float16)
    check(lambda x: (x.mean(), x.mean(axis=1), np.average(x)), x)


def _statistics(x):
    return (np.cov(x), np.cov(x, rowvar=False, bias=True), np.cov(x[:2], x[2:], ddof=2),
            np.cov(x[0])[None], np.corrcoef(x), np.corrcoef(x[0])[None],
            np.corrcoef(x, rowvar=False, dtype=x.dtype),
            *np.array_split(x, 4, axis=1), *np.array_split(x, [1, 3]))


@pytest.mark.parametrize("dtype", [F32, F64])
def test_covariance_correlation_and_array_split(dtype):
    check(_statistics, rand((4, 9), dtype, seed=81), reduction_length=9)


def _where_initial(x):
    keep = np.array([True, False, True, True, False, True])
    return (np.sum(x, where=x > 0), x.sum(axis=1, where=x > 0, keepdims=True),
            np.max(x, initial=0.5), np.max(x, axis=0, where=x < 0.5, initial=-10.0),
            np.mean(x, axis=1, where=x > -0.5), x.prod(axis=0, where=x > 0, initial=2.0),
            np.min(x, initial=-0.25, axis=1), np.sum(x, initial=3.0),
            np.sum(x, axis=0, where=keep))


@pytest.mark.parametrize("dtype", [F32, F64])
def test_reductions_with_where_and_initial(dtype):
    check(_where_initial, rand((4, 6), dtype, seed=82), reduction_length=24)


def _matrix_powers(x):
    a = x[:, :4] / 2
    b = np.stack([a, a.T])
    return (np.linalg.matrix_power(a, 0), np.linalg.matrix_power(a, 1),
            np.linalg.matrix_power(a, 2), np.linalg.matrix_power(a, 5),
            np.linalg.matrix_power(b, 3))


@pytest.mark.parametrize("dtype", [F32, F64])
def test_matrix_power(dtype):
    check(_matrix_powers, rand((4, 6), dtype, seed=42), reduction_length=16)


def test_negative_matrix_power_is_refused_by_name():
    with pytest.raises(UnsupportedError, match="negative power"):
        polyc.jit(lambda a: np.linalg.matrix_power(a, -1))(rand((3, 3), F32))


def _splits_and_polynomials(x):
    a, b = np.hsplit(x, 2)
    c, d = np.vsplit(x, [1])
    e, f = np.hsplit(x[0], [2])
    return (a - b, c.sum() + d.sum(), e.sum() - f.sum(), np.dsplit(x[..., None], 1)[0],
            x.take([1, 2], axis=1), x.take([0, 5, 11]), np.polyval([1.0, -2.0, 0.5], x),
            np.polyval(x[0, :3], x), np.polyval(np.array([2, 1]), x))


@pytest.mark.parametrize("dtype", [F32, F64])
def test_splits_take_method_and_polyval(dtype):
    check(_splits_and_polynomials, rand((4, 6), dtype, seed=43), reduction_length=3)


def test_real_imag_and_conjugate_of_real_arrays():
    check(lambda x: (np.real(x) * 2, np.imag(x), np.conj(x), np.conjugate(x) + 1),
          rand((3, 4), F32, seed=44))
