// aten::_softmax.out and aten::_log_softmax.out along one dim (float32,
// float64, float16, bfloat16), numerically stable: the row maximum is
// subtracted first. float16/bfloat16 blocks are converted to float scratch
// and take the float path, as PyTorch's CPU kernels compute them in float.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "reduction_util.h"
#include "generated/softmax.h"

namespace etmlir {
namespace {


// One softmax row of n values at `stride` apart (the general path).
template <typename T, bool kLog>
void softmax_row(const T* x, T* y, int64_t n, int64_t stride) {
  T max = x[0];
  for (int64_t i = 1; i < n; ++i) {
    const T v = x[i * stride];
    if (v > max || v != v) max = v;
  }
  T sum = 0;
  if (kLog) {
    for (int64_t i = 0; i < n; ++i) sum += std::exp(x[i * stride] - max);
    const T log_sum = std::log(sum);
    for (int64_t i = 0; i < n; ++i) y[i * stride] = (x[i * stride] - max) - log_sum;
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const T e = std::exp(x[i * stride] - max);
      y[i * stride] = e;
      sum += e;
    }
    const T inv = T(1) / sum;
    for (int64_t i = 0; i < n; ++i) y[i * stride] *= inv;
  }
}

#if defined(__GNUC__)
// Contiguous float rows (softmax over the last dim: attention) take four
// exps at a time with GCC/Clang generic vectors, which lower to SSE2 here
// and to whatever the target has elsewhere.
typedef float V4f __attribute__((vector_size(16)));
typedef int32_t V4i __attribute__((vector_size(16)));

// exp(x) of four finite-or-minus-infinity x <= 0: Cephes' expf (range
// reduction by ln 2, degree-6 polynomial; about 1 ulp), exactly 0 below -87
// (where expf is below 1.7e-38).
inline V4f exp4_nonpositive(V4f x_in) {
  const V4i tiny = x_in < -87.0f;
  const V4f floor_value = {-87.0f, -87.0f, -87.0f, -87.0f};
  const V4f x = (V4f)(((V4i)x_in & ~tiny) | ((V4i)floor_value & tiny));
  const V4f n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round(x / ln 2)
  const V4f r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  V4f p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const V4i scale = (__builtin_convertvector(n, V4i) + 127) << 23;  // 2^n, n in [-126, 0]
  return (V4f)((V4i)(p * (V4f)scale) & ~tiny);
}

// y[i] = exp(x[i] - max) for i < n; returns their sum. max is finite.
float exp_shifted(const float* x, float* y, int64_t n, float max) {
  V4f acc = {0.0f, 0.0f, 0.0f, 0.0f};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    V4f v;
    std::memcpy(&v, x + i, sizeof(v));
    v = exp4_nonpositive(v - max);
    std::memcpy(y + i, &v, sizeof(v));
    acc += v;
  }
  float sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  if (i < n) {
    V4f v = {0.0f, 0.0f, 0.0f, 0.0f};
    std::memcpy(&v, x + i, sizeof(float) * static_cast<size_t>(n - i));
    v = exp4_nonpositive(v - max);
    for (int64_t j = 0; j < n - i; ++j) {
      y[i + j] = v[j];
      sum += v[j];
    }
  }
  return sum;
}

// The largest of x[0..n), n >= 1; NaN if any is NaN.
float row_max(const float* x, int64_t n) {
  V4f best = {x[0], x[0], x[0], x[0]};
  V4i nan = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    V4f v;
    std::memcpy(&v, x + i, sizeof(v));
    const V4i greater = v > best;
    best = (V4f)(((V4i)v & greater) | ((V4i)best & ~greater));
    nan |= v != v;
  }
  float max = best[0];
  for (int j = 1; j < 4; ++j) max = best[j] > max ? best[j] : max;
  for (; i < n; ++i) {
    if (x[i] > max || x[i] != x[i]) max = x[i];
  }
  if (nan[0] | nan[1] | nan[2] | nan[3]) return NAN;
  return max;
}

template <bool kLog>
void softmax_contiguous_row(const float* x, float* y, int64_t n) {
  const float max = row_max(x, n);
  if (!std::isfinite(max)) {  // NaN or +inf in the row: std::exp's special cases, as torch
    softmax_row<float, kLog>(x, y, n, 1);
    return;
  }
  const float sum = exp_shifted(x, y, n, max);
  if (kLog) {
    const float log_sum = std::log(sum);
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - max) - log_sum;
  } else {
    const float inv = 1.0f / sum;
    for (int64_t i = 0; i < n; ++i) y[i] *= inv;
  }
}

