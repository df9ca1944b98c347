"""The math functions, ``prod``, ``np.outer`` and ``np.linalg.norm`` of
``@polyc.jit`` (C99's ``<math.h>`` functions as TC builtins), each against
plain numpy on seeded inputs inside the function's domain, with
``polyc.testing.assert_close``'s per-dtype tolerances (libmvec's vector
variants are within 4 ulp); the TC builtins and loop programs' ``math.*``
calls the same way."""

from __future__ import annotations

import math
import platform
import re
import sys

import numpy as np
import pytest

import polyc
from polyc.errors import UnsupportedError

from .test_ops import F32, F64, check, rand


def _trig(x):
    return np.sin(3 * x), np.cos(3 * x), np.tan(x), np.arcsin(0.9 * x), np.arccos(0.9 * x), \
        np.arctan(4 * x), np.sinh(2 * x), np.cosh(2 * x)


def _exp_log(x):
    p = np.abs(x) + 0.1
    return np.log1p(x + 1), np.expm1(x), np.exp2(4 * x), np.log2(p), np.log10(p), np.cbrt(x)


def _inverse_hyperbolic(x):
    return np.arcsinh(3 * x), np.arccosh(np.abs(x) + 1), np.arctanh(0.9 * x)


def _rounding(x):
    y = 7 * x
    return np.floor(y), np.ceil(y), np.trunc(y), np.rint(y), np.sign(y)


@pytest.mark.parametrize("fn", [_trig, _inverse_hyperbolic, _exp_log, _rounding])
@pytest.mark.parametrize("dtype", [F32, F64])
def test_math_functions(fn, dtype):
    x = rand((5, 7), dtype, seed=3)
    x[0, :4] = [0.5 / 7, -0.5 / 7, 0.0, -0.0]     # ties of rint, both zeros of sign
    check(fn, x)


def _binary(x, y):
    return np.arctan2(x, y), np.hypot(x, 3 * y), np.logaddexp(4 * x, 4 * y), \
        np.logaddexp2(4 * x, y)


@pytest.mark.parametrize("dtype", [F32, F64])
def test_binary_math_functions(dtype):
    check(_binary, rand((4, 6), dtype, seed=8), rand((4, 6), dtype, seed=9))


def _lae(x, y):
    return np.logaddexp(x, y), np.logaddexp2(x, y)


def test_logaddexp_of_infinities_equal_values_and_nan():
    x = np.array([-np.inf, np.inf, 2.0, np.nan, 1.0, -np.inf, 30.0], np.float64)
    y = np.array([-np.inf, np.inf, 2.0, 1.0, np.nan, 5.0, -30.0], np.float64)
    with np.errstate(invalid="ignore"):
        expected = _lae(x, y)
    for got, ref in zip(polyc.jit(_lae)(x, y), expected):
        np.testing.assert_allclose(got, ref, rtol=1e-15)


def _on_integers(k):
    return np.sin(k), np.floor(k), np.ceil(k), np.trunc(k), np.sign(k), np.rint(k), \
        np.log1p(np.abs(k))


def test_integer_inputs():
    """``sin`` of integers is float64; ``floor``/``ceil``/``trunc`` keep the
    integers and their dtype (numpy 2); ``sign`` of integers is -1, 0, 1."""
    k = np.arange(-6, 6, dtype=np.int32).reshape(3, 4)
    out = check(_on_integers, k)
    assert out[1].dtype == np.int32 and out[4].dtype == np.int32


def _sign_nan(x):
    return np.sign(x)


def test_sign_of_nan_and_zeros():
    x = np.array([np.nan, -0.0, 0.0, -3.0, 2.0, np.inf, -np.inf], np.float32)
    out = polyc.jit(_sign_nan)(x)
    np.testing.assert_array_equal(out, np.sign(x))
    assert not np.signbit(out[1])          # +0, as numpy gives


def test_sign_of_booleans_is_refused():
    with pytest.raises(UnsupportedError, match="np.sign of booleans"):
        polyc.jit(_sign_nan)(np.array([True, False]))


def _prods(x):
    return x.prod(-1), np.prod(x, axis=(0, 2), keepdims=True), np.multiply.reduce(x, axis=1)


@pytest.mark.parametrize("dtype", [F32, F64])
def test_prod(dtype):
    x = rand((3, 4, 5), dtype, seed=5, lo=0.5, hi=1.5)
    check(_prods, x, reduction_length=12)


def _int_prod(k):
    return k.prod(0)


def test_integer_prod_is_int64():
    k = np.arange(1, 13, dtype=np.int32).reshape(4, 3)
    assert check(_int_prod, k).dtype == np.int64


def _outer(a, b):
    return np.outer(a, b), np.outer(a[0], b)


def test_outer_flattens_its_operands():
    check(_outer, rand((2, 3), seed=1), rand((4,), seed=2))


def _norms(x):
    return (np.linalg.norm(x), np.linalg.norm(x, axis=-1), np.linalg.norm(x, 2, axis=0),
            np.linalg.norm(x, 1, axis=1, keepdims=True), np.linalg.norm(x, np.inf, axis=1),
            np.linalg.norm(x, -np.inf, axis=0))


