"""Operation coverage of ``@polyc.jit`` (issue 14): every numpy call the
graph layer traces, checked against plain numpy on seeded random inputs.

Each case runs the *same* Python function twice: on numpy arrays (the
reference) and through ``polyc.jit``.  The result must have numpy's shape
and dtype (numpy 2 / NEP 50 promotion) and values within
:func:`polyc.testing.assert_close`'s per-dtype tolerances; the inputs must
be unchanged afterwards.  Each distinct jitted function compiles C, so the
cases share functions where they can and use small sizes.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import polyc
from polyc.errors import ShapeError, TraceError, UnsupportedError
from polyc.testing import assert_close

HERE = os.path.basename(__file__)
F32, F64 = np.float32, np.float64

#: jitted versions of the case functions, shared between parametrizations
_JITTED: dict = {}


def jitted(fn):
    if fn not in _JITTED:
        _JITTED[fn] = polyc.jit(fn)
    return _JITTED[fn]


def rand(shape, dtype=F32, seed=0, lo=-1.0, hi=1.0):
    rng = np.random.default_rng(seed)
    return rng.uniform(lo, hi, size=shape).astype(dtype)


def check(fn, *args, reduction_length: int = 1):
    """``polyc.jit(fn)(*args)`` equals ``fn(*args)``: structure, shapes,
    dtypes, values; the arguments are not modified."""
    expected = fn(*args)
    before = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    actual = jitted(fn)(*args)
    for a, b in zip(args, before):
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b, err_msg="polyc.jit modified an input")
    _compare(actual, expected, reduction_length)
    return actual


def _compare(actual, expected, n):
    if isinstance(expected, (tuple, list)):
        assert type(actual) is type(expected) and len(actual) == len(expected)
        for k, (a, e) in enumerate(zip(actual, expected)):
            _compare_one(a, e, n, f"output {k}")
    else:
        _compare_one(actual, expected, n, "output")


def _compare_one(a, e, n, name):
    if isinstance(e, np.generic):       # numpy's one-element reductions give scalars
        assert type(a) is type(e), f"{name}: {type(a).__name__}, numpy gives {type(e).__name__}"
    else:
        assert isinstance(a, np.ndarray), f"{name}: {type(a).__name__} is not an ndarray"
    a, e = np.asarray(a), np.asarray(e)
    assert a.shape == e.shape, f"{name}: shape {a.shape}, numpy gives {e.shape}"
    assert a.dtype == e.dtype, f"{name}: dtype {a.dtype}, numpy gives {e.dtype}"
    assert_close(a, e, reduction_length=n, name=name)


# -- elementwise ----------------------------------------------------------------------
def _ew_binary(a, b):
    return a + b, a - b, a * b, a / b, np.maximum(a, b), np.minimum(a, b)


def _ew_scalars(x):
    return (2 - x, x - 2, x * 2.5, 2.5 * x, 1 / x, x / 3, x ** 2, x ** 3, 2.0 ** x, -x,
            x + 1, x ** 0.5, x ** -1, x ** 0, x ** 1.5, x * np.float64(2.0))


def _ew_unary(x):
    p = np.abs(x) + 0.5
    return (np.sqrt(p), np.reciprocal(p), np.exp(x), np.log(p), np.tanh(x), np.abs(x),
            abs(x), np.negative(x), np.power(p, x), np.square(x))


def _ew_select(x, y):
    m = (x > 0) & (y < 0.5) | ~(x < -0.5)
    return (np.where(x > 0, x, 0.1 * x), np.where(m, x, y), np.where(x >= y, 1.0, y),
            np.where(x != y, x, 0), np.where(x == x, y, x), np.where(x <= 0.25, x, y))


def _ew_clip(x):
    return np.clip(x, -0.5, 0.5), x.clip(-0.25, None), np.clip(x, None, 0.0)


def _erf(x):
    import scipy.special
    return scipy.special.erf(x)


def _casts(x):
    return x.astype(np.float64), x.astype(np.float32), x.astype(np.float64) * x


SLOW_F64 = pytest.param(F64, marks=pytest.mark.slow)


@pytest.mark.parametrize("sa,sb,dtype", [((3, 1, 5), (4, 1), F32), ((3, 1, 5), (4, 1), F64),
                                         pytest.param((4, 5), (4, 5), F32, marks=pytest.mark.slow),
                                         ((1,), (2, 3), F64)])
def test_elementwise_binary_broadcast(sa, sb, dtype):
    check(_ew_binary, rand(sa, dtype, 1), rand(sb, dtype, 2, 0.5, 2.0))


def test_elementwise_mixed_dtypes():
    check(_ew_binary, rand((3, 4), F32, 1), rand((4,), F64, 2, 0.5, 2.0))


@pytest.mark.parametrize("dtype", [F32, SLOW_F64])
def test_scalar_operands_both_sides(dtype):
    out = check(_ew_scalars, rand((3, 4), dtype, 3, 0.5, 2.0))
    # NEP 50: Python scalars are weak, np.float64 is strong
    assert out[0].dtype == dtype and out[-1].dtype == F64


def _list_operands(x):
    return x + [1.0, 2.0, 3.0, 4.0], [[2.0], [0.5], [1.0]] * x, x < (0.0,) * 4, x - [1, 2, 3, 4]


def test_operators_take_lists_and_refuse_complex_scalars():
    """``x + [1.0, 2.0]`` is numpy's ``x + np.asarray([1.0, 2.0])`` (the
    operators returned NotImplemented: a bare TypeError); a complex scalar
    is a DTypeError naming its dtype."""
    check(_list_operands, rand((3, 4), F32, 5))
    for fn in (lambda x: x * 1j, lambda x: 2j + x):
        with pytest.raises(polyc.errors.DTypeError, match="complex128"):
            polyc.jit(fn)(rand((3, 4), F32, 5))


def _beyond_int32(x):
    return (x < 3_000_000_000, x != -3_000_000_000, 2**40 > x, x == 2**35,
            np.clip(x, -2**40, 2**40), np.clip(x.astype(np.int64), -2**70, 5))


def test_python_ints_beyond_an_integer_arrays_type():
    """numpy 2 compares and clips with a Python int of any size exactly, and
    raises OverflowError for arithmetic with one its type cannot hold; polyc
    gave TC's SemanticError about its own statement (or a ParseError for
    int64's minimum), now numpy's values or a DTypeError at the user's line."""
    x = np.arange(-3, 3, dtype=np.int32)
    check(_beyond_int32, x)
    for fn in (lambda x: x + 2**31, lambda x: np.maximum(x, 2**40)):
        with pytest.raises(polyc.errors.DTypeError, match=r"out of bounds for int32.*\n.*lambda"):
            polyc.jit(fn)(x)


