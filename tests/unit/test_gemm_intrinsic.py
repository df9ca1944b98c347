"""The header-only GEMM (backends/c/intrinsics/gemm.h) against numpy: sizes
with edges in M, N and K (0, 1, primes), transposed operands, strided and
unaligned views, accumulate, bias + relu, 1 and 2 threads; and the AVX2 and
portable micro-kernels, built with the wider ISAs switched off."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
from gemm_abi import build_shim, dims, offsets

SHIM = r"""
#include "gemm.h"
const char *isa(void) { return polyc_gemm_isa(); }
#define SHIM(T, SFX)                                                                \
    void gemm_##SFX(int64_t M, int64_t N, int64_t K, const T *A, int64_t a_rs,      \
                    int64_t a_cs, const T *B, int64_t b_rs, int64_t b_cs, T *C,     \
                    int64_t c_rs, int64_t c_cs, int acc, const T *bias,             \
                    int64_t bias_cs, int relu, int nt)                              \
    {                                                                               \
        polyc_gemm_##SFX(M, N, K, A, a_rs, a_cs, B, b_rs, b_cs, C, c_rs, c_cs,      \
                         (T)1, (T)(acc != 0), bias, bias_cs, relu, nt);             \
    }
SHIM(float, f32)
SHIM(double, f64)
#define SHIMX(T, SFX)                                                               \
    void gemmx_##SFX(int64_t M, int64_t N, int64_t K, const T *A,                   \
                     const polyc_gemm_dims *ar, const polyc_gemm_dims *ac,          \
                     const T *B, const polyc_gemm_dims *br,                         \
                     const polyc_gemm_dims *bc, T *C, int64_t c_rs, int64_t c_cs,   \
                     int acc, int nt)                                               \
    {                                                                               \
        polyc_gemmx_##SFX(M, N, K, A, ar, ac, B, br, bc, C, c_rs, c_cs, (T)1,       \
                          (T)(acc != 0), NULL, 0, 0, nt);                           \
    }
