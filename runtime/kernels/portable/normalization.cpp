// Normalizations: batch norm with running statistics (inference) or with the
// batch's own statistics, layer norm and group norm.
//
// Every tensor of one call (input, parameters, statistics, outputs) has one
// dtype: float32, float64, float16 or bfloat16; the half types compute in
// float, as PyTorch's CPU kernels do. Statistics take two passes (mean, then
// squared deviations from it: stable for data far from 0), summed pairwise
// along contiguous rows. Every output is y = x * scale + shift with a scale
// and shift per channel (or per row), torch's own formulation.
#include <cmath>

#include "reduction_util.h"
#include "generated/normalization.h"

namespace etmlir {
namespace {

using linalg::Described;
using red::load;
using red::OpMath;

// A per-channel (or per-element) parameter: 1-D with `count` values, or None.
Error check_param(KernelContext& ctx, const Tensor* t, ScalarType dtype, int64_t count, const char* name) {
  if (t == nullptr) return Error::ok();
  ET_CHECK_OK(linalg::check_dtype(ctx, *t, dtype, name));
  if (t->dim() != 1 || t->size(0) != count) {
    return ctx.fail(ErrorCode::InvalidArgument, "%s %s must be 1-D with %lld values (the input's channels)", name,
                    Described(*t).text, static_cast<long long>(count));
  }
  return Error::ok();
}

// The input: sane sizes and a floating dtype.
Error check_input(KernelContext& ctx, const Tensor& input, int32_t min_rank) {
  ET_CHECK_OK(kutil::check_rank(ctx, input, "input"));
  ET_CHECK_OK(linalg::check_sane(ctx, input, "input"));
  if (!kutil::is_floating(input.dtype())) {
    return kutil::unsupported_dtype(ctx, "input", input.dtype(), red::kFloatingDtypes);
  }
  if (input.dim() < min_rank) {
    return ctx.fail(ErrorCode::InvalidArgument, "input must have at least %d dims (N, C, ...), got %s", min_rank,
                    Described(input).text);
  }
  return Error::ok();
}

// An output of `input`'s dtype, resized to `sizes`.
Error prepare_out(KernelContext& ctx, Tensor& t, ScalarType dtype, const int64_t* sizes, int32_t rank,
                  const char* name) {
  ET_CHECK_OK(linalg::check_dtype(ctx, t, dtype, name));
  return linalg::resize(ctx, t, sizes, rank, name);
}

// Inference statistics outputs are empty tensors, as in torch ([0]): an
// empty tensor stays as it is, anything else is resized to [0].
Error make_empty(KernelContext& ctx, Tensor& t, const char* name) {
  if (t.numel() == 0) return Error::ok();
  const int64_t zero[1] = {0};
  return linalg::resize(ctx, t, zero, 1, name);
}

// y[i] = x[i] * scale + shift for i < n.
template <typename T, typename C>
void scale_shift(const T* x, T* y, int64_t n, C scale, C shift) {
  for (int64_t i = 0; i < n; ++i) y[i] = kutil::convert<T>(load<C>(x[i]) * scale + shift);
}

// Input [N, C, inner...] with per-channel statistics: the batch norm output.
// scale = invstd * w, shift = b - mean * scale (torch's order).
template <typename T>
void batch_norm_transform(const Tensor& input, const T* w, const T* b, const OpMath<T>* mean,
                          const OpMath<T>* invstd, T* y) {
  using C = OpMath<T>;
  const int64_t batch = input.size(0);
  const int64_t channels = input.size(1);
  int64_t inner = 1;
  for (int32_t d = 2; d < input.dim(); ++d) inner *= input.size(d);
  const T* x = input.data_as<const T>();
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t c = 0; c < channels; ++c) {
      const C scale = w ? invstd[c] * load<C>(w[c]) : invstd[c];
      const C shift = (b ? load<C>(b[c]) : C(0)) - mean[c] * scale;
      const int64_t base = (n * channels + c) * inner;
      scale_shift<T, C>(x + base, y + base, inner, scale, shift);
    }
  }
}

