"""TC kernels end to end: ``polyc.compile`` -> OpenMP C -> call, against numpy.

Every expected value is an independent numpy formula written here (never
``polyc.reference``), computed in float64 and compared with the per-dtype
tolerance of :func:`polyc.testing.assert_close` (``reduction_length`` = the
number of terms summed into one element).  Shapes and dtypes are checked
before values; every call also checks that the inputs were not modified.
Sizes include 1, primes, sizes that no tile size (multiples of 16) divides,
and zero extents.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import polyc
from polyc import cache
from polyc.testing import assert_close

FLOATS = ["float32", "float64"]


@functools.lru_cache(maxsize=None)
def kernel(src: str, dtype: str | None = None):
    """Compile once per (source, dtype) for the whole module."""
    return polyc.compile(src, dtype=dtype)


def rand(rng, *shape, dtype="float32", lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(dtype)


def call(k, *args):
    """``k(*args)`` as a tuple of outputs, checking that no input changed."""
    before = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    out = k(*args)
    for i, (a, b) in enumerate(zip(args, before)):
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype and a.shape == b.shape
            assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), \
                f"input {i} was modified by the call"
    return out if isinstance(out, tuple) else (out,)


def check(actual, expected, dtype, n=1, name="out"):
    """Shape, then dtype, then values within ``dtype``'s tolerance."""
    expected = np.asarray(expected)
    assert isinstance(actual, np.ndarray), type(actual)
    assert actual.shape == expected.shape, f"{name}: shape {actual.shape} != {expected.shape}"
    assert actual.dtype == np.dtype(dtype), f"{name}: dtype {actual.dtype} != {dtype}"
    assert_close(actual, expected, dtype=dtype, reduction_length=max(int(n), 1), name=name)


def f64(*arrays):
    return [np.asarray(a, dtype=np.float64) for a in arrays]


# --- contractions --------------------------------------------------------------

