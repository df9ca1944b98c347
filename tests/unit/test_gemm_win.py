"""gemm.h's window path (backends/c/intrinsics/gemm_win.h) against numpy:
a convolution's implicit GEMM through polyc_gemmx with B read in place and
the output rows joined across the input's pitch.

Output widths around the vector length (2, 3, VL - 1, VL, VL + 1, 28, 56) and
window widths 1 to 3 (pitches 0 to 2 columns wider than a row), row counts
that leave every kind of tile (within a row, across one row's end, across
several, the narrow last one), float32 and float64, the AVX-512 (where the
CPU has it) and AVX2 builds; alpha, beta other than 0 and 1, the bias (a
strided one too) and the ReLU applied to the columns stored through the
buffer as to those stored by the kernel; batches of images (runs of joined
rows), an A gathered through a table, 1 and 2 threads.  C starts as NaN
(every output element must be written) inside a larger buffer whose padding
must stay untouched (the columns between rows are never stored), and B ends
at a page that cannot be read (the columns between rows read inside B).

A hook (``POLYC_GEMM_ON_WIN``) counts the calls that take the path and
records the pitch they join rows over, so a path that stops being taken
fails here; a build with the path off (``POLYC_GEMM_WIN_OFF=1``: the small
or the packed path) gives bit-identical results, because all of them sum
each C element over k in ascending order with one FMA chain (K within one
k block of the packed path)."""

from __future__ import annotations

import ctypes
import mmap

import numpy as np
import pytest
from gemm_abi import ISA_FLAGS, build_shims, dims, offsets, runnable

SHIM = r"""
#define POLYC_GEMM_FEW_MAX 0 /* the few-rows path (tests/unit/test_gemm_few.py) off */
static long win_calls, win_pitch;
#define POLYC_GEMM_ON_WIN(nv, mr, pitch)                                           \
    ((void)(nv), (void)(mr), __atomic_store_n(&win_pitch, (long)(pitch), __ATOMIC_RELAXED), \
     __atomic_add_fetch(&win_calls, 1, __ATOMIC_RELAXED))
#include "gemm.h"
const char *isa(void) { return polyc_gemm_isa(); }
long calls(void) { return __atomic_load_n(&win_calls, __ATOMIC_RELAXED); }
long pitch(void) { return __atomic_load_n(&win_pitch, __ATOMIC_RELAXED); }
#define SHIM(T, SFX)                                                                \
    void gemmx_##SFX(int64_t M, int64_t N, int64_t K, const T *A,                   \
                     const polyc_gemm_dims *ar, const polyc_gemm_dims *ac,          \
                     const T *B, const polyc_gemm_dims *br,                         \
                     const polyc_gemm_dims *bc, T *C, int64_t c_rs, double alpha,   \
                     double beta, const T *bias, int64_t bias_cs, int relu, int nt) \
    {                                                                               \
        polyc_gemmx_##SFX(M, N, K, A, ar, ac, B, br, bc, C, c_rs, 1, (T)alpha,      \
                          (T)beta, bias, bias_cs, relu, nt);                        \
    }
SHIM(float, f32)
SHIM(double, f64)
"""

BUILDS = {
    "native": ISA_FLAGS["native"],
    "avx2": ISA_FLAGS["avx2"],
    "off": ["-DPOLYC_GEMM_WIN_OFF=1"],     # the small or the packed path
}

#: vector lanes of each build and element type
LANES = {("native", 4): 16, ("native", 8): 8, ("avx2", 4): 8, ("avx2", 8): 4}


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    libs = build_shims(tmp_path_factory, "gemm_win", SHIM,
                       {name: ["-O2", "-march=native", "-fopenmp", *extra]
                        for name, extra in BUILDS.items()})
    p = ctypes.c_void_p
    for so in libs.values():
        so.isa.restype = ctypes.c_char_p
        so.calls.restype = so.pitch.restype = ctypes.c_long
        for f in (so.gemmx_f32, so.gemmx_f64):
            f.restype = None
            f.argtypes = [ctypes.c_int64] * 3 + [p] * 6 + [p, ctypes.c_int64, ctypes.c_double,
                                                           ctypes.c_double, p, ctypes.c_int64,
                                                           ctypes.c_int, ctypes.c_int]
    return libs


