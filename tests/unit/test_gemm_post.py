"""``polyc_gemmx_post`` (backends/c/intrinsics/gemm.h) against numpy: the
post-operations of a GEMM (``C = relu(C * mul + add + add2)`` after the sum,
each operand a per-row vector, a per-column vector, a full matrix or
absent) applied by every path of the driver: the window path of a
convolution, the small path, the packed path (the last k block only: K
spans several blocks here), the few-rows path and the K == 0 loops; float32
and float64, the AVX-512 (where the CPU has it), AVX2 and portable builds, 1
and 2 threads.

Hooks count which path each call takes, so that a shape that stops reaching
its path fails here instead of testing another one.  C starts as NaN (beta
0: never read) inside a wider buffer whose padding must stay untouched; an
operand's NaN reaches C, and the ReLU keeps it (mode 2, numpy's
``maximum``) or turns it into 0 (mode 1, C's ``fmax``)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from gemm_abi import ISA_FLAGS, build_shims, dims, offsets, runnable

SHIM = r"""
static long n_win, n_small, n_few;
#define POLYC_GEMM_ON_WIN(nv, mr, pitch) \
    ((void)(nv), (void)(mr), (void)(pitch), __atomic_add_fetch(&n_win, 1, __ATOMIC_RELAXED))
#define POLYC_GEMM_ON_SMALL(nv, mr) \
    ((void)(nv), (void)(mr), __atomic_add_fetch(&n_small, 1, __ATOMIC_RELAXED))
#define POLYC_GEMM_ON_FEW(kind) ((void)(kind), __atomic_add_fetch(&n_few, 1, __ATOMIC_RELAXED))
#include "gemm.h"
const char *isa(void) { return polyc_gemm_isa(); }
long calls(int which)
{
    return __atomic_load_n(which == 0 ? &n_win : which == 1 ? &n_small : &n_few,
                           __ATOMIC_RELAXED);
}
void post_f32(int64_t M, int64_t N, int64_t K, const float *A, const polyc_gemm_dims *ar,
              const polyc_gemm_dims *ac, const float *B, const polyc_gemm_dims *br,
              const polyc_gemm_dims *bc, float *C, int64_t c_rs, int64_t c_cs, double alpha,
              double beta, const polyc_gemm_post *post, int nt)
{
    polyc_gemmx_post_f32(M, N, K, A, ar, ac, B, br, bc, C, c_rs, c_cs, (float)alpha,
                         (float)beta, post, nt);
}
void post_f64(int64_t M, int64_t N, int64_t K, const double *A, const polyc_gemm_dims *ar,
              const polyc_gemm_dims *ac, const double *B, const polyc_gemm_dims *br,
              const polyc_gemm_dims *bc, double *C, int64_t c_rs, int64_t c_cs, double alpha,
              double beta, const polyc_gemm_post *post, int nt)
{
    polyc_gemmx_post_f64(M, N, K, A, ar, ac, B, br, bc, C, c_rs, c_cs, alpha, beta, post, nt);
}
/* a tile function: C(i, j) = 2 C(i, j) + i - j / 2 on its block, counting
 * the elements it visits (each must be visited once) */
