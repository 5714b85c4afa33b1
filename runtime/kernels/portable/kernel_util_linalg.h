// Helpers shared by the linear-algebra side of the portable kernels (matmul,
// convolution, normalization, softmax, reductions, embedding, upsample):
// argument checks with messages that name the argument, dim normalization,
// and dtype dispatch through generic lambdas. Header-only, no state.
#pragma once

#include <cstddef>
#include <cstdint>

#include "etmlir/runtime/evalue.h"
#include "etmlir/runtime/kernel.h"
#include "etmlir/runtime/tensor.h"
#include "kernel_util.h"

namespace etmlir {
namespace linalg {

// A tensor's "float32[2, 3]" for a message; lives until the end of the full
// expression: ctx.fail(..., "%s", Described(t).text).
struct Described {
  char text[192];
  explicit Described(const Tensor& t) { t.describe(text, sizeof(text)); }
};

// Sizes above this are rejected as corrupt before any arithmetic on them, so
// products of two sizes or a size and a (checked) parameter cannot overflow.
constexpr int64_t kMaxSize = (int64_t{1} << 31) - 1;

inline Error check_sane(KernelContext& ctx, const Tensor& t, const char* name) {
  for (int32_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) < 0 || t.size(d) > kMaxSize) {
      return ctx.fail(ErrorCode::InvalidArgument, "%s %s has an impossible size %lld in dim %d", name,
                      Described(t).text, static_cast<long long>(t.size(d)), d);
    }
  }
  return Error::ok();
}

// dim in [-rank, rank) -> [0, rank); a 0-d tensor accepts -1 and 0 (as
// torch does). False when out of range.
inline bool normalize_dim(int64_t dim, int64_t rank, int64_t* out) {
  const int64_t r = rank == 0 ? 1 : rank;
  if (dim < -r || dim >= r) return false;
  *out = dim < 0 ? dim + r : dim;
  return true;
}

inline Error dim_error(KernelContext& ctx, const char* what, int64_t dim, const Tensor& t) {
  const int64_t r = t.dim() == 0 ? 1 : t.dim();
  return ctx.fail(ErrorCode::InvalidArgument, "%s %lld is out of range for %s (expected a dim in [%lld, %lld])", what,
                  static_cast<long long>(dim), Described(t).text, static_cast<long long>(-r),
                  static_cast<long long>(r - 1));
}

// Resizes an out tensor; a failure names the op ("aten::mm.out: cannot resize out ...").
inline Error resize(KernelContext& ctx, Tensor& t, const int64_t* sizes, int32_t dim, const char* name) {
  Error e = t.resize(sizes, dim, name);
  if (e) e.prefix("%s", ctx.op_name());
  return e;
}

inline bool same_sizes(const Tensor& a, const Tensor& b) {
  if (a.dim() != b.dim()) return false;
  for (int32_t d = 0; d < a.dim(); ++d) {
    if (a.size(d) != b.size(d)) return false;
  }
  return true;
}

inline Error check_dtype(KernelContext& ctx, const Tensor& t, ScalarType want, const char* name) {
  if (t.dtype() != want) {
    return ctx.fail(ErrorCode::InvalidArgument, "%s must be %s like the input, got %s", name, dtype_name(want),
                    Described(t).text);
  }
  return Error::ok();
}

inline Error unsupported_dtype(KernelContext& ctx, const Tensor& t, const char* name) {
  return ctx.fail(ErrorCode::NotSupported, "%s dtype %s is not supported by this kernel", name, dtype_name(t.dtype()));
}

// A 'f'/'F' argument: the loader accepts an Int there too.
inline double number_arg(const EValue& v) { return v.scalar_to_double(); }

// Element-type dispatch: the elementwise kernels' (kernel_util.h).
using kutil::dispatch_floating;
using kutil::dispatch_real;

// Every dtype whose elements are plain numbers (bool as bool, 8/16-bit ints);
// not Half/BFloat16.
template <typename F>
bool dispatch_all_numeric(ScalarType dtype, F&& f) {
  switch (dtype) {
    case ScalarType::Bool: f(bool{}); return true;
    case ScalarType::UInt8: f(uint8_t{}); return true;
    case ScalarType::Int8: f(int8_t{}); return true;
    case ScalarType::Int16: f(int16_t{}); return true;
    default: return dispatch_real(dtype, static_cast<F&&>(f));
  }
}

}  // namespace linalg
}  // namespace etmlir