// Per-channel mean and 1 / sqrt(biased var + eps) of input [N, C, inner...],
// summed in double across rows (scratch holds 2 * C doubles).
template <typename T>
void batch_statistics(const Tensor& input, double eps, double* sums, OpMath<T>* mean, OpMath<T>* invstd) {
  using C = OpMath<T>;
  const int64_t batch = input.size(0);
  const int64_t channels = input.size(1);
  int64_t inner = 1;
  for (int32_t d = 2; d < input.dim(); ++d) inner *= input.size(d);
  const T* x = input.data_as<const T>();
  const double count = static_cast<double>(batch) * static_cast<double>(inner);
  for (int64_t c = 0; c < channels; ++c) sums[c] = 0.0;
  for (int64_t n = 0; n < batch; ++n) {  // memory order: n, c, inner
    const T* xn = x + n * channels * inner;
    if (inner == 1) {
      for (int64_t c = 0; c < channels; ++c) sums[c] += load<double>(xn[c]);
    } else {
      for (int64_t c = 0; c < channels; ++c) sums[c] += red::sum_row<C>(xn + c * inner, inner);
    }
  }
  for (int64_t c = 0; c < channels; ++c) mean[c] = static_cast<C>(sums[c] / count);
  for (int64_t c = 0; c < channels; ++c) sums[c] = 0.0;
  for (int64_t n = 0; n < batch; ++n) {
    const T* xn = x + n * channels * inner;
    if (inner == 1) {
      for (int64_t c = 0; c < channels; ++c) {
        const double d = load<double>(xn[c]) - static_cast<double>(mean[c]);
        sums[c] += d * d;
      }
    } else {
      for (int64_t c = 0; c < channels; ++c) sums[c] += red::squared_deviation_row<C>(xn + c * inner, inner, mean[c]);
    }
  }
  for (int64_t c = 0; c < channels; ++c) {
    invstd[c] = static_cast<C>(1.0 / std::sqrt(sums[c] / count + eps));
  }
}

// Checks shared by both batch norms; *channels is the input's dim 1.
Error check_batch_norm(KernelContext& ctx, const Tensor& input, const Tensor* weight, const Tensor* bias,
                       Tensor& out, int64_t* channels) {
  ET_CHECK_OK(check_input(ctx, input, 2));
  *channels = input.size(1);
  ET_CHECK_OK(check_param(ctx, weight, input.dtype(), *channels, "weight"));
  ET_CHECK_OK(check_param(ctx, bias, input.dtype(), *channels, "bias"));
  return prepare_out(ctx, out, input.dtype(), input.sizes(), input.dim(), "out");
}

}  // namespace

namespace portable {

Error batch_norm_no_training_out(KernelContext& ctx, const Tensor& input, const Tensor* weight, const Tensor* bias,
                                 const Tensor& running_mean, const Tensor& running_var, double momentum, double eps,
                                 Tensor& out0, Tensor& out1, Tensor& out2) {
  (void)momentum;
  int64_t channels = 0;
  ET_CHECK_OK(check_batch_norm(ctx, input, weight, bias, out0, &channels));
  ET_CHECK_OK(check_param(ctx, &running_mean, input.dtype(), channels, "running_mean"));
  ET_CHECK_OK(check_param(ctx, &running_var, input.dtype(), channels, "running_var"));
  ET_CHECK_OK(make_empty(ctx, out1, "out1"));
  ET_CHECK_OK(make_empty(ctx, out2, "out2"));
  if (input.numel() == 0) return Error::ok();
  Error err;
  red::dispatch_floating_storage(input.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = OpMath<T>;
    C* stats = nullptr;
    err = red::scratch(ctx, 2 * channels, "the statistics", &stats);
    if (err) return;
    const T* m = running_mean.data_as<const T>();
    const T* v = running_var.data_as<const T>();
    for (int64_t c = 0; c < channels; ++c) {
      stats[c] = load<C>(m[c]);
      stats[channels + c] = C(1) / std::sqrt(load<C>(v[c]) + static_cast<C>(eps));
    }
    batch_norm_transform<T>(input, weight ? weight->data_as<const T>() : nullptr,
                            bias ? bias->data_as<const T>() : nullptr, stats, stats + channels, out0.data_as<T>());
  });
  return err;
}

