// Indexing kernels: gather, scatter (src, value, add, reduce), index
// (advanced indexing), index_put, index_select, masked_scatter, nonzero.
//
// Data movement copies elements as bytes, so every dtype works (float16 and
// bfloat16 included); the scatter reductions and index_put's accumulate
// compute per element in float, double or int64, like PyTorch's CPU kernels:
// float16/bfloat16 index_put rounds back on every store, scatter_add and
// scatter_reduce's sum/prod/mean accumulate in float and round once.
// Integers wrap like the narrow type; bool sum is `or`, prod `and`. Index
// tensors are int64 or int32, masks bool (or uint8 for index/index_put).
// Every index is range-checked: index/index_put wrap negative indices like
// PyTorch, gather/scatter/index_select do not (neither does PyTorch); out of
// range is an error naming the index, the dim and its size.
//
// Iteration goes through kutil::Plan over the index (or result) shape, so
// contiguous runs become memcpy or tight loops.
#include <cstring>
#include <limits>

#include "generated/indexing.h"
#include "indexing_util.h"

namespace etmlir {
namespace {

using ixutil::Described;
using kutil::Plan;

constexpr const char* kAllDtypes = "float32, float64, float16, bfloat16, int64, int32, int16, int8, uint8, bool";

Error check_self(KernelContext& ctx, const Tensor& self) {
  ET_CHECK_OK(kutil::check_rank(ctx, self, "self"));
  ET_CHECK_OK(linalg::check_sane(ctx, self, "self"));
  if (!ixutil::is_storage_dtype(self.dtype())) return kutil::unsupported_dtype(ctx, "self", self.dtype(), kAllDtypes);
  return Error::ok();
}

// out = self (same dtype and shape), unless they share memory.
Error copy_self_to_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  ET_CHECK_OK(linalg::check_dtype(ctx, out, self.dtype(), "out"));
  ET_CHECK_OK(kutil::resize_out(ctx, out, self.sizes(), self.dim()));
  if (out.data() != self.data() && self.nbytes() != 0) std::memcpy(out.mutable_data(), self.data(), self.nbytes());
  return Error::ok();
}

// A tensor's sizes with 0-d seen as [1] (PyTorch's ensure_nonempty_dim for gather/scatter).
struct Shape {
  int32_t dim;
  int64_t sizes[kMaxDims];
  int64_t strides[kMaxDims];
  explicit Shape(const Tensor& t) : dim(t.dim() == 0 ? 1 : t.dim()) {
    for (int32_t d = 0; d < dim; ++d) sizes[d] = t.dim() == 0 ? 1 : t.size(d);
    kutil::contiguous_strides(sizes, dim, strides);
  }
};

// ---------------------------------------------------------------------------
// gather / scatter
// ---------------------------------------------------------------------------

// The walk over index's elements shared by gather and the scatters: for each
// index element, the offset of its row in self (dim's coordinate replaced by
// the index value) and of the element in src. Shapes are checked like
// PyTorch's gather_shape_check / scatter_shape_check.
struct IndexWalk {
  Plan<2> plan;  // over index's shape; inputs: self (dim zeroed), src
  int64_t dim = 0;
  int64_t dim_size = 0;    // self.size(dim)
  int64_t dim_stride = 0;  // self's stride at dim
};

Error make_walk(KernelContext& ctx, const Tensor& self, int64_t dim, const Tensor& index, const Tensor* src,
                IndexWalk* walk) {
  ET_CHECK_OK(kutil::check_rank(ctx, index, "index"));
  ET_CHECK_OK(ixutil::check_index_dtype(ctx, index, "index"));
  if (!linalg::normalize_dim(dim, self.dim(), &walk->dim)) return linalg::dim_error(ctx, "dim", dim, self);
  const Shape s(self), i(index), c(src ? *src : index);
  if (i.dim != s.dim) {
    return ctx.fail(ErrorCode::InvalidArgument, "index %s must have as many dims as self %s", Described(index).text,
                    Described(self).text);
  }
  if (src && c.dim != s.dim) {
    return ctx.fail(ErrorCode::InvalidArgument, "src %s must have as many dims as self %s", Described(*src).text,
                    Described(self).text);
  }
  for (int32_t d = 0; d < i.dim; ++d) {
    const bool too_big_for_self = d != walk->dim && i.sizes[d] > s.sizes[d];
    const bool too_big_for_src = src && i.sizes[d] > c.sizes[d];
    if (too_big_for_self || too_big_for_src) {
      return ctx.fail(ErrorCode::InvalidArgument,
                      "index %s must be no larger than %s %s at dim %d (dim %lld excepted for self)",
                      Described(index).text, too_big_for_self ? "self" : "src",
                      Described(too_big_for_self ? self : *src).text, d, static_cast<long long>(walk->dim));
    }
  }
  int64_t full[2][kMaxDims];
  for (int32_t d = 0; d < i.dim; ++d) {
    full[0][d] = d == walk->dim ? 0 : s.strides[d];
    full[1][d] = src ? c.strides[d] : 0;
  }
  walk->dim_size = s.sizes[walk->dim];
  walk->dim_stride = s.strides[walk->dim];
  walk->plan = Plan<2>(i.sizes, i.dim, full);
  return Error::ok();
}

// Calls f(self_pos, src_pos, index_pos) for every index element, after
// checking its value is in [0, dim_size); stops at the first bad one.
template <typename F>
Error for_each_index(KernelContext& ctx, const Tensor& index, const IndexWalk& w, F&& f) {
  Error err;
  ixutil::dispatch_index(index.dtype(), [&](auto tag) {
    using I = decltype(tag);
    const I* idx = index.data_as<const I>();
    const int64_t s0 = w.plan.inner_stride(0), s1 = w.plan.inner_stride(1);
    bool bad = false;
    w.plan.for_each_row([&](int64_t io, const int64_t* in, int64_t n) {
      if (bad) return;
      for (int64_t k = 0; k < n; ++k) {
        const int64_t v = static_cast<int64_t>(idx[io + k]);
        if (v < 0 || v >= w.dim_size) {
          err = ixutil::index_out_of_range(ctx, "index", v, w.dim, "self", w.dim_size);
          bad = true;
          return;
        }
        f(in[0] + k * s0 + v * w.dim_stride, in[1] + k * s1, io + k);
      }
    });
  });
  return err;
}

Error gather(KernelContext& ctx, const Tensor& self, int64_t dim, const Tensor& index, Tensor& out) {
  ET_CHECK_OK(check_self(ctx, self));
  ET_CHECK_OK(linalg::check_dtype(ctx, out, self.dtype(), "out"));
  IndexWalk walk;
  ET_CHECK_OK(make_walk(ctx, self, dim, index, nullptr, &walk));
  ET_CHECK_OK(kutil::resize_out(ctx, out, index.sizes(), index.dim()));
  if (index.numel() == 0) return Error::ok();
  Error err;
  ixutil::dispatch_bytes(self.element_size(), [&](auto tag) {
    using W = decltype(tag);
    const W* x = self.data_as<const W>();
    W* o = out.data_as<W>();
    err = for_each_index(ctx, index, walk, [&](int64_t pos, int64_t, int64_t at) { o[at] = x[pos]; });
  });
  return err;
}

// scatter.src / scatter.value: out = self, then out[index] = src (or value).
Error scatter(KernelContext& ctx, const Tensor& self, int64_t dim, const Tensor& index, const Tensor* src,
              const EValue* value, Tensor& out) {
  ET_CHECK_OK(check_self(ctx, self));
  if (src && src->dtype() != self.dtype()) {
    return ctx.fail(ErrorCode::InvalidArgument, "src %s must have self's dtype %s", Described(*src).text,
                    dtype_name(self.dtype()));
  }
  ET_CHECK_OK(copy_self_to_out(ctx, self, out));
  if (index.numel() == 0) return Error::ok();
  IndexWalk walk;
  ET_CHECK_OK(make_walk(ctx, self, dim, index, src, &walk));
  Error err;
  ixutil::dispatch_bytes(self.element_size(), [&](auto tag) {
    using W = decltype(tag);
    W* o = out.data_as<W>();
    if (src) {
      const W* s = src->data_as<const W>();
      err = for_each_index(ctx, index, walk, [&](int64_t pos, int64_t at, int64_t) { o[pos] = s[at]; });
    } else {
      W v{};
      kutil::dispatch_storage(self.dtype(), [&](auto t) {
        using T = decltype(t);
        if constexpr (sizeof(T) == sizeof(W)) {  // always, for self's dtype
          const T typed = kutil::scalar_as<T>(*value);
          std::memcpy(&v, &typed, sizeof(W));
        }
      });
      err = for_each_index(ctx, index, walk, [&](int64_t pos, int64_t, int64_t) { o[pos] = v; });
    }
  });
  return err;
}

enum class Reduce { kSum, kProd, kMean, kAmax, kAmin };

template <Reduce R, typename CT>
inline CT reduce_op(CT a, CT b) {
  if constexpr (R == Reduce::kSum || R == Reduce::kMean) {
    return kutil::wrap_add(a, b);
  } else if constexpr (R == Reduce::kProd) {
    return kutil::wrap_mul(a, b);
  } else if constexpr (R == Reduce::kAmax) {
    return ixutil::is_nan(b) ? b : (a < b ? b : a);  // NaN in either wins
  } else {
    return ixutil::is_nan(b) ? b : (b < a ? b : a);
  }
}

// The value a reduction starts from where include_self is false.
template <typename T>
inline ixutil::compute_t<T> reduce_identity(Reduce r) {
  using CT = ixutil::compute_t<T>;
  switch (r) {
    case Reduce::kProd: return CT(1);
    case Reduce::kAmax:
      if constexpr (std::is_floating_point_v<CT>) return -std::numeric_limits<CT>::infinity();
      else return static_cast<CT>(std::numeric_limits<T>::lowest());
    case Reduce::kAmin:
      if constexpr (std::is_floating_point_v<CT>) return std::numeric_limits<CT>::infinity();
      else return static_cast<CT>(std::numeric_limits<T>::max());
    default: return CT(0);
  }
}

// a / count, floor division for integers (PyTorch's scatter_reduce mean).
template <typename CT>
inline CT mean_of(CT a, int64_t count) {
  if constexpr (std::is_floating_point_v<CT>) {
    return a / static_cast<CT>(count);
  } else {
    CT q = a / count;
    if (q * count != a && (a < 0)) --q;
    return q;
  }
}

// out[index] op= src, for one reduction and dtype. include_self false: the
// scattered-to elements restart from the reduction's identity. counts (mean
// only): how many values each element holds. `acc` (float16/bfloat16 sum,
// prod and mean only, else null): out.numel() floats to accumulate in.
template <Reduce R, typename T>
__attribute__((noinline)) Error scatter_reduce_typed(KernelContext& ctx, const Tensor& index, const IndexWalk& walk,
                                                     const Tensor& src, bool include_self, int64_t* counts,
                                                     float* acc, Tensor& out) {
  using CT = ixutil::compute_t<T>;
  T* o = out.data_as<T>();
  const T* s = src.data_as<const T>();
  if constexpr (kutil::is_half_v<T> && R != Reduce::kAmax && R != Reduce::kAmin) {
    // PyTorch accumulates these in float and rounds once (mean: the sum rounds, then the quotient).
    for (int64_t i = 0; i < out.numel(); ++i) acc[i] = ixutil::load(o, i);
    if (!include_self) {
      const float identity = reduce_identity<T>(R);
      ET_CHECK_OK(for_each_index(ctx, index, walk, [&](int64_t pos, int64_t, int64_t) { acc[pos] = identity; }));
    }
    ET_CHECK_OK(for_each_index(ctx, index, walk, [&](int64_t pos, int64_t at, int64_t) {
      acc[pos] = reduce_op<R>(acc[pos], ixutil::load(s, at));
      if constexpr (R == Reduce::kMean) ++counts[pos];
    }));
    for (int64_t i = 0; i < out.numel(); ++i) ixutil::store(o, i, acc[i]);
  } else {
    if (!include_self) {
      const CT identity = reduce_identity<T>(R);
      ET_CHECK_OK(for_each_index(ctx, index, walk,
                                 [&](int64_t pos, int64_t, int64_t) { ixutil::store(o, pos, identity); }));
    }
    ET_CHECK_OK(for_each_index(ctx, index, walk, [&](int64_t pos, int64_t at, int64_t) {
      ixutil::store(o, pos, reduce_op<R>(ixutil::load(o, pos), ixutil::load(s, at)));
      if constexpr (R == Reduce::kMean) ++counts[pos];
    }));
  }
  if constexpr (R == Reduce::kMean) {
    for (int64_t i = 0; i < out.numel(); ++i) {
      if (counts[i] > 1) ixutil::store(o, i, mean_of(ixutil::load(o, i), counts[i]));
    }
  }
  return Error::ok();
}

// scatter_add / scatter_reduce.two: out = self, then out[index] op= src.
Error scatter_reduce(KernelContext& ctx, const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                     Reduce reduce, bool include_self, Tensor& out) {
  ET_CHECK_OK(check_self(ctx, self));
  if (src.dtype() != self.dtype()) {
    return ctx.fail(ErrorCode::InvalidArgument, "src %s must have self's dtype %s", Described(src).text,
                    dtype_name(self.dtype()));
  }
  if (reduce == Reduce::kMean && self.dtype() == ScalarType::Bool) {
    return ctx.fail(ErrorCode::NotSupported, "reduce 'mean' is not supported for bool self");
  }
  ET_CHECK_OK(copy_self_to_out(ctx, self, out));
  if (index.numel() == 0) return Error::ok();
  IndexWalk walk;
  ET_CHECK_OK(make_walk(ctx, self, dim, index, &src, &walk));
  int64_t* counts = nullptr;
  if (reduce == Reduce::kMean) {
    const size_t bytes = static_cast<size_t>(self.numel()) * sizeof(int64_t);
    counts = static_cast<int64_t*>(ctx.allocate_temp(bytes));
    if (counts == nullptr) {
      return ctx.fail(ErrorCode::OutOfMemory, "needs %zu bytes of scratch for the counts of reduce 'mean'", bytes);
    }
    for (int64_t i = 0; i < self.numel(); ++i) counts[i] = include_self ? 1 : 0;
  }
  float* acc = nullptr;
  if (kutil::is_half_dtype(self.dtype()) && reduce != Reduce::kAmax && reduce != Reduce::kAmin) {
    const size_t bytes = static_cast<size_t>(self.numel()) * sizeof(float);
    acc = static_cast<float*>(ctx.allocate_temp(bytes));
    if (acc == nullptr) {
      return ctx.fail(ErrorCode::OutOfMemory, "needs %zu bytes of scratch to accumulate %s in float", bytes,
                      dtype_name(self.dtype()));
    }
  }
  Error err;
  kutil::dispatch_storage(self.dtype(), [&](auto tag) {
    using T = decltype(tag);
    auto run = [&](auto r) {
      err = scatter_reduce_typed<decltype(r)::value, T>(ctx, index, walk, src, include_self, counts, acc, out);
    };
    switch (reduce) {
      case Reduce::kSum: run(std::integral_constant<Reduce, Reduce::kSum>{}); break;
      case Reduce::kProd: run(std::integral_constant<Reduce, Reduce::kProd>{}); break;
      case Reduce::kMean: run(std::integral_constant<Reduce, Reduce::kMean>{}); break;
      case Reduce::kAmax: run(std::integral_constant<Reduce, Reduce::kAmax>{}); break;
      default: run(std::integral_constant<Reduce, Reduce::kAmin>{}); break;
    }
  });
  return err;
}

// ---------------------------------------------------------------------------
// index.Tensor / index_put (advanced indexing)
// ---------------------------------------------------------------------------

// PyTorch's advanced indexing, planned: the index tensors (a k-dim bool mask
// stands for k dims: the linear positions of its true entries) broadcast to a
// shape B; each element of B names one self offset (adv_off). The result is
// B in place of the indexed dims when those are adjacent, else B followed by
// the remaining dims; it is walked by a Plan whose inputs are self's offset
// over the kept dims and the position in B.
struct AdvancedIndex {
  int32_t rank = 0;
  int64_t sizes[kMaxDims];
  int64_t self_strides[kMaxDims];  // 0 on B's dims
  int64_t adv_strides[kMaxDims];   // B's contiguous strides on B's dims, 0 elsewhere
  const int64_t* adv_off = nullptr;
};

bool is_mask_dtype(ScalarType t) { return t == ScalarType::Bool || t == ScalarType::UInt8; }

Error plan_advanced_index(KernelContext& ctx, const Tensor& self, Span<Tensor* const> indices, AdvancedIndex* plan) {
  const int32_t n = static_cast<int32_t>(indices.size());
  if (n > kMaxDims) {
    return ctx.fail(ErrorCode::InvalidArgument, "too many indices for self %s (got %d)", Described(self).text, n);
  }
  // Which self dims each entry takes; masks need their true positions.
  int32_t first_dim[kMaxDims];
  int32_t consumed = 0, tensors = 0;
  for (int32_t k = 0; k < n; ++k) {
    const Tensor* t = indices[k];
    first_dim[k] = consumed;
    if (t == nullptr) {
      ++consumed;
      continue;
    }
    ++tensors;
    if (is_mask_dtype(t->dtype())) {
      if (t->dim() == 0) {
        return ctx.fail(ErrorCode::NotSupported, "indices[%d] is a 0-d mask %s; use a 1-d mask on an unsqueezed self",
                        k, Described(*t).text);
      }
      consumed += t->dim();
    } else if (ixutil::is_index_dtype(t->dtype())) {
      ++consumed;
    } else {
      return ctx.fail(ErrorCode::InvalidArgument, "indices[%d] must be int64, int32, bool or uint8, got %s", k,
                      Described(*t).text);
    }
  }
  if (consumed > self.dim()) {
    return ctx.fail(ErrorCode::InvalidArgument, "too many indices for self %s (they index %d dims)",
                    Described(self).text, consumed);
  }
  if (tensors == 0) {
    return ctx.fail(ErrorCode::InvalidArgument, "at least one of the %d indices must be a tensor (all are None)", n);
  }
  int64_t self_strides[kMaxDims];
  kutil::contiguous_strides(self.sizes(), self.dim(), self_strides);

  // Masks: shape checks and true positions (scratch).
  int64_t mask_counts[kMaxDims] = {};
  const int64_t* positions[kMaxDims] = {};
  for (int32_t k = 0; k < n; ++k) {
    const Tensor* t = indices[k];
    if (t == nullptr || !is_mask_dtype(t->dtype())) continue;
    for (int32_t j = 0; j < t->dim(); ++j) {
      if (t->size(j) != self.size(first_dim[k] + j)) {
        return ctx.fail(ErrorCode::InvalidArgument, "mask indices[%d] %s does not match self %s at dim %d", k,
                        Described(*t).text, Described(self).text, first_dim[k] + j);
      }
    }
    const uint8_t* m = t->data_as<const uint8_t>();
    int64_t count = 0;
    for (int64_t i = 0; i < t->numel(); ++i) count += m[i] != 0;
    int64_t* pos = static_cast<int64_t*>(ctx.allocate_temp(static_cast<size_t>(count) * sizeof(int64_t) + 8));
    if (pos == nullptr) {
      return ctx.fail(ErrorCode::OutOfMemory, "needs %lld bytes of scratch for the true positions of mask indices[%d]",
                      static_cast<long long>(count * 8), k);
    }
    for (int64_t i = 0, c = 0; i < t->numel(); ++i) {
      if (m[i] != 0) pos[c++] = i;
    }
    mask_counts[k] = count;
    positions[k] = pos;
  }

  // B: the index tensors broadcast together.
  kutil::Operand ops[kMaxDims];
  char names[kMaxDims][16];
  int32_t which[kMaxDims];
  int32_t nops = 0;
  for (int32_t k = 0; k < n; ++k) {
    const Tensor* t = indices[k];
    if (t == nullptr) continue;
    std::snprintf(names[nops], sizeof(names[nops]), "indices[%d]", k);
    ops[nops] = kutil::Operand::of(*t, names[nops]);
    if (is_mask_dtype(t->dtype())) {
      ops[nops].dim = 1;
      ops[nops].sizes = &mask_counts[k];
    }
    which[nops++] = k;
  }
  int64_t b_sizes[kMaxDims];
  int32_t b_dim = 0;
  ET_CHECK_OK(kutil::broadcast_shape(ctx, ops, nops, b_sizes, &b_dim));
  int64_t b_numel = 0;
  if (!kutil::checked_numel(b_sizes, b_dim, &b_numel)) {
    return ctx.fail(ErrorCode::InvalidArgument, "the broadcast index shape is too large");
  }
  const size_t adv_bytes = static_cast<size_t>(b_numel) * sizeof(int64_t);
  int64_t* adv = static_cast<int64_t*>(ctx.allocate_temp(adv_bytes + 8));
  if (adv == nullptr) {
    return ctx.fail(ErrorCode::OutOfMemory, "needs %zu bytes of scratch for %lld broadcast index positions", adv_bytes,
                    static_cast<long long>(b_numel));
  }
  for (int64_t i = 0; i < b_numel; ++i) adv[i] = 0;

  // adv[b] = sum over entries of (wrapped index) * self stride.
  for (int32_t j = 0; j < nops && b_numel > 0; ++j) {
    const int32_t k = which[j];
    const Tensor& t = *indices[k];
    int64_t full[1][kMaxDims];
    kutil::broadcast_strides(ops[j], b_sizes, b_dim, full[0]);
    const Plan<1> walk(b_sizes, b_dim, full);
    const int64_t s = walk.inner_stride(0);
    if (is_mask_dtype(t.dtype())) {
      const int64_t stride = self_strides[first_dim[k] + t.dim() - 1];
      const int64_t* pos = positions[k];
      walk.for_each_row([&](int64_t bo, const int64_t* in, int64_t m) {
        for (int64_t i = 0; i < m; ++i) adv[bo + i] += pos[in[0] + i * s] * stride;
      });
      continue;
    }
    const int32_t d = first_dim[k];
    const int64_t size = self.size(d), stride = self_strides[d];
    Error err;
    ixutil::dispatch_index(t.dtype(), [&](auto tag) {
      using I = decltype(tag);
      const I* idx = t.data_as<const I>();
      walk.for_each_row([&](int64_t bo, const int64_t* in, int64_t m) {
        if (err) return;
        for (int64_t i = 0; i < m; ++i) {
          int64_t v = static_cast<int64_t>(idx[in[0] + i * s]);
          if (!ixutil::wrap_index(&v, size)) {
            err = ixutil::index_out_of_range(ctx, "index", v, d, "self", size);
            return;
          }
          adv[bo + i] += v * stride;
        }
      });
    });
    ET_CHECK_OK(err);
  }

  // The result's dims: adjacent indexed dims keep their place, others go first.
  bool indexed[kMaxDims] = {};
  int32_t lo = -1, hi = -1, count = 0;  // with adjacent indexed dims, they are [lo, hi]
  bool adjacent = true;
  for (int32_t k = 0; k < n; ++k) {
    if (indices[k] == nullptr) continue;
    const int32_t dims = is_mask_dtype(indices[k]->dtype()) ? indices[k]->dim() : 1;
    for (int32_t j = 0; j < dims; ++j) indexed[first_dim[k] + j] = true;
    count += dims;
    if (lo < 0) {
      lo = first_dim[k];
    } else if (first_dim[k] != hi + 1) {
      adjacent = false;
    }
    hi = first_dim[k] + dims - 1;
  }
  const int32_t rank = self.dim() - count + b_dim;
  if (rank > kMaxDims) {
    return ctx.fail(ErrorCode::InvalidArgument, "the indexing result would have %d dims; at most %d are supported",
                    rank, kMaxDims);
  }
  int64_t b_strides[kMaxDims];
  kutil::contiguous_strides(b_sizes, b_dim, b_strides);
  const int32_t b_at = adjacent ? lo : 0;
  int32_t r = 0;
  auto put_kept = [&](int32_t d) {
    plan->sizes[r] = self.size(d);
    plan->self_strides[r] = self_strides[d];
    plan->adv_strides[r++] = 0;
  };
  for (int32_t d = 0; d <= self.dim(); ++d) {
    if (d == b_at) {
      for (int32_t j = 0; j < b_dim; ++j) {
        plan->sizes[r] = b_sizes[j];
        plan->self_strides[r] = 0;
        plan->adv_strides[r++] = b_strides[j];
      }
    }
    if (d < self.dim() && !indexed[d]) put_kept(d);
  }
  plan->rank = r;
  plan->adv_off = adv;
  return Error::ok();
}

Error index_tensor(KernelContext& ctx, const Tensor& self, Span<Tensor* const> indices, Tensor& out) {
  ET_CHECK_OK(check_self(ctx, self));
  ET_CHECK_OK(linalg::check_dtype(ctx, out, self.dtype(), "out"));
  AdvancedIndex a;
  ET_CHECK_OK(plan_advanced_index(ctx, self, indices, &a));
  ET_CHECK_OK(kutil::resize_out(ctx, out, a.sizes, a.rank));
  if (out.numel() == 0) return Error::ok();
  int64_t full[2][kMaxDims];
  for (int32_t d = 0; d < a.rank; ++d) full[0][d] = a.self_strides[d], full[1][d] = a.adv_strides[d];
  const Plan<2> plan(a.sizes, a.rank, full);
  const int64_t s0 = plan.inner_stride(0), s1 = plan.inner_stride(1);
  const int64_t* adv = a.adv_off;
  ixutil::dispatch_bytes(self.element_size(), [&](auto tag) {
    using W = decltype(tag);
    const W* x = self.data_as<const W>();
    W* o = out.data_as<W>();
    plan.for_each_row([&](int64_t oo, const int64_t* in, int64_t m) {
      W* dst = o + oo;
      if (s1 == 0) {  // one index position: a run of self
        const W* src = x + in[0] + adv[in[1]];
        if (s0 == 1) {
          std::memcpy(dst, src, static_cast<size_t>(m) * sizeof(W));
        } else {
          for (int64_t i = 0; i < m; ++i) dst[i] = src[i * s0];
        }
      } else {
        const W* src = x + in[0];
        const int64_t* off = adv + in[1];
        for (int64_t i = 0; i < m; ++i) dst[i] = src[i * s0 + off[i * s1]];
      }
    });
  });
  return Error::ok();
}

Error index_put(KernelContext& ctx, const Tensor& self, Span<Tensor* const> indices, const Tensor& values,
                bool accumulate, Tensor& out) {
  ET_CHECK_OK(check_self(ctx, self));
  if (values.dtype() != self.dtype()) {
    return ctx.fail(ErrorCode::InvalidArgument, "values %s must have self's dtype %s", Described(values).text,
                    dtype_name(self.dtype()));
  }
  ET_CHECK_OK(kutil::check_rank(ctx, values, "values"));
  AdvancedIndex a;
  ET_CHECK_OK(plan_advanced_index(ctx, self, indices, &a));
  // values broadcast to the indexing result's shape.
  bool fits = values.dim() <= a.rank;
  for (int32_t j = 0; fits && j < values.dim(); ++j) {
    const int64_t v = values.size(values.dim() - 1 - j), r = a.sizes[a.rank - 1 - j];
    fits = v == r || v == 1;
  }
  if (!fits) {
    char shape[96];
    return ctx.fail(ErrorCode::InvalidArgument, "values %s cannot be broadcast to the indexing result shape %s",
                    Described(values).text, kutil::format_shape(shape, sizeof(shape), a.sizes, a.rank));
  }
  ET_CHECK_OK(copy_self_to_out(ctx, self, out));
  int64_t numel = 1;
  for (int32_t d = 0; d < a.rank; ++d) numel *= a.sizes[d];
  if (numel == 0) return Error::ok();
  int64_t full[3][kMaxDims];
  const kutil::Operand v = kutil::Operand::of(values, "values");
  kutil::broadcast_strides(v, a.sizes, a.rank, full[2]);
  for (int32_t d = 0; d < a.rank; ++d) full[0][d] = a.self_strides[d], full[1][d] = a.adv_strides[d];
  const Plan<3> plan(a.sizes, a.rank, full);
  const int64_t s0 = plan.inner_stride(0), s1 = plan.inner_stride(1), s2 = plan.inner_stride(2);
  const int64_t* adv = a.adv_off;
  if (accumulate) {
    kutil::dispatch_storage(self.dtype(), [&](auto tag) {
      using T = decltype(tag);
      T* o = out.data_as<T>();
      const T* src = values.data_as<const T>();
      plan.for_each_row([&](int64_t, const int64_t* in, int64_t m) {
        for (int64_t i = 0; i < m; ++i) {
          const int64_t pos = in[0] + i * s0 + adv[in[1] + i * s1];
          ixutil::store(o, pos, kutil::wrap_add(ixutil::load(o, pos), ixutil::load(src, in[2] + i * s2)));
        }
      });
    });
    return Error::ok();
  }
  ixutil::dispatch_bytes(self.element_size(), [&](auto tag) {
    using W = decltype(tag);
    W* o = out.data_as<W>();
    const W* src = values.data_as<const W>();
    plan.for_each_row([&](int64_t, const int64_t* in, int64_t m) {
      if (s1 == 0 && s0 == 1 && s2 == 1) {
        std::memcpy(o + in[0] + adv[in[1]], src + in[2], static_cast<size_t>(m) * sizeof(W));
        return;
      }
      for (int64_t i = 0; i < m; ++i) o[in[0] + i * s0 + adv[in[1] + i * s1]] = src[in[2] + i * s2];
    });
  });
  return Error::ok();
}

// ---------------------------------------------------------------------------
// index_select / masked_scatter / nonzero
// ---------------------------------------------------------------------------

Error index_select(KernelContext& ctx, const Tensor& self, int64_t dim, const Tensor& index, Tensor& out) {
  ET_CHECK_OK(check_self(ctx, self));
  ET_CHECK_OK(linalg::check_dtype(ctx, out, self.dtype(), "out"));
  ET_CHECK_OK(ixutil::check_index_dtype(ctx, index, "index"));
  if (index.dim() > 1) {
    return ctx.fail(ErrorCode::InvalidArgument, "index must be 0-D or 1-D, got %s", Described(index).text);
  }
  int64_t d = 0;
  if (!linalg::normalize_dim(dim, self.dim(), &d)) return linalg::dim_error(ctx, "dim", dim, self);
  const int64_t count = index.numel();
  if (self.dim() == 0 && count != 1) {
    return ctx.fail(ErrorCode::InvalidArgument, "index %s must have one element to select from the 0-d self",
                    Described(index).text);
  }
  int64_t sizes[kMaxDims];
  int64_t outer = 1, inner = 1;
  const int64_t size = self.dim() == 0 ? 1 : self.size(static_cast<int32_t>(d));
  for (int32_t j = 0; j < self.dim(); ++j) {
    sizes[j] = j == d ? count : self.size(j);
    if (j < d) outer *= self.size(j);
    if (j > d) inner *= self.size(j);
  }
  // Every index, once, before any copy.
  Error err;
  ixutil::dispatch_index(index.dtype(), [&](auto tag) {
    using I = decltype(tag);
    const I* idx = index.data_as<const I>();
    for (int64_t i = 0; i < count && !err; ++i) {
      const int64_t v = static_cast<int64_t>(idx[i]);
      if (v < 0 || v >= size) err = ixutil::index_out_of_range(ctx, "index", v, d, "self", size);
    }
  });
  ET_CHECK_OK(err);
  ET_CHECK_OK(kutil::resize_out(ctx, out, sizes, self.dim()));
  if (out.numel() == 0) return Error::ok();
  ixutil::dispatch_index(index.dtype(), [&](auto itag) {
    using I = decltype(itag);
    const I* idx = index.data_as<const I>();
    ixutil::dispatch_bytes(self.element_size(), [&](auto tag) {
      using W = decltype(tag);
      const W* x = self.data_as<const W>();
      W* o = out.data_as<W>();
      for (int64_t b = 0; b < outer; ++b) {
        const W* src = x + b * size * inner;
        W* dst = o + b * count * inner;
        if (inner == 1) {
          for (int64_t i = 0; i < count; ++i) dst[i] = src[idx[i]];
        } else {
          for (int64_t i = 0; i < count; ++i) {
            std::memcpy(dst + i * inner, src + static_cast<int64_t>(idx[i]) * inner,
                        static_cast<size_t>(inner) * sizeof(W));
          }
        }
      }
    });
  });
  return Error::ok();
}

Error masked_scatter(KernelContext& ctx, const Tensor& self, const Tensor& mask, const Tensor& source, Tensor& out) {
  ET_CHECK_OK(check_self(ctx, self));
  if (mask.dtype() != ScalarType::Bool) {
    return ctx.fail(ErrorCode::InvalidArgument, "mask must be bool, got %s", Described(mask).text);
  }
  if (source.dtype() != self.dtype()) {
    return ctx.fail(ErrorCode::InvalidArgument, "source %s must have self's dtype %s", Described(source).text,
                    dtype_name(self.dtype()));
  }
  ET_CHECK_OK(linalg::check_dtype(ctx, out, self.dtype(), "out"));
  const kutil::Operand ops[2] = {kutil::Operand::of(self, "self"), kutil::Operand::of(mask, "mask")};
  int64_t sizes[kMaxDims];
  int32_t rank = 0;
  ET_CHECK_OK(kutil::broadcast_shape(ctx, ops, 2, sizes, &rank));
  ET_CHECK_OK(kutil::resize_out(ctx, out, sizes, rank));
  if (out.numel() == 0) return Error::ok();
  int64_t full[2][kMaxDims];
  kutil::broadcast_strides(ops[0], sizes, rank, full[0]);
  kutil::broadcast_strides(ops[1], sizes, rank, full[1]);
  const Plan<2> plan(sizes, rank, full);
  const int64_t s0 = plan.inner_stride(0), s1 = plan.inner_stride(1);
  const uint8_t* m = mask.data_as<const uint8_t>();
  int64_t ones = 0;
  plan.for_each_row([&](int64_t, const int64_t* in, int64_t n) {
    for (int64_t i = 0; i < n; ++i) ones += m[in[1] + i * s1] != 0;
  });
  if (ones > source.numel()) {
    return ctx.fail(ErrorCode::InvalidArgument, "source %s has fewer elements than mask has true entries (%lld)",
                    Described(source).text, static_cast<long long>(ones));
  }
  ixutil::dispatch_bytes(self.element_size(), [&](auto tag) {
    using W = decltype(tag);
    const W* x = self.data_as<const W>();
    const W* src = source.data_as<const W>();
    W* o = out.data_as<W>();
    int64_t next = 0;
    plan.for_each_row([&](int64_t oo, const int64_t* in, int64_t n) {
      for (int64_t i = 0; i < n; ++i) o[oo + i] = m[in[1] + i * s1] != 0 ? src[next++] : x[in[0] + i * s0];
    });
  });
  return Error::ok();
}

// Non-zero test by dtype: NaN counts, -0.0 does not.
template <typename T>
inline bool is_nonzero(const T* p, int64_t i) {
  if constexpr (kutil::is_half_v<T>) {
    return (p[i].bits & 0x7fffu) != 0;
  } else if constexpr (std::is_same_v<T, bool>) {
    return reinterpret_cast<const uint8_t*>(p)[i] != 0;
  } else {
    return p[i] != T(0);
  }
}

// The coordinates of every non-zero element, row by row of the last dim.
template <typename T>
__attribute__((noinline)) void write_nonzero(const T* x, const Tensor& self, int64_t* o) {
  const int32_t rank = self.dim();
  const int64_t last = self.size(rank - 1);
  const int64_t rows = self.numel() / last;
  int64_t coord[kMaxDims] = {};
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = x + r * last;
    for (int64_t j = 0; j < last; ++j) {
      if (!is_nonzero(row, j)) continue;
      for (int32_t d = 0; d + 1 < rank; ++d) o[d] = coord[d];
      o[rank - 1] = j;
      o += rank;
    }
    for (int32_t d = rank - 2; d >= 0; --d) {
      if (++coord[d] < self.size(d)) break;
      coord[d] = 0;
    }
  }
}

