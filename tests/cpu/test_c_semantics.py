"""Where C's semantics differ from numpy's, Python's or torch's, the
generated code computes the front end's: edge values (NaN, infinities, signed
zeros, INT_MIN, zero divisors) through every front end, against numpy,
Python (``py_func``) or eager torch, exactly (bit for bit where the
reference is exact; signs of zeros compared).  Several expressions share one
kernel to keep the compile count low."""

from __future__ import annotations

import numpy as np
import pytest

import polyc

NAN, INF = np.nan, np.inf
#: float edge values, and a second operand for each
XF = np.array([NAN, -NAN, INF, -INF, -0.0, 0.0, 1.5, -1.5, 2.5, -2.5, 0.5, -0.5, 3.0, -7.25])
YF = np.array([1.0, NAN, 0.0, -0.0, 0.0, -0.0, -2.0, 2.0, -0.0, 3.0, NAN, INF, -INF, 2.0])


def assert_same(got, want, what: str = "") -> None:
    """Equal dtypes, shapes and values; floats bit for bit up to the NaN
    payload (a NaN matches a NaN, a zero's sign must match)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, \
        f"{what}: {got.dtype}{got.shape} != {want.dtype}{want.shape}"
    if want.dtype.kind == "f":
        same = (np.isnan(got) & np.isnan(want)) | (
            (got == want) & (np.signbit(got) == np.signbit(want)))
    else:
        same = got == want
    bad = np.flatnonzero(~same)
    assert bad.size == 0, f"{what}: at {bad}: got {got.ravel()[bad]}, want {want.ravel()[bad]}"


# -- polyc.jit (numpy) ---------------------------------------------------------------

def test_jit_sign_of_unsigned_and_clip_nan_rules():
    """``np.sign`` of an unsigned array was a SemanticError (the literal -1 of
    the signed formula in uint8); ``np.clip`` ignored a NaN bound (numpy's
    ``min(max(x, lo), hi)`` gives NaN) and kept ``x`` where it equals a bound
    of the other zero sign (numpy gives the bound); ``np.round(x, -25)``
    scaled by the correctly rounded 1e25, numpy by its own power of ten (a few
    ulps apart: results 1 ulp off); ``np.fabs`` of int8 was the wrapping
    integer ``abs`` (-128 for -128; numpy: 128.0 in float16); ``<<`` of
    booleans was refused as a TypeError claiming numpy refuses it (numpy
    shifts them in int8)."""
    u = np.array([0, 1, 7, 255, 128], np.uint8)

    def f(u, x, lo):
        return (np.sign(u), np.clip(x, lo, 2.0), np.clip(x, -1.0, 2.0),
                np.round(x * 7.77e25, -25), np.fabs(u.astype(np.int8)),
                np.left_shift(u > 3, u > 0))

    lo = np.where(np.isnan(YF), NAN, np.minimum(YF, 1.0))
    got = polyc.jit(f)(u, XF, lo)
    with np.errstate(invalid="ignore"):
        want = f(u, XF, lo)
    for g, w, what in zip(got, want, ("sign", "clip(x, lo, 2)", "clip(x, -1, 2)", "round",
                                      "fabs", "left_shift")):
        assert_same(g, w, what)


# -- @polyc.kernel (Python loops) ------------------------------------------------------

@polyc.kernel
def _conversions(X, Y, F, I):
    for i in range(X.shape[0]):
        F[i, 0] = int(X[i])
        F[i, 1] = round(X[i])
        F[i, 2] = np.maximum(X[i], Y[i])
        F[i, 3] = np.minimum(X[i], Y[i])
        F[i, 4] = 2 ** -1 + (i + 1) ** -2
        F[i, 5] = float("-inf") if X[i] < 0 else float("nan")
        I[i] = (int(X[i] * 4) & 6) + round(X[i]) // 2


def test_kernel_int_round_are_integers_and_maximum_ties():
    """``int(x)`` and ``round(x)`` of a float are Python ints: no negative
    zero (``int(-0.5)`` came out as -0.0), and integer operators apply
    (``int(x) & 6`` was refused: a bitwise operator on a float);
    ``np.maximum``/``np.minimum`` of equal values give the second, as
    numpy's (``np.maximum(-0.0, 0.0)`` is 0.0).  A Python int to a negative
    literal power is a float (``2 ** -1`` was numpy's integer power, 0);
    ``float("-inf")`` and ``float("nan")`` were refused."""
    x = np.array([-0.5, -0.0, 0.0, 0.5, 1.5, 2.5, -2.5, -3.7, 7.25, -0.25])
    y = np.array([0.0, 0.0, -0.0, NAN, -2.0, 2.5, -2.5, NAN, 1.0, -0.0])
    got = np.zeros((10, 6)), np.zeros(10, np.int64)
    want = np.zeros((10, 6)), np.zeros(10, np.int64)
    _conversions(x, y, *got)
    _conversions.py_func(x, y, *want)
    assert_same(got[0], want[0], "int round maximum minimum")
    assert_same(got[1], want[1], "int(x * 4) & 6")


def test_kernel_integer_element_to_negative_power_is_refused():
    """numpy raises ValueError for an integer to a negative integer power;
    ``A[i] ** -1`` of an int64 array computed the truncated power instead."""
    @polyc.kernel
    def inverse(A, B):
        for i in range(A.shape[0]):
            B[i] = A[i] ** -1

    with pytest.raises(polyc.UnsupportedError, match="negative integer power"):
        inverse(np.arange(1, 4), np.zeros(3, np.int64))


# -- float -> integer conversions ------------------------------------------------------

def _x86_cast(v: float, dtype: str) -> int:
    """C's float -> integer conversion as polyc defines it (x86's, which
    numpy's astype gives there): truncation; a NaN or an out-of-range value
    gives INT32_MIN (INT64_MIN for int64); the narrower types wrap the int32;
    uint32 converts x - 2^31 where x >= 2^31 and sets the top bit."""
    def trunc(x: float, bits: int) -> int:
        return int(x) if abs(x) < 2.0 ** (bits - 1) else -2 ** (bits - 1)
    if dtype == "int64":
        return trunc(v, 64)
    if dtype == "uint32":
        big = v >= 2.0 ** 31
        return (trunc(v - 2.0 ** 31 if big else v, 32) & 0xFFFFFFFF) ^ (big << 31)
    return np.array(trunc(v, 32)).astype(dtype).item()       # (wraps)


@polyc.kernel
def _stores(X, Y, I8, U16, I32, U32, I64, D32, DU32, D64, W8, W16, W32):
    for i in range(X.shape[0]):
        I8[i] = X[i]
        U16[i] = X[i]
        I32[i] = X[i]
        U32[i] = X[i]
        I64[i] = X[i]
        D32[i] = Y[i]
        DU32[i] = Y[i]
        D64[i] = Y[i]
        W8[i] = 1e30 if X[i] > 1e6 else X[i]
        W16[i] = -1e10 if X[i] < 0 else X[i]
        W32[i] = -1.0 if X[i] < 0 else X[i]


def test_float_to_integer_conversions_are_defined():
    """A NaN, an infinity or an out-of-range float converted to an integer
    type is undefined in C, and gcc's code did not agree with itself: a value
    it could see (``1e30 if x > 1e6 else x`` stored into uint8) gave 255 and
    ``-1e10`` into int16 gave -32768, where the same values read from memory
    give 0 (numpy's); ``-1.0`` into uint32 gave 0 (numpy: 4294967295).  The
    prelude's conversions give x86's values everywhere (float32 and float64
    sources, each integer type's conversion path)."""
    x = np.array([NAN, INF, -INF, 1e30, -1e30, 300.7, -300.7, 7e4, -7e4, 3e9, -3e9,
                  -1.0, -0.9, 255.9, 2.0 ** 31, -2.0 ** 31 - 1e3, 4e9], np.float32)
    types = ("int8", "uint16", "int32", "uint32", "int64", "int32", "uint32", "int64",
             "uint8", "int16", "uint32")
    outs = [np.zeros(x.size, t) for t in types]
    _stores(x, x.astype(np.float64), *outs)
    v = x.astype(np.float64).tolist()
    sources = [v] * 8 + [[1e30 if a > 1e6 else a for a in v], [-1e10 if a < 0 else a for a in v],
                         [-1.0 if a < 0 else a for a in v]]
    for got, t, src in zip(outs, types, sources):
        assert_same(got, np.array([_x86_cast(a, t) for a in src], t), t)


def test_kernel_integer_literal_beyond_int64_is_located():
    """An integer literal beyond int64 reached the C printer ('integer
    constant ... does not fit in 64 bits', no location); it is refused at
    its line, with what to write instead."""
    @polyc.kernel
    def shifted(A, B):
        for i in range(A.shape[0]):
            B[i] = A[i] + 100000000000000000000

    with pytest.raises(polyc.UnsupportedError, match=r"test_c_semantics.py:\d+:\d+: the integer "
                       r"literal 100000000000000000000, beyond int64"):
        shifted(np.arange(3.0), np.zeros(3))
