// Shared machinery of the elementwise, factory and copy kernels
// (binary_ops, comparison_ops, unary_ops, factory_ops, copy_ops): dtype
// dispatch, PyTorch's type promotion, broadcasting, and an elementwise engine
// whose common cases (same dtype, contiguous, scalar or last-dim broadcast)
// run as tight loops GCC can vectorize.
//
// Header-only, no allocation, no exceptions: everything lives on the stack,
// bounded by kMaxDims. Names live in etmlir::kutil so that other kernel
// families' helper headers cannot collide with them.
//
//   Operand ins[] = {Operand::of(self, "self"), Operand::of(other, "other")};
//   return kutil::elementwise<float, float, float>(ctx, ins, out,
//                                                 [](float a, float b) { return a + b; });
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <tuple>
#include <type_traits>
#include <utility>

#include "etmlir/runtime/error.h"
#include "etmlir/runtime/evalue.h"
#include "etmlir/runtime/half.h"
#include "etmlir/runtime/kernel.h"
#include "etmlir/runtime/tensor.h"

namespace etmlir {
namespace kutil {

// ---------------------------------------------------------------------------
// Dtypes
// ---------------------------------------------------------------------------

// Marks "no dtype yet" in type promotion.
constexpr ScalarType kNoDtype = static_cast<ScalarType>(-1);

// IEEE binary16 and bfloat16 storage types. Kernels never compute in them:
// like PyTorch's CPU kernels they load to float, compute, and round back
// (round to nearest even; NaN stays NaN, overflow becomes inf).
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

// The conversions live in the runtime core (etmlir/runtime/half.h), which tools and lib/ share.
using etmlir::bfloat16_to_float;
using etmlir::float_to_bfloat16;
using etmlir::float_to_half;
using etmlir::half_to_float;

template <typename T>
inline constexpr bool is_half_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

inline float to_float(Half h) { return half_to_float(h.bits); }
inline float to_float(BFloat16 b) { return bfloat16_to_float(b.bits); }

template <typename T>
struct DtypeOf;
template <>
struct DtypeOf<float> {
  static constexpr ScalarType value = ScalarType::Float;
};
template <>
struct DtypeOf<double> {
  static constexpr ScalarType value = ScalarType::Double;
};
template <>
struct DtypeOf<int64_t> {
  static constexpr ScalarType value = ScalarType::Int64;
};
template <>
struct DtypeOf<int32_t> {
  static constexpr ScalarType value = ScalarType::Int32;
};
template <>
struct DtypeOf<int16_t> {
  static constexpr ScalarType value = ScalarType::Int16;
};
template <>
struct DtypeOf<int8_t> {
  static constexpr ScalarType value = ScalarType::Int8;
};
template <>
struct DtypeOf<uint8_t> {
  static constexpr ScalarType value = ScalarType::UInt8;
};
template <>
struct DtypeOf<bool> {
  static constexpr ScalarType value = ScalarType::Bool;
};
template <>
struct DtypeOf<Half> {
  static constexpr ScalarType value = ScalarType::Half;
};
template <>
struct DtypeOf<BFloat16> {
  static constexpr ScalarType value = ScalarType::BFloat16;
};

inline bool is_floating(ScalarType t) {
  return t == ScalarType::Float || t == ScalarType::Double || t == ScalarType::Half || t == ScalarType::BFloat16;
}
inline bool is_integral_no_bool(ScalarType t) {
  return t == ScalarType::UInt8 || t == ScalarType::Int8 || t == ScalarType::Int16 || t == ScalarType::Int32 ||
         t == ScalarType::Int64;
}
// The dtypes kernels compute in (and write through a fast path).
inline bool is_compute_dtype(ScalarType t) {
  return t == ScalarType::Float || t == ScalarType::Double || t == ScalarType::Int64 || t == ScalarType::Int32 ||
         t == ScalarType::Bool;
}
// The dtypes elementwise kernels can read or write by converting.
inline bool is_convertible_dtype(ScalarType t) {
  return is_compute_dtype(t) || t == ScalarType::UInt8 || t == ScalarType::Int8 || t == ScalarType::Int16 ||
         t == ScalarType::Half || t == ScalarType::BFloat16;
}
inline bool is_half_dtype(ScalarType t) { return t == ScalarType::Half || t == ScalarType::BFloat16; }

constexpr const char* kComputeDtypes = "float32, float64, int64, int32, bool";

// Calls f(T{}) with the C++ type of `dtype`; false if `dtype` is not one of
// the listed ones. `f` is a generic lambda: [&](auto tag) { using T = decltype(tag); ... }.
template <typename F>
bool dispatch_compute(ScalarType dtype, F&& f) {
  switch (dtype) {
    case ScalarType::Float: f(float{}); return true;
    case ScalarType::Double: f(double{}); return true;
    case ScalarType::Int64: f(int64_t{}); return true;
    case ScalarType::Int32: f(int32_t{}); return true;
    case ScalarType::Bool: f(bool{}); return true;
    default: return false;
  }
}
// Float, Double, Int64, Int32 (no Bool).
template <typename F>
bool dispatch_real(ScalarType dtype, F&& f) {
  switch (dtype) {
    case ScalarType::Float: f(float{}); return true;
    case ScalarType::Double: f(double{}); return true;
    case ScalarType::Int64: f(int64_t{}); return true;
    case ScalarType::Int32: f(int32_t{}); return true;
    default: return false;
  }
}
// Float, Double.
template <typename F>
bool dispatch_floating(ScalarType dtype, F&& f) {
  switch (dtype) {
    case ScalarType::Float: f(float{}); return true;
    case ScalarType::Double: f(double{}); return true;
    default: return false;
  }
}
// Every dtype a kernel can convert from or to.
template <typename F>
bool dispatch_convertible(ScalarType dtype, F&& f) {
  switch (dtype) {
    case ScalarType::Float: f(float{}); return true;
    case ScalarType::Double: f(double{}); return true;
    case ScalarType::Int64: f(int64_t{}); return true;
    case ScalarType::Int32: f(int32_t{}); return true;
    case ScalarType::Int16: f(int16_t{}); return true;
    case ScalarType::Int8: f(int8_t{}); return true;
    case ScalarType::UInt8: f(uint8_t{}); return true;
    case ScalarType::Bool: f(bool{}); return true;
    default: return false;
  }
}
// Every dtype a converting load or store (the elementwise engine) handles:
// the convertible ones plus the storage types Half and BFloat16.
template <typename F>
bool dispatch_storage(ScalarType dtype, F&& f) {
  switch (dtype) {
    case ScalarType::Half: f(Half{}); return true;
    case ScalarType::BFloat16: f(BFloat16{}); return true;
    default: return dispatch_convertible(dtype, f);
  }
}

// For kernels that write through the elementwise engine (which converts
// loads and stores): the compute type of `dtype`. float16 and bfloat16
// compute in float, as PyTorch's CPU kernels do; int16, int8 and uint8 in
// int64, whose results truncated back wrap exactly as the narrow type's
// arithmetic would. Never use these to pick a type for reading or writing a
// tensor's data directly.
inline bool is_small_int_dtype(ScalarType t) {
  return t == ScalarType::Int16 || t == ScalarType::Int8 || t == ScalarType::UInt8;
}
template <typename F>
bool dispatch_elementwise_floating(ScalarType dtype, F&& f) {
  return is_half_dtype(dtype) ? (f(float{}), true) : dispatch_floating(dtype, f);
}
template <typename F>
bool dispatch_elementwise_real(ScalarType dtype, F&& f) {
  if (is_half_dtype(dtype)) return f(float{}), true;
  if (is_small_int_dtype(dtype)) return f(int64_t{}), true;
  return dispatch_real(dtype, f);
}
template <typename F>
bool dispatch_elementwise_compute(ScalarType dtype, F&& f) {
  if (is_half_dtype(dtype)) return f(float{}), true;
  if (is_small_int_dtype(dtype)) return f(int64_t{}), true;
  return dispatch_compute(dtype, f);
}

// "aten::add.out: out has dtype float16; supported: float32, ..."
inline Error unsupported_dtype(KernelContext& ctx, const char* arg, ScalarType dtype,
                               const char* supported = kComputeDtypes) {
  return ctx.fail(ErrorCode::NotSupported, "%s has dtype %s; this kernel supports %s", arg, dtype_name(dtype),
                  supported);
}

// Value conversion with defined results everywhere: to bool is `!= 0`,
// floating to integral truncates, saturates out of range and maps NaN to 0.
template <typename To, typename From>
inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (is_half_v<From>) {
    return convert<To>(to_float(v));
  } else if constexpr (std::is_same_v<To, Half>) {
    return Half{float_to_half(convert<float>(v))};
  } else if constexpr (std::is_same_v<To, BFloat16>) {
    return BFloat16{float_to_bfloat16(convert<float>(v))};
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    if (!(v == v)) return To(0);
    if (v <= static_cast<From>(std::numeric_limits<To>::min())) return std::numeric_limits<To>::min();
    if (v >= static_cast<From>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

// A Scalar argument (Int, Double or Bool EValue) as T.
template <typename T>
inline T scalar_as(const EValue& v) {
  switch (v.tag) {
    case Tag::Int: return convert<T>(v.payload.as_int);
    case Tag::Bool: return convert<T>(v.payload.as_bool);
    default: return convert<T>(v.payload.as_double);
  }
}

// Integer arithmetic that wraps like PyTorch instead of overflowing (UB).
template <typename T>
inline T wrap_add(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return static_cast<T>(a + b);
  }
}
template <typename T>
inline T wrap_sub(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
  } else {
    return static_cast<T>(a - b);
  }
}
template <typename T>
inline T wrap_mul(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return a && b;
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return a * b;
  }
}

// ---------------------------------------------------------------------------
// Float math GCC can vectorize (no branches, no libm calls)
// ---------------------------------------------------------------------------

// Written so that GCC vectorizes them under the default -ftrapping-math:
// every value is computed unconditionally and ternaries only select between
// computed values (a clamp feeding arithmetic would let GCC fold a constant,
// overflowing path and give up on if-conversion).

// c ? a : b through bit masks, so both values are consumed unconditionally.
inline float blend_float(bool c, float a, float b) {
  const uint32_t m = c ? ~0u : 0u;
  return __builtin_bit_cast(float, (__builtin_bit_cast(uint32_t, a) & m) | (__builtin_bit_cast(uint32_t, b) & ~m));
}

// e^x for float, within ~2 ulp (Cephes expf polynomial). Overflow gives inf,
// underflow denormals then 0, NaN stays NaN. Scales by 2^n in two halves so
// every n in [-150, 128] is exact without special cases.
inline float exp_float(float x) {
  // n = round(x / ln 2) via the 1.5 * 2^23 trick (no floor or conversion);
  // meaningless outside [-104, 89], where the result is selected below.
  constexpr float kMagic = 12582912.0f;
  const float t = x * 1.44269504088896341f + kMagic;
  const float fn = t - kMagic;
  const int32_t n = static_cast<int32_t>(__builtin_bit_cast(uint32_t, t) - __builtin_bit_cast(uint32_t, kMagic));
  float r = x - fn * 0.693359375f;
  r = r - fn * -2.12194440e-4f;
  const float z = r * r;
  float y = 1.9875691500e-4f;
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * z + r + 1.0f;
  const int32_t h = n >> 1;
  const float s1 = __builtin_bit_cast(float, static_cast<uint32_t>(h + 127) << 23);
  const float s2 = __builtin_bit_cast(float, static_cast<uint32_t>(n - h + 127) << 23);
  const float e = y * s1 * s2;
  const float big = blend_float(x > 88.72283935546875f, std::numeric_limits<float>::infinity(), e);
  return blend_float(x < -103.97208404541015625f, 0.0f, big);
}

// tanh for float, within a few ulp: an odd Taylor polynomial below 0.25,
// (1 - e^-2|x|) / (1 + e^-2|x|) above.
inline float tanh_float(float x) {
  const float a = x < 0.0f ? -x : x;
  const float e = exp_float(-2.0f * a);
  const float big = (1.0f - e) / (1.0f + e);
  const float signed_big = x < 0.0f ? -big : big;
  const float x2 = x * x;
  const float small =
      x + x * x2 * (-1.0f / 3 + x2 * (2.0f / 15 + x2 * (-17.0f / 315 + x2 * (62.0f / 2835))));
  return blend_float(a >= 0.25f, signed_big, small);  // NaN: small, which is NaN
}

// 1 + erf(x) for float, without cancellation for negative x (Abramowitz and
// Stegun 7.1.26, absolute error < 1.5e-7; what PyTorch's vectorized erf uses).
inline float one_plus_erf_float(float x) {
  const float a = x < 0.0f ? -x : x;
  const float t = 1.0f / (1.0f + 0.3275911f * a);
  float p = 1.061405429f;
  p = p * t - 1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t - 0.284496736f;
  p = p * t + 0.254829592f;
  const float q = p * t * exp_float(-a * a);  // erfc(|x|)
  const float c = x < 0.0f ? 0.0f : 1.0f;
  return 2.0f * c + (1.0f - 2.0f * c) * q;  // q for x < 0, 2 - q otherwise (exact)
}

// ---------------------------------------------------------------------------
// Type promotion (c10::promoteTypes and at::result_type)
// ---------------------------------------------------------------------------

// Promotion of two dtypes, for the dtypes the elementwise kernels convert.
inline ScalarType promote_types(ScalarType a, ScalarType b) {
  if (a == kNoDtype) return b;
  if (b == kNoDtype || a == b) return a;
  if (is_floating(a) || is_floating(b)) {
    if (a == ScalarType::Double || b == ScalarType::Double) return ScalarType::Double;
    if (is_floating(a) && is_floating(b)) return ScalarType::Float;  // half/bfloat16 mixes
    return is_floating(a) ? a : b;
  }
  if (a == ScalarType::Bool) return b;
  if (b == ScalarType::Bool) return a;
  // Both integral.
  if ((a == ScalarType::UInt8 && b == ScalarType::Int8) || (a == ScalarType::Int8 && b == ScalarType::UInt8)) {
    return ScalarType::Int16;
  }
  return element_size(a) >= element_size(b) ? a : b;
}

// PyTorch's rule for out= arguments: no floating → integral, no non-bool → bool.
inline bool can_cast(ScalarType from, ScalarType to) {
  if (is_floating(from) && !is_floating(to)) return false;
  if (from != ScalarType::Bool && to == ScalarType::Bool) return false;
  return true;
}

// at::result_type over tensors and scalars: tensors with dims outrank
// zero-dim tensors, which outrank Python scalars, unless a lower tier has
// a higher category (bool < integral < floating).
class ResultType {
 public:
  void add_tensor(ScalarType dtype, int32_t dim) {
    if (dim > 0) {
      dim_ = promote_types(dim_, dtype);
    } else {
      zero_ = promote_types(zero_, dtype);
    }
  }
  void add_tensor(const Tensor& t) { add_tensor(t.dtype(), t.dim()); }
  // A Scalar argument: Double → float32 (the default dtype), Int → int64.
  void add_scalar(const EValue& v) {
    ScalarType t = v.is_double() ? ScalarType::Float : v.is_bool() ? ScalarType::Bool : ScalarType::Int64;
    wrapped_ = promote_types(wrapped_, t);
  }
  ScalarType get() const { return combine(dim_, combine(zero_, wrapped_)); }

