/* polyc GEMM: a header-only, BLIS-style matrix multiply for generated C code.
 *
 *   C(m, n) = alpha * sum_k A(m, k) * B(k, n) + beta * C(m, n)
 *             then, if bias: += bias[n * bias_cs]; then, if relu: max(., 0)
 *
 *   BLAS semantics: beta == 0 does not read C (NaN or garbage there does not
 *   propagate); alpha == 0 or K == 0 does not read A or B (C = beta * C, then
 *   the epilogue).  alpha == 1 and beta in {0, 1} take the same paths as a
 *   plain product (alpha != 1 scales each packed A sliver; beta other than 0
 *   and 1 is a separate store path of the micro-kernel).
 *
 *   A(m, k) = A[m * a_rs + k * a_cs], B(k, n) = B[k * b_rs + n * b_cs],
 *   C(m, n) = C[m * c_rs + n * c_cs]   (strides in elements, non-negative)
 *
 *   void polyc_gemm_f32(M, N, K, A, a_rs, a_cs, B, b_rs, b_cs, C, c_rs, c_cs,
 *                       alpha, beta, bias, bias_cs, relu, nthreads);
 *     alpha, beta: float (double for _f64)
 *   void polyc_gemm_f64(... the same with double ...);
 *
 *   void polyc_gemmx_f32(M, N, K, A, a_rows, a_cols, B, b_rows, b_cols, C, c_rs, c_cs,
 *                        alpha, beta, bias, bias_cs, relu, nthreads);
 *     the same with A and B addressed through mixed-radix index maps
 *     (polyc_gemm_dims: a row or column index r of A or B is split into
 *     digits r = ((d0 * e1 + d1) * e2 + d2) ... over the extents e_j and
 *     addresses  sum_j d_j * stride_j): the implicit GEMM of a convolution,
 *     B(k = (c, kh, kw), n = (h, w)) = I[c * HP * WP + (h + kh) * WP + w + kw],
 *     with no im2col buffer: packing gathers the window.  A map whose digits
 *     form one arithmetic progression is used as a stride; any other is turned
 *     into an offset table (one int64 per index) in the packing block.
 *   void polyc_gemmx_post_f32(M, N, K, A, a_rows, a_cols, B, b_rows, b_cols, C, c_rs,
 *                             c_cs, alpha, beta, post, nthreads);
 *     polyc_gemmx with post-operations instead of the bias and ReLU:
 *     C = relu(C * mul + add + add2) on each tile once its sum is final, by the
 *     thread that computed it (polyc_gemm_post in gemm_api.h: each operand a
 *     per-row or per-column vector or a matrix, p[m * rs + n * cs]; gemm_post.h);
 *     the paths apply them after each tile (window, small), each block of the
 *     last k block's macro-kernel (packed: rows of a whole panel, from L2) or
 *     over all of C afterwards (few rows, K == 0).
 *   void polyc_gemmt_f32(M, N, K, A, a_rs, a_cs, B, b_rs, b_cs, C, c_rs, c_cs,
 *                        alpha, beta, band, band_lo, band_hi, nthreads);
 *     the same over a band (no bias, no ReLU): band POLYC_GEMM_BAND_MN stores
 *     only the C(m, n) with band_lo <= n - m <= band_hi (BLIS's gemmt: a
 *     triangle of C; register tiles outside it are skipped, tiles crossing
 *     its edge computed into a buffer and stored through the mask);
 *     POLYC_GEMM_BAND_MK (_NK) sums only over band_lo <= k - m (k - n) <=
 *     band_hi (a triangular A, B: their slivers are packed with zeros outside
 *     the band and each tile runs over the part of the k block its rows
 *     (columns) reach); INT64_MIN / INT64_MAX: that side unbounded.  The k
 *     blocks run in ascending order and each packs its B panel before any C
 *     is written, so with beta 1 C may also be the B operand when no element
 *     is written at a smaller k than one it is read at (PolyBench's trmm:
 *     polyc.callbox.inplace_reason; not A, which is packed again for every
 *     block of columns).  With a band of C open below (or of A:
 *     the last rows hold most of the work) the blocks of rows are taken from
 *     the last.
 *   const char *polyc_gemm_isa(void);   "avx512", "avx2" or "portable"
 *   void polyc_gemm_set_team(int on);   multi-threaded calls on the OpenMP team
 *                                       (1) or the GEMM's own pool (0, default)
 *
 * M, N or K may be 0 (K == 0: C = beta * C + epilogue, C not read if beta == 0).
 * nthreads <= 0 means omp_get_max_threads().  Everything is static (the entry
 * points too, unless POLYC_GEMM_API says otherwise: gemm_api.h), so the
 * header may be included by several translation units.  Generated kernels do
 * not include it: they declare the entry points (gemm_api.h) and link the
 * intrinsics library built from this file once per machine.  C99 (no C11 needed:
 * the 64-byte aligned buffers come from malloc, because aligned_alloc is not
 * declared under -std=c99).
 *
 * Algorithm: the five loops around a micro-kernel of Goto & van de Geijn,
 * "Anatomy of high-performance matrix multiplication", ACM TOMS 34(3), 2008,
 * as structured by Van Zee & van de Geijn, "BLIS: A framework for rapidly
 * instantiating BLAS functionality", ACM TOMS 41(3), 2015:
 *
 *   jc over N by NC          B panel KC x NC (packed, shared) lives in L3
 *     pc over K by KC        pack B into NR-wide slivers, k-major, zero-padded
 *       ic over M by MC      pack A block MC x KC (one per thread) -> L2
 *         jr over NC by NR   B sliver KC x NR (L1 / L2)
 *           ir over MC by MR A sliver MR x KC streams from L2
 *             micro-kernel: MR x NR accumulators in registers,
 *             broadcast A, load B, explicit FMA (-std=c99 => no contraction)
 *
 * beta only decides how the first pc block treats C (overwrite, add, or add
 * beta * C); the later blocks add; bias and relu are applied on the last pc
 * block.  alpha multiplies the packed A slivers (after packing, only when
 * alpha != 1), so every block's products carry it.  Full tiles
 * with unit c_cs are stored straight from the registers; edge tiles go
 * through an MR x NR buffer and only the valid part is copied back.
 *
 * Blocking (Zen 5: L1d 48 KiB, L2 1 MiB per core, L3 32 MiB):
 *   AVX-512 f32: MR x NR = 14 x 32 (28 zmm accumulators + 2 B + 1 A = 31
 *     registers), KC = 512, MC = 14 * 18 = 252 (A block 504 KiB, half of L2),
 *     NC = 4096 (B panel 8 MiB in L3).
 *   AVX-512 f64: 14 x 16, KC = 384, MC = 14 * 12 = 168 (504 KiB), NC = 2048
 *     (6 MiB).
 *   The B sliver (KC x NR: 64 / 48 KiB) does not stay in L1: it streams from
 *   L2 with the A sliver (f32: 184 B per 28 FMAs = 14 cycles, f64: 240 B),
 *   well within what L2 delivers; a deep KC halves the passes over C instead (KC = 256,
 *   the L1-sized choice, measured 3-7% slower at 1024 and 2048).
 *   AVX2 (+FMA):  f32 6 x 16, f64 6 x 8 (12 ymm accumulators); KC = 256,
 *     MC = 6 * 42 = 252 (f32) / 6 * 24 = 144 (f64), NC = 4096 / 2048.
 *   portable C:   4 x 8 with plain loops.
 * The intrinsics library derives MC and NC from the machine's caches instead
 * (POLYC_GEMM_L2_BYTES, POLYC_GEMM_L3_BYTES): the A block MC x KC fills half
 * of L2 (BLIS's rule; the constants above are that rule on a 1 MiB and a
 * 512 KiB L2), the B panel KC x NC a quarter of L3; KC stays the measured
 * constant of each micro-kernel.
 * KC and MC are balanced to the problem (K = 700 gives two 350-deep blocks).
 * The packing buffers of a call are one block, kept for the next call when
 * it is at most POLYC_GEMM_CACHE_MAX (16 MiB) bytes; see polyc_gemm_acquire.
 *
 * Small problems (gemm_small.h): a call whose B is reused by few slivers of A
 * (at most 4 reading B in place, at any K; or a B of at most 256 KiB, with
 * K <= 1024), no band and unit c_cs takes a path without B packing and with a register tile chosen per
 * call (polyc_gemm_small_<t>, tried by polyc_gemm_run_<t> before the packed path).
 *
 * Convolution windows (gemm_win.h): a polyc_gemmx call whose B columns are
 * output rows of a convolution (runs of the input, one pitch apart) with more
 * slivers of A than the small path reads B in place for, or rows it can join
 * across the pitch to compute fewer lanes, reads B in place with all of A
 * packed once and every sliver over each tile (polyc_gemm_win_<t>, tried
 * before the small path).
 *
 * Few rows (gemm_few.h): a matrix-vector-like product (M <= 2 with B
 * row-major, M <= 16 with B column-major as in x @ W.T, B beyond 128 / 256
 * KiB) streams B once, along its rows or as dot products of contiguous
 * columns, with threads by B's bytes (polyc_gemm_few_<t>, tried first).
 *
 * Threads (OpenMP): one parallel region around the jc/pc loops; B is packed
 * cooperatively, then either each thread takes whole blocks of A with its own
 * A buffer (when M has at least 4 slivers per thread; at least 3 blocks per
 * thread where M allows, sizes within one sliver of each other), or, for
 * short M, the A block is packed cooperatively and the jr slivers are
 * shared.  The B slivers, the A blocks and the jr slivers are taken from
 * atomic counters (chunks of nsl / 4nt slivers), not split statically: a
 * core slowed by another process does less of the work instead of making
 * the whole team wait for it at the next barrier.  Each thread gets at least 128^3 multiply-adds (below that the
 * fork/join costs more than it saves: 64^3 took 3.2 us on one thread, 10 us
 * on two).
 */
#ifndef POLYC_GEMM_H
#define POLYC_GEMM_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

#define POLYC_GEMM_UNUSED __attribute__((unused))
/* The storage class of the entry points (gemm_api.h): static when this file
 * is used header-only; the intrinsics library defines it as visible. */
#ifndef POLYC_GEMM_API
#define POLYC_GEMM_API static POLYC_GEMM_UNUSED
#endif
#ifndef POLYC_GEMM_API_H
#include "gemm_api.h"
#endif
/* A test hook run by thread tid before each chunk of work it takes. */
#ifndef POLYC_GEMM_ON_CHUNK
#define POLYC_GEMM_ON_CHUNK(tid) ((void)(tid))
#endif


/* ---------------------------------------------------------------- helpers */

/* Allocation hooks (a test builds with POLYC_GEMM_MALLOC(n) = NULL to reach the
 * no-memory fallback). */
#ifndef POLYC_GEMM_MALLOC
#define POLYC_GEMM_MALLOC(n) malloc(n)
#endif
#ifndef POLYC_GEMM_FREE
#define POLYC_GEMM_FREE(p) free(p)
#endif

/* 64-byte aligned block from malloc (the original pointer is kept just below
 * the aligned one); the size is rounded up to a multiple of 64. */
static POLYC_GEMM_UNUSED void *polyc_gemm_alloc(size_t bytes)
{
    size_t size = ((bytes + 63) / 64) * 64 + 64 + sizeof(void *);
    char *raw = (char *)POLYC_GEMM_MALLOC(size);
    uintptr_t p;
    if (!raw)
        return NULL;
    p = ((uintptr_t)(raw + sizeof(void *)) + 63) & ~(uintptr_t)63;
    ((void **)p)[-1] = raw;
    return (void *)p;
}

static POLYC_GEMM_UNUSED void polyc_gemm_free(void *p)
{
    if (p)
        POLYC_GEMM_FREE(((void **)p)[-1]);
}

/* The packing buffers of one call are one block.  Blocks up to
 * POLYC_GEMM_CACHE_MAX bytes are kept for the next call (one block per
 * translation unit, taken with an atomic flag; a concurrent call allocates its
 * own): glibc otherwise trims the heap at every free and the next call
 * page-faults the buffers again, which doubled the time of 128..256-sized
 * problems.  -DPOLYC_GEMM_CACHE_MAX=0 allocates and frees on every call. */
#ifndef POLYC_GEMM_CACHE_MAX
#define POLYC_GEMM_CACHE_MAX ((size_t)16 << 20)
#endif
static void *polyc_gemm_cache_block;
static size_t polyc_gemm_cache_bytes;
static int polyc_gemm_cache_busy;

static POLYC_GEMM_UNUSED void *polyc_gemm_acquire(size_t bytes, int *cached)
{
    *cached = 0;
    if (bytes <= POLYC_GEMM_CACHE_MAX && !__sync_lock_test_and_set(&polyc_gemm_cache_busy, 1)) {
        if (polyc_gemm_cache_bytes < bytes) {
            polyc_gemm_free(polyc_gemm_cache_block);
            polyc_gemm_cache_block = polyc_gemm_alloc(bytes);
            polyc_gemm_cache_bytes = polyc_gemm_cache_block ? bytes : 0;
        }
        if (polyc_gemm_cache_block) {
            *cached = 1;
            return polyc_gemm_cache_block;
        }
        __sync_lock_release(&polyc_gemm_cache_busy);
    }
    return polyc_gemm_alloc(bytes);
}

static POLYC_GEMM_UNUSED void polyc_gemm_release(void *p, int cached)
{
    if (cached)
        __sync_lock_release(&polyc_gemm_cache_busy);
    else
        polyc_gemm_free(p);
}

