// Binary elementwise kernels with PyTorch broadcasting: add, sub, mul, div
// (true and rounding), maximum, minimum, logical_and/or/xor, where, atan2,
// bitwise_and/or/xor, fmod, remainder, pow and clamp.Tensor.
//
// add/sub/mul/div/maximum/minimum/where compute in the out tensor's dtype
// (inputs of other dtypes are converted, after checking PyTorch's "result
// type can be cast to out" rule); the other arithmetic computes, like
// PyTorch, in the inputs' result type (binary_util.h) and converts to out.
// Logical ops compute in bool and may write any dtype. Integer division and
// remainders never trap: a zero divisor is an error, x / -1 wraps.
#include <cmath>
#include <type_traits>

#include "binary_util.h"
#include "generated/binary.h"
#include "kernel_util.h"

namespace etmlir {
namespace {

using binutil::check_result_fits_out;
using binutil::Kinds;
using kutil::Operand;
using kutil::TensorOrScalar;

ScalarType result_type(const Tensor& self, TensorOrScalar other) {
  return binutil::result_type(TensorOrScalar::of(self), other);
}

// Runs `make_op(T{})`'s op over self and other, computing in out's dtype T
// (one of the compute dtypes; float for float16/bfloat16 outs). A Scalar or a
// 0-d tensor of another dtype is first converted to `result` (binutil::operand),
// as PyTorch's TensorIterator converts every input to the common dtype:
// 0.7 + a float16 tensor adds float16's 0.7. `round_other` false keeps a
// Scalar `other` as it is (mul and div read it unrounded, see below).
template <typename MakeOp>
Error arith(KernelContext& ctx, ScalarType result, const Tensor& self, kutil::TensorOrScalar other, Tensor& out,
            bool round_other, MakeOp make_op) {
  Error err;
  bool ok = kutil::dispatch_elementwise_compute(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T storage[2] = {};
    Operand ins[2] = {binutil::operand(result, TensorOrScalar::of(self), &storage[0], "self"),
                      round_other ? binutil::operand(result, other, &storage[1], "other")
                                  : other.operand(&storage[1], "other")};
    err = make_op(tag, ins);
  });
  if (!ok) return kutil::unsupported_dtype(ctx, "out", out.dtype());
  return err;
}

// A Scalar argument (alpha) converted to `result` first, then to T: float16's
// 0.3 for a float16 add, as PyTorch's add takes `alpha.to<scalar_t>()`.
template <typename T>
T scalar_in(ScalarType result, const EValue& v) {
  T value = kutil::scalar_as<T>(v);
  kutil::dispatch_storage(result, [&](auto tag) {
    using R = decltype(tag);
    value = kutil::convert<T>(kutil::scalar_as<R>(v));
  });
  return value;
}

// add/sub: out = self ± alpha * other, with other and alpha in the result
// dtype (float16/bfloat16: rounded to it, then one float multiply-add and one
// rounding, as PyTorch's vectorized CPU loop).
template <bool kSub>
Error add_sub(KernelContext& ctx, const Tensor& self, kutil::TensorOrScalar other, const EValue& alpha, Tensor& out) {
  ScalarType result = result_type(self, other);
  ET_CHECK_OK(check_result_fits_out(ctx, result, out));
  if (kSub && (result == ScalarType::Bool || out.dtype() == ScalarType::Bool)) {
    return ctx.fail(ErrorCode::InvalidArgument,
                    "subtraction of bool tensors is not supported; use logical_xor or bitwise_not instead");
  }
  if (alpha.is_double() && !kutil::is_floating(result)) {
    return ctx.fail(ErrorCode::InvalidArgument, "alpha must not be a floating point number for %s inputs",
                    dtype_name(result));
  }
  return arith(ctx, result, self, other, out, /*round_other=*/true, [&](auto tag, const Operand* ins) {
    using T = decltype(tag);
    // One instantiation for every alpha: x + 1 * y == x + y exactly.
    const T a = scalar_in<T>(result, alpha);
    return kutil::elementwise<T, T, T>(ctx, ins, out, [a](T x, T y) {
      return kSub ? kutil::wrap_sub(x, kutil::wrap_mul(a, y)) : kutil::wrap_add(x, kutil::wrap_mul(a, y));
    });
  });
}

// mul and div read a Scalar or 0-d `other` unrounded when the result is
// float16/bfloat16 (PyTorch's CPU kernels take its original value as float:
// x * 0.1 is float(x) * 0.1f, rounded once); a 0-d `self` of another dtype
// converts to the result dtype like any TensorIterator input.
bool rounds_other(ScalarType result) { return !kutil::is_half_dtype(result); }

Error mul(KernelContext& ctx, const Tensor& self, kutil::TensorOrScalar other, Tensor& out) {
  const ScalarType result = result_type(self, other);
  ET_CHECK_OK(check_result_fits_out(ctx, result, out));
  return arith(ctx, result, self, other, out, rounds_other(result), [&](auto tag, const Operand* ins) {
    using T = decltype(tag);
    return kutil::elementwise<T, T, T>(ctx, ins, out, [](T x, T y) { return kutil::wrap_mul(x, y); });
  });
}

// True division: always floating point (never an integer division that could trap).
Error div(KernelContext& ctx, const Tensor& self, kutil::TensorOrScalar other, Tensor& out) {
  if (!kutil::is_floating(out.dtype())) {
    return ctx.fail(ErrorCode::InvalidArgument, "true division writes floating point, but out has dtype %s",
                    dtype_name(out.dtype()));
  }
  ScalarType result = result_type(self, other);
  if (!kutil::is_floating(result)) result = ScalarType::Float;  // integers divide as the default dtype
  Error err;
  bool ok = kutil::dispatch_elementwise_floating(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T storage[2] = {};
    Operand ins[2] = {binutil::operand(result, TensorOrScalar::of(self), &storage[0], "self"),
                      rounds_other(result) ? binutil::operand(result, other, &storage[1], "other")
                                           : other.operand(&storage[1], "other")};
    err = kutil::elementwise<T, T, T>(ctx, ins, out, [](T x, T y) { return x / y; });
  });
  if (!ok) return kutil::unsupported_dtype(ctx, "out", out.dtype(), "float32, float64, float16, bfloat16");
  return err;
}

