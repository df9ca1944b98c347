/* Physical limits of this CPU: FMA peak (GFLOP/s) and STREAM triad bandwidth
 * (GB/s), on one core and on all OpenMP threads.  Prints one JSON object.
 *
 *   gcc -O3 -march=native -fopenmp -std=c99 peak.c -o peak -lm && ./peak [quick]
 *
 * FMA: NCHAIN independent accumulator chains, acc = acc * m + a, so that the
 * FMA latency is hidden and only the FMA throughput counts; 2 flops per lane.
 * Triad: a[i] = b[i] + s * c[i] over double arrays much larger than the last
 * level cache, counted as 24 bytes per element (STREAM convention: write-
 * allocate traffic is not counted).  Best of FMA_REPS / TRIAD_REPS runs.
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

#if defined(__AVX512F__)
#define ISA "avx512"
typedef __m512 vf32;
typedef __m512d vf64;
#define SET1_F32 _mm512_set1_ps
#define SET1_F64 _mm512_set1_pd
#define FMA_F32 _mm512_fmadd_ps
#define FMA_F64 _mm512_fmadd_pd
#define STORE_F32 _mm512_storeu_ps
#define STORE_F64 _mm512_storeu_pd
#define LANES_F32 16
#define LANES_F64 8
#elif defined(__AVX2__) && defined(__FMA__)
#define ISA "avx2"
typedef __m256 vf32;
typedef __m256d vf64;
#define SET1_F32 _mm256_set1_ps
#define SET1_F64 _mm256_set1_pd
#define FMA_F32 _mm256_fmadd_ps
#define FMA_F64 _mm256_fmadd_pd
#define STORE_F32 _mm256_storeu_ps
#define STORE_F64 _mm256_storeu_pd
#define LANES_F32 8
#define LANES_F64 4
#else
#define ISA "scalar"
typedef float vf32;
typedef double vf64;
#define SET1_F32(x) (x)
#define SET1_F64(x) (x)
#define FMA_F32 fmaf
#define FMA_F64 fma
#define STORE_F32(p, v) (*(p) = (v))
#define STORE_F64(p, v) (*(p) = (v))
#define LANES_F32 1
#define LANES_F64 1
#endif

#define NCHAIN 12
#define FMA_REPS 3
#define TRIAD_REPS 5

static volatile double sink;

/* n iterations of NCHAIN independent FMAs; returns a checksum.  The chains
 * start from distinct values so that the compiler cannot merge them, and
 * converge to a / (1 - m), so no overflow or denormals. */
#define DEFINE_FMA_KERNEL(NAME, T, VT, SET1, FMA, STORE, LANES)                  \
    static double NAME(long n, T seed) {                                         \
        const VT m = SET1((T)0.999999), a = SET1((T)1e-6);                       \
        VT c0 = SET1(seed), c1 = SET1(seed + 1), c2 = SET1(seed + 2);            \
        VT c3 = SET1(seed + 3), c4 = SET1(seed + 4), c5 = SET1(seed + 5);        \
        VT c6 = SET1(seed + 6), c7 = SET1(seed + 7), c8 = SET1(seed + 8);        \
        VT c9 = SET1(seed + 9), c10 = SET1(seed + 10), c11 = SET1(seed + 11);    \
        for (long i = 0; i < n; i++) {                                           \
            c0 = FMA(c0, m, a); c1 = FMA(c1, m, a); c2 = FMA(c2, m, a);          \
            c3 = FMA(c3, m, a); c4 = FMA(c4, m, a); c5 = FMA(c5, m, a);          \
            c6 = FMA(c6, m, a); c7 = FMA(c7, m, a); c8 = FMA(c8, m, a);          \
            c9 = FMA(c9, m, a); c10 = FMA(c10, m, a); c11 = FMA(c11, m, a);      \
        }                                                                        \
        VT chains[NCHAIN] = {c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11};  \
        T lanes[LANES];                                                          \
        double sum = 0.0;                                                        \
        for (int j = 0; j < NCHAIN; j++) {                                       \
            STORE(lanes, chains[j]);                                             \
            for (int k = 0; k < LANES; k++) sum += lanes[k];                     \
        }                                                                        \
        return sum;                                                              \
    }