static POLYC_GEMM_UNUSED int64_t polyc_gemm_min(int64_t a, int64_t b) { return a < b ? a : b; }
static POLYC_GEMM_UNUSED int64_t polyc_gemm_cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static POLYC_GEMM_UNUSED int64_t polyc_gemm_max(int64_t a, int64_t b) { return a > b ? a : b; }
/* a + b, saturated at INT64_MIN and INT64_MAX (a band's unbounded side) */
static POLYC_GEMM_UNUSED int64_t polyc_gemm_add_sat(int64_t a, int64_t b)
{
    if (b > 0 && a > INT64_MAX - b)
        return INT64_MAX;
    if (b < 0 && a < INT64_MIN - b)
        return INT64_MIN;
    return a + b;
}


/* The address offset of index r under d (digits from the last extent). */
static POLYC_GEMM_UNUSED int64_t polyc_gemm_offset(const polyc_gemm_dims *d, int64_t r)
{
    int64_t off = 0;
    int j;
    for (j = d->n - 1; j >= 0; j--) {
        off += (r % d->ext[j]) * d->stride[j];
        r /= d->ext[j];
    }
    return off;
}

/* 1 and *stride when d's offsets are r * *stride (digits of extent 1 do not
 * matter) with *stride >= 0; 0 otherwise. */
static POLYC_GEMM_UNUSED int polyc_gemm_collapse(const polyc_gemm_dims *d, int64_t *stride)
{
    int64_t span = 1, s = 0;
    int j, first = 1;
    for (j = d->n - 1; j >= 0; j--) {
        if (d->ext[j] == 1)
            continue;
        if (first)
            s = d->stride[j];
        else if (d->stride[j] != s * span)
            return 0;
        first = 0;
        span *= d->ext[j];
    }
    if (s < 0)
        return 0;
    *stride = s;
    return 1;
}

/* t[r] = polyc_gemm_offset(d, r) for r < len, by counting digits. */
static POLYC_GEMM_UNUSED void polyc_gemm_table(const polyc_gemm_dims *d, int64_t len, int64_t *t)
{
    int64_t digit[POLYC_GEMM_MAXDIMS] = {0}, off = 0, r;
    int j;
    for (r = 0; r < len; r++) {
        t[r] = off;
        for (j = d->n - 1; j >= 0; j--) {
            off += d->stride[j];
            if (++digit[j] < d->ext[j])
                break;
            off -= digit[j] * d->stride[j];
            digit[j] = 0;
        }
    }
}

/* Element r of an operand's row or column map: the table, the map, or the stride. */
static POLYC_GEMM_UNUSED int64_t polyc_gemm_at(const int64_t *t, const polyc_gemm_dims *d,
                                               int64_t stride, int64_t r)
{
    return t ? t[r] : d ? polyc_gemm_offset(d, r) : r * stride;
}

/* Row lists for the unrolled micro-kernels. */
#define POLYC_GEMM_R4(X) X(0) X(1) X(2) X(3)
#define POLYC_GEMM_R6(X) POLYC_GEMM_R4(X) X(4) X(5)
#define POLYC_GEMM_R8(X) POLYC_GEMM_R6(X) X(6) X(7)
#define POLYC_GEMM_R12(X) POLYC_GEMM_R8(X) X(8) X(9) X(10) X(11)
#define POLYC_GEMM_R14(X) POLYC_GEMM_R12(X) X(12) X(13)

/* Edge tiles (and every tile of the portable kernel): the accumulators are in
 * buf (row stride ldb); write the valid mr x nr part to C.  beta: 0 overwrites
 * C (not read), 1 adds to it, 2 adds betas * C. */
#define POLYC_GEMM_DEFINE_TAIL(T, SFX)                                                 \
    static POLYC_GEMM_UNUSED void polyc_gemm_tail_##SFX(                               \
        const T *buf, int64_t ldb, T *c, int64_t c_rs, int64_t c_cs, int64_t mr,       \
        int64_t nr, int beta, T betas, const T *bias, int64_t bias_cs, int relu)       \
    {                                                                                  \
        int64_t i, j;                                                                  \
        for (i = 0; i < mr; i++) {                                                     \
            T *ci = c + i * c_rs;                                                      \
            const T *bi = buf + i * ldb;                                               \
            for (j = 0; j < nr; j++) {                                                 \
                T v = bi[j];                                                           \
                if (beta == 1)                                                         \
                    v += ci[j * c_cs];                                                 \
                else if (beta)                                                         \
                    v += betas * ci[j * c_cs];                                         \
                if (bias)                                                              \
                    v += bias[j * bias_cs];                                            \
                if (relu && !(v > (T)0))                                               \
                    v = (T)0;                                                          \
                ci[j * c_cs] = v;                                                      \
            }                                                                          \
        }                                                                              \
    }
POLYC_GEMM_DEFINE_TAIL(float, f32)
POLYC_GEMM_DEFINE_TAIL(double, f64)

/* ------------------------------------------------------------ the thread pool
 *
 * Why not an OpenMP team: the end of an OpenMP parallel region waits for
 * every thread of the team, so on a machine where another process holds one
 * core a call lasts until the scheduler gives that core back to the late
 * thread, even when the others have done all the work.  Here the caller and
 * the pool's workers take *items* (chunks of the call's work, in a fixed
 * order of phases: polyc_gemm_phase) from one ticket counter; an item starts
 * once every item of the earlier phases is done (a done counter, not a
 * barrier), and the caller returns when every item is done.  A worker that
 * wakes up late finds no ticket left and goes back to sleep: the call never
 * waits for a thread that has not started.  Each item is done by exactly one
 * thread and each C element is summed in the same order whoever does it, so
 * results do not depend on the distribution.
 *
 * The ticket counter holds the job's epoch in its top 24 bits: a worker that
 * read the counter of an earlier job fails its compare-and-swap and touches
 * nothing of the next one.  One job runs in the pool at a time (a second,
 * concurrent caller runs its call alone).  Idle workers spin
 * POLYC_GEMM_POOL_SPIN times (microseconds) for the next job, then sleep on a
 * condition variable.  After fork() the child starts with no workers.  The
 * pool exists in OpenMP builds (-fopenmp), whose thread count it follows
 * (nthreads <= 0: omp_get_max_threads()); a call made inside an OpenMP
 * parallel region runs on its own thread, as a nested region would. */

#ifdef _OPENMP
#define POLYC_GEMM_THREADS 1
#include <pthread.h>
#include <sched.h>
#else
#define POLYC_GEMM_THREADS 0
#endif

#ifndef POLYC_GEMM_POOL_SPIN
#define POLYC_GEMM_POOL_SPIN 2000
#endif
#define POLYC_GEMM_POOL_MAX 256
#define POLYC_GEMM_EPOCH_SHIFT 40

#if defined(__x86_64__) || defined(__i386__)
#define POLYC_GEMM_PAUSE() __builtin_ia32_pause()
#else
#define POLYC_GEMM_PAUSE() ((void)0)
#endif

typedef struct polyc_gemm_job {
    uint64_t tick;      /* epoch << 40 | the next ticket */
    int64_t done;       /* items done */
    int64_t total;      /* items of the job */
    int nthr;           /* threads that may take part (the caller is tid 0) */
    void (*work)(struct polyc_gemm_job *, void *, int, int64_t, uint64_t);
    void *ctx;
} polyc_gemm_job;

/* The next ticket of job j in epoch e, or -1 when there is none (all taken,
 * or j moved on to another epoch). */
static POLYC_GEMM_UNUSED int64_t polyc_gemm_claim(polyc_gemm_job *j, uint64_t e)
{
    uint64_t v = __atomic_load_n(&j->tick, __ATOMIC_ACQUIRE);
    for (;;) {
        const int64_t t = (int64_t)(v & (((uint64_t)1 << POLYC_GEMM_EPOCH_SHIFT) - 1));
        if ((v >> POLYC_GEMM_EPOCH_SHIFT) != e ||
            t >= __atomic_load_n(&j->total, __ATOMIC_RELAXED))
            return -1;
        if (__atomic_compare_exchange_n(&j->tick, &v, v + 1, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE))
            return t;
    }
}

/* Wait until at least n items of j are done (spin, then yield the core). */
static POLYC_GEMM_UNUSED void polyc_gemm_wait_done(polyc_gemm_job *j, int64_t n)
{
    int spins = 0;
    while (__atomic_load_n(&j->done, __ATOMIC_ACQUIRE) < n) {
        if (spins < 4000) {
            spins++;
            POLYC_GEMM_PAUSE();
        } else {
#if POLYC_GEMM_THREADS
            sched_yield();
#endif
        }
    }
}

/* Thread tid takes part in job j of epoch e: its first ticket, then the
 * job's work function takes the rest.  The job's fields are read only
 * while a ticket of epoch e is held (the job is then live). */
static POLYC_GEMM_UNUSED void polyc_gemm_take_part(polyc_gemm_job *j, uint64_t e, int tid)
{
    const int64_t t = polyc_gemm_claim(j, e);
    if (t >= 0)
        j->work(j, j->ctx, tid, t, e);
}

/* polyc_gemm_set_team(1): multi-threaded calls run on the OpenMP team
 * instead of the pool.  For a process whose OpenMP runtime keeps its idle
 * threads spinning long (libgomp loaded first by another library, torch's
 * among them, with its default 300,000 spins, or OMP_WAIT_POLICY=ACTIVE):
 * there the team's threads, spinning after every OpenMP kernel, would hold
 * the cores the pool's workers need (measured: a BERT layer of GEMM calls
 * and OpenMP kernels 2x slower), and the team picks a call up at once.  The
 * items and tickets are the pool's, so results are the same either way;
 * only a late thread delays the end of the region (the implicit barrier). */
static int polyc_gemm_team = 0;

POLYC_GEMM_API void polyc_gemm_set_team(int on)
{
    __atomic_store_n(&polyc_gemm_team, on != 0, __ATOMIC_RELAXED);
}

#if POLYC_GEMM_THREADS
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t epoch;             /* of the last job published */
    int workers;                /* started, with tids 1 .. workers */
    int busy;                   /* a call holds the pool */
    int atfork;                 /* the fork handler is registered */
    polyc_gemm_job job;         /* static: a late worker may still read it */
} polyc_gemm_pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, 0,
                     {0, 0, 0, 0, NULL, NULL}};

static void polyc_gemm_pool_child(void)
{
    pthread_mutex_init(&polyc_gemm_pool.mu, NULL);
    pthread_cond_init(&polyc_gemm_pool.cv, NULL);
    polyc_gemm_pool.workers = 0;
    polyc_gemm_pool.busy = 0;
}

static void *polyc_gemm_worker(void *arg)
{
    const int tid = (int)(intptr_t)arg;
    uint64_t seen = __atomic_load_n(&polyc_gemm_pool.epoch, __ATOMIC_ACQUIRE);
    for (;;) {
        int spins;
        for (spins = 0; spins < POLYC_GEMM_POOL_SPIN; spins++) {
            if (__atomic_load_n(&polyc_gemm_pool.epoch, __ATOMIC_ACQUIRE) != seen)
                break;
            POLYC_GEMM_PAUSE();
        }
        pthread_mutex_lock(&polyc_gemm_pool.mu);
        while (__atomic_load_n(&polyc_gemm_pool.epoch, __ATOMIC_ACQUIRE) == seen)
            pthread_cond_wait(&polyc_gemm_pool.cv, &polyc_gemm_pool.mu);
        seen = __atomic_load_n(&polyc_gemm_pool.epoch, __ATOMIC_ACQUIRE);
        pthread_mutex_unlock(&polyc_gemm_pool.mu);
        /* nthr of this epoch or a later one (then the claim fails) */
        if (tid < __atomic_load_n(&polyc_gemm_pool.job.nthr, __ATOMIC_ACQUIRE))
            polyc_gemm_take_part(&polyc_gemm_pool.job, seen, tid);
    }
    return NULL;
}

/* Hold the pool with at least nt - 1 workers; the number of threads the
 * call may use (1: the pool is busy with another call or no worker could be
 * started; the call then runs alone). */
static int polyc_gemm_pool_acquire(int nt)
{
    if (__sync_lock_test_and_set(&polyc_gemm_pool.busy, 1))
        return 1;
    if (!polyc_gemm_pool.atfork) {
        pthread_atfork(NULL, NULL, polyc_gemm_pool_child);
        polyc_gemm_pool.atfork = 1;
    }
    if (nt > POLYC_GEMM_POOL_MAX)
        nt = POLYC_GEMM_POOL_MAX;
    while (polyc_gemm_pool.workers < nt - 1) {
        pthread_t th;
        pthread_attr_t attr;
        int failed;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        failed = pthread_create(&th, &attr, polyc_gemm_worker,
                                (void *)(intptr_t)(polyc_gemm_pool.workers + 1));
        pthread_attr_destroy(&attr);
        if (failed)
            break;
        polyc_gemm_pool.workers++;
    }
    if (polyc_gemm_pool.workers + 1 < nt)
        nt = polyc_gemm_pool.workers + 1;
    if (nt <= 1)
        __sync_lock_release(&polyc_gemm_pool.busy);
    return nt;
}
#endif

/* Run job j (total items, work, ctx set) on nt threads: in the pool when
 * nt > 1 and it is free, else on the calling thread alone. */
