// Normalizations: aten::_native_batch_norm_legit_no_training.out (inference
// batch norm with running statistics) and aten::native_layer_norm.out.
// float32 and float64; statistics and parameters share the input's dtype.
#include <cmath>

#include "kernel_util_linalg.h"
#include "portable_kernels.h"

namespace etmlir {
namespace {

using linalg::Described;

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

const Tensor* optional_tensor(const EValue* v) { return v->is_none() ? nullptr : &v->to_tensor(); }

// Inference statistics outputs are empty tensors, as in torch ([0]): an
// empty tensor stays as it is, anything else is resized to [0].
Error make_empty(KernelContext& ctx, Tensor& t, const char* name) {
  if (t.numel() == 0) return Error::ok();
  const int64_t zero[1] = {0};
  return linalg::resize(ctx, t, zero, 1, name);
}

// aten::_native_batch_norm_legit_no_training.out(Tensor input, Tensor? weight, Tensor? bias,
//   Tensor running_mean, Tensor running_var, float momentum, float eps, *, Tensor(a!) out0,
//   Tensor(b!) out1, Tensor(c!) out2)
Error batch_norm_no_training_out(KernelContext& ctx, EValue** args) {
  const Tensor& input = args[0]->to_tensor();
  const Tensor* weight = optional_tensor(args[1]);
  const Tensor* bias = optional_tensor(args[2]);
  const Tensor& mean = args[3]->to_tensor();
  const Tensor& var = args[4]->to_tensor();
  const double eps = linalg::number_arg(*args[6]);
  Tensor& out = args[7]->to_tensor();
  ET_CHECK_OK(linalg::check_sane(ctx, input, "input"));
  if (input.dim() < 2) {
    return ctx.fail(ErrorCode::InvalidArgument, "input must have at least 2 dims (N, C, ...), got %s",
                    Described(input).text);
  }
  const ScalarType dtype = input.dtype();
  if (dtype != ScalarType::Float && dtype != ScalarType::Double) {
    return linalg::unsupported_dtype(ctx, input, "input");
  }
  const int64_t channels = input.size(1);
  ET_CHECK_OK(check_param(ctx, weight, dtype, channels, "weight"));
  ET_CHECK_OK(check_param(ctx, bias, dtype, channels, "bias"));
  ET_CHECK_OK(check_param(ctx, &mean, dtype, channels, "running_mean"));
  ET_CHECK_OK(check_param(ctx, &var, dtype, channels, "running_var"));
  ET_CHECK_OK(linalg::check_dtype(ctx, out, dtype, "out0"));
  ET_CHECK_OK(linalg::resize(ctx, out, input.sizes(), input.dim(), "out0"));
  ET_CHECK_OK(make_empty(ctx, args[8]->to_tensor(), "out1"));
  ET_CHECK_OK(make_empty(ctx, args[9]->to_tensor(), "out2"));
  if (input.numel() == 0) return Error::ok();

  int64_t inner = 1;
  for (int32_t d = 2; d < input.dim(); ++d) inner *= input.size(d);
  const int64_t batch = input.size(0);
  linalg::dispatch_floating(dtype, [&](auto zero) {
    using T = decltype(zero);
    const T* x = input.data_as<const T>();
    const T* w = weight ? weight->data_as<const T>() : nullptr;
    const T* b = bias ? bias->data_as<const T>() : nullptr;
    const T* m = mean.data_as<const T>();
    const T* v = var.data_as<const T>();
    T* y = out.data_as<T>();
    for (int64_t c = 0; c < channels; ++c) {
      // y = x * scale + shift, scale = w / sqrt(var + eps), shift = b - mean * scale (torch's order).
      const T invstd = T(1) / std::sqrt(v[c] + static_cast<T>(eps));
      const T scale = w ? invstd * w[c] : invstd;
      const T shift = (b ? b[c] : T(0)) - m[c] * scale;
      for (int64_t n = 0; n < batch; ++n) {
        const int64_t base = (n * channels + c) * inner;
        const T* xs = x + base;
        T* ys = y + base;
        for (int64_t i = 0; i < inner; ++i) ys[i] = xs[i] * scale + shift;
      }
    }
  });
  return Error::ok();
}

// Sum of n values with 8 independent partial sums (vectorizable, and more
// accurate than one running sum).
template <typename T>
T sum_of(const T* x, int64_t n) {
  T part[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) part[j] += x[i + j];
  }
  T total = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
  for (; i < n; ++i) total += x[i];
  return total;
}

template <typename T>
T squared_deviation_of(const T* x, int64_t n, T mean) {
  T part[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) {
      const T d = x[i + j] - mean;
      part[j] += d * d;
    }
  }
  T total = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
  for (; i < n; ++i) total += (x[i] - mean) * (x[i] - mean);
  return total;
}

