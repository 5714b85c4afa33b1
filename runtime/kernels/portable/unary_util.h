// Float math for the unary kernels (unary_ops.cpp) that GCC can vectorize:
// log, log2, log10, log1p, expm1, sinh, cosh, asinh, acosh, atanh, atan,
// asin, acos, erf, sqrt (correctly rounded), and sin/cos/tan for
// |x| <= kTrigFastBound, plus rounding without SSE4.1 (exact). Each function
// is within ~2 ulp of the correctly rounded result
// (test_kernels_unary.py checks them over dense ranges against float64) and
// handles NaN, ±inf and ±0 like libm.
//
// Like kutil::exp_float, everything is computed unconditionally and selected
// with kutil::blend_float, so that a loop calling one of them vectorizes.
// Double tensors use libm; these are for float (and float16/bfloat16, which
// compute in float).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "kernel_util.h"

namespace etmlir {
namespace umath {

using kutil::blend_float;

inline uint32_t bits_of(float x) { return __builtin_bit_cast(uint32_t, x); }
inline float float_of(uint32_t b) { return __builtin_bit_cast(float, b); }
inline float abs_float(float x) { return float_of(bits_of(x) & 0x7fffffffu); }
// |mag| with the sign of `sign`.
inline float copysign_float(float mag, float sign) {
  return float_of((bits_of(mag) & 0x7fffffffu) | (bits_of(sign) & 0x80000000u));
}

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kLn2 = 0.693147180559945309f;
// ln 2 = kLn2Hi + kLn2Lo, kLn2Hi with few bits so that n * kLn2Hi is exact.
constexpr float kLn2Hi = 0.693359375f;
constexpr float kLn2Lo = -2.12194440e-4f;
// pi/2 and pi as float plus the float nearest to the remainder.
constexpr float kPio2Hi = 1.57079637050628662109375f;
constexpr float kPio2Lo = -4.37113900018624283e-8f;
constexpr float kPiHi = 3.1415927410125732421875f;
constexpr float kPiLo = -8.74227800037248566e-8f;

// sqrt. Under -fno-math-errno std::sqrt is one sqrtps; with errno (the
// default) GCC keeps a libm call for negative inputs and the loop stays
// scalar, so this computes it instead: three Newton steps on the
// reciprocal square root in float from the bit-trick guess, then one
// correction in double (s^2 is exact there), which rounds correctly but
// for results within ~1e-14 of a rounding midpoint.
inline float sqrt_float(float x) {
#ifdef __NO_MATH_ERRNO__
  return std::sqrt(x);
#else
  const bool tiny = x < 5.42101086e-20f;  // 2^-64: scale up by 2^64, down by 2^32
  const float xs = x * blend_float(tiny, 18446744073709551616.0f, 1.0f);
  float y = float_of(0x5f3759dfu - (bits_of(xs) >> 1));
  const float h = 0.5f * xs;
  y = y * (1.5f - h * y * y);
  y = y * (1.5f - h * y * y);
  y = y * (1.5f - h * y * y);
  const double sd = static_cast<double>(xs * y);
  const double r = static_cast<double>(xs) - sd * sd;
  float s = static_cast<float>(sd + r * (0.5 * static_cast<double>(y)));
  s = s * blend_float(tiny, 2.3283064365386963e-10f, 1.0f);
  s = blend_float(x == kInf, kInf, s);
  return blend_float(x >= 0.0f, s, kNaN);  // -0 gives -0 (xs * y)
#endif
}

// ---------------------------------------------------------------------------
// Logarithms
// ---------------------------------------------------------------------------

// x = 2^k (1 + f) with 1 + f in [sqrt(1/2), sqrt(2)) for finite x > 0
// (denormals included), and log(1 + f) - f (Cephes logf's polynomial,
// within 1 ulp). Garbage for other x; callers select the special cases.
struct LogParts {
  float k;  // exponent
  float f;  // exact
  float t;  // log(1 + f) - f
};
inline LogParts log_parts(float x) {
  const bool tiny = x < std::numeric_limits<float>::min();
  const float xs = x * blend_float(tiny, 33554432.0f, 1.0f);  // 2^25
  // Offsetting by sqrt(1/2)'s mantissa makes the exponent field round the
  // mantissa into [sqrt(1/2), sqrt(2)) (as musl's logf does).
  const uint32_t ix = bits_of(xs) + (0x3f800000u - 0x3f3504f3u);
  const int32_t k = static_cast<int32_t>(ix >> 23) - 127;
  const float m = float_of((ix & 0x007fffffu) + 0x3f3504f3u);
  LogParts p;
  p.k = static_cast<float>(k) - blend_float(tiny, 25.0f, 0.0f);
  p.f = m - 1.0f;
  const float f = p.f;
  const float z = f * f;
  float y = 7.0376836292e-2f;
  y = y * f - 1.1514610310e-1f;
  y = y * f + 1.1676998740e-1f;
  y = y * f - 1.2420140846e-1f;
  y = y * f + 1.4249322787e-1f;
  y = y * f - 1.6668057665e-1f;
  y = y * f + 2.0000714765e-1f;
  y = y * f - 2.4999993993e-1f;
  y = y * f + 3.3333331174e-1f;
  p.t = y * f * z - 0.5f * z;
  return p;
}

// The special cases of every log: NaN below 0 (and for NaN), -inf at ±0, +inf at +inf.
inline float log_specials(float x, float r) {
  r = blend_float(x == kInf, kInf, r);
  r = blend_float(x == 0.0f, -kInf, r);
  return blend_float(x >= 0.0f, r, kNaN);
}

inline float log_float(float x) {
  const LogParts p = log_parts(x);
  const float r = (p.f + (p.t + p.k * kLn2Lo)) + p.k * kLn2Hi;
  return log_specials(x, r);
}

inline float log2_float(float x) {
  const LogParts p = log_parts(x);
  constexpr float kLog2eMinus1 = 0.44269504088896340736f;  // log2(e) = 1 + this
  const float r = (((p.t * kLog2eMinus1 + p.f * kLog2eMinus1) + p.t) + p.f) + p.k;
  return log_specials(x, r);
}

inline float log10_float(float x) {
  const LogParts p = log_parts(x);
  // log10(e) and log10(2), each split into a short head and a tail.
  constexpr float kL10eA = 4.3359375e-1f, kL10eB = 7.00731903251827651129e-4f;
  constexpr float kL102A = 3.0078125e-1f, kL102B = 2.48745663981195213739e-4f;
  float r = p.t * kL10eB + p.f * kL10eB + p.k * kL102B;
  r = r + p.t * kL10eA;
  r = r + p.f * kL10eA;
  r = r + p.k * kL102A;
  return log_specials(x, r);
}

// log(1 + x): log(u) for u = 1 + x rounded, plus the rounding error of u
// divided by u (the first-order correction).
inline float log1p_float(float x) {
  const float u = 1.0f + x;
  const float c = (x - (u - 1.0f)) / u;
  const LogParts p = log_parts(u);
  const float r = (p.f + (p.t + (p.k * kLn2Lo + c))) + p.k * kLn2Hi;
  // log_specials on u; u = +inf only for x = +inf (c is NaN there). The
  // result has x's sign (keeps -0).
  return copysign_float(log_specials(u, blend_float(x == kInf, kInf, r)), x);
}

// ---------------------------------------------------------------------------
// Exponentials and hyperbolics
// ---------------------------------------------------------------------------

// e^x - 1: 2^n (e^r - 1) + (2^n - 1) with |r| <= ln2 / 2 and e^r - 1 a Taylor
// polynomial; exp for x > 18 (where the 1 no longer counts), -1 below -17.5.
inline float expm1_float(float x) {
  constexpr float kMagic = 12582912.0f;
  const float t = x * 1.44269504088896341f + kMagic;
  const float fn = t - kMagic;
  const int32_t n = static_cast<int32_t>(bits_of(t) - bits_of(kMagic));
  float r = x - fn * kLn2Hi;
  r = r - fn * kLn2Lo;
  float q = 1.0f / 40320;
  q = q * r + 1.0f / 5040;
  q = q * r + 1.0f / 720;
  q = q * r + 1.0f / 120;
  q = q * r + 1.0f / 24;
  q = q * r + 1.0f / 6;
  q = q * r + 0.5f;
  const float p = r + r * r * q;
  // 2^n, meaningful for n in [-126, 127] (x in [-17.5, 18] gives [-25, 26]).
  const float s = float_of((static_cast<uint32_t>(n) + 127u) << 23);
  const float mid = s * p + (s - 1.0f);
  float res = blend_float(x > 18.0f, kutil::exp_float(x), mid);
  res = blend_float(x < -17.5f, -1.0f, res);
  return copysign_float(res, x);  // e^x - 1 has x's sign (keeps -0)
}

// e^|x| / 2 for |x| >= 10 without overflowing before sinh/cosh do:
// e^(|x| - kLn2Hi) (exact argument) times e^kLn2Hi / 2.
inline float half_exp_float(float a) { return kutil::exp_float(a - kLn2Hi) * 1.00021221695f; }

inline float sinh_float(float x) {
  const float a = abs_float(x);
  const float t = expm1_float(a);
  const float small = 0.5f * (2.0f * t - t * t / (t + 1.0f));  // no cancellation below 1
  const float mid = 0.5f * (t + t / (t + 1.0f));
  float r = blend_float(a < 10.0f, mid, half_exp_float(a));
  r = blend_float(a < 1.0f, small, r);
  return copysign_float(r, x);
}

inline float cosh_float(float x) {
  const float a = abs_float(x);
  const float t = kutil::exp_float(a);
  const float mid = 0.5f * t + 0.5f / t;
  return blend_float(a < 10.0f, mid, half_exp_float(a));  // NaN: half_exp(NaN) = NaN
}

// asinh(|x|) = log1p(|x| + x^2 / (1 + sqrt(1 + x^2))), log(2|x|) beyond 2^12.
inline float asinh_float(float x) {
  const float a = abs_float(x);
  const float a2 = a * a;
  const float mid = log1p_float(a + a2 / (1.0f + sqrt_float(1.0f + a2)));
  const float big = log_float(a) + kLn2;
  return copysign_float(blend_float(a > 4096.0f, big, mid), x);
}

// acosh(x) = log1p(t + sqrt(2t + t^2)) with t = x - 1 (exact), log(2x) beyond 2^12.
inline float acosh_float(float x) {
  const float t = x - 1.0f;
  const float mid = log1p_float(t + sqrt_float(2.0f * t + t * t));  // x < 1: sqrt of < 0 is NaN
  const float big = log_float(x) + kLn2;
  const float r = blend_float(x < 4096.0f, mid, big);
  return blend_float(x >= 1.0f, r, kNaN);
}

// atanh(|x|) = log1p(2|x| / (1 - |x|)) / 2, written as 2|x| + 2|x|^2 / (1 - |x|)
// below 1/2 so that the small term carries the rounding.
inline float atanh_float(float x) {
  const float a = abs_float(x);
  const float d = 1.0f - a;
  const float small = 2.0f * a + 2.0f * a * a / d;
  const float big = 2.0f * a / d;
  const float r = 0.5f * log1p_float(blend_float(a < 0.5f, small, big));
  return copysign_float(r, x);
}

// ---------------------------------------------------------------------------
// Inverse trigonometric (Cephes atanf / asinf polynomials)
// ---------------------------------------------------------------------------

inline float atan_float(float x) {
  const float a = abs_float(x);
  const bool big = a > 2.414213562373095f;    // tan(3 pi / 8)
  const bool mid = a > 0.4142135623730950f;   // tan(pi / 8)
  const float xr = blend_float(big, -1.0f / a, blend_float(mid, (a - 1.0f) / (a + 1.0f), a));
  const float hi = blend_float(big, kPio2Hi, blend_float(mid, 0.5f * kPio2Hi, 0.0f));
  const float lo = blend_float(big, kPio2Lo, blend_float(mid, 0.5f * kPio2Lo, 0.0f));
  const float z = xr * xr;
  float p = 8.05374449538e-2f;
  p = p * z - 1.38776856032e-1f;
  p = p * z + 1.99777106478e-1f;
  p = p * z - 3.33329491539e-1f;
  const float r = hi + (xr + (p * z * xr + lo));
  return copysign_float(r, x);
}

// asin(s) for |s| <= 1/2 given z = s^2.
inline float asin_poly(float s, float z) {
  float p = 4.2163199048e-2f;
  p = p * z + 2.4181311049e-2f;
  p = p * z + 4.5470025998e-2f;
  p = p * z + 7.4953002686e-2f;
  p = p * z + 1.6666752422e-1f;
  return p * z * s + s;
}

// |x| <= 1/2: the polynomial; above: pi/2 - 2 asin(sqrt((1 - |x|) / 2)).
inline float asin_float(float x) {
  const float a = abs_float(x);
  const bool big = a > 0.5f;
  const float z = blend_float(big, 0.5f * (1.0f - a), a * a);  // |x| > 1: z < 0, sqrt gives NaN
  const float s = blend_float(big, sqrt_float(z), a);
  const float p = asin_poly(s, z);
  const float r = blend_float(big, (kPio2Hi - 2.0f * p) + kPio2Lo, p);
  return copysign_float(r, x);
}

inline float acos_float(float x) {
  const float a = abs_float(x);
  const bool big = a > 0.5f;
  const float z = blend_float(big, 0.5f * (1.0f - a), x * x);
  const float s = blend_float(big, sqrt_float(z), x);
  const float p = asin_poly(s, z);  // asin(s)
  const float center = (kPio2Hi - p) + kPio2Lo;
  const float neg = (kPiHi - 2.0f * p) + kPiLo;
  return blend_float(big, blend_float(x < 0.0f, neg, 2.0f * p), center);
}

// ---------------------------------------------------------------------------
// erf, in double internally: x P(x^2) below 1, 1 - e^(-x^2) Q(1/x) up to 4
// (polynomials fitted to relative error 4e-10 and 4e-9), 1 beyond.
// ---------------------------------------------------------------------------

inline float erf_float(float x) {
  const float a = abs_float(x);
  const double ad = a;
  const double u = ad * ad;
  double p = -9.2890064502876e-06;
  p = p * u + 0.00011122691450281962;
  p = p * u - 0.000846232917674811;
  p = p * u + 0.005219346494801923;
  p = p * u - 0.026864729246044255;
  p = p * u + 0.112837674332985;
  p = p * u - 0.37612637029587304;
  p = p * u + 1.128379166656308;
  const float small = static_cast<float>(ad * p);
  const double v = 1.0 / ad;
  double q = -0.03720576617234039;
  q = q * v + 0.25820766672669915;
  q = q * v - 0.7924624852640211;
  q = q * v + 1.394460133394344;
  q = q * v - 1.4932158203497363;
  q = q * v + 0.8779549348082407;
  q = q * v - 0.05909592270202094;
  q = q * v - 0.2883946534718703;
  q = q * v + 0.0036614346804928278;
  q = q * v + 0.5636442880155262;
  q = q * v + 2.9764594050025193e-05;
  const double e = kutil::exp_float(-static_cast<float>(u));  // erfc(a) = e^(-a^2) Q
  const float mid = static_cast<float>(1.0 - e * q);
  const float r = blend_float(a < 1.0f, small, blend_float(a >= 4.0f, 1.0f, mid));  // NaN: mid is NaN
  return copysign_float(r, x);
}

// ---------------------------------------------------------------------------
// sin, cos, tan: reduction by k pi/2 in double (exact for |k| < 2^20), Taylor
// polynomials on [-pi/4, pi/4] in double. Valid for |x| <= kTrigFastBound;
// larger finite x give garbage (callers use libm there), NaN and inf give NaN.
// ---------------------------------------------------------------------------

constexpr float kTrigFastBound = 262144.0f;  // 2^18

struct SinCos {
  float s;    // sin(r)
  float c;    // cos(r)
  int32_t k;  // quadrant
  double sd, cd;
};

inline SinCos sincos_reduce(float x) {
  // In range: x itself; else 0 (keeps the int conversion defined).
  const float xin = blend_float(abs_float(x) <= kTrigFastBound, x, 0.0f);
  const double xd = xin;
  constexpr double kMagic = 6755399441055744.0;  // 1.5 * 2^52
  const double kd = (xd * 0.63661977236758134308 + kMagic) - kMagic;
  // pi/2 in three parts of 33, 33 and 53 bits (fdlibm's pio2_1, pio2_2, pio2_2t).
  double r = xd - kd * 1.57079632673412561417e+00;
  r = r - kd * 6.07710050630396597660e-11;
  r = r - kd * 2.02226624879595063154e-21;
  const double z = r * r;
  double sp = 1.0 / 39916800;  // 1/11!
  sp = -sp * z + 1.0 / 362880;
  sp = sp * z - 1.0 / 5040;
  sp = sp * z + 1.0 / 120;
  sp = sp * z - 1.0 / 6;
  double cp = 1.0 / 479001600;  // 1/12!
  cp = cp * z - 1.0 / 3628800;
  cp = cp * z + 1.0 / 40320;
  cp = cp * z - 1.0 / 720;
  cp = cp * z + 1.0 / 24;
  SinCos sc;
  sc.sd = r * (1.0 + z * sp);  // not r + r z sp: keeps sin(-0) = -0
  sc.cd = 1.0 - 0.5 * z + z * z * cp;
  sc.s = static_cast<float>(sc.sd);
  sc.c = static_cast<float>(sc.cd);
  sc.k = static_cast<int32_t>(kd);
  return sc;
}

// NaN/inf in gives NaN out (x - x); finite x beyond the bound is left to the caller.
inline float trig_nan(float x, float r) { return blend_float(abs_float(x) <= kTrigFastBound, r, x - x); }

inline float sin_fast(float x) {
  const SinCos sc = sincos_reduce(x);
  const float v = blend_float((sc.k & 1) != 0, sc.c, sc.s);
  const float r = blend_float((sc.k & 2) != 0, -v, v);
  return trig_nan(x, r);
}

inline float cos_fast(float x) {
  const SinCos sc = sincos_reduce(x);
  const float v = blend_float((sc.k & 1) != 0, sc.s, sc.c);
  const float r = blend_float(((sc.k + 1) & 2) != 0, -v, v);
  return trig_nan(x, r);
}

inline float tan_fast(float x) {
  const SinCos sc = sincos_reduce(x);
  const float even = static_cast<float>(sc.sd / sc.cd);
  const float odd = static_cast<float>(-sc.cd / sc.sd);
  return trig_nan(x, blend_float((sc.k & 1) != 0, odd, even));
}

// ---------------------------------------------------------------------------
// Rounding to integral values without SSE4.1's roundps: adding and
// subtracting 2^(mantissa bits) rounds to nearest even; values at or above
// it are integral already. T is float or double.
// ---------------------------------------------------------------------------

// c ? a : b for float or double, through bit masks (see kutil::blend_float).
template <typename T>
inline T blend(bool c, T a, T b) {
  using U = std::conditional_t<std::is_same_v<T, float>, uint32_t, uint64_t>;
  const U m = c ? ~U(0) : U(0);
  return __builtin_bit_cast(T, (__builtin_bit_cast(U, a) & m) | (__builtin_bit_cast(U, b) & ~m));
}

template <typename T>
inline T round_even(T x) {
  constexpr T kBig = std::is_same_v<T, float> ? T(8388608.0) : T(4503599627370496.0);
  const T a = std::fabs(x);
  const T r = (a + kBig) - kBig;
  return std::copysign(blend(a < kBig, r, a), x);  // NaN and inf: a
}

template <typename T>
inline T trunc_of(T x) {
  const T a = std::fabs(x);
  const T r = round_even(a);
  return std::copysign(blend(r > a, r - T(1), r), x);
}

template <typename T>
inline T floor_of(T x) {
  const T t = trunc_of(x);
  return blend(t > x, t - T(1), t);
}

template <typename T>
inline T ceil_of(T x) {
  const T t = trunc_of(x);
  return blend(t < x, t + T(1), t);
}

}  // namespace umath
}  // namespace etmlir