 private:
  static ScalarType combine(ScalarType higher, ScalarType lower) {
    if (higher != kNoDtype && is_floating(higher)) return higher;
    if (higher == ScalarType::Bool || (lower != kNoDtype && is_floating(lower))) {
      return promote_types(higher, lower);
    }
    return higher != kNoDtype ? higher : lower;
  }
  ScalarType dim_ = kNoDtype;
  ScalarType zero_ = kNoDtype;
  ScalarType wrapped_ = kNoDtype;
};

// ---------------------------------------------------------------------------
// Shapes
// ---------------------------------------------------------------------------

// "[2, 3]" into `buffer`.
inline const char* format_shape(char* buffer, size_t size, const int64_t* sizes, int32_t dim) {
  if (size == 0) return buffer;
  size_t used = 0;
  auto put = [&](int n) {
    if (n > 0) used += static_cast<size_t>(n);
  };
  put(std::snprintf(buffer, size, "["));
  for (int32_t d = 0; d < dim && used < size; ++d) {
    put(std::snprintf(buffer + used, size - used, d ? ", %lld" : "%lld", static_cast<long long>(sizes[d])));
  }
  if (used < size) put(std::snprintf(buffer + used, size - used, "]"));
  buffer[used < size ? used : size - 1] = '\0';
  return buffer;
}

// Resizes an out tensor; a failure names the op ("aten::add.out: cannot resize out ...").
inline Error resize_out(KernelContext& ctx, Tensor& out, const int64_t* sizes, int32_t dim,
                        const char* name = "out") {
  Error e = out.resize(sizes, dim, name);
  if (e) e.prefix("%s", ctx.op_name());
  return e;
}

// Checks `t` has a rank the kernels can index (0..kMaxDims).
inline Error check_rank(KernelContext& ctx, const Tensor& t, const char* name) {
  if (t.dim() < 0 || t.dim() > kMaxDims) {
    return ctx.fail(ErrorCode::InvalidArgument, "%s has rank %d; at most %d dims are supported", name, t.dim(),
                    kMaxDims);
  }
  return Error::ok();
}

// `dim` in [-rank, rank) made non-negative. Zero-rank tensors accept -1 and 0
// when `scalar_ok` (PyTorch wraps them as if of rank 1).
inline Error normalize_dim(KernelContext& ctx, int64_t dim, int64_t rank, int64_t* result, const char* what = "dim",
                           bool scalar_ok = false) {
  int64_t r = (rank == 0 && scalar_ok) ? 1 : rank;
  if (dim < -r || dim >= r) {
    return ctx.fail(ErrorCode::InvalidArgument, "%s %lld is out of range for a tensor of rank %lld (expected [%lld, %lld])",
                    what, static_cast<long long>(dim), static_cast<long long>(rank), static_cast<long long>(-r),
                    static_cast<long long>(r - 1));
  }
  *result = dim < 0 ? dim + r : dim;
  return Error::ok();
}

// Product of sizes, false on overflow or a negative size.
inline bool checked_numel(const int64_t* sizes, int32_t dim, int64_t* numel) {
  int64_t n = 1;
  for (int32_t d = 0; d < dim; ++d) {
    if (sizes[d] < 0 || __builtin_mul_overflow(n, sizes[d], &n)) return false;
  }
  *numel = n;
  return true;
}

// Contiguous strides of `sizes`.
inline void contiguous_strides(const int64_t* sizes, int32_t dim, int64_t* strides) {
  int64_t running = 1;
  for (int32_t d = dim - 1; d >= 0; --d) {
    strides[d] = running;
    running *= sizes[d];
  }
}

// ---------------------------------------------------------------------------
// Operands and broadcasting
// ---------------------------------------------------------------------------

// An elementwise input: a tensor, or a scalar value seen as a rank-0 tensor.
struct Operand {
  const void* data = nullptr;
  ScalarType dtype = ScalarType::Float;
  int32_t dim = 0;
  const int64_t* sizes = nullptr;
  const char* name = "";