// maximum/minimum: NaN in either input gives NaN, like PyTorch.
template <bool kMax>
Error max_min(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  kutil::ResultType rt;
  rt.add_tensor(self);
  rt.add_tensor(other);
  ET_CHECK_OK(check_result_fits_out(ctx, rt.get(), out));
  Error err;
  bool ok = kutil::dispatch_elementwise_compute(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const Operand ins[2] = {Operand::of(self, "self"), Operand::of(other, "other")};
    err = kutil::elementwise<T, T, T>(ctx, ins, out, [](T x, T y) {
      // A NaN y falls through the first select; x != x (NaN x) compiles away for
      // integers. Two plain selects: GCC vectorizes them.
      const T m = (kMax ? x > y : x < y) ? x : y;
      return x != x ? x : m;
    });
  });
  if (!ok) return kutil::unsupported_dtype(ctx, "out", out.dtype());
  return err;
}

// logical_and/or: inputs of any dtype read as `!= 0`, out of any dtype.
template <bool kAnd>
Error logical(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  const Operand ins[2] = {Operand::of(self, "self"), Operand::of(other, "other")};
  return kutil::elementwise<bool, bool, bool>(ctx, ins, out, [](bool x, bool y) { return kAnd ? (x && y) : (x || y); });
}

// logical_xor: inputs of any dtype read as `!= 0`, out of any dtype.
Error logical_xor(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  const Operand ins[2] = {Operand::of(self, "self"), Operand::of(other, "other")};
  return kutil::elementwise<bool, bool, bool>(ctx, ins, out, [](bool x, bool y) { return x != y; });
}

