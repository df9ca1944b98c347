"""gemm.h's few-rows path (backends/c/intrinsics/gemm_few.h) against numpy.

The row stream (at most POLYC_GEMM_FEW_ROWS = 2 rows of A, B row-major) at
the edges of its chunks and vectors (N around 16, 512 and the split between
threads; K around its step of 4), and the dot kernel (up to
POLYC_GEMM_FEW_MAX = 16 rows, B column-major: x @ W.T) at the edges of its
groups of 4 rows, its tiles of nb columns and its masked last vector of k;
float32 and float64, on the AVX-512 (where the CPU has it), AVX2 and
portable builds; alpha, beta, bias (strided for the dot kernel), ReLU,
strided A and C, 1 and 2 threads.

A hook (``POLYC_GEMM_ON_FEW``) counts the calls of each kind, so a kernel
that is never taken fails here too.  The row stream sums each C element over
k in ascending order from zero, like the small path: a build without the
few-rows path (``POLYC_GEMM_FEW_MAX=0``) gives the same bits.  The dot
kernel sums per lane, then across lanes: checked against float64 numpy
within K-scaled tolerances, and two threads give the bits of one."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from gemm_abi import GEMM_SHIM, ISA_FLAGS, bind_gemm, build_shims, cpu_has

SHIM = r"""
static long few_calls[3];
#define POLYC_GEMM_ON_FEW(kind) __atomic_add_fetch(&few_calls[(kind)], 1, __ATOMIC_RELAXED)
#include "gemm.h"
const char *isa(void) { return polyc_gemm_isa(); }
long calls(int kind) { return __atomic_load_n(&few_calls[kind], __ATOMIC_RELAXED); }
""" + GEMM_SHIM

#: every size takes the path in the ISA builds (the thresholds of B's bytes at
#: 0); "default" keeps them, "off" has no few-rows path
_ANY = ["-DPOLYC_GEMM_FEW_ROW_MIN=0", "-DPOLYC_GEMM_FEW_DOT_MIN=0"]
BUILDS = {**{k: [*v, *_ANY] for k, v in ISA_FLAGS.items()},
          "default": [], "off": ["-DPOLYC_GEMM_FEW_MAX=0"]}
ROW, DOT = 1, 2


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    out = build_shims(tmp_path_factory, "gemm_few", SHIM,
                      {name: ["-O2", "-march=native", "-fopenmp", *extra]
                       for name, extra in BUILDS.items()})
    for so in out.values():
        so.isa.restype = ctypes.c_char_p
        so.calls.restype = ctypes.c_long
        so.calls.argtypes = [ctypes.c_int]
        bind_gemm(so)
    return out


def _build(builds, name):
    if name == "avx2" and not cpu_has("avx2", "fma"):
        pytest.skip("no AVX2 on this CPU")
    return builds[name]


def _st(a):
    return a.strides[0] // a.itemsize, a.strides[1] // a.itemsize


def case(so, M, N, K, dtype, *, ta=False, tb=False, tc=False, alpha=1.0, beta=0.0,
         bias=False, relu=False, nthreads=1, seed=0):
    """One call on fresh operands (B column-major when tb, A column-major when
    ta, C column-major when tc), checked against float64 numpy; returns C."""
    rng = np.random.default_rng(seed + 1009 * M + 101 * N + K)
    A = rng.standard_normal((K, M) if ta else (M, K)).astype(dtype)
    B = rng.standard_normal((N, K) if tb else (K, N)).astype(dtype)
    A, B = (A.T if ta else A), (B.T if tb else B)
    # C inside a larger array: the elements around it must stay as they were
    full = rng.standard_normal((N + 2, M + 1) if tc else (M + 1, N + 2)).astype(dtype)
    C = full[:N, :M].T if tc else full[:M, :N]
    if beta == 0.0:
        C[...] = np.nan                # beta 0 must not read C
    outside = full.copy()
    (outside[:N, :M] if tc else outside[:M, :N])[...] = 0
    C0 = np.nan_to_num(C.astype(np.float64))
    bv = rng.standard_normal(3 * N).astype(dtype)[::3] if bias else None
    f = so.gemm_f32 if dtype == np.float32 else so.gemm_f64
    f(M, N, K, A.ctypes.data, *_st(A), B.ctypes.data, *_st(B), C.ctypes.data, *_st(C),
      alpha, beta, None if bv is None else bv.ctypes.data, 0 if bv is None else 3,
      int(relu), nthreads)
    want = alpha * (A.astype(np.float64) @ B.astype(np.float64)) + beta * C0
    if bias:
        want += bv
    if relu:
        want = np.maximum(want, 0)
    tol = np.sqrt(max(K, 1)) * (2e-6 if dtype == np.float32 else 4e-15) * 10
    np.testing.assert_allclose(C, want, rtol=tol, atol=tol)
    rest = full.copy()
    (rest[:N, :M] if tc else rest[:M, :N])[...] = 0
    np.testing.assert_array_equal(rest, outside)
    return C.copy()


def counted(so, kind, fn):
    """Run fn(); return how many calls of this kind it made."""
    before = so.calls(kind)
    fn()
    return so.calls(kind) - before


# columns: around the vector lengths (16 / 8 / 4 lanes), a chunk (2048 f32,
# 1024 f64 columns: 8 KiB a row) and its split between two threads
ROW_COLS = [1, 3, 4, 7, 8, 9, 15, 16, 17, 33, 255, 257, 767, 768, 1023, 1024, 1025, 2047,
            2048, 2049, 4097]
ROW_KS = [1, 2, 3, 4, 5, 8, 9, 67]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("build", ["native", "avx2", "portable"])
def test_row_stream_edges(builds, build, dtype):
    so = _build(builds, build)
    n = 0
    for M in (1, 2):
        for N in ROW_COLS:
            for K in ROW_KS:
                n += counted(so, ROW, lambda: case(so, M, N, K, dtype))
    runs = 2 * len(ROW_COLS) * len(ROW_KS)
    assert n == (0 if so.isa().decode() == "portable" else runs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("build", ["native", "avx2"])
def test_row_stream_epilogue_threads_and_bits(builds, build, dtype):
    """alpha, beta, bias and ReLU in the store; two threads and a build
    without the path (the small path's register tiles) give the same bits."""
    so = _build(builds, build)
    for M, N, K in [(1, 768, 3072), (2, 1000, 67), (1, 3072, 768), (2, 17, 5), (1, 513, 9),
                    (2, 4100, 7)]:
        for kw in ({"alpha": 0.5, "beta": 1.0}, {"alpha": -2.0, "beta": 2.5},
                   {"beta": 1.0, "bias": True, "relu": True}, {"ta": True, "beta": -1.0}):
            one = case(so, M, N, K, dtype, seed=3, **kw)
            two = case(so, M, N, K, dtype, nthreads=2, seed=3, **kw)
            np.testing.assert_array_equal(one, two)
            if build == "native" and not kw.get("bias"):
                # (the small path packs a strided bias; the row stream leaves it)
                ref = case(builds["off"], M, N, K, dtype, seed=3, **kw)
                np.testing.assert_array_equal(one, ref)


# rows around the groups of 4, columns around the tiles of nb (4 AVX-512, 2
# AVX2) columns, k around the vector lengths
DOT_ROWS = [1, 2, 3, 4, 5, 7, 8, 9, 13, 16]
DOT_COLS = [1, 2, 3, 4, 5, 9, 33]
DOT_KS = [1, 3, 4, 7, 8, 9, 15, 16, 17, 100]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("build", ["native", "avx2", "portable"])
def test_dot_edges(builds, build, dtype):
    so = _build(builds, build)
    n = 0
    for M in DOT_ROWS:
        for N in DOT_COLS:
            for K in DOT_KS:
                # (K = 1: B's strides are both 1, and up to 2 rows stream)
                n += counted(so, DOT if K > 1 or M > 2 else ROW,
                             lambda: case(so, M, N, K, dtype, tb=True))
    runs = len(DOT_ROWS) * len(DOT_COLS) * len(DOT_KS)
    assert n == (0 if so.isa().decode() == "portable" else runs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("build", ["native", "avx2"])
def test_dot_epilogue_strides_and_threads(builds, build, dtype):
    """alpha (A packed times alpha), column-major A and C, a strided bias,
    beta, ReLU; two threads share the column tiles with the same bits."""
    so = _build(builds, build)
    for M, N, K in [(1, 768, 3072), (4, 3072, 768), (7, 333, 129), (16, 100, 768), (9, 50, 300),
                    (3, 5, 1)]:
        for kw in ({"alpha": 0.5, "beta": 1.0}, {"ta": True, "tc": True, "beta": 2.5},
                   {"beta": 1.0, "bias": True, "relu": True}, {"tc": True, "alpha": -3.0}):
            one = case(so, M, N, K, dtype, tb=True, seed=5, **kw)
            two = case(so, M, N, K, dtype, tb=True, nthreads=2, seed=5, **kw)
            np.testing.assert_array_equal(one, two)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_where_the_path_is_not_taken(builds, dtype):
    """More rows than the dot kernel's 16 with B column-major, 3 rows and more
    with B row-major (the small path's tiles do better), a B with neither
    unit stride, a B below the thresholds of bytes (it stays in L2), and the
    build without the path: the other paths run and agree with numpy."""
    so = builds["native"]
    if so.isa().decode() == "portable":
        pytest.skip("no few-rows path in the portable build")
    both = lambda b: b.calls(ROW) + b.calls(DOT)  # noqa: E731
    before = both(so)
    case(so, 17, 400, 333, dtype, tb=True)
    case(so, 3, 40, 33, dtype)
    case(so, 14, 768, 300, dtype)
    assert both(so) == before
    rng = np.random.default_rng(0)
    B = rng.standard_normal((2 * 30, 3 * 20)).astype(dtype)[::2, ::3]   # 30 x 20, strided
    A = rng.standard_normal((1, 30)).astype(dtype)
    C = np.empty((1, 20), dtype)
    f = so.gemm_f32 if dtype == np.float32 else so.gemm_f64
    f(1, 20, 30, A.ctypes.data, *_st(A), B.ctypes.data, *_st(B), C.ctypes.data, *_st(C),
      1.0, 0.0, None, 0, 0, 1)
    np.testing.assert_allclose(C, A.astype(np.float64) @ B, rtol=1e-5)
    assert both(so) == before
    # the default thresholds: 128 KiB of B for the row stream, 256 KiB for the dot
    dflt, size = builds["default"], np.dtype(dtype).itemsize
    k_row, k_dot = (128 << 10) // (64 * size), (256 << 10) // (64 * size)
    assert counted(dflt, ROW, lambda: case(dflt, 2, 64, k_row, dtype)) == 0
    assert counted(dflt, ROW, lambda: case(dflt, 2, 64, k_row + 1, dtype)) == 1
    assert counted(dflt, DOT, lambda: case(dflt, 4, 64, k_dot, dtype, tb=True)) == 0
    assert counted(dflt, DOT, lambda: case(dflt, 4, 64, k_dot + 1, dtype, tb=True)) == 1
    off = builds["off"]
    assert counted(off, ROW, lambda: case(off, 1, 640, 640, dtype)) == 0
    assert counted(off, DOT, lambda: case(off, 1, 640, 640, dtype, tb=True)) == 0