static POLYC_GEMM_UNUSED void polyc_gemm_run_job(int64_t total, int nt,
    void (*work)(polyc_gemm_job *, void *, int, int64_t, uint64_t), void *ctx)
{
#if POLYC_GEMM_THREADS
    if (nt > 1 && omp_in_parallel())
        nt = 1;
    if (nt > 1 && __atomic_load_n(&polyc_gemm_team, __ATOMIC_RELAXED)) {
        polyc_gemm_job tj;
        tj.tick = (uint64_t)1 << POLYC_GEMM_EPOCH_SHIFT;
        tj.done = 0;
        tj.total = total;
        tj.nthr = nt;
        tj.work = work;
        tj.ctx = ctx;
        #pragma omp parallel num_threads(nt)
        polyc_gemm_take_part(&tj, 1, omp_get_thread_num());
        return;
    }
    if (nt > 1)
        nt = polyc_gemm_pool_acquire(nt);
    if (nt > 1) {
        polyc_gemm_job *j = &polyc_gemm_pool.job;
        uint64_t e;
        pthread_mutex_lock(&polyc_gemm_pool.mu);
        e = (polyc_gemm_pool.epoch + 1) & (((uint64_t)1 << (64 - POLYC_GEMM_EPOCH_SHIFT)) - 1);
        if (e == 0)
            e = 1;      /* epoch 0 is the serial jobs' */
        /* the new epoch's ticket first: a worker still claiming in the last job
         * then fails its compare-and-swap, instead of checking a ticket of the
         * last epoch against this job's total and taking it.  Stored after the
         * total, it gave wrong results with two jobs back to back (the window
         * path's packing of A, then its tiles: 7 of 25 runs of 1,400 calls on
         * two threads; none with this order, nor on the OpenMP team) */
        __atomic_store_n(&j->tick, e << POLYC_GEMM_EPOCH_SHIFT, __ATOMIC_SEQ_CST);
        __atomic_store_n(&j->total, total, __ATOMIC_SEQ_CST);
        __atomic_store_n(&j->done, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&j->work, work, __ATOMIC_RELAXED);
        __atomic_store_n(&j->ctx, ctx, __ATOMIC_RELAXED);
        __atomic_store_n(&j->nthr, nt, __ATOMIC_RELAXED);
        __atomic_store_n(&j->tick, e << POLYC_GEMM_EPOCH_SHIFT, __ATOMIC_RELEASE);
        __atomic_store_n(&polyc_gemm_pool.epoch, e, __ATOMIC_RELEASE);
        pthread_cond_broadcast(&polyc_gemm_pool.cv);
        pthread_mutex_unlock(&polyc_gemm_pool.mu);
        polyc_gemm_take_part(j, e, 0);
        polyc_gemm_wait_done(j, total);
        __sync_lock_release(&polyc_gemm_pool.busy);
        return;
    }
#endif
    {
        polyc_gemm_job j;
        (void)nt;
        j.tick = 0;
        j.done = 0;
        j.total = total;
        j.nthr = 1;
        j.work = work;
        j.ctx = ctx;
        polyc_gemm_take_part(&j, 0, 0);
    }
}

/* A call's items 0 .. total - 1 as one job: item(ctx, t, tid) for each, on nt
 * threads (the pool, polyc_gemm_run_job) or, with one thread or one item, in
 * order on the caller (the small, window and few-rows paths). */
typedef void (*polyc_gemm_each_fn)(const void *ctx, int64_t t, int tid);
typedef struct {
    polyc_gemm_each_fn item;
    const void *ctx;
} polyc_gemm_each_job;

static POLYC_GEMM_UNUSED void polyc_gemm_each_work(polyc_gemm_job *j, void *c, int tid,
                                                   int64_t t, uint64_t e)
{
    const polyc_gemm_each_job *it = (const polyc_gemm_each_job *)c;
    do {
        it->item(it->ctx, t, tid);
        __atomic_add_fetch(&j->done, 1, __ATOMIC_RELEASE);
    } while ((t = polyc_gemm_claim(j, e)) >= 0);
}

static POLYC_GEMM_UNUSED void polyc_gemm_each(int64_t total, int nt, polyc_gemm_each_fn item,
                                              const void *ctx)
{
    if (nt > 1 && total > 1) {
        polyc_gemm_each_job it;
        it.item = item;
        it.ctx = ctx;
        polyc_gemm_run_job(total, nt, polyc_gemm_each_work, &it);
    } else {
        int64_t t;
        for (t = 0; t < total; t++)
            item(ctx, t, 0);
    }
}

/* The phases of a call, in order: for each jc block, for each pc block:
 * pack B (kind 0, chunks of ch slivers), then either the A blocks (kind 1,
 * split M: each packs its rows into its thread's buffer and multiplies), or
 * for each MC block of rows, pack A (kind 2, chunks of ach slivers) and the
 * jr chunks (kind 3).  kind -1: the end. */
typedef struct {
    int64_t M, N, K, kc, mc, nc, nic, mr, nr;
    int split_m, nthr;
} polyc_gemm_geom;

typedef struct {
    int kind;
    int64_t start, count;                  /* its items: tickets [start, start + count) */
    int64_t jc, nc, nsl, ch, pc, kc;       /* the jc and pc blocks */
    int64_t i0, mcb, bsl, ach;             /* kinds 2, 3: the MC block of rows */
} polyc_gemm_phase;

static POLYC_GEMM_UNUSED void polyc_gemm_phase_count(const polyc_gemm_geom *q,
                                                     polyc_gemm_phase *p)
{
    p->nc = polyc_gemm_min(q->nc, q->N - p->jc);
    p->nsl = polyc_gemm_cdiv(p->nc, q->nr);
    p->ch = polyc_gemm_cdiv(p->nsl, 4 * q->nthr);
    p->kc = polyc_gemm_min(q->kc, q->K - p->pc);
    if (p->kind == 0 || p->kind == 3) {
        p->count = polyc_gemm_cdiv(p->nsl, p->ch);
    } else if (p->kind == 1) {
        p->count = q->nic;
    } else if (p->kind == 2) {
        p->mcb = polyc_gemm_min(q->mc, q->M - p->i0);
        p->bsl = polyc_gemm_cdiv(p->mcb, q->mr);
        p->ach = polyc_gemm_cdiv(p->bsl, 2 * q->nthr);
        p->count = polyc_gemm_cdiv(p->bsl, p->ach);
    } else {
        p->count = 0;
    }
}

static POLYC_GEMM_UNUSED void polyc_gemm_phase_first(const polyc_gemm_geom *q,
                                                     polyc_gemm_phase *p)
{
    memset(p, 0, sizeof *p);
    polyc_gemm_phase_count(q, p);
}

static POLYC_GEMM_UNUSED void polyc_gemm_phase_next(const polyc_gemm_geom *q,
                                                    polyc_gemm_phase *p)
{
    p->start += p->count;
    if (p->kind == 0) {
        p->kind = q->split_m ? 1 : 2;
        p->i0 = 0;
    } else if (p->kind == 2) {
        p->kind = 3;
    } else if (p->kind == 3 && p->i0 + q->mc < q->M) {
        p->kind = 2;
        p->i0 += q->mc;
    } else {                                /* the next pc block, or jc block */
        p->kind = 0;
        p->pc += q->kc;
        if (p->pc >= q->K) {
            p->pc = 0;
            p->jc += q->nc;
            if (p->jc >= q->N)
                p->kind = -1;
        }
    }
    polyc_gemm_phase_count(q, p);
}

/* The number of items of a call. */
static POLYC_GEMM_UNUSED int64_t polyc_gemm_items(const polyc_gemm_geom *q)
{
    polyc_gemm_phase p;
    polyc_gemm_phase_first(q, &p);
    while (p.kind >= 0)
        polyc_gemm_phase_next(q, &p);
    return p.start;
}

/* The small-problem path (per-problem register tiles, B unpacked): macros
 * expanded in POLYC_GEMM_DEFINE_DRIVER. */
#ifndef POLYC_GEMM_SMALL_H
#include "gemm_small.h"
#include "gemm_few.h"
#include "gemm_win.h"
#include "gemm_post.h"
#endif

/* ------------------------------------------------------------ micro-kernels
 * polyc_gemm_ukr_<t>(kc, a, b, c, c_rs, c_cs, mr, nr, beta, betas, bias, bias_cs,
 *                    relu)
 *   a: MR x kc sliver, a[k * MR + i]; b: kc x NR sliver, b[k * NR + j], 64-byte
 *   aligned; C tile at c with valid part mr x nr; beta: 0 overwrite C (not
 *   read), 1 add to C, 2 add betas * C; bias (NULL: none) at bias[j * bias_cs]
 *   for the tile's columns.
 *
 * The SIMD kernel (AVX-512 or AVX2+FMA) is one body, NR = 2 vectors, MR rows,
 * written against the POLYC_GEMM_{T,VT,VL,MR,NR,ROWS,SETZERO,LOAD,LOADU,
 * STOREU,SET1,FMA,ADD,MAX} macros, which are (re)defined per element type
 * before each instantiation. */

#define POLYC_GEMM_V_DECL(i)                                                           \
    POLYC_GEMM_VT c##i##_0 = POLYC_GEMM_SETZERO(), c##i##_1 = POLYC_GEMM_SETZERO();
#define POLYC_GEMM_V_FMA_U0(i)                                                         \
    {                                                                                  \
        const POLYC_GEMM_VT ai = POLYC_GEMM_SET1(a[i]);                                \
        c##i##_0 = POLYC_GEMM_FMA(ai, b0, c##i##_0);                                   \
        c##i##_1 = POLYC_GEMM_FMA(ai, b1, c##i##_1);                                   \
    }
#define POLYC_GEMM_V_STEP(u)                                                           \
    {                                                                                  \
        const POLYC_GEMM_VT b0 = POLYC_GEMM_LOAD(b + (u) * POLYC_GEMM_NR);             \
        const POLYC_GEMM_VT b1 = POLYC_GEMM_LOAD(b + (u) * POLYC_GEMM_NR + POLYC_GEMM_VL); \
        POLYC_GEMM_ROWS(POLYC_GEMM_V_FMA_U0)                                           \
        a += POLYC_GEMM_MR;                                                            \
    }
#define POLYC_GEMM_V_PREFETCH_C(i)                                                     \
    _mm_prefetch((const char *)(c + (i) * c_rs), _MM_HINT_T0);                         \
    _mm_prefetch((const char *)(c + (i) * c_rs + POLYC_GEMM_NR - 1), _MM_HINT_T0);
/* The end of a full tile's store: the bias, the ReLU, the two vectors of row ci. */
#define POLYC_GEMM_V_FINISH(ci)                                                        \
    if (bias) {                                                                        \
        v0 = POLYC_GEMM_ADD(v0, bv0);                                                  \
        v1 = POLYC_GEMM_ADD(v1, bv1);                                                  \
    }                                                                                  \
    if (relu) {                                                                        \
        v0 = POLYC_GEMM_MAX(v0, zero);                                                 \
        v1 = POLYC_GEMM_MAX(v1, zero);                                                 \
    }                                                                                  \
    POLYC_GEMM_STOREU(ci, v0);                                                         \
    POLYC_GEMM_STOREU(ci + POLYC_GEMM_VL, v1);
#define POLYC_GEMM_V_STORE(i)                                                          \
    {                                                                                  \
        POLYC_GEMM_T *ci = c + (i) * c_rs;                                             \
        POLYC_GEMM_VT v0 = c##i##_0, v1 = c##i##_1;                                    \
        if (beta) {                                                                    \
            v0 = POLYC_GEMM_ADD(v0, POLYC_GEMM_LOADU(ci));                             \
            v1 = POLYC_GEMM_ADD(v1, POLYC_GEMM_LOADU(ci + POLYC_GEMM_VL));             \
        }                                                                              \
        POLYC_GEMM_V_FINISH(ci)                                                        \
    }
