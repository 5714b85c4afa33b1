// Binary elementwise kernels with PyTorch broadcasting: add, sub, mul, div,
// maximum, minimum, logical_and, logical_or and where.
//
// Arithmetic computes in the out tensor's dtype (inputs of other dtypes are
// converted, after checking PyTorch's "result type can be cast to out" rule);
// logical ops compute in bool and may write any dtype.
#include "kernel_util.h"
#include "portable_kernels.h"

namespace etmlir {
namespace {

using kutil::Operand;

// The inputs' promoted dtype must be castable to out's (no float → int, no int → bool).
Error check_result_fits_out(KernelContext& ctx, ScalarType result, const Tensor& out) {
  if (!kutil::can_cast(result, out.dtype())) {
    return ctx.fail(ErrorCode::InvalidArgument, "result type %s can't be cast to out dtype %s", dtype_name(result),
                    dtype_name(out.dtype()));
  }
  return Error::ok();
}

// Result type of `self` with `other`, a tensor or a Scalar.
ScalarType result_type(const Tensor& self, const EValue& other) {
  kutil::ResultType rt;
  rt.add_tensor(self);
  if (other.is_tensor()) {
    rt.add_tensor(other.to_tensor());
  } else {
    rt.add_scalar(other);
  }
  return rt.get();
}

// Runs `make_op(T{})`'s op over self and other (tensor or Scalar), computing in
// out's dtype T, one of the compute dtypes.
template <typename MakeOp>
Error arith(KernelContext& ctx, const Tensor& self, const EValue& other, Tensor& out, MakeOp make_op) {
  Error err;
  bool ok = kutil::dispatch_compute(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T scalar{};
    Operand ins[2] = {Operand::of(self, "self"), Operand{}};
    if (other.is_tensor()) {
      ins[1] = Operand::of(other.to_tensor(), "other");
    } else {
      scalar = kutil::scalar_as<T>(other);
      ins[1] = Operand::scalar(&scalar, "other");
    }
    err = make_op(tag, ins);
  });
  if (!ok) return kutil::unsupported_dtype(ctx, "out", out.dtype());
  return err;
}

// add/sub: out = self ± alpha * other.
template <bool kSub>
Error add_sub(KernelContext& ctx, const Tensor& self, const EValue& other, const EValue& alpha, Tensor& out) {
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
  return arith(ctx, self, other, out, [&](auto tag, const Operand* ins) {
    using T = decltype(tag);
    // One instantiation for every alpha: x + 1 * y == x + y exactly.
    const T a = kutil::scalar_as<T>(alpha);
    return kutil::elementwise<T, T, T>(ctx, ins, out, [a](T x, T y) {
      return kSub ? kutil::wrap_sub(x, kutil::wrap_mul(a, y)) : kutil::wrap_add(x, kutil::wrap_mul(a, y));
    });
  });
}

Error mul(KernelContext& ctx, const Tensor& self, const EValue& other, Tensor& out) {
  ET_CHECK_OK(check_result_fits_out(ctx, result_type(self, other), out));
  return arith(ctx, self, other, out, [&](auto tag, const Operand* ins) {
    using T = decltype(tag);
    return kutil::elementwise<T, T, T>(ctx, ins, out, [](T x, T y) { return kutil::wrap_mul(x, y); });
  });
}

// True division: always floating point (never an integer division that could trap).
Error div(KernelContext& ctx, const Tensor& self, const EValue& other, Tensor& out) {
  if (!kutil::is_floating(out.dtype())) {
    return ctx.fail(ErrorCode::InvalidArgument, "true division writes floating point, but out has dtype %s",
                    dtype_name(out.dtype()));
  }
  Error err;
  bool ok = kutil::dispatch_floating(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T scalar{};
    Operand ins[2] = {Operand::of(self, "self"), Operand{}};
    if (other.is_tensor()) {
      ins[1] = Operand::of(other.to_tensor(), "other");
    } else {
      scalar = kutil::scalar_as<T>(other);
      ins[1] = Operand::scalar(&scalar, "other");
    }
    err = kutil::elementwise<T, T, T>(ctx, ins, out, [](T x, T y) { return x / y; });
  });
  if (!ok) return kutil::unsupported_dtype(ctx, "out", out.dtype(), "float32, float64");
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
  bool ok = kutil::dispatch_compute(out.dtype(), [&](auto tag) {
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
Error logical(KernelContext& ctx, EValue** args) {
  const Operand ins[2] = {Operand::of(args[0]->to_tensor(), "self"), Operand::of(args[1]->to_tensor(), "other")};
  return kutil::elementwise<bool, bool, bool>(ctx, ins, args[2]->to_tensor(),
                                              [](bool x, bool y) { return kAnd ? (x && y) : (x || y); });
}

// aten::add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out)
Error add_out(KernelContext& ctx, EValue** args) {
  return add_sub<false>(ctx, args[0]->to_tensor(), *args[1], *args[2], args[3]->to_tensor());
}
// aten::add.Scalar_out(Tensor self, Scalar other, Scalar alpha=1, *, Tensor(a!) out)
Error add_scalar_out(KernelContext& ctx, EValue** args) {
  return add_sub<false>(ctx, args[0]->to_tensor(), *args[1], *args[2], args[3]->to_tensor());
}
// aten::sub.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out)
Error sub_out(KernelContext& ctx, EValue** args) {
  return add_sub<true>(ctx, args[0]->to_tensor(), *args[1], *args[2], args[3]->to_tensor());
}
// aten::sub.Scalar_out(Tensor self, Scalar other, Scalar alpha=1, *, Tensor(a!) out)
Error sub_scalar_out(KernelContext& ctx, EValue** args) {
  return add_sub<true>(ctx, args[0]->to_tensor(), *args[1], *args[2], args[3]->to_tensor());
}
// aten::mul.out(Tensor self, Tensor other, *, Tensor(a!) out)
// aten::mul.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out)
Error mul_out(KernelContext& ctx, EValue** args) { return mul(ctx, args[0]->to_tensor(), *args[1], args[2]->to_tensor()); }
// aten::div.out(Tensor self, Tensor other, *, Tensor(a!) out)
// aten::div.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out)
Error div_out(KernelContext& ctx, EValue** args) { return div(ctx, args[0]->to_tensor(), *args[1], args[2]->to_tensor()); }

// aten::maximum.out(Tensor self, Tensor other, *, Tensor(a!) out)
Error maximum_out(KernelContext& ctx, EValue** args) {
  return max_min<true>(ctx, args[0]->to_tensor(), args[1]->to_tensor(), args[2]->to_tensor());
}
// aten::minimum.out(Tensor self, Tensor other, *, Tensor(a!) out)
Error minimum_out(KernelContext& ctx, EValue** args) {
  return max_min<false>(ctx, args[0]->to_tensor(), args[1]->to_tensor(), args[2]->to_tensor());
}
// aten::logical_and.out(Tensor self, Tensor other, *, Tensor(a!) out)
Error logical_and_out(KernelContext& ctx, EValue** args) { return logical<true>(ctx, args); }
// aten::logical_or.out(Tensor self, Tensor other, *, Tensor(a!) out)
Error logical_or_out(KernelContext& ctx, EValue** args) { return logical<false>(ctx, args); }

// aten::where.self_out(Tensor condition, Tensor self, Tensor other, *, Tensor(a!) out)
Error where_out(KernelContext& ctx, EValue** args) {
  const Tensor& cond = args[0]->to_tensor();
  const Tensor& self = args[1]->to_tensor();
  const Tensor& other = args[2]->to_tensor();
  Tensor& out = args[3]->to_tensor();
  if (cond.dtype() != ScalarType::Bool && cond.dtype() != ScalarType::UInt8) {
    return ctx.fail(ErrorCode::InvalidArgument, "condition must be a bool tensor, got %s", dtype_name(cond.dtype()));
  }
  kutil::ResultType rt;
  rt.add_tensor(self);
  rt.add_tensor(other);
  ET_CHECK_OK(check_result_fits_out(ctx, rt.get(), out));
  Error err;
  bool ok = kutil::dispatch_compute(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const Operand ins[3] = {Operand::of(cond, "condition"), Operand::of(self, "self"), Operand::of(other, "other")};
    err = kutil::elementwise<T, bool, T, T>(ctx, ins, out, [](bool c, T x, T y) { return c ? x : y; });
  });
  if (!ok) return kutil::unsupported_dtype(ctx, "out", out.dtype());
  return err;
}

}  // namespace

Error register_binary_kernels(KernelRegistry& r) {
  ET_REGISTER_KERNEL(r, "aten::add.out", "TTs|T", add_out);
  ET_REGISTER_KERNEL(r, "aten::add.Scalar_out", "Tss|T", add_scalar_out);
  ET_REGISTER_KERNEL(r, "aten::sub.out", "TTs|T", sub_out);
  ET_REGISTER_KERNEL(r, "aten::sub.Scalar_out", "Tss|T", sub_scalar_out);
  ET_REGISTER_KERNEL(r, "aten::mul.out", "TT|T", mul_out);
  ET_REGISTER_KERNEL(r, "aten::mul.Scalar_out", "Ts|T", mul_out);
  ET_REGISTER_KERNEL(r, "aten::div.out", "TT|T", div_out);
  ET_REGISTER_KERNEL(r, "aten::div.Scalar_out", "Ts|T", div_out);
  ET_REGISTER_KERNEL(r, "aten::maximum.out", "TT|T", maximum_out);
  ET_REGISTER_KERNEL(r, "aten::minimum.out", "TT|T", minimum_out);
  ET_REGISTER_KERNEL(r, "aten::logical_and.out", "TT|T", logical_and_out);
  ET_REGISTER_KERNEL(r, "aten::logical_or.out", "TT|T", logical_or_out);
  ET_REGISTER_KERNEL(r, "aten::where.self_out", "TTT|T", where_out);
  return Error::ok();
}

}  // namespace etmlir
