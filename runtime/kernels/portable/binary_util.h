// Helpers shared by the binary and comparison kernel families (binary_ops.cpp,
// comparison_ops.cpp): PyTorch's result type of an op's inputs, and the
// operands of an op that, like PyTorch's TensorIterator, converts its inputs
// to that result type and computes in it (float for float16/bfloat16, int64
// for int16/int8/uint8; the elementwise engine converts loads and stores).
#pragma once

#include <cstring>
#include <type_traits>

#include "kernel_util.h"

namespace etmlir {
namespace binutil {

// at::result_type of `self` with `other` (a tensor or a Scalar).
inline ScalarType result_type(kutil::TensorOrScalar self, kutil::TensorOrScalar other) {
  kutil::ResultType rt;
  self.add_to(rt);
  other.add_to(rt);
  return rt.get();
}

// PyTorch's out= rule: the result type must be castable to out's dtype
// (no floating → integral, no non-bool → bool).
inline Error check_result_fits_out(KernelContext& ctx, ScalarType result, const Tensor& out) {
  if (!kutil::can_cast(result, out.dtype())) {
    return ctx.fail(ErrorCode::InvalidArgument, "result type %s can't be cast to out dtype %s", dtype_name(result),
                    dtype_name(out.dtype()));
  }
  return Error::ok();
}

// The elementwise operand for input `v` of an op that computes in CT, the
// compute type of `result`. A tensor with dims is read as it is (promotion
// makes its values exact in `result`); a Scalar or a 0-d tensor of another
// dtype is converted to `result` first, into `*storage`, so that it rounds
// or wraps as in PyTorch (0.1 against a float16 tensor is float16's 0.1,
// 300 against a uint8 tensor is 44).
template <typename CT>
kutil::Operand operand(ScalarType result, kutil::TensorOrScalar v, CT* storage, const char* name) {
  if (v.is_tensor() && (v.tensor->dim() > 0 || v.tensor->dtype() == result)) {
    return kutil::Operand::of(*v.tensor, name);
  }
  bool converted = false;
  kutil::dispatch_storage(result, [&](auto tag) {
    using R = decltype(tag);
    if (v.is_tensor()) {
      const kutil::LoadFn<R> load = kutil::loader_for<R>(v.tensor->dtype());
      if (load == nullptr) return;  // the engine names the unsupported dtype
      *storage = kutil::convert<CT>(load(v.tensor->data(), 0));
    } else {
      *storage = kutil::convert<CT>(kutil::scalar_as<R>(*v.scalar));
    }
    converted = true;
  });
  if (converted) return kutil::Operand::scalar(storage, name);
  return v.is_tensor() ? kutil::Operand::of(*v.tensor, name) : v.operand(storage, name);
}

// Which compute types an op instantiates (a lambda for bitwise ops must not
// see float, one for floor division must not see bool).
enum class Kinds {
  kFloating,  // float (also for float16/bfloat16), double
  kIntegral,  // int64 (also for int16/int8/uint8), int32, bool
  kReal,      // kFloating + int64, int32
  kAll,       // kReal + bool
};

template <Kinds K, typename F>
bool dispatch(ScalarType dtype, F&& f) {
  if constexpr (K == Kinds::kFloating) {
    return kutil::dispatch_elementwise_floating(dtype, f);
  } else if constexpr (K == Kinds::kReal) {
    return kutil::dispatch_elementwise_real(dtype, f);
  } else if constexpr (K == Kinds::kAll) {
    return kutil::dispatch_elementwise_compute(dtype, f);
  } else {
    if (dtype == ScalarType::Bool) return f(bool{}), true;
    if (dtype == ScalarType::Int32) return f(int32_t{}), true;
    if (kutil::is_integral_no_bool(dtype)) return f(int64_t{}), true;
    return false;
  }
}

// Calls f(CT{}, ins) with CT the compute type of `result` (one of K) and
// ins[N] the inputs as `operand` reads them. False if `result` is not one of K.
template <Kinds K, size_t N, typename F>
bool with_operands(ScalarType result, const kutil::TensorOrScalar (&inputs)[N], const char* const (&names)[N],
                   F&& f) {
  return dispatch<K>(result, [&](auto tag) {
    using CT = decltype(tag);
    CT storage[N] = {};
    kutil::Operand ins[N];
    for (size_t k = 0; k < N; ++k) ins[k] = operand(result, inputs[k], &storage[k], names[k]);
    f(tag, static_cast<const kutil::Operand*>(ins));
  });
}

// NaN-propagating max/min (PyTorch's maximum/minimum, clamp): two selects
// GCC can vectorize; x != x compiles away for integers.
template <typename T>
inline T max_nan(T x, T y) {
  const T m = x > y ? x : y;
  return x != x ? x : m;
}
template <typename T>
inline T min_nan(T x, T y) {
  const T m = x < y ? x : y;
  return x != x ? x : m;
}

// A string argument equals `literal`.
inline bool equals(Span<const char> s, const char* literal) {
  return s.size() == std::strlen(literal) && std::memcmp(s.data(), literal, s.size()) == 0;
}

}  // namespace binutil
}  // namespace etmlir
