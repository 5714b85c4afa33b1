/* Microkernels the cpu backend's compiler calls instead of linalg.matmul, linalg.batch_matmul,
 * linalg.conv_2d_nchw_fchw and linalg.depthwise_conv_2d_nchw_chw (at memref level, through
 * MLIR's C interface). Every kernel accumulates into its output and accepts any strides and
 * offsets; no alignment is assumed.
 *
 * GEMM (GotoBLAS/BLIS): K is split into blocks of at most KC_MAX; for each block, rows of A are
 * packed into MR-row panels ([k][MR], balanced heights) and columns of B into NR-column panels
 * ([k][NR], zero padded), then a register-blocked MR x NR microkernel runs over every pair of
 * panels. Packing absorbs strides and offsets, so the microkernel sees unit-stride panels. Short
 * cuts where packing would cost as much as it saves:
 *   - B with contiguous rows and M <= B_IN_PLACE_MAX_M (B_IN_PLACE_MAX_M_FILTER when A is a filter packed at
 *     compile time): the microkernel reads B in place;
 *   - M == 1, or a transposed B (contiguous columns) with M <= GEMV_MAX_M: dot products.
 * Convolution: one GEMM per image, W[F, C*KH*KW] x im2col(in)[C*KH*KW, OH*OW], where a pointwise
 * convolution's B is the input itself and otherwise the B packer gathers the im2col columns (no
 * im2col buffer). With AVX-512, a convolution with C*KH*KW <= KC_MAX and few filter panels reads
 * its input straight from the microkernel instead (implicit GEMM). A 3x3 stride-1 convolution whose
 * filter the compiler transformed goes through Winograd F(2x2, 3x3) or F(4x4, 3x3): 16 or 36 GEMMs
 * over blocks of tiles. Depthwise: 3x3 stride 1 / 2 fast paths, several output rows per pass;
 * everything else a generic loop.
 *
 * Three builds of the same sources: AVX-512 (MR x NR = 14 x 32), AVX2 + FMA (6 x 16) and a
 * portable path (4 x 16, left to the compiler's vectorizer). Scratch (packed panels) comes from
 * the payload's allocator; parallel work is split into tasks (etmlir_cpu_parallel_tasks, a few per
 * thread, claimed at run time), every output element computed by exactly one task in the same order
 * whatever the split, so results do not depend on which thread ran what.
 */
#include <string.h>

#include "etmlir_cpu_payload.h"

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

#if defined(__AVX512F__)
#define UK_MR 14
#define UK_NR 32
#elif defined(__AVX2__) && defined(__FMA__)
#define UK_MR 6
#define UK_NR 16
#else
#define UK_MR 4
#define UK_NR 16
#endif

/* The vector both ISA paths share (ukv, UK_VEC lanes); either way a B panel row (UK_NR floats) is two
 * vectors. */
#include "etmlir_cpu_vec.h"
#if defined(UK_VEC)
typedef char uk_panel_row_is_two_vectors[UK_NR == 2 * UK_VEC ? 1 : -1];
#define UK_GEMV_PACKED 1 /* one row of A times a B packed at compile time: gemv_packed_row */
#else
#define UK_GEMV_PACKED 0
#endif

#define UK_INLINE static inline __attribute__((always_inline))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define CEIL_DIV(a, b) (((a) + (b)-1) / (b))

enum {
  KC_MAX = 384,             /* K block: an A micro-panel (MR x KC) stays in L1 */
  /* The microkernels prefetch A this far ahead (about 2 KB): weights packed at compile time come from
   * memory (a model's do not fit the caches). ResNet-18's last-stage convolution (512 x 4608 filter,
   * 7x7 outputs) took 2.82 ms with its filter evicted first against 2.35 ms cached; 2.56 ms with this
   * (AVX2 build: 4.64 -> 4.13 ms). */
  A_PREFETCH_FLOATS = 448,
  /* Likewise packed B, this many panel rows ahead (2 KB), where its panels are not outer in gemm_range (there
   * each tile prefetches the next panel instead, which measured faster). First for a linear layer's weight,
   * packed at compile time and streamed from memory by few rows of A: ConvNeXt's 768 -> 3072 layer over 49
   * pixels (9.4 MB of weight), caches flushed before each run: 2.23 -> 1.75 ms (1.28 -> 1.20 warm). B packed
   * at run time is in L1 or L2, where the prefetches cost no measurable time (MobileNetV2, ResNet-18). */
  B_PREFETCH_ROWS = 16,
  B_BLOCK_FLOATS = 96 << 10, /* packed B block (KC x NC) budget: 384 KiB, in L2 */
  A_BLOCK_FLOATS = 128 << 10, /* packed A block (MC x KC) budget: 512 KiB */
  PAR_MIN_FLOPS = 1 << 21,  /* below this (~20 us on one core) a GEMM runs on one thread: waking a worker costs more */
  GEMV_FLOP_WEIGHT = 8,     /* a matrix-vector product's flops count this many times (gemm_run) */
  /* Likewise for the window kernels (depthwise convolution, max pooling), counted in window taps
   * (outputs x window size): they run 5-10 G taps/s, not the GEMM's 100 GFLOP/s, so ~20 us is 2^17
   * taps. (At 2^20, MobileNetV2's 14x14 and 7x7 depthwise layers, 0.1 ms each, ran on one thread.) */
  PAR_MIN_TAPS = 1 << 17,
  /* A parallel job offers up to this many tasks per thread, claimed at run time (etmlir_cpu_parallel_tasks),
   * each at least TASK_MIN_FLOPS (or TASK_MIN_TAPS), ~5 us: the threads of a job end within about a task
   * of each other however unequal their speeds. (8 per thread and half the minimum measured slower.) */
  TASKS_PER_THREAD = 4,
  TASK_MIN_FLOPS = 1 << 19,
  TASK_MIN_TAPS = 1 << 15,
  B_IN_PLACE_MAX_M = 2 * UK_MR, /* up to this many rows of A, row-contiguous B is not packed */
  /* ... and up to this many when A is a filter packed at compile time (a pointwise convolution, whose B
   * is its input): MobileNetV2's projections (16 to 96 filters, 2 to 7 panels), at 14x14 a 450 KB input
   * packed once for 7 panels: the model 1-2% faster at 1 thread and 1-3% at 2 without that copy (this
   * machine's noise is about 1.5%). Not for the other GEMMs: nanoGPT's, with activations for A, measured
   * 0-4% slower with it. */
  B_IN_PLACE_MAX_M_FILTER = 8 * UK_MR,
#if defined(__AVX512F__)
  GEMV_MAX_M = 8,           /* up to this many rows of A, a transposed B is not packed either */
  TAIL_COLS_MAX = 4,        /* up to this many columns past a multiple of 16 are dot products, */
  /* ... each a pass over A: only while the passes are short, K * columns <= this. At 7x7 outputs
   * (N = 49, one column; kern512's x16 tile now takes those) they paid for pointwise filters (K = 160:
   * 152 against 117 GFLOP/s; K = 320: 125 against 118) but not for 3x3 ones (K = 4608: 119 against 123;
   * at 14x14, four columns of K = 2304: 139 against 178). */
  TAIL_K_MAX = 2048,
#else
  GEMV_MAX_M = 1,
#endif
};

/* ------------------------------------------------------------------------------------------ */
/* Operand views                                                                              */
/* ------------------------------------------------------------------------------------------ */

/* Element (i, j) is p[i * rs + j * cs]. */
typedef struct {
  const float* p;
  int64_t rs, cs;
} mat_view;

/* The B operand: a matrix, or the im2col view of one image of a convolution's input, where
 * row k = (c * KH + kh) * KW + kw and column n = oh * OW + ow hold
 * in[c * sc + (oh * str_h + kh * dil_h) * sh + (ow * str_w + kw * dil_w) * sw]. */
typedef struct {
  int is_conv;
  mat_view m;
  const float* in;
  int64_t sc, sh, sw;
  int64_t kh, kw, ow;
  int64_t str_h, str_w, dil_h, dil_w;
  /* Not NULL: B was packed at compile time (et-cpu-pack-weights) into UK_NR-column panels over all
   * of K, zero padded past N: column n, row k at packed[(n / UK_NR) * K * UK_NR + k * UK_NR + n % UK_NR]. */
  const float* packed;
} b_view;

static mat_view view2(const float* base, int64_t rs, int64_t cs) {
  mat_view v = {base, rs, cs};
  return v;
}

/* A fused epilogue (etmlir_epilogue) seen through one 2-d view of the output: element (i, j) of the
 * view has bias bias[i * bias_rs + j * bias_cs] and residual res[i * res_rs + j * res_cs]. */
typedef struct {
  const etmlir_epilogue* ep; /* NULL: the output accumulates the product, nothing else */
  const float* bias;
  int64_t bias_rs, bias_cs;
  const float* res;
  int64_t res_rs, res_cs;
} ep_view;

static int ep_inits(const ep_view* e) {
  return e->ep && (e->ep->mode & ETMLIR_EP_INIT_MASK) != ETMLIR_EP_INIT_OUTPUT;
}

static int ep_activation(const etmlir_epilogue* ep) { return (int)(ep->mode >> ETMLIR_EP_ACT_SHIFT) & 7; }

static int ep_finishes(const ep_view* e) {
  /* 15 << LO_SHIFT: both bounds' bits (4-7); 7 << ACT_SHIFT: the activation's (8-10). */
  return e->ep && (e->ep->mode & (ETMLIR_EP_BIAS_AFTER | ETMLIR_EP_RESIDUAL | (15 << ETMLIR_EP_LO_SHIFT) |
                                  (7 << ETMLIR_EP_ACT_SHIFT)));
}

/* A block whose rows follow each other in memory (and in the bias and residual) is one long row:
 * fewer, longer loops (a depthwise plane, a pointwise convolution's output). */
static void ep_collapse(const ep_view* e, int64_t rsc, int64_t csc, int64_t c0, int64_t* rows, int64_t* cols) {
  int bias_ok = e->bias_rs == 0 && e->bias_cs == 0;
  int res_ok = !(e->ep->mode & ETMLIR_EP_RESIDUAL) || (e->res_cs == 1 && e->res_rs == *cols);
  if (*rows > 1 && csc == 1 && c0 == 0 && rsc == *cols && bias_ok && res_ok) {
    *cols *= *rows;
    *rows = 1;
  }
}

/* c[i * rsc + j * csc] for i in [r0, r0 + rows), j in [c0, c0 + cols) := the init (zero or bias). */
static void ep_init(const ep_view* e, float* c, int64_t rsc, int64_t csc, int64_t r0, int64_t rows, int64_t c0,
                    int64_t cols) {
  if (!ep_inits(e)) return;
  ep_collapse(e, rsc, csc, c0, &rows, &cols);
  int zero = (e->ep->mode & ETMLIR_EP_INIT_MASK) == ETMLIR_EP_INIT_ZERO;
  for (int64_t i = r0; i < r0 + rows; i++) {
    float* row = c + i * rsc;
    const float* b = zero ? NULL : e->bias + i * e->bias_rs;
    if (zero || e->bias_cs == 0) {
      float v = zero ? 0.0f : b[0];
      if (csc == 1) {
        for (int64_t j = c0; j < c0 + cols; j++) row[j] = v;
      } else {
        for (int64_t j = c0; j < c0 + cols; j++) row[j * csc] = v;
      }
    } else {
      for (int64_t j = c0; j < c0 + cols; j++) row[j * csc] = b[j * e->bias_cs];
    }
  }
}

/* One step of the epilogue over n elements x[j * step] (j < n); a row of a tile is in L1, so one
 * pass per step costs little, and each pass is a branch-free loop the compiler vectorizes when the
 * step is 1. A bound keeps NaN (KEEP_NAN: lo > v ? lo : v) or replaces it (v > lo ? v : lo). */
#define EP_PASS(x, step, n, body)                                        \
  do {                                                                   \
    if ((step) == 1) {                                                   \
      for (int64_t j = 0; j < (n); j++) {                                \
        float* restrict xp = (x) + j;                                    \
        body;                                                            \
      }                                                                  \
    } else {                                                             \
      for (int64_t j = 0; j < (n); j++) {                                \
        float* restrict xp = (x) + j * (step);                           \
        body;                                                            \
      }                                                                  \
    }                                                                    \
  } while (0)

static void ep_finish_row(float* restrict x, int64_t step, int64_t n, const float* restrict b, int64_t bstep,
                          const float* restrict r, int64_t rstep, int act, int lo_mode, float lo, int hi_mode,
                          float hi) {
  if (b && bstep == 0) {
    float bv = b[0];
    EP_PASS(x, step, n, *xp += bv);
  } else if (b) {
    EP_PASS(x, step, n, *xp += b[j * bstep]);
  }
  if (r) EP_PASS(x, step, n, *xp += r[j * rstep]);
  if (act) etmlir_ep_activate(x, step, n, act);
  if (lo_mode == ETMLIR_EP_BOUND_KEEP_NAN) {
    EP_PASS(x, step, n, *xp = lo > *xp ? lo : *xp);
  } else if (lo_mode) {
    EP_PASS(x, step, n, *xp = *xp > lo ? *xp : lo);
  }
  if (hi_mode == ETMLIR_EP_BOUND_KEEP_NAN) {
    EP_PASS(x, step, n, *xp = hi < *xp ? hi : *xp);
  } else if (hi_mode) {
    EP_PASS(x, step, n, *xp = *xp < hi ? *xp : hi);
  }
}

/* The rest of the epilogue (bias after, residual, bounds) over the same block, in place. */
static void ep_finish(const ep_view* e, float* c, int64_t rsc, int64_t csc, int64_t r0, int64_t rows, int64_t c0,
                      int64_t cols) {
  if (!ep_finishes(e)) return;
  ep_collapse(e, rsc, csc, c0, &rows, &cols);
  int64_t mode = e->ep->mode;
  int bias_after = (mode & ETMLIR_EP_BIAS_AFTER) != 0, residual = (mode & ETMLIR_EP_RESIDUAL) != 0;
  int lo_mode = (int)(mode >> ETMLIR_EP_LO_SHIFT) & 3, hi_mode = (int)(mode >> ETMLIR_EP_HI_SHIFT) & 3;
  for (int64_t i = r0; i < r0 + rows; i++) {
    const float* b = bias_after ? e->bias + i * e->bias_rs + c0 * e->bias_cs : NULL;
    const float* r = residual ? e->res + i * e->res_rs + c0 * e->res_cs : NULL;
    ep_finish_row(c + i * rsc + c0 * csc, csc, cols, b, e->bias_cs, r, e->res_cs, ep_activation(e->ep), lo_mode,
                  e->ep->lo, hi_mode, e->ep->hi);
  }
}

typedef struct {
  int64_t M, N, K;
  mat_view a;
  b_view b;
  float* c;
  int64_t rsc, csc;
  ep_view e; /* the fused epilogue, in C's (row, column) coordinates */
  /* Not NULL: A was packed at compile time (et-cpu-pack-weights) into UK_MR-row panels over all of
   * K, zero padded past M: row m, column k at a_packed[(m / UK_MR) * K * UK_MR + k * UK_MR + m % UK_MR]. */
  const float* a_packed;
  int64_t a_ld; /* gemm_range only: floats from one packed A panel to the next; 0: K * UK_MR. Set, the
                 * problem's K columns are a slice of wider panels (a projection split over its K). */
} gemm_problem;

/* The epilogue of one microkernel tile, applied in registers: the accumulators start at zero or the
 * bias instead of C (init), and bias, residual and bounds are applied before the store (finish). */
typedef struct {
  int init, finish;     /* init: ETMLIR_EP_INIT_ZERO / _BIAS, 0 = load C; finish: 0 or 1 */
  int bias_rows;        /* the bias runs down the rows (else along the columns, unit step) */
  int bias_after, lo_mode, hi_mode;
  const float* bias;    /* the tile's first row's (bias_rows) or first column's bias */
  int64_t bias_step;    /* between rows (bias_rows) */
  const float* res;     /* the tile's residual, row stride res_ld, unit column stride; NULL: none */
  int64_t res_ld;
  float lo, hi;
} tile_ep;

#if defined(UK_VEC)
/* The tile epilogue's bounds on one vector. MAXPS/MINPS return their second operand when either is
 * NaN: the bound second turns NaN into the bound, the value second keeps it. */
UK_INLINE ukv ep_bounds(const tile_ep* te, ukv v, ukv lo, ukv hi) {
  if (te->lo_mode == ETMLIR_EP_BOUND_KEEP_NAN) {
    v = ukv_max(lo, v);
  } else if (te->lo_mode) {
    v = ukv_max(v, lo);
  }
  if (te->hi_mode == ETMLIR_EP_BOUND_KEEP_NAN) {
    v = ukv_min(hi, v);
  } else if (te->hi_mode) {
    v = ukv_min(v, hi);
  }
  return v;
}
#endif

/* The tile at (row, col) of a view with unit column stride: 0 when its epilogue does not fit
 * tile_ep (a bias or residual with a column stride other than 1, or an activation: that runs over the
 * stored tile, in ep_finish, while it is in L1). */
static int tile_ep_make(const ep_view* e, int64_t row, int64_t col, int init, int finish, tile_ep* te) {
  const etmlir_epilogue* ep = e->ep;
  int64_t mode = ep->mode;
  if (finish && ep_activation(ep)) return 0;
  int uses_bias = (init && (mode & ETMLIR_EP_INIT_MASK) == ETMLIR_EP_INIT_BIAS) ||
                  (finish && (mode & ETMLIR_EP_BIAS_AFTER));
  int residual = finish && (mode & ETMLIR_EP_RESIDUAL);
  if ((uses_bias && e->bias_cs != 0 && (e->bias_cs != 1 || e->bias_rs != 0)) || (residual && e->res_cs != 1))
    return 0;
  te->init = init ? (int)(mode & ETMLIR_EP_INIT_MASK) : 0;
  te->finish = finish;
  te->bias_rows = e->bias_cs == 0;
  te->bias_after = finish && (mode & ETMLIR_EP_BIAS_AFTER) != 0;
  te->lo_mode = finish ? (int)(mode >> ETMLIR_EP_LO_SHIFT) & 3 : 0;
  te->hi_mode = finish ? (int)(mode >> ETMLIR_EP_HI_SHIFT) & 3 : 0;
  te->bias = uses_bias ? e->bias + row * e->bias_rs + col * e->bias_cs : NULL;
  te->bias_step = e->bias_rs;
  te->res = residual ? e->res + row * e->res_rs + col : NULL;
  te->res_ld = e->res_rs;
  te->lo = ep->lo;
  te->hi = ep->hi;
  return 1;
}

/* tile_ep on a tile of mr x nr elements c[r * rsc + j * csc], element by element (the paths
 * without a register epilogue). */
static void tile_ep_generic(const tile_ep* te, int finish_phase, float* c, int64_t rsc, int64_t csc, int mr,
                            int nr) {
  for (int r = 0; r < mr; r++) {
    float* row = c + r * rsc;
    if (!finish_phase) {
      if (!te->init) return;
      for (int j = 0; j < nr; j++)
        row[j * csc] = te->init == ETMLIR_EP_INIT_ZERO ? 0.0f
                       : te->bias_rows                 ? te->bias[r * te->bias_step]
                                                       : te->bias[j];
      continue;
    }
    if (!te->finish) return;
    ep_finish_row(row, csc, nr, te->bias_after ? (te->bias_rows ? te->bias + r * te->bias_step : te->bias) : NULL,
                  te->bias_rows ? 0 : 1, te->res ? te->res + r * te->res_ld : NULL, 1, 0, te->lo_mode, te->lo,
                  te->hi_mode, te->hi);
  }
}

/* ------------------------------------------------------------------------------------------ */
/* Microkernels: C[mr x nr] += Ap[kc][MR] * Bp[kc][NR] (C row stride rsc, column stride csc)  */
/* ------------------------------------------------------------------------------------------ */

#if defined(__AVX512F__)

/* A tile's accumulators start at its epilogue's init (zero or the bias) instead of C. */
UK_INLINE void ep512_init(const int mr, const int nv, const tile_ep* te, __m512* acc0, __m512* acc1, __mmask16 m0,
                          __mmask16 m1) {
  __m512 b0 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps();
  if (te->init == ETMLIR_EP_INIT_BIAS && !te->bias_rows) {
    b0 = _mm512_maskz_loadu_ps(m0, te->bias);
    if (nv == 2) b1 = _mm512_maskz_loadu_ps(m1, te->bias + 16);
  }
#pragma GCC unroll 14
  for (int r = 0; r < mr; r++) {
    if (te->init == ETMLIR_EP_INIT_BIAS && te->bias_rows) b0 = b1 = _mm512_set1_ps(te->bias[r * te->bias_step]);
    acc0[r] = b0;
    if (nv == 2) acc1[r] = b1;
  }
}

/* The rest of a tile's epilogue on its accumulators, before the store. */
UK_INLINE void ep512_finish(const int mr, const int nv, const tile_ep* te, __m512* acc0, __m512* acc1,
                            __mmask16 m0, __mmask16 m1) {
  __m512 b0 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps();
  __m512 lo = _mm512_set1_ps(te->lo), hi = _mm512_set1_ps(te->hi);
  if (te->bias_after && !te->bias_rows) {
    b0 = _mm512_maskz_loadu_ps(m0, te->bias);
    if (nv == 2) b1 = _mm512_maskz_loadu_ps(m1, te->bias + 16);
  }
#pragma GCC unroll 14
  for (int r = 0; r < mr; r++) {
    __m512 v0 = acc0[r], v1 = nv == 2 ? acc1[r] : v0;
    if (te->bias_after) {
      if (te->bias_rows) b0 = b1 = _mm512_set1_ps(te->bias[r * te->bias_step]);
      v0 = _mm512_add_ps(v0, b0);
      if (nv == 2) v1 = _mm512_add_ps(v1, b1);
    }
    if (te->res) {
      v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, te->res + r * te->res_ld));
      if (nv == 2) v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, te->res + r * te->res_ld + 16));
    }
    acc0[r] = ep_bounds(te, v0, lo, hi);
    if (nv == 2) acc1[r] = ep_bounds(te, v1, lo, hi);
  }
}

/* packed: B is a packed panel (aligned, row stride NR); else B is read in place (row stride ldb)
 * under the column masks, so nothing past column nr is touched.
 * x16 (with nv 1 and packed): a tile of 17 columns (N = 49, a 7x7 output, is a tile of 32 and one of
 * 17), column 16 one vector whose lanes are the tile's rows (A's panel row k times B[k][16]): 15 FMAs
 * per k instead of the 28 of two vectors per row, the second with one live lane. Column 16's epilogue
 * runs element by element on C, before and after. ResNet-18's 7x7 convolutions alone (3x3, 512
 * channels): 1.67 against 1.85 ms at 1 thread, 0.89 against 0.97 at 2; the stride-2 one from 14x14,
 * 0.90 against 0.98 and 0.46 against 0.51. */
UK_INLINE void kern512(const int mr, const int nv, const int packed, const int x16, int64_t kc,
                       const float* restrict ap, const float* restrict bp, int64_t ldb, float* restrict c,
                       int64_t ldc, __mmask16 m0, __mmask16 m1, const tile_ep* te, int64_t next_panel) {
  const __mmask16 rows = (__mmask16)((1u << mr) - 1);
  tile_ep te16 = {0}; /* column 16's epilogue */
  float t[16] = {0};  /* column 16 by rows */
  if (x16) {
    if (te) {
      te16 = *te;
      if (te16.bias && !te16.bias_rows) te16.bias += 16;
      if (te16.res) te16.res += 16;
      if (te->init) tile_ep_generic(&te16, 0, c + 16, ldc, 1, mr, 1);
    }
    for (int r = 0; r < mr; r++) t[r] = c[r * ldc + 16];
  }
  __m512 col = _mm512_loadu_ps(t);
  __m512 acc0[UK_MR], acc1[UK_MR];
  if (te && te->init) {
    ep512_init(mr, nv, te, acc0, acc1, m0, m1);
  } else {
#pragma GCC unroll 14
    for (int r = 0; r < mr; r++) {
      acc0[r] = _mm512_maskz_loadu_ps(m0, c + r * ldc);
      if (nv == 2) acc1[r] = _mm512_maskz_loadu_ps(m1, c + r * ldc + 16);
    }
  }
#pragma GCC unroll 2
  for (int64_t k = 0; k < kc; k++) {
    __m512 b0 = packed ? _mm512_load_ps(bp) : _mm512_maskz_loadu_ps(m0, bp);
    __m512 b1 = nv == 2 ? (packed ? _mm512_load_ps(bp + 16) : _mm512_maskz_loadu_ps(m1, bp + 16)) : b0;
    if (x16) col = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(rows, ap), _mm512_set1_ps(bp[16]), col);
#pragma GCC unroll 14
    for (int r = 0; r < mr; r++) {
      __m512 a = _mm512_set1_ps(ap[r]);
      acc0[r] = _mm512_fmadd_ps(a, b0, acc0[r]);
      if (nv == 2) acc1[r] = _mm512_fmadd_ps(a, b1, acc1[r]);
    }
    _mm_prefetch((const char*)(ap + A_PREFETCH_FLOATS), _MM_HINT_T0);
    if (packed && next_panel) { /* the same row of the next panel, into L2 (b_outer in gemm_range) */
      _mm_prefetch((const char*)(bp + next_panel), _MM_HINT_T1);
      _mm_prefetch((const char*)(bp + next_panel + 16), _MM_HINT_T1);
    } else if (packed) { /* B_PREFETCH_ROWS rows ahead: a weight packed at compile time comes from memory */
      _mm_prefetch((const char*)(bp + B_PREFETCH_ROWS * UK_NR), _MM_HINT_T0);
      _mm_prefetch((const char*)(bp + B_PREFETCH_ROWS * UK_NR + 16), _MM_HINT_T0);
    }
    ap += UK_MR;
    bp += packed ? UK_NR : ldb;
  }
  if (te && te->finish) ep512_finish(mr, nv, te, acc0, acc1, m0, m1);
#pragma GCC unroll 14
  for (int r = 0; r < mr; r++) {
    _mm512_mask_storeu_ps(c + r * ldc, m0, acc0[r]);
    if (nv == 2) _mm512_mask_storeu_ps(c + r * ldc + 16, m1, acc1[r]);
  }
  if (x16) {
    _mm512_storeu_ps(t, col);
    for (int r = 0; r < mr; r++) c[r * ldc + 16] = t[r];
    if (te && te->finish) tile_ep_generic(&te16, 1, c + 16, ldc, 1, mr, 1);
  }
}

#define KERN512_CASE(R)                                                           \
  case R:                                                                         \
    if (x16) {                                                                    \
      kern512(R, 1, 1, 1, kc, ap, bp, ldb, c, ldc, m0, m1, te, next_panel);       \
    } else if (nv == 2) {                                                         \
      if (packed) {                                                               \
        kern512(R, 2, 1, 0, kc, ap, bp, ldb, c, ldc, m0, m1, te, next_panel);     \
      } else {                                                                    \
        kern512(R, 2, 0, 0, kc, ap, bp, ldb, c, ldc, m0, m1, te, next_panel);     \
      }                                                                           \
    } else {                                                                      \
      if (packed) {                                                               \
        kern512(R, 1, 1, 0, kc, ap, bp, ldb, c, ldc, m0, m1, te, next_panel);     \
      } else {                                                                    \
        kern512(R, 1, 0, 0, kc, ap, bp, ldb, c, ldc, m0, m1, te, next_panel);     \
      }                                                                           \
    }                                                                             \
    break;

static void kern512_dispatch(int mr, int nr, int64_t kc, const float* ap, const float* bp, int packed, int64_t ldb,
                             float* c, int64_t ldc, const tile_ep* te, int64_t next_panel) {
  __mmask16 m0 = nr >= 16 ? 0xFFFF : (__mmask16)((1u << nr) - 1);
  __mmask16 m1 = nr >= 32 ? 0xFFFF : nr > 16 ? (__mmask16)((1u << (nr - 16)) - 1) : 0;
  int nv = nr > 16 ? 2 : 1;
  int x16 = packed && nr == 17;
  switch (mr) {
    KERN512_CASE(1)
    KERN512_CASE(2)
    KERN512_CASE(3)
    KERN512_CASE(4)
    KERN512_CASE(5)
    KERN512_CASE(6)
    KERN512_CASE(7)
    KERN512_CASE(8)
    KERN512_CASE(9)
    KERN512_CASE(10)
    KERN512_CASE(11)
    KERN512_CASE(12)
    KERN512_CASE(13)
    KERN512_CASE(14)
    default:
      break;
  }
}

/* B: a packed panel (ldb < 0), else read in place with row stride ldb and unit column stride.
 * te (may be NULL): the tile's epilogue. next_panel (packed B; 0: none): how far (floats) from B the
 * same row of the next panel is, which the kernel prefetches into L2 as it goes (gemm_range). */
