// Sorting and selection kernels: sort, topk, argmax/argmin, max/min along a dim.
//
// Order is PyTorch's: NaN sorts above everything (so max/argmax pick it and
// descending sorts put it first) and -0 equals 0. sort is always stable (ties
// keep their input order, also when the caller did not ask for it, which
// PyTorch allows); topk selects with nth_element over packed (key, index)
// entries instead of sorting the whole row, and among equal values prefers the
// lower index. argmax/argmin/max/min return the first occurrence of the
// extreme value; the values of max/min are copied from self (bit-exact).
//
// Rows along `dim` are outer x n x inner: contiguous rows (inner == 1) are
// scanned directly, other dims reduce over contiguous inner chunks.
#include <algorithm>
#include <cstring>

#include "generated/sorting.h"
#include "indexing_util.h"

namespace etmlir {
namespace {

using ixutil::Described;

// self seen as [outer, n, inner] around `dim` (a 0-d tensor as [1, 1, 1]).
struct Rows {
  int64_t dim = 0;
  int64_t outer = 1, n = 1, inner = 1;
};

Error rows_along(KernelContext& ctx, const Tensor& self, int64_t dim, Rows* rows) {
  ET_CHECK_OK(kutil::check_rank(ctx, self, "self"));
  ET_CHECK_OK(linalg::check_sane(ctx, self, "self"));
  if (!linalg::normalize_dim(dim, self.dim(), &rows->dim)) return linalg::dim_error(ctx, "dim", dim, self);
  rows->outer = rows->n = rows->inner = 1;
  for (int32_t d = 0; d < self.dim(); ++d) {
    if (d < rows->dim) rows->outer *= self.size(d);
    if (d == rows->dim) rows->n = self.size(d);
    if (d > rows->dim) rows->inner *= self.size(d);
  }
  return Error::ok();
}

// self's sizes with `dim` reduced (kept as 1 with keepdim, dropped otherwise).
int32_t reduced_sizes(const Tensor& self, int64_t dim, bool keepdim, int64_t* sizes) {
  int32_t rank = 0;
  for (int32_t d = 0; d < self.dim(); ++d) {
    if (d != dim) {
      sizes[rank++] = self.size(d);
    } else if (keepdim) {
      sizes[rank++] = 1;
    }
  }
  return rank;
}

Error check_indices_out(KernelContext& ctx, const Tensor& t, const char* name) {
  if (t.dtype() != ScalarType::Int64) {
    return ctx.fail(ErrorCode::InvalidArgument, "%s must be int64, got %s", name, Described(t).text);
  }
  return Error::ok();
}

constexpr const char* kRealHalf = "float32, float64, float16, bfloat16, int64, int32, int16, int8, uint8";
constexpr const char* kRealHalfBool = "float32, float64, float16, bfloat16, int64, int32, int16, int8, uint8, bool";

// Calls f(T{}) with self's storage type; bool only when `with_bool`.
template <typename F>
Error dispatch_self(KernelContext& ctx, const Tensor& self, bool with_bool, F&& f) {
  if (self.dtype() == ScalarType::Bool && !with_bool) {
    return kutil::unsupported_dtype(ctx, "self", self.dtype(), kRealHalf);
  }
  if (!kutil::dispatch_storage(self.dtype(), f)) {
    return kutil::unsupported_dtype(ctx, "self", self.dtype(), with_bool ? kRealHalfBool : kRealHalf);
  }
  return Error::ok();
}

// ---------------------------------------------------------------------------
// argmax / argmin / max.dim / min.dim
// ---------------------------------------------------------------------------

// True if v replaces best: strictly better, or the first NaN.
template <bool kMax, typename CT>
inline bool better(CT v, CT best) {
  return (kMax ? v > best : v < best) || (ixutil::is_nan(v) && !ixutil::is_nan(best));
}

// idx[o * inner + c] = the first index along n of the extreme of x[o, :, c].
template <bool kMax, typename T>
void arg_extreme(const T* x, const Rows& r, int64_t* idx) {
  using CT = ixutil::compute_t<T>;
  if (r.inner == 1) {
    for (int64_t o = 0; o < r.outer; ++o) {
      const T* row = x + o * r.n;
      CT best = ixutil::load(row, 0);
      int64_t at = 0;
      for (int64_t j = 1; j < r.n && !ixutil::is_nan(best); ++j) {
        const CT v = ixutil::load(row, j);
        if (better<kMax>(v, best)) best = v, at = j;
      }
      idx[o] = at;
    }
    return;
  }
  constexpr int64_t kChunk = 256;
  CT best[kChunk];
  int64_t at[kChunk];
  for (int64_t o = 0; o < r.outer; ++o) {
    for (int64_t c0 = 0; c0 < r.inner; c0 += kChunk) {
      const int64_t m = r.inner - c0 < kChunk ? r.inner - c0 : kChunk;
      const T* base = x + o * r.n * r.inner + c0;
      for (int64_t c = 0; c < m; ++c) best[c] = ixutil::load(base, c), at[c] = 0;
      for (int64_t j = 1; j < r.n; ++j) {
        const T* row = base + j * r.inner;
        for (int64_t c = 0; c < m; ++c) {
          const CT v = ixutil::load(row, c);
          const bool take = better<kMax>(v, best[c]);
          best[c] = take ? v : best[c];
          at[c] = take ? j : at[c];
        }
      }
      std::memcpy(idx + o * r.inner + c0, at, static_cast<size_t>(m) * sizeof(int64_t));
    }
  }
}

template <bool kMax>
Error arg_reduce(KernelContext& ctx, const Tensor& self, const Rows& r, int64_t* idx) {
  return dispatch_self(ctx, self, true, [&](auto tag) {
    using T = decltype(tag);
    arg_extreme<kMax>(self.data_as<const T>(), r, idx);
  });
}

template <bool kMax>
Error argmax_argmin(KernelContext& ctx, const Tensor& self, std::optional<int64_t> dim, bool keepdim, Tensor& out) {
  const char* name = kMax ? "argmax" : "argmin";
  ET_CHECK_OK(check_indices_out(ctx, out, "out"));
  if (self.dtype() == ScalarType::Bool) return kutil::unsupported_dtype(ctx, "self", self.dtype(), kRealHalf);
  Rows r;
  int64_t sizes[kMaxDims];
  int32_t rank = 0;
  if (dim) {
    ET_CHECK_OK(rows_along(ctx, self, *dim, &r));
    if (self.dim() > 0 && r.n == 0) {
      return ctx.fail(ErrorCode::InvalidArgument, "%s over dim %lld of self %s, which has size 0", name,
                      static_cast<long long>(*dim), Described(self).text);
    }
    rank = reduced_sizes(self, r.dim, keepdim, sizes);
  } else {
    ET_CHECK_OK(kutil::check_rank(ctx, self, "self"));
    ET_CHECK_OK(linalg::check_sane(ctx, self, "self"));
    if (self.numel() == 0) {
      return ctx.fail(ErrorCode::InvalidArgument, "%s of the empty self %s needs a dim", name, Described(self).text);
    }
    r.n = self.numel();
    if (keepdim) {
      rank = self.dim();
      for (int32_t d = 0; d < rank; ++d) sizes[d] = 1;
    }
  }
  ET_CHECK_OK(kutil::resize_out(ctx, out, sizes, rank));
  if (out.numel() == 0) return Error::ok();
  return arg_reduce<kMax>(ctx, self, r, out.data_as<int64_t>());
}

template <bool kMax>
Error max_min_dim(KernelContext& ctx, const Tensor& self, int64_t dim, bool keepdim, Tensor& values, Tensor& indices) {
  const char* name = kMax ? "max" : "min";
  ET_CHECK_OK(linalg::check_dtype(ctx, values, self.dtype(), kMax ? "max (values)" : "min (values)"));
  ET_CHECK_OK(check_indices_out(ctx, indices, kMax ? "max_values (indices)" : "min_indices (indices)"));
  Rows r;
  ET_CHECK_OK(rows_along(ctx, self, dim, &r));
  if (self.dim() > 0 && r.n == 0) {
    return ctx.fail(ErrorCode::InvalidArgument, "%s over dim %lld of self %s, which has size 0", name,
                    static_cast<long long>(dim), Described(self).text);
  }
  int64_t sizes[kMaxDims];
  const int32_t rank = reduced_sizes(self, r.dim, keepdim, sizes);
  ET_CHECK_OK(kutil::resize_out(ctx, values, sizes, rank, "values"));
  ET_CHECK_OK(kutil::resize_out(ctx, indices, sizes, rank, "indices"));
  if (indices.numel() == 0) return Error::ok();
  int64_t* idx = indices.data_as<int64_t>();
  ET_CHECK_OK(arg_reduce<kMax>(ctx, self, r, idx));
  ixutil::dispatch_bytes(self.element_size(), [&](auto tag) {
    using W = decltype(tag);
    const W* x = self.data_as<const W>();
    W* v = values.data_as<W>();
    for (int64_t o = 0; o < r.outer; ++o) {
      const W* base = x + o * r.n * r.inner;
      for (int64_t c = 0; c < r.inner; ++c) v[o * r.inner + c] = base[idx[o * r.inner + c] * r.inner + c];
    }
  });
  return Error::ok();
}

// ---------------------------------------------------------------------------
// sort / topk
// ---------------------------------------------------------------------------

// A row entry for 64-bit keys (32-bit keys pack key << 32 | index into a uint64).
struct Entry {
  uint64_t key;
  int64_t index;
  bool operator<(const Entry& o) const { return key < o.key || (key == o.key && index < o.index); }
};

// Orders entries [0, n) ascending by (key, index) and leaves the first k in
// front: all n sorted when k == n, else selected (and sorted when `sorted`).
template <typename E>
void select_first(E* e, int64_t n, int64_t k, bool sorted) {
  if (k < n) {
    if (k == 0) return;
    std::nth_element(e, e + (k - 1), e + n);
    if (sorted) std::sort(e, e + (k - 1));
  } else {
    std::sort(e, e + n);
  }
}

// For k much smaller than n: the k smallest entries of a row through a
// max-heap of k, where most entries are rejected by one comparison with its
// top. make(j) builds entry j; entries come in index order, so among equal
// keys the lower index stays (the same choice as select_first).
template <typename E, typename Make>
void heap_select(E* h, int64_t n, int64_t k, bool sorted, Make make) {
  for (int64_t j = 0; j < k; ++j) h[j] = make(j);
  std::make_heap(h, h + k);
  for (int64_t j = k; j < n; ++j) {
    const E e = make(j);
    if (e < h[0]) {
      std::pop_heap(h, h + k);
      h[k - 1] = e;
      std::push_heap(h, h + k);
    }
  }
  if (sorted) std::sort_heap(h, h + k);
}

// Writes the first k of each row of self (by key; `flip` reverses the order)
// to values and indices, laid out like self with n replaced by k.
template <typename T>
__attribute__((noinline)) Error select_rows(KernelContext& ctx, const Tensor& self, const Rows& r, int64_t k,
                                            bool flip, bool sorted, Tensor& values, Tensor& indices) {
  using K = ixutil::key_t<T>;
  const T* x = self.data_as<const T>();
  T* v = values.data_as<T>();
  int64_t* ix = indices.data_as<int64_t>();
  const bool packed = sizeof(K) == 4 && r.n <= int64_t{0xffffffff};
  const size_t entry_size = packed ? sizeof(uint64_t) : sizeof(Entry);
  // A heap of k when k is small next to n (topk), else n entries to select from.
  const bool use_heap = k > 0 && k <= r.n / 16;
  const size_t bytes = static_cast<size_t>(use_heap ? k : r.n) * entry_size;
  void* scratch = ctx.allocate_temp(bytes);
  if (scratch == nullptr) {
    return ctx.fail(ErrorCode::OutOfMemory, "needs %zu bytes of scratch to sort rows of %lld elements", bytes,
                    static_cast<long long>(r.n));
  }
  const K mask = flip ? static_cast<K>(~K{0}) : K{0};
  for (int64_t o = 0; o < r.outer; ++o) {
    for (int64_t c = 0; c < r.inner; ++c) {
      const T* row = x + o * r.n * r.inner + c;
      const int64_t out_base = o * k * r.inner + c;
      auto emit = [&](int64_t j, int64_t at) {
        v[out_base + j * r.inner] = row[at * r.inner];
        ix[out_base + j * r.inner] = at;
      };
      auto key = [&](int64_t j) { return ixutil::sort_key(ixutil::value_at(row, j * r.inner)) ^ mask; };
      if (packed) {
        uint64_t* e = static_cast<uint64_t*>(scratch);
        auto make = [&](int64_t j) { return (static_cast<uint64_t>(key(j)) << 32) | static_cast<uint64_t>(j); };
        if (use_heap) {
          heap_select(e, r.n, k, sorted, make);
        } else {
          for (int64_t j = 0; j < r.n; ++j) e[j] = make(j);
          select_first(e, r.n, k, sorted);
        }
        for (int64_t j = 0; j < k; ++j) emit(j, static_cast<int64_t>(e[j] & 0xffffffffu));
      } else {
        Entry* e = static_cast<Entry*>(scratch);
        auto make = [&](int64_t j) { return Entry{static_cast<uint64_t>(key(j)), j}; };
        if (use_heap) {
          heap_select(e, r.n, k, sorted, make);
        } else {
          for (int64_t j = 0; j < r.n; ++j) e[j] = make(j);
          select_first(e, r.n, k, sorted);
        }
        for (int64_t j = 0; j < k; ++j) emit(j, e[j].index);
      }
    }
  }
  return Error::ok();
}

Error sort_impl(KernelContext& ctx, const Tensor& self, int64_t dim, bool descending, Tensor& values,
                Tensor& indices) {
  ET_CHECK_OK(linalg::check_dtype(ctx, values, self.dtype(), "values"));
  ET_CHECK_OK(check_indices_out(ctx, indices, "indices"));
  Rows r;
  ET_CHECK_OK(rows_along(ctx, self, dim, &r));
  ET_CHECK_OK(kutil::resize_out(ctx, values, self.sizes(), self.dim(), "values"));
  ET_CHECK_OK(kutil::resize_out(ctx, indices, self.sizes(), self.dim(), "indices"));
  if (self.numel() == 0) return Error::ok();
  Error err;
  ET_CHECK_OK(dispatch_self(ctx, self, true, [&](auto tag) {
    err = select_rows<decltype(tag)>(ctx, self, r, r.n, descending, true, values, indices);
  }));
  return err;
}

}  // namespace

namespace portable {

Error argmax_out(KernelContext& ctx, const Tensor& self, std::optional<int64_t> dim, bool keepdim, Tensor& out) {
  return argmax_argmin<true>(ctx, self, dim, keepdim, out);
}
Error argmin_out(KernelContext& ctx, const Tensor& self, std::optional<int64_t> dim, bool keepdim, Tensor& out) {
  return argmax_argmin<false>(ctx, self, dim, keepdim, out);
}

Error max_dim_out(KernelContext& ctx, const Tensor& self, int64_t dim, bool keepdim, Tensor& max,
                  Tensor& max_values) {
  return max_min_dim<true>(ctx, self, dim, keepdim, max, max_values);
}
Error min_dim_out(KernelContext& ctx, const Tensor& self, int64_t dim, bool keepdim, Tensor& min,
                  Tensor& min_indices) {
  return max_min_dim<false>(ctx, self, dim, keepdim, min, min_indices);
}

Error sort_out(KernelContext& ctx, const Tensor& self, int64_t dim, bool descending, Tensor& values,
               Tensor& indices) {
  return sort_impl(ctx, self, dim, descending, values, indices);
}
// `stable` may be None, true or false: the sort is stable either way.
Error sort_stable_out(KernelContext& ctx, const Tensor& self, std::optional<bool> stable, int64_t dim,
                      bool descending, Tensor& values, Tensor& indices) {
  (void)stable;
  return sort_impl(ctx, self, dim, descending, values, indices);
}

Error topk_out(KernelContext& ctx, const Tensor& self, int64_t k, int64_t dim, bool largest, bool sorted,
               Tensor& values, Tensor& indices) {
  ET_CHECK_OK(linalg::check_dtype(ctx, values, self.dtype(), "values"));
  ET_CHECK_OK(check_indices_out(ctx, indices, "indices"));
  Rows r;
  ET_CHECK_OK(rows_along(ctx, self, dim, &r));
  if (k < 0 || k > r.n) {
    return ctx.fail(ErrorCode::InvalidArgument,
                    "k %lld is out of range for dim %lld of self %s (expected 0 <= k <= %lld)",
                    static_cast<long long>(k), static_cast<long long>(r.dim), Described(self).text,
                    static_cast<long long>(r.n));
  }
  int64_t sizes[kMaxDims];
  for (int32_t d = 0; d < self.dim(); ++d) sizes[d] = d == r.dim ? k : self.size(d);
  ET_CHECK_OK(kutil::resize_out(ctx, values, sizes, self.dim(), "values"));
  ET_CHECK_OK(kutil::resize_out(ctx, indices, sizes, self.dim(), "indices"));
  if (values.numel() == 0) return Error::ok();
  Error err;
  ET_CHECK_OK(dispatch_self(ctx, self, false, [&](auto tag) {
    err = select_rows<decltype(tag)>(ctx, self, r, k, largest, sorted, values, indices);
  }));
  return err;
}

}  // namespace portable
}  // namespace etmlir
