// Embedding lookups: embedding (rows of a [num_embeddings, dim] table
// gathered by index, copied as bytes: any dtype) and _embedding_bag (bags of
// rows reduced by sum, mean or max, with offsets, include_last_offset,
// per_sample_weights and padding_idx, and the three index outputs PyTorch's
// CPU kernel defines). Every index is range-checked; embedding does not wrap
// negative indices (neither does PyTorch).
#include <cstring>

#include "generated/embedding.h"
#include "indexing_util.h"

namespace etmlir {
namespace {

using ixutil::Described;

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

// ---------------------------------------------------------------------------
// _embedding_bag
// ---------------------------------------------------------------------------

enum Mode : int64_t { kSum = 0, kMean = 1, kMax = 2 };

// Index-like outputs (offset2bag, bag_size, max_indices) may be int64 or int32.
struct IndexOut {
  void* data;
  bool is64;
  void set(int64_t i, int64_t v) const {
    if (is64) {
      static_cast<int64_t*>(data)[i] = v;
    } else {
      static_cast<int32_t*>(data)[i] = static_cast<int32_t>(v);
    }
  }
};

struct Bags {
  const void* indices;
  bool indices64;
  const void* offsets;
  bool offsets64;
  int64_t count;     // indices
  int64_t num_bags;
  int64_t index(int64_t i) const {
    return indices64 ? static_cast<const int64_t*>(indices)[i] : static_cast<const int32_t*>(indices)[i];
  }
  int64_t offset(int64_t b) const {
    return offsets64 ? static_cast<const int64_t*>(offsets)[b] : static_cast<const int32_t*>(offsets)[b];
  }
  // Bag b holds indices [begin(b), end(b)); the last bag runs to the end of
  // indices (PyTorch ignores include_last_offset's final offset there).
  int64_t begin(int64_t b) const { return offset(b); }
  int64_t end(int64_t b) const { return b + 1 < num_bags ? offset(b + 1) : count; }
};

// Row kernels over one chunk of the feature dim (separate so that GCC vectorizes each).
template <typename T, typename CT>
inline void add_row(CT* __restrict acc, const T* __restrict row, int64_t n) {
  for (int64_t d = 0; d < n; ++d) acc[d] += kutil::convert<CT>(row[d]);
}
template <typename T, typename CT>
inline void add_scaled_row(CT* __restrict acc, const T* __restrict row, CT w, int64_t n) {
  for (int64_t d = 0; d < n; ++d) acc[d] += w * kutil::convert<CT>(row[d]);
}
// PyTorch's max: the bag's first row, then strictly greater values (so a NaN only as the first).
template <typename T, typename CT>
inline void max_row(CT* __restrict acc, int64_t* __restrict arg, const T* __restrict row, int64_t word, int64_t n) {
  for (int64_t d = 0; d < n; ++d) {
    const CT v = kutil::convert<CT>(row[d]);
    const bool take = v > acc[d];
    acc[d] = take ? v : acc[d];
    arg[d] = take ? word : arg[d];
  }
}
template <typename T, typename CT>
inline void first_row(CT* __restrict acc, int64_t* __restrict arg, const T* __restrict row, int64_t word, int64_t n) {
  for (int64_t d = 0; d < n; ++d) acc[d] = kutil::convert<CT>(row[d]), arg[d] = word;
}

// Reduces every bag into out0 (and max_indices for max), computing in CT.
// The feature dim goes in chunks so that accumulators live on the stack.
// noinline: inlined into the kernel's long validation path, GCC would treat
// the loops as cold and leave them scalar.
template <typename T>
__attribute__((noinline)) void reduce_bags(const Tensor& weight, const Bags& bags, int64_t mode,
                                           const Tensor* per_sample_weights, int64_t padding_idx, Tensor& out0,
                                           const IndexOut& max_indices) {
  using CT = std::conditional_t<std::is_same_v<T, double>, double, float>;
  constexpr int64_t kChunk = 512;
  const int64_t dim = weight.size(1);
  const T* table = weight.data_as<const T>();
  const T* psw = per_sample_weights ? per_sample_weights->data_as<const T>() : nullptr;
  T* out = out0.data_as<T>();
  alignas(64) CT acc[kChunk];
  alignas(64) int64_t arg[kChunk];
  for (int64_t b = 0; b < bags.num_bags; ++b) {
    const int64_t first = bags.begin(b), last = bags.end(b);
    for (int64_t d0 = 0; d0 < dim; d0 += kChunk) {
      const int64_t n = dim - d0 < kChunk ? dim - d0 : kChunk;
      for (int64_t d = 0; d < n; ++d) acc[d] = CT(0), arg[d] = 0;
      int64_t taken = 0;
      for (int64_t i = first; i < last; ++i) {
        const int64_t word = bags.index(i);
        if (word == padding_idx) continue;
        if (i + 2 < last) __builtin_prefetch(table + bags.index(i + 2) * dim + d0);
        const T* row = table + word * dim + d0;
        if (mode == kMax) {
          if (taken == 0) {
            first_row(acc, arg, row, word, n);
          } else {
            max_row(acc, arg, row, word, n);
          }
        } else if (psw) {
          add_scaled_row(acc, row, kutil::convert<CT>(psw[i]), n);
        } else {
          add_row(acc, row, n);
        }
        ++taken;
      }
      if (mode == kMean && taken > 0) {
        const CT scale = CT(taken);
        for (int64_t d = 0; d < n; ++d) acc[d] /= scale;
      }
      T* dst = out + b * dim + d0;
      for (int64_t d = 0; d < n; ++d) dst[d] = kutil::convert<T>(acc[d]);
      if (mode == kMax) {
        for (int64_t d = 0; d < n; ++d) max_indices.set(b * dim + d0 + d, arg[d]);
      }
    }
  }
}

// offset2bag (when written), bag_size, and max_indices for sum/mean.
__attribute__((noinline)) void write_bag_indices(const Bags& bags, int64_t mode, int64_t padding_idx,
                                                 bool with_offset2bag, const IndexOut& offset2bag,
                                                 const IndexOut& bag_size, const IndexOut& max_indices) {
  if (with_offset2bag) {
    int64_t bag = -1;
    for (int64_t i = 0; i < bags.count; ++i) {
      while (bag + 1 < bags.num_bags && bags.offset(bag + 1) <= i) ++bag;
      offset2bag.set(i, bag);
    }
  }
  for (int64_t b = 0; b < bags.num_bags; ++b) {
    int64_t taken = 0;
    if (mode != kSum) {
      for (int64_t i = bags.begin(b); i < bags.end(b); ++i) taken += bags.index(i) != padding_idx;
    }
    bag_size.set(b, taken);
    if (mode != kMax) max_indices.set(b, taken);
  }
}

Error check_index_out(KernelContext& ctx, const Tensor& t, const char* name) {
  if (!ixutil::is_index_dtype(t.dtype())) {
    return ctx.fail(ErrorCode::InvalidArgument, "%s must be int64 or int32 (like indices), got %s", name,
                    Described(t).text);
  }
  return Error::ok();
}

}  // namespace

namespace portable {

// padding_idx, scale_grad_by_freq and sparse only matter for the gradient.
Error embedding_out(KernelContext& ctx, const Tensor& weight, const Tensor& indices, int64_t padding_idx,
                    bool scale_grad_by_freq, bool sparse, Tensor& out) {
  (void)padding_idx, (void)scale_grad_by_freq, (void)sparse;
  ET_CHECK_OK(linalg::check_sane(ctx, weight, "weight"));
  ET_CHECK_OK(linalg::check_sane(ctx, indices, "indices"));
  if (weight.dim() != 2) {
    return ctx.fail(ErrorCode::InvalidArgument, "weight must be 2-D (num_embeddings, embedding_dim), got %s",
                    Described(weight).text);
  }
  ET_CHECK_OK(ixutil::check_index_dtype(ctx, indices, "indices"));
  if (indices.dim() + 1 > kMaxDims) {
    return ctx.fail(ErrorCode::InvalidArgument, "indices %s has too many dims (out would have %d, at most %d)",
                    Described(indices).text, indices.dim() + 1, kMaxDims);
  }
  ET_CHECK_OK(linalg::check_dtype(ctx, out, weight.dtype(), "out"));
  int64_t sizes[kMaxDims];
  for (int32_t d = 0; d < indices.dim(); ++d) sizes[d] = indices.size(d);
  sizes[indices.dim()] = weight.size(1);
  ET_CHECK_OK(kutil::resize_out(ctx, out, sizes, indices.dim() + 1));
  if (indices.numel() == 0) return Error::ok();
  if (indices.dtype() == ScalarType::Int64) {
    return gather_rows(ctx, weight, indices.data_as<const int64_t>(), indices.numel(), out);
  }
  return gather_rows(ctx, weight, indices.data_as<const int32_t>(), indices.numel(), out);
}

// Outputs as PyTorch's CPU kernel defines them:
//   out0 [num_bags, dim]: the reduced bags (empty bags are 0);
//   out1 offset2bag [n]: the bag of each index (count of offsets <= i, minus 1),
//     or [0] for sum over float32/float16/bfloat16 without padding_idx (PyTorch skips it there);
//   out2 bag_size [num_bags]: non-padding indices per bag for mean/max, zeros for sum;
//   out3 max_indices: [num_bags, dim] the row of each max for max (0 for empty bags),
//     bag_size again for mean, zeros [num_bags] for sum.
// A negative padding_idx means none. scale_grad_by_freq and sparse only matter for the gradient.
Error embedding_bag_out(KernelContext& ctx, const Tensor& weight, const Tensor& indices, const Tensor& offsets,
                        bool scale_grad_by_freq, int64_t mode, bool sparse, const Tensor* per_sample_weights,
                        bool include_last_offset, int64_t padding_idx, Tensor& out0, Tensor& out1, Tensor& out2,
                        Tensor& out3) {
  (void)scale_grad_by_freq, (void)sparse;
  ET_CHECK_OK(linalg::check_sane(ctx, weight, "weight"));
  ET_CHECK_OK(linalg::check_sane(ctx, indices, "indices"));
  ET_CHECK_OK(linalg::check_sane(ctx, offsets, "offsets"));
  if (weight.dim() != 2) {
    return ctx.fail(ErrorCode::InvalidArgument, "weight must be 2-D (num_embeddings, embedding_dim), got %s",
                    Described(weight).text);
  }
  const ScalarType dtype = weight.dtype();
  if (!kutil::is_floating(dtype)) {
    return kutil::unsupported_dtype(ctx, "weight", dtype, "float32, float64, float16, bfloat16");
  }
  ET_CHECK_OK(ixutil::check_index_dtype(ctx, indices, "indices"));
  ET_CHECK_OK(ixutil::check_index_dtype(ctx, offsets, "offsets"));
  if (indices.dim() != 1) {
    return ctx.fail(ErrorCode::InvalidArgument, "indices must be 1-D (bags are given by offsets), got %s",
                    Described(indices).text);
  }
  if (offsets.dim() != 1) {
    return ctx.fail(ErrorCode::InvalidArgument, "offsets must be 1-D, got %s", Described(offsets).text);
  }
  if (mode != kSum && mode != kMean && mode != kMax) {
    return ctx.fail(ErrorCode::InvalidArgument, "mode must be 0 (sum), 1 (mean) or 2 (max), got %lld",
                    static_cast<long long>(mode));
  }
  const int64_t count = indices.size(0);
  if (per_sample_weights) {
    if (mode != kSum) {
      return ctx.fail(ErrorCode::InvalidArgument,
                      "per_sample_weights is only supported with mode 0 (sum), got mode %lld",
                      static_cast<long long>(mode));
    }
    if (per_sample_weights->dtype() != dtype || per_sample_weights->dim() != 1 ||
        per_sample_weights->size(0) != count) {
      return ctx.fail(ErrorCode::InvalidArgument,
                      "per_sample_weights must be %s[%lld] (weight's dtype, one per index), got %s", dtype_name(dtype),
                      static_cast<long long>(count), Described(*per_sample_weights).text);
    }
  }
  ET_CHECK_OK(linalg::check_dtype(ctx, out0, dtype, "out0"));
  ET_CHECK_OK(check_index_out(ctx, out1, "out1 (offset2bag)"));
  ET_CHECK_OK(check_index_out(ctx, out2, "out2 (bag_size)"));
  ET_CHECK_OK(check_index_out(ctx, out3, "out3 (max_indices)"));

  Bags bags{indices.data(), indices.dtype() == ScalarType::Int64, offsets.data(),
            offsets.dtype() == ScalarType::Int64, count, offsets.size(0)};
  if (include_last_offset) {
    if (bags.num_bags == 0) {
      return ctx.fail(ErrorCode::InvalidArgument,
                      "include_last_offset needs at least one offset (the end of the last bag), got offsets %s",
                      Described(offsets).text);
    }
    --bags.num_bags;
  }
  // Offsets: start at 0, never decrease, never pass the end of indices.
  if (offsets.size(0) > 0 && bags.offset(0) != 0) {
    return ctx.fail(ErrorCode::InvalidArgument, "offsets[0] must be 0 (the first bag starts at index 0), got %lld",
                    static_cast<long long>(bags.offset(0)));
  }
  for (int64_t b = 1; b < offsets.size(0); ++b) {
    if (bags.offset(b) < bags.offset(b - 1)) {
      return ctx.fail(ErrorCode::InvalidArgument, "offsets must not decrease, got offsets[%lld] = %lld after %lld",
                      static_cast<long long>(b), static_cast<long long>(bags.offset(b)),
                      static_cast<long long>(bags.offset(b - 1)));
    }
  }
  if (offsets.size(0) > 0 && bags.offset(offsets.size(0) - 1) > count) {
    return ctx.fail(ErrorCode::InvalidArgument, "offsets[-1] = %lld is past the end of indices %s",
                    static_cast<long long>(bags.offset(offsets.size(0) - 1)), Described(indices).text);
  }
  const int64_t rows = weight.size(0);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t word = bags.index(i);
    if (word < 0 || word >= rows) {
      return ctx.fail(ErrorCode::InvalidArgument,
                      "index %lld (at position %lld of indices) is out of range for weight %s with %lld rows",
                      static_cast<long long>(word), static_cast<long long>(i), Described(weight).text,
                      static_cast<long long>(rows));
    }
  }