// Runs `run(tag, ins)` over self and other converted to `result` (see
// binutil::operand), computing in result's compute type, one of K.
template <Kinds K, typename Run>
Error in_result_type(KernelContext& ctx, ScalarType result, TensorOrScalar self, TensorOrScalar other,
                     const Tensor& out, const char* self_name, const char* other_name, Run run) {
  ET_CHECK_OK(check_result_fits_out(ctx, result, out));
  Error err;
  const TensorOrScalar inputs[2] = {self, other};
  const char* const names[2] = {self_name, other_name};
  bool ok = binutil::with_operands<K>(result, inputs, names, [&](auto tag, const Operand* ins) { err = run(tag, ins); });
  if (!ok) return kutil::unsupported_dtype(ctx, "the result type", result);
  return err;
}

// "fmod is not defined for bool tensors (self is bool, other is bool)".
Error reject_bool_result(KernelContext& ctx, const char* what, ScalarType result, const Tensor& self,
                         TensorOrScalar other) {
  if (result != ScalarType::Bool) return Error::ok();
  return ctx.fail(ErrorCode::InvalidArgument, "%s is not defined for bool (self is %s, other is %s)", what,
                  dtype_name(self.dtype()), other.is_tensor() ? dtype_name(other.tensor->dtype()) : "a bool Scalar");
}

Error division_by_zero(KernelContext& ctx) {
  return ctx.fail(ErrorCode::InvalidArgument, "integer division by zero (other has a zero element)");
}

// atan2: integer and bool inputs give float32, like PyTorch.
Error atan2(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  ScalarType result = result_type(self, TensorOrScalar::of(other));
  if (!kutil::is_floating(result)) result = ScalarType::Float;
  return in_result_type<Kinds::kFloating>(
      ctx, result, TensorOrScalar::of(self), TensorOrScalar::of(other), out, "self", "other",
      [&](auto tag, const Operand* ins) {
        using T = decltype(tag);
        return kutil::elementwise<T, T, T>(ctx, ins, out, [](T y, T x) { return std::atan2(y, x); });
      });
}

// bitwise_and/or/xor on integral and bool inputs: wrapped in the compute
// type, the low bits are those of the narrow type's operation.
enum class Bitwise { kAnd, kOr, kXor };

template <Bitwise kOp>
Error bitwise(KernelContext& ctx, const Tensor& self, TensorOrScalar other, Tensor& out) {
  const ScalarType result = result_type(self, other);
  if (!kutil::is_integral_no_bool(result) && result != ScalarType::Bool) {
    return ctx.fail(ErrorCode::InvalidArgument,
                    "bitwise ops need integral or bool inputs, but self (%s) and other (%s) give %s", dtype_name(self.dtype()),
                    other.is_tensor() ? dtype_name(other.tensor->dtype()) : other.scalar->is_double() ? "a float Scalar" : "a Scalar",
                    dtype_name(result));
  }
  return in_result_type<Kinds::kIntegral>(
      ctx, result, TensorOrScalar::of(self), other, out, "self", "other", [&](auto tag, const Operand* ins) {
        using T = decltype(tag);
        return kutil::elementwise<T, T, T>(ctx, ins, out, [](T x, T y) {
          if constexpr (kOp == Bitwise::kAnd) {
            return static_cast<T>(x & y);
          } else if constexpr (kOp == Bitwise::kOr) {
            return static_cast<T>(x | y);
          } else {
            return static_cast<T>(x ^ y);
          }
        });
      });
}

// PyTorch's c10::div_floor_floating: the quotient rounded down, exact where
// floor(x / y) would round x / y first; IEEE results for a zero divisor.
template <typename T>
inline T div_floor_floating(T x, T y) {
  if (y == 0) return x / y;
  const T mod = std::fmod(x, y);
  T div = (x - mod) / y;
  if (mod != 0 && (y < 0) != (mod < 0)) div -= T(1);
  if (div == 0) return std::copysign(T(0), x / y);
  T floordiv = std::floor(div);
  if (div - floordiv > T(0.5)) floordiv += T(1);
  return floordiv;
}