  static Operand of(const Tensor& t, const char* name) { return {t.data(), t.dtype(), t.dim(), t.sizes(), name}; }
  template <typename T>
  static Operand scalar(const T* value, const char* name) {
    return {value, DtypeOf<T>::value, 0, nullptr, name};
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int32_t d = 0; d < dim; ++d) n *= sizes[d];
    return n;
  }
};

// The `other` argument of a binary op's `.out` (Tensor) or `.Scalar_out`
// (Scalar) overload, so that both overloads share one implementation.
struct TensorOrScalar {
  const Tensor* tensor = nullptr;
  const EValue* scalar = nullptr;

  static TensorOrScalar of(const Tensor& t) { return {&t, nullptr}; }
  static TensorOrScalar of(const EValue& v) {
    return v.is_tensor() ? TensorOrScalar{&v.to_tensor(), nullptr} : TensorOrScalar{nullptr, &v};
  }
  bool is_tensor() const { return tensor != nullptr; }
  // Adds this operand to a result-type computation.
  void add_to(ResultType& rt) const {
    if (tensor) {
      rt.add_tensor(*tensor);
    } else {
      rt.add_scalar(*scalar);
    }
  }
  // The elementwise operand: the tensor, or the Scalar converted to T into `*storage`.
  template <typename T>
  Operand operand(T* storage, const char* name) const {
    if (tensor) return Operand::of(*tensor, name);
    *storage = scalar_as<T>(*scalar);
    return Operand::scalar(storage, name);
  }
};

