// etmlir_prim::* kernels: size queries that write an Int value. et-to-out-
// variants turns aten::sym_size.int & co. into calls whose last argument is
// the Int slot to write, so dynamic sizes flow into later IntLists.
#include "etmlir/runtime/kernel.h"

namespace etmlir {
namespace {

// etmlir_prim::sym_size.int(Tensor self, int dim) -> int   (args: self, dim, result)
Error sym_size_int(KernelContext& ctx, EValue** args) {
  const Tensor& self = args[0]->to_tensor();
  int64_t dim = args[1]->to_int();
  int64_t rank = self.dim();
  if (dim < -rank || dim >= (rank == 0 ? 1 : rank) || rank == 0) {
    return ctx.fail(ErrorCode::InvalidArgument, "dim %lld is out of range for a tensor of rank %lld",
                    static_cast<long long>(dim), static_cast<long long>(rank));
  }
  if (dim < 0) dim += rank;
  args[2]->payload.as_int = self.size(static_cast<int32_t>(dim));
  return Error::ok();
}

// etmlir_prim::sym_numel(Tensor self) -> int
Error sym_numel(KernelContext&, EValue** args) {
  args[1]->payload.as_int = args[0]->to_tensor().numel();
  return Error::ok();
}

// etmlir_prim::sym_stride.int(Tensor self, int dim) -> int
Error sym_stride_int(KernelContext& ctx, EValue** args) {
  const Tensor& self = args[0]->to_tensor();
  int64_t dim = args[1]->to_int();
  int64_t rank = self.dim();
  if (rank == 0 || dim < -rank || dim >= rank) {
    return ctx.fail(ErrorCode::InvalidArgument, "dim %lld is out of range for a tensor of rank %lld",
                    static_cast<long long>(dim), static_cast<long long>(rank));
  }
  if (dim < 0) dim += rank;
  args[2]->payload.as_int = self.strides()[dim];
  return Error::ok();
}

// etmlir_prim::sym_storage_offset(Tensor self) -> int: runtime tensors never have one.
Error sym_storage_offset(KernelContext&, EValue** args) {
  args[1]->payload.as_int = 0;
  return Error::ok();
}

}  // namespace

Error register_prim_kernels(KernelRegistry& registry) {
  // Result slots are Ints the loader reserved: signature kind 'i'.
  ET_CHECK_OK(registry.add("etmlir_prim::sym_size.int", "Ti|i", sym_size_int));
  ET_CHECK_OK(registry.add("etmlir_prim::sym_numel", "T|i", sym_numel));
  ET_CHECK_OK(registry.add("etmlir_prim::sym_stride.int", "Ti|i", sym_stride_int));
  ET_CHECK_OK(registry.add("etmlir_prim::sym_storage_offset", "T|i", sym_storage_offset));
  return Error::ok();
}

}  // namespace etmlir
