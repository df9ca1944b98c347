"""The tensor-core GEMM of the CUDA backend: a statement tensorized onto
GEMM with float16 or bfloat16 operands and a float32 accumulator
(:func:`polyc.intrinsics.match_gemm` with ``tensor_cores=True``) runs as
one launch whose blocks compute 128 x 128 tiles of C with WMMA
(``nvcuda::wmma``, m16n16k16 fragments, float32 accumulation; CUDA C++
Programming Guide, "Warp Matrix Functions").

The device function ``polyc_wmma_<f16|bf16>`` is called by every thread of
a block of :data:`THREADS` threads (8 warps)::

    polyc_wmma_f16(M, N, K, A, a_rs, a_cs, B, b_rs, b_cs, C, c_rs, c_cs,
                   alpha, beta, read_c, bias, relu,
                   threadIdx.x, blockIdx.x, blockIdx.y, gridDim.x, gridDim.y)

and computes ``C = alpha * A . B + beta * C`` (``read_c`` 0: C is not read,
a folded ``+=!`` initialisation), then ``+ bias[n]`` and ReLU when given,
on the tiles ``(blockIdx.y + i * gridDim.y, blockIdx.x + j * gridDim.x)``
(so any grid is correct).  Per tile and per k-step of :data:`TILE_K`, the
threads copy A's 128 x 32 and B's 32 x 128 panel from global memory (any
strides: transposed operands and batched views need no copy of their own)
into padded shared memory; a *full* panel is copied without bounds tests,
a *partial* one (the edges of M, N and K) with them, zero-filling what lies
outside, so the fragments always compute on whole 16 x 16 x 16 tiles.
Each warp owns a 64 x 32 part of the tile (4 x 2 accumulator fragments);
its results go through a 16 x 16 float scratch per warp in shared memory to
the guarded store, where alpha, beta, the bias and the ReLU apply.

The CPU emulator (:mod:`.emulate`) runs the same call sites with a C
implementation of the same contract, :data:`EMULATED`: thread 0 of each
emulated block computes the block's tiles in float32, k in steps of 16 as
the fragments accumulate.  So the emulator checks everything around the
call (which tensor, base pointers, strides, batch loops on ``blockIdx.z``,
alpha/beta, the grid covering C) exactly, and the fragments' arithmetic to
float32 rounding; the device function itself runs only on a GPU
(``tests/cuda/test_device.py``, ``gpu`` marker) and compiles under nvcc on
every machine that has it (``tests/cuda/test_wmma.py``, ``nvcc`` marker).
"""

from __future__ import annotations

import cgen as c

from polyc import expr as E
from polyc.ir import Statement
from polyc.schedule.gpu_mapping import TC_THREADS, TC_TILE

from ..c.cexpr import tensor_name
from ..c.gemmcall import gemm_operands