SHIMX(float, f32)
SHIMX(double, f64)
"""

FLAGS = {
    "native": (None, []),
    "avx2": ("avx2", ["-mno-avx512f"]),
    "portable": ("portable", ["-mno-avx2", "-mno-avx512f", "-mno-fma"]),
    # malloc always fails: every call takes the plain-loop fallback
    "nomem": (None, ["-DPOLYC_GEMM_MALLOC(n)=((void)(n), (void *)0)"]),
    # no OpenMP (and -pedantic): one thread, whatever nthreads says
    "serial": (None, ["-pedantic"]),
}


def _native_isa() -> str:
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    if " avx512f" in flags:
        return "avx512"
    if " avx2" in flags and " fma" in flags:
        return "avx2"
    return "portable"


def _build(tmp_path_factory, name: str, extra: list[str]):
    omp = [] if name == "serial" else ["-fopenmp"]
    so = build_shim(tmp_path_factory, f"gemm_{name}", SHIM,
                    ["-O3", "-march=native", *omp, *extra])
    so.isa.restype = ctypes.c_char_p
    i64, vp, ci = ctypes.c_int64, ctypes.c_void_p, ctypes.c_int
    for f in (so.gemm_f32, so.gemm_f64):
        f.restype = None
        f.argtypes = [i64, i64, i64, vp, i64, i64, vp, i64, i64, vp, i64, i64, ci, vp, i64,
                      ci, ci]
    for f in (so.gemmx_f32, so.gemmx_f64):
        f.restype = None
        f.argtypes = [i64, i64, i64, vp, vp, vp, vp, vp, vp, vp, i64, i64, ci, ci]
    return so


def _lib_fixture(name):
    @pytest.fixture(scope="module")
    def lib(tmp_path_factory):
        expected, extra = FLAGS[name]
        expected = expected or _native_isa()
        so = _build(tmp_path_factory, name, extra)
        assert so.isa().decode() == expected
        return so
    return lib


native = _lib_fixture("native")
avx2 = _lib_fixture("avx2")
portable = _lib_fixture("portable")
nomem = _lib_fixture("nomem")
serial = _lib_fixture("serial")


def _strides(a: np.ndarray) -> tuple[int, int]:
    return a.strides[0] // a.itemsize, a.strides[1] // a.itemsize


def _ptr(a):
    return None if a is None else a.ctypes.data


def gemm(so, A, B, C, accumulate=False, bias=None, relu=False, nthreads=1):
    """Call the library on numpy views (any strides); C is written in place."""
    f = so.gemm_f32 if C.dtype == np.float32 else so.gemm_f64
    (M, K), N = A.shape, B.shape[1]
    bias_cs = 0 if bias is None else bias.strides[0] // bias.itemsize
    f(M, N, K, _ptr(A), *_strides(A), _ptr(B), *_strides(B), _ptr(C), *_strides(C),
      int(accumulate), _ptr(bias), bias_cs, int(relu), nthreads)


def reference(A, B, C0, accumulate, bias, relu):
    r = A.astype(np.float64) @ B.astype(np.float64)
    if accumulate:
        r += C0
    if bias is not None:
        r += bias
    if relu:
        r = np.maximum(r, 0)
    return r


def check(so, M, N, K, dtype, *, ta=False, tb=False, c_pad=0, unaligned=False,
          accumulate=False, bias=False, relu=False, nthreads=1, bias_stride=1, seed=0):
    rng = np.random.default_rng(seed + 7 * M + 13 * N + 17 * K)
    off = 1 if unaligned else 0

    def make(shape, transpose):
        rows, cols = shape[::-1] if transpose else shape
        buf = rng.standard_normal(rows * cols + off).astype(dtype)
        a = buf[off:].reshape(rows, cols)
        return a.T if transpose else a

    A, B = make((M, K), ta), make((K, N), tb)
    cbuf = rng.standard_normal(M * (N + c_pad) + off + 1).astype(dtype)
    full = cbuf[off:off + M * (N + c_pad)].reshape(M, N + c_pad)
    C = full[:, :N]
    C0, pad0, before = C.astype(np.float64), full[:, N:].copy(), cbuf.copy()
    bvec = None
    if bias:
        bvec = rng.standard_normal(max(N * bias_stride, 1)).astype(dtype)[::max(bias_stride, 1)]
        bvec = bvec[:N]
    gemm(so, A, B, C, accumulate=accumulate, bias=bvec, relu=relu, nthreads=nthreads)
    want = reference(A, B, C0, accumulate, bvec, relu)
    tol = np.sqrt(max(K, 1)) * (1e-5 if dtype == np.float32 else 1e-14)
    np.testing.assert_allclose(C, want, rtol=10 * tol, atol=10 * tol)
    np.testing.assert_array_equal(full[:, N:], pad0)  # padding columns untouched
    if off:
        assert cbuf[0] == before[0]
    assert cbuf[-1] == before[-1]
    return C


SIZES = [(1, 1, 1), (7, 17, 31), (17, 7, 1), (31, 1, 7), (97, 131, 97), (131, 97, 300),
         (300, 257, 513), (14, 32, 256), (28, 64, 5), (1, 513, 64), (513, 1, 64)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("M,N,K", SIZES)
def test_sizes(native, M, N, K, dtype):
    check(native, M, N, K, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("M,N,K", [(0, 5, 3), (5, 0, 3), (0, 0, 0)])
def test_empty_m_or_n(native, M, N, K, dtype):
    check(native, M, N, K, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("accumulate", [False, True])
def test_k_zero(native, dtype, accumulate):
    """K == 0: C = [C if accumulate else 0] + bias, then relu."""
    check(native, 9, 37, 0, dtype, accumulate=accumulate)
    check(native, 9, 37, 0, dtype, accumulate=accumulate, bias=True, relu=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ta,tb", [(True, False), (False, True), (True, True)])
@pytest.mark.parametrize("M,N,K", [(7, 17, 31), (131, 97, 300), (300, 257, 513)])
def test_transposed(native, M, N, K, dtype, ta, tb):
    check(native, M, N, K, dtype, ta=ta, tb=tb)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("M,N,K", [(7, 17, 31), (97, 131, 97), (300, 257, 513)])
def test_strided_c_unaligned(native, M, N, K, dtype):
    check(native, M, N, K, dtype, c_pad=5, unaligned=True)
    check(native, M, N, K, dtype, c_pad=3, unaligned=True, ta=True, tb=True)


def test_strided_columns_of_c(native):
    """c_cs != 1 (C given transposed) goes through the edge-tile path."""
    rng = np.random.default_rng(1)
    A = rng.standard_normal((45, 70)).astype(np.float32)
    B = rng.standard_normal((70, 66)).astype(np.float32)
    C = np.zeros((66, 45), np.float32).T
    gemm(native, A, B, C, nthreads=2)
    np.testing.assert_allclose(C, A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("accumulate,bias,relu", [(True, False, False), (False, True, True),
                                                  (True, True, True), (False, False, True)])
@pytest.mark.parametrize("M,N,K", [(17, 31, 7), (131, 97, 300), (300, 257, 513)])
def test_epilogue(native, M, N, K, dtype, accumulate, bias, relu):
    check(native, M, N, K, dtype, accumulate=accumulate, bias=bias, relu=relu)


def test_bias_stride(native):
    check(native, 64, 96, 40, np.float32, bias=True, bias_stride=3, relu=True)
    check(native, 64, 96, 40, np.float64, bias=True, bias_stride=2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("M,N,K", [(300, 257, 513), (20, 1000, 300), (1000, 20, 300),
                                   (64, 64, 64), (130, 4100, 70)])
def test_two_threads(native, M, N, K, dtype):
    check(native, M, N, K, dtype, nthreads=2, accumulate=True, bias=True, relu=True)
    check(native, M, N, K, dtype, nthreads=2, ta=True, tb=True)
    check(native, M, N, K, dtype, nthreads=0, c_pad=2, unaligned=True)


def test_more_threads_than_cores(native):
    check(native, 300, 257, 513, np.float32, nthreads=3, bias=True, relu=True)
    check(native, 40, 700, 300, np.float64, nthreads=4, accumulate=True)


def test_concurrent_callers(native):
    """Calls from several threads at once (ctypes drops the GIL): one of them
    gets the cached packing buffer, the others allocate their own."""
    import threading

    errors = []

    def work(seed):
        try:
            for i in range(6):
                n = 40 + 37 * ((seed + i) % 5)
                check(native, n, n + 3, n + 5, np.float32, seed=seed * 100 + i, nthreads=1)
        except AssertionError as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_threads_deterministic(native):
    """Each C element sums its k in the same order whatever the thread count."""
    one = check(native, 200, 300, 700, np.float32, nthreads=1)
    two = check(native, 200, 300, 700, np.float32, nthreads=2)
    np.testing.assert_array_equal(one, two)


FALLBACK_CASES = [(1, 1, 1), (7, 17, 31), (97, 131, 97), (131, 97, 300), (300, 257, 513)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("M,N,K", FALLBACK_CASES)
@pytest.mark.parametrize("build", ["avx2", "portable"])
def test_fallback_kernels(request, build, M, N, K, dtype):
    """The AVX2 and portable micro-kernels (the wider ISAs switched off)."""
    so = request.getfixturevalue(build)
    check(so, M, N, K, dtype)
    check(so, M, N, K, dtype, ta=True, tb=True, c_pad=3, unaligned=True, nthreads=2)
    check(so, M, N, K, dtype, accumulate=True, bias=True, relu=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_no_memory_fallback(nomem, dtype):
    check(nomem, 37, 41, 43, dtype, ta=True, c_pad=2, unaligned=True, nthreads=2)
    check(nomem, 37, 41, 43, dtype, accumulate=True, bias=True, relu=True)
    check(nomem, 5, 6, 0, dtype, accumulate=True, bias=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_without_openmp(serial, dtype):
    check(serial, 131, 97, 300, dtype, tb=True, nthreads=2, bias=True, relu=True)
    check(serial, 7, 17, 31, dtype, nthreads=0, accumulate=True)


# ------------------------------------------- polyc_gemmx: mixed-radix maps

def gemmx(so, A, ar, ac, B, br, bc, C, accumulate=False, nthreads=1, base_a=0):
    """C (a 2-D view) += or = the product of A and B addressed through the maps
    (A's from element ``base_a`` of the flat A on); returns the float64
    reference computed from the same maps."""
    f = so.gemmx_f32 if C.dtype == np.float32 else so.gemmx_f64
    M, N = C.shape
    K = int(np.prod([e for e, _ in ac]))
    ref = A.reshape(-1)[base_a + offsets(ar)[:, None] + offsets(ac)[None, :]] \
        .astype(np.float64) \
        @ B.reshape(-1)[offsets(br)[:, None] + offsets(bc)[None, :]].astype(np.float64)
    if accumulate:
        ref += C
    maps = [ctypes.byref(dims(*m)) for m in (ar, ac, br, bc)]
    f(M, N, K, _ptr(A) + base_a * A.itemsize, maps[0], maps[1], _ptr(B), maps[2], maps[3], _ptr(C),
      *_strides(C), int(accumulate), nthreads)
    return ref


def conv_check(so, dtype, Cin, K, H, W, KH=3, KW=3, nthreads=1, accumulate=False):
    """A valid 2-D convolution as one implicit GEMM: A = the filter (K x
    Cin*KH*KW, strided), B = the input window (Cin*KH*KW x H*W, gathered)."""
    rng = np.random.default_rng(Cin * 100 + K * 10 + H + W)
    HP, WP = H + KH - 1, W + KW - 1
    I = rng.standard_normal((Cin, HP, WP)).astype(dtype)
    Wt = rng.standard_normal((K, Cin, KH, KW)).astype(dtype)
    O = rng.standard_normal((K, H, W)).astype(dtype)
    O0 = O.astype(np.float64)
    ref = gemmx(so, Wt, [(K, Cin * KH * KW)], [(Cin, KH * KW), (KH, KW), (KW, 1)],
                I, [(Cin, HP * WP), (KH, WP), (KW, 1)], [(H, WP), (W, 1)],
                O.reshape(K, H * W), accumulate=accumulate, nthreads=nthreads)
    win = np.lib.stride_tricks.sliding_window_view(I.astype(np.float64), (KH, KW), axis=(1, 2))
    want = np.einsum("chwij,kcij->khw", win, Wt.astype(np.float64)) + (O0 if accumulate else 0)
    tol = np.sqrt(Cin * KH * KW) * (1e-5 if dtype == np.float32 else 1e-14)
    np.testing.assert_allclose(O, want, rtol=10 * tol, atol=10 * tol)
    np.testing.assert_allclose(O.reshape(K, -1), ref, rtol=10 * tol, atol=10 * tol)


CONV_SIZES = [(64, 64, 56, 56), (1, 1, 1, 1), (3, 5, 7, 17), (8, 8, 26, 26), (17, 31, 13, 40)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("Cin,K,H,W", CONV_SIZES)
def test_implicit_gemm_convolution(native, dtype, Cin, K, H, W):
    conv_check(native, dtype, Cin, K, H, W)
    conv_check(native, dtype, Cin, K, H, W, nthreads=2, accumulate=True)


@pytest.mark.parametrize("name", ["avx2", "portable", "nomem", "serial"])
def test_implicit_gemm_other_builds(request, name):
    so = request.getfixturevalue(name)
    for dtype in (np.float32, np.float64):
        conv_check(so, dtype, 5, 7, 9, 11, nthreads=2)
        conv_check(so, dtype, 2, 3, 4, 3, KH=1, KW=2, accumulate=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gemmx_tables_everywhere(native, dtype):
    """Every map a table: repeated offsets (stride 0), negative strides,
    digits of extent 1, rows of A gathered; and maps that collapse to a
    stride (an arithmetic progression) next to them."""
    rng = np.random.default_rng(3)
    A = rng.standard_normal(4000).astype(dtype)
    B = rng.standard_normal(4000).astype(dtype)
    cases = [
        ([(3, 200), (5, 7)], [(4, 1), (1, 999), (6, 9)], [(4, 3), (6, 50)], [(5, 300), (3, 1)]),
        ([(15, 60)], [(24, 1)], [(24, 70)], [(15, 1)]),                   # all strides
        ([(15, -60)], [(2, 0), (12, 1)], [(2, 0), (12, 90)], [(15, 1)]),  # negative, zero
        ([(1, 5), (20, 11)], [(30, 2)], [(3, 1000), (10, 1)], [(7, 3), (1, 4), (2, 1)]),
    ]
    for ar, ac, br, bc in cases:
        base_a = 1000 if ar[0][1] < 0 else 0
        M, N = int(np.prod([e for e, _ in ar])), int(np.prod([e for e, _ in bc]))
        C = np.zeros((M, N), dtype)
        ref = gemmx(native, A, ar, ac, B, br, bc, C, nthreads=2, base_a=base_a)
        np.testing.assert_allclose(C, ref, rtol=1e-4 if dtype == np.float32 else 1e-12,
                                   atol=1e-4 if dtype == np.float32 else 1e-12)