// x / y rounded toward zero (kFloor false) or down. A zero divisor sets
// *zero (the caller fails); x / -1 is -x wrapped, where C++ would trap.
template <bool kFloor, typename T>
inline T div_int(T x, T y, bool* zero) {
  *zero |= y == 0;
  const bool minus_one = y == T(-1);
  const T d = (y == 0 || minus_one) ? T(1) : y;
  T q = x / d;
  if (kFloor && x % d != 0 && (x < 0) != (d < 0)) q = static_cast<T>(q - 1);
  return minus_one ? kutil::wrap_sub(T(0), x) : q;
}

// div with rounding_mode "trunc" or "floor" (None is true division).
Error div_rounding(KernelContext& ctx, const Tensor& self, TensorOrScalar other,
                   const std::optional<Span<const char>>& rounding_mode, Tensor& out) {
  if (!rounding_mode) return div(ctx, self, other, out);
  const bool floor = binutil::equals(*rounding_mode, "floor");
  if (!floor && !binutil::equals(*rounding_mode, "trunc")) {
    return ctx.fail(ErrorCode::InvalidArgument, "rounding_mode must be None, \"trunc\" or \"floor\", got \"%.*s\"",
                    static_cast<int>(rounding_mode->size()), rounding_mode->data());
  }
  const ScalarType result = result_type(self, other);
  ET_CHECK_OK(reject_bool_result(ctx, floor ? "floor division" : "trunc division", result, self, other));
  bool zero = false;
  ET_CHECK_OK(in_result_type<Kinds::kReal>(
      ctx, result, TensorOrScalar::of(self), other, out, "self", "other", [&](auto tag, const Operand* ins) {
        using T = decltype(tag);
        if constexpr (std::is_floating_point_v<T>) {
          if (floor) return kutil::elementwise<T, T, T>(ctx, ins, out, [](T x, T y) { return div_floor_floating(x, y); });
          return kutil::elementwise<T, T, T>(ctx, ins, out, [](T x, T y) { return std::trunc(x / y); });
        } else {
          bool* z = &zero;
          if (floor) return kutil::elementwise<T, T, T>(ctx, ins, out, [z](T x, T y) { return div_int<true>(x, y, z); });
          return kutil::elementwise<T, T, T>(ctx, ins, out, [z](T x, T y) { return div_int<false>(x, y, z); });
        }
      }));
  return zero ? division_by_zero(ctx) : Error::ok();
}

// fmod (the remainder has self's sign) and remainder (other's sign, Python's %).
template <bool kRemainder>
Error mod(KernelContext& ctx, const Tensor& self, TensorOrScalar other, Tensor& out) {
  const ScalarType result = result_type(self, other);
  ET_CHECK_OK(reject_bool_result(ctx, kRemainder ? "remainder" : "fmod", result, self, other));
  bool zero = false;
  ET_CHECK_OK(in_result_type<Kinds::kReal>(
      ctx, result, TensorOrScalar::of(self), other, out, "self", "other", [&](auto tag, const Operand* ins) {
        using T = decltype(tag);
        if constexpr (std::is_floating_point_v<T>) {
          return kutil::elementwise<T, T, T>(ctx, ins, out, [](T x, T y) {
            T r = std::fmod(x, y);  // NaN for a zero divisor
            if (kRemainder && r != 0 && (y < 0) != (r < 0)) r += y;
            return r;
          });
        } else {
          bool* z = &zero;
          return kutil::elementwise<T, T, T>(ctx, ins, out, [z](T x, T y) {
            *z |= y == 0;
            const T d = (y == 0 || y == T(-1)) ? T(1) : y;  // x % -1 is 0 (and would trap at the minimum)
            T r = static_cast<T>(x % d);
            if (kRemainder && r != 0 && (y < 0) != (r < 0)) r = static_cast<T>(r + d);
            return r;
          });
        }
      }));
  return zero ? division_by_zero(ctx) : Error::ok();
}

