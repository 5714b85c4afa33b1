/* Scaled dot-product attention in one pass per block of query rows (etmlir_cpu_payload.h):
 *
 *   out[b, i, :] = sum_j softmax_j(scale * q[b, i, :] . k[b, j, :] + mask[b, i, j]) v[b, j, :]
 *
 * The scores never leave the task's scratch: for each batch b (a batch x head of the model) the task
 * packs k transposed ([D, S], rows padded to a multiple of ATT_COLS) and v ([S, DV]) once, then
 * for each block of ATT_ROWS query rows computes the block's scores (a small register-blocked
 * product), adds the mask (or stops at the diagonal when causal: no mask is materialized), takes
 * each row's softmax with the vectorized exp of activation.c, multiplies by v and scales by
 * 1 / sum as it stores. Work is split over (batch, block of ATT_UNIT rows) units through the pool;
 * each task has its own scratch, allocated before the parallel section.
 *
 * The loops are plain C over fixed-size accumulator arrays, which gcc -O3 keeps in vector registers
 * (AVX-512, AVX2 or scalar, whatever -march the payload is built for).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "etmlir_cpu_payload.h"

/* Query rows per block: they share every load of k and v (8 x 32 accumulators: 16 of AVX-512's 32 vector
 * registers; AVX2's 16 would spill them). */
#if defined(__AVX512F__)
#define ATT_ROWS 8
#else
#define ATT_ROWS 4
#endif
#define ATT_COLS 32  /* score / output columns per accumulator block */
#define ATT_UNIT 64  /* query rows per parallel work unit, at least */
#define ATT_UNITS_PER_THREAD 4 /* with more than one thread: a causal unit's cost grows with its rows' position */
#define ATT_PAR_MIN_FLOPS (1 << 21)
#define ATT_MIN(a, b) ((a) < (b) ? (a) : (b))
#define ATT_PAD(n) (((n) + ATT_COLS - 1) / ATT_COLS * ATT_COLS)
/* A unit's keys per row (int64_t) at the start of its scratch, in floats: a multiple of 16, so the rest
 * stays 64-byte aligned. */
#define ATT_ROW_KEYS_FLOATS(rows) (((rows) * 2 + 15) / 16 * 16)

typedef struct {
  const float *q, *k, *v;
  float* out;
  const float* maskf;
  const uint8_t* maskb;
  int64_t qs[3], ks[3], vs[3], os[3], ms[3];
  int64_t batches, rows, keys, depth, vdepth, units_per_batch, unit_rows, units;
  int causal;
  float scale;
  float* scratch;
  int64_t scratch_floats; /* per task */
} att_job;

/* p[r][j] = sum_d qb[r][d] * kt[d][j] for r < ATT_ROWS, j < cols (a multiple of ATT_COLS). */
static void att_scores(const float* restrict qb, const float* restrict kt, int64_t ktw, int64_t depth,
                       int64_t cols, float* restrict p, int64_t pw) {
  for (int64_t j0 = 0; j0 < cols; j0 += ATT_COLS) {
    float acc[ATT_ROWS][ATT_COLS] = {{0}};
    for (int64_t d = 0; d < depth; d++) {
      const float* restrict krow = kt + d * ktw + j0;
      for (int r = 0; r < ATT_ROWS; r++) {
        float qv = qb[r * depth + d];
        for (int jj = 0; jj < ATT_COLS; jj++) acc[r][jj] += qv * krow[jj];
      }
    }
    for (int r = 0; r < ATT_ROWS; r++) memcpy(p + r * pw + j0, acc[r], sizeof acc[r]);
  }
}

