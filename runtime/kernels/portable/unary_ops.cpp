// Unary elementwise kernels: relu, hardtanh, clamp, neg (real dtypes, in
// out's dtype); sigmoid, tanh, exp, sqrt, rsqrt, gelu, silu, hardswish
// (floating out; integer inputs are converted); logical_not (any dtype).
// Out is resized to the input's shape.
#include <cmath>
#include <limits>

#include "kernel_util.h"
#include "portable_kernels.h"

namespace etmlir {
namespace {

using kutil::Operand;

Error check_cast(KernelContext& ctx, ScalarType from, const Tensor& out) {
  if (!kutil::can_cast(from, out.dtype())) {
    return ctx.fail(ErrorCode::InvalidArgument, "result type %s can't be cast to out dtype %s", dtype_name(from),
                    dtype_name(out.dtype()));
  }
  return Error::ok();
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

// A NaN bound makes every element NaN in PyTorch's clamp and hardtanh.
template <typename T>
inline bool is_nan(T v) {
  return v != v;
}

// Float uses kutil's vectorizable math (within a few ulp of libm); double uses libm.
template <typename T>
inline T exp_of(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return kutil::exp_float(x);
  } else {
    return std::exp(x);
  }
}
template <typename T>
inline T tanh_of(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return kutil::tanh_float(x);
  } else {
    return std::tanh(x);
  }
}

// out = op(self) in out's dtype T, one of Float, Double, Int64, Int32;
// make_op(T{}) builds the op. Bool is rejected (PyTorch rejects it too).
template <typename MakeOp>
Error real_unary(KernelContext& ctx, const Tensor& self, Tensor& out, ScalarType result, MakeOp make_op) {
  ET_CHECK_OK(check_cast(ctx, result, out));
  Error err;
  bool ok = kutil::dispatch_real(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const Operand ins[1] = {Operand::of(self, "self")};
    err = kutil::elementwise<T, T>(ctx, ins, out, make_op(tag));
  });
  if (!ok) return kutil::unsupported_dtype(ctx, "out", out.dtype(), "float32, float64, int64, int32");
  return err;
}

// out = op(self) computed in out's floating dtype T; make_op(T{}) builds the op.
template <typename MakeOp>
Error floating_unary(KernelContext& ctx, const Tensor& self, Tensor& out, MakeOp make_op) {
  if (!kutil::is_floating(out.dtype()) && kutil::is_convertible_dtype(out.dtype())) {
    return ctx.fail(ErrorCode::InvalidArgument, "the result is floating point, but out has dtype %s",
                    dtype_name(out.dtype()));
  }
  Error err;
  bool ok = kutil::dispatch_floating(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const Operand ins[1] = {Operand::of(self, "self")};
    err = kutil::elementwise<T, T>(ctx, ins, out, make_op(tag));
  });
  if (!ok) return kutil::unsupported_dtype(ctx, "out", out.dtype(), "float32, float64");
  return err;
}

// aten::relu.out(Tensor self, *, Tensor(a!) out)
Error relu_out(KernelContext& ctx, EValue** args) {
  const Tensor& self = args[0]->to_tensor();
  return real_unary(ctx, self, args[1]->to_tensor(), self.dtype(), [](auto tag) {
    using T = decltype(tag);
    return [](T x) { return x < T(0) ? T(0) : x; };  // NaN stays NaN
  });
}

// out = min(max(self, lo), hi) in out's dtype (a None bound is no bound),
// after checking `result` (the promoted dtype) fits out.
Error clamp_scalars(KernelContext& ctx, const Tensor& self, const EValue& lo, const EValue& hi, ScalarType result,
                    Tensor& out) {
  ET_CHECK_OK(check_cast(ctx, result, out));
  Error err;
  bool ok = kutil::dispatch_real(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const Operand ins[1] = {Operand::of(self, "self")};
    // A missing bound is the type's extreme, ±inf for floats (same result, one instantiation).
    using Limits = std::numeric_limits<T>;
    const T l = !lo.is_none() ? kutil::scalar_as<T>(lo) : Limits::has_infinity ? -Limits::infinity() : Limits::lowest();
    const T h = !hi.is_none() ? kutil::scalar_as<T>(hi) : Limits::has_infinity ? Limits::infinity() : Limits::max();
    if (is_nan(l) || is_nan(h)) {
      err = kutil::elementwise<T, T>(ctx, ins, out, [](T) { return std::numeric_limits<T>::quiet_NaN(); });
    } else {
      err = kutil::elementwise<T, T>(ctx, ins, out, [l, h](T x) { return min_of(max_of(x, l), h); });
    }
  });
  if (!ok) return kutil::unsupported_dtype(ctx, "out", out.dtype(), "float32, float64, int64, int32");
  return err;
}

