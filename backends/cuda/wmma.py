"""The tensor-core GEMM of the CUDA backend: a statement tensorized onto
GEMM with float16 or bfloat16 operands and a float32 accumulator
(:func:`polyc.intrinsics.match_gemm` with ``tensor_cores=True``) runs as
one launch whose blocks compute 128 x 128 tiles of C with WMMA
(``nvcuda::wmma``, m16n16k16 fragments, float32 accumulation; CUDA C++
Programming Guide, "Warp Matrix Functions").

The device function ``polyc_wmma_<f16|bf16>[_<f16|bf16>]`` (C float32, or
the half type its rounding store folded into, :func:`polyc.intrinsics.
match_round_store`) is called by every thread of a block of
:data:`THREADS` threads (8 warps)::

    polyc_wmma_f16(M, N, K, A, a_m, a_k, B, b_k, b_n, C, c_m, c_n,
                   alpha, beta, read_c, bias, relu,
                   threadIdx.x, blockIdx.x, blockIdx.y, gridDim.x, gridDim.y)

and computes ``C = alpha * A . B + beta * C`` (``read_c`` 0: C is not read,
a folded ``+=!`` initialisation), then ``+ bias[n]`` and ReLU when given,
on the tiles ``(blockIdx.y + i * gridDim.y, blockIdx.x + j * gridDim.x)``
(so any grid is correct).  Each operand's rows and columns are given as
digits (extent, stride; ``POLYC_WMMA_DIMS``), as the CPU's implicit GEMM
takes them: a transposed or batched view, or a convolution's window, needs
no copy of its own.  Per tile, the threads tabulate the element offsets of
its rows and columns in shared memory; per k-panel of :data:`TILE_K`, those
of k, then copy A's 128 x 32 and B's 32 x 128 panel into shared memory
padded by 8 elements per row.  A *full* panel is copied without bounds
tests, a *partial* one (the edges of M, N and K) with them, zero-filling
what lies outside, so the fragments always compute on whole 16 x 16 x 16
tiles.  Each warp owns a 64 x 32 part of the tile (4 x 2 accumulator
fragments); its results go through a 16 x 16 float scratch per warp in
shared memory to the guarded store, where alpha, beta, the bias, the ReLU
and the rounding to a half C apply.

The function is one text (:data:`_BODY`) for both targets: macros give
its fragments, shared arrays and barriers their meaning on the device
(:data:`CUDA_MACROS`) and in the CPU emulator (:data:`EMULATOR_MACROS`),
where a block's 256 threads are POSIX threads meeting at real barriers and
lane 0 of each warp computes the warp's fragment operations in float32.
So the emulator runs the very code nvcc compiles: its tiling, offsets,
copies, guards, padding and barriers are checked on every machine; only
the WMMA intrinsics themselves (and their accumulation order) differ, and
those run on a GPU in ``tests/cuda/test_device.py`` (``gpu`` marker).
"""

from __future__ import annotations

import cgen as c

from polyc import expr as E
from polyc.errors import UnsupportedError
from polyc.gemm_match import SIMT_FEW_TILES, SIMT_SMALL_TILE
from polyc.intrinsics import MAX_DIGITS, TENSOR_CORE_THREADS, TENSOR_CORE_TILE
from polyc.ir import Statement

from ..c.cexpr import tensor_name
from ..c.gemmcall import gemm_operands
from .wmma_emulator import EMULATOR_MACROS

#: Threads per block of a tensor-core launch (8 warps: 2 along m, 4 along n).
THREADS = TENSOR_CORE_THREADS
#: Rows (m) and columns (n) of C per block tile, and k per shared-memory panel.
TILE_M, TILE_N, TILE_K = TENSOR_CORE_TILE
#: Function suffix per operand dtype.
SUFFIX = {"float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64"}
#: Rows and columns of C per thread of the float32 SIMT GEMM (its 128 x 128
#: tiles; 4 x 4 in its 64 x 64 ones, :data:`polyc.gemm_match.SIMT_SMALL_TILE`).
SIMT_TILE = (8, 8)

