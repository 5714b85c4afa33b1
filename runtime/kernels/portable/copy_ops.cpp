// Copy kernels: the *_copy variants of view ops (view, permute, transpose,
// expand, squeeze, unsqueeze, as_strided, diagonal, unfold, slice, narrow,
// select, split, unbind), flip, repeat, cat, clone, the scatters into a slice
// (select_scatter, slice_scatter), and the dtype-converting copies copy,
// _to_copy and etmlir::_to_dim_order_copy.
//
// A view copy is a strided read of self (kutil::Plan + kutil::strided_copy):
// raw elements keyed on element size, so every dtype; rows that stay
// contiguous become memcpy and transposes go through tiles. Out must have
// self's dtype except in cat (promotes like PyTorch) and the converting
// copies, which convert like PyTorch's copy_.
#include <cstring>

#include "copy_util.h"
#include "generated/copy.h"
#include "kernel_util.h"

namespace etmlir {
namespace {

using kutil::Plan;
using kutil_copy::check_same_dtype;

// Copies self's bytes to out (same numel and dtype), tolerating overlap.
void copy_all(const Tensor& self, Tensor& out) {
  if (out.nbytes() > 0 && out.mutable_data() != self.data()) {
    std::memmove(out.mutable_data(), self.data(), out.nbytes());
  }
}

// out = self reshaped to `sizes` (same numel, checked by the caller).
Error reshape_copy(KernelContext& ctx, const Tensor& self, const int64_t* sizes, int32_t dim, Tensor& out) {
  ET_CHECK_OK(kutil::resize_out(ctx, out, sizes, dim));
  copy_all(self, out);
  return Error::ok();
}

// self without the size-1 dims flagged in `flags`.
Error squeeze_dims(KernelContext& ctx, const Tensor& self, const bool* flags, Tensor& out) {
  int64_t sizes[kMaxDims];
  int32_t n = 0;
  for (int32_t i = 0; i < self.dim(); ++i) {
    if (!(flags[i] && self.size(i) == 1)) sizes[n++] = self.size(i);
  }
  return reshape_copy(ctx, self, sizes, n, out);
}

// out (resized to `sizes`) = the view of self with element `strides` that
// starts `offset` elements into self's data. Reads stay inside self: callers
// derive strides and offset from self's shape.
Error view_copy(KernelContext& ctx, const Tensor& self, const int64_t* sizes, const int64_t* strides, int32_t dim,
                int64_t offset, Tensor& out) {
  ET_CHECK_OK(kutil::resize_out(ctx, out, sizes, dim));
  if (out.numel() == 0) return Error::ok();
  int64_t full[1][kMaxDims];
  for (int32_t d = 0; d < dim; ++d) full[0][d] = strides[d];
  const size_t es = self.element_size();
  kutil::strided_copy(out.mutable_data(), static_cast<const uint8_t*>(self.data()) + offset * static_cast<int64_t>(es),
                      es, Plan<1>(sizes, dim, full));
  return Error::ok();
}

// out = self with its dims reordered: out dim i is self dim perm[i].
Error permute(KernelContext& ctx, const Tensor& self, const int32_t* perm, Tensor& out) {
  const int32_t rank = self.dim();
  int64_t own[kMaxDims], sizes[kMaxDims], strides[kMaxDims];
  kutil::contiguous_strides(self.sizes(), rank, own);
  for (int32_t i = 0; i < rank; ++i) {
    sizes[i] = self.size(perm[i]);
    strides[i] = own[perm[i]];
  }
  return view_copy(ctx, self, sizes, strides, rank, 0, out);
}

// Fails unless `sizes` has at most kMaxDims entries, all non-negative.
Error check_size_list(KernelContext& ctx, Span<const int64_t> sizes, const char* what) {
  if (sizes.size() > static_cast<size_t>(kMaxDims)) {
    return ctx.fail(ErrorCode::InvalidArgument, "%s has %zu entries; at most %d dims are supported", what,
                    sizes.size(), kMaxDims);
  }
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] < 0) {
      return ctx.fail(ErrorCode::InvalidArgument, "%s[%zu] is %lld; sizes must be non-negative", what, d,
                      static_cast<long long>(sizes[d]));
    }
  }
  return Error::ok();
}

// outer x (chunk) x inner decomposition of a tensor around `dim`.
void split_around(const Tensor& t, int32_t dim, int64_t* outer, int64_t* inner) {
  *outer = 1;
  *inner = 1;
  for (int32_t d = 0; d < dim; ++d) *outer *= t.size(d);
  for (int32_t d = dim + 1; d < t.dim(); ++d) *inner *= t.size(d);
}

// A non-negative dim of a tensor of rank >= 1 that `op` ("slice", "select", ...) indexes.
Error indexed_dim(KernelContext& ctx, const Tensor& self, int64_t dim, const char* op, int32_t* result) {
  ET_CHECK_OK(kutil::check_rank(ctx, self, "self"));
  if (self.dim() == 0) return ctx.fail(ErrorCode::InvalidArgument, "%s() cannot be applied to a zero-dim tensor", op);
  int64_t d = 0;
  ET_CHECK_OK(kutil::normalize_dim(ctx, dim, self.dim(), &d));
  *result = static_cast<int32_t>(d);
  return Error::ok();
}

// PyTorch's slice bounds: start/end wrap once and clamp to [0, size].
struct SliceRange {
  int64_t start = 0;
  int64_t length = 0;
};
Error slice_range(KernelContext& ctx, int64_t size, std::optional<int64_t> start_arg, std::optional<int64_t> end_arg,
                  int64_t step, SliceRange* range) {
  if (step <= 0) {
    return ctx.fail(ErrorCode::InvalidArgument, "step must be positive, got %lld", static_cast<long long>(step));
  }
  int64_t start = start_arg.value_or(0);
  int64_t end = end_arg.value_or(size);
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = start < 0 ? 0 : (start > size ? size : start);
  end = end < start ? start : (end > size ? size : end);
  range->start = start;
  range->length = end == start ? 0 : (end - start - 1) / step + 1;
  return Error::ok();
}