typedef struct { void *C; int64_t rs, cs; int f64; } tile_ctx;
static long n_tiled;
static void tile_fn(const void *p, int64_t i0, int64_t mr, int64_t j0, int64_t nc)
{
    const tile_ctx *t = (const tile_ctx *)p;
    for (int64_t i = i0; i < i0 + mr; i++)
        for (int64_t j = j0; j < j0 + nc; j++) {
            if (t->f64) {
                double *c = (double *)t->C + i * t->rs + j * t->cs;
                *c = *c * 2 + (double)i - 0.5 * (double)j;
            } else {
                float *c = (float *)t->C + i * t->rs + j * t->cs;
                *c = *c * 2 + (float)i - 0.5f * (float)j;
            }
        }
    __atomic_add_fetch(&n_tiled, mr * nc, __ATOMIC_RELAXED);
}
void *tile_address(void) { return (void *)tile_fn; }
long tiled(void) { return __atomic_load_n(&n_tiled, __ATOMIC_RELAXED); }
"""

WIN, SMALL, FEW = 0, 1, 2


class Operand(ctypes.Structure):
    """``polyc_gemm_operand``."""
    _fields_ = [("p", ctypes.c_void_p), ("rs", ctypes.c_int64), ("cs", ctypes.c_int64)]


class Post(ctypes.Structure):
    """``polyc_gemm_post``."""
    _fields_ = [("mul", Operand), ("add", Operand), ("add2", Operand), ("relu", ctypes.c_int),
                ("tile", ctypes.c_void_p), ("tile_ctx", ctypes.c_void_p)]


class TileCtx(ctypes.Structure):
    """The shim's ``tile_ctx``."""
    _fields_ = [("C", ctypes.c_void_p), ("rs", ctypes.c_int64), ("cs", ctypes.c_int64),
                ("f64", ctypes.c_int)]


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    libs = build_shims(tmp_path_factory, "gemm_post", SHIM,
                       {name: ["-O2", "-march=native", "-fopenmp", *flags]
                        for name, flags in ISA_FLAGS.items()})
    p = ctypes.c_void_p
    for so in libs.values():
        so.isa.restype = ctypes.c_char_p
        so.calls.restype = ctypes.c_long
        so.calls.argtypes = [ctypes.c_int]
        so.tile_address.restype = ctypes.c_void_p
        so.tiled.restype = ctypes.c_long
        for f in (so.post_f32, so.post_f64):
            f.restype = None
            f.argtypes = ([ctypes.c_int64] * 3 + [p] * 6 + [p, ctypes.c_int64, ctypes.c_int64,
                                                            ctypes.c_double, ctypes.c_double,
                                                            p, ctypes.c_int])
    return libs


def _operand(kind: str, M: int, N: int, dtype, rng, keep: list, nan=False):
    """An operand of ``kind`` (row, col, full, strided, none) as a
    ``polyc_gemm_operand`` and its M x N broadcast view (float64); ``nan``:
    its first element NaN (element (0, 0), and the whole first row or column
    of a vector)."""
    if kind == "none":
        return Operand(None, 0, 0), None
    shape = {"row": (M,), "col": (N,), "full": (M, N + 3), "strided": (N, M)}[kind]
    v = rng.standard_normal(shape).astype(dtype)
    if nan:
        v.reshape(-1)[0] = np.nan
    keep.append(v)
    rs, cs, full = {"row": (1, 0, lambda: np.broadcast_to(v[:, None], (M, N))),
                    "col": (0, 1, lambda: np.broadcast_to(v[None, :], (M, N))),
                    "full": (N + 3, 1, lambda: v[:, :N]),
                    "strided": (1, M, lambda: v.T)}[kind]
    return Operand(v.ctypes.data, rs, cs), np.asarray(full(), np.float64)


def _expect(acc, ops, relu):
    x = acc
    mul, add, add2 = ops
    with np.errstate(invalid="ignore"):
        if mul is not None:
            x = x * mul
        for a in (add, add2):
            if a is not None:
                x = x + a
        if relu == 1:
            x = np.where(x > 0, x, 0.0)
        elif relu == 2:
            x = np.where((x > 0) | np.isnan(x), x, 0.0)
    return x


