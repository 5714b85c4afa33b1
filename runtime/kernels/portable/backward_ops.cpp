// Backward kernels of the core set, as autograd puts them in training graphs:
// the gradients of convolution (1-D/2-D, groups, transposed), 2-D max, avg
// and adaptive avg pooling, dense embedding, layer norm and group norm.
//
// Every kernel computes in its data tensors' dtype (float32 or float64, and
// int64 for avg_pool2d_backward like PyTorch); all data tensors and outs
// share that dtype. Per-row sums (norm statistics, bias gradients)
// accumulate in double; sums down columns (layer norm's weight/bias
// gradients) in the dtype.
//
// output_mask (convolution/layer norm/group norm): an out whose gradient is
// not requested is neither resized nor written. PyTorch's functional op
// returns None there; its own out= overload cannot express that (it fails
// with "Expected out tensor to have dtype nullptr"), so untouched outs are
// this runtime's answer. Requested outs are resized to the gradient's shape.
//
// Convolution: a transposed convolution's gradients are those of the plain
// convolution from grad_output to input, so three routines over one plain
// geometry cover both: the forward product, the data gradient (col2im of
// W^T * dY) and the weight gradient (dY * im2col(X)^T). They run as GEMMs
// (gemm.h's sgemm for float32; a packed, register-blocked loop nest for
// float64) over im2col columns built one chunk of output positions at a time,
// so the column buffer stays bounded; 1x1/stride-1/unpadded kernels use the
// input itself as the column matrix, and depthwise groups (one input
// channel, few outputs) skip the GEMM for direct per-tap loops.
#include <cstring>

#include "gemm.h"
#include "kernel_util.h"
#include "generated/backward.h"

namespace etmlir {
namespace {

// Bound on stride/padding/dilation values and spatial sizes, so that every
// extent computed from them fits in int64.
constexpr int64_t kMaxParam = int64_t{1} << 30;
// Column buffers are cut to about this many bytes (fewer cache misses, less temp memory).
constexpr int64_t kColumnBytes = int64_t{8} << 20;

struct Desc {
  char text[96];
  explicit Desc(const Tensor& t) { t.describe(text, sizeof(text)); }
};

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
// floor(a / b) and ceil(a / b) for b > 0 and any a.
inline int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && (a < 0)); }
inline int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

Error check_floating(KernelContext& ctx, const Tensor& t, const char* name) {
  if (t.dtype() != ScalarType::Float && t.dtype() != ScalarType::Double) {
    return kutil::unsupported_dtype(ctx, name, t.dtype(), "float32, float64");
  }
  return Error::ok();
}

Error check_dtype(KernelContext& ctx, const Tensor& t, ScalarType dtype, const char* name) {
  if (t.dtype() != dtype) {
    return ctx.fail(ErrorCode::InvalidArgument, "%s %s must have dtype %s like the other data tensors", name,
                    Desc(t).text, dtype_name(dtype));
  }
  return Error::ok();
}

// Checks an out's dtype and resizes it to `sizes`.
Error prepare_out(KernelContext& ctx, Tensor& out, ScalarType dtype, const int64_t* sizes, int32_t dim,
                  const char* name) {
  ET_CHECK_OK(check_dtype(ctx, out, dtype, name));
  return kutil::resize_out(ctx, out, sizes, dim, name);
}

// An out shaped like `like`, zero-filled.
Error prepare_zeroed_out(KernelContext& ctx, Tensor& out, const Tensor& like, const char* name) {
  ET_CHECK_OK(prepare_out(ctx, out, like.dtype(), like.sizes(), like.dim(), name));
  if (out.nbytes() > 0) std::memset(out.mutable_data(), 0, out.nbytes());
  return Error::ok();
}

Error shape_mismatch(KernelContext& ctx, const Tensor& t, const char* name, const int64_t* sizes, int32_t dim) {
  char want[96];
  kutil::format_shape(want, sizeof(want), sizes, dim);
  return ctx.fail(ErrorCode::InvalidArgument, "%s %s must have shape %s", name, Desc(t).text, want);
}

Error check_shape(KernelContext& ctx, const Tensor& t, const char* name, const int64_t* sizes, int32_t dim) {
  bool same = t.dim() == dim;
  for (int32_t d = 0; same && d < dim; ++d) same = t.size(d) == sizes[d];
  return same ? Error::ok() : shape_mismatch(ctx, t, name, sizes, dim);
}

// A list of `n` per-spatial-dim values, or one value for all; an empty list
// means `empty_default` when given. Values lie in [min_value, kMaxParam].
Error read_list(KernelContext& ctx, Span<const int64_t> v, int64_t n, int64_t min_value, const char* name,
                int64_t* values, const int64_t* empty_default = nullptr) {
  if (v.empty() && empty_default != nullptr) {
    for (int64_t d = 0; d < n; ++d) values[d] = empty_default[d];
    return Error::ok();
  }
  if (v.size() != 1 && static_cast<int64_t>(v.size()) != n) {
    return ctx.fail(ErrorCode::InvalidArgument, "%s must have 1 or %lld values, got %zu", name,
                    static_cast<long long>(n), v.size());
  }
  for (int64_t d = 0; d < n; ++d) {
    const int64_t x = v[v.size() == 1 ? 0 : static_cast<size_t>(d)];
    if (x < min_value || x > kMaxParam) {
      return ctx.fail(ErrorCode::InvalidArgument, "%s[%lld] is %lld; it must be in [%lld, %lld]", name,
                      static_cast<long long>(d), static_cast<long long>(x), static_cast<long long>(min_value),
                      static_cast<long long>(kMaxParam));
    }
    values[d] = x;
  }
  return Error::ok();
}

Error read_mask(KernelContext& ctx, Span<const uint8_t> mask, bool want[3]) {
  if (mask.size() != 3) {
    return ctx.fail(ErrorCode::InvalidArgument, "output_mask must have 3 values, got %zu", mask.size());
  }
  for (int k = 0; k < 3; ++k) want[k] = mask[static_cast<size_t>(k)] != 0;
  return Error::ok();
}

// Sum of n values in double, four independent partial sums.
template <typename T>
double sum_row(const T* x, int64_t n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += static_cast<double>(x[i]);
    s1 += static_cast<double>(x[i + 1]);
    s2 += static_cast<double>(x[i + 2]);
    s3 += static_cast<double>(x[i + 3]);
  }
  for (; i < n; ++i) s0 += static_cast<double>(x[i]);
  return (s0 + s1) + (s2 + s3);
}

// Sums of x * y and of y over n values, in double.
template <typename T>
void dot_and_sum(const T* x, const T* y, int64_t n, double* xy, double* sy) {
  double a0 = 0, a1 = 0, b0 = 0, b1 = 0;
  int64_t i = 0;
  for (; i + 2 <= n; i += 2) {
    a0 += static_cast<double>(x[i]) * static_cast<double>(y[i]);
    a1 += static_cast<double>(x[i + 1]) * static_cast<double>(y[i + 1]);
    b0 += static_cast<double>(y[i]);
    b1 += static_cast<double>(y[i + 1]);
  }
  for (; i < n; ++i) {
    a0 += static_cast<double>(x[i]) * static_cast<double>(y[i]);
    b0 += static_cast<double>(y[i]);
  }
  *xy = a0 + a1;
  *sy = b0 + b1;
}

// ---------------------------------------------------------------------------
// Convolution
// ---------------------------------------------------------------------------

// A plain (not transposed) 2-D convolution Y = conv(X, W): X (n, c, h, w),
// W (o, c / groups, kh, kw), Y (n, o, oh, ow), where (oh, ow) may stop short
// of the full output extent (a transposed convolution's input). 1-D
// convolutions have h == kh == 1. The im2col matrix of one (batch, group) slice has rows() rows
// (input channel, kernel row, kernel col) and cols() columns (output row,
// output col).
struct ConvGeom {
  int64_t n, c, h, w;
  int64_t o, oh, ow;
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  int64_t groups, cg, og;  // channels of X and Y per group

