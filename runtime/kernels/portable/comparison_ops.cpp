// Comparison kernels: eq/ne/lt/le/gt/ge against a tensor (broadcast) or a
// Scalar. Like PyTorch, both sides are converted to their result type
// (at::result_type: a Scalar or 0-d tensor rounds or wraps into it) and
// compared there (float for float16/bfloat16, int64 for the small ints); the
// result is written as bool, or converted to out's dtype (0/1).
#include "binary_util.h"
#include "generated/comparison.h"
#include "kernel_util.h"

namespace etmlir {
namespace {

using kutil::Operand;
using kutil::TensorOrScalar;

struct Eq {
  template <typename T>
  bool operator()(T a, T b) const { return a == b; }
};
struct Ne {
  template <typename T>
  bool operator()(T a, T b) const { return a != b; }
};
struct Lt {
  template <typename T>
  bool operator()(T a, T b) const { return a < b; }
};
struct Le {
  template <typename T>
  bool operator()(T a, T b) const { return a <= b; }
};
struct Gt {
  template <typename T>
  bool operator()(T a, T b) const { return a > b; }
};
struct Ge {
  template <typename T>
  bool operator()(T a, T b) const { return a >= b; }
};

// self <cmp> other, in the result type of both.
template <typename Cmp>
Error compare(KernelContext& ctx, const Tensor& self, TensorOrScalar other, Tensor& out) {
  const TensorOrScalar inputs[2] = {TensorOrScalar::of(self), other};
  const char* const names[2] = {"self", "other"};
  const ScalarType result = binutil::result_type(inputs[0], inputs[1]);
  Error err;
  bool ok = binutil::with_operands<binutil::Kinds::kAll>(result, inputs, names, [&](auto tag, const Operand* ins) {
    using T = decltype(tag);
    err = kutil::elementwise<bool, T, T>(ctx, ins, out, Cmp{});
  });
  if (!ok) {
    return ctx.fail(ErrorCode::NotSupported, "cannot compare in dtype %s (self is %s)", dtype_name(result),
                    dtype_name(self.dtype()));
  }
  return err;
}

}  // namespace

namespace portable {

Error eq_scalar_out(KernelContext& ctx, const Tensor& self, const EValue& other, Tensor& out) {
  return compare<Eq>(ctx, self, TensorOrScalar::of(other), out);
}
Error eq_tensor_out(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  return compare<Eq>(ctx, self, TensorOrScalar::of(other), out);
}
Error ne_scalar_out(KernelContext& ctx, const Tensor& self, const EValue& other, Tensor& out) {
  return compare<Ne>(ctx, self, TensorOrScalar::of(other), out);
}
Error ne_tensor_out(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  return compare<Ne>(ctx, self, TensorOrScalar::of(other), out);
}
Error lt_scalar_out(KernelContext& ctx, const Tensor& self, const EValue& other, Tensor& out) {
  return compare<Lt>(ctx, self, TensorOrScalar::of(other), out);
}
Error lt_tensor_out(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  return compare<Lt>(ctx, self, TensorOrScalar::of(other), out);
}
Error le_scalar_out(KernelContext& ctx, const Tensor& self, const EValue& other, Tensor& out) {
  return compare<Le>(ctx, self, TensorOrScalar::of(other), out);
}
Error le_tensor_out(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  return compare<Le>(ctx, self, TensorOrScalar::of(other), out);
}
Error gt_scalar_out(KernelContext& ctx, const Tensor& self, const EValue& other, Tensor& out) {
  return compare<Gt>(ctx, self, TensorOrScalar::of(other), out);
}
Error gt_tensor_out(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  return compare<Gt>(ctx, self, TensorOrScalar::of(other), out);
}
Error ge_scalar_out(KernelContext& ctx, const Tensor& self, const EValue& other, Tensor& out) {
  return compare<Ge>(ctx, self, TensorOrScalar::of(other), out);
}
Error ge_tensor_out(KernelContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  return compare<Ge>(ctx, self, TensorOrScalar::of(other), out);
}

}  // namespace portable
}  // namespace etmlir