#: Pieces of both device functions: the offsets of a tile's rows and
#: columns, those of a k-panel, and the copy of B's panel (``{V}`` elements
#: per 16-byte copy, ``{ZERO}`` the operand type's zero).
_TILE_OFFSETS = r"""      for (int e = (int)tid; e < BM; e += NT) {
        am_off[e] = polyc_wmma_off(&am, m0 + e);
        cm_off[e] = polyc_wmma_off(&cm, m0 + e);
      }
      for (int e = (int)tid; e < BN; e += NT) {
        bn_off[e] = polyc_wmma_off(&bn, n0 + e);
        cn_off[e] = polyc_wmma_off(&cn, n0 + e);
      }"""
_K_OFFSETS = r"""        for (int e = (int)tid; e < BK; e += NT) {
          ak_off[e] = polyc_wmma_off(&ak, k0 + e);
          bk_off[e] = polyc_wmma_off(&bk, k0 + e);
        }"""
#: The shared tables of element offsets (tile rows and columns, panel k).
_OFFSET_TABLES = r"""  POLYC_SHARED(int64_t, am_off, BM);
  POLYC_SHARED(int64_t, cm_off, BM);
  POLYC_SHARED(int64_t, bn_off, BN);
  POLYC_SHARED(int64_t, cn_off, BN);
  POLYC_SHARED(int64_t, ak_off, BK);
  POLYC_SHARED(int64_t, bk_off, BK);"""
#: The bounds-tested copies of A's panel (element (i, j) stored at ``As[{AIJ}]``).
_A_PANEL = r"""        } else if (m0 + BM <= M && k0 + BK <= K) {     /* full panel of A */
          for (int e = (int)tid; e < BM * BK; e += NT) {
            const int i = e / BK, j = e % BK;
            As[{AIJ}] = A[am_off[i] + ak_off[j]];
          }
        } else {                                        /* partial: zero outside */
          for (int e = (int)tid; e < BM * BK; e += NT) {
            const int i = e / BK, j = e % BK;
            As[{AIJ}] = (m0 + i < M && k0 + j < K) ? A[am_off[i] + ak_off[j]] : {ZERO};
          }
        }"""
#: The warps' multiplication of one panel (tensor cores).
_MULTIPLY = r"""        POLYC_UNROLL
        for (int kk = 0; kk < BK; kk += 16) {
          POLYC_A_FRAGMENTS(a, 4, polyc_{T});
          POLYC_B_FRAGMENTS(b, 2, polyc_{T});
          for (int i = 0; i < 4; i++)
            POLYC_LOAD(a[i], &As[(wm * 64 + i * 16) * LDA + kk], LDA, polyc_{T}_to_f32);
          for (int j = 0; j < 2; j++)
            POLYC_LOAD(b[j], &Bs[kk * LDB + wn * 32 + j * 16], LDB, polyc_{T}_to_f32);
          for (int i = 0; i < 4; i++)
            for (int j = 0; j < 2; j++)
              POLYC_MMA(acc[i * 2 + j], a[i], b[j]);
        }"""
_B_PANEL = r"""        if (vec_b && n0 + BN <= N && k0 + BK <= K) {
          for (int e = (int)tid; e < BK * BN / {V}; e += NT) {
            const int i = e / (BN / {V}), j = e % (BN / {V}) * {V};
            POLYC_COPY16(&Bs[i * LDB + j], &B[bk_off[i] + bn_off[j]]);
          }
        } else if (n0 + BN <= N && k0 + BK <= K) {     /* full panel of B */
          for (int e = (int)tid; e < BK * BN; e += NT) {
            const int i = e / BN, j = e % BN;
            Bs[i * LDB + j] = B[bk_off[i] + bn_off[j]];
          }
        } else {
          for (int e = (int)tid; e < BK * BN; e += NT) {
            const int i = e / BN, j = e % BN;
            Bs[i * LDB + j] = (k0 + i < K && n0 + j < N) ? B[bk_off[i] + bn_off[j]] : {ZERO};
          }
        }"""


def _pieces(body: str, v: int, zero: str, aij: str) -> str:
    """``body`` with the shared pieces filled in: ``v`` elements per 16-byte
    copy, ``zero`` the operand type's zero, ``aij`` where A's element (i, j)
    lies in its panel."""
    return (body.replace("{TILE_OFFSETS}", _TILE_OFFSETS).replace("{K_OFFSETS}", _K_OFFSETS)
            .replace("{OFFSET_TABLES}", _OFFSET_TABLES)
            .replace("{A_PANEL}", _A_PANEL.replace("{AIJ}", aij).replace("{ZERO}", zero))
            .replace("{MULTIPLY}", _MULTIPLY)
            .replace("{B_PANEL}", _B_PANEL.replace("{V}", str(v)).replace("{ZERO}", zero)))