static void micro_kernel(int mr, int nr, int64_t kc, const float* ap, const float* bp, int64_t ldb, float* c,
                         int64_t rsc, int64_t csc, const tile_ep* te, int64_t next_panel) {
  int packed = ldb < 0;
  if (csc == 1) {
    kern512_dispatch(mr, nr, kc, ap, bp, packed, ldb, c, rsc, te, next_panel);
    return;
  }
  float tile[UK_MR * UK_NR] __attribute__((aligned(64)));
  memset(tile, 0, sizeof(tile));
  kern512_dispatch(mr, nr, kc, ap, bp, packed, ldb, tile, UK_NR, NULL, next_panel);
  if (te) tile_ep_generic(te, 0, c, rsc, csc, mr, nr);
  for (int r = 0; r < mr; r++)
    for (int j = 0; j < nr; j++) c[r * rsc + j * csc] += tile[r * UK_NR + j];
  if (te) tile_ep_generic(te, 1, c, rsc, csc, mr, nr);
}

#elif defined(__AVX2__) && defined(__FMA__)

UK_INLINE void kern256(const int mr, int64_t kc, const float* restrict ap, const float* restrict bp,
                       float* restrict c, int64_t ldc, const tile_ep* te, int64_t next_panel) {
  __m256 acc0[UK_MR], acc1[UK_MR];
  if (te && te->init) {
    __m256 b0 = _mm256_setzero_ps(), b1 = _mm256_setzero_ps();
    if (te->init == ETMLIR_EP_INIT_BIAS && !te->bias_rows) {
      b0 = _mm256_loadu_ps(te->bias);
      b1 = _mm256_loadu_ps(te->bias + 8);
    }
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++) {
      if (te->init == ETMLIR_EP_INIT_BIAS && te->bias_rows) b0 = b1 = _mm256_set1_ps(te->bias[r * te->bias_step]);
      acc0[r] = b0;
      acc1[r] = b1;
    }
  } else {
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++) {
      acc0[r] = _mm256_loadu_ps(c + r * ldc);
      acc1[r] = _mm256_loadu_ps(c + r * ldc + 8);
    }
  }
#pragma GCC unroll 2
  for (int64_t k = 0; k < kc; k++) {
    __m256 b0 = _mm256_load_ps(bp);
    __m256 b1 = _mm256_load_ps(bp + 8);
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++) {
      __m256 a = _mm256_broadcast_ss(ap + r);
      acc0[r] = _mm256_fmadd_ps(a, b0, acc0[r]);
      acc1[r] = _mm256_fmadd_ps(a, b1, acc1[r]);
    }
    _mm_prefetch((const char*)(ap + A_PREFETCH_FLOATS), _MM_HINT_T0);
    if (next_panel) /* as kern512: the next panel's row into L2 */
      _mm_prefetch((const char*)(bp + next_panel), _MM_HINT_T1);
    ap += UK_MR;
    bp += UK_NR;
  }
  if (te && te->finish) {
    __m256 b0 = _mm256_setzero_ps(), b1 = _mm256_setzero_ps();
    __m256 lo = _mm256_set1_ps(te->lo), hi = _mm256_set1_ps(te->hi);
    if (te->bias_after && !te->bias_rows) {
      b0 = _mm256_loadu_ps(te->bias);
      b1 = _mm256_loadu_ps(te->bias + 8);
    }
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++) {
      __m256 v0 = acc0[r], v1 = acc1[r];
      if (te->bias_after) {
        if (te->bias_rows) b0 = b1 = _mm256_set1_ps(te->bias[r * te->bias_step]);
        v0 = _mm256_add_ps(v0, b0);
        v1 = _mm256_add_ps(v1, b1);
      }
      if (te->res) {
        v0 = _mm256_add_ps(v0, _mm256_loadu_ps(te->res + r * te->res_ld));
        v1 = _mm256_add_ps(v1, _mm256_loadu_ps(te->res + r * te->res_ld + 8));
      }
      acc0[r] = ep_bounds(te, v0, lo, hi);
      acc1[r] = ep_bounds(te, v1, lo, hi);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < mr; r++) {
    _mm256_storeu_ps(c + r * ldc, acc0[r]);
    _mm256_storeu_ps(c + r * ldc + 8, acc1[r]);
  }
}

static void kern256_dispatch(int mr, int64_t kc, const float* ap, const float* bp, float* c, int64_t ldc,
                             const tile_ep* te, int64_t next_panel) {
  switch (mr) {
    case 1: kern256(1, kc, ap, bp, c, ldc, te, next_panel); break;
    case 2: kern256(2, kc, ap, bp, c, ldc, te, next_panel); break;
    case 3: kern256(3, kc, ap, bp, c, ldc, te, next_panel); break;
    case 4: kern256(4, kc, ap, bp, c, ldc, te, next_panel); break;
    case 5: kern256(5, kc, ap, bp, c, ldc, te, next_panel); break;
    case 6: kern256(6, kc, ap, bp, c, ldc, te, next_panel); break;
    default: break;
  }
}

static void micro_kernel(int mr, int nr, int64_t kc, const float* ap, const float* bp, int64_t ldb, float* c,
                         int64_t rsc, int64_t csc, const tile_ep* te, int64_t next_panel) {
  (void)ldb; /* always a packed panel here */
  if (csc == 1 && nr == UK_NR) {
    kern256_dispatch(mr, kc, ap, bp, c, rsc, te, next_panel);
    return;
  }
  float tile[UK_MR * UK_NR] __attribute__((aligned(32)));
  memset(tile, 0, sizeof(tile));
  kern256_dispatch(mr, kc, ap, bp, tile, UK_NR, NULL, next_panel);
  if (te) tile_ep_generic(te, 0, c, rsc, csc, mr, nr);
  for (int r = 0; r < mr; r++)
    for (int j = 0; j < nr; j++) c[r * rsc + j * csc] += tile[r * UK_NR + j];
  if (te) tile_ep_generic(te, 1, c, rsc, csc, mr, nr);
}

#else

static void micro_kernel(int mr, int nr, int64_t kc, const float* ap, const float* bp, int64_t ldb, float* c,
                         int64_t rsc, int64_t csc, const tile_ep* te, int64_t next_panel) {
  (void)ldb; /* always a packed panel here */
  (void)next_panel;
  if (te) tile_ep_generic(te, 0, c, rsc, csc, mr, nr);
  float acc[UK_MR][UK_NR];
  memset(acc, 0, sizeof(acc));
  for (int64_t k = 0; k < kc; k++) {
    for (int r = 0; r < UK_MR; r++) {
      float a = ap[r];
      for (int j = 0; j < UK_NR; j++) acc[r][j] += a * bp[j];
    }
    ap += UK_MR;
    bp += UK_NR;
  }
  for (int r = 0; r < mr; r++)
    for (int j = 0; j < nr; j++) c[r * rsc + j * csc] += acc[r][j];
  if (te) tile_ep_generic(te, 1, c, rsc, csc, mr, nr);
}

#endif

/* ------------------------------------------------------------------------------------------ */
/* Packing                                                                                    */
/* ------------------------------------------------------------------------------------------ */

#if defined(__AVX512F__)
static __mmask16 mask16(int64_t n) { return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1); }

/* In-register transpose of a 16 x 16 block: r[i][j] -> r[j][i]. */
UK_INLINE void transpose16(__m512 r[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; i++) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; i++) {
    __m512d t0 = _mm512_castps_pd(t[4 * i]), t1 = _mm512_castps_pd(t[4 * i + 1]);
    __m512d t2 = _mm512_castps_pd(t[4 * i + 2]), t3 = _mm512_castps_pd(t[4 * i + 3]);
    u[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
    u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
    u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
    u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
  }
  /* u[4g + q], lane l: column 4l + q of rows 4g..4g+3. */
  for (int q = 0; q < 4; q++) {
    __m512 v = _mm512_shuffle_f32x4(u[q], u[4 + q], 0x44);
    __m512 w = _mm512_shuffle_f32x4(u[q], u[4 + q], 0xEE);
    __m512 x = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], 0x44);
    __m512 y = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], 0xEE);
    r[q] = _mm512_shuffle_f32x4(v, x, 0x88);
    r[4 + q] = _mm512_shuffle_f32x4(v, x, 0xDD);
    r[8 + q] = _mm512_shuffle_f32x4(w, y, 0x88);
    r[12 + q] = _mm512_shuffle_f32x4(w, y, 0xDD);
  }
}

/* Loads rows src + i * ld (i < cnt, zeros past cnt), columns [0, klen), and transposes them. */
UK_INLINE void load_transposed(const float* src, int64_t ld, int cnt, int64_t klen, __m512 r[16]) {
  __mmask16 km = mask16(klen);
  if (klen == 16) {
    for (int i = 0; i < 16; i++) r[i] = i < cnt ? _mm512_loadu_ps(src + i * ld) : _mm512_setzero_ps();
  } else {
    for (int i = 0; i < 16; i++) r[i] = i < cnt ? _mm512_maskz_loadu_ps(km, src + i * ld) : _mm512_setzero_ps();
  }
  transpose16(r);
}
#endif

/* One A panel: rows src + r * rs (r < h), columns [0, kc) with column stride cs, into [k][MR]. */
static void pack_a_panel(const float* src, int64_t rs, int64_t cs, int h, int64_t kc, float* dst) {
#if defined(__AVX512F__)
  if (cs == 1) {
    /* Rows contiguous: 16 x 16 transposes, 14 lanes stored per k. */
    for (int64_t k = 0; k < kc; k += 16) {
      int64_t klen = MIN(16, kc - k);
      __m512 r[16];
      load_transposed(src + k, rs, h, klen, r);
      for (int i = 0; i < klen; i++) _mm512_mask_storeu_ps(dst + (k + i) * UK_MR, (__mmask16)((1u << UK_MR) - 1), r[i]);
    }
    return;
  }
  if (rs == 1) {
    /* Columns contiguous: a panel row is a plain copy. */
    __mmask16 m = mask16(h);
    for (int64_t k = 0; k < kc; k++) _mm512_mask_storeu_ps(dst + k * UK_MR, m, _mm512_maskz_loadu_ps(m, src + k * cs));
    return;
  }
#endif
  for (int r = 0; r < h; r++) {
    const float* row = src + r * rs;
    if (cs == 1) {
      for (int64_t k = 0; k < kc; k++) dst[k * UK_MR + r] = row[k];
    } else {
      for (int64_t k = 0; k < kc; k++) dst[k * UK_MR + r] = row[k * cs];
    }
  }
}

/* Rows [m0, m0 + mc) of A, columns [k0, k0 + kc), into panels of balanced heights <= MR:
 * panel i at ap + i * MR * kc holds [k][MR]. Rows past a panel's height are unused. */
static void pack_a(const mat_view* a, int64_t m0, int64_t mc, int64_t k0, int64_t kc, float* ap) {
  int64_t np = CEIL_DIV(mc, UK_MR);
  int64_t base = mc / np, extra = mc % np, row = m0;
  for (int64_t i = 0; i < np; i++) {
    int h = (int)(base + (i < extra));
    pack_a_panel(a->p + row * a->rs + k0 * a->cs, a->rs, a->cs, h, kc, ap + i * UK_MR * kc);
    row += h;
  }
}

#if defined(__AVX512F__)
/* One NR-column panel of a B whose columns are contiguous (B[k, n] = p[k + n * cs]). */
static void pack_b_panel_cols(const float* p, int64_t cs, int64_t kc, int nr, float* dst) {
  int cnt0 = MIN(16, nr), cnt1 = MAX(0, nr - 16);
  for (int64_t k = 0; k < kc; k += 16) {
    int64_t klen = MIN(16, kc - k);
    __m512 r0[16], r1[16];
    load_transposed(p + k, cs, cnt0, klen, r0);
    if (cnt1 > 0) {
      load_transposed(p + 16 * cs + k, cs, cnt1, klen, r1);
    } else {
      for (int i = 0; i < 16; i++) r1[i] = _mm512_setzero_ps();
    }
    for (int i = 0; i < klen; i++) {
      _mm512_store_ps(dst + (k + i) * UK_NR, r0[i]);
      _mm512_store_ps(dst + (k + i) * UK_NR + 16, r1[i]);
    }
  }
}
#else
static void pack_b_panel_cols(const float* p, int64_t cs, int64_t kc, int nr, float* dst) {
  for (int64_t k = 0; k < kc; k++)
    for (int j = nr; j < UK_NR; j++) dst[k * UK_NR + j] = 0.0f;
  for (int j = 0; j < nr; j++) {
    const float* src = p + j * cs;
    for (int64_t k = 0; k < kc; k++) dst[k * UK_NR + j] = src[k];
  }
}
#endif

/* One NR-column panel of a B whose rows are contiguous (B[k, n] = p[k * rs + n]). */
static void pack_b_panel_rows(const float* p, int64_t rs, int64_t kc, int nr, float* dst) {
#if defined(__AVX512F__)
  if (nr == UK_NR) {
    for (int64_t k = 0; k < kc; k++) {
      _mm512_store_ps(dst + k * UK_NR, _mm512_loadu_ps(p + k * rs));
      _mm512_store_ps(dst + k * UK_NR + 16, _mm512_loadu_ps(p + k * rs + 16));
    }
    return;
  }
  __mmask16 m0 = mask16(nr), m1 = mask16(MAX(0, nr - 16));
  for (int64_t k = 0; k < kc; k++) {
    _mm512_store_ps(dst + k * UK_NR, _mm512_maskz_loadu_ps(m0, p + k * rs));
    _mm512_store_ps(dst + k * UK_NR + 16, _mm512_maskz_loadu_ps(m1, p + k * rs + 16));
  }
#else
  if (nr == UK_NR) {
    for (int64_t k = 0; k < kc; k++) memcpy(dst + k * UK_NR, p + k * rs, sizeof(float) * UK_NR);
    return;
  }
  for (int64_t k = 0; k < kc; k++) {
    for (int j = 0; j < nr; j++) dst[k * UK_NR + j] = p[k * rs + j];
    for (int j = nr; j < UK_NR; j++) dst[k * UK_NR + j] = 0.0f;
  }
#endif
}

/* One NR-column panel of a convolution's im2col view. The panel's columns split into runs that
 * stay in one output row (source offsets step by str_w * sw inside a run). */
static void pack_b_panel_conv(const b_view* v, int64_t k0, int64_t kc, int64_t n0, int nr, float* dst) {
  int64_t run_src[UK_NR];
  int run_dst[UK_NR + 1], runs = 0;
  int64_t oh = n0 / v->ow, ow = n0 % v->ow, step = v->str_w * v->sw;
  for (int j = 0; j < nr;) {
    int len = (int)MIN(nr - j, v->ow - ow);
    run_src[runs] = oh * v->str_h * v->sh + ow * step;
    run_dst[runs++] = j;
    j += len;
    ow = 0;
    oh++;
  }
  run_dst[runs] = nr;
  int64_t khw = v->kh * v->kw;
  int64_t c = k0 / khw, kh = (k0 % khw) / v->kw, kw = k0 % v->kw;
#if defined(__AVX512F__)
  if (step == 1 || step == 2) {
    /* Vector segments (at most 16 columns of one run), their masks computed once per panel. */
    struct {
      int dst;
      int64_t src;
      __mmask16 m, lo, hi;
    } seg[UK_NR + 2];
    int nseg = 0;
    for (int r = 0; r < runs; r++) {
      for (int j = run_dst[r]; j < run_dst[r + 1]; j += 16) {
        int len = MIN(16, run_dst[r + 1] - j);
        uint32_t bits = (uint32_t)((1ull << (2 * len - 1)) - 1); /* stride 2: src[0, 2 len - 1) */
        seg[nseg].dst = j;
        seg[nseg].src = run_src[r] + (j - run_dst[r]) * step;
        seg[nseg].m = mask16(len);
        seg[nseg].lo = (__mmask16)bits;
        seg[nseg].hi = (__mmask16)(bits >> 16);
        nseg++;
      }
    }
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    for (int64_t k = 0; k < kc; k++) {
      const float* base = v->in + c * v->sc + kh * v->dil_h * v->sh + kw * v->dil_w * v->sw;
      float* d = dst + k * UK_NR;
      if (nr < UK_NR) {
        _mm512_store_ps(d, _mm512_setzero_ps());
        _mm512_store_ps(d + 16, _mm512_setzero_ps());
      }
      for (int i = 0; i < nseg; i++) {
        const float* src = base + seg[i].src;
        __m512 x;
        if (step == 1) {
          x = _mm512_maskz_loadu_ps(seg[i].m, src);
        } else {
          x = _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(seg[i].lo, src), even,
                                     _mm512_maskz_loadu_ps(seg[i].hi, src + 16));
        }
        _mm512_mask_storeu_ps(d + seg[i].dst, seg[i].m, x);
      }
      if (++kw == v->kw) {
        kw = 0;
        if (++kh == v->kh) {
          kh = 0;
          c++;
        }
      }
    }
    return;
  }
#endif
  for (int64_t k = 0; k < kc; k++) {
    const float* base = v->in + c * v->sc + kh * v->dil_h * v->sh + kw * v->dil_w * v->sw;
    float* d = dst + k * UK_NR;
    for (int r = 0; r < runs; r++) {
      const float* src = base + run_src[r];
      for (int j = run_dst[r]; j < run_dst[r + 1]; j++) d[j] = src[(j - run_dst[r]) * step];
    }
    for (int j = nr; j < UK_NR; j++) d[j] = 0.0f;
    if (++kw == v->kw) {
      kw = 0;
      if (++kh == v->kh) {
        kh = 0;
        c++;
      }
    }
  }
}

/* Columns [n0, n0 + nc) of B, rows [k0, k0 + kc), into NR-column panels: panel j at
 * bp + j * NR * kc holds [k][NR], zero padded past nc. */
static void pack_b(const b_view* b, int64_t k0, int64_t kc, int64_t n0, int64_t nc, float* bp) {
  for (int64_t j = 0; j * UK_NR < nc; j++) {
    int nr = (int)MIN(UK_NR, nc - j * UK_NR);
    int64_t n = n0 + j * UK_NR;
    float* dst = bp + j * UK_NR * kc;
    if (b->is_conv) {
      pack_b_panel_conv(b, k0, kc, n, nr, dst);
      continue;
    }
    const mat_view* m = &b->m;
    const float* p = m->p + k0 * m->rs + n * m->cs;
    if (m->cs == 1) {
      pack_b_panel_rows(p, m->rs, kc, nr, dst);
    } else if (m->rs == 1) {
      pack_b_panel_cols(p, m->cs, kc, nr, dst);
    } else {
      for (int64_t k = 0; k < kc; k++) {
        for (int jj = 0; jj < nr; jj++) dst[k * UK_NR + jj] = p[k * m->rs + jj * m->cs];
        for (int jj = nr; jj < UK_NR; jj++) dst[k * UK_NR + jj] = 0.0f;
      }
    }
  }
}

/* ------------------------------------------------------------------------------------------ */
/* GEMM driver                                                                                */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
  int64_t kc_max, mc_max, nc_max;
  int b_in_place;             /* the microkernel reads B where it is (no B packing) */
  int64_t a_floats, b_floats; /* scratch one task needs */
} blocking;

static blocking choose_blocking(const gemm_problem* g) {
  int64_t M = g->M, N = g->N, K = g->K;
  blocking bl;
#if defined(__AVX512F__)
  /* Few A panels reuse each B panel, so packing B would cost about as much as using it. */
  bl.b_in_place = !g->b.is_conv && !g->b.packed && g->b.m.cs == 1 && g->b.m.rs >= 0 &&
                  M <= (g->a_packed ? B_IN_PLACE_MAX_M_FILTER : B_IN_PLACE_MAX_M);
#else
  bl.b_in_place = 0;
#endif
  int64_t nk = CEIL_DIV(K, KC_MAX);
  bl.kc_max = CEIL_DIV(K, nk);
  bl.nc_max = MAX(UK_NR, B_BLOCK_FLOATS / bl.kc_max / UK_NR * UK_NR);
  bl.nc_max = MIN(bl.nc_max, CEIL_DIV(N, UK_NR) * UK_NR);
  bl.mc_max = MAX(UK_MR, A_BLOCK_FLOATS / bl.kc_max / UK_MR * UK_MR);
  bl.mc_max = MIN(bl.mc_max, CEIL_DIV(M, UK_MR) * UK_MR);
  bl.a_floats = g->a_packed ? 0 : CEIL_DIV(CEIL_DIV(bl.mc_max, UK_MR) * UK_MR * bl.kc_max, 16) * 16; /* keeps B 64-byte aligned */
  bl.b_floats = bl.b_in_place || g->b.packed ? 0 : bl.nc_max * bl.kc_max;
  return bl;
}

/* C[m0:m1, n0:n1] += A[m0:m1, :] * B[:, n0:n1] on one thread; scratch holds a_floats + b_floats. */
static void gemm_range(const gemm_problem* g, const blocking* bl, int64_t m0, int64_t m1, int64_t n0, int64_t n1,
                       float* scratch) {
  float* ap = scratch;
  float* bp = scratch + bl->a_floats;
  int64_t nk = CEIL_DIV(g->K, bl->kc_max);
  int64_t nm = CEIL_DIV(m1 - m0, bl->mc_max);
  for (int64_t ik = 0, k0 = 0; ik < nk; ik++) {
    int64_t kc = g->K / nk + (ik < g->K % nk);
    for (int64_t im = 0, ic = m0; im < nm; im++) {
      /* Packed here: blocks of balanced heights. Packed at compile time: whole panels (ic stays a
       * multiple of UK_MR, as m0 and mc_max are), the last one short. */
      int64_t mc = g->a_packed ? MIN(bl->mc_max, m1 - ic) : (m1 - m0) / nm + (im < (m1 - m0) % nm);
      if (!g->a_packed) pack_a(&g->a, ic, mc, k0, kc, ap);
      int64_t np = CEIL_DIV(mc, UK_MR), hbase = mc / np, hextra = mc % np;
      for (int64_t jc = n0; jc < n1; jc += bl->nc_max) {
        int64_t nc = MIN(bl->nc_max, n1 - jc);
        const float* b_block = bp;
        int64_t b_col = kc, ldb = -1; /* panel jr starts at b_block + jr * b_col; ldb < 0: packed */
        if (g->b.packed) { /* jc is a multiple of UK_NR: panel jr starts jr * K floats on */
          b_block = g->b.packed + jc * g->K + k0 * UK_NR;
          b_col = g->K;
        } else if (bl->b_in_place) {
          b_block = g->b.m.p + k0 * g->b.m.rs + jc;
          b_col = 1;
          ldb = g->b.m.rs;
        } else {
          pack_b(&g->b, k0, kc, jc, nc, bp);
        }
        /* A linear layer's weights (B packed at compile time, A packed here) come from memory: each B
         * panel serves every A panel while it is cached (B's panels outer), so the stream from memory
         * spreads over all the block's tiles instead of the first A panel's (LLaMA, T = 64, 1 thread:
         * 3.89 -> 3.73 ms). Else A's panels outer: B's block is in L2 (Winograd's V, whose A, the
         * transformed filter, is the stream).
         * B's panels outer: every tile prefetches the next panel's row as it reads its own, so the next
         * panel arrives in L2 over all of this panel's tiles rather than at the speed of one (the hardware
         * prefetcher stops at each page). Weights streamed from memory (24 copies cycled), 1 thread, on
         * Zen 4: [64 x 384] x [384 x 1536] 0.69 -> 0.67 ms (0.66 cached), AVX2 build 0.79 -> 0.69;
         * [8 x 784] x [784 x 512] 0.095 -> 0.059 (AVX2 0.169 -> 0.068); nanoGPT T = 64 ~3% faster. */
        int b_outer = g->b.packed != NULL && g->a_packed == NULL;
        int64_t n_outer = b_outer ? CEIL_DIV(nc, UK_NR) : np, n_inner = b_outer ? np : CEIL_DIV(nc, UK_NR);
        for (int64_t io = 0; io < n_outer; io++)
          for (int64_t ii = 0; ii < n_inner; ii++) {
            int64_t ip = b_outer ? ii : io, jr = (b_outer ? io : ii) * UK_NR;
            int h = g->a_packed ? (int)MIN(UK_MR, mc - ip * UK_MR) : (int)(hbase + (ip < hextra));
            int64_t row = ic + (g->a_packed ? ip * UK_MR : ip * hbase + MIN(ip, hextra));
            const float* a_panel =
                g->a_packed ? g->a_packed + (ic / UK_MR + ip) * (g->a_ld ? g->a_ld : UK_MR * g->K) + k0 * UK_MR
                            : ap + ip * UK_MR * kc;
            int nr = (int)MIN(UK_NR, nc - jr);
            /* The epilogue runs on each tile in registers: its init instead of loading C in the first
             * K block, the rest before the store in the last (element by element where it must). */
            tile_ep te;
            int init = ik == 0 && ep_inits(&g->e), finish = ik == nk - 1 && ep_finishes(&g->e);
            int fused = (init || finish) && tile_ep_make(&g->e, row, jc + jr, init, finish, &te);
            if (init && !fused) ep_init(&g->e, g->c, g->rsc, g->csc, row, h, jc + jr, nr);
            micro_kernel(h, nr, kc, a_panel, b_block + jr * b_col, ldb, g->c + row * g->rsc + (jc + jr) * g->csc,
                         g->rsc, g->csc, fused ? &te : NULL, b_outer ? UK_NR * b_col : 0);
            if (finish && !fused) ep_finish(&g->e, g->c, g->rsc, g->csc, row, h, jc + jr, nr);
          }
      }
      ic += mc;
    }
    k0 += kc;
  }
}

/* One row of A (contiguous): c[n] += sum_k a[k] * B[k, n] without packing. */
static void gemv_row(const float* a, const mat_view* b, int64_t K, float* c, int64_t csc, int64_t n0,
                     int64_t n1) {
  if (b->cs == 1) {
    /* Rows of B contiguous: vectorize along n, 64 columns per pass over K. */
    for (int64_t n = n0; n < n1; n += 64) {
      int64_t nb = MIN(64, n1 - n);
      float acc[64];
      for (int64_t j = 0; j < 64; j++) acc[j] = 0.0f;
      const float* bp = b->p + n;
      if (nb == 64) {
        for (int64_t k = 0; k < K; k++) {
          float ak = a[k];
          const float* row = bp + k * b->rs;
          for (int j = 0; j < 64; j++) acc[j] += ak * row[j];
        }
      } else {
        for (int64_t k = 0; k < K; k++) {
          float ak = a[k];
          const float* row = bp + k * b->rs;
          for (int64_t j = 0; j < nb; j++) acc[j] += ak * row[j];
        }
      }
      for (int64_t j = 0; j < nb; j++) c[(n + j) * csc] += acc[j];
    }
    return;
  }
  if (b->rs == 1) {
    /* Columns of B contiguous: dot products, 4 columns at a time, 16 partial sums each. */
    int64_t n = n0;
    for (; n + 4 <= n1; n += 4) {
      const float* w0 = b->p + n * b->cs;
      const float* w1 = w0 + b->cs;
      const float* w2 = w1 + b->cs;
      const float* w3 = w2 + b->cs;
      float s0[16] = {0}, s1[16] = {0}, s2[16] = {0}, s3[16] = {0};
      int64_t k = 0;
      for (; k + 16 <= K; k += 16) {
        for (int l = 0; l < 16; l++) {
          float ak = a[k + l];
          s0[l] += ak * w0[k + l];
          s1[l] += ak * w1[k + l];
          s2[l] += ak * w2[k + l];
          s3[l] += ak * w3[k + l];
        }
      }
      float t0 = 0, t1 = 0, t2 = 0, t3 = 0;
      for (; k < K; k++) {
        t0 += a[k] * w0[k];
        t1 += a[k] * w1[k];
        t2 += a[k] * w2[k];
        t3 += a[k] * w3[k];
      }
      for (int l = 0; l < 16; l++) {
        t0 += s0[l];
        t1 += s1[l];
        t2 += s2[l];
        t3 += s3[l];
      }
      c[n * csc] += t0;
      c[(n + 1) * csc] += t1;
      c[(n + 2) * csc] += t2;
      c[(n + 3) * csc] += t3;
    }
    for (; n < n1; n++) {
      const float* w = b->p + n * b->cs;
      float s[16] = {0}, t = 0;
      int64_t k = 0;
      for (; k + 16 <= K; k += 16)
        for (int l = 0; l < 16; l++) s[l] += a[k + l] * w[k + l];
      for (; k < K; k++) t += a[k] * w[k];
      for (int l = 0; l < 16; l++) t += s[l];
      c[n * csc] += t;
    }
    return;
  }
  for (int64_t n = n0; n < n1; n++) {
    float t = 0.0f;
    for (int64_t k = 0; k < K; k++) t += a[k] * b->p[k * b->rs + n * b->cs];
    c[n * csc] += t;
  }
}

/* Few rows of A against a B that packing would not pay for (M == 1, or a transposed B with M <= GEMV_MAX_M):
 * each row is a matrix-vector product; the B columns a row block reads stay in L1 for the next row. */
