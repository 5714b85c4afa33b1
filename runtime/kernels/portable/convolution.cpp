// aten::convolution.out: 1-d, 2-d and 3-d convolutions of (N, C, *spatial)
// inputs with stride, padding, dilation and groups, plain or transposed
// (with output_padding); and aten::col2im.out.
//
// float32 (float16/bfloat16 are converted to float32 scratch and back):
//  * plain, one input channel per group, 1-d/2-d (depthwise, any channel
//    multiplier): a direct loop, one output row at a time, one
//    vectorizable axpy per tap (3x3 stride 1/2 planes in one pass);
//  * plain, 1x1(x1), stride 1, no padding: out_g = W_g @ x_g straight on the
//    input, no copy at all;
//  * plain 3-d depthwise: the direct loops below;
//  * plain, everything else: out_g = W_g @ im2col(x_g), with the im2col
//    columns packed block by block straight into the sgemm's B panels
//    (gemm.h PackBFn), so no im2col matrix is ever materialized;
//  * transposed: cols = W_g^T @ x_g for a block of input rows at a time
//    (sgemm into temp memory), scatter-added into the output (col2im).
//    Without temp memory for one block, the direct scatter below.
// float64 and int64 (wrapping like PyTorch's) run direct loops: plain
// convolutions output-stationary (blocks of output columns summed in
// registers over every input channel and tap), transposed ones as one
// vectorizable scatter-axpy per (input row, tap).
// Bias is written first and the products accumulated onto it.
#include <cstring>
#include <type_traits>

#include "gemm.h"
#include "kernel_util.h"
#include "kernel_util_linalg.h"
#include "pooling_util.h"
#include "generated/convolution.h"

