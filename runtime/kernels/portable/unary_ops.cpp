// Unary elementwise kernels, in three shapes (as PyTorch's out= variants):
//  * same dtype: out has self's dtype (relu, hardtanh, clamp, neg, abs, sign,
//    ceil/floor/round/trunc, bitwise_not); float16/bfloat16 compute in float,
//    int16/int8/uint8 in int64 (the elementwise engine converts);
//  * floating result: any input dtype (integers and bool compute in float32,
//    like PyTorch), out of any floating dtype (exp, log, sin, erf, sqrt, ...);
//  * floating only: self and out of one floating dtype (gelu, silu,
//    hardswish, elu, leaky_relu).
// logical_not writes any dtype, isinf/isnan write bool. Out is resized to
// self's shape.
//
// Float math runs through unary_util.h's vectorizable functions (within
// ~2 ulp); double uses libm.
#include <cmath>
#include <cstring>
#include <limits>

#include "generated/unary.h"
#include "kernel_util.h"
#include "unary_util.h"

namespace etmlir {
namespace {

using kutil::Operand;

Error check_same_dtype(KernelContext& ctx, ScalarType expected, const Tensor& out, const char* what = "self's dtype") {
  if (out.dtype() != expected) {
    return ctx.fail(ErrorCode::InvalidArgument, "out has dtype %s; expected %s (%s)", dtype_name(out.dtype()),
                    dtype_name(expected), what);
  }
  return Error::ok();
}

Error reject_bool(KernelContext& ctx, const Tensor& self, const char* hint = "") {
  if (self.dtype() == ScalarType::Bool) {
    return ctx.fail(ErrorCode::InvalidArgument, "self is a bool tensor, which this op does not support%s", hint);
  }
  return Error::ok();
}

bool equals(Span<const char> s, const char* literal) {
  const size_t n = std::strlen(literal);
  return s.size() == n && std::memcmp(s.data(), literal, n) == 0;
}

// ---------------------------------------------------------------------------
// Scalar arguments converted like c10::checked_convert
// ---------------------------------------------------------------------------

// Whether Scalar `v` overflows dtype S under c10's rules: integers may not
// leave S's range (unsigned S also takes negatives down to -max, which wrap),
// floating values may not be NaN or out of range for an integral S, finite
// values may not exceed a floating S's range.
template <typename S>
bool overflows(const EValue& v) {
  if constexpr (kutil::is_half_v<S> || std::is_floating_point_v<S>) {
    double max = std::is_same_v<S, kutil::Half>       ? 65504.0
                 : std::is_same_v<S, kutil::BFloat16> ? 3.38953138925153547590e38
                 : std::is_same_v<S, float>           ? static_cast<double>(std::numeric_limits<float>::max())
                                                      : std::numeric_limits<double>::max();
    const double d = v.is_double() ? v.to_double() : v.is_bool() ? double(v.to_bool()) : double(v.to_int());
    return std::isfinite(d) && std::fabs(d) > max;
  } else {
    using Limits = std::numeric_limits<S>;
    if (v.is_double()) {
      const double d = v.to_double();
      if (d != d) return true;
      if constexpr (std::is_same_v<S, int64_t>) {
        return d < -9223372036854775808.0 || d >= 9223372036854775808.0;  // INT64_MAX is no double
      } else {
        return d < static_cast<double>(Limits::lowest()) || d > static_cast<double>(Limits::max());
      }
    }
    const int64_t i = v.is_bool() ? int64_t(v.to_bool()) : v.to_int();
    if constexpr (!Limits::is_signed) {
      return i > static_cast<int64_t>(Limits::max()) ||
             (i < 0 && static_cast<uint64_t>(0) - static_cast<uint64_t>(i) > Limits::max());
    } else {
      return i < static_cast<int64_t>(Limits::lowest()) || i > static_cast<int64_t>(Limits::max());
    }
  }
}

// Scalar `v` as the storage dtype `dtype` (the op's scalar_t), then as the
// compute type T; an error naming `name` where PyTorch reports an overflow.
template <typename T>
Error checked_scalar(KernelContext& ctx, const EValue& v, ScalarType dtype, const char* name, T* result) {
  bool overflow = false;
  const bool known = kutil::dispatch_storage(dtype, [&](auto tag) {
    using S = decltype(tag);
    if constexpr (!std::is_same_v<S, bool>) {
      overflow = overflows<S>(v);
      if (!overflow) *result = kutil::convert<T>(kutil::scalar_as<S>(v));
    }
  });
  if (!known || dtype == ScalarType::Bool) return kutil::unsupported_dtype(ctx, "out", dtype);
  if (overflow) {
    char text[32];
    if (v.is_double()) {
      std::snprintf(text, sizeof(text), "%g", v.to_double());
    } else {
      std::snprintf(text, sizeof(text), "%lld", static_cast<long long>(v.is_bool() ? v.to_bool() : v.to_int()));
    }
    return ctx.fail(ErrorCode::InvalidArgument, "%s = %s cannot be converted to %s without overflow", name, text,
                    dtype_name(dtype));
  }
  return Error::ok();
}

// ---------------------------------------------------------------------------
// Drivers
// ---------------------------------------------------------------------------

constexpr const char* kRealDtypes = "float32, float64, float16, bfloat16, int64, int32, int16, int8, uint8";
constexpr const char* kFloatDtypes = "float32, float64, float16, bfloat16";

// Same dtype in and out: out = op(self) computed in T (float for the half
// types, int64 for the small integers); make_op(T{}) builds the op.
template <typename MakeOp>
Error same_dtype_unary(KernelContext& ctx, const Tensor& self, Tensor& out, MakeOp make_op) {
  ET_CHECK_OK(check_same_dtype(ctx, self.dtype(), out));
  Error err;
  bool ok = kutil::dispatch_elementwise_real(out.dtype(), [&](auto tag) {
    const Operand ins[1] = {Operand::of(self, "self")};
    err = kutil::elementwise<decltype(tag), decltype(tag)>(ctx, ins, out, make_op(tag));
  });
  if (!ok) return kutil::unsupported_dtype(ctx, "self", self.dtype(), kRealDtypes);
  return err;
}

// Floating only, out of self's dtype.
template <typename MakeOp>
Error floating_only_unary(KernelContext& ctx, const Tensor& self, Tensor& out, MakeOp make_op) {
  if (!kutil::is_floating(self.dtype())) {
    return kutil::unsupported_dtype(ctx, "self", self.dtype(), kFloatDtypes);
  }
  ET_CHECK_OK(check_same_dtype(ctx, self.dtype(), out));
  Error err;
  kutil::dispatch_elementwise_floating(out.dtype(), [&](auto tag) { err = make_op(tag); });
  return err;
}

// A floating-result op: f(float) (vectorizable) and d(double) (libm). Ops
// whose float path covers only |x| <= kFastBound also give slow(float).
struct FloatFn {
  static constexpr float kFastBound = 0.0f;  // 0: f covers every input
};

// out = Fn(self) for any self dtype, computed in double when self or out is
// float64 and in float otherwise (integers and bool as float32, like PyTorch).
template <typename Fn>
Error floating_unary(KernelContext& ctx, const Tensor& self, Tensor& out) {
  if (!kutil::is_floating(out.dtype())) {
    return ctx.fail(ErrorCode::InvalidArgument,
                    "the result is floating point (self has dtype %s), but out has dtype %s; expected one of %s",
                    dtype_name(self.dtype()), dtype_name(out.dtype()), kFloatDtypes);
  }
  const Operand ins[1] = {Operand::of(self, "self")};
  if (self.dtype() == ScalarType::Double || out.dtype() == ScalarType::Double) {
    return kutil::elementwise<double, double>(ctx, ins, out, [](double x) { return Fn::d(x); });
  }
  if constexpr (Fn::kFastBound > 0.0f) {
    // Finite inputs beyond the fast range go to libm; a float tensor with
    // none (the usual case) takes the vectorized loop.
    bool fast = self.dtype() == ScalarType::Float;
    if (fast) {
      const float* x = self.data_as<float>();
      bool beyond = false;
      for (int64_t i = 0, n = self.numel(); i < n; ++i) {
        const float a = umath::abs_float(x[i]);
        beyond |= a > Fn::kFastBound && a < umath::kInf;
      }
      fast = !beyond;
    }
    if (!fast) {
      return kutil::elementwise<float, float>(ctx, ins, out, [](float x) {
        return umath::abs_float(x) <= Fn::kFastBound ? Fn::f(x) : Fn::slow(x);
      });
    }
  }
  return kutil::elementwise<float, float>(ctx, ins, out, [](float x) { return Fn::f(x); });
}

// e^x: kutil's vectorizable float version, libm for double.
template <typename T>
inline T exp_of(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return kutil::exp_float(x);
  } else {
    return std::exp(x);
  }
}
template <typename T>
inline T expm1_of(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return umath::expm1_float(x);
  } else {
    return std::expm1(x);
  }
}

