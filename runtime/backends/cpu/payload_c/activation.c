/* The activations a microkernel's epilogue can apply (etmlir_epilogue's ETMLIR_EP_ACT_* field):
 * GELU (erf and tanh forms), SiLU, sigmoid and tanh, over a row of a tile the kernel has just
 * stored, while it is in L1.
 *
 * Each function is straight-line float arithmetic with both sides of every choice computed and one
 * picked, so that gcc vectorizes the loop over a unit-stride row (16 lanes on AVX-512, 8 on AVX2,
 * 4 on the portable x86-64-v2 build) without a libm call. The formulas and constants are those of
 * et-cpu-approximate-math (python/etmlir/backends/math_approximations.py), so a fused activation
 * gives what the generated loop it replaces gave:
 *   exp:  Cody-Waite range reduction, Cephes' degree-6 polynomial, 2^k from the exponent bits;
 *         0 below EXP_MIN, +inf above EXP_MAX, NaN kept;
 *   erf:  a Taylor polynomial below |x| = 1, else Abramowitz & Stegun 7.1.26 (absolute error < 2e-7);
 *   tanh: an odd Taylor polynomial below |x| = 0.25, else (1 - e) / (1 + e), e = exp(-2|x|).
 */
#include <stdint.h>
#include <string.h>

#include "etmlir_cpu_payload.h"

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

#if defined(__AVX512F__)
#define AV_LANES 16
typedef __m512 av;
typedef __mmask16 av_mask;
#define av_set1 _mm512_set1_ps
#define av_loadu _mm512_loadu_ps
#define av_storeu _mm512_storeu_ps
#define av_add _mm512_add_ps
#define av_sub _mm512_sub_ps
#define av_mul _mm512_mul_ps
#define av_div _mm512_div_ps
#define av_fma _mm512_fmadd_ps /* a * b + c */
#define av_max _mm512_max_ps   /* the second operand when either is NaN */
#define av_min _mm512_min_ps
#define av_abs _mm512_abs_ps
#define av_lt(a, b) _mm512_cmp_ps_mask((a), (b), _CMP_LT_OQ)
#define av_isnan(a) _mm512_cmp_ps_mask((a), (a), _CMP_UNORD_Q)
#define av_select(m, t, f) _mm512_mask_blend_ps((m), (f), (t))
#define av_floor(a) _mm512_roundscale_ps((a), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)
/* 2^(k - 1) for an integral k in [-125, 128]. */
#define av_pow2m1(k) \
  _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(k), _mm512_set1_epi32(126)), 23))
#elif defined(__AVX2__) && defined(__FMA__)
#define AV_LANES 8
typedef __m256 av;
typedef __m256 av_mask;
#define av_set1 _mm256_set1_ps
#define av_loadu _mm256_loadu_ps
#define av_storeu _mm256_storeu_ps
#define av_add _mm256_add_ps
#define av_sub _mm256_sub_ps
#define av_mul _mm256_mul_ps
#define av_div _mm256_div_ps
#define av_fma _mm256_fmadd_ps
#define av_max _mm256_max_ps
#define av_min _mm256_min_ps
#define av_abs(a) _mm256_andnot_ps(_mm256_set1_ps(-0.0f), (a))
#define av_lt(a, b) _mm256_cmp_ps((a), (b), _CMP_LT_OQ)
#define av_isnan(a) _mm256_cmp_ps((a), (a), _CMP_UNORD_Q)
#define av_select(m, t, f) _mm256_blendv_ps((f), (t), (m))
#define av_floor _mm256_floor_ps
#define av_pow2m1(k) \
  _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(k), _mm256_set1_epi32(126)), 23))
