// Factory kernels: full, full_like, fill, scalar_tensor, zeros, ones, empty,
// empty_strided and arange. They resize out to the requested shape (or, for
// arange, the computed length) and fill it in out's dtype, any dtype.
//
// Scalars convert to out's dtype with PyTorch's overflow check (300 into
// uint8 is an error, not 44). empty and empty_strided zero their out: the
// contents are unspecified, but a deterministic result is easier to debug.
#include <cmath>
#include <cstring>
#include <limits>

#include "copy_util.h"
#include "generated/factory.h"
#include "kernel_util.h"

namespace etmlir {
namespace {

// Resizes out to `size` (validated: non-negative, at most kMaxDims).
Error resize_to_list(KernelContext& ctx, Span<const int64_t> size, Tensor& out) {
  if (size.size() > static_cast<size_t>(kMaxDims)) {
    return ctx.fail(ErrorCode::InvalidArgument, "size has %zu entries; at most %d dims are supported", size.size(),
                    kMaxDims);
  }
  for (size_t d = 0; d < size.size(); ++d) {
    if (size[d] < 0) {
      return ctx.fail(ErrorCode::InvalidArgument, "size[%zu] is %lld; sizes must be non-negative", d,
                      static_cast<long long>(size[d]));
    }
  }
  return kutil::resize_out(ctx, out, size.data(), static_cast<int32_t>(size.size()));
}

// Writes Scalar `value` (argument `what`) to every element of out.
Error fill(KernelContext& ctx, const EValue& value, const char* what, Tensor& out) {
  ET_CHECK_OK(kutil_copy::check_scalar_fits(ctx, value, out.dtype(), what));
  uint64_t bits = 0;
  if (!kutil_copy::scalar_bits(value, out.dtype(), &bits)) {
    return kutil::unsupported_dtype(ctx, "out", out.dtype(), "known dtypes");
  }
  kutil_copy::fill_elements(out.mutable_data(), bits, out.element_size(), out.numel());
  return Error::ok();
}

// All-zero bytes are 0 in every dtype.
Error zero(KernelContext& ctx, Tensor& out) {
  if (out.element_size() == 0) return kutil::unsupported_dtype(ctx, "out", out.dtype(), "known dtypes");
  if (out.nbytes() > 0) std::memset(out.mutable_data(), 0, out.nbytes());
  return Error::ok();
}

Error check_memory_format(KernelContext& ctx, std::optional<int64_t> memory_format) {
  // c10::MemoryFormat: 0 Contiguous, 1 Preserve; every runtime tensor is contiguous.
  if (memory_format && *memory_format != 0 && *memory_format != 1) {
    return ctx.fail(ErrorCode::NotSupported, "memory_format %lld is not supported (only contiguous tensors)",
                    static_cast<long long>(*memory_format));
  }
  return Error::ok();
}

EValue int_scalar(int64_t v) {
  EValue e;
  e.tag = Tag::Int;
  e.payload.as_int = v;
  return e;
}

// arange into out (rank 1, resized to the length), following PyTorch's
// RangeFactories: int64 sizes the result in int64, other dtypes in double;
// values are start + i * step in the accumulate type (double for float32 and
// float64, float for float16 and bfloat16, int64 for integers).
Error arange(KernelContext& ctx, const EValue& start, const EValue& end, const EValue& step, Tensor& out) {
  if (out.dim() != 1) {
    return ctx.fail(ErrorCode::InvalidArgument, "out must have rank 1, got rank %d", out.dim());
  }
  const ScalarType dtype = out.dtype();
  if (dtype == ScalarType::Bool || out.element_size() == 0) {
    return kutil::unsupported_dtype(ctx, "out", dtype,
                                    "float32, float64, float16, bfloat16, int64, int32, int16, int8, uint8");
  }
  const double dstart = start.scalar_to_double();
  const double dend = end.scalar_to_double();
  const double dstep = step.scalar_to_double();
  if (!std::isfinite(dstart) || !std::isfinite(dend)) {
    return ctx.fail(ErrorCode::InvalidArgument, "unsupported range: %g -> %g", dstart, dend);
  }
  int64_t length = 0;
  if (dtype == ScalarType::Int64) {
    const int64_t s = kutil::scalar_as<int64_t>(start);
    const int64_t e = kutil::scalar_as<int64_t>(end);
    const int64_t st = kutil::scalar_as<int64_t>(step);
    if (st == 0) return ctx.fail(ErrorCode::InvalidArgument, "step must be nonzero");
    if ((st > 0 && e < s) || (st < 0 && e > s)) {
      return ctx.fail(ErrorCode::InvalidArgument, "upper bound %lld and lower bound %lld inconsistent with step %lld",
                      static_cast<long long>(e), static_cast<long long>(s), static_cast<long long>(st));
    }
    // ceil((e - s) / st) without overflow: the distance fits in uint64.
    const uint64_t dist = st > 0 ? static_cast<uint64_t>(e) - static_cast<uint64_t>(s)
                                 : static_cast<uint64_t>(s) - static_cast<uint64_t>(e);
    const uint64_t mag = st > 0 ? static_cast<uint64_t>(st) : uint64_t{0} - static_cast<uint64_t>(st);
    const uint64_t n = dist / mag + (dist % mag != 0);
    if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return ctx.fail(ErrorCode::InvalidArgument, "arange length overflows int64");
    }
    length = static_cast<int64_t>(n);
  } else {
    if (!(dstep > 0 || dstep < 0)) return ctx.fail(ErrorCode::InvalidArgument, "step must be nonzero");
    if ((dstep > 0 && dend < dstart) || (dstep < 0 && dend > dstart)) {
      return ctx.fail(ErrorCode::InvalidArgument, "upper bound %g and lower bound %g inconsistent with step %g", dend,
                      dstart, dstep);
    }
    const double n = std::ceil((dend - dstart) / dstep);
    if (!(n >= 0 && n < 9.2e18)) return ctx.fail(ErrorCode::InvalidArgument, "invalid arange length %g", n);
    length = static_cast<int64_t>(n);
  }
  ET_CHECK_OK(kutil::resize_out(ctx, out, &length, 1));

