/* polyc GEMM, the few-rows path: a product with at most POLYC_GEMM_FEW_MAX
 * rows of A (a token's projection through a weight matrix: M = 1 .. 16,
 * K and N in the hundreds or thousands) is a matrix-vector product.  It
 * reads all of B once for very few multiply-adds per element, so its speed
 * is how fast B streams from memory.  Two ways to stream it, by B's layout:
 *
 *   - rows of B contiguous (b_cs == 1, x @ W with W stored K x N): the
 *     "row stream".  Each work item is a chunk of columns; it keeps its
 *     rows of C in an accumulator buffer that fits L1 and walks B four rows
 *     (k) at a time, each row's chunk a contiguous run of up to 8 KiB.  The
 *     small path's register tiles instead walk B in strips of nv vectors,
 *     one short piece of every row: that stride defeats the prefetchers and
 *     a B that is not 64-byte aligned (numpy aligns to 16) splits every
 *     piece over one more line.  Measured, AMD EPYC (Zen 4), f32, 1 x 768 x
 *     3072, B 16 bytes off a line: strips of 4 vectors 0.27 ms, row stream
 *     0.12 ms on one core (0.064 ms on two, numpy 0.064).  Each C element is
 *     summed over k in ascending order from zero, then beta, the bias and
 *     the ReLU are applied, exactly as the small path's tiles do.
 *   - columns of B contiguous (b_rs == 1, x @ W.T with W stored N x K: the
 *     layout of torch.nn.Linear's weight): the "dot" kernel.  Each C element
 *     is a dot product of a row of A with a contiguous row of W: mr x nb
 *     vector accumulators over k (the last vector masked), reduced across
 *     lanes at the end.  The packed path copied and transposed all of B
 *     first, and padded the one row of A to a 14-row micro-tile.  The sum is
 *     taken per lane, then across lanes: not in ascending k order.
 *
 * Work items are chunks of columns taken dynamically by the threads; the
 * thread count follows the bytes of B (POLYC_GEMM_FEW_BYTES per thread), not
 * the multiply-adds, because B's bytes are the cost.
 *
 * It is tried first by gemm.h's driver (polyc_gemm_few_<t>, 0: not taken):
 * M <= POLYC_GEMM_FEW_MAX, no band, no offset maps (polyc_gemmx's tables), and
 * for the row stream unit c_cs and a contiguous bias.  C must not overlap B,
 * as for the small path.
 *
 * This file defines macros only; gemm.h instantiates them per element type
 * after its per-type macros and gemm_small.h's masked loads and stores. */
#ifndef POLYC_GEMM_FEW_H
#define POLYC_GEMM_FEW_H

/* A test hook run when a call takes this path: kind 1 row stream, 2 dot. */
#ifndef POLYC_GEMM_ON_FEW
#define POLYC_GEMM_ON_FEW(kind) ((void)(kind))
#endif
/* Rows of A (at most) that take this path: the row stream, the dot kernel
 * (in groups of 4 rows, each tile of B read from memory once for all of
 * them).  Measured, 2 threads, f32, x @ W.T: at 9 to 16 rows the dot kernel
 * runs at about 135 GFLOP/s against 40 to 95 for the packed path, whose
 * packing transposes all of B (16 x 768 x 768 0.22-0.45 -> 0.13-0.18 ms,
 * 16 x 3072 x 768 0.86-1.9 -> 0.69-0.73 ms); 0: never taken (tests). */
#ifndef POLYC_GEMM_FEW_ROWS
#define POLYC_GEMM_FEW_ROWS 2
#endif
#ifndef POLYC_GEMM_FEW_MAX
#define POLYC_GEMM_FEW_MAX 16
#endif
/* The least bytes of B that take the row stream, the dot kernel (tests: 0).
 * Below them B stays in L2 and the small path's tiles do as well or better
 * (its copy of a transposed B is then cheap): measured, AMD EPYC, one
 * thread, f32 x @ W.T: 16 x 64 x 128 5.1 us small path, 9.0 us dot;
 * 8 x 64 x 512 11 against 16 us. */