/* o[r][e] = sum_{j < keys} p[r][j] * vp[j][e] for e < vcols (a multiple of ATT_COLS). */
static void att_values(const float* restrict p, int64_t pw, const float* restrict vp, int64_t vw, int64_t keys,
                       int64_t vcols, float* restrict o) {
  for (int64_t e0 = 0; e0 < vcols; e0 += ATT_COLS) {
    float acc[ATT_ROWS][ATT_COLS] = {{0}};
    for (int64_t j = 0; j < keys; j++) {
      const float* restrict vrow = vp + j * vw + e0;
      for (int r = 0; r < ATT_ROWS; r++) {
        float pv = p[r * pw + j];
        for (int jj = 0; jj < ATT_COLS; jj++) acc[r][jj] += pv * vrow[jj];
      }
    }
    for (int r = 0; r < ATT_ROWS; r++) memcpy(o + r * vw + e0, acc[r], sizeof acc[r]);
  }
}

/* The keys row i of batch b attends to lie below this: past the diagonal when causal, and with a boolean
 * mask, past the row's last true element (a causal mask built in the graph, as transformers' LLaMA does;
 * the padding of a batch). The keys beyond are never read: as past is_causal's diagonal, a non-finite
 * value in their k or v does not reach the row. */
static int64_t att_row_keys(const att_job* j, int64_t b, int64_t i) {
  int64_t n = j->causal ? ATT_MIN(j->keys, i + 1) : j->keys;
  if (j->maskb) {
    const uint8_t* m = j->maskb + b * j->ms[0] + i * j->ms[1];
    int64_t step = j->ms[2];
    if (step == 1) { /* eight keys at a time (a causal row's scan is most of its keys) */
      uint64_t word;
      for (; n >= 8; n -= 8) {
        memcpy(&word, m + n - 8, sizeof word);
        if (word) break;
      }
    }
    while (n > 0 && !m[(n - 1) * step]) n--;
  }
  return n;
}

/* row[s] = -inf where the boolean mask is false, s < n (a select gcc vectorizes: its own pointers). */
static void att_mask_row(float* restrict row, const uint8_t* restrict m, int64_t step, int64_t n) {
  if (step == 1) {
    for (int64_t s = 0; s < n; s++) row[s] = m[s] ? row[s] : -INFINITY;
  } else {
    for (int64_t s = 0; s < n; s++) row[s] = m[s * step] ? row[s] : -INFINITY;
  }
}