// sigmoid(x) = (x < 0 ? e : 1) / (1 + e) with e = e^-|x|: e never overflows,
// so sigmoid keeps its denormal results far below 0 (PyTorch's float32
// 1 / (1 + e^-x) flushes them to 0 below -88.7).
template <typename T>
inline T sigmoid_numerator(T x, T e) {
  if constexpr (std::is_same_v<T, float>) {
    return kutil::blend_float(x < 0.0f, e, 1.0f);
  } else {
    return x < T(0) ? e : T(1);
  }
}
template <typename T>
inline T sigmoid_of(T x) {
  const T e = exp_of(-std::fabs(x));
  return sigmoid_numerator(x, e) / (T(1) + e);
}
// x sigmoid(x), with one division.
template <typename T>
inline T silu_of(T x) {
  const T e = exp_of(-std::fabs(x));
  return x * sigmoid_numerator(x, e) / (T(1) + e);
}

// max(x, lo) / min(x, hi) for a bound that is not NaN: a NaN x fails the
// comparison and passes through, like PyTorch; one maxps/minps per vector.
template <typename T>
inline T max_of(T x, T lo) {
  return x < lo ? lo : x;
}
template <typename T>
inline T min_of(T x, T hi) {
  return x > hi ? hi : x;
}

// out = min(max(self, lo), hi) computed in out's dtype `result` (None: no
// bound), the bounds converted to it like PyTorch (checked for overflow).
Error clamp_scalars(KernelContext& ctx, const Tensor& self, const EValue& lo, const EValue& hi, const char* lo_name,
                    const char* hi_name, Tensor& out) {
  Error err;
  bool ok = kutil::dispatch_elementwise_real(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const Operand ins[1] = {Operand::of(self, "self")};
    // A missing bound is the type's extreme, ±inf for floats (same result, one instantiation).
    using Limits = std::numeric_limits<T>;
    T l = Limits::has_infinity ? -Limits::infinity() : Limits::lowest();
    T h = Limits::has_infinity ? Limits::infinity() : Limits::max();
    if (!lo.is_none()) err = checked_scalar(ctx, lo, out.dtype(), lo_name, &l);
    if (!err && !hi.is_none()) err = checked_scalar(ctx, hi, out.dtype(), hi_name, &h);
    if (err) return;
    if (l != l || h != h) {  // a NaN bound makes every element NaN
      err = kutil::elementwise<T, T>(ctx, ins, out, [](T) { return std::numeric_limits<T>::quiet_NaN(); });
    } else {
      err = kutil::elementwise<T, T>(ctx, ins, out, [l, h](T x) { return min_of(max_of(x, l), h); });
    }
  });
  if (!ok) return kutil::unsupported_dtype(ctx, "out", out.dtype(), kRealDtypes);
  return err;
}