def run(so, dtype, M, N, K, maps, A, B, kinds, relu, *, nthreads=1, nan=False, seed=0,
        c_cs=1, tile=False):
    """One polyc_gemmx_post call; compares C with float64 numpy and returns it.
    ``tile``: with the shim's tile function after the operations (each
    element visited once)."""
    rng = np.random.default_rng(seed + M + 3 * N + 7 * K)
    keep: list = []
    ops = [_operand(k, M, N, dtype, rng, keep, nan=nan and i == 1)
           for i, k in enumerate(kinds)]
    post = Post(ops[0][0], ops[1][0], ops[2][0], relu)
    pad = 4
    Cbuf = np.full((M, (N + pad) * c_cs), 7.25, dtype)
    C = Cbuf[:, :N * c_cs:c_cs]
    C[...] = np.nan
    ar, ac, br, bc = maps
    if tile:
        ctx = TileCtx(C.ctypes.data, (N + pad) * c_cs, c_cs, int(dtype == np.float64))
        post.tile, post.tile_ctx = so.tile_address(), ctypes.addressof(ctx)
        visited = so.tiled()
    f = so.post_f32 if dtype == np.float32 else so.post_f64
    f(M, N, K, A.ctypes.data, ctypes.byref(dims(*ar)), ctypes.byref(dims(*ac)),
      B.ctypes.data, ctypes.byref(dims(*br)), ctypes.byref(dims(*bc)), C.ctypes.data,
      (N + pad) * c_cs, c_cs, 1.0, 0.0, ctypes.byref(post), nthreads)
    Am = A.reshape(-1)[offsets(ar)[:, None] + offsets(ac)[None, :]].astype(np.float64)
    Bm = B.reshape(-1)[offsets(br)[:, None] + offsets(bc)[None, :]].astype(np.float64)
    want = _expect(Am @ Bm, [o[1] for o in ops], relu)
    if tile:
        assert so.tiled() - visited == M * N, "the tile function missed or repeated elements"
        want = want * 2 + np.arange(M)[:, None] - 0.5 * np.arange(N)[None, :]
    tol = np.sqrt(max(K, 1)) * (2e-6 if dtype == np.float32 else 4e-15) * 10
    np.testing.assert_allclose(C, want, rtol=tol, atol=tol)
    tail = np.ones_like(Cbuf, bool)
    tail[:, :N * c_cs:c_cs] = False
    assert (Cbuf[tail] == 7.25).all(), "C was written outside its elements"
    return C.copy()


