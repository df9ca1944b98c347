"""gemm.h's small-problem path (backends/c/intrinsics/gemm_small.h) against
numpy: every register-tile shape at the edges of its rows and vectors (1,
MR - 1, MR, MR + 1, primes, VL - 1, VL + 1 columns), float32 and float64, on
the AVX-512 (where the CPU has it), AVX2 and portable builds and with the
few tile shapes of a sanitizer build; alpha and beta
other than 0 and 1, bias and ReLU, transposed and strided operands,
polyc_gemmx's maps (column runs of a convolution's output rows, shorter and
longer than a vector, row maps, tables), 1 and 2 threads.

A hook (``POLYC_GEMM_ON_SMALL``) counts the calls that take the path, so a
path that is never taken fails here too; a build with the path switched
off (``POLYC_GEMM_SMALL_OFF=1``) gives bit-identical results, because both
paths sum each C element over k in ascending order with one FMA chain.
The few-rows path (gemm_few.h) and the window path (gemm_win.h), which
gemm.h tries first, are switched off in these builds
(``POLYC_GEMM_FEW_MAX=0``, ``POLYC_GEMM_WIN_OFF=1``): tests/unit/
test_gemm_few.py and test_gemm_win.py check them."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from gemm_abi import GEMM_SHIM, ISA_FLAGS, bind_gemm, build_shims, cpu_has, dims, offsets

SHIM = r"""
#define POLYC_GEMM_FEW_MAX 0 /* the few-rows path (tests/unit/test_gemm_few.py) off */
#define POLYC_GEMM_WIN_OFF 1 /* the window path (tests/unit/test_gemm_win.py) off */
static long small_calls;
#define POLYC_GEMM_ON_SMALL(nv, mr) \
    ((void)(nv), (void)(mr), __atomic_add_fetch(&small_calls, 1, __ATOMIC_RELAXED))
#include "gemm.h"
const char *isa(void) { return polyc_gemm_isa(); }
long calls(void) { return __atomic_load_n(&small_calls, __ATOMIC_RELAXED); }
#define SHIM(T, SFX)                                                                \
    void gemmx_##SFX(int64_t M, int64_t N, int64_t K, const T *A,                   \
                     const polyc_gemm_dims *ar, const polyc_gemm_dims *ac,          \
                     const T *B, const polyc_gemm_dims *br,                         \
                     const polyc_gemm_dims *bc, T *C, int64_t c_rs, int64_t c_cs,   \
                     double beta, int nt)                                           \
    {                                                                               \
        polyc_gemmx_##SFX(M, N, K, A, ar, ac, B, br, bc, C, c_rs, c_cs, (T)1,       \
                          (T)beta, NULL, 0, 0, nt);                                 \
    }