  int64_t rows() const { return cg * kh * kw; }
  int64_t cols() const { return oh * ow; }
  // The im2col matrix is X's group slice itself.
  bool direct() const {
    return kh == 1 && kw == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0 && oh == h && ow == w;
  }
  bool empty() const { return n == 0 || og == 0 || cg == 0 || oh == 0 || ow == 0; }
};

// Output extent of a convolution along one dim, or -1 when the dilated
// kernel is larger than the padded input.
int64_t conv_extent(int64_t in, int64_t pad, int64_t dilation, int64_t kernel, int64_t stride) {
  const int64_t span = in + 2 * pad - dilation * (kernel - 1) - 1;
  return span < 0 ? -1 : span / stride + 1;
}

// The t in [0, n) for which (first + t) * stride + offset lies in [0, size).
inline void valid_range(int64_t first, int64_t n, int64_t stride, int64_t offset, int64_t size, int64_t* lo,
                        int64_t* hi) {
  *lo = min64(n, max64(0, ceil_div(-offset, stride) - first));
  *hi = max64(*lo, min64(n, ceil_div(size - offset, stride) - first));
}

// Visits the im2col entries of columns [p0, p0 + np) as runs along output
// columns: f(row, q, ih_row, base, lo, hi, n) where `row` is the column
// matrix row, q the first column of the run, `ih_row` the input row's offset
// in the group slice or -1 when the run lies in padding, and entry q + t
// reads input element ih_row + base + t * sw for t in [lo, hi) (padding
// elsewhere in [0, n)).
template <typename F>
void for_each_run(const ConvGeom& g, int64_t p0, int64_t np, F&& f) {
  for (int64_t c = 0; c < g.cg; ++c) {
    for (int64_t i = 0; i < g.kh; ++i) {
      for (int64_t j = 0; j < g.kw; ++j) {
        const int64_t row = (c * g.kh + i) * g.kw + j;
        const int64_t hoff = i * g.dh - g.ph, woff = j * g.dw - g.pw;
        int64_t q = 0, oh = p0 / g.ow, ow0 = p0 % g.ow;
        while (q < np) {
          const int64_t n = min64(g.ow - ow0, np - q);
          const int64_t ih = oh * g.sh + hoff;
          if (ih < 0 || ih >= g.h) {
            f(row, q, int64_t{-1}, int64_t{0}, n, n, n);
          } else {
            int64_t lo, hi;
            valid_range(ow0, n, g.sw, woff, g.w, &lo, &hi);
            f(row, q, (c * g.h + ih) * g.w, ow0 * g.sw + woff, lo, hi, n);
          }
          q += n;
          ow0 = 0;
          ++oh;
        }
      }
    }
  }
}

// col (rows() x np) = columns [p0, p0 + np) of im2col(x), x a group slice.
template <typename T>
void im2col(const ConvGeom& g, const T* x, int64_t p0, int64_t np, T* col) {
  const int64_t sw = g.sw;
  for_each_run(g, p0, np, [&](int64_t row, int64_t q, int64_t ih_row, int64_t base, int64_t lo, int64_t hi,
                              int64_t n) {
    T* dst = col + row * np + q;
    for (int64_t t = 0; t < lo; ++t) dst[t] = T(0);
    if (ih_row >= 0) {
      const T* src = x + ih_row + base;  // base + lo * sw >= 0: src[t * sw] is in range for t in [lo, hi)
      if (sw == 1) {
        for (int64_t t = lo; t < hi; ++t) dst[t] = src[t];
      } else {
        for (int64_t t = lo; t < hi; ++t) dst[t] = src[t * sw];
      }
    }
    for (int64_t t = hi; t < n; ++t) dst[t] = T(0);
  });
}

// x (a group slice) += col2im(col) for columns [p0, p0 + np).
template <typename T>
void col2im(const ConvGeom& g, const T* col, int64_t p0, int64_t np, T* x) {
  const int64_t sw = g.sw;
  for_each_run(g, p0, np, [&](int64_t row, int64_t q, int64_t ih_row, int64_t base, int64_t lo, int64_t hi,
                              int64_t) {
    if (ih_row < 0) return;
    const T* src = col + row * np + q;
    T* dst = x + ih_row + base;
    if (sw == 1) {
      for (int64_t t = lo; t < hi; ++t) dst[t] += src[t];
    } else {
      for (int64_t t = lo; t < hi; ++t) dst[t * sw] += src[t];
    }
  });
}

// A read-only strided matrix: element (r, c) is data[r * rs + c * cs].
template <typename T>
struct View {
  const T* data;
  int64_t rs, cs;
  T at(int64_t r, int64_t c) const { return data[r * rs + c * cs]; }
};

// C (m x n, row stride ldc) = A (m x k) * B (k x n) (+ C when accumulating).
template <typename T>
class Matmul;

template <>
class Matmul<float> {
 public:
  Matmul(KernelContext& ctx, int64_t m, int64_t n, int64_t k) : ws_(ctx, m, n, k) {}
  void run(int64_t m, int64_t n, int64_t k, View<float> a, View<float> b, bool accumulate, float* c, int64_t ldc) {
    if (m == 0 || n == 0) return;
    if (k == 0) {
      if (!accumulate) {
        for (int64_t i = 0; i < m; ++i) std::memset(c + i * ldc, 0, static_cast<size_t>(n) * sizeof(float));
      }
      return;
    }
    gemm::sgemm(ws_, m, n, k, 1.0f, gemm::MatrixView{a.data, a.rs, a.cs},
                gemm::BSource::matrix(gemm::MatrixView{b.data, b.rs, b.cs}), accumulate ? 1.0f : 0.0f, c, ldc);
  }

 private:
  gemm::Workspace ws_;
};

// float64: a small GotoBLAS-style loop nest. B is packed in blocks of
// kDKC x kDNC (kDNR-wide panels), A in kDMR-tall panels, and a kDMR x kDNR
// register block accumulates over a panel's depth (plain loops that GCC
// vectorizes at the SSE2 baseline). Packing buffers live on the stack.
constexpr int64_t kDMR = 4, kDNR = 4, kDKC = 128, kDNC = 16;

template <>
class Matmul<double> {
 public:
  Matmul(KernelContext&, int64_t, int64_t, int64_t) {}
  void run(int64_t m, int64_t n, int64_t k, View<double> a, View<double> b, bool accumulate, double* c,
           int64_t ldc) {
    if (m == 0 || n == 0) return;
    if (!accumulate) {
      for (int64_t i = 0; i < m; ++i) std::memset(c + i * ldc, 0, static_cast<size_t>(n) * sizeof(double));
    }
    for (int64_t j0 = 0; j0 < n; j0 += kDNC) {
      const int64_t nc = min64(kDNC, n - j0);
      for (int64_t p0 = 0; p0 < k; p0 += kDKC) {
        const int64_t kc = min64(kDKC, k - p0);
        pack_b(b, p0, kc, j0, nc);
        for (int64_t i0 = 0; i0 < m; i0 += kDMR) {
          const int64_t mr = min64(kDMR, m - i0);
          pack_a(a, i0, mr, p0, kc);
          for (int64_t q = 0; q < nc; q += kDNR) {
            double acc[kDMR][kDNR] = {};
            micro(kc, bp_ + q * kc, acc);
            const int64_t nr = min64(kDNR, nc - q);
            for (int64_t r = 0; r < mr; ++r) {
              double* cr = c + (i0 + r) * ldc + j0 + q;
              for (int64_t s = 0; s < nr; ++s) cr[s] += acc[r][s];
            }
          }
        }
      }
    }
  }

