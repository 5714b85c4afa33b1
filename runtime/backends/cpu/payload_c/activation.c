/* The activations a microkernel's epilogue can apply (etmlir_epilogue's ETMLIR_EP_ACT_* field):
 * GELU (erf and tanh forms), SiLU, sigmoid and tanh, over a row of a tile the kernel has just
 * stored, while it is in L1.
 *
 * Each function is written once over ukv (etmlir_cpu_vec.h): 16 lanes on AVX-512, 8 on AVX2 + FMA,
 * one float on the portable build. Both sides of every choice are computed and one picked (no
 * branch, no libm call). gcc does not vectorize these loops written in plain C (it reports control
 * flow in the loop), hence the intrinsics. Strided rows go through a small buffer on the stack; the
 * last partial vector of a row is a masked load and store. The formulas and constants are those of
 * et-cpu-approximate-math (python/etmlir/backends/math_approximations.py):
 *   exp:  Cody-Waite range reduction, Cephes' degree-6 polynomial, 2^k from the exponent bits;
 *         0 below EXP_MIN, +inf above EXP_MAX, NaN kept;
 *   erf:  Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7), used as erfc for 1 + erf(z), z < 0;
 *   tanh: an odd Taylor polynomial below |x| = 0.25, else (1 - e) / (1 + e), e = exp(-2|x|).
 */
#include <stdint.h>
#include <string.h>

#include "etmlir_cpu_payload.h"

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif
#include "etmlir_cpu_vec.h"

/* ukv (etmlir_cpu_vec.h) plus what the activations need beyond the kernels' set: ACT_LANES lanes, one
 * float on the portable build. */
#if defined(__AVX512F__)
#define ACT_LANES UK_VEC
typedef __mmask16 ukv_mask;
#define ukv_abs _mm512_abs_ps
#define ukv_lt(a, b) _mm512_cmp_ps_mask((a), (b), _CMP_LT_OQ)
#define ukv_isnan(a) _mm512_cmp_ps_mask((a), (a), _CMP_UNORD_Q)
#define ukv_select(m, t, f) _mm512_mask_blend_ps((m), (f), (t))
#define ukv_floor(a) _mm512_roundscale_ps((a), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)
/* 2^(k - 1) for an integral k in [-125, 128]. */
#define ukv_pow2m1(k) \
  _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(k), _mm512_set1_epi32(126)), 23))
#elif defined(__AVX2__) && defined(__FMA__)
#define ACT_LANES UK_VEC
typedef __m256 ukv_mask;
#define ukv_abs(a) _mm256_andnot_ps(_mm256_set1_ps(-0.0f), (a))
#define ukv_lt(a, b) _mm256_cmp_ps((a), (b), _CMP_LT_OQ)
#define ukv_isnan(a) _mm256_cmp_ps((a), (a), _CMP_UNORD_Q)
#define ukv_select(m, t, f) _mm256_blendv_ps((f), (t), (m))
#define ukv_floor _mm256_floor_ps
#define ukv_pow2m1(k) \
  _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(k), _mm256_set1_epi32(126)), 23))
#else
#define ACT_LANES 1
typedef float ukv;
typedef int ukv_mask;
static inline ukv ukv_set1(float a) { return a; }
static inline ukv ukv_loadu(const float* p) { return *p; }
static inline void ukv_storeu(float* p, ukv a) { *p = a; }
static inline ukv ukv_add(ukv a, ukv b) { return a + b; }
static inline ukv ukv_sub(ukv a, ukv b) { return a - b; }
static inline ukv ukv_mul(ukv a, ukv b) { return a * b; }
static inline ukv ukv_div(ukv a, ukv b) { return a / b; }
static inline ukv ukv_fmadd(ukv a, ukv b, ukv c) { return a * b + c; }
static inline ukv ukv_max(ukv a, ukv b) { return a > b ? a : b; }
static inline ukv ukv_min(ukv a, ukv b) { return a < b ? a : b; }
static inline ukv ukv_abs(ukv a) { return a < 0.0f ? -a : a; }
static inline ukv_mask ukv_lt(ukv a, ukv b) { return a < b; }
static inline ukv_mask ukv_isnan(ukv a) { return a != a; }
static inline ukv ukv_select(ukv_mask m, ukv t, ukv f) { return m ? t : f; }
static inline ukv ukv_floor(ukv a) {
  float k = (float)(int32_t)a; /* |a| < 2^31 where it is used */
  return k > a ? k - 1.0f : k;
}
static inline ukv ukv_pow2m1(ukv k) {
  uint32_t bits = (uint32_t)((int32_t)k + 126) << 23;
  float f;
  memcpy(&f, &bits, sizeof(f));
  return f;
}
#endif

