// Distance kernels: aten::_cdist_forward.out (p-norm distances between the
// rows of two batched matrices) and aten::_pdist_forward.out (between every
// pair of rows of one matrix), float32 and float64.
//
// The direct path follows torch's per-element definitions (|d| = |a - b|):
//   p = 0: sum of min(ceil(|d|), 1)    p = 1: sum |d|    p = 2: sqrt(sum d^2)
//   p = inf: max |d|                   else: (sum |d|^p)^(1/p)
// summed over the columns in order. It works on blocks of kBlock rows of the
// second matrix, transposed into scratch, so the innermost loop runs across
// those rows (contiguous, vectorizable) and each block is reused for every
// row of the first matrix. For p = 2, cdist's compute_mode may pick torch's
// matrix-product form instead: sqrt(clamp_min(|a|^2 + |b|^2 - 2 a.b, 0)),
// with a.b from the blocked sgemm (gemm.h) for float32.
#include <cmath>
#include <limits>
#include <type_traits>

#include "gemm.h"
#include "reduction_util.h"
#include "generated/distance.h"

namespace etmlir {
namespace {

using linalg::Described;

constexpr int64_t kBlock = 64;

enum class Norm { kZero, kOne, kTwo, kInf, kGeneral };

// One column's contribution, the reduction, and the final transform.
template <typename T, Norm kNorm>
struct Dist {
  T p;
  bool inf_propagates_nan;  // pdist's max propagates NaN, cdist's ignores it (as in torch)

