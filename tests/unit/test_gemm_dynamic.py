"""The GEMM's thread pool and dynamic distribution of work (issue 16, item
4): with one thread slowed artificially (a 2 ms sleep before each chunk it
takes, through the ``POLYC_GEMM_ON_CHUNK`` hook), the other thread takes
most of the chunks, and the result is still right, for the split-M path
(whole A blocks per thread), the short-M path (shared jr slivers) and the
implicit GEMM; calls from several threads at once, many calls in a row
(the pool's epochs) and a forked child are right too."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from gemm_abi import build_shim, dims

SHIM = r"""
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <time.h>
static int64_t test_chunks[2];
static int test_slow = 1;
static void test_on_chunk(int tid)
{
    __atomic_fetch_add(&test_chunks[tid & 1], 1, __ATOMIC_RELAXED);
    if (tid == 1 && test_slow) {        /* the slowed thread */
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
}
#define POLYC_GEMM_ON_CHUNK(tid) test_on_chunk(tid)
#include "gemm.h"
int64_t chunks(int t) { return test_chunks[t]; }
void reset(void) { test_chunks[0] = test_chunks[1] = 0; }
void set_slow(int s) { test_slow = s; }
void gemm_f64(int64_t M, int64_t N, int64_t K, const double *A, const double *B, double *C,
              int nt)
{
    polyc_gemm_f64(M, N, K, A, K, 1, B, N, 1, C, N, 1, 1.0, 0.0, NULL, 0, 0, nt);
}
void gemm_f32(int64_t M, int64_t N, int64_t K, const float *A, const float *B, float *C, int nt)
{
    polyc_gemm_f32(M, N, K, A, K, 1, B, N, 1, C, N, 1, 1.0f, 0.0f, NULL, 0, 0, nt);
}
void gemmx_f32(int64_t M, int64_t N, int64_t K, const float *A, const polyc_gemm_dims *ar,
               const polyc_gemm_dims *ac, const float *B, const polyc_gemm_dims *br,
               const polyc_gemm_dims *bc, float *C, int nt)
{
    polyc_gemmx_f32(M, N, K, A, ar, ac, B, br, bc, C, N, 1, 1.0f, 0.0f, NULL, 0, 0, nt);
}
"""


def _build(tmp_path_factory, name: str, extra: list[str]):
    so = build_shim(tmp_path_factory, f"gemm_dynamic_{name}", SHIM,
                    ["-O2", "-march=native", "-fopenmp", *extra])
    so.chunks.restype = ctypes.c_int64
    so.set_slow.argtypes = [ctypes.c_int]
    so.chunks.argtypes = [ctypes.c_int]
    i64, vp = ctypes.c_int64, ctypes.c_void_p
    so.gemm_f64.argtypes = [i64, i64, i64, vp, vp, vp, ctypes.c_int]
    so.gemm_f32.argtypes = [i64, i64, i64, vp, vp, vp, ctypes.c_int]
    so.gemmx_f32.argtypes = [i64, i64, i64, vp, vp, vp, vp, vp, vp, vp, ctypes.c_int]
    return so


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return _build(tmp_path_factory, "default", [])


@pytest.fixture(scope="module")
def tiny_caches(tmp_path_factory):
    """Blocking derived from a 64 KiB L2 and a 256 KiB L3: MC = 4 slivers,
    NC = 16 slivers, so small problems cross every block boundary."""
    so = _build(tmp_path_factory, "tiny",
                ["-DPOLYC_GEMM_L2_BYTES=65536", "-DPOLYC_GEMM_L3_BYTES=262144"])
    so.set_slow(0)
    return so


def _boundary_cases():
    """(M, N, K, threads, dtype) around MR, NR, MC, NC and KC of the tiny
    build (f32: MR 14 / 6 / 4, NR 32 / 16 / 8 by ISA; the sizes cover them all)."""
    import itertools
    import random
    ms = [1, 5, 6, 7, 13, 14, 15, 55, 56, 57, 97]
    ns = [1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 255, 256, 257, 520]
    ks = [0, 1, 2, 255, 256, 257, 383, 384, 385, 1031]
    every = list(itertools.product(ms, ns, ks, (1, 2, 3), ("float32", "float64")))
    return random.Random(16).sample(every, 90)


@pytest.mark.parametrize("M, N, K", [(400, 300, 200),    # split M: A blocks
                                     (20, 2000, 150),     # short M: jr slivers
                                     (333, 1031, 401)])   # edges, several pc blocks
def test_a_slowed_thread_does_less_and_the_result_is_right(lib, M, N, K):
    rng = np.random.default_rng(M + N + K)
    A, B = rng.standard_normal((M, K)), rng.standard_normal((K, N))
    C = np.full((M, N), np.nan)
    lib.reset()
    lib.gemm_f64(M, N, K, A.ctypes.data, B.ctypes.data, C.ctypes.data, 2)
    np.testing.assert_allclose(C, A @ B, rtol=1e-12, atol=1e-11 * K)
    fast, slow = lib.chunks(0), lib.chunks(1)
    assert fast + slow > 4
    # a static split would give each thread half of the chunks
    assert fast > 2 * slow, (fast, slow)


def test_the_implicit_gemm_under_a_slowed_thread(lib):
    """A 3x3 convolution as polyc_gemmx (the window gathered while packing)."""
    rng = np.random.default_rng(5)
    C_, H, W, F = 16, 30, 34, 40
    img = rng.standard_normal((C_, H, W)).astype(np.float32)
    wts = rng.standard_normal((F, C_, 3, 3)).astype(np.float32)
    HO, WO = H - 2, W - 2
    out = np.zeros((F, HO * WO), np.float32)
    # A = weights (F x C*9); B(k=(c,kh,kw), n=(h,w)) = img[c, h+kh, w+kw]
    ar, ac = dims((F, C_ * 9)), dims((C_ * 9, 1))
    br, bc = dims((C_, H * W), (3, W), (3, 1)), dims((HO, W), (WO, 1))
    lib.reset()
    lib.gemmx_f32(F, HO * WO, C_ * 9, wts.ctypes.data, ctypes.byref(ar), ctypes.byref(ac),
                  img.ctypes.data, ctypes.byref(br), ctypes.byref(bc), out.ctypes.data, 2)
    win = np.lib.stride_tricks.sliding_window_view(img, (3, 3), axis=(1, 2))
    ref = np.einsum("fcij,chwij->fhw", wts.astype(np.float64), win.astype(np.float64))
    np.testing.assert_allclose(out.reshape(F, HO, WO), ref, rtol=1e-4, atol=1e-3)
    assert lib.chunks(0) > lib.chunks(1)


def _check_f64(lib, M, N, K, nt=2, seed=0):
    rng = np.random.default_rng(seed)
    A, B = rng.standard_normal((M, K)), rng.standard_normal((K, N))
    C = np.full((M, N), np.nan)
    lib.gemm_f64(M, N, K, A.ctypes.data, B.ctypes.data, C.ctypes.data, nt)
    return np.allclose(C, A @ B, rtol=1e-12, atol=1e-11 * max(K, 1))


def test_many_calls_in_a_row_and_from_several_threads(lib):
    """The pool's epochs: 300 calls of changing shapes, then 4 Python threads
    calling at once (ctypes drops the GIL: one call holds the pool, the
    others run alone)."""
    import threading
    lib.set_slow(0)
    try:
        shapes = [(1 + 37 * i % 211, 1 + 53 * i % 307, 1 + 29 * i % 173) for i in range(300)]
        assert all(_check_f64(lib, *s, nt=1 + i % 3, seed=i) for i, s in enumerate(shapes))
        results = []

        def worker(i):
            results.append(all(_check_f64(lib, 150 + i, 170, 90 + i, seed=i + 7)
                               for _ in range(20)))
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert results == [True] * 4
    finally:
        lib.set_slow(1)


def test_a_forked_child_starts_a_pool_of_its_own(lib):
    import os
    lib.set_slow(0)
    try:
        assert _check_f64(lib, 300, 200, 100)          # the parent's pool has a worker
        pid = os.fork()
        if pid == 0:                                   # pragma: no cover - the child
            ok = _check_f64(lib, 310, 190, 120) and _check_f64(lib, 64, 900, 50)
            os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert _check_f64(lib, 300, 200, 100)
    finally:
        lib.set_slow(1)


@pytest.mark.parametrize("M, N, K, nt, dtype", _boundary_cases())
def test_block_boundaries_with_derived_blocking(tiny_caches, M, N, K, nt, dtype):
    rng = np.random.default_rng(M * 7 + N * 13 + K)
    A = rng.standard_normal((M, K)).astype(dtype)
    B = rng.standard_normal((K, N)).astype(dtype)
    C = np.full((M, N), np.nan, dtype)
    f = tiny_caches.gemm_f32 if dtype == "float32" else tiny_caches.gemm_f64
    f(M, N, K, A.ctypes.data, B.ctypes.data, C.ctypes.data, nt)
    ref = A.astype(np.float64) @ B.astype(np.float64)
    tol = (1e-5 if dtype == "float32" else 1e-13) * max(K, 1)
    np.testing.assert_allclose(C, ref, rtol=tol, atol=tol)
