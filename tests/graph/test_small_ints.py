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
