"""The GEMM intrinsic with alpha and beta (C = alpha * A . B + beta * C):

(a) the C functions of ``backends/c/intrinsics/gemm.h`` (``polyc_gemm_*``,
    ``polyc_gemmx_*``) against numpy, for every micro-kernel (native, AVX2,
    portable) and the no-memory fallback: edge tiles, several K blocks,
    K == 0, alpha == 0, 1 and 2 threads, bias + relu, strided C; beta == 0
    must not read C (it is filled with NaN);
(b) the matching: scalar factors of the update become alpha
    (:func:`polyc.intrinsics.match_gemm`), a scaling statement becomes beta
    (:func:`polyc.intrinsics.match_scale`);
(c) end to end: scaled TC contractions compiled with ``polyc.compile`` call
    the intrinsic with their alpha and match numpy.
"""

from __future__ import annotations

import ctypes
import re
from dataclasses import replace
from pathlib import Path

import islpy as isl
import numpy as np
import pytest
from gemm_abi import (  # tests/gemm_abi.py (tests/ is on sys.path via conftest)
    build_shim,
    dims,
    offsets,
)

import polyc
from polyc import expr as E
from polyc.intrinsics import GemmMatch, match_gemm, match_scale

SHIM = r"""
#include "gemm.h"
const char *isa(void) { return polyc_gemm_isa(); }
#define SHIM(T, SFX)                                                                \
    void gemm_##SFX(int64_t M, int64_t N, int64_t K, const T *A, int64_t a_rs,      \
                    int64_t a_cs, const T *B, int64_t b_rs, int64_t b_cs, T *C,     \
                    int64_t c_rs, int64_t c_cs, T alpha, T beta, const T *bias,     \
                    int64_t bias_cs, int relu, int nt)                              \
    {                                                                               \
        polyc_gemm_##SFX(M, N, K, A, a_rs, a_cs, B, b_rs, b_cs, C, c_rs, c_cs,      \
                         alpha, beta, bias, bias_cs, relu, nt);                     \
    }                                                                               \
    void gemmx_##SFX(int64_t M, int64_t N, int64_t K, const T *A,                   \
                     const polyc_gemm_dims *ar, const polyc_gemm_dims *ac,          \
                     const T *B, const polyc_gemm_dims *br,                         \
                     const polyc_gemm_dims *bc, T *C, int64_t c_rs, int64_t c_cs,   \
                     T alpha, T beta, const T *bias, int64_t bias_cs, int relu,     \
                     int nt)                                                        \
    {                                                                               \
        polyc_gemmx_##SFX(M, N, K, A, ar, ac, B, br, bc, C, c_rs, c_cs, alpha,      \
                          beta, bias, bias_cs, relu, nt);                           \
    }
SHIM(float, f32)
SHIM(double, f64)
"""

#: name -> (the ISA the build must report, None: the machine's; extra flags)
BUILDS = {
    "native": (None, []),
    "avx2": ("avx2", ["-mno-avx512f"]),
    "portable": ("portable", ["-mno-avx2", "-mno-avx512f", "-mno-fma"]),
    # malloc always fails: every call takes the plain-loop fallback
    "nomem": (None, ["-DPOLYC_GEMM_MALLOC(n)=((void)(n), (void *)0)"]),
}

#: relative tolerance per dtype, times the magnitude of the terms summed
RTOL = {np.float32: 1e-4, np.float64: 1e-10}


def _native_isa() -> str:
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    if " avx512f" in info:
        return "avx512"
    if " avx2" in info and " fma" in info:
        return "avx2"
    return "portable"


_BUILT: dict[str, ctypes.CDLL] = {}