// The broadcast shape of `n` operands (PyTorch rules: right-aligned, size-1
// dims stretch) into sizes/dim.
inline Error broadcast_shape(KernelContext& ctx, const Operand* ops, int n, int64_t* sizes, int32_t* dim) {
  int32_t rank = 0;
  for (int k = 0; k < n; ++k) {
    if (ops[k].dim < 0 || ops[k].dim > kMaxDims) {
      return ctx.fail(ErrorCode::InvalidArgument, "%s has rank %d; at most %d dims are supported", ops[k].name,
                      ops[k].dim, kMaxDims);
    }
    if (ops[k].dim > rank) rank = ops[k].dim;
  }
  for (int32_t d = 0; d < rank; ++d) sizes[d] = 1;
  for (int k = 0; k < n; ++k) {
    const Operand& op = ops[k];
    for (int32_t j = 0; j < op.dim; ++j) {
      int32_t od = rank - op.dim + j;
      int64_t s = op.sizes[j];
      if (s == sizes[od] || s == 1) continue;
      if (sizes[od] == 1) {
        sizes[od] = s;
        continue;
      }
      // Not broadcastable: name every operand's shape.
      char shapes[3][64];
      for (int i = 0; i < n && i < 3; ++i) format_shape(shapes[i], sizeof(shapes[i]), ops[i].sizes, ops[i].dim);
      if (n == 2) {
        return ctx.fail(ErrorCode::InvalidArgument,
                        "%s %s and %s %s are not broadcastable (size %lld vs %lld at dim %d)", ops[0].name,
                        shapes[0], ops[1].name, shapes[1], static_cast<long long>(sizes[od]),
                        static_cast<long long>(s), od - rank);
      }
      return ctx.fail(ErrorCode::InvalidArgument, "%s %s cannot broadcast with the other inputs (%s%s%s%s%s) at dim %d",
                      op.name, format_shape(shapes[0], sizeof(shapes[0]), op.sizes, op.dim), ops[0].name,
                      n > 1 ? ", " : "", n > 1 ? ops[1].name : "", n > 2 ? ", " : "", n > 2 ? ops[2].name : "",
                      od - rank);
    }
  }
  *dim = rank;
  return Error::ok();
}