static void att_unit(const att_job* j, int64_t unit, float* scratch) {
  int64_t b = unit / j->units_per_batch, r0 = unit % j->units_per_batch * j->unit_rows;
  int64_t r1 = ATT_MIN(j->rows, r0 + j->unit_rows), D = j->depth, DV = j->vdepth;
  /* The keys the unit's rows read (att_row_keys; a row's keys row_keys[i - r0]). */
  int64_t* row_keys = (int64_t*)scratch;
  int64_t keys = 0;
  for (int64_t i = r0; i < r1; i++) {
    row_keys[i - r0] = att_row_keys(j, b, i);
    keys = row_keys[i - r0] > keys ? row_keys[i - r0] : keys;
  }
  scratch += ATT_ROW_KEYS_FLOATS(j->unit_rows);
  int64_t kw = ATT_PAD(j->keys), vw = ATT_PAD(DV);
  float* kt = scratch;                      /* [D, kw] */
  float* vp = kt + D * kw;                  /* [keys, vw] */
  float* qb = vp + j->keys * vw;            /* [ATT_ROWS, D] */
  float* p = qb + ATT_ROWS * D;             /* [ATT_ROWS, kw] */
  float* ob = p + ATT_ROWS * kw;            /* [ATT_ROWS, vw] */
  const float* kb = j->k + b * j->ks[0];
  for (int64_t d = 0; d < D; d++) {
    float* row = kt + d * kw;
    for (int64_t s = 0; s < keys; s++) row[s] = kb[s * j->ks[1] + d * j->ks[2]];
    memset(row + keys, 0, sizeof(float) * (size_t)(ATT_PAD(keys) - keys));
  }
  const float* vb = j->v + b * j->vs[0];
  for (int64_t s = 0; s < keys; s++) {
    float* row = vp + s * vw;
    for (int64_t e = 0; e < DV; e++) row[e] = vb[s * j->vs[1] + e * j->vs[2]];
    memset(row + DV, 0, sizeof(float) * (size_t)(vw - DV));
  }
  for (int64_t i0 = r0; i0 < r1; i0 += ATT_ROWS) {
    int nr = (int)ATT_MIN(ATT_ROWS, r1 - i0);
    for (int r = 0; r < ATT_ROWS; r++) {
      const float* qrow = j->q + b * j->qs[0] + (i0 + (r < nr ? r : 0)) * j->qs[1];
      for (int64_t d = 0; d < D; d++) qb[r * D + d] = qrow[d * j->qs[2]] * j->scale;
    }
    int64_t block_keys = 0;
    for (int r = 0; r < nr; r++) block_keys = row_keys[i0 - r0 + r] > block_keys ? row_keys[i0 - r0 + r] : block_keys;
    att_scores(qb, kt, kw, D, ATT_PAD(block_keys), p, kw);
    float inv[ATT_ROWS];
    for (int r = 0; r < ATT_ROWS; r++) {
      float* row = p + r * kw;
      int64_t i = i0 + r, n = r < nr ? row_keys[i - r0] : 0;
      if (j->maskf) {
        const float* m = j->maskf + b * j->ms[0] + i * j->ms[1];
        for (int64_t s = 0; s < n; s++) row[s] += m[s * j->ms[2]];
      } else if (j->maskb) {
        att_mask_row(row, j->maskb + b * j->ms[0] + i * j->ms[1], j->ms[2], n);
      }
      float top = etmlir_row_max(row, n); /* a NaN wins, and spreads to the row as in eager */
      if (top == -INFINITY) { /* no key to attend to: zeros */
        n = 0;
        inv[r] = 0.0f;
      } else {
        inv[r] = 1.0f / etmlir_exp_shifted_sum(row, n, top);
      }
      memset(row + n, 0, sizeof(float) * (size_t)(ATT_PAD(block_keys) - n));
    }
    att_values(p, kw, vp, vw, block_keys, vw, ob);
    for (int r = 0; r < nr; r++) {
      float* orow = j->out + b * j->os[0] + (i0 + r) * j->os[1];
      const float* src = ob + r * vw;
      if (j->os[2] == 1) {
        for (int64_t e = 0; e < DV; e++) orow[e] = src[e] * inv[r];
      } else {
        for (int64_t e = 0; e < DV; e++) orow[e * j->os[2]] = src[e] * inv[r];
      }
    }
  }
}

/* A task is a unit (claimed at run time: a causal unit's cost grows with its rows' position). */
static void att_body(void* arg, int64_t unit, int slot) {
  const att_job* j = (const att_job*)arg;
  att_unit(j, unit, j->scratch + slot * j->scratch_floats);
}