#: Threads per block of a tensor-core launch (8 warps: 2 along m, 4 along n).
THREADS = TC_THREADS
#: Rows (m) and columns (n) of C per block tile, and k per shared-memory panel.
TILE_M, TILE_N, TILE_K = TC_TILE
#: Function suffix per operand dtype.
SUFFIX = {"float16": "f16", "bfloat16": "bf16"}
_CUDA = r"""
/* polyc tensor-core GEMM on {T} operands into {CT} (see backends/cuda/wmma.py) */
static __device__ void {FN}(int64_t M, int64_t N, int64_t K,
    const polyc_{T} *A, int64_t a_rs, int64_t a_cs,
    const polyc_{T} *B, int64_t b_rs, int64_t b_cs,
    {CT} *C, int64_t c_rs, int64_t c_cs, float alpha, float beta, int read_c,
    const float *bias, int relu, int64_t tid, int64_t bx, int64_t by, int64_t gx, int64_t gy)
{
  using namespace nvcuda;
  enum { BM = {BM}, BN = {BN}, BK = {BK}, LDA = {BK} + 8, LDB = {BN} + 8, NT = {NT} };
  __shared__ __align__(32) polyc_{T} As[BM * LDA];
  __shared__ __align__(32) polyc_{T} Bs[BK * LDB];
  __shared__ __align__(32) float Cs[NT / 32][16 * 16];
  const int warp = (int)(tid / 32), lane = (int)(tid % 32);
  const int wm = warp / 4, wn = warp % 4;          /* this warp's 64 x 32 part */
  const polyc_{T} zero = polyc_f32_to_{T}(0.0f);
  for (int64_t tm = by; tm * BM < M; tm += gy) {
    for (int64_t tn = bx; tn * BN < N; tn += gx) {
      const int64_t m0 = tm * BM, n0 = tn * BN;
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[4][2];
      for (int i = 0; i < 4; i++)
        for (int j = 0; j < 2; j++)
          wmma::fill_fragment(acc[i][j], 0.0f);
      for (int64_t k0 = 0; k0 < K; k0 += BK) {
        if (m0 + BM <= M && k0 + BK <= K) {            /* full panel of A */
          for (int e = (int)tid; e < BM * BK; e += NT) {
            const int i = e / BK, j = e % BK;
            As[i * LDA + j] = A[(m0 + i) * a_rs + (k0 + j) * a_cs];
          }
        } else {                                        /* partial: zero outside */
          for (int e = (int)tid; e < BM * BK; e += NT) {
            const int i = e / BK, j = e % BK;
            As[i * LDA + j] = (m0 + i < M && k0 + j < K)
                ? A[(m0 + i) * a_rs + (k0 + j) * a_cs] : zero;
          }
        }
        if (n0 + BN <= N && k0 + BK <= K) {            /* full panel of B */
          for (int e = (int)tid; e < BK * BN; e += NT) {
            const int i = e / BN, j = e % BN;
            Bs[i * LDB + j] = B[(k0 + i) * b_rs + (n0 + j) * b_cs];
          }
        } else {
          for (int e = (int)tid; e < BK * BN; e += NT) {
            const int i = e / BN, j = e % BN;
            Bs[i * LDB + j] = (k0 + i < K && n0 + j < N)
                ? B[(k0 + i) * b_rs + (n0 + j) * b_cs] : zero;
          }
        }
        __syncthreads();
        for (int kk = 0; kk < BK; kk += 16) {
          wmma::fragment<wmma::matrix_a, 16, 16, 16, polyc_{T}, wmma::row_major> a[4];
          wmma::fragment<wmma::matrix_b, 16, 16, 16, polyc_{T}, wmma::row_major> b[2];
          for (int i = 0; i < 4; i++)
            wmma::load_matrix_sync(a[i], &As[(wm * 64 + i * 16) * LDA + kk], LDA);
          for (int j = 0; j < 2; j++)
            wmma::load_matrix_sync(b[j], &Bs[kk * LDB + wn * 32 + j * 16], LDB);
          for (int i = 0; i < 4; i++)
            for (int j = 0; j < 2; j++)
              wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
        }
        __syncthreads();
      }
      for (int i = 0; i < 4; i++) {
        for (int j = 0; j < 2; j++) {
          wmma::store_matrix_sync(Cs[warp], acc[i][j], 16, wmma::mem_row_major);
          __syncwarp();
          for (int e = lane; e < 256; e += 32) {
            const int64_t gm = m0 + wm * 64 + i * 16 + e / 16;
            const int64_t gn = n0 + wn * 32 + j * 16 + e % 16;
            if (gm < M && gn < N) {
              {CT} *p = &C[gm * c_rs + gn * c_cs];
              float v = alpha * Cs[warp][e];
              if (read_c) v = v + beta * {CLOAD};
              if (bias) v += bias[gn];
              if (relu && !(v > 0.0f)) v = 0.0f;
              *p = {CSTORE};
            }
          }
          __syncwarp();
        }
      }
    }
  }
}
"""

_EMULATED = r"""
/* the emulator's {FN} (backends/cuda/wmma.py): the block's tiles,
   computed once by its thread 0 in float32, k in steps of 16 as the WMMA
   fragments accumulate */
static void {FN}(int64_t M, int64_t N, int64_t K,
    const polyc_{T} *A, int64_t a_rs, int64_t a_cs,
    const polyc_{T} *B, int64_t b_rs, int64_t b_cs,
    {CT} *C, int64_t c_rs, int64_t c_cs, float alpha, float beta, int read_c,
    const float *bias, int relu, int64_t tid, int64_t bx, int64_t by, int64_t gx, int64_t gy)
{
  if (tid != 0) return;
  for (int64_t tm = by; tm * {BM} < M; tm += gy)
    for (int64_t tn = bx; tn * {BN} < N; tn += gx)
      for (int64_t gm = tm * {BM}; gm < M && gm < tm * {BM} + {BM}; gm++)
        for (int64_t gn = tn * {BN}; gn < N && gn < tn * {BN} + {BN}; gn++) {
          float acc = 0.0f;
          for (int64_t k0 = 0; k0 < K; k0 += 16) {
            float part = 0.0f;
            for (int64_t k = k0; k < K && k < k0 + 16; k++)
              part += polyc_{T}_to_f32(A[gm * a_rs + k * a_cs])
                      * polyc_{T}_to_f32(B[k * b_rs + gn * b_cs]);
            acc += part;
          }
          {CT} *p = &C[gm * c_rs + gn * c_cs];
          float v = alpha * acc;
          if (read_c) v = v + beta * {CLOAD};
          if (bias) v += bias[gn];
          if (relu && !(v > 0.0f)) v = 0.0f;
          *p = {CSTORE};
        }
}
"""