// PyTorch's integer pow: repeated squaring, wrapping; a negative exponent
// gives 1 for base 1, ±1 for base -1 and 0 otherwise.
template <typename T>
inline T pow_int(T base, T exp) {
  if (exp < 0) {
    if (base == 1) return T(1);
    if (base == T(-1)) return (exp & 1) ? T(-1) : T(1);
    return T(0);
  }
  T result = 1;
  while (exp != 0) {
    if (exp & 1) result = kutil::wrap_mul(result, base);
    exp = static_cast<T>(exp >> 1);
    base = kutil::wrap_mul(base, base);
  }
  return result;
}

template <typename T>
inline T pow_of(T base, T exp) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::pow(base, exp);
  } else {
    return pow_int(base, exp);
  }
}

// pow with two tensors, or a Scalar base (pow.Scalar).
Error pow_tensor(KernelContext& ctx, TensorOrScalar self, const Tensor& exponent, Tensor& out) {
  const ScalarType result = binutil::result_type(self, TensorOrScalar::of(exponent));
  if (result == ScalarType::Bool) {
    return ctx.fail(ErrorCode::InvalidArgument, "pow is not defined for bool (self and exponent are bool)");
  }
  return in_result_type<Kinds::kReal>(ctx, result, self, TensorOrScalar::of(exponent), out, "self", "exponent",
                                      [&](auto tag, const Operand* ins) {
                                        using T = decltype(tag);
                                        return kutil::elementwise<T, T, T>(ctx, ins, out, [](T x, T y) { return pow_of(x, y); });
                                      });
}

// pow with a Scalar exponent: PyTorch's fast paths for 2, 3, -2 and (except
// float16) 0.5, -0.5 and -1, whose results differ from std::pow at -0 and -inf.
Error pow_scalar_exponent(KernelContext& ctx, const Tensor& self, const EValue& exponent, Tensor& out) {
  const ScalarType result = result_type(self, TensorOrScalar::of(exponent));
  if (result == ScalarType::Bool) {
    return ctx.fail(ErrorCode::InvalidArgument, "pow is not defined for bool (self is bool, exponent is a bool Scalar)");
  }
  if ((kutil::is_integral_no_bool(self.dtype()) || self.dtype() == ScalarType::Bool) && exponent.is_int() &&
      exponent.to_int() < 0) {
    return ctx.fail(ErrorCode::InvalidArgument,
                    "integers to negative integer powers are not allowed (self is %s, exponent is %lld)",
                    dtype_name(self.dtype()), static_cast<long long>(exponent.to_int()));
  }
  const bool root_paths = result != ScalarType::Half;
  return in_result_type<Kinds::kReal>(
      ctx, result, TensorOrScalar::of(self), TensorOrScalar::of(exponent), out, "self", "exponent",
      [&](auto tag, const Operand* ins) {
        using T = decltype(tag);
        const T e = *static_cast<const T*>(ins[1].data);  // converted to the result type
        auto unary = [&](auto fn) { return kutil::elementwise<T, T>(ctx, ins, out, fn); };
        if constexpr (std::is_floating_point_v<T>) {
          if (e == T(2)) return unary([](T x) { return x * x; });
          if (e == T(3)) return unary([](T x) { return x * x * x; });
          if (e == T(-2)) return unary([](T x) { return T(1) / (x * x); });
          if (root_paths && e == T(0.5)) return unary([](T x) { return std::sqrt(x); });
          if (root_paths && e == T(-0.5)) return unary([](T x) { return T(1) / std::sqrt(x); });
          if (root_paths && e == T(-1)) return unary([](T x) { return T(1) / x; });
          return unary([e](T x) { return std::pow(x, e); });
        } else {
          if (e == 2) return unary([](T x) { return kutil::wrap_mul(x, x); });
          return unary([e](T x) { return pow_int(x, e); });
        }
      });
}