// Strides of `op` over an out index space of rank `dim` (0 where broadcast).
inline void broadcast_strides(const Operand& op, const int64_t* out_sizes, int32_t dim, int64_t* strides) {
  int64_t own[kMaxDims];
  contiguous_strides(op.sizes, op.dim, own);
  for (int32_t d = 0; d < dim; ++d) {
    int32_t j = d - (dim - op.dim);
    strides[d] = (j < 0 || (op.sizes[j] == 1 && out_sizes[d] != 1)) ? 0 : own[j];
  }
}

// ---------------------------------------------------------------------------
// Strided iteration
// ---------------------------------------------------------------------------

// A contiguous out of `sizes` and N inputs read at element strides, with
// size-1 dims dropped and mergeable neighbours coalesced, so that the common
// cases collapse to one long row. The innermost dim is ndim - 1; out's stride
// there is always 1.
template <int N>
struct Plan {
  int32_t ndim = 1;
  int64_t sizes[kMaxDims];
  int64_t out_strides[kMaxDims];
  int64_t in_strides[N > 0 ? N : 1][kMaxDims];

  Plan() = default;
  // in_strides_full[k][d]: stride of input k along out dim d.
  Plan(const int64_t* out_sizes, int32_t dim, const int64_t (*in_strides_full)[kMaxDims]) {
    int32_t n = 0;  // built innermost-first, reversed at the end
    int64_t running = 1;
    for (int32_t d = dim - 1; d >= 0; --d) {
      int64_t size = out_sizes[d];
      int64_t ostride = running;
      running *= size;
      if (size == 1) continue;
      bool merge = n > 0 && ostride == out_strides[n - 1] * sizes[n - 1];
      for (int k = 0; k < N && merge; ++k) merge = in_strides_full[k][d] == in_strides[k][n - 1] * sizes[n - 1];
      if (merge) {
        sizes[n - 1] *= size;
        continue;
      }
      sizes[n] = size;
      out_strides[n] = ostride;
      for (int k = 0; k < N; ++k) in_strides[k][n] = in_strides_full[k][d];
      ++n;
    }
    if (n == 0) {
      sizes[0] = 1;
      out_strides[0] = 1;
      for (int k = 0; k < N; ++k) in_strides[k][0] = 0;
      n = 1;
    }
    for (int32_t i = 0, j = n - 1; i < j; ++i, --j) {
      std::swap(sizes[i], sizes[j]);
      std::swap(out_strides[i], out_strides[j]);
      for (int k = 0; k < N; ++k) std::swap(in_strides[k][i], in_strides[k][j]);
    }
    ndim = n;
  }

