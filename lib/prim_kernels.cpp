// etmlir_prim::* kernels: size queries that write an Int value. et-to-out-
// variants turns aten::sym_size.int & co. into calls whose last argument is
// the Int slot to write, so dynamic sizes flow into later IntLists.
//
// Two more write a Scalar slot of the kind the program planned (Int, Double
// or Bool): _local_scalar_dense (Tensor.item()) and sym_is_contiguous. The
// arithmetic on sizes (etmlir_prim::sym_add, sym_floordiv, ...) lives in
// sym_kernels.cpp and is registered with these.
#include <cstring>

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

// The float value of IEEE binary16 bits (exact).
double half_bits_to_double(uint16_t h) {
  const int sign = (h & 0x8000u) ? -1 : 1;
  const int exp = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  if (exp == 0x1f) return mantissa ? __builtin_nan("") : sign * __builtin_inf();
  if (exp == 0) return sign * __builtin_ldexp(mantissa, -24);  // subnormal or zero
  return sign * __builtin_ldexp(mantissa | 0x400, exp - 25);
}

double bfloat16_bits_to_double(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// etmlir_prim::_local_scalar_dense(Tensor self) -> Scalar: the one element
// of `self` (Tensor.item()) into the result slot. The slot's kind is the
// program's choice and must be the element's: Double for floating dtypes,
// Int for integral ones, Bool for bool (PyTorch's Scalar of that dtype).
Error local_scalar_dense(KernelContext& ctx, EValue** args) {
  const Tensor& self = args[0]->to_tensor();
  EValue& result = *args[1];
  if (self.numel() != 1) {
    return ctx.fail(ErrorCode::InvalidArgument,
                    "self has %lld elements; only a one-element tensor converts to a Scalar",
                    static_cast<long long>(self.numel()));
  }
  const void* data = self.data();
  Tag wanted = Tag::None;
  double d = 0;
  int64_t i = 0;
  bool b = false;
  switch (self.dtype()) {
    case ScalarType::Float: wanted = Tag::Double, d = *static_cast<const float*>(data); break;
    case ScalarType::Double: wanted = Tag::Double, d = *static_cast<const double*>(data); break;
    case ScalarType::Half: wanted = Tag::Double, d = half_bits_to_double(*static_cast<const uint16_t*>(data)); break;
    case ScalarType::BFloat16:
      wanted = Tag::Double, d = bfloat16_bits_to_double(*static_cast<const uint16_t*>(data));
      break;
    case ScalarType::Int64: wanted = Tag::Int, i = *static_cast<const int64_t*>(data); break;
    case ScalarType::Int32: wanted = Tag::Int, i = *static_cast<const int32_t*>(data); break;
    case ScalarType::Int16: wanted = Tag::Int, i = *static_cast<const int16_t*>(data); break;
    case ScalarType::Int8: wanted = Tag::Int, i = *static_cast<const int8_t*>(data); break;
    case ScalarType::UInt8: wanted = Tag::Int, i = *static_cast<const uint8_t*>(data); break;
    case ScalarType::Bool: wanted = Tag::Bool, b = *static_cast<const uint8_t*>(data) != 0; break;
  }
  if (wanted == Tag::None) {
    return ctx.fail(ErrorCode::NotSupported, "self has dtype %s, which has no Scalar kind", dtype_name(self.dtype()));
  }
  if (result.tag != wanted) {
    return ctx.fail(ErrorCode::InvalidArgument,
                    "the result slot's kind is %s, but a %s element gives a %s Scalar (the program must plan the "
                    "result with the element's kind: f64, i64 or i1)",
                    tag_name(result.tag), dtype_name(self.dtype()), tag_name(wanted));
  }
  if (wanted == Tag::Double) result.payload.as_double = d;
  if (wanted == Tag::Int) result.payload.as_int = i;
  if (wanted == Tag::Bool) result.payload.as_bool = b;
  return Error::ok();
}

// etmlir_prim::sym_is_contiguous(Tensor self, MemoryFormat memory_format) -> Scalar:
// runtime tensors are always contiguous (row-major), so this is true for
// contiguous_format (and preserve_format, as in PyTorch); for channels_last
// (channels_last_3d) it is PyTorch's rule applied to row-major strides: true
// only where the sizes make both layouts coincide. Writes a Bool slot, or 1/0
// into an Int slot (the compiler plans size-query results as Ints).
Error sym_is_contiguous(KernelContext& ctx, EValue** args) {
  const Tensor& self = args[0]->to_tensor();
  const int64_t format = args[1]->to_int();
  EValue& result = *args[2];
  bool contiguous = true;
  if (format == 2 || format == 3) {  // channels_last: dims C, W, H, N; channels_last_3d: C, W, H, D, N
    static const int32_t kOrder2d[] = {1, 3, 2, 0};
    static const int32_t kOrder3d[] = {1, 4, 3, 2, 0};
    const int32_t rank = format == 2 ? 4 : 5;
    const int32_t* order = format == 2 ? kOrder2d : kOrder3d;
    contiguous = self.dim() == rank;
    int64_t expected = 1;
    for (int32_t k = 0; contiguous && k < rank; ++k) {
      const int64_t size = self.size(order[k]);
      if (size == 1) continue;
      contiguous = self.strides()[order[k]] == expected;
      expected *= size;
    }
  } else if (format != 0 && format != 1) {
    return ctx.fail(ErrorCode::InvalidArgument,
                    "memory_format %lld is not one of contiguous_format (0), preserve_format (1), channels_last (2), "
                    "channels_last_3d (3)",
                    static_cast<long long>(format));
  }
  if (result.tag == Tag::Bool) {
    result.payload.as_bool = contiguous;
  } else if (result.tag == Tag::Int) {
    result.payload.as_int = contiguous ? 1 : 0;
  } else {
    return ctx.fail(ErrorCode::InvalidArgument, "the result slot's kind is %s; expected bool (or int)",
                    tag_name(result.tag));
  }
  return Error::ok();
}

}  // namespace

Error register_sym_kernels(KernelRegistry& registry);  // sym_kernels.cpp

Error register_prim_kernels(KernelRegistry& registry) {
  // Result slots are Ints the loader reserved: signature kind 'i'.
  ET_CHECK_OK(registry.add("etmlir_prim::sym_size.int", "Ti|i", sym_size_int));
  ET_CHECK_OK(registry.add("etmlir_prim::sym_numel", "T|i", sym_numel));
  ET_CHECK_OK(registry.add("etmlir_prim::sym_stride.int", "Ti|i", sym_stride_int));
  ET_CHECK_OK(registry.add("etmlir_prim::sym_storage_offset", "T|i", sym_storage_offset));
  // Scalar slots: whatever kind the program planned; the kernels check it.
  ET_CHECK_OK(registry.add("etmlir_prim::_local_scalar_dense", "T|s", local_scalar_dense));
  ET_CHECK_OK(registry.add("etmlir_prim::sym_is_contiguous", "Ti|s", sym_is_contiguous));
  return register_sym_kernels(registry);
}

}  // namespace etmlir