// clamp with tensor bounds: NaN in self or a bound gives NaN; min > max gives max.
Error clamp_tensor(KernelContext& ctx, const Tensor& self, const Tensor* min, const Tensor* max, Tensor& out) {
  if (min == nullptr && max == nullptr) {
    return ctx.fail(ErrorCode::InvalidArgument, "at least one of min and max must not be None");
  }
  kutil::ResultType rt;
  rt.add_tensor(self);
  if (min) rt.add_tensor(*min);
  if (max) rt.add_tensor(*max);
  const ScalarType result = rt.get();
  ET_CHECK_OK(check_result_fits_out(ctx, result, out));
  const TensorOrScalar bound = TensorOrScalar::of(min ? *min : *max);
  Error err;
  bool ok;
  if (min && max) {
    const TensorOrScalar inputs[3] = {TensorOrScalar::of(self), bound, TensorOrScalar::of(*max)};
    const char* const names[3] = {"self", "min", "max"};
    ok = binutil::with_operands<Kinds::kAll>(result, inputs, names, [&](auto tag, const Operand* ins) {
      using T = decltype(tag);
      err = kutil::elementwise<T, T, T, T>(ctx, ins, out, [](T x, T lo, T hi) {
        return binutil::min_nan(binutil::max_nan(x, lo), hi);
      });
    });
  } else {
    const TensorOrScalar inputs[2] = {TensorOrScalar::of(self), bound};
    const char* const names[2] = {"self", min ? "min" : "max"};
    ok = binutil::with_operands<Kinds::kAll>(result, inputs, names, [&](auto tag, const Operand* ins) {
      using T = decltype(tag);
      if (min) {
        err = kutil::elementwise<T, T, T>(ctx, ins, out, [](T x, T lo) { return binutil::max_nan(x, lo); });
      } else {
        err = kutil::elementwise<T, T, T>(ctx, ins, out, [](T x, T hi) { return binutil::min_nan(x, hi); });
      }
    });
  }
  if (!ok) return kutil::unsupported_dtype(ctx, "the result type", result);
  return err;
}

}  // namespace

namespace portable {

Error add_out(KernelContext& ctx, const Tensor& self, const Tensor& other, const EValue& alpha, Tensor& out) {
  return add_sub<false>(ctx, self, TensorOrScalar::of(other), alpha, out);
}
Error add_scalar_out(KernelContext& ctx, const Tensor& self, const EValue& other, const EValue& alpha, Tensor& out) {
  return add_sub<false>(ctx, self, TensorOrScalar::of(other), alpha, out);
}
Error sub_out(KernelContext& ctx, const Tensor& self, const Tensor& other, const EValue& alpha, Tensor& out) {
  return add_sub<true>(ctx, self, TensorOrScalar::of(other), alpha, out);
}
Error sub_scalar_out(KernelContext& ctx, const Tensor& self, const EValue& other, const EValue& alpha, Tensor& out) {
  return add_sub<true>(ctx, self, TensorOrScalar::of(other), alpha, out);
}
Error mul_out(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  return mul(ctx, self, TensorOrScalar::of(other), out);
}
Error mul_scalar_out(KernelContext& ctx, const Tensor& self, const EValue& other, Tensor& out) {
  return mul(ctx, self, TensorOrScalar::of(other), out);
}
Error div_out(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  return div(ctx, self, TensorOrScalar::of(other), out);
}
Error div_scalar_out(KernelContext& ctx, const Tensor& self, const EValue& other, Tensor& out) {
  return div(ctx, self, TensorOrScalar::of(other), out);
}
Error maximum_out(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  return max_min<true>(ctx, self, other, out);
}
Error minimum_out(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  return max_min<false>(ctx, self, other, out);
}
Error logical_and_out(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  return logical<true>(ctx, self, other, out);
}
Error logical_or_out(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  return logical<false>(ctx, self, other, out);
}

Error where_out(KernelContext& ctx, const Tensor& cond, const Tensor& self, const Tensor& other, Tensor& out) {
  if (cond.dtype() != ScalarType::Bool && cond.dtype() != ScalarType::UInt8) {
    return ctx.fail(ErrorCode::InvalidArgument, "condition must be a bool tensor, got %s", dtype_name(cond.dtype()));
  }
  kutil::ResultType rt;
  rt.add_tensor(self);
  rt.add_tensor(other);
  ET_CHECK_OK(check_result_fits_out(ctx, rt.get(), out));
  Error err;
  bool ok = kutil::dispatch_elementwise_compute(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const Operand ins[3] = {Operand::of(cond, "condition"), Operand::of(self, "self"), Operand::of(other, "other")};
    err = kutil::elementwise<T, bool, T, T>(ctx, ins, out, [](bool c, T x, T y) { return c ? x : y; });
  });
  if (!ok) return kutil::unsupported_dtype(ctx, "out", out.dtype());
  return err;
}