@pytest.mark.parametrize("dtype", [F32, SLOW_F64])
def test_elementwise_unary(dtype):
    check(_ew_unary, rand((2, 1, 7), dtype, 4))


@pytest.mark.parametrize("dtype", [F32, SLOW_F64])
def test_where_comparisons_and_masks(dtype):
    check(_ew_select, rand((3, 5), dtype, 5), rand((5,), dtype, 6))


def _masks_as_numbers(x, y):
    m = x > 0.25
    return (m * x, m.astype(np.float32), (x < y).astype(np.int32), np.sum(m), np.sum(m, axis=0),
            np.mean(x > 0.5, axis=-1), np.where(m, 1, 0), m + 1.0, np.where(x > 0.5, y, 2))


def test_masks_as_numbers():
    x, y = rand((3, 5), F32, 5), rand((3, 5), F32, 6)
    check(_masks_as_numbers, x, y, reduction_length=15)


def _where_f64_mask(x, a):
    return np.where(x > 0.1, a, -a), (x <= 0.1) * a


def test_float64_comparison_in_a_float32_result():
    # 0.1 + 1e-10 > 0.1 in float64, but not against float32(0.1)
    x = np.array([0.1 + 1e-10, 0.1, 0.09, 0.2])
    out = check(_where_f64_mask, x, np.ones(4, F32))
    assert out[0].dtype == F32 and out[0][0] == 1


def _mask_f32_in_f64(x):
    return np.mean(x > 0.1), np.where(x > 0.1, 1.0, 0.0)


def test_float32_comparison_in_a_float64_result():
    # float32(0.1) > 0.1 is False in float32, but True against the double 0.1
    x = np.array([0.1, 0.2, 0.05, 0.1], F32)
    out = check(_mask_f32_in_f64, x, reduction_length=4)
    assert out[1][0] == 0


def _nan_masks(x):
    return (np.where(np.isnan(x), 0.0, x), np.where(np.isinf(x), 1.0, x),
            np.where(np.isfinite(x), x, -1.0), np.sum(np.isnan(x), axis=0),
            np.where(x.astype(bool), 1.0, 2.0))


def test_nan_masks_and_bool_casts():
    x = rand((3, 4), F64, 46)
    x[0, 1], x[1, 2], x[2, 0], x[2, 3] = np.nan, np.inf, -np.inf, 0.0
    check(_nan_masks, x)


