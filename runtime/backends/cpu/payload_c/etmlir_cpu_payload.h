/* The C half of a `cpu` delegate payload: the symbols runtime/backends/cpu/PAYLOAD.md
 * requires (shim.c), MLIR's generic allocation functions backed by an arena (shim.c),
 * and the microkernels the compiler substitutes for linalg ops (ukernels.c, with the
 * epilogue activations in activation.c; abi.c adapts MLIR's calling convention).
 *
 * The compiler links these sources with the MLIR-generated object into one
 * position-independent shared object. Build them with
 *
 *   gcc -O3 -fPIC -march=<level> -ffp-contract=fast [-fno-math-errno -std=gnu11] -c shim.c ukernels.c activation.c abi.c
 *   gcc -shared -Wl,-Bsymbolic -o payload.so model.o shim.o ukernels.o activation.o abi.o
 *
 * where <level> is the x86-64 level the host supports: x86-64-v4 (AVX-512 path),
 * x86-64-v3 (AVX2 + FMA path) and x86-64-v2 (portable path) are tested; any other
 * target (aarch64, plain x86-64) builds the portable path. -Wl,-Bsymbolic keeps calls
 * inside the .so bound to its own copy even if the process already has a symbol with
 * the same name. The sources also build with -std=c99/c11 and -O0..-O3.
 *
 * Ownership: every buffer the MLIR code allocates and every microkernel scratch
 * buffer comes from one allocator (shim.c) over the arena the runtime hands to
 * etmlir_cpu_set_arena; the payload never owns the arena's memory. All state is
 * per shared object: each delegate instance loads its own copy.
 */
#ifndef ETMLIR_CPU_PAYLOAD_H
#define ETMLIR_CPU_PAYLOAD_H

#include <stddef.h>
#include <stdint.h>

#define ETMLIR_CPU_EXPORT __attribute__((visibility("default")))
#define ETMLIR_CPU_INTERNAL __attribute__((visibility("hidden")))

/* MLIR memref descriptors for f32 (element (i, j) is aligned[offset + i*strides[0] + j*strides[1]]). */
typedef struct {
  float* allocated;
  float* aligned;
  int64_t offset;
  int64_t sizes[2];
  int64_t strides[2];
} etmlir_memref2d_f32;

typedef struct {
  float* allocated;
  float* aligned;
  int64_t offset;
  int64_t sizes[3];
  int64_t strides[3];
} etmlir_memref3d_f32;

typedef struct {
  float* allocated;
  float* aligned;
  int64_t offset;
  int64_t sizes[4];
  int64_t strides[4];
} etmlir_memref4d_f32;

/* PAYLOAD.md's thread-pool interface. */
typedef void (*etmlir_parallel_body)(void* arg, int64_t begin, int64_t end);
/* Runs body(arg, b, e) over [0, n) split into at most num_threads chunks; returns when all are done. */
typedef void (*etmlir_parallel_fn)(void* ctx, int64_t n, etmlir_parallel_body body, void* arg);

/* ---- exported: PAYLOAD.md's symbol table (shim.c) ---- */
ETMLIR_CPU_EXPORT int etmlir_cpu_payload_abi(void);
/* Resets the allocator onto [base, base + bytes) (base is aligned up to 64 inside). Call it when
 * no arena allocation is live; calling it again with the same base and size keeps the state. */
ETMLIR_CPU_EXPORT void etmlir_cpu_set_arena(void* base, uint64_t bytes);
ETMLIR_CPU_EXPORT uint64_t etmlir_cpu_heap_fallbacks(void);
/* Arena bytes needed so far: high-water mark + 64 bytes of slack for aligning any base to 64. */
ETMLIR_CPU_EXPORT uint64_t etmlir_cpu_arena_peak(void);
ETMLIR_CPU_EXPORT void etmlir_cpu_set_parallel(etmlir_parallel_fn fn, void* ctx, int num_threads);

