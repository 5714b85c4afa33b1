/* The float vector of the AVX-512 (16 lanes) and AVX2 + FMA (8 lanes) builds, for the code both
 * share (ukernels.c, activation.c). UK_VEC, its lane count, is left undefined on the portable build.
 * Include after <immintrin.h>. */
#ifndef ETMLIR_CPU_VEC_H
#define ETMLIR_CPU_VEC_H

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

#endif /* ETMLIR_CPU_VEC_H */
