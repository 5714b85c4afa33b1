// Copy kernels: the *_copy variants of view ops (view, permute, expand,
// unsqueeze, squeeze, slice, select, split_with_sizes), cat, clone, and the
// dtype-converting copies _to_copy / etmlir::_to_dim_order_copy.
//
// Shape-only copies move raw elements (every dtype, by element size); rows
// that stay contiguous become memcpy. Out must have self's dtype except in
// cat (promotes like PyTorch) and the dtype-converting copies.
#include <cstring>

#include "kernel_util.h"
#include "portable_kernels.h"

namespace etmlir {
namespace {

using kutil::Plan;

Error check_same_dtype(KernelContext& ctx, const Tensor& self, const Tensor& out, const char* out_name = "out") {
  if (self.dtype() != out.dtype()) {
    return ctx.fail(ErrorCode::InvalidArgument, "%s has dtype %s; expected self's dtype %s", out_name,
                    dtype_name(out.dtype()), dtype_name(self.dtype()));
  }
  if (self.element_size() == 0) {
    return ctx.fail(ErrorCode::NotSupported, "self has an unknown dtype (%d)", static_cast<int>(self.dtype()));
  }
  return Error::ok();
}

// Copies self's bytes to out (same numel and dtype), tolerating overlap.
void copy_all(const Tensor& self, Tensor& out) {
  if (out.nbytes() > 0 && out.mutable_data() != self.data()) {
    std::memmove(out.mutable_data(), self.data(), out.nbytes());
  }
}

// aten::view_copy.out(Tensor self, SymInt[] size, *, Tensor(a!) out)
Error view_copy_out(KernelContext& ctx, EValue** args) {
  const Tensor& self = args[0]->to_tensor();
  Span<const int64_t> size = args[1]->to_int_list();
  Tensor& out = args[2]->to_tensor();
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
  ET_CHECK_OK(kutil::resize_out(ctx, out, sizes, dim));
  copy_all(self, out);
  return Error::ok();
}

// aten::permute_copy.out(Tensor self, int[] dims, *, Tensor(a!) out)
Error permute_copy_out(KernelContext& ctx, EValue** args) {
  const Tensor& self = args[0]->to_tensor();
  Span<const int64_t> dims = args[1]->to_int_list();
  Tensor& out = args[2]->to_tensor();
  ET_CHECK_OK(check_same_dtype(ctx, self, out));
  ET_CHECK_OK(kutil::check_rank(ctx, self, "self"));
  const int32_t rank = self.dim();
  if (dims.size() != static_cast<size_t>(rank)) {
    return ctx.fail(ErrorCode::InvalidArgument, "dims has %zu entries; self has rank %d", dims.size(), rank);
  }
  int64_t own[kMaxDims];
  kutil::contiguous_strides(self.sizes(), rank, own);
  int64_t sizes[kMaxDims];
  int64_t strides[1][kMaxDims];
  bool seen[kMaxDims] = {};
  for (int32_t i = 0; i < rank; ++i) {
    int64_t d = 0;
    ET_CHECK_OK(kutil::normalize_dim(ctx, dims[static_cast<size_t>(i)], rank, &d, "dims entry"));
    if (seen[d]) {
      return ctx.fail(ErrorCode::InvalidArgument, "dims repeats dim %lld", static_cast<long long>(d));
    }
    seen[d] = true;
    sizes[i] = self.size(static_cast<int32_t>(d));
    strides[0][i] = own[d];
  }
  ET_CHECK_OK(kutil::resize_out(ctx, out, sizes, rank));
  if (out.numel() == 0) return Error::ok();
  kutil::strided_copy(out.mutable_data(), self.data(), self.element_size(), Plan<1>(sizes, rank, strides));
  return Error::ok();
}

// aten::expand_copy.out(Tensor self, SymInt[] size, *, bool implicit=False, Tensor(a!) out)
Error expand_copy_out(KernelContext& ctx, EValue** args) {
  const Tensor& self = args[0]->to_tensor();
  Span<const int64_t> size = args[1]->to_int_list();
  Tensor& out = args[3]->to_tensor();
  ET_CHECK_OK(check_same_dtype(ctx, self, out));
  ET_CHECK_OK(kutil::check_rank(ctx, self, "self"));
  const int32_t rank = self.dim();
  if (size.size() < static_cast<size_t>(rank) || size.size() > static_cast<size_t>(kMaxDims)) {
    return ctx.fail(ErrorCode::InvalidArgument,
                    "size has %zu entries; expected at least self's rank %d and at most %d", size.size(), rank,
                    kMaxDims);
  }
  const int32_t dim = static_cast<int32_t>(size.size());
  int64_t own[kMaxDims];
  kutil::contiguous_strides(self.sizes(), rank, own);
  int64_t sizes[kMaxDims];
  int64_t strides[1][kMaxDims];
  for (int32_t i = 0; i < dim; ++i) {
    const int64_t s = size[static_cast<size_t>(i)];
    const int32_t j = i - (dim - rank);
    if (j < 0) {
      if (s < 0) {
        return ctx.fail(ErrorCode::InvalidArgument, "expanded size %lld is not allowed in new leading dim %d",
                        static_cast<long long>(s), i);
      }
      sizes[i] = s;
      strides[0][i] = 0;
    } else if (s == -1 || s == self.size(j)) {
      sizes[i] = self.size(j);
      strides[0][i] = own[j];
    } else if (self.size(j) == 1 && s >= 0) {
      sizes[i] = s;
      strides[0][i] = 0;
    } else {
      return ctx.fail(ErrorCode::InvalidArgument,
                      "expanded size %lld must match the existing size %lld at dim %d (only size-1 dims expand)",
                      static_cast<long long>(s), static_cast<long long>(self.size(j)), i);
    }
  }
  ET_CHECK_OK(kutil::resize_out(ctx, out, sizes, dim));
  if (out.numel() == 0) return Error::ok();
  kutil::strided_copy(out.mutable_data(), self.data(), self.element_size(), Plan<1>(sizes, dim, strides));
  return Error::ok();
}

// aten::unsqueeze_copy.out(Tensor self, int dim, *, Tensor(a!) out)
Error unsqueeze_copy_out(KernelContext& ctx, EValue** args) {
  const Tensor& self = args[0]->to_tensor();
  Tensor& out = args[2]->to_tensor();
  ET_CHECK_OK(check_same_dtype(ctx, self, out));
  const int32_t rank = self.dim();
  if (rank < 0 || rank >= kMaxDims) {
    return ctx.fail(ErrorCode::InvalidArgument, "self has rank %d; the result may have at most %d dims", rank,
                    kMaxDims);
  }
  int64_t d = 0;
  ET_CHECK_OK(kutil::normalize_dim(ctx, args[1]->to_int(), rank + 1, &d));
  int64_t sizes[kMaxDims];
  for (int32_t i = 0, j = 0; i <= rank; ++i) sizes[i] = i == d ? 1 : self.size(j++);
  ET_CHECK_OK(kutil::resize_out(ctx, out, sizes, rank + 1));
  copy_all(self, out);
  return Error::ok();
}

// aten::squeeze_copy.dims_out(Tensor self, int[] dim, *, Tensor(a!) out)
Error squeeze_copy_dims_out(KernelContext& ctx, EValue** args) {
  const Tensor& self = args[0]->to_tensor();
  Span<const int64_t> dims = args[1]->to_int_list();
  Tensor& out = args[2]->to_tensor();
  ET_CHECK_OK(check_same_dtype(ctx, self, out));
  ET_CHECK_OK(kutil::check_rank(ctx, self, "self"));
  const int32_t rank = self.dim();
  bool squeeze[kMaxDims] = {};
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = 0;
    ET_CHECK_OK(kutil::normalize_dim(ctx, dims[i], rank, &d, "dim", /*scalar_ok=*/true));
    if (rank > 0 && self.size(static_cast<int32_t>(d)) == 1) squeeze[d] = true;
  }
  int64_t sizes[kMaxDims];
  int32_t n = 0;
  for (int32_t i = 0; i < rank; ++i) {
    if (!squeeze[i]) sizes[n++] = self.size(i);
  }
  ET_CHECK_OK(kutil::resize_out(ctx, out, sizes, n));
  copy_all(self, out);
  return Error::ok();
}

// outer x (chunk) x inner decomposition of a tensor around `dim`.
void split_around(const Tensor& t, int32_t dim, int64_t* outer, int64_t* inner) {
  *outer = 1;
  *inner = 1;
  for (int32_t d = 0; d < dim; ++d) *outer *= t.size(d);
  for (int32_t d = dim + 1; d < t.dim(); ++d) *inner *= t.size(d);
}

// aten::split_with_sizes_copy.out(Tensor self, SymInt[] split_sizes, int dim=0, *, Tensor(a!)[] out) -> ()
Error split_with_sizes_copy_out(KernelContext& ctx, EValue** args) {
  const Tensor& self = args[0]->to_tensor();
  Span<const int64_t> splits = args[1]->to_int_list();
  Span<Tensor* const> outs = args[3]->to_tensor_list();
  ET_CHECK_OK(kutil::check_rank(ctx, self, "self"));
  const int32_t rank = self.dim();
  if (rank == 0) return ctx.fail(ErrorCode::InvalidArgument, "cannot split a zero-dim tensor");
  int64_t d = 0;
  ET_CHECK_OK(kutil::normalize_dim(ctx, args[2]->to_int(), rank, &d));
  const int32_t dim = static_cast<int32_t>(d);
  if (outs.size() != splits.size()) {
    return ctx.fail(ErrorCode::InvalidArgument, "out has %zu tensors but split_sizes has %zu entries", outs.size(),
                    splits.size());
  }
  int64_t total = 0;
  for (size_t i = 0; i < splits.size(); ++i) {
    if (splits[i] < 0 || __builtin_add_overflow(total, splits[i], &total)) {
      return ctx.fail(ErrorCode::InvalidArgument, "split_sizes[%zu] is %lld; sizes must be non-negative", i,
                      static_cast<long long>(splits[i]));
    }
  }
  if (total != self.size(dim)) {
    return ctx.fail(ErrorCode::InvalidArgument, "split_sizes sum to %lld but self has size %lld at dim %d",
                    static_cast<long long>(total), static_cast<long long>(self.size(dim)), dim);
  }
  int64_t sizes[kMaxDims];
  for (int32_t i = 0; i < rank; ++i) sizes[i] = self.size(i);
  char name[32];
  for (size_t i = 0; i < outs.size(); ++i) {
    std::snprintf(name, sizeof(name), "out[%zu]", i);
    if (outs[i] == nullptr) return ctx.fail(ErrorCode::InvalidArgument, "%s is None", name);
    ET_CHECK_OK(check_same_dtype(ctx, self, *outs[i], name));
    sizes[dim] = splits[i];
    ET_CHECK_OK(kutil::resize_out(ctx, *outs[i], sizes, rank, name));
  }
  int64_t outer = 0, inner = 0;
  split_around(self, dim, &outer, &inner);
  const size_t es = self.element_size();
  const size_t row = static_cast<size_t>(self.size(dim) * inner) * es;
  const uint8_t* src = static_cast<const uint8_t*>(self.data());
  size_t offset = 0;
  for (size_t i = 0; i < outs.size(); ++i) {
    const size_t chunk = static_cast<size_t>(splits[i] * inner) * es;
    uint8_t* dst = static_cast<uint8_t*>(outs[i]->mutable_data());
    if (chunk > 0) {
      for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + o * chunk, src + o * row + offset, chunk);
    }
    offset += chunk;
  }
  return Error::ok();
}