/* ---- exported: PAYLOAD.md's optional symbols (shim.c): timed regions and failures ---- */
/* Called at a region's begin (begin = 1, with the first edge op's debug handle) and end (begin = 0). */
typedef void (*etmlir_region_fn)(void* ctx, int32_t region, int32_t debug_handle, int begin);
/* fn == NULL: no tracer (the region calls test one pointer and return). */
ETMLIR_CPU_EXPORT void etmlir_cpu_set_tracer(etmlir_region_fn fn, void* ctx);
/* Calls entry(args); returns 0, or 1 when a run-time check failed (etmlir_cpu_fail). */
ETMLIR_CPU_EXPORT int etmlir_cpu_run(void (*entry)(void**), void** args);
/* After etmlir_cpu_run returned 1: the failing edge op's debug handle (0: unknown) and the message. */
ETMLIR_CPU_EXPORT int32_t etmlir_cpu_failed_handle(void);
ETMLIR_CPU_EXPORT const char* etmlir_cpu_failure(void);
/* Forgets every arena allocation (a failed run leaves its buffers allocated). */
ETMLIR_CPU_EXPORT void etmlir_cpu_reset_arena(void);
/* Called by the generated code (et-cpu-trace-regions, et-cpu-report-failures). */
ETMLIR_CPU_EXPORT void etmlir_cpu_region_begin(int32_t region, int32_t debug_handle);
ETMLIR_CPU_EXPORT void etmlir_cpu_region_end(int32_t region);
ETMLIR_CPU_EXPORT void etmlir_cpu_fail(int32_t debug_handle, int64_t message);

/* ---- exported: MLIR's generic allocation functions, for code lowered with
 * finalize-memref-to-llvm{use-generic-functions=1} (with or without use-aligned-alloc=1) ---- */
ETMLIR_CPU_EXPORT void* _mlir_memref_to_llvm_alloc(size_t size);
ETMLIR_CPU_EXPORT void* _mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t size);
ETMLIR_CPU_EXPORT void _mlir_memref_to_llvm_free(void* ptr);

/* ---- exported: microkernels (ukernels.c). All accumulate: the output holds the init. ---- */
/* C[m,n] += sum_k A[m,k] * B[k,n]; any strides and offsets. */
ETMLIR_CPU_EXPORT void _mlir_ciface_etmlir_uk_matmul(etmlir_memref2d_f32* a, etmlir_memref2d_f32* b,
                                                     etmlir_memref2d_f32* c);
/* C[i,m,n] += sum_k A[i,m,k] * B[i,k,n]. */
ETMLIR_CPU_EXPORT void _mlir_ciface_etmlir_uk_batch_matmul(etmlir_memref3d_f32* a, etmlir_memref3d_f32* b,
                                                           etmlir_memref3d_f32* c);
/* out[n,f,oh,ow] += sum_{c,kh,kw} in[n,c,oh*sh+kh*dh,ow*sw+kw*dw] * filter[f,c,kh,kw]; in is already padded. */
ETMLIR_CPU_EXPORT void _mlir_ciface_etmlir_uk_conv2d_nchw_fchw(etmlir_memref4d_f32* in, etmlir_memref4d_f32* filter,
                                                               etmlir_memref4d_f32* out, int64_t stride_h,
                                                               int64_t stride_w, int64_t dilation_h,
                                                               int64_t dilation_w);
/* out[n,c,oh,ow] += sum_{kh,kw} in[n,c,oh*sh+kh*dh,ow*sw+kw*dw] * filter[c,kh,kw]; in is already padded. */
ETMLIR_CPU_EXPORT void _mlir_ciface_etmlir_uk_depthwise_conv2d_nchw_chw(etmlir_memref4d_f32* in,
                                                                        etmlir_memref3d_f32* filter,
                                                                        etmlir_memref4d_f32* out, int64_t stride_h,
                                                                        int64_t stride_w, int64_t dilation_h,
                                                                        int64_t dilation_w);