 private:
  // Panels of kDNR columns: element (p, j) of the block at bp_[(j / kDNR) * kc * kDNR + p * kDNR + j % kDNR].
  void pack_b(View<double> b, int64_t p0, int64_t kc, int64_t j0, int64_t nc) {
    for (int64_t q = 0; q < nc; q += kDNR) {
      double* dst = bp_ + q * kc;
      for (int64_t s = 0; s < kDNR; ++s) {
        if (q + s < nc) {
          const double* src = b.data + p0 * b.rs + (j0 + q + s) * b.cs;
          for (int64_t p = 0; p < kc; ++p) dst[p * kDNR + s] = src[p * b.rs];
        } else {
          for (int64_t p = 0; p < kc; ++p) dst[p * kDNR + s] = 0.0;
        }
      }
    }
  }
  void pack_a(View<double> a, int64_t i0, int64_t mr, int64_t p0, int64_t kc) {
    for (int64_t r = 0; r < kDMR; ++r) {
      if (r < mr) {
        const double* src = a.data + (i0 + r) * a.rs + p0 * a.cs;
        for (int64_t p = 0; p < kc; ++p) ap_[p * kDMR + r] = src[p * a.cs];
      } else {
        for (int64_t p = 0; p < kc; ++p) ap_[p * kDMR + r] = 0.0;
      }
    }
  }
  void micro(int64_t kc, const double* bp, double (&acc)[kDMR][kDNR]) const {
    for (int64_t p = 0; p < kc; ++p) {
      const double* av = ap_ + p * kDMR;
      const double* bv = bp + p * kDNR;
      for (int64_t r = 0; r < kDMR; ++r) {
        for (int64_t s = 0; s < kDNR; ++s) acc[r][s] += av[r] * bv[s];
      }
    }
  }

  alignas(64) double ap_[kDKC * kDMR];
  alignas(64) double bp_[kDKC * kDNC];
};

// A column buffer of g.rows() x chunk, chunk <= g.cols() as large as the
// budget and the temp allocator allow (at least 64 columns, or all of them
// when fewer); nullptr when even that is not available.
// Taken before the GEMM's packing space, which falls back to a stack buffer
// when the temp allocator has too little left.
template <typename T>
T* column_buffer(KernelContext& ctx, const ConvGeom& g, int64_t* chunk) {
  const int64_t rows = g.rows(), cols = g.cols();
  const int64_t least = min64(cols, 64);
  int64_t c = max64(least, min64(cols, kColumnBytes / static_cast<int64_t>(sizeof(T)) / rows));
  for (;;) {
    if (void* p = ctx.allocate_temp(static_cast<size_t>(rows * c) * sizeof(T))) {
      *chunk = c;
      return static_cast<T*>(p);
    }
    if (c == least) return nullptr;
    c = max64(least, c / 2);
  }
}

Error no_column_memory(KernelContext& ctx, const ConvGeom& g, size_t elem) {
  return ctx.fail(ErrorCode::OutOfMemory, "needs %lld bytes of temp memory for im2col columns; none left",
                  static_cast<long long>(g.rows() * min64(g.cols(), 64) * static_cast<int64_t>(elem)));
}

// Groups of one input channel and few output channels (depthwise): direct
// loops, one axpy or dot per kernel tap and output-row run, no columns and
// no GEMM (whose 1-row products would be all overhead). `f(xg, wo, yo)` gets
// each (batch, group, output channel)'s input plane, weights and output plane.
template <typename X, typename W, typename Y, typename F>
void depthwise_planes(const ConvGeom& g, X* x, W* w, Y* y, F&& f) {
  const int64_t P = g.cols(), taps = g.kh * g.kw;
  for (int64_t b = 0; b < g.n; ++b) {
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      for (int64_t o = 0; o < g.og; ++o) {
        const int64_t oc = grp * g.og + o;
        f(x + (b * g.c + grp) * g.h * g.w, w + oc * taps, y + (b * g.o + oc) * P);
      }
    }
  }
}

constexpr int64_t kDepthwiseMaxOutputs = 4;  // output channels per group for the direct path

bool use_depthwise(const ConvGeom& g) { return g.cg == 1 && g.og <= kDepthwiseMaxOutputs; }

// Y += conv(X, W).
template <typename T>
void depthwise_forward(const ConvGeom& g, const T* x, const T* w, T* y) {
  const int64_t sw = g.sw;
  depthwise_planes(g, x, w, y, [&](const T* xg, const T* wo, T* yo) {
    for_each_run(g, 0, g.cols(), [&](int64_t tap, int64_t q, int64_t ih_row, int64_t base, int64_t lo, int64_t hi,
                                     int64_t) {
      if (ih_row < 0) return;
      const T wv = wo[tap];
      const T* src = xg + ih_row + base;
      T* dst = yo + q;
      if (sw == 1) {
        for (int64_t t = lo; t < hi; ++t) dst[t] += wv * src[t];
      } else {
        for (int64_t t = lo; t < hi; ++t) dst[t] += wv * src[t * sw];
      }
    });
  });
}

// X += conv^T(Y, W).
template <typename T>
void depthwise_data_grad(const ConvGeom& g, const T* y, const T* w, T* x) {
  const int64_t sw = g.sw;
  depthwise_planes(g, x, w, y, [&](T* xg, const T* wo, const T* yo) {
    for_each_run(g, 0, g.cols(), [&](int64_t tap, int64_t q, int64_t ih_row, int64_t base, int64_t lo, int64_t hi,
                                     int64_t) {
      if (ih_row < 0) return;
      const T wv = wo[tap];
      const T* src = yo + q;
      T* dst = xg + ih_row + base;
      if (sw == 1) {
        for (int64_t t = lo; t < hi; ++t) dst[t] += wv * src[t];
      } else {
        for (int64_t t = lo; t < hi; ++t) dst[t * sw] += wv * src[t];
      }
    });
  });
}

// W += sum over the batch of Y x im2col(X).
template <typename T>
void depthwise_weight_grad(const ConvGeom& g, const T* x, const T* y, T* w) {
  const int64_t sw = g.sw;
  depthwise_planes(g, x, w, y, [&](const T* xg, T* wo, const T* yo) {
    for_each_run(g, 0, g.cols(), [&](int64_t tap, int64_t q, int64_t ih_row, int64_t base, int64_t lo, int64_t hi,
                                     int64_t) {
      if (ih_row < 0) return;
      const T* a = xg + ih_row + base;
      const T* b = yo + q;
      double s = 0;
      for (int64_t t = lo; t < hi; ++t) s += static_cast<double>(a[t * sw]) * static_cast<double>(b[t]);
      wo[tap] += static_cast<T>(s);
    });
  });
}

// Y = conv(X, W); Y must be zeroed (the depthwise path accumulates).
template <typename T>
Error conv_forward(KernelContext& ctx, const ConvGeom& g, const T* x, const T* w, T* y) {
  if (use_depthwise(g)) return depthwise_forward(g, x, w, y), Error::ok();
  const int64_t K = g.rows(), P = g.cols();
  int64_t chunk = P;
  T* col = nullptr;
  if (!g.direct()) {
    col = column_buffer<T>(ctx, g, &chunk);
    if (col == nullptr) return no_column_memory(ctx, g, sizeof(T));
  }
  Matmul<T> mm(ctx, g.og, P, K);
  for (int64_t b = 0; b < g.n; ++b) {
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const T* xg = x + (b * g.c + grp * g.cg) * g.h * g.w;
      const T* wg = w + grp * g.og * K;
      T* yg = y + (b * g.o + grp * g.og) * P;
      for (int64_t p0 = 0; p0 < P; p0 += chunk) {
        const int64_t np = min64(chunk, P - p0);
        View<T> cols{xg + p0, P, 1};
        if (!g.direct()) {
          im2col(g, xg, p0, np, col);
          cols = View<T>{col, np, 1};
        }
        mm.run(g.og, np, K, View<T>{wg, K, 1}, cols, false, yg + p0, P);
      }
    }
  }
  return Error::ok();
}