// The view self[..., start : start + step * length : step, ...] along `dim`:
// its sizes and strides (rank of self) and the element offset of its first element.
void slice_view(const Tensor& self, int32_t dim, int64_t start, int64_t length, int64_t step, int64_t* sizes,
                int64_t* strides, int64_t* offset) {
  kutil::contiguous_strides(self.sizes(), self.dim(), strides);
  for (int32_t i = 0; i < self.dim(); ++i) sizes[i] = self.size(i);
  sizes[dim] = length;
  *offset = length > 0 ? start * strides[dim] : 0;
  if (length > 1) strides[dim] *= step;  // then step < size: no overflow
}

// `index` in [-size, size) made non-negative.
Error normalize_index(KernelContext& ctx, const Tensor& self, int32_t dim, int64_t index, int64_t* result) {
  const int64_t size = self.size(dim);
  if (index < -size || index >= size) {
    char shape[128];
    return ctx.fail(ErrorCode::InvalidArgument, "index %lld is out of range for dim %d of self %s",
                    static_cast<long long>(index), dim,
                    kutil::format_shape(shape, sizeof(shape), self.sizes(), self.dim()));
  }
  *result = index < 0 ? index + size : index;
  return Error::ok();
}

// Writes chunks of self along `dim` to `outs`: out[i] gets `length(i)`
// consecutive indices (the lengths sum to self's size there, checked by the
// caller). `drop_dim` (unbind) removes the dim from the outs' shapes.
template <typename LengthFn>
Error split_chunks(KernelContext& ctx, const Tensor& self, int32_t dim, Span<Tensor* const> outs, LengthFn length,
                   bool drop_dim) {
  const int32_t rank = self.dim();
  int64_t sizes[kMaxDims];
  char name[32];
  for (size_t i = 0; i < outs.size(); ++i) {
    std::snprintf(name, sizeof(name), "out[%zu]", i);
    if (outs[i] == nullptr) return ctx.fail(ErrorCode::InvalidArgument, "%s is None", name);
    ET_CHECK_OK(check_same_dtype(ctx, self, *outs[i], name));
    int32_t n = 0;
    for (int32_t d = 0; d < rank; ++d) {
      if (d != dim) {
        sizes[n++] = self.size(d);
      } else if (!drop_dim) {
        sizes[n++] = length(i);
      }
    }
    ET_CHECK_OK(kutil::resize_out(ctx, *outs[i], sizes, n, name));
  }
  int64_t outer = 0, inner = 0;
  split_around(self, dim, &outer, &inner);
  const size_t es = self.element_size();
  const size_t row = static_cast<size_t>(self.size(dim) * inner) * es;
  const uint8_t* src = static_cast<const uint8_t*>(self.data());
  size_t offset = 0;
  for (size_t i = 0; i < outs.size(); ++i) {
    const size_t chunk = static_cast<size_t>(length(i) * inner) * es;
    uint8_t* dst = static_cast<uint8_t*>(outs[i]->mutable_data());
    if (chunk > 0) {
      for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + o * chunk, src + o * row + offset, chunk);
    }
    offset += chunk;
  }
  return Error::ok();
}

// Out-variant memory formats (c10::MemoryFormat): 0 Contiguous, 1 Preserve.
// Every runtime tensor is contiguous, so those are the only ones.
Error check_memory_format(KernelContext& ctx, std::optional<int64_t> memory_format) {
  if (memory_format && *memory_format != 0 && *memory_format != 1) {
    return ctx.fail(ErrorCode::NotSupported, "memory_format %lld is not supported (only contiguous tensors)",
                    static_cast<long long>(*memory_format));
  }
  return Error::ok();
}

// self converted to out's dtype, same shape.
Error to_copy(KernelContext& ctx, const Tensor& self, Tensor& out) {
  ET_CHECK_OK(kutil::resize_out(ctx, out, self.sizes(), self.dim()));
  if (self.dtype() == out.dtype()) {
    ET_CHECK_OK(check_same_dtype(ctx, self, out));
    copy_all(self, out);
    return Error::ok();
  }
  if (element_size(self.dtype()) == 0) return kutil::unsupported_dtype(ctx, "self", self.dtype(), "known dtypes");
  if (!kutil_copy::convert_contiguous(out.mutable_data(), out.dtype(), self.data(), self.dtype(), out.numel())) {
    return kutil::unsupported_dtype(ctx, "out", out.dtype(), "known dtypes");
  }
  return Error::ok();
}

// The plan that writes `src` (its own shape) into `out` at `strides` (the
// positions of a slice of out, starting at element `offset`), converting to
// out's dtype. `sizes`/`dim` is the slice's shape, which src must have.
Error scatter_into(KernelContext& ctx, const Tensor& src, const int64_t* sizes, const int64_t* strides, int32_t dim,
                   int64_t offset, Tensor& out) {
  bool match = src.dim() == dim;
  for (int32_t d = 0; d < dim && match; ++d) match = src.size(d) == sizes[d];
  if (!match) {
    char got[128], want[128];
    return ctx.fail(ErrorCode::InvalidArgument, "src has shape %s; expected the slice's shape %s",
                    kutil::format_shape(got, sizeof(got), src.sizes(), src.dim()),
                    kutil::format_shape(want, sizeof(want), sizes, dim));
  }
  if (src.numel() == 0) return Error::ok();
  int64_t full[1][kMaxDims];
  for (int32_t d = 0; d < dim; ++d) full[0][d] = strides[d];
  uint8_t* base = static_cast<uint8_t*>(out.mutable_data()) + offset * static_cast<int64_t>(out.element_size());
  if (!kutil_copy::convert_strided(base, out.dtype(), src.data(), src.dtype(), Plan<1>(sizes, dim, full),
                                   /*scatter=*/true)) {
    return kutil::unsupported_dtype(ctx, "src", src.dtype(), "known dtypes");
  }
  return Error::ok();
}

// One dim of repeat: self size `size`, repeated `times`.
struct RepeatDim {
  int64_t size;
  int64_t times;
};