DEFINE_FMA_KERNEL(fma_f32, float, vf32, SET1_F32, FMA_F32, STORE_F32, LANES_F32)
DEFINE_FMA_KERNEL(fma_f64, double, vf64, SET1_F64, FMA_F64, STORE_F64, LANES_F64)

typedef double (*fma_kernel)(long, double);
static double run_f32(long n, double seed) { return fma_f32(n, (float)seed); }
static double run_f64(long n, double seed) { return fma_f64(n, seed); }

/* Iteration count that makes one single-thread run last about `seconds`. */
static long calibrate(fma_kernel kernel, double seconds) {
    long n = 1 << 14;
    for (;;) {
        double t = omp_get_wtime();
        sink += kernel(n, 0.5);
        t = omp_get_wtime() - t;
        if (t > seconds / 10) return (long)(n * (seconds / t)) + 1;
        n *= 2;
    }
}

/* Best GFLOP/s over FMA_REPS runs of n iterations on `threads` threads. */
static double fma_gflops(fma_kernel kernel, int lanes, long n, int threads) {
    double best = 0.0;
    for (int r = 0; r < FMA_REPS; r++) {
        double sum = 0.0;
        double t = omp_get_wtime();
#pragma omp parallel num_threads(threads) reduction(+ : sum)
        sum += kernel(n, 0.5 + omp_get_thread_num());
        t = omp_get_wtime() - t;
        sink += sum;
        double gflops = 2.0 * lanes * NCHAIN * (double)n * threads / t * 1e-9;
        if (gflops > best) best = gflops;
    }
    return best;
}

/* Best GB/s (24 bytes per element) over TRIAD_REPS triads on `threads`. */
static double triad_gbs(double *a, const double *b, const double *c, long n, int threads) {
    const double s = 3.0;
    double best = 0.0;
    for (int r = 0; r < TRIAD_REPS; r++) {
        double t = omp_get_wtime();
#pragma omp parallel for schedule(static) num_threads(threads)
        for (long i = 0; i < n; i++) a[i] = b[i] + s * c[i];
        t = omp_get_wtime() - t;
        sink += a[r];
        double gbs = 24.0 * (double)n / t * 1e-9;
        if (gbs > best) best = gbs;
    }
    return best;
}

int main(int argc, char **argv) {
    int quick = argc > 1 && strcmp(argv[1], "quick") == 0;
    double seconds = quick ? 0.025 : 0.25;
    long n_triad = quick ? 1L << 20 : 1L << 23; /* 8 or 64 MiB per array */
    int threads = omp_get_max_threads();

    long n32 = calibrate(run_f32, seconds), n64 = calibrate(run_f64, seconds);
    double f32_1 = fma_gflops(run_f32, LANES_F32, n32, 1);
    double f64_1 = fma_gflops(run_f64, LANES_F64, n64, 1);
    double f32_all = fma_gflops(run_f32, LANES_F32, n32, threads);
    double f64_all = fma_gflops(run_f64, LANES_F64, n64, threads);

    double *a = malloc(n_triad * sizeof *a), *b = malloc(n_triad * sizeof *b),
           *c = malloc(n_triad * sizeof *c);
    if (!a || !b || !c) {
        fprintf(stderr, "peak: out of memory\n");
        return 1;
    }
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n_triad; i++) {
        a[i] = 0.0;
        b[i] = 1.0;
        c[i] = 2.0;
    }
    double triad_1 = triad_gbs(a, b, c, n_triad, 1);
    double triad_all = triad_gbs(a, b, c, n_triad, threads);
    free(a);
    free(b);
    free(c);

    printf("{\"fma_gflops_1core_f32\": %.2f, \"fma_gflops_1core_f64\": %.2f, "
           "\"fma_gflops_allcores_f32\": %.2f, \"fma_gflops_allcores_f64\": %.2f, "
           "\"stream_triad_gbs_1core\": %.2f, \"stream_triad_gbs_allcores\": %.2f, "
           "\"threads\": %d, \"isa\": \"%s\"}\n",
           f32_1, f64_1, f32_all, f64_all, triad_1, triad_all, threads, ISA);
    return 0;
}