/* The store of a full tile when beta is neither 0 nor 1: C = acc + beta * C. */
#define POLYC_GEMM_V_STORE_SCALED(i)                                                   \
    {                                                                                  \
        POLYC_GEMM_T *ci = c + (i) * c_rs;                                             \
        POLYC_GEMM_VT v0 = POLYC_GEMM_FMA(POLYC_GEMM_LOADU(ci), bsv, c##i##_0);        \
        POLYC_GEMM_VT v1 =                                                             \
            POLYC_GEMM_FMA(POLYC_GEMM_LOADU(ci + POLYC_GEMM_VL), bsv, c##i##_1);       \
        POLYC_GEMM_V_FINISH(ci)                                                        \
    }
#define POLYC_GEMM_V_SPILL(i)                                                          \
    POLYC_GEMM_STOREU(buf + (i) * POLYC_GEMM_NR, c##i##_0);                            \
    POLYC_GEMM_STOREU(buf + (i) * POLYC_GEMM_NR + POLYC_GEMM_VL, c##i##_1);

#define POLYC_GEMM_DEFINE_VKERNEL(SFX)                                                 \
    static inline void polyc_gemm_ukr_##SFX(                                           \
        int64_t kc, const POLYC_GEMM_T *restrict a, const POLYC_GEMM_T *restrict b,    \
        POLYC_GEMM_T *restrict c, int64_t c_rs, int64_t c_cs, int64_t mr, int64_t nr,  \
        int beta, POLYC_GEMM_T betas, const POLYC_GEMM_T *bias, int64_t bias_cs,       \
        int relu)                                                                      \
    {                                                                                  \
        int64_t k;                                                                     \
        POLYC_GEMM_ROWS(POLYC_GEMM_V_DECL)                                             \
        POLYC_GEMM_ROWS(POLYC_GEMM_V_PREFETCH_C)                                       \
        for (k = 0; k < kc; k++) {                                                     \
            POLYC_GEMM_PREFETCH_A();                                                   \
            POLYC_GEMM_V_STEP(0)                                                       \
            b += POLYC_GEMM_NR;                                                        \
        }                                                                              \
        if (mr == POLYC_GEMM_MR && nr == POLYC_GEMM_NR && c_cs == 1) {                 \
            POLYC_GEMM_VT bv0 = POLYC_GEMM_SETZERO(), bv1 = POLYC_GEMM_SETZERO();      \
            const POLYC_GEMM_VT zero = POLYC_GEMM_SETZERO();                           \
            if (bias) {                                                                \
                POLYC_GEMM_T tb[POLYC_GEMM_NR];                                        \
                int64_t j;                                                             \
                for (j = 0; j < POLYC_GEMM_NR; j++)                                    \
                    tb[j] = bias[j * bias_cs];                                         \
                bv0 = POLYC_GEMM_LOADU(tb);                                            \
                bv1 = POLYC_GEMM_LOADU(tb + POLYC_GEMM_VL);                            \
            }                                                                          \
            if (beta <= 1) {                                                           \
                POLYC_GEMM_ROWS(POLYC_GEMM_V_STORE)                                    \
            } else {                                                                   \
                const POLYC_GEMM_VT bsv = POLYC_GEMM_SET1(betas);                      \
                POLYC_GEMM_ROWS(POLYC_GEMM_V_STORE_SCALED)                             \
            }                                                                          \
        } else {                                                                       \
            POLYC_GEMM_T buf[POLYC_GEMM_MR * POLYC_GEMM_NR];                           \
            POLYC_GEMM_ROWS(POLYC_GEMM_V_SPILL)                                        \
            polyc_gemm_tail_##SFX(buf, POLYC_GEMM_NR, c, c_rs, c_cs, mr, nr, beta,     \
                                  betas, bias, bias_cs, relu);                         \
        }                                                                              \
    }

/* Portable kernel: plain loops over an MR x NR buffer. */
#define POLYC_GEMM_DEFINE_PKERNEL(SFX)                                                 \
    static inline void polyc_gemm_ukr_##SFX(                                           \
        int64_t kc, const POLYC_GEMM_T *restrict a, const POLYC_GEMM_T *restrict b,    \
        POLYC_GEMM_T *restrict c, int64_t c_rs, int64_t c_cs, int64_t mr, int64_t nr,  \
        int beta, POLYC_GEMM_T betas, const POLYC_GEMM_T *bias, int64_t bias_cs,       \
        int relu)                                                                      \
    {                                                                                  \
        POLYC_GEMM_T acc[POLYC_GEMM_MR * POLYC_GEMM_NR];                               \
        int64_t i, j, k;                                                               \
        for (i = 0; i < POLYC_GEMM_MR * POLYC_GEMM_NR; i++)                            \
            acc[i] = 0;                                                                \
        for (k = 0; k < kc; k++) {                                                     \
            for (i = 0; i < POLYC_GEMM_MR; i++) {                                      \
                const POLYC_GEMM_T ai = a[i];                                          \
                for (j = 0; j < POLYC_GEMM_NR; j++)                                    \
                    acc[i * POLYC_GEMM_NR + j] += ai * b[j];                           \
            }                                                                          \
            a += POLYC_GEMM_MR;                                                        \
            b += POLYC_GEMM_NR;                                                        \
        }                                                                              \
        polyc_gemm_tail_##SFX(acc, POLYC_GEMM_NR, c, c_rs, c_cs, mr, nr, beta, betas,  \
                              bias, bias_cs, relu);                                    \
    }

/* ------------------------------------------------------- packing and driver
 * Written against POLYC_GEMM_{T,MR,NR,KC,MC,NC}. */