// ---------------------------------------------------------------------------
// Floating-result functions
// ---------------------------------------------------------------------------

struct Sigmoid : FloatFn {
  static float f(float x) { return sigmoid_of(x); }
  static double d(double x) { return sigmoid_of(x); }
};
struct Tanh : FloatFn {
  static float f(float x) { return umath::copysign_float(kutil::tanh_float(x), x); }  // tanh(-0) = -0
  static double d(double x) { return std::tanh(x); }
};
struct Exp : FloatFn {
  static float f(float x) { return kutil::exp_float(x); }
  static double d(double x) { return std::exp(x); }
};
struct Expm1 : FloatFn {
  static float f(float x) { return umath::expm1_float(x); }
  static double d(double x) { return std::expm1(x); }
};
struct Log : FloatFn {
  static float f(float x) { return umath::log_float(x); }
  static double d(double x) { return std::log(x); }
};
struct Log2 : FloatFn {
  static float f(float x) { return umath::log2_float(x); }
  static double d(double x) { return std::log2(x); }
};
struct Log10 : FloatFn {
  static float f(float x) { return umath::log10_float(x); }
  static double d(double x) { return std::log10(x); }
};
struct Log1p : FloatFn {
  static float f(float x) { return umath::log1p_float(x); }
  static double d(double x) { return std::log1p(x); }
};
struct Sqrt : FloatFn {
  static float f(float x) { return umath::sqrt_float(x); }
  static double d(double x) { return std::sqrt(x); }
};
struct Rsqrt : FloatFn {
  static float f(float x) { return 1.0f / umath::sqrt_float(x); }
  static double d(double x) { return 1.0 / std::sqrt(x); }
};
struct Reciprocal : FloatFn {
  static float f(float x) { return 1.0f / x; }
  static double d(double x) { return 1.0 / x; }
};
struct Sin {
  static constexpr float kFastBound = umath::kTrigFastBound;
  static float f(float x) { return umath::sin_fast(x); }
  static float slow(float x) { return std::sin(x); }
  static double d(double x) { return std::sin(x); }
};
struct Cos {
  static constexpr float kFastBound = umath::kTrigFastBound;
  static float f(float x) { return umath::cos_fast(x); }
  static float slow(float x) { return std::cos(x); }
  static double d(double x) { return std::cos(x); }
};
struct Tan {
  static constexpr float kFastBound = umath::kTrigFastBound;
  static float f(float x) { return umath::tan_fast(x); }
  static float slow(float x) { return std::tan(x); }
  static double d(double x) { return std::tan(x); }
};
struct Asin : FloatFn {
  static float f(float x) { return umath::asin_float(x); }
  static double d(double x) { return std::asin(x); }
};
struct Acos : FloatFn {
  static float f(float x) { return umath::acos_float(x); }
  static double d(double x) { return std::acos(x); }
};
struct Atan : FloatFn {
  static float f(float x) { return umath::atan_float(x); }
  static double d(double x) { return std::atan(x); }
};
struct Sinh : FloatFn {
  static float f(float x) { return umath::sinh_float(x); }
  static double d(double x) { return std::sinh(x); }
};
struct Cosh : FloatFn {
  static float f(float x) { return umath::cosh_float(x); }
  static double d(double x) { return std::cosh(x); }
};
struct Asinh : FloatFn {
  static float f(float x) { return umath::asinh_float(x); }
  static double d(double x) { return std::asinh(x); }
};
struct Acosh : FloatFn {
  static float f(float x) { return umath::acosh_float(x); }
  static double d(double x) { return std::acosh(x); }
};
struct Atanh : FloatFn {
  static float f(float x) { return umath::atanh_float(x); }
  static double d(double x) { return std::atanh(x); }
};
struct Erf : FloatFn {
  static float f(float x) { return umath::erf_float(x); }
  static double d(double x) { return std::erf(x); }
};