def plain(dtype, M, N, K, seed=0):
    """Row-major A (M x K) and B (K x N) with their maps."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, K)).astype(dtype)
    B = rng.standard_normal((K, N)).astype(dtype)
    return A, B, ([(M, K)], [(K, 1)], [(K, N)], [(N, 1)])


def window(dtype, Cin, F, H, W, KH=3, KW=3, seed=0):
    """A valid convolution's implicit GEMM: weights (F x Cin KH KW) and a padded
    input read through the window maps."""
    rng = np.random.default_rng(seed)
    HP, WP = H + KH - 1, W + KW - 1
    A = rng.standard_normal((F, Cin * KH * KW)).astype(dtype)
    B = rng.standard_normal(Cin * HP * WP).astype(dtype)
    maps = ([(F, Cin * KH * KW)], [(Cin, KH * KW), (KH, KW), (KW, 1)],
            [(Cin, HP * WP), (KH, WP), (KW, 1)], [(H, WP), (W, 1)])
    return A, B, maps


KINDS = [("row", "row", "full"), ("row", "row", "none"), ("none", "col", "none"),
         ("col", "none", "row"), ("full", "full", "full"), ("none", "none", "none")]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("build", ["native", "avx2", "portable"])
def test_window_path(builds, build, dtype):
    """A ResNet-like convolution (batch norm, residual, ReLU) on the window
    path, rows joined across the pitch (14 and 56 wide) and not (a width of
    whole vectors), and on the small path (few slivers); every tile kind, 1
    and 2 threads."""
    so = runnable(builds, build)
    # (24 rows: three slivers, the small path reading the window in place)
    for F, W, path in ((64, 14, WIN), (64, 56, WIN), (64, 32, WIN), (24, 56, SMALL)):
        A, B, maps = window(dtype, 5, F, 6, W)
        for kinds in KINDS:
            for relu in (0, 1, 2):
                for nt in (1, 2):
                    before = so.calls(path)
                    run(so, dtype, F, 6 * W, 45, maps, A, B, kinds, relu, nthreads=nt)
                    if build != "portable":
                        assert so.calls(path) == before + 1, (F, W, kinds)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("build", ["native", "avx2"])
def test_small_path(builds, build, dtype):
    """Products whose B fits the small path, sizes around a register tile."""
    so = runnable(builds, build)
    for M, N, K in ((1, 1, 1), (5, 17, 9), (13, 50, 30), (30, 33, 64)):
        A, B, maps = plain(dtype, M, N, K)
        for kinds in KINDS:
            for relu in (0, 2):
                before = so.calls(SMALL)
                run(so, dtype, M, N, K, maps, A, B, kinds, relu, nthreads=2)
                assert so.calls(SMALL) == before + 1, (M, N, K)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("build", ["native", "avx2", "portable"])
def test_packed_path(builds, build, dtype):
    """A product too large for the small path, K over several k blocks (the
    operations apply once, on the last), edge tiles in both directions, a
    column stride of C other than 1."""
    so = runnable(builds, build)
    M, N, K = 61, 300, 1100
    A, B, maps = plain(dtype, M, N, K)
    for kinds in (("row", "row", "full"), ("col", "strided", "none"), ("none", "none", "none")):
        for nt in (1, 2):
            before = so.calls(WIN), so.calls(SMALL), so.calls(FEW)
            run(so, dtype, M, N, K, maps, A, B, kinds, 1, nthreads=nt)
            assert (so.calls(WIN), so.calls(SMALL), so.calls(FEW)) == before
    run(so, dtype, M, N, K, maps, A, B, ("row", "col", "full"), 2, c_cs=2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_few_rows_and_empty_sum(builds, dtype):
    """The few-rows path (two rows, B of 2 MiB) and K == 0 (C = the operations
    applied to 0)."""
    so = builds["native"]
    A, B, maps = plain(dtype, 2, 4096, 128)
    before = so.calls(FEW)
    run(so, dtype, 2, 4096, 128, maps, A, B, ("row", "col", "full"), 2, nthreads=2)
    assert so.calls(FEW) == before + 1
    A, B, maps = plain(dtype, 7, 9, 0)
    C = run(so, dtype, 7, 9, 0, ([(7, 1)], [(1, 1)], [(1, 9)], [(9, 1)]), np.zeros(7, dtype),
            np.zeros(9, dtype), ("none", "row", "none"), 0)
    assert not np.isnan(C).any()


@pytest.mark.parametrize("build", ["native", "portable"])
def test_nan_in_an_operand(builds, build):
    """A NaN in the add operand reaches C; ReLU mode 2 keeps it, mode 1 makes
    it 0 (the comparison is in run: NaN where numpy has NaN)."""
    so = runnable(builds, build)
    A, B, maps = window(np.float32, 3, 16, 4, 20)
    for kinds in (("none", "row", "none"), ("none", "full", "none")):
        kept = run(so, np.float32, 16, 80, 27, maps, A, B, kinds, 2, nan=True)
        assert np.isnan(kept[0, 0])
        dropped = run(so, np.float32, 16, 80, 27, maps, A, B, kinds, 1, nan=True)
        assert dropped[0, 0] == 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tile_function(builds, dtype):
    """The tile function runs once per element of C after the operations, on
    every path (window, small, packed over several k blocks with a column
    stride of 2, few rows, K == 0), alone and after operands and a ReLU, on
    1 and 2 threads."""
    so = builds["native"]
    A, B, maps = window(dtype, 5, 64, 6, 14)
    cases = [(64, 6 * 14, 45, maps, A, B, {})]
    for M, N, K, extra in ((13, 50, 30, {}), (61, 300, 1100, {"c_cs": 2}), (2, 4096, 128, {})):
        cases.append((M, N, K, *plain(dtype, M, N, K)[2:], *plain(dtype, M, N, K)[:2], extra))
    for M, N, K, maps, A, B, extra in cases:
        for kinds, relu in ((("none", "none", "none"), 0), (("row", "col", "full"), 1)):
            for nt in (1, 2):
                run(so, dtype, M, N, K, maps, A, B, kinds, relu, nthreads=nt, tile=True,
                    **extra)
    before = so.tiled()
    C = run(so, dtype, 7, 9, 0, ([(7, 1)], [(1, 1)], [(1, 9)], [(9, 1)]), np.zeros(7, dtype),
            np.zeros(9, dtype), ("none", "row", "none"), 0, tile=True)
    assert so.tiled() - before == 63 and not np.isnan(C).any()
