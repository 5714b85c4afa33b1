// Binary elementwise kernels with PyTorch broadcasting: add, sub, mul, div,
// maximum, minimum, logical_and, logical_or and where.
//
// Arithmetic computes in the out tensor's dtype (inputs of other dtypes are
// converted, after checking PyTorch's "result type can be cast to out" rule);
// logical ops compute in bool and may write any dtype.
#include "kernel_util.h"
#include "generated/binary.h"

namespace etmlir {
namespace {

using kutil::Operand;
using kutil::TensorOrScalar;

// The inputs' promoted dtype must be castable to out's (no float → int, no int → bool).
Error check_result_fits_out(KernelContext& ctx, ScalarType result, const Tensor& out) {
  if (!kutil::can_cast(result, out.dtype())) {
    return ctx.fail(ErrorCode::InvalidArgument, "result type %s can't be cast to out dtype %s", dtype_name(result),
                    dtype_name(out.dtype()));
  }
  return Error::ok();
}

// Result type of `self` with `other`.
ScalarType result_type(const Tensor& self, kutil::TensorOrScalar other) {
  kutil::ResultType rt;
  rt.add_tensor(self);
  other.add_to(rt);
  return rt.get();
}

// Runs `make_op(T{})`'s op over self and other, computing in out's dtype T
// (one of the compute dtypes; float for float16/bfloat16 outs).
template <typename MakeOp>
Error arith(KernelContext& ctx, const Tensor& self, kutil::TensorOrScalar other, Tensor& out, MakeOp make_op) {
  Error err;
  bool ok = kutil::dispatch_elementwise_compute(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T scalar{};
    Operand ins[2] = {Operand::of(self, "self"), other.operand(&scalar, "other")};
    err = make_op(tag, ins);
  });
  if (!ok) return kutil::unsupported_dtype(ctx, "out", out.dtype());
  return err;
}

// add/sub: out = self ± alpha * other.
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
  return arith(ctx, self, other, out, [&](auto tag, const Operand* ins) {
    using T = decltype(tag);
    // One instantiation for every alpha: x + 1 * y == x + y exactly.
    const T a = kutil::scalar_as<T>(alpha);
    return kutil::elementwise<T, T, T>(ctx, ins, out, [a](T x, T y) {
      return kSub ? kutil::wrap_sub(x, kutil::wrap_mul(a, y)) : kutil::wrap_add(x, kutil::wrap_mul(a, y));
    });
  });
}

Error mul(KernelContext& ctx, const Tensor& self, kutil::TensorOrScalar other, Tensor& out) {
  ET_CHECK_OK(check_result_fits_out(ctx, result_type(self, other), out));
  return arith(ctx, self, other, out, [&](auto tag, const Operand* ins) {
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
  Error err;
  bool ok = kutil::dispatch_elementwise_floating(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T scalar{};
    Operand ins[2] = {Operand::of(self, "self"), other.operand(&scalar, "other")};
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

}  // namespace portable
}  // namespace etmlir