// aten::slice_copy.Tensor_out(Tensor self, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1, *,
//                             Tensor(a!) out)
Error slice_copy_out(KernelContext& ctx, EValue** args) {
  const Tensor& self = args[0]->to_tensor();
  Tensor& out = args[5]->to_tensor();
  ET_CHECK_OK(check_same_dtype(ctx, self, out));
  ET_CHECK_OK(kutil::check_rank(ctx, self, "self"));
  const int32_t rank = self.dim();
  if (rank == 0) return ctx.fail(ErrorCode::InvalidArgument, "cannot slice a zero-dim tensor");
  int64_t d = 0;
  ET_CHECK_OK(kutil::normalize_dim(ctx, args[1]->to_int(), rank, &d));
  const int32_t dim = static_cast<int32_t>(d);
  const int64_t step = args[4]->to_int();
  if (step <= 0) return ctx.fail(ErrorCode::InvalidArgument, "step must be positive, got %lld", static_cast<long long>(step));
  const int64_t size = self.size(dim);
  int64_t start = args[2]->is_none() ? 0 : args[2]->to_int();
  int64_t end = args[3]->is_none() ? size : args[3]->to_int();
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = start < 0 ? 0 : (start > size ? size : start);
  end = end < start ? start : (end > size ? size : end);
  const int64_t length = end == start ? 0 : (end - start - 1) / step + 1;

  int64_t sizes[kMaxDims];
  int64_t strides[1][kMaxDims] = {};
  kutil::contiguous_strides(self.sizes(), rank, strides[0]);
  for (int32_t i = 0; i < rank; ++i) sizes[i] = self.size(i);
  sizes[dim] = length;
  const int64_t base = start * strides[0][dim];
  if (length > 1) strides[0][dim] *= step;  // then step < size: no overflow
  ET_CHECK_OK(kutil::resize_out(ctx, out, sizes, rank));
  if (out.numel() == 0) return Error::ok();
  const size_t es = self.element_size();
  kutil::strided_copy(out.mutable_data(), static_cast<const uint8_t*>(self.data()) + base * static_cast<int64_t>(es),
                      es, Plan<1>(sizes, rank, strides));
  return Error::ok();
}