#ifndef POLYC_GEMM_FEW_ROW_MIN
#define POLYC_GEMM_FEW_ROW_MIN ((int64_t)128 << 10)
#endif
#ifndef POLYC_GEMM_FEW_DOT_MIN
#define POLYC_GEMM_FEW_DOT_MIN ((int64_t)256 << 10)
#endif
/* Bytes of B per thread (at least): 512 KiB stream from L2/L3 in about
 * 5 us, several times the cost of waking the team. */
#ifndef POLYC_GEMM_FEW_BYTES
#define POLYC_GEMM_FEW_BYTES ((int64_t)512 << 10)
#endif
/* Row stream: bytes of one row of a chunk (its accumulator buffer is
 * POLYC_GEMM_FEW_ROWS such rows, on the stack): the longer the runs of B,
 * the better they stream (1 x 768 x 3072 f32, 2 threads: 1 KiB 0.096 ms,
 * 2 KiB 0.086, 4 KiB 0.075, 8 KiB 0.072). */
#ifndef POLYC_GEMM_FEW_CHUNK
#define POLYC_GEMM_FEW_CHUNK 8192
#endif
#if POLYC_GEMM_FEW_ROWS > 4
#error "POLYC_GEMM_FEW_ROWS: the row stream is instantiated for 1 to 4 rows"
#endif

#if defined(__AVX512F__)
#define POLYC_GEMM_FEW_NB 4 /* dot: columns of B per tile (mr * nb accumulators) */
#define POLYC_GEMM_FEW_HSUM(x) POLYC_GEMM_V(reduce_add)(x)
#elif defined(__AVX2__) && defined(__FMA__)
#define POLYC_GEMM_FEW_NB 2
#define POLYC_GEMM_FEW_HSUM(x) POLYC_GEMM_CAT3(polyc_gemm_hsum_, POLYC_GEMM_VL, )(x)
static inline float polyc_gemm_hsum_8(__m256 x)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline double polyc_gemm_hsum_4(__m256d x)
{
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(x), _mm256_extractf128_pd(x, 1));
    s = _mm_add_sd(s, _mm_unpackhi_pd(s, s));
    return _mm_cvtsd_f64(s);
}
#endif

typedef struct {
    int kind;               /* 1 row stream, 2 dot */
    int64_t w;              /* columns per item */
    const void *a;          /* dot: A rows packed times alpha (lda), or A itself */
    int64_t lda;
    const void *g;          /* the driver's polyc_gemm_args_<t> */
} polyc_gemm_fctx;

/* One dot tile: C(0..MR, 0..NB) from MR rows of a (lda apart, contiguous
 * along k) and NB columns of B (ldb apart, contiguous along k). */