namespace etmlir {
namespace {

using linalg::Described;

// One convolution. Spatial dims are (d, h, w), leading ones 1 for 1-d/2-d.
// For transposed convolutions in/out still name the input and the output
// (the output is the larger one).
struct ConvShape {
  int spatial;
  bool transposed;
  int64_t batch, cin, cout, groups, cin_g, cout_g;
  int64_t d, h, w;     // input
  int64_t kd, kh, kw;  // weight
  int64_t sd, sh, sw, pd, ph, pw, dd, dh, dw;
  int64_t od, oh, ow;  // output
  int64_t in_plane() const { return d * h * w; }
  int64_t out_plane() const { return od * oh * ow; }
  int64_t window() const { return kd * kh * kw; }
};

// Output extent of a plain convolution along one dim, or -1 when the kernel does not fit.
int64_t out_extent(int64_t in, int64_t pad, int64_t dilation, int64_t kernel, int64_t stride) {
  const int64_t span = in + 2 * pad - dilation * (kernel - 1) - 1;
  return span < 0 ? -1 : span / stride + 1;
}

Error check_conv_dtype(KernelContext& ctx, const Tensor& t, const char* name, ScalarType want) {
  if (t.dtype() == want) return Error::ok();
  return ctx.fail(ErrorCode::InvalidArgument, "%s %s must have the input dtype %s", name, Described(t).text,
                  dtype_name(want));
}

Error parse(KernelContext& ctx, const Tensor& input, const Tensor& weight, const Tensor* bias,
            Span<const int64_t> stride_list, Span<const int64_t> padding_list, Span<const int64_t> dilation_list,
            bool transposed, Span<const int64_t> output_padding_list, int64_t groups, const Tensor& out,
            ConvShape* s) {
  ET_CHECK_OK(linalg::check_sane(ctx, input, "input"));
  ET_CHECK_OK(linalg::check_sane(ctx, weight, "weight"));
  if (input.dim() < 3 || input.dim() > 5) {
    return ctx.fail(ErrorCode::NotSupported,
                    "input must be 3-D (N, C, L), 4-D (N, C, H, W) or 5-D (N, C, D, H, W), got %s",
                    Described(input).text);
  }
  if (weight.dim() != input.dim()) {
    return ctx.fail(ErrorCode::InvalidArgument, "weight %s must have the input's rank %d", Described(weight).text,
                    input.dim());
  }
  if (!spatial::dtype_in(input.dtype(), {ScalarType::Float, ScalarType::Double, ScalarType::Half,
                                         ScalarType::BFloat16, ScalarType::Int64})) {
    return ctx.fail(ErrorCode::NotSupported,
                    "input dtype %s is not supported; this kernel supports float32, float64, float16, bfloat16, "
                    "int64",
                    dtype_name(input.dtype()));
  }
  ET_CHECK_OK(check_conv_dtype(ctx, weight, "weight", input.dtype()));
  ET_CHECK_OK(check_conv_dtype(ctx, out, "out", input.dtype()));
  const int spatial = input.dim() - 2;
  for (int32_t d = 2; d < input.dim(); ++d) {
    if (input.size(d) == 0) {
      return ctx.fail(ErrorCode::InvalidArgument,
                      "input %s has an empty spatial dim %d; only the batch and channel dims may be 0",
                      Described(input).text, d);
    }
  }
  int64_t stride[3], padding[3], dilation[3], output_padding[3] = {0, 0, 0};
  ET_CHECK_OK(spatial::read_dims(ctx, stride_list, spatial, "stride", 1, stride));
  ET_CHECK_OK(spatial::read_dims(ctx, padding_list, spatial, "padding", 0, padding));
  ET_CHECK_OK(spatial::read_dims(ctx, dilation_list, spatial, "dilation", 1, dilation));
  if (transposed) {
    ET_CHECK_OK(spatial::read_dims(ctx, output_padding_list, spatial, "output_padding", 0, output_padding));
  }
  int64_t in[3], k[3], st[3], pa[3], di[3], op[3];
  spatial::to3(input.sizes() + 2, spatial, 1, in);
  spatial::to3(weight.sizes() + 2, spatial, 1, k);
  spatial::to3(stride, spatial, 1, st);
  spatial::to3(padding, spatial, 0, pa);
  spatial::to3(dilation, spatial, 1, di);
  spatial::to3(output_padding, spatial, 0, op);

  s->spatial = spatial;
  s->transposed = transposed;
  s->batch = input.size(0);
  s->cin = input.size(1);
  if (groups < 1 || groups > linalg::kMaxSize || s->cin % groups != 0) {
    return ctx.fail(ErrorCode::InvalidArgument,
                    "groups is %lld; it must be >= 1 and divide the input channels (%lld)",
                    static_cast<long long>(groups), static_cast<long long>(s->cin));
  }
  s->groups = groups;
  s->cin_g = s->cin / groups;
  if (transposed) {
    // weight: (in channels, out channels per group, *kernel)
    if (weight.size(0) != s->cin) {
      return ctx.fail(ErrorCode::InvalidArgument,
                      "weight %s of a transposed convolution must have the input's %lld channels in dim 0 "
                      "(input %s)",
                      Described(weight).text, static_cast<long long>(s->cin), Described(input).text);
    }
    s->cout_g = weight.size(1);
    s->cout = s->cout_g * groups;
    if (s->cout > linalg::kMaxSize) {
      return ctx.fail(ErrorCode::InvalidArgument, "weight %s with groups %lld gives too many output channels",
                      Described(weight).text, static_cast<long long>(groups));
    }
  } else {
    s->cout = weight.size(0);
    if (s->cout % groups != 0) {
      return ctx.fail(ErrorCode::InvalidArgument,
                      "groups is %lld; it must be >= 1 and divide both the input channels (%lld) and the output "
                      "channels (%lld)",
                      static_cast<long long>(groups), static_cast<long long>(s->cin),
                      static_cast<long long>(s->cout));
    }
    s->cout_g = s->cout / groups;
    if (weight.size(1) != s->cin_g) {
      return ctx.fail(ErrorCode::InvalidArgument,
                      "weight %s must have %lld input channels per group (input %s, groups %lld)",
                      Described(weight).text, static_cast<long long>(s->cin_g), Described(input).text,
                      static_cast<long long>(groups));
    }
  }
  s->d = in[0], s->h = in[1], s->w = in[2];
  s->kd = k[0], s->kh = k[1], s->kw = k[2];
  s->sd = st[0], s->sh = st[1], s->sw = st[2];
  s->pd = pa[0], s->ph = pa[1], s->pw = pa[2];
  s->dd = di[0], s->dh = di[1], s->dw = di[2];
  if (s->kd < 1 || s->kh < 1 || s->kw < 1) {
    return ctx.fail(ErrorCode::InvalidArgument, "weight %s has an empty kernel window", Described(weight).text);
  }
  int64_t o[3];
  for (int a = 0; a < 3; ++a) {
    if (transposed) {
      if (op[a] >= st[a] && op[a] >= di[a]) {
        const int i = a - (3 - spatial);
        return ctx.fail(ErrorCode::InvalidArgument,
                        "output_padding[%d] is %lld; it must be smaller than stride (%lld) or dilation (%lld)", i,
                        static_cast<long long>(op[a]), static_cast<long long>(st[a]),
                        static_cast<long long>(di[a]));
      }
      o[a] = (in[a] - 1) * st[a] - 2 * pa[a] + di[a] * (k[a] - 1) + op[a] + 1;
      if (o[a] < 0) {
        return ctx.fail(ErrorCode::InvalidArgument,
                        "transposed convolution of input %s with weight %s gives an output size of %lld in dim %d",
                        Described(input).text, Described(weight).text, static_cast<long long>(o[a]),
                        a - (3 - spatial) + 2);
      }
    } else {
      o[a] = out_extent(in[a], pa[a], di[a], k[a], st[a]);
      if (o[a] < 0) {
        return ctx.fail(ErrorCode::InvalidArgument,
                        "the kernel of weight %s (dilated) is larger than input %s plus padding",
                        Described(weight).text, Described(input).text);
      }
    }
  }
  s->od = o[0], s->oh = o[1], s->ow = o[2];
  if (bias != nullptr) {
    ET_CHECK_OK(check_conv_dtype(ctx, *bias, "bias", input.dtype()));
    if (bias->dim() != 1 || bias->size(0) != s->cout) {
      return ctx.fail(ErrorCode::InvalidArgument, "bias %s must be 1-D with %lld values (the output channels)",
                      Described(*bias).text, static_cast<long long>(s->cout));
    }
  }
  return Error::ok();
}

// out planes = bias (or 0).
template <typename T>
void fill_bias(const ConvShape& s, const T* bias, T* y) {
  const int64_t plane = s.out_plane();
  for (int64_t n = 0; n < s.batch; ++n) {
    for (int64_t oc = 0; oc < s.cout; ++oc) {
      T* p = y + (n * s.cout + oc) * plane;
      const T b = bias != nullptr ? bias[oc] : T(0);
      for (int64_t i = 0; i < plane; ++i) p[i] = b;
    }
  }
}

// dst[i * dst_stride] += a * src[i * src_stride] for i in [lo, hi), integers wrapping.
template <typename T>
inline void axpy(T* dst, int64_t dst_stride, const T* src, int64_t src_stride, T a, int64_t lo, int64_t hi) {
  if (dst_stride == 1 && src_stride == 1) {
    for (int64_t i = lo; i < hi; ++i) dst[i] = kutil::wrap_add(dst[i], kutil::wrap_mul(a, src[i]));
  } else if (dst_stride == 1) {
    for (int64_t i = lo; i < hi; ++i) dst[i] = kutil::wrap_add(dst[i], kutil::wrap_mul(a, src[i * src_stride]));
  } else {
    for (int64_t i = lo; i < hi; ++i) {
      dst[i * dst_stride] = kutil::wrap_add(dst[i * dst_stride], kutil::wrap_mul(a, src[i * src_stride]));
    }
  }
}

// Transposed convolution, per kernel column kj: the offset kj * dw - pw
// and the input columns [lo, hi) whose output column i * sw + offset lies
// inside the output row. Computed once per call for up to kMaxCachedTaps
// kernel columns, on demand beyond.
constexpr int64_t kMaxCachedTaps = 64;
struct ScatterColumns {
  int64_t offset[kMaxCachedTaps], lo[kMaxCachedTaps], hi[kMaxCachedTaps];
  bool cached;

