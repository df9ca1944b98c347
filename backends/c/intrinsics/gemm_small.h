/* polyc GEMM, the small-problem path: register tiles chosen per problem, no
 * packing of B when its rows are contiguous.
 *
 * gemm.h's five-loop (BLIS) algorithm pays for itself on large operands: B is
 * packed once into NR-wide slivers and reused by every block of A.  A product
 * whose B is used by one or two slivers of A (the batched 26 x 72 x 26
 * products of a bmm, the 8-row output-channel groups of a grouped convolution,
 * the 16 x 16 x 16 factors of a Kronecker product) pays the packing for almost
 * no reuse, and its fixed 14 x 32 register tile wastes most of a 26 x 72 or
 * 8 x 676 product on padding (28 x 96 and 14 x 704 computed).  This path
 * (libxsmm's approach to small GEMMs: Heinecke et al., "LIBXSMM: accelerating
 * small matrix multiplications by runtime code generation", SC 2016):
 *
 *   - the register tile is chosen per call from M and N: mr rows by nv vectors
 *     (every (mr, nv) that fits the register file is instantiated below), rows
 *     split into balanced slivers, columns in tiles of nv vectors whose last
 *     vector is masked (no padding computed beyond the vector length);
 *   - B is read where it lies when its columns are contiguous: one run of N
 *     columns (b_cs == 1), or, through polyc_gemmx's maps, runs of the
 *     innermost unit-stride digits (a convolution's output row: the window
 *     row of the input is contiguous) with any row map (a table of row
 *     offsets per k); otherwise B is packed once into a K x N' row-major block;
 *   - A is packed one mr x K sliver at a time (k-major, times alpha) and
 *     reused by every column tile;
 *   - the whole K is accumulated in registers (no k blocking, C read and
 *     written once), then beta, the bias and the ReLU are applied in the
 *     store, as gemm.h's micro-kernel does.
 *
 * It is taken when gemm.h's driver finds it applies (polyc_gemm_small_<t>):
 * no band, unit c_cs, and either at most POLYC_GEMM_SMALL_INPLACE slivers of
 * A that read B in place (B is then read a few times, never copied) or a B
 * of at most POLYC_GEMM_SMALL_BBYTES (it stays in L2 while every sliver of A
 * passes over it), with K <= POLYC_GEMM_SMALL_KMAX unless B is read in
 * place by at most POLYC_GEMM_SMALL_INPLACE slivers: a few tokens' projection
 * through a weight matrix (K = 3072, N = 768 in a BERT layer's FFN) then
 * reads B a few times, where the packed path copies all of it first
 * (measured, 2 threads, AMD EPYC: 8 x 3072 x 768 f32 0.89 -> 0.36 ms, 16
 * rows 0.81 -> 0.36 ms; the BERT layer at 16 tokens 2.9-3.5 -> 2.2-2.7 ms).
 * (One or two rows stream B along its rows instead: gemm_few.h, tried
 * first.)  Each C element is summed over k in ascending order, like the
 * packed path's single k block.  B is read while C is written, so C must
 * not overlap B: in-place calls (C also the B operand, PolyBench's trmm)
 * are polyc_gemmt's over a band, which never come here.
 *
 * This file defines macros only; gemm.h instantiates them per element type
 * after its per-type macros (POLYC_GEMM_T, _VT, _VL, _LOADU, _FMA, ...). */
#ifndef POLYC_GEMM_SMALL_H
#define POLYC_GEMM_SMALL_H

/* A test hook run when a call takes this path, with its tile plan. */
#ifndef POLYC_GEMM_ON_SMALL
#define POLYC_GEMM_ON_SMALL(nv, mr) ((void)(nv), (void)(mr))
#endif

#ifndef POLYC_GEMM_SMALL_KMAX
#define POLYC_GEMM_SMALL_KMAX 1024
#endif
/* Slivers of A (at most) that read a B larger than POLYC_GEMM_SMALL_BBYTES
 * where it lies, each once, instead of the packed path's copy of B (read,
 * written, read again by every block of A): measured, 2 threads, AMD EPYC,
 * f32: 16 x 768 x 768 0.19 -> 0.09 ms, 24 x 768 x 768 0.20 -> 0.13 ms,
 * 24 x 768 x 3072 0.76 -> 0.56 ms, 56 x 768 x 768 (4 slivers) 0.34 -> 0.30 ms:
 * a BERT layer's projections at 16 to 56 tokens.  More slivers looked
 * better on a GEMM timed alone (16: 128 x 768 x 768 0.83 -> 0.68 ms, B
 * staying in L3 between calls) and were worse inside the BERT layer, where
 * the other kernels evict B and each sliver reads it from memory again
 * (8 slivers: seq 64 6.4 -> 9.7 ms, seq 100 9.4 -> 13 ms; 16: seq 128 11.2
 * -> 16.4 ms). */
#ifndef POLYC_GEMM_SMALL_INPLACE
#define POLYC_GEMM_SMALL_INPLACE 4
#endif
/* 1: the path is never taken (the packed path does everything; tests) */
#ifndef POLYC_GEMM_SMALL_OFF
#define POLYC_GEMM_SMALL_OFF 0
#endif
#ifndef POLYC_GEMM_SMALL_BBYTES
#define POLYC_GEMM_SMALL_BBYTES ((int64_t)256 << 10)
#endif
/* Buffers (the row offsets of B, the A sliver, a packed B) up to this many
 * bytes live on the stack; larger ones come from polyc_gemm_acquire. */