// Builds out's block for dim `d`: the self sub-blocks at dim d (recursing
// inward), then that block copied `times - 1` more times. `in_step`/`out_step`
// are the bytes of one index at each dim.
void repeat_block(uint8_t* dst, const uint8_t* src, const RepeatDim* dims, int32_t d, int32_t n,
                  const size_t* in_step, const size_t* out_step) {
  const RepeatDim& r = dims[d];
  if (d == n - 1 && r.size == 1) {  // one element repeated: a fill
    uint64_t bits = 0;
    std::memcpy(&bits, src, in_step[d]);
    kutil_copy::fill_elements(dst, bits, in_step[d], r.times);
    return;
  }
  if (d == n - 1) {
    std::memcpy(dst, src, static_cast<size_t>(r.size) * in_step[d]);
  } else {
    for (int64_t j = 0; j < r.size; ++j) {
      repeat_block(dst + j * out_step[d], src + j * in_step[d], dims, d + 1, n, in_step, out_step);
    }
  }
  // Doubling: log2(times) copies, however short the block.
  const size_t total = static_cast<size_t>(r.size * r.times) * out_step[d];
  for (size_t filled = static_cast<size_t>(r.size) * out_step[d]; filled < total;) {
    const size_t n = filled < total - filled ? filled : total - filled;
    std::memcpy(dst + filled, dst, n);
    filled += n;
  }
}

}  // namespace

namespace portable {

// ---------------------------------------------------------------------------
// Reshapes: the same bytes under another shape
// ---------------------------------------------------------------------------

Error view_copy_out(KernelContext& ctx, const Tensor& self, Span<const int64_t> size, Tensor& out) {
  ET_CHECK_OK(check_same_dtype(ctx, self, out));
  if (size.size() > static_cast<size_t>(kMaxDims)) {
    return ctx.fail(ErrorCode::InvalidArgument, "size has %zu entries; at most %d dims are supported", size.size(),
                    kMaxDims);
  }
  const int32_t dim = static_cast<int32_t>(size.size());
  int64_t sizes[kMaxDims];
  int32_t infer = -1;
  int64_t known = 1;
  for (int32_t d = 0; d < dim; ++d) {
    int64_t s = size[static_cast<size_t>(d)];
    sizes[d] = s;
    if (s == -1) {
      if (infer >= 0) return ctx.fail(ErrorCode::InvalidArgument, "only one dimension can be inferred (-1)");
      infer = d;
    } else if (s < 0 || __builtin_mul_overflow(known, s, &known)) {
      return ctx.fail(ErrorCode::InvalidArgument, "invalid size %lld at dim %d", static_cast<long long>(s), d);
    }
  }
  char shape[128];
  if (infer >= 0) {
    if (known == 0 || self.numel() % known != 0) {
      return ctx.fail(ErrorCode::InvalidArgument, "shape %s is invalid for input of size %lld",
                      kutil::format_shape(shape, sizeof(shape), sizes, dim), static_cast<long long>(self.numel()));
    }
    sizes[infer] = self.numel() / known;
  } else if (known != self.numel()) {
    return ctx.fail(ErrorCode::InvalidArgument, "shape %s is invalid for input of size %lld",
                    kutil::format_shape(shape, sizeof(shape), sizes, dim), static_cast<long long>(self.numel()));
  }
  return reshape_copy(ctx, self, sizes, dim, out);
}

Error alias_copy_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  ET_CHECK_OK(check_same_dtype(ctx, self, out));
  return reshape_copy(ctx, self, self.sizes(), self.dim(), out);
}

Error detach_copy_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  ET_CHECK_OK(check_same_dtype(ctx, self, out));
  return reshape_copy(ctx, self, self.sizes(), self.dim(), out);
}

Error clone_out(KernelContext& ctx, const Tensor& self, std::optional<int64_t> memory_format, Tensor& out) {
  ET_CHECK_OK(check_same_dtype(ctx, self, out));
  ET_CHECK_OK(check_memory_format(ctx, memory_format));
  return reshape_copy(ctx, self, self.sizes(), self.dim(), out);
}

Error unsqueeze_copy_out(KernelContext& ctx, const Tensor& self, int64_t dim, Tensor& out) {
  ET_CHECK_OK(check_same_dtype(ctx, self, out));
  const int32_t rank = self.dim();
  if (rank < 0 || rank >= kMaxDims) {
    return ctx.fail(ErrorCode::InvalidArgument, "self has rank %d; the result may have at most %d dims", rank,
                    kMaxDims);
  }
  int64_t d = 0;
  ET_CHECK_OK(kutil::normalize_dim(ctx, dim, rank + 1, &d));
  int64_t sizes[kMaxDims];
  for (int32_t i = 0, j = 0; i <= rank; ++i) sizes[i] = i == d ? 1 : self.size(j++);
  return reshape_copy(ctx, self, sizes, rank + 1, out);
}

Error squeeze_copy_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  ET_CHECK_OK(check_same_dtype(ctx, self, out));
  ET_CHECK_OK(kutil::check_rank(ctx, self, "self"));
  bool all[kMaxDims];
  for (int32_t i = 0; i < kMaxDims; ++i) all[i] = true;
  return squeeze_dims(ctx, self, all, out);
}

Error squeeze_copy_dim_out(KernelContext& ctx, const Tensor& self, int64_t dim, Tensor& out) {
  ET_CHECK_OK(check_same_dtype(ctx, self, out));
  ET_CHECK_OK(kutil::check_rank(ctx, self, "self"));
  int64_t d = 0;
  ET_CHECK_OK(kutil::normalize_dim(ctx, dim, self.dim(), &d, "dim", /*scalar_ok=*/true));
  bool flags[kMaxDims] = {};
  if (self.dim() > 0) flags[d] = true;
  return squeeze_dims(ctx, self, flags, out);
}

Error squeeze_copy_dims_out(KernelContext& ctx, const Tensor& self, Span<const int64_t> dim, Tensor& out) {
  ET_CHECK_OK(check_same_dtype(ctx, self, out));
  ET_CHECK_OK(kutil::check_rank(ctx, self, "self"));
  const int32_t rank = self.dim();
  bool flags[kMaxDims] = {};
  bool seen[kMaxDims] = {};
  for (size_t i = 0; i < dim.size(); ++i) {
    int64_t d = 0;
    ET_CHECK_OK(kutil::normalize_dim(ctx, dim[i], rank, &d, "dim", /*scalar_ok=*/true));
    if (seen[d]) return ctx.fail(ErrorCode::InvalidArgument, "dim %lld appears more than once", static_cast<long long>(d));
    seen[d] = true;
    if (rank > 0) flags[d] = true;
  }
  return squeeze_dims(ctx, self, flags, out);
}

