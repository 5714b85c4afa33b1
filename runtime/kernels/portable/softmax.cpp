// aten::_softmax.out and aten::_log_softmax.out along one dim (float32,
// float64), numerically stable: the row maximum is subtracted first.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernel_util_linalg.h"
#include "portable_kernels.h"

namespace etmlir {
namespace {

using linalg::Described;

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

template <bool kLog>
Error softmax_impl(KernelContext& ctx, EValue** args) {
  const Tensor& self = args[0]->to_tensor();
  const int64_t dim_arg = args[1]->to_int();
  const bool half_to_float = args[2]->to_bool();
  Tensor& out = args[3]->to_tensor();
  ET_CHECK_OK(linalg::check_sane(ctx, self, "self"));
  if (half_to_float) {
    return ctx.fail(ErrorCode::NotSupported, "half_to_float=True is not supported (no float16 inputs on this runtime)");
  }
  if (self.dtype() != ScalarType::Float && self.dtype() != ScalarType::Double) {
    return linalg::unsupported_dtype(ctx, self, "self");
  }
  int64_t dim = 0;
  if (!linalg::normalize_dim(dim_arg, self.dim(), &dim)) return linalg::dim_error(ctx, "dim", dim_arg, self);
  ET_CHECK_OK(linalg::check_dtype(ctx, out, self.dtype(), "out"));
  ET_CHECK_OK(linalg::resize(ctx, out, self.sizes(), self.dim(), "out"));
  if (self.numel() == 0) return Error::ok();

  int64_t outer = 1, n = 1, inner = 1;
  for (int32_t d = 0; d < self.dim(); ++d) {
    if (d < dim) outer *= self.size(d);
    else if (d == dim) n = self.size(d);
    else inner *= self.size(d);
  }
  float* scratch = nullptr;
  linalg::dispatch_floating(self.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* x = self.data_as<const T>();
    T* y = out.data_as<T>();
#if defined(__GNUC__)
    if constexpr (std::is_same<T, float>::value) {
      if (inner == 1) {
        for (int64_t o = 0; o < outer; ++o) softmax_contiguous_row<kLog>(x + o * n, y + o * n, n);
        return;
      }
      scratch = static_cast<float*>(ctx.allocate_temp(sizeof(float) * 2 * static_cast<size_t>(inner)));
    }
#endif
    for (int64_t o = 0; o < outer; ++o) {
#if defined(__GNUC__)
      if constexpr (std::is_same<T, float>::value) {
        // Without scratch memory (no temp allocator) the scalar path below runs.
        if (scratch != nullptr && softmax_columns<kLog>(x + o * n * inner, y + o * n * inner, n, inner, scratch)) {
          continue;
        }
      }
#endif
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t base = o * n * inner + i;
        softmax_row<T, kLog>(x + base, y + base, n, inner);
      }
    }
  });
  return Error::ok();
}

// aten::_softmax.out(Tensor self, int dim, bool half_to_float, *, Tensor(a!) out)
Error softmax_out(KernelContext& ctx, EValue** args) { return softmax_impl<false>(ctx, args); }

// aten::_log_softmax.out(Tensor self, int dim, bool half_to_float, *, Tensor(a!) out)
Error log_softmax_out(KernelContext& ctx, EValue** args) { return softmax_impl<true>(ctx, args); }

}  // namespace

Error register_softmax_kernels(KernelRegistry& r) {
  ET_REGISTER_KERNEL(r, "aten::_softmax.out", "Tib|T", softmax_out);
  ET_REGISTER_KERNEL(r, "aten::_log_softmax.out", "Tib|T", log_softmax_out);
  return Error::ok();
}

}  // namespace etmlir