// Rounding: identity on integers, vectorizable float paths (no SSE4.1 needed).
enum class Rounding { kCeil, kFloor, kRound, kTrunc };

template <Rounding kMode>
Error rounding(KernelContext& ctx, const Tensor& self, Tensor& out) {
  ET_CHECK_OK(reject_bool(ctx, self));
  return same_dtype_unary(ctx, self, out, [](auto tag) {
    using T = decltype(tag);
    return [](T x) {
      if constexpr (std::is_integral_v<T>) {
        return x;
      } else if constexpr (kMode == Rounding::kCeil) {
        return umath::ceil_of(x);
      } else if constexpr (kMode == Rounding::kFloor) {
        return umath::floor_of(x);
      } else if constexpr (kMode == Rounding::kRound) {
        return umath::round_even(x);  // half to even, like PyTorch
      } else {
        return umath::trunc_of(x);
      }
    };
  });
}

// isinf / isnan: bool out; integer and bool inputs are never either.
template <bool kInf>
Error float_class(KernelContext& ctx, const Tensor& self, Tensor& out) {
  ET_CHECK_OK(check_same_dtype(ctx, ScalarType::Bool, out, "the result is bool"));
  const Operand ins[1] = {Operand::of(self, "self")};
  if (self.dtype() == ScalarType::Double) {
    return kutil::elementwise<bool, double>(ctx, ins, out, [](double x) {
      return kInf ? std::fabs(x) == std::numeric_limits<double>::infinity() : x != x;
    });
  }
  if (kutil::is_floating(self.dtype())) {
    return kutil::elementwise<bool, float>(ctx, ins, out,
                                           [](float x) { return kInf ? umath::abs_float(x) == umath::kInf : x != x; });
  }
  return kutil::elementwise<bool, bool>(ctx, ins, out, [](bool) { return false; });
}

}  // namespace