#define POLYC_GEMM_FEW_DEFINE_DOT(SFX, MR, NB)                                        \
    static void polyc_gemm_fd_##SFX##_##MR##_##NB(                                     \
        int64_t K, const POLYC_GEMM_T *a, int64_t lda, const POLYC_GEMM_T *b,          \
        int64_t ldb, const polyc_gemm_args_##SFX *g, int64_t i0, int64_t n0)           \
    {                                                                                  \
        POLYC_GEMM_VT acc[MR][NB], bv[NB];                                             \
        int64_t k = 0;                                                                 \
        int i, c;                                                                      \
        POLYC_GEMM_UNROLL for (i = 0; i < MR; i++)                                     \
            POLYC_GEMM_UNROLL for (c = 0; c < NB; c++) acc[i][c] = POLYC_GEMM_SETZERO(); \
        for (; k + POLYC_GEMM_VL <= K; k += POLYC_GEMM_VL) {                           \
            POLYC_GEMM_UNROLL for (c = 0; c < NB; c++)                                 \
                bv[c] = POLYC_GEMM_LOADU(b + c * ldb + k);                             \
            POLYC_GEMM_UNROLL for (i = 0; i < MR; i++) {                               \
                const POLYC_GEMM_VT ai = POLYC_GEMM_LOADU(a + i * lda + k);            \
                POLYC_GEMM_UNROLL for (c = 0; c < NB; c++)                             \
                    acc[i][c] = POLYC_GEMM_FMA(ai, bv[c], acc[i][c]);                  \
            }                                                                          \
        }                                                                              \
        if (k < K) {                                                                   \
            const POLYC_GEMM_SMASK_T mk = POLYC_GEMM_SMASK(K - k);                     \
            POLYC_GEMM_UNROLL for (c = 0; c < NB; c++)                                 \
                bv[c] = POLYC_GEMM_MLOAD(mk, b + c * ldb + k);                         \
            POLYC_GEMM_UNROLL for (i = 0; i < MR; i++) {                               \
                const POLYC_GEMM_VT ai = POLYC_GEMM_MLOAD(mk, a + i * lda + k);        \
                POLYC_GEMM_UNROLL for (c = 0; c < NB; c++)                             \
                    acc[i][c] = POLYC_GEMM_FMA(ai, bv[c], acc[i][c]);                  \
            }                                                                          \
        }                                                                              \
        POLYC_GEMM_UNROLL for (i = 0; i < MR; i++)                                     \
            POLYC_GEMM_UNROLL for (c = 0; c < NB; c++) {                               \
                POLYC_GEMM_T x = POLYC_GEMM_FEW_HSUM(acc[i][c]);                       \
                POLYC_GEMM_T *cij = g->C + (i0 + i) * g->c_rs + (n0 + c) * g->c_cs;    \
                if (g->beta == (POLYC_GEMM_T)1)                                        \
                    x += *cij;                                                         \
                else if (g->beta != (POLYC_GEMM_T)0)                                   \
                    x += g->beta * *cij;                                               \
                if (g->bias)                                                           \
                    x += g->bias[(n0 + c) * g->bias_cs];                               \
                if (g->relu)            /* as _mm_max(x, 0): NaN and -0 give 0 */      \
                    x = x > (POLYC_GEMM_T)0 ? x : (POLYC_GEMM_T)0;                     \
                *cij = x;                                                              \
            }                                                                          \
    }

/* Row stream, one vector of columns j: the MR rows of acc (W apart) += the
 * broadcasts a0..a3 (4 values of k per row) times B's rows b0 .. b0 + 3 rs,
 * loaded with LD (whole, or masked to mk). */
#define POLYC_GEMM_FEW_LDU(p) POLYC_GEMM_LOADU(p)
#define POLYC_GEMM_FEW_LDM(p) POLYC_GEMM_MLOAD(mk, (p))
#define POLYC_GEMM_FEW_ROW_STEP(LD, MR)                                               \
    {                                                                                  \
        const POLYC_GEMM_VT x0 = LD(b0 + j), x1 = LD(b0 + rs + j);                     \
        const POLYC_GEMM_VT x2 = LD(b0 + 2 * rs + j), x3 = LD(b0 + 3 * rs + j);        \
        POLYC_GEMM_UNROLL for (i = 0; i < MR; i++) {                                   \
            POLYC_GEMM_VT y = POLYC_GEMM_LOAD(acc + i * W + j);                        \
            y = POLYC_GEMM_FMA(a0[i], x0, y);                                          \
            y = POLYC_GEMM_FMA(a1[i], x1, y);                                          \
            y = POLYC_GEMM_FMA(a2[i], x2, y);                                          \
            y = POLYC_GEMM_FMA(a3[i], x3, y);                                          \
            POLYC_GEMM_V(store)(acc + i * W + j, y);                                   \
        }                                                                              \
    }

/* Row stream: acc (MR rows of W) += A(0..MR, k..k+4) B(k..k+4, 0..wn) for
 * every k step of 4 in ascending order; returns the k the remainder starts
 * at.  B points at the chunk's first column. */