// Batch statistics whatever `training` says: without running statistics there
// are no others (torch itself crashes on training=False here).
Error batch_norm_no_stats_out(KernelContext& ctx, const Tensor& input, const Tensor* weight, const Tensor* bias,
                              bool training, double momentum, double eps, Tensor& out, Tensor& save_mean,
                              Tensor& save_invstd) {
  (void)training;
  (void)momentum;
  int64_t channels = 0;
  ET_CHECK_OK(check_batch_norm(ctx, input, weight, bias, out, &channels));
  const int64_t stat_sizes[1] = {channels};
  ET_CHECK_OK(prepare_out(ctx, save_mean, input.dtype(), stat_sizes, 1, "save_mean"));
  ET_CHECK_OK(prepare_out(ctx, save_invstd, input.dtype(), stat_sizes, 1, "save_invstd"));
  if (channels == 0) return Error::ok();
  Error err;
  red::dispatch_floating_storage(input.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = OpMath<T>;
    double* sums = nullptr;
    C* stats = nullptr;
    err = red::scratch(ctx, channels, "the channel sums", &sums);
    if (!err) err = red::scratch(ctx, 2 * channels, "the statistics", &stats);
    if (err) return;
    // An empty batch gives NaN statistics (0 / 0), as in torch.
    batch_statistics<T>(input, eps, sums, stats, stats + channels);
    red::convert_row(save_mean.data_as<T>(), stats, channels);
    red::convert_row(save_invstd.data_as<T>(), stats + channels, channels);
    batch_norm_transform<T>(input, weight ? weight->data_as<const T>() : nullptr,
                            bias ? bias->data_as<const T>() : nullptr, stats, stats + channels, out.data_as<T>());
  });
  return err;
}

Error layer_norm_out(KernelContext& ctx, const Tensor& input, Span<const int64_t> normalized_shape,
                     const Tensor* weight, const Tensor* bias, double eps, Tensor& out0, Tensor& out1, Tensor& out2) {
  ET_CHECK_OK(check_input(ctx, input, 0));
  const ScalarType dtype = input.dtype();
  const int32_t rank = input.dim();
  const int64_t m = static_cast<int64_t>(normalized_shape.size());
  if (m < 1 || m > rank) {
    return ctx.fail(ErrorCode::InvalidArgument, "normalized_shape has %lld dims; input %s needs 1 to %d",
                    static_cast<long long>(m), Described(input).text, rank);
  }
  const int32_t axis = rank - static_cast<int32_t>(m);
  for (int32_t d = 0; d < m; ++d) {
    if (normalized_shape[d] != input.size(axis + d)) {
      return ctx.fail(ErrorCode::InvalidArgument,
                      "normalized_shape[%d] is %lld but input %s has %lld there (normalized_shape must match "
                      "the input's trailing dims)",
                      d, static_cast<long long>(normalized_shape[d]), Described(input).text,
                      static_cast<long long>(input.size(axis + d)));
    }
  }
  const Tensor* params[2] = {weight, bias};
  const char* param_names[2] = {"weight", "bias"};
  for (int i = 0; i < 2; ++i) {
    const Tensor* t = params[i];
    if (t == nullptr) continue;
    ET_CHECK_OK(linalg::check_dtype(ctx, *t, dtype, param_names[i]));
    bool matches = t->dim() == m;
    for (int32_t d = 0; matches && d < m; ++d) matches = t->size(d) == normalized_shape[d];
    if (!matches) {
      return ctx.fail(ErrorCode::InvalidArgument, "%s %s must have the normalized_shape", param_names[i],
                      Described(*t).text);
    }
  }
  ET_CHECK_OK(prepare_out(ctx, out0, dtype, input.sizes(), rank, "out0"));
  int64_t stat_sizes[kMaxDims];
  for (int32_t d = 0; d < rank; ++d) stat_sizes[d] = d < axis ? input.size(d) : 1;
  ET_CHECK_OK(prepare_out(ctx, out1, dtype, stat_sizes, rank, "out1"));
  ET_CHECK_OK(prepare_out(ctx, out2, dtype, stat_sizes, rank, "out2"));
  int64_t rows = 1;
  int64_t cols = 1;
  for (int32_t d = 0; d < axis; ++d) rows *= input.size(d);
  for (int32_t d = axis; d < rank; ++d) cols *= input.size(d);

  red::dispatch_floating_storage(dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = OpMath<T>;
    const T* x = input.data_as<const T>();
    const T* w = weight ? weight->data_as<const T>() : nullptr;
    const T* b = bias ? bias->data_as<const T>() : nullptr;
    T* y = out0.data_as<T>();
    T* means = out1.data_as<T>();
    T* rstds = out2.data_as<T>();
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = x + r * cols;
      T* yr = y + r * cols;
      // Empty rows (normalized_shape with a 0): mean and rstd are NaN, as in torch.
      C mu, var;
      red::moments_row<C>(xr, cols, &mu, &var);
      const C rstd = C(1) / std::sqrt(var + static_cast<C>(eps));
      means[r] = kutil::convert<T>(mu);
      rstds[r] = kutil::convert<T>(rstd);
      // One loop per affine case, so that each vectorizes.
      if (w && b) {
        for (int64_t i = 0; i < cols; ++i) {
          yr[i] = kutil::convert<T>((load<C>(xr[i]) - mu) * rstd * load<C>(w[i]) + load<C>(b[i]));
        }
      } else if (w) {
        for (int64_t i = 0; i < cols; ++i) yr[i] = kutil::convert<T>((load<C>(xr[i]) - mu) * rstd * load<C>(w[i]));
      } else if (b) {
        for (int64_t i = 0; i < cols; ++i) yr[i] = kutil::convert<T>((load<C>(xr[i]) - mu) * rstd + load<C>(b[i]));
      } else {
        scale_shift<T, C>(xr, yr, cols, rstd, -mu * rstd);
      }
    }
  });
  return Error::ok();
}

