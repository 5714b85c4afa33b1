// aten::embedding.out: gathers rows of a [num_embeddings, dim] table by
// int64 or int32 indices of any shape; out is indices.shape + [dim]. Any
// table dtype (rows are copied as bytes). Every index is range-checked.
#include <cstring>

#include "kernel_util_linalg.h"
#include "portable_kernels.h"

namespace etmlir {
namespace {

using linalg::Described;

template <typename Index>
Error gather_rows(KernelContext& ctx, const Tensor& weight, const Index* indices, int64_t count, Tensor& out) {
  const int64_t rows = weight.size(0);
  const size_t row_bytes = static_cast<size_t>(weight.size(1)) * weight.element_size();
  const uint8_t* table = static_cast<const uint8_t*>(weight.data());
  uint8_t* dst = static_cast<uint8_t*>(out.mutable_data());
  for (int64_t i = 0; i < count; ++i) {
    const int64_t index = static_cast<int64_t>(indices[i]);
    if (index < 0 || index >= rows) {
      return ctx.fail(ErrorCode::InvalidArgument,
                      "index %lld (at flat position %lld of indices) is out of range for weight %s with %lld rows",
                      static_cast<long long>(index), static_cast<long long>(i), Described(weight).text,
                      static_cast<long long>(rows));
    }
    if (row_bytes != 0) std::memcpy(dst + static_cast<size_t>(i) * row_bytes, table + index * row_bytes, row_bytes);
  }
  return Error::ok();
}

// aten::embedding.out(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False,
//   bool sparse=False, *, Tensor(a!) out)
// padding_idx, scale_grad_by_freq and sparse only matter for the gradient.
Error embedding_out(KernelContext& ctx, EValue** args) {
  const Tensor& weight = args[0]->to_tensor();
  const Tensor& indices = args[1]->to_tensor();
  Tensor& out = args[5]->to_tensor();
  ET_CHECK_OK(linalg::check_sane(ctx, weight, "weight"));
  ET_CHECK_OK(linalg::check_sane(ctx, indices, "indices"));
  if (weight.dim() != 2) {
    return ctx.fail(ErrorCode::InvalidArgument, "weight must be 2-D (num_embeddings, embedding_dim), got %s",
                    Described(weight).text);
  }
  if (indices.dtype() != ScalarType::Int64 && indices.dtype() != ScalarType::Int32) {
    return ctx.fail(ErrorCode::InvalidArgument, "indices must be int64 or int32, got %s", Described(indices).text);
  }
  if (indices.dim() + 1 > kMaxDims) {
    return ctx.fail(ErrorCode::InvalidArgument, "indices %s has too many dims (out would have %d, at most %d)",
                    Described(indices).text, indices.dim() + 1, kMaxDims);
  }
  ET_CHECK_OK(linalg::check_dtype(ctx, out, weight.dtype(), "out"));
  int64_t sizes[kMaxDims];
  for (int32_t d = 0; d < indices.dim(); ++d) sizes[d] = indices.size(d);
  sizes[indices.dim()] = weight.size(1);
  ET_CHECK_OK(linalg::resize(ctx, out, sizes, indices.dim() + 1, "out"));
  if (indices.numel() == 0) return Error::ok();
  if (indices.dtype() == ScalarType::Int64) {
    return gather_rows(ctx, weight, indices.data_as<const int64_t>(), indices.numel(), out);
  }
  return gather_rows(ctx, weight, indices.data_as<const int32_t>(), indices.numel(), out);
}

}  // namespace

Error register_embedding_kernels(KernelRegistry& r) {
  ET_REGISTER_KERNEL(r, "aten::embedding.out", "TTibb|T", embedding_out);
  return Error::ok();
}

}  // namespace etmlir