#else
#define AV_LANES 1
typedef float av;
typedef int av_mask;
static inline av av_set1(float a) { return a; }
static inline av av_loadu(const float* p) { return *p; }
static inline void av_storeu(float* p, av a) { *p = a; }
static inline av av_add(av a, av b) { return a + b; }
static inline av av_sub(av a, av b) { return a - b; }
static inline av av_mul(av a, av b) { return a * b; }
static inline av av_div(av a, av b) { return a / b; }
static inline av av_fma(av a, av b, av c) { return a * b + c; }
static inline av av_max(av a, av b) { return a > b ? a : b; }
static inline av av_min(av a, av b) { return a < b ? a : b; }
static inline av av_abs(av a) { return a < 0.0f ? -a : a; }
static inline av_mask av_lt(av a, av b) { return a < b; }
static inline av_mask av_isnan(av a) { return a != a; }
static inline av av_select(av_mask m, av t, av f) { return m ? t : f; }
static inline av av_floor(av a) {
  float k = (float)(int32_t)a; /* |a| < 2^31 where it is used */
  return k > a ? k - 1.0f : k;
}
static inline av av_pow2m1(av k) {
  uint32_t bits = (uint32_t)((int32_t)k + 126) << 23;
  float f;
  memcpy(&f, &bits, sizeof(f));
  return f;
}
#endif

#define C(x) av_set1(x)
#define EXP_MIN (-86.64339757f) /* ln(2^-125) */
#define EXP_MAX 88.72283905f    /* ln(FLT_MAX) */

static inline av av_exp(av x) {
  av xc = av_min(av_max(x, C(EXP_MIN)), C(EXP_MAX));
  av k = av_floor(av_fma(xc, C(1.44269504088896341f), C(0.5f)));
  av r = av_sub(xc, av_mul(k, C(0.693359375f))); /* ln 2 in two parts (Cody-Waite) */
  r = av_sub(r, av_mul(k, C(-2.12194440e-4f)));
  av p = C(1.9875691500e-4f);
  p = av_fma(p, r, C(1.3981999507e-3f));
  p = av_fma(p, r, C(8.3334519073e-3f));
  p = av_fma(p, r, C(4.1665795894e-2f));
  p = av_fma(p, r, C(1.6666665459e-1f));
  p = av_fma(p, r, C(5.0000001201e-1f));
  p = av_add(av_fma(p, av_mul(r, r), r), C(1.0f));
  av y = av_mul(av_add(p, p), av_pow2m1(k)); /* 2p 2^(k-1): no overflow at k = 128 */
  y = av_select(av_lt(x, C(EXP_MIN)), C(0.0f), y);
  y = av_select(av_lt(C(EXP_MAX), x), C(__builtin_inff()), y);
  return av_select(av_isnan(x), x, y);
}

static inline av av_negate_where_negative(av value, av sign_of) {
  return av_select(av_lt(sign_of, C(0.0f)), av_sub(C(0.0f), value), value);
}

/* 1 + erf(z), as erfc(|z|) = P(s) e^(-z^2) with s = 1 / (1 + p|z|) (Abramowitz & Stegun 7.1.26, absolute
 * error < 1.5e-7) for z < 0, and 2 - erfc(|z|) otherwise: for GELU this keeps the relative error small
 * in the negative tail, where 1 + erf(z) is small, and needs no separate branch near 0 (the error
 * is absolute and 1 + erf(0) = 1). */
static inline av av_one_plus_erf(av z) {
  av a = av_abs(z);
  av s = av_div(C(1.0f), av_fma(C(0.3275911f), a, C(1.0f)));
  av poly = C(1.061405429f);
  poly = av_fma(poly, s, C(-1.453152027f));
  poly = av_fma(poly, s, C(1.421413741f));
  poly = av_fma(poly, s, C(-0.284496736f));
  poly = av_fma(poly, s, C(0.254829592f));
  av erfc = av_mul(av_mul(poly, s), av_exp(av_sub(C(0.0f), av_mul(a, a))));
  return av_select(av_lt(z, C(0.0f)), erfc, av_sub(C(2.0f), erfc));
}

