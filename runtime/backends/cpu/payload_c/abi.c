/* Entry points the MLIR-generated code calls: MLIR's default calling convention passes a
 * memref as its expanded descriptor (allocated, aligned, offset, sizes..., strides...), so each
 * function here rebuilds the descriptors and calls the microkernel (ukernels.c), which takes them
 * by pointer. (A declaration with llvm.emit_c_interface would pass pointers directly, but MLIR's
 * JIT then looks for a packed wrapper of every such declaration and fails.) */
#include <stdint.h>

#include "etmlir_cpu_payload.h"

#define D2_ARGS(p) float *p##a, float *p##p, int64_t p##o, int64_t p##s0, int64_t p##s1, int64_t p##t0, int64_t p##t1
#define D2_MAKE(p) {p##a, p##p, p##o, {p##s0, p##s1}, {p##t0, p##t1}}
#define D3_ARGS(p)                                                                                       \
  float *p##a, float *p##p, int64_t p##o, int64_t p##s0, int64_t p##s1, int64_t p##s2, int64_t p##t0, \
      int64_t p##t1, int64_t p##t2
#define D3_MAKE(p) {p##a, p##p, p##o, {p##s0, p##s1, p##s2}, {p##t0, p##t1, p##t2}}
#define D4_ARGS(p)                                                                                          \
  float *p##a, float *p##p, int64_t p##o, int64_t p##s0, int64_t p##s1, int64_t p##s2, int64_t p##s3,    \
      int64_t p##t0, int64_t p##t1, int64_t p##t2, int64_t p##t3
#define D4_MAKE(p) {p##a, p##p, p##o, {p##s0, p##s1, p##s2, p##s3}, {p##t0, p##t1, p##t2, p##t3}}

void etmlir_uk_matmul(D2_ARGS(a_), D2_ARGS(b_), D2_ARGS(c_)) {
  etmlir_memref2d_f32 a = D2_MAKE(a_), b = D2_MAKE(b_), c = D2_MAKE(c_);
  _mlir_ciface_etmlir_uk_matmul(&a, &b, &c);
}

void etmlir_uk_batch_matmul(D3_ARGS(a_), D3_ARGS(b_), D3_ARGS(c_)) {
  etmlir_memref3d_f32 a = D3_MAKE(a_), b = D3_MAKE(b_), c = D3_MAKE(c_);
  _mlir_ciface_etmlir_uk_batch_matmul(&a, &b, &c);
}

void etmlir_uk_conv2d_nchw_fchw(D4_ARGS(i_), D4_ARGS(f_), D4_ARGS(o_), int64_t sh, int64_t sw, int64_t dh,
                                int64_t dw) {
  etmlir_memref4d_f32 in = D4_MAKE(i_), filter = D4_MAKE(f_), out = D4_MAKE(o_);
  _mlir_ciface_etmlir_uk_conv2d_nchw_fchw(&in, &filter, &out, sh, sw, dh, dw);
}

void etmlir_uk_depthwise_conv2d_nchw_chw(D4_ARGS(i_), D3_ARGS(f_), D4_ARGS(o_), int64_t sh, int64_t sw, int64_t dh,
                                         int64_t dw) {
  etmlir_memref4d_f32 in = D4_MAKE(i_), out = D4_MAKE(o_);
  etmlir_memref3d_f32 filter = D3_MAKE(f_);
  _mlir_ciface_etmlir_uk_depthwise_conv2d_nchw_chw(&in, &filter, &out, sh, sw, dh, dw);
}

void etmlir_uk_max_pool2d(D4_ARGS(i_), D4_ARGS(o_), int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t dh,
                          int64_t dw, int64_t pad_top, int64_t pad_left) {
  etmlir_memref4d_f32 in = D4_MAKE(i_), out = D4_MAKE(o_);
  _mlir_ciface_etmlir_uk_max_pool2d(&in, &out, kh, kw, sh, sw, dh, dw, pad_top, pad_left);
}

/* The _ep variants: after the operands, the bias (1-d), the residual (the output's rank), the mode
 * (etmlir_cpu_payload.h's ETMLIR_EP_* flags) and the bounds. A part the mode does not use is any
 * memref of the right rank (the compiler passes the output, or a 1-element buffer, for it). */