#if defined(__AVX512F__)
/* c[m * rsc + j * csc] += dot(a row m, w row j) for m < M <= 4, j < J <= 4, rows of length K
 * (contiguous); each loaded w vector feeds every row of a. */
UK_INLINE void gemv_tile(const int M, const int J, const float* a, int64_t lda, const float* w, int64_t ldw,
                         int64_t K, float* c, int64_t rsc, int64_t csc) {
  __m512 acc[4][4];
#pragma GCC unroll 4
  for (int m = 0; m < M; m++)
#pragma GCC unroll 4
    for (int j = 0; j < J; j++) acc[m][j] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; k += 16) {
    __mmask16 km = mask16(K - k);
    __m512 wv[4];
#pragma GCC unroll 4
    for (int j = 0; j < J; j++) wv[j] = _mm512_maskz_loadu_ps(km, w + j * ldw + k);
#pragma GCC unroll 4
    for (int m = 0; m < M; m++) {
      __m512 av = _mm512_maskz_loadu_ps(km, a + m * lda + k);
#pragma GCC unroll 4
      for (int j = 0; j < J; j++) acc[m][j] = _mm512_fmadd_ps(av, wv[j], acc[m][j]);
    }
  }
#pragma GCC unroll 4
  for (int m = 0; m < M; m++)
#pragma GCC unroll 4
    for (int j = 0; j < J; j++) c[m * rsc + j * csc] += _mm512_reduce_add_ps(acc[m][j]);
}

#define GEMV_TILE_J(M, J, ...)                                                  \
  switch (J) {                                                                  \
    case 1: gemv_tile(M, 1, __VA_ARGS__); break;                                \
    case 2: gemv_tile(M, 2, __VA_ARGS__); break;                                \
    case 3: gemv_tile(M, 3, __VA_ARGS__); break;                                \
    default: gemv_tile(M, 4, __VA_ARGS__); break;                               \
  }

/* gemv_tile for run-time M, J in 1..4. */
static void gemv_tile_any(int M, int J, const float* a, int64_t lda, const float* w, int64_t ldw, int64_t K,
                          float* c, int64_t rsc, int64_t csc) {
  switch (M) {
    case 1: GEMV_TILE_J(1, J, a, lda, w, ldw, K, c, rsc, csc) break;
    case 2: GEMV_TILE_J(2, J, a, lda, w, ldw, K, c, rsc, csc) break;
    case 3: GEMV_TILE_J(3, J, a, lda, w, ldw, K, c, rsc, csc) break;
    default: GEMV_TILE_J(4, J, a, lda, w, ldw, K, c, rsc, csc) break;
  }
}

/* Column n of B into col[0, K): a matrix's, or an image's im2col column (b_view). */
static void b_column(const b_view* b, int64_t K, int64_t n, float* col) {
  if (!b->is_conv) {
    for (int64_t k = 0; k < K; k++) col[k] = b->m.p[k * b->m.rs + n * b->m.cs];
    return;
  }
  int64_t oh = n / b->ow, ow = n % b->ow, window = b->kh * b->kw;
  for (int64_t k = 0; k < K; k++) {
    int64_t c = k / window, i = (k % window) / b->kw, j = k % b->kw;
    col[k] = b->in[c * b->sc + (oh * b->str_h + i * b->dil_h) * b->sh + (ow * b->str_w + j * b->dil_w) * b->sw];
  }
}

/* C[:, n0:n1] += A B[:, n0:n1] for A packed in panels (a filter packed at compile time) and at most
 * TAIL_COLS_MAX columns: a panel's UK_MR rows are the lanes of one vector (its k-th row of UK_MR
 * floats), times each column's k-th value; cols: (n1 - n0) K floats of scratch. One load and a
 * multiply-add per column for each k and panel (a scalar loop before: no faster at 1 thread, where
 * reading A bounds it; these columns are about 5% of MobileNetV2's payload time, its 14x14 and 7x7
 * pointwise layers). */
static void gemm_tail_columns_packed(const gemm_problem* g, int64_t m_begin, int64_t m_end, int64_t n0, int64_t n1,
                                     float* cols) {
  int64_t K = g->K, nc = n1 - n0;
  for (int64_t j = 0; j < nc; j++) b_column(&g->b, K, n0 + j, cols + j * K);
  const __mmask16 rows = mask16(UK_MR);
  for (int64_t m0 = m_begin; m0 < m_end; m0 += UK_MR) { /* m_begin: a multiple of UK_MR */
    const float* panel = g->a_packed + (m0 / UK_MR) * K * UK_MR;
    __m512 acc[2][TAIL_COLS_MAX];
    for (int j = 0; j < TAIL_COLS_MAX; j++) acc[0][j] = acc[1][j] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 2 <= K; k += 2) { /* two k at a time: independent sums when there is one column */
      __m512 a0 = _mm512_maskz_loadu_ps(rows, panel + k * UK_MR), a1 = _mm512_maskz_loadu_ps(rows, panel + (k + 1) * UK_MR);
      for (int j = 0; j < TAIL_COLS_MAX; j++)
        if (j < nc) {
          acc[0][j] = _mm512_fmadd_ps(a0, _mm512_set1_ps(cols[j * K + k]), acc[0][j]);
          acc[1][j] = _mm512_fmadd_ps(a1, _mm512_set1_ps(cols[j * K + k + 1]), acc[1][j]);
        }
    }
    for (; k < K; k++) {
      __m512 a0 = _mm512_maskz_loadu_ps(rows, panel + k * UK_MR);
      for (int j = 0; j < TAIL_COLS_MAX; j++)
        if (j < nc) acc[0][j] = _mm512_fmadd_ps(a0, _mm512_set1_ps(cols[j * K + k]), acc[0][j]);
    }
    int64_t live = MIN(UK_MR, m_end - m0);
    for (int64_t j = 0; j < nc; j++) {
      float t[16];
      _mm512_storeu_ps(t, _mm512_add_ps(acc[0][j], acc[1][j]));
      for (int64_t r = 0; r < live; r++) g->c[(m0 + r) * g->rsc + (n0 + j) * g->csc] += t[r];
    }
  }
}

/* The last few columns of a GEMM whose A rows are contiguous or packed in panels, as dot products:
 * C[m0:m1, n] += A[m0:m1, :] B[:, n], the epilogue before and after (col: (n1 - n0) K floats of
 * scratch). Cheaper than a vector of mostly idle lanes in the microkernel. The task that ran the
 * last columns' tiles of rows m0:m1 runs them, in parallel and while those rows of A are in its
 * caches (after the whole job, on one thread, they cost MobileNetV2 at 2 threads 4-5%). */
static void gemm_tail_columns(const gemm_problem* g, int64_t m0, int64_t m1, int64_t n0, int64_t n1, float* col) {
  ep_init(&g->e, g->c, g->rsc, g->csc, m0, m1 - m0, n0, n1 - n0);
  if (g->a_packed) {
    gemm_tail_columns_packed(g, m0, m1, n0, n1, col);
  } else {
    for (int64_t n = n0; n < n1; n++) {
      b_column(&g->b, g->K, n, col);
      for (int64_t m = m0; m < m1; m += 4) {
        /* "a" is the column (one row), "w" are four rows of A; outputs C[m + j, n]. */
        gemv_tile_any(1, (int)MIN(4, m1 - m), col, 0, g->a.p + m * g->a.rs, g->a.rs, g->K,
                      g->c + m * g->rsc + n * g->csc, 0, g->rsc);
      }
    }
  }
  ep_finish(&g->e, g->c, g->rsc, g->csc, m0, m1 - m0, n0, n1 - n0);
}
#endif

#if defined(UK_VEC)
/* One row of A (contiguous) times B packed at compile time, columns [n0, n1) (n0 a panel boundary),
 * added to C: two panels at a time with K unrolled by two, eight independent accumulators (the
 * microkernel's one-row tile has two, and waits on its FMAs' latency). */
static void gemv_packed_row(const float* a, const float* panels, int64_t K, float* c, int64_t csc, int64_t n0,
                            int64_t n1) {
  for (int64_t n = n0; n < n1; n += 2 * UK_NR) {
    const float* p0 = panels + n * K;
    const float* p1 = p0 + UK_NR * K;
    int two = n + UK_NR < n1;
    ukv acc[8];
    for (int i = 0; i < 8; i++) acc[i] = ukv_zero();
    int64_t k = 0;
    for (; k + 2 <= K; k += 2) {
      ukv x0 = ukv_set1(a[k]), x1 = ukv_set1(a[k + 1]);
      const float *q0 = p0 + k * UK_NR, *q1 = p1 + k * UK_NR;
      acc[0] = ukv_fmadd(x0, ukv_load(q0), acc[0]);
      acc[1] = ukv_fmadd(x0, ukv_load(q0 + UK_VEC), acc[1]);
      acc[4] = ukv_fmadd(x1, ukv_load(q0 + UK_NR), acc[4]);
      acc[5] = ukv_fmadd(x1, ukv_load(q0 + UK_NR + UK_VEC), acc[5]);
      if (two) {
        acc[2] = ukv_fmadd(x0, ukv_load(q1), acc[2]);
        acc[3] = ukv_fmadd(x0, ukv_load(q1 + UK_VEC), acc[3]);
        acc[6] = ukv_fmadd(x1, ukv_load(q1 + UK_NR), acc[6]);
        acc[7] = ukv_fmadd(x1, ukv_load(q1 + UK_NR + UK_VEC), acc[7]);
      }
    }
    for (; k < K; k++) {
      ukv x0 = ukv_set1(a[k]);
      acc[0] = ukv_fmadd(x0, ukv_load(p0 + k * UK_NR), acc[0]);
      acc[1] = ukv_fmadd(x0, ukv_load(p0 + k * UK_NR + UK_VEC), acc[1]);
      if (two) {
        acc[2] = ukv_fmadd(x0, ukv_load(p1 + k * UK_NR), acc[2]);
        acc[3] = ukv_fmadd(x0, ukv_load(p1 + k * UK_NR + UK_VEC), acc[3]);
      }
    }
    for (int i = 0; i < (two ? 4 : 2); i++) {
      int64_t col = n + UK_VEC * i, cnt = MIN(UK_VEC, n1 - col);
      if (cnt <= 0) break;
      float t[UK_VEC];
      ukv_storeu(t, ukv_add(acc[i], acc[i + 4]));
      for (int64_t j = 0; j < cnt; j++) c[(col + j) * csc] += t[j];
    }
  }
}
#endif

static void gemv_range(const gemm_problem* g, int64_t n0, int64_t n1) {
#if defined(UK_VEC)
  if (g->b.packed) {
    for (int64_t m = 0; m < g->M; m++) gemv_packed_row(g->a.p + m * g->a.rs, g->b.packed, g->K, g->c + m * g->rsc,
                                                      g->csc, n0, n1);
    return;
  }
#endif
#if defined(__AVX512F__)
  if (g->b.m.rs == 1 && g->b.m.cs != 1) {
    int64_t n = n0;
    for (; n + 4 <= n1; n += 4) {
      const float* w = g->b.m.p + n * g->b.m.cs;
      for (int64_t m = 0; m < g->M; m += 4)
        gemv_tile_any((int)MIN(4, g->M - m), 4, g->a.p + m * g->a.rs, g->a.rs, w, g->b.m.cs, g->K,
                      g->c + m * g->rsc + n * g->csc, g->rsc, g->csc);
    }
    if (n == n1) return;
    n0 = n;
  }
#endif
  for (int64_t nb = n0; nb < n1; nb += 64) {
    int64_t ne = MIN(n1, nb + 64);
    for (int64_t m = 0; m < g->M; m++) gemv_row(g->a.p + m * g->a.rs, &g->b.m, g->K, g->c + m * g->rsc, g->csc, nb, ne);
  }
}

/* One parallel GEMM (or a batch of them): tasks = batches x M parts x N parts. */
typedef struct {
  const gemm_problem* probs; /* one per batch element */
  int64_t batch;
  blocking bl;
  int gemv;                  /* gemv_range instead of gemm_range */
  int64_t tasks_b, tasks_m, tasks_n;
  float* scratch;
  int64_t slot_floats;
  int64_t tail; /* columns past each problem's N left to gemm_tail_columns (AVX-512) */
} gemm_job;

static void split_range(int64_t len, int64_t parts, int64_t unit, int64_t i, int64_t* begin, int64_t* end) {
  int64_t units = CEIL_DIV(len, unit);
  int64_t lo = units * i / parts, hi = units * (i + 1) / parts;
  *begin = MIN(len, lo * unit);
  *end = MIN(len, hi * unit);
}

static void gemm_job_body(void* arg, int64_t t, int slot) {
  const gemm_job* job = (const gemm_job*)arg;
  float* scratch = job->scratch + slot * job->slot_floats;
  int64_t tn = t % job->tasks_n, tm = (t / job->tasks_n) % job->tasks_m, tb = t / (job->tasks_n * job->tasks_m);
  int64_t b0, b1;
  split_range(job->batch, job->tasks_b, 1, tb, &b0, &b1);
  for (int64_t ib = b0; ib < b1; ib++) {
    const gemm_problem* g = &job->probs[ib];
    int64_t m0, m1, n0, n1;
    split_range(g->M, job->tasks_m, UK_MR, tm, &m0, &m1);
    split_range(g->N, job->tasks_n, job->gemv && !g->b.packed ? 16 : UK_NR, tn, &n0, &n1);
    if (m0 >= m1 || n0 >= n1) continue;
    if (job->gemv) {
      ep_init(&g->e, g->c, g->rsc, g->csc, 0, g->M, n0, n1 - n0);
      gemv_range(g, n0, n1);
      ep_finish(&g->e, g->c, g->rsc, g->csc, 0, g->M, n0, n1 - n0);
    } else {
      gemm_range(g, &job->bl, m0, m1, n0, n1, scratch);
#if defined(__AVX512F__)
      if (job->tail && n1 == g->N) /* the task with the last columns' tiles */
        gemm_tail_columns(g, m0, m1, g->N, g->N + job->tail, scratch + job->bl.a_floats + job->bl.b_floats);
#endif
    }
  }
}

/* Runs `batch` GEMMs of the same shape; the pool splits batches first, then N, then M. */
static void gemm_run(gemm_problem* probs, int64_t batch) {
  const gemm_problem* g0 = &probs[0];
  int64_t M = g0->M, N = g0->N, K = g0->K;
  if (batch <= 0 || M <= 0 || N <= 0) return;
  if (K <= 0) { /* no product: the epilogue alone */
    for (int64_t i = 0; i < batch; i++) {
      ep_init(&probs[i].e, probs[i].c, probs[i].rsc, probs[i].csc, 0, M, 0, N);
      ep_finish(&probs[i].e, probs[i].c, probs[i].rsc, probs[i].csc, 0, M, 0, N);
    }
    return;
  }
  for (int64_t i = 0; i < batch; i++) {
    gemm_problem* g = &probs[i];
    /* Strides of unit dims are irrelevant: normalize them so the fast paths see them. */
    if (g->N == 1) g->csc = 1;
    if (g->M == 1) g->rsc = g->N;
    if (g->K == 1) g->a.cs = 1;
    if (g->M == 1) g->a.rs = g->K;
    if (!g->b.is_conv && !g->b.packed) {
      if (g->N == 1) g->b.m.cs = 1;
      if (g->K == 1) g->b.m.rs = g->N;
    }
  }
  gemm_job job;
  memset(&job, 0, sizeof(job));
  job.probs = probs;
  job.batch = batch;
  job.gemv = !g0->b.is_conv && !g0->a_packed &&
             (g0->b.packed ? UK_GEMV_PACKED && M == 1
                           : (M == 1 || (M <= GEMV_MAX_M && g0->b.m.rs == 1 && g0->b.m.cs != 1)));
  int64_t tail = 0; /* columns left to gemm_tail_columns */
#if defined(__AVX512F__)
  /* A few columns past a multiple of 16 (N = 65, 196: a 14x14 convolution's) go to dot products
   * instead of a vector of mostly idle lanes. Not N = 49 (a 7x7 convolution's), whose last tile of 17
   * columns kern512 takes (x16): with B packed, MobileNetV2's 7x7 pointwise layers alone took 0.105
   * against 0.120 ms (K = 960), 0.267 against 0.314 (K = 320) and 0.105 against 0.119 (K = 160) at 1
   * thread. */
  if (!job.gemv && !g0->b.packed && N >= 32 && N % 16 <= TAIL_COLS_MAX && N % UK_NR != 17 &&
      K * (N % 16) <= TAIL_K_MAX) {
    tail = N % 16;
    for (int64_t i = 0; i < batch; i++) tail = probs[i].a_packed || probs[i].a.cs == 1 ? tail : 0;
    for (int64_t i = 0; i < batch; i++) probs[i].N -= tail;
    N -= tail;
  }
#endif
  job.bl = choose_blocking(g0);

  int nt = etmlir_cpu_num_threads();
  /* A matrix-vector product streams B once from wherever it is (a linear layer's weights: L3 or
   * memory), at about a tenth of a GEMM's speed per flop: its flops count GEMV_FLOP_WEIGHT times
   * towards splitting. (ResNet-18's 512 x 1000 classifier, 2 MB: 1 MFLOP, 0.13 ms on one thread.) */
  double flops = 2.0 * (double)M * (double)N * (double)K * (double)batch * (job.gemv ? GEMV_FLOP_WEIGHT : 1);
  job.tasks_b = job.tasks_m = job.tasks_n = 1;
  if (nt > 1 && flops >= PAR_MIN_FLOPS) {
    int64_t nbn = CEIL_DIV(N, job.gemv && !g0->b.packed ? 16 : UK_NR), nbm = CEIL_DIV(M, UK_MR);
    int64_t most = MAX(nt, MIN(TASKS_PER_THREAD * nt, (int64_t)(flops / TASK_MIN_FLOPS)));
    if (batch >= nt) {
      job.tasks_b = MIN(batch, most);
    } else if (nbn >= nt && (nbn >= 2 * nt || nbn >= nbm)) {
      /* Columns split finer than one share per thread only where no task packs A (a filter packed at
       * compile time): a linear layer's A, packed per task, would be packed once more per task. */
      job.tasks_n = g0->a_packed ? MIN(nbn, most) : nt;
    } else if (nbm >= nt && !job.gemv) {
      job.tasks_m = nt;
    } else {
      job.tasks_n = MAX(1, MIN(nt, nbn));
    }
  }
  int64_t tasks = job.tasks_b * job.tasks_m * job.tasks_n;

  float* a_copy = NULL;
  if (job.gemv) {
    /* The dot products want rows of A contiguous: copy the problems whose rows are not. */
    int64_t need = 0;
    for (int64_t i = 0; i < batch; i++) need += probs[i].a.cs == 1 ? 0 : M * K;
    if (need) {
      a_copy = (float*)etmlir_cpu_scratch_alloc(sizeof(float) * (size_t)need);
      float* dst = a_copy;
      for (int64_t i = 0; i < batch; i++) {
        mat_view* a = &probs[i].a;
        if (a->cs == 1) continue;
        for (int64_t m = 0; m < M; m++)
          for (int64_t k = 0; k < K; k++) dst[m * K + k] = a->p[m * a->rs + k * a->cs];
        *a = view2(dst, K, 1);
        dst += M * K;
      }
    }
  } else {
    job.tail = tail;
    job.slot_floats = job.bl.a_floats + job.bl.b_floats + CEIL_DIV(tail * K, 16) * 16;
    job.scratch =
        (float*)etmlir_cpu_scratch_alloc(sizeof(float) * (size_t)(job.slot_floats * etmlir_cpu_task_slots(tasks)));
  }
  etmlir_cpu_parallel_tasks(tasks, gemm_job_body, &job);
  if (job.scratch) etmlir_cpu_scratch_free(job.scratch);
  if (a_copy) etmlir_cpu_scratch_free(a_copy);
  for (int64_t i = 0; i < batch; i++) probs[i].N += tail;
}

/* The epilogue of a matrix product: the bias runs along the last dim (columns). */
static ep_view product_epilogue(const etmlir_epilogue* ep, int64_t batch_index, int64_t rank) {
  ep_view e;
  memset(&e, 0, sizeof(e));
  if (!ep) return e;
  e.ep = ep;
  e.bias = ep->bias;
  e.bias_cs = ep->bias_stride;
  if (ep->mode & ETMLIR_EP_RESIDUAL) {
    const int64_t* rs = ep->res_strides;
    e.res = ep->res + (rank == 3 ? batch_index * rs[0] : 0);
    e.res_rs = rs[rank - 2];
    e.res_cs = rs[rank - 1];
  }
  return e;
}

ETMLIR_CPU_EXPORT void _mlir_ciface_etmlir_uk_matmul(etmlir_memref2d_f32* a, etmlir_memref2d_f32* b,
                                                     etmlir_memref2d_f32* c) {
  _mlir_ciface_etmlir_uk_matmul_ep(a, b, c, NULL);
}

ETMLIR_CPU_EXPORT void _mlir_ciface_etmlir_uk_matmul_ep(etmlir_memref2d_f32* a, etmlir_memref2d_f32* b,
                                                        etmlir_memref2d_f32* c, const etmlir_epilogue* ep) {
  gemm_problem g;
  memset(&g, 0, sizeof(g));
  g.M = a->sizes[0];
  g.K = a->sizes[1];
  g.N = b->sizes[1];
  g.a = view2(a->aligned + a->offset, a->strides[0], a->strides[1]);
  g.b.m = view2(b->aligned + b->offset, b->strides[0], b->strides[1]);
  g.c = c->aligned + c->offset;
  g.rsc = c->strides[0];
  g.csc = c->strides[1];
  g.e = product_epilogue(ep, 0, 2);
  gemm_run(&g, 1);
}

ETMLIR_CPU_EXPORT int64_t etmlir_uk_panel_width(void) { return UK_NR; }

ETMLIR_CPU_EXPORT void _mlir_ciface_etmlir_uk_matmul_packed_ep(etmlir_memref2d_f32* a, etmlir_memref3d_f32* bp,
                                                               etmlir_memref2d_f32* c, const etmlir_epilogue* ep) {
  int64_t K = a->sizes[1], N = c->sizes[1], W = bp->sizes[2];
  const float* panels = bp->aligned + bp->offset;
  if (W != UK_NR || bp->strides[2] != 1 || bp->strides[1] != W || ((uintptr_t)panels & 63) != 0) {
    /* Panels of another width, layout or alignment (a payload whose packing pass and microkernels
     * disagree, which the compiler does not build): one column at a time, so the result is still right. */
    float* col = (float*)etmlir_cpu_scratch_alloc(sizeof(float) * (size_t)(K > 0 ? K : 1));
    for (int64_t n = 0; n < N; n++) {
      const float* p = panels + (n / W) * bp->strides[0] + (n % W) * bp->strides[2];
      for (int64_t k = 0; k < K; k++) col[k] = p[k * bp->strides[1]];
      etmlir_memref2d_f32 b1 = {col, col, 0, {K, 1}, {1, 1}};
      etmlir_memref2d_f32 c1 = {c->allocated, c->aligned, c->offset + n * c->strides[1], {c->sizes[0], 1},
                                {c->strides[0], c->strides[1]}};
      etmlir_epilogue e1;
      if (ep) {
        e1 = *ep;
        e1.bias = ep->bias + n * ep->bias_stride;
        e1.res = ep->res + n * ep->res_strides[1];
      }
      _mlir_ciface_etmlir_uk_matmul_ep(a, &b1, &c1, ep ? &e1 : NULL);
    }
    etmlir_cpu_scratch_free(col);
    return;
  }
  gemm_problem g;
  memset(&g, 0, sizeof(g));
  g.M = a->sizes[0];
  g.K = K;
  g.N = N;
  g.a = view2(a->aligned + a->offset, a->strides[0], a->strides[1]);
  g.b.packed = panels;
  g.c = c->aligned + c->offset;
  g.rsc = c->strides[0];
  g.csc = c->strides[1];
  g.e = product_epilogue(ep, 0, 2);
  gemm_run(&g, 1);
}

enum { BATCH_ON_STACK = 64 };

ETMLIR_CPU_EXPORT void _mlir_ciface_etmlir_uk_batch_matmul(etmlir_memref3d_f32* a, etmlir_memref3d_f32* b,
                                                           etmlir_memref3d_f32* c) {
  _mlir_ciface_etmlir_uk_batch_matmul_ep(a, b, c, NULL);
}

ETMLIR_CPU_EXPORT void _mlir_ciface_etmlir_uk_batch_matmul_ep(etmlir_memref3d_f32* a, etmlir_memref3d_f32* b,
                                                              etmlir_memref3d_f32* c, const etmlir_epilogue* ep) {
  int64_t batch = a->sizes[0];
  if (batch <= 0) return;
  gemm_problem on_stack[BATCH_ON_STACK];
  gemm_problem* probs = on_stack;
  if (batch > BATCH_ON_STACK) probs = (gemm_problem*)etmlir_cpu_scratch_alloc(sizeof(gemm_problem) * (size_t)batch);
  for (int64_t i = 0; i < batch; i++) {
    gemm_problem* g = &probs[i];
    memset(g, 0, sizeof(*g));
    g->M = a->sizes[1];
    g->K = a->sizes[2];
    g->N = b->sizes[2];
    g->a = view2(a->aligned + a->offset + i * a->strides[0], a->strides[1], a->strides[2]);
    g->b.m = view2(b->aligned + b->offset + i * b->strides[0], b->strides[1], b->strides[2]);
    g->c = c->aligned + c->offset + i * c->strides[0];
    g->rsc = c->strides[1];
    g->csc = c->strides[2];
    g->e = product_epilogue(ep, i, 3);
  }
  gemm_run(probs, batch);
  if (probs != on_stack) etmlir_cpu_scratch_free(probs);
}

/* ------------------------------------------------------------------------------------------ */
/* Convolution: one GEMM per image, W[F, C*KH*KW] x im2col(in)[C*KH*KW, OH*OW]               */
/* ------------------------------------------------------------------------------------------ */

/* The epilogue of a convolution's output rows [f][ow] at image n, output row oh: the bias runs along
 * the channels (the view's rows), the residual is read at the same (n, f, oh, ow). */
static ep_view conv_row_epilogue(const etmlir_epilogue* ep, int64_t n, int64_t oh) {
  ep_view e;
  memset(&e, 0, sizeof(e));
  if (!ep) return e;
  e.ep = ep;
  e.bias = ep->bias;
  e.bias_rs = ep->bias_stride;
  if (ep->mode & ETMLIR_EP_RESIDUAL) {
    const int64_t* rs = ep->res_strides;
    e.res = ep->res + n * rs[0] + oh * rs[2];
    e.res_rs = rs[1];
    e.res_cs = rs[3];
  }
  return e;
}

/* A convolution's filter: a strided [F, C, KH, KW] tensor at p (element (f, c, kh, kw) at
 * p[f * fs[0] + c * fs[1] + kh * fs[2] + kw * fs[3]]), or, when packed is not NULL, the panels
 * et-cpu-pack-weights made at compile time: A = [F, C*KH*KW] as gemm_problem.a_packed describes. */
typedef struct {
  const float* p;
  int64_t fs[4];
  int64_t C, KH, KW;
  const float* packed;
} conv_filter;

#if defined(__AVX512F__)
/* Implicit GEMM for convolutions with a short reduction (C*KH*KW <= KC_MAX) and unit-stride rows:
 * the microkernel reads its B vectors straight from the input (no im2col, no B packing). A tile is
 * up to 32 output columns of one output row; koff[k] is the input offset of reduction index k. */
UK_INLINE void kconv512(const int mr, const int nv, const int s2, int64_t kc, const float* restrict ap,
                        const float* restrict src, const int64_t* restrict koff, float* restrict c, int64_t ldc,
                        __mmask16 m0, __mmask16 m1, uint64_t lbits, const tile_ep* te) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  __m512 acc0[UK_MR], acc1[UK_MR];
  if (te && te->init) {
    ep512_init(mr, nv, te, acc0, acc1, m0, m1);
  } else {
#pragma GCC unroll 14
    for (int r = 0; r < mr; r++) {
      acc0[r] = _mm512_maskz_loadu_ps(m0, c + r * ldc);
      if (nv == 2) acc1[r] = _mm512_maskz_loadu_ps(m1, c + r * ldc + 16);
    }
  }
  for (int64_t k = 0; k < kc; k++) {
    const float* p = src + koff[k];
    __m512 b0, b1;
    if (s2) {
      b0 = _mm512_permutex2var_ps(_mm512_maskz_loadu_ps((__mmask16)lbits, p), even,
                                  _mm512_maskz_loadu_ps((__mmask16)(lbits >> 16), p + 16));
      b1 = nv == 2 ? _mm512_permutex2var_ps(_mm512_maskz_loadu_ps((__mmask16)(lbits >> 32), p + 32), even,
                                            _mm512_maskz_loadu_ps((__mmask16)(lbits >> 48), p + 48))
                   : b0;
    } else {
      b0 = _mm512_maskz_loadu_ps(m0, p);
      b1 = nv == 2 ? _mm512_maskz_loadu_ps(m1, p + 16) : b0;
    }
#pragma GCC unroll 14
    for (int r = 0; r < mr; r++) {
      __m512 a = _mm512_set1_ps(ap[r]);
      acc0[r] = _mm512_fmadd_ps(a, b0, acc0[r]);
      if (nv == 2) acc1[r] = _mm512_fmadd_ps(a, b1, acc1[r]);
    }
    ap += UK_MR;
  }
  if (te && te->finish) ep512_finish(mr, nv, te, acc0, acc1, m0, m1);
