// Factory kernels: full, full_like, zeros, ones, scalar_tensor, arange.
// They resize out to the requested shape (or, for arange, the computed
// length) and fill it in out's dtype.
#include <cmath>
#include <cstring>
#include <limits>

#include "kernel_util.h"
#include "portable_kernels.h"

namespace etmlir {
namespace {

// Resizes out to the int list `size` (validated: non-negative, at most kMaxDims).
Error resize_to_list(KernelContext& ctx, const EValue& size, Tensor& out) {
  Span<const int64_t> sizes = size.to_int_list();
  if (sizes.size() > static_cast<size_t>(kMaxDims)) {
    return ctx.fail(ErrorCode::InvalidArgument, "size has %zu entries; at most %d dims are supported", sizes.size(),
                    kMaxDims);
  }
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] < 0) {
      return ctx.fail(ErrorCode::InvalidArgument, "size[%zu] is %lld; sizes must be non-negative", d,
                      static_cast<long long>(sizes[d]));
    }
  }
  return kutil::resize_out(ctx, out, sizes.data(), static_cast<int32_t>(sizes.size()));
}

// Writes `value` (a Scalar) to every element of out.
Error fill(KernelContext& ctx, const EValue& value, Tensor& out) {
  const int64_t n = out.numel();
  bool ok = kutil::dispatch_convertible(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T v = kutil::scalar_as<T>(value);
    T* p = out.data_as<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = v;
  });
  if (!ok) {
    return kutil::unsupported_dtype(ctx, "out", out.dtype(), "float32, float64, int64, int32, int16, int8, uint8, bool");
  }
  return Error::ok();
}

Error check_memory_format(KernelContext& ctx, const EValue& memory_format) {
  // c10::MemoryFormat: 0 Contiguous, 1 Preserve; every runtime tensor is contiguous.
  if (!memory_format.is_none() && memory_format.to_int() != 0 && memory_format.to_int() != 1) {
    return ctx.fail(ErrorCode::NotSupported, "memory_format %lld is not supported (only contiguous tensors)",
                    static_cast<long long>(memory_format.to_int()));
  }
  return Error::ok();
}

// aten::full.out(SymInt[] size, Scalar fill_value, *, Tensor(a!) out)
Error full_out(KernelContext& ctx, EValue** args) {
  Tensor& out = args[2]->to_tensor();
  ET_CHECK_OK(resize_to_list(ctx, *args[0], out));
  return fill(ctx, *args[1], out);
}

// aten::full_like.out(Tensor self, Scalar fill_value, *, MemoryFormat? memory_format=None, Tensor(a!) out)
Error full_like_out(KernelContext& ctx, EValue** args) {
  const Tensor& self = args[0]->to_tensor();
  Tensor& out = args[3]->to_tensor();
  ET_CHECK_OK(check_memory_format(ctx, *args[2]));
  ET_CHECK_OK(kutil::resize_out(ctx, out, self.sizes(), self.dim()));
  return fill(ctx, *args[1], out);
}

// aten::zeros.out(SymInt[] size, *, Tensor(a!) out): all-zero bytes are 0 in every dtype.
Error zeros_out(KernelContext& ctx, EValue** args) {
  Tensor& out = args[1]->to_tensor();
  ET_CHECK_OK(resize_to_list(ctx, *args[0], out));
  if (out.nbytes() > 0) std::memset(out.mutable_data(), 0, out.nbytes());
  return Error::ok();
}

// aten::ones.out(SymInt[] size, *, Tensor(a!) out)
Error ones_out(KernelContext& ctx, EValue** args) {
  Tensor& out = args[1]->to_tensor();
  ET_CHECK_OK(resize_to_list(ctx, *args[0], out));
  EValue one;
  one.tag = Tag::Int;
  one.payload.as_int = 1;
  return fill(ctx, one, out);
}