#define POLYC_GEMM_DEFINE_DRIVER(SFX)                                                  \
    typedef struct {                                                                   \
        int64_t M, N, K;                                                               \
        const POLYC_GEMM_T *A;                                                         \
        int64_t a_rs, a_cs;                                                            \
        const POLYC_GEMM_T *B;                                                         \
        int64_t b_rs, b_cs;                                                            \
        POLYC_GEMM_T *C;                                                               \
        int64_t c_rs, c_cs;                                                            \
        POLYC_GEMM_T alpha, beta; /* C = alpha * A B + beta * C */                     \
        const POLYC_GEMM_T *bias;                                                      \
        int64_t bias_cs;                                                               \
        int relu;                                                                      \
        polyc_gemm_geom q;  /* block sizes, split_m, threads: the call's phases */     \
        POLYC_GEMM_T *bpack, *apack;                                                   \
        int64_t a_len; /* elements of one thread's A buffer */                         \
        /* polyc_gemmx: the maps that are not a stride (NULL: the stride), and   \
         * their offset tables once built (NULL: not built) */                    \
        const polyc_gemm_dims *a_rd, *a_cd, *b_rd, *b_cd;                             \
        const int64_t *a_rt, *a_ct, *b_rt, *b_ct;                                      \
        /* polyc_gemmt: the band band_lo <= d <= band_hi, d = n - m (band           \
         * POLYC_GEMM_BAND_MN: only those C(m, n)), k - m (_MK: A(m, k) is zero       \
         * outside) or k - n (_NK: B(k, n) is zero outside); 0: no band */            \
        int banded;                                                                    \
        int64_t band_lo, band_hi;                                                      \
        const polyc_gemm_post *post; /* polyc_gemmx_post (NULL: none) */               \
    } polyc_gemm_args_##SFX;                                                           \
                                                                                       \
    POLYC_GEMM_DEFINE_POST_ROW(SFX)                                                    \
                                                                                       \
    /* The post-operations (gemm_api.h) on C's rows i0 .. i0 + mr - 1, columns         \
     * j0 .. j0 + nc - 1, once their sums are final: by the thread that stored         \
     * them, while they are in its caches.  Unit column strides (0 or 1 for            \
     * the operands: a per-row value is a scalar): polyc_gemm_post_row_<t>;            \
     * any others, element by element. */                                              \
    static void polyc_gemm_post_##SFX(const polyc_gemm_args_##SFX *g, int64_t i0,      \
                                      int64_t mr, int64_t j0, int64_t nc)              \
    {                                                                                  \
        const polyc_gemm_post *p = g->post;                                            \
        const polyc_gemm_operand *op[3];                                               \
        const POLYC_GEMM_T ident[3] = {(POLYC_GEMM_T)1, (POLYC_GEMM_T)-0.0, (POLYC_GEMM_T)-0.0}; \
        int unit = g->c_cs == 1, o;                                                    \
        int64_t i, j;                                                                  \
        op[0] = &p->mul; op[1] = &p->add; op[2] = &p->add2;                            \
        for (o = 0; o < 3; o++)                                                        \
            unit &= !op[o]->p || op[o]->cs <= 1;                                       \
        const int ops = p->mul.p || p->add.p || p->add2.p || p->relu;                  \
        for (i = i0; ops && i < i0 + mr; i++) {   /* (none: only the tile function) */ \
            POLYC_GEMM_T *ci = g->C + i * g->c_rs + j0 * g->c_cs;                      \
            const POLYC_GEMM_T *row[3];                                                \
            POLYC_GEMM_T s[3];                                                         \
            for (o = 0; o < 3; o++) {                                                  \
                row[o] = op[o]->p ? (const POLYC_GEMM_T *)op[o]->p + i * op[o]->rs     \
                                        + j0 * op[o]->cs : NULL;                       \
                s[o] = row[o] ? row[o][0] : ident[o];                                  \
            }                                                                          \
            if (unit) {                                                                \
                polyc_gemm_post_row_##SFX(ci, nc, row[0] && op[0]->cs ? row[0] : NULL, s[0], \
                                          row[1] && op[1]->cs ? row[1] : NULL, s[1],   \
                                          row[2] && op[2]->cs ? row[2] : NULL, s[2],   \
                                          p->relu);                                    \
                continue;                                                              \
            }                                                                          \
            for (j = 0; j < nc; j++) {                                                 \
                POLYC_GEMM_T v = ci[j * g->c_cs];                                      \
                if (row[0]) v *= row[0][j * op[0]->cs];                                \
                if (row[1]) v += row[1][j * op[1]->cs];                                \
                if (row[2]) v += row[2][j * op[2]->cs];                                \
                if (p->relu && !(v > 0) && (p->relu == 1 || v == v))                   \
                    v = 0;                                                             \
                ci[j * g->c_cs] = v;                                                   \
            }                                                                          \
        }                                                                              \
        if (p->tile)                                                                   \
            p->tile(p->tile_ctx, i0, mr, j0, nc);                                      \
    }                                                                                  \
                                                                                       \
    /* The post-operations on all of C, rows split among nt threads. */                \
    static void polyc_gemm_post_rows_##SFX(const void *ctx, int64_t t, int tid)        \
    {                                                                                  \
        const polyc_gemm_args_##SFX *g = (const polyc_gemm_args_##SFX *)ctx;           \
        (void)tid;                                                                     \
        polyc_gemm_post_##SFX(g, t * 8, polyc_gemm_min(8, g->M - t * 8), 0, g->N);     \
    }                                                                                  \
    static void polyc_gemm_post_all_##SFX(const polyc_gemm_args_##SFX *g, int nt)      \
    {                                                                                  \
        if (g->post)                                                                   \
            polyc_gemm_each(polyc_gemm_cdiv(g->M, 8), nt, polyc_gemm_post_rows_##SFX, g); \
    }                                                                                  \
                                                                                       \
                                                                                       \
    /* One MR x kc sliver of A through its maps (rows i0.., columns k0..). */      \
    static void polyc_gemm_pack_at_##SFX(const polyc_gemm_args_##SFX *g, int64_t mr,   \
                                         int64_t kc, int64_t i0, int64_t k0,           \
                                         POLYC_GEMM_T *restrict d)                     \
    {                                                                                  \
        int64_t ro[POLYC_GEMM_MR], i, k;                                               \
        for (i = 0; i < mr; i++)                                                       \
            ro[i] = polyc_gemm_at(g->a_rt, NULL, g->a_rs, i0 + i);                     \
        for (k = 0; k < kc; k++) {                                                     \
            const POLYC_GEMM_T *ak = g->A + polyc_gemm_at(g->a_ct, NULL, g->a_cs, k0 + k); \
            POLYC_GEMM_T *dk = d + k * POLYC_GEMM_MR;                                  \
            for (i = 0; i < mr; i++)                                                   \
                dk[i] = ak[ro[i]];                                                     \
            for (; i < POLYC_GEMM_MR; i++)                                             \
                dk[i] = 0;                                                             \
        }                                                                              \
    }                                                                                  \
                                                                                       \
    /* One kc x NR sliver of B through its maps (rows k0.., columns j0..): the    \
     * columns are copied in runs of consecutive offsets (a window row). */       \
    static void polyc_gemm_pack_bt_##SFX(const polyc_gemm_args_##SFX *g, int64_t nr,   \
                                         int64_t kc, int64_t k0, int64_t j0,           \
                                         POLYC_GEMM_T *restrict d)                     \
    {                                                                                  \
        int64_t co[POLYC_GEMM_NR], run[POLYC_GEMM_NR + 1], j, k, r, nrun = 0;          \
        for (j = 0; j < nr; j++) {                                                     \
            co[j] = polyc_gemm_at(g->b_ct, NULL, g->b_cs, j0 + j);                     \
            if (j == 0 || co[j] != co[j - 1] + 1)                                      \
                run[nrun++] = j;                                                       \
        }                                                                              \
        run[nrun] = nr;                                                                \
        for (k = 0; k < kc; k++) {                                                     \
            const POLYC_GEMM_T *bk = g->B + polyc_gemm_at(g->b_rt, NULL, g->b_rs, k0 + k); \
            POLYC_GEMM_T *dk = d + k * POLYC_GEMM_NR;                                  \
            for (r = 0; r < nrun; r++) {                                               \
                const POLYC_GEMM_T *src = bk + co[run[r]] - run[r];                    \
                for (j = run[r]; j < run[r + 1]; j++)                                  \
                    dk[j] = src[j];                                                    \
            }                                                                          \
            for (j = nr; j < POLYC_GEMM_NR; j++)                                       \
                dk[j] = 0;                                                             \
        }                                                                              \
    }                                                                                  \
                                                                                       \
    /* One MR x kc sliver of A (mr valid rows), zero-padded, k-major. */              \
    static void polyc_gemm_pack_a_##SFX(int64_t mr, int64_t kc,                        \
                                        const POLYC_GEMM_T *a, int64_t rs, int64_t cs, \
                                        POLYC_GEMM_T *restrict d)                      \
    {                                                                                  \
        int64_t i, k;                                                                  \
        if (polyc_gemm_pack_a_fast_##SFX(mr, kc, a, rs, cs, d))                        \
            return;                                                                    \
        if (mr == POLYC_GEMM_MR && rs > cs) {                                          \
            for (i = 0; i < POLYC_GEMM_MR; i++) {                                      \
                const POLYC_GEMM_T *ai = a + i * rs;                                   \
                if (cs == 1)                                                           \
                    for (k = 0; k < kc; k++)                                           \
                        d[k * POLYC_GEMM_MR + i] = ai[k];                              \
                else                                                                   \
                    for (k = 0; k < kc; k++)                                           \
                        d[k * POLYC_GEMM_MR + i] = ai[k * cs];                         \
            }                                                                          \
        } else if (mr == POLYC_GEMM_MR) {                                              \
            for (k = 0; k < kc; k++) {                                                 \
                const POLYC_GEMM_T *ak = a + k * cs;                                   \
                POLYC_GEMM_T *dk = d + k * POLYC_GEMM_MR;                              \
                if (rs == 1)                                                           \
                    memcpy(dk, ak, POLYC_GEMM_MR * sizeof(POLYC_GEMM_T));              \
                else                                                                   \
                    for (i = 0; i < POLYC_GEMM_MR; i++)                                \
                        dk[i] = ak[i * rs];                                            \
            }                                                                          \
        } else {                                                                       \
            for (k = 0; k < kc; k++) {                                                 \
                POLYC_GEMM_T *dk = d + k * POLYC_GEMM_MR;                              \
                for (i = 0; i < mr; i++)                                               \
                    dk[i] = a[i * rs + k * cs];                                        \
                for (; i < POLYC_GEMM_MR; i++)                                         \
                    dk[i] = 0;                                                         \
            }                                                                          \
        }                                                                              \
    }                                                                                  \
                                                                                       \
    /* ns whole kc x NR slivers of a row-major B (columns of unit stride), eight \
     * rows at a time. */                                                          \
    static void polyc_gemm_pack_b_rows_##SFX(int64_t ns, int64_t kc,                   \
                                             const POLYC_GEMM_T *b, int64_t rs,        \
                                             POLYC_GEMM_T *restrict d)                 \
    {                                                                                  \
        int64_t k0, k, s;                                                              \
        for (k0 = 0; k0 < kc; k0 += 8) {                                               \
            const int64_t k1 = polyc_gemm_min(k0 + 8, kc);                             \
            for (s = 0; s < ns; s++)                                                   \
                for (k = k0; k < k1; k++)                                              \
                    memcpy(d + s * POLYC_GEMM_NR * kc + k * POLYC_GEMM_NR,             \
                           b + k * rs + s * POLYC_GEMM_NR,                             \
                           POLYC_GEMM_NR * sizeof(POLYC_GEMM_T));                      \
        }                                                                              \
    }                                                                                  \
                                                                                       \
    /* One kc x NR sliver of B (nr valid columns), zero-padded, k-major. */           \
    static void polyc_gemm_pack_b_##SFX(int64_t nr, int64_t kc,                        \
                                        const POLYC_GEMM_T *b, int64_t rs, int64_t cs, \
                                        POLYC_GEMM_T *restrict d)                      \
    {                                                                                  \
        int64_t j, k;                                                                  \
        if (polyc_gemm_pack_b_fast_##SFX(nr, kc, b, rs, cs, d))                        \
            return;                                                                    \
        if (nr == POLYC_GEMM_NR && cs == 1) {                                          \
            for (k = 0; k < kc; k++)                                                   \
                memcpy(d + k * POLYC_GEMM_NR, b + k * rs,                              \
                       POLYC_GEMM_NR * sizeof(POLYC_GEMM_T));                          \
        } else if (nr == POLYC_GEMM_NR && cs > rs) {                                   \
            for (j = 0; j < POLYC_GEMM_NR; j++) {                                      \
                const POLYC_GEMM_T *bj = b + j * cs;                                   \
                if (rs == 1)                                                           \
                    for (k = 0; k < kc; k++)                                           \
                        d[k * POLYC_GEMM_NR + j] = bj[k];                              \
                else                                                                   \
                    for (k = 0; k < kc; k++)                                           \
                        d[k * POLYC_GEMM_NR + j] = bj[k * rs];                         \
            }                                                                          \
        } else {                                                                       \
            for (k = 0; k < kc; k++) {                                                 \
                POLYC_GEMM_T *dk = d + k * POLYC_GEMM_NR;                              \
                for (j = 0; j < nr; j++)                                               \
                    dk[j] = b[k * rs + j * cs];                                        \
                for (; j < POLYC_GEMM_NR; j++)                                         \
                    dk[j] = 0;                                                         \
            }                                                                          \
        }                                                                              \
    }                                                                                  \
                                                                                       \
    /* A packed sliver d (w columns, the first r valid; rows k0.., first index      \
     * f0) with its elements outside the band (k - index not in [lo, hi]) set to  \
     * zero: the triangle of A (_MK) or B (_NK) that the domain leaves out. */    \
    static void polyc_gemm_band_zero_##SFX(const polyc_gemm_args_##SFX *g,          \
                                           POLYC_GEMM_T *restrict d, int64_t w,        \
                                           int64_t r, int64_t kc, int64_t f0, int64_t k0) \
    {                                                                                  \
        int64_t k, i;                                                                  \
        if (k0 - (f0 + r - 1) >= g->band_lo && k0 + kc - 1 - f0 <= g->band_hi)         \
            return;                                  /* all inside */                  \
        for (k = 0; k < kc; k++)                                                       \
            for (i = 0; i < r; i++) {                                                  \
                const int64_t e = (k0 + k) - (f0 + i);                                 \
                if (e < g->band_lo || e > g->band_hi)                                  \
                    d[k * w + i] = 0;                                                  \
            }                                                                          \
    }                                                                                  \
                                                                                       \
    /* An A sliver (rows i0.., columns k0..) through the maps or the strides,      \
     * times alpha when alpha != 1 (the sliver is still in L1). */                 \
    static void polyc_gemm_pack_a_any_##SFX(const polyc_gemm_args_##SFX *g, int64_t mr, \
                                            int64_t kc, int64_t i0, int64_t k0,        \
                                            POLYC_GEMM_T *restrict d)                  \
    {                                                                                  \
        if (g->a_rt || g->a_ct)                                                        \
            polyc_gemm_pack_at_##SFX(g, mr, kc, i0, k0, d);                            \
        else                                                                           \
            polyc_gemm_pack_a_##SFX(mr, kc, g->A + i0 * g->a_rs + k0 * g->a_cs, g->a_rs, \
                                    g->a_cs, d);                                       \
        if (g->banded == POLYC_GEMM_BAND_MK)                                           \
            polyc_gemm_band_zero_##SFX(g, d, POLYC_GEMM_MR, mr, kc, i0, k0);           \
        if (g->alpha != (POLYC_GEMM_T)1) {                                             \
            const POLYC_GEMM_T alpha = g->alpha;                                       \
            const int64_t len = kc * POLYC_GEMM_MR;                                    \
            int64_t e;                                                                 \
            for (e = 0; e < len; e++)                                                  \
                d[e] *= alpha;                                                         \
        }                                                                              \
    }                                                                                  \
                                                                                       \
    /* A tile crossing the band's edge (polyc_gemmt): the micro-kernel's MR x NR   \
     * product into a buffer, then only the elements in the band are stored       \
     * (beta as in polyc_gemm_ukr: 0 overwrite, 1 add, 2 add g->beta * C; no      \
     * bias, no ReLU: polyc_gemmt has no epilogue). */                            \
    static void polyc_gemm_masked_##SFX(const polyc_gemm_args_##SFX *g, int64_t kc,    \
                                        const POLYC_GEMM_T *a, const POLYC_GEMM_T *b,  \
                                        POLYC_GEMM_T *c, int64_t r0, int64_t c0,       \
                                        int64_t mr, int64_t nr, int beta)              \
    {                                                                                  \
        POLYC_GEMM_T buf[POLYC_GEMM_MR * POLYC_GEMM_NR];                               \
        int64_t i, j;                                                                  \
        polyc_gemm_ukr_##SFX(kc, a, b, buf, POLYC_GEMM_NR, 1, POLYC_GEMM_MR,           \
                             POLYC_GEMM_NR, 0, 0, NULL, 0, 0);                         \
        for (i = 0; i < mr; i++) {                                                     \
            const int64_t d = c0 - (r0 + i);                                           \
            const int64_t j0 = d >= g->band_lo ? 0 : g->band_lo - d;                   \
            const int64_t j1 = d + nr - 1 <= g->band_hi ? nr : g->band_hi - d + 1;     \
            POLYC_GEMM_T *ci = c + i * g->c_rs;                                        \
            for (j = j0; j < j1; j++) {                                                \
                POLYC_GEMM_T *cij = ci + j * g->c_cs;                                  \
                const POLYC_GEMM_T v = buf[i * POLYC_GEMM_NR + j];                     \
                *cij = beta == 0 ? v : beta == 1 ? *cij + v : g->beta * *cij + v;      \
            }                                                                          \
        }                                                                              \
    }                                                                                  \
                                                                                       \
    /* Loops jr (slivers j_lo..j_hi of the B panel) and ir over a packed A block   \
     * of mcb rows starting at row i0. */                                          \
    static void polyc_gemm_macro_##SFX(const polyc_gemm_args_##SFX *g, int64_t kc,     \
                                       const POLYC_GEMM_T *ap, int64_t i0, int64_t mcb, \
                                       int64_t jc, int64_t nc, int64_t j_lo,           \
                                       int64_t j_hi, int beta, const POLYC_GEMM_T *bias, \
                                       int relu, int64_t pc)                           \
    {                                                                                  \
        int64_t jr, ir;                                                                \
        const int64_t msl = polyc_gemm_cdiv(mcb, POLYC_GEMM_MR);                       \
        for (jr = j_lo; jr < j_hi; jr++) {                                             \
            const int64_t nr = polyc_gemm_min(POLYC_GEMM_NR, nc - jr * POLYC_GEMM_NR);  \
            const int64_t c0 = jc + jr * POLYC_GEMM_NR;                                \
            const POLYC_GEMM_T *bp = g->bpack + jr * POLYC_GEMM_NR * kc;               \
            POLYC_GEMM_T *cj = g->C + i0 * g->c_rs + c0 * g->c_cs;                     \
            const POLYC_GEMM_T *bj = bias ? bias + jr * POLYC_GEMM_NR * g->bias_cs : NULL; \
            for (ir = 0; ir < msl; ir++) {                                             \
                const int64_t mr = polyc_gemm_min(POLYC_GEMM_MR, mcb - ir * POLYC_GEMM_MR); \
                POLYC_GEMM_T *c = cj + ir * POLYC_GEMM_MR * g->c_rs;                   \
                const int64_t r0 = i0 + ir * POLYC_GEMM_MR;                            \
                int64_t ks = pc, ke = pc + kc;     /* the tile's part of the k block */ \
                if (g->banded == POLYC_GEMM_BAND_MN) {                                 \
                    /* the tile's n - m ranges over [dmin, dmax] */                    \
                    const int64_t dmin = c0 - (r0 + mr - 1), dmax = c0 + nr - 1 - r0;  \
                    if (dmax < g->band_lo || dmin > g->band_hi)                        \
                        continue;                    /* outside the band: no C */      \
                    if (dmin < g->band_lo || dmax > g->band_hi) {                      \
                        polyc_gemm_masked_##SFX(g, kc, ap + ir * POLYC_GEMM_MR * kc, bp, \
                                                c, r0, c0, mr, nr, beta);              \
                        continue;                                                      \
                    }                                                                  \
                } else if (g->banded) {                                                \
                    /* k in [first + lo, last + hi] of the tile's rows (_MK) or        \
                     * columns (_NK): the packed operand is zero elsewhere */          \
                    const int64_t f = g->banded == POLYC_GEMM_BAND_MK ? r0 : c0;        \
                    const int64_t l = f + (g->banded == POLYC_GEMM_BAND_MK ? mr : nr) - 1; \
                    ks = polyc_gemm_max(ks, polyc_gemm_add_sat(f, g->band_lo));        \
                    ke = polyc_gemm_min(ke, polyc_gemm_add_sat(polyc_gemm_add_sat(l, g->band_hi), 1)); \
                    if (ks >= ke) {                                                    \
                        if (beta == 1)                                                 \
                            continue;               /* adds nothing */                 \
                        ks = ke = pc;                /* C = beta * C */                \
                    }                                                                  \
                }                                                                      \
                polyc_gemm_ukr_##SFX(ke - ks, ap + ir * POLYC_GEMM_MR * kc + (ks - pc) * POLYC_GEMM_MR, \
                                     bp + (ks - pc) * POLYC_GEMM_NR, c, g->c_rs,        \
                                     g->c_cs, mr, nr, beta, g->beta, bj, g->bias_cs, relu); \
            }                                                                          \
        }                                                                              \
    }                                                                                  \
                                                                                       \
    /* Item c of phase p, done by thread tid (see polyc_gemm_phase). */                \
    static void polyc_gemm_item_##SFX(const polyc_gemm_args_##SFX *g, const polyc_gemm_phase *p, \
                                      int64_t c, int tid)                              \
    {                                                                                  \
        const int beta = p->pc > 0 ? 1 : g->beta == 0 ? 0 : g->beta == 1 ? 1 : 2;      \
        const int last = p->pc + p->kc >= g->K;                                        \
        const POLYC_GEMM_T *bias = last && g->bias ? g->bias + p->jc * g->bias_cs : NULL; \
        const int relu = last && g->relu;                                              \
        const int64_t kc = p->kc, pc = p->pc, jc = p->jc, nc = p->nc;                  \
        int64_t s;                                                                     \
        POLYC_GEMM_ON_CHUNK(tid);                                                      \
        if (p->kind == 0) {                                                            \
            const int64_t s1 = polyc_gemm_min((c + 1) * p->ch, p->nsl);                \
            s = c * p->ch;                                                             \
            if (!g->b_rt && !g->b_ct && g->b_cs == 1 && g->banded != POLYC_GEMM_BAND_NK \
                && jc + s1 * POLYC_GEMM_NR <= jc + nc) {                               \
                /* whole slivers of a row-major B: eight rows of the chunk at a time, \
                 * so that the reads run along rows (a sliver alone reads 64 or 128  \
                 * bytes per row, each row on another page: 20% slower from memory) */ \
                polyc_gemm_pack_b_rows_##SFX(s1 - s, kc,                               \
                                             g->B + pc * g->b_rs + jc + s * POLYC_GEMM_NR, \
                                             g->b_rs, g->bpack + s * POLYC_GEMM_NR * kc); \
                s = s1;                                                                \
            }                                                                          \
            for (; s < s1; s++) {                                                      \
                const int64_t nr = polyc_gemm_min(POLYC_GEMM_NR, nc - s * POLYC_GEMM_NR); \
                const int64_t j0 = jc + s * POLYC_GEMM_NR;                             \
                if (g->b_rt || g->b_ct)                                                \
                    polyc_gemm_pack_bt_##SFX(g, nr, kc, pc, j0, g->bpack + s * POLYC_GEMM_NR * kc); \
                else                                                                   \
                    polyc_gemm_pack_b_##SFX(nr, kc, g->B + pc * g->b_rs + j0 * g->b_cs, g->b_rs, \
                                            g->b_cs, g->bpack + s * POLYC_GEMM_NR * kc); \
                if (g->banded == POLYC_GEMM_BAND_NK)                                   \
                    polyc_gemm_band_zero_##SFX(g, g->bpack + s * POLYC_GEMM_NR * kc,   \
                                               POLYC_GEMM_NR, nr, kc, j0, pc);         \
            }                                                                          \
        } else if (p->kind == 1) {                                                     \
            /* block c: the slivers [msl c / nic, msl (c + 1) / nic); a band of C or   \
             * A open below (n or k <= m + hi: the last rows hold the most of it)     \
             * is taken from its last block, the longest work first */               \
            const int64_t msl = polyc_gemm_cdiv(g->M, POLYC_GEMM_MR);                  \
            if ((g->banded == POLYC_GEMM_BAND_MN || g->banded == POLYC_GEMM_BAND_MK) &&    \
                g->band_lo == INT64_MIN)                                               \
                c = g->q.nic - 1 - c;                                                  \
            const int64_t r0 = msl * c / g->q.nic, r1 = msl * (c + 1) / g->q.nic;      \
            const int64_t i0 = r0 * POLYC_GEMM_MR;                                     \
            const int64_t mcb = polyc_gemm_min(r1 * POLYC_GEMM_MR, g->M) - i0;         \
            POLYC_GEMM_T *ap = g->apack + tid * g->a_len;                              \
            for (s = 0; s < r1 - r0; s++)                                              \
                polyc_gemm_pack_a_any_##SFX(g, polyc_gemm_min(POLYC_GEMM_MR, mcb - s * POLYC_GEMM_MR), \
                                            kc, i0 + s * POLYC_GEMM_MR, pc,            \
                                            ap + s * POLYC_GEMM_MR * kc);              \
            polyc_gemm_macro_##SFX(g, kc, ap, i0, mcb, jc, nc, 0, p->nsl, beta, bias, relu, pc); \
            if (g->post && last)    /* the block's sums are final (in this core's L2) */ \
                polyc_gemm_post_##SFX(g, i0, mcb, jc, nc);                             \
        } else if (p->kind == 2) {                                                     \
            const int64_t s1 = polyc_gemm_min((c + 1) * p->ach, p->bsl);               \
            for (s = c * p->ach; s < s1; s++)                                          \
                polyc_gemm_pack_a_any_##SFX(g, polyc_gemm_min(POLYC_GEMM_MR, p->mcb - s * POLYC_GEMM_MR), \
                                            kc, p->i0 + s * POLYC_GEMM_MR, pc,         \
                                            g->apack + s * POLYC_GEMM_MR * kc);        \
        } else {                                                                       \
            const int64_t s1 = polyc_gemm_min((c + 1) * p->ch, p->nsl);                \
            polyc_gemm_macro_##SFX(g, kc, g->apack, p->i0, p->mcb, jc, nc, c * p->ch,  \
                                   s1, beta, bias, relu, pc);                          \
            if (g->post && last)                                                       \
                polyc_gemm_post_##SFX(g, p->i0, p->mcb, jc + c * p->ch * POLYC_GEMM_NR, \
                                      polyc_gemm_min(s1 * POLYC_GEMM_NR, nc)           \
                                          - c * p->ch * POLYC_GEMM_NR);                \
        }                                                                              \
    }                                                                                  \
                                                                                       \
    /* What a thread does in a call: item t, then every item it can claim              \
     * (items wait for the earlier phases: polyc_gemm_wait_done). */                   \
    static void polyc_gemm_work_##SFX(polyc_gemm_job *j, void *ctx, int tid, int64_t t, \
                                      uint64_t e)                                      \
    {                                                                                  \
        const polyc_gemm_args_##SFX *g = (const polyc_gemm_args_##SFX *)ctx;           \
        polyc_gemm_phase p;                                                            \
        polyc_gemm_phase_first(&g->q, &p);                                             \
        do {                                                                           \
            while (t >= p.start + p.count)                                             \
                polyc_gemm_phase_next(&g->q, &p);                                      \
            polyc_gemm_wait_done(j, p.start);                                          \
            polyc_gemm_item_##SFX(g, &p, t - p.start, tid);                            \
            __atomic_add_fetch(&j->done, 1, __ATOMIC_RELEASE);                         \
        } while ((t = polyc_gemm_claim(j, e)) >= 0);                                   \
    }                                                                                  \
                                                                                       \
    /* The simple loops of a band of the reduction (_MK, _NK) in the packed      \
     * path's order: C = beta * C, then for each k (a panel of one), the row k    \
     * of B copied (64 columns at a time) before any C of those columns is       \
     * written: in place (the output also an operand, polyc.callbox's            \
     * inplace_reason) as the packed path is. */                                 \
    static void polyc_gemm_simple_panels_##SFX(const polyc_gemm_args_##SFX *g)         \
    {                                                                                  \
        POLYC_GEMM_T buf[64];                                                          \
        int64_t i, j, k, j0;                                                           \
        if (g->beta != (POLYC_GEMM_T)1)                                                \
            for (i = 0; i < g->M; i++)                                                 \
                for (j = 0; j < g->N; j++) {                                           \
                    POLYC_GEMM_T *cij = g->C + i * g->c_rs + j * g->c_cs;              \
                    *cij = g->beta == (POLYC_GEMM_T)0 ? (POLYC_GEMM_T)0 : g->beta * *cij; \
                }                                                                      \
        for (j0 = 0; j0 < g->N; j0 += 64) {                                            \
            const int64_t nj = polyc_gemm_min(64, g->N - j0);                          \
            for (k = 0; k < g->K; k++) {                                               \
                for (j = 0; j < nj; j++) {                                             \
                    const int64_t e = k - (j0 + j);                                    \
                    buf[j] = g->banded == POLYC_GEMM_BAND_NK &&                        \
                        (e < g->band_lo || e > g->band_hi) ? (POLYC_GEMM_T)0           \
                        : g->B[k * g->b_rs + (j0 + j) * g->b_cs];                      \
                }                                                                      \
                for (i = 0; i < g->M; i++) {                                           \
                    POLYC_GEMM_T a, *ci = g->C + i * g->c_rs + j0 * g->c_cs;           \
                    if (g->banded == POLYC_GEMM_BAND_MK &&                             \
                        (k - i < g->band_lo || k - i > g->band_hi))                    \
                        continue;                                                      \
                    a = g->alpha * g->A[i * g->a_rs + k * g->a_cs];                    \
                    for (j = 0; j < nj; j++)                                           \
                        ci[j * g->c_cs] += a * buf[j];                                 \
                }                                                                      \
            }                                                                          \
        }                                                                              \
    }                                                                                  \
                                                                                       \
    /* K == 0 (or alpha == 0), or no memory for the packing buffers:              \
     * straightforward loops. */                                                   \
    static void polyc_gemm_simple_##SFX(const polyc_gemm_args_##SFX *g)                \
    {                                                                                  \
        int64_t i, j, k;                                                               \
        if (g->banded >= POLYC_GEMM_BAND_MK && g->K > 0) {                             \
            polyc_gemm_simple_panels_##SFX(g);                                         \
            return;                                                                    \
        }                                                                              \
        for (i = 0; i < g->M; i++) {                                                   \
            const int64_t ai = polyc_gemm_at(NULL, g->a_rd, g->a_rs, i);               \
            for (j = 0; j < g->N; j++) {                                               \
                const int64_t bj = polyc_gemm_at(NULL, g->b_cd, g->b_cs, j);           \
                POLYC_GEMM_T s = 0, *cij = g->C + i * g->c_rs + j * g->c_cs;           \
                if (g->banded == POLYC_GEMM_BAND_MN &&                                 \
                    (j - i < g->band_lo || j - i > g->band_hi))                        \
                    continue;                                                          \
                for (k = 0; k < g->K; k++) {                                           \
                    const int64_t e = k - (g->banded == POLYC_GEMM_BAND_MK ? i : j);   \
                    if (g->banded >= POLYC_GEMM_BAND_MK &&                             \
                        (e < g->band_lo || e > g->band_hi))                            \
                        continue;                                                      \
                    s += g->A[ai + polyc_gemm_at(NULL, g->a_cd, g->a_cs, k)] *         \
                         g->B[polyc_gemm_at(NULL, g->b_rd, g->b_rs, k) + bj];          \
                }                                                                      \
                if (g->K > 0 && g->alpha != (POLYC_GEMM_T)1)                           \
                    s *= g->alpha;                                                     \
                if (g->beta == (POLYC_GEMM_T)1)                                        \
                    s += *cij;                                                         \
                else if (g->beta != (POLYC_GEMM_T)0)                                   \
                    s += g->beta * *cij;                                               \
                if (g->bias)                                                           \
                    s += g->bias[j * g->bias_cs];                                      \
                if (g->relu && !(s > (POLYC_GEMM_T)0))                                 \
                    s = 0;                                                             \
                *cij = s;                                                              \
            }                                                                          \
        }                                                                              \
    }                                                                                  \
                                                                                       \
    POLYC_GEMM_DEFINE_SMALL(SFX)                                                       \
    POLYC_GEMM_DEFINE_WIN(SFX)                                                         \
    POLYC_GEMM_DEFINE_FEW(SFX)                                                         \
                                                                                       \
    /* Blocking, buffers (and the offset tables of the maps that are not a        \
     * stride), threads; g holds the operands. */                                 \
    static void polyc_gemm_run_##SFX(polyc_gemm_args_##SFX *g, int nthreads)           \
    {                                                                                  \
        int nt = nthreads, cached;                                                     \
        int64_t msl, nkb, b_len, t_len, *tab;                                          \
        const int64_t M = g->M, N = g->N, K = g->K;                                    \
        if (K == 0 || g->alpha == (POLYC_GEMM_T)0) { /* C = beta C: A, B not read */   \
            g->K = 0;                                                                  \
            polyc_gemm_simple_##SFX(g);                                                \
            polyc_gemm_post_all_##SFX(g, 1);                                           \
            return;                                                                    \
        }                                                                              \
        POLYC_GEMM_NUM_THREADS(nt);                                                    \
        if (polyc_gemm_few_##SFX(g, nt)) { /* its threads follow B's bytes */         \
            polyc_gemm_post_all_##SFX(g, nt);                                          \
            return;                                                                    \
        }                                                                              \
        {   /* at least 2^21 multiply-adds (128^3) per thread */                      \
            const double per = (double)M * (double)N * (double)K / (double)(1 << 21);  \
            if (per < (double)nt)                                                      \
                nt = per < 1.0 ? 1 : (int)per;                                         \
        }                                                                              \
        if (polyc_gemm_win_##SFX(g, nt))                                               \
            return;                                                                    \
        if (polyc_gemm_small_##SFX(g, nt))                                             \
            return;                                                                    \
        nkb = polyc_gemm_cdiv(K, POLYC_GEMM_KC);                                       \
        g->q.kc = polyc_gemm_cdiv(K, nkb);                                             \
        g->q.nc = polyc_gemm_min(N, POLYC_GEMM_NC);                                    \
        msl = polyc_gemm_cdiv(M, POLYC_GEMM_MR);                                       \
        /* split M (each thread packs and multiplies its own blocks of A) only         \
         * when A does not fit one MC block: otherwise the block is packed once        \
         * and the threads share it, taking chunks of B slivers (kinds 2, 3),          \
         * each B sliver reused over all of M from L1, not over the few slivers        \
         * of one of 3 * nt blocks (M = 128 rows on AVX2: 4 slivers; 2 threads,        \
         * polyc/numpy 0.62-0.80 -> 0.68-0.86 over 3 alternated rounds) */             \
        g->q.split_m = nt == 1 || (msl >= 4 * nt && M > POLYC_GEMM_MC);                \
        if (g->q.split_m) {                                                            \
            /* nic blocks of A, a multiple of nt, at least 3 per thread when M         \
             * allows blocks of 2 slivers: taken dynamically, they even out a          \
             * core slowed by another process (the B panel streams once per            \
             * block, from L2/L3); their sizes differ by at most one sliver */         \
            int64_t nic = polyc_gemm_cdiv(M, POLYC_GEMM_MC);                           \
            if (nt > 1 && nic < (g->banded ? 4 : 3) * nt)                              \
                nic = polyc_gemm_min((g->banded ? 4 : 3) * nt, msl / 2);              \
            nic = polyc_gemm_cdiv(nic, nt) * nt;                                       \
            g->q.nic = nic;                                                            \
            g->q.mc = polyc_gemm_cdiv(msl, nic) * POLYC_GEMM_MR;                       \
        } else {                                                                       \
            g->q.mc = polyc_gemm_min(POLYC_GEMM_MC, msl * POLYC_GEMM_MR);              \
        }                                                                              \
        g->a_len = polyc_gemm_cdiv(g->q.mc * g->q.kc, 64) * 64;                        \
        b_len = polyc_gemm_cdiv(g->q.kc * polyc_gemm_cdiv(g->q.nc, POLYC_GEMM_NR) * POLYC_GEMM_NR, 64) * 64; \
        t_len = (g->a_rd ? M : 0) + (g->a_cd ? K : 0) + (g->b_rd ? K : 0) + (g->b_cd ? N : 0); \
        g->bpack = (POLYC_GEMM_T *)polyc_gemm_acquire(                                 \
            (size_t)(b_len + g->a_len * (g->q.split_m ? nt : 1)) * sizeof(POLYC_GEMM_T)  \
                + (size_t)t_len * sizeof(int64_t),                                     \
            &cached);                                                                  \
        if (!g->bpack) {                                                               \
            polyc_gemm_simple_##SFX(g);                                                \
            polyc_gemm_post_all_##SFX(g, 1);                                           \
            return;                                                                    \
        }                                                                              \
        g->apack = g->bpack + b_len;                                                   \
        tab = (int64_t *)(g->apack + g->a_len * (g->q.split_m ? nt : 1));              \
        if (g->a_rd) { polyc_gemm_table(g->a_rd, M, tab); g->a_rt = tab; tab += M; }   \
        if (g->a_cd) { polyc_gemm_table(g->a_cd, K, tab); g->a_ct = tab; tab += K; }   \
        if (g->b_rd) { polyc_gemm_table(g->b_rd, K, tab); g->b_rt = tab; tab += K; }   \
        if (g->b_cd) { polyc_gemm_table(g->b_cd, N, tab); g->b_ct = tab; }             \
        g->q.M = M; g->q.N = N; g->q.K = K;                                            \
        g->q.mr = POLYC_GEMM_MR; g->q.nr = POLYC_GEMM_NR;                              \
        g->q.nthr = nt;                                                                \
        polyc_gemm_run_job(polyc_gemm_items(&g->q), nt, polyc_gemm_work_##SFX, g);     \
        polyc_gemm_release(g->bpack, cached);                                          \
    }                                                                                  \
                                                                                       \
    /* The operands of a call with strides (polyc_gemm, polyc_gemmt) into g,    \
     * everything else zero. */                                                    \
    static void polyc_gemm_strided_##SFX(                                              \
        polyc_gemm_args_##SFX *g, int64_t M, int64_t N, int64_t K,                     \
        const POLYC_GEMM_T *A, int64_t a_rs, int64_t a_cs, const POLYC_GEMM_T *B,      \
        int64_t b_rs, int64_t b_cs, POLYC_GEMM_T *C, int64_t c_rs, int64_t c_cs,       \
        POLYC_GEMM_T alpha, POLYC_GEMM_T beta)                                         \
    {                                                                                  \
        memset(g, 0, sizeof *g);                                                       \
        g->M = M; g->N = N; g->K = K < 0 ? 0 : K;                                      \
        g->A = A; g->a_rs = a_rs; g->a_cs = a_cs;                                      \
        g->B = B; g->b_rs = b_rs; g->b_cs = b_cs;                                      \
        g->C = C; g->c_rs = c_rs; g->c_cs = c_cs;                                      \
        g->alpha = alpha; g->beta = beta;                                              \
    }                                                                                  \
                                                                                       \
    POLYC_GEMM_API void polyc_gemm_##SFX(                                              \
        int64_t M, int64_t N, int64_t K, const POLYC_GEMM_T *A, int64_t a_rs,          \
        int64_t a_cs, const POLYC_GEMM_T *B, int64_t b_rs, int64_t b_cs,               \
        POLYC_GEMM_T *C, int64_t c_rs, int64_t c_cs, POLYC_GEMM_T alpha,               \
        POLYC_GEMM_T beta, const POLYC_GEMM_T *bias, int64_t bias_cs, int relu,        \
        int nthreads)                                                                  \
    {                                                                                  \
        polyc_gemm_args_##SFX g;                                                       \
        if (M <= 0 || N <= 0)                                                          \
            return;                                                                    \
        polyc_gemm_strided_##SFX(&g, M, N, K, A, a_rs, a_cs, B, b_rs, b_cs, C, c_rs,   \
                                 c_cs, alpha, beta);                                   \
        g.bias = bias; g.bias_cs = bias_cs; g.relu = relu;                             \
        polyc_gemm_run_##SFX(&g, nthreads);                                            \
    }                                                                                  \
                                                                                       \
    POLYC_GEMM_API void polyc_gemmt_##SFX(                                             \
        int64_t M, int64_t N, int64_t K, const POLYC_GEMM_T *A, int64_t a_rs,          \
        int64_t a_cs, const POLYC_GEMM_T *B, int64_t b_rs, int64_t b_cs,               \
        POLYC_GEMM_T *C, int64_t c_rs, int64_t c_cs, POLYC_GEMM_T alpha,               \
        POLYC_GEMM_T beta, int band, int64_t band_lo, int64_t band_hi, int nthreads)   \
    {                                                                                  \
        polyc_gemm_args_##SFX g;                                                       \
        if (M <= 0 || N <= 0)                                                          \
            return;                                                                    \
        if (band == POLYC_GEMM_BAND_MN && (band_lo > band_hi || band_hi < -(M - 1) ||  \
                                           band_lo > N - 1))                           \
            return;                                      /* no element of C */         \
        polyc_gemm_strided_##SFX(&g, M, N, K, A, a_rs, a_cs, B, b_rs, b_cs, C, c_rs,   \
                                 c_cs, alpha, beta);                                   \
        g.banded = band >= POLYC_GEMM_BAND_MN && band <= POLYC_GEMM_BAND_NK ? band : 0; \
        g.band_lo = band_lo; g.band_hi = band_hi;                                      \
        polyc_gemm_run_##SFX(&g, nthreads);                                            \
    }                                                                                  \
                                                                                       \
    /* The operands of a call with index maps (polyc_gemmx, polyc_gemmx_post)          \
     * into g, everything else zero. */                                                \
    static void polyc_gemm_mapped_##SFX(                                               \
        polyc_gemm_args_##SFX *g, int64_t M, int64_t N, int64_t K, const POLYC_GEMM_T *A, \
        const polyc_gemm_dims *a_rows, const polyc_gemm_dims *a_cols,                  \
        const POLYC_GEMM_T *B, const polyc_gemm_dims *b_rows,                          \
        const polyc_gemm_dims *b_cols, POLYC_GEMM_T *C, int64_t c_rs, int64_t c_cs,    \
        POLYC_GEMM_T alpha, POLYC_GEMM_T beta)                                         \
    {                                                                                  \
        memset(g, 0, sizeof *g);                                                       \
        g->M = M; g->N = N; g->K = K < 0 ? 0 : K;                                      \
        g->A = A; g->B = B; g->C = C; g->c_rs = c_rs; g->c_cs = c_cs;                  \
        g->a_rd = polyc_gemm_collapse(a_rows, &g->a_rs) ? NULL : a_rows;               \
        g->a_cd = polyc_gemm_collapse(a_cols, &g->a_cs) ? NULL : a_cols;               \
        g->b_rd = polyc_gemm_collapse(b_rows, &g->b_rs) ? NULL : b_rows;               \
        g->b_cd = polyc_gemm_collapse(b_cols, &g->b_cs) ? NULL : b_cols;               \
        g->alpha = alpha; g->beta = beta;                                              \
    }                                                                                  \
                                                                                       \
    POLYC_GEMM_API void polyc_gemmx_##SFX(                                             \
        int64_t M, int64_t N, int64_t K, const POLYC_GEMM_T *A,                        \
        const polyc_gemm_dims *a_rows, const polyc_gemm_dims *a_cols,                  \
        const POLYC_GEMM_T *B, const polyc_gemm_dims *b_rows,                          \
        const polyc_gemm_dims *b_cols, POLYC_GEMM_T *C, int64_t c_rs, int64_t c_cs,    \
        POLYC_GEMM_T alpha, POLYC_GEMM_T beta, const POLYC_GEMM_T *bias,               \
        int64_t bias_cs, int relu, int nthreads)                                       \
    {                                                                                  \
        polyc_gemm_args_##SFX g;                                                       \
        if (M <= 0 || N <= 0)                                                          \
            return;                                                                    \
        polyc_gemm_mapped_##SFX(&g, M, N, K, A, a_rows, a_cols, B, b_rows, b_cols, C,  \
                                c_rs, c_cs, alpha, beta);                              \
        g.bias = bias; g.bias_cs = bias_cs; g.relu = relu;                             \
        polyc_gemm_run_##SFX(&g, nthreads);                                            \
    }                                                                                  \
                                                                                       \
    POLYC_GEMM_API void polyc_gemmx_post_##SFX(                                        \
        int64_t M, int64_t N, int64_t K, const POLYC_GEMM_T *A,                        \
        const polyc_gemm_dims *a_rows, const polyc_gemm_dims *a_cols,                  \
        const POLYC_GEMM_T *B, const polyc_gemm_dims *b_rows,                          \
        const polyc_gemm_dims *b_cols, POLYC_GEMM_T *C, int64_t c_rs, int64_t c_cs,    \
        POLYC_GEMM_T alpha, POLYC_GEMM_T beta, const polyc_gemm_post *post,            \
        int nthreads)                                                                  \
    {                                                                                  \
        polyc_gemm_args_##SFX g;                                                       \
        if (M <= 0 || N <= 0)                                                          \
            return;                                                                    \
        polyc_gemm_mapped_##SFX(&g, M, N, K, A, a_rows, a_cols, B, b_rows, b_cols, C,  \
                                c_rs, c_cs, alpha, beta);                              \
        g.post = post && (post->mul.p || post->add.p || post->add2.p || post->relu     \
                          || post->tile) ? post : NULL;                                \
        polyc_gemm_run_##SFX(&g, nthreads);                                            \
    }