  int64_t inner() const { return sizes[ndim - 1]; }
  int64_t inner_stride(int k) const { return in_strides[k][ndim - 1]; }

  // Calls f(out_offset, in_offsets, inner) once per row of the innermost dim.
  template <typename F>
  void for_each_row(F&& f) const {
    int64_t rows = 1;
    for (int32_t d = 0; d + 1 < ndim; ++d) rows *= sizes[d];
    int64_t idx[kMaxDims] = {0};
    int64_t out_off = 0;
    int64_t in_off[N > 0 ? N : 1] = {0};
    const int64_t n = inner();
    for (int64_t r = 0; r < rows; ++r) {
      f(out_off, static_cast<const int64_t*>(in_off), n);
      for (int32_t d = ndim - 2; d >= 0; --d) {
        if (++idx[d] < sizes[d]) {
          out_off += out_strides[d];
          for (int k = 0; k < N; ++k) in_off[k] += in_strides[k][d];
          break;
        }
        out_off -= out_strides[d] * (sizes[d] - 1);
        for (int k = 0; k < N; ++k) in_off[k] -= in_strides[k][d] * (sizes[d] - 1);
        idx[d] = 0;
      }
    }
  }
};

// A transposing copy: out's inner dim reads the input at stride `plan.inner_stride(0)`
// while out dim `j` reads it at stride 1. Copies in square tiles so that both
// sides stay in cache; the other dims are iterated around the tiles.
template <typename W>
void tiled_transpose_copy(W* o, const W* x, const Plan<1>& plan, int32_t j) {
  constexpr int64_t kTile = 16;
  const int32_t last = plan.ndim - 1;
  const int64_t rows = plan.sizes[j], cols = plan.sizes[last];
  const int64_t row_stride = plan.out_strides[j], col_stride = plan.in_strides[0][last];
  int64_t outer = 1;
  for (int32_t d = 0; d < last; ++d) outer *= d == j ? 1 : plan.sizes[d];
  int64_t idx[kMaxDims] = {0};
  int64_t oo = 0, io = 0;
  for (int64_t r = 0; r < outer; ++r) {
    for (int64_t a0 = 0; a0 < rows; a0 += kTile) {
      const int64_t a1 = a0 + kTile < rows ? a0 + kTile : rows;
      for (int64_t b0 = 0; b0 < cols; b0 += kTile) {
        const int64_t b1 = b0 + kTile < cols ? b0 + kTile : cols;
        for (int64_t a = a0; a < a1; ++a) {
          W* dst = o + oo + a * row_stride;
          const W* src = x + io + a;
          for (int64_t b = b0; b < b1; ++b) dst[b] = src[b * col_stride];
        }
      }
    }
    for (int32_t d = last - 1; d >= 0; --d) {
      if (d == j) continue;
      if (++idx[d] < plan.sizes[d]) {
        oo += plan.out_strides[d];
        io += plan.in_strides[0][d];
        break;
      }
      oo -= plan.out_strides[d] * (plan.sizes[d] - 1);
      io -= plan.in_strides[0][d] * (plan.sizes[d] - 1);
      idx[d] = 0;
    }
  }
}