// X = conv^T(Y, W), the gradient of conv(X, W) w.r.t. X; X must be zeroed.
template <typename T>
Error conv_data_grad(KernelContext& ctx, const ConvGeom& g, const T* y, const T* w, T* x) {
  if (use_depthwise(g)) return depthwise_data_grad(g, y, w, x), Error::ok();
  const int64_t K = g.rows(), P = g.cols();
  int64_t chunk = P;
  T* col = nullptr;
  if (!g.direct()) {
    col = column_buffer<T>(ctx, g, &chunk);
    if (col == nullptr) return no_column_memory(ctx, g, sizeof(T));
  }
  Matmul<T> mm(ctx, K, P, g.og);
  for (int64_t b = 0; b < g.n; ++b) {
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      T* xg = x + (b * g.c + grp * g.cg) * g.h * g.w;
      const T* wg = w + grp * g.og * K;
      const T* yg = y + (b * g.o + grp * g.og) * P;
      const View<T> wt{wg, 1, K};  // W_g^T: K x og
      for (int64_t p0 = 0; p0 < P; p0 += chunk) {
        const int64_t np = min64(chunk, P - p0);
        if (g.direct()) {
          mm.run(K, np, g.og, wt, View<T>{yg + p0, P, 1}, false, xg + p0, P);
        } else {
          mm.run(K, np, g.og, wt, View<T>{yg + p0, P, 1}, false, col, np);
          col2im(g, col, p0, np, xg);
        }
      }
    }
  }
  return Error::ok();
}

// W = sum over the batch of Y_g * im2col(X_g)^T, the gradient of conv(X, W)
// w.r.t. W; W must be zeroed.
template <typename T>
Error conv_weight_grad(KernelContext& ctx, const ConvGeom& g, const T* x, const T* y, T* w) {
  if (use_depthwise(g)) return depthwise_weight_grad(g, x, y, w), Error::ok();
  const int64_t K = g.rows(), P = g.cols();
  int64_t chunk = P;
  T* col = nullptr;
  if (!g.direct()) {
    col = column_buffer<T>(ctx, g, &chunk);
    if (col == nullptr) return no_column_memory(ctx, g, sizeof(T));
  }
  Matmul<T> mm(ctx, g.og, K, P);
  for (int64_t b = 0; b < g.n; ++b) {
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const T* xg = x + (b * g.c + grp * g.cg) * g.h * g.w;
      T* wg = w + grp * g.og * K;
      const T* yg = y + (b * g.o + grp * g.og) * P;
      for (int64_t p0 = 0; p0 < P; p0 += chunk) {
        const int64_t np = min64(chunk, P - p0);
        View<T> cols_t{xg + p0, 1, P};  // im2col^T: np x K
        if (!g.direct()) {
          im2col(g, xg, p0, np, col);
          cols_t = View<T>{col, 1, np};
        }
        mm.run(g.og, K, np, View<T>{yg + p0, P, 1}, cols_t, true, wg, K);
      }
    }
  }
  return Error::ok();
}

// out[c] = sum of y[n, c, :] over the batch.
template <typename T>
void channel_sums(const T* y, int64_t n, int64_t c, int64_t p, T* out) {
  for (int64_t ch = 0; ch < c; ++ch) {
    double s = 0;
    for (int64_t b = 0; b < n; ++b) s += sum_row(y + (b * c + ch) * p, p);
    out[ch] = static_cast<T>(s);
  }
}

// The spatial sizes (dims 2.. of a 3-D or 4-D tensor) as (h, w), h = 1 for 1-D.
void spatial_hw(const Tensor& t, int64_t* h, int64_t* w) {
  *h = t.dim() == 4 ? t.size(2) : 1;
  *w = t.size(t.dim() - 1);
}

}  // namespace

namespace portable {

Error convolution_backward_out(KernelContext& ctx, const Tensor& grad_output, const Tensor& input,
                               const Tensor& weight, std::optional<Span<const int64_t>> bias_sizes,
                               Span<const int64_t> stride, Span<const int64_t> padding, Span<const int64_t> dilation,
                               bool transposed, Span<const int64_t> output_padding, int64_t groups,
                               Span<const uint8_t> output_mask, Tensor& out0, Tensor& out1, Tensor& out2) {
  (void)bias_sizes;  // PyTorch only uses it to tell that a bias exists; output_mask[2] decides here
  bool want[3];
  ET_CHECK_OK(read_mask(ctx, output_mask, want));
  ET_CHECK_OK(check_floating(ctx, input, "input"));
  const ScalarType dtype = input.dtype();
  ET_CHECK_OK(check_dtype(ctx, grad_output, dtype, "grad_output"));
  ET_CHECK_OK(check_dtype(ctx, weight, dtype, "weight"));
  const int32_t dim = input.dim();
  if (dim != 3 && dim != 4) {
    return ctx.fail(ErrorCode::NotSupported, "input %s must be 3-D (N, C, L) or 4-D (N, C, H, W)", Desc(input).text);
  }
  if (weight.dim() != dim) {
    return ctx.fail(ErrorCode::InvalidArgument, "weight %s must have the input's rank %d", Desc(weight).text, dim);
  }
  const int64_t spatial = dim - 2;
  int64_t st[2] = {1, 1}, pd[2] = {0, 0}, dl[2] = {1, 1}, op[2] = {0, 0};
  ET_CHECK_OK(read_list(ctx, stride, spatial, 1, "stride", st));
  ET_CHECK_OK(read_list(ctx, padding, spatial, 0, "padding", pd));
  ET_CHECK_OK(read_list(ctx, dilation, spatial, 1, "dilation", dl));
  if (transposed) ET_CHECK_OK(read_list(ctx, output_padding, spatial, 0, "output_padding", op));
  if (groups < 1 || groups > kMaxParam) {
    return ctx.fail(ErrorCode::InvalidArgument, "groups is %lld; it must be >= 1", static_cast<long long>(groups));
  }
  for (int32_t d = 2; d < dim; ++d) {
    if (input.size(d) > kMaxParam || weight.size(d) > kMaxParam) {
      return ctx.fail(ErrorCode::NotSupported, "input %s or weight %s has a spatial size above %lld",
                      Desc(input).text, Desc(weight).text, static_cast<long long>(kMaxParam));
    }
  }
  const bool two_d = spatial == 2;
  const int64_t batch = input.size(0), cin = input.size(1);
  int64_t h, w, kh, kw;
  spatial_hw(input, &h, &w);
  spatial_hw(weight, &kh, &kw);
  // Parameters of the H dim (identity for 1-D) and the W dim.
  const int64_t sh = two_d ? st[0] : 1, ph = two_d ? pd[0] : 0, dh = two_d ? dl[0] : 1, oph = two_d ? op[0] : 0;
  const int64_t sw = st[spatial - 1], pw = pd[spatial - 1], dw = dl[spatial - 1], opw = op[spatial - 1];
  if (kh < 1 || kw < 1) {
    return ctx.fail(ErrorCode::InvalidArgument, "weight %s has an empty kernel window", Desc(weight).text);
  }
  if (cin % groups != 0 || weight.size(0) % groups != 0) {
    return ctx.fail(ErrorCode::InvalidArgument,
                    "groups %lld must divide the input channels of input %s and dim 0 of weight %s",
                    static_cast<long long>(groups), Desc(input).text, Desc(weight).text);
  }

  ConvGeom g;
  int64_t cout, gy_h, gy_w;
  if (!transposed) {
    // input (N, Cin, H, W) -> grad_output (N, Cout, OH, OW); weight (Cout, Cin / groups, kh, kw).
    cout = weight.size(0);
    if (weight.size(1) != cin / groups) {
      return ctx.fail(ErrorCode::InvalidArgument, "weight %s must have %lld input channels per group (input %s)",
                      Desc(weight).text, static_cast<long long>(cin / groups), Desc(input).text);
    }
    gy_h = conv_extent(h, ph, dh, kh, sh);
    gy_w = conv_extent(w, pw, dw, kw, sw);
    if (gy_h < 0 || gy_w < 0) {
      return ctx.fail(ErrorCode::InvalidArgument,
                      "the dilated kernel of weight %s is larger than input %s plus padding", Desc(weight).text,
                      Desc(input).text);
    }
    g = ConvGeom{batch, cin, h, w, cout, gy_h, gy_w, kh, kw, sh, sw, ph, pw, dh, dw, groups, cin / groups,
                 cout / groups};
  } else {
    // input (N, Cin, H, W) -> grad_output (N, Cout, HY, WY); weight (Cin, Cout / groups, kh, kw). Its gradients
    // are those of the plain convolution grad_output -> input with the same weight.
    if (weight.size(0) != cin) {
      return ctx.fail(ErrorCode::InvalidArgument,
                      "weight %s of a transposed convolution must have %lld rows (input %s)", Desc(weight).text,
                      static_cast<long long>(cin), Desc(input).text);
    }
    if ((oph >= sh && oph >= dh) || (opw >= sw && opw >= dw)) {
      return ctx.fail(ErrorCode::InvalidArgument, "output_padding must be smaller than either stride or dilation");
    }
    cout = weight.size(1) * groups;
    gy_h = (h - 1) * sh - 2 * ph + dh * (kh - 1) + oph + 1;
    gy_w = (w - 1) * sw - 2 * pw + dw * (kw - 1) + opw + 1;
    if (gy_h < 1 || gy_w < 1 || h < 1 || w < 1) {
      return ctx.fail(ErrorCode::InvalidArgument,
                      "transposed convolution of input %s with weight %s has an empty output", Desc(input).text,
                      Desc(weight).text);
    }
    g = ConvGeom{batch, cout, gy_h, gy_w, cin, h, w, kh, kw, sh, sw, ph, pw, dh, dw, groups, weight.size(1),
                 cin / groups};
    // With output_padding >= stride (allowed when < dilation) the plain convolution has outputs past
    // (h, w): they belong to no input element and are never computed.
  }
  const int64_t gy_sizes[4] = {batch, cout, two_d ? gy_h : gy_w, gy_w};
  ET_CHECK_OK(check_shape(ctx, grad_output, "grad_output", gy_sizes, dim));

  if (want[0]) ET_CHECK_OK(prepare_zeroed_out(ctx, out0, input, "out0"));
  if (want[1]) ET_CHECK_OK(prepare_zeroed_out(ctx, out1, weight, "out1"));
  if (want[2]) {
    const int64_t bias_shape[1] = {cout};
    ET_CHECK_OK(prepare_out(ctx, out2, dtype, bias_shape, 1, "out2"));
  }

  Error err;
  kutil::dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* gy = grad_output.data_as<const T>();
    const T* x = input.data_as<const T>();
    const T* wt = weight.data_as<const T>();
    if (want[0] && !err && !g.empty()) {
      err = transposed ? conv_forward(ctx, g, gy, wt, out0.data_as<T>())
                       : conv_data_grad(ctx, g, gy, wt, out0.data_as<T>());
    }
    if (want[1] && !err && !g.empty()) {
      err = transposed ? conv_weight_grad(ctx, g, gy, x, out1.data_as<T>())
                       : conv_weight_grad(ctx, g, x, gy, out1.data_as<T>());
    }
    if (want[2]) channel_sums(gy, batch, cout, gy_h * gy_w, out2.data_as<T>());
  });
  return err;
}

}  // namespace portable