#ifdef _OPENMP
#define POLYC_GEMM_NUM_THREADS(nt)                                                     \
    do {                                                                               \
        if ((nt) <= 0)                                                                 \
            (nt) = omp_get_max_threads();                                              \
        if ((nt) <= 0)                                                                 \
            (nt) = 1;                                                                  \
    } while (0)
#else
#define POLYC_GEMM_NUM_THREADS(nt) ((nt) = 1)
#endif

/* --------------------------------------------------- per-ISA instantiation */

/* The cache sizes the blocking is derived from: the intrinsics library is
 * built with this machine's (backends/c/intrinsics/__init__.py reads them from
 * sysfs); 0 (header-only use without them) keeps the constants measured on a
 * Zen 5 (AVX-512) and a 512 KiB-L2 AVX2 machine. */
#ifndef POLYC_GEMM_L2_BYTES
#define POLYC_GEMM_L2_BYTES 0
#endif
#ifndef POLYC_GEMM_L3_BYTES
#define POLYC_GEMM_L3_BYTES 0
#endif
/* bytes / per rounded down to a multiple of unit, within [lo, hi] units;
 * dflt when bytes is 0 (unknown) */
#define POLYC_GEMM_FIT(bytes, per, unit, lo, hi, dflt)                                 \
    ((bytes) > 0 ? polyc_gemm_clamp((int64_t)(bytes) / (per) / (unit) * (unit),        \
                                    (int64_t)(lo) * (unit), (int64_t)(hi) * (unit))     \
                 : (int64_t)(dflt))