// aten::scalar_tensor.out(Scalar s, *, Tensor(a!) out)
Error scalar_tensor_out(KernelContext& ctx, EValue** args) {
  Tensor& out = args[1]->to_tensor();
  ET_CHECK_OK(kutil::resize_out(ctx, out, nullptr, 0));
  return fill(ctx, *args[0], out);
}

// arange into out (rank 1, resized to the length), following PyTorch's
// RangeFactories: int64 computes in int64, other dtypes size the result in
// double; values are start + i * step in the accumulate type.
Error arange(KernelContext& ctx, const EValue& start, const EValue& end, const EValue& step, Tensor& out) {
  if (out.dim() != 1) {
    return ctx.fail(ErrorCode::InvalidArgument, "out must have rank 1, got rank %d", out.dim());
  }
  const double dstart = start.scalar_to_double();
  const double dend = end.scalar_to_double();
  const double dstep = step.scalar_to_double();
  if (!std::isfinite(dstart) || !std::isfinite(dend)) {
    return ctx.fail(ErrorCode::InvalidArgument, "unsupported range: %g -> %g", dstart, dend);
  }
  int64_t length = 0;
  if (out.dtype() == ScalarType::Int64) {
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

  bool ok = true;
  if (kutil::is_floating(out.dtype())) {
    ok = kutil::dispatch_floating(out.dtype(), [&](auto tag) {
      using T = decltype(tag);
      T* p = out.data_as<T>();
      for (int64_t i = 0; i < length; ++i) p[i] = static_cast<T>(dstart + dstep * static_cast<double>(i));
    });
  } else if (out.dtype() != ScalarType::Bool) {
    ok = kutil::dispatch_convertible(out.dtype(), [&](auto tag) {
      using T = decltype(tag);
      // Integer accumulate type (int64), wrapping like PyTorch.
      const uint64_t s = static_cast<uint64_t>(kutil::scalar_as<int64_t>(start));
      const uint64_t st = static_cast<uint64_t>(kutil::scalar_as<int64_t>(step));
      T* p = out.data_as<T>();
      for (int64_t i = 0; i < length; ++i) p[i] = static_cast<T>(s + st * static_cast<uint64_t>(i));
    });
  } else {
    ok = false;
  }
  if (!ok) {
    return kutil::unsupported_dtype(ctx, "out", out.dtype(), "float32, float64, int64, int32, int16, int8, uint8");
  }
  return Error::ok();
}

// aten::arange.start_out(Scalar start, Scalar end, Scalar step=1, *, Tensor(a!) out)
Error arange_start_out(KernelContext& ctx, EValue** args) {
  return arange(ctx, *args[0], *args[1], *args[2], args[3]->to_tensor());
}

// aten::arange.out(Scalar end, *, Tensor(a!) out)
Error arange_out(KernelContext& ctx, EValue** args) {
  EValue zero, one;
  zero.tag = one.tag = Tag::Int;
  zero.payload.as_int = 0;
  one.payload.as_int = 1;
  return arange(ctx, zero, *args[0], one, args[1]->to_tensor());
}

}  // namespace

Error register_factory_kernels(KernelRegistry& r) {
  ET_REGISTER_KERNEL(r, "aten::full.out", "Ls|T", full_out);
  ET_REGISTER_KERNEL(r, "aten::full_like.out", "TsI|T", full_like_out);
  ET_REGISTER_KERNEL(r, "aten::zeros.out", "L|T", zeros_out);
  ET_REGISTER_KERNEL(r, "aten::ones.out", "L|T", ones_out);
  ET_REGISTER_KERNEL(r, "aten::scalar_tensor.out", "s|T", scalar_tensor_out);
  ET_REGISTER_KERNEL(r, "aten::arange.start_out", "sss|T", arange_start_out);
  ET_REGISTER_KERNEL(r, "aten::arange.out", "s|T", arange_out);
  return Error::ok();
}

}  // namespace etmlir