// ---------------------------------------------------------------------------
// Strided views
// ---------------------------------------------------------------------------

Error permute_copy_out(KernelContext& ctx, const Tensor& self, Span<const int64_t> dims, Tensor& out) {
  ET_CHECK_OK(check_same_dtype(ctx, self, out));
  ET_CHECK_OK(kutil::check_rank(ctx, self, "self"));
  const int32_t rank = self.dim();
  if (dims.size() != static_cast<size_t>(rank)) {
    return ctx.fail(ErrorCode::InvalidArgument, "dims has %zu entries; self has rank %d", dims.size(), rank);
  }
  int32_t perm[kMaxDims];
  bool seen[kMaxDims] = {};
  for (int32_t i = 0; i < rank; ++i) {
    int64_t d = 0;
    ET_CHECK_OK(kutil::normalize_dim(ctx, dims[static_cast<size_t>(i)], rank, &d, "dims entry"));
    if (seen[d]) return ctx.fail(ErrorCode::InvalidArgument, "dims repeats dim %lld", static_cast<long long>(d));
    seen[d] = true;
    perm[i] = static_cast<int32_t>(d);
  }
  return permute(ctx, self, perm, out);
}

Error transpose_copy_int_out(KernelContext& ctx, const Tensor& self, int64_t dim0, int64_t dim1, Tensor& out) {
  ET_CHECK_OK(check_same_dtype(ctx, self, out));
  ET_CHECK_OK(kutil::check_rank(ctx, self, "self"));
  const int32_t rank = self.dim();
  int64_t d0 = 0, d1 = 0;
  ET_CHECK_OK(kutil::normalize_dim(ctx, dim0, rank, &d0, "dim0", /*scalar_ok=*/true));
  ET_CHECK_OK(kutil::normalize_dim(ctx, dim1, rank, &d1, "dim1", /*scalar_ok=*/true));
  if (rank == 0) return reshape_copy(ctx, self, self.sizes(), 0, out);
  int32_t perm[kMaxDims];
  for (int32_t i = 0; i < rank; ++i) perm[i] = i;
  perm[d0] = static_cast<int32_t>(d1);
  perm[d1] = static_cast<int32_t>(d0);
  return permute(ctx, self, perm, out);
}

Error t_copy_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  ET_CHECK_OK(check_same_dtype(ctx, self, out));
  if (self.dim() > 2) {
    return ctx.fail(ErrorCode::InvalidArgument, "t() expects a tensor with <= 2 dims, but self has rank %d",
                    self.dim());
  }
  if (self.dim() < 2) return reshape_copy(ctx, self, self.sizes(), self.dim(), out);
  const int32_t perm[2] = {1, 0};
  return permute(ctx, self, perm, out);
}

Error expand_copy_out(KernelContext& ctx, const Tensor& self, Span<const int64_t> size, bool implicit, Tensor& out) {
  (void)implicit;
  ET_CHECK_OK(check_same_dtype(ctx, self, out));
  ET_CHECK_OK(kutil::check_rank(ctx, self, "self"));
  const int32_t rank = self.dim();
  if (size.size() < static_cast<size_t>(rank) || size.size() > static_cast<size_t>(kMaxDims)) {
    return ctx.fail(ErrorCode::InvalidArgument,
                    "size has %zu entries; expected at least self's rank %d and at most %d", size.size(), rank,
                    kMaxDims);
  }
  const int32_t dim = static_cast<int32_t>(size.size());
  int64_t own[kMaxDims], sizes[kMaxDims], strides[kMaxDims];
  kutil::contiguous_strides(self.sizes(), rank, own);
  for (int32_t i = 0; i < dim; ++i) {
    const int64_t s = size[static_cast<size_t>(i)];
    const int32_t j = i - (dim - rank);
    if (j < 0) {
      if (s < 0) {
        return ctx.fail(ErrorCode::InvalidArgument, "expanded size %lld is not allowed in new leading dim %d",
                        static_cast<long long>(s), i);
      }
      sizes[i] = s;
      strides[i] = 0;
    } else if (s == -1 || s == self.size(j)) {
      sizes[i] = self.size(j);
      strides[i] = own[j];
    } else if (self.size(j) == 1 && s >= 0) {
      sizes[i] = s;
      strides[i] = 0;
    } else {
      return ctx.fail(ErrorCode::InvalidArgument,
                      "expanded size %lld must match the existing size %lld at dim %d (only size-1 dims expand)",
                      static_cast<long long>(s), static_cast<long long>(self.size(j)), i);
    }
  }
  return view_copy(ctx, self, sizes, strides, dim, 0, out);
}

// as_strided over self's elements (its storage): every element the view
// reads must lie in [0, self.numel()).
Error as_strided_copy_out(KernelContext& ctx, const Tensor& self, Span<const int64_t> size, Span<const int64_t> stride,
                          std::optional<int64_t> storage_offset, Tensor& out) {
  ET_CHECK_OK(check_same_dtype(ctx, self, out));
  if (size.size() != stride.size()) {
    return ctx.fail(ErrorCode::InvalidArgument, "size has %zu entries but stride has %zu", size.size(), stride.size());
  }
  ET_CHECK_OK(check_size_list(ctx, size, "size"));
  const int32_t dim = static_cast<int32_t>(size.size());
  const int64_t offset = storage_offset.value_or(0);
  if (offset < 0) {
    return ctx.fail(ErrorCode::InvalidArgument, "storage_offset is %lld; it must be non-negative",
                    static_cast<long long>(offset));
  }
  int64_t numel = 1;
  if (!kutil::checked_numel(size.data(), dim, &numel)) {
    return ctx.fail(ErrorCode::InvalidArgument, "the number of elements of size overflows");
  }
  // The last element read: offset + sum((size - 1) * stride), overflow-checked.
  int64_t last = offset;
  bool overflow = false;
  for (int32_t d = 0; d < dim; ++d) {
    const int64_t st = stride[static_cast<size_t>(d)];
    if (st < 0) {
      return ctx.fail(ErrorCode::InvalidArgument, "stride[%d] is %lld; negative strides are not supported", d,
                      static_cast<long long>(st));
    }
    int64_t span = 0;
    if (size[static_cast<size_t>(d)] > 0) {
      overflow = overflow || __builtin_mul_overflow(size[static_cast<size_t>(d)] - 1, st, &span) ||
                 __builtin_add_overflow(last, span, &last);
    }
  }
  if (numel > 0 && (overflow || last >= self.numel())) {
    char sizes_text[128], strides_text[128], self_text[128];
    return ctx.fail(ErrorCode::InvalidArgument,
                    "size %s with stride %s at storage_offset %lld reads past the %lld elements of self %s",
                    kutil::format_shape(sizes_text, sizeof(sizes_text), size.data(), dim),
                    kutil::format_shape(strides_text, sizeof(strides_text), stride.data(), dim),
                    static_cast<long long>(offset), static_cast<long long>(self.numel()),
                    kutil::format_shape(self_text, sizeof(self_text), self.sizes(), self.dim()));
  }
  return view_copy(ctx, self, size.data(), stride.data(), dim, numel > 0 ? offset : 0, out);
}