// aten::hardtanh.out(Tensor self, Scalar min_val=-1, Scalar max_val=1, *, Tensor(a!) out)
Error hardtanh_out(KernelContext& ctx, EValue** args) {
  const Tensor& self = args[0]->to_tensor();
  return clamp_scalars(ctx, self, *args[1], *args[2], self.dtype(), args[3]->to_tensor());
}

// aten::clamp.out(Tensor self, Scalar? min=None, Scalar? max=None, *, Tensor(a!) out)
Error clamp_out(KernelContext& ctx, EValue** args) {
  const Tensor& self = args[0]->to_tensor();
  const EValue& lo = *args[1];
  const EValue& hi = *args[2];
  if (lo.is_none() && hi.is_none()) {
    return ctx.fail(ErrorCode::InvalidArgument, "at least one of min and max must not be None");
  }
  kutil::ResultType rt;
  rt.add_tensor(self);
  if (!lo.is_none()) rt.add_scalar(lo);
  if (!hi.is_none()) rt.add_scalar(hi);
  return clamp_scalars(ctx, self, lo, hi, rt.get(), args[3]->to_tensor());
}

// aten::neg.out(Tensor self, *, Tensor(a!) out)
Error neg_out(KernelContext& ctx, EValue** args) {
  const Tensor& self = args[0]->to_tensor();
  if (self.dtype() == ScalarType::Bool) {
    return ctx.fail(ErrorCode::InvalidArgument, "negation of a bool tensor is not supported; use logical_not");
  }
  return real_unary(ctx, self, args[1]->to_tensor(), self.dtype(), [](auto tag) {
    using T = decltype(tag);
    return [](T x) {
      if constexpr (std::is_floating_point_v<T>) {
        return -x;
      } else {
        return kutil::wrap_sub(T(0), x);
      }
    };
  });
}

// aten::logical_not.out(Tensor self, *, Tensor(a!) out)
Error logical_not_out(KernelContext& ctx, EValue** args) {
  const Operand ins[1] = {Operand::of(args[0]->to_tensor(), "self")};
  return kutil::elementwise<bool, bool>(ctx, ins, args[1]->to_tensor(), [](bool x) { return !x; });
}

// aten::sigmoid.out(Tensor self, *, Tensor(a!) out)
Error sigmoid_out(KernelContext& ctx, EValue** args) {
  return floating_unary(ctx, args[0]->to_tensor(), args[1]->to_tensor(), [](auto tag) {
    using T = decltype(tag);
    return [](T x) { return T(1) / (T(1) + exp_of(-x)); };
  });
}

// aten::tanh.out(Tensor self, *, Tensor(a!) out)
Error tanh_out(KernelContext& ctx, EValue** args) {
  return floating_unary(ctx, args[0]->to_tensor(), args[1]->to_tensor(), [](auto tag) {
    using T = decltype(tag);
    return [](T x) { return tanh_of(x); };
  });
}

// aten::exp.out(Tensor self, *, Tensor(a!) out)
Error exp_out(KernelContext& ctx, EValue** args) {
  return floating_unary(ctx, args[0]->to_tensor(), args[1]->to_tensor(), [](auto tag) {
    using T = decltype(tag);
    return [](T x) { return exp_of(x); };
  });
}

// aten::sqrt.out(Tensor self, *, Tensor(a!) out)
Error sqrt_out(KernelContext& ctx, EValue** args) {
  return floating_unary(ctx, args[0]->to_tensor(), args[1]->to_tensor(), [](auto tag) {
    using T = decltype(tag);
    return [](T x) { return std::sqrt(x); };
  });
}

