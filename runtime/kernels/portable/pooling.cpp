// Pooling kernels on N-C-spatial tensors (batched or unbatched), 1-3
// spatial dims: avg_pool1d/2d/3d, adaptive_avg_pool1d/2d/3d and
// max_pool2d/3d_with_indices.
//
// Every (n, c) plane is independent and all ranks run one 3-d loop nest
// (lower ranks have leading size-1 dims). The windowed kernels walk output
// rows: per (depth, height) output position they visit the window's input
// rows in order and, per kernel column, run one loop over the output
// columns whose tap lands inside that row (the column range comes from
// spatial::valid_range, not from per-pixel clipping), so every output
// element sees its taps in ATen's order (depth, row, column): sums, and
// which of equal maxima wins, match ATen exactly. float16/bfloat16 compute
// in float; integer averages truncate like ATen's.
#include <limits>
#include <type_traits>

#include "kernel_util.h"
#include "pooling_util.h"
#include "generated/pooling.h"

namespace etmlir {
namespace {

using spatial::Compute;
using spatial::Described;

constexpr const char* kAxisNames[3] = {"D", "H", "W"};

// One pooling problem: `planes` independent volumes in[0..2] (D, H, W)
// pooled to out[0..2] by windows of k taps, dil apart, s apart, padded by p.
struct Window {
  int spatial = 2;
  int64_t planes = 1;
  int64_t in[3] = {1, 1, 1};
  int64_t out[3] = {1, 1, 1};
  int64_t k[3] = {1, 1, 1};
  int64_t s[3] = {1, 1, 1};
  int64_t p[3] = {0, 0, 0};
  int64_t dil[3] = {1, 1, 1};
  int64_t in_volume() const { return in[0] * in[1] * in[2]; }
  int64_t out_volume() const { return out[0] * out[1] * out[2]; }
};

// Reads the window parameters of avg_pool / max_pool and computes the output
// size (ATen's pool2d_shape_check / pool3d_shape_check rules).
Error parse_window(KernelContext& ctx, const Tensor& self, int spatial, Span<const int64_t> kernel_size,
                   Span<const int64_t> stride, Span<const int64_t> padding, const Span<const int64_t>* dilation,
                   bool ceil_mode, Window* w) {
  spatial::Volumes v;
  ET_CHECK_OK(spatial::read_volumes(ctx, self, spatial, "self", &v));
  int64_t k[3], s[3], p[3], d[3] = {1, 1, 1};
  ET_CHECK_OK(spatial::read_dims(ctx, kernel_size, spatial, "kernel_size", 1, k));
  ET_CHECK_OK(spatial::read_dims(ctx, stride, spatial, "stride", 1, s, k));
  ET_CHECK_OK(spatial::read_dims(ctx, padding, spatial, "padding", 0, p));
  if (dilation != nullptr) ET_CHECK_OK(spatial::read_dims(ctx, *dilation, spatial, "dilation", 1, d));
  w->spatial = spatial;
  w->planes = v.planes;
  spatial::to3(k, spatial, 1, w->k);
  spatial::to3(s, spatial, 1, w->s);
  spatial::to3(p, spatial, 0, w->p);
  spatial::to3(d, spatial, 1, w->dil);
  int64_t taps = 1;
  for (int a = 0; a < 3; ++a) {
    w->in[a] = v.size[a];
    taps *= w->k[a];
    if (taps > spatial::kMaxSize) {
      return ctx.fail(ErrorCode::InvalidArgument, "kernel_size has more than %lld taps",
                      static_cast<long long>(spatial::kMaxSize));
    }
  }
  for (int a = 3 - spatial; a < 3; ++a) {
    const int i = a - (3 - spatial);
    if (w->p[a] > w->k[a] / 2) {
      return ctx.fail(ErrorCode::InvalidArgument,
                      "padding[%d] is %lld; it must be at most half of kernel_size[%d] (%lld)", i,
                      static_cast<long long>(w->p[a]), i, static_cast<long long>(w->k[a]));
    }
    w->out[a] = spatial::pooling_output_size(w->in[a], w->k[a], w->p[a], w->s[a], w->dil[a], ceil_mode);
    if (w->out[a] < 1) {
      return ctx.fail(ErrorCode::InvalidArgument,
                      "input %s is too small: kernel_size %lld (dilation %lld, padding %lld) along %s gives an "
                      "output size of %lld",
                      Described(self).text, static_cast<long long>(w->k[a]), static_cast<long long>(w->dil[a]),
                      static_cast<long long>(w->p[a]), kAxisNames[a], static_cast<long long>(w->out[a]));
    }
  }
  return Error::ok();
}

// Half-open window [lo, hi) of output position o along one axis, before and after clipping to the input.
struct Span1 {
  int64_t lo, hi;
};

// ---------------------------------------------------------------------------
// avg_pool
// ---------------------------------------------------------------------------

// sum / divisor as ATen computes it: in the compute type, integers
// truncating (and wrapping for the one overflowing case, min / -1).
template <typename C>
inline C average(C sum, int64_t divisor) {
  if constexpr (std::is_integral_v<C>) {
    return divisor == -1 ? kutil::wrap_sub(C(0), sum) : static_cast<C>(sum / divisor);
  } else {
    return static_cast<C>(sum / static_cast<C>(divisor));
  }
}

// ATen's cpu_avg_pool: window [o*s - p, min(o*s - p + k, in + p)), the pool
// size counted before clipping to the input (count_include_pad) or after;
// a window with no input element gives 0.
template <typename S>
Error avg_pool(KernelContext& ctx, const Window& w, bool count_include_pad, int64_t divisor, const S* x, S* y) {
  using C = Compute<S>;
  const int64_t H = w.in[1], W = w.in[2];
  const int64_t OD = w.out[0], OH = w.out[1], OW = w.out[2];
  const int64_t kW = w.k[2], sW = w.s[2], pW = w.p[2];
  C* scratch = nullptr;
  if constexpr (!std::is_same_v<C, S>) {
    scratch = static_cast<C*>(ctx.allocate_temp(sizeof(C) * static_cast<size_t>(OW)));
    if (scratch == nullptr) {
      return ctx.fail(ErrorCode::OutOfMemory, "no temp memory for a row of %lld floats",
                      static_cast<long long>(OW));
    }
  }
  // Columns whose whole window lies inside the row: pool size kW either way.
  int64_t lo0, hi0, lo1, hi1;
  spatial::valid_range(W, OW, sW, -pW, &lo0, &hi0);
  spatial::valid_range(W, OW, sW, kW - 1 - pW, &lo1, &hi1);
  const int64_t in_lo = lo0 > lo1 ? lo0 : lo1;
  int64_t in_hi = hi0 < hi1 ? hi0 : hi1;
  if (in_hi < in_lo) in_hi = in_lo;

  auto window = [&](int a, int64_t o, Span1* full, Span1* clipped) {
    const int64_t lo = o * w.s[a] - w.p[a];
    const int64_t hi = lo + w.k[a] < w.in[a] + w.p[a] ? lo + w.k[a] : w.in[a] + w.p[a];
    *full = {lo, hi};
    *clipped = {lo > 0 ? lo : 0, hi < w.in[a] ? hi : w.in[a]};
  };
  for (int64_t plane = 0; plane < w.planes; ++plane) {
    const S* xp = x + plane * w.in_volume();
    for (int64_t od = 0; od < OD; ++od) {
      Span1 fd, cd;
      window(0, od, &fd, &cd);
      for (int64_t oh = 0; oh < OH; ++oh) {
        Span1 fh, ch;
        window(1, oh, &fh, &ch);
        S* orow = y + ((plane * OD + od) * OH + oh) * OW;
        C* acc;
        if constexpr (std::is_same_v<C, S>) {
          acc = orow;
        } else {
          acc = scratch;
        }
        for (int64_t o = 0; o < OW; ++o) acc[o] = C(0);
        const int64_t rows = (cd.hi - cd.lo) * (ch.hi - ch.lo);
        if (cd.lo >= cd.hi || ch.lo >= ch.hi) {
          for (int64_t o = 0; o < OW; ++o) orow[o] = kutil::convert<S>(C(0));
          continue;
        }
        for (int64_t z = cd.lo; z < cd.hi; ++z) {
          for (int64_t r = ch.lo; r < ch.hi; ++r) {
            const S* irow = xp + (z * H + r) * W;
            for (int64_t kw = 0; kw < kW; ++kw) {
              const int64_t offset = kw - pW;
              int64_t lo, hi;
              spatial::valid_range(W, OW, sW, offset, &lo, &hi);
              if (sW == 1) {
                for (int64_t o = lo; o < hi; ++o) {
                  acc[o] = kutil::wrap_add(acc[o], kutil::convert<C>(irow[o + offset]));
                }
              } else {
                for (int64_t o = lo; o < hi; ++o) {
                  acc[o] = kutil::wrap_add(acc[o], kutil::convert<C>(irow[o * sW + offset]));
                }
              }
            }
          }
        }
        const int64_t rows_pool = (fd.hi - fd.lo) * (fh.hi - fh.lo);
        auto factor = [&](int64_t o) {
          Span1 fw, cw;
          window(2, o, &fw, &cw);
          if (cw.lo >= cw.hi) return int64_t{0};
          if (divisor != 0) return divisor;
          return count_include_pad ? rows_pool * (fw.hi - fw.lo) : rows * (cw.hi - cw.lo);
        };
        auto put = [&](int64_t o, int64_t f) { orow[o] = kutil::convert<S>(f == 0 ? C(0) : average(acc[o], f)); };
        for (int64_t o = 0; o < in_lo; ++o) put(o, factor(o));
        if (in_lo < in_hi) {
          const int64_t f = divisor != 0 ? divisor : (count_include_pad ? rows_pool : rows) * kW;
          if constexpr (std::is_integral_v<C>) {
            for (int64_t o = in_lo; o < in_hi; ++o) orow[o] = kutil::convert<S>(average(acc[o], f));
          } else {
            const C cf = static_cast<C>(f);
            for (int64_t o = in_lo; o < in_hi; ++o) orow[o] = kutil::convert<S>(static_cast<C>(acc[o] / cf));
          }
        }
        for (int64_t o = in_hi; o < OW; ++o) put(o, factor(o));
      }
    }
  }
  return Error::ok();
}

Error avg_pool_nd(KernelContext& ctx, int spatial, const Tensor& self, Span<const int64_t> kernel_size,
                  Span<const int64_t> stride, Span<const int64_t> padding, bool ceil_mode, bool count_include_pad,
                  std::optional<int64_t> divisor_override, Tensor& out) {
  if (spatial == 3) {
    ET_CHECK_OK(spatial::check_dtype(ctx, self, "self",
                                     {ScalarType::Float, ScalarType::Double, ScalarType::Int64},
                                     "float32, float64, int64"));
  } else {
    ET_CHECK_OK(spatial::check_dtype(
        ctx, self, "self",
        {ScalarType::Float, ScalarType::Double, ScalarType::Half, ScalarType::BFloat16, ScalarType::Int64},
        "float32, float64, float16, bfloat16, int64"));
  }
  ET_CHECK_OK(spatial::check_same_dtype(ctx, out, "out", self.dtype(), "self"));
  if (divisor_override.has_value() && *divisor_override == 0) {
    return ctx.fail(ErrorCode::InvalidArgument, "divisor_override must not be zero");
  }
  Window w;
  ET_CHECK_OK(parse_window(ctx, self, spatial, kernel_size, stride, padding, nullptr, ceil_mode, &w));
  if (spatial == 3 && (w.in[0] < w.k[0] || w.in[1] < w.k[1] || w.in[2] < w.k[2])) {  // ATen's avg_pool3d check
    return ctx.fail(ErrorCode::InvalidArgument, "input %s is smaller than kernel_size [%lld, %lld, %lld]",
                    Described(self).text, static_cast<long long>(w.k[0]), static_cast<long long>(w.k[1]),
                    static_cast<long long>(w.k[2]));
  }
  ET_CHECK_OK(spatial::resize_volumes(ctx, out, self, spatial, w.out));
  if (out.numel() == 0) return Error::ok();
  const int64_t divisor = divisor_override.has_value() ? *divisor_override : 0;
  Error err;
  kutil::dispatch_storage(self.dtype(), [&](auto tag) {
    using S = decltype(tag);
    if constexpr (std::is_same_v<S, bool>) {
      return;  // rejected above
    } else {
      err = avg_pool<S>(ctx, w, count_include_pad, divisor, self.data_as<const S>(), out.data_as<S>());
    }
  });
  return err;
}

// ---------------------------------------------------------------------------
// adaptive_avg_pool
// ---------------------------------------------------------------------------

// ATen's adaptive windows: [floor(o * in / out), ceil((o + 1) * in / out)).
inline int64_t adaptive_start(int64_t o, int64_t out, int64_t in) { return (o * in) / out; }
inline int64_t adaptive_end(int64_t o, int64_t out, int64_t in) { return ((o + 1) * in + out - 1) / out; }

// out = sum / kd / kh / kw, summed in (depth, row, column) order, as ATen's
// cpu_adaptive_avg_pool. Column windows are computed once per chunk of
// output columns, not per row.
template <typename S>
void adaptive_avg_pool(const Window& w, const S* x, S* y) {
  using C = Compute<S>;
  const int64_t D = w.in[0], H = w.in[1], W = w.in[2];
  const int64_t OD = w.out[0], OH = w.out[1], OW = w.out[2];
  constexpr int64_t kChunk = 256;
  int64_t xs[kChunk], xe[kChunk];
  for (int64_t c0 = 0; c0 < OW; c0 += kChunk) {
    const int64_t n = OW - c0 < kChunk ? OW - c0 : kChunk;
    for (int64_t i = 0; i < n; ++i) {
      xs[i] = adaptive_start(c0 + i, OW, W);
      xe[i] = adaptive_end(c0 + i, OW, W);
    }
    for (int64_t plane = 0; plane < w.planes; ++plane) {
      const S* xp = x + plane * w.in_volume();
      for (int64_t od = 0; od < OD; ++od) {
        const int64_t z0 = adaptive_start(od, OD, D), z1 = adaptive_end(od, OD, D);
        for (int64_t oh = 0; oh < OH; ++oh) {
          const int64_t r0 = adaptive_start(oh, OH, H), r1 = adaptive_end(oh, OH, H);
          S* orow = y + ((plane * OD + od) * OH + oh) * OW + c0;
          const C kd = static_cast<C>(z1 - z0), kh = static_cast<C>(r1 - r0);
          for (int64_t i = 0; i < n; ++i) {
            C sum = 0;
            for (int64_t z = z0; z < z1; ++z) {
              for (int64_t r = r0; r < r1; ++r) {
                const S* irow = xp + (z * H + r) * W;
                for (int64_t c = xs[i]; c < xe[i]; ++c) sum += kutil::convert<C>(irow[c]);
              }
            }
            orow[i] = kutil::convert<S>(static_cast<C>(sum / kd / kh / static_cast<C>(xe[i] - xs[i])));
          }
        }
      }
    }
  }
}

Error adaptive_avg_pool_nd(KernelContext& ctx, int spatial, const Tensor& self, Span<const int64_t> output_size,
                           Tensor& out) {
  ET_CHECK_OK(spatial::check_dtype(ctx, self, "self",
                                   {ScalarType::Float, ScalarType::Double, ScalarType::Half, ScalarType::BFloat16},
                                   "float32, float64, float16, bfloat16"));
  ET_CHECK_OK(spatial::check_same_dtype(ctx, out, "out", self.dtype(), "self"));
  spatial::Volumes v;
  ET_CHECK_OK(spatial::read_volumes(ctx, self, spatial, "self", &v));
  if (output_size.size() != static_cast<size_t>(spatial)) {
    return ctx.fail(ErrorCode::InvalidArgument, "output_size must have %d values, got %zu", spatial,
                    output_size.size());
  }
  Window w;
  w.spatial = spatial;
  w.planes = v.planes;
  int64_t osize[3];
  for (int d = 0; d < spatial; ++d) {
    osize[d] = output_size[static_cast<size_t>(d)];
    if (osize[d] < 0 || osize[d] > spatial::kMaxSize) {
      return ctx.fail(ErrorCode::InvalidArgument, "output_size[%d] is %lld; it must be >= 0", d,
                      static_cast<long long>(osize[d]));
    }
  }
  spatial::to3(osize, spatial, 1, w.out);
  for (int a = 0; a < 3; ++a) w.in[a] = v.size[a];
  ET_CHECK_OK(spatial::resize_volumes(ctx, out, self, spatial, w.out));
  if (out.numel() == 0) return Error::ok();
  kutil::dispatch_storage(self.dtype(), [&](auto tag) {
    using S = decltype(tag);
    if constexpr (std::is_floating_point_v<S> || kutil::is_half_v<S>) {
      adaptive_avg_pool<S>(w, self.data_as<const S>(), out.data_as<S>());
    }
  });
  return Error::ok();
}

// ---------------------------------------------------------------------------
// max_pool_with_indices
// ---------------------------------------------------------------------------

template <typename C>
inline bool is_nan(C v) {
  if constexpr (std::is_floating_point_v<C>) {
    return v != v;
  } else {
    return false;
  }
}

// c ? a : b on the bits, so that GCC neither branches on c (unpredictable
// for pooling) nor sinks the stores behind a branch.
template <typename T>
inline T select_bits(bool c, T a, T b) {
  using U = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;
  static_assert(sizeof(T) == sizeof(U), "select_bits takes 4- or 8-byte values");
  const U m = U(0) - static_cast<U>(c);
  return __builtin_bit_cast(T, static_cast<U>((__builtin_bit_cast(U, a) & m) | (__builtin_bit_cast(U, b) & ~m)));
}

// First tap of a dilated window starting at `lo` that is >= 0 (ATen: while (lo < 0) lo += dilation).
inline int64_t first_tap(int64_t lo, int64_t dilation) {
  return lo >= 0 ? lo : lo + ((-lo + dilation - 1) / dilation) * dilation;
}

// The type max pooling compares in (ints narrower than 32 bits widen, half
// types compare as float: both exact), and the type positions are tracked in
// while running (int32 when the plane allows, the compare type's width
// otherwise, so that GCC vectorizes the select over a row).
template <typename S>
using MaxCompute = std::conditional_t<kutil::is_half_v<S> || std::is_same_v<S, float>, float,
                                      std::conditional_t<(sizeof(S) < 4), int32_t, S>>;

// ATen's cpu_max_pool: the window's taps in (depth, row, column) order, a
// tap replacing the maximum when greater or NaN (so the last NaN wins);
// indices are flat offsets into the input plane. Each output row is done in
// chunks of columns whose running maxima and positions stay on the stack;
// per input row and kernel column one branch-free loop updates every column
// that tap reaches.
template <typename S, typename P>
void max_pool(const Window& w, const S* x, S* y, int64_t* indices) {
  using C = MaxCompute<S>;
  constexpr int64_t kChunk = 256;
  const int64_t H = w.in[1], W = w.in[2];
  const int64_t OD = w.out[0], OH = w.out[1], OW = w.out[2];
  const int64_t kW = w.k[2], sW = w.s[2], pW = w.p[2], dW = w.dil[2];
  C init;
  if constexpr (std::is_floating_point_v<C>) {
    init = -std::numeric_limits<C>::infinity();
  } else {
    init = static_cast<C>(std::numeric_limits<S>::lowest());
  }
  C m[kChunk];
  P at[kChunk];
  auto range = [&](int a, int64_t o, int64_t* lo, int64_t* hi) {
    const int64_t start = o * w.s[a] - w.p[a];
    const int64_t end = start + (w.k[a] - 1) * w.dil[a] + 1;
    *hi = end < w.in[a] ? end : w.in[a];
    *lo = first_tap(start, w.dil[a]);
  };
  for (int64_t plane = 0; plane < w.planes; ++plane) {
    const S* xp = x + plane * w.in_volume();
    for (int64_t od = 0; od < OD; ++od) {
      int64_t z0, z1;
      range(0, od, &z0, &z1);
      for (int64_t oh = 0; oh < OH; ++oh) {
        int64_t r0, r1;
        range(1, oh, &r0, &r1);
        const int64_t row_offset = ((plane * OD + od) * OH + oh) * OW;
        const int64_t first = (z0 * H + r0) * W;
        for (int64_t c0 = 0; c0 < OW; c0 += kChunk) {
          const int64_t n = OW - c0 < kChunk ? OW - c0 : kChunk;
          for (int64_t i = 0; i < n; ++i) {
            m[i] = init;
            at[i] = static_cast<P>(first + first_tap((c0 + i) * sW - pW, dW));
          }
          for (int64_t z = z0; z < z1; z += w.dil[0]) {
            for (int64_t r = r0; r < r1; r += w.dil[1]) {
              const int64_t base = (z * H + r) * W;
              const S* irow = xp + base;
              for (int64_t kw = 0; kw < kW; ++kw) {
                const int64_t offset = kw * dW - pW;
                int64_t lo, hi;
                spatial::valid_range(W, OW, sW, offset, &lo, &hi);
                lo = lo > c0 ? lo - c0 : 0;
                hi = hi < c0 + n ? hi - c0 : n;
                // Tap of chunk column i: input column (c0 + i) * sW + offset.
                const S* src = irow + c0 * sW + offset;
                const P pos0 = static_cast<P>(base + c0 * sW + offset);
                if (sW == 1) {
                  for (int64_t i = lo; i < hi; ++i) {
                    const C v = kutil::convert<C>(src[i]);
                    const bool take = (v > m[i]) | is_nan(v);
                    m[i] = select_bits(take, v, m[i]);
                    at[i] = select_bits(take, static_cast<P>(pos0 + static_cast<P>(i)), at[i]);
                  }
                } else {
                  for (int64_t i = lo; i < hi; ++i) {
                    const C v = kutil::convert<C>(src[i * sW]);
                    const bool take = (v > m[i]) | is_nan(v);
                    m[i] = select_bits(take, v, m[i]);
                    at[i] = select_bits(take, static_cast<P>(pos0 + static_cast<P>(i * sW)), at[i]);
                  }
                }
              }
            }
          }
          S* orow = y + row_offset + c0;
          int64_t* irow_idx = indices + row_offset + c0;
          for (int64_t i = 0; i < n; ++i) {
            orow[i] = kutil::convert<S>(m[i]);
            irow_idx[i] = static_cast<int64_t>(at[i]);
          }
        }
      }
    }
  }
}

Error max_pool_nd(KernelContext& ctx, int spatial, const Tensor& self, Span<const int64_t> kernel_size,
                  Span<const int64_t> stride, Span<const int64_t> padding, Span<const int64_t> dilation,
                  bool ceil_mode, Tensor& out, Tensor& indices) {
  ET_CHECK_OK(spatial::check_dtype(ctx, self, "self",
                                   {ScalarType::Float, ScalarType::Double, ScalarType::Half, ScalarType::BFloat16,
                                    ScalarType::Int64, ScalarType::Int32, ScalarType::Int16, ScalarType::Int8,
                                    ScalarType::UInt8},
                                   "float32, float64, float16, bfloat16, int64, int32, int16, int8, uint8"));
  ET_CHECK_OK(spatial::check_same_dtype(ctx, out, "out", self.dtype(), "self"));
  if (indices.dtype() != ScalarType::Int64) {
    return ctx.fail(ErrorCode::InvalidArgument, "indices must be int64, got %s", Described(indices).text);
  }
  Window w;
  ET_CHECK_OK(parse_window(ctx, self, spatial, kernel_size, stride, padding, &dilation, ceil_mode, &w));
  ET_CHECK_OK(spatial::resize_volumes(ctx, out, self, spatial, w.out));
  ET_CHECK_OK(spatial::resize_volumes(ctx, indices, self, spatial, w.out, "indices"));
  if (out.numel() == 0) return Error::ok();
  // Positions fit int32 when every window start and tap of the plane does.
  const bool small = (w.in[0] + w.dil[0]) * (w.in[1] + w.dil[1]) * (w.in[2] + w.dil[2]) < (int64_t{1} << 31);
  kutil::dispatch_storage(self.dtype(), [&](auto tag) {
    using S = decltype(tag);
    if constexpr (!std::is_same_v<S, bool>) {
      using Wide = std::conditional_t<sizeof(MaxCompute<S>) == 8, int64_t, int32_t>;
      if (small) {
        max_pool<S, Wide>(w, self.data_as<const S>(), out.data_as<S>(), indices.data_as<int64_t>());
      } else {
        max_pool<S, int64_t>(w, self.data_as<const S>(), out.data_as<S>(), indices.data_as<int64_t>());
      }
    }
  });
  return Error::ok();
}

}  // namespace

namespace portable {

Error avg_pool1d_out(KernelContext& ctx, const Tensor& self, Span<const int64_t> kernel_size,
                     Span<const int64_t> stride, Span<const int64_t> padding, bool ceil_mode, bool count_include_pad,
                     Tensor& out) {
  return avg_pool_nd(ctx, 1, self, kernel_size, stride, padding, ceil_mode, count_include_pad, std::nullopt, out);
}
Error avg_pool2d_out(KernelContext& ctx, const Tensor& self, Span<const int64_t> kernel_size,
                     Span<const int64_t> stride, Span<const int64_t> padding, bool ceil_mode, bool count_include_pad,
                     std::optional<int64_t> divisor_override, Tensor& out) {
  return avg_pool_nd(ctx, 2, self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, out);
}
Error avg_pool3d_out(KernelContext& ctx, const Tensor& self, Span<const int64_t> kernel_size,
                     Span<const int64_t> stride, Span<const int64_t> padding, bool ceil_mode, bool count_include_pad,
                     std::optional<int64_t> divisor_override, Tensor& out) {
  return avg_pool_nd(ctx, 3, self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, out);
}

Error adaptive_avg_pool1d_out(KernelContext& ctx, const Tensor& self, Span<const int64_t> output_size, Tensor& out) {
  return adaptive_avg_pool_nd(ctx, 1, self, output_size, out);
}
Error adaptive_avg_pool2d_out(KernelContext& ctx, const Tensor& self, Span<const int64_t> output_size, Tensor& out) {
  return adaptive_avg_pool_nd(ctx, 2, self, output_size, out);
}
Error adaptive_avg_pool3d_out(KernelContext& ctx, const Tensor& self, Span<const int64_t> output_size, Tensor& out) {
  return adaptive_avg_pool_nd(ctx, 3, self, output_size, out);
}

Error max_pool2d_with_indices_out(KernelContext& ctx, const Tensor& self, Span<const int64_t> kernel_size,
                                  Span<const int64_t> stride, Span<const int64_t> padding,
                                  Span<const int64_t> dilation, bool ceil_mode, Tensor& out, Tensor& indices) {
  return max_pool_nd(ctx, 2, self, kernel_size, stride, padding, dilation, ceil_mode, out, indices);
}
Error max_pool3d_with_indices_out(KernelContext& ctx, const Tensor& self, Span<const int64_t> kernel_size,
                                  Span<const int64_t> stride, Span<const int64_t> padding,
                                  Span<const int64_t> dilation, bool ceil_mode, Tensor& out, Tensor& indices) {
  return max_pool_nd(ctx, 3, self, kernel_size, stride, padding, dilation, ceil_mode, out, indices);
}

}  // namespace portable
}  // namespace etmlir