Error diagonal_copy_out(KernelContext& ctx, const Tensor& self, int64_t offset, int64_t dim1, int64_t dim2,
                        Tensor& out) {
  ET_CHECK_OK(check_same_dtype(ctx, self, out));
  ET_CHECK_OK(kutil::check_rank(ctx, self, "self"));
  const int32_t rank = self.dim();
  int64_t a = 0, b = 0;
  ET_CHECK_OK(kutil::normalize_dim(ctx, dim1, rank, &a, "dim1"));
  ET_CHECK_OK(kutil::normalize_dim(ctx, dim2, rank, &b, "dim2"));
  if (a == b) {
    return ctx.fail(ErrorCode::InvalidArgument, "dim1 and dim2 are both dim %lld; they must differ",
                    static_cast<long long>(a));
  }
  int64_t own[kMaxDims], sizes[kMaxDims], strides[kMaxDims];
  kutil::contiguous_strides(self.sizes(), rank, own);
  const int64_t sa = self.size(static_cast<int32_t>(a)), sb = self.size(static_cast<int32_t>(b));
  int64_t length = offset >= 0 ? (sb - offset < sa ? sb - offset : sa) : (sa + offset < sb ? sa + offset : sb);
  if (length < 0) length = 0;
  const int64_t start = length == 0 ? 0 : (offset >= 0 ? offset * own[b] : -offset * own[a]);
  int32_t n = 0;
  for (int32_t d = 0; d < rank; ++d) {
    if (d == a || d == b) continue;
    sizes[n] = self.size(d);
    strides[n++] = own[d];
  }
  sizes[n] = length;
  strides[n++] = own[a] + own[b];
  return view_copy(ctx, self, sizes, strides, n, start, out);
}

Error unfold_copy_out(KernelContext& ctx, const Tensor& self, int64_t dimension, int64_t size, int64_t step,
                      Tensor& out) {
  ET_CHECK_OK(check_same_dtype(ctx, self, out));
  ET_CHECK_OK(kutil::check_rank(ctx, self, "self"));
  const int32_t rank = self.dim();
  if (rank >= kMaxDims) {
    return ctx.fail(ErrorCode::InvalidArgument, "self has rank %d; the result may have at most %d dims", rank,
                    kMaxDims);
  }
  int64_t d = 0;
  ET_CHECK_OK(kutil::normalize_dim(ctx, dimension, rank, &d, "dimension", /*scalar_ok=*/true));
  const int64_t max_size = rank == 0 ? 1 : self.size(static_cast<int32_t>(d));
  if (size < 0 || size > max_size) {
    return ctx.fail(ErrorCode::InvalidArgument, "size is %lld; expected it in [0, %lld] (self's size at dim %lld)",
                    static_cast<long long>(size), static_cast<long long>(max_size), static_cast<long long>(d));
  }
  if (step <= 0) {
    return ctx.fail(ErrorCode::InvalidArgument, "step is %lld; it must be positive", static_cast<long long>(step));
  }
  int64_t own[kMaxDims], sizes[kMaxDims], strides[kMaxDims];
  kutil::contiguous_strides(self.sizes(), rank, own);
  for (int32_t i = 0; i < rank; ++i) {
    sizes[i] = self.size(i);
    strides[i] = own[i];
  }
  if (rank > 0) {
    sizes[d] = (max_size - size) / step + 1;
    strides[d] = sizes[d] > 1 ? own[d] * step : own[d];  // then step < max_size: no overflow
  }
  sizes[rank] = size;
  strides[rank] = rank > 0 ? own[d] : 1;
  return view_copy(ctx, self, sizes, strides, rank + 1, 0, out);
}

Error flip_out(KernelContext& ctx, const Tensor& self, Span<const int64_t> dims, Tensor& out) {
  ET_CHECK_OK(check_same_dtype(ctx, self, out));
  ET_CHECK_OK(kutil::check_rank(ctx, self, "self"));
  const int32_t rank = self.dim();
  int64_t strides[kMaxDims];
  kutil::contiguous_strides(self.sizes(), rank, strides);
  bool seen[kMaxDims] = {};
  int64_t offset = 0;
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = 0;
    ET_CHECK_OK(kutil::normalize_dim(ctx, dims[i], rank, &d, "dims entry", /*scalar_ok=*/true));
    if (rank == 0) continue;
    if (seen[d]) {
      return ctx.fail(ErrorCode::InvalidArgument, "dim %lld appears more than once in dims", static_cast<long long>(d));
    }
    seen[d] = true;
    offset += (self.size(static_cast<int32_t>(d)) - 1) * strides[d];
    strides[d] = -strides[d];
  }
  if (self.numel() == 0) offset = 0;
  return view_copy(ctx, self, self.sizes(), strides, rank, offset, out);
}

