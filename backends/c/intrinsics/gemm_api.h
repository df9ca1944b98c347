/* polyc GEMM: the interface of gemm.h (types and prototypes).
 *
 * Generated kernels paste this file and link the intrinsics library, which
 * polyc builds from gemm.h once per machine, compiler and flags
 * (backends/c/intrinsics/__init__.py); gemm.h includes it too, so every
 * build of the library checks these prototypes against the definitions.
 *
 * POLYC_GEMM_API is the storage class of the functions: undefined here
 * (a kernel), the declarations are extern; gemm.h used header-only makes
 * them static; the library build makes them visible definitions.  See
 * gemm.h for what the functions compute and the meaning of each argument.
 */
#ifndef POLYC_GEMM_API_H
#define POLYC_GEMM_API_H

#include <stddef.h>
#include <stdint.h>

#ifndef POLYC_GEMM_API
#define POLYC_GEMM_API extern
#endif

/* A row or column index map of polyc_gemmx (see the top of gemm.h). */
#define POLYC_GEMM_MAXDIMS 8
typedef struct {
    int n;
    int64_t ext[POLYC_GEMM_MAXDIMS];
    int64_t stride[POLYC_GEMM_MAXDIMS];
} polyc_gemm_dims;

/* An operand of a post-operation: element (m, n) at p[m * rs + n * cs]
 * (strides in elements, non-negative; 0 broadcasts: a per-row vector has
 * cs = 0, a per-column one rs = 0). */
typedef struct {
    const void *p;              /* NULL: none */
    int64_t rs, cs;
} polyc_gemm_operand;

/* The post-operations of polyc_gemmx_post, applied to each element x of C
 * once its sum is final, in this order (then the tile function, if any):
 *   x = x * mul;  x = x + add;  x = x + add2;  then relu:
 *   0 none, 1 x > 0 ? x : 0 (C's fmax: NaN -> 0), 2 the same keeping NaN
 *   (numpy's maximum).  An absent operand leaves x as it is. */
typedef struct {
    polyc_gemm_operand mul, add, add2;
    int relu;
    /* A function of the kernel applied after the operations above to each
     * block of C once its sums are final, by the thread that computed it:
     * tile(tile_ctx, i0, mr, j0, nc) on rows i0 .. i0 + mr - 1, columns
     * j0 .. j0 + nc - 1 of the call's C (an elementwise epilogue compiled
     * with the kernel: a GELU, a chain of ufuncs); NULL: none.  It may run
     * on any thread of the call, at the same time on disjoint blocks. */
    void (*tile)(const void *tile_ctx, int64_t i0, int64_t mr, int64_t j0, int64_t nc);
    const void *tile_ctx;
} polyc_gemm_post;

#define POLYC_GEMM_DECLARE(T, SFX)                                                     \
    POLYC_GEMM_API void polyc_gemm_##SFX(                                              \
        int64_t M, int64_t N, int64_t K, const T *A, int64_t a_rs, int64_t a_cs,       \
        const T *B, int64_t b_rs, int64_t b_cs, T *C, int64_t c_rs, int64_t c_cs,      \
        T alpha, T beta, const T *bias, int64_t bias_cs, int relu, int nthreads);     \
    POLYC_GEMM_API void polyc_gemmx_##SFX(                                             \
        int64_t M, int64_t N, int64_t K, const T *A, const polyc_gemm_dims *a_rows,    \
        const polyc_gemm_dims *a_cols, const T *B, const polyc_gemm_dims *b_rows,      \
        const polyc_gemm_dims *b_cols, T *C, int64_t c_rs, int64_t c_cs, T alpha,      \
        T beta, const T *bias, int64_t bias_cs, int relu, int nthreads);                \
    POLYC_GEMM_API void polyc_gemmx_post_##SFX(                                        \
        int64_t M, int64_t N, int64_t K, const T *A, const polyc_gemm_dims *a_rows,    \
        const polyc_gemm_dims *a_cols, const T *B, const polyc_gemm_dims *b_rows,      \
        const polyc_gemm_dims *b_cols, T *C, int64_t c_rs, int64_t c_cs, T alpha,      \
        T beta, const polyc_gemm_post *post, int nthreads);                             \
    POLYC_GEMM_API void polyc_gemmt_##SFX(                                             \
        int64_t M, int64_t N, int64_t K, const T *A, int64_t a_rs, int64_t a_cs,       \
        const T *B, int64_t b_rs, int64_t b_cs, T *C, int64_t c_rs, int64_t c_cs,      \
        T alpha, T beta, int band, int64_t band_lo, int64_t band_hi, int nthreads);
POLYC_GEMM_DECLARE(float, f32)
POLYC_GEMM_DECLARE(double, f64)
#undef POLYC_GEMM_DECLARE

/* The band of polyc_gemmt: band_lo <= d <= band_hi with d = n - m (only those
 * elements of C are stored), k - m (A(m, k) is zero outside: a triangular A)
 * or k - n (B(k, n) is zero outside); INT64_MIN / INT64_MAX: unbounded. */
#define POLYC_GEMM_BAND_MN 1
#define POLYC_GEMM_BAND_MK 2
#define POLYC_GEMM_BAND_NK 3

/* Which micro-kernel the build uses: "avx512", "avx2" or "portable". */
POLYC_GEMM_API const char *polyc_gemm_isa(void);
/* Where multi-threaded calls run: 0 the GEMM's own thread pool (default),
 * 1 the OpenMP team (gemm.h, "the thread pool"). */
POLYC_GEMM_API void polyc_gemm_set_team(int on);

#endif /* POLYC_GEMM_API_H */
