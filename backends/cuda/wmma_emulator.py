"""The CPU emulator's meaning of the macros of the tensor-core GEMM
(:mod:`backends.cuda.wmma`): the function text is the device's, only the
fragments, shared arrays and barriers are defined here for POSIX threads."""

#: The emulator: the block's threads are POSIX threads (``polyc_wmma_block``
#: starts them), ``__shared__`` arrays static ones (one block runs at a
#: time), barriers ``pthread_barrier_t``; a fragment is the whole 16 x 16
#: tile, and lane 0 of each warp computes the warp-collective WMMA calls
#: for the warp (in float32, k in order): a store of a fragment writes the
#: whole tile, which the other lanes read after the warp's barrier, as on
#: the device.
EMULATOR_MACROS = r"""#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#define POLYC_WMMA_FN static
#define POLYC_WMMA_INLINE static inline
#define POLYC_WMMA_DIMS(...) ((polyc_wmma_dims){__VA_ARGS__})
#define POLYC_SHARED(T, name, n) static T name[n]
#define POLYC_SYNCTHREADS() pthread_barrier_wait(&polyc_wmma_bar)
#define POLYC_SYNCWARP() pthread_barrier_wait(&polyc_wmma_warp_bar[tid / 32])
typedef struct { unsigned char b[16]; } polyc_v16;
#define POLYC_UNROLL
#define POLYC_COPY16(dst, src) memcpy((dst), (src), 16)
#define POLYC_LOAD4(v, src) memcpy((v), (src), 16)
#define POLYC_LOAD2D(v, src) memcpy((v), (src), 16)
typedef struct { float x[256]; } polyc_wmma_frag;
#define POLYC_ACC_FRAGMENTS(name, n) polyc_wmma_frag name[n]
#define POLYC_A_FRAGMENTS(name, n, T) polyc_wmma_frag name[n]
#define POLYC_B_FRAGMENTS(name, n, T) polyc_wmma_frag name[n]
#define POLYC_LANE0 if (tid % 32 == 0)
#define POLYC_FILL(f, v) do { POLYC_LANE0 for (int q_ = 0; q_ < 256; q_++) (f).x[q_] = (v); \
  } while (0)
#define POLYC_LOAD(f, p, ld, cvt) do { POLYC_LANE0 for (int r_ = 0; r_ < 16; r_++) \
  for (int c_ = 0; c_ < 16; c_++) (f).x[r_ * 16 + c_] = cvt((p)[r_ * (ld) + c_]); } while (0)
#define POLYC_STORE(p, f, ld) do { POLYC_LANE0 for (int r_ = 0; r_ < 16; r_++) \
  for (int c_ = 0; c_ < 16; c_++) (p)[r_ * (ld) + c_] = (f).x[r_ * 16 + c_]; } while (0)
#define POLYC_MMA(d, a, b) do { POLYC_LANE0 polyc_wmma_mma(&(d), &(a), &(b)); } while (0)
static pthread_barrier_t polyc_wmma_bar, polyc_wmma_warp_bar[{NT} / 32];
static void polyc_wmma_mma(polyc_wmma_frag *d, const polyc_wmma_frag *a,
                           const polyc_wmma_frag *b)
{
  for (int r = 0; r < 16; r++)
    for (int c = 0; c < 16; c++) {
      float s = d->x[r * 16 + c];
      for (int k = 0; k < 16; k++)
        s += a->x[r * 16 + k] * b->x[k * 16 + c];
      d->x[r * 16 + c] = s;
    }
}
/* run fn(arg + i * size) on nt POSIX threads, the block's barriers set up
   for them: each thread waits at a gate until all are started, so that a
   failure to start one lets the others return without running fn; then 0,
   or -1 (polyc_wmma_error set) */
static pthread_mutex_t polyc_wmma_gate_m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t polyc_wmma_gate_c = PTHREAD_COND_INITIALIZER;
static int polyc_wmma_gate = 0;       /* 0 closed, 1 run, -1 give up */
int polyc_wmma_error = 0;
typedef struct { void *(*fn)(void *); void *arg; } polyc_wmma_start;
static void *polyc_wmma_gated(void *p)
{
  polyc_wmma_start *s = (polyc_wmma_start *)p;
  pthread_mutex_lock(&polyc_wmma_gate_m);
  while (polyc_wmma_gate == 0)
    pthread_cond_wait(&polyc_wmma_gate_c, &polyc_wmma_gate_m);
  int go = polyc_wmma_gate > 0;
  pthread_mutex_unlock(&polyc_wmma_gate_m);
  return go ? s->fn(s->arg) : NULL;
}
/* one block at a time in the process: the shared arrays are static */
static pthread_mutex_t polyc_wmma_run = PTHREAD_MUTEX_INITIALIZER;
static int polyc_wmma_block(void *(*fn)(void *), char *arg, size_t size, int nt)
{
  pthread_t th[{NT}];
  polyc_wmma_start st[{NT}];
  pthread_attr_t attr;
  int started = 0;
  if (nt != {NT}) { polyc_wmma_error = 1; return -1; }
  pthread_mutex_lock(&polyc_wmma_run);
  pthread_barrier_init(&polyc_wmma_bar, NULL, (unsigned)nt);
  for (int w = 0; w < nt / 32; w++)
    pthread_barrier_init(&polyc_wmma_warp_bar[w], NULL, 32);
  polyc_wmma_gate = 0;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, (size_t)1 << 20);
  for (; started < nt; started++) {
    st[started].fn = fn;
    st[started].arg = arg + (size_t)started * size;
    if (pthread_create(&th[started], &attr, polyc_wmma_gated, &st[started])) break;
  }
  pthread_attr_destroy(&attr);
  pthread_mutex_lock(&polyc_wmma_gate_m);
  polyc_wmma_gate = started == nt ? 1 : -1;
  pthread_cond_broadcast(&polyc_wmma_gate_c);
  pthread_mutex_unlock(&polyc_wmma_gate_m);
  for (int i = 0; i < started; i++)
    pthread_join(th[i], NULL);
  pthread_barrier_destroy(&polyc_wmma_bar);
  for (int w = 0; w < nt / 32; w++)
    pthread_barrier_destroy(&polyc_wmma_warp_bar[w]);
  pthread_mutex_unlock(&polyc_wmma_run);
  if (started != nt) { polyc_wmma_error = 1; return -1; }
  return 0;
}
"""