#define POLYC_GEMM_SMALL_STACK 16384

/* A build with AddressSanitizer (Config.sanitize) instruments every load of
 * the unrolled kernels, which makes the full set of tiles compile 3x slower
 * (42 s against 13 s for the whole library); it gets a few tile shapes of
 * each width instead (the plan only uses what is instantiated), enough to run
 * every part of the path under the sanitizer. */
#if defined(__SANITIZE_ADDRESS__)
#define POLYC_GEMM_SK_FEW 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define POLYC_GEMM_SK_FEW 1
#endif
#endif

/* Masked loads and stores of the last vector of a row (r valid lanes). */
#if defined(__AVX512F__)
#define POLYC_GEMM_SMASK_T uint32_t
#define POLYC_GEMM_SMASK(r) ((uint32_t)(((uint64_t)1 << (r)) - 1))
#define POLYC_GEMM_MLOAD(m, p) POLYC_GEMM_V(maskz_loadu)((m), (p))
#define POLYC_GEMM_MSTORE(p, m, v) POLYC_GEMM_V(mask_storeu)((p), (m), (v))
/* the largest mr for nv = 1 .. 4 vectors: mr * nv accumulators, nv of B and
 * one broadcast of A within 32 registers */
/* gemm.h's transposes of 16 x 16 floats, 8 x 8 doubles (the same contract as
 * the AVX2 ones below) */
#define POLYC_GEMM_SK_TR_f32(src, ld, n, dst, ldd)                                     \
    polyc_gemm_tr_f32((src), (ld), (n), (dst), (ldd), (__mmask16)POLYC_GEMM_SMASK(n))
#define POLYC_GEMM_SK_TR_f64(src, ld, n, dst, ldd)                                     \
    polyc_gemm_tr_f64((src), (ld), (n), (dst), (ldd), (__mmask8)POLYC_GEMM_SMASK(n))
#define POLYC_GEMM_SK_NVMAX 4
#ifdef POLYC_GEMM_SK_FEW
#define POLYC_GEMM_SK_CAPS {0, 4, 4, 3, 2}
#define POLYC_GEMM_SK_ALL(X, S)                                                        \
    POLYC_GEMM_SK_R4(X, S, 1) POLYC_GEMM_SK_R4(X, S, 2) POLYC_GEMM_SK_R3(X, S, 3)      \
    POLYC_GEMM_SK_R2(X, S, 4)
#else
#define POLYC_GEMM_SK_CAPS {0, 14, 14, 9, 6}
#define POLYC_GEMM_SK_ALL(X, S)                                                        \
    POLYC_GEMM_SK_R14(X, S, 1) POLYC_GEMM_SK_R14(X, S, 2) POLYC_GEMM_SK_R9(X, S, 3)    \
    POLYC_GEMM_SK_R6(X, S, 4)
#endif
#elif defined(__AVX2__) && defined(__FMA__)
#define POLYC_GEMM_SMASK_T __m256i
#define POLYC_GEMM_SMASK(r) POLYC_GEMM_CAT3(polyc_gemm_smask_, POLYC_GEMM_VL, )(r)
#define POLYC_GEMM_MLOAD(m, p) POLYC_GEMM_V(maskload)((p), (m))
#define POLYC_GEMM_MSTORE(p, m, v) POLYC_GEMM_V(maskstore)((p), (m), (v))
static inline __m256i polyc_gemm_smask_8(int64_t r)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)r), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
static inline __m256i polyc_gemm_smask_4(int64_t r)
{
    return _mm256_cmpgt_epi64(_mm256_set1_epi64x(r), _mm256_setr_epi64x(0, 1, 2, 3));
}
/* In-register transposes of a block of 8 x 8 floats (4 x 4 doubles): rows
 * r < nrows of src (row stride ld) become the first nrows lanes of dst rows
 * c (row stride ldd), stored in ascending c with full-width unmasked stores
 * (AVX2's masked store is microcoded and slow on AMD): the lanes from nrows
 * on are overwritten with garbage, which the callers' order of stores
 * overwrites again (polyc_gemm_small_<t>: the last, narrow block of a row
 * first; a slack of one vector after the buffer). */