#pragma GCC unroll 14
  for (int r = 0; r < mr; r++) {
    _mm512_mask_storeu_ps(c + r * ldc, m0, acc0[r]);
    if (nv == 2) _mm512_mask_storeu_ps(c + r * ldc + 16, m1, acc1[r]);
  }
}

#define KCONV512_CASE(R)                                                               \
  case R:                                                                              \
    if (nv == 2) {                                                                     \
      if (s2) {                                                                        \
        kconv512(R, 2, 1, kc, ap, src, koff, c, ldc, m0, m1, lbits, te);                   \
      } else {                                                                         \
        kconv512(R, 2, 0, kc, ap, src, koff, c, ldc, m0, m1, lbits, te);                   \
      }                                                                                \
    } else {                                                                           \
      if (s2) {                                                                        \
        kconv512(R, 1, 1, kc, ap, src, koff, c, ldc, m0, m1, lbits, te);                   \
      } else {                                                                         \
        kconv512(R, 1, 0, kc, ap, src, koff, c, ldc, m0, m1, lbits, te);                   \
      }                                                                                \
    }                                                                                  \
    break;

static void kconv512_dispatch(int mr, int nr, int s2, int64_t kc, const float* ap, const float* src,
                              const int64_t* koff, float* c, int64_t ldc, const tile_ep* te) {
  __mmask16 m0 = mask16(nr), m1 = mask16(MAX(0, nr - 16));
  uint64_t lbits = (1ull << (2 * nr - 1)) - 1; /* stride 2: input columns [0, 2 nr - 1) */
  int nv = nr > 16 ? 2 : 1;
  switch (mr) {
    KCONV512_CASE(1)
    KCONV512_CASE(2)
    KCONV512_CASE(3)
    KCONV512_CASE(4)
    KCONV512_CASE(5)
    KCONV512_CASE(6)
    KCONV512_CASE(7)
    KCONV512_CASE(8)
    KCONV512_CASE(9)
    KCONV512_CASE(10)
    KCONV512_CASE(11)
    KCONV512_CASE(12)
    KCONV512_CASE(13)
    KCONV512_CASE(14)
    default:
      break;
  }
}

typedef struct {
  const float* in;
  float* out;
  const float* ap;     /* packed filter: panels over all F rows, kc = K */
  int fixed_panels;    /* 1: UK_MR rows each, the last one short (packed at compile time); 0: balanced heights */
  const int64_t* koff; /* K input offsets */
  int64_t F, OH, OW, K, rows;
  int64_t in_n, in_row; /* input offsets per image and per output row */
  int64_t out_n, out_f, out_row;
  int64_t str_w;
  int64_t tasks;
  const etmlir_epilogue* ep;
} conv_job;

static void conv_job_body(void* arg, int64_t t, int slot) {
  const conv_job* j = (const conv_job*)arg;
  int64_t np = CEIL_DIV(j->F, UK_MR), hbase = j->F / np, hextra = j->F % np;
  (void)slot;
  int64_t r0, r1;
  split_range(j->rows, j->tasks, 1, t, &r0, &r1);
  for (int64_t r = r0; r < r1; r++) {
    int64_t n = r / j->OH, oh = r % j->OH;
    const float* src_row = j->in + n * j->in_n + oh * j->in_row;
    float* out_row = j->out + n * j->out_n + oh * j->out_row;
    /* The epilogue in registers, a tile at a time (element by element when it does not fit). */
    ep_view e = conv_row_epilogue(j->ep, n, oh);
    int init = ep_inits(&e), finish = ep_finishes(&e);
    tile_ep te;
    int fused = (init || finish) && tile_ep_make(&e, 0, 0, init, finish, &te);
    if (init && !fused) ep_init(&e, out_row, j->out_f, 1, 0, j->F, 0, j->OW);
    for (int64_t ow = 0; ow < j->OW; ow += 32) {
      int nr = (int)MIN(32, j->OW - ow);
      for (int64_t ip = 0, f = 0; ip < np; ip++) {
        int h = j->fixed_panels ? (int)MIN(UK_MR, j->F - f) : (int)(hbase + (ip < hextra));
        if (fused) tile_ep_make(&e, f, ow, init, finish, &te);
        kconv512_dispatch(h, nr, j->str_w == 2, j->K, j->ap + ip * UK_MR * j->K, src_row + ow * j->str_w, j->koff,
                          out_row + f * j->out_f + ow, j->out_f, fused ? &te : NULL);
        f += h;
      }
    }
    if (finish && !fused) ep_finish(&e, out_row, j->out_f, 1, 0, j->F, 0, j->OW);
  }
}

/* Returns 0 when the convolution does not suit the implicit GEMM (the caller then uses im2col GEMM). */
static int conv_direct(etmlir_memref4d_f32* in, const conv_filter* w, etmlir_memref4d_f32* out, int64_t stride_h,
                       int64_t stride_w, int64_t dilation_h, int64_t dilation_w, const etmlir_epilogue* ep) {
  int64_t nb = out->sizes[0], F = out->sizes[1], OH = out->sizes[2], OW = out->sizes[3];
  int64_t C = w->C, KH = w->KH, KW = w->KW, K = C * KH * KW;
  const int64_t* is = in->strides;
  const int64_t* fs = w->fs;
  const int64_t* os = out->strides;
  if (K > KC_MAX || KH * KW == 1 || is[3] != 1 || os[3] != 1 || (stride_w != 1 && stride_w != 2)) return 0;
  /* Each filter panel loads (at stride 2 also deinterleaves) its B vectors from the input again: with
   * few panels that beats packing B once, with many it does not. One layer alone at 1 thread (AVX-512),
   * im2col GEMM against this: stride 2, 64 filters (five panels; ResNet-18's 7x7 stem) 1.68 against
   * 1.81 ms, 128 filters 0.39 against 0.49, 48 filters 1.37 against 1.41, but 32 filters (three;
   * MobileNetV2's stem) 0.28 against 0.25; stride 1, 256 filters 0.33 against 0.37, 128 (ten panels)
   * 0.28 against 0.29, 64 filters with a 7x7 window 6.30 against 5.88. */
  if (CEIL_DIV(F, UK_MR) > (stride_w == 2 ? 3 : 10)) return 0;
  int64_t a_floats = w->packed ? 0 : CEIL_DIV(CEIL_DIV(F, UK_MR) * UK_MR * K, 16) * 16;
  float* scratch = (float*)etmlir_cpu_scratch_alloc(sizeof(float) * (size_t)a_floats + sizeof(int64_t) * (size_t)K);
  int64_t* koff = (int64_t*)(scratch + a_floats);
  for (int64_t c = 0, k = 0; c < C; c++)
    for (int64_t kh = 0; kh < KH; kh++)
      for (int64_t kw = 0; kw < KW; kw++) koff[k++] = c * is[1] + kh * dilation_h * is[2] + kw * dilation_w;
  /* Filter as [F, K] with K = (c, kh, kw): pack_a takes it one (c, kh, kw) column at a time. */
  const float* fbase = w->p;
  for (int64_t c = 0, k = 0; c < C && !w->packed; c++)
    for (int64_t kh = 0; kh < KH; kh++)
      for (int64_t kw = 0; kw < KW; kw++, k++) {
        int64_t np = CEIL_DIV(F, UK_MR), hbase = F / np, hextra = F % np;
        for (int64_t ip = 0, f = 0; ip < np; ip++) {
          int64_t h = hbase + (ip < hextra);
          float* dst = scratch + ip * UK_MR * K + k * UK_MR;
          for (int64_t r = 0; r < h; r++) dst[r] = fbase[(f + r) * fs[0] + c * fs[1] + kh * fs[2] + kw * fs[3]];
          f += h;
        }
      }
  conv_job j;
  memset(&j, 0, sizeof(j));
  j.in = in->aligned + in->offset;
  j.out = out->aligned + out->offset;
  j.ap = w->packed ? w->packed : scratch;
  j.fixed_panels = w->packed != NULL;
  j.koff = koff;
  j.F = F;
  j.OH = OH;
  j.OW = OW;
  j.K = K;
  j.rows = nb * OH;
  j.in_n = is[0];
  j.in_row = stride_h * is[2];
  j.out_n = os[0];
  j.out_f = os[1];
  j.out_row = os[2];
  j.str_w = stride_w;
  j.ep = ep;
  int nt = etmlir_cpu_num_threads();
  double flops = 2.0 * (double)F * (double)K * (double)(j.rows * OW);
  j.tasks = nt > 1 && flops >= PAR_MIN_FLOPS
                ? MIN(j.rows, MAX(nt, MIN(TASKS_PER_THREAD * nt, (int64_t)(flops / TASK_MIN_FLOPS))))
                : 1;
  etmlir_cpu_parallel_tasks(j.tasks, conv_job_body, &j);
  etmlir_cpu_scratch_free(scratch);
  return 1;
}
#endif

ETMLIR_CPU_EXPORT void _mlir_ciface_etmlir_uk_conv2d_nchw_fchw(etmlir_memref4d_f32* in, etmlir_memref4d_f32* filter,
                                                               etmlir_memref4d_f32* out, int64_t stride_h,
                                                               int64_t stride_w, int64_t dilation_h,
                                                               int64_t dilation_w) {
  _mlir_ciface_etmlir_uk_conv2d_nchw_fchw_ep(in, filter, out, stride_h, stride_w, dilation_h, dilation_w, NULL);
}

/* The epilogue over one image's output, a row (oh) at a time: for the paths whose output is not one
 * flat [F, OH*OW] matrix. */
static void conv_image_epilogue(const etmlir_epilogue* ep, float* o, const int64_t* os, int64_t n, int64_t F,
                                int64_t OH, int64_t OW, int finish) {
  for (int64_t oh = 0; oh < OH; oh++) {
    ep_view e = conv_row_epilogue(ep, n, oh);
    if (finish) {
      ep_finish(&e, o + oh * os[2], os[1], os[3], 0, F, 0, OW);
    } else {
      ep_init(&e, o + oh * os[2], os[1], os[3], 0, F, 0, OW);
    }
  }
}

/* ------------------------------------------------------------------------------------------ */
/* Winograd F(m x m, 3 x 3), m = 2 or 4: 3x3 stride-1 convolutions with fewer multiplies        */
/* ------------------------------------------------------------------------------------------ */
/* Each m x m output tile is Y = A^T [sum_c (G g G^T) . (B^T d B)] A, d the tile's a x a input patch,
 * a = m + 2 (Lavin and Gray, 2015). For each of the E = a^2 elements e of the transformed tile, the
 * sum over channels is a GEMM:  M_e[F, tiles] = U_e[F, C] x V_e[C, tiles],  U_e = (G g G^T)_e and
 * V_e = (B^T d B)_e: 9 m^2 multiplies per tile and channel pair become E (2.25x fewer for m = 2, 4x
 * for m = 4). U arrives as A panels (gemm_problem.a_packed), built at compile time by
 * et-cpu-pack-weights from the constant filter (which layers suit which m is decided there); V is
 * built a block of tiles at a time as B panels (b_view.packed), so the GEMMs pack nothing.
 *   m = 2:  B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]   A^T = [1 1 1 0; 0 1 -1 -1]
 *   m = 4:  B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]
 *           A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]
 * (G: pack_weights.py.) The transforms reassociate the sums: for m = 4, whose coefficients reach 8,
 * the result drifts further from the direct convolution's (see the tests' tolerances). */

enum {
  WINO_BLOCK_FLOATS = 8192, /* a block's tiles x max(C, F): V and M E times that */
  /* Where that budget makes two or three blocks, blocks of this many tiles instead (a multiple of every
   * build's UK_NR): the threads' shares are whole blocks, and ResNet-18's 56x56 layers (196 tiles, 64
   * channels) split 128 | 68 at 2 threads. In the model, side by side, those layers took about 0.53-0.62
   * ms each at 2 threads against 0.58-0.78 (one layer alone, AVX-512: 0.85 against 0.92 ms at 1 thread,
   * 0.53 against 0.60 at 2; AVX2: 1.12 against 1.19 and 0.67 against 0.76). (Every layer's blocks at 32
   * tiles slowed the 28x28 layers, one block of 64 tiles before, by about 0.05 ms each.) */
  WINO_FEW_BLOCKS_TILES = 32,
  WINO_MAX_M = 4,
  WINO_MAX_A = WINO_MAX_M + 2,
};

/* Panels et-cpu-pack-weights made for these kernels (packed filters, Winograd's U):
 * [P, K, UK_MR], contiguous, aligned. */
static int native_panels(const etmlir_memref3d_f32* p, int64_t K) {
  return p->sizes[1] == K && p->sizes[2] == UK_MR && p->strides[2] == 1 && p->strides[1] == UK_MR &&
         p->strides[0] == K * UK_MR && ((uintptr_t)(p->aligned + p->offset) & 63) == 0;
}

/* U packed: [E][ceil(F / UK_MR)][C][UK_MR], row f of U_e at (f / UK_MR, c, f % UK_MR), zero
 * padded past F. Floats per e: */
static int64_t wino_u_floats(int64_t F, int64_t C) { return CEIL_DIV(F, UK_MR) * UK_MR * C; }

typedef struct {
  int m, a, E; /* output tile m x m, input patch a x a, E = a * a */
  const float* in;
  int64_t is[4], IH, IW; /* the (padded) input */
  float* out;
  int64_t os[4];
  const float* u;
  int64_t C, F, OH, OW, TH, TW, tiles, tb; /* tb: tiles per block, a multiple of UK_NR */
  /* Floats from one element e to the next in V (C x tb of them) and in M (F x tb): one cache line
   * more than that, so that the E rows a tile's transform reads or writes do not all fall in one
   * cache set (C x tb floats is a multiple of 4 KB for the usual channel counts). */
  int64_t ves, mes;
  int64_t blocks, tasks;
  const etmlir_epilogue* ep;
  float* scratch; /* per task: V (E x ves) then M (E x mes) */
  int64_t slot;
  int64_t phase_block, phase; /* the block and phase the phase-parallel split works on */
  int64_t phase_tasks;        /* ... and its tasks */
} wino_job;

/* The 1-d transforms, on n lanes (n <= UK_NR + 1): out row i = sum_r T[i][r] * in row r. */
UK_INLINE void wino_bt(const int m, float (*restrict in)[UK_NR + 1], float (*restrict out)[UK_NR + 1], int64_t n) {
#pragma GCC ivdep
  for (int64_t k = 0; k < n; k++) {
    if (m == 2) {
      float d0 = in[0][k], d1 = in[1][k], d2 = in[2][k], d3 = in[3][k];
      out[0][k] = d0 - d2;
      out[1][k] = d1 + d2;
      out[2][k] = d2 - d1;
      out[3][k] = d1 - d3;
    } else {
      float d0 = in[0][k], d1 = in[1][k], d2 = in[2][k], d3 = in[3][k], d4 = in[4][k], d5 = in[5][k];
      out[0][k] = 4.0f * d0 - 5.0f * d2 + d4;
      out[1][k] = d3 + d4 - 4.0f * (d1 + d2);
      out[2][k] = d4 - d3 + 4.0f * (d1 - d2);
      out[3][k] = d4 - d2 + 2.0f * (d3 - d1);
      out[4][k] = d4 - d2 + 2.0f * (d1 - d3);
      out[5][k] = 4.0f * d1 - 5.0f * d3 + d5;
    }
  }
}

UK_INLINE void wino_at(const int m, float (*restrict in)[UK_NR], float (*restrict out)[UK_NR], int64_t n) {
#pragma GCC ivdep
  for (int64_t k = 0; k < n; k++) {
    if (m == 2) {
      float m0 = in[0][k], m1 = in[1][k], m2 = in[2][k], m3 = in[3][k];
      out[0][k] = m0 + m1 + m2;
      out[1][k] = m1 - m2 - m3;
    } else {
      float m0 = in[0][k], m1 = in[1][k], m2 = in[2][k], m3 = in[3][k], m4 = in[4][k], m5 = in[5][k];
      float p12 = m1 + m2, d12 = m1 - m2, p34 = m3 + m4, d34 = m3 - m4;
      out[0][k] = m0 + p12 + p34;
      out[1][k] = d12 + 2.0f * d34;
      out[2][k] = p12 + 4.0f * p34;
      out[3][k] = d12 + 8.0f * d34 + m5;
    }
  }
}

/* B^T d B for n <= UK_NR tiles side by side: d[r][s] = src[r * rs + m * k + s] for tile k; element
 * e = a i + j of tile k goes to dst[e * es + k]. Each row's columns are first split by their phase
 * modulo m (column m k + s of tile k is phase s of lane k, or, for s >= m, phase s - m of lane k + 1),
 * so every loop after that runs over tiles with unit stride (and vectorizes). */
UK_INLINE void wino_in_run_m(const int m, const float* restrict src, int64_t rs, int64_t n, float* restrict dst,
                             int64_t es) {
  const int a = m + 2;
  float ph[WINO_MAX_M][WINO_MAX_A][UK_NR + 1]; /* [phase][row][lane] */
  float t[WINO_MAX_M][WINO_MAX_A][UK_NR + 1];  /* B^T applied down the rows: [phase][i][lane] */
  for (int r = 0; r < a; r++) {
    const float* row = src + r * rs;
    for (int s = 0; s < m; s++) {
      for (int64_t k = 0; k < n; k++) ph[s][r][k] = row[m * k + s];
      /* Lane n: only the two phases the last tile's last two columns need (reading more would
       * leave the patch). */
      ph[s][r][n] = s < 2 ? row[m * n + s] : 0.0f;
    }
  }
  for (int s = 0; s < m; s++) wino_bt(m, ph[s], t[s], n + 1);
  for (int i = 0; i < a; i++) {
    float col[WINO_MAX_A][UK_NR + 1], v[WINO_MAX_A][UK_NR + 1];
    for (int s = 0; s < a; s++)
      for (int64_t k = 0; k < n; k++) col[s][k] = s < m ? t[s][i][k] : t[s - m][i][k + 1];
    wino_bt(m, col, v, n);
    for (int j = 0; j < a; j++)
      for (int64_t k = 0; k < n; k++) dst[(i * a + j) * es + k] = v[j][k];
  }
}

#if defined(UK_VEC)
/* F(4x4, 3x3)'s 1-d transforms on vectors of tiles (AVX-512 and AVX2 alike). B^T x for the six vectors
 * x[0..5] (a column or a row of the patch): */
UK_INLINE void wino4_bt(const ukv* x, ukv* y) {
  const ukv four = ukv_set1(4.0f), five = ukv_set1(5.0f), two = ukv_set1(2.0f);
  y[0] = ukv_fnmadd(five, x[2], ukv_fmadd(four, x[0], x[4]));
  y[1] = ukv_fnmadd(four, ukv_add(x[1], x[2]), ukv_add(x[3], x[4]));
  y[2] = ukv_fmadd(four, ukv_sub(x[1], x[2]), ukv_sub(x[4], x[3]));
  y[3] = ukv_fmadd(two, ukv_sub(x[3], x[1]), ukv_sub(x[4], x[2]));
  y[4] = ukv_fmadd(two, ukv_sub(x[1], x[3]), ukv_sub(x[4], x[2]));
  y[5] = ukv_fnmadd(five, x[3], ukv_fmadd(four, x[1], x[5]));
}

/* A^T x for the six vectors x[0..5]: four. */
UK_INLINE void wino4_at(const ukv* x, ukv* y) {
  const ukv two = ukv_set1(2.0f), four = ukv_set1(4.0f), eight = ukv_set1(8.0f);
  ukv p12 = ukv_add(x[1], x[2]), d12 = ukv_sub(x[1], x[2]);
  ukv p34 = ukv_add(x[3], x[4]), d34 = ukv_sub(x[3], x[4]);
  y[0] = ukv_add(ukv_add(x[0], p12), p34);
  y[1] = ukv_fmadd(two, d34, d12);
  y[2] = ukv_fmadd(four, p34, p12);
  y[3] = ukv_add(ukv_fmadd(eight, d34, d12), x[5]);
}

/* B^T d B of a vector of tiles' patches d[row][column]; element (i, j) stored to dst + (6i + j) es,
 * the first `keep` lanes. */
UK_INLINE void wino4_patch_store(ukv d[6][6], float* dst, int64_t es, ukv_lanes keep) {
  ukv t[6][6]; /* B^T down the columns: t[i][s] */
  for (int s = 0; s < 6; s++) {
    ukv x[6] = {d[0][s], d[1][s], d[2][s], d[3][s], d[4][s], d[5][s]}, y[6];
    wino4_bt(x, y);
    for (int i = 0; i < 6; i++) t[i][s] = y[i];
  }
  for (int i = 0; i < 6; i++) { /* ... then along each row: element (i, j) */
    ukv v[6];
    wino4_bt(t[i], v);
    for (int j = 0; j < 6; j++) ukv_store_first(dst + (i * 6 + j) * es, keep, v[j]);
  }
}

/* A^T m A of a vector of tiles (element e at src + e es, the first `keep` lanes): y[p][q], the output
 * at row p, column q of each tile. */
UK_INLINE void wino4_tile_load(const float* src, int64_t es, ukv_lanes keep, ukv y[4][4]) {
  ukv s[6][4]; /* A^T along each row: s[i][q]; then down the columns */
  for (int i = 0; i < 6; i++) {
    ukv x[6];
    for (int j = 0; j < 6; j++) x[j] = ukv_load_first(src + (i * 6 + j) * es, keep);
    wino4_at(x, s[i]);
  }
  for (int q = 0; q < 4; q++) {
    ukv x[6] = {s[0][q], s[1][q], s[2][q], s[3][q], s[4][q], s[5][q]}, z[4];
    wino4_at(x, z);
    for (int p = 0; p < 4; p++) y[p][q] = z[p];
  }
}
#endif

#if defined(__AVX512F__)
/* F(4x4, 3x3) on 16 tiles at once (AVX-512), n <= 16 of them real: lane k of every vector is tile k. */

/* Input transform of n <= 16 tiles: the patch of tile k is src[r * rs + 4k + s], r, s < 6. */
static void wino4_in16(const float* src, int64_t rs, int64_t n, float* dst, int64_t es) {
  /* Phase s of the 16 tiles, from four vectors of 64 consecutive floats: lane k takes float 4k + s. */
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i next = _mm512_add_epi32(lane, _mm512_set1_epi32(1)); /* lane k <- k + 1; lane 15 <- the tail's 0 */
  const __m512i next2 = _mm512_mask_add_epi32(next, 0x8000, next, _mm512_set1_epi32(1)); /* ... tail's 1 */
  int64_t len = 4 * n + 2; /* floats the n patches span in a row */
  __m512 d[6][6];          /* [row][column] */
  for (int r = 0; r < 6; r++) {
    const float* row = src + r * rs;
    __m512 v[5];
    for (int q = 0; q < 5; q++) v[q] = _mm512_maskz_loadu_ps(ukv_first(len - 16 * q), row + 16 * q);
    for (int s = 0; s < 4; s++) {
      __m512i idx = _mm512_and_si512(_mm512_add_epi32(_mm512_slli_epi32(lane, 2), _mm512_set1_epi32(s)),
                                     _mm512_set1_epi32(31));
      d[r][s] = _mm512_mask_blend_ps(0xFF00, _mm512_permutex2var_ps(v[0], idx, v[1]),
                                     _mm512_permutex2var_ps(v[2], idx, v[3]));
    }
    d[r][4] = _mm512_permutex2var_ps(d[r][0], next, v[4]);  /* float 4k + 4: phase 0 of tile k + 1 */
    d[r][5] = _mm512_permutex2var_ps(d[r][1], next2, v[4]); /* float 4k + 5 */
  }
  wino4_patch_store(d, dst, es, ukv_first(n));
}

/* Output transform of n <= 16 tiles (element e of tile k at src[e * es + k]), added to `rows` output
 * rows o + p * rs at columns 4k + q < cols (unit column stride). */
static void wino4_out16(const float* src, int64_t es, int64_t n, int64_t cols, int64_t rows, float* o, int64_t rs) {
  __m512 y[4][4];
  wino4_tile_load(src, es, ukv_first(n), y);
  /* Row p holds y[p][q][k] at column 4k + q: interleave the four vectors by pairs, then pairs of pairs. */
  const __m512i pair_lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i pair_hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  const __m512i quad_lo = _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11);
  const __m512i quad_hi = _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15);
  for (int p = 0; p < (int)rows; p++) {
    __m512d ab[2], cd[2];
    ab[0] = _mm512_castps_pd(_mm512_permutex2var_ps(y[p][0], pair_lo, y[p][1]));
    ab[1] = _mm512_castps_pd(_mm512_permutex2var_ps(y[p][0], pair_hi, y[p][1]));
    cd[0] = _mm512_castps_pd(_mm512_permutex2var_ps(y[p][2], pair_lo, y[p][3]));
    cd[1] = _mm512_castps_pd(_mm512_permutex2var_ps(y[p][2], pair_hi, y[p][3]));
    float* row = o + p * rs;
    for (int v = 0; v < 4; v++) {
      __mmask16 mk = ukv_first(cols - 16 * v);
      if (!mk) break;
      __m512 z = _mm512_castpd_ps(_mm512_permutex2var_pd(ab[v / 2], v % 2 ? quad_hi : quad_lo, cd[v / 2]));
      _mm512_mask_storeu_ps(row + 16 * v, mk, _mm512_add_ps(_mm512_maskz_loadu_ps(mk, row + 16 * v), z));
    }
  }
}
#elif defined(__AVX2__) && defined(__FMA__)
/* F(4x4, 3x3) on 8 tiles at once (AVX2), n <= 8 of them real: lane k of every vector is tile k. */

/* The four 64-bit quarters of four vectors, transposed: out[i] quarter q = in[q] quarter i. */
UK_INLINE void transpose_quarters256(const __m256* in, __m256* out) {
  __m256d a = _mm256_unpacklo_pd(_mm256_castps_pd(in[0]), _mm256_castps_pd(in[1]));
  __m256d b = _mm256_unpackhi_pd(_mm256_castps_pd(in[0]), _mm256_castps_pd(in[1]));
  __m256d c = _mm256_unpacklo_pd(_mm256_castps_pd(in[2]), _mm256_castps_pd(in[3]));
  __m256d d = _mm256_unpackhi_pd(_mm256_castps_pd(in[2]), _mm256_castps_pd(in[3]));
  out[0] = _mm256_castpd_ps(_mm256_permute2f128_pd(a, c, 0x20));
  out[1] = _mm256_castpd_ps(_mm256_permute2f128_pd(b, d, 0x20));
  out[2] = _mm256_castpd_ps(_mm256_permute2f128_pd(a, c, 0x31));
  out[3] = _mm256_castpd_ps(_mm256_permute2f128_pd(b, d, 0x31));
}

/* Input transform of n <= 8 tiles: the patch of tile k is src[r * rs + 4k + s], r, s < 6. */
static void wino4_in8(const float* src, int64_t rs, int64_t n, float* dst, int64_t es) {
  /* Each vector of 8 floats holds two tiles' four phases; pairing the tiles per phase, then
   * transposing the pairs, gives phase s of the 8 tiles in order. */
  const __m256i pairs = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const __m256i shift = _mm256_setr_epi32(1, 2, 3, 4, 5, 6, 7, 7);
  int64_t len = 4 * n + 2; /* floats the n patches span in a row */
  __m256 d[6][6];          /* [row][column] */
  for (int r = 0; r < 6; r++) {
    const float* row = src + r * rs;
    __m256 v[4];
    for (int q = 0; q < 4; q++)
      v[q] = _mm256_permutevar8x32_ps(_mm256_maskload_ps(row + 8 * q, ukv_first(len - 8 * q)), pairs);
    transpose_quarters256(v, d[r]);
    /* Floats 4k + 4 and 4k + 5: phases 0 and 1 of tile k + 1; lane 7 from past the last tile. */
    __m256 tail = _mm256_maskload_ps(row + 32, ukv_first(len - 32));
    d[r][4] = _mm256_blend_ps(_mm256_permutevar8x32_ps(d[r][0], shift), _mm256_permutevar8x32_ps(tail, _mm256_setzero_si256()), 0x80);
    d[r][5] = _mm256_blend_ps(_mm256_permutevar8x32_ps(d[r][1], shift),
                              _mm256_permutevar8x32_ps(tail, _mm256_set1_epi32(1)), 0x80);
  }
  wino4_patch_store(d, dst, es, ukv_first(n));
}