/* ---- exported: the same microkernels with a fused epilogue (et-cpu-microkernels fuses the ops that
 * initialize the output before the product and the elementwise op after it). Per output element:
 *   v = init (the output's value | 0 | bias) + product;  v += bias (EP_BIAS_AFTER);  v += res (EP_RESIDUAL);
 *   v = act(v) (EP_ACT_*: GELU, its tanh form, SiLU, sigmoid or tanh; activation.c);
 *   v = v > lo ? v : lo (NaN -> lo, or NaN kept with the _KEEP_NAN mode);  likewise v < hi ? v : hi.
 * The bias runs along one dim of the output (matmul: the last; convolutions: the channel dim);
 * the residual has the output's shape. `mode` packs the flags below. ---- */
enum {
  ETMLIR_EP_INIT_MASK = 3,     /* bits 0-1: what the output holds before the product */
  ETMLIR_EP_INIT_OUTPUT = 0,   /*   its current value (accumulate, as without an epilogue) */
  ETMLIR_EP_INIT_ZERO = 1,     /*   zero */
  ETMLIR_EP_INIT_BIAS = 2,     /*   the bias */
  ETMLIR_EP_BIAS_AFTER = 4,    /* bit 2: the bias is added after the product */
  ETMLIR_EP_RESIDUAL = 8,      /* bit 3: a residual tensor is added */
  ETMLIR_EP_LO_SHIFT = 4,      /* bits 4-5: lower bound: 0 none, 1 NaN -> lo, 2 NaN kept */
  ETMLIR_EP_HI_SHIFT = 6,      /* bits 6-7: upper bound, likewise */
  ETMLIR_EP_BOUND_NAN_TO_BOUND = 1,
  ETMLIR_EP_BOUND_KEEP_NAN = 2,
  ETMLIR_EP_ACT_SHIFT = 8,     /* bits 8-10: an activation after the residual, before the bounds */
  ETMLIR_EP_ACT_GELU = 1,      /*   x/2 (1 + erf(x / sqrt 2)) */
  ETMLIR_EP_ACT_GELU_TANH = 2, /*   x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
  ETMLIR_EP_ACT_SILU = 3,      /*   x / (1 + exp(-x)) */
  ETMLIR_EP_ACT_SIGMOID = 4,   /*   1 / (1 + exp(-x)) */
  ETMLIR_EP_ACT_TANH = 5,
};

typedef struct {
  int64_t mode;
  float lo, hi;
  const float* bias; /* bias[i * bias_stride], i along the bias dim */
  int64_t bias_stride;
  const float* res;  /* res[sum_d index_d * res_strides[d]] */
  int64_t res_strides[4];
  /* Depthwise convolution only: the input is not padded; it starts at row pad_top, column pad_left
   * of the padded plane the kernel reads, and every element outside it is zero. */
  int64_t pad_top, pad_left;
} etmlir_epilogue;

ETMLIR_CPU_EXPORT void _mlir_ciface_etmlir_uk_matmul_ep(etmlir_memref2d_f32* a, etmlir_memref2d_f32* b,
                                                        etmlir_memref2d_f32* c, const etmlir_epilogue* ep);
/* The same product with B packed at compile time (et-cpu-pack-weights): bp is [ceil(N / W), K, W],
 * panel p holding columns [p * W, p * W + W) of B row by row, zero padded past N. W is the width
 * etmlir_uk_panel_width() returns; any other width still computes the product, slowly. */
ETMLIR_CPU_EXPORT void _mlir_ciface_etmlir_uk_matmul_packed_ep(etmlir_memref2d_f32* a, etmlir_memref3d_f32* bp,
                                                               etmlir_memref2d_f32* c, const etmlir_epilogue* ep);
/* The panel width W these microkernels were built for (the compiler packs weights to it). */
ETMLIR_CPU_EXPORT int64_t etmlir_uk_panel_width(void);
/* The convolution with its filter packed at compile time: A = filter as [F, C*KH*KW] in panels of H
 * rows, panels [ceil(F / H), C*KH*KW, H], panel p holding rows [p * H, p * H + H) column by column,
 * zero padded past F. H is the height etmlir_uk_panel_rows() returns; any other height still
 * computes the convolution, slowly. kh, kw: the filter's window (C follows). */