#define D1_ARGS(q) float *q##alloc, float *q##ptr, int64_t q##off, int64_t q##size, int64_t q##stride
#define EP_MAKE(bias_, res_, rank)                                                                  \
  (void)bias_##alloc;                                                                               \
  (void)bias_##size;                                                                                \
  etmlir_epilogue ep = {mode, lo, hi, bias_##ptr + bias_##off, bias_##stride, res_.aligned + res_.offset, {0}, 0, 0}; \
  for (int i = 0; i < rank; i++) ep.res_strides[i] = res_.strides[i]

void etmlir_uk_matmul_ep(D2_ARGS(a_), D2_ARGS(b_), D2_ARGS(c_), D1_ARGS(bias_), D2_ARGS(r_), int64_t mode, float lo,
                         float hi) {
  etmlir_memref2d_f32 a = D2_MAKE(a_), b = D2_MAKE(b_), c = D2_MAKE(c_), r = D2_MAKE(r_);
  EP_MAKE(bias_, r, 2);
  _mlir_ciface_etmlir_uk_matmul_ep(&a, &b, &c, &ep);
}

void etmlir_uk_matmul_packed_ep(D2_ARGS(a_), D3_ARGS(b_), D2_ARGS(c_), D1_ARGS(bias_), D2_ARGS(r_), int64_t mode,
                                float lo, float hi) {
  etmlir_memref2d_f32 a = D2_MAKE(a_), c = D2_MAKE(c_), r = D2_MAKE(r_);
  etmlir_memref3d_f32 b = D3_MAKE(b_);
  EP_MAKE(bias_, r, 2);
  _mlir_ciface_etmlir_uk_matmul_packed_ep(&a, &b, &c, &ep);
}

void etmlir_uk_batch_matmul_ep(D3_ARGS(a_), D3_ARGS(b_), D3_ARGS(c_), D1_ARGS(bias_), D3_ARGS(r_), int64_t mode,
                               float lo, float hi) {
  etmlir_memref3d_f32 a = D3_MAKE(a_), b = D3_MAKE(b_), c = D3_MAKE(c_), r = D3_MAKE(r_);
  EP_MAKE(bias_, r, 3);
  _mlir_ciface_etmlir_uk_batch_matmul_ep(&a, &b, &c, &ep);
}

void etmlir_uk_conv2d_nchw_fchw_ep(D4_ARGS(i_), D4_ARGS(f_), D4_ARGS(o_), int64_t sh, int64_t sw, int64_t dh,
                                   int64_t dw, D1_ARGS(bias_), D4_ARGS(r_), int64_t mode, float lo, float hi) {
  etmlir_memref4d_f32 in = D4_MAKE(i_), filter = D4_MAKE(f_), out = D4_MAKE(o_), r = D4_MAKE(r_);
  EP_MAKE(bias_, r, 4);
  _mlir_ciface_etmlir_uk_conv2d_nchw_fchw_ep(&in, &filter, &out, sh, sw, dh, dw, &ep);
}

void etmlir_uk_conv2d_packed_ep(D4_ARGS(i_), D3_ARGS(f_), D4_ARGS(o_), int64_t sh, int64_t sw, int64_t dh, int64_t dw,
                                int64_t kh, int64_t kw, D1_ARGS(bias_), D4_ARGS(r_), int64_t mode, float lo, float hi) {
  etmlir_memref4d_f32 in = D4_MAKE(i_), out = D4_MAKE(o_), r = D4_MAKE(r_);
  etmlir_memref3d_f32 panels = D3_MAKE(f_);
  EP_MAKE(bias_, r, 4);
  _mlir_ciface_etmlir_uk_conv2d_packed_ep(&in, &panels, &out, sh, sw, dh, dw, kh, kw, &ep);
}

void etmlir_uk_conv2d_winograd_ep(D4_ARGS(i_), D3_ARGS(u_), D4_ARGS(o_), D1_ARGS(bias_), D4_ARGS(r_), int64_t mode,
                                  float lo, float hi) {
  etmlir_memref4d_f32 in = D4_MAKE(i_), out = D4_MAKE(o_), r = D4_MAKE(r_);
  etmlir_memref3d_f32 u = D3_MAKE(u_);
  EP_MAKE(bias_, r, 4);
  _mlir_ciface_etmlir_uk_conv2d_winograd_ep(&in, &u, &out, &ep);
}

/* ... and, for the depthwise kernel, the padding it adds around its input (top, left). */
void etmlir_uk_depthwise_conv2d_nchw_chw_ep(D4_ARGS(i_), D3_ARGS(f_), D4_ARGS(o_), int64_t sh, int64_t sw,
                                            int64_t dh, int64_t dw, D1_ARGS(bias_), D4_ARGS(r_), int64_t mode,
                                            float lo, float hi, int64_t pad_top, int64_t pad_left) {
  etmlir_memref4d_f32 in = D4_MAKE(i_), out = D4_MAKE(o_), r = D4_MAKE(r_);
  etmlir_memref3d_f32 filter = D3_MAKE(f_);
  EP_MAKE(bias_, r, 4);
  ep.pad_top = pad_top;
  ep.pad_left = pad_left;
  _mlir_ciface_etmlir_uk_depthwise_conv2d_nchw_chw_ep(&in, &filter, &out, sh, sw, dh, dw, &ep);
}

/* The inverted-residual block: each step's operands, then its epilogue's bias, mode and bounds (the
 * depthwise step's padding after them; the projection's residual before its mode). */
void etmlir_uk_inverted_residual_ep(D4_ARGS(i_), D3_ARGS(p1_), D1_ARGS(b1_), int64_t mode1, float lo1, float hi1,
                                    D3_ARGS(f_), int64_t sh, int64_t sw, D1_ARGS(b2_), int64_t mode2, float lo2,
                                    float hi2, int64_t pad_top, int64_t pad_left, D3_ARGS(p2_), D4_ARGS(o_),
                                    D1_ARGS(b3_), D4_ARGS(r_), int64_t mode3, float lo3, float hi3) {
  etmlir_memref4d_f32 in = D4_MAKE(i_), out = D4_MAKE(o_), r = D4_MAKE(r_);
  etmlir_memref3d_f32 p1 = D3_MAKE(p1_), filter = D3_MAKE(f_), p2 = D3_MAKE(p2_);
  (void)b1_alloc, (void)b1_size, (void)b2_alloc, (void)b2_size;
  etmlir_epilogue e1 = {mode1, lo1, hi1, b1_ptr + b1_off, b1_stride, NULL, {0}, 0, 0};
  etmlir_epilogue e2 = {mode2, lo2, hi2, b2_ptr + b2_off, b2_stride, NULL, {0}, pad_top, pad_left};
  int64_t mode = mode3;
  float lo = lo3, hi = hi3;
  EP_MAKE(b3_, r, 4);
  _mlir_ciface_etmlir_uk_inverted_residual_ep(&in, &p1, &e1, &filter, sh, sw, &e2, &p2, &out, &ep);
}

/* Attention: the scale and whether it is causal after the operands (attention.c). The boolean
 * mask is an i1 memref, one byte per element. */
#define D3U8_ARGS(p)                                                                                       \
  uint8_t *p##a, uint8_t *p##p, int64_t p##o, int64_t p##s0, int64_t p##s1, int64_t p##s2, int64_t p##t0, \
      int64_t p##t1, int64_t p##t2

void etmlir_uk_attention(D3_ARGS(q_), D3_ARGS(k_), D3_ARGS(v_), D3_ARGS(o_), int64_t causal, float scale) {
  etmlir_memref3d_f32 q = D3_MAKE(q_), k = D3_MAKE(k_), v = D3_MAKE(v_), o = D3_MAKE(o_);
  _mlir_ciface_etmlir_uk_attention(&q, &k, &v, &o, causal, scale);
}

void etmlir_uk_attention_mask(D3_ARGS(q_), D3_ARGS(k_), D3_ARGS(v_), D3_ARGS(m_), D3_ARGS(o_), int64_t causal,
                              float scale) {
  etmlir_memref3d_f32 q = D3_MAKE(q_), k = D3_MAKE(k_), v = D3_MAKE(v_), m = D3_MAKE(m_), o = D3_MAKE(o_);
  _mlir_ciface_etmlir_uk_attention_mask(&q, &k, &v, &m, &o, causal, scale);
}

void etmlir_uk_attention_bmask(D3_ARGS(q_), D3_ARGS(k_), D3_ARGS(v_), D3U8_ARGS(m_), D3_ARGS(o_), int64_t causal,
                               float scale) {
  etmlir_memref3d_f32 q = D3_MAKE(q_), k = D3_MAKE(k_), v = D3_MAKE(v_), o = D3_MAKE(o_);
  etmlir_memref3d_u8 m = D3_MAKE(m_);
  _mlir_ciface_etmlir_uk_attention_bmask(&q, &k, &v, &m, &o, causal, scale);
}