// ---------------------------------------------------------------------------
// 2-D pooling
// ---------------------------------------------------------------------------

namespace {

// self (N, C, H, W) or (C, H, W) pooled to (.., oh, ow); planes = N * C.
struct Pool2d {
  int64_t planes, h, w, oh, ow;
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
};

// PyTorch's pooling_output_shape.
int64_t pool_extent(int64_t in, int64_t kernel, int64_t pad, int64_t stride, int64_t dilation, bool ceil_mode) {
  int64_t out = floor_div(in + 2 * pad - dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0), stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

// Checks self and grad_output against the pooling parameters (PyTorch's
// pool2d_shape_check); `dilation` is empty for avg pooling.
Error parse_pool(KernelContext& ctx, const Tensor& grad_output, const Tensor& self, Span<const int64_t> kernel_size,
                 Span<const int64_t> stride, Span<const int64_t> padding, const Span<const int64_t>* dilation,
                 bool ceil_mode, Pool2d* p) {
  if (self.dim() != 3 && self.dim() != 4) {
    return ctx.fail(ErrorCode::InvalidArgument, "self %s must be 3-D (C, H, W) or 4-D (N, C, H, W)", Desc(self).text);
  }
  const int32_t dim = self.dim();
  int64_t k[2], s[2], pd[2], dl[2] = {1, 1};
  ET_CHECK_OK(read_list(ctx, kernel_size, 2, 1, "kernel_size", k));
  ET_CHECK_OK(read_list(ctx, stride, 2, 1, "stride", s, k));
  ET_CHECK_OK(read_list(ctx, padding, 2, 0, "padding", pd));
  if (dilation != nullptr) ET_CHECK_OK(read_list(ctx, *dilation, 2, 1, "dilation", dl));
  if (pd[0] > k[0] / 2 || pd[1] > k[1] / 2) {
    return ctx.fail(ErrorCode::InvalidArgument,
                    "padding (%lld, %lld) must be at most half of kernel_size (%lld, %lld)",
                    static_cast<long long>(pd[0]), static_cast<long long>(pd[1]), static_cast<long long>(k[0]),
                    static_cast<long long>(k[1]));
  }
  const int64_t h = self.size(dim - 2), w = self.size(dim - 1);
  if (h < 1 || w < 1 || h > kMaxParam || w > kMaxParam) {
    return ctx.fail(ErrorCode::InvalidArgument, "self %s must have spatial sizes in [1, %lld]", Desc(self).text,
                    static_cast<long long>(kMaxParam));
  }
  const int64_t oh = pool_extent(h, k[0], pd[0], s[0], dl[0], ceil_mode);
  const int64_t ow = pool_extent(w, k[1], pd[1], s[1], dl[1], ceil_mode);
  if (oh < 1 || ow < 1) {
    return ctx.fail(ErrorCode::InvalidArgument, "self %s pools to an empty %lld x %lld output", Desc(self).text,
                    static_cast<long long>(oh), static_cast<long long>(ow));
  }
  int64_t want[4];
  for (int32_t d = 0; d < dim - 2; ++d) want[d] = self.size(d);
  want[dim - 2] = oh;
  want[dim - 1] = ow;
  ET_CHECK_OK(check_shape(ctx, grad_output, "grad_output", want, dim));
  *p = Pool2d{self.numel() / (h * w), h, w, oh, ow, k[0], k[1], s[0], s[1], pd[0], pd[1], dl[0], dl[1]};
  return Error::ok();
}

template <typename T, typename I>
Error max_pool_scatter(KernelContext& ctx, const Pool2d& p, const T* gy, const I* indices, T* gx) {
  const int64_t hw = p.h * p.w, ohw = p.oh * p.ow;
  for (int64_t plane = 0; plane < p.planes; ++plane) {
    const T* g = gy + plane * ohw;
    const I* ind = indices + plane * ohw;
    T* o = gx + plane * hw;
    for (int64_t q = 0; q < ohw; ++q) {
      const int64_t k = static_cast<int64_t>(ind[q]);
      if (k < 0 || k >= hw) {
        return ctx.fail(ErrorCode::InvalidArgument,
                        "indices holds %lld at flat position %lld; it must index the %lld x %lld input plane",
                        static_cast<long long>(k), static_cast<long long>(plane * ohw + q),
                        static_cast<long long>(p.h), static_cast<long long>(p.w));
      }
      o[k] += g[q];
    }
  }
  return Error::ok();
}

template <typename T>
void avg_pool_scatter(const Pool2d& p, bool count_include_pad, std::optional<int64_t> divisor_override, const T* gy,
                      T* gx) {
  const int64_t hw = p.h * p.w, ohw = p.oh * p.ow;
  for (int64_t plane = 0; plane < p.planes; ++plane) {
    const T* g = gy + plane * ohw;
    T* o = gx + plane * hw;
    for (int64_t oh = 0; oh < p.oh; ++oh) {
      int64_t h0 = oh * p.sh - p.ph;
      int64_t h1 = min64(h0 + p.kh, p.h + p.ph);
      const int64_t pool_h = h1 - h0;
      h0 = max64(h0, 0);
      h1 = min64(h1, p.h);
      for (int64_t ow = 0; ow < p.ow; ++ow) {
        int64_t w0 = ow * p.sw - p.pw;
        int64_t w1 = min64(w0 + p.kw, p.w + p.pw);
        const int64_t pool_size = pool_h * (w1 - w0);
        w0 = max64(w0, 0);
        w1 = min64(w1, p.w);
        const int64_t divisor = divisor_override ? *divisor_override
                                : count_include_pad ? pool_size
                                                    : (h1 - h0) * (w1 - w0);
        if (divisor == 0) continue;  // unreachable after parse_pool; keeps integer division defined
        const T delta = g[oh * p.ow + ow] / static_cast<T>(divisor);
        for (int64_t ih = h0; ih < h1; ++ih) {
          T* r = o + ih * p.w;
          for (int64_t iw = w0; iw < w1; ++iw) r[iw] += delta;
        }
      }
    }
  }
}

// PyTorch's adaptive pooling windows: [start, end) of output index a of b over c inputs.
inline int64_t adaptive_start(int64_t a, int64_t b, int64_t c) { return (a / b) * c + ((a % b) * c) / b; }
inline int64_t adaptive_end(int64_t a, int64_t b, int64_t c) { return 1 + ((a + 1) * c - 1) / b; }

}  // namespace

namespace portable {

Error max_pool2d_with_indices_backward_out(KernelContext& ctx, const Tensor& grad_output, const Tensor& self,
                                           Span<const int64_t> kernel_size, Span<const int64_t> stride,
                                           Span<const int64_t> padding, Span<const int64_t> dilation, bool ceil_mode,
                                           const Tensor& indices, Tensor& grad_input) {
  ET_CHECK_OK(check_floating(ctx, self, "self"));
  ET_CHECK_OK(check_dtype(ctx, grad_output, self.dtype(), "grad_output"));
  if (indices.dtype() != ScalarType::Int64 && indices.dtype() != ScalarType::Int32) {
    return kutil::unsupported_dtype(ctx, "indices", indices.dtype(), "int64, int32");
  }
  Pool2d p;
  ET_CHECK_OK(parse_pool(ctx, grad_output, self, kernel_size, stride, padding, &dilation, ceil_mode, &p));
  ET_CHECK_OK(check_shape(ctx, indices, "indices", grad_output.sizes(), grad_output.dim()));
  ET_CHECK_OK(prepare_zeroed_out(ctx, grad_input, self, "grad_input"));
  Error err;
  kutil::dispatch_floating(self.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* gy = grad_output.data_as<const T>();
    T* gx = grad_input.data_as<T>();
    err = indices.dtype() == ScalarType::Int64
              ? max_pool_scatter(ctx, p, gy, indices.data_as<const int64_t>(), gx)
              : max_pool_scatter(ctx, p, gy, indices.data_as<const int32_t>(), gx);
  });
  return err;
}

Error avg_pool2d_backward_out(KernelContext& ctx, const Tensor& grad_output, const Tensor& self,
                              Span<const int64_t> kernel_size, Span<const int64_t> stride,
                              Span<const int64_t> padding, bool ceil_mode, bool count_include_pad,
                              std::optional<int64_t> divisor_override, Tensor& grad_input) {
  const ScalarType dtype = self.dtype();
  if (dtype != ScalarType::Float && dtype != ScalarType::Double && dtype != ScalarType::Int64) {
    return kutil::unsupported_dtype(ctx, "self", dtype, "float32, float64, int64");
  }
  ET_CHECK_OK(check_dtype(ctx, grad_output, dtype, "grad_output"));
  if (divisor_override && *divisor_override == 0) {
    return ctx.fail(ErrorCode::InvalidArgument, "divisor_override must not be zero");
  }
  Pool2d p;
  ET_CHECK_OK(parse_pool(ctx, grad_output, self, kernel_size, stride, padding, nullptr, ceil_mode, &p));
  ET_CHECK_OK(prepare_zeroed_out(ctx, grad_input, self, "grad_input"));
  kutil::dispatch_real(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, int32_t>) {
      avg_pool_scatter(p, count_include_pad, divisor_override, grad_output.data_as<const T>(), grad_input.data_as<T>());
    }
  });
  return Error::ok();
}