// aten::select_copy.int_out(Tensor self, int dim, SymInt index, *, Tensor(a!) out)
Error select_copy_out(KernelContext& ctx, EValue** args) {
  const Tensor& self = args[0]->to_tensor();
  Tensor& out = args[3]->to_tensor();
  ET_CHECK_OK(check_same_dtype(ctx, self, out));
  ET_CHECK_OK(kutil::check_rank(ctx, self, "self"));
  const int32_t rank = self.dim();
  if (rank == 0) return ctx.fail(ErrorCode::InvalidArgument, "cannot select from a zero-dim tensor");
  int64_t d = 0;
  ET_CHECK_OK(kutil::normalize_dim(ctx, args[1]->to_int(), rank, &d));
  const int32_t dim = static_cast<int32_t>(d);
  const int64_t size = self.size(dim);
  int64_t index = args[2]->to_int();
  if (index < -size || index >= size) {
    return ctx.fail(ErrorCode::InvalidArgument, "index %lld is out of range for dim %d of size %lld",
                    static_cast<long long>(index), dim, static_cast<long long>(size));
  }
  if (index < 0) index += size;
  int64_t sizes[kMaxDims];
  for (int32_t i = 0, j = 0; i < rank; ++i) {
    if (i != dim) sizes[j++] = self.size(i);
  }
  ET_CHECK_OK(kutil::resize_out(ctx, out, sizes, rank - 1));
  int64_t outer = 0, inner = 0;
  split_around(self, dim, &outer, &inner);
  const size_t es = self.element_size();
  const size_t chunk = static_cast<size_t>(inner) * es;
  if (chunk == 0) return Error::ok();
  const uint8_t* src = static_cast<const uint8_t*>(self.data());
  uint8_t* dst = static_cast<uint8_t*>(out.mutable_data());
  for (int64_t o = 0; o < outer; ++o) {
    std::memcpy(dst + o * chunk, src + (o * size + index) * static_cast<int64_t>(chunk), chunk);
  }
  return Error::ok();
}