// input holds N * C * HxW values; statistics per (sample, group) over the
// group's C / group channels: out1 (mean) and out2 (rstd) are [N, group].
Error group_norm_out(KernelContext& ctx, const Tensor& input, const Tensor* weight, const Tensor* bias, int64_t N,
                     int64_t C, int64_t HxW, int64_t group, double eps, Tensor& out0, Tensor& out1, Tensor& out2) {
  ET_CHECK_OK(check_input(ctx, input, 0));
  const ScalarType dtype = input.dtype();
  if (N < 0 || C < 0 || HxW < 0 || N > linalg::kMaxSize || C > linalg::kMaxSize || HxW > linalg::kMaxSize) {
    return ctx.fail(ErrorCode::InvalidArgument, "N, C and HxW must be sizes, got %lld, %lld and %lld",
                    static_cast<long long>(N), static_cast<long long>(C), static_cast<long long>(HxW));
  }
  if (group <= 0 || C % group != 0) {
    return ctx.fail(ErrorCode::InvalidArgument, "C (%lld) must be divisible by group (%lld), which must be positive",
                    static_cast<long long>(C), static_cast<long long>(group));
  }
  int64_t expected = 0;
  const int64_t dims[3] = {N, C, HxW};
  if (!kutil::checked_numel(dims, 3, &expected) || expected != input.numel() ||
      (input.dim() >= 2 && (input.size(0) != N || input.size(1) != C))) {
    return ctx.fail(ErrorCode::InvalidArgument, "input %s must be [N, C, ...] with N * C * HxW values (N = %lld, "
                    "C = %lld, HxW = %lld)", Described(input).text, static_cast<long long>(N),
                    static_cast<long long>(C), static_cast<long long>(HxW));
  }
  ET_CHECK_OK(check_param(ctx, weight, dtype, C, "weight"));
  ET_CHECK_OK(check_param(ctx, bias, dtype, C, "bias"));
  ET_CHECK_OK(prepare_out(ctx, out0, dtype, input.sizes(), input.dim(), "out0"));
  const int64_t stat_sizes[2] = {N, group};
  ET_CHECK_OK(prepare_out(ctx, out1, dtype, stat_sizes, 2, "out1"));
  ET_CHECK_OK(prepare_out(ctx, out2, dtype, stat_sizes, 2, "out2"));
  const int64_t per_group = C / group;
  const int64_t span = per_group * HxW;  // contiguous values of one (sample, group)
  red::dispatch_floating_storage(dtype, [&](auto tag) {
    using T = decltype(tag);
    using Acc = OpMath<T>;
    const T* x = input.data_as<const T>();
    const T* w = weight ? weight->data_as<const T>() : nullptr;
    const T* b = bias ? bias->data_as<const T>() : nullptr;
    T* y = out0.data_as<T>();
    T* means = out1.data_as<T>();
    T* rstds = out2.data_as<T>();
    for (int64_t ng = 0; ng < N * group; ++ng) {
      const T* xs = x + ng * span;
      Acc mu = Acc(0), var = Acc(NAN);  // an empty group: mean 0, rstd NaN (torch's Welford result)
      if (span > 0) red::moments_row<Acc>(xs, span, &mu, &var);
      const Acc rstd = Acc(1) / std::sqrt(var + static_cast<Acc>(eps));
      means[ng] = kutil::convert<T>(mu);
      rstds[ng] = kutil::convert<T>(rstd);
      const int64_t c0 = (ng % group) * per_group;
      for (int64_t k = 0; k < per_group; ++k) {
        const int64_t c = c0 + k;
        const Acc scale = w ? rstd * load<Acc>(w[c]) : rstd;
        const Acc shift = -scale * mu + (b ? load<Acc>(b[c]) : Acc(0));
        scale_shift<T, Acc>(xs + k * HxW, y + ng * span + k * HxW, HxW, scale, shift);
      }
    }
  });
  return Error::ok();
}

}  // namespace portable
}  // namespace etmlir