Error repeat_out(KernelContext& ctx, const Tensor& self, Span<const int64_t> repeats, Tensor& out) {
  ET_CHECK_OK(check_same_dtype(ctx, self, out));
  ET_CHECK_OK(kutil::check_rank(ctx, self, "self"));
  const int32_t rank = self.dim();
  if (repeats.size() < static_cast<size_t>(rank) || repeats.size() > static_cast<size_t>(kMaxDims)) {
    return ctx.fail(ErrorCode::InvalidArgument, "repeats has %zu entries; expected at least self's rank %d and at most %d",
                    repeats.size(), rank, kMaxDims);
  }
  const int32_t n = static_cast<int32_t>(repeats.size());
  RepeatDim dims[kMaxDims];
  int64_t sizes[kMaxDims];
  for (int32_t i = 0; i < n; ++i) {
    const int32_t j = i - (n - rank);
    const int64_t s = j < 0 ? 1 : self.size(j);
    const int64_t r = repeats[static_cast<size_t>(i)];
    if (r < 0) {
      return ctx.fail(ErrorCode::InvalidArgument, "repeats[%d] is %lld; repeats must be non-negative", i,
                      static_cast<long long>(r));
    }
    if (__builtin_mul_overflow(s, r, &sizes[i])) {
      return ctx.fail(ErrorCode::InvalidArgument, "the size of dim %d overflows (%lld x %lld)", i,
                      static_cast<long long>(s), static_cast<long long>(r));
    }
    dims[i] = {s, r};
  }
  ET_CHECK_OK(kutil::resize_out(ctx, out, sizes, n));
  if (out.numel() == 0) return Error::ok();
  if (n == 0) {  // a zero-dim self repeated by []
    copy_all(self, out);
    return Error::ok();
  }
  // Merge each dim into the one inside it when that one is not repeated
  // (size a, times r) + (size b, once) == (size a * b, times r), so the
  // innermost rows are as long as possible; drop dims of size 1 repeated once.
  RepeatDim merged[kMaxDims];
  int32_t m = 0;  // built innermost first
  for (int32_t i = n - 1; i >= 0; --i) {
    if (m > 0 && merged[m - 1].times == 1) {
      merged[m - 1].size *= dims[i].size;
      merged[m - 1].times = dims[i].times;
    } else if (dims[i].size != 1 || dims[i].times != 1 || m == 0) {
      merged[m++] = dims[i];
    }
  }
  for (int32_t i = 0, j = m - 1; i < j; ++i, --j) std::swap(merged[i], merged[j]);
  size_t in_step[kMaxDims], out_step[kMaxDims];
  size_t in_running = self.element_size(), out_running = self.element_size();
  for (int32_t d = m - 1; d >= 0; --d) {
    in_step[d] = in_running;
    out_step[d] = out_running;
    in_running *= static_cast<size_t>(merged[d].size);
    out_running *= static_cast<size_t>(merged[d].size * merged[d].times);
  }
  repeat_block(static_cast<uint8_t*>(out.mutable_data()), static_cast<const uint8_t*>(self.data()), merged, 0, m,
               in_step, out_step);
  return Error::ok();
}

// ---------------------------------------------------------------------------
// Slices, selections and splits
// ---------------------------------------------------------------------------

Error slice_copy_tensor_out(KernelContext& ctx, const Tensor& self, int64_t dim, std::optional<int64_t> start,
                            std::optional<int64_t> end, int64_t step, Tensor& out) {
  ET_CHECK_OK(check_same_dtype(ctx, self, out));
  int32_t d = 0;
  ET_CHECK_OK(indexed_dim(ctx, self, dim, "slice", &d));
  SliceRange range;
  ET_CHECK_OK(slice_range(ctx, self.size(d), start, end, step, &range));
  int64_t sizes[kMaxDims], strides[kMaxDims], offset = 0;
  slice_view(self, d, range.start, range.length, step, sizes, strides, &offset);
  return view_copy(ctx, self, sizes, strides, self.dim(), offset, out);
}

Error narrow_copy_out(KernelContext& ctx, const Tensor& self, int64_t dim, int64_t start, int64_t length,
                      Tensor& out) {
  ET_CHECK_OK(check_same_dtype(ctx, self, out));
  int32_t d = 0;
  ET_CHECK_OK(indexed_dim(ctx, self, dim, "narrow", &d));
  const int64_t size = self.size(d);
  if (start < -size || start > size) {
    return ctx.fail(ErrorCode::InvalidArgument, "start %lld is out of range for dim %d of size %lld (expected [%lld, %lld])",
                    static_cast<long long>(start), d, static_cast<long long>(size), static_cast<long long>(-size),
                    static_cast<long long>(size));
  }
  if (start < 0) start += size;
  if (length < 0 || length > size - start) {
    return ctx.fail(ErrorCode::InvalidArgument, "length %lld from start %lld exceeds dim %d of size %lld",
                    static_cast<long long>(length), static_cast<long long>(start), d, static_cast<long long>(size));
  }
  int64_t sizes[kMaxDims], strides[kMaxDims], offset = 0;
  slice_view(self, d, start, length, 1, sizes, strides, &offset);
  return view_copy(ctx, self, sizes, strides, self.dim(), offset, out);
}

Error select_copy_int_out(KernelContext& ctx, const Tensor& self, int64_t dim, int64_t index, Tensor& out) {
  ET_CHECK_OK(check_same_dtype(ctx, self, out));
  int32_t d = 0;
  ET_CHECK_OK(indexed_dim(ctx, self, dim, "select", &d));
  int64_t i = 0;
  ET_CHECK_OK(normalize_index(ctx, self, d, index, &i));
  int64_t sizes[kMaxDims], strides[kMaxDims], offset = 0;
  slice_view(self, d, i, 1, 1, sizes, strides, &offset);
  for (int32_t k = d; k + 1 < self.dim(); ++k) {
    sizes[k] = sizes[k + 1];
    strides[k] = strides[k + 1];
  }
  return view_copy(ctx, self, sizes, strides, self.dim() - 1, offset, out);
}

