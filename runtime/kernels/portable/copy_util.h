// Helpers shared by the copy, factory and padding families (copy_ops.cpp,
// factory_ops.cpp, padding.cpp): PyTorch's checked Scalar conversion, filling
// with one element's bytes, and strided copies that convert dtypes.
//
// Data movement is keyed on element size (1, 2, 4 or 8 bytes), so it serves
// every dtype; only the converting copies look at values.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernel_util.h"

namespace etmlir {
namespace kutil_copy {

using kutil::Plan;

// Out must have self's dtype (shape-only copies never convert).
inline Error check_same_dtype(KernelContext& ctx, const Tensor& self, const Tensor& out, const char* out_name = "out",
                              const char* self_name = "self") {
  if (self.dtype() != out.dtype()) {
    return ctx.fail(ErrorCode::InvalidArgument, "%s has dtype %s; expected %s's dtype %s", out_name,
                    dtype_name(out.dtype()), self_name, dtype_name(self.dtype()));
  }
  if (self.element_size() == 0) {
    return ctx.fail(ErrorCode::NotSupported, "%s has an unknown dtype (%d)", self_name, static_cast<int>(self.dtype()));
  }
  return Error::ok();
}

// ---------------------------------------------------------------------------
// Scalars
// ---------------------------------------------------------------------------

// c10::checked_convert: whether Scalar `v` converts to `dtype` without
// overflow. Bool targets and bool values always fit; negative ints wrap into
// uint8 (down to -255) but negative floats do not; floating targets accept
// inf and NaN; integral targets reject NaN and inf.
inline bool scalar_fits(const EValue& v, ScalarType dtype) {
  if (dtype == ScalarType::Bool || v.is_bool()) return true;
  double lo = 0, hi = 0;
  switch (dtype) {
    case ScalarType::Double: return true;
    case ScalarType::Float: lo = -3.4028234663852886e38, hi = 3.4028234663852886e38; break;
    case ScalarType::BFloat16: lo = -3.3895313892515355e38, hi = 3.3895313892515355e38; break;
    case ScalarType::Half: lo = -65504.0, hi = 65504.0; break;
    case ScalarType::Int64: lo = -9223372036854775808.0, hi = 9223372036854775807.0; break;
    case ScalarType::Int32: lo = -2147483648.0, hi = 2147483647.0; break;
    case ScalarType::Int16: lo = -32768.0, hi = 32767.0; break;
    case ScalarType::Int8: lo = -128.0, hi = 127.0; break;
    case ScalarType::UInt8: lo = 0.0, hi = 255.0; break;
    default: return false;
  }
  if (v.is_int()) {
    const int64_t i = v.to_int();
    if (dtype == ScalarType::Int64) return true;
    if (kutil::is_floating(dtype)) return static_cast<double>(i) >= lo && static_cast<double>(i) <= hi;
    if (dtype == ScalarType::UInt8 && i < 0) return i >= -255;
    return i >= static_cast<int64_t>(lo) && i <= static_cast<int64_t>(hi);
  }
  const double d = v.to_double();
  if (kutil::is_floating(dtype)) {
    if (std::isnan(d) || std::isinf(d)) return true;
  } else if (std::isnan(d)) {
    return false;
  }
  return d >= lo && d <= hi;  // compared in double, like PyTorch (2^63 fits int64)
}

// Fails (naming `what`) unless Scalar `v` converts to `dtype` without overflow.
inline Error check_scalar_fits(KernelContext& ctx, const EValue& v, ScalarType dtype, const char* what) {
  if (scalar_fits(v, dtype)) return Error::ok();
  if (v.is_int()) {
    return ctx.fail(ErrorCode::InvalidArgument, "%s %lld cannot be converted to dtype %s without overflow", what,
                    static_cast<long long>(v.to_int()), dtype_name(dtype));
  }
  return ctx.fail(ErrorCode::InvalidArgument, "%s %g cannot be converted to dtype %s without overflow", what,
                  v.to_double(), dtype_name(dtype));
}

// The bytes of Scalar `v` as one element of `dtype` (little-endian in the low
// element_size(dtype) bytes of *bits); false for an unknown dtype.
inline bool scalar_bits(const EValue& v, ScalarType dtype, uint64_t* bits) {
  *bits = 0;
  return kutil::dispatch_storage(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T value = kutil::scalar_as<T>(v);
    static_assert(sizeof(T) <= sizeof(uint64_t), "element wider than 8 bytes");
    std::memcpy(bits, &value, sizeof(T));
  });
}

// ---------------------------------------------------------------------------
// Filling
// ---------------------------------------------------------------------------

template <typename W>
inline void fill_typed(void* dst, uint64_t bits, int64_t n) {
  W v;
  std::memcpy(&v, &bits, sizeof(W));
  W* d = static_cast<W*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i] = v;
}