// Copies `n` elements from `src` (dtype `from`) to `dst` (dtype `to`),
// converting; false if either dtype cannot be converted.
bool convert_copy(void* dst, ScalarType to, const void* src, ScalarType from, int64_t n) {
  bool ok = false;
  kutil::dispatch_convertible(to, [&](auto out_tag) {
    using O = decltype(out_tag);
    ok = kutil::dispatch_convertible(from, [&](auto in_tag) {
      using I = decltype(in_tag);
      O* o = static_cast<O*>(dst);
      if constexpr (std::is_same_v<I, bool>) {
        const uint8_t* x = static_cast<const uint8_t*>(src);  // any non-zero byte is true
        for (int64_t i = 0; i < n; ++i) o[i] = kutil::convert<O>(x[i] != 0);
      } else {
        const I* x = static_cast<const I*>(src);
        for (int64_t i = 0; i < n; ++i) o[i] = kutil::convert<O>(x[i]);
      }
    });
  });
  return ok;
}

// aten::cat.out(Tensor[] tensors, int dim=0, *, Tensor(a!) out)
Error cat_out(KernelContext& ctx, EValue** args) {
  Span<Tensor* const> tensors = args[0]->to_tensor_list();
  Tensor& out = args[2]->to_tensor();
  if (tensors.empty()) return ctx.fail(ErrorCode::InvalidArgument, "tensors is empty");
  // PyTorch skips 1-d empty tensors (legacy); the first other tensor sets the shape.
  const Tensor* ref = nullptr;
  kutil::ResultType rt;
  char name[32];
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::snprintf(name, sizeof(name), "tensors[%zu]", i);
    if (tensors[i] == nullptr) return ctx.fail(ErrorCode::InvalidArgument, "%s is None", name);
    ET_CHECK_OK(kutil::check_rank(ctx, *tensors[i], name));
    rt.add_tensor(tensors[i]->dtype(), 1);
    bool skipped = tensors[i]->dim() == 1 && tensors[i]->numel() == 0;
    if (ref == nullptr && !skipped) ref = tensors[i];
  }
  if (!kutil::can_cast(rt.get(), out.dtype())) {
    return ctx.fail(ErrorCode::InvalidArgument, "result type %s can't be cast to out dtype %s", dtype_name(rt.get()),
                    dtype_name(out.dtype()));
  }
  if (ref == nullptr) {  // every input is a 1-d empty tensor
    const int64_t zero = 0;
    return kutil::resize_out(ctx, out, &zero, 1);
  }
  const int32_t rank = ref->dim();
  if (rank == 0) return ctx.fail(ErrorCode::InvalidArgument, "zero-dim tensors cannot be concatenated");
  int64_t d = 0;
  ET_CHECK_OK(kutil::normalize_dim(ctx, args[1]->to_int(), rank, &d));
  const int32_t dim = static_cast<int32_t>(d);
  int64_t sizes[kMaxDims];
  for (int32_t i = 0; i < rank; ++i) sizes[i] = ref->size(i);
  sizes[dim] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = *tensors[i];
    if (t.dim() == 1 && t.numel() == 0) continue;
    bool match = t.dim() == rank;
    for (int32_t j = 0; j < rank && match; ++j) match = j == dim || t.size(j) == ref->size(j);
    if (!match) {
      char want[128], got[128];
      return ctx.fail(ErrorCode::InvalidArgument, "tensors[%zu] has shape %s; expected %s except at dim %d", i,
                      kutil::format_shape(got, sizeof(got), t.sizes(), t.dim()),
                      kutil::format_shape(want, sizeof(want), ref->sizes(), rank), dim);
    }
    if (__builtin_add_overflow(sizes[dim], t.size(dim), &sizes[dim])) {
      return ctx.fail(ErrorCode::InvalidArgument, "concatenated size overflows");
    }
  }
  ET_CHECK_OK(kutil::resize_out(ctx, out, sizes, rank));
  if (out.numel() == 0) return Error::ok();
  const size_t out_es = out.element_size();
  if (out_es == 0) return kutil::unsupported_dtype(ctx, "out", out.dtype());
  int64_t outer = 0, inner = 0;
  split_around(out, dim, &outer, &inner);
  uint8_t* dst = static_cast<uint8_t*>(out.mutable_data());
  const int64_t out_row = sizes[dim] * inner;  // elements
  int64_t offset = 0;                          // elements
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = *tensors[i];
    if (t.dim() == 1 && t.numel() == 0) continue;
    const int64_t chunk = t.size(dim) * inner;  // elements
    if (chunk > 0) {
      const uint8_t* src = static_cast<const uint8_t*>(t.data());
      for (int64_t o = 0; o < outer; ++o) {
        uint8_t* to = dst + (o * out_row + offset) * static_cast<int64_t>(out_es);
        if (t.dtype() == out.dtype()) {
          std::memcpy(to, src + o * chunk * static_cast<int64_t>(out_es), static_cast<size_t>(chunk) * out_es);
        } else if (!convert_copy(to, out.dtype(), src + o * chunk * static_cast<int64_t>(t.element_size()),
                                 t.dtype(), chunk)) {
          return ctx.fail(ErrorCode::NotSupported, "cannot convert tensors[%zu] from %s to out's %s", i,
                          dtype_name(t.dtype()), dtype_name(out.dtype()));
        }
      }
    }
    offset += chunk;
  }
  return Error::ok();
}