namespace portable {

// ---------------------------------------------------------------------------
// Same dtype
// ---------------------------------------------------------------------------

Error relu_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  ET_CHECK_OK(reject_bool(ctx, self));
  return same_dtype_unary(ctx, self, out, [](auto tag) {
    using T = decltype(tag);
    return [](T x) { return x < T(0) ? T(0) : x; };  // NaN stays NaN
  });
}

Error hardtanh_out(KernelContext& ctx, const Tensor& self, const EValue& min_val, const EValue& max_val, Tensor& out) {
  ET_CHECK_OK(reject_bool(ctx, self));
  ET_CHECK_OK(check_same_dtype(ctx, self.dtype(), out));
  if (self.dtype() == ScalarType::UInt8 &&
      (kutil::scalar_as<double>(min_val) < 0 || kutil::scalar_as<double>(max_val) < 0)) {
    return ctx.fail(ErrorCode::InvalidArgument, "cannot do hardtanh on an unsigned type (uint8) with negative limits");
  }
  return clamp_scalars(ctx, self, min_val, max_val, "min_val", "max_val", out);
}

Error clamp_out(KernelContext& ctx, const Tensor& self, const EValue& min, const EValue& max, Tensor& out) {
  if (min.is_none() && max.is_none()) {
    return ctx.fail(ErrorCode::InvalidArgument, "at least one of min and max must not be None");
  }
  kutil::ResultType rt;
  rt.add_tensor(self);
  if (!min.is_none()) rt.add_scalar(min);
  if (!max.is_none()) rt.add_scalar(max);
  const ScalarType result = rt.get();
  if (result == ScalarType::Bool) {
    return ctx.fail(ErrorCode::InvalidArgument, "self and the bounds are all bool, which clamp does not support");
  }
  ET_CHECK_OK(check_same_dtype(ctx, result, out, "the result type of self and the bounds"));
  return clamp_scalars(ctx, self, min, max, "min", "max", out);
}

Error neg_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  ET_CHECK_OK(reject_bool(ctx, self, "; use logical_not or bitwise_not"));
  return same_dtype_unary(ctx, self, out, [](auto tag) {
    using T = decltype(tag);
    return [](T x) {
      if constexpr (std::is_floating_point_v<T>) {
        return -x;
      } else {
        return kutil::wrap_sub(T(0), x);  // wraps (narrow types wrap when stored)
      }
    };
  });
}

Error abs_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  ET_CHECK_OK(reject_bool(ctx, self));
  return same_dtype_unary(ctx, self, out, [](auto tag) {
    using T = decltype(tag);
    return [](T x) {
      if constexpr (std::is_floating_point_v<T>) {
        return std::fabs(x);
      } else {
        return x < T(0) ? kutil::wrap_sub(T(0), x) : x;  // abs(INT_MIN) wraps to INT_MIN, like PyTorch
      }
    };
  });
}

// -1, 0 or 1 (0 for ±0 and NaN, like PyTorch); bool is its own sign.
Error sign_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  if (self.dtype() == ScalarType::Bool) {
    ET_CHECK_OK(check_same_dtype(ctx, self.dtype(), out));
    const Operand ins[1] = {Operand::of(self, "self")};
    return kutil::elementwise<bool, bool>(ctx, ins, out, [](bool x) { return x; });
  }
  return same_dtype_unary(ctx, self, out, [](auto tag) {
    using T = decltype(tag);
    return [](T x) { return static_cast<T>(T(x > T(0)) - T(x < T(0))); };
  });
}

Error ceil_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  return rounding<Rounding::kCeil>(ctx, self, out);
}
Error floor_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  return rounding<Rounding::kFloor>(ctx, self, out);
}
Error round_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  return rounding<Rounding::kRound>(ctx, self, out);
}
Error trunc_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  return rounding<Rounding::kTrunc>(ctx, self, out);
}