Error adaptive_avg_pool2d_backward_out(KernelContext& ctx, const Tensor& grad_output, const Tensor& self,
                                       Tensor& out) {
  ET_CHECK_OK(check_floating(ctx, self, "self"));
  ET_CHECK_OK(check_dtype(ctx, grad_output, self.dtype(), "grad_output"));
  const int32_t dim = self.dim();
  if (dim != 3 && dim != 4) {
    return ctx.fail(ErrorCode::InvalidArgument, "self %s must be 3-D (C, H, W) or 4-D (N, C, H, W)", Desc(self).text);
  }
  bool ok = grad_output.dim() == dim;
  for (int32_t d = 0; ok && d < dim - 2; ++d) ok = grad_output.size(d) == self.size(d);
  if (!ok) {
    return ctx.fail(ErrorCode::InvalidArgument, "grad_output %s must have self %s's rank and leading dims",
                    Desc(grad_output).text, Desc(self).text);
  }
  const int64_t h = self.size(dim - 2), w = self.size(dim - 1);
  const int64_t oh = grad_output.size(dim - 2), ow = grad_output.size(dim - 1);
  if (h > kMaxParam || w > kMaxParam || oh > kMaxParam || ow > kMaxParam) {
    return ctx.fail(ErrorCode::NotSupported, "spatial sizes above %lld are not supported",
                    static_cast<long long>(kMaxParam));
  }
  ET_CHECK_OK(prepare_zeroed_out(ctx, out, self, "out"));
  if (h == 0 || w == 0 || oh == 0 || ow == 0) return Error::ok();
  const int64_t planes = self.numel() / (h * w);
  kutil::dispatch_floating(self.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* gy = grad_output.data_as<const T>();
    T* gx = out.data_as<T>();
    for (int64_t plane = 0; plane < planes; ++plane) {
      const T* g = gy + plane * oh * ow;
      T* o = gx + plane * h * w;
      for (int64_t i = 0; i < oh; ++i) {
        const int64_t h0 = adaptive_start(i, oh, h), h1 = adaptive_end(i, oh, h);
        for (int64_t j = 0; j < ow; ++j) {
          const int64_t w0 = adaptive_start(j, ow, w), w1 = adaptive_end(j, ow, w);
          // Two divisions, in this order, like PyTorch.
          const T delta = g[i * ow + j] / static_cast<T>(h1 - h0) / static_cast<T>(w1 - w0);
          for (int64_t ih = h0; ih < h1; ++ih) {
            T* r = o + ih * w;
            for (int64_t iw = w0; iw < w1; ++iw) r[iw] += delta;
          }
        }
      }
    }
  });
  return Error::ok();
}

}  // namespace portable

// ---------------------------------------------------------------------------
// Embedding
// ---------------------------------------------------------------------------

namespace {

// Checks every index (other than padding_idx) is in [0, num_weights); counts
// their occurrences into `counts` when given.
template <typename I>
Error check_embedding_indices(KernelContext& ctx, const I* idx, int64_t m, int64_t num_weights, int64_t padding_idx,
                              int64_t* counts) {
  for (int64_t i = 0; i < m; ++i) {
    const int64_t k = static_cast<int64_t>(idx[i]);
    if (k == padding_idx) continue;
    if (k < 0 || k >= num_weights) {
      return ctx.fail(ErrorCode::InvalidArgument, "indices holds %lld at flat position %lld; num_weights is %lld",
                      static_cast<long long>(k), static_cast<long long>(i), static_cast<long long>(num_weights));
    }
    if (counts != nullptr) ++counts[k];
  }
  return Error::ok();
}

template <typename T, typename I>
void embedding_scatter(const T* grad, const I* idx, int64_t m, int64_t d, int64_t padding_idx, const int64_t* counts,
                       T* out) {
  for (int64_t i = 0; i < m; ++i) {
    const int64_t k = static_cast<int64_t>(idx[i]);
    if (k == padding_idx) continue;
    const T* g = grad + i * d;
    T* o = out + k * d;
    if (counts != nullptr) {
      const T scale = T(1) / static_cast<T>(counts[k]);
      for (int64_t j = 0; j < d; ++j) o[j] += scale * g[j];
    } else {
      for (int64_t j = 0; j < d; ++j) o[j] += g[j];
    }
  }
}

}  // namespace