def _build(name: str, tmp_path_factory) -> ctypes.CDLL:
    """The shim built for one micro-kernel (once per module run)."""
    if name in _BUILT:
        return _BUILT[name]
    expected, extra = BUILDS[name]
    if name == "avx2" and _native_isa() == "portable":
        pytest.skip("no AVX2 on this machine")
    so = build_shim(tmp_path_factory, f"gemm_scaled_{name}", SHIM,
                    ["-O2", "-march=native", "-fopenmp", *extra])
    so.isa.restype = ctypes.c_char_p
    assert so.isa().decode() == (expected or _native_isa())
    i64, vp, ci = ctypes.c_int64, ctypes.c_void_p, ctypes.c_int
    for sfx, ct in (("f32", ctypes.c_float), ("f64", ctypes.c_double)):
        f = getattr(so, f"gemm_{sfx}")
        f.restype = None
        f.argtypes = [i64, i64, i64, vp, i64, i64, vp, i64, i64, vp, i64, i64, ct, ct, vp,
                      i64, ci, ci]
        f = getattr(so, f"gemmx_{sfx}")
        f.restype = None
        f.argtypes = [i64, i64, i64, vp, vp, vp, vp, vp, vp, vp, i64, i64, ct, ct, vp, i64,
                      ci, ci]
    _BUILT[name] = so
    return so


@pytest.fixture(scope="module", params=list(BUILDS))
def lib(request, tmp_path_factory):
    """Each build in turn: native, AVX2, portable micro-kernels, no memory."""
    return _build(request.param, tmp_path_factory)


@pytest.fixture(scope="module")
def native(tmp_path_factory):
    return _build("native", tmp_path_factory)


def _strides(a: np.ndarray) -> tuple[int, int]:
    return a.strides[0] // a.itemsize, a.strides[1] // a.itemsize


def _ptr(a: np.ndarray | None):
    return None if a is None else a.ctypes.data


def _sfx(dtype) -> str:
    return "f32" if dtype == np.float32 else "f64"


def _expected(prod, abs_prod, alpha, beta, C0, bias, relu):
    """``alpha * prod + beta * C0 (+ bias) (relu)`` in float64 (C0 not read
    when beta == 0) and the magnitude of its terms."""
    want = alpha * prod
    mag = abs(alpha) * abs_prod
    if beta != 0:
        want = want + beta * C0.astype(np.float64)
        mag = mag + abs(beta) * np.abs(C0.astype(np.float64))
    if bias is not None:
        want = want + bias.astype(np.float64)
        mag = mag + np.abs(bias.astype(np.float64))
    if relu:
        want = np.maximum(want, 0.0)
    return want, mag


def _check(got, want, mag, dtype):
    assert got.shape == want.shape
    assert np.isfinite(got).all(), "NaN or inf in the result (C read with beta == 0?)"
    err = np.abs(got.astype(np.float64) - want)
    bound = RTOL[dtype] * (mag + 1e-30)
    worst = np.unravel_index(np.argmax(err - bound), err.shape)
    assert (err <= bound).all(), (f"max error {err.max():.3g} at {worst}: got {got[worst]}, "
                                  f"want {want[worst]}, allowed {bound[worst]:.3g}")


def _operands(M, N, K, dtype, beta, seed, c_layout="C"):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, K)).astype(dtype)
    B = rng.standard_normal((K, N)).astype(dtype)
    C0 = rng.standard_normal((M, N)).astype(dtype)
    if beta == 0:
        C0[...] = np.nan       # beta == 0: C must not be read
    C = np.array(C0, order=c_layout)
    return A, B, C0, C


def run_gemm(so, M, N, K, dtype, alpha, beta, epilogue=False, nthreads=1, c_layout="C",
             seed=0):
    A, B, C0, C = _operands(M, N, K, dtype, beta, seed, c_layout)
    bias = np.random.default_rng(seed + 1).standard_normal(N).astype(dtype) \
        if epilogue else None
    getattr(so, f"gemm_{_sfx(dtype)}")(
        M, N, K, _ptr(A), *_strides(A), _ptr(B), *_strides(B), _ptr(C), *_strides(C),
        alpha, beta, _ptr(bias), 1, int(epilogue), nthreads)
    A64, B64 = A.astype(np.float64), B.astype(np.float64)
    want, mag = _expected(A64 @ B64, np.abs(A64) @ np.abs(B64), alpha, beta, C0, bias,
                          epilogue)
    _check(C, want, mag, dtype)