/* Output transform of n <= 8 tiles (element e of tile k at src[e * es + k]), added to `rows` output
 * rows o + p * rs at columns 4k + q < cols (unit column stride). */
static void wino4_out8(const float* src, int64_t es, int64_t n, int64_t cols, int64_t rows, float* o, int64_t rs) {
  const __m256i unpair = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  __m256 y[4][4];
  wino4_tile_load(src, es, ukv_first(n), y);
  for (int p = 0; p < (int)rows; p++) {
    __m256 w[4];
    transpose_quarters256(y[p], w); /* w[v]: tiles 2v, 2v + 1, by phase pairs */
    float* row = o + p * rs;
    for (int v = 0; v < 4; v++) {
      __m256i mk = ukv_first(cols - 8 * v);
      __m256 z = _mm256_permutevar8x32_ps(w[v], unpair);
      _mm256_maskstore_ps(row + 8 * v, mk, _mm256_add_ps(_mm256_maskload_ps(row + 8 * v, mk), z));
    }
  }
}
#endif

static void wino_in_run(int m, const float* src, int64_t rs, int64_t n, float* dst, int64_t es) {
  if (m == 2) {
    wino_in_run_m(2, src, rs, n, dst, es);
  } else {
#if defined(__AVX512F__)
    for (int64_t k = 0; k < n; k += 16) wino4_in16(src + 4 * k, rs, MIN(16, n - k), dst + k, es);
#elif defined(__AVX2__) && defined(__FMA__)
    for (int64_t k = 0; k < n; k += 8) wino4_in8(src + 4 * k, rs, MIN(8, n - k), dst + k, es);
#else
    wino_in_run_m(4, src, rs, n, dst, es);
#endif
  }
}

/* A run of tiles: where its patches start in the input and its tiles in V (both without the channel). */
typedef struct {
  int64_t src, dst, run, inner, y0, x0;
} wino_run;

enum { WINO_RUNS = 16 }; /* runs whose channels are transformed together */

/* The tiles [t0, t1) of channels [c0, c1) into V (tile t at lane t - t0 of its block). A run is
 * tiles of one tile row within one B panel; a tile whose patch leaves the input (output sizes that
 * are not a multiple of m) reads zeros there. */
static void wino_input(const wino_job* j, int64_t t0, int64_t t1, int64_t c0, int64_t c1, float* v) {
  const int m = j->m, a = j->a;
  int64_t es = j->ves, per_image = j->TH * j->TW;
  /* Channel by channel over a group of runs, not run by run over the channels: a channel's tiles of
   * element e share V's cache lines (a block's tile rows each fill part of them), so they are written
   * while those lines are in L1 rather than each run sweeping all of V (~300 KB) through L2 again.
   * (ResNet-18's 56x56 layers, a block of 32 tiles in three runs: 18 -> 13 us a block in a C driver;
   * with wino_output's same order, the model 1-1.5% faster at 1 thread, about 0.5% at 2.) */
  for (int64_t t = t0; t < t1;) {
    wino_run runs[WINO_RUNS];
    int nr = 0;
    for (; nr < WINO_RUNS && t < t1; nr++) {
      wino_run* r = &runs[nr];
      int64_t n = t / per_image, ty = (t % per_image) / j->TW, tx = t % j->TW, lane = t - t0;
      r->run = MIN(MIN(j->TW - tx, t1 - t), UK_NR - lane % UK_NR);
      r->y0 = m * ty;
      r->x0 = m * tx;
      int full_rows = r->y0 + a <= j->IH;
      int64_t room = j->IW - a - r->x0; /* tiles wholly inside: x0 + m k + a <= IW */
      r->inner = full_rows && room >= 0 ? MIN(r->run, room / m + 1) : 0;
      r->src = n * j->is[0] + r->y0 * j->is[2] + r->x0;
      r->dst = (lane / UK_NR) * j->C * UK_NR + lane % UK_NR;
      t += r->run;
    }
    for (int64_t c = c0; c < c1; c++)
      for (int i = 0; i < nr; i++) {
        const wino_run* r = &runs[i];
        const float* src = j->in + c * j->is[1] + r->src;
        float* dst = v + c * UK_NR + r->dst;
        if (r->inner) wino_in_run(m, src, j->is[2], r->inner, dst, es);
        for (int64_t k = r->inner; k < r->run; k++) {
          float d[WINO_MAX_A * WINO_MAX_A];
          for (int q = 0; q < a; q++)
            for (int s = 0; s < a; s++) {
              int64_t y = r->y0 + q, x = r->x0 + m * k + s;
              d[q * a + s] = y < j->IH && x < j->IW ? src[q * j->is[2] + m * k + s] : 0.0f;
            }
          wino_in_run(m, d, a, 1, dst + k, es);
        }
      }
  }
  /* Lanes past the block's last tile that the GEMM's vectors still load (it stores only the tiles'
   * lanes, but garbage there could be denormals, which are slow): zero. A vector is at most 16 lanes,
   * so a last panel of 16 tiles or fewer needs nothing on the AVX-512 path (half its lanes). */
  int64_t used = t1 - t0, padded = MIN(CEIL_DIV(used, UK_NR) * UK_NR, CEIL_DIV(used, 16) * 16);
  if (padded > used && c0 == 0)
    for (int e = 0; e < j->E; e++)
      for (int64_t c = 0; c < j->C; c++)
        for (int64_t lane = used; lane < padded; lane++)
          v[e * es + (lane / UK_NR) * j->C * UK_NR + c * UK_NR + lane % UK_NR] = 0.0f;
}

/* M_e = U_e x V_e for e in [e0, e1) over the block's first `cols` lanes (its tiles). */
static void wino_gemms(const wino_job* j, int e0, int e1, int64_t cols, const float* v, float* mt) {
  static const etmlir_epilogue zero = {ETMLIR_EP_INIT_ZERO, 0.0f, 0.0f, NULL, 0, NULL, {0}, 0, 0};
  for (int e = e0; e < e1; e++) {
    gemm_problem g;
    memset(&g, 0, sizeof(g));
    g.M = j->F;
    g.N = cols;
    g.K = j->C;
    g.a_packed = j->u + e * wino_u_floats(j->F, j->C);
    g.b.packed = v + e * j->ves;
    g.c = mt + e * j->mes;
    g.rsc = j->tb;
    g.csc = 1;
    g.e.ep = &zero;
    blocking bl = choose_blocking(&g);
    gemm_range(&g, &bl, 0, g.M, 0, g.N, NULL);
  }
}

/* A^T M A for n <= UK_NR tiles side by side (element e of tile k at src[e * es + k]), added to `rows`
 * output rows o + p * rs: the first `full` tiles have all m columns inside, the one after them
 * `part` (column q of tile k at (m k + q) * cs). */
UK_INLINE void wino_out_run_m(const int m, const float* restrict src, int64_t es, int64_t n, int64_t full,
                              int64_t part, int64_t rows, float* restrict o, int64_t rs, const int64_t cs) {
  const int a = m + 2;
  float s[WINO_MAX_A][WINO_MAX_M][UK_NR]; /* A^T applied along each row i: [i][q][lane] */
  for (int i = 0; i < a; i++) {
    float row[WINO_MAX_A][UK_NR];
    for (int j = 0; j < a; j++)
      for (int64_t k = 0; k < n; k++) row[j][k] = src[(i * a + j) * es + k];
    wino_at(m, row, s[i], n);
  }
  for (int q = 0; q < m; q++) {
    float col[WINO_MAX_A][UK_NR], y[WINO_MAX_M][UK_NR];
    for (int i = 0; i < a; i++)
      for (int64_t k = 0; k < n; k++) col[i][k] = s[i][q][k];
    wino_at(m, col, y, n);
    for (int p = 0; p < (int)rows; p++) {
      float* op = o + p * rs + q * cs;
      for (int64_t k = 0; k < full; k++) op[m * k * cs] += y[p][k];
      if (q < part) op[m * full * cs] += y[p][full];
    }
  }
}

/* A^T M A of tiles [t0, t1) for channels [f0, f1), added to the output, with the epilogue. */
static void wino_output(const wino_job* j, int64_t t0, int64_t t1, int64_t f0, int64_t f1, const float* mt) {
  const int m = j->m;
  int64_t es = j->mes, per_image = j->TH * j->TW;
  const int64_t* os = j->os;
  /* As wino_input: channel by channel over a group of runs (each init before and finished after), so a
   * channel's tiles are read from M's cache lines once while they are in L1. */
  for (int64_t t = t0; t < t1;) {
    struct {
      int64_t n, lane, run, oh, ow, rows, cols;
    } runs[WINO_RUNS];
    int nr = 0;
    for (; nr < WINO_RUNS && t < t1; nr++) {
      int64_t n = t / per_image, ty = (t % per_image) / j->TW, tx = t % j->TW;
      runs[nr].n = n;
      runs[nr].lane = t - t0;
      runs[nr].run = MIN(MIN(j->TW - tx, t1 - t), UK_NR);
      runs[nr].oh = m * ty;
      runs[nr].ow = m * tx;
      runs[nr].rows = MIN(m, j->OH - runs[nr].oh);
      runs[nr].cols = MIN(m * runs[nr].run, j->OW - runs[nr].ow);
      for (int64_t r = 0; r < runs[nr].rows; r++) {
        ep_view e = conv_row_epilogue(j->ep, n, runs[nr].oh + r);
        ep_init(&e, j->out + n * os[0] + (runs[nr].oh + r) * os[2], os[1], os[3], f0, f1 - f0, runs[nr].ow,
                runs[nr].cols);
      }
      t += runs[nr].run;
    }
    for (int64_t f = f0; f < f1; f++)
      for (int i = 0; i < nr; i++) {
        int64_t lane = runs[i].lane, run = runs[i].run, ow = runs[i].ow, rows = runs[i].rows, cols = runs[i].cols;
        int64_t full = cols / m, part = cols % m;
        float* o = j->out + runs[i].n * os[0] + runs[i].oh * os[2];
        const float* src = mt + f * j->tb + lane;
        float* of = o + f * os[1] + ow * os[3];
        if (m == 2 && os[3] == 1) {
          wino_out_run_m(2, src, es, run, full, part, rows, of, os[2], 1);
        } else if (m == 2) {
          wino_out_run_m(2, src, es, run, full, part, rows, of, os[2], os[3]);
        } else if (os[3] == 1) {
#if defined(__AVX512F__)
          for (int64_t k = 0; k < run; k += 16)
            wino4_out16(src + k, es, MIN(16, run - k), MIN(64, cols - 4 * k), rows, of + 4 * k, os[2]);
#elif defined(__AVX2__) && defined(__FMA__)
          for (int64_t k = 0; k < run; k += 8)
            wino4_out8(src + k, es, MIN(8, run - k), MIN(32, cols - 4 * k), rows, of + 4 * k, os[2]);
#else
          wino_out_run_m(4, src, es, run, full, part, rows, of, os[2], 1);
#endif
        } else {
          wino_out_run_m(4, src, es, run, full, part, rows, of, os[2], os[3]);
        }
      }
    for (int i = 0; i < nr; i++)
      for (int64_t r = 0; r < runs[i].rows; r++) {
        ep_view e = conv_row_epilogue(j->ep, runs[i].n, runs[i].oh + r);
        ep_finish(&e, j->out + runs[i].n * os[0] + (runs[i].oh + r) * os[2], os[1], os[3], f0, f1 - f0, runs[i].ow,
                  runs[i].cols);
      }
  }
}

static void wino_block(const wino_job* j, int64_t b, float* slot) {
  float* v = slot;
  float* mt = slot + j->E * j->ves;
  int64_t t0 = b * j->tb, t1 = MIN(j->tiles, t0 + j->tb);
  wino_input(j, t0, t1, 0, j->C, v);
  wino_gemms(j, 0, j->E, t1 - t0, v, mt);
  wino_output(j, t0, t1, 0, j->F, mt);
}

/* Two or more blocks per thread: each task is a block, in its thread's slot. */
static void wino_blocks_body(void* arg, int64_t b, int slot) {
  const wino_job* j = (const wino_job*)arg;
  wino_block(j, b, j->scratch + slot * j->slot);
}

/* Fewer blocks than that: the threads share each block, phase by phase (input channels, then the E
 * GEMMs, then output channels), one job of phase_tasks tasks per phase. */
static void wino_phase_body(void* arg, int64_t i, int slot) {
  const wino_job* j = (const wino_job*)arg;
  float* v = j->scratch;
  float* mt = j->scratch + j->E * j->ves;
  int64_t t0 = j->phase_block * j->tb, t1 = MIN(j->tiles, t0 + j->tb);
  int64_t lo, hi;
  (void)slot;
  if (j->phase == 0) {
    split_range(j->C, j->phase_tasks, 1, i, &lo, &hi);
    if (lo < hi || i == 0) wino_input(j, t0, t1, lo, hi, v);
  } else if (j->phase == 1) {
    split_range(j->E, j->phase_tasks, 1, i, &lo, &hi);
    wino_gemms(j, (int)lo, (int)hi, t1 - t0, v, mt);
  } else {
    split_range(j->F, j->phase_tasks, 1, i, &lo, &hi);
    if (lo < hi) wino_output(j, t0, t1, lo, hi, mt);
  }
}

static void wino_conv(etmlir_memref4d_f32* in, const float* u, etmlir_memref4d_f32* out, int64_t C, int m,
                      const etmlir_epilogue* ep) {
  wino_job j;
  memset(&j, 0, sizeof(j));
  j.m = m;
  j.a = m + 2;
  j.E = j.a * j.a;
  j.in = in->aligned + in->offset;
  j.out = out->aligned + out->offset;
  for (int i = 0; i < 4; i++) {
    j.is[i] = in->strides[i];
    j.os[i] = out->strides[i];
  }
  j.IH = in->sizes[2];
  j.IW = in->sizes[3];
  j.u = u;
  j.C = C;
  j.F = out->sizes[1];
  j.OH = out->sizes[2];
  j.OW = out->sizes[3];
  j.TH = CEIL_DIV(j.OH, m);
  j.TW = CEIL_DIV(j.OW, m);
  j.tiles = out->sizes[0] * j.TH * j.TW;
  j.tb = MAX(UK_NR, WINO_BLOCK_FLOATS / MAX(j.C, j.F) / UK_NR * UK_NR);
  j.tb = MIN(j.tb, CEIL_DIV(j.tiles, UK_NR) * UK_NR);
  int64_t few = CEIL_DIV(j.tiles, j.tb);
  if ((few == 2 || few == 3) && j.tb > WINO_FEW_BLOCKS_TILES) j.tb = WINO_FEW_BLOCKS_TILES;
  j.blocks = CEIL_DIV(j.tiles, j.tb);
  j.ep = ep;
  j.ves = j.C * j.tb + 16;
  j.mes = j.F * j.tb + 16;
  j.slot = j.E * (j.ves + j.mes);
  int nt = etmlir_cpu_num_threads();
  double flops = 2.0 * j.E * (double)j.F * (double)j.C * (double)j.tiles;
  j.tasks = nt > 1 && flops >= PAR_MIN_FLOPS ? nt : 1;
  /* A block per task only when every thread gets two or more: with fewer, shares of whole blocks come
   * out unequal, and sharing each block phase by phase balances them. */
  int by_blocks = j.blocks >= 2 * j.tasks;
  /* min(tasks, blocks) slots either way (the phase split uses one): never fewer than a smaller pool
   * needs, so the arena the compiler measures with its larger pool holds every run's. */
  j.scratch = (float*)etmlir_cpu_scratch_alloc(sizeof(float) * (size_t)(j.slot * MIN(j.tasks, j.blocks)));
  if (j.tasks == 1) {
    for (int64_t b = 0; b < j.blocks; b++) wino_block(&j, b, j.scratch);
  } else if (by_blocks) {
    etmlir_cpu_parallel_tasks(j.blocks, wino_blocks_body, &j);
  } else {
    for (j.phase_block = 0; j.phase_block < j.blocks; j.phase_block++)
      for (j.phase = 0; j.phase < 3; j.phase++) {
        int64_t dim = j.phase == 0 ? j.C : j.phase == 1 ? j.E : j.F;
        j.phase_tasks = MIN(dim, TASKS_PER_THREAD * j.tasks);
        etmlir_cpu_parallel_tasks(j.phase_tasks, wino_phase_body, &j);
      }
  }
  etmlir_cpu_scratch_free(j.scratch);
}

ETMLIR_CPU_EXPORT void _mlir_ciface_etmlir_uk_conv2d_winograd_ep(etmlir_memref4d_f32* in, etmlir_memref3d_f32* u,
                                                                 etmlir_memref4d_f32* out, const etmlir_epilogue* ep) {
  int64_t nb = out->sizes[0], F = out->sizes[1], C = u->sizes[1], H = u->sizes[2];
  if (nb <= 0 || F <= 0 || out->sizes[2] <= 0 || out->sizes[3] <= 0) return;
  /* The tile size follows from U's element count: E = (m + 2)^2 matrices of ceil(F / H) panels. */
  int64_t P = H > 0 ? CEIL_DIV(F, H) : 0, E = P > 0 ? u->sizes[0] / P : 0;
  int m = E == 16 && u->sizes[0] == 16 * P ? 2 : E == 36 && u->sizes[0] == 36 * P ? 4 : 0;
  if (!m) { /* not a U the compiler makes: NaN, never a plausible wrong answer */
    for (int64_t n = 0; n < nb; n++)
      for (int64_t f = 0; f < F; f++)
        for (int64_t h = 0; h < out->sizes[2]; h++)
          for (int64_t w = 0; w < out->sizes[3]; w++)
            out->aligned[out->offset + n * out->strides[0] + f * out->strides[1] + h * out->strides[2] +
                         w * out->strides[3]] = __builtin_nanf("");
    return;
  }
  const float* up = u->aligned + u->offset;
  const int64_t* us = u->strides;
  float* own_u = NULL;
  if (!native_panels(u, C)) {
    /* Panels of another height, layout or alignment (the compiler does not make them): repacked. */
    int64_t ue = wino_u_floats(F, C);
    own_u = (float*)etmlir_cpu_scratch_alloc(sizeof(float) * (size_t)(E * ue));
    memset(own_u, 0, sizeof(float) * (size_t)(E * ue));
    for (int64_t e = 0; e < E; e++)
      for (int64_t f = 0; f < F; f++)
        for (int64_t c = 0; c < C; c++)
          own_u[e * ue + (f / UK_MR) * C * UK_MR + c * UK_MR + f % UK_MR] =
              up[(e * P + f / H) * us[0] + c * us[1] + (f % H) * us[2]];
    up = own_u;
  }
  etmlir_memref4d_f32 dense = *in;
  float* own_in = NULL;
  if (in->strides[3] != 1) { /* the input transform reads rows with unit stride */
    const int64_t* s = in->sizes;
    own_in = (float*)etmlir_cpu_scratch_alloc(sizeof(float) * (size_t)(s[0] * s[1] * s[2] * s[3]));
    const float* src = in->aligned + in->offset;
    for (int64_t i = 0, n = 0; n < s[0]; n++)
      for (int64_t c = 0; c < s[1]; c++)
        for (int64_t h = 0; h < s[2]; h++)
          for (int64_t w = 0; w < s[3]; w++)
            own_in[i++] = src[n * in->strides[0] + c * in->strides[1] + h * in->strides[2] + w * in->strides[3]];
    dense.allocated = dense.aligned = own_in;
    dense.offset = 0;
    dense.strides[3] = 1;
    dense.strides[2] = s[3];
    dense.strides[1] = s[2] * s[3];
    dense.strides[0] = s[1] * s[2] * s[3];
  }
  wino_conv(&dense, up, out, C, m, ep);
  if (own_in) etmlir_cpu_scratch_free(own_in);
  if (own_u) etmlir_cpu_scratch_free(own_u);
}

static void conv2d(etmlir_memref4d_f32* in, const conv_filter* w, etmlir_memref4d_f32* out, int64_t stride_h,
                   int64_t stride_w, int64_t dilation_h, int64_t dilation_w, const etmlir_epilogue* ep) {
  int64_t nb = out->sizes[0], F = out->sizes[1], OH = out->sizes[2], OW = out->sizes[3];
  int64_t C = w->C, KH = w->KH, KW = w->KW;
  if (nb <= 0 || F <= 0 || OH <= 0 || OW <= 0) return;
  int64_t K = C * KH * KW, N = OH * OW;
#if defined(__AVX512F__)
  if (conv_direct(in, w, out, stride_h, stride_w, dilation_h, dilation_w, ep)) return;
#endif
  const int64_t* fs = w->fs;
  const int64_t* is = in->strides;
  const int64_t* os = out->strides;

  /* A = filter as [F, C*KH*KW]: a view when (c, kh, kw) flatten, else a contiguous copy (or the
   * panels packed at compile time). */
  float* filter_copy = NULL;
  int64_t unit = w->packed ? 1 : KH * KW == 1 ? fs[1] : KW > 1 ? fs[3] : fs[2];
  mat_view a = view2(w->p, w->packed ? K : fs[0], unit);
  int flat = w->packed || KH * KW == 1 ||
             ((KW == 1 || KH == 1 || fs[2] == KW * fs[3]) && (C == 1 || fs[1] == KH * KW * unit));
  if (!flat) {
    filter_copy = (float*)etmlir_cpu_scratch_alloc(sizeof(float) * (size_t)(F * K));
    for (int64_t f = 0; f < F; f++)
      for (int64_t c = 0; c < C; c++)
        for (int64_t kh = 0; kh < KH; kh++)
          for (int64_t kw = 0; kw < KW; kw++)
            filter_copy[((f * C + c) * KH + kh) * KW + kw] = w->p[f * fs[0] + c * fs[1] + kh * fs[2] + kw * fs[3]];
    a = view2(filter_copy, K, 1);
  }

  /* C = out[n] as [F, OH*OW]: a view when (oh, ow) flatten, else a contiguous copy. */
  int out_flat = OH == 1 || os[2] == OW * os[3];
  float* out_copy = NULL;
  if (!out_flat) out_copy = (float*)etmlir_cpu_scratch_alloc(sizeof(float) * (size_t)(F * N));

  for (int64_t n = 0; n < nb; n++) {
    gemm_problem g;
    memset(&g, 0, sizeof(g));
    g.M = F;
    g.N = N;
    g.K = K;
    g.a = a;
    g.a_packed = w->packed;
    const float* img = in->aligned + in->offset + n * is[0];
    float* o = out->aligned + out->offset + n * os[0];
    if (KH == 1 && KW == 1 && (OH == 1 || stride_h * is[2] == OW * stride_w * is[3])) {
      /* Pointwise convolution over a plane that flattens: B is the input itself. */
      g.b.m = view2(img, is[1], stride_w * is[3]);
    } else {
      g.b.is_conv = 1;
      g.b.in = img;
      g.b.sc = is[1];
      g.b.sh = is[2];
      g.b.sw = is[3];
      g.b.kh = KH;
      g.b.kw = KW;
      g.b.ow = OW;
      g.b.str_h = stride_h;
      g.b.str_w = stride_w;
      g.b.dil_h = dilation_h;
      g.b.dil_w = dilation_w;
    }
    /* The epilogue runs inside the GEMM when the output and the residual are flat [F, OH*OW]
     * matrices, else a row at a time before and after it. */
    const int64_t* rs = ep ? ep->res_strides : NULL;
    int res_flat = !ep || !(ep->mode & ETMLIR_EP_RESIDUAL) || OH == 1 || rs[2] == OW * rs[3];
    if (out_flat && res_flat) {
      g.e = conv_row_epilogue(ep, n, 0);
    } else if (ep) {
      conv_image_epilogue(ep, o, os, n, F, OH, OW, 0);
    }
    if (out_flat) {
      g.c = o;
      g.rsc = os[1];
      g.csc = os[3];
    } else {
      for (int64_t f = 0; f < F; f++)
        for (int64_t oh = 0; oh < OH; oh++)
          for (int64_t ow = 0; ow < OW; ow++)
            out_copy[(f * OH + oh) * OW + ow] = o[f * os[1] + oh * os[2] + ow * os[3]];
      g.c = out_copy;
      g.rsc = N;
      g.csc = 1;
    }
    gemm_run(&g, 1);
    if (!out_flat) {
      for (int64_t f = 0; f < F; f++)
        for (int64_t oh = 0; oh < OH; oh++)
          for (int64_t ow = 0; ow < OW; ow++)
            o[f * os[1] + oh * os[2] + ow * os[3]] = out_copy[(f * OH + oh) * OW + ow];
    }
    if (ep && !(out_flat && res_flat)) conv_image_epilogue(ep, o, os, n, F, OH, OW, 1);
  }
  if (filter_copy) etmlir_cpu_scratch_free(filter_copy);
  if (out_copy) etmlir_cpu_scratch_free(out_copy);
}

ETMLIR_CPU_EXPORT void _mlir_ciface_etmlir_uk_conv2d_nchw_fchw_ep(etmlir_memref4d_f32* in,
                                                                  etmlir_memref4d_f32* filter,
                                                                  etmlir_memref4d_f32* out, int64_t stride_h,
                                                                  int64_t stride_w, int64_t dilation_h,
                                                                  int64_t dilation_w, const etmlir_epilogue* ep) {
  conv_filter w = {filter->aligned + filter->offset, {0}, filter->sizes[1], filter->sizes[2], filter->sizes[3], NULL};
  for (int i = 0; i < 4; i++) w.fs[i] = filter->strides[i];
  conv2d(in, &w, out, stride_h, stride_w, dilation_h, dilation_w, ep);
}

ETMLIR_CPU_EXPORT int64_t etmlir_uk_panel_rows(void) { return UK_MR; }

ETMLIR_CPU_EXPORT void _mlir_ciface_etmlir_uk_conv2d_packed_ep(etmlir_memref4d_f32* in, etmlir_memref3d_f32* panels,
                                                               etmlir_memref4d_f32* out, int64_t stride_h,
                                                               int64_t stride_w, int64_t dilation_h,
                                                               int64_t dilation_w, int64_t kh, int64_t kw,
                                                               const etmlir_epilogue* ep) {
  int64_t F = out->sizes[1], K = panels->sizes[1], H = panels->sizes[2];
  conv_filter w = {panels->aligned + panels->offset, {0}, kh * kw > 0 ? K / (kh * kw) : 0, kh, kw, NULL};
  if (native_panels(panels, K)) {
    w.packed = w.p;
    conv2d(in, &w, out, stride_h, stride_w, dilation_h, dilation_w, ep);
    return;
  }
  /* Panels of another height, layout or alignment (a payload whose packing pass and microkernels
   * disagree, which the compiler does not build): unpacked into a plain [F, C, KH, KW] filter, so the
   * result is still right. */
  float* filter = (float*)etmlir_cpu_scratch_alloc(sizeof(float) * (size_t)(F * K > 0 ? F * K : 1));
  const int64_t* ps = panels->strides;
  for (int64_t f = 0; f < F; f++)
    for (int64_t k = 0; k < K; k++) filter[f * K + k] = w.p[(f / H) * ps[0] + k * ps[1] + (f % H) * ps[2]];
  w.p = filter;
  w.fs[0] = K;
  w.fs[1] = kh * kw;
  w.fs[2] = kw;
  w.fs[3] = 1;
  conv2d(in, &w, out, stride_h, stride_w, dilation_h, dilation_w, ep);
  etmlir_cpu_scratch_free(filter);
}

/* ------------------------------------------------------------------------------------------ */
/* Depthwise convolution: one (image, channel) plane at a time                                */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
  const float* in;
  const float* filter;
  float* out;
  int64_t C, OH, OW, KH, KW, IW;
  int64_t is[4], fs[3], os[4];
  int64_t sh, sw, dh, dw;
  int64_t tasks, planes;
  const etmlir_epilogue* ep;
  /* Padding absorbed (ep->pad_*): each task builds a plane's padded copy, PH x PW, in its slot of
   * scratch (in L2, unlike a padded copy of the whole tensor), and the kernel reads that. */
  int64_t IH, in_w, PH, PW, pad_t, pad_l, slot;
  float* scratch;
  int edges_in_kernel; /* instead: the 3x3 kernels (AVX-512, AVX2) read the input itself, zero outside it */
  /* Not NULL: small stride-1 3x3 planes as flat arrays (dw_plane_flat), these lane masks per vector and tap. */
  const uint16_t* flat;
} dw_job;

/* The 3x3 kernels (AVX-512 and AVX2) read each pass's input rows through pointers, and a row above or
 * below the input points here instead: a padded row costs no check in the loop. Never written; planes
 * whose rows are wider than this take the padded copy. */
enum { DW_ZERO_FLOATS = 4096 };
enum { DW_FLAT_MAX_VECS = 16 }; /* AVX-512's flat planes (dw_plane_flat): up to 16 vectors of outputs */
static float dw_zero_row[DW_ZERO_FLOATS] __attribute__((unused));

