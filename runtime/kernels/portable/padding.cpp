// Padding kernels: constant padding of the last dims (constant_pad_nd;
// negative pads crop, like PyTorch), and reflection (1d/2d/3d) and
// replication (2d/3d) padding of the last 1-3 dims.
//
// All of them move raw elements keyed on element size and work one output
// row (last dim) at a time: a row is a fill or an edge pattern, a memcpy of
// the input row's middle, and another fill or edge pattern.
#include <cstring>

#include "copy_util.h"
#include "generated/padding.h"
#include "kernel_util.h"

namespace etmlir {
namespace {

// ---------------------------------------------------------------------------
// constant_pad_nd
// ---------------------------------------------------------------------------

// One dim of a constant pad: out index o reads input index o - out_start +
// in_start for o in [out_start, out_start + copy), and is the fill value elsewhere.
struct ConstantDim {
  int64_t in_size;
  int64_t out_size;
  int64_t in_stride;  // elements
  int64_t out_start;
  int64_t in_start;
  int64_t copy;
};

template <typename W>
void constant_pad_rows(W* out, const W* in, const ConstantDim* dims, int32_t n, W value) {
  const ConstantDim& row = dims[n - 1];
  int64_t rows = 1;
  for (int32_t d = 0; d + 1 < n; ++d) rows *= dims[d].out_size;
  int64_t idx[kMaxDims] = {0};
  int64_t outside = 0;  // outer dims whose index lies in the padding
  for (int32_t d = 0; d + 1 < n; ++d) outside += dims[d].out_start > 0 || dims[d].copy == 0;
  // Input row offset: dim d contributes (in_start + idx - out_start) * stride
  // while its index is inside the copied range, in_start * stride otherwise.
  int64_t in_off = 0;
  for (int32_t d = 0; d + 1 < n; ++d) in_off += dims[d].in_start * dims[d].in_stride;
  for (int64_t r = 0; r < rows; ++r) {
    W* o = out + r * row.out_size;
    if (outside == 0) {
      for (int64_t j = 0; j < row.out_start; ++j) o[j] = value;
      std::memcpy(o + row.out_start, in + in_off + row.in_start, static_cast<size_t>(row.copy) * sizeof(W));
      for (int64_t j = row.out_start + row.copy; j < row.out_size; ++j) o[j] = value;
    } else {
      for (int64_t j = 0; j < row.out_size; ++j) o[j] = value;
    }
    // Next row: update the outer index, how many dims are outside, and the input offset.
    for (int32_t d = n - 2; d >= 0; --d) {
      const ConstantDim& dim = dims[d];
      const int64_t i = idx[d];
      const bool was_in = i >= dim.out_start && i < dim.out_start + dim.copy;
      if (i + 1 < dim.out_size) {
        idx[d] = i + 1;
        const bool is_in = i + 1 >= dim.out_start && i + 1 < dim.out_start + dim.copy;
        outside += static_cast<int64_t>(was_in) - static_cast<int64_t>(is_in);
        if (was_in && is_in) in_off += dim.in_stride;
        if (was_in && !is_in) in_off -= (dim.copy - 1) * dim.in_stride;  // left the range
        break;
      }
      idx[d] = 0;
      const bool is_in = dim.out_start == 0 && dim.copy > 0;
      outside += static_cast<int64_t>(was_in) - static_cast<int64_t>(is_in);
      if (was_in) in_off -= (i - dim.out_start) * dim.in_stride;  // back to in_start
    }
  }
}

// ---------------------------------------------------------------------------
// Reflection and replication
// ---------------------------------------------------------------------------

// One padded dim of a reflection or replication pad: out index j reads input
// index src(j), PyTorch's formula (negative pads crop).
struct EdgeDim {
  int64_t in_size;
  int64_t out_size;
  int64_t pad_l;
  bool reflect;