  T map(T d) const {  // d = |a - b|
    if constexpr (kNorm == Norm::kZero) {
      return d > T(0) ? T(1) : (d == T(0) ? T(0) : d);  // min(ceil(d), 1): NaN stays NaN
    } else if constexpr (kNorm == Norm::kTwo) {
      return d * d;
    } else if constexpr (kNorm == Norm::kGeneral) {
      return std::pow(d, p);
    } else {
      return d;
    }
  }
  T reduce(T acc, T v) const {
    if constexpr (kNorm == Norm::kInf) {
      return (acc < v || (inf_propagates_nan && v != v)) ? v : acc;
    } else {
      return acc + v;
    }
  }
  T finish(T acc) const {
    if constexpr (kNorm == Norm::kTwo) {
      return std::sqrt(acc);
    } else if constexpr (kNorm == Norm::kGeneral) {
      return std::pow(acc, T(1) / p);
    } else {
      return acc;
    }
  }
};

// Distances between rows [i0, i1) of a (rows x m) and rows [j0, j0 + nb) of b,
// in blocks; emit(i, j, value) for each pair with `want(i, j)`. `scratch`
// holds m * kBlock + kBlock values.
template <typename T, typename D, typename Want, typename Emit>
void direct_distances(const D& dist, const T* a, int64_t rows_a, const T* b, int64_t rows_b, int64_t m, T* scratch,
                      Want want, Emit emit) {
  T* bt = scratch;                 // [m, kBlock]: the block of b, transposed
  T* acc = scratch + m * kBlock;   // [kBlock]
  for (int64_t j0 = 0; j0 < rows_b; j0 += kBlock) {
    const int64_t nb = rows_b - j0 < kBlock ? rows_b - j0 : kBlock;
    for (int64_t j = 0; j < nb; ++j) {
      const T* row = b + (j0 + j) * m;
      for (int64_t k = 0; k < m; ++k) bt[k * kBlock + j] = row[k];
    }
    for (int64_t i = 0; i < rows_a; ++i) {
      if (!want(i, j0 + nb - 1)) continue;  // pdist: nothing in this block for row i
      const T* ai = a + i * m;
      for (int64_t j = 0; j < nb; ++j) acc[j] = T(0);
      for (int64_t k = 0; k < m; ++k) {
        const T av = ai[k];
        const T* bk = bt + k * kBlock;
        for (int64_t j = 0; j < nb; ++j) acc[j] = dist.reduce(acc[j], dist.map(std::fabs(av - bk[j])));
      }
      for (int64_t j = 0; j < nb; ++j) {
        if (want(i, j0 + j)) emit(i, j0 + j, dist.finish(acc[j]));
      }
    }
  }
}

// Calls f(dist) with the Dist for p.
template <typename T, typename F>
void with_norm(double p, bool inf_propagates_nan, F&& f) {
  const T tp = static_cast<T>(p);
  if (p == 0.0) {
    f(Dist<T, Norm::kZero>{tp, inf_propagates_nan});
  } else if (p == 1.0) {
    f(Dist<T, Norm::kOne>{tp, inf_propagates_nan});
  } else if (p == 2.0) {
    f(Dist<T, Norm::kTwo>{tp, inf_propagates_nan});
  } else if (std::isinf(p)) {
    f(Dist<T, Norm::kInf>{tp, inf_propagates_nan});
  } else {
    f(Dist<T, Norm::kGeneral>{tp, inf_propagates_nan});
  }
}

Error check_p(KernelContext& ctx, double p) {
  if (!(p >= 0.0)) {
    return ctx.fail(ErrorCode::InvalidArgument, "p is %g; only non-negative p values are supported", p);
  }
  return Error::ok();
}

Error check_matrix_dtype(KernelContext& ctx, const Tensor& t, const char* name) {
  if (t.dtype() != ScalarType::Float && t.dtype() != ScalarType::Double) {
    return ctx.fail(ErrorCode::NotSupported, "%s %s: only float32 and float64 are supported", name,
                    Described(t).text);
  }
  return Error::ok();
}

// Euclidean distances through the matrix product, one batch: out (P x R) =
// sqrt(max(|a_i|^2 + |b_j|^2 - 2 a_i.b_j, 0)). `norms` holds P + R values.
template <typename T>
void euclidean_by_product(gemm::Workspace* ws, const T* a, int64_t rows_a, const T* b, int64_t rows_b, int64_t m,
                          T* norms, T* out) {
  T* na = norms;
  T* nb = norms + rows_a;
  for (int64_t i = 0; i < rows_a; ++i) na[i] = red::squared_deviation_row<T>(a + i * m, m, T(0));
  for (int64_t j = 0; j < rows_b; ++j) nb[j] = red::squared_deviation_row<T>(b + j * m, m, T(0));
  for (int64_t i = 0; i < rows_a; ++i) {
    for (int64_t j = 0; j < rows_b; ++j) out[i * rows_b + j] = na[i] + nb[j];
  }
  if constexpr (std::is_same_v<T, float>) {
    // out += -2 * a @ b^T; b^T is b's row-major view transposed.
    gemm::sgemm(*ws, rows_a, rows_b, m, -2.0f, gemm::MatrixView::row_major(a, m),
                gemm::BSource::matrix(gemm::MatrixView::row_major(b, m).transposed()), 1.0f, out, rows_b);
  } else {
    (void)ws;
    for (int64_t i = 0; i < rows_a; ++i) {
      for (int64_t j = 0; j < rows_b; ++j) {
        T dot = T(0);
        for (int64_t k = 0; k < m; ++k) dot += a[i * m + k] * b[j * m + k];
        out[i * rows_b + j] += T(-2) * dot;
      }
    }
  }
  for (int64_t i = 0; i < rows_a * rows_b; ++i) {
    const T v = out[i];
    out[i] = std::sqrt(v < T(0) ? T(0) : v);  // NaN stays NaN
  }
}

}  // namespace

namespace portable {

// x1 [B1..., P, M], x2 [B2..., R, M] -> out [broadcast(B1, B2)..., P, R].
// compute_mode: None or 0 uses the matrix product for p = 2 when P or R > 25,
// 1 always, 2 never (torch's rule).
Error cdist_forward_out(KernelContext& ctx, const Tensor& x1, const Tensor& x2, double p,
                        std::optional<int64_t> compute_mode, Tensor& out) {
  ET_CHECK_OK(kutil::check_rank(ctx, x1, "x1"));
  ET_CHECK_OK(kutil::check_rank(ctx, x2, "x2"));
  ET_CHECK_OK(linalg::check_sane(ctx, x1, "x1"));
  ET_CHECK_OK(linalg::check_sane(ctx, x2, "x2"));
  if (x1.dim() < 2 || x2.dim() < 2) {
    return ctx.fail(ErrorCode::InvalidArgument, "x1 %s and x2 %s must have at least 2 dims", Described(x1).text,
                    Described(x2).text);
  }
  ET_CHECK_OK(check_matrix_dtype(ctx, x1, "x1"));
  ET_CHECK_OK(linalg::check_dtype(ctx, x2, x1.dtype(), "x2"));
  ET_CHECK_OK(linalg::check_dtype(ctx, out, x1.dtype(), "out"));
  const int64_t m = x1.size(x1.dim() - 1);
  if (x2.size(x2.dim() - 1) != m) {
    return ctx.fail(ErrorCode::InvalidArgument, "x1 %s and x2 %s must have the same number of columns",
                    Described(x1).text, Described(x2).text);
  }
  ET_CHECK_OK(check_p(ctx, p));
  const int64_t mode = compute_mode ? *compute_mode : 0;
  if (mode < 0 || mode > 2) {
    return ctx.fail(ErrorCode::InvalidArgument, "compute_mode is %lld; possible modes are 0, 1 and 2",
                    static_cast<long long>(mode));
  }
  const int64_t rows1 = x1.size(x1.dim() - 2);
  const int64_t rows2 = x2.size(x2.dim() - 2);
  // Broadcast the batch dims (right-aligned); strides in matrices.
  const int32_t b1 = x1.dim() - 2, b2 = x2.dim() - 2;
  const int32_t batch_rank = b1 > b2 ? b1 : b2;
  int64_t out_sizes[kMaxDims];
  int64_t stride1[kMaxDims], stride2[kMaxDims];
  int64_t running1 = 1, running2 = 1;
  for (int32_t d = batch_rank - 1; d >= 0; --d) {
    const int32_t d1 = d - (batch_rank - b1), d2 = d - (batch_rank - b2);
    const int64_t s1 = d1 >= 0 ? x1.size(d1) : 1;
    const int64_t s2 = d2 >= 0 ? x2.size(d2) : 1;
    if (s1 != s2 && s1 != 1 && s2 != 1) {
      return ctx.fail(ErrorCode::InvalidArgument, "the batch dims of x1 %s and x2 %s do not broadcast",
                      Described(x1).text, Described(x2).text);
    }
    out_sizes[d] = s1 == 1 ? s2 : s1;
    stride1[d] = s1 == 1 ? 0 : running1;
    stride2[d] = s2 == 1 ? 0 : running2;
    running1 *= s1;
    running2 *= s2;
  }
  out_sizes[batch_rank] = rows1;
  out_sizes[batch_rank + 1] = rows2;
  ET_CHECK_OK(linalg::resize(ctx, out, out_sizes, batch_rank + 2, "out"));
  if (out.numel() == 0) return Error::ok();
  int64_t batches = 1;
  for (int32_t d = 0; d < batch_rank; ++d) batches *= out_sizes[d];
  const bool by_product = p == 2.0 && (mode == 1 || (mode == 0 && (rows1 > 25 || rows2 > 25)));

  Error err;
  kutil::dispatch_floating(x1.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* a = x1.data_as<const T>();
    const T* b = x2.data_as<const T>();
    T* y = out.data_as<T>();
    if (m == 0) {  // empty rows are at distance 0
      for (int64_t i = 0; i < out.numel(); ++i) y[i] = T(0);
      return;
    }
    T* scratch = nullptr;
    err = red::scratch(ctx, by_product ? rows1 + rows2 : m * kBlock + kBlock, "the distance blocks", &scratch);
    if (err) return;
    gemm::Workspace ws(ctx, by_product ? rows1 : 1, by_product ? rows2 : 1, by_product ? m : 1);
    int64_t index[kMaxDims] = {};
    int64_t off1 = 0, off2 = 0;
    for (int64_t bi = 0; bi < batches; ++bi) {
      const T* ab = a + off1 * rows1 * m;
      const T* bb = b + off2 * rows2 * m;
      T* yb = y + bi * rows1 * rows2;
      if (by_product) {
        euclidean_by_product<T>(&ws, ab, rows1, bb, rows2, m, scratch, yb);
      } else {
        with_norm<T>(p, false, [&](const auto& dist) {
          direct_distances<T>(
              dist, ab, rows1, bb, rows2, m, scratch, [](int64_t, int64_t) { return true; },
              [&](int64_t i, int64_t j, T v) { yb[i * rows2 + j] = v; });
        });
      }
      for (int32_t d = batch_rank - 1; d >= 0; --d) {
        if (++index[d] < out_sizes[d]) {
          off1 += stride1[d];
          off2 += stride2[d];
          break;
        }
        off1 -= stride1[d] * (out_sizes[d] - 1);
        off2 -= stride2[d] * (out_sizes[d] - 1);
        index[d] = 0;
      }
    }
  });
  return err;
}

// self [N, M] -> out [N * (N - 1) / 2]: the distances of rows (i, j), i < j, in
// row-major order of the pairs.
Error pdist_forward_out(KernelContext& ctx, const Tensor& self, double p, Tensor& out) {
  ET_CHECK_OK(linalg::check_sane(ctx, self, "self"));
  if (self.dim() != 2) {
    return ctx.fail(ErrorCode::InvalidArgument, "self must be 2-D, got %s", Described(self).text);
  }
  ET_CHECK_OK(check_matrix_dtype(ctx, self, "self"));
  ET_CHECK_OK(linalg::check_dtype(ctx, out, self.dtype(), "out"));
  ET_CHECK_OK(check_p(ctx, p));
  const int64_t n = self.size(0);
  const int64_t m = self.size(1);
  const int64_t pairs[1] = {n > 1 ? n * (n - 1) / 2 : 0};
  ET_CHECK_OK(linalg::resize(ctx, out, pairs, 1, "out"));
  if (pairs[0] == 0) return Error::ok();
  Error err;
  kutil::dispatch_floating(self.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = self.data_as<const T>();
    T* y = out.data_as<T>();
    if (m == 0) {
      for (int64_t i = 0; i < pairs[0]; ++i) y[i] = T(0);
      return;
    }
    T* scratch = nullptr;
    err = red::scratch(ctx, m * kBlock + kBlock, "the distance blocks", &scratch);
    if (err) return;
    with_norm<T>(p, true, [&](const auto& dist) {
      direct_distances<T>(
          dist, x, n, x, n, m, scratch, [](int64_t i, int64_t j) { return i < j; },
          [&](int64_t i, int64_t j, T v) { y[i * n - i * (i + 1) / 2 + (j - i - 1)] = v; });
    });
  });
  return err;
}

}  // namespace portable
}  // namespace etmlir