/* Where the 3x3 kernels' input rows and columns are: a pass's `in` is the input's row S oh - pad_t,
 * column 0 (rows and columns outside [0, IH) x [0, IW) are zeros, never read); an input without
 * padding has pads 0. */
typedef struct {
  int64_t pad_t, pad_l, IH, IW;
} dw_edges;

/* The edges of j's input: its padding when the kernel reads the unpadded input, else none, rows
 * unbounded and rows `plain_iw` wide. */
UK_INLINE dw_edges dw_edges_of(const dw_job* j, int64_t plain_iw) {
  dw_edges g;
  memset(&g, 0, sizeof(g));
  g.pad_t = j->edges_in_kernel ? j->pad_t : 0;
  g.pad_l = j->edges_in_kernel ? j->pad_l : 0;
  g.IH = j->edges_in_kernel ? j->IH : INT64_MAX / 4;
  g.IW = j->edges_in_kernel ? j->in_w : plain_iw;
  return g;
}

/* The vector 3x3 kernels (AVX-512, AVX2) take j: a 3x3 window, undilated, equal strides of 1 or 2, rows of
 * unit stride. */
UK_INLINE int dw_is_3x3(const dw_job* j) {
  return j->KH == 3 && j->KW == 3 && j->dh == 1 && j->dw == 1 && j->is[3] == 1 && j->os[3] == 1 && j->sh == j->sw &&
         (j->sw == 1 || j->sw == 2);
}

/* AVX-512's flat planes (j->flat set) take the plane's epilogue te in registers: its residual, if any, is a
 * flat plane too. */
UK_INLINE int dw_flat_takes(const dw_job* j, const tile_ep* te) {
  return j->flat && (!te || !te->res || te->res_ld == j->OW);
}

/* The padded plane: zero outside the input, the input's rows (stride ish, ics) inside. */
static void dw_pad_plane(const dw_job* j, const float* in, float* dst) {
  for (int64_t r = 0; r < j->PH; r++) {
    float* row = dst + r * j->PW;
    int64_t sr = r - j->pad_t;
    if (sr < 0 || sr >= j->IH) {
      memset(row, 0, sizeof(float) * (size_t)j->PW);
      continue;
    }
    const float* src = in + sr * j->is[2];
    int64_t c0 = MIN(j->pad_l, j->PW), c1 = MIN(j->PW, j->pad_l + j->in_w);
    memset(row, 0, sizeof(float) * (size_t)c0);
    if (j->is[3] == 1) {
      memcpy(row + c0, src + (c0 - j->pad_l), sizeof(float) * (size_t)(c1 - c0));
    } else {
      for (int64_t c = c0; c < c1; c++) row[c] = src[(c - j->pad_l) * j->is[3]];
    }
    if (c1 < j->PW) memset(row + c1, 0, sizeof(float) * (size_t)(j->PW - c1));
  }
}

/* Any kernel size, stride and dilation; vectorizes along ow when rows are contiguous. */
static void dw_plane_generic(const dw_job* j, const float* restrict in, const float* restrict f,
                             float* restrict out) {
  for (int64_t oh = 0; oh < j->OH; oh++) {
    float* restrict orow = out + oh * j->os[2];
    for (int64_t kh = 0; kh < j->KH; kh++) {
      const float* irow = in + (oh * j->sh + kh * j->dh) * j->is[2];
      for (int64_t kw = 0; kw < j->KW; kw++) {
        float w = f[kh * j->fs[1] + kw * j->fs[2]];
        const float* restrict src = irow + kw * j->dw * j->is[3];
        int64_t step = j->sw * j->is[3];
        if (j->os[3] == 1 && step == 1) {
          for (int64_t ow = 0; ow < j->OW; ow++) orow[ow] += w * src[ow];
        } else {
          for (int64_t ow = 0; ow < j->OW; ow++) orow[ow * j->os[3]] += w * src[ow * step];
        }
      }
    }
  }
}

#if defined(UK_VEC)
enum {
  DW_ROWS_R = 4,      /* output rows a pass of dw_plane_rows holds in registers, */
#if defined(__AVX512F__)
  DW_ROWS_NV = 4,     /* ... up to this many vectors each (AVX2's 16 registers: 2) */
#else
  DW_ROWS_NV = 2,
#endif
  DW_ROWS_MAX_K = 16, /* windows up to this size (larger ones take the generic loop) */
};

/* One pass of dw_plane_rows: output rows [oh0, oh0 + DW_ROWS_R), columns [ow0, ow0 + NV vectors), in
 * registers. Input row oh0 + i feeds output row oh0 + r with the filter's row i - r: fz is the filter with
 * DW_ROWS_R - 1 zero rows above and below (rows of KW floats), so every step runs the same multiply-adds
 * without a test, a few of them by zero (tested instead, the branches made it 1.2x slower). Rows past
 * `rows` (the plane's last pass) are computed and not stored. */
UK_INLINE void dw_rows_pass(const int NV, const dw_job* j, const float* restrict in, const float* restrict fz,
                            float* restrict out, int64_t oh0, int rows, int64_t ow0) {
  const int64_t KH = j->KH, KW = j->KW, ish = j->is[2], osh = j->os[2];
  ukv_lanes keep[DW_ROWS_NV];
  ukv acc[DW_ROWS_R][DW_ROWS_NV]; /* constant sizes: the arrays live in registers */
#pragma GCC unroll 4
  for (int v = 0; v < NV; v++) keep[v] = ukv_first(j->OW - ow0 - v * UK_VEC);
#pragma GCC unroll 4
  for (int r = 0; r < DW_ROWS_R; r++)
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) acc[r][v] = ukv_zero();
  for (int64_t i = 0; i < rows + KH - 1; i++) {
    const float* row = in + (oh0 + i) * ish + ow0;
    const float* w = fz + (i + DW_ROWS_R - 1) * KW; /* filter row i - r at w - r KW */
    for (int64_t kw = 0; kw < KW; kw++) {
      ukv x[DW_ROWS_NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++) x[v] = ukv_load_first(row + kw + v * UK_VEC, keep[v]);
#pragma GCC unroll 4
      for (int r = 0; r < DW_ROWS_R; r++) {
        const ukv wv = ukv_set1(w[kw - r * KW]);
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) acc[r][v] = ukv_fmadd(x[v], wv, acc[r][v]);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < DW_ROWS_R; r++) {
    if (r >= rows) break;
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) {
      float* q = out + (oh0 + r) * osh + ow0 + v * UK_VEC;
      ukv_store_first(q, keep[v], ukv_add(ukv_load_first(q, keep[v]), acc[r][v]));
    }
  }
}

/* dw_plane_generic for any window up to DW_ROWS_MAX_K at unit strides and dilations, rows of unit column
 * stride (the 3x3 kernels and the flat planes take theirs; this takes the rest: ConvNeXt's 7x7,
 * EfficientNet's 5x5). Passes of DW_ROWS_R output rows by up to DW_ROWS_NV vectors in registers, each input
 * vector loaded once per pass for all the rows it feeds: the generic loop loaded and stored the output row
 * per tap (a 7x7 window over 96 planes of 56x56 took twice eager's time). Adds the sums to the output, as
 * dw_plane_generic. */
static void dw_plane_rows(const dw_job* j, const float* restrict in, const float* restrict f, float* restrict out) {
  float fz[(DW_ROWS_MAX_K + 2 * (DW_ROWS_R - 1)) * DW_ROWS_MAX_K];
  const int64_t KH = j->KH, KW = j->KW;
  memset(fz, 0, sizeof(float) * (size_t)((KH + 2 * (DW_ROWS_R - 1)) * KW));
  for (int64_t kh = 0; kh < KH; kh++)
    for (int64_t kw = 0; kw < KW; kw++) fz[(kh + DW_ROWS_R - 1) * KW + kw] = f[kh * j->fs[1] + kw * j->fs[2]];
  for (int64_t oh0 = 0; oh0 < j->OH; oh0 += DW_ROWS_R) {
    const int rows = (int)MIN(DW_ROWS_R, j->OH - oh0);
    int64_t ow0 = 0;
    for (; ow0 + (DW_ROWS_NV - 1) * UK_VEC < j->OW; ow0 += DW_ROWS_NV * UK_VEC)
      dw_rows_pass(DW_ROWS_NV, j, in, fz, out, oh0, rows, ow0);
    const int64_t left = CEIL_DIV(j->OW - ow0, UK_VEC); /* vectors left: fewer than DW_ROWS_NV */
    if (DW_ROWS_NV > 3 && left == 3) dw_rows_pass(3, j, in, fz, out, oh0, rows, ow0);
    if (DW_ROWS_NV > 2 && left == 2) dw_rows_pass(2, j, in, fz, out, oh0, rows, ow0);
    if (left == 1) dw_rows_pass(1, j, in, fz, out, oh0, rows, ow0);
  }
}

/* dw_plane_rows takes j: unit strides and dilations, rows of unit column stride. */
UK_INLINE int dw_rows_takes(const dw_job* j) {
  return j->sh == 1 && j->sw == 1 && j->dh == 1 && j->dw == 1 && j->is[3] == 1 && j->os[3] == 1 &&
         j->KH <= DW_ROWS_MAX_K && j->KW <= DW_ROWS_MAX_K;
}
#endif

#if defined(UK_VEC)
/* A depthwise plane's epilogue, held in registers by the AVX-512 and AVX2 3x3 kernels: te (tile_ep_make over
 * the plane: one bias value, a residual plane of unit column stride) copied, so that stores through `out`
 * cannot make the compiler reload it, and its constants as vectors. te NULL: accumulate into the output.
 *
 * `kind` names the common epilogues, which the row passes build separately: the general one, with its
 * choices made per vector, made the AVX-512 3x3 kernel 20% slower on MobileNetV2's planes (bias and
 * ReLU6). */
enum {
  DW_EP_SUMS,   /* the sums added to the output (no epilogue, or one that neither inits nor finishes) */
  DW_EP_BOUNDS, /* from zero or the bias, then the bounds, a missing one infinite; + 1: the lower bound turns
                 * NaN into the bound (else NaN is kept), + 2: the upper one (DW_EP_BOUNDS to + 3) */
  DW_EP_ANY = DW_EP_BOUNDS + 4 /* anything else tile_ep holds: bias after, residual */
};

typedef struct {
  tile_ep t;
  int kind;
  ukv start, bias, lo, hi; /* start: the sums' first value (init zero or bias) */
} dw_ep;

UK_INLINE dw_ep dw_ep_of(const tile_ep* te) {
  dw_ep e;
  memset(&e, 0, sizeof(e));
  if (!te || (!te->init && !te->finish)) return e; /* DW_EP_SUMS */
  e.t = *te;
  e.bias = te->bias ? ukv_set1(te->bias[0]) : ukv_zero(); /* NULL: no init or add uses it */
  e.start = te->init == ETMLIR_EP_INIT_BIAS ? e.bias : ukv_zero();
  int lo = te->finish ? te->lo_mode : 0, hi = te->finish ? te->hi_mode : 0;
  e.lo = ukv_set1(lo ? te->lo : -__builtin_inff());
  e.hi = ukv_set1(hi ? te->hi : __builtin_inff());
  int plain = te->init && (!te->finish || (!te->bias_after && !te->res));
  e.kind = plain ? DW_EP_BOUNDS + (lo == ETMLIR_EP_BOUND_NAN_TO_BOUND) + 2 * (hi == ETMLIR_EP_BOUND_NAN_TO_BOUND)
                 : DW_EP_ANY;
  return e;
}

/* e for another plane of the same job: its bias value and residual plane (te: that plane's). */
UK_INLINE void dw_ep_rebase(dw_ep* e, const tile_ep* te) {
  if (e->kind == DW_EP_SUMS) return;
  e->t.bias = te->bias;
  e->t.res = te->res;
  if (te->bias) {
    e->bias = ukv_set1(te->bias[0]);
    if (te->init == ETMLIR_EP_INIT_BIAS) e->start = e->bias;
  }
}

/* Where a plane's R-row passes end: at OH, or, when OH % R rows are left over and the epilogue kind reads
 * neither the output nor a residual, at a last pass that ends at the plane's last row (each pass starts
 * at MIN(oh, OH - R): it overlaps the one before, writing some rows twice, with the same values). Else
 * the rows left over take passes of fewer rows with the general build. */
static inline int64_t dw_passes_end(int64_t OH, int R, int kind) {
  return OH % R && OH > R && kind > DW_EP_SUMS && kind < DW_EP_ANY ? OH + R - OH % R : OH;
}

/* The bounds of a DW_EP_BOUNDS kind. MAXPS/MINPS return their second operand when either is NaN. */
UK_INLINE ukv dw_ep_bounds(const int kind, const dw_ep* e, ukv v) {
  int to_bound = kind - DW_EP_BOUNDS;
  v = to_bound & 1 ? ukv_max(v, e->lo) : ukv_max(e->lo, v);
  return to_bound & 2 ? ukv_min(v, e->hi) : ukv_min(e->hi, v);
}
#endif

#if defined(__AVX512F__)
/* The sums' first value for output row `row`, columns [col, col + 16) at out (lanes m). */
UK_INLINE __m512 dw_start(const int kind, const dw_ep* e, const float* out, __mmask16 m) {
  if (kind == DW_EP_SUMS || (kind == DW_EP_ANY && !e->t.init)) return _mm512_maskz_loadu_ps(m, out);
  return e->start;
}

/* The sums of output row `row`, columns [col, col + 16) (lanes m), finished: bias, residual, bounds. */
UK_INLINE __m512 dw_finish(const int kind, const dw_ep* e, __m512 v, int64_t row, int64_t col, __mmask16 m) {
  if (kind == DW_EP_SUMS) return v;
  if (kind < DW_EP_ANY) return dw_ep_bounds(kind, e, v);
  if (!e->t.finish) return v;
  if (e->t.bias_after) v = _mm512_add_ps(v, e->bias);
  if (e->t.res) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, e->t.res + row * e->t.res_ld + col));
  return ep_bounds(&e->t, v, e->lo, e->hi);
}

/* The lanes of a 16-float load at column c (of a row IW wide) that lie inside the row. */
UK_INLINE __mmask16 dw_cols_in(int64_t c, int64_t IW) {
  int64_t lo = c < 0 ? -c : 0, hi = MIN(16, IW - c);
  return hi <= lo ? (__mmask16)0 : (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
}

/* Small planes (rows of at most 8: a 7x7 plane) of a stride-1 3x3 convolution padded to its own size:
 * output p = oh OW + ow reads input p + (kh - pad_t) OW + kw - pad_l, so the plane is one flat array and
 * every vector holds 16 outputs across rows, each tap a load under its mask of the lanes whose input lies
 * inside (dw_flat_masks, one set per job). A 7x7 plane is 4 vectors instead of 7 rows of 7 lanes:
 * MobileNetV2's 960-channel 7x7 layer alone, best of 3, 46.5 against 62.0 us. Not at 14x14 (576 channels:
 * 73.7 against 61.0 us), where the row passes load each input row once for three output rows instead of
 * each tap once per output vector. */
static int dw_flat_fits(const dw_job* j) {
  return j->edges_in_kernel && j->KH == 3 && j->KW == 3 && j->sh == 1 && j->sw == 1 && j->OW <= 8 &&
         j->OH * j->OW <= 16 * DW_FLAT_MAX_VECS && j->in_w == j->OW && j->is[2] == j->OW && j->os[2] == j->OW;
}

static void dw_flat_masks(const dw_job* j, uint16_t* masks) {
  int64_t n = j->OH * j->OW, r = 0, c = 0; /* output p's row and column */
  memset(masks, 0, sizeof(uint16_t) * 9 * (size_t)CEIL_DIV(n, 16));
  for (int64_t p = 0; p < n; p++) {
    for (int t = 0; t < 9; t++) {
      int64_t y = r + t / 3 - j->pad_t, x = c + t % 3 - j->pad_l;
      if (y >= 0 && y < j->IH && x >= 0 && x < j->in_w) masks[p / 16 * 9 + t] |= (uint16_t)(1u << (p % 16));
    }
    if (++c == j->OW) {
      c = 0;
      r++;
    }
  }
}

/* The 16 lanes of (hi:lo) from lane n of lo, a vector shifted by n - 16 columns (valignd): the 7x7 planes'
 * and the sliding passes' taps. */
#define DW_ROT(hi, lo, n) _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(hi), _mm512_castps_si512(lo), n))

/* A 7x7 plane padded by one on every side (MobileNetV2's and EfficientNet's last depthwise layers): the taps
 * of the vector at p are the plane at p + d, d in {-8, -7, -6, -1, 0, 1, 6, 7, 8}. Rather than nine loads at
 * those offsets (each spanning two cache lines), the vectors at p - 16, p and p + 16 (one new load per
 * vector, masked to the plane) are rotated into the nine (valignd), and each tap's FMA leaves the lanes whose
 * input is outside the plane as they were (its mask): the padding adds nothing, as in eager (an infinite
 * weight gives no NaN at the edge, where a zero times it would). (C driver, 960 planes: 35.1 us before, 24.8
 * after; with the masks applied to the taps as zeros instead, 30.) */
#define DW_TAP7(d) ((d) < 0 ? DW_ROT(cur, prev, 16 + (d)) : (d) > 0 ? DW_ROT(next, cur, (d)) : cur)

static void dw_plane_flat7(const dw_job* j, const float* in, const __m512 w[9], float* out, const dw_ep* e) {
  const int64_t n = 49;
  __m512 prev = _mm512_setzero_ps(), cur = _mm512_loadu_ps(in), next;
  for (int64_t p = 0; p < n; p += 16) {
    __mmask16 m = mask16(n - p);
    const uint16_t* tm = j->flat + p / 16 * 9;
    next = _mm512_maskz_loadu_ps(mask16(MAX(0, n - p - 16)), in + p + 16);
    __m512 acc = dw_start(DW_EP_ANY, e, out + p, m), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps();
    acc = _mm512_mask3_fmadd_ps(w[0], DW_TAP7(-8), acc, tm[0]);
    a1 = _mm512_mask3_fmadd_ps(w[3], DW_TAP7(-1), a1, tm[3]);
    a2 = _mm512_mask3_fmadd_ps(w[6], DW_TAP7(6), a2, tm[6]);
    acc = _mm512_mask3_fmadd_ps(w[1], DW_TAP7(-7), acc, tm[1]);
    a1 = _mm512_mask3_fmadd_ps(w[4], DW_TAP7(0), a1, tm[4]);
    a2 = _mm512_mask3_fmadd_ps(w[7], DW_TAP7(7), a2, tm[7]);
    acc = _mm512_mask3_fmadd_ps(w[2], DW_TAP7(-6), acc, tm[2]);
    a1 = _mm512_mask3_fmadd_ps(w[5], DW_TAP7(1), a1, tm[5]);
    a2 = _mm512_mask3_fmadd_ps(w[8], DW_TAP7(8), a2, tm[8]);
    acc = dw_finish(DW_EP_ANY, e, _mm512_add_ps(acc, _mm512_add_ps(a1, a2)), 0, p, m);
    _mm512_mask_storeu_ps(out + p, m, acc);
    prev = cur;
    cur = next;
  }
}
#undef DW_TAP7

static void dw_plane_flat(const dw_job* j, const float* in, const float* f, float* out, const dw_ep* e) {
  int64_t n = j->OH * j->OW, W = j->OW;
  __m512 w[9];
  for (int t = 0; t < 9; t++) w[t] = _mm512_set1_ps(f[(t / 3) * j->fs[1] + (t % 3) * j->fs[2]]);
  if (j->OH == 7 && W == 7 && j->pad_t == 1 && j->pad_l == 1) {
    dw_plane_flat7(j, in, w, out, e);
    return;
  }
  for (int64_t p = 0; p < n; p += 16) {
    __mmask16 m = mask16(n - p);
    const uint16_t* tm = j->flat + p / 16 * 9;
    const float* src = in + p - j->pad_t * W - j->pad_l;
    /* One partial sum per filter row: three chains of three FMAs instead of one of nine. */
    __m512 acc = dw_start(DW_EP_ANY, e, out + p, m), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps();
#pragma GCC unroll 3
    for (int kw = 0; kw < 3; kw++) {
      acc = _mm512_fmadd_ps(w[kw], _mm512_maskz_loadu_ps(tm[kw], src + kw), acc);
      a1 = _mm512_fmadd_ps(w[3 + kw], _mm512_maskz_loadu_ps(tm[3 + kw], src + W + kw), a1);
      a2 = _mm512_fmadd_ps(w[6 + kw], _mm512_maskz_loadu_ps(tm[6 + kw], src + 2 * W + kw), a2);
    }
    acc = dw_finish(DW_EP_ANY, e, _mm512_add_ps(acc, _mm512_add_ps(a1, a2)), 0, p, m);
    _mm512_mask_storeu_ps(out + p, m, acc);
  }
}

/* The 3x3 kernels compute R output rows per pass, so that each loaded input row feeds up to three of
 * them, one vector of 16 output columns at a time. Every load and store is under a mask, made once per
 * job for each vector of a row (dw_row_masks): the lanes of a load that lie inside the input row, and of
 * a store inside the output row. Masked loads cost what plain ones do, so the edges and a last partial
 * vector run the same code as the interior; before this (separate builds for edge vectors, passes near
 * the top and bottom and an overlapping last vector), the kernel was 125 KB of code that spilled, at half
 * the speed of this one. */
enum { DW_BLOCK_VECS = 32 }; /* vectors of a row whose masks are kept: wider planes go in column blocks */

typedef struct {
  __mmask16 ld[4]; /* stride 1: taps at columns c, c + 1, c + 2; stride 2: loads at c, c + 16, c + 2, c + 18 */
  __mmask16 st;
  /* The sliding passes' loads (left padding 1, dw3x3_slide_pass): stride 1, the vector after this one's
   * columns (ow + 16); stride 2, the two at 2 ow and 2 ow + 16. */
  __mmask16 sl[2];
} dw_col_masks;

/* The masks of the vector at output column ow (n columns of it inside the row), stride S, whose first tap
 * reads input column c of a row IW wide. At stride 2, output column ow + t reads input columns
 * c + 2t + {0, 1, 2}: the loads at c and c + 16 serve taps 0 and 1 (2n columns), those at c + 2 and
 * c + 18 tap 2 (2n - 1 columns, deinterleaved). */
UK_INLINE dw_col_masks dw_col_masks_of(const int S, int64_t c, int64_t n, int64_t IW) {
  dw_col_masks k;
  k.st = mask16(n);
  if (S == 1) {
    for (int t = 0; t < 3; t++) k.ld[t] = k.st & dw_cols_in(c + t, IW);
    k.ld[3] = 0;
  } else {
    uint32_t lo_bits = (uint32_t)((1ull << (2 * n)) - 1), hi_bits = (uint32_t)((1ull << (2 * n - 1)) - 1);
    k.ld[0] = (__mmask16)lo_bits & dw_cols_in(c, IW);
    k.ld[1] = (__mmask16)(lo_bits >> 16) & dw_cols_in(c + 16, IW);
    k.ld[2] = (__mmask16)hi_bits & dw_cols_in(c + 2, IW);
    k.ld[3] = (__mmask16)(hi_bits >> 16) & dw_cols_in(c + 18, IW);
  }
  return k;
}

/* Input row i of a pass, its taps x0, x1, x2, into the sums acc[r] of the output rows r < R it feeds (a
 * macro, not a function: passing acc to one changed the register allocation of the passes). */
#define DW_ROW_INTO(S, R, i, w, x0, x1, x2, acc)                 \
  _Pragma("GCC unroll 4") for (int r = 0; r < (R); r++) {        \
    int kh = (i) - (S) * r;                                      \
    if (kh < 0 || kh > 2) continue;                              \
    (acc)[r] = _mm512_fmadd_ps((w)[3 * kh], (x0), (acc)[r]);     \
    (acc)[r] = _mm512_fmadd_ps((w)[3 * kh + 1], (x1), (acc)[r]); \
    (acc)[r] = _mm512_fmadd_ps((w)[3 * kh + 2], (x2), (acc)[r]); \
  }

/* R output rows (from the plane's row oh) at one vector: rows[i] is the pass's input row i (zeros outside
 * the input), c the input column of the first tap, out the output at (oh, ow). */
UK_INLINE void dw3x3_vec(const int S, const int R, const int kind, const float* const* rows, int64_t c,
                         const dw_col_masks* k, float* out, int64_t osh, int64_t oh, int64_t ow, const __m512 w[9],
                         const dw_ep* e) {
#define DW_LOAD(q, ptr) _mm512_maskz_loadu_ps(k->ld[q], ptr)
  __m512 acc[4];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) acc[r] = dw_start(kind, e, out + r * osh, k->st);
#pragma GCC unroll 9
  for (int i = 0; i < S * (R - 1) + 3; i++) {
    const float* p = rows[i] + c;
    __m512 x0, x1, x2;
    if (S == 1) {
      x0 = DW_LOAD(0, p);
      x1 = DW_LOAD(1, p + 1);
      x2 = DW_LOAD(2, p + 2);
    } else {
      const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
      const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
      __m512 v0 = DW_LOAD(0, p), v1 = DW_LOAD(1, p + 16), v2 = DW_LOAD(2, p + 2);
      __m512 v3 = DW_LOAD(3, p + 18);
      x0 = _mm512_permutex2var_ps(v0, even, v1);
      x1 = _mm512_permutex2var_ps(v0, odd, v1);
      x2 = _mm512_permutex2var_ps(v2, even, v3);
    }
    DW_ROW_INTO(S, R, i, w, x0, x1, x2, acc);
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
    _mm512_mask_storeu_ps(out + r * osh, k->st, dw_finish(kind, e, acc[r], oh + r, ow, k->st));
#undef DW_LOAD
}

/* One pass: R output rows from row oh, every vector of the column block [ow0, ow0 + 16 nv). */
UK_INLINE void dw3x3_pass(const int S, const int R, const int kind, const float* in, int64_t ish, const dw_edges* g,
                          int64_t oh, int64_t ow0, int nv, const dw_col_masks* k, float* out, int64_t osh,
                          const __m512 w[9], const dw_ep* e) {
  const float* rows[9];
  int64_t r0 = S * oh - g->pad_t;
#pragma GCC unroll 9
  for (int i = 0; i < S * (R - 1) + 3; i++) rows[i] = r0 + i >= 0 && r0 + i < g->IH ? in + (r0 + i) * ish : dw_zero_row;
  for (int v = 0; v < nv; v++) {
    int64_t ow = ow0 + 16 * v;
    dw3x3_vec(S, R, kind, rows, S * ow - g->pad_l, &k[v], out + oh * osh + ow, osh, oh, ow, w, e);
  }
}

/* A "same" 3x3 window (left padding 1: every MobileNet-style depthwise layer) without overlapping loads.
 * dw3x3_vec loads each input row at three columns one apart (stride 2: four), and a 64-byte vector at any
 * offset but a multiple of 16 floats spans two cache lines: two accesses each, and the kernel ran at half
 * its arithmetic's speed. Here each row's vectors are loaded once, in order along the row, and the taps
 * are made from them in registers: stride 1, the vectors at ow and ow + 16 give the taps at ow - 1 (with
 * the last column of the one before), ow and ow + 1 by lane rotations (valignd); stride 2, the vectors at
 * 2 ow and 2 ow + 16 give the taps at 2 ow and 2 ow + 1 deinterleaved, and the one at 2 ow - 1 is the
 * latter rotated one lane, with the last lane of the vector before. A row's carried vector starts from
 * the column left of the block (zero at the left edge); loads past the right edge are masked to zeros.
 * (C driver, AVX-512: 16 planes of 56x56, 12.6-12.9 us before, 10.7-11.2 after; 192 planes of 28x28 at
 * stride 2, 24.8-25.5 before, 19.6-19.9 after. A bare pass of this shape over aligned rows: 7.2.) */
UK_INLINE void dw3x3_slide_pass(const int S, const int R, const int kind, const float* in, int64_t ish,
                                const dw_edges* g, int64_t oh, int64_t ow0, int nv, const dw_col_masks* k, float* out,
                                int64_t osh, const __m512 w[9], const dw_ep* e) {
  const float* rows[9];
  __m512 carry[9], cur[9]; /* stride 1: the vectors at ow - 16 and ow; stride 2: the odd taps at ow - 16 */
  int64_t r0 = S * oh - g->pad_t, left = S * ow0 - 1;
#pragma GCC unroll 9
  for (int i = 0; i < S * (R - 1) + 3; i++) {
    rows[i] = r0 + i >= 0 && r0 + i < g->IH ? in + (r0 + i) * ish : dw_zero_row;
    carry[i] = left >= 0 && left < g->IW ? _mm512_set1_ps(rows[i][left]) : _mm512_setzero_ps();
    if (S == 1) cur[i] = _mm512_maskz_loadu_ps(dw_cols_in(ow0, g->IW), rows[i] + ow0);
  }
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  for (int v = 0; v < nv; v++) {
    int64_t ow = ow0 + 16 * v;
    float* o = out + oh * osh + ow;
    __m512 acc[4];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) acc[r] = dw_start(kind, e, o + r * osh, k[v].st);
#pragma GCC unroll 9
    for (int i = 0; i < S * (R - 1) + 3; i++) {
      __m512 x0, x1, x2;
      if (S == 1) {
        __m512 next = _mm512_maskz_loadu_ps(k[v].sl[0], rows[i] + ow + 16);
        x0 = DW_ROT(cur[i], carry[i], 15);
        x1 = cur[i];
        x2 = DW_ROT(next, cur[i], 1);
        carry[i] = cur[i];
        cur[i] = next;
      } else {
        __m512 a = _mm512_maskz_loadu_ps(k[v].sl[0], rows[i] + 2 * ow);
        __m512 b = _mm512_maskz_loadu_ps(k[v].sl[1], rows[i] + 2 * ow + 16);
        x1 = _mm512_permutex2var_ps(a, even, b);
        x2 = _mm512_permutex2var_ps(a, odd, b);
        x0 = DW_ROT(x2, carry[i], 15);
        carry[i] = x2;
      }
      DW_ROW_INTO(S, R, i, w, x0, x1, x2, acc);
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
      _mm512_mask_storeu_ps(o + r * osh, k[v].st, dw_finish(kind, e, acc[r], oh + r, ow, k[v].st));
  }
}
#undef DW_ROT
#undef DW_ROW_INTO

/* The masks of the vectors [ow0, ow0 + 16 nv) of j's rows at stride S. */
static void dw_row_masks(const dw_job* j, int S, int64_t ow0, int nv, dw_col_masks* k) {
  const dw_edges g = dw_edges_of(j, INT64_MAX / 4);
  for (int v = 0; v < nv; v++) {
    int64_t ow = ow0 + 16 * v;
    k[v] = S == 1 ? dw_col_masks_of(1, ow - g.pad_l, MIN(16, j->OW - ow), g.IW)
                  : dw_col_masks_of(2, 2 * ow - g.pad_l, MIN(16, j->OW - ow), g.IW);
    k[v].sl[0] = S == 1 ? dw_cols_in(ow + 16, g.IW) : dw_cols_in(2 * ow, g.IW);
    k[v].sl[1] = S == 1 ? 0 : dw_cols_in(2 * ow + 16, g.IW);
  }
}

/* 3x3, stride S (1 or 2) in both dims, dilation 1, unit-stride rows. With j->edges_in_kernel, `in` is
 * the unpadded input plane and the padding is read as zeros (no padded copy). row_k: the masks of every
 * vector of a row, when the row is one block (NULL: made here). */
UK_INLINE void dw_plane_3x3_at(const dw_job* j, const int S, const float* in, const float* f, float* out,
                                const dw_ep* e, const dw_col_masks* row_k) {
  __m512 w[9];
  for (int kh = 0; kh < 3; kh++)
    for (int kw = 0; kw < 3; kw++) w[kh * 3 + kw] = _mm512_set1_ps(f[kh * j->fs[1] + kw * j->fs[2]]);
  const dw_edges g = dw_edges_of(j, INT64_MAX / 4);
  int64_t ish = j->is[2], osh = j->os[2];
  dw_col_masks block_k[DW_BLOCK_VECS];
  for (int64_t ow0 = 0; ow0 < j->OW; ow0 += 16 * DW_BLOCK_VECS) {
    int nv = (int)MIN(DW_BLOCK_VECS, CEIL_DIV(j->OW - ow0, 16));
    const dw_col_masks* k = row_k && j->OW <= 16 * DW_BLOCK_VECS ? row_k : block_k;
    if (k == block_k) dw_row_masks(j, S, ow0, nv, block_k);
    /* The 4-row passes are built per epilogue kind; the rows left over as dw_passes_end says. A left
     * padding of 1 takes the sliding passes. */
#define DW3X3_PASS(R, KIND)                                                      \
  do {                                                                           \
    if (g.pad_l == 1)                                                            \
      dw3x3_slide_pass(S, R, KIND, in, ish, &g, oh, ow0, nv, k, out, osh, w, e); \
    else                                                                         \
      dw3x3_pass(S, R, KIND, in, ish, &g, oh, ow0, nv, k, out, osh, w, e);       \
  } while (0)
    int64_t oh = 0, end = dw_passes_end(j->OH, 4, e->kind);
    for (; oh + 4 <= end; oh += 4) {
      oh = MIN(oh, j->OH - 4);
      switch (e->kind) {
        case DW_EP_SUMS: DW3X3_PASS(4, DW_EP_SUMS); break;
        case DW_EP_BOUNDS: DW3X3_PASS(4, DW_EP_BOUNDS); break;
        case DW_EP_BOUNDS + 1: DW3X3_PASS(4, DW_EP_BOUNDS + 1); break;
        case DW_EP_BOUNDS + 2: DW3X3_PASS(4, DW_EP_BOUNDS + 2); break;
        case DW_EP_BOUNDS + 3: DW3X3_PASS(4, DW_EP_BOUNDS + 3); break;
        default: DW3X3_PASS(4, DW_EP_ANY); break;
      }
    }
    switch (MAX(0, j->OH - oh)) {
      case 3: DW3X3_PASS(3, DW_EP_ANY); break;
      case 2: DW3X3_PASS(2, DW_EP_ANY); break;
      case 1: DW3X3_PASS(1, DW_EP_ANY); break;
      default: break;
    }
#undef DW3X3_PASS
  }
}

/* One build of the plane kernel per stride. */
static void dw_plane_3x3(const dw_job* j, const int S, const float* in, const float* f, float* out, const dw_ep* e,
                         const dw_col_masks* row_k) {
  if (S == 1) {
    dw_plane_3x3_at(j, 1, in, f, out, e, row_k);
  } else {
    dw_plane_3x3_at(j, 2, in, f, out, e, row_k);
  }
}
#endif

#if !defined(__AVX512F__) && defined(__AVX2__) && defined(__FMA__)
/* AVX2: 8 columns per vector, R output rows per pass (4 at stride 1, 2 at stride 2), rows through pointers
 * (dw_zero_row outside the input) as in the AVX-512 kernels. AVX2's masked loads and stores cost more than
 * plain ones, so a vector clear of both edges of the input row, all 8 columns inside the output row, runs
 * a build without masks; the others load and store under the masks dw_col_masks8 made once per job. */
UK_INLINE __m256 even8(__m256 a, __m256 b) {
  __m256 t = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), 0xD8));
}