static inline av av_tanh(av x) {
  av a = av_abs(x);
  av e = av_exp(av_mul(a, C(-2.0f)));
  av large = av_negate_where_negative(av_div(av_sub(C(1.0f), e), av_add(C(1.0f), e)), x);
  av x2 = av_mul(x, x);
  av t = C(62.0f / 2835.0f);
  t = av_fma(t, x2, C(-17.0f / 315.0f));
  t = av_fma(t, x2, C(2.0f / 15.0f));
  t = av_fma(t, x2, C(-1.0f / 3.0f));
  t = av_fma(t, x2, C(1.0f));
  return av_select(av_lt(a, C(0.25f)), av_mul(t, x), large);
}

static inline av av_act(av v, int act) {
  switch (act) {
    case ETMLIR_EP_ACT_GELU:
      return av_mul(av_mul(C(0.5f), v), av_one_plus_erf(av_mul(v, C(0.70710678118654752f))));
    case ETMLIR_EP_ACT_GELU_TANH: {
      /* x/2 (1 + tanh(u)) = x sigmoid(2u) = x / (1 + e^(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3) */
      av u2 = av_mul(C(2.0f * 0.79788456080286536f), av_fma(C(0.044715f), av_mul(v, av_mul(v, v)), v));
      return av_div(v, av_add(C(1.0f), av_exp(av_sub(C(0.0f), u2))));
    }
    case ETMLIR_EP_ACT_SILU:
      return av_div(v, av_add(C(1.0f), av_exp(av_sub(C(0.0f), v))));
    case ETMLIR_EP_ACT_SIGMOID:
      return av_div(C(1.0f), av_add(C(1.0f), av_exp(av_sub(C(0.0f), v))));
    case ETMLIR_EP_ACT_TANH:
      return av_tanh(v);
    default:
      return v;
  }
}

/* One activation over whole vectors (the switch hoisted out of the loop by inlining per case). */
#define ACT_VECTORS(ACT)                                                                \
  for (int64_t j = 0; j + AV_LANES <= n; j += AV_LANES) av_storeu(x + j, av_act(av_loadu(x + j), ACT))

static void act_contiguous(float* x, int64_t n, int act) {
  switch (act) {
    case ETMLIR_EP_ACT_GELU: ACT_VECTORS(ETMLIR_EP_ACT_GELU); break;
    case ETMLIR_EP_ACT_GELU_TANH: ACT_VECTORS(ETMLIR_EP_ACT_GELU_TANH); break;
    case ETMLIR_EP_ACT_SILU: ACT_VECTORS(ETMLIR_EP_ACT_SILU); break;
    case ETMLIR_EP_ACT_SIGMOID: ACT_VECTORS(ETMLIR_EP_ACT_SIGMOID); break;
    case ETMLIR_EP_ACT_TANH: ACT_VECTORS(ETMLIR_EP_ACT_TANH); break;
    default: break;
  }
  int64_t done = n - n % AV_LANES;
  if (done < n) { /* the last partial vector, through a zero-padded copy */
    float tail[AV_LANES] = {0};
    memcpy(tail, x + done, sizeof(float) * (size_t)(n - done));
    av_storeu(tail, av_act(av_loadu(tail), act));
    memcpy(x + done, tail, sizeof(float) * (size_t)(n - done));
  }
}

ETMLIR_CPU_INTERNAL void etmlir_ep_activate(float* x, int64_t step, int64_t n, int act) {
  if (step == 1) {
    act_contiguous(x, n, act);
    return;
  }
  float chunk[64];
  for (int64_t j0 = 0; j0 < n; j0 += 64) {
    int64_t m = n - j0 < 64 ? n - j0 : 64;
    for (int64_t j = 0; j < m; j++) chunk[j] = x[(j0 + j) * step];
    act_contiguous(chunk, m, act);
    for (int64_t j = 0; j < m; j++) x[(j0 + j) * step] = chunk[j];
  }
}