def _int_reciprocal(x):
    return np.reciprocal(x)


def test_integer_reciprocal_truncates():
    check(_int_reciprocal, np.array([1, -1, 2, -2, 5, -7], np.int32))


def _masks_out(x, y):
    return x > 0, (x > 0.1) & (y < 0.3), np.isnan(x).T, np.copy(x <= y)[1:], ~(x == y)


def test_masks_as_outputs():
    x, y = rand((3, 4), F64, 53), rand((3, 4), F64, 54)
    y[0, 0] = x[0, 0]
    check(_masks_out, x, y)


def test_bitwise_operators_on_numbers():
    with pytest.raises(TypeError, match="invert"):
        polyc.jit(lambda x: np.where(~x, x, 0))(rand((3,), F32))
    x = np.arange(-4, 4, dtype=np.int32)
    np.testing.assert_array_equal(polyc.jit(lambda x: x & 3)(x), x & 3)


def test_clip():
    check(_ew_clip, rand((4, 6), F32, 7))


@pytest.mark.parametrize("dtype", [F32, F64])
def test_erf(dtype):
    pytest.importorskip("scipy.special")
    check(_erf, rand((5, 3), dtype, 8, -3, 3))


@pytest.mark.parametrize("dtype", [F32, F64])
def test_astype(dtype):
    check(_casts, rand((3, 4), dtype, 9))


def test_nan_propagation_maximum_minimum():
    a = rand((2, 6), F32, 10)
    b = rand((2, 6), F32, 11)
    a[0, 1] = np.nan
    b[1, 2] = np.nan
    a[1, 3] = b[1, 3] = np.nan
    out = check(_ew_binary, a, b)
    assert np.isnan(out[4][0, 1]) and np.isnan(out[4][1, 2]) and np.isnan(out[5][0, 1])
    assert np.isnan(out[5][1, 2]) and np.isnan(out[4][1, 3])


def _int_ops(a, b):
    return a + b, a * 3, a / b, a - 1.5


def _mixed_int_float(x, i, m):
    return x * i, x + i, np.where(x > i, x, -x), x @ m, np.where(x < i, x, i)


def test_float32_with_int64_computes_in_float64():
    # 2**24 + 1 is not a float32: numpy converts both operands to float64
    big = 2 ** 24 + 1
    x = np.full((2, 3), 2.0 ** 24, F32) + np.arange(3, dtype=F32)
    i = np.array([big, big - 2, big + 1], np.int64)
    m = np.full((3, 2), big, np.int64)
    out = check(_mixed_int_float, x, i, m, reduction_length=3)
    assert out[0].dtype == F64 and out[2].dtype == F32


def _floor_div_mod(a, b):
    return a // b, a % b, a // 3, -7 // b, a % 3, np.remainder(a, b)


def _float_mod(a, b):
    return a % b, a % 2.5, np.mod(a, b)