#define POLYC_GEMM_FEW_DEFINE_ROWS(SFX, MR)                                           \
    static int64_t polyc_gemm_fr_rows_##SFX##_##MR(const polyc_gemm_args_##SFX *g,     \
                                                   const POLYC_GEMM_T *B,              \
                                                   POLYC_GEMM_T *acc, int64_t wn,      \
                                                   int64_t nfull)                      \
    {                                                                                  \
        enum { W = POLYC_GEMM_FEW_CHUNK / (int)sizeof(POLYC_GEMM_T) };                \
        const POLYC_GEMM_SMASK_T mk = POLYC_GEMM_SMASK(wn - nfull);                    \
        const int64_t rs = g->b_rs;                                                    \
        int64_t k, j;                                                                  \
        int i;                                                                         \
        (void)mk;                                                                      \
        for (k = 0; k + 4 <= g->K; k += 4) {                                           \
            const POLYC_GEMM_T *b0 = B + k * rs;                                       \
            POLYC_GEMM_VT a0[MR], a1[MR], a2[MR], a3[MR];                              \
            POLYC_GEMM_UNROLL for (i = 0; i < MR; i++) {                               \
                const POLYC_GEMM_T *ai = g->A + i * g->a_rs + k * g->a_cs;             \
                a0[i] = POLYC_GEMM_SET1(g->alpha * ai[0]);                             \
                a1[i] = POLYC_GEMM_SET1(g->alpha * ai[g->a_cs]);                       \
                a2[i] = POLYC_GEMM_SET1(g->alpha * ai[2 * g->a_cs]);                   \
                a3[i] = POLYC_GEMM_SET1(g->alpha * ai[3 * g->a_cs]);                   \
            }                                                                          \
            for (j = 0; j < nfull; j += POLYC_GEMM_VL)                                 \
                POLYC_GEMM_FEW_ROW_STEP(POLYC_GEMM_FEW_LDU, MR)                        \
            if (nfull < wn)                                                            \
                POLYC_GEMM_FEW_ROW_STEP(POLYC_GEMM_FEW_LDM, MR)                        \
        }                                                                              \
        return k;                                                                      \
    }

/* (expands POLYC_GEMM_FEW_NB before it is pasted into the name) */
#define POLYC_GEMM_FEW_DOT_X(SFX, MR, NB) POLYC_GEMM_FEW_DEFINE_DOT(SFX, MR, NB)