UK_INLINE __m256 odd8(__m256 a, __m256 b) {
  __m256 t = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), 0xD8));
}

/* The lanes of an 8-float load at column c (of a row IW wide) that lie inside the row: all ones. */
UK_INLINE __m256i dw_cols_in8(int64_t c, int64_t IW) {
  __m256i col = _mm256_add_epi32(_mm256_set1_epi32((int)c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  return _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_setzero_si256(), col),
                             _mm256_cmpgt_epi32(_mm256_set1_epi32((int)MIN(IW, INT32_MAX)), col));
}

enum { DW_BLOCK_VECS8 = 32 }; /* vectors of a row whose masks are kept: wider planes go in column blocks */

typedef struct {
  __m256i ld[4]; /* stride 1: columns c, c + 1, c + 2; stride 2: loads at c, c + 8, c + 2, c + 10 */
  __m256i st;    /* the vector's columns inside the output row */
  int full;      /* 8 columns, every load inside the input row: plain loads and stores */
} dw_col_masks8;

/* The masks of the vector at output column ow (n of its columns inside the row), stride s, whose first tap
 * reads input column c of a row IW wide. */
UK_INLINE dw_col_masks8 dw_col_masks8_of(int s, int64_t c, int64_t n, int64_t IW) {
  dw_col_masks8 k;
  k.st = ukv_first(n);
  k.full = n == 8 && c >= 0 && c + (s == 1 ? 10 : 18) <= IW;
  for (int q = 0; q < 4; q++) k.ld[q] = dw_cols_in8(c + (s == 1 ? q : (q & 1) * 8 + (q & 2)), IW);
  return k;
}

static void dw_row_masks8(const dw_job* j, int s, int64_t ow0, int nv, dw_col_masks8* k) {
  const dw_edges g = dw_edges_of(j, j->IW);
  for (int v = 0; v < nv; v++) {
    int64_t ow = ow0 + 8 * v;
    k[v] = dw_col_masks8_of(s, s * ow - g.pad_l, MIN(8, j->OW - ow), g.IW);
  }
}

/* 8 floats at row + t; under the lane mask m unless `full` (a constant: two copies of the loop). */
UK_INLINE __m256 dw_load8(const float* row, int t, const int full, __m256i m) {
  return full ? _mm256_loadu_ps(row + t) : _mm256_maskload_ps(row + t, m);
}

/* R output rows (from the plane's row oh) at one vector of output column ow: rows[i] is the pass's input
 * row i (zeros outside the input), c the input column of the first tap, out the output at (oh, ow). */
