// aten::convolution.out for 1-D and 2-D convolutions (NCL / NCHW, float32).
//
// Three paths, all writing the output once per (batch, group):
//  * one input channel per group (depthwise, any channel multiplier): a
//    direct loop, one output row at a time, one vectorizable axpy per tap;
//  * 1x1, stride 1, no padding: out_g = W_g @ x_g straight on the input, no
//    copy at all;
//  * everything else: out_g = W_g @ im2col(x_g), with the im2col columns
//    packed block by block straight into the sgemm's B panels (gemm.h
//    PackBFn), so no im2col matrix is ever materialized.
// Bias is written first and the product accumulated onto it (beta = 1).
// Transposed convolution is not supported.
#include <cstring>

#include "gemm.h"
#include "kernel_util_linalg.h"
#include "portable_kernels.h"

namespace etmlir {
namespace {

using linalg::Described;

struct ConvShape {
  int64_t batch, cin, h, w;  // input; 1-D convolutions have h == 1
  int64_t cout, kh, kw;      // weight
  int64_t groups, cin_g, cout_g;
  int64_t sh, sw, ph, pw, dh, dw;
  int64_t oh, ow;
};

// A stride/padding/dilation list: one value per spatial dim, or one value
// for all of them. Values must lie in [min_value, kMaxSize].
Error read_param(KernelContext& ctx, const EValue& list, int64_t spatial, int64_t min_value, const char* name,
                 int64_t values[2]) {
  Span<const int64_t> v = list.to_int_list();
  if (v.size() != 1 && static_cast<int64_t>(v.size()) != spatial) {
    return ctx.fail(ErrorCode::InvalidArgument, "%s must have %lld values (one per spatial dim), got %zu", name,
                    static_cast<long long>(spatial), v.size());
  }
  for (int64_t d = 0; d < spatial; ++d) {
    const int64_t x = v[v.size() == 1 ? 0 : static_cast<size_t>(d)];
    if (x < min_value || x > linalg::kMaxSize) {
      return ctx.fail(ErrorCode::InvalidArgument, "%s[%lld] is %lld; it must be >= %lld", name,
                      static_cast<long long>(d), static_cast<long long>(x), static_cast<long long>(min_value));
    }
    values[d] = x;
  }
  return Error::ok();
}

// Output extent of one spatial dim, or -1 when the kernel does not fit.
int64_t out_extent(int64_t in, int64_t pad, int64_t dilation, int64_t kernel, int64_t stride) {
  const int64_t span = in + 2 * pad - dilation * (kernel - 1) - 1;
  return span < 0 ? -1 : span / stride + 1;
}

Error parse(KernelContext& ctx, EValue** args, ConvShape* s) {
  const Tensor& input = args[0]->to_tensor();
  const Tensor& weight = args[1]->to_tensor();
  const Tensor* bias = args[2]->is_none() ? nullptr : &args[2]->to_tensor();
  if (args[6]->to_bool()) {
    return ctx.fail(ErrorCode::NotSupported, "transposed convolution is not supported by the portable kernel");
  }
  ET_CHECK_OK(linalg::check_sane(ctx, input, "input"));
  ET_CHECK_OK(linalg::check_sane(ctx, weight, "weight"));
  if (input.dim() != 3 && input.dim() != 4) {
    return ctx.fail(ErrorCode::NotSupported, "input must be 3-D (N, C, L) or 4-D (N, C, H, W), got %s",
                    Described(input).text);
  }
  if (weight.dim() != input.dim()) {
    return ctx.fail(ErrorCode::InvalidArgument, "weight %s must have the input's rank %d", Described(weight).text,
                    input.dim());
  }
  if (input.dtype() != ScalarType::Float) return linalg::unsupported_dtype(ctx, input, "input");
  ET_CHECK_OK(linalg::check_dtype(ctx, weight, ScalarType::Float, "weight"));
  const int64_t spatial = input.dim() - 2;
  const bool two_d = spatial == 2;
  int64_t stride[2] = {1, 1}, padding[2] = {0, 0}, dilation[2] = {1, 1};
  ET_CHECK_OK(read_param(ctx, *args[3], spatial, 1, "stride", stride));
  ET_CHECK_OK(read_param(ctx, *args[4], spatial, 0, "padding", padding));
  ET_CHECK_OK(read_param(ctx, *args[5], spatial, 1, "dilation", dilation));
  const int64_t groups = args[8]->to_int();

  s->batch = input.size(0);
  s->cin = input.size(1);
  s->h = two_d ? input.size(2) : 1;
  s->w = input.size(input.dim() - 1);
  s->cout = weight.size(0);
  s->kh = two_d ? weight.size(2) : 1;
  s->kw = weight.size(weight.dim() - 1);
  s->sh = two_d ? stride[0] : 1;
  s->sw = stride[spatial - 1];
  s->ph = two_d ? padding[0] : 0;
  s->pw = padding[spatial - 1];
  s->dh = two_d ? dilation[0] : 1;
  s->dw = dilation[spatial - 1];
  if (groups < 1 || groups > linalg::kMaxSize || s->cin % groups != 0 || s->cout % groups != 0) {
    return ctx.fail(ErrorCode::InvalidArgument,
                    "groups is %lld; it must be >= 1 and divide both the input channels (%lld) and the output "
                    "channels (%lld)",
                    static_cast<long long>(groups), static_cast<long long>(s->cin), static_cast<long long>(s->cout));
  }
  s->groups = groups;
  s->cin_g = s->cin / groups;
  s->cout_g = s->cout / groups;
  if (weight.size(1) != s->cin_g) {
    return ctx.fail(ErrorCode::InvalidArgument,
                    "weight %s must have %lld input channels per group (input %s, groups %lld)",
                    Described(weight).text, static_cast<long long>(s->cin_g), Described(input).text,
                    static_cast<long long>(groups));
  }
  if (s->kh < 1 || s->kw < 1) {
    return ctx.fail(ErrorCode::InvalidArgument, "weight %s has an empty kernel window", Described(weight).text);
  }
  s->oh = out_extent(s->h, s->ph, s->dh, s->kh, s->sh);
  s->ow = out_extent(s->w, s->pw, s->dw, s->kw, s->sw);
  if (s->oh < 0 || s->ow < 0) {
    return ctx.fail(ErrorCode::InvalidArgument,
                    "the kernel of weight %s (dilated) is larger than input %s plus padding",
                    Described(weight).text, Described(input).text);
  }
  if (bias != nullptr) {
    ET_CHECK_OK(linalg::check_dtype(ctx, *bias, ScalarType::Float, "bias"));
    if (bias->dim() != 1 || bias->size(0) != s->cout) {
      return ctx.fail(ErrorCode::InvalidArgument, "bias %s must be 1-D with %lld values (the output channels)",
                      Described(*bias).text, static_cast<long long>(s->cout));
    }
  }
  return Error::ok();
}

// im2col of one (batch, group) slice, packed for sgemm: row k of the
// virtual column matrix is (input channel, kernel row, kernel col), column
// j is (output row, output col).
struct Im2col {
  const float* x;  // first input channel of the group
  int64_t h, w, kh, kw, sh, sw, ph, pw, dh, dw, ow;
};

void pack_im2col(const void* state, int64_t k0, int64_t kc, int64_t j0, int64_t nc, float* dst) {
  const Im2col& s = *static_cast<const Im2col*>(state);
  constexpr int kNR = gemm::kNR;
  const int64_t window = s.kh * s.kw;
  for (int64_t jr = 0; jr < nc; jr += kNR) {
    const int nr = static_cast<int>(nc - jr < kNR ? nc - jr : kNR);
    // Top-left input coordinate (before the kernel offset) of each column.
    int64_t ih0[kNR], iw0[kNR];
    for (int jj = 0; jj < kNR; ++jj) {
      const int64_t j = j0 + jr + (jj < nr ? jj : 0);
      ih0[jj] = (j / s.ow) * s.sh - s.ph;
      iw0[jj] = (j % s.ow) * s.sw - s.pw;
    }
    // When the columns share an output row they read one input row at
    // iw0[0] + kj * dw + jj * sw: eight consecutive pixels for stride 1.
    const bool one_row = nr == kNR && ih0[0] == ih0[kNR - 1];
    int64_t ci = k0 / window;
    int64_t r = k0 % window;
    int64_t ki = r / s.kw;
    int64_t kj = r % s.kw;
    for (int64_t p = 0; p < kc; ++p) {
      const float* plane = s.x + ci * s.h * s.w;
      float* d = dst + p * kNR;
      const int64_t dy = ki * s.dh;
      const int64_t dx = kj * s.dw;
      const int64_t ih = ih0[0] + dy;
      const int64_t iw = iw0[0] + dx;
      if (one_row && ih >= 0 && ih < s.h && iw >= 0 && iw + (kNR - 1) * s.sw < s.w) {
        const float* src = plane + ih * s.w + iw;
        if (s.sw == 1) {
          std::memcpy(d, src, sizeof(float) * kNR);
        } else {
          for (int jj = 0; jj < kNR; ++jj) d[jj] = src[jj * s.sw];
        }
      } else if (one_row && (ih < 0 || ih >= s.h)) {
        for (int jj = 0; jj < kNR; ++jj) d[jj] = 0.0f;
      } else {
        for (int jj = 0; jj < kNR; ++jj) {
          const int64_t y = ih0[jj] + dy;
          const int64_t x = iw0[jj] + dx;
          d[jj] = (jj < nr && y >= 0 && y < s.h && x >= 0 && x < s.w) ? plane[y * s.w + x] : 0.0f;
        }
      }
      if (++kj == s.kw) {
        kj = 0;
        if (++ki == s.kh) {
          ki = 0;
          ++ci;
        }
      }
    }
    dst += kc * kNR;
  }
}

// Output columns o in [0, ow) whose input column o * stride + offset lies in [0, w).
void valid_columns(int64_t w, int64_t ow, int64_t stride, int64_t offset, int64_t* lo, int64_t* hi) {
  *lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  const int64_t last = w - 1 - offset;  // largest o * stride allowed
  int64_t end = last < 0 ? 0 : last / stride + 1;
  if (end > ow) end = ow;
  *hi = end < *lo ? *lo : end;
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

// aten::convolution.out(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding,
//   SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups, *, Tensor(a!) out)
Error convolution_out(KernelContext& ctx, EValue** args) {
  ConvShape s = {};
  ET_CHECK_OK(parse(ctx, args, &s));
  const Tensor& input = args[0]->to_tensor();
  const Tensor& weight = args[1]->to_tensor();
  const float* bias = args[2]->is_none() ? nullptr : args[2]->to_tensor().data_as<const float>();
  Tensor& out = args[9]->to_tensor();
  ET_CHECK_OK(linalg::check_dtype(ctx, out, ScalarType::Float, "out"));
  if (input.dim() == 4) {
    const int64_t sizes[4] = {s.batch, s.cout, s.oh, s.ow};
    ET_CHECK_OK(linalg::resize(ctx, out, sizes, 4, "out"));
  } else {
    const int64_t sizes[3] = {s.batch, s.cout, s.ow};
    ET_CHECK_OK(linalg::resize(ctx, out, sizes, 3, "out"));
  }
  if (out.numel() == 0) return Error::ok();

  const float* x = input.data_as<const float>();
  const float* wt = weight.data_as<const float>();
  float* y = out.data_as<float>();
  if (s.cin_g == 1) {
    conv_depthwise(s, x, wt, bias, y);
    return Error::ok();
  }

  const int64_t in_plane = s.h * s.w;
  const int64_t out_plane = s.oh * s.ow;
  const int64_t k = s.cin_g * s.kh * s.kw;
  if (bias != nullptr) {
    for (int64_t n = 0; n < s.batch; ++n) {
      for (int64_t oc = 0; oc < s.cout; ++oc) {
        float* plane = y + (n * s.cout + oc) * out_plane;
        for (int64_t i = 0; i < out_plane; ++i) plane[i] = bias[oc];
      }
    }
  }
  const float beta = bias != nullptr ? 1.0f : 0.0f;
  const bool pointwise = s.kh == 1 && s.kw == 1 && s.sh == 1 && s.sw == 1 && s.ph == 0 && s.pw == 0;
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
        const Im2col state{xg, s.h, s.w, s.kh, s.kw, s.sh, s.sw, s.ph, s.pw, s.dh, s.dw, s.ow};
        gemm::sgemm(ws, s.cout_g, out_plane, k, 1.0f, a, gemm::BSource::packed_by(pack_im2col, &state), beta, c,
                    out_plane);
      }
    }
  }
  return Error::ok();
}

}  // namespace

Error register_convolution_kernels(KernelRegistry& r) {
  ET_REGISTER_KERNEL(r, "aten::convolution.out", "TTtLLLbLi|T", convolution_out);
  return Error::ok();
}

}  // namespace etmlir