// ~x on integers; logical not on bool.
Error bitwise_not_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  ET_CHECK_OK(check_same_dtype(ctx, self.dtype(), out));
  const Operand ins[1] = {Operand::of(self, "self")};
  if (self.dtype() == ScalarType::Bool) {
    return kutil::elementwise<bool, bool>(ctx, ins, out, [](bool x) { return !x; });
  }
  if (!kutil::is_integral_no_bool(self.dtype())) {
    return kutil::unsupported_dtype(ctx, "self", self.dtype(), "int64, int32, int16, int8, uint8, bool");
  }
  Error err;
  kutil::dispatch_elementwise_real(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) {
      err = kutil::elementwise<T, T>(ctx, ins, out, [](T x) { return static_cast<T>(~x); });
    }
  });
  return err;
}

// ---------------------------------------------------------------------------
// Bool results
// ---------------------------------------------------------------------------

Error logical_not_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  const Operand ins[1] = {Operand::of(self, "self")};
  return kutil::elementwise<bool, bool>(ctx, ins, out, [](bool x) { return !x; });
}

Error isinf_out(KernelContext& ctx, const Tensor& self, Tensor& out) { return float_class<true>(ctx, self, out); }
Error isnan_out(KernelContext& ctx, const Tensor& self, Tensor& out) { return float_class<false>(ctx, self, out); }

// ---------------------------------------------------------------------------
// Floating results
// ---------------------------------------------------------------------------

Error sigmoid_out(KernelContext& ctx, const Tensor& self, Tensor& out) { return floating_unary<Sigmoid>(ctx, self, out); }
Error tanh_out(KernelContext& ctx, const Tensor& self, Tensor& out) { return floating_unary<Tanh>(ctx, self, out); }
Error exp_out(KernelContext& ctx, const Tensor& self, Tensor& out) { return floating_unary<Exp>(ctx, self, out); }
Error expm1_out(KernelContext& ctx, const Tensor& self, Tensor& out) { return floating_unary<Expm1>(ctx, self, out); }
Error log_out(KernelContext& ctx, const Tensor& self, Tensor& out) { return floating_unary<Log>(ctx, self, out); }
Error log2_out(KernelContext& ctx, const Tensor& self, Tensor& out) { return floating_unary<Log2>(ctx, self, out); }
Error log10_out(KernelContext& ctx, const Tensor& self, Tensor& out) { return floating_unary<Log10>(ctx, self, out); }
Error log1p_out(KernelContext& ctx, const Tensor& self, Tensor& out) { return floating_unary<Log1p>(ctx, self, out); }
Error sqrt_out(KernelContext& ctx, const Tensor& self, Tensor& out) { return floating_unary<Sqrt>(ctx, self, out); }
Error rsqrt_out(KernelContext& ctx, const Tensor& self, Tensor& out) { return floating_unary<Rsqrt>(ctx, self, out); }
Error reciprocal_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  return floating_unary<Reciprocal>(ctx, self, out);
}
Error sin_out(KernelContext& ctx, const Tensor& self, Tensor& out) { return floating_unary<Sin>(ctx, self, out); }
Error cos_out(KernelContext& ctx, const Tensor& self, Tensor& out) { return floating_unary<Cos>(ctx, self, out); }
Error tan_out(KernelContext& ctx, const Tensor& self, Tensor& out) { return floating_unary<Tan>(ctx, self, out); }
Error asin_out(KernelContext& ctx, const Tensor& self, Tensor& out) { return floating_unary<Asin>(ctx, self, out); }
Error acos_out(KernelContext& ctx, const Tensor& self, Tensor& out) { return floating_unary<Acos>(ctx, self, out); }
Error atan_out(KernelContext& ctx, const Tensor& self, Tensor& out) { return floating_unary<Atan>(ctx, self, out); }
Error sinh_out(KernelContext& ctx, const Tensor& self, Tensor& out) { return floating_unary<Sinh>(ctx, self, out); }
Error cosh_out(KernelContext& ctx, const Tensor& self, Tensor& out) { return floating_unary<Cosh>(ctx, self, out); }
Error asinh_out(KernelContext& ctx, const Tensor& self, Tensor& out) { return floating_unary<Asinh>(ctx, self, out); }
Error acosh_out(KernelContext& ctx, const Tensor& self, Tensor& out) { return floating_unary<Acosh>(ctx, self, out); }
Error atanh_out(KernelContext& ctx, const Tensor& self, Tensor& out) { return floating_unary<Atanh>(ctx, self, out); }
Error erf_out(KernelContext& ctx, const Tensor& self, Tensor& out) { return floating_unary<Erf>(ctx, self, out); }

