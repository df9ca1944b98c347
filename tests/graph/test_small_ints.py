"""int8, uint8, int16, uint16 and uint32 through polyc.jit and TC, against
numpy (exact, with numpy 2's result dtypes), extreme values included."""

import numpy as np
import pytest

import polyc
from polyc.errors import DTypeError


def _ext(dt, shape=(5, 9), seed=0):
    rng = np.random.default_rng(seed)
    info = np.iinfo(dt)
    a = rng.integers(info.min, int(info.max) + 1, shape, dtype=dt)
    vals = [info.min, info.max, 0, 1, info.max // 2, info.max // 2 + 1]
    if info.min < 0:
        vals += [-1, info.min + 1]
    a.reshape(-1)[:len(vals)] = vals
    return a


def _same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-3 if want.dtype == np.float16 else 1e-6)
    else:
        np.testing.assert_array_equal(got, want)


CASES = {
    "avg_u8": (lambda a, b: (a + b) // 2, ["uint8", "uint8"]),
    "wrap_mul_u8": (lambda a, b: a * b - 7, ["uint8", "uint8"]),
    "mixed_u8_i8": (lambda a, b: (a + b) // 3, ["uint8", "int8"]),
    "neg_abs_i8": (lambda a: np.abs(-a) % 7, ["int8"]),
    "cube_i16": (lambda a: a ** 3, ["int16"]),
    "mul_u16": (lambda a, b: a * b + a, ["uint16", "uint16"]),
    "u32_i32": (lambda a, b: (a + b) // 5, ["uint32", "int32"]),
    "u32_floordiv": (lambda a, b: (a * b) // np.maximum(b, 1), ["uint32", "uint32"]),
    "sqrt_u8": (lambda a: np.sqrt(a), ["uint8"]),
    "arctan2_i16": (lambda a, b: np.arctan2(a, b), ["int16", "int16"]),
    "truediv_u8": (lambda a, b: a / np.maximum(b, 1), ["uint8", "uint8"]),
    "cmp_u8_neg": (lambda a: np.where(a > -1, a, 3), ["uint8"]),
    "gray": (lambda r, g: (0.299 * r + 0.587 * g).astype(np.uint8), ["uint8", "uint8"]),
    "max_rows_u8": (lambda a: a.max(axis=1), ["uint8"]),
    "sum_i8": (lambda a: a.sum(axis=0), ["int8"]),
    "sum_u8_int32": (lambda a: a.sum(axis=1, dtype=np.int32), ["uint8"]),
    "mean_u8": (lambda a: a.mean(axis=1), ["uint8"]),
    "int8_gemm": (lambda a, b: a.astype(np.int32) @ b.astype(np.int32).T, ["int8", "int8"]),
    "astype_wrap": (lambda a: a.astype(np.uint8) + 1, ["int16"]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_jit_small_ints_match_numpy(name):
    fn, dts = CASES[name]
    args = [_ext(np.dtype(d), seed=k) for k, d in enumerate(dts)]
    with np.errstate(all="ignore"):
        want = fn(*args)
    _same(polyc.jit(fn)(*args), want)


def test_unsigned_sum_asks_for_a_dtype():
    with pytest.raises(DTypeError, match="uint64"):
        polyc.jit(lambda a: a.sum())(_ext(np.uint8))


def test_tc_small_int_types():
    ks = polyc.compile("""
def add(uint8(M, N) A, uint8(M, N) B) -> (C) { C(i, j) = A(i, j) + B(i, j) }
def lut(uint8(M) I, float(K) L) -> (O) { O(i) = L(I(i)) }
def qmm(int8(M, K) A, int8(K, N) B) -> (int32(M, N) C) { C(m, n) +=! A(m, k) * B(k, n) }
def neg(int16(M) A) -> (int16(M) R) { R(i) = -A(i) * A(i) }
""")
    a, b = _ext(np.uint8), _ext(np.uint8, seed=1)
    _same(ks["add"](a, b), a + b)
    lut = np.random.default_rng(2).random(256).astype(np.float32)
    _same(ks["lut"](a[0], lut), lut[a[0]])
    x, y = _ext(np.int8, (6, 9)), _ext(np.int8, (9, 4), seed=3)
    _same(ks["qmm"](x, y), x.astype(np.int32) @ y.astype(np.int32))
    z = _ext(np.int16, (40,))
    _same(ks["neg"](z), -z * z)


def _shifts(dt, seed=5):
    return np.random.default_rng(seed).integers(-3, 70, (5, 9)).astype(dt)


BITWISE = {
    "and_or_u8": (lambda a, b: (a & b) | (a & 0x0F), ["uint8", "uint8"]),
    "xor_mixed": (lambda a, b: a ^ b, ["uint8", "int8"]),
    "invert": (lambda a, b, c: (~a, np.invert(b), ~c), ["uint8", "int8", "uint32"]),
    "shift_consts": (lambda a, b: (a << 3, b >> 2, a >> 9, b << 7), ["uint8", "int8"]),
    "shift_wide_counts": (lambda a: (a << _shifts(np.int32), a >> _shifts(np.int32)),
                          ["int32"]),
    "shift_wide_counts64": (lambda a: (np.left_shift(a, _shifts(np.int64)),
                                       np.right_shift(a, _shifts(np.int64))), ["int64"]),
    "pack_rgb": (lambda r, g, b: (r.astype(np.uint32) << 16) | (g.astype(np.uint32) << 8) | b,
                 ["uint8", "uint8", "uint8"]),
    "unpack": (lambda p: ((p >> 8) & 0xFF).astype(np.uint8), ["uint32"]),
    "mask_and_int": (lambda a, b: (a > 3) & b, ["uint8", "uint8"]),
}


@pytest.mark.parametrize("name", sorted(BITWISE))
def test_jit_bitwise_match_numpy(name):
    fn, dts = BITWISE[name]
    args = [_ext(np.dtype(d), seed=k) for k, d in enumerate(dts)]
    want, got = fn(*args), polyc.jit(fn)(*args)
    for g, w in zip(got if isinstance(want, tuple) else [got],
                    want if isinstance(want, tuple) else [want]):
        _same(g, w)


def test_jit_bitwise_of_floats_is_numpys_type_error():
    x = np.ones(4, np.float32)
    with pytest.raises(TypeError, match="bitwise_and"):
        polyc.jit(lambda a: a & a)(x)


def test_tc_bitwise_operators_and_precedence():
    ks = polyc.compile("""
def bits(int32(N) A, int32(N) B) -> (R) { R(i) = (A(i) & B(i)) | A(i) ^ ~B(i) }
def sh(uint8(N) A, int8(N) S) -> (uint8(N) L, uint8(N) R) {
    L(i) = A(i) << S(i)
    R(i) = A(i) >> S(i) }
def prec(int64(N) A) -> (R) { R(i) = A(i) & 3 == 1 }
""")
    a, b = _ext(np.int32, (50,)), _ext(np.int32, (50,), seed=1)
    _same(ks["bits"](a, b), (a & b) | (a ^ ~b))
    u, s = _ext(np.uint8, (50,)), np.random.default_rng(3).integers(-3, 40, 50).astype(np.int8)
    w = u.astype(np.int32), s.astype(np.int32)
    left, right = ks["sh"](u, s)
    _same(left, np.left_shift(*w).astype(np.uint8))
    _same(right, np.right_shift(*w).astype(np.uint8))
    x = np.arange(10, dtype=np.int64)
    _same(ks["prec"](x), x & 0)           # C's precedence: A & (3 == 1)
    with pytest.raises(polyc.errors.UnsupportedError, match="integer operands"):
        polyc.compile("def f(float(N) A) -> (R) { R(i) = A(i) & A(i) }")


@pytest.mark.parametrize("dt", ["int8", "uint8", "int16", "int32", "int64", "uint32"])
def test_integer_power_wraps_as_numpys(dt):
    """``a ** b`` of integers is numpy's wrapping square-and-multiply (it was
    C's double ``pow`` converted back: wrong beyond 2**53, undefined on
    overflow)."""
    rng = np.random.default_rng(4)
    lo = -5 if np.dtype(dt).kind == "i" else 0
    a, b = rng.integers(lo, 40, 60).astype(dt), rng.integers(0, 40, 60).astype(dt)
    _same(polyc.jit(lambda a, b: a ** b)(a, b), a ** b)
    _same(polyc.jit(lambda a: a ** 5)(a), a ** 5)
    _same(polyc.jit(lambda a: np.power(a, np.int64(7)))(a), np.power(a, np.int64(7)))


def test_negative_integer_exponents_in_an_array_truncate():
    """numpy raises for them; a kernel cannot, so the value is the exact
    power truncated toward zero (documented in docs/graph.md)."""
    a = np.array([1, -1, -1, 2, 0, 3], np.int32)
    b = np.array([-3, -3, -2, -1, -1, 0], np.int32)
    _same(polyc.jit(lambda a, b: a ** b)(a, b), np.array([1, -1, 1, 0, 0, 1], np.int32))
    with pytest.raises(ValueError, match="negative integer powers"):
        polyc.jit(lambda a: a ** -1)(a)
    k = polyc.compile("def p(int16(N) A, int16(N) B) -> (R) { R(i) = ipow(A(i), B(i)) }")
    x, y = _ext(np.int16, (30,)), np.arange(30, dtype=np.int16) % 20
    _same(k(x, y), x ** y)


def test_clip_of_unsigned_to_python_ints_beyond_the_type():
    """numpy 2 clips uint8 to 300 or -5 (bounds beyond the type's range);
    polyc refused them as out-of-range literals."""
    a = _ext(np.uint8)
    _same(polyc.jit(lambda a: np.clip(a, 10, 300))(a), np.clip(a, 10, 300))
    _same(polyc.jit(lambda a: np.clip(a, -5, 200))(a), np.clip(a, -5, 200))


def test_reciprocal_of_unsigned_integers():
    a = _ext(np.uint8)
    _same(polyc.jit(lambda a: np.reciprocal(np.maximum(a, 1)))(a), np.reciprocal(np.maximum(a, 1)))


def test_small_integer_intermediates_are_contracted_and_wrapped():
    """``(a + b) // 2`` of uint8 computes the sum inside the division's
    statement (no stored intermediate), converted to uint8 first."""
    a, b = _ext(np.uint8), _ext(np.uint8, seed=1)
    f = polyc.jit(lambda a, b: (a + b) // 2)
    _same(f(a, b), (a + b) // 2)
    assert "contracted to scalars" in f.explain(a, b)


def test_reflected_and_in_place_bitwise_operators():
    """``1 << a``, ``1024 >> a`` were Python TypeErrors (no __rlshift__) and
    ``b ^= 3`` on a traced intermediate an AttributeError."""
    a = np.array([0, 1, 3, 7], np.int32)

    def inplace(a):
        b = a + 0
        b ^= 3
        b &= 6
        b <<= 1
        return b
    for fn in (lambda a: 1 << a, lambda a: 1024 >> a, inplace):
        _same(polyc.jit(fn)(a), fn(a.copy()))


def test_int32_product_with_a_python_int_wraps_inside_a_comparison():
    """``3 * a`` of int32 wraps in numpy; computed inside np.where's
    statement (contracted), C's int64 literal kept it unwrapped and the
    comparison chose the other branch."""
    a = np.array([-906825472, 941137610, 5], np.int32)
    b = np.array([-457121767, 618078233, 1], np.int32)
    fn = lambda a, b: np.where((3 * a) > (~b), (3 * a), (~b))  # noqa: E731
    _same(polyc.jit(fn)(a, b), fn(a, b))


def test_tc_integer_casts_wrap_as_astype():
    """TC's ``uint8(x)`` ... ``uint32(x)`` (parsed, refused before) convert as
    numpy's astype: wrapping integers, truncating floats."""
    ks = polyc.compile("""
def a(float(N) A) -> (R) { R(i) = uint8(A(i) * 255.0) }
def b(int32(N) A) -> (R) { R(i) = int8(A(i)) / 2 + int16(A(i) * 1000) }
""")
    x = np.random.default_rng(0).random(50).astype(np.float32)
    _same(ks["a"](x), (x * np.float32(255.0)).astype(np.uint8))
    y = np.arange(-300, 300, 13, dtype=np.int32)
    _same(ks["b"](y), y.astype(np.int8) // 2 + (y * 1000).astype(np.int16))


def test_where_wraps_python_ints_beyond_the_type_as_numpy():
    """np.where(c, uint8_array, -1) is 255 where c is false in numpy (no
    OverflowError, unlike arithmetic); polyc refused it."""
    a, i = _ext(np.uint8), _ext(np.int32)
    for fn, x in ((lambda a: np.where(a > 5, a, -1), a), (lambda a: np.where(a > 5, 300, a), a),
                  (lambda a: np.where(a > 5, a, 2 ** 40 + 3), i)):
        _same(polyc.jit(fn)(x), fn(x))