@pytest.mark.parametrize("dtype", [F32, F64])
def test_norm(dtype):
    check(_norms, rand((6, 9), dtype, seed=7), reduction_length=54)


def _norm_nuc(x):
    return np.linalg.norm(x, "nuc")


def test_unsupported_norm_order_is_named():
    with pytest.raises(UnsupportedError, match="ord="):
        polyc.jit(_norm_nuc)(rand((3, 3)))


# -- the TC builtins and loop programs -------------------------------------------------
TC_CASES = [("sin", np.sin, 3.0), ("cos", np.cos, 3.0), ("tan", np.tan, 1.0),
            ("asin", np.arcsin, 0.9), ("acos", np.arccos, 0.9), ("atan", np.arctan, 4.0),
            ("sinh", np.sinh, 2.0), ("cosh", np.cosh, 2.0), ("asinh", np.arcsinh, 3.0),
            ("atanh", np.arctanh, 0.9), ("expm1", np.expm1, 1.0),
            ("exp2", np.exp2, 4.0), ("cbrt", np.cbrt, 5.0), ("floor", np.floor, 7.0),
            ("ceil", np.ceil, 7.0), ("trunc", np.trunc, 7.0), ("rint", np.rint, 7.0)]


@pytest.mark.parametrize("name,ref,scale", TC_CASES)
@pytest.mark.parametrize("tname,dtype", [("float", F32), ("double", F64)])
def test_tc_builtin(name, ref, scale, tname, dtype):
    k = polyc.compile(f"def f({tname}(N) X) -> (O) {{ O(i) = {name}({scale} * X(i)) }}")
    x = rand((37,), dtype, seed=11)
    polyc.testing.assert_close(k(x), ref(dtype(scale) * x))


@pytest.mark.parametrize("name,ref", [("atan2", np.arctan2), ("hypot", np.hypot),
                                      ("copysign", np.copysign), ("fmod", np.fmod)])
def test_tc_binary_builtin(name, ref):
    k = polyc.compile(f"def f(float(N) X, double(N) Y) -> (O) {{ O(i) = {name}(X(i), Y(i)) }}")
    x, y = rand((37,), F32, seed=14), rand((37,), F64, seed=15)
    polyc.testing.assert_close(k(x, y), ref(x.astype(F64), y))     # (promoted to double)


@pytest.mark.parametrize("name", ["copysign", "fmod"])
def test_scalar_only_builtins_are_not_declared_as_libmvec_variants(name):
    """libmvec has no vector copysign or fmod: an ``omp declare simd``
    declaration would make the vector loop call a symbol that does not
    exist."""
    k = polyc.compile(f"def f(float(N) X, float(N) Y) -> (O) {{ O(i) = {name}(X(i), Y(i)) }}")
    x, y = rand((67,), F32, seed=16), rand((67,), F32, seed=17)
    polyc.testing.assert_close(k(x, y), getattr(np, name)(x, y))
    assert not re.search(rf"declare simd[^\n]*\n[^\n]*\b{name}f?\(", k.source)


@pytest.mark.parametrize("name,ref", [("log1p", np.log1p), ("log2", np.log2),
                                      ("log10", np.log10)])
def test_tc_logarithms(name, ref):
    k = polyc.compile(f"def f(float(N) X) -> (O) {{ O(i) = {name}(X(i)) }}")
    x = rand((37,), F32, seed=12, lo=0.01, hi=10.0)
    polyc.testing.assert_close(k(x), ref(x))


def test_loop_program_math_calls():
    @polyc.kernel
    def waves(x, out):
        n = x.shape[0]
        for i in range(n):
            out[i] = math.sin(x[i]) + np.cos(2 * x[i]) + math.floor(3 * x[i]) + np.arctan(x[i])

    x = rand((40,), F64, seed=13)
    out = np.zeros_like(x)
    waves(x, out)
    polyc.testing.assert_close(out, np.sin(x) + np.cos(2 * x) + np.floor(3 * x) + np.arctan(x))


# -- scans -------------------------------------------------------------------------------
def _scans(x):
    return (np.cumsum(x, axis=1), x.cumsum(0), np.cumprod(1 + 0.01 * x, axis=-1),
            np.cumsum(x[0]), np.cumsum(x.T, axis=1), np.cumsum(x, axis=0, dtype=np.float64))


@pytest.mark.parametrize("shape", [(5, 300), (1, 1), (3, 0)])
def test_cumsum_cumprod_bit_for_bit(shape):
    """numpy's sequential sums and products, bit for bit, along either axis
    and through a transposed view."""
    x = rand(shape, F32, seed=21)
    with np.errstate(all="ignore"):
        ref = _scans(x)
    for got, want in zip(polyc.jit(_scans)(x), ref):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def _int_scans(k):
    return np.cumsum(k, axis=1), np.cumsum(k > 5, axis=0), np.cumsum(k.reshape(-1)), \
        np.cumprod(k + 1, axis=1)