def guarded(n: int, dtype) -> tuple[np.ndarray, object]:
    """n elements of dtype ending at a page that cannot be read or written
    (and the mapping, to keep alive)."""
    page = mmap.PAGESIZE
    size = np.dtype(dtype).itemsize
    pages = -(-n * size // page) + 1
    mem = mmap.mmap(-1, pages * page)
    base = ctypes.addressof(ctypes.c_char.from_buffer(mem))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    assert libc.mprotect(base + (pages - 1) * page, page, 0) == 0
    arr = np.frombuffer(mem, dtype, count=(pages - 1) * page // size)
    return arr[len(arr) - n:], (mem, base, page, pages, libc)


def release(keep) -> None:
    mem, base, page, pages, libc = keep
    libc.mprotect(base + (pages - 1) * page, page, 3)


def conv(so, dtype, Cin, F, H, W, KH, KW, *, images=1, alpha=1.0, beta=0.0, bias=None,
         relu=False, gather_a=False, nthreads=1, seed=0):
    """A valid convolution of `images` images as one polyc_gemmx (M = F output
    channels, N = images x H x W pixels, K = Cin x KH x KW); returns C (F x N,
    inside a padded buffer whose padding is checked) after comparing it with
    float64 numpy."""
    rng = np.random.default_rng(seed + Cin + 7 * F + 31 * H + W + 101 * KW)
    HP, WP = H + KH - 1, W + KW - 1
    N, K = images * H * W, Cin * KH * KW
    I, keep = guarded(images * Cin * HP * WP, dtype)
    I[...] = rng.standard_normal(I.size)
    Wt = rng.standard_normal((F + 3) * K).astype(dtype)
    if gather_a:      # rows 0 .. F/2 - 1, then F/2 + 3 ..: a table, not a stride
        ar = [(2, (F // 2 + 3) * K), (F // 2, K)]
    else:
        ar = [(F, K)]
    a_off = offsets(ar)
    ac = [(Cin, KH * KW), (KH, KW), (KW, 1)]
    br = [(Cin, HP * WP), (KH, WP), (KW, 1)]
    bc = [(images, Cin * HP * WP), (H, WP), (W, 1)] if images > 1 else [(H, WP), (W, 1)]
    pad = 5
    Cbuf = np.full((F, N + pad), 7.25, dtype)
    C = Cbuf[:, :N]
    C[...] = np.nan if beta == 0 else rng.standard_normal((F, N))
    C0 = C.astype(np.float64)
    b, b_cs = None, 0
    if bias is not None:
        b_cs = bias
        bvec = rng.standard_normal(N * b_cs).astype(dtype)
        b = bvec.ctypes.data
    maps = [ctypes.byref(dims(*ar)), ctypes.byref(dims(*ac)), ctypes.byref(dims(*br)),
            ctypes.byref(dims(*bc))]
    f = so.gemmx_f32 if dtype == np.float32 else so.gemmx_f64
    f(F, N, K, Wt.ctypes.data, maps[0], maps[1], I.ctypes.data, maps[2], maps[3],
      C.ctypes.data, N + pad, alpha, beta, b, b_cs, int(relu), nthreads)
    A = Wt[a_off[:, None] + offsets(ac)[None, :]].astype(np.float64)
    Bm = I[offsets(br)[:, None] + offsets(bc)[None, :]].astype(np.float64)
    want = alpha * (A @ Bm) + beta * C0 if beta else alpha * (A @ Bm)
    if b is not None:
        want = want + bvec[::b_cs][None, :N].astype(np.float64)
    if relu:
        want = np.maximum(want, 0)
    release(keep)
    tol = np.sqrt(K) * (2e-6 if dtype == np.float32 else 4e-15) * 10 * max(1.0, abs(alpha))
    np.testing.assert_allclose(C, want, rtol=tol, atol=tol)
    assert (Cbuf[:, N:] == 7.25).all(), "the padding after a row of C was written"
    return C.copy()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("build", ["native", "avx2"])
def test_rows_joined_across_the_pitch(builds, build, dtype):
    """Output widths around the vector length whose rows the path joins (the
    pitch is below the row rounded up to vectors, or equal to one vector):
    every tile kind, bit for bit the same as the path off."""
    so = runnable(builds, build)
    vl = LANES[build, np.dtype(dtype).itemsize]
    widths = sorted({2, 3, vl - 2, vl - 1, vl + 1, 2 * vl - 3, 28, 56})
    for W in widths:
        for KW in (2, 3):
            pitch, lanes = W + KW - 1, -(-W // vl) * vl
            if pitch > lanes or (pitch == lanes and lanes != vl):
                continue                      # not joined: test_many_slivers
            for F, H in ((64, 5), (3, 9)):
                if F == 3 and 4 * (W + KW - 1) > 3 * (-(-W // vl) * vl) and W >= vl:
                    continue                  # few slivers, small saving: the small path
                before = so.calls()
                got = conv(so, dtype, 3, F, H, W, 3, KW)
                assert so.calls() == before + 1, (F, H, W, KW)
                assert so.pitch() == W + KW - 1
                ref = conv(builds["off"], dtype, 3, F, H, W, 3, KW)
                np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("build", ["native", "avx2"])
def test_many_slivers(builds, build, dtype):
    """More slivers of A than the small path reads B in place for, rows not
    joined (rows a whole number of vectors): the path takes them, pitch 0."""
    so = runnable(builds, build)
    vl = LANES[build, np.dtype(dtype).itemsize]
    for W, KW in ((2 * vl, 3), (3 * vl, 2), (vl, 2)):
        before = so.calls()
        got = conv(so, dtype, 4, 70, 4, W, 2, KW, nthreads=2)
        assert so.calls() == before + 1 and so.pitch() == 0, (W, KW)
        np.testing.assert_array_equal(got, conv(builds["off"], dtype, 4, 70, 4, W, 2, KW))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_epilogue_batches_and_threads(builds, dtype):
    """alpha, beta 1 and 2.5, a contiguous and a strided bias, the ReLU, two
    and three images in one call (one virtual run per image), 1 and 2
    threads: the columns stored through the buffer get the same epilogue as
    those the kernel stores."""
    so = runnable(builds, "native")
    cases = [dict(beta=1.0), dict(beta=2.5, alpha=-0.5), dict(bias=1, relu=True),
             dict(bias=3, beta=1.0, relu=True, nthreads=2), dict(images=2, nthreads=2),
             dict(images=3, bias=1, beta=2.5, relu=True), dict(gather_a=True, alpha=2.0)]
    for kw in cases:
        before = so.calls()
        conv(so, dtype, 5, 70, 6, 28, 3, 3, **kw)
        assert so.calls() == before + 1, kw


def test_declines(builds):
    """Not taken: a plain column stride (no map), few slivers over rows the
    small path handles as well, an A too large to pack whole (4 MiB)."""
    so = runnable(builds, "native")
    before = so.calls()
    conv(so, np.float32, 3, 8, 6, 26, 3, 3)          # 1 sliver, pitch 28 vs 32 lanes
    conv(so, np.float32, 500, 300, 3, 7, 3, 3)       # A 300 x 4500 floats: 5.4 MB
    assert so.calls() == before
    # a column map that collapses to one stride is no window
    conv(so, np.float32, 2, 64, 1, 40, 1, 1)
    assert so.calls() == before


def test_back_to_back_calls_on_two_threads(builds):
    """3,000 calls in a row on two threads (two jobs each: the packing of A,
    then the tiles), each bit for bit the single-thread result: a worker
    still claiming in one job must not take a ticket of the next (the pool
    once let it, about one call in 16,000, which ended the next job early)."""
    so = runnable(builds, "native")
    rng = np.random.default_rng(5)
    Cin, F, H, W = 8, 70, 30, 28
    HP, WP, K, N = H + 2, W + 2, Cin * 9, H * W
    I = rng.standard_normal(Cin * HP * WP).astype(np.float32)
    Wt = rng.standard_normal(F * K).astype(np.float32)
    maps = [ctypes.byref(dims(*m)) for m in ([(F, K)], [(Cin, 9), (3, 3), (3, 1)],
                                             [(Cin, HP * WP), (3, WP), (3, 1)],
                                             [(H, WP), (W, 1)])]
    one = np.full((F, N), np.nan, np.float32)
    so.gemmx_f32(F, N, K, Wt.ctypes.data, maps[0], maps[1], I.ctypes.data, maps[2], maps[3],
                 one.ctypes.data, N, 1.0, 0.0, None, 0, 0, 1)
    before = so.calls()
    C = np.empty_like(one)
    for call in range(3000):
        C.fill(np.nan)
        so.gemmx_f32(F, N, K, Wt.ctypes.data, maps[0], maps[1], I.ctypes.data, maps[2],
                     maps[3], C.ctypes.data, N, 1.0, 0.0, None, 0, 0, 2)
        if not np.array_equal(C, one):
            raise AssertionError(f"call {call} on two threads differs from one thread")
    assert so.calls() == before + 3000