// Softmax over dim of an [n, inner] float block with inner > 1 (softmax over
// channels, as in the seed CNN): the same math as softmax_row, but four
// columns at a time along the contiguous inner dim. `scratch` holds 2 * inner
// floats (column maxima and sums). Returns false, touching nothing, if a
// column maximum is not finite: the caller then takes the scalar path.
template <bool kLog>
bool softmax_columns(const float* x, float* y, int64_t n, int64_t inner, float* scratch) {
  float* max = scratch;
  float* sum = scratch + inner;
  std::memcpy(max, x, sizeof(float) * static_cast<size_t>(inner));
  for (int64_t k = 1; k < n; ++k) {
    const float* row = x + k * inner;
    for (int64_t i = 0; i < inner; ++i) max[i] = row[i] > max[i] ? row[i] : max[i];
  }
  for (int64_t i = 0; i < inner; ++i) {
    if (!std::isfinite(max[i])) return false;
  }
  // NaN anywhere makes max comparisons skip it; check the block once.
  for (int64_t j = 0; j < n * inner; ++j) {
    if (x[j] != x[j]) return false;
  }
  std::memset(sum, 0, sizeof(float) * static_cast<size_t>(inner));
  for (int64_t k = 0; k < n; ++k) {
    const float* row = x + k * inner;
    float* out = y + k * inner;
    int64_t i = 0;
    for (; i + 4 <= inner; i += 4) {
      V4f v, m, s;
      std::memcpy(&v, row + i, sizeof(v));
      std::memcpy(&m, max + i, sizeof(m));
      std::memcpy(&s, sum + i, sizeof(s));
      v = exp4_nonpositive(v - m);
      s += v;
      std::memcpy(out + i, &v, sizeof(v));
      std::memcpy(sum + i, &s, sizeof(s));
    }
    for (; i < inner; ++i) {
      const float e = std::exp(row[i] - max[i]);
      out[i] = e;
      sum[i] += e;
    }
  }
  if (kLog) {
    for (int64_t i = 0; i < inner; ++i) sum[i] = std::log(sum[i]);
    for (int64_t k = 0; k < n; ++k) {
      const float* row = x + k * inner;
      float* out = y + k * inner;
      for (int64_t i = 0; i < inner; ++i) out[i] = (row[i] - max[i]) - sum[i];
    }
  } else {
    for (int64_t i = 0; i < inner; ++i) sum[i] = 1.0f / sum[i];
    for (int64_t k = 0; k < n; ++k) {
      float* out = y + k * inner;
      for (int64_t i = 0; i < inner; ++i) out[i] *= sum[i];
    }
  }
  return true;
}
#endif

// Softmax over dim of one [n, inner] float block. `scratch` holds 2 * inner
// floats, or is null (then only the scalar path runs).
template <bool kLog>
void softmax_block_float(const float* x, float* y, int64_t n, int64_t inner, float* scratch) {
#if defined(__GNUC__)
  if (inner == 1) {
    softmax_contiguous_row<kLog>(x, y, n);
    return;
  }
  if (scratch != nullptr && softmax_columns<kLog>(x, y, n, inner, scratch)) return;
#else
  (void)scratch;
#endif
  for (int64_t i = 0; i < inner; ++i) softmax_row<float, kLog>(x + i, y + i, n, inner);
}

template <bool kLog>
Error softmax_impl(KernelContext& ctx, const Tensor& self, int64_t dim_arg, bool half_to_float, Tensor& out) {
  ET_CHECK_OK(kutil::check_rank(ctx, self, "self"));
  ET_CHECK_OK(linalg::check_sane(ctx, self, "self"));
  if (half_to_float) {
    return ctx.fail(ErrorCode::NotSupported, "half_to_float=True is not supported (torch's CPU kernels do not "
                    "support it either)");
  }
  if (!kutil::is_floating(self.dtype())) {
    return ctx.fail(ErrorCode::NotSupported, "self dtype %s is not supported (supported: %s)",
                    dtype_name(self.dtype()), red::kFloatingDtypes);
  }
  int64_t dim = 0;
  if (!linalg::normalize_dim(dim_arg, self.dim(), &dim)) return linalg::dim_error(ctx, "dim", dim_arg, self);
  ET_CHECK_OK(linalg::check_dtype(ctx, out, self.dtype(), "out"));
  ET_CHECK_OK(linalg::resize(ctx, out, self.sizes(), self.dim(), "out"));
  if (self.numel() == 0) return Error::ok();

  int64_t outer = 1, n = 1, inner = 1;
  for (int32_t d = 0; d < self.dim(); ++d) {
    if (d < dim) {
      outer *= self.size(d);
    } else if (d == dim) {
      n = self.size(d);
    } else {
      inner *= self.size(d);
    }
  }
  const int64_t block = n * inner;
  if (self.dtype() == ScalarType::Double) {
    const double* x = self.data_as<const double>();
    double* y = out.data_as<double>();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t base = o * block + i;
        softmax_row<double, kLog>(x + base, y + base, n, inner);
      }
    }
    return Error::ok();
  }
  // Without scratch memory (no temp allocator) float takes the scalar path.
  float* scratch = inner > 1 ? static_cast<float*>(ctx.allocate_temp(sizeof(float) * 2 * static_cast<size_t>(inner)))
                             : nullptr;
  if (self.dtype() == ScalarType::Float) {
    const float* x = self.data_as<const float>();
    float* y = out.data_as<float>();
    for (int64_t o = 0; o < outer; ++o) softmax_block_float<kLog>(x + o * block, y + o * block, n, inner, scratch);
    return Error::ok();
  }
  float* xf = nullptr;
  ET_CHECK_OK(red::scratch(ctx, 2 * block, "a float copy of one softmax block", &xf));
  float* yf = xf + block;
  red::dispatch_floating_storage(self.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kutil::is_half_v<T>) {
      const T* x = self.data_as<const T>();
      T* y = out.data_as<T>();
      for (int64_t o = 0; o < outer; ++o) {
        red::convert_row(xf, x + o * block, block);
        softmax_block_float<kLog>(xf, yf, n, inner, scratch);
        red::convert_row(y + o * block, yf, block);
      }
    }
  });
  return Error::ok();
}

}  // namespace

namespace portable {

Error softmax_out(KernelContext& ctx, const Tensor& self, int64_t dim, bool half_to_float, Tensor& out) {
  return softmax_impl<false>(ctx, self, dim, half_to_float, out);
}

Error log_softmax_out(KernelContext& ctx, const Tensor& self, int64_t dim, bool half_to_float, Tensor& out) {
  return softmax_impl<true>(ctx, self, dim, half_to_float, out);
}

}  // namespace portable
}  // namespace etmlir
