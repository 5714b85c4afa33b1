/* The float vector of the AVX-512 (16 lanes) and AVX2 + FMA (8 lanes) builds, for the code both
 * share (ukernels.c, activation.c). UK_VEC, its lane count, is left undefined on the portable build.
 * Include after <immintrin.h>. */
#ifndef ETMLIR_CPU_VEC_H
#define ETMLIR_CPU_VEC_H

#include <stdint.h>

#if defined(__AVX512F__)
#define UK_VEC 16
typedef __m512 ukv;
#define ukv_zero _mm512_setzero_ps
#define ukv_set1 _mm512_set1_ps
#define ukv_load _mm512_load_ps
#define ukv_loadu _mm512_loadu_ps
#define ukv_storeu _mm512_storeu_ps
#define ukv_fmadd _mm512_fmadd_ps /* a * b + c */
#define ukv_fnmadd _mm512_fnmadd_ps
#define ukv_sub _mm512_sub_ps
#define ukv_add _mm512_add_ps
#define ukv_mul _mm512_mul_ps
#define ukv_div _mm512_div_ps
#define ukv_max _mm512_max_ps /* the second operand when either is NaN; likewise ukv_min */
#define ukv_min _mm512_min_ps
#elif defined(__AVX2__) && defined(__FMA__)
#define UK_VEC 8
typedef __m256 ukv;
#define ukv_zero _mm256_setzero_ps
#define ukv_set1 _mm256_set1_ps
#define ukv_load _mm256_load_ps
#define ukv_loadu _mm256_loadu_ps
#define ukv_storeu _mm256_storeu_ps
#define ukv_fmadd _mm256_fmadd_ps
#define ukv_fnmadd _mm256_fnmadd_ps
#define ukv_sub _mm256_sub_ps
#define ukv_add _mm256_add_ps
#define ukv_mul _mm256_mul_ps
#define ukv_div _mm256_div_ps
#define ukv_max _mm256_max_ps
#define ukv_min _mm256_min_ps
#endif

/* The first n lanes of a vector (n clamped to [0, UK_VEC]): a mask for ukv_load_first (the other lanes 0),
 * ukv_load_first_or (the other lanes `fill`) and ukv_store_first (the other lanes not written). A row's
 * last partial vector, neither read nor written past its end. */
#if defined(__AVX512F__)
typedef __mmask16 ukv_lanes;
static inline ukv_lanes ukv_first(int64_t n) {
  return n >= 16 ? (ukv_lanes)0xFFFF : n <= 0 ? (ukv_lanes)0 : (ukv_lanes)((1u << n) - 1);
}
#define ukv_load_first(p, m) _mm512_maskz_loadu_ps((m), (p))
#define ukv_load_first_or(p, m, fill) _mm512_mask_loadu_ps(_mm512_set1_ps(fill), (m), (p))
#define ukv_store_first(p, m, v) _mm512_mask_storeu_ps((p), (m), (v))
#elif defined(__AVX2__) && defined(__FMA__)
typedef __m256i ukv_lanes;
static inline ukv_lanes ukv_first(int64_t n) {
  int c = n <= 0 ? 0 : n >= 8 ? 8 : (int)n;
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
#define ukv_load_first(p, m) _mm256_maskload_ps((p), (m))
#define ukv_load_first_or(p, m, fill) \
  _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps((p), (m)), _mm256_castsi256_ps(m))
#define ukv_store_first(p, m, v) _mm256_maskstore_ps((p), (m), (v))
#endif

#endif /* ETMLIR_CPU_VEC_H */
