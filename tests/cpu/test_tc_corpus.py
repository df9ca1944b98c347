"""TC as Tensor Comprehensions' own tests and examples write it, end to end.

Each definition here is written anew after a construct of TC's corpus
(``test/cuda/test_corner_cases.cc``, ``test/test_lang.cc``,
``python/examples/min_distance.py``, ``tc/benchmarks/wavenet.h`` ...) that
polyc once refused or miscompiled; each is compiled with ``polyc.compile``
and compared with an independent numpy formula at tiny sizes (exact where the
result is exact, else ``polyc.testing.assert_close``'s per-dtype tolerance).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import polyc
from polyc.errors import BindingError, UnsupportedError
from polyc.testing import assert_close

F32 = np.float32


def test_casts_convert_as_numpys_astype():
    # TC's corner cases E15/E16 (float(a <= b)), tum.py (1.0 / float(PosCount(k)))
    # and wavenet (float(0)): a cast converts to that type, as numpy's astype (an
    # integer cast of a float truncates toward zero)
    k = polyc.compile("""
def f(float a, float b, int32(N) c, float(N) d) -> (x, y, z, p, q, w) {
    x(i) = float(a <= b) + float(!(a < .5) || b > .5) where i in 0:1
    y(i) = 1.0 / float(c(i)) + float(0)
    z(i) = double(c(i)) / 3
    p(i) = int64(d(i) * 3)
    q(i) = int32(d(i))
    w(i) = int32(d(i) * 2.5) + int32(1.5)
}""")
    a, b = np.array(0.3, F32), np.array(0.6, F32)
    c = np.array([1, 3, -7, 2], np.int32)
    d = np.array([1.5, -1.5, 2.9, -0.4], F32)
    x, y, z, p, q, w = k(a, b, c, d)
    assert x.dtype == F32 and np.array_equal(x, [2.0])
    assert y.dtype == F32
    assert_close(y, 1.0 / c.astype(np.float64), dtype="float32")
    assert z.dtype == np.float64       # double(c(i)) / 3 computes in double
    np.testing.assert_array_equal(z, c.astype(np.float64) / 3)
    assert p.dtype == np.int64 and q.dtype == np.int32
    np.testing.assert_array_equal(p, (d * 3).astype(np.int64))
    np.testing.assert_array_equal(q, d.astype(np.int32))
    # a float literal inside a cast is computed before the conversion (it was refused
    # as a fractional literal of the int32 statement)
    assert w.dtype == np.int32
    np.testing.assert_array_equal(w, (d.astype(np.float64) * 2.5).astype(np.int32) + 1)


def test_gather_through_integer_cast():
    # min_distance.py: S(n) +=! L(r_m, int32(Codes(n, r_m))) of uint8 codes (the C
    # backend could not print the cast as an index), and test_lang.cc's
    # O max=! A(int32(B(i))) of a float B (refused as a float index tensor)
    k = polyc.compile("""
def mindis(float(M, 256) L, uint8(N, M) Codes) -> (S, v, min_idx) {
          S(n) +=! L(r_m, int32(Codes(n, r_m)))
          v  min=! S(r_n)
    min_idx  min=! (S(r_n) == v) ? r_n : N
}""")
    rng = np.random.default_rng(3)
    L = rng.random((3, 256), dtype=F32)
    codes = rng.integers(0, 256, (5, 3)).astype(np.uint8)
    S, v, idx = k(L, codes)
    want = L[np.arange(3)[None, :], codes.astype(np.int64)].astype(np.float64).sum(axis=1)
    assert_close(S, want, dtype="float32", reduction_length=3)
    assert v == S.min() and int(idx) == int(np.argmin(S))
    k = polyc.compile("def fun(float(M) A, float(N) B) -> (O) { O max=! A(int32(B(i))) }")
    A = np.array([5.0, -1.0, 7.0, 2.0], F32)
    B = np.array([0.5, 3.9, 1.2], F32)        # truncated: 0, 3, 1
    assert k(A, B) == A[B.astype(np.int32)].max()
    # the converted values are checked at call time, as a plain gather's are
    for bad, shown in ((4.2, "index 4"), (-1.5, "index -1")):
        with pytest.raises(BindingError, match=f"argument B: holds {shown} \\(its value "
                           "converted to int32\\), but it indexes dimension 0 of A"):
            k(A, np.array([0.0, bad], F32))


def test_half_casts_are_refused_with_the_location():
    with pytest.raises(UnsupportedError, match=r"<tc>:1:35: the cast 'half\(a\(i\)\)'"):
        polyc.compile("def f(float(N) a) -> (b) { b(i) = half(a(i)) }")


def test_let_bindings_and_equivalence_annotations():
    # corner case E18 (b(i) = 2*foo where foo = a(i)), a binding that uses an earlier
    # one, and an annotation "<=> name(...)" as test_lang.cc's "<=> matmul(...)",
    # which computes nothing
    k = polyc.compile("""