UK_INLINE void dw3x3_vec8(const int s, const int R, const int kind, const int full, const float* const* rows,
                          int64_t c, const dw_col_masks8* k, float* out, int64_t osh, int64_t oh, int64_t ow,
                          const __m256 w[9], const dw_ep* e) {
  __m256 acc[4];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
    acc[r] = kind == DW_EP_SUMS || (kind == DW_EP_ANY && !e->t.init) ? dw_load8(out + r * osh, 0, full, k->st)
                                                                     : e->start;
#pragma GCC unroll 9
  for (int i = 0; i < s * (R - 1) + 3; i++) {
    const float* row = rows[i] + c;
    __m256 x0, x1, x2;
    if (s == 1) {
      x0 = dw_load8(row, 0, full, k->ld[0]);
      x1 = dw_load8(row, 1, full, k->ld[1]);
      x2 = dw_load8(row, 2, full, k->ld[2]);
    } else {
      __m256 v0 = dw_load8(row, 0, full, k->ld[0]), v1 = dw_load8(row, 8, full, k->ld[1]);
      x0 = even8(v0, v1);
      x1 = odd8(v0, v1);
      x2 = even8(dw_load8(row, 2, full, k->ld[2]), dw_load8(row, 10, full, k->ld[3]));
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
      int kh = i - s * r;
      if (kh < 0 || kh > 2) continue;
      acc[r] = _mm256_fmadd_ps(w[3 * kh], x0, acc[r]);
      acc[r] = _mm256_fmadd_ps(w[3 * kh + 1], x1, acc[r]);
      acc[r] = _mm256_fmadd_ps(w[3 * kh + 2], x2, acc[r]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) {
    __m256 v = acc[r];
    if (kind > DW_EP_SUMS && kind < DW_EP_ANY) {
      v = dw_ep_bounds(kind, e, v);
    } else if (kind == DW_EP_ANY && e->t.finish) {
      if (e->t.bias_after) v = _mm256_add_ps(v, e->bias);
      if (e->t.res) v = _mm256_add_ps(v, dw_load8(e->t.res + (oh + r) * e->t.res_ld + ow, 0, full, k->st));
      v = ep_bounds(&e->t, v, e->lo, e->hi);
    }
    if (full) {
      _mm256_storeu_ps(out + r * osh, v);
    } else {
      _mm256_maskstore_ps(out + r * osh, k->st, v);
    }
  }
}

/* One pass: R output rows from row oh, every vector of the column block [ow0, ow0 + 8 nv). */
UK_INLINE void dw3x3_pass8(const int s, const int R, const int kind, const float* in, int64_t ish,
                           const dw_edges* g, int64_t oh, int64_t ow0, int nv, const dw_col_masks8* k, float* out,
                           int64_t osh, const __m256 w[9], const dw_ep* e) {
  const float* rows[6];
  int64_t r0 = s * oh - g->pad_t;
#pragma GCC unroll 6
  for (int i = 0; i < s * (R - 1) + 3; i++) rows[i] = r0 + i >= 0 && r0 + i < g->IH ? in + (r0 + i) * ish : dw_zero_row;
  for (int v = 0; v < nv; v++) {
    int64_t ow = ow0 + 8 * v;
    float* o = out + oh * osh + ow;
    if (k[v].full) {
      dw3x3_vec8(s, R, kind, 1, rows, s * ow - g->pad_l, &k[v], o, osh, oh, ow, w, e);
    } else {
      dw3x3_vec8(s, R, kind, 0, rows, s * ow - g->pad_l, &k[v], o, osh, oh, ow, w, e);
    }
  }
}

/* 3x3, stride s (1 or 2) in both dims, dilation 1, unit-stride rows. With j->edges_in_kernel, `in` is the
 * unpadded input plane and the padding is read as zeros (no padded copy). row_k: the masks of every vector
 * of a row, when the row is one block (NULL: made here). */
UK_INLINE void dw_plane_3x3_avx2_at(const dw_job* j, const int s, const float* in, const float* f, float* out,
                                    const dw_ep* e, const dw_col_masks8* row_k) {
  __m256 w[9];
  for (int kh = 0; kh < 3; kh++)
    for (int kw = 0; kw < 3; kw++) w[kh * 3 + kw] = _mm256_set1_ps(f[kh * j->fs[1] + kw * j->fs[2]]);
  const dw_edges g = dw_edges_of(j, j->IW);
  int64_t ish = j->is[2], osh = j->os[2];
  const int R = s == 1 ? 4 : 2;
  dw_col_masks8 block_k[DW_BLOCK_VECS8];
  for (int64_t ow0 = 0; ow0 < j->OW; ow0 += 8 * DW_BLOCK_VECS8) {
    int nv = (int)MIN(DW_BLOCK_VECS8, CEIL_DIV(j->OW - ow0, 8));
    const dw_col_masks8* k = row_k && j->OW <= 8 * DW_BLOCK_VECS8 ? row_k : block_k;
    if (k == block_k) dw_row_masks8(j, s, ow0, nv, block_k);
    /* As the AVX-512 kernels: R-row passes per epilogue kind, the rows left over as dw_passes_end says
     * (1-row passes here). */
#define DW3X3_PASS8(RR, KIND) dw3x3_pass8(s, RR, KIND, in, ish, &g, oh, ow0, nv, k, out, osh, w, e)
    int64_t oh = 0, end = dw_passes_end(j->OH, R, e->kind);
    for (; oh + R <= end; oh += R) {
      oh = MIN(oh, j->OH - R);
      switch (e->kind) {
        case DW_EP_SUMS: DW3X3_PASS8(R, DW_EP_SUMS); break;
        case DW_EP_BOUNDS: DW3X3_PASS8(R, DW_EP_BOUNDS); break;
        case DW_EP_BOUNDS + 1: DW3X3_PASS8(R, DW_EP_BOUNDS + 1); break;
        case DW_EP_BOUNDS + 2: DW3X3_PASS8(R, DW_EP_BOUNDS + 2); break;
        case DW_EP_BOUNDS + 3: DW3X3_PASS8(R, DW_EP_BOUNDS + 3); break;
        default: DW3X3_PASS8(R, DW_EP_ANY); break;
      }
    }
    for (; oh < j->OH; oh++) DW3X3_PASS8(1, DW_EP_ANY);
#undef DW3X3_PASS8
  }
}

/* One build of the plane kernel per stride (R is 4 at stride 1, 2 at stride 2: constants in each). */
static void dw_plane_3x3_avx2(const dw_job* j, int s, const float* in, const float* f, float* out, const dw_ep* e,
                              const dw_col_masks8* row_k) {
  if (s == 1) {
    dw_plane_3x3_avx2_at(j, 1, in, f, out, e, row_k);
  } else {
    dw_plane_3x3_avx2_at(j, 2, in, f, out, e, row_k);
  }
}
#endif

/* Plane p = (image n, channel c) of the job: its input, filter and output, and the epilogue over it
 * [oh][ow]: one bias value, the residual's plane. */
static void dw_plane_of(const dw_job* j, int64_t p, const float** in, const float** f, float** out, ep_view* e) {
  int64_t n = p / j->C, c = p % j->C;
  *in = j->in + n * j->is[0] + c * j->is[1];
  *f = j->filter + c * j->fs[0];
  *out = j->out + n * j->os[0] + c * j->os[1];
  memset(e, 0, sizeof(*e));
  if (j->ep) {
    const int64_t* rs = j->ep->res_strides;
    e->ep = j->ep;
    e->bias = j->ep->bias + c * j->ep->bias_stride;
    if (j->ep->mode & ETMLIR_EP_RESIDUAL) {
      e->res = j->ep->res + n * rs[0] + c * rs[1];
      e->res_rs = rs[2];
      e->res_cs = rs[3];
    }
  }
}

/* The epilogue of plane e in a kernel's registers (te) where it fits: NULL when there is none, or it does
 * not fit (*fits 0: it runs in passes over the plane before and after the kernel). */
static const tile_ep* dw_tile_ep(const ep_view* e, tile_ep* te, int* fits) {
  int init = ep_inits(e), finish = ep_finishes(e);
  *fits = !(init || finish) || tile_ep_make(e, 0, 0, init, finish, te);
  return (init || finish) && *fits ? te : NULL;
}

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
/* Planes [p0, p1) of a job the vector kernels (3x3, or AVX-512's flat ones) take with their epilogue in
 * registers: the epilogue's kind and the vectors' masks are made once for all of them, not per plane (at
 * 14x14 and 7x7, that work took longer than a plane's sums). Returns 0, having done nothing, for the
 * other jobs. */
static int dw_planes_fast(const dw_job* j, int64_t p0, int64_t p1) {
  if (p0 >= p1 || j->scratch || !(dw_is_3x3(j) || j->flat)) return 0;
  const float *in, *f;
  float* out;
  ep_view e;
  tile_ep te;
  int fits;
  dw_plane_of(j, p0, &in, &f, &out, &e);
  const tile_ep* tp = dw_tile_ep(&e, &te, &fits);
  if (!fits || (j->flat && !dw_flat_takes(j, tp))) return 0;
  dw_ep d = dw_ep_of(tp);
  int S = (int)j->sw;
#if defined(__AVX512F__)
  dw_col_masks k[DW_BLOCK_VECS];
  int one_block = j->OW <= 16 * DW_BLOCK_VECS;
  if (!j->flat && one_block) dw_row_masks(j, S, 0, (int)CEIL_DIV(j->OW, 16), k);
#else
  dw_col_masks8 k[DW_BLOCK_VECS8];
  int one_block = j->OW <= 8 * DW_BLOCK_VECS8;
  if (one_block) dw_row_masks8(j, S, 0, (int)CEIL_DIV(j->OW, 8), k);
#endif
  for (int64_t p = p0; p < p1; p++) {
    if (p > p0) {
      dw_plane_of(j, p, &in, &f, &out, &e);
      if (tp) {
        dw_tile_ep(&e, &te, &fits);
        dw_ep_rebase(&d, &te);
      }
    }
#if defined(__AVX512F__)
    if (j->flat) {
      dw_plane_flat(j, in, f, out, &d);
    } else {
      dw_plane_3x3(j, S, in, f, out, &d, one_block ? k : NULL);
    }
#else
    dw_plane_3x3_avx2(j, S, in, f, out, &d, one_block ? k : NULL);
#endif
  }
  return 1;
}
#endif

static int dw_plane(const dw_job* j, const float* in, const float* f, float* out, const tile_ep* te);

/* Planes [p0, p1) of the job, in scratch slot `slot` (its padded copies). */
static void dw_planes(const dw_job* j, int64_t p0, int64_t p1, int slot) {
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
  if (dw_planes_fast(j, p0, p1)) return;
#endif
  for (int64_t p = p0; p < p1; p++) {
    const float *in, *f;
    float* out;
    ep_view e;
    tile_ep te;
    int fits;
    dw_plane_of(j, p, &in, &f, &out, &e);
    const tile_ep* fused = dw_tile_ep(&e, &te, &fits);
    dw_job pj = *j;
    if (j->scratch) {
      float* padded = j->scratch + slot * j->slot;
      dw_pad_plane(j, in, padded);
      pj.is[2] = j->PW;
      pj.is[3] = 1;
      pj.IW = j->PW;
      in = padded;
    }
    if (fused && dw_plane(&pj, in, f, out, fused)) continue;
    ep_init(&e, out, j->os[2], j->os[3], 0, j->OH, 0, j->OW);
    dw_plane(&pj, in, f, out, NULL);
    ep_finish(&e, out, j->os[2], j->os[3], 0, j->OH, 0, j->OW);
  }
}

static void dw_job_body(void* arg, int64_t t, int slot) {
  const dw_job* j = (const dw_job*)arg;
  int64_t p0, p1;
  split_range(j->planes, j->tasks, 1, t, &p0, &p1);
  dw_planes(j, p0, p1, slot);
}

/* One (image, channel) plane: the 3x3 fast paths where they apply, else the generic loop. With te (the
 * plane's epilogue in registers), only a kernel that applies it runs: returns 0 when none did. */
static int dw_plane(const dw_job* j, const float* in, const float* f, float* out, const tile_ep* te) {
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
  const dw_ep e = dw_ep_of(te);
#endif
#if defined(__AVX512F__)
  if (dw_flat_takes(j, te)) {
    dw_plane_flat(j, in, f, out, &e);
    return 1;
  }
#endif
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
  if (dw_is_3x3(j)) {
#if defined(__AVX512F__)
    dw_plane_3x3(j, (int)j->sw, in, f, out, &e, NULL);
#else
    dw_plane_3x3_avx2(j, (int)j->sw, in, f, out, &e, NULL);
#endif
    return 1;
  }
#endif
  if (te) return 0;
#if defined(UK_VEC)
  if (dw_rows_takes(j)) {
    dw_plane_rows(j, in, f, out);
    return 1;
  }
#endif
  dw_plane_generic(j, in, f, out);
  return 1;
}

ETMLIR_CPU_EXPORT void _mlir_ciface_etmlir_uk_depthwise_conv2d_nchw_chw(etmlir_memref4d_f32* in,
                                                                        etmlir_memref3d_f32* filter,
                                                                        etmlir_memref4d_f32* out, int64_t stride_h,
                                                                        int64_t stride_w, int64_t dilation_h,
                                                                        int64_t dilation_w) {
  _mlir_ciface_etmlir_uk_depthwise_conv2d_nchw_chw_ep(in, filter, out, stride_h, stride_w, dilation_h, dilation_w,
                                                      NULL);
}

/* The job of a depthwise convolution, but for its tasks and the scratch of its padded copies (with
 * j->scratch NULL, a caller that needs them, j->PH > 0 and !j->edges_in_kernel, allocates j->slot floats
 * per task slot). flat: room for DW_FLAT_MAX_VECS * 9 lane masks, which j may point at. Returns 0 when
 * there is nothing to compute. */
static int dw_job_make(dw_job* j, const etmlir_memref4d_f32* in, const etmlir_memref3d_f32* filter,
                       const etmlir_memref4d_f32* out, int64_t stride_h, int64_t stride_w, int64_t dilation_h,
                       int64_t dilation_w, const etmlir_epilogue* ep, uint16_t* flat) {
  memset(j, 0, sizeof(*j));
  j->in = in->aligned + in->offset;
  j->filter = filter->aligned + filter->offset;
  j->out = out->aligned + out->offset;
  j->C = out->sizes[1];
  j->OH = out->sizes[2];
  j->OW = out->sizes[3];
  j->KH = filter->sizes[1];
  j->KW = filter->sizes[2];
  j->IW = in->sizes[3];
  for (int i = 0; i < 4; i++) j->is[i] = in->strides[i];
  for (int i = 0; i < 3; i++) j->fs[i] = filter->strides[i];
  for (int i = 0; i < 4; i++) j->os[i] = out->strides[i];
  j->sh = stride_h;
  j->sw = stride_w;
  j->dh = dilation_h;
  j->dw = dilation_w;
  j->ep = ep;
  j->planes = out->sizes[0] * j->C;
  j->tasks = 1;
  if (j->planes <= 0 || j->OH <= 0 || j->OW <= 0) return 0;
  /* The rows and columns the windows read; more than the input's (after the top and left padding) means
   * padding at the bottom or right, which needs the padded copy even when top and left are 0 (TF "same"
   * padding at stride 1 pads only there). */
  int64_t reach_h = (j->OH - 1) * j->sh + (j->KH - 1) * j->dh + 1,
          reach_w = (j->OW - 1) * j->sw + (j->KW - 1) * j->dw + 1;
  if (ep && (ep->pad_top || ep->pad_left || reach_h > ep->pad_top + in->sizes[2] ||
             reach_w > ep->pad_left + in->sizes[3])) {
    j->IH = in->sizes[2];
    j->in_w = in->sizes[3];
    j->pad_t = ep->pad_top;
    j->pad_l = ep->pad_left;
    j->PH = reach_h;
    j->PW = reach_w;
    j->slot = CEIL_DIV(j->PH * j->PW, 16) * 16;
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
    /* MobileNetV2 spent 5% of its time copying planes into padded ones for these; reading the input
     * in the kernel made it 6-9% faster at 1 thread, 11-12% at 2 (AVX-512), 16-18% and 15-17% with
     * the AVX2 kernels (whose last OW % 8 columns, all of a 7x7 plane's, were scalar before). */
    j->edges_in_kernel = dw_is_3x3(j) && j->in_w <= DW_ZERO_FLOATS;
#endif
  }
#if defined(__AVX512F__)
  if (dw_flat_fits(j)) {
    dw_flat_masks(j, flat);
    j->flat = flat;
  }
#else
  (void)flat;
#endif
  return 1;
}

/* Scratch for j's padded copies, `tasks` tasks (none when its kernels read the input's edges). */
static void dw_job_scratch(dw_job* j) {
  if (j->PH && !j->edges_in_kernel)
    j->scratch = (float*)etmlir_cpu_scratch_alloc(sizeof(float) * (size_t)(j->slot * etmlir_cpu_task_slots(j->tasks)));
}

ETMLIR_CPU_EXPORT void _mlir_ciface_etmlir_uk_depthwise_conv2d_nchw_chw_ep(
    etmlir_memref4d_f32* in, etmlir_memref3d_f32* filter, etmlir_memref4d_f32* out, int64_t stride_h,
    int64_t stride_w, int64_t dilation_h, int64_t dilation_w, const etmlir_epilogue* ep) {
  dw_job j;
  uint16_t flat[DW_FLAT_MAX_VECS * 9];
  if (!dw_job_make(&j, in, filter, out, stride_h, stride_w, dilation_h, dilation_w, ep, flat)) return;
  int nt = etmlir_cpu_num_threads();
  double taps = (double)j.planes * (double)(j.OH * j.OW * j.KH * j.KW);
  j.tasks = nt > 1 && taps >= PAR_MIN_TAPS
                ? MIN(j.planes, MAX(nt, MIN(TASKS_PER_THREAD * nt, (int64_t)(taps / TASK_MIN_TAPS))))
                : 1;
  dw_job_scratch(&j);
  etmlir_cpu_parallel_tasks(j.tasks, dw_job_body, &j);
  if (j.scratch) etmlir_cpu_scratch_free(j.scratch);
}

/* ------------------------------------------------------------------------------------------ */
/* Inverted residual: expand (1x1), depthwise, project (1x1) over bands of output rows         */
/* ------------------------------------------------------------------------------------------ */

/* MobileNetV2's blocks at 112x112 and 56x56 expand 16 or 24 channels to 96 or 144: 1.8 to 4.8 MB that
 * the depthwise convolution reads back and writes again for the projection, each pass from memory
 * (the core's L2 is 1-2 MB). Over bands of a few output rows, the band's expanded rows and its depthwise
 * output stay in L2 between the three steps; a band keeps the expanded rows the next one shares with it
 * (the window's overlap), so nothing is computed twice except at the start of each task's run of
 * bands. */
enum {
  /* Smaller expanded tensors stay in L2 anyway: the three steps run one after the other, each split
   * over the threads itself (a band split gives a 14x14 block too few bands per thread). */
  IR_MIN_BYTES = 1 << 20,
  /* A band's expanded rows and depthwise output together, beside the expansion's packed B block. */
  IR_BAND_BYTES = 512 << 10,
  /* Runs per thread: each an equal share of the output rows in bands, a task claimed at run time; each
   * run expands the rows its first band shares with the run before once more. */
  IR_RUNS_PER_THREAD = 2,
};

typedef struct {
  const float* in;
  int64_t is[4];
  const float *p1, *dwf, *p2; /* expansion and projection panels (native), depthwise filter [C, KH, KW] */
  int64_t fs[3];
  const etmlir_epilogue *e1, *e2, *e3;
  float* out;
  int64_t os[4];
  int64_t Cin, Cx, Cout, H, W, OH, OW, KH, KW, sh, sw, pad_t, pad_l;
  int64_t R;    /* output rows per band */
  int64_t cap;  /* expanded rows a band holds: sh (R - 1) + KH */
  int64_t runs; /* tasks per image, each a contiguous run of bands */
  int edges_in_kernel;
  int64_t e_floats, d_floats, pad_floats, slot_floats;
  float* scratch;
} ir_job;

/* One of the block's 1x1 convolutions on one thread: rows [m0, m1) of c[M, N] (row stride rsc) = panels
 * [M, K] (lda floats from one panel to the next; 0: K * UK_MR) times b[K, N] (row stride b_rs), under the
 * epilogue e. */
static void ir_pointwise_rows(const float* panels, int64_t M, int64_t K, int64_t lda, int64_t m0, int64_t m1,
                              const float* b, int64_t b_rs, int64_t N, float* c, int64_t rsc, ep_view e,
                              float* gemm_scratch) {
  gemm_problem g;
  memset(&g, 0, sizeof(g));
  g.M = M;
  g.N = N;
  g.K = K;
  g.a = view2(panels, K, 1);
  g.a_packed = panels;
  g.a_ld = lda;
  g.b.m = view2(b, b_rs, 1);
  g.c = c;
  g.rsc = rsc;
  g.csc = 1;
  g.e = e;
  blocking bl = choose_blocking(&g);
  gemm_range(&g, &bl, m0, m1, 0, N, gemm_scratch);
}

static void ir_pointwise(const float* panels, int64_t M, int64_t K, const float* b, int64_t b_rs, int64_t N,
                         float* c, int64_t rsc, ep_view e, float* gemm_scratch) {
  ir_pointwise_rows(panels, M, K, 0, 0, M, b, b_rs, N, c, rsc, e, gemm_scratch);
}

/* The GEMM scratch, in floats, one task's ir_pointwise_rows over an [M, N] product with K terms (B rows b_rs
 * apart) packs into. */
static int64_t ir_pointwise_floats(const float* panels, int64_t M, int64_t N, int64_t K, int64_t b_rs) {
  gemm_problem g;
  memset(&g, 0, sizeof(g));
  g.M = M;
  g.N = N;
  g.K = K;
  g.a_packed = panels;
  g.b.m = view2(panels, b_rs, 1);
  blocking bl = choose_blocking(&g);
  return bl.a_floats + bl.b_floats;
}

static void ir_body(void* arg, int64_t t, int slot) {
  const ir_job* j = (const ir_job*)arg;
  int64_t n = t / j->runs, r0, r1; /* the run's output rows, in bands of at most R */
  split_range(j->OH, j->runs, 1, t % j->runs, &r0, &r1);
  float* e = j->scratch + slot * j->slot_floats; /* expanded rows [held0, held1), channel c at c * cap * W */
  float* d = e + j->e_floats;                    /* the band's depthwise output [Cx][R][OW] */
  float* padded = d + j->d_floats;               /* a padded plane (depthwise kernels without edges) */
  float* gemm_scratch = padded + j->pad_floats;
  int64_t held0 = 0, held1 = 0, plane = j->cap * j->W;
  int64_t rows = r1 > r0 ? CEIL_DIV(r1 - r0, CEIL_DIV(r1 - r0, j->R)) : 1; /* bands of equal height */
  for (int64_t o0 = r0; o0 < r1; o0 += rows) {
    int64_t o1 = MIN(r1, o0 + rows), top = o0 * j->sh - j->pad_t;
    /* Input rows the band's windows read, inside the image (the rest is padding). */
    int64_t i0 = MIN(j->H, MAX(0, top)), i1 = MIN(j->H, MAX(i0, (o1 - 1) * j->sh - j->pad_t + j->KH));
    int64_t have = i0;
    if (held1 > i0 && held0 <= i0) { /* rows the last band expanded: moved to the front */
      if (i0 > held0)
        for (int64_t c = 0; c < j->Cx; c++)
          memmove(e + c * plane, e + c * plane + (i0 - held0) * j->W, sizeof(float) * (size_t)((held1 - i0) * j->W));
      have = held1;
    }
    if (i1 > have) /* expanded rows [have, i1) */
      ir_pointwise(j->p1, j->Cx, j->Cin, j->in + n * j->is[0] + have * j->is[2], j->is[1], (i1 - have) * j->W,
                   e + (have - i0) * j->W, plane, conv_row_epilogue(j->e1, n, 0), gemm_scratch);
    held0 = i0;
    held1 = i1;

    dw_job dj;
    memset(&dj, 0, sizeof(dj));
    dj.in = e;
    dj.filter = j->dwf;
    dj.out = d;
    dj.C = j->Cx;
    dj.OH = o1 - o0;
    dj.OW = j->OW;
    dj.KH = j->KH;
    dj.KW = j->KW;
    dj.IW = j->W;
    dj.is[1] = plane;
    dj.is[2] = j->W;
    dj.is[3] = 1;
    for (int i = 0; i < 3; i++) dj.fs[i] = j->fs[i];
    dj.os[1] = j->R * j->OW;
    dj.os[2] = j->OW;
    dj.os[3] = 1;
    dj.sh = j->sh;
    dj.sw = j->sw;
    dj.dh = dj.dw = 1;
    dj.tasks = 1;
    dj.planes = j->Cx;
    dj.ep = j->e2;
    dj.IH = i1 - i0;
    dj.in_w = j->W;
    dj.pad_t = i0 - top;
    dj.pad_l = j->pad_l;
    dj.PH = (dj.OH - 1) * j->sh + j->KH;
    dj.PW = (j->OW - 1) * j->sw + j->KW;
    dj.edges_in_kernel = j->edges_in_kernel;
    dj.scratch = j->edges_in_kernel ? NULL : padded;
    dw_job_body(&dj, 0, 0);

    ir_pointwise(j->p2, j->Cout, j->Cx, d, j->R * j->OW, (o1 - o0) * j->OW, j->out + n * j->os[0] + o0 * j->OW,
                 j->os[1], conv_row_epilogue(j->e3, n, o0), gemm_scratch);
  }
}

/* Operands the banded kernel and the channel split read directly: the panels et-cpu-pack-weights made, and
 * input, output and residual whose rows are dense (each plane one run of H x W floats). */
static int ir_dense(const etmlir_memref4d_f32* in, const etmlir_memref3d_f32* p1, int64_t Cx,
                    const etmlir_memref3d_f32* p2, const etmlir_memref4d_f32* out, const etmlir_epilogue* e3) {
  const int64_t* rs = e3 ? e3->res_strides : NULL;
  int64_t W = in->sizes[3], OW = out->sizes[3];
  return native_panels(p1, in->sizes[1]) && native_panels(p2, Cx) && in->strides[3] == 1 && in->strides[2] == W &&
         out->strides[3] == 1 && out->strides[2] == OW &&
         (!e3 || !(e3->mode & ETMLIR_EP_RESIDUAL) || rs[2] == OW * rs[3]);
}

/* An epilogue for an intermediate the block owns: it sets the whole tensor (no residual, and an init
 * that does not read the tensor's old value, which only the unfused path could give). */
static int ir_sets_all(const etmlir_epilogue* ep) {
  return ep && !(ep->mode & ETMLIR_EP_RESIDUAL) && (ep->mode & ETMLIR_EP_INIT_MASK) != ETMLIR_EP_INIT_OUTPUT;
}

/* Small blocks (wide activations below IR_MIN_BYTES: MobileNetV2's 28x28 to 7x7 ones) with threads. The
 * three kernels in turn each split their work among the threads their own way, so the wide tensors cross
 * between the cores' caches twice per block: MobileNetV2's 14x14 and 28x28 blocks ran 1.45 to 1.7 times
 * faster at 2 threads than at 1. Here task t takes whole UK_MR panels [c0, c1) of the wide channels: it
 * expands them, runs their depthwise planes and multiplies them into a partial projection over those
 * channels, its share of the projection's K. Task 0's partial is the output (with the projection's init),
 * the others' go to scratch; a second job adds those in and finishes the output. What crosses the cores
 * is the partials (Cout x OH x OW floats a task), not the wide tensors. */
typedef struct {
  const float* in;
  int64_t is[4];
  const float *p1, *p2;
  const etmlir_epilogue* e1;
  etmlir_epilogue init3, zero, finish3; /* the projection's init alone, zero, its finish alone */
  dw_job dj;                            /* the depthwise convolution of x into y */
  float *x, *y, *out, *part;            /* part: the partials of tasks 1.., each nb x Cout x OHW */
  int64_t os[4];
  int64_t nb, Cin, Cx, Cout, HW, OHW, tasks, slot_floats;
  float* scratch; /* GEMM scratch per slot */
} ir_split_job;

static void ir_split_body(void* arg, int64_t t, int slot) {
  const ir_split_job* j = (const ir_split_job*)arg;
  int64_t pa, pb;
  split_range(CEIL_DIV(j->Cx, UK_MR), j->tasks, 1, t, &pa, &pb);
  int64_t c0 = pa * UK_MR, c1 = MIN(j->Cx, pb * UK_MR);
  float* gs = j->scratch + slot * j->slot_floats;
  for (int64_t n = 0; n < j->nb; n++) {
    float* x = j->x + n * j->Cx * j->HW;
    float* y = j->y + n * j->Cx * j->OHW;
    ir_pointwise_rows(j->p1, j->Cx, j->Cin, 0, c0, c1, j->in + n * j->is[0], j->is[1], j->HW, x, j->HW,
                      conv_row_epilogue(j->e1, n, 0), gs);
    dw_planes(&j->dj, n * j->Cx + c0, n * j->Cx + c1, slot);
    float* c = t == 0 ? j->out + n * j->os[0] : j->part + ((t - 1) * j->nb + n) * j->Cout * j->OHW;
    ir_pointwise_rows(j->p2 + c0 * UK_MR, j->Cout, c1 - c0, UK_MR * j->Cx, 0, j->Cout, y + c0 * j->OHW, j->OHW,
                      j->OHW, c, t == 0 ? j->os[1] : j->OHW, conv_row_epilogue(t == 0 ? &j->init3 : &j->zero, n, 0),
                      gs);
  }
}

/* Output rows (image, channel) of task t's share: the partials added, then the projection's finish. */
static void ir_split_reduce(void* arg, int64_t t, int slot) {
  const ir_split_job* j = (const ir_split_job*)arg;
  int64_t r0, r1;
  (void)slot;
  split_range(j->nb * j->Cout, j->tasks, 1, t, &r0, &r1);
  for (int64_t r = r0; r < r1; r++) {
    int64_t n = r / j->Cout, f = r % j->Cout;
    float* restrict o = j->out + n * j->os[0] + f * j->os[1];
    for (int64_t s = 1; s < j->tasks; s++) {
      const float* restrict q = j->part + ((s - 1) * j->nb + n) * j->Cout * j->OHW + f * j->OHW;
      for (int64_t i = 0; i < j->OHW; i++) o[i] += q[i];
    }
    ep_view e = conv_row_epilogue(&j->finish3, n, 0);
    if (ep_finishes(&e)) ep_finish(&e, j->out + n * j->os[0], j->os[1], 1, f, 1, 0, j->OHW);
  }
}

/* The floats [p, p + extent) of a dense tensor view overlap [q, q + extent_q). */
static int ir_overlaps(const float* p, int64_t extent, const float* q, int64_t extent_q) {
  return p < q + extent_q && q < p + extent;
}

/* The split above, for a block ir_dense takes, x and y its wide tensors (dense scratch, zeroed where their
 * epilogues do not set them), when it applies: threads, a panel or more per task, and an output that
 * neither the input nor the residual shares. Returns 0, having done nothing, otherwise. */
static int ir_split(etmlir_memref4d_f32* in, etmlir_memref3d_f32* p1, const etmlir_epilogue* e1,
                    etmlir_memref4d_f32* x, etmlir_memref3d_f32* dwf, int64_t stride_h, int64_t stride_w,
                    const etmlir_epilogue* e2, etmlir_memref4d_f32* y, etmlir_memref3d_f32* p2,
                    etmlir_memref4d_f32* out, const etmlir_epilogue* e3) {
  int nt = etmlir_cpu_num_threads();
  int64_t nb = out->sizes[0], Cin = in->sizes[1], H = in->sizes[2], W = in->sizes[3];
  int64_t Cx = dwf->sizes[0], Cout = out->sizes[1], OH = out->sizes[2], OW = out->sizes[3];
  const int64_t* rs = e3 ? e3->res_strides : NULL;
  int residual = e3 && (e3->mode & ETMLIR_EP_RESIDUAL);
  /* Tasks: one per thread, at most one per panel. (The arena is measured at more threads than a run has:
   * with fewer threads this path takes less scratch, never more; it runs whenever there are two.) */
  int64_t tasks = MIN(nt, CEIL_DIV(Cx, UK_MR));
  if (tasks < 2) return 0;
  const float* ip = in->aligned + in->offset;
  float* op = out->aligned + out->offset;
  int64_t in_extent = (nb - 1) * in->strides[0] + (Cin - 1) * in->strides[1] + H * W;
  int64_t out_extent = (nb - 1) * out->strides[0] + (Cout - 1) * out->strides[1] + OH * OW;
  int64_t res_extent = residual ? (nb - 1) * rs[0] + (Cout - 1) * rs[1] + (OH - 1) * rs[2] + (OW - 1) * rs[3] + 1 : 0;
  if (ir_overlaps(ip, in_extent, op, out_extent) || (residual && ir_overlaps(e3->res, res_extent, op, out_extent)))
    return 0;
  ir_split_job j;
  memset(&j, 0, sizeof(j));
  j.in = ip;
  for (int i = 0; i < 4; i++) j.is[i] = in->strides[i];
  for (int i = 0; i < 4; i++) j.os[i] = out->strides[i];
  j.p1 = p1->aligned + p1->offset;
  j.p2 = p2->aligned + p2->offset;
  j.e1 = e1;
  if (e3) {
    j.init3 = *e3;
    j.finish3 = *e3;
  }
  j.init3.mode &= ETMLIR_EP_INIT_MASK;
  j.finish3.mode &= ~(int64_t)ETMLIR_EP_INIT_MASK;
  j.zero.mode = ETMLIR_EP_INIT_ZERO;
  j.out = op;
  j.nb = nb;
  j.Cin = Cin;
  j.Cx = Cx;
  j.Cout = Cout;
  j.HW = H * W;
  j.OHW = OH * OW;
  j.tasks = tasks;
  j.x = x->aligned;
  j.y = y->aligned;
  j.part = (float*)etmlir_cpu_scratch_alloc(sizeof(float) * (size_t)((tasks - 1) * nb * Cout * OH * OW));
  uint16_t flat[DW_FLAT_MAX_VECS * 9];
  dw_job_make(&j.dj, x, dwf, y, stride_h, stride_w, 1, 1, e2, flat);
  j.dj.tasks = tasks;
  dw_job_scratch(&j.dj);
  /* GEMM scratch for the larger of the two products (the projection over one task's share of K). */
  j.slot_floats = CEIL_DIV(MAX(ir_pointwise_floats(j.p1, Cx, H * W, Cin, j.is[1]),
                               ir_pointwise_floats(j.p2, Cout, OH * OW, CEIL_DIV(CEIL_DIV(Cx, UK_MR), tasks) * UK_MR,
                                                   OH * OW)),
                           16) * 16;
  j.scratch =
      (float*)etmlir_cpu_scratch_alloc(sizeof(float) * (size_t)MAX(1, j.slot_floats * etmlir_cpu_task_slots(tasks)));
  etmlir_cpu_parallel_tasks(tasks, ir_split_body, &j);
  etmlir_cpu_parallel_tasks(tasks, ir_split_reduce, &j);
  etmlir_cpu_scratch_free(j.scratch);
  if (j.dj.scratch) etmlir_cpu_scratch_free(j.dj.scratch);
  etmlir_cpu_scratch_free(j.part);
  return 1;
}

ETMLIR_CPU_EXPORT void _mlir_ciface_etmlir_uk_inverted_residual_ep(
    etmlir_memref4d_f32* in, etmlir_memref3d_f32* p1, const etmlir_epilogue* e1, etmlir_memref3d_f32* dwf,
    int64_t stride_h, int64_t stride_w, const etmlir_epilogue* e2, etmlir_memref3d_f32* p2, etmlir_memref4d_f32* out,
    const etmlir_epilogue* e3) {
  int64_t nb = out->sizes[0], Cin = in->sizes[1], H = in->sizes[2], W = in->sizes[3];
  int64_t Cx = dwf->sizes[0], KH = dwf->sizes[1], KW = dwf->sizes[2], Cout = out->sizes[1];
  int64_t OH = out->sizes[2], OW = out->sizes[3];
  if (nb <= 0 || Cout <= 0 || OH <= 0 || OW <= 0) return;
  int dense = ir_dense(in, p1, Cx, p2, out, e3);
  int fused = (double)Cx * (double)H * (double)W * sizeof(float) >= IR_MIN_BYTES && ir_sets_all(e1) &&
              ir_sets_all(e2) && dense;
  if (!fused) {
    /* Whole tensors of scratch: split over the wide channels, or the three kernels in turn. */
    float* x = (float*)etmlir_cpu_scratch_alloc(sizeof(float) * (size_t)(nb * Cx * H * W));
    float* y = (float*)etmlir_cpu_scratch_alloc(sizeof(float) * (size_t)(nb * Cx * OH * OW));
    if (!ir_sets_all(e1)) memset(x, 0, sizeof(float) * (size_t)(nb * Cx * H * W));
    if (!ir_sets_all(e2)) memset(y, 0, sizeof(float) * (size_t)(nb * Cx * OH * OW));
    etmlir_memref4d_f32 xm = {x, x, 0, {nb, Cx, H, W}, {Cx * H * W, H * W, W, 1}};
    etmlir_memref4d_f32 ym = {y, y, 0, {nb, Cx, OH, OW}, {Cx * OH * OW, OH * OW, OW, 1}};
    if (!dense || !ir_split(in, p1, e1, &xm, dwf, stride_h, stride_w, e2, &ym, p2, out, e3)) {
      _mlir_ciface_etmlir_uk_conv2d_packed_ep(in, p1, &xm, 1, 1, 1, 1, 1, 1, e1);
      _mlir_ciface_etmlir_uk_depthwise_conv2d_nchw_chw_ep(&xm, dwf, &ym, stride_h, stride_w, 1, 1, e2);
      _mlir_ciface_etmlir_uk_conv2d_packed_ep(&ym, p2, out, 1, 1, 1, 1, 1, 1, e3);
    }
    etmlir_cpu_scratch_free(y);
    etmlir_cpu_scratch_free(x);
    return;
  }
  ir_job j;
  memset(&j, 0, sizeof(j));
  j.in = in->aligned + in->offset;
  j.p1 = p1->aligned + p1->offset;
  j.dwf = dwf->aligned + dwf->offset;
  j.p2 = p2->aligned + p2->offset;
  j.out = out->aligned + out->offset;
  for (int i = 0; i < 4; i++) j.is[i] = in->strides[i];
  for (int i = 0; i < 4; i++) j.os[i] = out->strides[i];
  for (int i = 0; i < 3; i++) j.fs[i] = dwf->strides[i];
  j.e1 = e1;
  j.e2 = e2;
  j.e3 = e3;
  j.Cin = Cin;
  j.Cx = Cx;
  j.Cout = Cout;
  j.H = H;
  j.W = W;
  j.OH = OH;
  j.OW = OW;
  j.KH = KH;
  j.KW = KW;
  j.sh = stride_h;
  j.sw = stride_w;
  j.pad_t = e2->pad_top;
  j.pad_l = e2->pad_left;
  /* The most rows whose expanded input and depthwise output fit the band budget (at least one). */
  int64_t row_floats = Cx * (stride_h * W + OW);
  j.R = MAX(1, MIN(OH, ((int64_t)IR_BAND_BYTES / 4 - Cx * (KH - stride_h) * W) / MAX(1, row_floats)));
  int nt = etmlir_cpu_num_threads();
  j.runs = nt > 1 ? MIN(OH, (int64_t)IR_RUNS_PER_THREAD * nt) : 1; /* equal shares of the rows */
  j.cap = stride_h * (j.R - 1) + KH;
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
  j.edges_in_kernel =
      KH == 3 && KW == 3 && stride_h == stride_w && (stride_w == 1 || stride_w == 2) && W <= DW_ZERO_FLOATS;
#endif
  j.e_floats = CEIL_DIV(Cx * j.cap * W, 16) * 16;
  j.d_floats = CEIL_DIV(Cx * j.R * OW, 16) * 16;
  j.pad_floats = j.edges_in_kernel ? 0 : CEIL_DIV(j.cap * ((OW - 1) * stride_w + KW), 16) * 16;
  /* GEMM scratch for the largest band of each product (the expansion's first band has the most rows). */
  j.slot_floats = j.e_floats + j.d_floats + j.pad_floats +
                  CEIL_DIV(MAX(ir_pointwise_floats(j.p1, Cx, j.cap * W, Cin, j.is[1]),
                               ir_pointwise_floats(j.p2, Cout, j.R * OW, Cx, j.R * OW)),
                           16) * 16;
  int64_t tasks = nb * j.runs;
  j.scratch = (float*)etmlir_cpu_scratch_alloc(sizeof(float) * (size_t)(j.slot_floats * etmlir_cpu_task_slots(tasks)));
  etmlir_cpu_parallel_tasks(tasks, ir_body, &j);
  etmlir_cpu_scratch_free(j.scratch);
}

/* ------------------------------------------------------------------------------------------ */
/* Max pooling: one (image, channel) plane at a time                                          */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
  const float* in;
  float* out;
  int64_t C, IH, IW, OH, OW, KH, KW, sh, sw, dh, dw, pad_t, pad_l;
  int64_t is[4], os[4];
  int64_t planes, tasks;
} pool_job;

/* max(m, v) as eager's max pooling takes it: a NaN wins. */
UK_INLINE float pool_max(float m, float v) { return v > m || v != v ? v : m; }

#if defined(__AVX512F__)
/* pool_max on vectors. */
UK_INLINE __m512 pool_maxv(__m512 m, __m512 v) {
  return _mm512_mask_mov_ps(_mm512_max_ps(v, m), _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), v);
}

/* Window tap of `len` <= 16 outputs at stride sw (1, or 2: the even floats of two loads that stop at
 * the last float the windows read). */
UK_INLINE __m512 pool_tap(const float* p, int64_t sw, int64_t len) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  if (sw == 1) return _mm512_maskz_loadu_ps(mask16(len), p);
  uint32_t bits = (uint32_t)((1ull << (2 * len - 1)) - 1);
  return _mm512_permutex2var_ps(_mm512_maskz_loadu_ps((__mmask16)bits, p), even,
                                _mm512_maskz_loadu_ps((__mmask16)(bits >> 16), p + 16));
}
#elif defined(__AVX2__) && defined(__FMA__)
UK_INLINE __m256 pool_maxv(__m256 m, __m256 v) {
  return _mm256_blendv_ps(_mm256_max_ps(v, m), v, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
}

/* The same, `len` <= 8 outputs (stride 2: the shuffle's 64-bit pairs put back in lane order). */
UK_INLINE __m256 pool_tap(const float* p, int64_t sw, int64_t len) {
  if (sw == 1) return _mm256_maskload_ps(p, ukv_first(len));
  __m256 e = _mm256_shuffle_ps(_mm256_maskload_ps(p, ukv_first(2 * len - 1)),
                               _mm256_maskload_ps(p + 8, ukv_first(2 * len - 9)), 0x88);
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), 0xD8));
}
#endif

#if defined(UK_VEC)
/* pool_rows for unit dilation along the row and stride 1 or 2, UK_VEC outputs a vector. */
static void pool_rows_vec(const float* r, int64_t rs, int64_t rows, float* o, int64_t n, int64_t sw, int64_t kw) {
  for (int64_t x = 0; x < n; x += UK_VEC) {
    int64_t len = MIN(UK_VEC, n - x);
    ukv_lanes keep = ukv_first(len);
    ukv m = ukv_load_first(o + x, keep);
    for (int64_t i = 0; i < rows; i++)
      for (int64_t k = 0; k < kw; k++) m = pool_maxv(m, pool_tap(r + i * rs + x * sw + k, sw, len));
    ukv_store_first(o + x, keep, m);
  }
}
#endif

/* o[x] = max(o[x], r[i rs + x sw + k dw] for i < rows, k < kw, in that order), x < n (unit strides). */
static void pool_rows(const float* r, int64_t rs, int64_t rows, float* o, int64_t n, int64_t sw, int64_t kw,
                      int64_t dw) {
#if defined(UK_VEC)
  if (dw == 1 && (sw == 1 || sw == 2)) {
    pool_rows_vec(r, rs, rows, o, n, sw, kw);
    return;
  }
#endif
  for (int64_t x = 0; x < n; x++) {
    float m = o[x];
    for (int64_t i = 0; i < rows; i++)
      for (int64_t k = 0; k < kw; k++) m = pool_max(m, r[i * rs + x * sw + k * dw]);
    o[x] = m;
  }
}

static void pool_plane(const pool_job* j, const float* in, float* out) {
  const int64_t* is = j->is;
  const int64_t* os = j->os;
  /* Output columns [lo, hi) read only columns inside the input: ow sw - pad_l >= 0 and
   * ow sw - pad_l + (KW - 1) dw < IW; the vector path takes them (unit column strides). */
  int unit = is[3] == 1 && os[3] == 1;
  int64_t lo = unit ? MIN(j->OW, CEIL_DIV(j->pad_l, j->sw)) : j->OW;
  int64_t last = j->IW - 1 - (j->KW - 1) * j->dw + j->pad_l; /* the largest ow sw allowed */
  int64_t hi = last < 0 ? lo : MAX(lo, MIN(j->OW, last / j->sw + 1));
  for (int64_t oh = 0; oh < j->OH; oh++) {
    float* o = out + oh * os[2];
    /* The window rows inside the input: i in [i0, i1). */
    int64_t top = oh * j->sh - j->pad_t, i0 = 0, i1 = j->KH;
    while (i0 < i1 && top + i0 * j->dh < 0) i0++;
    while (i1 > i0 && top + (i1 - 1) * j->dh >= j->IH) i1--;
    for (int64_t ow = 0; ow < j->OW; ow++) {
      if (ow == lo) ow = hi;
      if (ow >= j->OW) break;
      float m = o[ow * os[3]];
      for (int64_t i = i0; i < i1; i++)
        for (int64_t k = 0; k < j->KW; k++) {
          int64_t ix = ow * j->sw + k * j->dw - j->pad_l;
          if (ix >= 0 && ix < j->IW) m = pool_max(m, in[(top + i * j->dh) * is[2] + ix * is[3]]);
        }
      o[ow * os[3]] = m;
    }
    if (hi > lo && i1 > i0)
      pool_rows(in + (top + i0 * j->dh) * is[2] + lo * j->sw - j->pad_l, j->dh * is[2], i1 - i0, o + lo, hi - lo,
                j->sw, j->KW, j->dw);
  }
}

static void pool_job_body(void* arg, int64_t t, int slot) {
  const pool_job* j = (const pool_job*)arg;
  (void)slot;
  int64_t p0, p1;
  split_range(j->planes, j->tasks, 1, t, &p0, &p1);
  for (int64_t p = p0; p < p1; p++) {
    int64_t n = p / j->C, c = p % j->C;
    pool_plane(j, j->in + n * j->is[0] + c * j->is[1], j->out + n * j->os[0] + c * j->os[1]);
  }
}

ETMLIR_CPU_EXPORT void _mlir_ciface_etmlir_uk_max_pool2d(etmlir_memref4d_f32* in, etmlir_memref4d_f32* out,
                                                         int64_t kh, int64_t kw, int64_t stride_h, int64_t stride_w,
                                                         int64_t dilation_h, int64_t dilation_w, int64_t pad_top,
                                                         int64_t pad_left) {
  pool_job j;
  memset(&j, 0, sizeof(j));
  j.in = in->aligned + in->offset;
  j.out = out->aligned + out->offset;
  for (int i = 0; i < 4; i++) {
    j.is[i] = in->strides[i];
    j.os[i] = out->strides[i];
  }
  j.C = out->sizes[1];
  j.IH = in->sizes[2];
  j.IW = in->sizes[3];
  j.OH = out->sizes[2];
  j.OW = out->sizes[3];
  j.KH = kh;
  j.KW = kw;
  j.sh = stride_h;
  j.sw = stride_w;
  j.dh = dilation_h;
  j.dw = dilation_w;
  j.pad_t = pad_top;
  j.pad_l = pad_left;
  j.planes = out->sizes[0] * j.C;
  if (j.planes <= 0 || j.OH <= 0 || j.OW <= 0 || kh <= 0 || kw <= 0 || stride_h <= 0 || stride_w <= 0 ||
      dilation_h <= 0 || dilation_w <= 0)
    return;
  int nt = etmlir_cpu_num_threads();
  double taps = (double)j.planes * (double)(j.OH * j.OW * kh * kw);
  j.tasks = nt > 1 && taps >= PAR_MIN_TAPS
                ? MIN(j.planes, MAX(nt, MIN(TASKS_PER_THREAD * nt, (int64_t)(taps / TASK_MIN_TAPS))))
                : 1;
  etmlir_cpu_parallel_tasks(j.tasks, pool_job_body, &j);
}