def function_name(operand_dtype: str, out_dtype: str) -> str:
    """``polyc_wmma_<f16|bf16>`` (a float32 C), ``..._<f16|bf16>`` (a half C)."""
    out = "" if out_dtype == "float32" else "_" + SUFFIX[out_dtype]
    return f"polyc_wmma_{SUFFIX[operand_dtype]}{out}"


def _fill(template: str, operand_dtype: str, out_dtype: str) -> str:
    half = out_dtype != "float32"
    out = template
    for key, value in (("{FN}", function_name(operand_dtype, out_dtype)),
                       ("{CT}", f"polyc_{out_dtype}" if half else "float"),
                       ("{CLOAD}", f"polyc_{out_dtype}_to_f32(*p)" if half else "*p"),
                       ("{CSTORE}", f"polyc_f32_to_{out_dtype}(v)" if half else "v"),
                       ("{T}", operand_dtype), ("{SFX}", SUFFIX[operand_dtype]),
                       ("{BM}", str(TILE_M)), ("{BN}", str(TILE_N)), ("{BK}", str(TILE_K)),
                       ("{NT}", str(THREADS))):
        out = out.replace(key, value)
    return out


def device_source(variants) -> str:
    """The CUDA device functions for ``variants`` (``(operand dtype, C
    dtype)`` pairs, :func:`variants`), after the device prelude, which
    defines ``polyc_float16``/``polyc_bfloat16``."""
    vs = sorted(set(variants))
    if not vs:
        return ""
    return "#include <mma.h>\n" + "".join(_fill(_CUDA, *v) for v in vs)


def emulated_source(variants) -> str:
    """The emulator's C functions for ``variants`` (after the C prelude)."""
    return "".join(_fill(_EMULATED, *v) for v in sorted(set(variants)))


def _out_dtype(program, m) -> str:
    return program.tensor(m.store).dtype if m.store else "float32"


def variants(program) -> set[tuple[str, str]]:
    """``(operand dtype, C dtype)`` of ``program``'s tensor-core calls."""
    return {(s.intrinsic.operand_dtype, _out_dtype(program, s.intrinsic))
            for s in program.statements
            if s.kind == "intrinsic" and getattr(s.intrinsic, "operand_dtype", "")}


def wmma_call(em, s: Statement) -> c.Generable:
    """The call of ``polyc_wmma_<f16|bf16>`` for one point of the loops
    around ``s`` (a statement tensorized onto the tensor-core GEMM), made
    by every thread of the block (threads and block coordinates passed
    explicitly, so that the emulator's function can take the same call)."""
    m = s.intrinsic
    ops = gemm_operands(em, s)
    # C is not read with a folded initialisation or a constant beta of 0
    # (BLAS's beta 0, as the C backend's call); a beta known only at run
    # time multiplies C as the folded ``C *= beta`` statement does
    zero = isinstance(m.beta, E.Const) and float(m.beta.value) == 0.0
    read_c = 0 if (m.init is not None and m.beta is None) or zero else 1
    bias = tensor_name(m.bias) if m.bias else "(const float *)0"
    return c.Statement(
        f"{function_name(m.operand_dtype, _out_dtype(em.program, m))}({ops.M}, {ops.N}, {ops.K}, "
        f"{ops.a}, {ops.a_rs}, {ops.a_cs}, {ops.b}, {ops.b_rs}, {ops.b_cs}, "
        f"{ops.c}, {ops.c_rs}, {ops.c_cs}, {ops.alpha}, {ops.beta}, {read_c}, {bias}, "
        f"{1 if m.relu else 0}, (int64_t)threadIdx.x, (int64_t)blockIdx.x, "
        "(int64_t)blockIdx.y, (int64_t)gridDim.x, (int64_t)gridDim.y)")