#: The device function, one text for CUDA and for the emulator: the macros
#: (:data:`CUDA_MACROS`, :data:`EMULATOR_MACROS`) give its fragments,
#: shared arrays and barriers their meaning on each.
_BODY = r"""
/* polyc tensor-core GEMM on {T} operands into {CT} (see backends/cuda/wmma.py) */
POLYC_WMMA_FN void {FN}(int64_t M, int64_t N, int64_t K,
    const polyc_{T} *A, polyc_wmma_dims am, polyc_wmma_dims ak,
    const polyc_{T} *B, polyc_wmma_dims bk, polyc_wmma_dims bn,
    {CT} *C, polyc_wmma_dims cm, polyc_wmma_dims cn, float alpha, float beta, int read_c,
    const float *bias, int relu, int64_t tid, int64_t bx, int64_t by, int64_t gx, int64_t gy)
{
  enum { BM = {BM}, BN = {BN}, BK = {BK}, LDA = {BK} + 8, LDB = {BN} + 8, NT = {NT} };
  POLYC_SHARED(polyc_{T}, As, BM * LDA);
  POLYC_SHARED(polyc_{T}, Bs, BK * LDB);
  POLYC_SHARED(float, Cs, NT / 32 * 256);
  /* element offsets of the tile's rows (in A and C), columns (B, C) and the
     panel's k (A, B): the digits of each GEMM index through their strides */
{OFFSET_TABLES}
  const int warp = (int)(tid / 32), lane = (int)(tid % 32);
  const int wm = warp / 4, wn = warp % 4;          /* this warp's 64 x 32 part */
  /* 16-byte copies of full panels where an operand's k (A) or n (B) is one
     contiguous digit and every other offset keeps 16-byte alignment */
  const int vec_a = polyc_wmma_vec(&ak, &am, A, 8), vec_b = polyc_wmma_vec(&bn, &bk, B, 8);
  /* plain operands: A's rows and B's k one digit each (A[m * sa + k], B[k * sb + n]) */
  const int plain = vec_a && vec_b && am.n == 1 && bk.n == 1;
  const int64_t sa = am.stride[0], sb = bk.stride[0];
  const polyc_{T} zero = polyc_f32_to_{T}(0.0f);
  for (int64_t tm = by; tm * BM < M; tm += gy) {
    for (int64_t tn = bx; tn * BN < N; tn += gx) {
      const int64_t m0 = tm * BM, n0 = tn * BN;
{TILE_OFFSETS}
      POLYC_ACC_FRAGMENTS(acc, 8);
      for (int f = 0; f < 8; f++)
        POLYC_FILL(acc[f], 0.0f);
      if (plain && m0 + BM <= M && n0 + BN <= N && K % BK == 0) {
        /* whole tile, plain operands: software-pipelined through registers,
           the next panel's 16-byte loads in flight while the warps multiply */
        polyc_v16 ra[BM * BK / 8 / NT], rb[BK * BN / 8 / NT];
        for (int q = 0; q < BM * BK / 8 / NT; q++) {
          const int e = (int)tid + q * NT, i = e / (BK / 8), j = e % (BK / 8) * 8;
          POLYC_COPY16(&ra[q], &A[(m0 + i) * sa + j]);
        }
        for (int q = 0; q < BK * BN / 8 / NT; q++) {
          const int e = (int)tid + q * NT, i = e / (BN / 8), j = e % (BN / 8) * 8;
          POLYC_COPY16(&rb[q], &B[i * sb + n0 + j]);
        }
        for (int64_t k0 = 0; k0 < K; k0 += BK) {
          POLYC_SYNCTHREADS();                 /* the last panel's fragments are read */
          for (int q = 0; q < BM * BK / 8 / NT; q++) {
            const int e = (int)tid + q * NT, i = e / (BK / 8), j = e % (BK / 8) * 8;
            POLYC_COPY16(&As[i * LDA + j], &ra[q]);
          }
          for (int q = 0; q < BK * BN / 8 / NT; q++) {
            const int e = (int)tid + q * NT, i = e / (BN / 8), j = e % (BN / 8) * 8;
            POLYC_COPY16(&Bs[i * LDB + j], &rb[q]);
          }
          POLYC_SYNCTHREADS();
          if (k0 + BK < K) {
            for (int q = 0; q < BM * BK / 8 / NT; q++) {
              const int e = (int)tid + q * NT, i = e / (BK / 8), j = e % (BK / 8) * 8;
              POLYC_COPY16(&ra[q], &A[(m0 + i) * sa + k0 + BK + j]);
            }
            for (int q = 0; q < BK * BN / 8 / NT; q++) {
              const int e = (int)tid + q * NT, i = e / (BN / 8), j = e % (BN / 8) * 8;
              POLYC_COPY16(&rb[q], &B[(k0 + BK + i) * sb + n0 + j]);
            }
          }
{MULTIPLY}
        }
      } else
      for (int64_t k0 = 0; k0 < K; k0 += BK) {
{K_OFFSETS}
        POLYC_SYNCTHREADS();
        if (vec_a && m0 + BM <= M && k0 + BK <= K) {   /* full panel, 8 per copy */
          for (int e = (int)tid; e < BM * BK / 8; e += NT) {
            const int i = e / (BK / 8), j = e % (BK / 8) * 8;
            POLYC_COPY16(&As[i * LDA + j], &A[am_off[i] + ak_off[j]]);
          }
{A_PANEL}
{B_PANEL}
        POLYC_SYNCTHREADS();
{MULTIPLY}
        POLYC_SYNCTHREADS();
      }
      POLYC_SYNCTHREADS();      /* the row and column offsets, also when K is 0 */
      for (int i = 0; i < 4; i++) {
        for (int j = 0; j < 2; j++) {
          POLYC_STORE(&Cs[warp * 256], acc[i * 2 + j], 16);
          POLYC_SYNCWARP();
          for (int e = lane; e < 256; e += 32) {
            const int r = wm * 64 + i * 16 + e / 16, c = wn * 32 + j * 16 + e % 16;
            if (m0 + r < M && n0 + c < N) {
              {CT} *p = &C[cm_off[r] + cn_off[c]];
              float v = alpha * Cs[warp * 256 + e];
              if (read_c) v = v + beta * {CLOAD};
              if (bias) v += bias[n0 + c];
              if (relu && !(v > 0.0f)) v = 0.0f;
              *p = {CSTORE};
            }
          }
          POLYC_SYNCWARP();
        }
      }
      POLYC_SYNCTHREADS();      /* before the next tile's offsets */
    }
  }
}
"""

