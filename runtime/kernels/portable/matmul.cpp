// Matrix products: aten::mm.out, aten::bmm.out, aten::addmm.out.
//
// float32 runs on the blocked sgemm (gemm.h); float64/int32/int64 on a plain
// i-k-j loop (correct, not tuned: no zoo model multiplies those).
#include <type_traits>

#include "gemm.h"
#include "kernel_util_linalg.h"
#include "portable_kernels.h"

namespace etmlir {
namespace {

using linalg::Described;

// a * b and a + b, wrapping for integers (two's complement, as ATen's int
// kernels behave in practice) instead of overflowing.
template <typename T>
T mul(T a, T b) {
  if constexpr (std::is_integral<T>::value) {
    return static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  } else {
    return a * b;
  }
}
template <typename T>
T add(T a, T b) {
  if constexpr (std::is_integral<T>::value) {
    return static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  } else {
    return a + b;
  }
}

// A Scalar argument as T. Integer tensors take integer (or bool) scalars
// only, as in torch ("argument alpha must not be a floating point number").
template <typename T>
Error scalar_as(KernelContext& ctx, const EValue& v, const char* name, T* out) {
  if constexpr (std::is_integral<T>::value) {
    if (v.is_double()) {
      return ctx.fail(ErrorCode::InvalidArgument, "%s is %g; integer tensors need an integer %s", name,
                      v.to_double(), name);
    }
    *out = static_cast<T>(v.scalar_to_int());
  } else {
    *out = static_cast<T>(v.scalar_to_double());
  }
  return Error::ok();
}

// C (batch x m x n) = alpha * A (batch x m x k) * B (batch x k x n) + [C if
// accumulate], for the untuned dtypes.
template <typename T>
void naive_bmm(int64_t batch, int64_t m, int64_t n, int64_t k, const T* a, const T* b, T* c, T alpha,
               bool accumulate) {
  for (int64_t bi = 0; bi < batch; ++bi) {
    const T* ab = a + bi * m * k;
    const T* bb = b + bi * k * n;
    T* cb = c + bi * m * n;
    for (int64_t i = 0; i < m; ++i) {
      T* crow = cb + i * n;
      if (!accumulate) {
        for (int64_t j = 0; j < n; ++j) crow[j] = T(0);
      }
      for (int64_t p = 0; p < k; ++p) {
        const T av = mul(alpha, ab[i * k + p]);
        const T* brow = bb + p * n;
        for (int64_t j = 0; j < n; ++j) crow[j] = add(crow[j], mul(av, brow[j]));
      }
    }
  }
}

struct Product {
  int64_t batch, m, n, k;
};

// out = alpha * self @ mat2 (+ out when accumulate), batched.
Error run_product(KernelContext& ctx, const Product& p, const Tensor& a, const Tensor& b, Tensor& out,
                  const EValue* alpha_value, bool accumulate) {
  if (out.numel() == 0) return Error::ok();
  if (a.dtype() == ScalarType::Float) {
    const float alpha = alpha_value ? static_cast<float>(alpha_value->scalar_to_double()) : 1.0f;
    gemm::Workspace ws(ctx, p.m, p.n, p.k);
    const float* ad = a.data_as<const float>();
    const float* bd = b.data_as<const float>();
    float* cd = out.data_as<float>();
    for (int64_t bi = 0; bi < p.batch; ++bi) {
      gemm::sgemm(ws, p.m, p.n, p.k, alpha, gemm::MatrixView::row_major(ad + bi * p.m * p.k, p.k),
                  gemm::BSource::matrix(gemm::MatrixView::row_major(bd + bi * p.k * p.n, p.n)),
                  accumulate ? 1.0f : 0.0f, cd + bi * p.m * p.n, p.n);
    }
    return Error::ok();
  }
  Error error;
  bool handled = linalg::dispatch_real(a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T alpha = T(1);
    if (alpha_value) {
      error = scalar_as(ctx, *alpha_value, "alpha", &alpha);
      if (error) return;
    }
    naive_bmm<T>(p.batch, p.m, p.n, p.k, a.data_as<const T>(), b.data_as<const T>(), out.data_as<T>(), alpha,
                 accumulate);
  });
  if (!handled) return linalg::unsupported_dtype(ctx, a, "self");
  return error;
}

Error check_operands(KernelContext& ctx, const Tensor& a, const char* a_name, const Tensor& b, const char* b_name,
                     const Tensor& out, int32_t rank) {
  ET_CHECK_OK(linalg::check_sane(ctx, a, a_name));
  ET_CHECK_OK(linalg::check_sane(ctx, b, b_name));
  if (a.dim() != rank) {
    return ctx.fail(ErrorCode::InvalidArgument, "%s must be %d-D, got %s", a_name, rank, Described(a).text);
  }
  if (b.dim() != rank) {
    return ctx.fail(ErrorCode::InvalidArgument, "%s must be %d-D, got %s", b_name, rank, Described(b).text);
  }
  if (a.size(rank - 1) != b.size(rank - 2)) {
    return ctx.fail(ErrorCode::InvalidArgument, "%s %s and %s %s cannot be multiplied (%lld != %lld)", a_name,
                    Described(a).text, b_name, Described(b).text, static_cast<long long>(a.size(rank - 1)),
                    static_cast<long long>(b.size(rank - 2)));
  }
  ET_CHECK_OK(linalg::check_dtype(ctx, b, a.dtype(), b_name));
  ET_CHECK_OK(linalg::check_dtype(ctx, out, a.dtype(), "out"));
  return Error::ok();
}

// aten::mm.out(Tensor self, Tensor mat2, *, Tensor(a!) out)
Error mm_out(KernelContext& ctx, EValue** args) {
  const Tensor& a = args[0]->to_tensor();
  const Tensor& b = args[1]->to_tensor();
  Tensor& out = args[2]->to_tensor();
  ET_CHECK_OK(check_operands(ctx, a, "self", b, "mat2", out, 2));
  const int64_t sizes[2] = {a.size(0), b.size(1)};
  ET_CHECK_OK(linalg::resize(ctx, out, sizes, 2, "out"));
  return run_product(ctx, Product{1, a.size(0), b.size(1), a.size(1)}, a, b, out, nullptr, false);
}

// aten::bmm.out(Tensor self, Tensor mat2, *, Tensor(a!) out)
Error bmm_out(KernelContext& ctx, EValue** args) {
  const Tensor& a = args[0]->to_tensor();
  const Tensor& b = args[1]->to_tensor();
  Tensor& out = args[2]->to_tensor();
  ET_CHECK_OK(check_operands(ctx, a, "self", b, "mat2", out, 3));
  if (a.size(0) != b.size(0)) {
    return ctx.fail(ErrorCode::InvalidArgument, "self %s and mat2 %s must have the same batch size",
                    Described(a).text, Described(b).text);
  }
  const int64_t sizes[3] = {a.size(0), a.size(1), b.size(2)};
  ET_CHECK_OK(linalg::resize(ctx, out, sizes, 3, "out"));
  return run_product(ctx, Product{a.size(0), a.size(1), b.size(2), a.size(2)}, a, b, out, nullptr, false);
}

// out[i][j] = beta * bias[broadcast i][broadcast j]
template <typename T>
void fill_bias(const T* bias, int64_t row_stride, int64_t col_stride, T beta, int64_t m, int64_t n, T* out) {
  for (int64_t i = 0; i < m; ++i) {
    const T* row = bias + i * row_stride;
    T* orow = out + i * n;
    if (col_stride == 0) {
      const T v = mul(beta, row[0]);
      for (int64_t j = 0; j < n; ++j) orow[j] = v;
    } else {
      for (int64_t j = 0; j < n; ++j) orow[j] = mul(beta, row[j]);
    }
  }
}

// aten::addmm.out(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1, Tensor(a!) out)
Error addmm_out(KernelContext& ctx, EValue** args) {
  const Tensor& bias = args[0]->to_tensor();
  const Tensor& a = args[1]->to_tensor();
  const Tensor& b = args[2]->to_tensor();
  const EValue& beta_value = *args[3];
  const EValue& alpha_value = *args[4];
  Tensor& out = args[5]->to_tensor();
  ET_CHECK_OK(check_operands(ctx, a, "mat1", b, "mat2", out, 2));
  ET_CHECK_OK(linalg::check_sane(ctx, bias, "self"));
  ET_CHECK_OK(linalg::check_dtype(ctx, bias, a.dtype(), "self"));
  const int64_t m = a.size(0);
  const int64_t n = b.size(1);
  // self broadcasts to [m, n] from [], [n], [1, n], [m, 1], [m, n], ...
  if (bias.dim() > 2) {
    return ctx.fail(ErrorCode::InvalidArgument, "self %s must broadcast to [%lld, %lld] (at most 2-D)",
                    Described(bias).text, static_cast<long long>(m), static_cast<long long>(n));
  }
  const int64_t bias_m = bias.dim() == 2 ? bias.size(0) : 1;
  const int64_t bias_n = bias.dim() >= 1 ? bias.size(bias.dim() - 1) : 1;
  if ((bias_m != 1 && bias_m != m) || (bias_n != 1 && bias_n != n)) {
    return ctx.fail(ErrorCode::InvalidArgument, "self %s does not broadcast to the product's shape [%lld, %lld]",
                    Described(bias).text, static_cast<long long>(m), static_cast<long long>(n));
  }
  const int64_t sizes[2] = {m, n};
  ET_CHECK_OK(linalg::resize(ctx, out, sizes, 2, "out"));
  if (out.numel() == 0) return Error::ok();
  const int64_t row_stride = bias_m == 1 ? 0 : bias_n;
  const int64_t col_stride = bias_n == 1 ? 0 : 1;
  // beta == 0 ignores self entirely (NaN there does not propagate), as torch does.
  bool beta_zero = false;
  Error error;
  bool handled = linalg::dispatch_real(a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T beta = T(0);
    error = scalar_as(ctx, beta_value, "beta", &beta);
    if (error) return;
    beta_zero = beta == T(0);
    if (!beta_zero) fill_bias<T>(bias.data_as<const T>(), row_stride, col_stride, beta, m, n, out.data_as<T>());
  });
  if (!handled) return linalg::unsupported_dtype(ctx, a, "mat1");
  if (error) return error;
  return run_product(ctx, Product{1, m, n, a.size(1)}, a, b, out, &alpha_value, !beta_zero);
}

}  // namespace

Error register_matmul_kernels(KernelRegistry& r) {
  ET_REGISTER_KERNEL(r, "aten::mm.out", "TT|T", mm_out);
  ET_REGISTER_KERNEL(r, "aten::bmm.out", "TT|T", bmm_out);
  ET_REGISTER_KERNEL(r, "aten::addmm.out", "TTTss|T", addmm_out);
  return Error::ok();
}

}  // namespace etmlir