static POLYC_GEMM_UNUSED int64_t polyc_gemm_clamp(int64_t x, int64_t lo, int64_t hi)
{
    return x < lo ? lo : x > hi ? hi : x;
}

/* The vector intrinsics of the micro-kernel, named from the instantiation's
 * POLYC_GEMM_VPFX (_mm512_, _mm256_) and POLYC_GEMM_VSFX (_ps, _pd):
 * POLYC_GEMM_FMA is _mm512_fmadd_ps for AVX-512 float. */
#define POLYC_GEMM_CAT3_(a, b, c) a##b##c
#define POLYC_GEMM_CAT3(a, b, c) POLYC_GEMM_CAT3_(a, b, c)
#define POLYC_GEMM_V(op) POLYC_GEMM_CAT3(POLYC_GEMM_VPFX, op, POLYC_GEMM_VSFX)
#define POLYC_GEMM_SETZERO POLYC_GEMM_V(setzero)
#define POLYC_GEMM_LOAD POLYC_GEMM_V(load)
#define POLYC_GEMM_LOADU POLYC_GEMM_V(loadu)
#define POLYC_GEMM_STOREU POLYC_GEMM_V(storeu)
#define POLYC_GEMM_SET1 POLYC_GEMM_V(set1)
#define POLYC_GEMM_FMA POLYC_GEMM_V(fmadd)
#define POLYC_GEMM_ADD POLYC_GEMM_V(add)
#define POLYC_GEMM_MAX POLYC_GEMM_V(max)

/* The transposing packers of an ISA without them (AVX2, portable): they
 * decline, and the generic loops do all the packing. */
#define POLYC_GEMM_NO_FAST_PACK(T, SFX)                                                \
    static inline int polyc_gemm_pack_a_fast_##SFX(int64_t mr, int64_t kc, const T *a, \
                                                   int64_t rs, int64_t cs, T *d)       \
    {                                                                                  \
        (void)mr, (void)kc, (void)a, (void)rs, (void)cs, (void)d;                      \
        return 0;                                                                      \
    }                                                                                  \
    static inline int polyc_gemm_pack_b_fast_##SFX(int64_t nr, int64_t kc, const T *b, \
                                                   int64_t rs, int64_t cs, T *d)       \
    {                                                                                  \
        (void)nr, (void)kc, (void)b, (void)rs, (void)cs, (void)d;                      \
        return 0;                                                                      \
    }

#if defined(__AVX512F__)
#define POLYC_GEMM_ISA_NAME "avx512"
#define POLYC_GEMM_PREFETCH_A() _mm_prefetch((const char *)(a + 8 * POLYC_GEMM_MR), _MM_HINT_T0)

/* Packing with in-register transposes, for the layouts where the packed
 * order is the transpose of memory order (A row-major into k-major slivers,
 * B given as N x K): 16 x 16 (f32) or 8 x 8 (f64) blocks.  tr_*: rows r < nrows
 * of src (row stride ld, 16 or 8 columns) transposed; output row c (the
 * src column c) stored at dst + c * ldd under mask. */