// aten::native_layer_norm.out(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias,
//   float eps, *, Tensor(a!) out0, Tensor(b!) out1, Tensor(c!) out2)
Error layer_norm_out(KernelContext& ctx, EValue** args) {
  const Tensor& input = args[0]->to_tensor();
  Span<const int64_t> normalized = args[1]->to_int_list();
  const Tensor* weight = optional_tensor(args[2]);
  const Tensor* bias = optional_tensor(args[3]);
  const double eps = linalg::number_arg(*args[4]);
  Tensor& out = args[5]->to_tensor();
  Tensor& mean_out = args[6]->to_tensor();
  Tensor& rstd_out = args[7]->to_tensor();
  ET_CHECK_OK(linalg::check_sane(ctx, input, "input"));
  const ScalarType dtype = input.dtype();
  if (dtype != ScalarType::Float && dtype != ScalarType::Double) {
    return linalg::unsupported_dtype(ctx, input, "input");
  }
  const int32_t rank = input.dim();
  const int64_t m = static_cast<int64_t>(normalized.size());
  if (m < 1 || m > rank) {
    return ctx.fail(ErrorCode::InvalidArgument, "normalized_shape has %lld dims; input %s needs 1 to %d",
                    static_cast<long long>(m), Described(input).text, rank);
  }
  const int32_t axis = rank - static_cast<int32_t>(m);
  for (int64_t d = 0; d < m; ++d) {
    if (normalized[static_cast<size_t>(d)] != input.size(axis + static_cast<int32_t>(d))) {
      return ctx.fail(ErrorCode::InvalidArgument,
                      "normalized_shape[%lld] is %lld but input %s has %lld there (normalized_shape must match "
                      "the input's trailing dims)",
                      static_cast<long long>(d), static_cast<long long>(normalized[static_cast<size_t>(d)]),
                      Described(input).text, static_cast<long long>(input.size(axis + static_cast<int32_t>(d))));
    }
  }
  const Tensor* params[2] = {weight, bias};
  const char* param_names[2] = {"weight", "bias"};
  for (int i = 0; i < 2; ++i) {
    const Tensor* t = params[i];
    if (t == nullptr) continue;
    ET_CHECK_OK(linalg::check_dtype(ctx, *t, dtype, param_names[i]));
    bool matches = t->dim() == m;
    for (int64_t d = 0; matches && d < m; ++d) matches = t->size(static_cast<int32_t>(d)) == normalized[static_cast<size_t>(d)];
    if (!matches) {
      return ctx.fail(ErrorCode::InvalidArgument, "%s %s must have the normalized_shape", param_names[i],
                      Described(*t).text);
    }
  }
  ET_CHECK_OK(linalg::check_dtype(ctx, out, dtype, "out0"));
  ET_CHECK_OK(linalg::check_dtype(ctx, mean_out, dtype, "out1"));
  ET_CHECK_OK(linalg::check_dtype(ctx, rstd_out, dtype, "out2"));
  ET_CHECK_OK(linalg::resize(ctx, out, input.sizes(), rank, "out0"));
  int64_t stat_sizes[kMaxDims];
  for (int32_t d = 0; d < rank; ++d) stat_sizes[d] = d < axis ? input.size(d) : 1;
  ET_CHECK_OK(linalg::resize(ctx, mean_out, stat_sizes, rank, "out1"));
  ET_CHECK_OK(linalg::resize(ctx, rstd_out, stat_sizes, rank, "out2"));
  if (input.numel() == 0) {
    // Empty rows (normalized_shape with a 0): mean and rstd are NaN, as in torch.
    linalg::dispatch_floating(dtype, [&](auto zero) {
      using T = decltype(zero);
      for (int64_t i = 0; i < mean_out.numel(); ++i) mean_out.data_as<T>()[i] = T(NAN);
      for (int64_t i = 0; i < rstd_out.numel(); ++i) rstd_out.data_as<T>()[i] = T(NAN);
    });
    return Error::ok();
  }
  int64_t rows = 1;
  int64_t cols = 1;
  for (int32_t d = 0; d < axis; ++d) rows *= input.size(d);
  for (int32_t d = axis; d < rank; ++d) cols *= input.size(d);

  linalg::dispatch_floating(dtype, [&](auto zero) {
    using T = decltype(zero);
    const T* x = input.data_as<const T>();
    const T* w = weight ? weight->data_as<const T>() : nullptr;
    const T* b = bias ? bias->data_as<const T>() : nullptr;
    T* y = out.data_as<T>();
    T* means = mean_out.data_as<T>();
    T* rstds = rstd_out.data_as<T>();
    const T inv_cols = T(1) / static_cast<T>(cols);
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = x + r * cols;
      T* yr = y + r * cols;
      const T mu = sum_of(xr, cols) * inv_cols;
      const T var = squared_deviation_of(xr, cols, mu) * inv_cols;
      const T rstd = T(1) / std::sqrt(var + static_cast<T>(eps));
      means[r] = mu;
      rstds[r] = rstd;
      if (w && b) {
        for (int64_t i = 0; i < cols; ++i) yr[i] = (xr[i] - mu) * rstd * w[i] + b[i];
      } else if (w) {
        for (int64_t i = 0; i < cols; ++i) yr[i] = (xr[i] - mu) * rstd * w[i];
      } else if (b) {
        for (int64_t i = 0; i < cols; ++i) yr[i] = (xr[i] - mu) * rstd + b[i];
      } else {
        for (int64_t i = 0; i < cols; ++i) yr[i] = (xr[i] - mu) * rstd;
      }
    }
  });
  return Error::ok();
}

}  // namespace

Error register_normalization_kernels(KernelRegistry& r) {
  ET_REGISTER_KERNEL(r, "aten::_native_batch_norm_legit_no_training.out", "TttTTff|TTT", batch_norm_no_training_out);
  ET_REGISTER_KERNEL(r, "aten::native_layer_norm.out", "TLttf|TTT", layer_norm_out);
  return Error::ok();
}

}  // namespace etmlir
