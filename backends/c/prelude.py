"""The text every generated C kernel starts with (``emit.PRELUDE``): the
headers, the ``polyc_min``/``polyc_max``/``polyc_mod`` helpers and the
integer and half-precision conversions the statements' expressions call.
Kept apart from the emitter: it is data, not code generation."""

import re

from polyc import expr as E

PRELUDE = r"""#include <stdint.h>
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* The chunk of a dynamically scheduled parallel loop of trip iterations:
   about four chunks per thread (Config.omp_schedule) */
static inline int64_t polyc_chunk(int64_t trip, int team)
{
    const int64_t c = trip / (4 * (int64_t)(team > 0 ? team : 1));
    return c > 1 ? c : 1;
}

/* glibc's vector math library (libmvec, linked through -lm) has SIMD variants
   of these functions (at most 4 ulp from the correctly rounded result, glibc's
   documented bound); declared `omp declare simd`, a vectorised loop calls them
   instead of the scalar function once per element */
#if defined(__x86_64__) && defined(_OPENMP) && defined(__GLIBC__) && !defined(POLYC_NO_LIBMVEC)
#if __GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 22)
#pragma omp declare simd notinbranch
float expf(float);
#pragma omp declare simd notinbranch
double exp(double);
#pragma omp declare simd notinbranch
float logf(float);
#pragma omp declare simd notinbranch
double log(double);
#pragma omp declare simd notinbranch
float powf(float, float);
#pragma omp declare simd notinbranch
double pow(double, double);
#endif
#if __GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35)
#pragma omp declare simd notinbranch
float tanhf(float);
#pragma omp declare simd notinbranch
double tanh(double);
#pragma omp declare simd notinbranch
float erff(float);
#pragma omp declare simd notinbranch
double erf(double);
#endif
#endif
/* sin and cos under names of their own (the same functions, by asm labels):
   gcc fuses sinf(x) and cosf(x) of one x into a sincos call, which it does
   not vectorise (a positional encoding's sin(x) + cos(x) ran scalar) */
#if defined(__x86_64__) && defined(_OPENMP) && defined(__GLIBC__) && !defined(POLYC_NO_LIBMVEC) \
    && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 22))
#define POLYC_SIMD _Pragma("omp declare simd notinbranch")
#else
#define POLYC_SIMD
#endif
POLYC_SIMD float polyc_sinf(float) __asm__("sinf");
POLYC_SIMD double polyc_sin(double) __asm__("sin");
POLYC_SIMD float polyc_cosf(float) __asm__("cosf");
POLYC_SIMD double polyc_cos(double) __asm__("cos");

/* a fused multiply-add where the target has one (an instruction), else a
   product and a sum (fmaf would be a library call per element) */
#ifdef __FMA__
#define POLYC_FMAF(a, b, c) fmaf((a), (b), (c))
#else
#define POLYC_FMAF(a, b, c) ((a) * (b) + (c))
#endif
/* exp of a float without a call (the expression printer's float exp):
   Cephes' expf (S. L. Moshier) reduction and degree-5 polynomial, at most
   1.02 ulp from the correctly rounded result over every float; n = round(x /
   ln 2) read from the low bits of x / ln 2 + 1.5 * 2^23; 2^n applied as two
   normal factors, the second 0 below 2^-151, so that no lane underflows:
   libmvec's vector expf takes a scalar path for every input below about -87
   (a softmax's -inf mask: 5x slower), this takes none.  Denormal results,
   overflow to inf, exp(-inf) = 0 and NaN come out as IEEE's exp gives them. */
static inline float polyc_expf(float x)
{
    float c = x > 89.0f ? 89.0f : x;             /* NaN kept: comparisons fail */
    c = c < -110.0f ? -110.0f : c;
    float t = POLYC_FMAF(c, 1.44269504088896341f, 12582912.0f);
    float n = t - 12582912.0f;
    float r = POLYC_FMAF(n, -0.693359375f, c);
    r = POLYC_FMAF(n, 2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = POLYC_FMAF(p, r, 1.3981999507e-3f);
    p = POLYC_FMAF(p, r, 8.3334519073e-3f);
    p = POLYC_FMAF(p, r, 4.1665795894e-2f);
    p = POLYC_FMAF(p, r, 1.6666665459e-1f);
    p = POLYC_FMAF(p, r, 5.0000001201e-1f);
    p = POLYC_FMAF(p * r, r, r) + 1.0f;
    union { float f; uint32_t u; } tb, s1, s2;
    tb.f = t;
    int32_t k = (int32_t)(tb.u - 0x4b400000u);
    int32_t k1 = k < -126 ? -126 : k > 127 ? 127 : k, k2 = k - k1;
    s1.u = (uint32_t)(k1 + 127) << 23;
    s2.u = k2 < -25 ? 0u : (uint32_t)(k2 + 127) << 23;
    return p * s1.f * s2.f;
}

/* index arithmetic: int64_t, floor division and remainder as isl and TC define them */
static inline int64_t polyc_floord(int64_t a, int64_t b)
{ int64_t q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q; }
static inline int64_t polyc_mod(int64_t a, int64_t b)
{ int64_t r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
static inline int64_t polyc_min(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t polyc_max(int64_t a, int64_t b) { return a > b ? a : b; }
/* integer values wrap around as numpy's do (unsigned arithmetic: defined behaviour) */
static inline int32_t polyc_add_int32_t(int32_t a, int32_t b) { return (int32_t)((uint32_t)a + (uint32_t)b); }
static inline int32_t polyc_sub_int32_t(int32_t a, int32_t b) { return (int32_t)((uint32_t)a - (uint32_t)b); }
static inline int32_t polyc_mul_int32_t(int32_t a, int32_t b) { return (int32_t)((uint32_t)a * (uint32_t)b); }
static inline int32_t polyc_neg_int32_t(int32_t a) { return (int32_t)(UINT32_C(0) - (uint32_t)a); }
static inline int32_t polyc_abs_int32_t(int32_t a) { return a < 0 ? polyc_neg_int32_t(a) : a; }
static inline int64_t polyc_add_int64_t(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static inline int64_t polyc_sub_int64_t(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
static inline int64_t polyc_mul_int64_t(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
static inline int64_t polyc_neg_int64_t(int64_t a) { return (int64_t)(UINT64_C(0) - (uint64_t)a); }
static inline int64_t polyc_abs_int64_t(int64_t a) { return a < 0 ? polyc_neg_int64_t(a) : a; }
/* integer / and % on values: numpy's results for a zero divisor (0) and INT64_MIN / -1 */
static inline int64_t polyc_div_int64_t(int64_t a, int64_t b)
{ return b == 0 ? 0 : b == -1 ? polyc_neg_int64_t(a) : polyc_floord(a, b); }
static inline int64_t polyc_mod_int64_t(int64_t a, int64_t b)
{ return (b == 0 || b == -1) ? 0 : polyc_mod(a, b); }
/* << and >> on values: numpy's results for a count outside 0..width-1 (0, or -1
   for a negative value shifted right), the left shift in unsigned arithmetic */
static inline int32_t polyc_shl_int32_t(int32_t a, int32_t b)
{ return (uint32_t)b < 32u ? (int32_t)((uint32_t)a << b) : 0; }
static inline int32_t polyc_shr_int32_t(int32_t a, int32_t b)
{ return (uint32_t)b < 32u ? a >> b : (a < 0 ? -1 : 0); }
static inline int64_t polyc_shl_int64_t(int64_t a, int64_t b)
{ return (uint64_t)b < 64u ? (int64_t)((uint64_t)a << b) : 0; }
static inline int64_t polyc_shr_int64_t(int64_t a, int64_t b)
{ return (uint64_t)b < 64u ? a >> b : (a < 0 ? -1 : 0); }
/* ipow: numpy's integer power (square and multiply, wrapping); a negative
   exponent, which numpy refuses, gives the truncated value: 1, +-1 or 0 */
static inline int32_t polyc_ipow_int32_t(int32_t a, int32_t b)
{ uint32_t r = 1u, x = (uint32_t)a;
  if (b < 0) return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
  for (; b; b >>= 1) { if (b & 1) r *= x; x *= x; } return (int32_t)r; }
static inline int64_t polyc_ipow_int64_t(int64_t a, int64_t b)
{ uint64_t r = 1u, x = (uint64_t)a;
  if (b < 0) return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
  for (; b; b >>= 1) { if (b & 1) r *= x; x *= x; } return (int64_t)r; }
/* float -> integer conversions, defined for every value (C leaves a NaN or an
   out-of-range value undefined, and gcc folded constant ones to other values
   than its code computes: int(nan) gave 0, int(1e30) INT64_MAX): such a value
   gives INT32_MIN / INT64_MIN, the x86 result numpy's astype gives; the
   narrower types convert through int32 and wrap, uint32 from x - 2^31 where
   x >= 2^31, as gcc's vector code for numpy's casts does. Written as selects
   (gcc vectorises them): -2^31 (-2^63) stands for a value out of range */
static inline int32_t polyc_float_to_int32(float x)
{ return (int32_t)(fabsf(x) < 2147483648.0f ? x : -2147483648.0f); }
static inline int32_t polyc_double_to_int32(double x)
{ return (int32_t)(fabs(x) < 2147483648.0 ? x : -2147483648.0); }
static inline int64_t polyc_float_to_int64(float x)
{ return (int64_t)(fabsf(x) < 9223372036854775808.0f ? x : -9223372036854775808.0f); }
static inline int64_t polyc_double_to_int64(double x)
{ return (int64_t)(fabs(x) < 9223372036854775808.0 ? x : -9223372036854775808.0); }
static inline uint32_t polyc_float_to_uint32(float x)
{ int big = x >= 2147483648.0f;
  return (uint32_t)polyc_float_to_int32(big ? x - 2147483648.0f : x) ^ (big ? 0x80000000u : 0u); }
static inline uint32_t polyc_double_to_uint32(double x)
{ int big = x >= 2147483648.0;
  return (uint32_t)polyc_double_to_int32(big ? x - 2147483648.0 : x) ^ (big ? 0x80000000u : 0u); }
static inline int32_t polyc_min_int32_t(int32_t a, int32_t b) { return a < b ? a : b; }
static inline int32_t polyc_max_int32_t(int32_t a, int32_t b) { return a > b ? a : b; }
static inline int64_t polyc_min_int64_t(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t polyc_max_int64_t(int64_t a, int64_t b) { return a > b ? a : b; }
/* max=/min= reductions propagate NaN, as numpy's maximum/minimum do */
static inline float polyc_max_float(float a, float b) { return (a != a || a > b) ? a : b; }
static inline float polyc_min_float(float a, float b) { return (a != a || a < b) ? a : b; }
static inline double polyc_max_double(double a, double b) { return (a != a || a > b) ? a : b; }
static inline double polyc_min_double(double a, double b) { return (a != a || a < b) ? a : b; }
/* fmax/fmin (and max/min of floats in an expression): C's fmax, a NaN
   operand ignored, bit for bit glibc's (of two equal zeros the first, where
   numpy's fmax gives the second); written as selects, which gcc vectorises
   (it calls libm's fmaxf once per element otherwise: a ReLU ran at a fifth
   of the memory bandwidth) */
static inline float polyc_fmax_float(float a, float b) { return (a >= b || b != b) ? a : b; }
static inline float polyc_fmin_float(float a, float b) { return (a <= b || b != b) ? a : b; }
static inline double polyc_fmax_double(double a, double b) { return (a >= b || b != b) ? a : b; }
static inline double polyc_fmin_double(double a, double b) { return (a <= b || b != b) ? a : b; }
/* floating-point % rounds the quotient toward minus infinity (numpy's remainder;
   a zero result takes the divisor's sign) */
static inline float polyc_rem_float(float a, float b)
{ float r = fmodf(a, b); return r != 0 ? (((r < 0) != (b < 0)) ? r + b : r) : copysignf(0.0f, b); }
static inline double polyc_rem_double(double a, double b)
{ double r = fmod(a, b); return r != 0 ? (((r < 0) != (b < 0)) ? r + b : r) : copysign(0.0, b); }
/* x ** n for n = 2, 3, 4 as products (numpy squares x ** 2 the same way;
   libmvec's vector powf runs about 20x slower than a product) */
static inline float polyc_pow2_float(float x) { return x * x; }
static inline float polyc_pow3_float(float x) { return x * x * x; }
static inline float polyc_pow4_float(float x) { float y = x * x; return y * y; }
static inline double polyc_pow2_double(double x) { return x * x; }
static inline double polyc_pow3_double(double x) { return x * x * x; }
static inline double polyc_pow4_double(double x) { double y = x * x; return y * y; }
/* x ** 0.5 as numpy's power computes it: the square root (-0 for -0, NaN for -inf,
   where C99's pow gives +0 and +inf) */
static inline float polyc_pow0_float(float x) { return sqrtf(x); }
static inline double polyc_pow0_double(double x) { return sqrt(x); }
/* NaN constants, bit for bit */
static inline float polyc_bits_float(uint32_t u) { union { uint32_t u; float f; } x; x.u = u; return x.f; }
static inline double polyc_bits_double(uint64_t u) { union { uint64_t u; double f; } x; x.u = u; return x.f; }
""" + r"""/* half precision: storage types whose values compute in float, rounded to
   nearest even when stored (float16: the compiler's _Float16, gcc >= 12,
   clang >= 15; bfloat16: its bits in a uint16_t) */
#ifdef __FLT16_MAX__
typedef _Float16 polyc_float16;
static inline float polyc_float16_to_f32(polyc_float16 x) { return (float)x; }
static inline polyc_float16 polyc_f32_to_float16(float x) { return (polyc_float16)x; }
static inline polyc_float16 polyc_f64_to_float16(double x) { return (polyc_float16)x; }
#endif
typedef uint16_t polyc_bfloat16;
static inline float polyc_bfloat16_to_f32(polyc_bfloat16 x)
{ union { uint32_t u; float f; } v; v.u = (uint32_t)x << 16; return v.f; }
static inline polyc_bfloat16 polyc_f32_to_bfloat16(float x)
{ union { uint32_t u; float f; } v; v.f = x;
  if ((v.u & 0x7fffffffu) > 0x7f800000u) return (polyc_bfloat16)((v.u >> 16) | 0x40u);
  return (polyc_bfloat16)((v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16); }
"""


