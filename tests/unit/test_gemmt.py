"""``polyc_gemmt_*`` (backends/c/intrinsics/gemm.h): a GEMM over a band.

``band_lo <= d <= band_hi`` with ``d = n - m`` (only those elements of C are
stored: BLIS's gemmt, PolyBench's ``syrk``), ``k - m`` (A is zero outside
the band: a triangular A, ``symm``'s updates) or ``k - n`` (B's triangle),
against numpy for every micro-kernel (native, AVX2, portable) and the
no-memory fallback: bands open on either side, narrow bands, empty bands,
sizes below, at and above the register tile and the cache blocks, K == 0,
beta 0 (C not read: NaN there must not propagate), 1 and other, 1 and 2
threads, float32 and float64.  Elements of C outside an ``n - m`` band
hold NaN and must be left untouched; elements of A (B) outside a ``k - m``
(``k - n``) band hold large values that must not reach C.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from gemm_abi import ISA_FLAGS, build_shim  # tests/gemm_abi.py (tests/ is on sys.path via conftest)

SHIM = r"""
#include "gemm.h"
const char *isa(void) { return polyc_gemm_isa(); }
#define SHIM(T, SFX)                                                                \
    void gemmt_##SFX(int64_t M, int64_t N, int64_t K, const T *A, int64_t a_rs,     \
                     int64_t a_cs, const T *B, int64_t b_rs, int64_t b_cs, T *C,    \
                     int64_t c_rs, int64_t c_cs, T alpha, T beta, int band,         \
                     int64_t lo, int64_t hi, int nt)                                \
    {                                                                               \
        polyc_gemmt_##SFX(M, N, K, A, a_rs, a_cs, B, b_rs, b_cs, C, c_rs, c_cs,     \
                          alpha, beta, band, lo, hi, nt);                           \
    }
SHIM(float, f32)
SHIM(double, f64)
"""

BUILDS = {
    **ISA_FLAGS,
    "nomem": ["-DPOLYC_GEMM_MALLOC(n)=((void)(n), (void *)0)"],
}

#: gemm_api.h's band kinds
MN, MK, NK = 1, 2, 3
LO, HI = np.iinfo(np.int64).min, np.iinfo(np.int64).max
_BUILT: dict[str, ctypes.CDLL] = {}


@pytest.fixture(scope="module", params=list(BUILDS))
def lib(request, tmp_path_factory):
    name = request.param
    if name not in _BUILT:
        so = build_shim(tmp_path_factory, f"gemmt_{name}", SHIM,
                        ["-O2", "-march=native", "-fopenmp", *BUILDS[name]])
        i64, vp, ci = ctypes.c_int64, ctypes.c_void_p, ctypes.c_int
        for sfx, ct in (("f32", ctypes.c_float), ("f64", ctypes.c_double)):
            f = getattr(so, f"gemmt_{sfx}")
            f.restype = None
            f.argtypes = [i64, i64, i64, vp, i64, i64, vp, i64, i64, vp, i64, i64, ct, ct,
                          ci, i64, i64, ci]
        _BUILT[name] = so
    return _BUILT[name]


def _reference(A, B, C0, alpha, beta, band, lo, hi):
    """float64 ``alpha * A' B' + beta * C0`` on the band (C0 elsewhere), A'
    and B' the operands zeroed outside a k - m / k - n band."""
    M, K = A.shape
    N = B.shape[1]
    m, n, k = np.arange(M)[:, None], np.arange(N)[None, :], np.arange(K)
    A64, B64 = A.astype(np.float64), B.astype(np.float64)
    if band == MK:
        d = k[None, :] - np.arange(M)[:, None]
        A64 = np.where((d >= lo) & (d <= hi), A64, 0.0)
    if band == NK:
        d = k[:, None] - np.arange(N)[None, :]
        B64 = np.where((d >= lo) & (d <= hi), B64, 0.0)
    prod = alpha * (A64 @ B64) + (beta * np.nan_to_num(C0.astype(np.float64))
                                  if beta != 0 else 0.0)
    if band != MN:
        return prod, np.ones((M, N), bool)
    inside = (n - m >= lo) & (n - m <= hi)
    return np.where(inside, prod, C0.astype(np.float64)), inside


