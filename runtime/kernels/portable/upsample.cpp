// Resampling kernels on (N, C, H, W): upsample_bilinear2d.vec,
// upsample_nearest2d.vec and grid_sampler_2d, with PyTorch's CPU numerics
// (ATen/native/UpSample.h, GridSampler.h): source coordinates and weights
// in the compute type (float for float16/bfloat16), user scale factors used
// as given when present.
//
// Per-column work (source indices and weights) is computed once per chunk
// of output columns and reused by every plane and output row; grid_sampler
// computes each grid point's taps once and reuses them for every channel.
#include <cmath>
#include <type_traits>

#include "kernel_util.h"
#include "kernel_util_linalg.h"
#include "pooling_util.h"
#include "generated/upsample.h"

namespace etmlir {
namespace {

using linalg::Described;
using spatial::Compute;

constexpr int64_t kChunk = 256;  // output columns (or grid points) whose taps are precomputed together

// The (out_h, out_w) of an upsample_*2d.vec call and whether scale factors were given.
struct OutputSize {
  int64_t h = 0, w = 0;
  bool has_scales = false;
  double scale_h = 0.0, scale_w = 0.0;
};

Error output_size_of(KernelContext& ctx, const Tensor& input, const std::optional<Span<const int64_t>>& output_size,
                     const std::optional<Span<const double>>& scale_factors, OutputSize* o) {
  ET_CHECK_OK(linalg::check_sane(ctx, input, "input"));
  if (input.dim() != 4) {
    return ctx.fail(ErrorCode::InvalidArgument, "input must be 4-D (N, C, H, W), got %s", Described(input).text);
  }
  if (output_size.has_value() == scale_factors.has_value()) {
    return ctx.fail(ErrorCode::InvalidArgument, "give exactly one of output_size and scale_factors");
  }
  const int64_t in_h = input.size(2);
  const int64_t in_w = input.size(3);
  if (output_size.has_value()) {
    if (output_size->size() != 2) {
      return ctx.fail(ErrorCode::InvalidArgument, "output_size must have 2 values (H, W), got %zu",
                      output_size->size());
    }
    o->h = (*output_size)[0];
    o->w = (*output_size)[1];
  } else {
    if (scale_factors->size() != 2) {
      return ctx.fail(ErrorCode::InvalidArgument, "scale_factors must have 2 values (H, W), got %zu",
                      scale_factors->size());
    }
    o->has_scales = true;
    o->scale_h = (*scale_factors)[0];
    o->scale_w = (*scale_factors)[1];
    const double limit = static_cast<double>(linalg::kMaxSize);
    const double h = static_cast<double>(in_h) * o->scale_h;
    const double w = static_cast<double>(in_w) * o->scale_w;
    if (!(h >= 0.0 && h <= limit && w >= 0.0 && w <= limit)) {
      return ctx.fail(ErrorCode::InvalidArgument, "scale_factors [%g, %g] give an impossible output size for %s",
                      o->scale_h, o->scale_w, Described(input).text);
    }
    o->h = static_cast<int64_t>(h);  // torch truncates
    o->w = static_cast<int64_t>(w);
  }
  if (o->h <= 0 || o->w <= 0 || o->h > linalg::kMaxSize || o->w > linalg::kMaxSize || in_h <= 0 || in_w <= 0) {
    return ctx.fail(ErrorCode::InvalidArgument,
                    "input and output sizes must be greater than 0: input %s, output (%lld, %lld)",
                    Described(input).text, static_cast<long long>(o->h), static_cast<long long>(o->w));
  }
  return Error::ok();
}

// ---------------------------------------------------------------------------
// upsample_bilinear2d
// ---------------------------------------------------------------------------

// Where output index `o` samples along one axis: two input indices and their weights.
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

template <typename S>
void upsample_bilinear(const Tensor& input, const OutputSize& o, bool align_corners, Tensor& out) {
  using C = Compute<S>;
  const int64_t in_h = input.size(2), in_w = input.size(3);
  const int64_t planes = input.size(0) * input.size(1);
  Axis<C> ay{in_h, o.h, align_corners, o.has_scales, o.scale_h, C(0)};
  Axis<C> ax{in_w, o.w, align_corners, o.has_scales, o.scale_w, C(0)};
  ay.init();
  ax.init();
  const S* x = input.data_as<const S>();
  S* y = out.data_as<S>();
  Tap<C> tx[kChunk];
  for (int64_t c0 = 0; c0 < o.w; c0 += kChunk) {
    const int64_t n = o.w - c0 < kChunk ? o.w - c0 : kChunk;
    for (int64_t i = 0; i < n; ++i) tx[i] = ax.tap(c0 + i);
    for (int64_t p = 0; p < planes; ++p) {
      const S* src = x + p * in_h * in_w;
      S* dst = y + p * o.h * o.w + c0;
      for (int64_t oy = 0; oy < o.h; ++oy) {
        const Tap<C> ty = ay.tap(oy);
        const S* r0 = src + ty.i0 * in_w;
        const S* r1 = src + ty.i1 * in_w;
        S* orow = dst + oy * o.w;
        for (int64_t i = 0; i < n; ++i) {
          const Tap<C>& t = tx[i];
          const C top = t.l0 * kutil::convert<C>(r0[t.i0]) + t.l1 * kutil::convert<C>(r0[t.i1]);
          const C bottom = t.l0 * kutil::convert<C>(r1[t.i0]) + t.l1 * kutil::convert<C>(r1[t.i1]);
          orow[i] = kutil::convert<S>(static_cast<C>(ty.l0 * top + ty.l1 * bottom));
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// upsample_nearest2d
// ---------------------------------------------------------------------------

// ATen's nearest_idx: exact for scale 1 and 2, floor(o * scale) in float otherwise.
int64_t nearest_index(int64_t o, int64_t in, int64_t out, bool has_scale, double scale) {
  if (out == in) return o;
  if (out == 2 * in) return o >> 1;
  const float s = has_scale && scale > 0.0 ? static_cast<float>(1.0 / scale)
                                           : static_cast<float>(in) / static_cast<float>(out);
  const int64_t i = static_cast<int64_t>(std::floor(static_cast<float>(o) * s));
  return i < in - 1 ? i : in - 1;
}

// A pure gather: W is any type of the element's size.
template <typename W>
void upsample_nearest(const Tensor& input, const OutputSize& o, Tensor& out) {
  const int64_t in_h = input.size(2), in_w = input.size(3);
  const int64_t planes = input.size(0) * input.size(1);
  const W* x = static_cast<const W*>(input.data());
  W* y = static_cast<W*>(out.mutable_data());
  int64_t src[kChunk];
  for (int64_t c0 = 0; c0 < o.w; c0 += kChunk) {
    const int64_t n = o.w - c0 < kChunk ? o.w - c0 : kChunk;
    for (int64_t i = 0; i < n; ++i) src[i] = nearest_index(c0 + i, in_w, o.w, o.has_scales, o.scale_w);
    for (int64_t p = 0; p < planes; ++p) {
      for (int64_t oy = 0; oy < o.h; ++oy) {
        const W* irow = x + (p * in_h + nearest_index(oy, in_h, o.h, o.has_scales, o.scale_h)) * in_w;
        W* orow = y + (p * o.h + oy) * o.w + c0;
        for (int64_t i = 0; i < n; ++i) orow[i] = irow[src[i]];
      }
    }
  }
}

// ---------------------------------------------------------------------------
// grid_sampler_2d
// ---------------------------------------------------------------------------

enum class Interp { Bilinear = 0, Nearest = 1, Bicubic = 2 };
enum class Padding { Zeros = 0, Border = 1, Reflection = 2 };

// One axis of grid_sampler's coordinate mapping, as ATen's vectorized CPU
// kernel computes it (GridSamplerKernel.cpp ComputeLocation): [-1, 1] to
// pixels (corner pixel centers with align_corners, image edges without),
// then the padding mode. NaN clips to 0.
template <typename T>
struct GridAxis {
  int64_t size;
  Padding padding;
  bool align_corners;
  T max_val, scale, low, twice_span;

  GridAxis(int64_t n, Padding pad, bool align) : size(n), padding(pad), align_corners(align) {
    max_val = static_cast<T>(n - 1);
    scale = align ? static_cast<T>(n - 1) / 2 : static_cast<T>(n) / 2;
    low = align ? T(0) : T(-0.5);
    twice_span = align ? static_cast<T>(n - 1) * 2 : static_cast<T>(n) * 2;
  }

  T unnormalize(T x) const { return align_corners ? (x + 1) * scale : (x + 1) * scale - T(0.5); }

  T clip(T x) const {
    const T lo = x > T(0) ? x : T(0);  // NaN -> 0
    return lo < max_val ? lo : max_val;
  }

  // Reflects into [low, low + twice_span / 2]; NaN stays NaN (then clips to 0).
  T reflect(T x) const {
    if (align_corners && size <= 1) return T(0);
    const T a = std::fabs(x - low);
    const T flips = std::trunc(a / twice_span);
    const T extra = a - flips * twice_span;
    const T other = twice_span - extra;
    const T m = extra != extra ? extra : (extra < other ? extra : other);
    return m + low;
  }

  // The padding mode applied to a pixel coordinate.
  T pad(T x) const {
    if (padding == Padding::Border) return clip(x);
    if (padding == Padding::Reflection) return clip(reflect(x));
    return x;
  }
};

// x truncated toward zero as an index; non-finite or huge values map far outside any image.
template <typename T>
int64_t to_index(T x) {
  constexpr T kLimit = T(int64_t{1} << 40);
  return x > -kLimit && x < kLimit ? static_cast<int64_t>(x) : -(int64_t{1} << 41);
}

inline int64_t offset_if_inside(int64_t y, int64_t x, int64_t h, int64_t w) {
  return y >= 0 && y < h && x >= 0 && x < w ? y * w + x : -1;
}

// A grid point's taps: offsets into the input plane (-1: outside, reads 0)
// and weights. Bilinear uses at[0..3] (nw, ne, sw, se) with wx[0..3];
// nearest at[0]; bicubic at[4 * row + col] with wx (columns) and wy (rows).
template <typename T>
struct GridTaps {
  int64_t at[16];
  T wx[4], wy[4];
};

// ATen's bicubic coefficients (A = -0.75) for fractional offset t.
template <typename T>
void cubic_coefficients(T t, T c[4]) {
  const T a = T(-0.75);
  T x = t + 1;
  c[0] = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  x = t;
  c[1] = ((a + 2) * x - (a + 3)) * x * x + 1;
  x = 1 - t;
  c[2] = ((a + 2) * x - (a + 3)) * x * x + 1;
  x = 2 - t;
  c[3] = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
}

template <typename T>
void grid_taps(T gx, T gy, const GridAxis<T>& ax, const GridAxis<T>& ay, Interp interp, GridTaps<T>* t) {
  const int64_t h = ay.size, w = ax.size;
  if (interp == Interp::Bicubic) {
    const T x = ax.unnormalize(gx), y = ay.unnormalize(gy);
    const T fx = std::floor(x), fy = std::floor(y);
    cubic_coefficients(x - fx, t->wx);
    cubic_coefficients(y - fy, t->wy);
    int64_t xs[4], ys[4];
    for (int j = 0; j < 4; ++j) {
      xs[j] = to_index(ax.pad(fx + static_cast<T>(j - 1)));
      ys[j] = to_index(ay.pad(fy + static_cast<T>(j - 1)));
    }
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 4; ++j) t->at[i * 4 + j] = offset_if_inside(ys[i], xs[j], h, w);
    }
    return;
  }
  const T x = ax.pad(ax.unnormalize(gx));
  const T y = ay.pad(ay.unnormalize(gy));
  if (interp == Interp::Nearest) {
    t->at[0] = offset_if_inside(to_index(std::nearbyint(y)), to_index(std::nearbyint(x)), h, w);
    return;
  }
  const T fx = std::floor(x), fy = std::floor(y);
  const T dw = x - fx, de = 1 - dw, dn = y - fy, ds = 1 - dn;
  t->wx[0] = ds * de;
  t->wx[1] = ds * dw;
  t->wx[2] = dn * de;
  t->wx[3] = dn * dw;
  const int64_t x0 = to_index(fx), y0 = to_index(fy);
  t->at[0] = offset_if_inside(y0, x0, h, w);
  t->at[1] = offset_if_inside(y0, x0 + 1, h, w);
  t->at[2] = offset_if_inside(y0 + 1, x0, h, w);
  t->at[3] = offset_if_inside(y0 + 1, x0 + 1, h, w);
}

// Taps are computed for a block of grid points, then applied to every
// channel: the coordinate math runs once per point, not once per channel.
// Taps outside the image read 0 and are still weighted (a NaN weight gives
// NaN, as in ATen).
template <typename S, Interp kInterp>
void grid_sample(const Tensor& input, const Tensor& grid, Padding padding, bool align_corners, Tensor& out) {
  using C = Compute<S>;
  const int64_t batch = input.size(0), channels = input.size(1), h = input.size(2), w = input.size(3);
  const int64_t points = grid.size(1) * grid.size(2);
  const GridAxis<C> ax(w, padding, align_corners), ay(h, padding, align_corners);
  const S* x = input.data_as<const S>();
  const S* g = grid.data_as<const S>();
  S* y = out.data_as<S>();
  constexpr int64_t kPoints = 64;
  GridTaps<C> taps[kPoints];
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t p0 = 0; p0 < points; p0 += kPoints) {
      const int64_t np = points - p0 < kPoints ? points - p0 : kPoints;
      for (int64_t i = 0; i < np; ++i) {
        const S* gp = g + (n * points + p0 + i) * 2;
        grid_taps(kutil::convert<C>(gp[0]), kutil::convert<C>(gp[1]), ax, ay, kInterp, &taps[i]);
      }
      for (int64_t c = 0; c < channels; ++c) {
        const S* plane = x + (n * channels + c) * h * w;
        S* orow = y + (n * channels + c) * points + p0;
        auto at = [plane](int64_t offset) { return offset < 0 ? C(0) : kutil::convert<C>(plane[offset]); };
        for (int64_t i = 0; i < np; ++i) {
          const GridTaps<C>& t = taps[i];
          C v;
          if constexpr (kInterp == Interp::Nearest) {
            v = at(t.at[0]);
          } else if constexpr (kInterp == Interp::Bilinear) {
            v = at(t.at[0]) * t.wx[0] + at(t.at[1]) * t.wx[1] + at(t.at[2]) * t.wx[2] + at(t.at[3]) * t.wx[3];
          } else {
            C rows[4];
            for (int r = 0; r < 4; ++r) {
              const int64_t* a = t.at + r * 4;
              rows[r] = t.wx[0] * at(a[0]) + t.wx[1] * at(a[1]) + t.wx[2] * at(a[2]) + t.wx[3] * at(a[3]);
            }
            v = t.wy[0] * rows[0] + t.wy[1] * rows[1] + t.wy[2] * rows[2] + t.wy[3] * rows[3];
          }
          orow[i] = kutil::convert<S>(v);
        }
      }
    }
  }
}

constexpr std::initializer_list<ScalarType> kFloating = {ScalarType::Float, ScalarType::Double, ScalarType::Half,
                                                         ScalarType::BFloat16};

}  // namespace

namespace portable {

Error upsample_bilinear2d_vec_out(KernelContext& ctx, const Tensor& input,
                                  std::optional<Span<const int64_t>> output_size, bool align_corners,
                                  std::optional<Span<const double>> scale_factors, Tensor& out) {
  ET_CHECK_OK(spatial::check_dtype(ctx, input, "input", kFloating, "float32, float64, float16, bfloat16"));
  ET_CHECK_OK(spatial::check_same_dtype(ctx, out, "out", input.dtype()));
  OutputSize o;
  ET_CHECK_OK(output_size_of(ctx, input, output_size, scale_factors, &o));
  const int64_t sizes[4] = {input.size(0), input.size(1), o.h, o.w};
  ET_CHECK_OK(kutil::resize_out(ctx, out, sizes, 4));
  if (out.numel() == 0) return Error::ok();
  kutil::dispatch_storage(input.dtype(), [&](auto tag) {
    using S = decltype(tag);
    if constexpr (std::is_floating_point_v<S> || kutil::is_half_v<S>) {
      upsample_bilinear<S>(input, o, align_corners, out);
    }
  });
  return Error::ok();
}

Error upsample_nearest2d_vec_out(KernelContext& ctx, const Tensor& input,
                                 std::optional<Span<const int64_t>> output_size,
                                 std::optional<Span<const double>> scale_factors, Tensor& out) {
  ET_CHECK_OK(spatial::check_same_dtype(ctx, out, "out", input.dtype()));
  OutputSize o;
  ET_CHECK_OK(output_size_of(ctx, input, output_size, scale_factors, &o));
  const int64_t sizes[4] = {input.size(0), input.size(1), o.h, o.w};
  ET_CHECK_OK(kutil::resize_out(ctx, out, sizes, 4));
  if (out.numel() == 0) return Error::ok();
  switch (input.element_size()) {
    case 1: upsample_nearest<uint8_t>(input, o, out); break;
    case 2: upsample_nearest<uint16_t>(input, o, out); break;
    case 4: upsample_nearest<uint32_t>(input, o, out); break;
    case 8: upsample_nearest<uint64_t>(input, o, out); break;
    default: return kutil::unsupported_dtype(ctx, "input", input.dtype());
  }
  return Error::ok();
}

Error grid_sampler_2d_out(KernelContext& ctx, const Tensor& input, const Tensor& grid, int64_t interpolation_mode,
                          int64_t padding_mode, bool align_corners, Tensor& out) {
  ET_CHECK_OK(spatial::check_dtype(ctx, input, "input", kFloating, "float32, float64, float16, bfloat16"));
  ET_CHECK_OK(spatial::check_same_dtype(ctx, grid, "grid", input.dtype()));
  ET_CHECK_OK(spatial::check_same_dtype(ctx, out, "out", input.dtype()));
  ET_CHECK_OK(linalg::check_sane(ctx, input, "input"));
  ET_CHECK_OK(linalg::check_sane(ctx, grid, "grid"));
  if (input.dim() != 4 || grid.dim() != 4 || grid.size(3) != 2 || grid.size(0) != input.size(0)) {
    return ctx.fail(ErrorCode::InvalidArgument,
                    "input must be 4-D (N, C, H, W) and grid 4-D (N, H_out, W_out, 2) with the same N; got input %s "
                    "and grid %s",
                    Described(input).text, Described(grid).text);
  }
  if (input.size(2) == 0 || input.size(3) == 0) {
    return ctx.fail(ErrorCode::InvalidArgument, "input %s has an empty spatial dim", Described(input).text);
  }
  if (interpolation_mode < 0 || interpolation_mode > 2) {
    return ctx.fail(ErrorCode::InvalidArgument,
                    "interpolation_mode is %lld; expected 0 (bilinear), 1 (nearest) or 2 (bicubic)",
                    static_cast<long long>(interpolation_mode));
  }
  if (padding_mode < 0 || padding_mode > 2) {
    return ctx.fail(ErrorCode::InvalidArgument,
                    "padding_mode is %lld; expected 0 (zeros), 1 (border) or 2 (reflection)",
                    static_cast<long long>(padding_mode));
  }
  const int64_t sizes[4] = {input.size(0), input.size(1), grid.size(1), grid.size(2)};
  ET_CHECK_OK(kutil::resize_out(ctx, out, sizes, 4));
  if (out.numel() == 0) return Error::ok();
  const Interp interp = static_cast<Interp>(interpolation_mode);
  const Padding padding = static_cast<Padding>(padding_mode);
  kutil::dispatch_storage(input.dtype(), [&](auto tag) {
    using S = decltype(tag);
    if constexpr (std::is_floating_point_v<S> || kutil::is_half_v<S>) {
      switch (interp) {
        case Interp::Bilinear: grid_sample<S, Interp::Bilinear>(input, grid, padding, align_corners, out); break;
        case Interp::Nearest: grid_sample<S, Interp::Nearest>(input, grid, padding, align_corners, out); break;
        case Interp::Bicubic: grid_sample<S, Interp::Bicubic>(input, grid, padding, align_corners, out); break;
      }
    }
  });
  return Error::ok();
}

}  // namespace portable
}  // namespace etmlir