#: glibc versions from which libmvec has SIMD variants of these <math.h>
#: functions (float and double), beyond those the prelude declares (sin and
#: cos there, under names of their own)
_LIBMVEC = ((35, tuple(f for f in E.MATH_FUNCTIONS + E.MATH_FUNCTIONS2
                      if f not in ("sin", "cos", "floor", "ceil", "trunc", "rint",
                                   *E.SCALAR_FUNCTIONS2))),)


def libmvec_declarations(text: str) -> str:
    """The ``omp declare simd`` declarations, under the prelude's guards, of
    the libmvec functions that the C ``text`` calls (the others' would only
    lengthen every kernel); ``""`` when it calls none."""
    out = []
    for minor, names in _LIBMVEC:
        used = [f for f in names if re.search(rf"\b{f}f?\(", text)]
        if not used:
            continue
        out.append(f"#if __GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= {minor})")
        for f in used:
            two = f in E.MATH_FUNCTIONS2
            out += ["#pragma omp declare simd notinbranch",
                    f"float {f}f(float{', float' if two else ''});",
                    "#pragma omp declare simd notinbranch",
                    f"double {f}(double{', double' if two else ''});"]
        out.append("#endif")
    if not out:
        return ""
    return "\n".join(["", "#if defined(__x86_64__) && defined(_OPENMP) && defined(__GLIBC__) "
                      "&& !defined(POLYC_NO_LIBMVEC)", *out, "#endif", ""])
