// Blocked single-precision GEMM for the portable kernels (mm, bmm, addmm,
// convolution): C = alpha * A * B + beta * C, all row-major.
//
// The loop nest is the GotoBLAS/BLIS one: B is packed in blocks of kKC rows x
// up to kNC columns (cut into kNR-wide panels that stay in L1), A in blocks
// of up to kMC x kKC (kMR-tall panels, L2), and a kMR x kNR register-blocked
// micro-kernel written as plain loops that GCC -O3 vectorizes at the SSE2
// baseline. Single-threaded; no heap: packing buffers come from the caller
// (the kernel temp allocator), with a small stack buffer as the fallback.
//
//   gemm::Workspace ws(ctx, m, n, k);
//   gemm::sgemm(ws, m, n, k, 1.0f, gemm::MatrixView::row_major(a, k),
//               gemm::BSource::matrix(gemm::MatrixView::row_major(b, n)), 0.0f, c, n);
//
// Transposition is a matter of strides (MatrixView::transposed()). B may also
// be produced on the fly by a packing callback: convolution packs im2col
// columns straight from the input image that way, so no im2col buffer exists.
#pragma once

#include <cstddef>
#include <cstdint>

#include "etmlir/runtime/kernel.h"

namespace etmlir {
namespace gemm {

constexpr int kMR = 4;          // rows of C per micro-kernel call
constexpr int kNR = 8;          // columns of C per micro-kernel call
constexpr int64_t kKC = 256;    // depth of one packed block
constexpr int64_t kMC = 128;    // rows of one packed A block
constexpr int64_t kNC = 512;    // columns of one packed B block

// A read-only float matrix with arbitrary element strides: element (r, c) is
// data[r * row_stride + c * col_stride]. The viewer owns nothing.
struct MatrixView {
  const float* data = nullptr;
  int64_t row_stride = 0;
  int64_t col_stride = 1;

  static MatrixView row_major(const float* data, int64_t ld) { return {data, ld, 1}; }
  MatrixView transposed() const { return {data, col_stride, row_stride}; }
};

// Fills `dst` with rows [k0, k0 + kc) x columns [j0, j0 + nc) of B packed as
// ceil(nc / kNR) panels; panel p holds kc rows of kNR floats (columns
// j0 + p * kNR ...), zero past column j0 + nc.
using PackBFn = void (*)(const void* state, int64_t k0, int64_t kc, int64_t j0, int64_t nc, float* dst);

// Where B's elements come from: a matrix in memory, or a packing callback.
struct BSource {
  MatrixView view;             // used when pack is null
  PackBFn pack = nullptr;
  const void* state = nullptr;  // passed to pack

  static BSource matrix(MatrixView v) { return {v, nullptr, nullptr}; }
  static BSource packed_by(PackBFn fn, const void* state) { return {MatrixView{}, fn, state}; }
};

// Packs a block of a strided matrix in the layout PackBFn describes (the
// helper BSource::matrix uses; exposed for callbacks that fall back to it).
void pack_b_block(const MatrixView& b, int64_t k0, int64_t kc, int64_t j0, int64_t nc, float* dst);

// Scratch floats sgemm uses with its preferred blocking for these sizes.
size_t preferred_scratch_floats(int64_t m, int64_t n, int64_t k);
// The least scratch sgemm accepts (it blocks smaller to fit what it gets).
constexpr size_t kMinScratchFloats = static_cast<size_t>(kMR + kNR);

// C (m x n, row stride ldc) = alpha * A (m x k) * B (k x n) + beta * C.
// beta == 0 means C is not read (NaN/Inf there do not propagate), as in BLAS
// and torch.addmm. `scratch` holds `scratch_floats` >= kMinScratchFloats
// floats, 16-byte aligned. Sizes are not checked here: callers validate.
void sgemm(int64_t m, int64_t n, int64_t k, float alpha, const MatrixView& a, const BSource& b, float beta, float* c,
           int64_t ldc, float* scratch, size_t scratch_floats);

// Packing space for one or more sgemm calls of one kernel invocation: taken
// once from the kernel's temp allocator (which is only reset after the
// kernel returns), or, when that has too little left, a 16 KiB buffer inside
// the Workspace itself with smaller blocks (slower, never fails). Lives on
// the caller's stack.
class Workspace {
 public:
  // Sized for the largest m x n x k problem the caller will run.
  Workspace(KernelContext& ctx, int64_t m, int64_t n, int64_t k);
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  float* data() { return data_; }
  size_t floats() const { return floats_; }
  bool on_stack() const { return data_ == fallback_; }

 private:
  static constexpr size_t kFallbackFloats = 4096;
  alignas(64) float fallback_[kFallbackFloats];
  float* data_ = fallback_;
  size_t floats_ = kFallbackFloats;
};

inline void sgemm(Workspace& ws, int64_t m, int64_t n, int64_t k, float alpha, const MatrixView& a, const BSource& b,
                  float beta, float* c, int64_t ldc) {
  sgemm(m, n, k, alpha, a, b, beta, c, ldc, ws.data(), ws.floats());
}

}  // namespace gemm
}  // namespace etmlir