ETMLIR_CPU_EXPORT void _mlir_ciface_etmlir_uk_conv2d_packed_ep(etmlir_memref4d_f32* in, etmlir_memref3d_f32* panels,
                                                               etmlir_memref4d_f32* out, int64_t stride_h,
                                                               int64_t stride_w, int64_t dilation_h,
                                                               int64_t dilation_w, int64_t kh, int64_t kw,
                                                               const etmlir_epilogue* ep);
ETMLIR_CPU_EXPORT int64_t etmlir_uk_panel_rows(void);
/* A 3x3, stride-1, undilated convolution by Winograd F(m x m, 3x3), m = 2 or 4, its filter g
 * [F, C, 3, 3] transformed at compile time: u is [(m + 2)^2 * ceil(F / H), C, H], U_e = (G g G^T)_e
 * (e = (m + 2) i + j; for m = 2, G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1]; m follows from u's size) as
 * [F, C] in panels of H rows like the packed convolution's, U_0's panels first. Any other H still
 * computes the convolution. */
ETMLIR_CPU_EXPORT void _mlir_ciface_etmlir_uk_conv2d_winograd_ep(etmlir_memref4d_f32* in, etmlir_memref3d_f32* u,
                                                                 etmlir_memref4d_f32* out, const etmlir_epilogue* ep);
ETMLIR_CPU_EXPORT void _mlir_ciface_etmlir_uk_batch_matmul_ep(etmlir_memref3d_f32* a, etmlir_memref3d_f32* b,
                                                              etmlir_memref3d_f32* c, const etmlir_epilogue* ep);
ETMLIR_CPU_EXPORT void _mlir_ciface_etmlir_uk_conv2d_nchw_fchw_ep(etmlir_memref4d_f32* in,
                                                                  etmlir_memref4d_f32* filter,
                                                                  etmlir_memref4d_f32* out, int64_t stride_h,
                                                                  int64_t stride_w, int64_t dilation_h,
                                                                  int64_t dilation_w, const etmlir_epilogue* ep);
ETMLIR_CPU_EXPORT void _mlir_ciface_etmlir_uk_depthwise_conv2d_nchw_chw_ep(
    etmlir_memref4d_f32* in, etmlir_memref3d_f32* filter, etmlir_memref4d_f32* out, int64_t stride_h,
    int64_t stride_w, int64_t dilation_h, int64_t dilation_w, const etmlir_epilogue* ep);
/* An inverted-residual block (MobileNetV2's) as one call: x = pointwise(in) under e1, with p1 the 1x1
 * filter's panels as the packed convolution's; y = depthwise(x) under e2 (filter [C, KH, KW], stride, its
 * padding e2->pad_top / pad_left); out = pointwise(y) under e3 (p2's panels; e3's residual may be the block's
 * input). x and y never reach memory whole: the kernel runs over bands of output rows, each band's rows of x
 * and y in cache. e1 and e2 take no residual and set their output (init zero or bias). */
ETMLIR_CPU_EXPORT void _mlir_ciface_etmlir_uk_inverted_residual_ep(
    etmlir_memref4d_f32* in, etmlir_memref3d_f32* p1, const etmlir_epilogue* e1, etmlir_memref3d_f32* dwf,
    int64_t stride_h, int64_t stride_w, const etmlir_epilogue* e2, etmlir_memref3d_f32* p2, etmlir_memref4d_f32* out,
    const etmlir_epilogue* e3);
/* Max pooling (NCHW): out = max(out, the window), a NaN winning as in eager; window taps outside the
 * input (pad_top / pad_left before it, and past its end) are skipped, as a -inf padding would be. */
ETMLIR_CPU_EXPORT void _mlir_ciface_etmlir_uk_max_pool2d(etmlir_memref4d_f32* in, etmlir_memref4d_f32* out,
                                                         int64_t kh, int64_t kw, int64_t stride_h, int64_t stride_w,
                                                         int64_t dilation_h, int64_t dilation_w, int64_t pad_top,
                                                         int64_t pad_left);