  if (dtype == ScalarType::Float || dtype == ScalarType::Double) {
    kutil::dispatch_floating(dtype, [&](auto tag) {
      using T = decltype(tag);
      T* p = out.data_as<T>();
      for (int64_t i = 0; i < length; ++i) p[i] = static_cast<T>(dstart + dstep * static_cast<double>(i));
    });
  } else if (kutil::is_half_dtype(dtype)) {
    const float fstart = kutil::scalar_as<float>(start);
    const float fstep = kutil::scalar_as<float>(step);
    kutil::dispatch_storage(dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (kutil::is_half_v<T>) {
        T* p = out.data_as<T>();
        for (int64_t i = 0; i < length; ++i) p[i] = kutil::convert<T>(fstart + fstep * static_cast<float>(i));
      }
    });
  } else {
    kutil::dispatch_convertible(dtype, [&](auto tag) {
      using T = decltype(tag);
      // Integer accumulate type (int64), wrapping like PyTorch.
      const uint64_t s = static_cast<uint64_t>(kutil::scalar_as<int64_t>(start));
      const uint64_t st = static_cast<uint64_t>(kutil::scalar_as<int64_t>(step));
      T* p = out.data_as<T>();
      for (int64_t i = 0; i < length; ++i) p[i] = static_cast<T>(s + st * static_cast<uint64_t>(i));
    });
  }
  return Error::ok();
}

}  // namespace

namespace portable {

Error full_out(KernelContext& ctx, Span<const int64_t> size, const EValue& fill_value, Tensor& out) {
  ET_CHECK_OK(resize_to_list(ctx, size, out));
  return fill(ctx, fill_value, "fill_value", out);
}

Error full_like_out(KernelContext& ctx, const Tensor& self, const EValue& fill_value,
                    std::optional<int64_t> memory_format, Tensor& out) {
  ET_CHECK_OK(check_memory_format(ctx, memory_format));
  ET_CHECK_OK(kutil::resize_out(ctx, out, self.sizes(), self.dim()));
  return fill(ctx, fill_value, "fill_value", out);
}

// out = self.clone().fill_(value): self's shape and dtype.
Error fill_scalar_out(KernelContext& ctx, const Tensor& self, const EValue& value, Tensor& out) {
  ET_CHECK_OK(kutil_copy::check_same_dtype(ctx, self, out));
  ET_CHECK_OK(kutil::resize_out(ctx, out, self.sizes(), self.dim()));
  return fill(ctx, value, "value", out);
}

Error scalar_tensor_out(KernelContext& ctx, const EValue& s, Tensor& out) {
  ET_CHECK_OK(kutil::resize_out(ctx, out, nullptr, 0));
  return fill(ctx, s, "s", out);
}

Error zeros_out(KernelContext& ctx, Span<const int64_t> size, Tensor& out) {
  ET_CHECK_OK(resize_to_list(ctx, size, out));
  return zero(ctx, out);
}

Error ones_out(KernelContext& ctx, Span<const int64_t> size, Tensor& out) {
  ET_CHECK_OK(resize_to_list(ctx, size, out));
  return fill(ctx, int_scalar(1), "one", out);
}

Error empty_out(KernelContext& ctx, Span<const int64_t> size, std::optional<int64_t> memory_format, Tensor& out) {
  ET_CHECK_OK(check_memory_format(ctx, memory_format));
  ET_CHECK_OK(resize_to_list(ctx, size, out));
  return zero(ctx, out);
}

// The strides only describe a layout; every runtime tensor is contiguous, and
// the contents are unspecified, so only their count is checked.
Error empty_strided_out(KernelContext& ctx, Span<const int64_t> size, Span<const int64_t> stride, Tensor& out) {
  if (stride.size() != size.size()) {
    return ctx.fail(ErrorCode::InvalidArgument, "stride has %zu entries; expected one per size entry (%zu)",
                    stride.size(), size.size());
  }
  ET_CHECK_OK(resize_to_list(ctx, size, out));
  return zero(ctx, out);
}

Error arange_start_out(KernelContext& ctx, const EValue& start, const EValue& end, const EValue& step, Tensor& out) {
  return arange(ctx, start, end, step, out);
}

Error arange_out(KernelContext& ctx, const EValue& end, Tensor& out) {
  return arange(ctx, int_scalar(0), end, int_scalar(1), out);
}

}  // namespace portable
}  // namespace etmlir