Error nonzero(KernelContext& ctx, const Tensor& self, Tensor& out) {
  ET_CHECK_OK(check_self(ctx, self));
  if (out.dtype() != ScalarType::Int64) {
    return ctx.fail(ErrorCode::InvalidArgument, "out must be int64, got %s", Described(out).text);
  }
  if (out.dim() != 2) {
    return ctx.fail(ErrorCode::InvalidArgument, "out must be 2-D [count, %d], got %s", self.dim(),
                    Described(out).text);
  }
  Error err;
  kutil::dispatch_storage(self.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = self.data_as<const T>();
    const int64_t numel = self.numel();
    int64_t count = 0;
    for (int64_t i = 0; i < numel; ++i) count += is_nonzero(x, i);
    const int64_t bound = out.upper_bounds()[0];
    if (count > bound) {
      err = ctx.fail(ErrorCode::OutOfBounds, "self %s has %lld nonzero elements but out was planned for at most %lld",
                     Described(self).text, static_cast<long long>(count), static_cast<long long>(bound));
      return;
    }
    const int64_t sizes[2] = {count, self.dim()};
    err = kutil::resize_out(ctx, out, sizes, 2);
    if (err || count == 0 || self.dim() == 0) return;
    write_nonzero(x, self, out.data_as<int64_t>());
  });
  return err;
}