def test_floor_divide_and_remainder():
    i = np.array([7, -7, 7, -7, 0, 5], np.int32)
    j = np.array([2, 2, -2, -2, 3, 0], np.int32)
    with np.errstate(divide="ignore"):
        check(_floor_div_mod, i, j)    # numpy gives 0 for a zero divisor
    x = np.array([5.5, -5.5, 5.5, -5.5, 0.0], F32)
    check(_float_mod, x, np.array([2, 2, -2, -2, 3], F32))
    check(lambda a, b: (a // b, a // 2.5), x, np.array([2, 2, -2, -2, 3], F32))
    with pytest.raises(UnsupportedError, match="floor_divide"):
        polyc.jit(lambda a, b: a // b)(x > 0, x > 1)


def test_integer_true_divide_promotes():
    a = np.arange(1, 13, dtype=np.int32).reshape(3, 4)
    b = np.arange(2, 6, dtype=np.int32)
    out = check(_int_ops, a, b)
    assert out[2].dtype == F64 and out[0].dtype == np.int32


def _int_scalar_results(x):
    total = x.sum()
    return total, x / total, np.exp(x), np.sqrt(x), x.max() - x, x.sum(axis=0) * 2


def test_integer_rank0_results_between_kernels():
    check(_int_scalar_results, np.arange(1, 13, dtype=np.int32).reshape(3, 4),
          reduction_length=12)


def _scale(x, s):
    return x * s, s + 1


def test_rank0_arguments():
    check(_scale, rand((3,), F32, 52), np.array(3))
    check(_scale, rand((3,), F32, 52), np.array(2.5, F32))


# -- reductions -----------------------------------------------------------------------
def _red_methods(x, axis, keepdims):
    return (x.sum(axis=axis, keepdims=keepdims), x.max(axis=axis, keepdims=keepdims),
            x.min(axis=axis, keepdims=keepdims), x.mean(axis=axis, keepdims=keepdims),
            x.var(axis=axis, keepdims=keepdims), x.std(axis=axis, keepdims=keepdims, ddof=1))


def _red_functions(x, axis, keepdims):
    return (np.sum(x, axis=axis, keepdims=keepdims), np.amax(x, axis=axis, keepdims=keepdims),
            np.amin(x, axis, keepdims=keepdims), np.mean(x, axis, keepdims=keepdims),
            np.var(x, axis=axis, ddof=1, keepdims=keepdims), np.std(x, axis, keepdims=keepdims),
            np.max(x, axis=axis, keepdims=keepdims), np.min(x, axis=axis, keepdims=keepdims),
            np.std(x, axis=axis, keepdims=keepdims, correction=1))


def _jit_static(fn):
    key = ("static", fn)
    if key not in _JITTED:
        _JITTED[key] = polyc.jit(fn, static_argnames=("axis", "keepdims"))
    return _JITTED[key]


@pytest.mark.parametrize("fn,axis,keepdims,dtype", [
    (_red_methods, None, False, F32),
    pytest.param(_red_methods, -1, True, F64, marks=pytest.mark.slow),
    (_red_methods, (0, 2), False, F32),
    (_red_functions, 1, False, F64),
    (_red_functions, (-1, -3), True, F32),
    pytest.param(_red_functions, None, True, F64, marks=pytest.mark.slow),
])
def test_reductions(fn, axis, keepdims, dtype):
    x = rand((3, 4, 5), dtype, 12)
    before = x.copy()
    expected = fn(x, axis, keepdims)
    actual = _jit_static(fn)(x, axis=axis, keepdims=keepdims)
    np.testing.assert_array_equal(x, before)
    _compare(actual, expected, x.size)


def _red_size1(x):
    return x.sum(-1), x.mean(axis=(0, 1), keepdims=True), np.var(x, axis=0)


def test_reduction_over_size1_dims():
    check(_red_size1, rand((1, 4, 1), F32, 13), reduction_length=4)


# -- contractions ---------------------------------------------------------------------
def _matmul(a, b):
    return a @ b


def _matmul_fn(a, b):
    return np.matmul(a, b)


@pytest.mark.parametrize("sa,sb", [
    ((4, 3), (3, 5)), ((2, 4, 3), (3, 5)), ((2, 1, 4, 3), (3, 3, 2)), ((3,), (3, 5)),
    ((4, 3), (3,)), ((3,), (3,)), ((1, 4, 3), (2, 3, 5)),
])
def test_matmul(sa, sb):
    check(_matmul, rand(sa, F32, 14), rand(sb, F32, 15), reduction_length=3)


def test_matmul_function_float64():
    check(_matmul_fn, rand((2, 4, 3), F64, 14), rand((2, 3, 2), F64, 15), reduction_length=3)


def _dot(a, b):
    return np.dot(a, b)


@pytest.mark.parametrize("sa,sb", [((4, 3), (3, 5)), ((3,), (3,)), ((2, 4, 3), (5, 3, 2)),
                                   ((4, 3), (3,))])
def test_dot(sa, sb):
    check(_dot, rand(sa, F32, 16), rand(sb, F32, 17), reduction_length=3)


def _einsum1(x):
    return (np.einsum("ij->ji", x), np.einsum("ij->", x), np.einsum("ii->i", x[:, :3]),
            np.einsum("...j->...", x))


def _einsum2(a, b):
    return (np.einsum("bij,bjk->bik", a, b), np.einsum("...ij,...jk->...ik", a, b),
            np.einsum("bij,bjk", a, b))


def _einsum3(a, b, c):
    return np.einsum("ij,jk,kl->il", a, b, c), np.einsum("ij,jk,k->i", a, b, c[:, 0])


def test_einsum_one_operand():
    check(_einsum1, rand((3, 4), F32, 18), reduction_length=12)


@pytest.mark.parametrize("dtype", [F32, SLOW_F64])
def test_einsum_two_operands(dtype):
    check(_einsum2, rand((2, 3, 4), dtype, 19), rand((2, 4, 5), dtype, 20), reduction_length=4)


@pytest.mark.slow
def test_einsum_three_operands():
    check(_einsum3, rand((3, 4), F64, 21), rand((4, 5), F64, 22), rand((5, 2), F64, 23),
          reduction_length=20)


def _einsum_sublists(a, b):
    return (np.einsum(a, [0, 1, 2], b, [0, 2, 3], [0, 1, 3]), np.einsum(a, [0, 1, 2], [0]),
            np.einsum(a, [Ellipsis, 30, 2], b, [Ellipsis, 2, 40]),
            np.einsum(a[0, 0], [5], a[0, 0], [5]))


def test_einsum_sublist_form():
    """``np.einsum(a, [0, 1], b, [1, 2], [0, 2])``: numpy's letters for the
    integers (it was refused with "pass a subscripts string")."""
    check(_einsum_sublists, rand((2, 3, 4), F32, 19), rand((2, 4, 5), F32, 20),
          reduction_length=4)


def _einsum3_ellipsis(a, b, c):
    return np.einsum("...ij,...jk,...kl->...il", a, b, c)


def test_einsum_three_operands_ellipsis():
    check(_einsum3_ellipsis, rand((2, 3, 4), F32, 21), rand((2, 4, 5), F32, 22),
          rand((5, 2), F32, 23), reduction_length=20)


def _tensordot(a, b):
    return (np.tensordot(a, b, axes=2), np.tensordot(a, b, axes=([1, 2], [0, 1])),
            np.tensordot(a, b, axes=([-1], [1])), np.tensordot(a, b, axes=0))


def test_tensordot():
    check(_tensordot, rand((2, 3, 4), F32, 24), rand((3, 4, 2), F32, 25), reduction_length=12)


# -- layout and views -----------------------------------------------------------------
def _reshapes(x):
    n, m = x.shape[0], x.shape[1]
    return (x.reshape(n * m, -1) * 2, x.reshape(-1) + 1, x.reshape(n, m, 2, 3) + 1,
            np.reshape(x, (n, -1)) - 1, x.reshape((m * n * 6,)) * 1.0,
            x.reshape(n, 1, m, 6) + 0.5)


def test_reshape():
    check(_reshapes, rand((2, 3, 6), F32, 26))


def _transposes(x):
    return (x.T + 0, np.transpose(x, (1, 0, 2)) * 1, x.transpose(2, 0, 1) + 0,
            np.swapaxes(x, 0, -1) + 0, x.swapaxes(1, 2) + 0, np.moveaxis(x, 0, -1) + 0,
            np.moveaxis(x, [0, 1], [-1, 0]) + 0, np.permute_dims(x, (2, 1, 0)) * 1,
            np.matrix_transpose(x) + 0, x.mT + 0)


def test_transposes():
    check(_transposes, rand((2, 3, 4), F64, 27))


def _dims(x, y):
    return (np.expand_dims(x, 0) + 0, np.expand_dims(x, (-1, 1)) * 1, np.squeeze(y) + 0,
            y.squeeze(0) + 0, np.squeeze(y, axis=(0, 2)) + 0,
            np.broadcast_to(x, (2, 3, 4)) + 0, np.broadcast_to(y, (5, 3, 1, 4)) * 1)


def test_expand_squeeze_broadcast_to():
    check(_dims, rand((3, 4), F32, 28), rand((1, 3, 1, 4), F32, 29))


def _joins(x, y):
    return (np.concatenate([x, y], axis=0), np.concatenate((x, y, x), axis=-1 + 0),
            np.concatenate([x, y], axis=None), np.stack([x, y]), np.stack([x, y], axis=-1),
            np.stack((x, x, y), axis=1), np.hstack([x, y]), np.vstack([x, y]),
            np.vstack([x[0], y[1]]), np.hstack([x[0], y[0]]), np.concat([x, y], axis=1))


def test_concatenate_stack():
    check(_joins, rand((3, 4), F32, 30), rand((3, 4), F32, 31))


def _splits(x):
    a, b = np.split(x, 2, axis=1)
    c, d, e = np.split(x, [1, 3])
    return a + 0, b * 1, c + 0, d + 0, e + 0, sum(np.split(x, 3, axis=0))


def test_split():
    check(_splits, rand((6, 4), F64, 32))


def _slices(x):
    return (x[1:3] + 0, x[::2] * 1, x[:, ::-1] + 0, x[-3:-1, 1::3] + 0, x[None, :, 2] + 0,
            x[..., 1] + 0, x[1, ...] + 0, x[2] * 1, x[-1, -2] + x[0], x[:, None, 1:] + 0,
            x[..., None] + 0, x[5:1:-2, ::-3] + 0)


def test_slicing():
    check(_slices, rand((6, 7), F32, 33))


def _pads(x):
    return (np.pad(x, 1), np.pad(x, ((1, 2), (0, 3))), np.pad(x, ((0, 0), (2, 1)),
                                                           constant_values=-1.5))


def test_pad():
    check(_pads, rand((3, 4), F32, 34))


def _windows(x):
    sw = np.lib.stride_tricks.sliding_window_view
    return sw(x, 3, axis=-1) + 0, sw(x, (2, 2)) * 1


def test_sliding_window_view():
    check(_windows, rand((4, 6), F32, 35))


def _conv1d(x, w):
    """A 'same' 1-D convolution over the last axis, numpy style."""
    k = w.shape[-1]
    xp = np.pad(x, ((0, 0), (0, 0), (k // 2, k // 2)))
    win = np.lib.stride_tricks.sliding_window_view(xp, k, axis=-1)
    return np.einsum("bcwk,ock->bow", win, w)


def test_convolution_pad_window_einsum():
    check(_conv1d, rand((2, 3, 8), F32, 36), rand((4, 3, 3), F32, 37), reduction_length=9)


# -- creation ----------------------------------------------------------------------
def _creation(x):
    return (np.zeros_like(x), np.ones_like(x), np.full_like(x, 2.5), np.zeros_like(x, dtype=F64),
            np.triu(x), np.tril(x, -1), np.triu(x, 1) + np.ones_like(x))


@pytest.mark.parametrize("dtype", [F32, SLOW_F64])
def test_creation(dtype):
    check(_creation, rand((2, 4, 4), dtype, 38))


def _argument_forms(x):
    """Positional and keyword forms that must not be ignored."""
    return (np.add.reduce(x, 1), np.maximum.reduce(x, axis=0, keepdims=True),
            np.add.reduce(x, 0, np.float64), np.add(x, 0.1, dtype=np.float64),
            np.concatenate([x, x], dtype=np.float64), np.stack([x, x], dtype=np.float64),
            np.zeros_like(x, np.float64), np.full_like(x, 3, np.int32),
            np.ones_like(x, shape=(2, 3)), np.reshape(x, shape=(6, 4)) + 0,
            np.var(x, 0, None, None, 1), x.std(1, None, None, 2), np.max(x, 1, None, True),
            x.min(0, None, True), x.sum(0, np.float64))


def test_argument_forms():
    check(_argument_forms, rand((4, 6), F32, 51), reduction_length=6)


# -- errors ---------------------------------------------------------------------------
def _value_if(x):
    if x.sum() > 0:  # LINE-IF
        return x
    return -x


def _float_of(x):
    return x * float(x[0])  # LINE-FLOAT


def _asarray_of(x):
    return np.asarray(x) + 1  # LINE-ASARRAY


def _sum_of_a_list(x):
    return np.sum([x, x * 2], axis=0)  # LINE-LIST


def _line_of(marker: str) -> int:
    with open(__file__) as f:
        for k, line in enumerate(f, 1):
            if f"# {marker}" in line and "_line_of" not in line:
                return k
    raise AssertionError(marker)


@pytest.mark.parametrize("fn,marker", [(_value_if, "LINE-IF"), (_float_of, "LINE-FLOAT"),
                                       (_asarray_of, "LINE-ASARRAY"),
                                       (_sum_of_a_list, "LINE-LIST")])
def test_value_dependent_code_raises_trace_error(fn, marker):
    with pytest.raises(TraceError) as e:
        polyc.jit(fn)(rand((4,), F32))
    assert f"{HERE}:{_line_of(marker)}" in str(e.value)
    assert e.value.line == _line_of(marker)
    if fn is _asarray_of:       # the hint says what to do instead
        assert "drop the np.asarray/np.array call" in str(e.value)
    if fn is _sum_of_a_list:    # numpy converted the list: the hint says to stack it
        assert "np.stack([a, b])" in str(e.value)


@pytest.mark.parametrize("name", ["sort", "median", "linalg.det"])
def test_unsupported_function_is_named(name):
    fn = np.linalg.det if name == "linalg.det" else getattr(np, name)
    f = polyc.jit(lambda x: fn(x) + 1)
    with pytest.raises(UnsupportedError, match=f"np.{name}"):
        f(rand((4,), F32))


def _mismatch(a, b):
    return a + b  # LINE-MISMATCH


def _mismatch_matmul(a, b):
    return a @ b  # LINE-MATMUL


@pytest.mark.parametrize("fn,marker,sb", [(_mismatch, "LINE-MISMATCH", (3, 5)),
                                          (_mismatch_matmul, "LINE-MATMUL", (5, 2))])
def test_shape_mismatch_names_line(fn, marker, sb):
    with pytest.raises((ShapeError, ValueError)) as e:
        polyc.jit(fn)(rand((3, 4), F32), rand(sb, F32))
    assert f"{HERE}:{_line_of(marker)}" in str(e.value)


def _bad_concat(a, b):
    return np.concatenate([a, b], axis=1)  # LINE-CONCAT


def _bad_reshape(a, b):
    return a.reshape(5, -1) + b  # LINE-RESHAPE


def _bad_einsum(a, b):
    return np.einsum("ij,jk->ik", a, b)  # LINE-EINSUM


def _bad_tensordot(a, b):
    return np.tensordot(a, b, axes=([1], [1]))  # LINE-TENSORDOT


def _bad_axis(a, b):
    return a.sum(axis=2) + b  # LINE-AXIS


def _bad_index(a, b):
    return a[3] + b  # LINE-INDEX


@pytest.mark.parametrize("fn,marker,error", [
    (_bad_concat, "LINE-CONCAT", ValueError), (_bad_reshape, "LINE-RESHAPE", ValueError),
    (_bad_einsum, "LINE-EINSUM", ValueError), (_bad_tensordot, "LINE-TENSORDOT", ValueError),
    (_bad_axis, "LINE-AXIS", np.exceptions.AxisError), (_bad_index, "LINE-INDEX", IndexError)])
def test_shape_errors_name_line(fn, marker, error):
    a, b = rand((3, 4), F32), rand((2, 5), F32)
    with pytest.raises(error):
        fn(a, b)
    with pytest.raises(error) as e:
        polyc.jit(fn)(a, b)
    assert f"{HERE}:{_line_of(marker)}" in str(e.value)


@pytest.mark.parametrize("fn,match", [
    (lambda x: np.subtract.accumulate(x), "accumulate"),
    (lambda x: np.unique(x), "np.unique"),
    (lambda x: np.concatenate([x, x], casting="unsafe"), "casting"),
    (lambda x: np.any(x, where=x > 0), "where"),          # (np.var(where=) is numpy's)
    (lambda x: x.argsort(), "ndarray.argsort"),
])
def test_no_silent_fallback(fn, match):
    with pytest.raises(UnsupportedError, match=match):
        polyc.jit(fn)(rand((4,), F32))


# -- shape classes --------------------------------------------------------------------
def _counted(fn):
    calls = []

    def wrapper(*args):
        calls.append(1)
        return fn(*args)
    wrapper.__name__ = fn.__name__
    return polyc.jit(wrapper), calls


def _softmax(x):
    p = np.exp(x - x.max(axis=-1, keepdims=True))
    return p / p.sum(axis=-1, keepdims=True)


def test_one_plan_serves_a_shape_class():
    f, calls = _counted(_softmax)
    for shape in [(4, 6), (5, 9), (3, 2)]:
        x = rand(shape, F32, 40)
        assert_close(f(x), _softmax(x), reduction_length=shape[1])
    assert len(calls) == 1


def _scaled(q, k):
    return (q @ k.T) / np.sqrt(q.shape[-1])


def test_size_read_as_value_is_specialised():
    f, calls = _counted(_scaled)
    for (n, d) in [(3, 4), (5, 4), (3, 9)]:
        q, k = rand((n, d), F32, 41), rand((n + 1, d), F32, 42)
        out = f(q, k)
        _compare_one(out, _scaled(q, k), d, f"d={d}")
    assert len(calls) == 2  # (5, 4) reused the plan of (3, 4); d=9 re-traced


def _views(x, y):
    return (np.concatenate([x, y, x], axis=0) * 2, np.pad(x, ((1, 2), (0, 3))),
            np.lib.stride_tricks.sliding_window_view(y, 2, axis=-1).sum(-1),
            x[1:-1] + x[2:], x[-1] * 1, y[:, -2:] + 0, x.reshape(x.shape[0], -1, 2).sum(-1),
            np.stack([y, y], axis=1)[:, ::-2] * 1, x.T @ x, x[::-1] + 0)


def test_views_serve_a_shape_class():
    f, calls = _counted(_views)
    for n, m in [(4, 3), (6, 5)]:
        x, y = rand((n, 4), F32, 44), rand((m, 4), F32, 45)
        _compare(f(x, y), _views(x, y), n)
    assert len(calls) == 1


def _bounded(x):
    sw = np.lib.stride_tricks.sliding_window_view
    return (x[1:3] * 2, x[-3:] + 0, np.split(x, [1, 3])[1] * 1, sw(x, 2, axis=0).sum(-1),
            x[-1] * 1)


def test_slices_guard_their_bounds():
    """A plan whose slices assume ``0 <= start <= stop <= n`` (no clamping)
    is reused only where that holds; a call where numpy clamps re-traces."""
    f, calls = _counted(_bounded)
    for n in (5, 7, 2):
        x = rand((n, 3), F32, 47)
        _compare(f(x), _bounded(x), 2)
    assert len(calls) == 2


def _symbolic_one(x, y):
    return x[2:] + y


def test_symbolic_extent_of_one_broadcasts():
    x, y = rand((3, 4), F32, 48), rand((5, 4), F32, 49)
    check(_symbolic_one, x, y)
    with pytest.raises(ValueError, match="broadcast"):
        jitted(_symbolic_one)(rand((4, 4), F32), y)


def _reshape_symbolic_one(x):
    return x[2:].reshape(-1) * 2


def test_reshape_of_a_symbolic_extent_of_one_retraces():
    f, calls = _counted(_reshape_symbolic_one)
    for n in (3, 4):
        x = rand((n, 4), F32, 50)
        _compare_one(f(x), _reshape_symbolic_one(x), 1, f"n={n}")
    assert len(calls) == 2


def test_size_one_dims_retrace():
    f, calls = _counted(_softmax)
    for shape in [(4, 6), (1, 6), (4, 1), (5, 7)]:
        x = rand(shape, F64, 43)
        _compare_one(f(x), _softmax(x), shape[1], str(shape))
    assert len(calls) == 3


def test_a_returned_view_with_the_results_coordinates_has_its_own_shape():
    # a prefix slice, and a reshape adding unit dimensions, read the node at
    # the same coordinates as the node itself: they are still views (before,
    # polyc.jit returned the whole (4, 5) array for y[:, :3])
    x = np.arange(20.0).reshape(4, 5)

    def prefix(x):
        y = x * 2
        return y[:, :3], y[:2], y

    def units(x):
        return (x[:1, :1] * 2).reshape(1, 1, 1), (x * 3).reshape(4, 5, 1)
    for fn in (prefix, units):
        got, want = polyc.jit(fn)(x), fn(x)
        assert [g.shape for g in got] == [w.shape for w in want]
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


def _inplace_chain(x, w, b):
    y = x @ w
    y += b
    z = y                       # an alias sees the update, as with an ndarray
    z *= 2
    y -= y.max(axis=-1, keepdims=True)
    y /= np.sqrt((y * y).sum(-1, keepdims=True))
    i = (x > 0).astype(np.int32)
    i += 1
    i %= 2
    return y, z, i


def _inplace_merged(x, w, b):
    y = x.reshape(-1, 16) @ w         # results over merged dimensions are no views
    y += b
    s = x.reshape(-1, 16).sum(1)
    s *= 2
    return y, s


def test_in_place_operators_update_the_array_and_its_aliases():
    check(_inplace_chain, rand((4, 6), seed=70), rand((6, 5), seed=71), rand((5,), seed=72),
          reduction_length=6)
    check(_inplace_merged, rand((2, 8, 16), seed=77), rand((16, 16), seed=78),
          rand((16,), seed=79), reduction_length=16)


@pytest.mark.parametrize("body,error", [
    ("y = x * 1; z = y[:2]; z += 5; return y", "view of another array"),
    ("x += 1; return x", "an argument"),
    ("i = (x > 0).astype(np.int32); i += 0.5; return i", "same_kind"),
])
def test_in_place_operators_refused_where_numpy_would_write_elsewhere(body, error):
    scope: dict = {"np": np}
    exec(f"def f(x):\n    {body}\n", scope)
    with pytest.raises(polyc.PolycError, match=error):
        jitted(scope["f"])(rand((3, 4), seed=73))


def test_three_operand_einsum_without_a_path_is_contracted_pairwise_where_cheaper():
    """``einsum('ij,jk,kl->il')`` (numpy's default optimize=False) is two
    GEMM-shaped steps (2 n^3), not one n^4 nest; an elementwise triple
    product stays one nest."""
    a, b, c = (rand((24, 24), seed=s) for s in (74, 75, 76))
    chain = lambda a, b, c: np.einsum("ij,jk,kl->il", a, b, c)   # noqa: E731
    triple = lambda a, b, c: np.einsum("ij,ij,ij->i", a, b, c)   # noqa: E731
    check(chain, a, b, c, reduction_length=576)
    check(triple, a, b, c, reduction_length=24)
    ops_of = lambda fn: [n.op for n in polyc.graph.trace(fn, a, b, c).ops]  # noqa: E731
    assert ops_of(chain).count("einsum") == 2
    assert ops_of(triple).count("einsum") == 1