CASES = [
    # M, N, K, band, lo, hi
    (37, 37, 13, MN, LO, 0),            # a lower triangle (syrk)
    (40, 33, 20, MN, 0, HI),            # an upper triangle
    (90, 70, 50, MN, -5, 9),            # a narrow band of C
    (15, 15, 7, MN, 3, 2),              # an empty band: C untouched
    (200, 180, 400, MN, LO, -3),        # several K blocks, strictly lower
    (61, 45, 70, MK, LO, -1),           # k < m (symm's temp2)
    (61, 45, 70, MK, 1, HI),            # k > m (symm's C update, trmm)
    (33, 29, 100, MK, -4, 4),           # a band of A
    (300, 40, 310, MK, 2000, 3000),     # no k in the band: C = beta * C
    (50, 66, 80, NK, LO, 0),            # a triangle of B
    (29, 300, 400, NK, -10, 20),
    (20, 20, 0, MN, LO, 0),             # K == 0: C = beta * C on the band
    (20, 20, 0, MK, 1, HI),
    (1, 1, 1, MK, 0, 0),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("beta", [0.0, 1.0, -0.5])
@pytest.mark.parametrize("M,N,K,band,lo,hi", CASES)
def test_gemmt_matches_numpy(lib, dtype, beta, M, N, K, band, lo, hi):
    rng = np.random.default_rng(M * 1000 + N + K + band)
    A = rng.standard_normal((M, K)).astype(dtype)
    B = rng.standard_normal((K, N)).astype(dtype)
    C0 = rng.standard_normal((M, N)).astype(dtype)
    m, n, k = np.arange(M)[:, None], np.arange(N)[None, :], np.arange(K)
    if band == MN:
        C0[~((n - m >= lo) & (n - m <= hi))] = np.nan      # never touched
    elif band == MK and K:
        d = k[None, :] - np.arange(M)[:, None]
        A[~((d >= lo) & (d <= hi))] = 1e30                # never reaches C
    elif band == NK and K:
        d = k[:, None] - np.arange(N)[None, :]
        B[~((d >= lo) & (d <= hi))] = 1e30
    if beta == 0:
        C0[:] = np.nan                                    # beta 0 does not read C
    sfx = "f32" if dtype == np.float32 else "f64"
    want, inside = _reference(np.where(np.abs(A) > 1e29, 0, A), np.where(np.abs(B) > 1e29, 0, B),
                              C0, 1.5, beta, band, lo, hi)
    for nt in (1, 2):
        C = C0.copy()
        getattr(lib, f"gemmt_{sfx}")(M, N, K, A.ctypes.data, K, 1, B.ctypes.data, N, 1,
                                     C.ctypes.data, N, 1, 1.5, beta, band, lo, hi, nt)
        rtol = 1e-4 if dtype == np.float32 else 1e-11
        np.testing.assert_allclose(C[inside], want[inside], rtol=rtol,
                                   atol=rtol * max(K, 1) * 4)
        # outside a band of C: the very same bits (NaN stays NaN)
        np.testing.assert_array_equal(C[~inside], C0[~inside])


def test_a_lower_triangle_with_strided_operands(lib):
    """syrk's call: ``C(i, j) += A(i, k) * A(j, k)`` for ``j <= i``, B the
    transposed view of A (b_rs 1, b_cs K), C with a row stride wider than
    its columns."""
    rng = np.random.default_rng(7)
    n, kk = 75, 41
    A = rng.standard_normal((n, kk))
    big = rng.standard_normal((n, n + 9))
    C = big.copy()
    lib.gemmt_f64(n, n, kk, A.ctypes.data, kk, 1, A.ctypes.data, 1, kk, C.ctypes.data,
                  n + 9, 1, 2.0, 0.5, MN, LO, 0, 2)
    want = big.copy()
    low = np.tril(np.ones((n, n), bool))
    want[:, :n][low] = (2.0 * A @ A.T + 0.5 * big[:, :n])[low]
    np.testing.assert_allclose(C, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("nt", [1, 2])
@pytest.mark.parametrize("M,N", [(1, 3), (17, 5), (64, 40), (300, 70), (800, 33)])
def test_in_place_over_a_triangle_of_a(lib, M, N, nt):
    """PolyBench's trmm as one call in place: ``B(i, j) += A(k, i) * B(k, j)``
    for ``k > i`` with C and B the same array.  Each panel of the
    reduction (rows k of B) is packed before any C row is written, the
    panels ascending, so every row reads the others' values from before
    the call, as the source (``i`` ascending) does."""
    rng = np.random.default_rng(M + N)
    A = rng.standard_normal((M, M))
    B0 = rng.standard_normal((M, N))
    want = B0 + np.triu(A.T, 1) @ B0
    B = B0.copy()
    lib.gemmt_f64(M, N, M, A.ctypes.data, 1, M, B.ctypes.data, N, 1, B.ctypes.data, N, 1,
                  1.0, 1.0, MK, 1, HI, nt)
    np.testing.assert_allclose(B, want, rtol=1e-11, atol=1e-11 * M)