Error check_memory_format(KernelContext& ctx, const EValue& memory_format) {
  // c10::MemoryFormat: 0 Contiguous, 1 Preserve; every runtime tensor is contiguous.
  if (!memory_format.is_none() && memory_format.to_int() != 0 && memory_format.to_int() != 1) {
    return ctx.fail(ErrorCode::NotSupported, "memory_format %lld is not supported (only contiguous tensors)",
                    static_cast<long long>(memory_format.to_int()));
  }
  return Error::ok();
}

// aten::clone.out(Tensor self, *, MemoryFormat? memory_format=None, Tensor(a!) out)
Error clone_out(KernelContext& ctx, EValue** args) {
  const Tensor& self = args[0]->to_tensor();
  Tensor& out = args[2]->to_tensor();
  ET_CHECK_OK(check_same_dtype(ctx, self, out));
  ET_CHECK_OK(check_memory_format(ctx, *args[1]));
  ET_CHECK_OK(kutil::resize_out(ctx, out, self.sizes(), self.dim()));
  copy_all(self, out);
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
  if (!kutil::is_convertible_dtype(self.dtype())) {
    return kutil::unsupported_dtype(ctx, "self", self.dtype(), "float32, float64, int64, int32, int16, int8, uint8, bool");
  }
  if (!kutil::is_convertible_dtype(out.dtype())) {
    return kutil::unsupported_dtype(ctx, "out", out.dtype(), "float32, float64, int64, int32, int16, int8, uint8, bool");
  }
  convert_copy(out.mutable_data(), out.dtype(), self.data(), self.dtype(), out.numel());
  return Error::ok();
}