  explicit ScatterColumns(const ConvShape& s) : cached(s.kw <= kMaxCachedTaps) {
    for (int64_t kj = 0; cached && kj < s.kw; ++kj) compute(s, kj, &offset[kj], &lo[kj], &hi[kj]);
  }
  static void compute(const ConvShape& s, int64_t kj, int64_t* off, int64_t* l, int64_t* h) {
    *off = kj * s.dw - s.pw;
    spatial::valid_range(s.ow, s.w, s.sw, *off, l, h);
  }
  void get(const ConvShape& s, int64_t kj, int64_t* off, int64_t* l, int64_t* h) const {
    if (cached) {
      *off = offset[kj], *l = lo[kj], *h = hi[kj];
    } else {
      compute(s, kj, off, l, h);
    }
  }
};

// Tap rows (input channel, kd, kh) one output row of conv_direct lists on the stack.
constexpr int64_t kMaxRows = 1024;

// One output row of a plain convolution with any number of tap rows: one
// axpy per (input channel, kd, kh, kw). y holds the bias.
template <typename T>
void conv_direct_row(const ConvShape& s, const T* xg, const T* wo, T* orow, int64_t oz, int64_t oy) {
  for (int64_t icg = 0; icg < s.cin_g; ++icg) {
    const T* xp = xg + icg * s.in_plane();
    const T* wk = wo + icg * s.window();
    for (int64_t a = 0; a < s.kd; ++a) {
      const int64_t iz = oz * s.sd - s.pd + a * s.dd;
      if (iz < 0 || iz >= s.d) continue;
      for (int64_t ki = 0; ki < s.kh; ++ki) {
        const int64_t iy = oy * s.sh - s.ph + ki * s.dh;
        if (iy < 0 || iy >= s.h) continue;
        const T* irow = xp + (iz * s.h + iy) * s.w;
        const T* wrow = wk + (a * s.kh + ki) * s.kw;
        for (int64_t kj = 0; kj < s.kw; ++kj) {
          const int64_t offset = kj * s.dw - s.pw;
          int64_t lo, hi;
          spatial::valid_range(s.w, s.ow, s.sw, offset, &lo, &hi);
          axpy(orow, 1, irow + offset, s.sw, wrow[kj], lo, hi);
        }
      }
    }
  }
}

// kBlock adjacent output columns += their taps over `rows` tap rows, the
// sums kept in registers: out[b] += sum_r sum_kj w[row_w[r] + kj] *
// base[row_in[r] + kj * dw + b * stride].
template <typename T, int64_t kBlock, bool kUnitStride>
__attribute__((always_inline)) inline void conv_block(const T* __restrict base, const T* __restrict w,
                                                     const int64_t* row_in, const int64_t* row_w, int64_t rows,
                                                     int64_t kw, int64_t dw, int64_t stride, T* __restrict out) {
  T acc[kBlock];
  for (int64_t b = 0; b < kBlock; ++b) acc[b] = out[b];
  for (int64_t r = 0; r < rows; ++r) {
    const T* irow = base + row_in[r];
    const T* wrow = w + row_w[r];
    for (int64_t kj = 0; kj < kw; ++kj) {
      const T wv = wrow[kj];
      const T* src = irow + kj * dw;
      for (int64_t b = 0; b < kBlock; ++b) {
        acc[b] = kutil::wrap_add(acc[b], kutil::wrap_mul(wv, src[kUnitStride ? b : b * stride]));
      }
    }
  }
  for (int64_t b = 0; b < kBlock; ++b) out[b] = acc[b];
}

// Plain convolution, direct (float64, int64, 3-d depthwise): output
// stationary. Interior output columns, whose taps all lie inside the input
// row, are done kBlock at a time with their sums in registers across every
// input channel and tap (one input load per multiply-add, no output
// traffic); the few edge columns one at a time with clipping. y holds the bias.
template <typename T>
void conv_direct(const ConvShape& s, const T* x, const T* wt, T* y) {
  constexpr int64_t kBlock = 8;
  const int64_t in_plane = s.in_plane(), out_plane = s.out_plane(), window = s.window();
  // Interior columns: ox * sw - pw >= 0 and ox * sw - pw + (kw - 1) * dw < w.
  int64_t lo0, hi0, lo1, hi1;
  spatial::valid_range(s.w, s.ow, s.sw, -s.pw, &lo0, &hi0);
  spatial::valid_range(s.w, s.ow, s.sw, (s.kw - 1) * s.dw - s.pw, &lo1, &hi1);
  const int64_t left = lo0 > lo1 ? lo0 : lo1;
  int64_t right = hi0 < hi1 ? hi0 : hi1;
  if (right < left) right = left;
  for (int64_t n = 0; n < s.batch; ++n) {
    for (int64_t oc = 0; oc < s.cout; ++oc) {
      const int64_t g = oc / s.cout_g;
      const T* xg = x + (n * s.cin + g * s.cin_g) * in_plane;
      const T* wo = wt + oc * s.cin_g * window;
      T* yp = y + (n * s.cout + oc) * out_plane;
      for (int64_t oz = 0; oz < s.od; ++oz) {
        for (int64_t oy = 0; oy < s.oh; ++oy) {
          T* orow = yp + (oz * s.oh + oy) * s.ow;
          // (input channel, kd, kh) tap rows inside the input: their (input row, weight row) offsets.
          int64_t row_in[kMaxRows], row_w[kMaxRows];
          int64_t rows = 0;
          bool all_rows = true;
          for (int64_t icg = 0; icg < s.cin_g && all_rows; ++icg) {
            for (int64_t a = 0; a < s.kd && all_rows; ++a) {
              const int64_t iz = oz * s.sd - s.pd + a * s.dd;
              if (iz < 0 || iz >= s.d) continue;
              for (int64_t ki = 0; ki < s.kh; ++ki) {
                const int64_t iy = oy * s.sh - s.ph + ki * s.dh;
                if (iy < 0 || iy >= s.h) continue;
                if (rows == kMaxRows) {
                  all_rows = false;
                  break;
                }
                row_in[rows] = icg * in_plane + (iz * s.h + iy) * s.w;
                row_w[rows] = icg * window + (a * s.kh + ki) * s.kw;
                ++rows;
              }
            }
          }
          if (!all_rows) {  // more tap rows than fit the list: row by row
            conv_direct_row(s, xg, wo, orow, oz, oy);
            continue;
          }
          int64_t ox = left;
          for (; ox + kBlock <= right; ox += kBlock) {
            const T* base = xg + ox * s.sw - s.pw;
            if (s.sw == 1) {
              conv_block<T, kBlock, true>(base, wo, row_in, row_w, rows, s.kw, s.dw, 1, orow + ox);
            } else {
              conv_block<T, kBlock, false>(base, wo, row_in, row_w, rows, s.kw, s.dw, s.sw, orow + ox);
            }
          }
          auto one_column = [&](int64_t c) {
            T acc = orow[c];
            const int64_t x0 = c * s.sw - s.pw;
            for (int64_t r = 0; r < rows; ++r) {
              const T* irow = xg + row_in[r];
              const T* wrow = wo + row_w[r];
              for (int64_t kj = 0; kj < s.kw; ++kj) {
                const int64_t ix = x0 + kj * s.dw;
                if (ix >= 0 && ix < s.w) acc = kutil::wrap_add(acc, kutil::wrap_mul(wrow[kj], irow[ix]));
              }
            }
            orow[c] = acc;
          };
          for (int64_t c = 0; c < left; ++c) one_column(c);
          for (int64_t c = ox; c < s.ow; ++c) one_column(c);
        }
      }
    }
  }
}

// Transposed convolution, direct: every input row scattered into the
// output rows its taps reach; y holds the bias.
template <typename T>
void conv_transposed_direct(const ConvShape& s, const T* x, const T* wt, T* y) {
  const int64_t in_plane = s.in_plane(), out_plane = s.out_plane(), window = s.window();
  const ScatterColumns cols(s);
  for (int64_t n = 0; n < s.batch; ++n) {
    for (int64_t ic = 0; ic < s.cin; ++ic) {
      const int64_t g = ic / s.cin_g;
      const T* xp = x + (n * s.cin + ic) * in_plane;
      for (int64_t ocg = 0; ocg < s.cout_g; ++ocg) {
        const int64_t oc = g * s.cout_g + ocg;
        T* yp = y + (n * s.cout + oc) * out_plane;
        const T* wk = wt + (ic * s.cout_g + ocg) * window;
        for (int64_t iz = 0; iz < s.d; ++iz) {
          for (int64_t a = 0; a < s.kd; ++a) {
            const int64_t oz = iz * s.sd - s.pd + a * s.dd;
            if (oz < 0 || oz >= s.od) continue;
            for (int64_t iy = 0; iy < s.h; ++iy) {
              const T* irow = xp + (iz * s.h + iy) * s.w;
              for (int64_t ki = 0; ki < s.kh; ++ki) {
                const int64_t oy = iy * s.sh - s.ph + ki * s.dh;
                if (oy < 0 || oy >= s.oh) continue;
                T* orow = yp + (oz * s.oh + oy) * s.ow;
                const T* wrow = wk + (a * s.kh + ki) * s.kw;
                for (int64_t kj = 0; kj < s.kw; ++kj) {
                  int64_t offset, lo, hi;
                  cols.get(s, kj, &offset, &lo, &hi);
                  axpy(orow + offset, s.sw, irow, 1, wrow[kj], lo, hi);
                }
              }
            }
          }
        }
      }
    }
  }
}

// im2col of one (batch, group) slice, packed for sgemm: row k of the
// virtual column matrix is (input channel, kernel depth, kernel row, kernel
// col), column j is (output depth, output row, output col).
struct Im2col {
  const float* x;  // first input channel of the group
  int64_t d, h, w, kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw, oh, ow;
};

void pack_im2col(const void* state, int64_t k0, int64_t kc, int64_t j0, int64_t nc, float* dst) {
  const Im2col& s = *static_cast<const Im2col*>(state);
  constexpr int kNR = gemm::kNR;
  const int64_t khw = s.kh * s.kw;
  const int64_t window = s.kd * khw;
  const int64_t out_plane = s.oh * s.ow;
  const int64_t in_plane = s.d * s.h * s.w;
  for (int64_t jr = 0; jr < nc; jr += kNR) {
    const int nr = static_cast<int>(nc - jr < kNR ? nc - jr : kNR);
    // Input coordinate (before the kernel offset) of each column.
    int64_t iz0[kNR], iy0[kNR], ix0[kNR];
    for (int jj = 0; jj < kNR; ++jj) {
      const int64_t j = j0 + jr + (jj < nr ? jj : 0);
      const int64_t r = j % out_plane;
      iz0[jj] = (j / out_plane) * s.sd - s.pd;
      iy0[jj] = (r / s.ow) * s.sh - s.ph;
      ix0[jj] = (r % s.ow) * s.sw - s.pw;
    }
    // When the columns share an output row they read one input row at
    // ix0[0] + kj * dw + jj * sw: eight consecutive pixels for stride 1.
    const bool one_row = nr == kNR && iz0[0] == iz0[kNR - 1] && iy0[0] == iy0[kNR - 1];
    int64_t ci = k0 / window;
    int64_t r = k0 % window;
    int64_t ka = r / khw;
    r %= khw;
    int64_t ki = r / s.kw;
    int64_t kj = r % s.kw;
    for (int64_t p = 0; p < kc; ++p) {
      const float* vol = s.x + ci * in_plane;
      float* dp = dst + p * kNR;
      const int64_t dz = ka * s.dd;
      const int64_t dy = ki * s.dh;
      const int64_t dx = kj * s.dw;
      const int64_t iz = iz0[0] + dz;
      const int64_t iy = iy0[0] + dy;
      const int64_t ix = ix0[0] + dx;
      const bool row_in = iz >= 0 && iz < s.d && iy >= 0 && iy < s.h;
      if (one_row && row_in && ix >= 0 && ix + (kNR - 1) * s.sw < s.w) {
        const float* src = vol + (iz * s.h + iy) * s.w + ix;
        if (s.sw == 1) {
          std::memcpy(dp, src, sizeof(float) * kNR);
        } else {
          for (int jj = 0; jj < kNR; ++jj) dp[jj] = src[jj * s.sw];
        }
      } else if (one_row && !row_in) {
        for (int jj = 0; jj < kNR; ++jj) dp[jj] = 0.0f;
      } else {
        for (int jj = 0; jj < kNR; ++jj) {
          const int64_t z = iz0[jj] + dz;
          const int64_t y = iy0[jj] + dy;
          const int64_t x = ix0[jj] + dx;
          const bool in = jj < nr && z >= 0 && z < s.d && y >= 0 && y < s.h && x >= 0 && x < s.w;
          dp[jj] = in ? vol[(z * s.h + y) * s.w + x] : 0.0f;
        }
      }
      if (++kj == s.kw) {
        kj = 0;
        if (++ki == s.kh) {
          ki = 0;
          if (++ka == s.kd) {
            ka = 0;
            ++ci;
          }
        }
      }
    }
    dst += kc * kNR;
  }
}

// Output columns o in [0, ow) whose input column o * stride + offset lies in [0, w).
inline void valid_columns(int64_t w, int64_t ow, int64_t stride, int64_t offset, int64_t* lo, int64_t* hi) {
  spatial::valid_range(w, ow, stride, offset, lo, hi);
}

// orow += one kernel row (s.kw taps at k) applied along input row irow.
void depthwise_row(const ConvShape& s, const float* irow, const float* k, float* orow) {
  if (s.kw == 3 && s.dw == 1 && (s.sw == 1 || s.sw == 2)) {
    // Interior columns, where all three taps are in bounds, in one pass; the
    // few edge columns tap by tap.
    int64_t lo, hi0, lo2, hi;
    valid_columns(s.w, s.ow, s.sw, -s.pw, &lo, &hi0);
    valid_columns(s.w, s.ow, s.sw, 2 - s.pw, &lo2, &hi);
    if (hi < lo) hi = lo;
    for (int64_t j = 0; j < 3; ++j) {
      const int64_t offset = j - s.pw;
      int64_t tap_lo, tap_hi;
      valid_columns(s.w, s.ow, s.sw, offset, &tap_lo, &tap_hi);
      for (int64_t ox = tap_lo; ox < tap_hi && ox < lo; ++ox) orow[ox] += k[j] * irow[ox * s.sw + offset];
      for (int64_t ox = tap_lo > hi ? tap_lo : hi; ox < tap_hi; ++ox) orow[ox] += k[j] * irow[ox * s.sw + offset];
    }
    const float k0 = k[0], k1 = k[1], k2 = k[2];
    const int64_t pw = s.pw;
    if (s.sw == 1) {
      for (int64_t ox = lo; ox < hi; ++ox) {
        orow[ox] += k0 * irow[ox - pw] + k1 * irow[ox - pw + 1] + k2 * irow[ox - pw + 2];
      }
    } else {
      for (int64_t ox = lo; ox < hi; ++ox) {
        orow[ox] += k0 * irow[2 * ox - pw] + k1 * irow[2 * ox - pw + 1] + k2 * irow[2 * ox - pw + 2];
      }
    }
    return;
  }
  for (int64_t kj = 0; kj < s.kw; ++kj) {
    const float kv = k[kj];
    const int64_t offset = kj * s.dw - s.pw;
    int64_t lo, hi;
    valid_columns(s.w, s.ow, s.sw, offset, &lo, &hi);
    if (s.sw == 1) {
      for (int64_t ox = lo; ox < hi; ++ox) orow[ox] += kv * irow[ox + offset];
    } else {
      for (int64_t ox = lo; ox < hi; ++ox) orow[ox] += kv * irow[ox * s.sw + offset];
    }
  }
}

// One output pixel of a 3x3, dilation-1 depthwise plane, taps outside the
// input skipped (edges).
inline float dw3x3_pixel(const float* in, int64_t h, int64_t w, const float* k, float b, int64_t iy0, int64_t ix0) {
  float acc = b;
  for (int64_t i = 0; i < 3; ++i) {
    const int64_t iy = iy0 + i;
    if (iy < 0 || iy >= h) continue;
    for (int64_t j = 0; j < 3; ++j) {
      const int64_t ix = ix0 + j;
      if (ix >= 0 && ix < w) acc += k[i * 3 + j] * in[iy * w + ix];
    }
  }
  return acc;
}

// A whole 3x3 depthwise plane with stride S (1 or 2), dilation 1: output
// rows whose three input rows exist take all nine taps in one pass over
// their interior columns; edge pixels go through dw3x3_pixel.
template <int S>
void dw3x3_plane(const ConvShape& s, const float* in, const float* k, float b, float* out) {
  const int64_t h = s.h, w = s.w, oh = s.oh, ow = s.ow, ph = s.ph, pw = s.pw;
  // Columns whose taps ox*S - pw + {0, 1, 2} all lie in [0, w).
  int64_t lo = (pw + S - 1) / S;
  int64_t hi = w - 3 + pw < 0 ? 0 : (w - 3 + pw) / S + 1;
  if (lo > ow) lo = ow;
  if (hi > ow) hi = ow;
  if (hi < lo) hi = lo;
  const float k0 = k[0], k1 = k[1], k2 = k[2], k3 = k[3], k4 = k[4], k5 = k[5], k6 = k[6], k7 = k[7], k8 = k[8];
  for (int64_t oy = 0; oy < oh; ++oy) {
    const int64_t iy0 = oy * S - ph;
    float* orow = out + oy * ow;
    if (iy0 < 0 || iy0 + 2 >= h) {
      for (int64_t ox = 0; ox < ow; ++ox) orow[ox] = dw3x3_pixel(in, h, w, k, b, iy0, ox * S - pw);
      continue;
    }
    for (int64_t ox = 0; ox < lo; ++ox) orow[ox] = dw3x3_pixel(in, h, w, k, b, iy0, ox * S - pw);
    const float* r0 = in + iy0 * w;
    const float* r1 = r0 + w;
    const float* r2 = r1 + w;
    for (int64_t ox = lo; ox < hi; ++ox) {
      const int64_t c = ox * S - pw;  // >= 0 and c + 2 < w in the interior
      orow[ox] = b + (k0 * r0[c] + k1 * r0[c + 1] + k2 * r0[c + 2]) + (k3 * r1[c] + k4 * r1[c + 1] + k5 * r1[c + 2]) +
                 (k6 * r2[c] + k7 * r2[c + 1] + k8 * r2[c + 2]);
    }
    for (int64_t ox = hi; ox < ow; ++ox) orow[ox] = dw3x3_pixel(in, h, w, k, b, iy0, ox * S - pw);
  }
}

// One input channel per group: each output channel is a 2-D correlation of
// one input plane, computed an output row at a time.
void conv_depthwise(const ConvShape& s, const float* x, const float* wt, const float* bias, float* y) {
  const int64_t in_plane = s.h * s.w;
  const int64_t out_plane = s.oh * s.ow;
  for (int64_t n = 0; n < s.batch; ++n) {
    for (int64_t oc = 0; oc < s.cout; ++oc) {
      const int64_t ic = oc / s.cout_g;  // the group's only input channel
      const float* plane = x + (n * s.cin + ic) * in_plane;
      const float* k = wt + oc * s.kh * s.kw;
      float* out = y + (n * s.cout + oc) * out_plane;
      const float b = bias ? bias[oc] : 0.0f;
      if (s.kh == 3 && s.kw == 3 && s.dh == 1 && s.dw == 1 && s.sh == s.sw && (s.sh == 1 || s.sh == 2)) {
        if (s.sh == 1) {
          dw3x3_plane<1>(s, plane, k, b, out);
        } else {
          dw3x3_plane<2>(s, plane, k, b, out);
        }
        continue;
      }
      for (int64_t oy = 0; oy < s.oh; ++oy) {
        float* orow = out + oy * s.ow;
        for (int64_t ox = 0; ox < s.ow; ++ox) orow[ox] = b;
        for (int64_t ki = 0; ki < s.kh; ++ki) {
          const int64_t iy = oy * s.sh - s.ph + ki * s.dh;
          if (iy < 0 || iy >= s.h) continue;
          depthwise_row(s, plane + iy * s.w, k + ki * s.kw, orow);
        }
      }
    }
  }
}
// Plain float32 convolution; y is written whole.
void conv_plain_f32(const ConvShape& s, const float* x, const float* wt, const float* bias, float* y,
                    KernelContext& ctx) {
  if (s.cin_g == 1 && s.spatial <= 2) {
    conv_depthwise(s, x, wt, bias, y);
    return;
  }
  if (s.cin_g <= 1) {  // 3-d depthwise: direct rows beat a one-row gemm
    fill_bias(s, bias, y);
    conv_direct(s, x, wt, y);
    return;
  }
  if (bias != nullptr) fill_bias(s, bias, y);
  const int64_t in_plane = s.in_plane();
  const int64_t out_plane = s.out_plane();
  const int64_t k = s.cin_g * s.window();
  const float beta = bias != nullptr ? 1.0f : 0.0f;
  const bool pointwise = s.window() == 1 && s.sd == 1 && s.sh == 1 && s.sw == 1 && s.pd == 0 && s.ph == 0 &&
                         s.pw == 0;
  gemm::Workspace ws(ctx, s.cout_g, out_plane, k);
  for (int64_t n = 0; n < s.batch; ++n) {
    for (int64_t g = 0; g < s.groups; ++g) {
      const float* xg = x + (n * s.cin + g * s.cin_g) * in_plane;
      const gemm::MatrixView a = gemm::MatrixView::row_major(wt + g * s.cout_g * k, k);
      float* c = y + (n * s.cout + g * s.cout_g) * out_plane;
      if (pointwise) {
        gemm::sgemm(ws, s.cout_g, out_plane, k, 1.0f, a,
                    gemm::BSource::matrix(gemm::MatrixView::row_major(xg, in_plane)), beta, c, out_plane);
      } else {
        const Im2col state{xg,   s.d,  s.h,  s.w,  s.kd, s.kh, s.kw, s.sd, s.sh,
                           s.sw, s.pd, s.ph, s.pw, s.dd, s.dh, s.dw, s.oh, s.ow};
        gemm::sgemm(ws, s.cout_g, out_plane, k, 1.0f, a, gemm::BSource::packed_by(pack_im2col, &state), beta, c,
                    out_plane);
      }
    }
  }
}

// Transposed float32 convolution through sgemm: for a block of input rows,
// cols (cout_g * window x rows * w) = W_g^T @ x_g[:, block], then each row
// of cols is scatter-added along the output rows its tap reaches. y holds
// the bias. False (nothing written) when temp memory cannot hold one block.
bool conv_transposed_gemm_f32(const ConvShape& s, const float* x, const float* wt, float* y, KernelContext& ctx) {
  const int64_t window = s.window();
  const int64_t m = s.cout_g * window;  // rows of cols
  const int64_t rows_in = s.d * s.h;    // input rows per channel
  constexpr int64_t kTargetFloats = int64_t{1} << 20;
  int64_t block = kTargetFloats / (m * s.w);
  if (block < 1) block = 1;
  if (block > rows_in) block = rows_in;
  float* cols = static_cast<float*>(ctx.allocate_temp(sizeof(float) * static_cast<size_t>(m * block * s.w)));
  if (cols == nullptr && block > 1) {
    block = 1;
    cols = static_cast<float*>(ctx.allocate_temp(sizeof(float) * static_cast<size_t>(m * s.w)));
  }
  if (cols == nullptr) return false;
  const int64_t in_plane = s.in_plane();
  const int64_t out_plane = s.out_plane();
  const int64_t khw = s.kh * s.kw;
  gemm::Workspace ws(ctx, m, block * s.w, s.cin_g);
  for (int64_t n = 0; n < s.batch; ++n) {
    for (int64_t g = 0; g < s.groups; ++g) {
      // A(r, ic) = weight[g * cin_g + ic, r]: the group's (cin_g x m) slice, transposed.
      const gemm::MatrixView a{wt + g * s.cin_g * m, 1, m};
      const float* xg = x + (n * s.cin + g * s.cin_g) * in_plane;
      float* yg = y + (n * s.cout + g * s.cout_g) * out_plane;
      for (int64_t q0 = 0; q0 < rows_in; q0 += block) {
        const int64_t qn = rows_in - q0 < block ? rows_in - q0 : block;
        const int64_t nc = qn * s.w;
        gemm::sgemm(ws, m, nc, s.cin_g, 1.0f, a,
                    gemm::BSource::matrix(gemm::MatrixView::row_major(xg + q0 * s.w, in_plane)), 0.0f, cols, nc);
        for (int64_t r = 0; r < m; ++r) {
          const int64_t oc = r / window;
          int64_t t = r % window;
          const int64_t ka = t / khw;
          t %= khw;
          const int64_t ki = t / s.kw;
          const int64_t kj = t % s.kw;
          const int64_t offset = kj * s.dw - s.pw;
          int64_t lo, hi;
          spatial::valid_range(s.ow, s.w, s.sw, offset, &lo, &hi);
          if (lo >= hi) continue;
          for (int64_t qi = 0; qi < qn; ++qi) {
            const int64_t q = q0 + qi;
            const int64_t oz = (q / s.h) * s.sd - s.pd + ka * s.dd;
            const int64_t oy = (q % s.h) * s.sh - s.ph + ki * s.dh;
            if (oz < 0 || oz >= s.od || oy < 0 || oy >= s.oh) continue;
            float* orow = yg + oc * out_plane + (oz * s.oh + oy) * s.ow + offset;
            const float* crow = cols + r * nc + qi * s.w;
            if (s.sw == 1) {
              for (int64_t i = lo; i < hi; ++i) orow[i] += crow[i];
            } else {
              for (int64_t i = lo; i < hi; ++i) orow[i * s.sw] += crow[i];
            }
          }
        }
      }
    }
  }
  return true;
}

void conv_f32(const ConvShape& s, const float* x, const float* wt, const float* bias, float* y, KernelContext& ctx) {
  if (!s.transposed) {
    conv_plain_f32(s, x, wt, bias, y, ctx);
    return;
  }
  fill_bias(s, bias, y);
  if (s.cin_g == 0 || s.cout_g == 0) return;
  if (!conv_transposed_gemm_f32(s, x, wt, y, ctx)) conv_transposed_direct(s, x, wt, y);
}

template <typename T>
void conv_generic(const ConvShape& s, const T* x, const T* wt, const T* bias, T* y) {
  fill_bias(s, bias, y);
  if (s.transposed) {
    conv_transposed_direct(s, x, wt, y);
  } else {
    conv_direct(s, x, wt, y);
  }
}

// float16/bfloat16: through float32 copies in temp memory.
template <typename H>
Error conv_half(KernelContext& ctx, const ConvShape& s, const Tensor& input, const Tensor& weight, const Tensor* bias,
                Tensor& out) {
  const int64_t nx = input.numel(), nw = weight.numel(), nb = bias ? bias->numel() : 0, ny = out.numel();
  float* buf = static_cast<float*>(ctx.allocate_temp(sizeof(float) * static_cast<size_t>(nx + nw + nb + ny)));
  if (buf == nullptr) {
    return ctx.fail(ErrorCode::OutOfMemory, "no temp memory for float32 copies of the %s operands (%lld floats)",
                    dtype_name(input.dtype()), static_cast<long long>(nx + nw + nb + ny));
  }
  float *x = buf, *w = x + nx, *b = w + nw, *y = b + nb;
  auto widen = [](const Tensor& t, float* dst) {
    const H* src = t.data_as<const H>();
    for (int64_t i = 0; i < t.numel(); ++i) dst[i] = kutil::to_float(src[i]);
  };
  widen(input, x);
  widen(weight, w);
  if (bias) widen(*bias, b);
  conv_f32(s, x, w, bias ? b : nullptr, y, ctx);
  H* dst = out.data_as<H>();
  for (int64_t i = 0; i < ny; ++i) dst[i] = kutil::convert<H>(y[i]);
  return Error::ok();
}

// ---------------------------------------------------------------------------
// col2im
// ---------------------------------------------------------------------------

// out (C, H, W) += every column block of `col` (C * kh * kw, L), in ATen's
// order (column channel, block row, block column), accumulating in the
// storage type like ATen (float16 rounds after every add, bool ORs).
template <typename S>
void col2im(const S* col, S* out, int64_t channels, int64_t H, int64_t W, const int64_t* k, const int64_t* dil,
            const int64_t* pad, const int64_t* stride, int64_t nbh, int64_t nbw) {
  using C = spatial::Compute<S>;
  const int64_t window = k[0] * k[1];
  const int64_t L = nbh * nbw;
  for (int64_t i = 0; i < channels * H * W; ++i) out[i] = kutil::convert<S>(C(0));
  for (int64_t cc = 0; cc < channels * window; ++cc) {
    const int64_t c = cc / window;
    const int64_t ki = (cc % window) / k[1];
    const int64_t kj = cc % k[1];
    const int64_t offset = kj * dil[1] - pad[1];
    int64_t lo, hi;
    spatial::valid_range(W, nbw, stride[1], offset, &lo, &hi);
    for (int64_t bh = 0; bh < nbh; ++bh) {
      const int64_t y = bh * stride[0] - pad[0] + ki * dil[0];
      if (y < 0 || y >= H) continue;
      const S* crow = col + cc * L + bh * nbw;
      S* orow = out + (c * H + y) * W + offset;
      const int64_t sw = stride[1];
      for (int64_t b = lo; b < hi; ++b) {
        orow[b * sw] = kutil::convert<S>(static_cast<C>(kutil::convert<C>(orow[b * sw]) + kutil::convert<C>(crow[b])));
      }
    }
  }
}

// A 2-value int list argument of col2im.
Error read_pair(KernelContext& ctx, Span<const int64_t> v, const char* name, int64_t min_value, int64_t out[2]) {
  if (v.size() != 2) {
    return ctx.fail(ErrorCode::InvalidArgument, "%s must have 2 values, got %zu", name, v.size());
  }
  return spatial::read_dims(ctx, v, 2, name, min_value, out);
}

}  // namespace

namespace portable {

Error convolution_out(KernelContext& ctx, const Tensor& input, const Tensor& weight, const Tensor* bias,
                      Span<const int64_t> stride, Span<const int64_t> padding, Span<const int64_t> dilation,
                      bool transposed, Span<const int64_t> output_padding, int64_t groups, Tensor& out) {
  ConvShape s = {};
  ET_CHECK_OK(parse(ctx, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, out, &s));
  int64_t sizes[5] = {s.batch, s.cout, s.od, s.oh, s.ow};
  if (s.spatial < 3) {
    for (int i = 0; i < s.spatial; ++i) sizes[2 + i] = sizes[5 - s.spatial + i];
  }
  int64_t numel = 0;
  if (!kutil::checked_numel(sizes, 2 + s.spatial, &numel)) {
    return ctx.fail(ErrorCode::InvalidArgument, "the output of input %s and weight %s is too large",
                    Described(input).text, Described(weight).text);
  }
  ET_CHECK_OK(kutil::resize_out(ctx, out, sizes, 2 + s.spatial));
  if (out.numel() == 0) return Error::ok();
  switch (input.dtype()) {
    case ScalarType::Float:
      conv_f32(s, input.data_as<const float>(), weight.data_as<const float>(),
               bias ? bias->data_as<const float>() : nullptr, out.data_as<float>(), ctx);
      return Error::ok();
    case ScalarType::Double:
      conv_generic(s, input.data_as<const double>(), weight.data_as<const double>(),
                   bias ? bias->data_as<const double>() : nullptr, out.data_as<double>());
      return Error::ok();
    case ScalarType::Int64:
      conv_generic(s, input.data_as<const int64_t>(), weight.data_as<const int64_t>(),
                   bias ? bias->data_as<const int64_t>() : nullptr, out.data_as<int64_t>());
      return Error::ok();
    case ScalarType::Half:
      return conv_half<kutil::Half>(ctx, s, input, weight, bias, out);
    default:  // BFloat16 (parse rejected the rest)
      return conv_half<kutil::BFloat16>(ctx, s, input, weight, bias, out);
  }
}

Error col2im_out(KernelContext& ctx, const Tensor& self, Span<const int64_t> output_size,
                 Span<const int64_t> kernel_size, Span<const int64_t> dilation, Span<const int64_t> padding,
                 Span<const int64_t> stride, Tensor& out) {
  ET_CHECK_OK(spatial::check_dtype(ctx, self, "self",
                                   {ScalarType::Float, ScalarType::Double, ScalarType::Half, ScalarType::BFloat16,
                                    ScalarType::Bool},
                                   "float32, float64, float16, bfloat16, bool"));
  ET_CHECK_OK(spatial::check_same_dtype(ctx, out, "out", self.dtype(), "self"));
  ET_CHECK_OK(linalg::check_sane(ctx, self, "self"));
  if (self.dim() != 2 && self.dim() != 3) {
    return ctx.fail(ErrorCode::InvalidArgument, "self must be 2-D (C * kH * kW, L) or 3-D (N, C * kH * kW, L), got %s",
                    Described(self).text);
  }
  int64_t size[2], k[2], dil[2], pad[2], st[2];
  ET_CHECK_OK(read_pair(ctx, output_size, "output_size", 1, size));
  ET_CHECK_OK(read_pair(ctx, kernel_size, "kernel_size", 1, k));
  ET_CHECK_OK(read_pair(ctx, dilation, "dilation", 1, dil));
  ET_CHECK_OK(read_pair(ctx, padding, "padding", 0, pad));
  ET_CHECK_OK(read_pair(ctx, stride, "stride", 1, st));
  const bool batched = self.dim() == 3;
  const int64_t batch = batched ? self.size(0) : 1;
  const int64_t rows = self.size(self.dim() - 2);
  const int64_t length = self.size(self.dim() - 1);
  const int64_t window = k[0] * k[1];
  if (rows % window != 0) {
    return ctx.fail(ErrorCode::InvalidArgument,
                    "self %s: dim %d (%lld) must be divisible by the product of kernel_size (%lld x %lld)",
                    Described(self).text, self.dim() - 2, static_cast<long long>(rows), static_cast<long long>(k[0]),
                    static_cast<long long>(k[1]));
  }
  const int64_t nbh = out_extent(size[0], pad[0], dil[0], k[0], st[0]);
  const int64_t nbw = out_extent(size[1], pad[1], dil[1], k[1], st[1]);
  if (nbh < 1 || nbw < 1 || nbh * nbw != length) {
    return ctx.fail(ErrorCode::InvalidArgument,
                    "self %s: dim %d must hold the %lld x %lld sliding blocks that output_size [%lld, %lld], "
                    "kernel_size [%lld, %lld], dilation [%lld, %lld], padding [%lld, %lld] and stride [%lld, %lld] "
                    "give",
                    Described(self).text, self.dim() - 1, static_cast<long long>(nbh), static_cast<long long>(nbw),
                    static_cast<long long>(size[0]), static_cast<long long>(size[1]), static_cast<long long>(k[0]),
                    static_cast<long long>(k[1]), static_cast<long long>(dil[0]), static_cast<long long>(dil[1]),
                    static_cast<long long>(pad[0]), static_cast<long long>(pad[1]), static_cast<long long>(st[0]),
                    static_cast<long long>(st[1]));
  }
  const int64_t channels = rows / window;
  int64_t sizes[4] = {batch, channels, size[0], size[1]};
  int64_t numel = 0;
  if (!kutil::checked_numel(sizes, 4, &numel)) {
    return ctx.fail(ErrorCode::InvalidArgument, "output_size [%lld, %lld] is too large",
                    static_cast<long long>(size[0]), static_cast<long long>(size[1]));
  }
  ET_CHECK_OK(kutil::resize_out(ctx, out, batched ? sizes : sizes + 1, batched ? 4 : 3));
  if (out.numel() == 0) return Error::ok();
  kutil::dispatch_storage(self.dtype(), [&](auto tag) {
    using S = decltype(tag);
    if constexpr (std::is_floating_point_v<S> || kutil::is_half_v<S> || std::is_same_v<S, bool>) {
      const S* col = self.data_as<const S>();
      S* dst = out.data_as<S>();
      for (int64_t n = 0; n < batch; ++n) {
        col2im(col + n * rows * length, dst + n * channels * size[0] * size[1], channels, size[0], size[1], k, dil,
               pad, st, nbh, nbw);
      }
    }
  });
  return Error::ok();
}

}  // namespace portable
}  // namespace etmlir
