// Matrix products: aten::mm.out, aten::bmm.out, aten::addmm.out.
//
// float32 runs on the blocked sgemm (gemm.h); float16/bfloat16 convert each
// matrix to float scratch, take the same sgemm and round once at the end (as
// PyTorch's CPU kernels accumulate them in float); float64 and the integer
// dtypes run a plain i-k-j loop (correct, not tuned: no zoo model multiplies
// those; integers wrap like two's complement).
#include <type_traits>

#include "gemm.h"
#include "reduction_util.h"
#include "generated/matmul.h"

namespace etmlir {
namespace {

using linalg::Described;

// A Scalar argument as T. Integer tensors take integer (or bool) scalars
// only, as in torch ("argument alpha must not be a floating point number").
template <typename T>
Error scalar_as(KernelContext& ctx, const EValue& v, const char* name, T* out) {
  if constexpr (std::is_integral_v<T>) {
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
  using kutil::wrap_add;
  using kutil::wrap_mul;
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
        const T av = wrap_mul(alpha, ab[i * k + p]);
        const T* brow = bb + p * n;
        for (int64_t j = 0; j < n; ++j) crow[j] = wrap_add(crow[j], wrap_mul(av, brow[j]));
      }
    }
  }
}

struct Product {
  int64_t batch, m, n, k;
};

// addmm's `self`, broadcast to [m, n]: element (i, j) is at i * row_stride + j * col_stride.
struct Bias {
  const Tensor* tensor = nullptr;  // null: no bias (mm, bmm, or beta == 0)
  int64_t row_stride = 0;
  int64_t col_stride = 0;
  const EValue* beta = nullptr;
};

// out[i][j] = beta * bias[broadcast i][broadcast j], read as S, written as C.
template <typename S, typename C>
void fill_bias(const S* bias, const Bias& shape, C beta, int64_t m, int64_t n, C* out) {
  for (int64_t i = 0; i < m; ++i) {
    const S* row = bias + i * shape.row_stride;
    C* orow = out + i * n;
    if (shape.col_stride == 0) {
      const C v = kutil::wrap_mul(beta, red::load<C>(row[0]));
      for (int64_t j = 0; j < n; ++j) orow[j] = v;
    } else {
      for (int64_t j = 0; j < n; ++j) orow[j] = kutil::wrap_mul(beta, red::load<C>(row[j]));
    }
  }
}

// float16/bfloat16: each batch's matrices converted to float, one sgemm, one rounding.
template <typename T>
Error half_product(KernelContext& ctx, const Product& p, const Tensor& a, const Tensor& b, Tensor& out, float alpha,
                   const Bias& bias) {
  float* af = nullptr;
  ET_CHECK_OK(red::scratch(ctx, p.m * p.k + p.k * p.n + p.m * p.n, "float copies of the matrices", &af));
  float* bf = af + p.m * p.k;
  float* cf = bf + p.k * p.n;
  const float beta = bias.tensor ? static_cast<float>(bias.beta->scalar_to_double()) : 0.0f;
  gemm::Workspace ws(ctx, p.m, p.n, p.k);
  for (int64_t bi = 0; bi < p.batch; ++bi) {
    red::convert_row(af, a.data_as<const T>() + bi * p.m * p.k, p.m * p.k);
    red::convert_row(bf, b.data_as<const T>() + bi * p.k * p.n, p.k * p.n);
    if (bias.tensor) fill_bias<T, float>(bias.tensor->data_as<const T>(), bias, beta, p.m, p.n, cf);
    gemm::sgemm(ws, p.m, p.n, p.k, alpha, gemm::MatrixView::row_major(af, p.k),
                gemm::BSource::matrix(gemm::MatrixView::row_major(bf, p.n)), bias.tensor ? 1.0f : 0.0f, cf, p.n);
    red::convert_row(out.data_as<T>() + bi * p.m * p.n, cf, p.m * p.n);
  }
  return Error::ok();
}