ALPHAS = [1.0, 0.5, -2.0]
BETAS = [0.0, 1.0, 0.25]
DTYPES = [np.float32, np.float64]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("beta", BETAS)
@pytest.mark.parametrize("M,N,K", [(1, 1, 1), (17, 33, 5), (130, 70, 300)])
@pytest.mark.parametrize("epilogue", [False, True])
def test_gemm_alpha_beta(lib, M, N, K, dtype, alpha, beta, epilogue):
    """Full and edge tiles of every build."""
    run_gemm(lib, M, N, K, dtype, alpha, beta, epilogue=epilogue)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("beta", BETAS)
def test_gemm_several_k_blocks(native, dtype, alpha, beta):
    """K = 1100: three K blocks (KC is at most 512); beta applies to the first only."""
    run_gemm(native, 40, 70, 1100, dtype, alpha, beta, epilogue=True)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("beta", BETAS)
@pytest.mark.parametrize("M,N,K", [(300, 257, 70), (20, 1000, 300)])
def test_gemm_two_threads(native, M, N, K, dtype, alpha, beta):
    """Two threads: whole MC blocks per thread (tall M) and shared A blocks
    with the column slivers split (short M)."""
    run_gemm(native, M, N, K, dtype, alpha, beta, epilogue=True, nthreads=2)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("beta", BETAS)
def test_gemm_strided_c(lib, dtype, beta):
    """A column-major C (c_cs != 1): every tile through the edge path."""
    run_gemm(lib, 37, 45, 29, dtype, -2.0, beta, epilogue=True, c_layout="F")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("beta", BETAS)
@pytest.mark.parametrize("epilogue", [False, True])
def test_gemm_k_zero(lib, dtype, alpha, beta, epilogue):
    """K == 0: C = beta * C, then the epilogue; A and B are not read."""
    run_gemm(lib, 9, 37, 0, dtype, alpha, beta, epilogue=epilogue)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("beta", BETAS)
