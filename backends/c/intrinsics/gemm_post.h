/* polyc GEMM: the post-operations of polyc_gemmx_post on one row of a tile.
 *
 * polyc_gemm_post_row_<t>(c, n, mul, ms, add, as, add2, bs, relu) applies
 *   c[x] = relu(c[x] * m[x] + a[x] + b[x]),   x = 0 .. n - 1,
 * where m[x] is mul[x] (NULL: the scalar ms, a per-row value or 1), a[x]
 * add[x] (NULL: as, a per-row value or -0.0, which adds nothing, even to
 * -0.0), b[x] likewise; relu 0 none, 1 x > 0 ? x : 0 (NaN -> 0), 2 the same
 * with NaN kept.  Multiplications and additions are rounded one at a time,
 * in this order (no FMA: -std=c99 contracts nothing), so a row gives the
 * bits of the elementwise statement it replaces.  With AVX-512 or AVX2 a
 * vector at a time, the last one masked; in portable C a plain loop.
 * Included once by gemm.h; expanded inside POLYC_GEMM_DEFINE_DRIVER. */
#ifndef POLYC_GEMM_POST_H
#define POLYC_GEMM_POST_H

#define POLYC_GEMM_POST_ROW_SIGNATURE(SFX)                                             \
    static void polyc_gemm_post_row_##SFX(POLYC_GEMM_T *c, int64_t n,                  \
                                          const POLYC_GEMM_T *mul, POLYC_GEMM_T ms,    \
                                          const POLYC_GEMM_T *add, POLYC_GEMM_T as,    \
                                          const POLYC_GEMM_T *add2, POLYC_GEMM_T bs,   \
                                          int relu)

#if defined(POLYC_GEMM_SK_NVMAX)
#define POLYC_GEMM_MUL POLYC_GEMM_V(mul)
#if defined(__AVX512F__)
/* r where x is a number, x (NaN) elsewhere */
#define POLYC_GEMM_KEEP_NAN(r, x)                                                      \
    POLYC_GEMM_V(mask_blend)(POLYC_GEMM_CAT3(POLYC_GEMM_V(cmp), _mask, )((x), (x), _CMP_UNORD_Q), \
                             (r), (x))
#else
#define POLYC_GEMM_KEEP_NAN(r, x)                                                      \
    POLYC_GEMM_V(blendv)((r), (x), POLYC_GEMM_V(cmp)((x), (x), _CMP_UNORD_Q))
#endif
/* an operand's vector at x: p[x ..] (the mask mk on the last vector), else s */
#define POLYC_GEMM_POST_LD(p, x, last, mk, s)                                         \
    (!(p) ? (s) : (last) ? POLYC_GEMM_MLOAD((mk), (p) + (x)) : POLYC_GEMM_LOADU((p) + (x)))
#define POLYC_GEMM_DEFINE_POST_ROW(SFX)                                                \
    POLYC_GEMM_POST_ROW_SIGNATURE(SFX)                                                 \
    {                                                                                  \
        const POLYC_GEMM_VT vm = POLYC_GEMM_SET1(ms), va = POLYC_GEMM_SET1(as);        \
        const POLYC_GEMM_VT vb = POLYC_GEMM_SET1(bs), zero = POLYC_GEMM_SETZERO();     \
        int64_t x;                                                                     \
        for (x = 0; x < n; x += POLYC_GEMM_VL) {                                       \
            const int last = n - x < POLYC_GEMM_VL;                                    \
            const POLYC_GEMM_SMASK_T mk =                                              \
                POLYC_GEMM_SMASK(last ? n - x : POLYC_GEMM_VL);                        \
            POLYC_GEMM_VT v = last ? POLYC_GEMM_MLOAD(mk, c + x) : POLYC_GEMM_LOADU(c + x); \
            v = POLYC_GEMM_MUL(v, POLYC_GEMM_POST_LD(mul, x, last, mk, vm));            \
            v = POLYC_GEMM_ADD(v, POLYC_GEMM_POST_LD(add, x, last, mk, va));            \
            v = POLYC_GEMM_ADD(v, POLYC_GEMM_POST_LD(add2, x, last, mk, vb));           \
            if (relu) {      /* max(v, 0) is 0 for a NaN v, and +0 for -0 */          \
                const POLYC_GEMM_VT r = POLYC_GEMM_MAX(v, zero);                       \
                v = relu == 2 ? POLYC_GEMM_KEEP_NAN(r, v) : r;                         \
            }                                                                          \
            if (last)                                                                  \
                POLYC_GEMM_MSTORE(c + x, mk, v);                                       \
            else                                                                       \
                POLYC_GEMM_STOREU(c + x, v);                                           \
        }                                                                              \
    }
#else
#define POLYC_GEMM_DEFINE_POST_ROW(SFX)                                                \
    POLYC_GEMM_POST_ROW_SIGNATURE(SFX)                                                 \
    {                                                                                  \
        int64_t x;                                                                     \
        for (x = 0; x < n; x++) {                                                      \
            POLYC_GEMM_T v = c[x] * (mul ? mul[x] : ms);                               \
            v = v + (add ? add[x] : as);                                               \
            v = v + (add2 ? add2[x] : bs);                                             \
            if (relu && !(v > 0) && (relu == 1 || v == v))                             \
                v = 0;                                                                 \
            c[x] = v;                                                                  \
        }                                                                              \
    }
#endif

#endif /* POLYC_GEMM_POST_H */
