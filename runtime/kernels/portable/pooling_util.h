// Helpers shared by the spatial kernel families (pooling.cpp,
// convolution.cpp, upsample.cpp): N-d window geometry (PyTorch's pooling
// output-size rule, the output columns a kernel tap reaches), reading
// per-dimension parameter lists, the leading "planes" of an N-C-spatial
// tensor, and dtype checks against a kernel's dtype list.
//
// Every spatial kernel views its data as `planes` independent contiguous
// volumes of up to 3 spatial dims (D, H, W), lower-rank cases padded with
// leading 1s, so one loop nest serves 1-d, 2-d and 3-d ops.
// Header-only, no allocation, no exceptions.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "kernel_util.h"
#include "kernel_util_linalg.h"

namespace etmlir {
namespace spatial {

using linalg::Described;
using linalg::kMaxSize;

// The type a storage type computes in: float for float16/bfloat16, itself otherwise.
template <typename S>
using Compute = std::conditional_t<kutil::is_half_v<S>, float, S>;

// Whether `dtype` is one of `allowed`.
inline bool dtype_in(ScalarType dtype, std::initializer_list<ScalarType> allowed) {
  for (ScalarType t : allowed) {
    if (t == dtype) return true;
  }
  return false;
}

// "self has dtype int32; this kernel supports float32, float64" unless `t`'s dtype is allowed.
inline Error check_dtype(KernelContext& ctx, const Tensor& t, const char* name,
                         std::initializer_list<ScalarType> allowed, const char* allowed_text) {
  if (dtype_in(t.dtype(), allowed)) return Error::ok();
  return ctx.fail(ErrorCode::InvalidArgument, "%s has dtype %s; this kernel supports %s", name, dtype_name(t.dtype()),
                  allowed_text);
}

// `t` must have `want`'s dtype ("out must have the input's dtype float32, got float64[2, 3]").
inline Error check_same_dtype(KernelContext& ctx, const Tensor& t, const char* name, ScalarType want,
                              const char* want_name = "input") {
  if (t.dtype() == want) return Error::ok();
  return ctx.fail(ErrorCode::InvalidArgument, "%s must have the %s's dtype %s, got %s", name, want_name,
                  dtype_name(want), Described(t).text);
}

// A per-dimension parameter list (kernel_size, stride, padding, dilation):
// `n` values, or one value for every dim; an empty list takes `fallback`
// (stride's default is the kernel size) when given. Values must lie in
// [min_value, kMaxSize].
inline Error read_dims(KernelContext& ctx, Span<const int64_t> v, int n, const char* name, int64_t min_value,
                       int64_t* values, const int64_t* fallback = nullptr) {
  if (v.empty() && fallback != nullptr) {
    for (int d = 0; d < n; ++d) values[d] = fallback[d];
    return Error::ok();
  }
  if (v.size() != 1 && v.size() != static_cast<size_t>(n)) {
    return ctx.fail(ErrorCode::InvalidArgument, "%s must have %d values (one per spatial dim)%s, got %zu", name, n,
                    n > 1 ? " or a single value" : "", v.size());
  }
  for (int d = 0; d < n; ++d) {
    const int64_t x = v[v.size() == 1 ? 0 : static_cast<size_t>(d)];
    if (x < min_value || x > kMaxSize) {
      return ctx.fail(ErrorCode::InvalidArgument, "%s[%d] is %lld; it must be >= %lld", name, d,
                      static_cast<long long>(x), static_cast<long long>(min_value));
    }
    values[d] = x;
  }
  return Error::ok();
}

// Floor division for a positive divisor (ATen's div_rtn).
inline int64_t floor_div(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

// ATen's pooling_output_shape: windows of `kernel` taps `dilation` apart,
// `stride` apart, over the input padded by `pad` on both sides; with
// ceil_mode a last partial window counts if it starts inside input + left pad.
inline int64_t pooling_output_size(int64_t in, int64_t kernel, int64_t pad, int64_t stride, int64_t dilation,
                                   bool ceil_mode) {
  int64_t out = floor_div(in + 2 * pad - dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0), stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

// Output positions o in [0, n_out) whose source o * stride + offset lies in
// [0, n_in): the range [*lo, *hi) (empty when *lo == *hi).
inline void valid_range(int64_t n_in, int64_t n_out, int64_t stride, int64_t offset, int64_t* lo, int64_t* hi) {
  int64_t first = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  const int64_t last = n_in - 1 - offset;  // largest o * stride allowed
  int64_t end = last < 0 ? 0 : last / stride + 1;
  if (end > n_out) end = n_out;
  if (first > n_out) first = n_out;
  *lo = first;
  *hi = end < first ? first : end;
}

// An N-C-spatial tensor seen as `planes` contiguous volumes of (d, h, w):
// `spatial` (1-3) trailing dims, after one (unbatched) or two (batched)
// leading dims.
struct Volumes {
  int32_t lead = 0;    // leading dims: rank - spatial
  int64_t planes = 1;  // product of the leading dims
  int64_t size[3] = {1, 1, 1};
  int64_t volume() const { return size[0] * size[1] * size[2]; }
};

// Reads `t` as Volumes; `t` must have rank spatial + 1 or spatial + 2 and no empty spatial dim.
inline Error read_volumes(KernelContext& ctx, const Tensor& t, int spatial, const char* name, Volumes* v) {
  ET_CHECK_OK(linalg::check_sane(ctx, t, name));
  if (t.dim() != spatial + 1 && t.dim() != spatial + 2) {
    return ctx.fail(ErrorCode::InvalidArgument, "%s must be %d-D (C, %s) or %d-D (N, C, %s), got %s", name,
                    spatial + 1, spatial == 1 ? "L" : spatial == 2 ? "H, W" : "D, H, W", spatial + 2,
                    spatial == 1 ? "L" : spatial == 2 ? "H, W" : "D, H, W", Described(t).text);
  }
  v->lead = t.dim() - spatial;
  v->planes = 1;
  for (int32_t d = 0; d < v->lead; ++d) v->planes *= t.size(d);
  for (int d = 0; d < 3; ++d) v->size[d] = 1;
  for (int d = 0; d < spatial; ++d) {
    v->size[3 - spatial + d] = t.size(v->lead + d);
    if (v->size[3 - spatial + d] == 0) {
      return ctx.fail(ErrorCode::InvalidArgument, "%s %s has an empty spatial dim %d", name, Described(t).text,
                      v->lead + d);
    }
  }
  return Error::ok();
}

// Resizes `out` to `in`'s leading dims followed by the `spatial` trailing
// entries of out_size[3] (checking the element count fits).
inline Error resize_volumes(KernelContext& ctx, Tensor& out, const Tensor& in, int spatial, const int64_t* out_size,
                            const char* name = "out") {
  int64_t sizes[5];
  const int32_t lead = in.dim() - spatial;
  for (int32_t d = 0; d < lead; ++d) sizes[d] = in.size(d);
  for (int d = 0; d < spatial; ++d) sizes[lead + d] = out_size[3 - spatial + d];
  int64_t numel = 0;
  if (!kutil::checked_numel(sizes, lead + spatial, &numel)) {
    return ctx.fail(ErrorCode::InvalidArgument, "the %s size of input %s is too large", name, Described(in).text);
  }
  return kutil::resize_out(ctx, out, sizes, lead + spatial, name);
}

// Spreads `n` per-dim values into the trailing entries of a 3-dim array
// whose leading entries are `pad_value`.
inline void to3(const int64_t* v, int n, int64_t pad_value, int64_t out[3]) {
  for (int d = 0; d < 3; ++d) out[d] = d < 3 - n ? pad_value : v[d - (3 - n)];
}

}  // namespace spatial
}  // namespace etmlir