// Writes `n` copies of the element `bits` (element_size bytes) at `dst`.
inline void fill_elements(void* dst, uint64_t bits, size_t elem_size, int64_t n) {
  if (n <= 0) return;
  switch (elem_size) {
    case 1: std::memset(dst, static_cast<int>(bits & 0xffu), static_cast<size_t>(n)); break;
    case 2: fill_typed<uint16_t>(dst, bits, n); break;
    case 4: fill_typed<uint32_t>(dst, bits, n); break;
    default: fill_typed<uint64_t>(dst, bits, n); break;
  }
}

// ---------------------------------------------------------------------------
// Strided copies
// ---------------------------------------------------------------------------

// The inverse of kutil::strided_copy: the contiguous `in` (over the plan's
// shape) written to `out` at the plan's input strides.
inline void strided_scatter(void* out, const void* in, size_t elem_size, const Plan<1>& plan) {
  auto run = [&](auto tag) {
    using W = decltype(tag);
    W* o = static_cast<W*>(out);
    const W* x = static_cast<const W*>(in);
    const int64_t s = plan.inner_stride(0);
    plan.for_each_row([&](int64_t xo, const int64_t* oo, int64_t n) {
      W* dst = o + oo[0];
      const W* src = x + xo;
      if (s == 1) {
        std::memmove(dst, src, static_cast<size_t>(n) * sizeof(W));
      } else {
        for (int64_t i = 0; i < n; ++i) dst[i * s] = src[i];
      }
    });
  };
  switch (elem_size) {
    case 1: run(uint8_t{}); break;
    case 2: run(uint16_t{}); break;
    case 4: run(uint32_t{}); break;
    default: run(uint64_t{}); break;
  }
}

// One value converted like PyTorch's copy_ (c10::convert): kutil::convert,
// except that floating values reach int16, int8 and uint8 through int64, so
// negative floats wrap into uint8 instead of saturating.
template <typename O, typename I>
inline O cast_value(I v) {
  constexpr bool small_int = std::is_same_v<O, uint8_t> || std::is_same_v<O, int8_t> || std::is_same_v<O, int16_t>;
  if constexpr (small_int && (std::is_floating_point_v<I> || kutil::is_half_v<I>)) {
    return static_cast<O>(kutil::convert<int64_t>(v));
  } else {
    return kutil::convert<O>(v);
  }
}

namespace detail {

template <typename O, typename I>
void convert_plan(void* out, const void* in, const Plan<1>& plan, bool scatter) {
  // Bools are read as bytes: any non-zero byte is true.
  using R = std::conditional_t<std::is_same_v<I, bool>, uint8_t, I>;
  O* o = static_cast<O*>(out);
  const R* x = static_cast<const R*>(in);
  const int64_t s = plan.inner_stride(0);
  auto load = [](R v) {
    if constexpr (std::is_same_v<I, bool>) {
      return v != 0;
    } else {
      return v;
    }
  };
  plan.for_each_row([&](int64_t contiguous, const int64_t* strided, int64_t n) {
    if (scatter) {
      O* dst = o + strided[0];
      const R* src = x + contiguous;
      for (int64_t i = 0; i < n; ++i) dst[i * s] = cast_value<O>(load(src[i]));
    } else {
      O* dst = o + contiguous;
      const R* src = x + strided[0];
      for (int64_t i = 0; i < n; ++i) dst[i] = cast_value<O>(load(src[i * s]));
    }
  });
}

}  // namespace detail

// Copies over the plan's shape from `in` (dtype `from`) to `out` (dtype `to`),
// converting values. Gather (scatter = false): `out` is contiguous over the
// plan's shape and `in` read at its input strides, like kutil::strided_copy.
// Scatter: `in` is contiguous and `out` written at the input strides. Same
// dtypes move bytes. False if either dtype is unknown.
inline bool convert_strided(void* out, ScalarType to, const void* in, ScalarType from, const Plan<1>& plan,
                            bool scatter = false) {
  if (to == from) {
    const size_t es = element_size(to);
    if (es == 0) return false;
    if (scatter) {
      strided_scatter(out, in, es, plan);
    } else {
      kutil::strided_copy(out, in, es, plan);
    }
    return true;
  }
  bool ok = false;
  kutil::dispatch_storage(to, [&](auto out_tag) {
    using O = decltype(out_tag);
    ok = kutil::dispatch_storage(from, [&](auto in_tag) {
      detail::convert_plan<O, decltype(in_tag)>(out, in, plan, scatter);
    });
  });
  return ok;
}

// `n` contiguous elements converted from `from` to `to`.
inline bool convert_contiguous(void* out, ScalarType to, const void* in, ScalarType from, int64_t n) {
  if (n <= 0) return element_size(to) != 0 && element_size(from) != 0;
  const int64_t stride[1][kMaxDims] = {{1}};
  return convert_strided(out, to, in, from, Plan<1>(&n, 1, stride));
}

}  // namespace kutil_copy
}  // namespace etmlir