  int64_t src(int64_t j) const {
    const int64_t i_start = pad_l < 0 ? -pad_l : 0, o_start = pad_l > 0 ? pad_l : 0;
    int64_t ip;
    if (j < pad_l) {
      ip = reflect ? 2 * pad_l - j : pad_l;
    } else if (j < in_size + pad_l) {
      ip = j;
    } else {
      ip = reflect ? 2 * (in_size + pad_l - 1) - j : in_size + pad_l - 1;
    }
    return ip - o_start + i_start;
  }
  // The three runs of out indices: [0, left) before the input, [left, right)
  // over it, [right, out_size) after it. src is affine on each.
  int64_t left() const { return pad_l < 0 ? 0 : (pad_l < out_size ? pad_l : out_size); }
  int64_t right() const {
    const int64_t r = in_size + pad_l;
    return r < left() ? left() : (r > out_size ? out_size : r);
  }
  // Whether every src(j) lies in [0, in_size) (checked at the runs' ends).
  bool in_bounds() const {
    const int64_t ends[3][2] = {{0, left()}, {left(), right()}, {right(), out_size}};
    for (const auto& run : ends) {
      if (run[0] >= run[1]) continue;
      for (int64_t j : {run[0], run[1] - 1}) {
        const int64_t i = src(j);
        if (i < 0 || i >= in_size) return false;
      }
    }
    return true;
  }
};

// How every output row of the last dim reads its input row: the three runs
// of EdgeDim, with src(j) = left_base - j (reflect) or left_base (replicate)
// on the first, middle_src + (j - left) on the second, and right_base - j or
// right_base on the third.
struct EdgeRow {
  int64_t out_size, left, right;
  int64_t left_base, middle_src, right_base;
  bool reflect;