#if !defined(UK_VEC) /* one lane: a row never ends in a partial vector (etmlir_cpu_vec.h's masks for it) */
typedef int ukv_lanes;
static inline ukv_lanes ukv_first(int64_t n) { return n > 0; }
static inline ukv ukv_load_first_or(const float* p, ukv_lanes m, float fill) { return m ? *p : fill; }
static inline void ukv_store_first(float* p, ukv_lanes m, ukv v) {
  if (m) *p = v;
}
#endif

#define C(x) ukv_set1(x)
#define EXP_MIN (-86.64339757f) /* ln(2^-125) */
#define EXP_MAX 88.72283905f    /* ln(FLT_MAX) */

static inline ukv act_exp(ukv x) {
  ukv xc = ukv_min(ukv_max(x, C(EXP_MIN)), C(EXP_MAX));
  ukv k = ukv_floor(ukv_fmadd(xc, C(1.44269504088896341f), C(0.5f)));
  ukv r = ukv_sub(xc, ukv_mul(k, C(0.693359375f))); /* ln 2 in two parts (Cody-Waite) */
  r = ukv_sub(r, ukv_mul(k, C(-2.12194440e-4f)));
  ukv p = C(1.9875691500e-4f);
  p = ukv_fmadd(p, r, C(1.3981999507e-3f));
  p = ukv_fmadd(p, r, C(8.3334519073e-3f));
  p = ukv_fmadd(p, r, C(4.1665795894e-2f));
  p = ukv_fmadd(p, r, C(1.6666665459e-1f));
  p = ukv_fmadd(p, r, C(5.0000001201e-1f));
  p = ukv_add(ukv_fmadd(p, ukv_mul(r, r), r), C(1.0f));
  ukv y = ukv_mul(ukv_add(p, p), ukv_pow2m1(k)); /* 2p 2^(k-1): no overflow at k = 128 */
  y = ukv_select(ukv_lt(x, C(EXP_MIN)), C(0.0f), y);
  y = ukv_select(ukv_lt(C(EXP_MAX), x), C(__builtin_inff()), y);
  return ukv_select(ukv_isnan(x), x, y);
}

static inline ukv act_negate_where_negative(ukv value, ukv sign_of) {
  return ukv_select(ukv_lt(sign_of, C(0.0f)), ukv_sub(C(0.0f), value), value);
}

/* 1 + erf(z), as erfc(|z|) = P(s) e^(-z^2) with s = 1 / (1 + p|z|) (Abramowitz & Stegun 7.1.26, absolute
 * error < 1.5e-7) for z < 0, and 2 - erfc(|z|) otherwise: for GELU this keeps the relative error small
 * in the negative tail, where 1 + erf(z) is small, and needs no separate branch near 0 (the error
 * is absolute and 1 + erf(0) = 1). */
static inline ukv act_one_plus_erf(ukv z) {
  ukv a = ukv_abs(z);
  ukv s = ukv_div(C(1.0f), ukv_fmadd(C(0.3275911f), a, C(1.0f)));
  ukv poly = C(1.061405429f);
  poly = ukv_fmadd(poly, s, C(-1.453152027f));
  poly = ukv_fmadd(poly, s, C(1.421413741f));
  poly = ukv_fmadd(poly, s, C(-0.284496736f));
  poly = ukv_fmadd(poly, s, C(0.254829592f));
  ukv erfc = ukv_mul(ukv_mul(poly, s), act_exp(ukv_sub(C(0.0f), ukv_mul(a, a))));
  return ukv_select(ukv_lt(z, C(0.0f)), erfc, ukv_sub(C(2.0f), erfc));
}

static inline ukv act_tanh(ukv x) {
  ukv a = ukv_abs(x);
  ukv e = act_exp(ukv_mul(a, C(-2.0f)));
  ukv large = act_negate_where_negative(ukv_div(ukv_sub(C(1.0f), e), ukv_add(C(1.0f), e)), x);
  ukv x2 = ukv_mul(x, x);
  ukv t = C(62.0f / 2835.0f);
  t = ukv_fmadd(t, x2, C(-17.0f / 315.0f));
  t = ukv_fmadd(t, x2, C(2.0f / 15.0f));
  t = ukv_fmadd(t, x2, C(-1.0f / 3.0f));
  t = ukv_fmadd(t, x2, C(1.0f));
  return ukv_select(ukv_lt(a, C(0.25f)), ukv_mul(t, x), large);
}