#: The shared part of both preludes: a GEMM index's digits (at most
#: ``MAX_DIGITS``, the last the fastest) with their extents and strides, and
#: the offset of an index.
_SIMT_HEAD = r"""
/* polyc SIMT GEMM on {ST} operands into {ST} (see backends/cuda/wmma.py):
   thread (ty, tx) = (tid / 16, tid % 16) computes rows ty + 16 i and columns
   tx + 16 j (i, j < 8) of the block's {BM} x {BN} tile of C in registers, or
   (i, j < 4) of a 64 x 64 tile when small is set (the same shared arrays) */
POLYC_WMMA_FN void {FN}(int64_t M, int64_t N, int64_t K,
    const {ST} *A, polyc_wmma_dims am, polyc_wmma_dims ak,
    const {ST} *B, polyc_wmma_dims bk, polyc_wmma_dims bn,
    {ST} *C, polyc_wmma_dims cm, polyc_wmma_dims cn, {ST} alpha, {ST} beta, int read_c,
    const {ST} *bias, int relu, int64_t tid, int64_t bx, int64_t by, int64_t gx, int64_t gy,
    int small)
{
  enum { BM = {BM}, BN = {BN}, BK = {BK}, LDA = {BM} + 4, LDB = {BN} + 4, NT = {NT} };
  POLYC_SHARED({ST}, As, BK * LDA);            /* A's panel k-major: As[k][m] */
  POLYC_SHARED({ST}, Bs, BK * LDB);            /* B's panel: Bs[k][n] */
{OFFSET_TABLES}
  const int tx = (int)(tid % 16), ty = (int)(tid / 16);
  const int vec_a = polyc_wmma_vec(&ak, &am, A, {VL}), vec_b = polyc_wmma_vec(&bn, &bk, B, {VL});
"""
#: The SIMT GEMM's loops over its tiles of C, in the enums of a tile's size
_SIMT_TILES = r"""    for (int64_t tm = by; tm * BM < M; tm += gy) {
      for (int64_t tn = bx; tn * BN < N; tn += gx) {
        const int64_t m0 = tm * BM, n0 = tn * BN;
  {TILE_OFFSETS}
        {ST} acc[TM][TN];
        for (int i = 0; i < TM; i++)
          for (int j = 0; j < TN; j++)
            acc[i][j] = {Z};
        for (int64_t k0 = 0; k0 < K; k0 += BK) {
  {K_OFFSETS}
          POLYC_SYNCTHREADS();
          if (vec_a && m0 + BM <= M && k0 + BK <= K) {   /* full panel, {VL} per load */
            for (int e = (int)tid; e < BM * BK / {VL}; e += NT) {
              const int i = e / (BK / {VL}), j = e % (BK / {VL}) * {VL};
              {ST} v[{VL}];
              {LOADV}(v, &A[am_off[i] + ak_off[j]]);
              for (int q = 0; q < {VL}; q++)
                As[(j + q) * LDA + i] = v[q];
            }
  {A_PANEL}
  {B_PANEL}
          POLYC_SYNCTHREADS();
          for (int kk = 0; kk < BK; kk++) {               /* k in order: sums as the loops */
            {ST} a[TM], b[TN];
            for (int i = 0; i < TM; i++)
              a[i] = As[kk * LDA + ty + 16 * i];
            for (int j = 0; j < TN; j++)
              b[j] = Bs[kk * LDB + tx + 16 * j];
            for (int i = 0; i < TM; i++)
              for (int j = 0; j < TN; j++)
                acc[i][j] += a[i] * b[j];
          }
          POLYC_SYNCTHREADS();
        }
        POLYC_SYNCTHREADS();      /* the row and column offsets, also when K is 0 */
        for (int i = 0; i < TM; i++) {
          for (int j = 0; j < TN; j++) {
            const int r = ty + 16 * i, c = tx + 16 * j;
            if (m0 + r < M && n0 + c < N) {
              {ST} *p = &C[cm_off[r] + cn_off[c]];
              {ST} v = alpha * acc[i][j];
              if (read_c) v = v + beta * *p;
              if (bias) v += bias[n0 + c];
              if (relu && !(v > {Z})) v = {Z};
              *p = v;
            }
          }
        }
        POLYC_SYNCTHREADS();      /* before the next tile's offsets */
      }
    }
"""
#: The SIMT GEMM: the 64 x 64 tiles (``small``) and the 128 x 128 ones, the same
#: loops in two scopes whose enums give the tile (one set of shared arrays, sized
#: for the larger: two functions would each declare their own)
_SIMT_BODY = (_SIMT_HEAD
              + "  if (small) {\n"
              + "    enum { BM = {SMALL}, BN = {SMALL}, LDA = {SMALL} + 4, LDB = {SMALL} + 4,\n"
              + "           TM = {SMALL} / 16, TN = {SMALL} / 16 };\n" + _SIMT_TILES
              + "  } else {\n"
              + "    enum { TM = {BM} / 16, TN = {BN} / 16 };\n" + _SIMT_TILES
              + "  }\n}\n")