// aten::_to_copy.out(Tensor self, *, bool non_blocking=False, MemoryFormat? memory_format=None, Tensor(a!) out)
Error to_copy_out(KernelContext& ctx, EValue** args) {
  ET_CHECK_OK(check_memory_format(ctx, *args[2]));
  return to_copy(ctx, args[0]->to_tensor(), args[3]->to_tensor());
}

// etmlir::_to_dim_order_copy.out(Tensor self, *, ScalarType? dtype=None, bool non_blocking=False,
//                                int[]? dim_order=None, Tensor(a!) out)
Error to_dim_order_copy_out(KernelContext& ctx, EValue** args) {
  const Tensor& self = args[0]->to_tensor();
  const EValue& dtype = *args[1];
  const EValue& dim_order = *args[3];
  Tensor& out = args[4]->to_tensor();
  if (!dtype.is_none() && dtype.to_int() != static_cast<int64_t>(out.dtype())) {
    const int64_t raw = dtype.to_int();
    const bool known = raw >= -128 && raw <= 127 && is_known_dtype(static_cast<int8_t>(raw));
    return ctx.fail(ErrorCode::InvalidArgument, "dtype %s (%lld) does not match out's dtype %s",
                    known ? dtype_name(static_cast<ScalarType>(raw)) : "unknown", static_cast<long long>(raw),
                    dtype_name(out.dtype()));
  }
  if (!dim_order.is_none()) {
    Span<const int64_t> order = dim_order.to_int_list();
    bool identity = order.size() == static_cast<size_t>(self.dim());
    for (size_t i = 0; i < order.size() && identity; ++i) identity = order[i] == static_cast<int64_t>(i);
    if (!identity) {
      return ctx.fail(ErrorCode::NotSupported, "dim_order must be None or the identity (contiguous) for rank %d",
                      self.dim());
    }
  }
  return to_copy(ctx, self, out);
}

}  // namespace

Error register_copy_kernels(KernelRegistry& r) {
  ET_REGISTER_KERNEL(r, "aten::view_copy.out", "TL|T", view_copy_out);
  ET_REGISTER_KERNEL(r, "aten::permute_copy.out", "TL|T", permute_copy_out);
  ET_REGISTER_KERNEL(r, "aten::expand_copy.out", "TLb|T", expand_copy_out);
  ET_REGISTER_KERNEL(r, "aten::unsqueeze_copy.out", "Ti|T", unsqueeze_copy_out);
  ET_REGISTER_KERNEL(r, "aten::squeeze_copy.dims_out", "TL|T", squeeze_copy_dims_out);
  ET_REGISTER_KERNEL(r, "aten::split_with_sizes_copy.out", "TLi|X", split_with_sizes_copy_out);
  ET_REGISTER_KERNEL(r, "aten::slice_copy.Tensor_out", "TiIIi|T", slice_copy_out);
  ET_REGISTER_KERNEL(r, "aten::select_copy.int_out", "Tii|T", select_copy_out);
  ET_REGISTER_KERNEL(r, "aten::cat.out", "Xi|T", cat_out);
  ET_REGISTER_KERNEL(r, "aten::clone.out", "TI|T", clone_out);
  ET_REGISTER_KERNEL(r, "aten::_to_copy.out", "TbI|T", to_copy_out);
  ET_REGISTER_KERNEL(r, "etmlir::_to_dim_order_copy.out", "TIbM|T", to_dim_order_copy_out);
  return Error::ok();
}

}  // namespace etmlir