static inline ukv act_apply(ukv v, int act) {
  switch (act) {
    case ETMLIR_EP_ACT_GELU:
      return ukv_mul(ukv_mul(C(0.5f), v), act_one_plus_erf(ukv_mul(v, C(0.70710678118654752f))));
    case ETMLIR_EP_ACT_GELU_TANH: {
      /* x/2 (1 + tanh(u)) = x sigmoid(2u) = x / (1 + e^(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3) */
      ukv u2 = ukv_mul(C(2.0f * 0.79788456080286536f), ukv_fmadd(C(0.044715f), ukv_mul(v, ukv_mul(v, v)), v));
      return ukv_div(v, ukv_add(C(1.0f), act_exp(ukv_sub(C(0.0f), u2))));
    }
    case ETMLIR_EP_ACT_SILU:
      return ukv_div(v, ukv_add(C(1.0f), act_exp(ukv_sub(C(0.0f), v))));
    case ETMLIR_EP_ACT_SIGMOID:
      return ukv_div(C(1.0f), ukv_add(C(1.0f), act_exp(ukv_sub(C(0.0f), v))));
    case ETMLIR_EP_ACT_TANH:
      return act_tanh(v);
    default:
      return v;
  }
}

/* One activation over whole vectors (the switch hoisted out of the loop by inlining per case). */
#define ACT_VECTORS(ACT)                                                                \
  for (int64_t j = 0; j + ACT_LANES <= n; j += ACT_LANES) ukv_storeu(x + j, act_apply(ukv_loadu(x + j), ACT))

static void act_contiguous(float* x, int64_t n, int act) {
  switch (act) {
    case ETMLIR_EP_ACT_GELU: ACT_VECTORS(ETMLIR_EP_ACT_GELU); break;
    case ETMLIR_EP_ACT_GELU_TANH: ACT_VECTORS(ETMLIR_EP_ACT_GELU_TANH); break;
    case ETMLIR_EP_ACT_SILU: ACT_VECTORS(ETMLIR_EP_ACT_SILU); break;
    case ETMLIR_EP_ACT_SIGMOID: ACT_VECTORS(ETMLIR_EP_ACT_SIGMOID); break;
    case ETMLIR_EP_ACT_TANH: ACT_VECTORS(ETMLIR_EP_ACT_TANH); break;
    default: break;
  }
  int64_t done = n - n % ACT_LANES;
  if (done < n) { /* the last partial vector, zero padded */
    ukv_lanes keep = ukv_first(n - done);
    ukv_store_first(x + done, keep, act_apply(ukv_load_first_or(x + done, keep, 0.0f), act));
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

/* The largest of x[0..n), or NaN when one is NaN (as eager's softmax: a NaN spreads to its row). The
 * vector max drops a NaN lane (ukv_max returns its second operand then), so NaNs are looked for
 * alongside, in a mask the loop ORs together. */
ETMLIR_CPU_INTERNAL float etmlir_row_max(const float* x, int64_t n) {
  ukv m = C(-__builtin_inff());
#if defined(__AVX512F__)
  ukv_mask nan = 0;
#elif defined(__AVX2__) && defined(__FMA__)
  ukv_mask nan = _mm256_setzero_ps();
#else
  ukv_mask nan = 0;
#endif
  for (int64_t j = 0; j < n; j += ACT_LANES) {
    ukv v = j + ACT_LANES <= n ? ukv_loadu(x + j) : ukv_load_first_or(x + j, ukv_first(n - j), -__builtin_inff());
    m = ukv_max(v, m);
#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
    nan = _mm256_or_ps(nan, ukv_isnan(v));
#else
    nan |= ukv_isnan(v);
#endif
  }
#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
  int any_nan = _mm256_movemask_ps(nan) != 0;
#else
  int any_nan = nan != 0;
#endif
  float lanes[ACT_LANES], top = -__builtin_inff();
  ukv_storeu(lanes, m);
  for (int i = 0; i < ACT_LANES; i++) top = lanes[i] > top ? lanes[i] : top;
  return any_nan ? __builtin_nanf("") : top;
}

ETMLIR_CPU_INTERNAL float etmlir_exp_shifted_sum(float* x, int64_t n, float shift) {
  ukv s = C(shift), sum = C(0.0f);
  int64_t j = 0;
  for (; j + ACT_LANES <= n; j += ACT_LANES) {
    ukv e = act_exp(ukv_sub(ukv_loadu(x + j), s));
    ukv_storeu(x + j, e);
    sum = ukv_add(sum, e);
  }
  if (j < n) { /* the last partial vector, padded with -inf (exp: 0) */
    ukv_lanes keep = ukv_first(n - j);
    ukv e = act_exp(ukv_sub(ukv_load_first_or(x + j, keep, -__builtin_inff()), s));
    ukv_store_first(x + j, keep, e);
    sum = ukv_add(sum, e);
  }
  float lanes[ACT_LANES], total = 0.0f;
  ukv_storeu(lanes, sum);
  for (int i = 0; i < ACT_LANES; i++) total += lanes[i];
  return total;
}