static inline void polyc_gemm_tr8_f32(const float *src, int64_t ld, int64_t nrows, float *dst,
                                      int64_t ldd)
{
    __m256 r[8], t[8], u[8];
    int i;
    for (i = 0; i < 8; i++)
        r[i] = i < nrows ? _mm256_loadu_ps(src + i * ld) : _mm256_setzero_ps();
    for (i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (i = 0; i < 2; i++) {
        u[4 * i + 0] = _mm256_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0x44);
        u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0xEE);
        u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (i = 0; i < 4; i++)
        _mm256_storeu_ps(dst + i * ldd, _mm256_permute2f128_ps(u[i], u[4 + i], 0x20));
    for (i = 0; i < 4; i++)
        _mm256_storeu_ps(dst + (4 + i) * ldd, _mm256_permute2f128_ps(u[i], u[4 + i], 0x31));
}
static inline void polyc_gemm_tr4_f64(const double *src, int64_t ld, int64_t nrows,
                                      double *dst, int64_t ldd)
{
    __m256d r[4], t[4];
    int i;
    for (i = 0; i < 4; i++)
        r[i] = i < nrows ? _mm256_loadu_pd(src + i * ld) : _mm256_setzero_pd();
    t[0] = _mm256_unpacklo_pd(r[0], r[1]);
    t[1] = _mm256_unpackhi_pd(r[0], r[1]);
    t[2] = _mm256_unpacklo_pd(r[2], r[3]);
    t[3] = _mm256_unpackhi_pd(r[2], r[3]);
    _mm256_storeu_pd(dst, _mm256_permute2f128_pd(t[0], t[2], 0x20));
    _mm256_storeu_pd(dst + ldd, _mm256_permute2f128_pd(t[1], t[3], 0x20));
    _mm256_storeu_pd(dst + 2 * ldd, _mm256_permute2f128_pd(t[0], t[2], 0x31));
    _mm256_storeu_pd(dst + 3 * ldd, _mm256_permute2f128_pd(t[1], t[3], 0x31));
}
#define POLYC_GEMM_SK_TR_f32 polyc_gemm_tr8_f32
#define POLYC_GEMM_SK_TR_f64 polyc_gemm_tr4_f64
/* 16 registers: mr * nv + nv + 1 <= 15 (at 16, gcc spills an accumulator) */
#define POLYC_GEMM_SK_NVMAX 3
#ifdef POLYC_GEMM_SK_FEW
#define POLYC_GEMM_SK_CAPS {0, 4, 4, 3}
#define POLYC_GEMM_SK_ALL(X, S)                                                        \
    POLYC_GEMM_SK_R4(X, S, 1) POLYC_GEMM_SK_R4(X, S, 2) POLYC_GEMM_SK_R3(X, S, 3)
#else
#define POLYC_GEMM_SK_CAPS {0, 12, 6, 3}
#define POLYC_GEMM_SK_ALL(X, S)                                                        \
    POLYC_GEMM_SK_R12(X, S, 1) POLYC_GEMM_SK_R6(X, S, 2) POLYC_GEMM_SK_R3(X, S, 3)
#endif
#endif

/* X(S, mr, nv) for mr = 1 .. 2, 3, 4, 6, 9, 12, 14 */
#define POLYC_GEMM_SK_R2(X, S, NV) X(S, 1, NV) X(S, 2, NV)
#define POLYC_GEMM_SK_R3(X, S, NV) POLYC_GEMM_SK_R2(X, S, NV) X(S, 3, NV)
#define POLYC_GEMM_SK_R4(X, S, NV) POLYC_GEMM_SK_R3(X, S, NV) X(S, 4, NV)
#define POLYC_GEMM_SK_R6(X, S, NV) POLYC_GEMM_SK_R4(X, S, NV) X(S, 5, NV) X(S, 6, NV)
#define POLYC_GEMM_SK_R9(X, S, NV) POLYC_GEMM_SK_R6(X, S, NV) X(S, 7, NV) X(S, 8, NV) X(S, 9, NV)
#define POLYC_GEMM_SK_R12(X, S, NV)                                                    \
    POLYC_GEMM_SK_R9(X, S, NV) X(S, 10, NV) X(S, 11, NV) X(S, 12, NV)
#define POLYC_GEMM_SK_R14(X, S, NV) POLYC_GEMM_SK_R12(X, S, NV) X(S, 13, NV) X(S, 14, NV)

#define POLYC_GEMM_UNROLL _Pragma("GCC unroll 16")

/* The register-tile plan of a call: rows in slivers (the first s_hi of mr_hi
 * rows, then mr_hi - 1), columns in tiles of nv vectors. */
typedef struct {
    int nv, mr_hi;
    int64_t slivers, s_hi;
} polyc_gemm_splan;

/* Cycles of one k step of an mr x nv tile: two FMAs, two loads per cycle, a
 * 4-cycle FMA latency on each accumulator's chain (a model to rank tiles; the
 * ranking, not the value, matters). */
static POLYC_GEMM_UNUSED double polyc_gemm_sk_step(int64_t mr, int64_t nv)
{
    double t = (double)(mr * nv) / 2.0, l = (double)(mr + nv) / 2.0;
    if (l > t)
        t = l;
    return t > 4.0 ? t : 4.0;
}

/* The cheapest plan of an M x N x K product under the model above (vl lanes,
 * caps[nv] the largest mr of nv vectors): per nv, the fewest slivers of at
 * most caps[nv] rows, balanced; column tiles of nv vectors and one narrower
 * tile for the rest of each run of `run` columns. */