// ---------------------------------------------------------------------------
// Floating only
// ---------------------------------------------------------------------------

Error gelu_out(KernelContext& ctx, const Tensor& self, Span<const char> approximate, Tensor& out) {
  const bool use_tanh = equals(approximate, "tanh");
  if (!use_tanh && !equals(approximate, "none")) {
    return ctx.fail(ErrorCode::InvalidArgument, "approximate must be \"none\" or \"tanh\", got \"%.*s\"",
                    static_cast<int>(approximate.size() > 64 ? 64 : approximate.size()), approximate.data());
  }
  const Operand ins[1] = {Operand::of(self, "self")};
  return floating_only_unary(ctx, self, out, [&](auto tag) {
    using T = decltype(tag);
    if (use_tanh) {
      return kutil::elementwise<T, T>(ctx, ins, out, [](T x) {
        const T kBeta = T(0.7978845608028654);  // sqrt(2 / pi)
        const T kKappa = T(0.044715);
        // 0.5 x (1 + tanh(u)) == x * sigmoid(2u), without cancellation for x < 0.
        return x / (T(1) + exp_of(T(-2) * kBeta * (x + kKappa * x * x * x)));
      });
    }
    return kutil::elementwise<T, T>(ctx, ins, out, [](T x) {
      if constexpr (std::is_same_v<T, float>) {
        return 0.5f * x * kutil::one_plus_erf_float(x * 0.7071067811865476f);
      } else {
        return T(0.5) * x * (T(1) + std::erf(x * T(0.7071067811865476)));
      }
    });
  });
}

Error silu_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  const Operand ins[1] = {Operand::of(self, "self")};
  return floating_only_unary(ctx, self, out, [&](auto tag) {
    using T = decltype(tag);
    return kutil::elementwise<T, T>(ctx, ins, out, [](T x) { return silu_of(x); });
  });
}

Error hardswish_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  const Operand ins[1] = {Operand::of(self, "self")};
  return floating_only_unary(ctx, self, out, [&](auto tag) {
    using T = decltype(tag);
    return kutil::elementwise<T, T>(ctx, ins, out, [](T x) {
      return x * min_of(max_of(x + T(3), T(0)), T(6)) * T(1.0 / 6);  // <= 1 ulp from / 6
    });
  });
}

// x > 0 ? scale x : alpha scale (e^(input_scale x) - 1), with expm1.
Error elu_out(KernelContext& ctx, const Tensor& self, const EValue& alpha, const EValue& scale,
              const EValue& input_scale, Tensor& out) {
  const Operand ins[1] = {Operand::of(self, "self")};
  return floating_only_unary(ctx, self, out, [&](auto tag) {
    using T = decltype(tag);
    const ScalarType compute = kutil::DtypeOf<T>::value;  // PyTorch's opmath type
    T a{}, s{}, is{};
    ET_CHECK_OK(checked_scalar(ctx, alpha, compute, "alpha", &a));
    ET_CHECK_OK(checked_scalar(ctx, scale, compute, "scale", &s));
    ET_CHECK_OK(checked_scalar(ctx, input_scale, compute, "input_scale", &is));
    const T neg = a * s;
    return kutil::elementwise<T, T>(ctx, ins, out,
                                    [neg, s, is](T x) { return x > T(0) ? x * s : expm1_of(x * is) * neg; });
  });
}

Error leaky_relu_out(KernelContext& ctx, const Tensor& self, const EValue& negative_slope, Tensor& out) {
  const Operand ins[1] = {Operand::of(self, "self")};
  return floating_only_unary(ctx, self, out, [&](auto tag) {
    using T = decltype(tag);
    T slope{};
    ET_CHECK_OK(checked_scalar(ctx, negative_slope, kutil::DtypeOf<T>::value, "negative_slope", &slope));
    return kutil::elementwise<T, T>(ctx, ins, out, [slope](T x) { return x > T(0) ? x : x * slope; });
  });
}

}  // namespace portable
}  // namespace etmlir
