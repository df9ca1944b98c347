/* polyc GEMM, the window path: a convolution's implicit GEMM with B read where
 * it lies, the output rows joined across the input's row pitch, and every
 * sliver of A over each block of columns while it is in L1.
 *
 * polyc_gemmx gives a convolution as M output channels by N = H x W output
 * pixels by K = C x KH x KW, with B(k = (c, kh, kw), n = (h, w)) =
 * I[c HP WP + kh WP + kw + h WP + w]: the W pixels of an output row read a
 * contiguous run of the input, and row h + 1 starts one input pitch (WP)
 * after row h.  The small path (gemm_small.h) reads such runs in place one
 * output row at a time: a row of 56 floats is 3.5 AVX-512 vectors, so 12.5%
 * of the lanes it computes are masked off (W = 28: 12.5%; W = 7: 56%), and
 * it takes at most POLYC_GEMM_SMALL_INPLACE slivers of A, each reading all
 * of B; the packed path copies the window, K x N elements (9 times the
 * input for a 3 x 3 window), for every call.  This path:
 *
 *   - joins the rows where that computes fewer lanes (pitch < W rounded up
 *     to vectors), or as many with rows of one vector (14 x 14 over a pitch
 *     of 16: tiles of several vectors instead of one per row): the virtual columns n' = h WP + w, 0 <= n' < (H - 1) WP + W,
 *     are contiguous in B for every k, so a tile of nv vectors runs across a
 *     row's end and computes the WP - W columns between two rows (2 of 58
 *     for a 3 x 3 window over a 56-wide output: 3.4%) instead of masked
 *     lanes.  Those columns read B between two of its valid elements (the
 *     tail of one input row, the head of the next), inside the operand.  A
 *     tile within one output row is stored by the kernel; one that crosses
 *     a row's end is computed into a buffer and only its output columns are
 *     stored, with beta, the bias and the ReLU;
 *   - packs all of A once (M x K in slivers of the small path's register
 *     tiles, k-major, times alpha) and takes chunks of column tiles as the
 *     threads' items: every sliver passes over a tile while its window
 *     (K rows of nv vectors: 64 channels x 3 input rows x 3 lines for the
 *     ResNet-50 layer, 36 KiB) is in L1, so B comes from memory once.
 *
 * The tiles are the small path's kernels (polyc_gemm_sk_tab_<t>); each C
 * element is summed over k in ascending order, as there.  C must not overlap
 * B (a convolution writes a new tensor).  It is taken for polyc_gemmx calls
 * with a column map of B (no band, unit c_cs) whose rows it joins, or whose
 * A has more slivers than the small path reads B for in place, with all of
 * A packed in at most POLYC_GEMM_WIN_ABYTES (4 MiB: ResNet-50's 3 x 3 layers
 * up to 256 channels; at 512 channels and 7 x 7, A is 9.4 MB and the packed
 * path was as fast).
 *
 * This file defines macros only; gemm.h instantiates them per element type
 * after the small path's (POLYC_GEMM_DEFINE_SMALL). */
#ifndef POLYC_GEMM_WIN_H
#define POLYC_GEMM_WIN_H

/* A test hook run when a call takes this path: its tile plan and the pitch it
 * joins rows over (0: none). */
#ifndef POLYC_GEMM_ON_WIN
#define POLYC_GEMM_ON_WIN(nv, mr, pitch) ((void)(nv), (void)(mr), (void)(pitch))
#endif
/* 1: the path is never taken (tests) */
#ifndef POLYC_GEMM_WIN_OFF
#define POLYC_GEMM_WIN_OFF 0
#endif
/* All of A, packed, at most this many bytes (every tile reads all of it, from
 * L2 or L3). */
#ifndef POLYC_GEMM_WIN_ABYTES
#define POLYC_GEMM_WIN_ABYTES ((int64_t)4 << 20)
#endif

typedef struct {
    int64_t K;
    int beta;                   /* 0 overwrite C, 1 add, 2 add beta * C */
    polyc_gemm_splan plan;
    int64_t run;                /* columns of an output row (contiguous in B and C) */
    int64_t pitch;              /* B's row pitch the rows are joined over (0: not joined) */
    int64_t rows;               /* output rows per virtual run (1 when not joined) */
    int64_t vlen;               /* columns of a virtual run: (rows - 1) pitch + run */
    int64_t runs, tpr, chunk;   /* virtual runs, tiles per run, tiles per item */
    int64_t groups;             /* items per chunk of tiles: groups of slivers */
    const int64_t *cbase;       /* B offset of each virtual run (NULL: one run) */
    const int64_t *boff;        /* B offset of each row k */
    void *a;                    /* all of A, packed sliver after sliver, each followed
                                   by a vector of slack (its packing's transposes
                                   store whole vectors past its end) */
    const int64_t *a_rt, *a_ct; /* A's row and column offsets (NULL: the strides) */
    const void *b, *bias;       /* bias contiguous, NULL: none */
    const void *g;              /* the driver's polyc_gemm_args_<t> */
} polyc_gemm_wctx;

