"""The GEMM's dynamic distribution of work (issue 16, item 4): with one
thread slowed artificially (a 2 ms sleep before each chunk it takes, through
the ``POLYC_GEMM_ON_CHUNK`` hook), the other thread takes most of the
chunks, and the result is still right, for the split-M path (whole A blocks
per thread), the short-M path (shared jr slivers) and the implicit GEMM."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from gemm_abi import dims

HEADER_DIR = Path(__file__).resolve().parents[2] / "backends" / "c" / "intrinsics"

SHIM = r"""
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <time.h>
static int64_t test_chunks[2];
static void test_on_chunk(int tid)
{
    __atomic_fetch_add(&test_chunks[tid & 1], 1, __ATOMIC_RELAXED);
    if (tid == 1) {                     /* the slowed thread */
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
}
#define POLYC_GEMM_ON_CHUNK(tid) test_on_chunk(tid)
#include "gemm.h"
int64_t chunks(int t) { return test_chunks[t]; }
void reset(void) { test_chunks[0] = test_chunks[1] = 0; }
void gemm_f64(int64_t M, int64_t N, int64_t K, const double *A, const double *B, double *C,
              int nt)
{
    polyc_gemm_f64(M, N, K, A, K, 1, B, N, 1, C, N, 1, 1.0, 0.0, NULL, 0, 0, nt);
}
void gemmx_f32(int64_t M, int64_t N, int64_t K, const float *A, const polyc_gemm_dims *ar,
               const polyc_gemm_dims *ac, const float *B, const polyc_gemm_dims *br,
               const polyc_gemm_dims *bc, float *C, int nt)
{
    polyc_gemmx_f32(M, N, K, A, ar, ac, B, br, bc, C, N, 1, 1.0f, 0.0f, NULL, 0, 0, nt);
}
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    d = tmp_path_factory.mktemp("gemm_dynamic")
    src, so_path = d / "shim.c", d / "libshim.so"
    src.write_text(SHIM)
    subprocess.run([cc, "-O2", "-march=native", "-fopenmp", "-fPIC", "-shared", "-std=c99",
                    "-Wall", "-Werror", f"-I{HEADER_DIR}", str(src), "-o", str(so_path)],
                   check=True, capture_output=True, text=True)
    so = ctypes.CDLL(str(so_path))
    so.chunks.restype = ctypes.c_int64
    so.chunks.argtypes = [ctypes.c_int]
    i64, vp = ctypes.c_int64, ctypes.c_void_p
    so.gemm_f64.argtypes = [i64, i64, i64, vp, vp, vp, ctypes.c_int]
    so.gemmx_f32.argtypes = [i64, i64, i64, vp, vp, vp, vp, vp, vp, vp, ctypes.c_int]
    return so


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