static POLYC_GEMM_UNUSED polyc_gemm_splan polyc_gemm_sk_plan(int64_t M, int64_t run,
                                                             int64_t runs, int64_t K,
                                                             int vl, int nvmax,
                                                             const int *caps)
{
    polyc_gemm_splan best = {1, 1, 1, 1};
    double best_cost = -1.0;
    int nv;
    for (nv = 1; nv <= nvmax; nv++) {
        const int64_t s = polyc_gemm_cdiv(M, caps[nv]);
        const int64_t lo = M / s, s_hi = M % s;
        const int64_t w = (int64_t)nv * vl, full = run / w;
        const int64_t rest = polyc_gemm_cdiv(run % w, vl);
        double cost = 0.0;
        int h;
        for (h = 0; h < 2; h++) {      /* slivers of lo + 1 rows, then of lo */
            const int64_t mr = lo + 1 - h, n = h ? s - s_hi : s_hi;
            if (n == 0 || mr == 0)
                continue;
            cost += (double)n * (double)runs *
                    ((double)full * ((double)K * polyc_gemm_sk_step(mr, nv) + 2.0 * mr * nv + 8.0) +
                     (rest ? (double)K * polyc_gemm_sk_step(mr, rest) + 2.0 * mr * rest + 8.0 : 0.0));
        }
        if (best_cost < 0.0 || cost < best_cost) {
            best_cost = cost;
            best.nv = nv;
            best.slivers = s;
            best.s_hi = s_hi;
            best.mr_hi = (int)(s_hi ? lo + 1 : lo);
            if (!s_hi)
                best.s_hi = s;
        }
    }
    return best;
}

/* One mr x nv tile: C(0..mr, 0..nv vl) = A sliver (k-major, a[k * MR + i]) times
 * B rows b + boff[k] (contiguous columns), the last vector masked to r lanes
 * when TAIL; beta 0 overwrites C (not read), 1 adds, 2 adds betas * C; then
 * the bias (contiguous, NULL: none) and the ReLU. */
#define POLYC_GEMM_SK_DEFINE_ONE(SFX, MR, NV, TAIL)                                    \
    static void polyc_gemm_sk_##SFX##_##MR##_##NV##_##TAIL(                            \
        int64_t K, const POLYC_GEMM_T *restrict a, const POLYC_GEMM_T *b,              \
        const int64_t *restrict boff, POLYC_GEMM_T *c, int64_t ldc, int64_t r,         \
        int beta, const POLYC_GEMM_T *betas, const POLYC_GEMM_T *bias, int relu)       \
    {                                                                                  \
        POLYC_GEMM_VT acc[MR][NV], bv[NV];                                             \
        const POLYC_GEMM_SMASK_T mk = POLYC_GEMM_SMASK(TAIL ? r : POLYC_GEMM_VL);      \
        int64_t k;                                                                     \
        int i, v;                                                                      \
        (void)mk;                                                                      \
        POLYC_GEMM_UNROLL for (i = 0; i < MR; i++)                                     \
            POLYC_GEMM_UNROLL for (v = 0; v < NV; v++) acc[i][v] = POLYC_GEMM_SETZERO(); \
        for (k = 0; k < K; k++) {                                                      \
            const POLYC_GEMM_T *bk = b + boff[k];                                      \
            POLYC_GEMM_UNROLL for (v = 0; v < NV; v++)                                 \
                bv[v] = TAIL && v == NV - 1 ? POLYC_GEMM_MLOAD(mk, bk + v * POLYC_GEMM_VL) \
                                            : POLYC_GEMM_LOADU(bk + v * POLYC_GEMM_VL); \
            POLYC_GEMM_UNROLL for (i = 0; i < MR; i++) {                               \
                const POLYC_GEMM_VT ai = POLYC_GEMM_SET1(a[i]);                        \
                POLYC_GEMM_UNROLL for (v = 0; v < NV; v++)                             \
                    acc[i][v] = POLYC_GEMM_FMA(ai, bv[v], acc[i][v]);                  \
            }                                                                          \
            a += MR;                                                                   \
        }                                                                              \
        {                                                                              \
            const POLYC_GEMM_VT zero = POLYC_GEMM_SETZERO();                           \
            const POLYC_GEMM_VT bs = POLYC_GEMM_SET1(*betas);                          \
            POLYC_GEMM_UNROLL for (v = 0; v < NV; v++)                                 \
                bv[v] = !bias ? zero                                                   \
                      : TAIL && v == NV - 1 ? POLYC_GEMM_MLOAD(mk, bias + v * POLYC_GEMM_VL) \
                                            : POLYC_GEMM_LOADU(bias + v * POLYC_GEMM_VL); \
            POLYC_GEMM_UNROLL for (i = 0; i < MR; i++) {                               \
                POLYC_GEMM_T *ci = c + i * ldc;                                        \
                POLYC_GEMM_UNROLL for (v = 0; v < NV; v++) {                           \
                    const int m = TAIL && v == NV - 1;                                 \
                    POLYC_GEMM_VT x = acc[i][v];                                       \
                    if (beta) {                                                        \
                        const POLYC_GEMM_VT y = m ? POLYC_GEMM_MLOAD(mk, ci + v * POLYC_GEMM_VL) \
                                                  : POLYC_GEMM_LOADU(ci + v * POLYC_GEMM_VL); \
                        x = beta == 1 ? POLYC_GEMM_ADD(x, y) : POLYC_GEMM_FMA(y, bs, x); \
                    }                                                                  \
                    if (bias)                                                          \
                        x = POLYC_GEMM_ADD(x, bv[v]);                                  \
                    if (relu)                                                          \
                        x = POLYC_GEMM_MAX(x, zero);                                   \
                    if (m)                                                             \
                        POLYC_GEMM_MSTORE(ci + v * POLYC_GEMM_VL, mk, x);              \
                    else                                                               \
                        POLYC_GEMM_STOREU(ci + v * POLYC_GEMM_VL, x);                  \
                }                                                                      \
            }                                                                          \
        }                                                                              \
    }

