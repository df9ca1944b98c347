"""The layout and summary functions of ``@polyc.jit`` built from views,
reductions and ``concatenate`` (``ravel flatten flip roll inner kron ptp
average count_nonzero nan_to_num``, ``np.pad``'s edge/reflect/symmetric/wrap
modes, ``cumsum`` of a flattened array) and the float ufuncs ``floor_divide``
(numpy's ``npy_divmod``, bit for bit), ``fmod``, ``copysign`` and
``heaviside``, each against plain numpy (``check``: shapes, dtypes, values
with ``polyc.testing``'s tolerances); a plan traced at one size is reused at
another only where the guards it recorded hold."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import polyc
from polyc.errors import ShapeError, UnsupportedError

from .test_ops import F32, F64, check, rand


def _layout(x):
    return (np.ravel(x), x.flatten(), x.ravel(), np.flip(x), np.flip(x, -1),
            np.fliplr(x), np.flipud(x), np.flip(x, (0, 1)))


def _rolls(x):
    return (np.roll(x, 2, axis=1), np.roll(x, -1, axis=0), np.roll(x, 3),
            np.roll(x, (1, -2), axis=(0, 1)), np.roll(x, 0, axis=1), np.roll(x, 11, axis=1),
            np.roll(x, -7, axis=-1))


def _summaries(x):
    return (np.ptp(x, axis=0), np.ptp(x), np.ptp(x, axis=-1, keepdims=True),
            np.average(x, axis=1), np.average(x), np.count_nonzero(x > 0, axis=0),
            np.count_nonzero(np.rint(3 * x), axis=(0, 1)))


def _products(x):
    return np.inner(x, x), np.kron(x[:2, :3], x[:3, :2]), np.kron(x[0], x[1, :3]), \
        np.vdot(x, x), np.vdot(x[0], x[1])


@pytest.mark.parametrize("fn", [_layout, _rolls, _summaries, _products])
@pytest.mark.parametrize("dtype", [F32, F64])
def test_array_functions(fn, dtype):
    check(fn, rand((5, 6), dtype, seed=3), reduction_length=36)


def test_functions_of_three_axes_and_integers():
    x = rand((3, 4, 5), F64, seed=1)
    check(lambda a: (np.inner(a, a[0]), np.kron(a, a[:1, :2, :2]), np.flip(a, 1),
                     np.roll(a, 2, axis=-1), a.flatten()), x, reduction_length=5)
    i = (rand((4, 5), F64, seed=2) * 10).astype(np.int32)
    check(lambda a: (np.ptp(a, axis=1), np.count_nonzero(a, axis=1), np.average(a, axis=0),
                     np.nan_to_num(a), np.roll(a, 1, axis=0)), i, reduction_length=5)


def test_weighted_average():
    x, w = rand((4, 6), F32, seed=4), rand((4, 6), F32, seed=5, lo=0.1)
    w1 = rand((6,), F64, seed=6, lo=0.1)
    check(lambda a, b, c: (np.average(a, axis=1, weights=b), np.average(a, weights=b),
                           np.average(a, axis=-1, weights=c),
                           np.average(a, axis=0, weights=b, keepdims=True)),
          x, w, w1, reduction_length=24)
    with pytest.raises(TypeError, match="Axis must be specified"):
        polyc.jit(lambda a, c: np.average(a, weights=c))(x, w1)


def _average_returned(a, w):
    return (np.average(a, axis=1, weights=w, returned=True)
            + np.average(a, axis=(0, 2), returned=True) + np.average(a, returned=True)
            + np.average(a, axis=1, weights=np.ones_like(a), returned=True, keepdims=True))


@pytest.mark.parametrize("shape", [(3, 4, 5), (2, 4, 7)])
def test_average_returned(shape):
    """``np.average(..., returned=True)``: the average and the sum of the
    weights (the count without weights, symbolic: one plan for both
    shapes); it was refused."""
    check(_average_returned, rand(shape, F32, seed=7), rand((4,), F32, seed=8, lo=0.1),
          reduction_length=35)


def test_nan_to_num():
    x = rand((3, 8), F32, seed=7)
    x[0, :4] = [np.nan, np.inf, -np.inf, -0.0]
    check(lambda a: (np.nan_to_num(a), np.nan_to_num(a, nan=-1.0, posinf=9.0, neginf=-9.0)), x)


@pytest.mark.parametrize("mode", ["edge", "reflect", "symmetric", "wrap"])
@pytest.mark.parametrize("dtype", [F32, F64])
def test_pad_modes(mode, dtype):
    x = rand((5, 7), dtype, seed=8)
    check(lambda a: (np.pad(a, 2, mode=mode), np.pad(a, ((1, 3), (0, 2)), mode=mode),
                     np.pad(a[0], (4, 0), mode=mode)), x)


def test_pad_with_constants_per_side():
    """``constant_values`` per axis and side, numpy's corners (the last
    axis padded wins); it was refused unless all were equal."""
    x = rand((3, 4), F32, seed=9)
    check(lambda a: (np.pad(a, ((1, 1), (2, 2)), constant_values=((1.0, 2.0), (3.0, 4.0))),
                     np.pad(a, ((0, 2), (1, 0)), constant_values=(5.0, 6.0)),
                     np.pad(a, 1, constant_values=-1.0)), x)
    i = (x * 10).astype(np.int64)
    check(lambda a: np.pad(a, (2, 1), constant_values=((7, 8), (9, 10))), i)


def test_pad_wider_than_the_axis_is_refused():
    x = rand((3, 4), F32)
    with pytest.raises(UnsupportedError, match="wider than the axis"):
        polyc.jit(lambda a: np.pad(a, 3, mode="reflect"))(x)
    with pytest.raises(UnsupportedError, match="mode='median'"):
        polyc.jit(lambda a: np.pad(a, 1, mode="median"))(x)


def test_cumsum_of_a_flattened_array():
    x = rand((4, 5), F64, seed=9)
    check(lambda a: (np.cumsum(a), a.cumprod(), np.cumsum(a.T)), x, reduction_length=20)


@pytest.mark.parametrize("dtype", [F32, F64])
def test_float_floor_divide_fmod_copysign_heaviside_bit_for_bit(dtype):
    rng = np.random.default_rng(10)
    a = (rng.standard_normal(3000) * 10).astype(dtype)
    b = (rng.standard_normal(3000) * 3).astype(dtype)
    a[:12] = [0, -0.0, 5, -5, np.inf, -np.inf, np.nan, 1, 3, -3, 7, 1e-30]
    b[:12] = [1, 1, 0, 0, 2, -2, 1, np.nan, -1.5, 1.5, 0.7, -3]
    a[20:40] = np.arange(20) * dtype(0.1)         # quotients near integers
    b[20:40] = dtype(0.1)

    def f(x, y):
        return (x // y, np.floor_divide(x, 0.3), np.fmod(x, y), np.copysign(x, y),
                np.heaviside(x, y), x // 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = f(a, b)
        actual = polyc.jit(f)(a, b)
    for got, want in zip(actual, expected):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)          # NaNs in the same places
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_fmod_and_divmod(dtype):
    """``np.fmod`` of integers (the dividend's sign; 0 for a zero divisor,
    as numpy's) and ``np.divmod``/``divmod()`` (``(a // b, a % b)``): both
    were refused."""
    rng = np.random.default_rng(11)
    a = rng.integers(-30, 30, 200).astype(dtype)
    b = rng.integers(-5, 5, 200).astype(dtype)

    def f(x, y):
        q, r = np.divmod(x, y)
        q2, r2 = divmod(x, -3)
        return np.fmod(x, y), np.fmod(x, 4), np.fmod(-7, y), q, r, q2, r2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = f(a, b)
        actual = polyc.jit(f)(a, b)
    for got, want in zip(actual, expected):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_integer_power_with_a_negative_literal_exponent_is_numpys_value_error():
    """numpy raises ValueError for ``int_array ** -1``; polyc computed
    ``pow`` of the integers (0 ** -1 gave -2**31)."""
    i = np.arange(-2, 4, dtype=np.int32)
    for f in (lambda a: a ** -1, lambda a: np.power(a, -2)):
        with pytest.raises(ValueError, match="Integers to negative integer powers"):
            f(i)
        with pytest.raises(ShapeError, match="Integers to negative integer powers"):
            polyc.jit(f)(i)
    check(lambda a: (a ** 2, a.astype(np.float64) ** -1, np.power(a, 3)), i)


def test_roll_and_pad_plans_are_reused_only_where_their_guards_hold():
    f = polyc.jit(lambda a: (np.roll(a, 3), np.pad(a, 2, mode="reflect")))
    for n in (10, 6, 4, 3, 2):
        x = rand((n,), F64, seed=n)
        if n < 3:
            with pytest.raises(UnsupportedError):
                f(x)
            continue
        got = f(x)
        np.testing.assert_array_equal(got[0], np.roll(x, 3))
        np.testing.assert_array_equal(got[1], np.pad(x, 2, mode="reflect"))


def test_boolean_arguments_and_captured_masks():
    """A bool argument or closed-over bool array is a mask (int32 0/1 in the
    kernels, converted at each call): ``where``, logic, sums and returning
    it give numpy's values and dtypes; a captured mask changed between
    calls is read again; one-element reductions return numpy scalars."""
    x = rand((4, 6), F32, seed=20)
    m = rand((4, 6), F32, seed=21) > 0
    causal = np.triu(np.ones((6, 6), dtype=bool), 1)

    def f(a, mask):
        s = np.where(mask, a, -1.0)
        return s, mask & (a > 0), ~mask, mask.sum(1), mask, np.where(causal, -np.inf, a[0])
    check(f, x, m)
    causal[0, 1] = False                       # a closed-over mask is fed at every call
    np.testing.assert_array_equal(jitted_f := polyc.jit(f)(x, m)[5], f(x, m)[5])
    assert jitted_f[0, 1] == x[0, 1]
    s = polyc.jit(lambda a, mask: (a.sum(), mask.sum()))(x, m)
    assert type(s[0]) is np.float32 and type(s[1]) is np.int64


def test_causal_mask_built_in_the_trace():
    def attn(q, k):
        s = q @ k.T
        n = s.shape[-1]
        s = np.where(np.triu(np.ones((n, n), dtype=bool), 1), -np.inf, s)
        p = np.exp(s - s.max(-1, keepdims=True))
        return p / p.sum(-1, keepdims=True)
    check(attn, rand((8, 4), F32, seed=22), rand((8, 4), F32, seed=23), reduction_length=8)


def _mask_extremes(x):
    m = x > 0
    return (m.max(), m.min(axis=0), np.max(m, axis=1, keepdims=True), np.amin(m),
            np.maximum.reduce(m, axis=0), np.minimum.reduce(m, axis=1))


def test_max_and_min_of_masks_are_masks():
    """numpy's max and min of a bool array are bool (they were int64 0/1)."""
    x = rand((4, 5), F32, seed=6)
    x[0] = -1.0          # a row with no True (its max is False)
    x[:, 2] = 1.0        # a column of True (its min is True)
    check(_mask_extremes, x)


def _fortran_order(x):
    return (x.reshape(3, 10, order="F"), np.reshape(x, (-1,), order="F"),
            x.ravel(order="F"), x.flatten("F"), x.reshape(5, 2, 3, order="F").sum(1),
            x[0].reshape(2, 3, order="A"))


def test_fortran_order_reshape_and_ravel():
    """``order="F"``: the first index fastest (it was refused)."""
    check(_fortran_order, rand((5, 6), F32, seed=7), reduction_length=2)


def _diffs_with_ends(x):
    return (np.diff(np.cumsum(x, 1), axis=1, prepend=0), np.diff(x, axis=0, append=x[:1]),
            np.diff(x, prepend=1.5, append=x[:, -1:]), np.diff(x[0], prepend=0, n=2),
            np.diff(x, prepend=x[:, :1]))


@pytest.mark.parametrize("dtype", [F32, F64])
def test_diff_with_prepend_and_append(dtype):
    """``prepend``/``append`` concatenated along the axis first, a scalar as
    an extent-1 slab of its own dtype (numpy's: ``prepend=0`` makes a
    float32 difference float64); they were refused."""
    check(_diffs_with_ends, rand((4, 5), dtype, seed=11), reduction_length=5)