  explicit EdgeRow(const EdgeDim& w)
      : out_size(w.out_size), left(w.left()), right(w.right()), left_base(w.src(0)), middle_src(0), right_base(0),
        reflect(w.reflect) {
    if (right > left) middle_src = w.src(left);
    if (right < out_size) right_base = w.src(right) + (reflect ? right : 0);
  }
};

// One output row of the last dim from input row `in`.
template <typename W>
void edge_row(W* o, const W* in, const EdgeRow& w) {
  if (w.reflect) {
    for (int64_t j = 0; j < w.left; ++j) o[j] = in[w.left_base - j];
  } else if (w.left > 0) {
    const W v = in[w.left_base];
    for (int64_t j = 0; j < w.left; ++j) o[j] = v;
  }
  if (w.right > w.left) std::memcpy(o + w.left, in + w.middle_src, static_cast<size_t>(w.right - w.left) * sizeof(W));
  if (w.reflect) {
    for (int64_t j = w.right; j < w.out_size; ++j) o[j] = in[w.right_base - j];
  } else if (w.right < w.out_size) {
    const W v = in[w.right_base];
    for (int64_t j = w.right; j < w.out_size; ++j) o[j] = v;
  }
}

// Pads `planes` planes of shape dims[0] x ... x dims[k-1] (k = 1..3; missing
// outer dims have size 1).
template <typename W>
void edge_pad(W* out, const W* in, int64_t planes, const EdgeDim* dims, int32_t k) {
  const EdgeDim unit{1, 1, 0, false};
  const EdgeDim& d = k == 3 ? dims[0] : unit;
  const EdgeDim& h = k >= 2 ? dims[k - 2] : unit;
  const EdgeDim& w = dims[k - 1];
  const int64_t in_plane = d.in_size * h.in_size * w.in_size;
  const int64_t out_plane = d.out_size * h.out_size * w.out_size;
  const EdgeRow row(w);
  for (int64_t p = 0; p < planes; ++p) {
    const W* x = in + p * in_plane;
    W* o = out + p * out_plane;
    for (int64_t od = 0; od < d.out_size; ++od) {
      const W* xd = x + d.src(od) * h.in_size * w.in_size;
      for (int64_t oh = 0; oh < h.out_size; ++oh) {
        edge_row(o, xd + h.src(oh) * w.in_size, row);
        o += w.out_size;
      }
    }
  }
}

template <typename F>
void dispatch_width(size_t elem_size, F&& f) {
  switch (elem_size) {
    case 1: f(uint8_t{}); break;
    case 2: f(uint16_t{}); break;
    case 4: f(uint32_t{}); break;
    default: f(uint64_t{}); break;
  }
}

// reflection_pad{k}d / replication_pad{k}d: PyTorch's checks, then edge_pad.
Error edge_pad_op(KernelContext& ctx, const Tensor& self, Span<const int64_t> padding, int32_t k, bool reflect,
                  Tensor& out) {
  ET_CHECK_OK(kutil_copy::check_same_dtype(ctx, self, out));
  if (self.dtype() == ScalarType::Bool) {
    return kutil::unsupported_dtype(ctx, "self", self.dtype(),
                                    "float32, float64, float16, bfloat16, int64, int32, int16, int8, uint8");
  }
  if (padding.size() != static_cast<size_t>(2 * k)) {
    return ctx.fail(ErrorCode::InvalidArgument, "padding has %zu entries; expected %d", padding.size(), 2 * k);
  }
  const int32_t rank = self.dim();
  char shape[128];
  // (N, C, spatial...) with a possibly empty batch, or (C, spatial...); other dims non-empty.
  bool valid = rank == k + 1 || rank == k + 2;
  for (int32_t d = rank == k + 2 ? 1 : 0; d < rank && valid; ++d) valid = self.size(d) != 0;
  if (!valid) {
    return ctx.fail(ErrorCode::InvalidArgument,
                    "self has shape %s; expected %dD or %dD (batch mode) with non-zero dims except the batch",
                    kutil::format_shape(shape, sizeof(shape), self.sizes(), rank), k + 1, k + 2);
  }
  EdgeDim dims[3];
  int64_t sizes[kMaxDims];
  int64_t planes = 1;
  for (int32_t d = 0; d < rank - k; ++d) {
    sizes[d] = self.size(d);
    planes *= self.size(d);
  }
  bool any_positive = false;
  for (int32_t i = 0; i < k; ++i) {
    const int32_t d = rank - k + i;
    const size_t p = static_cast<size_t>(2 * (k - 1 - i));  // padding is (left, right) of the last dim first
    const int64_t in = self.size(d), pad_l = padding[p], pad_r = padding[p + 1];
    if (reflect && (pad_l >= in || pad_r >= in)) {
      return ctx.fail(ErrorCode::InvalidArgument,
                      "padding (%lld, %lld) at dim %d must be less than self's size there (self %s)",
                      static_cast<long long>(pad_l), static_cast<long long>(pad_r), d,
                      kutil::format_shape(shape, sizeof(shape), self.sizes(), rank));
    }
    int64_t size = 0;
    if (__builtin_add_overflow(in, pad_l, &size) || __builtin_add_overflow(size, pad_r, &size) || size < 0) {
      return ctx.fail(ErrorCode::InvalidArgument, "padding (%lld, %lld) gives dim %d of self %s a negative size",
                      static_cast<long long>(pad_l), static_cast<long long>(pad_r), d,
                      kutil::format_shape(shape, sizeof(shape), self.sizes(), rank));
    }
    any_positive = any_positive || size >= 1;
    sizes[d] = size;
    dims[i] = EdgeDim{in, size, pad_l, reflect};
  }
  if (!any_positive) {
    char got[128];
    return ctx.fail(ErrorCode::InvalidArgument, "self %s is too small for padding: the padded dims would be %s",
                    kutil::format_shape(shape, sizeof(shape), self.sizes(), rank),
                    kutil::format_shape(got, sizeof(got), sizes + rank - k, k));
  }
  ET_CHECK_OK(kutil::resize_out(ctx, out, sizes, rank));
  if (out.numel() == 0) return Error::ok();
  for (int32_t i = 0; i < k; ++i) {
    if (!dims[i].in_bounds()) {  // PyTorch's checks exclude this; never read outside self
      return ctx.fail(ErrorCode::InvalidArgument, "padding reads outside self %s at dim %d",
                      kutil::format_shape(shape, sizeof(shape), self.sizes(), rank), rank - k + i);
    }
  }
  dispatch_width(self.element_size(), [&](auto tag) {
    using W = decltype(tag);
    edge_pad(out.data_as<W>(), static_cast<const W*>(self.data()), planes, dims, k);
  });
  return Error::ok();
}

}  // namespace

namespace portable {

Error constant_pad_nd_out(KernelContext& ctx, const Tensor& self, Span<const int64_t> pad, const EValue& value,
                          Tensor& out) {
  ET_CHECK_OK(kutil_copy::check_same_dtype(ctx, self, out));
  ET_CHECK_OK(kutil::check_rank(ctx, self, "self"));
  const int32_t rank = self.dim();
  if (pad.size() % 2 != 0) {
    return ctx.fail(ErrorCode::InvalidArgument, "pad has %zu entries; the length must be even", pad.size());
  }
  if (pad.size() > static_cast<size_t>(2 * rank)) {
    return ctx.fail(ErrorCode::InvalidArgument, "pad has %zu entries; self has rank %d (at most two per dim)",
                    pad.size(), rank);
  }
  const int32_t padded = static_cast<int32_t>(pad.size() / 2);
  ConstantDim dims[kMaxDims];
  int64_t sizes[kMaxDims], strides[kMaxDims];
  kutil::contiguous_strides(self.sizes(), rank, strides);
  bool any_positive = false;
  for (int32_t d = 0; d < rank; ++d) {
    const int64_t in = self.size(d);
    int64_t pad_l = 0, pad_r = 0;
    if (d >= rank - padded) {
      const size_t p = static_cast<size_t>(2 * (rank - 1 - d));  // (left, right) of the last dim first
      pad_l = pad[p];
      pad_r = pad[p + 1];
    }
    // Negative pads crop first (PyTorch narrows), then positive ones pad.
    const int64_t crop_l = pad_l < 0 ? -pad_l : 0, crop_r = pad_r < 0 ? -pad_r : 0;
    if (crop_l > in || crop_r > in - crop_l) {
      char shape[128];
      return ctx.fail(ErrorCode::InvalidArgument, "pad (%lld, %lld) crops more than the size %lld of dim %d of self %s",
                      static_cast<long long>(pad_l), static_cast<long long>(pad_r), static_cast<long long>(in), d,
                      kutil::format_shape(shape, sizeof(shape), self.sizes(), rank));
    }
    const int64_t copy = in - crop_l - crop_r;
    const int64_t add_l = pad_l > 0 ? pad_l : 0, add_r = pad_r > 0 ? pad_r : 0;
    any_positive = any_positive || add_l > 0 || add_r > 0;
    if (__builtin_add_overflow(copy, add_l, &sizes[d]) || __builtin_add_overflow(sizes[d], add_r, &sizes[d])) {
      return ctx.fail(ErrorCode::InvalidArgument, "padded size of dim %d overflows", d);
    }
    dims[d] = ConstantDim{in, sizes[d], strides[d], add_l, crop_l, copy};
  }
  // PyTorch fills (and so converts the value) only when something is padded.
  uint64_t bits = 0;
  if (any_positive) {
    ET_CHECK_OK(kutil_copy::check_scalar_fits(ctx, value, out.dtype(), "value"));
    kutil_copy::scalar_bits(value, out.dtype(), &bits);
  }
  ET_CHECK_OK(kutil::resize_out(ctx, out, sizes, rank));
  if (out.numel() == 0) return Error::ok();
  if (rank == 0) {
    std::memcpy(out.mutable_data(), self.data(), self.element_size());
    return Error::ok();
  }
  // Fold each unpadded inner dim into the dim outside it, so rows are long:
  // a dim that is copied whole is contiguous in both tensors.
  ConstantDim merged[kMaxDims];
  int32_t n = 0;
  for (int32_t d = 0; d < rank; ++d) {
    const ConstantDim& c = dims[d];
    const bool whole = c.out_start == 0 && c.in_start == 0 && c.copy == c.out_size && c.copy == c.in_size;
    if (n > 0 && whole) {
      ConstantDim& m = merged[n - 1];
      m.in_size *= c.in_size;
      m.out_size *= c.out_size;
      m.in_stride = c.in_stride;
      m.out_start *= c.out_size;
      m.in_start *= c.out_size;
      m.copy *= c.out_size;
    } else {
      merged[n++] = c;
    }
  }
  kutil_copy::scalar_bits(value, out.dtype(), &bits);
  dispatch_width(self.element_size(), [&](auto tag) {
    using W = decltype(tag);
    W v;
    std::memcpy(&v, &bits, sizeof(W));
    constant_pad_rows(out.data_as<W>(), static_cast<const W*>(self.data()), merged, n, v);
  });
  return Error::ok();
}

Error reflection_pad1d_out(KernelContext& ctx, const Tensor& self, Span<const int64_t> padding, Tensor& out) {
  return edge_pad_op(ctx, self, padding, 1, /*reflect=*/true, out);
}
Error reflection_pad2d_out(KernelContext& ctx, const Tensor& self, Span<const int64_t> padding, Tensor& out) {
  return edge_pad_op(ctx, self, padding, 2, /*reflect=*/true, out);
}
Error reflection_pad3d_out(KernelContext& ctx, const Tensor& self, Span<const int64_t> padding, Tensor& out) {
  return edge_pad_op(ctx, self, padding, 3, /*reflect=*/true, out);
}
Error replication_pad2d_out(KernelContext& ctx, const Tensor& self, Span<const int64_t> padding, Tensor& out) {
  return edge_pad_op(ctx, self, padding, 2, /*reflect=*/false, out);
}
Error replication_pad3d_out(KernelContext& ctx, const Tensor& self, Span<const int64_t> padding, Tensor& out) {
  return edge_pad_op(ctx, self, padding, 3, /*reflect=*/false, out);
}

}  // namespace portable
}  // namespace etmlir