Error split_copy_tensor_out(KernelContext& ctx, const Tensor& self, int64_t split_size, int64_t dim,
                            Span<Tensor* const> out) {
  int32_t d = 0;
  ET_CHECK_OK(indexed_dim(ctx, self, dim, "split", &d));
  const int64_t size = self.size(d);
  if (split_size < 0 || (split_size == 0 && size != 0)) {
    return ctx.fail(ErrorCode::InvalidArgument, "split_size is %lld; expected a positive size (0 only for an empty dim %d)",
                    static_cast<long long>(split_size), d);
  }
  const int64_t chunks = split_size == 0 ? 1 : (size == 0 ? 1 : (size - 1) / split_size + 1);
  if (out.size() != static_cast<size_t>(chunks)) {
    return ctx.fail(ErrorCode::InvalidArgument, "out has %zu tensors; splitting size %lld by %lld gives %lld",
                    out.size(), static_cast<long long>(size), static_cast<long long>(split_size),
                    static_cast<long long>(chunks));
  }
  const int64_t last = size - split_size * (chunks - 1);
  return split_chunks(
      ctx, self, d, out, [&](size_t i) { return i + 1 < out.size() ? split_size : last; }, /*drop_dim=*/false);
}

Error split_with_sizes_copy_out(KernelContext& ctx, const Tensor& self, Span<const int64_t> split_sizes, int64_t dim,
                                Span<Tensor* const> out) {
  int32_t d = 0;
  ET_CHECK_OK(indexed_dim(ctx, self, dim, "split_with_sizes", &d));
  if (out.size() != split_sizes.size()) {
    return ctx.fail(ErrorCode::InvalidArgument, "out has %zu tensors but split_sizes has %zu entries", out.size(),
                    split_sizes.size());
  }
  int64_t total = 0;
  for (size_t i = 0; i < split_sizes.size(); ++i) {
    if (split_sizes[i] < 0 || __builtin_add_overflow(total, split_sizes[i], &total)) {
      return ctx.fail(ErrorCode::InvalidArgument, "split_sizes[%zu] is %lld; sizes must be non-negative", i,
                      static_cast<long long>(split_sizes[i]));
    }
  }
  if (total != self.size(d)) {
    return ctx.fail(ErrorCode::InvalidArgument, "split_sizes sum to %lld but self has size %lld at dim %d",
                    static_cast<long long>(total), static_cast<long long>(self.size(d)), d);
  }
  return split_chunks(ctx, self, d, out, [&](size_t i) { return split_sizes[i]; }, /*drop_dim=*/false);
}

Error unbind_copy_int_out(KernelContext& ctx, const Tensor& self, int64_t dim, Span<Tensor* const> out) {
  int32_t d = 0;
  ET_CHECK_OK(indexed_dim(ctx, self, dim, "unbind", &d));
  if (out.size() != static_cast<size_t>(self.size(d))) {
    return ctx.fail(ErrorCode::InvalidArgument, "out has %zu tensors; self has size %lld at dim %d", out.size(),
                    static_cast<long long>(self.size(d)), d);
  }
  return split_chunks(ctx, self, d, out, [](size_t) { return int64_t{1}; }, /*drop_dim=*/true);
}

Error cat_out(KernelContext& ctx, Span<Tensor* const> tensors, int64_t dim, Tensor& out) {
  if (tensors.empty()) return ctx.fail(ErrorCode::InvalidArgument, "tensors is empty");
  // PyTorch skips 1-d empty tensors (legacy); the first other tensor sets the shape.
  const Tensor* ref = nullptr;
  kutil::ResultType rt;
  char name[32];
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::snprintf(name, sizeof(name), "tensors[%zu]", i);
    if (tensors[i] == nullptr) return ctx.fail(ErrorCode::InvalidArgument, "%s is None", name);
    ET_CHECK_OK(kutil::check_rank(ctx, *tensors[i], name));
    if (tensors[i]->element_size() == 0) return kutil::unsupported_dtype(ctx, name, tensors[i]->dtype(), "known dtypes");
    rt.add_tensor(tensors[i]->dtype(), 1);
    bool skipped = tensors[i]->dim() == 1 && tensors[i]->numel() == 0;
    if (ref == nullptr && !skipped) ref = tensors[i];
  }
  if (!kutil::can_cast(rt.get(), out.dtype())) {
    return ctx.fail(ErrorCode::InvalidArgument, "result type %s can't be cast to out dtype %s", dtype_name(rt.get()),
                    dtype_name(out.dtype()));
  }
  const size_t out_es = out.element_size();
  if (out_es == 0) return kutil::unsupported_dtype(ctx, "out", out.dtype(), "known dtypes");
  if (ref == nullptr) {  // every input is a 1-d empty tensor
    const int64_t zero = 0;
    return kutil::resize_out(ctx, out, &zero, 1);
  }
  const int32_t rank = ref->dim();
  if (rank == 0) return ctx.fail(ErrorCode::InvalidArgument, "zero-dim tensors cannot be concatenated");
  int64_t nd = 0;
  ET_CHECK_OK(kutil::normalize_dim(ctx, dim, rank, &nd));
  const int32_t d = static_cast<int32_t>(nd);
  int64_t sizes[kMaxDims];
  for (int32_t i = 0; i < rank; ++i) sizes[i] = ref->size(i);
  sizes[d] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = *tensors[i];
    if (t.dim() == 1 && t.numel() == 0) continue;
    bool match = t.dim() == rank;
    for (int32_t j = 0; j < rank && match; ++j) match = j == d || t.size(j) == ref->size(j);
    if (!match) {
      char want[128], got[128];
      return ctx.fail(ErrorCode::InvalidArgument, "tensors[%zu] has shape %s; expected %s except at dim %d", i,
                      kutil::format_shape(got, sizeof(got), t.sizes(), t.dim()),
                      kutil::format_shape(want, sizeof(want), ref->sizes(), rank), d);
    }
    if (__builtin_add_overflow(sizes[d], t.size(d), &sizes[d])) {
      return ctx.fail(ErrorCode::InvalidArgument, "concatenated size overflows");
    }
  }
  ET_CHECK_OK(kutil::resize_out(ctx, out, sizes, rank));
  if (out.numel() == 0) return Error::ok();
  int64_t outer = 0, inner = 0;
  split_around(out, d, &outer, &inner);
  uint8_t* dst = static_cast<uint8_t*>(out.mutable_data());
  const int64_t out_row = sizes[d] * inner;  // elements
  int64_t offset = 0;                        // elements
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = *tensors[i];
    if (t.dim() == 1 && t.numel() == 0) continue;
    const int64_t chunk = t.size(d) * inner;  // elements
    if (chunk > 0) {
      const uint8_t* src = static_cast<const uint8_t*>(t.data());
      const int64_t in_es = static_cast<int64_t>(t.element_size());
      for (int64_t o = 0; o < outer; ++o) {
        uint8_t* to = dst + (o * out_row + offset) * static_cast<int64_t>(out_es);
        if (t.dtype() == out.dtype()) {
          std::memcpy(to, src + o * chunk * in_es, static_cast<size_t>(chunk) * out_es);
        } else {
          kutil_copy::convert_contiguous(to, out.dtype(), src + o * chunk * in_es, t.dtype(), chunk);
        }
      }
    }
    offset += chunk;
  }
  return Error::ok();
}