def f(float(M, K) A, float(M) c) -> (O, P) {
    O(i) max=! A(i, k) * c(i) <=> rowmax(A(i, k), c(i))
    P(i) = 2 * x + y where x = c(i), y = x * x
}""")
    rng = np.random.default_rng(5)
    A, c = rng.standard_normal((2, 3)).astype(F32), rng.random(2, dtype=F32)
    O, P = k(A, c)
    np.testing.assert_array_equal(O, (A * c[:, None]).max(axis=1))
    c64 = c.astype(np.float64)
    assert_close(P, 2 * c64 + c64 * c64, dtype="float32")


def test_scalar_size_argument_from_a_0d_integer_array():
    # corner case E10 passes int32 a as a 0-d integer tensor; a 0-d float array stays refused
    k = polyc.compile("def f(int32 a, float(N) b) -> (c) {\n"
                      "  c(i) +=! b(i + j) where j in 0:a, i in 0:3 }")
    b = np.arange(6, dtype=F32)
    want = np.array([b[i:i + 2].sum() for i in range(3)], F32)
    np.testing.assert_array_equal(k(np.array(2, np.int32), b), want)
    np.testing.assert_array_equal(k(np.int64(2), b), want)
    with pytest.raises(BindingError, match=r"argument a: expected an integer size .* got a "
                       r"float64 array of shape \(\)"):
        k(np.array(2.0), b)


def test_c99_builtins_of_tc():
    # TC's builtin table (tc/lang/builtins.h) has C99's erfc lgamma tgamma round logb
    # nextafter fdim remainder; test_cuda_mapper.cc uses nextafter(C(n0), exp(...));
    # in float, C's erfcf ... (double's functions differ only in the suffix)
    k = polyc.compile("""
def f(float(N) x, float(N) y) -> (a, b, c, d, e, g, h, r) {
    a(i) = erfc(x(i))
    b(i) = lgamma(x(i))
    c(i) = tgamma(x(i))
    d(i) = round(x(i))
    e(i) = logb(x(i))
    g(i) = nextafter(x(i), y(i))
    h(i) = fdim(x(i), y(i))
    r(i) = remainder(x(i), y(i))
}""")
    t = F32
    x = np.array([0.5, -2.5, 2.5, 3.75, -0.3, 7.0, 1e-3], t)
    y = np.array([2.0, 1.0, -1.0, 1.5, -0.3, 2.0, 4.0], t)
    a, b, c, d, e, g, h, r = k(x, y)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    name = "float32"
    assert_close(a, [math.erfc(v) for v in x64], dtype=name)
    assert_close(b, [math.lgamma(v) for v in x64], dtype=name)
    assert_close(c, [math.gamma(v) for v in x64], dtype=name)
    # exact ones: C's round (half away from zero), exponent, neighbour, IEEE remainder
    np.testing.assert_array_equal(d, np.trunc(x + np.copysign(t(0.5), x)))
    np.testing.assert_array_equal(e, np.floor(np.log2(np.abs(x64))).astype(t))
    np.testing.assert_array_equal(g, np.nextafter(x, y))
    np.testing.assert_array_equal(h, np.maximum(x - y, 0))
    np.testing.assert_array_equal(r, [math.remainder(u, v) for u, v in zip(x64, y64)])
    assert all(o.dtype == t for o in (a, b, c, d, e, g, h, r))