def test_gemm_alpha_zero_reads_no_operand(lib, dtype, beta):
    """alpha == 0: C = beta * C (BLAS), NaN in A does not propagate."""
    M, N, K = 19, 23, 11
    A, B, C0, C = _operands(M, N, K, dtype, beta, 5)
    A[...] = np.nan
    getattr(lib, f"gemm_{_sfx(dtype)}")(
        M, N, K, _ptr(A), *_strides(A), _ptr(B), *_strides(B), _ptr(C), *_strides(C),
        0.0, beta, None, 0, 0, 1)
    want, mag = _expected(np.zeros((M, N)), np.zeros((M, N)), 0.0, beta, C0, None, False)
    _check(C, want, mag, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("beta", BETAS)
@pytest.mark.parametrize("Cin,Kout,W,KW", [(1, 1, 1, 1), (3, 17, 33, 3), (5, 40, 130, 5),
                                           (4, 8, 20, 1)])
@pytest.mark.parametrize("nthreads", [1, 2])
def test_gemmx_alpha_beta(lib, dtype, alpha, beta, Cin, Kout, W, KW, nthreads):
    """The implicit GEMM of a 1-D convolution, O(k, w) = sum_{c, kw}
    F(k, c, kw) * I(c, w + kw): B gathered through a mixed-radix row map
    (with KW == 1 it collapses to strides); bias + relu on."""
    rng = np.random.default_rng(Cin * 1000 + Kout * 10 + W)
    WP = W + KW - 1
    F = rng.standard_normal((Kout, Cin, KW)).astype(dtype)
    Inp = rng.standard_normal((Cin, WP)).astype(dtype)
    M, N, K = Kout, W, Cin * KW
    a_rows, a_cols = ((M, Cin * KW),), ((K, 1),)
    b_rows, b_cols = ((Cin, WP), (KW, 1)), ((W, 1),)
    C0 = rng.standard_normal((M, N)).astype(dtype)
    if beta == 0:
        C0[...] = np.nan
    C = C0.copy()
    bias = rng.standard_normal(N).astype(dtype)
    maps = [ctypes.byref(dims(*m)) for m in (a_rows, a_cols, b_rows, b_cols)]
    getattr(lib, f"gemmx_{_sfx(dtype)}")(
        M, N, K, _ptr(F), maps[0], maps[1], _ptr(Inp), maps[2], maps[3], _ptr(C),
        *_strides(C), alpha, beta, _ptr(bias), 1, 1, nthreads)
    A64 = F.reshape(-1)[offsets(a_rows)[:, None] + offsets(a_cols)[None, :]] \
        .astype(np.float64)
    B64 = Inp.reshape(-1)[offsets(b_rows)[:, None] + offsets(b_cols)[None, :]] \
        .astype(np.float64)
    want, mag = _expected(A64 @ B64, np.abs(A64) @ np.abs(B64), alpha, beta, C0, bias, True)
    _check(C, want, mag, dtype)


# --------------------------------------------------------------- (b) matching

def _update(p, which: int = -1):
    return [s for s in p.statements if s.kind == "update"][which]


def _alpha_of(src: str):
    p = polyc.program(src)
    m = match_gemm(p, _update(p))
    assert isinstance(m, GemmMatch), m
    return m


def test_a_rank0_argument_is_alpha():
    m = _alpha_of("def f(float alpha, float(M, K) A, float(K, N) B) -> (C) "
                  "{ C(m, n) +=! alpha * A(m, k) * B(k, n) }")
    assert m.alpha == E.Access("alpha", ())
    assert (m.a, m.b, m.c, m.m, m.n, m.k) == ("A", "B", "C", ("m",), ("n",), ("k",))
    assert m.init is not None and m.beta is None
    assert "alpha = alpha" in m.describe()


@pytest.mark.parametrize("rhs, alpha", [
    ("2.0 * A(m, k) * B(k, n)", E.Const(2.0)),
    ("A(m, k) * B(k, n) * 2.0", E.Const(2.0)),
    ("A(m, k) * (2.0 * B(k, n))", E.Const(2.0)),
    ("A(m, k) * B(k, n) * alpha", E.Access("alpha", ())),
    ("alpha * (A(m, k) * 0.5) * B(k, n)",
     E.Binary("*", E.Access("alpha", ()), E.Const(0.5))),
    ("A(m, k) * B(k, n)", None),
])
def test_scalar_factors_in_any_association(rhs, alpha):
    m = _alpha_of("def f(float alpha, float(M, K) A, float(K, N) B) -> (C) "
                  f"{{ C(m, n) +=! {rhs} }}")
    assert m.alpha == alpha
    assert (m.a, m.b, m.m, m.n, m.k) == ("A", "B", ("m",), ("n",), ("k",))
    assert ("alpha =" in m.describe()) == (alpha is not None)


def test_size_parameter_and_negation_are_scalars():
    m = _alpha_of("def f(float(M, K) A, float(K, N) B) -> (C) "
                  "{ C(m, n) +=! -1.5 * A(m, k) * B(k, n) * K }")
    assert E.Param("K") in list(m.alpha.walk())
    assert "alpha = -1.5 * K" in m.describe()


@pytest.mark.parametrize("src, reason", [
    # the output as a factor
    ("def f(float(M, K) A, float(K, N) B, float(M, N) C0) -> (C) "
     "{ C(m, n) = C0(m, n)\n C(m, n) += C(0, 0) * A(m, k) * B(k, n) }",
     "the output C is also a factor"),
    # three operands, a non-scalar factor
    ("def f(float(M, K) A, float(K, N) B, float(M) D) -> (C) "
     "{ C(m, n) +=! D(m) * A(m, k) * B(k, n) }", "not a product of two tensor elements"),
    ("def f(float(M, K) A, float(K, N) B) -> (C) { C(m, n) +=! exp(2.0) * A(m, k) * B(k, n) }",
     "not a product of two tensor elements"),
    ("def f(float(M, K) A) -> (C) { C(m) +=! 2.0 * A(m, k) }",
     "not a product of two tensor elements"),
    ("def f(float(M, K) A, float(K, N) B) -> (C) { C(m, n) +=! A(m, k) + B(k, n) }",
     "not a product of two tensor elements"),
    ("def f(float alpha, float(M, N) A, float(M, N) B) -> (C) "
     "{ C(m, n) +=! alpha * A(m, n) * B(m, n) }", "elementwise"),
])
def test_refusals(src, reason):
    p = polyc.program(src)
    m = match_gemm(p, _update(p))
    assert isinstance(m, str) and reason in m, m


SCALED = ("def f(float alpha, float beta, float(M, K) A, float(K, N) B, float(M, N) C0) "
          "-> (C) {{ C(m, n) = C0(m, n)\n {scale}\n C(m, n) += alpha * A(m, k) * B(k, n) }}")


def _scale(scale: str):
    p = polyc.program(SCALED.format(scale=scale))
    upd = _update(p)
    m = match_gemm(p, upd)
    assert isinstance(m, GemmMatch), m
    stmts = list(p.statements)
    return p, m, stmts[stmts.index(upd) - 1]


@pytest.mark.parametrize("scale, beta", [
    ("C(m, n) *= beta", E.Access("beta", ())),
    ("C(m, n) *= 0.25", E.Const(0.25)),
    ("C(m, n) *= beta * 2.0", E.Binary("*", E.Access("beta", ()), E.Const(2.0))),
    ("C(m, n) = beta * C(m, n)", E.Access("beta", ())),
    ("C(i, j) = C(i, j) * beta", E.Access("beta", ())),
    ("C(m, n) = 0.0", E.Const(0.0)),
    ("C(m, n) = beta * C(m, n) * N", E.Binary("*", E.Access("beta", ()), E.Param("N"))),
])
def test_match_scale(scale, beta):
    p, m, cand = _scale(scale)
    got = match_scale(p, m, cand)
    assert got == beta, (scale, got)
    if not isinstance(got, E.Const) or got.value != 0:
        text = replace(m, beta=got, scale=cand.name).describe()
        assert f"beta = {E.to_text(got).replace('()', '')} ({cand.name} folded)" in text


@pytest.mark.parametrize("scale", [
    "C(m, n) *= C0(m, n)",             # not a scalar
    "C(m, n) *= A(0, 0)",              # reads an operand of the call (and not a scalar)
    "C(m, n) *= alpha",                # reads a tensor the call reads (alpha)
    "C(m, n) += beta",                 # not a scaling
    "C(m, n) = beta * C0(m, n)",       # does not scale C itself
    "C(m, n) = beta * C(n, m)",        # another element of C
    "C(m, n) = beta * C(m, n) * C(m, n)",
    "C(m, n) = C(m, n)",               # no factor
    "C(m, n) = 1.0",                   # sets C to another value
    "C(m, n) *= beta where m in 0:M-1",  # fewer elements than the call writes
])
def test_match_scale_refusals(scale):
    p, m, cand = _scale(scale)
    assert match_scale(p, m, cand) is None


def test_match_scale_refuses_a_repeated_scaling_and_the_update_itself():
    """A scaling statement that runs once per (m, n, k) scales each element K
    times: its write is not injective."""
    p, m, cand = _scale("C(m, n) *= beta")
    upd = p.statement(m.statement)
    repeated = replace(cand, iterators=upd.iterators,
                       domain=upd.domain.set_tuple_name(cand.name),
                       write=upd.write.set_tuple_name(isl.dim_type.in_, cand.name))
    assert match_scale(p, m, repeated) is None
    assert match_scale(p, m, upd) is None


def test_match_scale_takes_the_init_of_a_bang_reduction():
    p = polyc.program("def f(float(M, K) A, float(K, N) B) -> (C) "
                      "{ C(m, n) +=! A(m, k) * B(k, n) }")
    init, upd = p.statements
    m = match_gemm(p, upd)
    assert init.kind == "init"
    assert match_scale(p, m, init) == E.Const(0.0)


# -------------------------------------------------------------- (c) end to end

RNG = np.random.default_rng(11)
SCALED_GEMM = ("def f(float alpha, float(M, K) A, float(K, N) B) -> (C) "
               "{ C(m, n) +=! alpha * A(m, k) * B(k, n) }")


def _gemm_line(source: str) -> str:
    """The generated call of the intrinsic (not a line of the pasted header)."""
    return next(line for line in source.splitlines()
                if re.match(r"\s*polyc_gemmx?_f(32|64)\(", line))


@pytest.mark.parametrize("dtype, rtol", [("float32", 1e-4), ("float64", 1e-10)])
@pytest.mark.parametrize("m, n, k", [(1, 1, 1), (17, 33, 5), (130, 70, 300), (4, 5, 0)])
def test_scaled_tc_gemm(dtype, rtol, m, n, k):
    kern = polyc.compile(SCALED_GEMM, dtype=dtype)
    assert "polyc_gemm_f" in kern.source
    call = _gemm_line(kern.source)
    ct = "float" if dtype == "float32" else "double"
    assert f"({ct})(t_alpha[0])" in call, call
    assert "initialisation folded; alpha = alpha" in str(kern.explain())
    A = RNG.standard_normal((m, k)).astype(dtype)
    B = RNG.standard_normal((k, n)).astype(dtype)
    for alpha in (1.0, 0.3, -2.0):
        C = kern(np.array(alpha, dtype), A, B)
        want = alpha * (A.astype(np.float64) @ B.astype(np.float64))
        mag = abs(alpha) * (np.abs(A.astype(np.float64)) @ np.abs(B.astype(np.float64)))
        assert C.shape == (m, n)
        assert (np.abs(C - want) <= rtol * (mag + 1e-30)).all()


@pytest.mark.parametrize("rhs, scale", [
    ("2.0 * A(m, k) * B(k, n)", 2.0),
    ("A(m, k) * B(k, n) * 0.1", 0.1),
    ("-A(m, k) * B(k, n)", None),             # negated operand: the loops stay
    ("A(m, k) * B(k, n) * K", "K"),           # a size parameter
])
def test_constant_and_parameter_alpha(rhs, scale):
    src = f"def f(float(M, K) A, float(K, N) B) -> (C) {{ C(m, n) +=! {rhs} }}"
    kern = polyc.compile(src, dtype="float64")
    A, B = RNG.standard_normal((23, 19)), RNG.standard_normal((19, 31))
    C = kern(A, B)
    factor = {None: -1.0, "K": 19.0}.get(scale, scale)
    np.testing.assert_allclose(C, factor * (A @ B), rtol=1e-10, atol=1e-12)
    if scale is None:
        assert "polyc_gemm_f64(" not in kern.source.split("#endif /* POLYC_GEMM_H */")[-1]
        return
    call = _gemm_line(kern.source)
    if scale == "K":
        assert "(double)(((double)p_K))" in call, call
    else:
        assert f"((double){float(scale).hex()})" in call, call


def test_scaled_implicit_gemm():
    """A convolution times a scalar argument: the gathered intrinsic with alpha."""
    src = ("def conv(float alpha, float(N, C, HP, WP) I, float(K, C, KH, KW) W) -> (O) "
           "{ O(n, k, h, w) +=! alpha * I(n, c, h + kh, w + kw) * W(k, c, kh, kw) }")
    kern = polyc.compile(src)
    assert "polyc_gemmx_f32" in kern.source
    assert "(float)(t_alpha[0])" in _gemm_line(kern.source)
    In = RNG.standard_normal((2, 3, 9, 10)).astype(np.float32)
    Wt = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    O = kern(np.float32(-0.75), In, Wt)
    win = np.lib.stride_tricks.sliding_window_view(In.astype(np.float64), (3, 3), axis=(2, 3))
    want = -0.75 * np.einsum("nchwij,kcij->nkhw", win, Wt.astype(np.float64))
    np.testing.assert_allclose(O, want, rtol=1e-4, atol=1e-4)
