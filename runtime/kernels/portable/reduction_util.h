// Helpers shared by the reduction-shaped kernels (reduction_ops, normalization,
// softmax, matmul, distance): contiguous row sums that GCC vectorizes and that
// stay accurate for long rows, conversions and dtype dispatch over the
// floating storage types (float16/bfloat16 compute in float), and scratch
// buffers from the kernel's temp allocator. Header-only, no state.
//
//   const float mean = red::sum_row<float>(x, n) / n;    // x: float, Half or BFloat16
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernel_util.h"
#include "kernel_util_linalg.h"

namespace etmlir {
namespace red {

using kutil::BFloat16;
using kutil::Half;

// The type a floating storage type computes in: float for float, float16 and
// bfloat16 (as PyTorch's CPU kernels do), double for double.
template <typename T>
using OpMath = std::conditional_t<std::is_same_v<T, double>, double, float>;

// v converted to C (float16/bfloat16 through float; bool as 0 or 1).
template <typename C, typename T>
inline C load(T v) {
  if constexpr (std::is_same_v<C, T>) {
    return v;
  } else if constexpr (kutil::is_half_v<T>) {
    return static_cast<C>(kutil::to_float(v));
  } else {
    return static_cast<C>(v);
  }
}

// Calls f(T{}) for the floating storage types: float, double, Half, BFloat16.
template <typename F>
bool dispatch_floating_storage(ScalarType dtype, F&& f) {
  switch (dtype) {
    case ScalarType::Float: f(float{}); return true;
    case ScalarType::Double: f(double{}); return true;
    case ScalarType::Half: f(Half{}); return true;
    case ScalarType::BFloat16: f(BFloat16{}); return true;
    default: return false;
  }
}

constexpr const char* kFloatingDtypes = "float32, float64, float16, bfloat16";

// Rows up to this long are summed with 8 running partial sums; longer ones are
// split in halves (pairwise), so the rounding error grows with log(n), not n.
constexpr int64_t kPairwiseBlock = 512;

// Sum of x[0..n) converted to Acc (integer sums wrap, as in torch).
template <typename Acc, typename T>
Acc sum_row(const T* x, int64_t n) {
  if constexpr (std::is_integral_v<Acc>) {
    // Exact in any order: one running sum, which GCC vectorizes as a reduction.
    // (GCC 12 miscompiles the 8-partial-sum loop below for int8/uint8 -> int64.)
    Acc total = Acc(0);
    for (int64_t i = 0; i < n; ++i) total = kutil::wrap_add(total, load<Acc>(x[i]));
    return total;
  } else {
    if (n > kPairwiseBlock) {
      const int64_t half = (n / kPairwiseBlock + 1) / 2 * kPairwiseBlock;
      return sum_row<Acc>(x, half) + sum_row<Acc>(x + half, n - half);
    }
    Acc part[8] = {};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      for (int j = 0; j < 8; ++j) part[j] += load<Acc>(x[i + j]);
    }
    Acc tail = Acc(0);
    for (; i < n; ++i) tail += load<Acc>(x[i]);
    return (((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]))) + tail;
  }
}

// Sum of (x[i] - mean)^2 over x[0..n), in Acc (floating).
template <typename Acc, typename T>
Acc squared_deviation_row(const T* x, int64_t n, Acc mean) {
  if (n > kPairwiseBlock) {
    const int64_t half = (n / kPairwiseBlock + 1) / 2 * kPairwiseBlock;
    return squared_deviation_row<Acc>(x, half, mean) + squared_deviation_row<Acc>(x + half, n - half, mean);
  }
  Acc part[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) {
      const Acc d = load<Acc>(x[i + j]) - mean;
      part[j] += d * d;
    }
  }
  Acc tail = Acc(0);
  for (; i < n; ++i) {
    const Acc d = load<Acc>(x[i]) - mean;
    tail += d * d;
  }
  return (((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]))) + tail;
}

// Mean and biased variance of x[0..n) (two passes: numerically stable). n == 0
// gives NaN for both.
template <typename Acc, typename T>
void moments_row(const T* x, int64_t n, Acc* mean, Acc* var) {
  const Acc m = sum_row<Acc>(x, n) / static_cast<Acc>(n);
  *mean = m;
  *var = squared_deviation_row<Acc>(x, n, m) / static_cast<Acc>(n);
}

// `count` elements of T from the temp allocator, or an error naming `what`.
template <typename T>
Error scratch(KernelContext& ctx, int64_t count, const char* what, T** out) {
  const size_t bytes = static_cast<size_t>(count > 0 ? count : 1) * sizeof(T);
  *out = static_cast<T*>(ctx.allocate_temp(bytes));
  if (*out == nullptr) {
    return ctx.fail(ErrorCode::OutOfMemory, "needs %zu bytes of scratch memory for %s; the temp allocator has "
                    "too little left", bytes, what);
  }
  return Error::ok();
}

// dst[i] = src[i] converted (float16/bfloat16 rounded to nearest even).
template <typename To, typename From>
inline void convert_row(To* dst, const From* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = kutil::convert<To>(src[i]);
}

}  // namespace red
}  // namespace etmlir