bool parse_reduce(Span<const char> s, Reduce* r) {
  auto is = [&](const char* name) {
    return std::strlen(name) == s.size() && std::memcmp(name, s.data(), s.size()) == 0;
  };
  if (is("sum")) *r = Reduce::kSum;
  else if (is("prod")) *r = Reduce::kProd;
  else if (is("mean")) *r = Reduce::kMean;
  else if (is("amax")) *r = Reduce::kAmax;
  else if (is("amin")) *r = Reduce::kAmin;
  else return false;
  return true;
}

}  // namespace

namespace portable {

// sparse_grad only matters for the gradient.
Error gather_out(KernelContext& ctx, const Tensor& self, int64_t dim, const Tensor& index, bool sparse_grad,
                 Tensor& out) {
  (void)sparse_grad;
  return gather(ctx, self, dim, index, out);
}

Error scatter_src_out(KernelContext& ctx, const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                      Tensor& out) {
  return scatter(ctx, self, dim, index, &src, nullptr, out);
}

Error scatter_value_out(KernelContext& ctx, const Tensor& self, int64_t dim, const Tensor& index, const EValue& value,
                        Tensor& out) {
  return scatter(ctx, self, dim, index, nullptr, &value, out);
}

Error scatter_add_out(KernelContext& ctx, const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                      Tensor& out) {
  return scatter_reduce(ctx, self, dim, index, src, Reduce::kSum, true, out);
}

Error scatter_reduce_two_out(KernelContext& ctx, const Tensor& self, int64_t dim, const Tensor& index,
                             const Tensor& src, Span<const char> reduce, bool include_self, Tensor& out) {
  Reduce r;
  if (!parse_reduce(reduce, &r)) {
    return ctx.fail(ErrorCode::InvalidArgument, "reduce must be sum, prod, mean, amax or amin, got '%.*s'",
                    static_cast<int>(reduce.size() > 32 ? 32 : reduce.size()), reduce.data());
  }
  return scatter_reduce(ctx, self, dim, index, src, r, include_self, out);
}

Error index_tensor_out(KernelContext& ctx, const Tensor& self, Span<Tensor* const> indices, Tensor& out) {
  return index_tensor(ctx, self, indices, out);
}

Error index_put_out(KernelContext& ctx, const Tensor& self, Span<Tensor* const> indices, const Tensor& values,
                    bool accumulate, Tensor& out) {
  return index_put(ctx, self, indices, values, accumulate, out);
}

Error index_select_out(KernelContext& ctx, const Tensor& self, int64_t dim, const Tensor& index, Tensor& out) {
  return index_select(ctx, self, dim, index, out);
}

Error masked_scatter_out(KernelContext& ctx, const Tensor& self, const Tensor& mask, const Tensor& source,
                         Tensor& out) {
  return masked_scatter(ctx, self, mask, source, out);
}

Error nonzero_out(KernelContext& ctx, const Tensor& self, Tensor& out) { return nonzero(ctx, self, out); }

}  // namespace portable
}  // namespace etmlir