// ---------------------------------------------------------------------------
// Scatters: self copied, src written into a slice of it
// ---------------------------------------------------------------------------

Error select_scatter_out(KernelContext& ctx, const Tensor& self, const Tensor& src, int64_t dim, int64_t index,
                         Tensor& out) {
  ET_CHECK_OK(check_same_dtype(ctx, self, out));
  int32_t d = 0;
  ET_CHECK_OK(indexed_dim(ctx, self, dim, "select", &d));
  int64_t i = 0;
  ET_CHECK_OK(normalize_index(ctx, self, d, index, &i));
  ET_CHECK_OK(reshape_copy(ctx, self, self.sizes(), self.dim(), out));
  int64_t sizes[kMaxDims], strides[kMaxDims], offset = 0;
  slice_view(self, d, i, 1, 1, sizes, strides, &offset);
  for (int32_t k = d; k + 1 < self.dim(); ++k) {
    sizes[k] = sizes[k + 1];
    strides[k] = strides[k + 1];
  }
  return scatter_into(ctx, src, sizes, strides, self.dim() - 1, offset, out);
}

Error slice_scatter_out(KernelContext& ctx, const Tensor& self, const Tensor& src, int64_t dim,
                        std::optional<int64_t> start, std::optional<int64_t> end, int64_t step, Tensor& out) {
  ET_CHECK_OK(check_same_dtype(ctx, self, out));
  int32_t d = 0;
  ET_CHECK_OK(indexed_dim(ctx, self, dim, "slice", &d));
  SliceRange range;
  ET_CHECK_OK(slice_range(ctx, self.size(d), start, end, step, &range));
  ET_CHECK_OK(reshape_copy(ctx, self, self.sizes(), self.dim(), out));
  int64_t sizes[kMaxDims], strides[kMaxDims], offset = 0;
  slice_view(self, d, range.start, range.length, step, sizes, strides, &offset);
  return scatter_into(ctx, src, sizes, strides, self.dim(), offset, out);
}

// ---------------------------------------------------------------------------
// Converting copies
// ---------------------------------------------------------------------------

// out = self.clone().copy_(src): src broadcast to self's shape, converted to self's dtype.
Error copy_out(KernelContext& ctx, const Tensor& self, const Tensor& src, bool non_blocking, Tensor& out) {
  (void)non_blocking;
  ET_CHECK_OK(check_same_dtype(ctx, self, out));
  ET_CHECK_OK(kutil::check_rank(ctx, self, "self"));
  ET_CHECK_OK(kutil::check_rank(ctx, src, "src"));
  if (src.element_size() == 0) return kutil::unsupported_dtype(ctx, "src", src.dtype(), "known dtypes");
  const int32_t rank = self.dim();
  bool ok = src.dim() <= rank;
  for (int32_t j = 0; j < src.dim() && ok; ++j) {
    const int64_t s = src.size(j);
    ok = s == 1 || s == self.size(j + rank - src.dim());
  }
  if (!ok) {
    char from[128], to[128];
    return ctx.fail(ErrorCode::InvalidArgument, "src %s does not broadcast to self's shape %s",
                    kutil::format_shape(from, sizeof(from), src.sizes(), src.dim()),
                    kutil::format_shape(to, sizeof(to), self.sizes(), rank));
  }
  ET_CHECK_OK(kutil::resize_out(ctx, out, self.sizes(), rank));
  if (out.numel() == 0) return Error::ok();
  int64_t strides[1][kMaxDims];
  kutil::broadcast_strides(kutil::Operand::of(src, "src"), self.sizes(), rank, strides[0]);
  kutil_copy::convert_strided(out.mutable_data(), out.dtype(), src.data(), src.dtype(),
                              Plan<1>(self.sizes(), rank, strides));
  return Error::ok();
}

Error to_copy_out(KernelContext& ctx, const Tensor& self, bool non_blocking, std::optional<int64_t> memory_format,
                  Tensor& out) {
  (void)non_blocking;
  ET_CHECK_OK(check_memory_format(ctx, memory_format));
  return to_copy(ctx, self, out);
}

Error to_dim_order_copy_out(KernelContext& ctx, const Tensor& self, std::optional<int64_t> dtype, bool non_blocking,
                            std::optional<Span<const int64_t>> dim_order, Tensor& out) {
  (void)non_blocking;
  if (dtype && *dtype != static_cast<int64_t>(out.dtype())) {
    const int64_t raw = *dtype;
    const bool known = raw >= -128 && raw <= 127 && is_known_dtype(static_cast<int8_t>(raw));
    return ctx.fail(ErrorCode::InvalidArgument, "dtype %s (%lld) does not match out's dtype %s",
                    known ? dtype_name(static_cast<ScalarType>(raw)) : "unknown", static_cast<long long>(raw),
                    dtype_name(out.dtype()));
  }
  if (dim_order) {
    // Any permutation of the dims is a valid layout request (channels_last is [0, 2, 3, 1]). Every
    // tensor of this runtime is laid out in its identity dim order, and a layout changes no value, so
    // the copy is the same; only a list that is not a permutation is an error.
    Span<const int64_t> order = *dim_order;
    bool seen[kMaxDims] = {};
    bool valid = order.size() == static_cast<size_t>(self.dim());
    for (size_t i = 0; i < order.size() && valid; ++i) {
      valid = order[i] >= 0 && order[i] < self.dim() && !seen[order[i]];
      if (valid) seen[order[i]] = true;
    }
    if (!valid) {
      return ctx.fail(ErrorCode::InvalidArgument, "dim_order must be None or a permutation of the %d dims of self",
                      self.dim());
    }
  }
  return to_copy(ctx, self, out);
}

}  // namespace portable
}  // namespace etmlir