  const int64_t dim = weight.size(1);
  const bool skips_offset2bag = mode == kSum && dtype != ScalarType::Double && padding_idx < 0;
  const int64_t sizes0[2] = {bags.num_bags, dim};
  const int64_t size1 = skips_offset2bag ? 0 : count;
  ET_CHECK_OK(kutil::resize_out(ctx, out0, sizes0, 2, "out0"));
  ET_CHECK_OK(kutil::resize_out(ctx, out1, &size1, 1, "out1 (offset2bag)"));
  ET_CHECK_OK(kutil::resize_out(ctx, out2, &bags.num_bags, 1, "out2 (bag_size)"));
  ET_CHECK_OK(kutil::resize_out(ctx, out3, sizes0, mode == kMax ? 2 : 1, "out3 (max_indices)"));

  const IndexOut offset2bag{out1.mutable_data(), out1.dtype() == ScalarType::Int64};
  const IndexOut bag_size{out2.mutable_data(), out2.dtype() == ScalarType::Int64};
  const IndexOut max_indices{out3.mutable_data(), out3.dtype() == ScalarType::Int64};
  write_bag_indices(bags, mode, padding_idx, size1 > 0, offset2bag, bag_size, max_indices);
  const int64_t padding = padding_idx < 0 ? -1 : padding_idx;
  auto run = [&](auto tag) {
    reduce_bags<decltype(tag)>(weight, bags, mode, per_sample_weights, padding, out0, max_indices);
  };
  switch (dtype) {
    case ScalarType::Float: run(float{}); break;
    case ScalarType::Double: run(double{}); break;
    case ScalarType::Half: run(kutil::Half{}); break;
    default: run(kutil::BFloat16{}); break;
  }
  return Error::ok();
}

}  // namespace portable
}  // namespace etmlir
