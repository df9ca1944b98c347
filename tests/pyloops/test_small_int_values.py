"""@polyc.kernel on int8 ... uint32 arrays computes what ``py_func`` does on
numpy scalars: every small-integer value wraps to its numpy type before the
next operation (``(A[i] + B[i]) // 2`` of uint8 wraps the sum), Python ints
stay weak (NEP 50)."""

import numpy as np
import pytest

import polyc


def _blur(A, B):
    n, m = A.shape
    for i in range(1, n - 1):
        for j in range(m):
            B[i, j] = (A[i - 1, j] + A[i, j] + A[i + 1, j]) // 3


def _mix(A, B, C):
    n, = A.shape
    for i in range(n):
        C[i] = (A[i] + B[i]) // 3 - A[i] * 2 + (-A[i] % 7)


def _select(A, C):
    n, = A.shape
    for i in range(n):
        C[i] = A[i] + 100 if A[i] > 100 else max(A[i] - 100, A[i] * 3) // 2


def _ints(dt, shape, seed):
    info = np.iinfo(dt)
    a = np.random.default_rng(seed).integers(info.min, int(info.max) + 1, shape, dtype=dt)
    a.reshape(-1)[:3] = [info.min, info.max, 0]
    return a


@pytest.mark.parametrize("fn,dts", [
    (_blur, ["uint8", "uint8"]),
    (_mix, ["uint8", "uint8", "uint8"]),
    (_mix, ["uint8", "int8", "int16"]),
    (_mix, ["uint16", "uint16", "uint16"]),
    (_mix, ["uint32", "uint32", "uint32"]),
    (_select, ["int8", "int8"]),
], ids=lambda v: getattr(v, "__name__", None) or "-".join(v))
def test_small_integers_wrap_as_py_func(fn, dts):
    shape = (6, 7) if fn is _blur else (40,)
    args = [_ints(np.dtype(d), shape, k) for k, d in enumerate(dts)]
    want = [a.copy() for a in args]
    with np.errstate(over="ignore"):
        fn(*want)
    polyc.kernel(fn)(*args)
    for got, w in zip(args, want):
        np.testing.assert_array_equal(got, w)


def _bits(A, B, C):
    n, = A.shape
    for i in range(n):
        C[i] = ((A[i] >> 2) & 7 | (A[i] << 1)) ^ ~B[i]


def _shifts_and_powers(A, S, C):
    n, = A.shape
    for i in range(n):
        C[i] = (A[i] << S[i]) + (A[i] >> S[i]) + A[i] ** S[i]
        C[i] &= A[i] | 1


@pytest.mark.parametrize("fn,dts", [
    (_bits, ["uint8", "uint8", "uint8"]),
    (_bits, ["int8", "uint8", "int16"]),
    (_shifts_and_powers, ["int32", "int32", "int32"]),
    (_shifts_and_powers, ["uint8", "uint8", "uint8"]),
    (_shifts_and_powers, ["int64", "int64", "int64"]),
], ids=lambda v: getattr(v, "__name__", None) or "-".join(v))
def test_bitwise_operators_and_integer_powers_as_py_func(fn, dts):
    """& | ^ ~ << >> (and &= ...) of integers were refused in kernels; A ** S
    of integers is numpy's wrapping power (it was C's double pow)."""
    a = _ints(np.dtype(dts[0]), (40,), 0)
    s = np.random.default_rng(1).integers(0, 8 * np.dtype(dts[1]).itemsize, 40).astype(dts[1])
    args = [a, s, np.zeros(40, dts[2])]
    want = [x.copy() for x in args]
    with np.errstate(over="ignore"):
        fn(*want)
    polyc.kernel(fn)(*args)
    for got, w in zip(args, want):
        np.testing.assert_array_equal(got, w)


def _compare_product(A, B, C):
    n, = A.shape
    for i in range(n):
        C[i] = 1 if A[i] * 3 > B[i] else 0


def test_int32_product_with_a_python_int_wraps_as_py_func():
    a = np.array([-906825472, 941137610, 5], np.int32)
    b = np.array([-457121767, 618078233, 1], np.int32)
    got, want = np.zeros(3, np.int32), np.zeros(3, np.int32)
    polyc.kernel(_compare_product)(a, b, got)
    with np.errstate(over="ignore"):
        _compare_product(a, b, want)
    np.testing.assert_array_equal(got, want)


def _select_then_floordiv(A, B, C):
    n, = A.shape
    for i in range(n):
        C[i] = ((A[i] if A[i] > i else i) // B[i]) | 1


def test_weak_python_ints_and_integer_selects():
    """A Python int next to an int64 read was taken for a dtype (numpy
    compares dtypes with the string 'int'), so ``abs(-C[i]) & A[i]`` of an
    int64 and an int8 wrapped to int8; ``(a if c else i) // b`` of integers
    was a float division, and ``| 1`` of it refused."""
    a = np.array([-95, 5, 7], np.int8)
    c = np.array([8869846436000548159, 3, -9], np.int64)
    got, want = np.zeros(3, np.uint16), np.zeros(3, np.uint16)
    polyc.kernel(_abs_and)(a, c, got)
    _abs_and(a, c, want)
    np.testing.assert_array_equal(got, want)
    x, y = np.array([9, -3, 50], np.int32), np.array([2, 4, -7], np.int32)
    got, want = np.zeros(3, np.int32), np.zeros(3, np.int32)
    polyc.kernel(_select_then_floordiv)(x, y, got)
    _select_then_floordiv(x, y, want)
    np.testing.assert_array_equal(got, want)


def _abs_and(A, C, R):
    n, = A.shape
    for i in range(n):
        R[i] = abs(-C[i]) & A[i]
