// Helpers shared by the indexing, sorting and embedding kernels
// (indexing.cpp, sort_ops.cpp, embedding.cpp): index tensors (int64 or
// int32) read and range-checked with messages that name the index, the dim
// and its size; dtype dispatch for pure data movement (by element size) and
// for kernels that compute (storage type + compute type); order-preserving
// integer keys for sorting floats the way PyTorch does (NaN largest, -0 == 0).
//
// Header-only, no allocation, no state. Names live in etmlir::ixutil.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernel_util.h"
#include "kernel_util_linalg.h"

namespace etmlir {
namespace ixutil {

using kutil::BFloat16;
using kutil::Half;
using linalg::Described;

// ---------------------------------------------------------------------------
// Index tensors
// ---------------------------------------------------------------------------

inline bool is_index_dtype(ScalarType t) { return t == ScalarType::Int64 || t == ScalarType::Int32; }

// "index must be int64 or int32, got float32[3]".
inline Error check_index_dtype(KernelContext& ctx, const Tensor& t, const char* name) {
  if (!is_index_dtype(t.dtype())) {
    return ctx.fail(ErrorCode::InvalidArgument, "%s must be int64 or int32, got %s", name, Described(t).text);
  }
  return Error::ok();
}

// Calls f(I{}) with the C++ type of an index tensor's dtype (int64 or int32).
template <typename F>
void dispatch_index(ScalarType dtype, F&& f) {
  if (dtype == ScalarType::Int32) {
    f(int32_t{});
  } else {
    f(int64_t{});
  }
}

// "index 5 is out of bounds for dim 1 of self with size 3" (the op name is prefixed).
inline Error index_out_of_range(KernelContext& ctx, const char* what, int64_t value, int64_t dim, const char* of,
                                int64_t size) {
  return ctx.fail(ErrorCode::InvalidArgument, "%s %lld is out of bounds for dim %lld of %s with size %lld", what,
                  static_cast<long long>(value), static_cast<long long>(dim), of, static_cast<long long>(size));
}

// PyTorch's advanced-indexing rule: [-size, size) with negatives wrapped.
inline bool wrap_index(int64_t* value, int64_t size) {
  int64_t v = *value;
  if (v < -size || v >= size) return false;
  *value = v < 0 ? v + size : v;
  return true;
}

// ---------------------------------------------------------------------------
// Dtype dispatch
// ---------------------------------------------------------------------------

// Calls f(W{}) with an unsigned type of `elem_size` bytes: copying elements
// as W moves any dtype's bits unchanged.
template <typename F>
void dispatch_bytes(size_t elem_size, F&& f) {
  switch (elem_size) {
    case 1: f(uint8_t{}); break;
    case 2: f(uint16_t{}); break;
    case 4: f(uint32_t{}); break;
    default: f(uint64_t{}); break;
  }
}

// Every dtype the portable kernels store (the elementwise engine's list).
inline bool is_storage_dtype(ScalarType t) { return kutil::is_convertible_dtype(t); }

// The type a kernel computes in for elements stored as T: float for float16
// and bfloat16 (rounded back on every store, as PyTorch's CPU kernels do),
// int64 for every integral type and bool (stores truncate back, so integer
// arithmetic wraps like the narrow type's; bool stores are `!= 0`).
template <typename T>
struct ComputeOf {
  using type = int64_t;
};
template <>
struct ComputeOf<float> {
  using type = float;
};
template <>
struct ComputeOf<double> {
  using type = double;
};
template <>
struct ComputeOf<Half> {
  using type = float;
};
template <>
struct ComputeOf<BFloat16> {
  using type = float;
};
template <typename T>
using compute_t = typename ComputeOf<T>::type;

// Element i as T; bools read as bytes (any non-zero byte is true).
template <typename T>
inline T value_at(const T* p, int64_t i) {
  if constexpr (std::is_same_v<T, bool>) {
    return reinterpret_cast<const uint8_t*>(p)[i] != 0;
  } else {
    return p[i];
  }
}

// Loads and stores between a storage type and its compute type.
template <typename T>
inline compute_t<T> load(const T* p, int64_t i) {
  if constexpr (std::is_same_v<T, bool>) {
    return reinterpret_cast<const uint8_t*>(p)[i] != 0;
  } else {
    return kutil::convert<compute_t<T>>(p[i]);
  }
}
template <typename T>
inline void store(T* p, int64_t i, compute_t<T> v) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    p[i] = static_cast<T>(v);  // wraps (GCC: modulo 2^n)
  } else {
    p[i] = kutil::convert<T>(v);
  }
}

template <typename CT>
inline bool is_nan(CT v) {
  if constexpr (std::is_floating_point_v<CT>) {
    return v != v;
  } else {
    return false;
  }
}

// ---------------------------------------------------------------------------
// Sort keys
// ---------------------------------------------------------------------------

// An unsigned integer whose order is PyTorch's sort order of the value:
// -inf < ... < -0 == 0 < ... < inf < NaN (every NaN equal). 32 bits for
// every dtype of 4 bytes or fewer (float16 and bfloat16 through float), 64
// for float64 and int64.
template <typename T>
using key_t = std::conditional_t<(sizeof(T) > 4), uint64_t, uint32_t>;

template <typename T>
inline key_t<T> sort_key(T v) {
  if constexpr (kutil::is_half_v<T>) {
    return sort_key(kutil::to_float(v));
  } else if constexpr (std::is_same_v<T, float>) {
    uint32_t bits = v != v ? 0x7fc00000u : v == 0.0f ? 0u : __builtin_bit_cast(uint32_t, v);
    return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  } else if constexpr (std::is_same_v<T, double>) {
    uint64_t bits = v != v ? 0x7ff8000000000000ull : v == 0.0 ? 0ull : __builtin_bit_cast(uint64_t, v);
    return (bits & 0x8000000000000000ull) ? ~bits : (bits | 0x8000000000000000ull);
  } else if constexpr (std::is_same_v<T, bool>) {
    return v ? 1u : 0u;
  } else if constexpr (std::is_unsigned_v<T>) {
    return static_cast<key_t<T>>(v);
  } else {
    using U = key_t<T>;
    using S = std::make_signed_t<U>;
    return static_cast<U>(static_cast<S>(v)) ^ (U{1} << (sizeof(U) * 8 - 1));
  }
}

}  // namespace ixutil
}  // namespace etmlir