namespace portable {

Error embedding_dense_backward_out(KernelContext& ctx, const Tensor& grad_output, const Tensor& indices,
                                   int64_t num_weights, int64_t padding_idx, bool scale_grad_by_freq, Tensor& out) {
  ET_CHECK_OK(check_floating(ctx, grad_output, "grad_output"));
  if (indices.dtype() != ScalarType::Int64 && indices.dtype() != ScalarType::Int32) {
    return kutil::unsupported_dtype(ctx, "indices", indices.dtype(), "int64, int32");
  }
  if (grad_output.dim() < 1) {
    return ctx.fail(ErrorCode::InvalidArgument, "grad_output %s must have the embedding dim last",
                    Desc(grad_output).text);
  }
  const int64_t d = grad_output.size(grad_output.dim() - 1);
  const int64_t m = indices.numel();
  if ((d == 0 && grad_output.numel() != 0) || (d != 0 && grad_output.numel() / d != m)) {
    return ctx.fail(ErrorCode::InvalidArgument, "grad_output %s must hold one row of %lld values per index of %s",
                    Desc(grad_output).text, static_cast<long long>(d), Desc(indices).text);
  }
  if (num_weights < 0) {
    return ctx.fail(ErrorCode::InvalidArgument, "num_weights is %lld; it must be >= 0",
                    static_cast<long long>(num_weights));
  }
  int64_t* counts = nullptr;
  if (scale_grad_by_freq && num_weights > 0) {
    counts = static_cast<int64_t*>(ctx.allocate_temp(static_cast<size_t>(num_weights) * sizeof(int64_t)));
    if (counts == nullptr) {
      return ctx.fail(ErrorCode::OutOfMemory, "scale_grad_by_freq needs %lld bytes of temp memory; none left",
                      static_cast<long long>(num_weights) * 8);
    }
    std::memset(counts, 0, static_cast<size_t>(num_weights) * sizeof(int64_t));
  }
  if (indices.dtype() == ScalarType::Int64) {
    ET_CHECK_OK(check_embedding_indices(ctx, indices.data_as<const int64_t>(), m, num_weights, padding_idx, counts));
  } else {
    ET_CHECK_OK(check_embedding_indices(ctx, indices.data_as<const int32_t>(), m, num_weights, padding_idx, counts));
  }
  const int64_t sizes[2] = {num_weights, d};
  ET_CHECK_OK(prepare_out(ctx, out, grad_output.dtype(), sizes, 2, "out"));
  if (out.nbytes() > 0) std::memset(out.mutable_data(), 0, out.nbytes());
  kutil::dispatch_floating(grad_output.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* g = grad_output.data_as<const T>();
    if (indices.dtype() == ScalarType::Int64) {
      embedding_scatter(g, indices.data_as<const int64_t>(), m, d, padding_idx, counts, out.data_as<T>());
    } else {
      embedding_scatter(g, indices.data_as<const int32_t>(), m, d, padding_idx, counts, out.data_as<T>());
    }
  });
  return Error::ok();
}

}  // namespace portable

// ---------------------------------------------------------------------------
// Layer norm and group norm
// ---------------------------------------------------------------------------

namespace {

Error check_numel(KernelContext& ctx, const Tensor& t, const char* name, int64_t numel, const char* what) {
  if (t.numel() != numel) {
    return ctx.fail(ErrorCode::InvalidArgument, "%s %s must hold %lld values (%s)", name, Desc(t).text,
                    static_cast<long long>(numel), what);
  }
  return Error::ok();
}

// dx = rstd * (dy * gamma) + b * x + c over one row of n values, with the
// row's sums ds = sum(dy * gamma * x) and db = sum(dy * gamma) (PyTorch's
// LayerNormBackward formula).
template <typename T>
void layer_norm_row(const T* dy, const T* x, const T* gamma, int64_t n, double mean, double rstd, T* dx) {
  double ds = 0, db = 0;
  if (gamma != nullptr) {
    for (int64_t j = 0; j < n; ++j) {
      const double gj = static_cast<double>(dy[j]) * static_cast<double>(gamma[j]);
      ds += gj * static_cast<double>(x[j]);
      db += gj;
    }
  } else {
    dot_and_sum(x, dy, n, &ds, &db);
  }
  const double scale = 1.0 / static_cast<double>(n);
  const double b = (db * mean - ds) * rstd * rstd * rstd * scale;
  const double c = -b * mean - db * rstd * scale;
  const T a = static_cast<T>(rstd), bt = static_cast<T>(b), ct = static_cast<T>(c);
  if (gamma != nullptr) {
    for (int64_t j = 0; j < n; ++j) dx[j] = a * dy[j] * gamma[j] + bt * x[j] + ct;
  } else {
    for (int64_t j = 0; j < n; ++j) dx[j] = a * dy[j] + bt * x[j] + ct;
  }
}

}  // namespace

namespace portable {

Error native_layer_norm_backward_out(KernelContext& ctx, const Tensor& grad_out, const Tensor& input,
                                     Span<const int64_t> normalized_shape, const Tensor& mean, const Tensor& rstd,
                                     const Tensor* weight, const Tensor* bias, Span<const uint8_t> output_mask,
                                     Tensor& out0, Tensor& out1, Tensor& out2) {
  bool want[3];
  ET_CHECK_OK(read_mask(ctx, output_mask, want));
  ET_CHECK_OK(check_floating(ctx, input, "input"));
  const ScalarType dtype = input.dtype();
  ET_CHECK_OK(check_dtype(ctx, grad_out, dtype, "grad_out"));
  ET_CHECK_OK(check_dtype(ctx, mean, dtype, "mean"));
  ET_CHECK_OK(check_dtype(ctx, rstd, dtype, "rstd"));
  const int32_t nd = static_cast<int32_t>(normalized_shape.size());
  const int32_t axis = input.dim() - nd;
  bool ok = nd >= 1 && axis >= 0;
  for (int32_t d = 0; ok && d < nd; ++d) ok = input.size(axis + d) == normalized_shape[static_cast<size_t>(d)];
  if (!ok) {
    char ns[96];
    kutil::format_shape(ns, sizeof(ns), normalized_shape.data(), nd);
    return ctx.fail(ErrorCode::InvalidArgument, "normalized_shape %s must be non-empty and end input %s's shape", ns,
                    Desc(input).text);
  }
  ET_CHECK_OK(check_shape(ctx, grad_out, "grad_out", input.sizes(), input.dim()));
  int64_t m = 1, n = 1;
  if (!kutil::checked_numel(input.sizes(), axis, &m) || !kutil::checked_numel(input.sizes() + axis, nd, &n)) {
    return ctx.fail(ErrorCode::InvalidArgument, "input %s has too many elements", Desc(input).text);
  }
  ET_CHECK_OK(check_numel(ctx, mean, "mean", m, "one per normalized row"));
  ET_CHECK_OK(check_numel(ctx, rstd, "rstd", m, "one per normalized row"));
  if (weight != nullptr) {
    ET_CHECK_OK(check_dtype(ctx, *weight, dtype, "weight"));
    ET_CHECK_OK(check_shape(ctx, *weight, "weight", normalized_shape.data(), nd));
  }
  if (bias != nullptr) {
    ET_CHECK_OK(check_dtype(ctx, *bias, dtype, "bias"));
    ET_CHECK_OK(check_shape(ctx, *bias, "bias", normalized_shape.data(), nd));
  }
  // Like PyTorch, which sizes these gradients after weight and bias.
  if (want[1] && weight == nullptr) {
    return ctx.fail(ErrorCode::InvalidArgument, "output_mask[1] asks for the weight gradient, but weight is None");
  }
  if (want[2] && bias == nullptr) {
    return ctx.fail(ErrorCode::InvalidArgument, "output_mask[2] asks for the bias gradient, but bias is None");
  }
  if (want[0]) ET_CHECK_OK(prepare_out(ctx, out0, dtype, input.sizes(), input.dim(), "out0"));
  if (want[1]) ET_CHECK_OK(prepare_zeroed_out(ctx, out1, *weight, "out1"));
  if (want[2]) ET_CHECK_OK(prepare_zeroed_out(ctx, out2, *bias, "out2"));

  kutil::dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* dy = grad_out.data_as<const T>();
    const T* x = input.data_as<const T>();
    const T* mu = mean.data_as<const T>();
    const T* rs = rstd.data_as<const T>();
    const T* gamma = weight != nullptr ? weight->data_as<const T>() : nullptr;
    T* dgamma = want[1] ? out1.data_as<T>() : nullptr;
    T* dbeta = want[2] ? out2.data_as<T>() : nullptr;
    for (int64_t i = 0; i < m; ++i) {
      const T* dyi = dy + i * n;
      const T* xi = x + i * n;
      if (want[0]) layer_norm_row(dyi, xi, gamma, n, static_cast<double>(mu[i]), static_cast<double>(rs[i]),
                                  out0.data_as<T>() + i * n);
      if (dgamma != nullptr) {
        const T mi = mu[i], ri = rs[i];
        for (int64_t j = 0; j < n; ++j) dgamma[j] += dyi[j] * (xi[j] - mi) * ri;
      }
      if (dbeta != nullptr) {
        for (int64_t j = 0; j < n; ++j) dbeta[j] += dyi[j];
      }
    }
  });
  return Error::ok();
}