/* Attention (attention.c): out[b,i,:] = softmax_j(scale * q[b,i,:] . k[b,j,:] + mask[b,i,j]) v[b,j,:],
 * q [B, L, D], k [B, S, D], v [B, S, DV], out [B, L, DV]; any strides. causal: row i sees j <= i only
 * (PyTorch's is_causal). The _mask variant adds an f32 mask [B, L, S]; the _bmask variant takes a
 * boolean one (bytes, 0: masked out). A row that sees no key is zeros (PyTorch's safe softmax). */
typedef struct {
  uint8_t* allocated;
  uint8_t* aligned;
  int64_t offset;
  int64_t sizes[3];
  int64_t strides[3];
} etmlir_memref3d_u8;
ETMLIR_CPU_EXPORT void _mlir_ciface_etmlir_uk_attention(etmlir_memref3d_f32* q, etmlir_memref3d_f32* k,
                                                        etmlir_memref3d_f32* v, etmlir_memref3d_f32* out,
                                                        int64_t causal, float scale);
ETMLIR_CPU_EXPORT void _mlir_ciface_etmlir_uk_attention_mask(etmlir_memref3d_f32* q, etmlir_memref3d_f32* k,
                                                             etmlir_memref3d_f32* v, etmlir_memref3d_f32* mask,
                                                             etmlir_memref3d_f32* out, int64_t causal, float scale);
ETMLIR_CPU_EXPORT void _mlir_ciface_etmlir_uk_attention_bmask(etmlir_memref3d_f32* q, etmlir_memref3d_f32* k,
                                                              etmlir_memref3d_f32* v, etmlir_memref3d_u8* mask,
                                                              etmlir_memref3d_f32* out, int64_t causal, float scale);

/* ---- internal (hidden) helpers shared by shim.c, ukernels.c and activation.c ---- */
/* 64-byte aligned scratch from the payload's allocator (counted in the arena peak). Call these from
 * the thread that called the microkernel, never from inside a parallel body. */
ETMLIR_CPU_INTERNAL void* etmlir_cpu_scratch_alloc(size_t bytes);
ETMLIR_CPU_INTERNAL void etmlir_cpu_scratch_free(void* ptr);
/* Threads the pool offers (1 when none was set). */
ETMLIR_CPU_INTERNAL int etmlir_cpu_num_threads(void);
/* Task `task` of a job, run on the thread that holds scratch slot `slot` for the whole job. */
typedef void (*etmlir_task_body)(void* arg, int64_t task, int slot);
/* Threads that take part in a job of `tasks` tasks, so the scratch slots it needs: min(threads,
 * tasks, ETMLIR_CPU_MAX_SLOTS). */
#define ETMLIR_CPU_MAX_SLOTS 64
ETMLIR_CPU_INTERNAL int etmlir_cpu_task_slots(int64_t tasks);
/* body(arg, t, slot) for every t < tasks, claimed at run time: each thread takes the tasks of its own
 * contiguous share first, in order, then the tasks left in the others' shares. A thread that is
 * slower or starts later (a worker waking up, a busier vCPU) does fewer, so a job offered a few
 * tasks per thread ends together. */
ETMLIR_CPU_INTERNAL void etmlir_cpu_parallel_tasks(int64_t tasks, etmlir_task_body body, void* arg);
/* x[j * step] = act(x[j * step]) for j < n, act an ETMLIR_EP_ACT_* value (activation.c). */
ETMLIR_CPU_INTERNAL void etmlir_ep_activate(float* x, int64_t step, int64_t n, int act);
/* x[j] = exp(x[j] - shift) for j < n (et-cpu-approximate-math's exp); returns their sum (activation.c). */
ETMLIR_CPU_INTERNAL float etmlir_exp_shifted_sum(float* x, int64_t n, float shift);
/* max(x[0..n)), NaN when one is NaN, -inf when n == 0 (activation.c). */
ETMLIR_CPU_INTERNAL float etmlir_row_max(const float* x, int64_t n);

#endif /* ETMLIR_CPU_PAYLOAD_H */