// Copies elements of `elem_size` bytes from `in` (read at the plan's input
// strides) to the contiguous `out`. Rows with unit stride become memcpy;
// transposes go through cache-sized tiles.
inline void strided_copy(void* out, const void* in, size_t elem_size, const Plan<1>& plan) {
  auto run = [&](auto tag) {
    using W = decltype(tag);
    W* o = static_cast<W*>(out);
    const W* x = static_cast<const W*>(in);
    const int64_t s = plan.inner_stride(0);
    if (s != 0 && s != 1) {
      for (int32_t j = plan.ndim - 2; j >= 0; --j) {
        if (plan.in_strides[0][j] == 1) {
          tiled_transpose_copy(o, x, plan, j);
          return;
        }
      }
    }
    plan.for_each_row([&](int64_t oo, const int64_t* io, int64_t n) {
      W* dst = o + oo;
      const W* src = x + io[0];
      if (s == 1) {
        std::memmove(dst, src, static_cast<size_t>(n) * sizeof(W));
      } else if (s == 0) {
        const W v = src[0];
        for (int64_t i = 0; i < n; ++i) dst[i] = v;
      } else {
        for (int64_t i = 0; i < n; ++i) dst[i] = src[i * s];
      }
    });
  };
  switch (elem_size) {
    case 1: run(uint8_t{}); break;
    case 2: run(uint16_t{}); break;
    case 4: run(uint32_t{}); break;
    default: run(uint64_t{}); break;  // 8; callers never pass other sizes
  }
}

// ---------------------------------------------------------------------------
// Converting loads and stores (the mixed-dtype path)
// ---------------------------------------------------------------------------

template <typename CT>
using LoadFn = CT (*)(const void*, int64_t);
template <typename V>
using StoreFn = void (*)(void*, int64_t, V);

template <typename CT, typename T>
CT load_as(const void* p, int64_t i) {
  if constexpr (std::is_same_v<T, bool>) {
    // Read bools as bytes: any non-zero byte is true.
    return convert<CT>(static_cast<const uint8_t*>(p)[i] != 0);
  } else {
    return convert<CT>(static_cast<const T*>(p)[i]);
  }
}
template <typename T, typename V>
void store_as(void* p, int64_t i, V v) {
  static_cast<T*>(p)[i] = convert<T>(v);
}

template <typename CT>
LoadFn<CT> loader_for(ScalarType dtype) {
  LoadFn<CT> fn = nullptr;
  dispatch_storage(dtype, [&](auto tag) { fn = &load_as<CT, decltype(tag)>; });
  return fn;
}
template <typename V>
StoreFn<V> storer_for(ScalarType dtype) {
  StoreFn<V> fn = nullptr;
  dispatch_storage(dtype, [&](auto tag) { fn = &store_as<decltype(tag), V>; });
  return fn;
}

// ---------------------------------------------------------------------------
// The elementwise engine
// ---------------------------------------------------------------------------