typedef struct {
    int64_t K;
    int beta;                   /* 0 overwrite C, 1 add, 2 add beta * C */
    polyc_gemm_splan plan;
    int64_t run, runs;          /* columns in runs of `run` contiguous ones */
    const int64_t *cbase;       /* B offset of each run's first column (NULL: q * run) */
    const int64_t *boff;        /* B offset of each row k */
    const int64_t *a_rt, *a_ct; /* A's row and column offsets (NULL: the strides) */
    const void *b;              /* B (or its packed copy) */
    const void *bias;           /* contiguous, NULL: none */
    int64_t items, cchunks;     /* items: row slivers x chunks of column tiles */
    int64_t lead;               /* columns of a narrower first tile, so that the others
                                   start on a vector boundary in every row of B (0: none) */
    char *abuf;                 /* per thread: one A sliver */
    int64_t a_len;              /* elements of a thread's A sliver */
    const void *g;              /* the driver's polyc_gemm_args_<t> */
} polyc_gemm_sctx;

/* The small path of gemm.h's driver for one element type: the kernels, their
 * table, the packing of A slivers and of a B whose columns are not contiguous,
 * and polyc_gemm_small_<t>(g, nt), which returns 0 (nothing done) where the
 * path does not apply.  Expanded inside POLYC_GEMM_DEFINE_DRIVER. */
#if defined(__AVX512F__)
/* A masked load or store costs what a plain one does: one kernel per tile
 * shape, the full tiles masked to all lanes (half the library's size and
 * build time). */