def test_integer_and_boolean_scans_are_int64():
    k = np.arange(12, dtype=np.int32).reshape(3, 4)
    for got, want in zip(polyc.jit(_int_scans)(k), _int_scans(k)):
        assert got.dtype == want.dtype == np.int64
        np.testing.assert_array_equal(got, want)


def _flat_cumsum(x):
    return np.cumsum(x)


def test_cumsum_of_a_matrix_without_axis_scans_it_flattened():
    check(_flat_cumsum, rand((3, 4), F64))


# -- functions built from views, ufuncs and einsum ---------------------------------------
def _array_fns(x):
    return (np.diff(x), np.diff(x, n=2, axis=0), np.trace(x[:, :4]), x[:, 1:5].trace(),
            np.round(x * 10), np.around(x, 2), np.round(x * 100, -1), x.round(1),
            np.tile(x, 2), np.tile(x, (2, 1, 3)), np.repeat(x, 3, axis=1), np.repeat(x, 2),
            x.repeat(2, axis=0) + 1)


def test_diff_trace_round_tile_repeat_bit_for_bit():
    x = rand((4, 6), F32, seed=31)
    for got, want in zip(polyc.jit(_array_fns)(x), _array_fns(x)):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def _int_array_fns(k):
    return np.diff(k, axis=1), np.round(k), np.tile(k, (1, 2)), np.repeat(k, 2, axis=1)


def test_diff_round_tile_repeat_of_integers():
    k = np.arange(12, dtype=np.int32).reshape(3, 4)
    for got, want in zip(polyc.jit(_int_array_fns)(k), _int_array_fns(k)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def _trace_offset(x):
    return np.trace(x, offset=1), np.trace(x, -1), x.trace(1)


def test_trace_with_offsets_of_a_non_square_matrix():
    check(_trace_offset, rand((3, 4), F64, seed=43), reduction_length=3)


def _repeat_traced(x):          # (constant counts per element are a gather: supported)
    return np.repeat(x, (x[:, 0] > 0).astype(np.int64), axis=0)


@pytest.mark.parametrize("fn,match", [(_repeat_traced, "traced counts")])
def test_unsupported_forms_are_named(fn, match):
    with pytest.raises(UnsupportedError, match=match):
        polyc.jit(fn)(rand((3, 3)))


def _args(x):
    return (np.argmax(x, axis=1), x.argmin(0), np.argmax(x), x.argmax(-1, keepdims=True),
            np.argmin(x[:, :3] > 0, axis=1))


def test_argmax_argmin_first_index_nan_first():
    x = rand((5, 300), F32, seed=41)
    x[2, 7] = x[2, 9] = np.nan                  # the first NaN wins, as in numpy
    x[3, 5] = x[3, 9] = x[3].max() + 1          # ties: the first index
    for got, want in zip(polyc.jit(_args)(x), _args(x)):
        assert got.dtype == want.dtype == np.int64 and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def _int_args(k):
    return k.argmax(1), np.argmin(k, axis=0)


def test_argmax_of_integers():
    k = np.array([[3, 1, 3], [0, 2, 2]], np.int32)
    for got, want in zip(polyc.jit(_int_args)(k), _int_args(k)):
        np.testing.assert_array_equal(got, want)


def _glibc_at_least(minor: int) -> bool:
    name, version = platform.libc_ver()
    return name == "glibc" and tuple(map(int, version.split(".")[:2])) >= (2, minor)


def _sin_cos(x):
    return np.sin(x) + np.cos(x)


def _softplus(x):
    return np.log1p(np.exp(x))


@pytest.mark.skipif(not (sys.platform == "linux" and platform.machine() == "x86_64"
                         and _glibc_at_least(35)), reason="libmvec 2.35 on x86-64 only")
@pytest.mark.parametrize("fn", [_sin_cos, _softplus])
def test_math_calls_reach_libmvec(fn):
    """The vector loop calls libmvec's SIMD variants: sin and cos of one
    value under names of their own (gcc fused them into a scalar sincos
    call), and exp next to another libm call as libmvec's expf (the
    prelude's polyc_expf kept that loop scalar)."""
    x = rand((8, 64), F32, seed=51)
    check(fn, x)
    f = polyc.jit(fn)
    f(x)
    kernel = f.plan(x).kernels[0]
    assert b"_ZGV" in kernel.library.path.read_bytes()
    if fn is _sin_cos:
        assert "polyc_sinf(" in kernel.source and "polyc_cosf(" in kernel.source
    else:
        assert "log1pf(expf(" in kernel.source


def _xor_masks(x, y):
    return (x > 0) ^ (y > 0), (x > 0.5) ^ True, np.bitwise_xor(x < 0, y < 0)


def test_xor_of_masks():
    """``^`` of boolean masks is numpy's logical xor (it raised a bare
    TypeError: the tracer had no ``__xor__``)."""
    check(_xor_masks, rand((4, 6), seed=8), rand((4, 6), seed=9))


def test_xor_of_integer_arrays_is_bitwise():
    a, b = np.arange(-4, 4, dtype=np.int32), np.full(8, 6, np.int32)
    np.testing.assert_array_equal(polyc.jit(lambda a, b: a ^ b)(a, b), a ^ b)