SHIM(float, f32)
SHIM(double, f64)
""" + GEMM_SHIM

BUILDS = {
    **ISA_FLAGS,
    "off": ["-DPOLYC_GEMM_SMALL_OFF=1"],       # the packed path only
    # the few tile shapes of an AddressSanitizer build (mr <= 4)
    "few": ["-DPOLYC_GEMM_SK_FEW=1"],
}


def _has_avx2() -> bool:
    return cpu_has("avx2", "fma")


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    out = {}
    i64, vp, ci, dbl = ctypes.c_int64, ctypes.c_void_p, ctypes.c_int, ctypes.c_double
    shims = build_shims(tmp_path_factory, "gemm_small", SHIM,
                        {name: ["-O2", "-march=native", "-fopenmp", *extra]
                         for name, extra in BUILDS.items()})
    for name, so in shims.items():
        so.isa.restype = ctypes.c_char_p
        so.calls.restype = ctypes.c_long
        bind_gemm(so)
        for f in (so.gemmx_f32, so.gemmx_f64):
            f.restype = None
            f.argtypes = [i64, i64, i64, vp, vp, vp, vp, vp, vp, vp, i64, i64, dbl, ci]
        out[name] = so
    return out


def _st(a):
    return a.strides[0] // a.itemsize, a.strides[1] // a.itemsize


def run(so, A, B, C, *, alpha=1.0, beta=0.0, bias=None, relu=False, nthreads=1):
    f = so.gemm_f32 if C.dtype == np.float32 else so.gemm_f64
    bias_cs = 0 if bias is None else bias.strides[0] // bias.itemsize
    f(A.shape[0], B.shape[1], A.shape[1], A.ctypes.data, *_st(A), B.ctypes.data, *_st(B),
      C.ctypes.data, *_st(C), alpha, beta, None if bias is None else bias.ctypes.data,
      bias_cs, int(relu), nthreads)


def case(so, M, N, K, dtype, *, ta=False, tb=False, alpha=1.0, beta=0.0, bias=False,
         relu=False, nthreads=1, c_pad=0, seed=0):
    """One call on fresh operands, checked against float64 numpy; returns C."""
    rng = np.random.default_rng(seed + 1009 * M + 101 * N + K)
    A = rng.standard_normal((K, M) if ta else (M, K)).astype(dtype)
    B = rng.standard_normal((N, K) if tb else (K, N)).astype(dtype)
    A, B = (A.T if ta else A), (B.T if tb else B)
    full = rng.standard_normal((M, N + c_pad)).astype(dtype)
    if beta == 0.0:
        full[:, :N] = np.nan           # beta 0 must not read C
    C = full[:, :N]
    pad = full[:, N:].copy()
    C0 = np.nan_to_num(C.astype(np.float64))
    bv = rng.standard_normal(2 * N).astype(dtype)[::2] if bias else None
    run(so, A, B, C, alpha=alpha, beta=beta, bias=bv, relu=relu, nthreads=nthreads)
    want = alpha * (A.astype(np.float64) @ B.astype(np.float64)) + beta * C0
    if bias:
        want += bv
    if relu:
        want = np.maximum(want, 0)
    tol = np.sqrt(K) * (2e-6 if dtype == np.float32 else 4e-15) * 10
    np.testing.assert_allclose(C, want, rtol=tol, atol=tol)
    np.testing.assert_array_equal(full[:, N:], pad)
    return C


# rows around the tiles' heights (AVX-512 caps 14 / 9 / 6, AVX2 12 / 6 / 3) and
# columns around multiples of the vector lengths (16 / 8 / 4 lanes)
ROWS = [1, 2, 3, 5, 6, 7, 9, 10, 13, 14, 15, 27, 29]
COLS = [1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 47, 48, 49, 65, 97]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("build", ["native", "avx2", "portable", "few"])
def test_tile_edges(builds, build, dtype):
    if build == "avx2" and not _has_avx2():
        pytest.skip("no AVX2 on this CPU")
    so = builds[build]
    before = so.calls()
    for M in ROWS:
        for N in COLS:
            case(so, M, N, 1 + (M * N) % 23, dtype)
    taken = so.calls() - before
    if so.isa().decode() == "portable":
        assert taken == 0
    else:
        assert taken == len(ROWS) * len(COLS)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_epilogue_and_scaling(builds, dtype):
    so = builds["native"]
    for M, N, K in [(5, 17, 3), (26, 72, 26), (14, 33, 64), (9, 48, 1)]:
        for alpha, beta in [(1.0, 0.0), (0.5, 1.0), (-2.0, 2.5), (1.0, -1.0)]:
            case(so, M, N, K, dtype, alpha=alpha, beta=beta)
        case(so, M, N, K, dtype, bias=True, relu=True, beta=1.0, c_pad=3)
        case(so, M, N, K, dtype, alpha=3.0, beta=0.25, bias=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("build", ["native", "avx2"])
def test_transposed_and_threads(builds, build, dtype):
    """B given as N x K is packed once (a transpose); A column-major; two threads
    share the slivers (or the column tiles when the slivers are few: 8 x 4096;
    512 x 64 x 128 and 8 x 4096 x 128 are large enough for two threads).
    K = 4096 with B transposed is beyond the path (the packed one takes it);
    with B row-major, one sliver of 5 rows reads it in place."""
    if build == "avx2" and not _has_avx2():
        pytest.skip("no AVX2 on this CPU")
    so = builds[build]
    for M, N, K in [(26, 72, 26), (7, 9, 17), (31, 47, 13), (1, 100, 3), (64, 64, 64),
                    (3, 1000, 40), (512, 64, 128), (8, 4096, 128), (5, 33, 4096)]:
        for ta, tb in [(False, True), (True, False), (True, True)]:
            case(so, M, N, K, dtype, ta=ta, tb=tb)
        one = case(so, M, N, K, dtype, beta=1.0, nthreads=1, seed=5)
        two = case(so, M, N, K, dtype, beta=1.0, nthreads=2, seed=5)
        np.testing.assert_array_equal(one, two)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("build", ["native", "avx2"])
def test_long_k_reads_b_in_place(builds, build, dtype):
    """K beyond POLYC_GEMM_SMALL_KMAX takes the path when at most
    POLYC_GEMM_SMALL_INPLACE (4) slivers of A read B's rows in place (a few
    tokens through a weight matrix), with the epilogue and on two threads; a
    transposed B or more slivers than that keep the packed path."""
    if build == "avx2" and not _has_avx2():
        pytest.skip("no AVX2 on this CPU")
    so = builds[build]
    if so.isa().decode() == "portable":
        pytest.skip("no small path in the portable build")
    for M, N, K in [(1, 768, 3072), (1, 33, 1025), (3, 100, 2049), (2, 17, 1500),
                    (24, 64, 1100), (12, 70, 3000)]:
        before = so.calls()
        one = case(so, M, N, K, dtype, beta=1.0, bias=True, relu=True, seed=3)
        two = case(so, M, N, K, dtype, beta=1.0, bias=True, relu=True, nthreads=2, seed=3)
        assert so.calls() - before == 2, (M, N, K)
        np.testing.assert_array_equal(one, two)
        before = so.calls()
        case(so, M, N, K, dtype, tb=True)
        case(so, 100, N, K, dtype)
        assert so.calls() == before, (M, N, K)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_same_bits_as_packed_path(builds, dtype):
    """K within one k block: the small and the packed path give the same bits."""
    for M, N, K in [(26, 72, 26), (13, 33, 100), (64, 64, 64), (8, 676, 72)]:
        for tb in (False, True):
            got = case(builds["native"], M, N, K, dtype, tb=tb, beta=1.0, seed=1)
            ref = case(builds["off"], M, N, K, dtype, tb=tb, beta=1.0, seed=1)
            np.testing.assert_array_equal(got, ref)


def conv(so, dtype, Cin, F, H, W, KH, KW, *, beta=0.0, nthreads=1):
    """A valid convolution as one polyc_gemmx: B's columns (h, w) are runs of
    W contiguous elements (the window row), its rows (c, kh, kw) a table."""
    rng = np.random.default_rng(Cin + 7 * F + 31 * H + W)
    HP, WP = H + KH - 1, W + KW - 1
    I = rng.standard_normal((Cin, HP, WP)).astype(dtype)
    Wt = rng.standard_normal((F, Cin, KH, KW)).astype(dtype)
    O = rng.standard_normal((F, H, W)).astype(dtype)
    O0 = O.astype(np.float64)
    ar, ac = [(F, Cin * KH * KW)], [(Cin, KH * KW), (KH, KW), (KW, 1)]
    br, bc = [(Cin, HP * WP), (KH, WP), (KW, 1)], [(H, WP), (W, 1)]
    f = so.gemmx_f32 if dtype == np.float32 else so.gemmx_f64
    maps = [ctypes.byref(dims(*m)) for m in (ar, ac, br, bc)]
    f(F, H * W, Cin * KH * KW, Wt.ctypes.data, maps[0], maps[1], I.ctypes.data, maps[2],
      maps[3], O.ctypes.data, H * W, 1, beta, nthreads)
    ref = Wt.reshape(-1)[offsets(ar)[:, None] + offsets(ac)[None, :]].astype(np.float64) \
        @ I.reshape(-1)[offsets(br)[:, None] + offsets(bc)[None, :]].astype(np.float64)
    want = ref.reshape(F, H, W) + beta * O0
    tol = np.sqrt(Cin * KH * KW) * (2e-6 if dtype == np.float32 else 4e-15) * 10
    np.testing.assert_allclose(O, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("build", ["native", "avx2"])
def test_convolution_runs(builds, build, dtype):
    """Output rows of 3 (shorter than a vector: B packed), 16, 26 and 40
    columns (read in place, the last vector of each row masked)."""
    if build == "avx2" and not _has_avx2():
        pytest.skip("no AVX2 on this CPU")
    so = builds[build]
    before = so.calls()
    for Cin, F, H, W, KH, KW in [(8, 8, 26, 26, 3, 3), (3, 5, 4, 3, 2, 2), (2, 13, 5, 16, 3, 1),
                                 (4, 9, 3, 40, 1, 3), (1, 1, 1, 1, 1, 1)]:
        conv(so, dtype, Cin, F, H, W, KH, KW)
        conv(so, dtype, Cin, F, H, W, KH, KW, beta=1.0, nthreads=2)
    assert so.calls() - before == 10


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_maps_with_tables(builds, dtype):
    """Row maps of A (gathered rows), zero strides: the small path
    builds the tables it needs; results match numpy."""
    so = builds["native"]
    rng = np.random.default_rng(11)
    A = rng.standard_normal(4000).astype(dtype)
    B = rng.standard_normal(4000).astype(dtype)
    f = so.gemmx_f32 if dtype == np.float32 else so.gemmx_f64
    cases = [
        ([(3, 200), (5, 7)], [(4, 1), (6, 9)], [(4, 3), (6, 50)], [(5, 300), (20, 1)]),
        ([(15, 60)], [(2, 0), (12, 1)], [(2, 0), (12, 90)], [(3, 200), (17, 1)]),
        ([(7, 11)], [(30, 2)], [(3, 1000), (10, 1)], [(2, 1500), (1, 4), (33, 1)]),
    ]
    for ar, ac, br, bc in cases:
        M = int(np.prod([e for e, _ in ar]))
        K = int(np.prod([e for e, _ in ac]))
        N = int(np.prod([e for e, _ in bc]))
        C = np.full((M, N), np.nan, dtype)
        maps = [ctypes.byref(dims(*m)) for m in (ar, ac, br, bc)]
        f(M, N, K, A.ctypes.data, maps[0], maps[1], B.ctypes.data, maps[2], maps[3],
          C.ctypes.data, N, 1, 0.0, 1)
        want = A[offsets(ar)[:, None] + offsets(ac)[None, :]].astype(np.float64) \
            @ B[offsets(br)[:, None] + offsets(bc)[None, :]].astype(np.float64)
        tol = np.sqrt(K) * (2e-6 if dtype == np.float32 else 4e-15) * 10
        np.testing.assert_allclose(C, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("build", ["native", "avx2"])
def test_b_at_every_offset_in_a_line(builds, build, dtype):
    """B read in place from every element offset within a 64-byte line, its
    rows a multiple of 64 bytes apart: a narrower first tile up to the next
    vector boundary, then tiles on vector boundaries.  Checked against
    numpy, and bit for bit against the packed path (K within one k block)."""
    if build == "avx2" and not _has_avx2():
        pytest.skip("no AVX2 on this CPU")
    so, packed = builds[build], builds["off"]
    size = np.dtype(dtype).itemsize
    rng = np.random.default_rng(11)
    for M, N, K in [(3, 48, 40), (9, 128, 33), (1, 64, 100), (20, 32, 7)]:
        A = rng.standard_normal((M, K)).astype(dtype)
        raw = np.empty(K * N + 2 * 64 // size, dtype)
        base = (-raw.ctypes.data % 64) // size          # raw[base] is on a line
        for shift in range(64 // size):
            B = raw[base + shift:base + shift + K * N].reshape(K, N)
            B[...] = rng.standard_normal((K, N))
            assert B.ctypes.data % 64 == shift * size
            got, ref = np.zeros((M, N), dtype), np.zeros((M, N), dtype)
            before = so.calls()
            run(so, A, B, got, beta=1.0)
            assert so.calls() == before + 1, (M, N, K, shift)
            run(packed, A, B, ref, beta=1.0)
            np.testing.assert_array_equal(got, ref)
            tol = np.sqrt(K) * (2e-6 if dtype == np.float32 else 4e-15) * 10
            np.testing.assert_allclose(got, A.astype(np.float64) @ B, rtol=tol, atol=tol)