// out = alpha * a @ b (+ beta * bias), batched.
Error run_product(KernelContext& ctx, const Product& p, const Tensor& a, const Tensor& b, Tensor& out,
                  const EValue* alpha_value, const Bias& bias) {
  if (out.numel() == 0) return Error::ok();
  const ScalarType dtype = a.dtype();
  if (dtype == ScalarType::Float || kutil::is_half_dtype(dtype)) {
    const float alpha = alpha_value ? static_cast<float>(alpha_value->scalar_to_double()) : 1.0f;
    if (dtype == ScalarType::Half) return half_product<kutil::Half>(ctx, p, a, b, out, alpha, bias);
    if (dtype == ScalarType::BFloat16) return half_product<kutil::BFloat16>(ctx, p, a, b, out, alpha, bias);
    float* cd = out.data_as<float>();
    if (bias.tensor) {
      const float beta = static_cast<float>(bias.beta->scalar_to_double());
      fill_bias<float, float>(bias.tensor->data_as<const float>(), bias, beta, p.m, p.n, cd);
    }
    gemm::Workspace ws(ctx, p.m, p.n, p.k);
    const float* ad = a.data_as<const float>();
    const float* bd = b.data_as<const float>();
    for (int64_t bi = 0; bi < p.batch; ++bi) {
      gemm::sgemm(ws, p.m, p.n, p.k, alpha, gemm::MatrixView::row_major(ad + bi * p.m * p.k, p.k),
                  gemm::BSource::matrix(gemm::MatrixView::row_major(bd + bi * p.k * p.n, p.n)),
                  bias.tensor ? 1.0f : 0.0f, cd + bi * p.m * p.n, p.n);
    }
    return Error::ok();
  }
  Error error;
  bool handled = kutil::dispatch_convertible(dtype, [&](auto zero) {
    using T = decltype(zero);
    if constexpr (!std::is_same_v<T, bool>) {
      T alpha = T(1);
      T beta = T(0);
      if (alpha_value) error = scalar_as(ctx, *alpha_value, "alpha", &alpha);
      if (!error && bias.tensor) error = scalar_as(ctx, *bias.beta, "beta", &beta);
      if (error) return;
      if (bias.tensor) fill_bias<T, T>(bias.tensor->data_as<const T>(), bias, beta, p.m, p.n, out.data_as<T>());
      naive_bmm<T>(p.batch, p.m, p.n, p.k, a.data_as<const T>(), b.data_as<const T>(), out.data_as<T>(), alpha,
                   bias.tensor != nullptr);
    }
  });
  if (!handled || dtype == ScalarType::Bool) {
    return ctx.fail(ErrorCode::NotSupported, "self dtype %s is not supported by this kernel", dtype_name(dtype));
  }
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

}  // namespace

namespace portable {

Error mm_out(KernelContext& ctx, const Tensor& self, const Tensor& mat2, Tensor& out) {
  ET_CHECK_OK(check_operands(ctx, self, "self", mat2, "mat2", out, 2));
  const int64_t sizes[2] = {self.size(0), mat2.size(1)};
  ET_CHECK_OK(linalg::resize(ctx, out, sizes, 2, "out"));
  return run_product(ctx, Product{1, self.size(0), mat2.size(1), self.size(1)}, self, mat2, out, nullptr, Bias{});
}

Error bmm_out(KernelContext& ctx, const Tensor& self, const Tensor& mat2, Tensor& out) {
  ET_CHECK_OK(check_operands(ctx, self, "self", mat2, "mat2", out, 3));
  if (self.size(0) != mat2.size(0)) {
    return ctx.fail(ErrorCode::InvalidArgument, "self %s and mat2 %s must have the same batch size",
                    Described(self).text, Described(mat2).text);
  }
  const int64_t sizes[3] = {self.size(0), self.size(1), mat2.size(2)};
  ET_CHECK_OK(linalg::resize(ctx, out, sizes, 3, "out"));
  return run_product(ctx, Product{self.size(0), self.size(1), mat2.size(2), self.size(2)}, self, mat2, out, nullptr,
                     Bias{});
}

// self broadcasts to [m, n] from [], [n], [1, n], [m, 1], [m, n], ...; beta == 0
// ignores self entirely (NaN there does not propagate), as torch does.
Error addmm_out(KernelContext& ctx, const Tensor& self, const Tensor& mat1, const Tensor& mat2, const EValue& beta,
                const EValue& alpha, Tensor& out) {
  ET_CHECK_OK(check_operands(ctx, mat1, "mat1", mat2, "mat2", out, 2));
  ET_CHECK_OK(linalg::check_sane(ctx, self, "self"));
  ET_CHECK_OK(linalg::check_dtype(ctx, self, mat1.dtype(), "self"));
  const int64_t m = mat1.size(0);
  const int64_t n = mat2.size(1);
  if (self.dim() > 2) {
    return ctx.fail(ErrorCode::InvalidArgument, "self %s must broadcast to [%lld, %lld] (at most 2-D)",
                    Described(self).text, static_cast<long long>(m), static_cast<long long>(n));
  }
  const int64_t bias_m = self.dim() == 2 ? self.size(0) : 1;
  const int64_t bias_n = self.dim() >= 1 ? self.size(self.dim() - 1) : 1;
  if ((bias_m != 1 && bias_m != m) || (bias_n != 1 && bias_n != n)) {
    return ctx.fail(ErrorCode::InvalidArgument, "self %s does not broadcast to the product's shape [%lld, %lld]",
                    Described(self).text, static_cast<long long>(m), static_cast<long long>(n));
  }
  const int64_t sizes[2] = {m, n};
  ET_CHECK_OK(linalg::resize(ctx, out, sizes, 2, "out"));
  Bias bias;
  const bool beta_zero = beta.is_double() ? beta.to_double() == 0.0 : beta.scalar_to_int() == 0;
  if (!beta_zero) bias = Bias{&self, bias_m == 1 ? 0 : bias_n, bias_n == 1 ? 0 : 1, &beta};
  return run_product(ctx, Product{1, m, n, mat1.size(1)}, mat1, mat2, out, &alpha, bias);
}

}  // namespace portable
}  // namespace etmlir