static inline void polyc_gemm_tr_f32(const float *src, int64_t ld, int64_t nrows, float *dst,
                                     int64_t ldd, __mmask16 mask)
{
    __m512 r[16], t[16];
    int i, c;
    for (i = 0; i < 16; i++)
        r[i] = i < nrows ? _mm512_loadu_ps(src + i * ld) : _mm512_setzero_ps();
    for (i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    /* r[4i + c], 128-bit lane L: rows 4i..4i+3 of column 4L + c */
    for (i = 0; i < 4; i++) {
        r[4 * i + 0] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0x44);
        r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0xEE);
        r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (c = 0; c < 4; c++) {
        const __m512 a = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x88);
        const __m512 b = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xDD);
        const __m512 e = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x88);
        const __m512 f = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xDD);
        _mm512_mask_storeu_ps(dst + (0 + c) * ldd, mask, _mm512_shuffle_f32x4(a, e, 0x88));
        _mm512_mask_storeu_ps(dst + (4 + c) * ldd, mask, _mm512_shuffle_f32x4(b, f, 0x88));
        _mm512_mask_storeu_ps(dst + (8 + c) * ldd, mask, _mm512_shuffle_f32x4(a, e, 0xDD));
        _mm512_mask_storeu_ps(dst + (12 + c) * ldd, mask, _mm512_shuffle_f32x4(b, f, 0xDD));
    }
}

static inline void polyc_gemm_tr_f64(const double *src, int64_t ld, int64_t nrows, double *dst,
                                     int64_t ldd, __mmask8 mask)
{
    __m512d r[8], t[8], u0, u1, u2, u3;
    int i;
    for (i = 0; i < 8; i++)
        r[i] = i < nrows ? _mm512_loadu_pd(src + i * ld) : _mm512_setzero_pd();
    for (i = 0; i < 4; i++) {
        t[2 * i] = _mm512_unpacklo_pd(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_pd(r[2 * i], r[2 * i + 1]);
    }
    for (i = 0; i < 2; i++) { /* even (i = 0) and odd (i = 1) columns */
        u0 = _mm512_shuffle_f64x2(t[i], t[2 + i], 0x88);
        u1 = _mm512_shuffle_f64x2(t[i], t[2 + i], 0xDD);
        u2 = _mm512_shuffle_f64x2(t[4 + i], t[6 + i], 0x88);
        u3 = _mm512_shuffle_f64x2(t[4 + i], t[6 + i], 0xDD);
        _mm512_mask_storeu_pd(dst + (0 + i) * ldd, mask, _mm512_shuffle_f64x2(u0, u2, 0x88));
        _mm512_mask_storeu_pd(dst + (4 + i) * ldd, mask, _mm512_shuffle_f64x2(u0, u2, 0xDD));
        _mm512_mask_storeu_pd(dst + (2 + i) * ldd, mask, _mm512_shuffle_f64x2(u1, u3, 0x88));
        _mm512_mask_storeu_pd(dst + (6 + i) * ldd, mask, _mm512_shuffle_f64x2(u1, u3, 0xDD));
    }
}

/* A row-major (cs == 1) into a 14-row sliver; returns 0 where not applicable. */
static inline int polyc_gemm_pack_a_fast_f32(int64_t mr, int64_t kc, const float *a, int64_t rs,
                                             int64_t cs, float *d)
{
    const int64_t kv = kc - kc % 16;
    int64_t k, i;
    if (cs != 1 || rs < 16)
        return 0;
    for (k = 0; k < kv; k += 16)
        polyc_gemm_tr_f32(a + k, rs, mr, d + k * 14, 14, 0x3fff);
    for (i = 0; i < 14; i++)
        for (k = kv; k < kc; k++)
            d[k * 14 + i] = i < mr ? a[i * rs + k] : 0.0f;
    return 1;
}

static inline int polyc_gemm_pack_a_fast_f64(int64_t mr, int64_t kc, const double *a,
                                             int64_t rs, int64_t cs, double *d)
{
    const int64_t kv = kc - kc % 8;
    int64_t k, i;
    if (cs != 1 || rs < 8)
        return 0;
    for (k = 0; k < kv; k += 8) {
        polyc_gemm_tr_f64(a + k, rs, mr, d + k * 14, 14, 0xff);
        polyc_gemm_tr_f64(a + 8 * rs + k, rs, mr - 8, d + k * 14 + 8, 14, 0x3f);
    }
    for (i = 0; i < 14; i++)
        for (k = kv; k < kc; k++)
            d[k * 14 + i] = i < mr ? a[i * rs + k] : 0.0;
    return 1;
}

/* B given as N x K (rs == 1) into a 32-column sliver. */
static inline int polyc_gemm_pack_b_fast_f32(int64_t nr, int64_t kc, const float *b, int64_t rs,
                                             int64_t cs, float *d)
{
    int64_t k, j, h;
    if (rs != 1 || cs < 16)
        return 0;
    for (h = 0; h < 2; h++)
        for (k = 0; k + 16 <= kc; k += 16)
            polyc_gemm_tr_f32(b + h * 16 * cs + k, cs, nr - 16 * h, d + k * 32 + 16 * h, 32,
                              0xffff);
    for (j = 0; j < 32; j++)
        for (k = kc - kc % 16; k < kc; k++)
            d[k * 32 + j] = j < nr ? b[j * cs + k] : 0.0f;
    return 1;
}

static inline int polyc_gemm_pack_b_fast_f64(int64_t nr, int64_t kc, const double *b,
                                             int64_t rs, int64_t cs, double *d)
{
    int64_t k, j, h;
    if (rs != 1 || cs < 8)
        return 0;
    for (h = 0; h < 2; h++)
        for (k = 0; k + 8 <= kc; k += 8)
            polyc_gemm_tr_f64(b + h * 8 * cs + k, cs, nr - 8 * h, d + k * 16 + 8 * h, 16, 0xff);
    for (j = 0; j < 16; j++)
        for (k = kc - kc % 8; k < kc; k++)
            d[k * 16 + j] = j < nr ? b[j * cs + k] : 0.0;
    return 1;
}

#define POLYC_GEMM_T float
#define POLYC_GEMM_VT __m512
#define POLYC_GEMM_VL 16
#define POLYC_GEMM_MR 14
#define POLYC_GEMM_NR 32
#define POLYC_GEMM_KC 512
#define POLYC_GEMM_MC POLYC_GEMM_FIT(POLYC_GEMM_L2_BYTES / 2, 512 * 4, 14, 4, 64, (14 * 18))
#define POLYC_GEMM_NC POLYC_GEMM_FIT(POLYC_GEMM_L3_BYTES / 4, 512 * 4, 32, 16, 512, 4096)
#define POLYC_GEMM_ROWS POLYC_GEMM_R14
#define POLYC_GEMM_VPFX _mm512_
#define POLYC_GEMM_VSFX _ps
POLYC_GEMM_DEFINE_VKERNEL(f32)
POLYC_GEMM_DEFINE_DRIVER(f32)
#undef POLYC_GEMM_T
#undef POLYC_GEMM_VT
#undef POLYC_GEMM_VL
#undef POLYC_GEMM_MR
#undef POLYC_GEMM_NR
#undef POLYC_GEMM_KC
#undef POLYC_GEMM_MC
#undef POLYC_GEMM_NC
#undef POLYC_GEMM_ROWS
#undef POLYC_GEMM_VPFX
#undef POLYC_GEMM_VSFX

#define POLYC_GEMM_T double
#define POLYC_GEMM_VT __m512d
#define POLYC_GEMM_VL 8
#define POLYC_GEMM_MR 14
#define POLYC_GEMM_NR 16
#define POLYC_GEMM_KC 384
#define POLYC_GEMM_MC POLYC_GEMM_FIT(POLYC_GEMM_L2_BYTES / 2, 384 * 8, 14, 4, 64, (14 * 12))
#define POLYC_GEMM_NC POLYC_GEMM_FIT(POLYC_GEMM_L3_BYTES / 4, 384 * 8, 16, 16, 512, 2048)
#define POLYC_GEMM_ROWS POLYC_GEMM_R14
#define POLYC_GEMM_VPFX _mm512_
#define POLYC_GEMM_VSFX _pd
POLYC_GEMM_DEFINE_VKERNEL(f64)
POLYC_GEMM_DEFINE_DRIVER(f64)

#elif defined(__AVX2__) && defined(__FMA__)
#define POLYC_GEMM_ISA_NAME "avx2"
#define POLYC_GEMM_PREFETCH_A() _mm_prefetch((const char *)(a + 8 * POLYC_GEMM_MR), _MM_HINT_T0)

/* No transposing packers here: the generic loops do all the packing. */
POLYC_GEMM_NO_FAST_PACK(float, f32)
POLYC_GEMM_NO_FAST_PACK(double, f64)

#define POLYC_GEMM_T float
#define POLYC_GEMM_VT __m256
#define POLYC_GEMM_VL 8
#define POLYC_GEMM_MR 6
#define POLYC_GEMM_NR 16
#define POLYC_GEMM_KC 256
#define POLYC_GEMM_MC POLYC_GEMM_FIT(POLYC_GEMM_L2_BYTES / 2, 256 * 4, 6, 4, 64, (6 * 42))
#define POLYC_GEMM_NC POLYC_GEMM_FIT(POLYC_GEMM_L3_BYTES / 4, 256 * 4, 16, 16, 512, 4096)
#define POLYC_GEMM_ROWS POLYC_GEMM_R6
#define POLYC_GEMM_VPFX _mm256_
#define POLYC_GEMM_VSFX _ps
POLYC_GEMM_DEFINE_VKERNEL(f32)
POLYC_GEMM_DEFINE_DRIVER(f32)
#undef POLYC_GEMM_T
#undef POLYC_GEMM_VT
#undef POLYC_GEMM_VL
#undef POLYC_GEMM_MR
#undef POLYC_GEMM_NR
#undef POLYC_GEMM_KC
#undef POLYC_GEMM_MC
#undef POLYC_GEMM_NC
#undef POLYC_GEMM_ROWS
#undef POLYC_GEMM_VPFX
#undef POLYC_GEMM_VSFX

#define POLYC_GEMM_T double
#define POLYC_GEMM_VT __m256d
#define POLYC_GEMM_VL 4
#define POLYC_GEMM_MR 6
#define POLYC_GEMM_NR 8
#define POLYC_GEMM_KC 256
#define POLYC_GEMM_MC POLYC_GEMM_FIT(POLYC_GEMM_L2_BYTES / 2, 256 * 8, 6, 4, 64, (6 * 24))
#define POLYC_GEMM_NC POLYC_GEMM_FIT(POLYC_GEMM_L3_BYTES / 4, 256 * 8, 8, 16, 512, 2048)
#define POLYC_GEMM_ROWS POLYC_GEMM_R6
#define POLYC_GEMM_VPFX _mm256_
#define POLYC_GEMM_VSFX _pd
POLYC_GEMM_DEFINE_VKERNEL(f64)
POLYC_GEMM_DEFINE_DRIVER(f64)

#else
#define POLYC_GEMM_ISA_NAME "portable"

/* No transposing packers here: the generic loops do all the packing. */
POLYC_GEMM_NO_FAST_PACK(float, f32)
POLYC_GEMM_NO_FAST_PACK(double, f64)

#define POLYC_GEMM_T float
#define POLYC_GEMM_MR 4
#define POLYC_GEMM_NR 8
#define POLYC_GEMM_KC 256
#define POLYC_GEMM_MC (4 * 32)
#define POLYC_GEMM_NC 4096
POLYC_GEMM_DEFINE_PKERNEL(f32)
POLYC_GEMM_DEFINE_DRIVER(f32)
#undef POLYC_GEMM_T
#undef POLYC_GEMM_MR
#undef POLYC_GEMM_NR
#undef POLYC_GEMM_KC
#undef POLYC_GEMM_MC
#undef POLYC_GEMM_NC

#define POLYC_GEMM_T double
#define POLYC_GEMM_MR 4
#define POLYC_GEMM_NR 8
#define POLYC_GEMM_KC 256
#define POLYC_GEMM_MC (4 * 32)
#define POLYC_GEMM_NC 2048
POLYC_GEMM_DEFINE_PKERNEL(f64)
POLYC_GEMM_DEFINE_DRIVER(f64)
#endif

/* The per-type parameters were only needed while instantiating. */
#undef POLYC_GEMM_T
#undef POLYC_GEMM_VT
#undef POLYC_GEMM_VL
#undef POLYC_GEMM_MR
#undef POLYC_GEMM_NR
#undef POLYC_GEMM_KC
#undef POLYC_GEMM_MC
#undef POLYC_GEMM_NC
#undef POLYC_GEMM_ROWS
#undef POLYC_GEMM_VPFX
#undef POLYC_GEMM_VSFX
#undef POLYC_GEMM_V
#undef POLYC_GEMM_CAT3
#undef POLYC_GEMM_CAT3_
#undef POLYC_GEMM_SETZERO
#undef POLYC_GEMM_LOAD
#undef POLYC_GEMM_LOADU
#undef POLYC_GEMM_STOREU
#undef POLYC_GEMM_SET1
#undef POLYC_GEMM_FMA
#undef POLYC_GEMM_ADD
#undef POLYC_GEMM_MAX

/* Which micro-kernel this build uses: "avx512", "avx2" or "portable". */
POLYC_GEMM_API const char *polyc_gemm_isa(void) { return POLYC_GEMM_ISA_NAME; }

#endif /* POLYC_GEMM_H */