_BODY = _pieces(_BODY, 8, "zero", "i * LDA + j")
#: The SIMT GEMM per operand dtype: its scalar type, zero, elements per
#: 16-byte load and that load's macro, k per shared panel (two float64
#: panels of 32 would not fit the 48 KiB of static shared memory).
_SIMT_TYPES = {"float32": ("float", "0.0f", 4, "POLYC_LOAD4", TILE_K),
               "float64": ("double", "0.0", 2, "POLYC_LOAD2D", TILE_K // 2)}


def _simt_body(operand_dtype: str) -> str:
    st, zero, vl, load, _ = _SIMT_TYPES[operand_dtype]
    body = (_SIMT_BODY.replace("{ST}", st).replace("{Z}", zero).replace("{VL}", str(vl))
            .replace("{LOADV}", load))
    return _pieces(body, vl, zero, "j * LDA + i")     # A's panel k-major

_DIMS = r"""
typedef struct { int64_t n, ext[{MAXD}], stride[{MAXD}]; } polyc_wmma_dims;
POLYC_WMMA_INLINE int64_t polyc_wmma_off(const polyc_wmma_dims *d, int64_t i)
{
  /* one digit: no 64-bit division (a GPU has no divider); i >= ext happens
     only past the edge of M, N or K, where every use is guarded */
  if (d->n == 1)
    return i * d->stride[0];
  int64_t off = 0;
  for (int j = (int)d->n - 1; j >= 0; j--) {
    off += (i % d->ext[j]) * d->stride[j];
    i /= d->ext[j];
  }
  return off;
}
/* whether 16-byte copies of v elements may run along digit set `in` (one
   digit of stride 1, the panel's contiguous index) of operand p: every
   stride of `across` and p itself keep 16-byte alignment */
POLYC_WMMA_INLINE int polyc_wmma_vec(const polyc_wmma_dims *in, const polyc_wmma_dims *across,
                                     const void *p, int v)
{
  if (in->n != 1 || in->stride[0] != 1 || ((uintptr_t)p) % 16 != 0)
    return 0;
  for (int j = 0; j < (int)across->n; j++)
    if (across->stride[j] % v != 0)
      return 0;
  return 1;
}
"""

#: CUDA: WMMA fragments (``nvcuda::wmma``), ``__shared__`` arrays, barriers.
CUDA_MACROS = r"""#include <mma.h>
#define POLYC_WMMA_FN static __device__
#define POLYC_WMMA_INLINE static __device__ __forceinline__
#define POLYC_WMMA_DIMS(...) (polyc_wmma_dims{__VA_ARGS__})
#define POLYC_SHARED(T, name, n) __shared__ __align__(32) T name[n]
#define POLYC_SYNCTHREADS() __syncthreads()
#define POLYC_SYNCWARP() __syncwarp()
typedef uint4 polyc_v16;
#define POLYC_UNROLL _Pragma("unroll")
#define POLYC_COPY16(dst, src) (*(uint4 *)(dst) = *(const uint4 *)(src))
#define POLYC_LOAD4(v, src) do { const float4 t_ = *(const float4 *)(src); \
  (v)[0] = t_.x; (v)[1] = t_.y; (v)[2] = t_.z; (v)[3] = t_.w; } while (0)
#define POLYC_LOAD2D(v, src) do { const double2 t_ = *(const double2 *)(src); \
  (v)[0] = t_.x; (v)[1] = t_.y; } while (0)
#define POLYC_ACC_FRAGMENTS(name, n) \
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> name[n]
#define POLYC_A_FRAGMENTS(name, n, T) \
  nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, T, nvcuda::wmma::row_major> name[n]
#define POLYC_B_FRAGMENTS(name, n, T) \
  nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, T, nvcuda::wmma::row_major> name[n]
#define POLYC_FILL(f, v) nvcuda::wmma::fill_fragment(f, v)
#define POLYC_LOAD(f, p, ld, cvt) nvcuda::wmma::load_matrix_sync(f, p, ld)
#define POLYC_MMA(d, a, b) nvcuda::wmma::mma_sync(d, a, b, d)
#define POLYC_STORE(p, f, ld) nvcuda::wmma::store_matrix_sync(p, f, ld, nvcuda::wmma::mem_row_major)
"""


def function_name(operand_dtype: str, out_dtype: str) -> str:
    """``polyc_wmma_<f16|bf16|f32>`` (a float32 C), ``..._<f16|bf16>`` (a half C)."""
    out = "" if out_dtype == "float32" else "_" + SUFFIX[out_dtype]
    return f"polyc_wmma_{SUFFIX[operand_dtype]}{out}"


def _fill(template: str, operand_dtype: str, out_dtype: str) -> str:
    half = out_dtype in ("float16", "bfloat16")
    bk = _SIMT_TYPES[operand_dtype][4] if operand_dtype in _SIMT_TYPES else TILE_K
    out = template
    for key, value in (("{FN}", function_name(operand_dtype, out_dtype)),
                       ("{CT}", f"polyc_{out_dtype}" if half else "float"),
                       ("{CLOAD}", f"polyc_{out_dtype}_to_f32(*p)" if half else "*p"),
                       ("{CSTORE}", f"polyc_f32_to_{out_dtype}(v)" if half else "v"),
                       ("{T}", operand_dtype), ("{SFX}", SUFFIX[operand_dtype]),
                       ("{BM}", str(TILE_M)), ("{BN}", str(TILE_N)), ("{BK}", str(bk)),
                       ("{SMALL}", str(SIMT_SMALL_TILE)),
                       ("{NT}", str(THREADS)), ("{MAXD}", str(MAX_DIGITS))):
        out = out.replace(key, value)
    return out


def _source(macros: str, variants) -> str:
    vs = sorted(set(variants))
    if not vs:
        return ""
    return _fill(macros + _DIMS, *vs[0]) + "".join(
        _fill(_simt_body(v[0]) if v[0] in _SIMT_TYPES else _BODY, *v) for v in vs)


def device_source(variants) -> str:
    """The CUDA device functions for ``variants`` (``(operand dtype, C
    dtype)`` pairs, :func:`variants`), after the device prelude, which
    defines ``polyc_float16``/``polyc_bfloat16``."""
    return _source(CUDA_MACROS, variants)


def emulated_source(variants) -> str:
    """The same functions for the emulator (after the C prelude)."""
    return _source(EMULATOR_MACROS, variants)


def _out_dtype(program, m) -> str:
    return program.tensor(m.store).dtype if m.store else "float32"


def variants(program) -> set[tuple[str, str]]:
    """``(operand dtype, C dtype)`` of ``program``'s tensor-core calls."""
    return {(s.intrinsic.operand_dtype, _out_dtype(program, s.intrinsic))
            for s in program.statements
            if s.kind == "intrinsic" and getattr(s.intrinsic, "operand_dtype", "")}


def wmma_call(em, s: Statement) -> c.Generable:
    """The call of ``polyc_wmma_<f16|bf16>[_<f16|bf16>]`` for one point of
    the loops around ``s`` (a statement tensorized onto the tensor-core
    GEMM), made by every thread of the block (threads and block coordinates
    passed explicitly: the emulator's threads take the same call).  Each
    operand's rows and columns are given as digits (extent, stride), so a
    window (an implicit GEMM) is addressed like a plain operand."""
    m = s.intrinsic
    if m.post or m.post_relu or m.tile:
        # (the tensorizer folds post-operations only on the CPU: match_epilogue(post=))
        raise UnsupportedError(f"{m.statement}: the CUDA GEMM has no post-operations "
                               f"({m.epilogue} cannot be folded into its call)")
    ops = gemm_operands(em, s)
    digits = dict(ops.digits)

    def dims(role: str) -> str:
        ds = digits[role]
        assert 0 < len(ds) <= MAX_DIGITS, (role, ds)
        return (f"POLYC_WMMA_DIMS({len(ds)}, {{{', '.join(e for e, _ in ds)}}}, "
                f"{{{', '.join(st for _, st in ds)}}})")
    # C is not read with a folded initialisation or a constant beta of 0
    # (BLAS's beta 0, as the C backend's call); a beta known only at run
    # time multiplies C as the folded ``C *= beta`` statement does
    zero = isinstance(m.beta, E.Const) and float(m.beta.value) == 0.0
    read_c = 0 if (m.init is not None and m.beta is None) or zero else 1
    ctype = _SIMT_TYPES[m.operand_dtype][0] if m.operand_dtype in _SIMT_TYPES else "float"
    bias = tensor_name(m.bias) if m.bias else f"(const {ctype} *)0"
    fn = function_name(m.operand_dtype, _out_dtype(em.program, m))
    small = ""
    if m.operand_dtype in _SIMT_TYPES:
        # 64 x 64 tiles when the launch has few of 128 x 128 (its batch on
        # blockIdx.z): the test polyc.schedule.gpu_mapping sized the grid by
        small = (f", ((({ops.M}) + {TILE_M - 1}) / {TILE_M} * ((({ops.N}) + {TILE_N - 1}) / "
                 f"{TILE_N}) * (int64_t)gridDim.z < {SIMT_FEW_TILES})")
    return c.Statement(
        f"{fn}({ops.M}, {ops.N}, {ops.K}, {ops.a}, {dims('a_m')}, {dims('a_k')}, "
        f"{ops.b}, {dims('b_k')}, {dims('b_n')}, {ops.c}, {dims('c_m')}, {dims('c_n')}, "
        f"{ops.alpha}, {ops.beta}, {read_c}, {bias}, {1 if m.relu else 0}, "
        "(int64_t)threadIdx.x, (int64_t)blockIdx.x, (int64_t)blockIdx.y, (int64_t)gridDim.x, "
        f"(int64_t)gridDim.y{small})")