namespace detail {

// How the fast path stores a T: bools as bytes, which GCC can vectorize
// (it has no vector type for bool) and which reads any non-zero byte as true.
template <typename T>
using Storage = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;

template <typename T>
inline T from_storage(Storage<T> v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else {
    return v;
  }
}

template <typename OT, typename Op, typename Ptrs, typename CTuple, size_t... I>
struct FastRows {
  // Input I is broadcast along the row iff bit I of Mask is set.
  template <unsigned Mask>
  static void row(Storage<OT>* o, const Ptrs& p, int64_t n, Op& op) {
    const auto first = std::make_tuple(std::get<I>(p)[0]...);
    for (int64_t i = 0; i < n; ++i) {
      o[i] = static_cast<Storage<OT>>(convert<OT>(op(from_storage<std::tuple_element_t<I, CTuple>>(
          ((Mask >> I) & 1u) ? std::get<I>(first) : std::get<I>(p)[i])...)));
    }
  }
  // Every input broadcast along a row of length > 1 cannot happen (out's
  // size is some input's size), so that mask is never instantiated.
  template <unsigned Mask>
  static void dispatch(unsigned mask, Storage<OT>* o, const Ptrs& p, int64_t n, Op& op) {
    if (mask == Mask) {
      row<Mask>(o, p, n, op);
    } else if constexpr (Mask + 2 < (1u << sizeof...(I))) {
      dispatch<Mask + 1>(mask, o, p, n, op);
    }
  }
};

// The plan over out's shape; inputs marked `converted` (a single element
// converted to a local) are read at stride 0. Type-independent, so not inlined
// into every instantiation.
template <int N>
__attribute__((noinline)) void build_plan(const Operand* ins, const int64_t* sizes, int32_t dim,
                                          const bool* converted, Plan<N>* plan) {
  int64_t full[N][kMaxDims];
  for (int k = 0; k < N; ++k) {
    if (converted[k]) {
      for (int32_t d = 0; d < dim; ++d) full[k][d] = 0;
    } else {
      broadcast_strides(ins[k], sizes, dim, full[k]);
    }
  }
  *plan = Plan<N>(sizes, dim, full);
}

// Broadcast shape of `ins`, then out resized to it.
template <int N>
__attribute__((noinline)) Error broadcast_and_resize(KernelContext& ctx, const Operand* ins, Tensor& out,
                                                     int64_t* sizes, int32_t* dim) {
  ET_CHECK_OK(broadcast_shape(ctx, ins, N, sizes, dim));
  return resize_out(ctx, out, sizes, *dim);
}

template <typename OT, typename... CTs, typename Op, size_t... I>
Error run_elementwise(KernelContext& ctx, const Operand* ins, Tensor& out, Op& op, std::index_sequence<I...>) {
  constexpr int N = sizeof...(CTs);
  static_assert(N >= 1, "elementwise needs an input");
  int64_t sizes[kMaxDims];
  int32_t dim = 0;
  ET_CHECK_OK(broadcast_and_resize<N>(ctx, ins, out, sizes, &dim));
  if (out.numel() == 0) return Error::ok();

  // Inputs not in their compute type go through converting loaders, except
  // single elements, which are converted once here.
  std::tuple<CTs...> single{};
  const std::tuple<LoadFn<CTs>...> loaders{loader_for<CTs>(ins[I].dtype)...};
  const void* data[N] = {ins[I].data...};
  bool direct[N] = {(ins[I].dtype == DtypeOf<CTs>::value)...};
  bool converted[N] = {};
  const Operand* bad = nullptr;
  auto prepare = [&](auto index) {
    constexpr size_t k = decltype(index)::value;
    if (direct[k]) return;
    if (std::get<k>(loaders) == nullptr) {
      if (bad == nullptr) bad = &ins[k];
    } else if (ins[k].numel() == 1) {
      std::get<k>(single) = std::get<k>(loaders)(ins[k].data, 0);
      data[k] = &std::get<k>(single);
      direct[k] = converted[k] = true;
    }
  };
  (prepare(std::integral_constant<size_t, I>{}), ...);
  constexpr const char* kConvertible = "float32, float64, float16, bfloat16, int64, int32, int16, int8, uint8, bool";
  if (bad) return unsupported_dtype(ctx, bad->name, bad->dtype, kConvertible);
  const bool out_direct = out.dtype() == DtypeOf<OT>::value;
  const StoreFn<OT> store = storer_for<OT>(out.dtype());
  if (!out_direct && store == nullptr) return unsupported_dtype(ctx, "out", out.dtype(), kConvertible);

  Plan<N> plan;
  build_plan<N>(ins, sizes, dim, converted, &plan);

  bool all_direct = out_direct;
  for (int k = 0; k < N; ++k) all_direct = all_direct && direct[k];
  if (all_direct) {
    using Ptrs = std::tuple<const Storage<CTs>*...>;
    using Rows = FastRows<OT, Op, Ptrs, std::tuple<CTs...>, I...>;
    Storage<OT>* o = out.data_as<Storage<OT>>();
    const Ptrs base{static_cast<const Storage<CTs>*>(data[I])...};
    // Contiguous inputs only ever have inner strides 0 (broadcast) or 1; a
    // single-element row reads index 0 whatever the strides.
    unsigned mask = 0;
    bool unit = true;
    for (int k = 0; k < N; ++k) {
      const int64_t s = plan.inner_stride(k);
      if (s == 0) mask |= 1u << k;
      unit = unit && (s == 0 || s == 1);
    }
    if (plan.inner() == 1) mask = 0;
    if (unit && mask != (1u << N) - 1) {
      plan.for_each_row([&](int64_t oo, const int64_t* io, int64_t n) {
        const Ptrs p{(std::get<I>(base) + io[I])...};
        Rows::template dispatch<0>(mask, o + oo, p, n, op);
      });
      return Error::ok();
    }
  }

  // Mixed dtypes: convert element by element.
  const std::tuple<LoadFn<CTs>...> load{(direct[I] ? &load_as<CTs, CTs> : std::get<I>(loaders))...};
  StoreFn<OT> put = out_direct ? &store_as<OT, OT> : store;
  void* o = out.mutable_data();
  int64_t s[N];
  for (int k = 0; k < N; ++k) s[k] = plan.inner_stride(k);
  plan.for_each_row([&](int64_t oo, const int64_t* io, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      put(o, oo + i, convert<OT>(op(std::get<I>(load)(data[I], io[I] + i * s[I])...)));
    }
  });
  return Error::ok();
}

}  // namespace detail

// Broadcasts `ins` (one per CT), resizes `out` to the broadcast shape and
// writes out[i] = op(in_0[i], ..., in_{N-1}[i]), reading input k as CT_k
// and writing op's result as OT. Inputs and out of other dtypes are
// converted; the all-direct case runs as tight row loops.
template <typename OT, typename... CTs, typename Op>
Error elementwise(KernelContext& ctx, const Operand* ins, Tensor& out, Op op) {
  return detail::run_elementwise<OT, CTs...>(ctx, ins, out, op, std::index_sequence_for<CTs...>{});
}

}  // namespace kutil
}  // namespace etmlir