#if defined(POLYC_GEMM_SK_NVMAX)
#define POLYC_GEMM_DEFINE_FEW(SFX)                                                     \
    POLYC_GEMM_FEW_DEFINE_ROWS(SFX, 1) POLYC_GEMM_FEW_DEFINE_ROWS(SFX, 2)              \
    POLYC_GEMM_FEW_DEFINE_DOT(SFX, 1, 1) POLYC_GEMM_FEW_DEFINE_DOT(SFX, 2, 1)          \
    POLYC_GEMM_FEW_DEFINE_DOT(SFX, 3, 1) POLYC_GEMM_FEW_DEFINE_DOT(SFX, 4, 1)          \
    POLYC_GEMM_FEW_DOT_X(SFX, 1, POLYC_GEMM_FEW_NB)                                \
    POLYC_GEMM_FEW_DOT_X(SFX, 2, POLYC_GEMM_FEW_NB)                                \
    POLYC_GEMM_FEW_DOT_X(SFX, 3, POLYC_GEMM_FEW_NB)                                \
    POLYC_GEMM_FEW_DOT_X(SFX, 4, POLYC_GEMM_FEW_NB)                                \
                                                                                       \
    /* Row stream, item t: columns n0..n1 of every row of C. */                       \
    static void polyc_gemm_fr_item_##SFX(const polyc_gemm_fctx *f, int64_t t)          \
    {                                                                                  \
        enum { W = POLYC_GEMM_FEW_CHUNK / (int)sizeof(POLYC_GEMM_T) };                \
        const polyc_gemm_args_##SFX *g = (const polyc_gemm_args_##SFX *)f->g;          \
        const int64_t M = g->M, K = g->K, N = g->N;                                    \
        const int64_t n0 = t * f->w, n1 = polyc_gemm_min(N, n0 + f->w), wn = n1 - n0;  \
        const int64_t nfull = wn / POLYC_GEMM_VL * POLYC_GEMM_VL;                      \
        const POLYC_GEMM_SMASK_T mk = POLYC_GEMM_SMASK(wn - nfull);                    \
        POLYC_GEMM_T acc[POLYC_GEMM_FEW_ROWS][W] __attribute__((aligned(64)));         \
        const POLYC_GEMM_T *B = g->B + n0;                                             \
        POLYC_GEMM_T ak[POLYC_GEMM_FEW_ROWS];                                          \
        int64_t i, j, k;                                                               \
        (void)mk;                                                                      \
        for (i = 0; i < M; i++)         /* (whole vectors: the tail's lanes too) */    \
            memset(acc[i], 0, (size_t)polyc_gemm_cdiv(wn, POLYC_GEMM_VL) * POLYC_GEMM_VL * sizeof(POLYC_GEMM_T)); \
        /* the broadcasts of A in registers: MR a constant */                         \
        k = M == 1 ? polyc_gemm_fr_rows_##SFX##_1(g, B, acc[0], wn, nfull)             \
                   : polyc_gemm_fr_rows_##SFX##_2(g, B, acc[0], wn, nfull);            \
        for (; k < K; k++) {                                                           \
            const POLYC_GEMM_T *b0 = B + k * g->b_rs;                                  \
            for (i = 0; i < M; i++)                                                    \
                ak[i] = g->alpha * g->A[i * g->a_rs + k * g->a_cs];                 \
            for (j = 0; j < wn; j += POLYC_GEMM_VL) {                                  \
                const POLYC_GEMM_VT x0 = j == nfull ? POLYC_GEMM_MLOAD(mk, b0 + j)     \
                                                    : POLYC_GEMM_LOADU(b0 + j);        \
                for (i = 0; i < M; i++)                                                \
                    POLYC_GEMM_V(store)(acc[i] + j,                                    \
                                        POLYC_GEMM_FMA(POLYC_GEMM_SET1(ak[i]), x0,  \
                                                       POLYC_GEMM_LOAD(acc[i] + j)));  \
            }                                                                          \
        }                                                                              \
        {   /* the store: beta, the bias, the ReLU, as the small path's tiles */     \
            const POLYC_GEMM_VT zero = POLYC_GEMM_SETZERO();                           \
            const POLYC_GEMM_VT bs = POLYC_GEMM_SET1(g->beta);                         \
            const int beta = g->beta == 0 ? 0 : g->beta == 1 ? 1 : 2;                  \
            for (i = 0; i < M; i++) {                                                  \
                POLYC_GEMM_T *ci = g->C + i * g->c_rs + n0;                            \
                for (j = 0; j < wn; j += POLYC_GEMM_VL) {                              \
                    const int tail = j == nfull;                                       \
                    POLYC_GEMM_VT x = POLYC_GEMM_LOAD(acc[i] + j);                     \
                    if (beta) {                                                        \
                        const POLYC_GEMM_VT y = tail ? POLYC_GEMM_MLOAD(mk, ci + j)    \
                                                     : POLYC_GEMM_LOADU(ci + j);       \
                        x = beta == 1 ? POLYC_GEMM_ADD(x, y) : POLYC_GEMM_FMA(y, bs, x); \
                    }                                                                  \
                    if (g->bias)                                                       \
                        x = POLYC_GEMM_ADD(x, tail ? POLYC_GEMM_MLOAD(mk, g->bias + n0 + j) \
                                                   : POLYC_GEMM_LOADU(g->bias + n0 + j)); \
                    if (g->relu)                                                       \
                        x = POLYC_GEMM_MAX(x, zero);                                   \
                    if (tail)                                                          \
                        POLYC_GEMM_MSTORE(ci + j, mk, x);                              \
                    else                                                               \
                        POLYC_GEMM_STOREU(ci + j, x);                                  \
                }                                                                      \
            }                                                                          \
        }                                                                              \
    }                                                                                  \
                                                                                       \
    /* Dot, item t: columns n0..n1, in tiles of POLYC_GEMM_FEW_NB then one. */        \
    static void polyc_gemm_fd_item_##SFX(const polyc_gemm_fctx *f, int64_t t)          \
    {                                                                                  \
        typedef void (*dot_fn)(int64_t, const POLYC_GEMM_T *, int64_t,                 \
                               const POLYC_GEMM_T *, int64_t,                          \
                               const polyc_gemm_args_##SFX *, int64_t, int64_t);       \
        static const dot_fn wide[4] = {                                                \
            POLYC_GEMM_CAT3(polyc_gemm_fd_##SFX##_1_, POLYC_GEMM_FEW_NB, ),            \
            POLYC_GEMM_CAT3(polyc_gemm_fd_##SFX##_2_, POLYC_GEMM_FEW_NB, ),            \
            POLYC_GEMM_CAT3(polyc_gemm_fd_##SFX##_3_, POLYC_GEMM_FEW_NB, ),            \
            POLYC_GEMM_CAT3(polyc_gemm_fd_##SFX##_4_, POLYC_GEMM_FEW_NB, )};           \
        static const dot_fn one[4] = {polyc_gemm_fd_##SFX##_1_1, polyc_gemm_fd_##SFX##_2_1, \
                                      polyc_gemm_fd_##SFX##_3_1, polyc_gemm_fd_##SFX##_4_1}; \
        const polyc_gemm_args_##SFX *g = (const polyc_gemm_args_##SFX *)f->g;          \
        const POLYC_GEMM_T *a = (const POLYC_GEMM_T *)f->a;                            \
        const int64_t n1 = polyc_gemm_min(g->N, (t + 1) * f->w), M = g->M;             \
        int64_t n = t * f->w, i;                                                       \
        /* each tile of B (nb columns, all of K) from memory once, then from L1 for   \
         * every group of 4 rows of A */                                            \
        for (; n + POLYC_GEMM_FEW_NB <= n1; n += POLYC_GEMM_FEW_NB)                    \
            for (i = 0; i < M; i += 4)                                                 \
                wide[polyc_gemm_min(4, M - i) - 1](g->K, a + i * f->lda, f->lda,       \
                                                   g->B + n * g->b_cs, g->b_cs, g, i, n); \
        for (; n < n1; n++)                                                            \
            for (i = 0; i < M; i += 4)                                                 \
                one[polyc_gemm_min(4, M - i) - 1](g->K, a + i * f->lda, f->lda,        \
                                                  g->B + n * g->b_cs, g->b_cs, g, i, n); \
    }                                                                                  \
                                                                                       \
    static void polyc_gemm_few_item_##SFX(const polyc_gemm_fctx *f, int64_t t)         \
    {                                                                                  \
        if (f->kind == 1)                                                              \
            polyc_gemm_fr_item_##SFX(f, t);                                            \
        else                                                                           \
            polyc_gemm_fd_item_##SFX(f, t);                                            \
    }                                                                                  \
                                                                                       \
    static void polyc_gemm_few_work_##SFX(polyc_gemm_job *j, void *ctx, int tid,       \
                                          int64_t t, uint64_t e)                       \
    {                                                                                  \
        do {                                                                           \
            POLYC_GEMM_ON_CHUNK(tid);                                                  \
            polyc_gemm_few_item_##SFX((const polyc_gemm_fctx *)ctx, t);                \
            __atomic_add_fetch(&j->done, 1, __ATOMIC_RELEASE);                         \
        } while ((t = polyc_gemm_claim(j, e)) >= 0);                                   \
    }                                                                                  \
                                                                                       \
    static int polyc_gemm_few_##SFX(polyc_gemm_args_##SFX *g, int nt)                  \
    {                                                                                  \
        polyc_gemm_fctx f;                                                             \
        const int64_t M = g->M, N = g->N, K = g->K;                                    \
        const int64_t bytes = K * N * (int64_t)sizeof(POLYC_GEMM_T);                   \
        int64_t items, per, i, k;                                                      \
        int cached = 0;                                                                \
        void *buf = NULL;                                                              \
        if (M > POLYC_GEMM_FEW_MAX || g->banded || g->a_rd || g->a_cd || g->b_rd ||     \
            g->b_cd)                                                                   \
            return 0;                                                                  \
        if (M <= POLYC_GEMM_FEW_ROWS && g->b_cs == 1 && g->c_cs == 1 &&                \
            (!g->bias || g->bias_cs == 1) && bytes > POLYC_GEMM_FEW_ROW_MIN)           \
            f.kind = 1;                                                                \
        else if (g->b_rs == 1 && bytes > POLYC_GEMM_FEW_DOT_MIN)                        \
            f.kind = 2;                                                                \
        else                                                                           \
            return 0;                                                                  \
        POLYC_GEMM_ON_FEW(f.kind);                                                     \
        f.g = g;                                                                       \
        /* threads: B's bytes, or the multiply-adds (2^21 a thread, as the driver) */ \
        per = polyc_gemm_max(bytes / POLYC_GEMM_FEW_BYTES,                             \
                             M * N * K >> 21);                                         \
        if (per < nt)                                                                  \
            nt = per < 1 ? 1 : (int)per;                                               \
        if (f.kind == 1) {                                                             \
            /* chunks of at most POLYC_GEMM_FEW_CHUNK bytes a row, a multiple of      \
             * the threads, whole vectors: 3072 floats on 2 threads are 2 x 1536 */  \
            const int64_t wmax = POLYC_GEMM_FEW_CHUNK / (int64_t)sizeof(POLYC_GEMM_T); \
            items = polyc_gemm_cdiv(polyc_gemm_cdiv(N, wmax), nt) * nt;                \
            f.w = polyc_gemm_cdiv(polyc_gemm_cdiv(N, items), POLYC_GEMM_VL) * POLYC_GEMM_VL; \
        } else {                                                                       \
            /* A's rows contiguous along k and times alpha (packed unless they are) */ \
            f.a = g->A;                                                                \
            f.lda = g->a_rs;                                                           \
            if (g->a_cs != 1 || g->alpha != (POLYC_GEMM_T)1) {                         \
                POLYC_GEMM_T *ap;                                                      \
                buf = polyc_gemm_acquire((size_t)(M * K) * sizeof(POLYC_GEMM_T), &cached); \
                if (!buf)                                                              \
                    return 0;                                                          \
                ap = (POLYC_GEMM_T *)buf;                                              \
                for (i = 0; i < M; i++)                                                \
                    for (k = 0; k < K; k++)                                            \
                        ap[i * K + k] = g->alpha * g->A[i * g->a_rs + k * g->a_cs];    \
                f.a = ap;                                                              \
                f.lda = K;                                                             \
            }                                                                          \
            items = nt > 1 ? polyc_gemm_min(polyc_gemm_cdiv(N, POLYC_GEMM_FEW_NB), 8 * nt) : 1; \
            f.w = polyc_gemm_cdiv(polyc_gemm_cdiv(N, items), POLYC_GEMM_FEW_NB) * POLYC_GEMM_FEW_NB; \
        }                                                                              \
        items = polyc_gemm_cdiv(N, f.w);                                               \
        if (nt > 1 && items > 1) {                                                     \
            polyc_gemm_run_job(items, nt, polyc_gemm_few_work_##SFX, &f);              \
        } else {                                                                       \
            int64_t t;                                                                 \
            for (t = 0; t < items; t++)                                                \
                polyc_gemm_few_item_##SFX(&f, t);                                      \
        }                                                                              \
        if (buf)                                                                       \
            polyc_gemm_release(buf, cached);                                           \
        return 1;                                                                      \
    }
#else
/* The portable build: the packed path does everything. */
#define POLYC_GEMM_DEFINE_FEW(SFX)                                                     \
    static int polyc_gemm_few_##SFX(polyc_gemm_args_##SFX *g, int nt)                  \
    {                                                                                  \
        (void)g, (void)nt;                                                             \
        return 0;                                                                      \
    }
#endif

#endif