MATMUL = """
def matmul(float(M, K) A, float(K, N) B) -> (C) {
    C(m, n) +=! A(m, k) * B(k, n)
}
"""
MATMUL_SIZES = [(1, 1, 1), (7, 13, 31), (97, 31, 257), (300, 7, 13), (17, 257, 16),
                (0, 5, 3), (4, 0, 3), (4, 5, 0)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("M,N,K", MATMUL_SIZES)
def test_matmul(dtype, M, N, K):
    rng = np.random.default_rng(1)
    A, B = rand(rng, M, K, dtype=dtype), rand(rng, K, N, dtype=dtype)
    (C,) = call(kernel(MATMUL, dtype), A, B)
    a, b = f64(A, B)
    check(C, a @ b, dtype, n=K, name="C")


def test_matmul_written_with_double():
    k = kernel(MATMUL.replace("float(", "double("))
    rng = np.random.default_rng(2)
    A, B = rand(rng, 31, 13, dtype="float64"), rand(rng, 13, 7, dtype="float64")
    (C,) = call(k, A, B)
    check(C, A @ B, "float64", n=13)


TMM = """
def tmm(float(M, K) A, float(N, K) B) -> (C) {
    C(m, n) +=! A(m, k) * B(n, k)
}
"""


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("M,N,K", [(1, 1, 1), (13, 97, 7), (257, 31, 300), (3, 4, 0)])
def test_tmm(dtype, M, N, K):
    rng = np.random.default_rng(3)
    A, B = rand(rng, M, K, dtype=dtype), rand(rng, N, K, dtype=dtype)
    (C,) = call(kernel(TMM, dtype), A, B)
    a, b = f64(A, B)
    check(C, a @ b.T, dtype, n=K, name="C")


BMM = """
def bmm(float(B, M, K) X, float(B, K, N) Y) -> (Z) {
    Z(b, m, n) +=! X(b, m, k) * Y(b, k, n)
}
"""
TBMM = """
def tbmm(float(B, N, K) X, float(B, M, K) Y) -> (Z) {
    Z(b, n, m) +=! X(b, n, kk) * Y(b, m, kk)
}
"""


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("Bt,M,N,K", [(1, 1, 1, 1), (7, 13, 31, 17), (3, 26, 72, 26),
                                       (0, 3, 4, 5), (2, 3, 4, 0)])
def test_batched_matmul(dtype, Bt, M, N, K):
    rng = np.random.default_rng(4)
    X, Y = rand(rng, Bt, M, K, dtype=dtype), rand(rng, Bt, K, N, dtype=dtype)
    (Z,) = call(kernel(BMM, dtype), X, Y)
    x, y = f64(X, Y)
    check(Z, np.einsum("bmk,bkn->bmn", x, y), dtype, n=K, name="Z")


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("Bt,N,M,K", [(1, 1, 1, 1), (5, 26, 72, 26), (13, 7, 1, 31)])
def test_tbmm(dtype, Bt, N, M, K):
    rng = np.random.default_rng(5)
    X, Y = rand(rng, Bt, N, K, dtype=dtype), rand(rng, Bt, M, K, dtype=dtype)
    (Z,) = call(kernel(TBMM, dtype), X, Y)
    x, y = f64(X, Y)
    check(Z, x @ y.transpose(0, 2, 1), dtype, n=K, name="Z")


MATVEC = """
def matvec(float(M, K) A, float(K) x) -> (y) {
    y(m) +=! A(m, k) * x(k)
}
"""


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("M,K", [(1, 1), (97, 257), (300, 13), (0, 4), (5, 0)])
def test_matvec(dtype, M, K):
    rng = np.random.default_rng(6)
    A, x = rand(rng, M, K, dtype=dtype), rand(rng, K, dtype=dtype)
    (y,) = call(kernel(MATVEC, dtype), A, x)
    a, xx = f64(A, x)
    check(y, a @ xx, dtype, n=K, name="y")


OUTER = """
def outer(float(M) a, float(N) b) -> (O) {
    O(i, j) = a(i) * b(j)
}
"""


@pytest.mark.parametrize("M,N", [(1, 1), (31, 257), (300, 7), (0, 3)])
def test_outer_product(M, N):
    rng = np.random.default_rng(7)
    a, b = rand(rng, M), rand(rng, N)
    (O,) = call(kernel(OUTER), a, b)
    check(O, np.outer(*f64(a, b)), "float32", name="O")


TRANSPOSE = """
def transpose(float(M, N) A) -> (T) {
    T(j, i) = A(i, j)
}
"""


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("M,N", [(1, 1), (7, 300), (257, 13), (0, 5)])
def test_transpose_copy(dtype, M, N):
    A = rand(np.random.default_rng(8), M, N, dtype=dtype)
    (T,) = call(kernel(TRANSPOSE, dtype), A)
    assert T.shape == (N, M) and T.dtype == np.dtype(dtype)
    assert np.array_equal(T, A.T)  # a copy is exact


# --- elementwise ---------------------------------------------------------------

BIAS = """
def bias(float(B, N) A, float(N) bias, float(N) scale) -> (O, P) {
    O(b, n) = A(b, n) + bias(n)
    P(b, n) = A(b, n) * scale(n) + bias(n) * A(b, n)
}
"""


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("B,N", [(1, 1), (13, 257), (300, 31)])
def test_elementwise_with_broadcast_bias(dtype, B, N):
    rng = np.random.default_rng(9)
    A = rand(rng, B, N, dtype=dtype)
    bias, scale = rand(rng, N, dtype=dtype), rand(rng, N, dtype=dtype)
    O, P = call(kernel(BIAS, dtype), A, bias, scale)
    a, b, s = f64(A, bias, scale)
    check(O, a + b[None, :], dtype, name="O")
    check(P, a * s[None, :] + b[None, :] * a, dtype, n=2, name="P")


RELU = """
def relu(float(M, N) A) -> (O) {
    O(i, j) = fmax(A(i, j), 0.0)
}
"""


@pytest.mark.parametrize("dtype", FLOATS)
def test_relu_via_fmax(dtype):
    A = rand(np.random.default_rng(10), 97, 31, dtype=dtype)
    A[0, :5] = [0.0, -0.0, 1.0, -1.0, np.inf]
    (O,) = call(kernel(RELU, dtype), A)
    assert O.shape == A.shape and O.dtype == A.dtype
    assert np.array_equal(O, np.maximum(A, 0))


BUILTIN = """
def f(float(N) X, float(N) Y) -> (O) {{
    O(i) = {expr}
}}
"""
#: (TC expression over X(i), Y(i); numpy formula; input range)
BUILTINS = [
    ("sigmoid(X(i))", lambda x, y: 1 / (1 + np.exp(-x)), (-6, 6)),
    ("tanh(X(i))", lambda x, y: np.tanh(x), (-4, 4)),
    ("exp(X(i))", lambda x, y: np.exp(x), (-5, 5)),
    ("log(X(i))", lambda x, y: np.log(x), (0.1, 10)),
    ("sqrt(X(i))", lambda x, y: np.sqrt(x), (0, 10)),
    ("rsqrt(X(i))", lambda x, y: 1 / np.sqrt(x), (0.1, 10)),
    ("abs(X(i))", lambda x, y: np.abs(x), (-3, 3)),
    ("fabs(X(i) - Y(i))", lambda x, y: np.abs(x - y), (-3, 3)),
    ("pow(X(i), Y(i))", lambda x, y: x ** y, (0.1, 3)),
    ("pow(X(i), 2.0)", lambda x, y: x ** 2, (-3, 3)),
    ("pow(X(i), 3.0)", lambda x, y: x ** 3, (-3, 3)),
    ("pow(X(i) - Y(i), 4)", lambda x, y: (x - y) ** 4, (-3, 3)),
    ("pow(X(i), 3.5)", lambda x, y: x ** 3.5, (0.1, 3)),
    ("pow(X(i), 0.5)", lambda x, y: np.sqrt(x), (0, 3)),
    ("fmin(X(i), Y(i))", lambda x, y: np.minimum(x, y), (-1, 1)),
    ("max(X(i), Y(i))", lambda x, y: np.maximum(x, y), (-1, 1)),
    ("X(i) / Y(i) - -X(i)", lambda x, y: x / y + x, (0.5, 2)),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("expr,formula,bounds", BUILTINS, ids=[b[0] for b in BUILTINS])
def test_builtins(dtype, expr, formula, bounds):
    rng = np.random.default_rng(11)
    X = rand(rng, 257, dtype=dtype, lo=bounds[0], hi=bounds[1])
    Y = rand(rng, 257, dtype=dtype, lo=bounds[0], hi=bounds[1])
    (O,) = call(kernel(BUILTIN.format(expr=expr), dtype), X, Y)
    check(O, formula(*f64(X, Y)), dtype, n=4, name=expr)


@pytest.mark.parametrize("dtype", FLOATS)
def test_small_integer_powers_print_as_products(dtype):
    """``pow(x, 2|3|4)`` prints as a product (libmvec's vector powf runs
    about 20x slower); other exponents stay ``pow``."""
    src = kernel(BUILTIN.format(expr="pow(X(i), 3.0) + pow(Y(i), 2.5)"), dtype).source
    t = "float" if dtype == "float32" else "double"
    assert f"polyc_pow3_{t}(" in src
    assert ("powf(" if t == "float" else "pow(") in src



@pytest.mark.parametrize("dtype", FLOATS)
def test_square_root_power_is_numpys_bit_for_bit(dtype):
    """``pow(x, 0.5)`` is the square root, as numpy's power computes it (-0
    for -0, NaN for -inf and negatives); ``powf(x, 0.5f)`` in an ``omp
    simd`` loop crashed gcc 12 (an internal compiler error)."""
    k = polyc.compile("def f(%s(N) x) -> (y) { y(i) = pow(x(i), 0.5) }"
                      % ("float" if dtype == "float32" else "double"))
    x = np.array([4, 2, 0.0, -0.0, -1, np.inf, -np.inf, np.nan, 1e-30, 3e38] * 7, dtype)
    y, want = k(x), np.power(x, x.dtype.type(0.5))
    np.testing.assert_array_equal(y, want)
    np.testing.assert_array_equal(np.signbit(y), np.signbit(want))

SELECT = """
def select(float(N) A, float(N) B) -> (O) {
    O(i) = A(i) > B(i) ? A(i) - B(i) : (A(i) <= -0.5 || B(i) == 0.25 ? 0.0 : A(i) * B(i))
}
"""


@pytest.mark.parametrize("dtype", FLOATS)
def test_select_with_comparisons(dtype):
    rng = np.random.default_rng(12)
    A, B = rand(rng, 301, dtype=dtype), rand(rng, 301, dtype=dtype)
    B[:7] = 0.25
    A[7:9] = B[7:9]  # equal: not '>'
    (O,) = call(kernel(SELECT, dtype), A, B)
    a, b = f64(A, B)
    want = np.where(a > b, a - b, np.where((a <= -0.5) | (b == 0.25), 0.0, a * b))
    check(O, want, dtype, n=2)


INT_ARITH = """
def intops(int32(N) I, int32(N) J) -> (Q, R, S) {
    Q(i) = I(i) / J(i)
    R(i) = I(i) % J(i)
    S(i) = I(i) * 3 - J(i) + 7
}
"""


def test_integer_floor_division_and_modulo():
    rng = np.random.default_rng(13)
    I = rng.integers(-50, 50, size=97, dtype=np.int32)
    J = rng.integers(1, 9, size=97, dtype=np.int32) * rng.choice(np.array([-1, 1], np.int32), 97)
    Q, R, S = call(kernel(INT_ARITH), I, J)
    for name, got, want in [("Q", Q, I // J), ("R", R, I % J), ("S", S, I * 3 - J + 7)]:
        assert got.dtype == np.int32, name
        check(got, want.astype(np.int32), "int32", name=name)


# --- reductions ----------------------------------------------------------------

REDUCE = """
def reduce(float(M, N) A) -> (mx, mn, prod) {
    mx(i) max=! A(i, j)
    mn(j) min=! A(i, j)
    prod(i) *=! A(i, j)
}
"""


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("M,N", [(1, 1), (13, 97), (257, 7)])
def test_max_min_product_reductions(dtype, M, N):
    rng = np.random.default_rng(14)
    A = rand(rng, M, N, dtype=dtype, lo=0.9, hi=1.1)
    A *= rng.choice(np.array([-1, 1], dtype=dtype), size=(M, N))
    mx, mn, prod = call(kernel(REDUCE, dtype), A)
    a = f64(A)[0]
    check(mx, a.max(axis=1), dtype, name="mx")
    check(mn, a.min(axis=0), dtype, name="mn")
    check(prod, a.prod(axis=1), dtype, n=N, name="prod")


def test_reductions_over_empty_range_give_identities():
    mx, mn, prod = call(kernel(REDUCE), np.zeros((3, 0), np.float32))
    assert mx.shape == (3,) and np.all(mx == -np.inf)
    assert mn.shape == (0,)
    assert prod.shape == (3,) and np.all(prod == 1)
    mx, mn, prod = call(kernel(REDUCE), np.zeros((0, 4), np.float32))
    assert mx.shape == (0,) and mn.shape == (4,) and np.all(mn == np.inf)


SUM_ALL = """
def total(float(M, N) A) -> (s) {
    s +=! A(i, j)
}
"""
SUM_ALL_PARENS = """
def total2(float(M, N) A) -> (s, t) {
    s() +=! A(i, j)
    t() = s() / (M * N)
}
"""


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("M,N", [(1, 1), (31, 257), (0, 5)])
def test_sum_into_rank0_output(dtype, M, N):
    A = rand(np.random.default_rng(15), M, N, dtype=dtype)
    (s,) = call(kernel(SUM_ALL, dtype), A)
    check(s, np.asarray(f64(A)[0].sum()), dtype, n=M * N, name="s")


def test_sum_into_rank0_output_with_parentheses_and_mean():
    A = rand(np.random.default_rng(16), 97, 13, dtype="float64")
    s, t = call(kernel(SUM_ALL_PARENS, "float64"), A)
    check(s, np.asarray(A.sum()), "float64", n=A.size, name="s")
    check(t, np.asarray(A.mean()), "float64", n=A.size, name="t")


# --- multi-statement programs --------------------------------------------------

SOFTMAX = """
def softmax(float(N, C) I) -> (O, maxVal, expDist, expSum) {
    maxVal(n) max=! I(n, c)
    expDist(n, c) = exp(I(n, c) - maxVal(n))
    expSum(n) +=! expDist(n, c)
    O(n, c) = expDist(n, c) / expSum(n)
}
"""


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("N,C", [(1, 1), (13, 257), (300, 31)])
def test_row_softmax(dtype, N, C):
    I = rand(np.random.default_rng(17), N, C, dtype=dtype, lo=-10, hi=10)
    O, mx, e, s = call(kernel(SOFTMAX, dtype), I)
    x = f64(I)[0]
    m = x.max(axis=1)
    ex = np.exp(x - m[:, None])
    check(mx, m, dtype, name="maxVal")
    check(e, ex, dtype, name="expDist")
    check(s, ex.sum(axis=1), dtype, n=C, name="expSum")
    check(O, ex / ex.sum(axis=1, keepdims=True), dtype, n=C, name="O")


LAYERNORM = """
def layernorm(float(N, D) X, float(D) gamma, float(D) beta) -> (mean, var, Y) {
    mean(n) +=! X(n, d)
    mean(n) = mean(n) / D
    var(n) +=! (X(n, d) - mean(n)) * (X(n, d) - mean(n))
    var(n) = var(n) / D
    Y(n, d) = gamma(d) * (X(n, d) - mean(n)) * rsqrt(var(n) + 1e-5) + beta(d)
}
"""


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("N,D", [(1, 2), (7, 257), (97, 31)])
def test_layernorm(dtype, N, D):
    rng = np.random.default_rng(18)
    X, g, b = rand(rng, N, D, dtype=dtype), rand(rng, D, dtype=dtype), rand(rng, D, dtype=dtype)
    mean, var, Y = call(kernel(LAYERNORM, dtype), X, g, b)
    x, gg, bb = f64(X, g, b)
    mu = x.mean(axis=1)
    v = ((x - mu[:, None]) ** 2).mean(axis=1)
    check(mean, mu, dtype, n=D, name="mean")
    check(var, v, dtype, n=D, name="var")
    check(Y, gg * (x - mu[:, None]) / np.sqrt(v[:, None] + 1e-5) + bb, dtype, n=D, name="Y")


# --- convolutions --------------------------------------------------------------

CONV1D = """
def conv1d(float(L) I, float(K) W) -> (O) {
    O(i) +=! I(i + k) * W(k)
}
"""


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("L,K", [(1, 1), (13, 3), (300, 7), (257, 31), (5, 5), (3, 5), (0, 2)])
def test_conv1d_valid_range(dtype, L, K):
    rng = np.random.default_rng(19)
    I, W = rand(rng, L, dtype=dtype), rand(rng, K, dtype=dtype)
    (O,) = call(kernel(CONV1D, dtype), I, W)
    i, w = f64(I, W)
    n = max(L - K + 1, 0)
    want = np.array([np.dot(i[j:j + K], w) for j in range(n)]).reshape(n)
    check(O, want, dtype, n=K, name="O")


STRIDED = """
def strided(float(H) I, float(KH) W, int64 S) -> (O) {
    O(h) +=! I(h*S + kh) * W(kh)
}
"""


@pytest.mark.parametrize("H,KH", [(1, 1), (31, 3), (300, 7)])
def test_strided_conv_specialises_per_stride(H, KH):
    k = kernel(STRIDED)
    rng = np.random.default_rng(20)
    I, W = rand(rng, H), rand(rng, KH)
    i, w = f64(I, W)
    for S in (2, 3, 1):
        (O,) = call(k, I, W, S)
        n = (H - KH) // S + 1
        want = np.array([np.dot(i[h * S:h * S + KH], w) for h in range(n)]).reshape(n)
        check(O, want, "float32", n=KH, name=f"O (S={S})")


STRIDED_LITERAL = """
def stride2(float(H) I, float(KH) W) -> (O) {
    O(h) +=! I(2*h + kh) * W(kh)
}
"""


@pytest.mark.parametrize("H,KH", [(1, 1), (2, 1), (30, 3), (31, 3), (257, 16)])
def test_strided_conv_literal_stride(H, KH):
    rng = np.random.default_rng(21)
    I, W = rand(rng, H), rand(rng, KH)
    (O,) = call(kernel(STRIDED_LITERAL), I, W)
    i, w = f64(I, W)
    n = (H - KH) // 2 + 1
    want = np.array([np.dot(i[2 * h:2 * h + KH], w) for h in range(n)]).reshape(n)
    check(O, want, "float32", n=KH)


CONV2D = """
def conv2d(float(N, C, H, W) I, float(F, C, KH, KW) W1) -> (O) {
    O(n, f, h, w) +=! I(n, c, h + kh, w + kw) * W1(f, c, kh, kw)
}
"""


def conv2d_ref(x, w):
    N, C, H, W = x.shape
    F, _, KH, KW = w.shape
    OH, OW = H - KH + 1, W - KW + 1
    out = np.zeros((N, F, OH, OW))
    for kh in range(KH):
        for kw in range(KW):
            out += np.einsum("nchw,fc->nfhw", x[:, :, kh:kh + OH, kw:kw + OW], w[:, :, kh, kw])
    return out


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("N,C,H,W,F,KH,KW", [(1, 1, 1, 1, 1, 1, 1), (2, 3, 13, 17, 5, 3, 3),
                                              (1, 2, 31, 7, 3, 5, 1)])
def test_conv2d(dtype, N, C, H, W, F, KH, KW):
    rng = np.random.default_rng(22)
    I, W1 = rand(rng, N, C, H, W, dtype=dtype), rand(rng, F, C, KH, KW, dtype=dtype)
    (O,) = call(kernel(CONV2D, dtype), I, W1)
    check(O, conv2d_ref(*f64(I, W1)), dtype, n=C * KH * KW, name="O")


GCONV = """
def gconv(float(N, G, C, H, W) I, float(G, F, C, KH, KW) W1, float(G, F) B) -> (O) {
    O(n, g, f, h, w) +=! I(n, g, c, h + kh, w + kw) * W1(g, f, c, kh, kw)
    O(n, g, f, h, w) = O(n, g, f, h, w) + B(g, f)
}
"""


@pytest.mark.parametrize("N,G,C,F,H,W,KH,KW", [(1, 1, 1, 1, 3, 3, 3, 3), (2, 3, 4, 5, 9, 11, 3, 3)])
def test_grouped_conv(N, G, C, F, H, W, KH, KW):
    rng = np.random.default_rng(23)
    I = rand(rng, N, G, C, H, W)
    W1, B = rand(rng, G, F, C, KH, KW), rand(rng, G, F)
    (O,) = call(kernel(GCONV), I, W1, B)
    x, w, b = f64(I, W1, B)
    want = np.stack([conv2d_ref(x[:, g], w[g]) for g in range(G)], axis=1)
    check(O, want + b[None, :, :, None, None], "float32", n=C * KH * KW + 1, name="O")


# --- gathers -------------------------------------------------------------------

EMBEDDING = """
def embedding(float(V, D) LUT, {itype}(B) I) -> (O) {{
    O(b, d) = LUT(I(b), d)
}}
"""
EMBEDDING_BAG = """
def embedding_bag({itype}(B, L) I, float(N, D) LUT) -> (O) {{
    O(b, d) +=! LUT(I(b, l), d)
}}
"""


@pytest.mark.parametrize("itype", ["int64", "int32"])
@pytest.mark.parametrize("V,D,B", [(1, 1, 1), (97, 13, 31), (10, 257, 0)])
def test_embedding_gather(itype, V, D, B):
    rng = np.random.default_rng(24)
    LUT = rand(rng, V, D)
    I = rng.integers(0, V, size=B).astype(itype)
    (O,) = call(kernel(EMBEDDING.format(itype=itype)), LUT, I)
    assert O.shape == (B, D) and O.dtype == np.float32
    assert np.array_equal(O, LUT[I])


@pytest.mark.parametrize("itype", ["int64", "int32"])
@pytest.mark.parametrize("B,L,N,D", [(1, 1, 1, 1), (13, 7, 97, 31), (4, 0, 5, 3),
                                     (31, 50, 300, 17)])
def test_embedding_bag(itype, B, L, N, D):
    rng = np.random.default_rng(25)
    I = rng.integers(0, N, size=(B, L)).astype(itype)
    LUT = rand(rng, N, D)
    (O,) = call(kernel(EMBEDDING_BAG.format(itype=itype)), I, LUT)
    check(O, f64(LUT)[0][I].sum(axis=1), "float32", n=L, name="O")


# --- where clauses, scalars, sizes ----------------------------------------------

WHERE_PREFIX = """
def prefix(float(N) A) -> (O) {
    O(i) = A(i) + A(i + 1) where i in 0:N-1
}
"""
WHERE_SIZE_ARG = """
def firstk(float(M, N) A, int64 K) -> (O) {
    O(i) +=! A(i, j) where j in 0:K
}
"""


@pytest.mark.parametrize("N", [2, 13, 257])
def test_where_prefix_range(N):
    A = rand(np.random.default_rng(26), N)
    (O,) = call(kernel(WHERE_PREFIX), A)
    a = f64(A)[0]
    check(O, a[:-1] + a[1:], "float32", n=2)


@pytest.mark.parametrize("K", [0, 1, 7, 31])
def test_where_range_from_scalar_size_argument(K):
    A = rand(np.random.default_rng(27), 13, 31)
    (O,) = call(kernel(WHERE_SIZE_ARG), A, K)
    check(O, f64(A)[0][:, :K].sum(axis=1), "float32", n=K)


def test_where_range_beyond_the_input_is_refused():
    with pytest.raises(polyc.ShapeError):
        kernel(WHERE_SIZE_ARG)(rand(np.random.default_rng(28), 3, 4), 5)


SCALAR_IN = """
def axpy(float a, float(N) X, float(N) Y) -> (Z) {
    Z(i) = a * X(i) + Y(i)
}
"""


def test_rank0_input_scalar():
    rng = np.random.default_rng(29)
    X, Y = rand(rng, 97), rand(rng, 97)
    a = np.asarray(0.75, dtype=np.float32)
    (Z,) = call(kernel(SCALAR_IN), a, X, Y)
    x, y = f64(X, Y)
    check(Z, 0.75 * x + y, "float32", n=2)


KRON = """
def kron(float(M, N) A, float(P, Q) B) -> (K) {
    K(i, k, j, l) = A(i, j) * B(k, l)
}
"""


@pytest.mark.parametrize("M,N,P,Q", [(1, 1, 1, 1), (3, 7, 5, 2), (13, 4, 17, 6)])
def test_kronecker_product(M, N, P, Q):
    rng = np.random.default_rng(30)
    A, B = rand(rng, M, N), rand(rng, P, Q)
    (K,) = call(kernel(KRON), A, B)
    assert K.shape == (M, P, N, Q)
    check(K.reshape(M * P, N * Q), np.kron(*f64(A, B)), "float32")


ACCUMULATE = """
def acc(float(N) A, float(N, M) B) -> (O) {
    O(i) = A(i)
    O(i) += B(i, j)
}
"""


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("N,M", [(1, 1), (13, 257), (300, 7), (5, 0)])
def test_plain_accumulation_into_earlier_output(dtype, N, M):
    rng = np.random.default_rng(31)
    A, B = rand(rng, N, dtype=dtype), rand(rng, N, M, dtype=dtype)
    (O,) = call(kernel(ACCUMULATE, dtype), A, B)
    a, b = f64(A, B)
    check(O, a + b.sum(axis=1), dtype, n=M + 1)


INPLACE = """
def inplace(float(M, N) A, float(N) b) -> (O) {
    O(i, j) = A(i, j) * 2.0
    O(i, j) = O(i, j) + b(j)
    O(i, j) = O(i, j) * O(i, j)
}
"""


def test_in_place_updates_in_later_statements():
    rng = np.random.default_rng(32)
    A, b = rand(rng, 31, 257), rand(rng, 257)
    (O,) = call(kernel(INPLACE), A, b)
    a, bb = f64(A, b)
    check(O, (2 * a + bb) ** 2, "float32", n=3)


SIZE_VALUES = """
def sizes(float(M, N) A) -> (O) {
    O(i, j) = A(i, j) * A.1 + M - N + i - j
}
"""


def test_sizes_dims_and_indices_as_values():
    A = rand(np.random.default_rng(33), 7, 13)
    (O,) = call(kernel(SIZE_VALUES), A)
    i, j = np.meshgrid(np.arange(7), np.arange(13), indexing="ij")
    check(O, f64(A)[0] * 13 + 7 - 13 + i - j, "float32", n=2)


# --- several defs; one compile serves every size ----------------------------------

TWO_DEFS = MATMUL + TRANSPOSE + """
def scale(float(N) X, float c) -> (Y) {
    Y(i) = X(i) * c
}
"""


def test_several_defs_give_a_dict():
    ks = kernel(TWO_DEFS)
    assert isinstance(ks, dict) and list(ks) == ["matmul", "transpose", "scale"]
    assert all(isinstance(k, polyc.Kernel) for k in ks.values())
    rng = np.random.default_rng(34)
    A, B = rand(rng, 13, 7), rand(rng, 7, 31)
    (C,) = call(ks["matmul"], A, B)
    check(C, f64(A)[0] @ f64(B)[0], "float32", n=7)
    (T,) = call(ks["transpose"], A)
    assert np.array_equal(T, A.T)
    (Y,) = call(ks["scale"], B[0], np.asarray(3.0, np.float32))
    check(Y, 3.0 * f64(B[0])[0], "float32")


def test_one_compile_serves_several_sizes():
    src = MATMUL.replace("matmul", "matmul_sizes")  # a kernel of its own
    k = polyc.compile(src)
    cache.reset_stats()
    rng = np.random.default_rng(35)
    for M, N, K in [(1, 1, 1), (7, 13, 31), (300, 17, 257), (0, 3, 2), (64, 64, 64)]:
        A, B = rand(rng, M, K), rand(rng, K, N)
        (C,) = call(k, A, B)
        check(C, f64(A)[0] @ f64(B)[0], "float32", n=K)
    again = polyc.compile(src)
    (C,) = call(again, A, B)
    assert cache.stats().builds == 0


def test_specialising_kernel_builds_once_per_stride():
    k = polyc.compile(STRIDED.replace("strided", "strided_count"))
    rng = np.random.default_rng(36)
    cache.reset_stats()
    call(k, rand(rng, 31), rand(rng, 3), 2)
    after_first = cache.stats()
    assert after_first.builds + after_first.disk_hits + after_first.memory_hits >= 1
    for H in (7, 300, 3):
        call(k, rand(rng, H), rand(rng, 3), 2)
    assert cache.stats() == after_first  # same S: the same specialised kernel
    call(k, rand(rng, 31), rand(rng, 3), 3)
    assert cache.stats() != after_first  # another S: another kernel


def test_out_argument_is_written_in_place():
    k = kernel(MATMUL)
    rng = np.random.default_rng(37)
    A, B = rand(rng, 13, 7), rand(rng, 7, 5)
    out = np.full((13, 5), np.nan, np.float32)
    res = k(A, B, out=out)
    assert res is out
    check(out, f64(A)[0] @ f64(B)[0], "float32", n=7)


# --- more programs: in-place recurrences, pooling, diagonals, chains -------------

SEIDEL = """
def seidel(double(N, M) A) -> (O) {
    O(i, j) = A(i, j)
    O(i, j) = (O(i - 1, j) + O(i, j - 1) + O(i, j)) / 3.0 where i in 1:N, j in 1:M
}
"""


@pytest.mark.parametrize("N,M", [(1, 1), (2, 7), (31, 17), (97, 13)])
def test_in_place_recurrence_is_sequential(N, M):
    """Each element reads its already-updated upper and left neighbours."""
    A = rand(np.random.default_rng(40), N, M, dtype="float64")
    (O,) = call(kernel(SEIDEL), A)
    want = A.copy()
    for i in range(1, N):
        for j in range(1, M):
            want[i, j] = (want[i - 1, j] + want[i, j - 1] + want[i, j]) / 3.0
    check(O, want, "float64", n=3)


SCAN = """
def scan(float(N, M) B) -> (O) {
    O(i, j) = B(i, j)
    O(i, j) = O(i, j) + O(i - 1, j) where i in 1:N
}
"""


@pytest.mark.parametrize("N,M", [(1, 1), (300, 7), (13, 257)])
def test_prefix_sum_along_rows(N, M):
    B = rand(np.random.default_rng(41), N, M, dtype="float64")
    (O,) = call(kernel(SCAN, "float64"), B)
    check(O, np.cumsum(B, axis=0), "float64", n=N)


POOL = """
def pool(float(N, H, W) I) -> (mx, avg) {
    mx(n, h, w) max=! I(n, 2*h + kh, 2*w + kw) where kh in 0:2, kw in 0:2
    avg(n, h, w) +=! I(n, 3*h + kh, 3*w + kw) / 9.0 where kh in 0:3, kw in 0:3
}
"""


@pytest.mark.parametrize("N,H,W", [(1, 1, 1), (1, 3, 3), (2, 13, 31), (3, 100, 7)])
def test_max_and_average_pooling(N, H, W):
    I = rand(np.random.default_rng(42), N, H, W)
    mx, avg = call(kernel(POOL), I)
    x = f64(I)[0]
    h2, w2 = H // 2, W // 2
    want_mx = x[:, :2 * h2, :2 * w2].reshape(N, h2, 2, w2, 2).max(axis=(2, 4))
    h3, w3 = H // 3, W // 3
    want_avg = x[:, :3 * h3, :3 * w3].reshape(N, h3, 3, w3, 3).mean(axis=(2, 4))
    check(mx, want_mx, "float32", name="mx")
    check(avg, want_avg, "float32", n=9, name="avg")


DIAG = """
def diag(float(N, N) A) -> (d, tr, U) {
    d(i) = A(i, i)
    tr +=! A(i, i)
    U(i, j) = j >= i ? A(i, j) : 0.0
}
"""


@pytest.mark.parametrize("N", [1, 7, 257])
def test_diagonal_trace_and_triangle(N):
    A = rand(np.random.default_rng(43), N, N)
    d, tr, U = call(kernel(DIAG), A)
    a = f64(A)[0]
    check(d, np.diag(a), "float32", name="d")
    check(tr, np.asarray(np.trace(a)), "float32", n=N, name="tr")
    check(U, np.triu(a), "float32", name="U")


def test_square_size_contradiction_is_refused():
    with pytest.raises(polyc.ShapeError):
        kernel(DIAG)(np.zeros((3, 4), np.float32))


CHAIN = """
def chain(float(M, K) A, float(K, N) B, float(N, P) C) -> (T, D) {
    T(i, j) +=! A(i, k) * B(k, j)
    D(i, j) +=! T(i, k) * C(k, j)
}
"""


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("M,K,N,P", [(1, 1, 1, 1), (31, 17, 13, 7), (65, 3, 257, 2)])
def test_matmul_chain_through_a_temporary(dtype, M, K, N, P):
    rng = np.random.default_rng(44)
    A, B, C = (rand(rng, *s, dtype=dtype) for s in ((M, K), (K, N), (N, P)))
    T, D = call(kernel(CHAIN, dtype), A, B, C)
    a, b, c = f64(A, B, C)
    check(T, a @ b, dtype, n=K, name="T")
    check(D, a @ b @ c, dtype, n=K * N, name="D")


# --- integer arithmetic inside floating-point statements ----------------------------

INT_DIV_IN_FLOAT = """
def idiv(float(N) A) -> (P, Q, R) {
    P(i) = A(i) + N / 2
    Q(i) = A(i) + i / 2
    R(i) = A(i) * ((i / 2) * 2 == i ? 1.0 : -1.0)
}
"""


def test_integer_division_inside_float_statement_floors():
    N = 7
    A = np.ones(N, np.float32)
    P, Q, R = call(kernel(INT_DIV_IN_FLOAT), A)
    i = np.arange(N)
    check(P, np.full(N, N // 2 + 1, np.float64), "float32", name="P")
    check(Q, (i // 2 + 1).astype(np.float64), "float32", name="Q")
    check(R, np.where(i % 2 == 0, 1.0, -1.0), "float32", name="R")


# --- schedule options change the code, never the result ---------------------------

SCHEDULE_OPTIONS = {
    "no-simd": {"simd": False},
    "no-parallel": {"parallel": False},
    "untiled": {"tiling": False},
    "tile16": {"tile_sizes": (16,)},
    "identity": {"schedule": "identity"},
}


def _tmm_case(rng):
    A, B = rand(rng, 31, 257, dtype="float64"), rand(rng, 13, 257, dtype="float64")
    return (A, B), [(A @ B.T, 257)]


def _reduce_case(rng):
    A = rand(rng, 13, 97, dtype="float64", lo=0.9, hi=1.1)
    return (A,), [(A.max(axis=1), 1), (A.min(axis=0), 1), (A.prod(axis=1), 97)]


def _seidel_case(rng):
    A = rand(rng, 17, 19, dtype="float64")
    want = A.copy()
    for i in range(1, 17):
        for j in range(1, 19):
            want[i, j] = (want[i - 1, j] + want[i, j - 1] + want[i, j]) / 3.0
    return (A,), [(want, 3)]


def _softmax_case(rng):
    x = rand(rng, 31, 257, dtype="float64", lo=-5, hi=5)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return (x,), [(e / e.sum(axis=1, keepdims=True), 257), (x.max(axis=1), 1), (e, 1),
                  (e.sum(axis=1), 257)]


SCHEDULE_CASES = {"tmm": (TMM, _tmm_case), "reduce": (REDUCE, _reduce_case),
                  "seidel": (SEIDEL, _seidel_case), "softmax": (SOFTMAX, _softmax_case)}


@pytest.mark.parametrize("name,option", [
    (name, option) for name in SCHEDULE_CASES for option in SCHEDULE_OPTIONS])
def test_schedule_options_give_the_same_result(name, option):
    src, make = SCHEDULE_CASES[name]
    config = polyc.Config.from_env(**SCHEDULE_OPTIONS[option])
    k = polyc.compile(src, dtype="float64", config=config)
    body = k.source.split("void polyc_kernel")[1]   # (a pasted intrinsic has pragmas)
    if option in ("no-parallel", "identity"):
        assert "omp parallel" not in body
        assert "polyc_gemm" not in body or body.count(", 1);") >= 1   # calls on 1 thread
    if option in ("no-simd", "identity"):
        assert "omp simd" not in body
    args, expected = make(np.random.default_rng(45))
    outs = call(k, *args)
    assert len(outs) == len(expected)
    for i, (got, (want, n)) in enumerate(zip(outs, expected)):
        check(got, want, "float64", n=n, name=f"{name} output {i}")


def test_rank0_input_from_random_inputs():
    from polyc.testing import random_inputs
    k = kernel(SCALAR_IN)
    inputs = random_inputs(k.program, {"N": 5}, seed=0)
    a, X, Y = (inputs[n] for n in ("a", "X", "Y"))
    (Z,) = call(k, a, X, Y)
    check(Z, float(a) * f64(X)[0] + f64(Y)[0], "float32", n=2)