#define POLYC_GEMM_SK_ONE_BOTH(SFX, MR, NV) POLYC_GEMM_SK_DEFINE_ONE(SFX, MR, NV, 1)
#define POLYC_GEMM_SK_ENTRY(SFX, MR, NV)                                               \
    [NV][MR] = {polyc_gemm_sk_##SFX##_##MR##_##NV##_1, polyc_gemm_sk_##SFX##_##MR##_##NV##_1},
#else
#define POLYC_GEMM_SK_ONE_BOTH(SFX, MR, NV)                                           \
    POLYC_GEMM_SK_DEFINE_ONE(SFX, MR, NV, 0) POLYC_GEMM_SK_DEFINE_ONE(SFX, MR, NV, 1)
#define POLYC_GEMM_SK_ENTRY(SFX, MR, NV)                                               \
    [NV][MR] = {polyc_gemm_sk_##SFX##_##MR##_##NV##_0, polyc_gemm_sk_##SFX##_##MR##_##NV##_1},
#endif

#if defined(POLYC_GEMM_SK_NVMAX)
#define POLYC_GEMM_DEFINE_SMALL(SFX)                                                   \
    typedef void (*polyc_gemm_sk_fn_##SFX)(int64_t, const POLYC_GEMM_T *restrict,      \
                                           const POLYC_GEMM_T *, const int64_t *restrict, \
                                           POLYC_GEMM_T *, int64_t, int64_t, int,      \
                                           const POLYC_GEMM_T *, const POLYC_GEMM_T *, int); \
    POLYC_GEMM_SK_ALL(POLYC_GEMM_SK_ONE_BOTH, SFX)                                     \
    static const polyc_gemm_sk_fn_##SFX polyc_gemm_sk_tab_##SFX[POLYC_GEMM_SK_NVMAX + 1][15][2] = { \
        POLYC_GEMM_SK_ALL(POLYC_GEMM_SK_ENTRY, SFX)};                                  \
                                                                                       \
    /* Rows i0 .. i0 + mr - 1 of A as one sliver, k-major (ap[k * mr + i]), times  \
     * alpha (through the offset tables a_rt, a_ct where not NULL). */             \
    static void polyc_gemm_sk_pack_a_##SFX(const polyc_gemm_args_##SFX *g,              \
                                           const int64_t *a_rt, const int64_t *a_ct,    \
                                           int64_t i0, int64_t mr, int64_t K,           \
                                           POLYC_GEMM_T *restrict ap)                   \
    {                                                                                  \
        int64_t i, k;                                                                  \
        if (!a_rt && !a_ct && g->a_cs == 1 && g->a_rs >= POLYC_GEMM_VL) {              \
            /* row-major A: transposed VL columns at a time */                        \
            const POLYC_GEMM_T *a0 = g->A + i0 * g->a_rs;                              \
            /* (the last VL columns end at K: overlapping the previous ones, they   \
             * store the same values again) */                                      \
            const int64_t kv = K >= POLYC_GEMM_VL ? K : 0;                             \
            for (k = 0; k < kv; k += POLYC_GEMM_VL) {                                  \
                const int64_t kk = polyc_gemm_min(k, K - POLYC_GEMM_VL);               \
                for (i = (mr - 1) / POLYC_GEMM_VL * POLYC_GEMM_VL; i >= 0; i -= POLYC_GEMM_VL) \
                    POLYC_GEMM_SK_TR_##SFX(a0 + i * g->a_rs + kk, g->a_rs,             \
                                           polyc_gemm_min(POLYC_GEMM_VL, mr - i),      \
                                           ap + kk * mr + i, mr);                      \
            }                                                                          \
            for (i = 0; i < mr; i++)                                                   \
                for (k = kv; k < K; k++)                                               \
                    ap[k * mr + i] = a0[i * g->a_rs + k];                              \
        } else if (!a_rt && !a_ct && g->a_rs == 1) {                                   \
            for (k = 0; k < K; k++)                                                    \
                for (i = 0; i < mr; i++)                                               \
                    ap[k * mr + i] = g->A[i0 + i + k * g->a_cs];                       \
        } else {                                                                       \
            for (i = 0; i < mr; i++) {                                                 \
                const POLYC_GEMM_T *ai = g->A + polyc_gemm_at(a_rt, NULL, g->a_rs, i0 + i); \
                for (k = 0; k < K; k++)                                                \
                    ap[k * mr + i] = ai[polyc_gemm_at(a_ct, NULL, g->a_cs, k)];        \
            }                                                                          \
        }                                                                              \
        if (g->alpha != (POLYC_GEMM_T)1)                                               \
            for (k = 0; k < K * mr; k++)                                               \
                ap[k] *= g->alpha;                                                     \
    }                                                                                  \
                                                                                       \
    /* Item t: pack its sliver of A, then multiply its chunk of column tiles. */      \
    static void polyc_gemm_sk_item_##SFX(const void *ctx, int64_t t, int tid)           \
    {                                                                                  \
        const polyc_gemm_sctx *s = (const polyc_gemm_sctx *)ctx;                       \
        const polyc_gemm_args_##SFX *g = (const polyc_gemm_args_##SFX *)s->g;          \
        const polyc_gemm_splan *p = &s->plan;                                          \
        const int64_t sl = t / s->cchunks, ch = t % s->cchunks;                        \
        const int mr = sl < p->s_hi ? p->mr_hi : p->mr_hi - 1;                        \
        const int64_t i0 = sl < p->s_hi ? sl * p->mr_hi                                \
                                        : p->s_hi * p->mr_hi + (sl - p->s_hi) * mr;     \
        const int64_t w = (int64_t)p->nv * POLYC_GEMM_VL, K = s->K;                    \
        const int64_t lead = s->lead;                                                  \
        const int64_t tpr = (lead > 0) + polyc_gemm_cdiv(s->run - lead, w);            \
        const int64_t ntiles = s->runs * tpr;                                          \
        const int64_t t0 = ntiles * ch / s->cchunks, t1 = ntiles * (ch + 1) / s->cchunks; \
        POLYC_GEMM_T *restrict ap = (POLYC_GEMM_T *)s->abuf + tid * s->a_len;          \
        const POLYC_GEMM_T *B = (const POLYC_GEMM_T *)s->b;                            \
        const POLYC_GEMM_T *bias = (const POLYC_GEMM_T *)s->bias;                      \
        const polyc_gemm_sk_fn_##SFX *row = polyc_gemm_sk_tab_##SFX[p->nv][mr];       \
        int64_t u;                                                                     \
        POLYC_GEMM_ON_CHUNK(tid);                                                      \
        polyc_gemm_sk_pack_a_##SFX(g, s->a_rt, s->a_ct, i0, mr, K, ap);               \
        for (u = t0; u < t1; u++) {    /* tile u: columns j.. of run q */             \
            const int64_t q = u / tpr, r = u % tpr - (lead > 0);                       \
            const int64_t j = r < 0 ? 0 : lead + r * w, n = q * s->run + j;            \
            const int64_t rest = r < 0 ? lead : polyc_gemm_min(w, s->run - j);         \
            const POLYC_GEMM_T *bq = B + (s->cbase ? s->cbase[q] : q * s->run) + j;    \
            POLYC_GEMM_T *cq = g->C + i0 * g->c_rs + n;                                \
            if (rest == w)                                                             \
                row[0](K, ap, bq, s->boff, cq, g->c_rs, POLYC_GEMM_VL, s->beta,        \
                       &g->beta, bias ? bias + n : NULL, g->relu);                     \
            else {                                                                     \
                const int64_t nvt = polyc_gemm_cdiv(rest, POLYC_GEMM_VL);              \
                polyc_gemm_sk_tab_##SFX[nvt][mr][1](                                   \
                    K, ap, bq, s->boff, cq, g->c_rs, rest - (nvt - 1) * POLYC_GEMM_VL,  \
                    s->beta, &g->beta, bias ? bias + n : NULL, g->relu);               \
            }                                                                          \
            if (g->post)                                                               \
                polyc_gemm_post_##SFX(g, i0, mr, n, rest);                             \
        }                                                                              \
    }                                                                                  \
                                                                                       \
    static int polyc_gemm_small_##SFX(polyc_gemm_args_##SFX *g, int nt)                \
    {                                                                                  \
        static const int caps[] = POLYC_GEMM_SK_CAPS;                                  \
        polyc_gemm_sctx s;                                                             \
        const int64_t M = g->M, N = g->N, K = g->K;                                    \
        int64_t run = N, inner = 0, need, a_len, tlen, cb_len = 0, bp_len = 0;         \
        int64_t bias_len, at_len, i, k;                                                \
        int pack_b = 0, cached = 0, d;                                                 \
        char stackbuf[POLYC_GEMM_SMALL_STACK] __attribute__((aligned(64)));            \
        char *buf, *at;                                                                \
        if (POLYC_GEMM_SMALL_OFF || g->banded || g->c_cs != 1)                         \
            return 0;                                                                  \
        /* the columns of B: one run (b_cs == 1), runs of the inner unit-stride      \
         * digits of its column map, or packed */                                  \
        if (g->b_cd) {                                                                 \
            int64_t span = 1;                                                          \
            for (d = g->b_cd->n - 1; d >= 0; d--) {                                    \
                if (g->b_cd->ext[d] == 1)                                              \
                    continue;                                                          \
                if (g->b_cd->stride[d] != span)                                        \
                    break;                                                             \
                span *= g->b_cd->ext[d];                                               \
            }                                                                          \
            inner = d + 1;           /* digits inner.. form the run */                 \
            run = span;                                                                \
            if (run < POLYC_GEMM_VL)                                                   \
                pack_b = 1, run = N;                                                   \
        } else if (g->b_cs != 1) {                                                     \
            pack_b = 1;                                                                \
        }                                                                              \
        s.plan = polyc_gemm_sk_plan(M, run, N / run, K, POLYC_GEMM_VL, POLYC_GEMM_SK_NVMAX, caps); \
        if (s.plan.slivers > POLYC_GEMM_SMALL_INPLACE && !pack_b &&                   \
            K * N * (int64_t)sizeof(POLYC_GEMM_T) > POLYC_GEMM_SMALL_BBYTES)           \
            return 0;                                                                  \
        if (s.plan.slivers > 1 && pack_b &&                                            \
            K * N * (int64_t)sizeof(POLYC_GEMM_T) > POLYC_GEMM_SMALL_BBYTES)           \
            return 0;                                                                  \
        /* a longer K only with B read in place by at most                          \
         * POLYC_GEMM_SMALL_INPLACE slivers (the packed path would copy B first) */  \
        if (K > POLYC_GEMM_SMALL_KMAX &&                                               \
            (s.plan.slivers > POLYC_GEMM_SMALL_INPLACE || pack_b))                     \
            return 0;                                                                  \
        if (pack_b && K * N * (int64_t)sizeof(POLYC_GEMM_T) > 4 * POLYC_GEMM_SMALL_BBYTES) \
            return 0;                                                                  \
        POLYC_GEMM_ON_SMALL(s.plan.nv, s.plan.mr_hi);                                  \
        s.K = K; s.g = g;                                                              \
        s.beta = g->beta == 0 ? 0 : g->beta == 1 ? 1 : 2;                              \
        s.run = run; s.runs = N / run;                                                 \
        /* items: slivers, each over a chunk of the column tiles when the slivers     \
         * are too few to share among the threads */                                \
        s.cchunks = 1;                                                                 \
        if (nt > 1 && s.plan.slivers < 4 * nt)                                         \
            s.cchunks = polyc_gemm_min(s.runs * polyc_gemm_cdiv(run, (int64_t)s.plan.nv * POLYC_GEMM_VL), \
                                       polyc_gemm_cdiv(4 * nt, s.plan.slivers));       \
        s.items = s.plan.slivers * s.cchunks;                                          \
        /* B read in place along whole rows a multiple of 64 bytes apart, but not    \
         * itself aligned (numpy aligns to 16 bytes): a first tile up to the next    \
         * vector boundary, so that no other tile's vector straddles two lines      \
         * (1 x 768 x 3072 f32 in strips of 4 vectors, one core: 0.27 ms from a B  \
         * 16 bytes off a line, 0.17 ms from an aligned one) */                     \
        s.lead = 0;                                                                    \
        if (!pack_b && !g->b_rd && s.runs == 1 &&                                      \
            (g->b_rs * (int64_t)sizeof(POLYC_GEMM_T)) % 64 == 0 &&                     \
            (uintptr_t)g->B % sizeof(POLYC_GEMM_T) == 0) {                             \
            /* (to the next vector boundary: a line with AVX-512, half one with AVX2; \
             * fewer columns than a vector, a one-vector masked tile) */           \
            const int64_t vb = POLYC_GEMM_VL * (int64_t)sizeof(POLYC_GEMM_T);          \
            const int64_t off = (int64_t)((uintptr_t)g->B % (uintptr_t)vb);            \
            if (off && (vb - off) / (int64_t)sizeof(POLYC_GEMM_T) < run)               \
                s.lead = (vb - off) / (int64_t)sizeof(POLYC_GEMM_T);                   \
        }                                                                              \
        if (s.items < 2)                                                               \
            nt = 1;                                                                    \
        /* the buffer: B's row offsets, the runs' column offsets, a packed B, the     \
         * contiguous bias, one A sliver per thread (64-byte aligned parts) */       \
        /* (a vector of slack after the A sliver and the packed B: the AVX2           \
         * transposes store whole vectors) */                                        \
        a_len = polyc_gemm_cdiv((int64_t)s.plan.mr_hi * K + POLYC_GEMM_VL, 16) * 16;   \
        tlen = polyc_gemm_cdiv(K, 8) * 8;                                              \
        if (g->b_cd && !pack_b && s.runs > 1)                                          \
            cb_len = polyc_gemm_cdiv(s.runs, 8) * 8;                                   \
        if (pack_b)                                                                    \
            bp_len = polyc_gemm_cdiv(K * N + POLYC_GEMM_VL, 16) * 16;                  \
        bias_len = g->bias && g->bias_cs != 1 ? polyc_gemm_cdiv(N, 16) * 16 : 0;      \
        at_len = (g->a_rd ? polyc_gemm_cdiv(M, 8) * 8 : 0) + (g->a_cd ? tlen : 0);    \
        need = (tlen + cb_len + at_len) * (int64_t)sizeof(int64_t) +                  \
               (bp_len + bias_len + a_len * nt) * (int64_t)sizeof(POLYC_GEMM_T);       \
        if (need <= POLYC_GEMM_SMALL_STACK) {                                          \
            buf = stackbuf;                                                            \
        } else {                                                                       \
            buf = (char *)polyc_gemm_acquire((size_t)need, &cached);                   \
            if (!buf)                                                                  \
                return 0;                                                              \
        }                                                                              \
        at = buf;                                                                      \
        s.boff = (int64_t *)at;                                                        \
        at += tlen * sizeof(int64_t);                                                  \
        if (g->b_rd)                                                                   \
            polyc_gemm_table(g->b_rd, K, (int64_t *)s.boff);                           \
        else                                                                           \
            for (k = 0; k < K; k++)                                                    \
                ((int64_t *)s.boff)[k] = k * g->b_rs;                                  \
        s.a_rt = s.a_ct = NULL;                                                        \
        if (g->a_rd) {                                                                 \
            polyc_gemm_table(g->a_rd, M, (int64_t *)at);                               \
            s.a_rt = (const int64_t *)at;                                              \
            at += polyc_gemm_cdiv(M, 8) * 8 * sizeof(int64_t);                         \
        }                                                                              \
        if (g->a_cd) {                                                                 \
            polyc_gemm_table(g->a_cd, K, (int64_t *)at);                               \
            s.a_ct = (const int64_t *)at;                                              \
            at += tlen * sizeof(int64_t);                                              \
        }                                                                              \
        s.cbase = NULL;                                                                \
        if (cb_len) {                                                                  \
            /* the outer digits of the column map, one offset per run */              \
            polyc_gemm_dims outer = *g->b_cd;                                          \
            outer.n = (int)inner;                                                      \
            polyc_gemm_table(&outer, s.runs, (int64_t *)at);                           \
            s.cbase = (const int64_t *)at;                                             \
            at += cb_len * sizeof(int64_t);                                            \
        }                                                                              \
        s.b = g->B;                                                                    \
        if (pack_b) {                                                                  \
            POLYC_GEMM_T *bp = (POLYC_GEMM_T *)at;                                     \
            int64_t *boff = (int64_t *)s.boff;                                         \
            at += bp_len * sizeof(POLYC_GEMM_T);                                       \
            i = 0;                                                                     \
            if (!g->b_rd && !g->b_cd && g->b_rs == 1 && g->b_cs >= POLYC_GEMM_VL) {     \
                /* B given as N x K: transposed VL rows of k at a time */             \
                const int64_t kv = K >= POLYC_GEMM_VL ? K : 0;                         \
                for (k = 0; k < kv; k += POLYC_GEMM_VL) {                              \
                    const int64_t kk = polyc_gemm_min(k, K - POLYC_GEMM_VL);           \
                    for (i = (N - 1) / POLYC_GEMM_VL * POLYC_GEMM_VL; i >= 0; i -= POLYC_GEMM_VL) \
                        POLYC_GEMM_SK_TR_##SFX(g->B + i * g->b_cs + kk, g->b_cs,       \
                                               polyc_gemm_min(POLYC_GEMM_VL, N - i),   \
                                               bp + kk * N + i, N);                    \
                }                                                                      \
                for (i = 0; i < N; i++)                                                \
                    for (k = kv; k < K; k++)                                           \
                        bp[k * N + i] = g->B[i * g->b_cs + k];                         \
            } else {                                                                   \
                for (i = 0; i < N; i++) {                                              \
                    const POLYC_GEMM_T *bi = g->B + polyc_gemm_at(NULL, g->b_cd, g->b_cs, i); \
                    for (k = 0; k < K; k++)                                            \
                        bp[k * N + i] = bi[boff[k]];                                   \
                }                                                                      \
            }                                                                          \
            for (k = 0; k < K; k++)                                                    \
                boff[k] = k * N;                                                       \
            s.b = bp;                                                                  \
        }                                                                              \
        s.bias = g->bias;                                                              \
        if (bias_len) {                                                                \
            POLYC_GEMM_T *bb = (POLYC_GEMM_T *)at;                                     \
            at += bias_len * sizeof(POLYC_GEMM_T);                                     \
            for (i = 0; i < N; i++)                                                    \
                bb[i] = g->bias[i * g->bias_cs];                                       \
            s.bias = bb;                                                               \
        }                                                                              \
        s.abuf = at;                                                                   \
        s.a_len = a_len;                                                               \
        polyc_gemm_each(s.items, nt, polyc_gemm_sk_item_##SFX, &s);                    \
        if (buf != stackbuf)                                                           \
            polyc_gemm_release(buf, cached);                                           \
        return 1;                                                                      \
    }
#else
/* The portable build: the packed path does everything. */
#define POLYC_GEMM_DEFINE_SMALL(SFX)                                                   \
    static int polyc_gemm_small_##SFX(polyc_gemm_args_##SFX *g, int nt)                \
    {                                                                                  \
        (void)g, (void)nt;                                                             \
        return 0;                                                                      \
    }
#endif

#endif /* POLYC_GEMM_SMALL_H */
