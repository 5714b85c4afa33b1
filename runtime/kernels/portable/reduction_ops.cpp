// Reductions over a set of dims: aten::mean.out, aten::sum.IntList_out,
// aten::amax.out, aten::any.out / any.dims_out / any.all_out.
//
// One engine: the dims are split into kept and reduced ones (adjacent dims of
// the same kind merged, since every tensor is contiguous), then every output
// element walks its reduced elements with the innermost reduced dim as a
// tight strided loop. sum and mean accumulate in double (floating outputs)
// or int64 (integer outputs).
#include <cmath>
#include <type_traits>

#include "kernel_util_linalg.h"
#include "portable_kernels.h"

namespace etmlir {
namespace {

using linalg::Described;

// Dims of one kind (kept or reduced), outermost first.
struct Loop {
  int32_t n = 0;
  int64_t size[kMaxDims];
  int64_t stride[kMaxDims];
};

struct Plan {
  Loop kept;
  Loop reduced;
  int64_t count = 1;             // reduced elements per output element
  int32_t out_rank = 0;
  int64_t out_sizes[kMaxDims];
  int64_t empty_reduced_dim = -1;  // a reduced dim of size 0, if any
};

// a * b for sizes, saturating instead of overflowing (a tensor with a 0 dim
// may have other dims whose product is huge; nothing is then iterated).
int64_t sat_mul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > INT64_MAX / b ? INT64_MAX : a * b;
}

// The dims a reduction's `int[]?` argument names (None = empty = every dim).
Span<const int64_t> dims_of(const EValue& dims) {
  return dims.is_none() ? Span<const int64_t>() : dims.to_int_list();
}

// `dims` empty means every dim (sum, mean, amax), or no dim at all when
// `empty_is_none` (any.dims, where only None means every dim); duplicates
// are errors.
Error make_plan(KernelContext& ctx, const Tensor& in, Span<const int64_t> dims, bool keepdim, Plan* plan,
                bool empty_is_none = false) {
  ET_CHECK_OK(linalg::check_sane(ctx, in, "self"));
  const int32_t rank = in.dim();
  bool reduce[kMaxDims] = {};
  if (dims.empty() && !empty_is_none) {
    for (int32_t d = 0; d < rank; ++d) reduce[d] = true;
  } else {
    for (size_t i = 0; i < dims.size(); ++i) {
      int64_t d = 0;
      if (!linalg::normalize_dim(dims[i], rank, &d)) return linalg::dim_error(ctx, "dim", dims[i], in);
      if (rank == 0) continue;  // a 0-d tensor reduces to itself
      if (reduce[d]) {
        return ctx.fail(ErrorCode::InvalidArgument, "dim %lld appears more than once in the list of dims",
                        static_cast<long long>(d));
      }
      reduce[d] = true;
    }
  }
  // In a contiguous tensor dim d's stride is the product of the sizes after it.
  int64_t strides[kMaxDims];
  int64_t stride = 1;
  for (int32_t d = rank - 1; d >= 0; --d) {
    strides[d] = stride;
    stride = sat_mul(stride, in.size(d) == 0 ? 1 : in.size(d));
  }
  int32_t previous = -1;  // kind of dim d - 1: 0 kept, 1 reduced
  for (int32_t d = 0; d < rank; ++d) {
    const int64_t size = in.size(d);
    const int32_t kind = reduce[d] ? 1 : 0;
    if (reduce[d]) {
      if (size == 0 && plan->empty_reduced_dim < 0) plan->empty_reduced_dim = d;
      plan->count = sat_mul(plan->count, size);
      if (keepdim) plan->out_sizes[plan->out_rank++] = 1;
    } else {
      plan->out_sizes[plan->out_rank++] = size;
    }
    Loop& loop = reduce[d] ? plan->reduced : plan->kept;
    if (previous == kind) {
      // Adjacent dims of one kind form one dim of a contiguous tensor.
      loop.size[loop.n - 1] = sat_mul(loop.size[loop.n - 1], size);
      loop.stride[loop.n - 1] = strides[d];
    } else {
      loop.size[loop.n] = size;
      loop.stride[loop.n] = strides[d];
      ++loop.n;
    }
    previous = kind;
  }
  return Error::ok();
}

// Calls f(offset) for every input element reduced into one output element
// (base offset `base`), innermost reduced dim last. Stops early when f
// returns false.
template <typename F>
void for_each_reduced(const Loop& r, int64_t base, F&& f) {
  if (r.n == 0) {
    f(base);
    return;
  }
  if (r.n == 1) {  // the common case: one (merged) run of reduced elements
    for (int64_t i = 0; i < r.size[0]; ++i) {
      if (!f(base + i * r.stride[0])) return;
    }
    return;
  }
  for (int32_t d = 0; d < r.n; ++d) {
    if (r.size[d] == 0) return;  // nothing to reduce
  }
  int64_t index[kMaxDims] = {};
  const int32_t inner = r.n - 1;
  const int64_t inner_size = r.size[inner];
  const int64_t inner_stride = r.stride[inner];
  for (;;) {
    int64_t offset = base;
    for (int32_t d = 0; d < inner; ++d) offset += index[d] * r.stride[d];
    for (int64_t i = 0; i < inner_size; ++i) {
      if (!f(offset + i * inner_stride)) return;
    }
    int32_t d = inner - 1;
    for (; d >= 0; --d) {
      if (++index[d] < r.size[d]) break;
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

// Calls g(out_index, base) for every output element, in output order.
template <typename G>
void for_each_output(const Loop& k, G&& g) {
  if (k.n <= 1) {
    const int64_t size = k.n == 0 ? 1 : k.size[0];
    const int64_t stride = k.n == 0 ? 0 : k.stride[0];
    for (int64_t o = 0; o < size; ++o) g(o, o * stride);
    return;
  }
  int64_t index[kMaxDims] = {};
  int64_t out_index = 0;
  for (;;) {
    int64_t base = 0;
    for (int32_t d = 0; d < k.n; ++d) base += index[d] * k.stride[d];
    g(out_index++, base);
    int32_t d = k.n - 1;
    for (; d >= 0; --d) {
      if (++index[d] < k.size[d]) break;
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

// Resizes `out` to the plan's shape; true when there is anything to compute.
Error resize_out(KernelContext& ctx, Tensor& out, const Plan& plan, bool* any) {
  ET_CHECK_OK(linalg::resize(ctx, out, plan.out_sizes, plan.out_rank, "out"));
  *any = out.numel() > 0;
  return Error::ok();
}

// The `ScalarType? dtype` argument: None, or the out tensor's dtype.
Error check_dtype_arg(KernelContext& ctx, const EValue& dtype, const Tensor& out) {
  if (dtype.is_none()) return Error::ok();
  const int64_t raw = dtype.to_int();
  if (raw < -128 || raw > 127 || !is_known_dtype(static_cast<int8_t>(raw))) {
    return ctx.fail(ErrorCode::InvalidArgument, "dtype %lld is not a known ScalarType", static_cast<long long>(raw));
  }
  if (static_cast<ScalarType>(raw) != out.dtype()) {
    return ctx.fail(ErrorCode::InvalidArgument, "dtype is %s but out is %s", dtype_name(static_cast<ScalarType>(raw)),
                    Described(out).text);
  }
  return Error::ok();
}

bool is_floating(ScalarType t) { return t == ScalarType::Float || t == ScalarType::Double; }

// out = sum (or mean) of self over the plan's reduced dims.
Error sum_or_mean(KernelContext& ctx, const Tensor& self, Tensor& out, const Plan& plan, bool mean) {
  if (is_floating(self.dtype()) && !is_floating(out.dtype())) {
    return ctx.fail(ErrorCode::NotSupported, "summing %s into an integer out %s is not supported",
                    Described(self).text, Described(out).text);
  }
  bool handled_in = linalg::dispatch_all_numeric(self.dtype(), [&](auto in_zero) {
    using In = decltype(in_zero);
    bool handled_out = linalg::dispatch_real(out.dtype(), [&](auto out_zero) {
      using Out = decltype(out_zero);
      using Acc = typename std::conditional<std::is_floating_point<Out>::value, double, int64_t>::type;
      const In* x = self.data_as<const In>();
      Out* y = out.data_as<Out>();
      for_each_output(plan.kept, [&](int64_t o, int64_t base) {
        Acc acc = 0;
        for_each_reduced(plan.reduced, base, [&](int64_t i) {
          if constexpr (std::is_integral<Acc>::value) {
            acc = static_cast<Acc>(static_cast<uint64_t>(acc) + static_cast<uint64_t>(x[i]));  // wraps
          } else {
            acc += static_cast<Acc>(x[i]);
          }
          return true;
        });
        if (mean) {
          y[o] = static_cast<Out>(static_cast<double>(acc) / static_cast<double>(plan.count));
        } else {
          y[o] = static_cast<Out>(acc);
        }
      });
    });
    (void)handled_out;  // out dtypes were checked by the callers
  });
  if (!handled_in) return linalg::unsupported_dtype(ctx, self, "self");
  return Error::ok();
}

// aten::mean.out(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None, Tensor(a!) out)
Error mean_out(KernelContext& ctx, EValue** args) {
  const Tensor& self = args[0]->to_tensor();
  Tensor& out = args[4]->to_tensor();
  Plan plan;
  ET_CHECK_OK(make_plan(ctx, self, dims_of(*args[1]), args[2]->to_bool(), &plan));
  ET_CHECK_OK(check_dtype_arg(ctx, *args[3], out));
  if (!is_floating(out.dtype())) {
    return ctx.fail(ErrorCode::NotSupported, "out dtype %s: mean needs a float32 or float64 result",
                    dtype_name(out.dtype()));
  }
  if (args[3]->is_none() && self.dtype() != out.dtype()) {
    return ctx.fail(ErrorCode::InvalidArgument, "out %s must have self's dtype %s (or pass dtype)",
                    Described(out).text, dtype_name(self.dtype()));
  }
  bool any = false;
  ET_CHECK_OK(resize_out(ctx, out, plan, &any));
  if (!any) return Error::ok();
  return sum_or_mean(ctx, self, out, plan, true);
}

// aten::sum.IntList_out(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None, Tensor(a!) out)
Error sum_out(KernelContext& ctx, EValue** args) {
  const Tensor& self = args[0]->to_tensor();
  Tensor& out = args[4]->to_tensor();
  Plan plan;
  ET_CHECK_OK(make_plan(ctx, self, dims_of(*args[1]), args[2]->to_bool(), &plan));
  ET_CHECK_OK(check_dtype_arg(ctx, *args[3], out));
  if (args[3]->is_none()) {
    // Integers and bools sum to int64, as in torch.
    const ScalarType want = is_floating(self.dtype()) ? self.dtype() : ScalarType::Int64;
    if (out.dtype() != want) {
      return ctx.fail(ErrorCode::InvalidArgument, "out %s must be %s for self %s (or pass dtype)",
                      Described(out).text, dtype_name(want), Described(self).text);
    }
  }
  bool handled = linalg::dispatch_real(out.dtype(), [](auto) {});
  if (!handled) return linalg::unsupported_dtype(ctx, out, "out");
  bool any = false;
  ET_CHECK_OK(resize_out(ctx, out, plan, &any));
  if (!any) return Error::ok();
  return sum_or_mean(ctx, self, out, plan, false);
}

// aten::amax.out(Tensor self, int[1] dim=[], bool keepdim=False, *, Tensor(a!) out)
Error amax_out(KernelContext& ctx, EValue** args) {
  const Tensor& self = args[0]->to_tensor();
  Tensor& out = args[3]->to_tensor();
  Plan plan;
  ET_CHECK_OK(make_plan(ctx, self, dims_of(*args[1]), args[2]->to_bool(), &plan));
  ET_CHECK_OK(linalg::check_dtype(ctx, out, self.dtype(), "out"));
  if (plan.empty_reduced_dim >= 0) {
    return ctx.fail(ErrorCode::InvalidArgument, "cannot take the maximum over dim %lld of %s: it has size 0",
                    static_cast<long long>(plan.empty_reduced_dim), Described(self).text);
  }
  bool any = false;
  ET_CHECK_OK(resize_out(ctx, out, plan, &any));
  if (!any) return Error::ok();
  bool handled = linalg::dispatch_all_numeric(self.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* x = self.data_as<const T>();
    T* y = out.data_as<T>();
    for_each_output(plan.kept, [&](int64_t o, int64_t base) {
      bool first = true;
      T best = T(0);
      for_each_reduced(plan.reduced, base, [&](int64_t i) {
        const T v = x[i];
        // NaN wins and sticks (v != v only for NaN).
        if (first || v > best || v != v) best = v;
        first = false;
        return !(best != best);
      });
      y[o] = best;
    });
  });
  if (!handled) return linalg::unsupported_dtype(ctx, self, "self");
  return Error::ok();
}

Error any_impl(KernelContext& ctx, const Tensor& self, Tensor& out, const Plan& plan) {
  if (out.dtype() != ScalarType::Bool && out.dtype() != ScalarType::UInt8) {
    return ctx.fail(ErrorCode::InvalidArgument, "out %s must be bool (or uint8)", Described(out).text);
  }
  bool any = false;
  ET_CHECK_OK(resize_out(ctx, out, plan, &any));
  if (!any) return Error::ok();
  bool handled = linalg::dispatch_all_numeric(self.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* x = self.data_as<const T>();
    uint8_t* y = out.data_as<uint8_t>();  // bool and uint8 are both one byte, 0 or 1
    for_each_output(plan.kept, [&](int64_t o, int64_t base) {
      bool found = false;
      for_each_reduced(plan.reduced, base, [&](int64_t i) {
        found = x[i] != T(0);
        return !found;
      });
      y[o] = found ? 1 : 0;
    });
  });
  if (!handled) return linalg::unsupported_dtype(ctx, self, "self");
  return Error::ok();
}

// aten::any.out(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) out)
Error any_dim_out(KernelContext& ctx, EValue** args) {
  const Tensor& self = args[0]->to_tensor();
  ET_CHECK_OK(linalg::check_sane(ctx, self, "self"));
  int64_t dim = 0;
  if (!linalg::normalize_dim(args[1]->to_int(), self.dim(), &dim)) {
    return linalg::dim_error(ctx, "dim", args[1]->to_int(), self);
  }
  const int64_t one[1] = {dim};
  Plan plan;
  ET_CHECK_OK(make_plan(ctx, self, Span<const int64_t>(one, 1), args[2]->to_bool(), &plan));
  return any_impl(ctx, self, args[3]->to_tensor(), plan);
}

// aten::any.dims_out(Tensor self, int[]? dim=None, bool keepdim=False, *, Tensor(a!) out)
// dim=None reduces every dim; dim=[] none (torch's semantics for any.dims).
Error any_dims_out(KernelContext& ctx, EValue** args) {
  const Tensor& self = args[0]->to_tensor();
  Plan plan;
  ET_CHECK_OK(make_plan(ctx, self, dims_of(*args[1]), args[2]->to_bool(), &plan, !args[1]->is_none()));
  return any_impl(ctx, self, args[3]->to_tensor(), plan);
}

// aten::any.all_out(Tensor self, *, Tensor(a!) out)
Error any_all_out(KernelContext& ctx, EValue** args) {
  const Tensor& self = args[0]->to_tensor();
  Plan plan;
  ET_CHECK_OK(make_plan(ctx, self, Span<const int64_t>(), false, &plan));
  return any_impl(ctx, self, args[1]->to_tensor(), plan);
}

}  // namespace

Error register_reduction_kernels(KernelRegistry& r) {
  ET_REGISTER_KERNEL(r, "aten::mean.out", "TMbI|T", mean_out);
  ET_REGISTER_KERNEL(r, "aten::sum.IntList_out", "TMbI|T", sum_out);
  ET_REGISTER_KERNEL(r, "aten::amax.out", "TLb|T", amax_out);
  ET_REGISTER_KERNEL(r, "aten::any.out", "Tib|T", any_dim_out);
  ET_REGISTER_KERNEL(r, "aten::any.dims_out", "TMb|T", any_dims_out);
  ET_REGISTER_KERNEL(r, "aten::any.all_out", "T|T", any_all_out);
  return Error::ok();
}

}  // namespace etmlir
