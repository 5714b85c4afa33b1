// Blocked sgemm: see gemm.h for the loop nest and the packed layouts.
#include "gemm.h"

#include <cstring>

namespace etmlir {
namespace gemm {
namespace {

int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

struct Blocking {
  int64_t mc, nc, kc;
  size_t floats() const { return static_cast<size_t>(mc * kc + kc * nc); }
};

// `total` split into equal blocks of at most `limit`, rounded up to `unit`
// (K = 288 becomes 2 x 144, not 256 + 32).
int64_t balanced(int64_t total, int64_t limit, int64_t unit) {
  const int64_t blocks = (total + limit - 1) / limit;
  return min64(limit, round_up((total + blocks - 1) / blocks, unit));
}

// The preferred blocks, shrunk (B columns first, then A rows, then depth)
// until both packed blocks fit in `scratch` floats.
Blocking choose_blocking(int64_t m, int64_t n, int64_t k, size_t scratch) {
  Blocking bl{balanced(m, kMC, kMR), balanced(n, kNC, kNR), balanced(k, kKC, 1)};
  while (bl.floats() > scratch && bl.nc > kNR) bl.nc = max64(kNR, round_up(bl.nc / 2, kNR));
  while (bl.floats() > scratch && bl.mc > kMR) bl.mc = max64(kMR, round_up(bl.mc / 2, kMR));
  if (bl.floats() > scratch) bl.kc = max64(1, static_cast<int64_t>(scratch) / (bl.mc + bl.nc));
  return bl;
}

// C tile = alpha * (A panel * B panel) + beta * C tile. Full tiles are
// updated straight from the register accumulators; edge tiles go through
// a small buffer.
__attribute__((noinline)) void micro_kernel(int64_t kc, const float* __restrict a, const float* __restrict b,
                                            int64_t ldb, int mr, int nr, float alpha, float beta,
                                            float* __restrict c, int64_t ldc) {
  float acc[kMR][kNR] = {};
  for (int64_t p = 0; p < kc; ++p) {
    const float* bp = b + p * ldb;
    const float* ap = a + p * kMR;
    for (int i = 0; i < kMR; ++i) {
      const float av = ap[i];
      for (int j = 0; j < kNR; ++j) acc[i][j] += av * bp[j];
    }
  }
  if (mr == kMR && nr == kNR) {
    if (beta == 0.0f) {
      for (int i = 0; i < kMR; ++i)
        for (int j = 0; j < kNR; ++j) c[i * ldc + j] = alpha * acc[i][j];
    } else if (beta == 1.0f) {
      for (int i = 0; i < kMR; ++i)
        for (int j = 0; j < kNR; ++j) c[i * ldc + j] += alpha * acc[i][j];
    } else {
      for (int i = 0; i < kMR; ++i)
        for (int j = 0; j < kNR; ++j) c[i * ldc + j] = alpha * acc[i][j] + beta * c[i * ldc + j];
    }
    return;
  }
  for (int i = 0; i < mr; ++i) {
    for (int j = 0; j < nr; ++j) {
      const float v = alpha * acc[i][j];
      c[i * ldc + j] = beta == 0.0f ? v : v + beta * c[i * ldc + j];
    }
  }
}

// Rows [i0, i0 + mc) x columns [p0, p0 + kc) of A as kMR-row panels: panel
// r holds kc columns of kMR floats, zero past row i0 + mc.
void pack_a_block(const MatrixView& a, int64_t i0, int64_t mc, int64_t p0, int64_t kc, float* dst) {
  const int64_t rs = a.row_stride;
  const int64_t cs = a.col_stride;
  for (int64_t ir = 0; ir < mc; ir += kMR) {
    const int mr = static_cast<int>(min64(kMR, mc - ir));
    const float* base = a.data + (i0 + ir) * rs + p0 * cs;
    if (mr == kMR && cs == 1) {
      const float* r0 = base;
      const float* r1 = base + rs;
      const float* r2 = base + 2 * rs;
      const float* r3 = base + 3 * rs;
      static_assert(kMR == 4, "pack_a_block's fast path assumes 4-row panels");
      for (int64_t p = 0; p < kc; ++p) {
        dst[p * kMR + 0] = r0[p];
        dst[p * kMR + 1] = r1[p];
        dst[p * kMR + 2] = r2[p];
        dst[p * kMR + 3] = r3[p];
      }
    } else {
      for (int64_t p = 0; p < kc; ++p) {
        for (int i = 0; i < kMR; ++i) dst[p * kMR + i] = i < mr ? base[i * rs + p * cs] : 0.0f;
      }
    }
    dst += kc * kMR;
  }
}

void scale_c(int64_t m, int64_t n, float beta, float* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    float* row = c + i * ldc;
    if (beta == 0.0f) {
      for (int64_t j = 0; j < n; ++j) row[j] = 0.0f;
    } else if (beta != 1.0f) {
      for (int64_t j = 0; j < n; ++j) row[j] *= beta;
    }
  }
}

// One row of C from a row-major B read in place (matrix-vector products,
// where packing would copy B for a single use): columns in chunks of kGemvW
// accumulators, the loop over k inside so they stay in registers.
constexpr int64_t kGemvW = 32;
void gemv_row(int64_t n, int64_t k, float alpha, const MatrixView& a, const MatrixView& b, float beta, float* c) {
  const int64_t rs = b.row_stride;
  int64_t j = 0;
  for (; j + kGemvW <= n; j += kGemvW) {
    float acc[kGemvW] = {};
    for (int64_t p = 0; p < k; ++p) {
      const float av = a.data[p * a.col_stride];
      const float* br = b.data + p * rs + j;
      for (int64_t jj = 0; jj < kGemvW; ++jj) acc[jj] += av * br[jj];
    }
    float* cj = c + j;
    if (beta == 0.0f) {
      for (int64_t jj = 0; jj < kGemvW; ++jj) cj[jj] = alpha * acc[jj];
    } else {
      for (int64_t jj = 0; jj < kGemvW; ++jj) cj[jj] = alpha * acc[jj] + beta * cj[jj];
    }
  }
  const int64_t rest = n - j;
  if (rest > 0) {
    float acc[kGemvW] = {};
    for (int64_t p = 0; p < k; ++p) {
      const float av = a.data[p * a.col_stride];
      const float* br = b.data + p * rs + j;
      for (int64_t jj = 0; jj < rest; ++jj) acc[jj] += av * br[jj];
    }
    float* cj = c + j;
    for (int64_t jj = 0; jj < rest; ++jj) cj[jj] = beta == 0.0f ? alpha * acc[jj] : alpha * acc[jj] + beta * cj[jj];
  }
}

}  // namespace

void pack_b_block(const MatrixView& b, int64_t k0, int64_t kc, int64_t j0, int64_t nc, float* dst) {
  const int64_t rs = b.row_stride;
  const int64_t cs = b.col_stride;
  for (int64_t jr = 0; jr < nc; jr += kNR) {
    const int nr = static_cast<int>(min64(kNR, nc - jr));
    const float* base = b.data + k0 * rs + (j0 + jr) * cs;
    if (nr == kNR && cs == 1) {
      for (int64_t p = 0; p < kc; ++p) std::memcpy(dst + p * kNR, base + p * rs, sizeof(float) * kNR);
    } else {
      for (int64_t p = 0; p < kc; ++p) {
        for (int j = 0; j < kNR; ++j) dst[p * kNR + j] = j < nr ? base[p * rs + j * cs] : 0.0f;
      }
    }
    dst += kc * kNR;
  }
}

size_t preferred_scratch_floats(int64_t m, int64_t n, int64_t k) {
  if (m <= 0 || n <= 0 || k <= 0) return kMinScratchFloats;
  return choose_blocking(m, n, k, SIZE_MAX).floats();
}

void sgemm(int64_t m, int64_t n, int64_t k, float alpha, const MatrixView& a, const BSource& b, float beta, float* c,
           int64_t ldc, float* scratch, size_t scratch_floats) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    scale_c(m, n, beta, c, ldc);
    return;
  }
  if (m == 1 && b.pack == nullptr && b.view.col_stride == 1) {
    gemv_row(n, k, alpha, a, b.view, beta, c);
    return;
  }
  const Blocking bl = choose_blocking(m, n, k, scratch_floats);
  float* a_packed = scratch;
  float* b_packed = scratch + bl.mc * bl.kc;
  // With few rows each B element is used by at most four micro-kernel calls:
  // reading a row-major B in place beats packing it first.
  const bool b_in_place = b.pack == nullptr && b.view.col_stride == 1 && m <= 4 * kMR;

  for (int64_t jc = 0; jc < n; jc += bl.nc) {
    const int64_t nc = min64(bl.nc, n - jc);
    for (int64_t pc = 0; pc < k; pc += bl.kc) {
      const int64_t kc = min64(bl.kc, k - pc);
      const float beta_block = pc == 0 ? beta : 1.0f;
      if (!b_in_place) {
        if (b.pack != nullptr) {
          b.pack(b.state, pc, kc, jc, nc, b_packed);
        } else {
          pack_b_block(b.view, pc, kc, jc, nc, b_packed);
        }
      }
      for (int64_t ic = 0; ic < m; ic += bl.mc) {
        const int64_t mc = min64(bl.mc, m - ic);
        pack_a_block(a, ic, mc, pc, kc, a_packed);
        for (int64_t jr = 0; jr < nc; jr += kNR) {
          const int nr = static_cast<int>(min64(kNR, nc - jr));
          const float* b_panel = b_packed + jr * kc;
          int64_t ldb = kNR;
          if (b_in_place) {
            if (nr == kNR) {
              b_panel = b.view.data + pc * b.view.row_stride + (jc + jr);
              ldb = b.view.row_stride;
            } else {
              pack_b_block(b.view, pc, kc, jc + jr, nr, b_packed);
              b_panel = b_packed;
            }
          }
          for (int64_t ir = 0; ir < mc; ir += kMR) {
            const int mr = static_cast<int>(min64(kMR, mc - ir));
            micro_kernel(kc, a_packed + ir * kc, b_panel, ldb, mr, nr, alpha, beta_block, c + (ic + ir) * ldc + jc + jr,
                         ldc);
          }
        }
      }
    }
  }
}

Workspace::Workspace(KernelContext& ctx, int64_t m, int64_t n, int64_t k) {
  size_t want = preferred_scratch_floats(m, n, k);
  // Ask for the preferred size, then for halves of it, before settling for
  // the stack buffer.
  while (want > kFallbackFloats) {
    if (void* p = ctx.allocate_temp(want * sizeof(float), 64)) {
      data_ = static_cast<float*>(p);
      floats_ = want;
      return;
    }
    want /= 2;
  }
}

}  // namespace gemm
}  // namespace etmlir