static void attention(etmlir_memref3d_f32* q, etmlir_memref3d_f32* k, etmlir_memref3d_f32* v,
                      etmlir_memref3d_f32* maskf, etmlir_memref3d_u8* maskb, etmlir_memref3d_f32* out,
                      int64_t causal, float scale) {
  att_job j;
  memset(&j, 0, sizeof j);
  j.q = q->aligned + q->offset;
  j.k = k->aligned + k->offset;
  j.v = v->aligned + v->offset;
  j.out = out->aligned + out->offset;
  for (int d = 0; d < 3; d++) {
    j.qs[d] = q->strides[d];
    j.ks[d] = k->strides[d];
    j.vs[d] = v->strides[d];
    j.os[d] = out->strides[d];
  }
  if (maskf) {
    j.maskf = maskf->aligned + maskf->offset;
    for (int d = 0; d < 3; d++) j.ms[d] = maskf->sizes[d] == 1 ? 0 : maskf->strides[d];
  } else if (maskb) {
    j.maskb = maskb->aligned + maskb->offset;
    for (int d = 0; d < 3; d++) j.ms[d] = maskb->sizes[d] == 1 ? 0 : maskb->strides[d];
  }
  j.batches = q->sizes[0];
  j.rows = q->sizes[1];
  j.depth = q->sizes[2];
  j.keys = k->sizes[1];
  j.vdepth = v->sizes[2];
  j.causal = causal != 0;
  j.scale = scale;
  if (j.batches == 0 || j.rows == 0 || j.vdepth == 0) return;
  if (j.keys == 0) { /* nothing to attend to: zeros, as a fully masked row */
    for (int64_t b = 0; b < j.batches; b++)
      for (int64_t i = 0; i < j.rows; i++)
        for (int64_t e = 0; e < j.vdepth; e++) j.out[b * j.os[0] + i * j.os[1] + e * j.os[2]] = 0.0f;
    return;
  }
  double flops = 2.0 * (double)j.batches * (double)j.rows * (double)j.keys * (double)(j.depth + j.vdepth);
  int nt = etmlir_cpu_num_threads();
  int parallel = nt > 1 && flops >= ATT_PAR_MIN_FLOPS;
  /* Each unit packs its batch's keys and values before its rows (on whisper's encoder, 1500 keys, that was
   * a third of the time at 64 rows a unit): as few units as the threads' balance allows, one per batch
   * on one thread, each of ATT_UNIT rows or more. */
  int64_t most = (j.rows + ATT_UNIT - 1) / ATT_UNIT;
  int64_t wanted = parallel ? (ATT_UNITS_PER_THREAD * nt + j.batches - 1) / j.batches : 1;
  j.units_per_batch = ATT_MIN(most, wanted);
  j.unit_rows = (j.rows + j.units_per_batch - 1) / j.units_per_batch;
  j.unit_rows = (j.unit_rows + ATT_ROWS - 1) / ATT_ROWS * ATT_ROWS;
  j.units_per_batch = (j.rows + j.unit_rows - 1) / j.unit_rows;
  j.units = j.batches * j.units_per_batch;
  int64_t kw = ATT_PAD(j.keys), vw = ATT_PAD(j.vdepth);
  j.scratch_floats = (ATT_ROW_KEYS_FLOATS(j.unit_rows) + j.depth * kw + j.keys * vw + ATT_ROWS * j.depth +
                      ATT_ROWS * kw + ATT_ROWS * vw + 15) / 16 * 16;
  int64_t slots = parallel ? etmlir_cpu_task_slots(j.units) : 1;
  j.scratch = (float*)etmlir_cpu_scratch_alloc(sizeof(float) * (size_t)(j.scratch_floats * slots));
  if (slots > 1) {
    etmlir_cpu_parallel_tasks(j.units, att_body, &j);
  } else {
    for (int64_t u = 0; u < j.units; u++) att_unit(&j, u, j.scratch);
  }
  etmlir_cpu_scratch_free(j.scratch);
}

ETMLIR_CPU_EXPORT void _mlir_ciface_etmlir_uk_attention(etmlir_memref3d_f32* q, etmlir_memref3d_f32* k,
                                                        etmlir_memref3d_f32* v, etmlir_memref3d_f32* out,
                                                        int64_t causal, float scale) {
  attention(q, k, v, NULL, NULL, out, causal, scale);
}

ETMLIR_CPU_EXPORT void _mlir_ciface_etmlir_uk_attention_mask(etmlir_memref3d_f32* q, etmlir_memref3d_f32* k,
                                                             etmlir_memref3d_f32* v, etmlir_memref3d_f32* mask,
                                                             etmlir_memref3d_f32* out, int64_t causal, float scale) {
  attention(q, k, v, mask, NULL, out, causal, scale);
}

ETMLIR_CPU_EXPORT void _mlir_ciface_etmlir_uk_attention_bmask(etmlir_memref3d_f32* q, etmlir_memref3d_f32* k,
                                                              etmlir_memref3d_f32* v, etmlir_memref3d_u8* mask,
                                                              etmlir_memref3d_f32* out, int64_t causal, float scale) {
  attention(q, k, v, NULL, mask, out, causal, scale);
}