// aten::rsqrt.out(Tensor self, *, Tensor(a!) out)
Error rsqrt_out(KernelContext& ctx, EValue** args) {
  return floating_unary(ctx, args[0]->to_tensor(), args[1]->to_tensor(), [](auto tag) {
    using T = decltype(tag);
    return [](T x) { return T(1) / std::sqrt(x); };
  });
}

// aten::gelu.out(Tensor self, *, str approximate="none", Tensor(a!) out)
Error gelu_out(KernelContext& ctx, EValue** args) {
  const EValue& approximate = *args[1];
  bool use_tanh = approximate.string_equals("tanh");
  if (!use_tanh && !approximate.string_equals("none")) {
    Span<const char> s = approximate.to_string();
    return ctx.fail(ErrorCode::InvalidArgument, "approximate must be \"none\" or \"tanh\", got \"%.*s\"",
                    static_cast<int>(s.size() > 64 ? 64 : s.size()), s.data());
  }
  if (use_tanh) {
    return floating_unary(ctx, args[0]->to_tensor(), args[2]->to_tensor(), [](auto tag) {
      using T = decltype(tag);
      return [](T x) {
        const T kBeta = T(0.7978845608028654);  // sqrt(2 / pi)
        const T kKappa = T(0.044715);
        // 0.5 x (1 + tanh(u)) == x * sigmoid(2u), without cancellation for x < 0.
        return x / (T(1) + exp_of(T(-2) * kBeta * (x + kKappa * x * x * x)));
      };
    });
  }
  return floating_unary(ctx, args[0]->to_tensor(), args[2]->to_tensor(), [](auto tag) {
    using T = decltype(tag);
    return [](T x) {
      if constexpr (std::is_same_v<T, float>) {
        return 0.5f * x * kutil::one_plus_erf_float(x * 0.7071067811865476f);
      } else {
        return T(0.5) * x * (T(1) + std::erf(x * T(0.7071067811865476)));
      }
    };
  });
}

// aten::hardswish.out(Tensor self, *, Tensor(a!) out)
Error hardswish_out(KernelContext& ctx, EValue** args) {
  return floating_unary(ctx, args[0]->to_tensor(), args[1]->to_tensor(), [](auto tag) {
    using T = decltype(tag);
    return [](T x) { return x * min_of(max_of(x + T(3), T(0)), T(6)) * T(1.0 / 6); };  // <= 1 ulp from / 6
  });
}

// aten::silu.out(Tensor self, *, Tensor(a!) out)
Error silu_out(KernelContext& ctx, EValue** args) {
  return floating_unary(ctx, args[0]->to_tensor(), args[1]->to_tensor(), [](auto tag) {
    using T = decltype(tag);
    return [](T x) { return x / (T(1) + exp_of(-x)); };
  });
}

}  // namespace

Error register_unary_kernels(KernelRegistry& r) {
  ET_REGISTER_KERNEL(r, "aten::relu.out", "T|T", relu_out);
  ET_REGISTER_KERNEL(r, "aten::hardtanh.out", "Tss|T", hardtanh_out);
  ET_REGISTER_KERNEL(r, "aten::clamp.out", "TSS|T", clamp_out);
  ET_REGISTER_KERNEL(r, "aten::neg.out", "T|T", neg_out);
  ET_REGISTER_KERNEL(r, "aten::logical_not.out", "T|T", logical_not_out);
  ET_REGISTER_KERNEL(r, "aten::sigmoid.out", "T|T", sigmoid_out);
  ET_REGISTER_KERNEL(r, "aten::tanh.out", "T|T", tanh_out);
  ET_REGISTER_KERNEL(r, "aten::exp.out", "T|T", exp_out);
  ET_REGISTER_KERNEL(r, "aten::sqrt.out", "T|T", sqrt_out);
  ET_REGISTER_KERNEL(r, "aten::rsqrt.out", "T|T", rsqrt_out);
  ET_REGISTER_KERNEL(r, "aten::gelu.out", "TQ|T", gelu_out);
  ET_REGISTER_KERNEL(r, "aten::hardswish.out", "T|T", hardswish_out);
  ET_REGISTER_KERNEL(r, "aten::silu.out", "T|T", silu_out);
  return Error::ok();
}

}  // namespace etmlir