Error native_group_norm_backward_out(KernelContext& ctx, const Tensor& grad_out, const Tensor& input,
                                     const Tensor& mean, const Tensor& rstd, const Tensor* weight, int64_t N,
                                     int64_t C, int64_t HxW, int64_t group, Span<const uint8_t> output_mask,
                                     Tensor& out0, Tensor& out1, Tensor& out2) {
  bool want[3];
  ET_CHECK_OK(read_mask(ctx, output_mask, want));
  ET_CHECK_OK(check_floating(ctx, input, "input"));
  const ScalarType dtype = input.dtype();
  ET_CHECK_OK(check_dtype(ctx, grad_out, dtype, "grad_out"));
  ET_CHECK_OK(check_dtype(ctx, mean, dtype, "mean"));
  ET_CHECK_OK(check_dtype(ctx, rstd, dtype, "rstd"));
  if (N < 0 || C < 0 || HxW < 0 || group < 1 || C % group != 0) {
    return ctx.fail(ErrorCode::InvalidArgument,
                    "N %lld, C %lld, HxW %lld must be >= 0 and group %lld >= 1 must divide C",
                    static_cast<long long>(N), static_cast<long long>(C), static_cast<long long>(HxW),
                    static_cast<long long>(group));
  }
  int64_t expected = 0;
  const bool fits = !__builtin_mul_overflow(N, C, &expected) && !__builtin_mul_overflow(expected, HxW, &expected);
  if (!fits || input.dim() < 2 || input.size(0) != N || input.size(1) != C || input.numel() != expected) {
    return ctx.fail(ErrorCode::InvalidArgument,
                    "input %s must be (N=%lld, C=%lld, ...) with N * C * HxW (HxW=%lld) values", Desc(input).text,
                    static_cast<long long>(N), static_cast<long long>(C), static_cast<long long>(HxW));
  }
  ET_CHECK_OK(check_shape(ctx, grad_out, "grad_out", input.sizes(), input.dim()));
  ET_CHECK_OK(check_numel(ctx, mean, "mean", N * group, "N * group"));
  ET_CHECK_OK(check_numel(ctx, rstd, "rstd", N * group, "N * group"));
  if (weight != nullptr) {
    ET_CHECK_OK(check_dtype(ctx, *weight, dtype, "weight"));
    const int64_t c_shape[1] = {C};
    ET_CHECK_OK(check_shape(ctx, *weight, "weight", c_shape, 1));
  }
  // Like PyTorch, which sizes both parameter gradients after weight.
  if ((want[1] || want[2]) && weight == nullptr) {
    return ctx.fail(ErrorCode::InvalidArgument,
                    "output_mask asks for the weight/bias gradient, but weight is None");
  }
  if (want[0]) ET_CHECK_OK(prepare_out(ctx, out0, dtype, input.sizes(), input.dim(), "out0"));
  if (want[1]) ET_CHECK_OK(prepare_zeroed_out(ctx, out1, *weight, "out1"));
  if (want[2]) ET_CHECK_OK(prepare_zeroed_out(ctx, out2, *weight, "out2"));
  if (N * C == 0) return Error::ok();

  // Per (n, c): ds = sum(dy * x), db = sum(dy) over HxW.
  double* ds = static_cast<double*>(ctx.allocate_temp(static_cast<size_t>(2 * N * C) * sizeof(double)));
  if (ds == nullptr) {
    return ctx.fail(ErrorCode::OutOfMemory, "needs %lld bytes of temp memory; none left",
                    static_cast<long long>(2 * N * C * 8));
  }
  double* db = ds + N * C;
  const int64_t D = C / group;
  kutil::dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* dy = grad_out.data_as<const T>();
    const T* x = input.data_as<const T>();
    const T* mu = mean.data_as<const T>();
    const T* rs = rstd.data_as<const T>();
    const T* gamma = weight != nullptr ? weight->data_as<const T>() : nullptr;
    for (int64_t nc = 0; nc < N * C; ++nc) dot_and_sum(x + nc * HxW, dy + nc * HxW, HxW, &ds[nc], &db[nc]);
    if (want[0]) {
      T* dx = out0.data_as<T>();
      const double s = 1.0 / static_cast<double>(D * HxW);
      for (int64_t i = 0; i < N * group; ++i) {
        const int64_t c0 = (i % group) * D, base = (i / group) * C + c0;
        double ds_g = 0, db_g = 0;
        for (int64_t d = 0; d < D; ++d) {
          const double gd = gamma != nullptr ? static_cast<double>(gamma[c0 + d]) : 1.0;
          ds_g += ds[base + d] * gd;
          db_g += db[base + d] * gd;
        }
        const double m = static_cast<double>(mu[i]), r = static_cast<double>(rs[i]);
        const double c2 = (db_g * m - ds_g) * r * r * r * s;
        const double c3 = -c2 * m - db_g * r * s;
        const T b = static_cast<T>(c2), c = static_cast<T>(c3);
        for (int64_t d = 0; d < D; ++d) {
          const T a = static_cast<T>(r * (gamma != nullptr ? static_cast<double>(gamma[c0 + d]) : 1.0));
          const int64_t off = (base + d) * HxW;
          const T* dyr = dy + off;
          const T* xr = x + off;
          T* dxr = dx + off;
          for (int64_t j = 0; j < HxW; ++j) dxr[j] = a * dyr[j] + b * xr[j] + c;
        }
      }
    }
    for (int64_t c = 0; c < C && (want[1] || want[2]); ++c) {
      double dg = 0, dbeta = 0;
      for (int64_t b = 0; b < N; ++b) {
        const int64_t i = b * group + c / D;
        dg += (ds[b * C + c] - db[b * C + c] * static_cast<double>(mu[i])) * static_cast<double>(rs[i]);
        dbeta += db[b * C + c];
      }
      if (want[1]) out1.data_as<T>()[c] = static_cast<T>(dg);
      if (want[2]) out2.data_as<T>()[c] = static_cast<T>(dbeta);
    }
  });
  return Error::ok();
}

}  // namespace portable
}  // namespace etmlir