#if defined(POLYC_GEMM_SK_NVMAX)
#define POLYC_GEMM_WIN_BUF (14 * POLYC_GEMM_SK_NVMAX * 16)
#define POLYC_GEMM_DEFINE_WIN(SFX)                                                     \
    /* The output columns of a tile computed into buf (mr rows ldb apart; virtual    \
     * columns j .. j + rest - 1 of run q), with beta, the bias and the ReLU. */      \
    static void polyc_gemm_win_out_##SFX(const polyc_gemm_wctx *s,                     \
                                         const POLYC_GEMM_T *buf, int64_t ldb,         \
                                         int64_t mr, int64_t i0, int64_t q, int64_t j, \
                                         int64_t rest)                                 \
    {                                                                                  \
        const polyc_gemm_args_##SFX *g = (const polyc_gemm_args_##SFX *)s->g;          \
        const POLYC_GEMM_T *bias = (const POLYC_GEMM_T *)s->bias;                      \
        const POLYC_GEMM_VT bs = POLYC_GEMM_SET1(g->beta), zero = POLYC_GEMM_SETZERO(); \
        int64_t h, i, x;                                                               \
        for (h = j / s->pitch; h * s->pitch < j + rest; h++) {                         \
            const int64_t v0 = polyc_gemm_max(j, h * s->pitch);                        \
            const int64_t v1 = polyc_gemm_min(j + rest, h * s->pitch + s->run);        \
            const int64_t n0 = (q * s->rows + h) * s->run + (v0 - h * s->pitch);       \
            for (i = 0; i < mr && v0 < v1; i++) {                                      \
                const POLYC_GEMM_T *src = buf + i * ldb + (v0 - j);                    \
                POLYC_GEMM_T *dst = g->C + (i0 + i) * g->c_rs + n0;                    \
                for (x = 0; x < v1 - v0; x += POLYC_GEMM_VL) {                         \
                    /* as the kernels' store does */                                   \
                    const POLYC_GEMM_SMASK_T mk =                                      \
                        POLYC_GEMM_SMASK(polyc_gemm_min(POLYC_GEMM_VL, v1 - v0 - x));  \
                    POLYC_GEMM_VT y = POLYC_GEMM_MLOAD(mk, src + x);                   \
                    if (s->beta) {                                                     \
                        const POLYC_GEMM_VT c = POLYC_GEMM_MLOAD(mk, dst + x);         \
                        y = s->beta == 1 ? POLYC_GEMM_ADD(y, c) : POLYC_GEMM_FMA(c, bs, y); \
                    }                                                                  \
                    if (bias)                                                          \
                        y = POLYC_GEMM_ADD(y, POLYC_GEMM_MLOAD(mk, bias + n0 + x));    \
                    if (g->relu)                                                       \
                        y = POLYC_GEMM_MAX(y, zero);                                   \
                    POLYC_GEMM_MSTORE(dst + x, mk, y);                                 \
                }                                                                      \
            }                                                                          \
        }                                                                              \
    }                                                                                  \
                                                                                       \
    /* The post-operations on rows i0 .. i0 + mr - 1 of the output columns of      \
     * virtual columns j .. j + rest - 1 of run q. */                                 \
    static void polyc_gemm_win_post_##SFX(const polyc_gemm_wctx *s, int64_t i0,        \
                                          int64_t mr, int64_t q, int64_t j, int64_t rest) \
    {                                                                                  \
        const polyc_gemm_args_##SFX *g = (const polyc_gemm_args_##SFX *)s->g;          \
        int64_t h;                                                                     \
        if (!s->pitch) {                                                               \
            polyc_gemm_post_##SFX(g, i0, mr, q * s->run + j, rest);                    \
            return;                                                                    \
        }                                                                              \
        for (h = j / s->pitch; h * s->pitch < j + rest; h++) {                         \
            const int64_t v0 = polyc_gemm_max(j, h * s->pitch);                        \
            const int64_t v1 = polyc_gemm_min(j + rest, h * s->pitch + s->run);        \
            if (v0 < v1)                                                               \
                polyc_gemm_post_##SFX(g, i0, mr,                                       \
                                      (q * s->rows + h) * s->run + (v0 - h * s->pitch), \
                                      v1 - v0);                                        \
        }                                                                              \
    }                                                                                  \
                                                                                       \
    /* Item t: its chunk of column tiles, each times its group of slivers of A (all \
     * of them unless the tiles are too few to share among the threads). */        \
    static void polyc_gemm_win_item_##SFX(const void *ctx, int64_t t, int tid)          \
    {                                                                                  \
        const polyc_gemm_wctx *s = (const polyc_gemm_wctx *)ctx;                       \
        const polyc_gemm_args_##SFX *g = (const polyc_gemm_args_##SFX *)s->g;          \
        const polyc_gemm_splan *p = &s->plan;                                          \
        const int64_t w = (int64_t)p->nv * POLYC_GEMM_VL, K = s->K;                    \
        const int64_t grp = t % s->groups, tc = t / s->groups;                        \
        const int64_t u1 = polyc_gemm_min(s->runs * s->tpr, (tc + 1) * s->chunk);      \
        const int64_t sl0 = p->slivers * grp / s->groups;                              \
        const int64_t sl1 = p->slivers * (grp + 1) / s->groups;                        \
        const int64_t r0 = sl0 < p->s_hi ? sl0 * p->mr_hi                              \
                                         : p->s_hi * p->mr_hi + (sl0 - p->s_hi) * (p->mr_hi - 1); \
        const POLYC_GEMM_T *B = (const POLYC_GEMM_T *)s->b;                            \
        const POLYC_GEMM_T *bias = (const POLYC_GEMM_T *)s->bias;                      \
        POLYC_GEMM_T buf[POLYC_GEMM_WIN_BUF] __attribute__((aligned(64)));             \
        int64_t u, sl;                                                                 \
        POLYC_GEMM_ON_CHUNK(tid);                                                      \
        for (u = tc * s->chunk; u < u1; u++) {                                         \
            const int64_t q = u / s->tpr, j = (u % s->tpr) * w;                        \
            const int64_t rest = polyc_gemm_min(w, s->vlen - j);                       \
            const int64_t nvt = polyc_gemm_cdiv(rest, POLYC_GEMM_VL);                  \
            const int64_t lanes = rest - (nvt - 1) * POLYC_GEMM_VL;                    \
            const int full = rest == w;                                                \
            const int64_t h = s->pitch ? j / s->pitch : 0, x0 = j - h * s->pitch;      \
            const int direct = !s->pitch || x0 + rest <= s->run;                       \
            const int64_t n = (q * s->rows + h) * s->run + x0; /* if direct */         \
            const POLYC_GEMM_T *bq = B + (s->cbase ? s->cbase[q] : 0) + j;             \
            const POLYC_GEMM_T *ap = (const POLYC_GEMM_T *)s->a + r0 * K + sl0 * POLYC_GEMM_VL; \
            int64_t i0 = r0;                                                           \
            for (sl = sl0; sl < sl1; sl++) {                                           \
                const int mr = sl < p->s_hi ? p->mr_hi : p->mr_hi - 1;                 \
                const polyc_gemm_sk_fn_##SFX fn = polyc_gemm_sk_tab_##SFX[nvt][mr][!full]; \
                if (direct)                                                            \
                    fn(K, ap, bq, s->boff, g->C + i0 * g->c_rs + n, g->c_rs, lanes,    \
                       s->beta, &g->beta, bias ? bias + n : NULL, g->relu);            \
                else {                                                                 \
                    fn(K, ap, bq, s->boff, buf, w, lanes, 0, &g->beta, NULL, 0);       \
                    polyc_gemm_win_out_##SFX(s, buf, w, mr, i0, q, j, rest);           \
                }                                                                      \
                ap += (int64_t)mr * K + POLYC_GEMM_VL;                                 \
                i0 += mr;                                                              \
            }                                                                          \
            if (g->post)    /* rows r0 .. i0 - 1 of the tile's output columns */       \
                polyc_gemm_win_post_##SFX(s, r0, i0 - r0, q, j, rest);                 \
        }                                                                              \
    }                                                                                  \
                                                                                       \
    /* Item t of the packing: sliver t of A, at rows i0 .. and a vector of slack    \
     * per sliver before it: the transposes that pack a sliver store whole vectors,  \
     * up to VL - 1 elements past its end, and the slivers are packed in parallel. */ \
    static void polyc_gemm_win_pack_##SFX(const void *ctx, int64_t t, int tid)          \
    {                                                                                  \
        const polyc_gemm_wctx *s = (const polyc_gemm_wctx *)ctx;                       \
        const polyc_gemm_splan *p = &s->plan;                                          \
        const int64_t mr = t < p->s_hi ? p->mr_hi : p->mr_hi - 1;                      \
        (void)tid;                                                                     \
        const int64_t i0 = t < p->s_hi ? t * p->mr_hi                                  \
                                       : p->s_hi * p->mr_hi + (t - p->s_hi) * mr;       \
        polyc_gemm_sk_pack_a_##SFX((const polyc_gemm_args_##SFX *)s->g, s->a_rt, s->a_ct, \
                                   i0, mr, s->K,                                       \
                                   (POLYC_GEMM_T *)s->a + i0 * s->K + t * POLYC_GEMM_VL); \
    }                                                                                  \
                                                                                       \
    static int polyc_gemm_win_##SFX(polyc_gemm_args_##SFX *g, int nt)                  \
    {                                                                                  \
        static const int caps[] = POLYC_GEMM_SK_CAPS;                                  \
        polyc_gemm_wctx s;                                                             \
        const polyc_gemm_dims *cd = g->b_cd;                                           \
        const int64_t M = g->M, N = g->N, K = g->K;                                    \
        int64_t span = 1, lanes, items, need, a_len, tlen, cb_len, bias_len, at_len, i;   \
        const int64_t *a_rt = NULL, *a_ct = NULL;                                      \
        int d, outer, cached = 0;                                                      \
        char *buf, *at;                                                                \
        if (POLYC_GEMM_WIN_OFF || g->banded || g->c_cs != 1 || !cd)                    \
            return 0;                                                                  \
        if (M * K * (int64_t)sizeof(POLYC_GEMM_T) > POLYC_GEMM_WIN_ABYTES)             \
            return 0;                                                                  \
        /* the run: the inner unit-stride digits of B's column map */                 \
        for (d = cd->n - 1; d >= 0; d--) {                                             \
            if (cd->ext[d] == 1)                                                       \
                continue;                                                              \
            if (cd->stride[d] != span)                                                 \
                break;                                                                 \
            span *= cd->ext[d];                                                        \
        }                                                                              \
        s.run = span;                                                                  \
        s.pitch = 0;                                                                   \
        s.rows = 1;                                                                    \
        outer = d + 1;                                                                 \
        /* joined over the next digit when that computes fewer lanes, or as many     \
         * with rows of one vector (tiles of one vector per row reuse each broadcast \
         * of A once: 14 x 14 over a pitch of 16) */                                 \
        lanes = polyc_gemm_cdiv(span, POLYC_GEMM_VL) * POLYC_GEMM_VL;                  \
        if (d >= 0 && cd->stride[d] > span &&                                          \
            (cd->stride[d] < lanes || (cd->stride[d] == lanes && lanes == POLYC_GEMM_VL))) { \
            s.pitch = cd->stride[d];                                                   \
            s.rows = cd->ext[d];                                                       \
            outer = d;                                                                 \
        }                                                                              \
        if (!s.pitch && s.run < POLYC_GEMM_VL)                                         \
            return 0;                                                                  \
        s.vlen = (s.rows - 1) * s.pitch + s.run;                                       \
        s.runs = N / (s.rows * s.run);                                                 \
        s.plan = polyc_gemm_sk_plan(M, s.vlen, s.runs, K, POLYC_GEMM_VL,               \
                                    POLYC_GEMM_SK_NVMAX, caps);                        \
        /* with at most POLYC_GEMM_SMALL_INPLACE slivers, the small path reads B in   \
         * place as well: taken only where it would pack B (rows shorter than a      \
         * vector) or where joining the rows saves a quarter of the lanes (a       \
         * tile crossing a row's end costs a pass through the buffer: 8 x 784 x 72, \
         * a grouped convolution's group, joined over a pitch of 30 instead of    \
         * rows of 32 lanes, took 12 us against the small path's 10) */              \
        if (s.plan.slivers <= POLYC_GEMM_SMALL_INPLACE && s.run >= POLYC_GEMM_VL &&    \
            (!s.pitch || 4 * s.pitch > 3 * lanes))                                     \
            return 0;                                                                  \
        POLYC_GEMM_ON_WIN(s.plan.nv, s.plan.mr_hi, s.pitch);                           \
        s.K = K; s.g = g;                                                              \
        s.beta = g->beta == 0 ? 0 : g->beta == 1 ? 1 : 2;                              \
        s.tpr = polyc_gemm_cdiv(s.vlen, (int64_t)s.plan.nv * POLYC_GEMM_VL);           \
        /* items of a few tiles, 8 per thread, dynamically taken; with fewer tiles   \
         * than 4 per thread (a 7 x 7 output is one or two), each tile's slivers in  \
         * groups */                                                                 \
        s.chunk = polyc_gemm_max(1, s.runs * s.tpr / (8 * (int64_t)nt));               \
        s.groups = 1;                                                                  \
        if (s.runs * s.tpr < 4 * nt)                                                   \
            s.groups = polyc_gemm_min(s.plan.slivers,                                  \
                                      polyc_gemm_cdiv(4 * nt, s.runs * s.tpr));        \
        items = polyc_gemm_cdiv(s.runs * s.tpr, s.chunk) * s.groups;                   \
        if (items < 2)                                                                 \
            nt = 1;                                                                    \
        /* the buffer: B's row offsets, the runs' offsets, A's offset tables, the    \
         * contiguous bias, then all of A packed (64-byte aligned parts) */          \
        tlen = polyc_gemm_cdiv(K, 8) * 8;                                              \
        cb_len = s.runs > 1 ? polyc_gemm_cdiv(s.runs, 8) * 8 : 0;                      \
        at_len = (g->a_rd ? polyc_gemm_cdiv(M, 8) * 8 : 0) + (g->a_cd ? tlen : 0);    \
        bias_len = g->bias && g->bias_cs != 1 ? polyc_gemm_cdiv(N, 16) * 16 : 0;      \
        a_len = polyc_gemm_cdiv(M * K + (s.plan.slivers + 1) * POLYC_GEMM_VL, 16) * 16; \
        need = (tlen + cb_len + at_len) * (int64_t)sizeof(int64_t) +                  \
               (bias_len + a_len) * (int64_t)sizeof(POLYC_GEMM_T);                     \
        buf = (char *)polyc_gemm_acquire((size_t)need, &cached);                       \
        if (!buf)                                                                      \
            return 0;                                                                  \
        at = buf;                                                                      \
        s.boff = (const int64_t *)at;                                                  \
        if (g->b_rd)                                                                   \
            polyc_gemm_table(g->b_rd, K, (int64_t *)at);                               \
        else                                                                           \
            for (i = 0; i < K; i++)                                                    \
                ((int64_t *)at)[i] = i * g->b_rs;                                      \
        at += tlen * sizeof(int64_t);                                                  \
        s.cbase = NULL;                                                                \
        if (cb_len) {                                                                  \
            polyc_gemm_dims o = *cd;                                                   \
            o.n = outer;                                                               \
            polyc_gemm_table(&o, s.runs, (int64_t *)at);                               \
            s.cbase = (const int64_t *)at;                                             \
            at += cb_len * sizeof(int64_t);                                            \
        }                                                                              \
        if (g->a_rd) {                                                                 \
            polyc_gemm_table(g->a_rd, M, (int64_t *)at);                               \
            a_rt = (const int64_t *)at;                                                \
            at += polyc_gemm_cdiv(M, 8) * 8 * sizeof(int64_t);                         \
        }                                                                              \
        if (g->a_cd) {                                                                 \
            polyc_gemm_table(g->a_cd, K, (int64_t *)at);                               \
            a_ct = (const int64_t *)at;                                                \
            at += tlen * sizeof(int64_t);                                              \
        }                                                                              \
        s.bias = g->bias;                                                              \
        if (bias_len) {                                                                \
            POLYC_GEMM_T *bb = (POLYC_GEMM_T *)at;                                     \
            at += bias_len * sizeof(POLYC_GEMM_T);                                     \
            for (i = 0; i < N; i++)                                                    \
                bb[i] = g->bias[i * g->bias_cs];                                       \
            s.bias = bb;                                                               \
        }                                                                              \
        s.a = at;                                                                      \
        s.a_rt = a_rt;                                                                 \
        s.a_ct = a_ct;                                                                 \
        s.b = g->B;                                                                    \
        /* all of A, sliver after sliver (in parallel: 128 x 1152 floats take as long \
         * as a 7 x 7 output's products), then the tiles */                         \
        polyc_gemm_each(s.plan.slivers, nt, polyc_gemm_win_pack_##SFX, &s);            \
        polyc_gemm_each(items, nt, polyc_gemm_win_item_##SFX, &s);                     \
        polyc_gemm_release(buf, cached);                                               \
        return 1;                                                                      \
    }
#else
/* The portable build: the packed path does everything. */
#define POLYC_GEMM_DEFINE_WIN(SFX)                                                     \
    static int polyc_gemm_win_##SFX(polyc_gemm_args_##SFX *g, int nt)                  \
    {                                                                                  \
        (void)g, (void)nt;                                                             \
        return 0;                                                                      \
    }
#endif

#endif /* POLYC_GEMM_WIN_H */
