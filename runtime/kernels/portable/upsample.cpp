// aten::upsample_bilinear2d.vec_out on NCHW float32/float64, with torch's
// CPU numerics: source coordinates and weights computed in the input's
// precision (area_pixel_compute_scale / area_pixel_compute_source_index in
// ATen/native/UpSample.h), user scale factors used as given when present.
#include <cmath>

#include "kernel_util_linalg.h"
#include "portable_kernels.h"

namespace etmlir {
namespace {

using linalg::Described;

// Where output index `o` samples along one axis: two input indices and
// their weights.
template <typename T>
struct Tap {
  int64_t i0, i1;
  T l0, l1;
};

template <typename T>
struct Axis {
  int64_t in, out;
  bool align_corners;
  bool has_scale;
  double scale_factor;  // the user's, when has_scale
  T ratio;

  void init() {
    if (align_corners) {
      ratio = out > 1 ? static_cast<T>(in - 1) / static_cast<T>(out - 1) : T(0);
    } else if (has_scale && scale_factor > 0.0) {
      ratio = static_cast<T>(1.0 / scale_factor);
    } else {
      ratio = static_cast<T>(in) / static_cast<T>(out);
    }
  }

  Tap<T> tap(int64_t o) const {
    if (in == out) return {o, o, T(1), T(0)};
    T real = align_corners ? ratio * static_cast<T>(o) : ratio * (static_cast<T>(o) + T(0.5)) - T(0.5);
    if (!align_corners && real < T(0)) real = T(0);
    int64_t i0 = static_cast<int64_t>(std::floor(real));
    if (i0 > in - 1) i0 = in - 1;
    T l1 = real - static_cast<T>(i0);
    if (l1 < T(0)) l1 = T(0);
    if (l1 > T(1)) l1 = T(1);
    const int64_t i1 = i0 + (i0 < in - 1 ? 1 : 0);
    return {i0, i1, T(1) - l1, l1};
  }
};

// aten::upsample_bilinear2d.vec_out(Tensor input, SymInt[]? output_size, bool align_corners,
//   float[]? scale_factors, *, Tensor(a!) out)
Error upsample_bilinear2d_vec_out(KernelContext& ctx, EValue** args) {
  const Tensor& input = args[0]->to_tensor();
  const EValue& output_size = *args[1];
  const bool align_corners = args[2]->to_bool();
  const EValue& scales = *args[3];
  Tensor& out = args[4]->to_tensor();
  ET_CHECK_OK(linalg::check_sane(ctx, input, "input"));
  if (input.dim() != 4) {
    return ctx.fail(ErrorCode::InvalidArgument, "input must be 4-D (N, C, H, W), got %s", Described(input).text);
  }
  if (input.dtype() != ScalarType::Float && input.dtype() != ScalarType::Double) {
    return linalg::unsupported_dtype(ctx, input, "input");
  }
  ET_CHECK_OK(linalg::check_dtype(ctx, out, input.dtype(), "out"));
  const bool has_size = !output_size.is_none();
  const bool has_scales = !scales.is_none();
  if (has_size == has_scales) {
    return ctx.fail(ErrorCode::InvalidArgument, "give exactly one of output_size and scale_factors");
  }
  const int64_t in_h = input.size(2);
  const int64_t in_w = input.size(3);
  int64_t out_h = 0, out_w = 0;
  double scale_h = 0.0, scale_w = 0.0;
  if (has_size) {
    Span<const int64_t> size = output_size.to_int_list();
    if (size.size() != 2) {
      return ctx.fail(ErrorCode::InvalidArgument, "output_size must have 2 values (H, W), got %zu", size.size());
    }
    out_h = size[0];
    out_w = size[1];
  } else {
    Span<const double> factors = scales.to_double_list();
    if (factors.size() != 2) {
      return ctx.fail(ErrorCode::InvalidArgument, "scale_factors must have 2 values (H, W), got %zu",
                      factors.size());
    }
    scale_h = factors[0];
    scale_w = factors[1];
    const double limit = static_cast<double>(linalg::kMaxSize);
    const double h = static_cast<double>(in_h) * scale_h;
    const double w = static_cast<double>(in_w) * scale_w;
    if (!(h >= 0.0 && h <= limit && w >= 0.0 && w <= limit)) {
      return ctx.fail(ErrorCode::InvalidArgument, "scale_factors [%g, %g] give an impossible output size for %s",
                      scale_h, scale_w, Described(input).text);
    }
    out_h = static_cast<int64_t>(h);  // torch truncates
    out_w = static_cast<int64_t>(w);
  }
  if (out_h <= 0 || out_w <= 0 || out_h > linalg::kMaxSize || out_w > linalg::kMaxSize || in_h <= 0 || in_w <= 0) {
    return ctx.fail(ErrorCode::InvalidArgument,
                    "input and output sizes must be greater than 0: input %s, output (%lld, %lld)",
                    Described(input).text, static_cast<long long>(out_h), static_cast<long long>(out_w));
  }
  const int64_t sizes[4] = {input.size(0), input.size(1), out_h, out_w};
  ET_CHECK_OK(linalg::resize(ctx, out, sizes, 4, "out"));
  if (out.numel() == 0) return Error::ok();

  const int64_t planes = input.size(0) * input.size(1);
  linalg::dispatch_floating(input.dtype(), [&](auto zero) {
    using T = decltype(zero);
    Axis<T> ay{in_h, out_h, align_corners, has_scales, scale_h, T(0)};
    Axis<T> ax{in_w, out_w, align_corners, has_scales, scale_w, T(0)};
    ay.init();
    ax.init();
    const T* x = input.data_as<const T>();
    T* y = out.data_as<T>();
    for (int64_t p = 0; p < planes; ++p) {
      const T* src = x + p * in_h * in_w;
      T* dst = y + p * out_h * out_w;
      for (int64_t oy = 0; oy < out_h; ++oy) {
        const Tap<T> ty = ay.tap(oy);
        const T* r0 = src + ty.i0 * in_w;
        const T* r1 = src + ty.i1 * in_w;
        T* orow = dst + oy * out_w;
        for (int64_t ox = 0; ox < out_w; ++ox) {
          const Tap<T> tx = ax.tap(ox);
          orow[ox] = ty.l0 * (tx.l0 * r0[tx.i0] + tx.l1 * r0[tx.i1]) + ty.l1 * (tx.l0 * r1[tx.i0] + tx.l1 * r1[tx.i1]);
        }
      }
    }
  });
  return Error::ok();
}

}  // namespace

Error register_upsample_kernels(KernelRegistry& r) {
  ET_REGISTER_KERNEL(r, "aten::upsample_bilinear2d.vec_out", "TMbG|T", upsample_bilinear2d_vec_out);
  return Error::ok();
}

}  // namespace etmlir
