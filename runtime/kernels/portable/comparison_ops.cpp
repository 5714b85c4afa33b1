// Comparison kernels: eq/ne/lt/le/gt/ge against a tensor (broadcast) or a
// Scalar. Both sides are compared in PyTorch's promoted dtype (at::result_type);
// the result is written as bool (or converted to out's dtype: 0/1).
#include <limits>

#include "kernel_util.h"
#include "portable_kernels.h"

namespace etmlir {
namespace {

using kutil::Operand;

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

// The dtype both sides are compared in.
ScalarType compare_dtype(const Tensor& self, const EValue& other) {
  kutil::ResultType rt;
  rt.add_tensor(self);
  if (other.is_tensor()) {
    rt.add_tensor(other.to_tensor());
  } else {
    rt.add_scalar(other);
  }
  ScalarType t = rt.get();
  // Small integers compare exactly as int32.
  if (t == ScalarType::UInt8 || t == ScalarType::Int8 || t == ScalarType::Int16) t = ScalarType::Int32;
  // An int scalar outside int32's range compares exactly as int64 (PyTorch would wrap it).
  if (t == ScalarType::Int32 && other.is_int() &&
      (other.to_int() < std::numeric_limits<int32_t>::min() || other.to_int() > std::numeric_limits<int32_t>::max())) {
    t = ScalarType::Int64;
  }
  return t;
}

// self <cmp> other, where other is the Tensor or Scalar argument args[1].
template <typename Cmp>
Error compare(KernelContext& ctx, EValue** args) {
  const Tensor& self = args[0]->to_tensor();
  const EValue& other = *args[1];
  Tensor& out = args[2]->to_tensor();
  ScalarType ct = compare_dtype(self, other);
  Error err;
  bool ok = kutil::dispatch_compute(ct, [&](auto tag) {
    using T = decltype(tag);
    T scalar{};
    Operand ins[2] = {Operand::of(self, "self"), Operand{}};
    if (other.is_tensor()) {
      ins[1] = Operand::of(other.to_tensor(), "other");
    } else {
      scalar = kutil::scalar_as<T>(other);
      ins[1] = Operand::scalar(&scalar, "other");
    }
    err = kutil::elementwise<bool, T, T>(ctx, ins, out, Cmp{});
  });
  if (!ok) {
    return ctx.fail(ErrorCode::NotSupported, "cannot compare in dtype %s (self is %s); this kernel supports %s",
                    dtype_name(ct), dtype_name(self.dtype()), kutil::kComputeDtypes);
  }
  return err;
}

}  // namespace

Error register_comparison_kernels(KernelRegistry& r) {
  // aten::<op>.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out)
  // aten::<op>.Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out)
  ET_REGISTER_KERNEL(r, "aten::eq.Scalar_out", "Ts|T", compare<Eq>);
  ET_REGISTER_KERNEL(r, "aten::eq.Tensor_out", "TT|T", compare<Eq>);
  ET_REGISTER_KERNEL(r, "aten::ne.Scalar_out", "Ts|T", compare<Ne>);
  ET_REGISTER_KERNEL(r, "aten::ne.Tensor_out", "TT|T", compare<Ne>);
  ET_REGISTER_KERNEL(r, "aten::lt.Scalar_out", "Ts|T", compare<Lt>);
  ET_REGISTER_KERNEL(r, "aten::lt.Tensor_out", "TT|T", compare<Lt>);
  ET_REGISTER_KERNEL(r, "aten::le.Scalar_out", "Ts|T", compare<Le>);
  ET_REGISTER_KERNEL(r, "aten::le.Tensor_out", "TT|T", compare<Le>);
  ET_REGISTER_KERNEL(r, "aten::gt.Scalar_out", "Ts|T", compare<Gt>);
  ET_REGISTER_KERNEL(r, "aten::gt.Tensor_out", "TT|T", compare<Gt>);
  ET_REGISTER_KERNEL(r, "aten::ge.Scalar_out", "Ts|T", compare<Ge>);
  ET_REGISTER_KERNEL(r, "aten::ge.Tensor_out", "TT|T", compare<Ge>);
  return Error::ok();
}

}  // namespace etmlir