Error logical_xor_out(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  return logical_xor(ctx, self, other, out);
}
Error atan2_out(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  return atan2(ctx, self, other, out);
}
Error bitwise_and_tensor_out(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  return bitwise<Bitwise::kAnd>(ctx, self, TensorOrScalar::of(other), out);
}
Error bitwise_and_scalar_out(KernelContext& ctx, const Tensor& self, const EValue& other, Tensor& out) {
  return bitwise<Bitwise::kAnd>(ctx, self, TensorOrScalar::of(other), out);
}
Error bitwise_or_tensor_out(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  return bitwise<Bitwise::kOr>(ctx, self, TensorOrScalar::of(other), out);
}
Error bitwise_or_scalar_out(KernelContext& ctx, const Tensor& self, const EValue& other, Tensor& out) {
  return bitwise<Bitwise::kOr>(ctx, self, TensorOrScalar::of(other), out);
}
Error bitwise_xor_tensor_out(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  return bitwise<Bitwise::kXor>(ctx, self, TensorOrScalar::of(other), out);
}
Error bitwise_xor_scalar_out(KernelContext& ctx, const Tensor& self, const EValue& other, Tensor& out) {
  return bitwise<Bitwise::kXor>(ctx, self, TensorOrScalar::of(other), out);
}
Error div_out_mode(KernelContext& ctx, const Tensor& self, const Tensor& other,
                   std::optional<Span<const char>> rounding_mode, Tensor& out) {
  return div_rounding(ctx, self, TensorOrScalar::of(other), rounding_mode, out);
}
Error div_scalar_mode_out(KernelContext& ctx, const Tensor& self, const EValue& other,
                          std::optional<Span<const char>> rounding_mode, Tensor& out) {
  return div_rounding(ctx, self, TensorOrScalar::of(other), rounding_mode, out);
}
Error fmod_tensor_out(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  return mod<false>(ctx, self, TensorOrScalar::of(other), out);
}
Error fmod_scalar_out(KernelContext& ctx, const Tensor& self, const EValue& other, Tensor& out) {
  return mod<false>(ctx, self, TensorOrScalar::of(other), out);
}
Error remainder_tensor_out(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  return mod<true>(ctx, self, TensorOrScalar::of(other), out);
}
Error remainder_scalar_out(KernelContext& ctx, const Tensor& self, const EValue& other, Tensor& out) {
  return mod<true>(ctx, self, TensorOrScalar::of(other), out);
}
Error pow_tensor_tensor_out(KernelContext& ctx, const Tensor& self, const Tensor& exponent, Tensor& out) {
  return pow_tensor(ctx, TensorOrScalar::of(self), exponent, out);
}
Error pow_tensor_scalar_out(KernelContext& ctx, const Tensor& self, const EValue& exponent, Tensor& out) {
  return pow_scalar_exponent(ctx, self, exponent, out);
}
Error pow_scalar_out(KernelContext& ctx, const EValue& self, const Tensor& exponent, Tensor& out) {
  return pow_tensor(ctx, TensorOrScalar::of(self), exponent, out);
}
Error clamp_tensor_out(KernelContext& ctx, const Tensor& self, const Tensor* min, const Tensor* max, Tensor& out) {
  return clamp_tensor(ctx, self, min, max, out);
}

}  // namespace portable
}  // namespace etmlir
