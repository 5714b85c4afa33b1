// Reductions over a set of dims (sum, mean, prod, amax, amin, any, var) and
// cumsum along one dim.
//
// One engine: the input's dims are split into kept and reduced ones, size-1
// dims dropped and adjacent dims of one kind merged (every tensor is
// contiguous), so any reduction becomes blocks of the innermost two groups:
//   [kept A, reduced B]  ->  A contiguous rows, each reduced to one output
//                            (8 partial results, pairwise for long rows);
//   [reduced A, kept B]  ->  B outputs, updated row by row from A rows of B
//                            contiguous values (vectorized across the row).
// The outer groups only pick the block and its outputs. Results accumulate in
// a "wide" type per output (double for floating sums, int64 for integer ones,
// the value type for max/min) and are converted to out's dtype at the end;
// float16/bfloat16 compute in float.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "reduction_util.h"
#include "generated/reduction.h"

namespace etmlir {
namespace {

using kutil::BFloat16;
using kutil::Half;
using linalg::Described;
using red::load;

// ---------------------------------------------------------------------------
// The plan
// ---------------------------------------------------------------------------

struct Plan {
  int32_t out_rank = 0;
  int64_t out_sizes[kMaxDims];
  int64_t out_numel = 1;
  int64_t numel = 1;
  int64_t count = 1;               // reduced elements per output (saturates)
  int64_t empty_reduced_dim = -1;  // a reduced dim of size 0, if any
  // Groups of adjacent dims of one kind (size-1 dims dropped), outermost first.
  int32_t groups = 0;
  int64_t size[kMaxDims];
  bool reduced[kMaxDims];
};

// a * b for sizes, saturating (a tensor with a 0 dim may have other dims whose
// product overflows; nothing is then iterated).
int64_t sat_mul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > INT64_MAX / b ? INT64_MAX : a * b;
}

// Reduces `dims` of `in` (every dim when `all`; duplicates are errors).
Error make_plan(KernelContext& ctx, const Tensor& in, Span<const int64_t> dims, bool all, bool keepdim, Plan* plan) {
  ET_CHECK_OK(kutil::check_rank(ctx, in, "self"));
  ET_CHECK_OK(linalg::check_sane(ctx, in, "self"));
  const int32_t rank = in.dim();
  bool reduce[kMaxDims] = {};
  if (all) {
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
  plan->numel = in.numel();
  for (int32_t d = 0; d < rank; ++d) {
    const int64_t size = in.size(d);
    if (reduce[d]) {
      if (size == 0 && plan->empty_reduced_dim < 0) plan->empty_reduced_dim = d;
      plan->count = sat_mul(plan->count, size);
      if (keepdim) plan->out_sizes[plan->out_rank++] = 1;
    } else {
      plan->out_sizes[plan->out_rank++] = size;
      plan->out_numel = sat_mul(plan->out_numel, size);
    }
    if (size == 1) continue;
    if (plan->groups > 0 && plan->reduced[plan->groups - 1] == reduce[d]) {
      plan->size[plan->groups - 1] *= size;
    } else {
      plan->size[plan->groups] = size;
      plan->reduced[plan->groups] = reduce[d];
      ++plan->groups;
    }
  }
  return Error::ok();
}

Span<const int64_t> dims_or_empty(std::optional<Span<const int64_t>> dims) {
  return dims ? *dims : Span<const int64_t>();
}

// ---------------------------------------------------------------------------
// The engine
// ---------------------------------------------------------------------------

// Sets acc[0..out_numel) to op's identity, then folds every input element into
// its output's accumulator. An Op has `using W` (the accumulator type),
// `W identity()`, and
//   rows(W* acc, const T* x, A, B, o): acc[a] ⊕= row a of x (B values), a < A;
//   cols(W* acc, const T* x, A, B, o): acc[j] ⊕= x[a * B + j] for every a < A;
// where o is the index of acc[0] among the outputs.
template <typename T, typename Op>
void reduce(const Plan& p, const T* x, typename Op::W* acc, Op& op) {
  for (int64_t o = 0; o < p.out_numel; ++o) acc[o] = op.identity();
  if (p.numel == 0) return;
  const int32_t n = p.groups;
  if (n == 0) {  // a single element
    op.rows(acc, x, 1, 1, 0);
    return;
  }
  const bool inner_reduced = p.reduced[n - 1];
  const int32_t outer = n >= 2 ? n - 2 : 0;
  const int64_t a_size = n >= 2 ? p.size[n - 2] : 1;
  const int64_t b_size = p.size[n - 1];
  // Output strides of the outer groups (0 for reduced ones).
  int64_t ostride[kMaxDims];
  int64_t running = inner_reduced ? a_size : b_size;
  int64_t blocks = 1;
  for (int32_t d = outer - 1; d >= 0; --d) {
    ostride[d] = p.reduced[d] ? 0 : running;
    if (!p.reduced[d]) running *= p.size[d];
    blocks *= p.size[d];
  }
  const int64_t block = a_size * b_size;
  int64_t index[kMaxDims] = {};
  int64_t o = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    const T* xb = x + b * block;
    if (inner_reduced) {
      op.rows(acc + o, xb, a_size, b_size, o);
    } else {
      op.cols(acc + o, xb, a_size, b_size, o);
    }
    for (int32_t d = outer - 1; d >= 0; --d) {
      if (++index[d] < p.size[d]) {
        o += ostride[d];
        break;
      }
      o -= ostride[d] * (p.size[d] - 1);
      index[d] = 0;
    }
  }
}

// Sum in Acc along rows (pairwise), in W across rows.
template <typename T, typename Acc, typename Wide>
struct SumOp {
  using W = Wide;
  W identity() const { return W(0); }
  void rows(W* acc, const T* x, int64_t a_size, int64_t b_size, int64_t) const {
    for (int64_t a = 0; a < a_size; ++a) {
      acc[a] = kutil::wrap_add(acc[a], static_cast<W>(red::sum_row<Acc>(x + a * b_size, b_size)));
    }
  }
  void cols(W* acc, const T* x, int64_t a_size, int64_t b_size, int64_t) const {
    using kutil::wrap_add;
    int64_t a = 0;
    for (; a + 4 <= a_size; a += 4) {  // four rows per pass over acc
      const T* x0 = x + a * b_size;
      const T* x1 = x0 + b_size;
      const T* x2 = x1 + b_size;
      const T* x3 = x2 + b_size;
      for (int64_t j = 0; j < b_size; ++j) {
        acc[j] = wrap_add(acc[j], wrap_add(wrap_add(load<W>(x0[j]), load<W>(x1[j])),
                                           wrap_add(load<W>(x2[j]), load<W>(x3[j]))));
      }
    }
    for (; a < a_size; ++a) {
      const T* xa = x + a * b_size;
      for (int64_t j = 0; j < b_size; ++j) acc[j] = wrap_add(acc[j], load<W>(xa[j]));
    }
  }
};

// Sum of squared deviations from per-output means (var's second pass).
template <typename T>
struct SquaredDeviationOp {
  using W = double;
  const double* mean;
  W identity() const { return 0.0; }
  void rows(W* acc, const T* x, int64_t a_size, int64_t b_size, int64_t o) const {
    for (int64_t a = 0; a < a_size; ++a) acc[a] += red::squared_deviation_row<double>(x + a * b_size, b_size, mean[o + a]);
  }
  void cols(W* acc, const T* x, int64_t a_size, int64_t b_size, int64_t o) const {
    const double* m = mean + o;
    for (int64_t a = 0; a < a_size; ++a) {
      const T* xa = x + a * b_size;
      for (int64_t j = 0; j < b_size; ++j) {
        const double d = load<double>(xa[j]) - m[j];
        acc[j] += d * d;
      }
    }
  }
};

// Product in W (wrapping for integers).
template <typename T, typename Wide>
struct ProdOp {
  using W = Wide;
  W identity() const { return W(1); }
  void rows(W* acc, const T* x, int64_t a_size, int64_t b_size, int64_t) const {
    using kutil::wrap_mul;
    for (int64_t a = 0; a < a_size; ++a) {
      const T* xa = x + a * b_size;
      if constexpr (std::is_integral_v<W>) {  // exact in any order (and see red::sum_row)
        W total = W(1);
        for (int64_t i = 0; i < b_size; ++i) total = wrap_mul(total, load<W>(xa[i]));
        acc[a] = wrap_mul(acc[a], total);
        continue;
      }
      W part[8] = {W(1), W(1), W(1), W(1), W(1), W(1), W(1), W(1)};
      int64_t i = 0;
      for (; i + 8 <= b_size; i += 8) {
        for (int j = 0; j < 8; ++j) part[j] = wrap_mul(part[j], load<W>(xa[i + j]));
      }
      W total = wrap_mul(wrap_mul(wrap_mul(part[0], part[1]), wrap_mul(part[2], part[3])),
                         wrap_mul(wrap_mul(part[4], part[5]), wrap_mul(part[6], part[7])));
      for (; i < b_size; ++i) total = wrap_mul(total, load<W>(xa[i]));
      acc[a] = wrap_mul(acc[a], total);
    }
  }
  void cols(W* acc, const T* x, int64_t a_size, int64_t b_size, int64_t) const {
    for (int64_t a = 0; a < a_size; ++a) {
      const T* xa = x + a * b_size;
      for (int64_t j = 0; j < b_size; ++j) acc[j] = kutil::wrap_mul(acc[j], load<W>(xa[j]));
    }
  }
};

#if defined(__GNUC__)
// The largest (kMax) or smallest of `init` and x[0..n) for float or double,
// NaN if any is NaN: GCC generic vectors (SSE2 here), since GCC does not
// vectorize the NaN-aware scalar selects in a reduction.
template <typename T, bool kMax>
T extremum_row_vector(const T* x, int64_t n, T init) {
  using I = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
  typedef T V __attribute__((vector_size(16)));
  typedef I VI __attribute__((vector_size(16)));
  constexpr int kLanes = 16 / sizeof(T);
  V b0 = V{} + init;
  V b1 = b0;
  VI nan = VI{};
  int64_t i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    V v0, v1;
    std::memcpy(&v0, x + i, sizeof(V));
    std::memcpy(&v1, x + i + kLanes, sizeof(V));
    const VI g0 = kMax ? v0 > b0 : v0 < b0;
    const VI g1 = kMax ? v1 > b1 : v1 < b1;
    b0 = (V)(((VI)v0 & g0) | ((VI)b0 & ~g0));
    b1 = (V)(((VI)v1 & g1) | ((VI)b1 & ~g1));
    nan |= (v0 != v0) | (v1 != v1);
  }
  T best = init;
  bool any_nan = init != init;
  for (int l = 0; l < kLanes; ++l) {
    best = (kMax ? b0[l] > best : b0[l] < best) ? b0[l] : best;
    best = (kMax ? b1[l] > best : b1[l] < best) ? b1[l] : best;
    any_nan = any_nan || nan[l] != 0;
  }
  for (; i < n; ++i) {
    any_nan = any_nan || x[i] != x[i];
    best = (kMax ? x[i] > best : x[i] < best) ? x[i] : best;
  }
  return any_nan ? std::numeric_limits<T>::quiet_NaN() : best;
}
#endif

// amax (kMax) / amin in C, the value type (float for float16/bfloat16). NaN
// wins and sticks, as in torch.
template <typename T, typename C, bool kMax>
struct ExtremumOp {
  using W = C;
  static W pick(W best, W v) {
    // v != v only for NaN (compiles away for integers). Two plain selects: GCC
    // vectorizes them (an || would not be).
    const W m = (kMax ? v > best : v < best) ? v : best;
    return v != v ? v : m;
  }
  W identity() const {
    if constexpr (std::is_same_v<W, bool>) {
      return !kMax;
    } else if constexpr (std::is_floating_point_v<W>) {
      return kMax ? -std::numeric_limits<W>::infinity() : std::numeric_limits<W>::infinity();
    } else {
      return kMax ? std::numeric_limits<W>::lowest() : std::numeric_limits<W>::max();
    }
  }
  void rows(W* acc, const T* x, int64_t a_size, int64_t b_size, int64_t) const {
#if defined(__GNUC__)
    if constexpr (std::is_same_v<T, W> && std::is_floating_point_v<W>) {
      for (int64_t a = 0; a < a_size; ++a) acc[a] = extremum_row_vector<W, kMax>(x + a * b_size, b_size, acc[a]);
      return;
    }
#endif
    for (int64_t a = 0; a < a_size; ++a) {
      const T* xa = x + a * b_size;
      W part[8];
      for (int j = 0; j < 8; ++j) part[j] = identity();
      int64_t i = 0;
      for (; i + 8 <= b_size; i += 8) {
        for (int j = 0; j < 8; ++j) part[j] = pick(part[j], load<W>(xa[i + j]));
      }
      W best = acc[a];
      for (int j = 0; j < 8; ++j) best = pick(best, part[j]);
      for (; i < b_size; ++i) best = pick(best, load<W>(xa[i]));
      acc[a] = best;
    }
  }
  void cols(W* acc, const T* x, int64_t a_size, int64_t b_size, int64_t) const {
    for (int64_t a = 0; a < a_size; ++a) {
      const T* xa = x + a * b_size;
      for (int64_t j = 0; j < b_size; ++j) acc[j] = pick(acc[j], load<W>(xa[j]));
    }
  }
};

// any: acc |= (x != 0); bool and uint8 outs are written directly (one byte, 0 or 1).
template <typename T>
struct AnyOp {
  using W = uint8_t;
  static uint8_t nonzero(T v) {
    if constexpr (kutil::is_half_v<T>) {
      return kutil::to_float(v) != 0.0f;
    } else {
      return v != T(0);
    }
  }
  W identity() const { return 0; }
  void rows(W* acc, const T* x, int64_t a_size, int64_t b_size, int64_t) const {
    for (int64_t a = 0; a < a_size; ++a) {
      const T* xa = x + a * b_size;
      uint8_t found = acc[a];
      for (int64_t i = 0; i < b_size && !found; i += 256) {  // stop early, 256 at a time
        const int64_t end = i + 256 < b_size ? i + 256 : b_size;
        for (int64_t k = i; k < end; ++k) found |= nonzero(xa[k]);
      }
      acc[a] = found;
    }
  }
  void cols(W* acc, const T* x, int64_t a_size, int64_t b_size, int64_t) const {
    for (int64_t a = 0; a < a_size; ++a) {
      const T* xa = x + a * b_size;
      for (int64_t j = 0; j < b_size; ++j) acc[j] |= nonzero(xa[j]);
    }
  }
};

// ---------------------------------------------------------------------------
// Accumulators and results
// ---------------------------------------------------------------------------

// Where the accumulators of W live: out's own data when out has W's dtype,
// else scratch.
template <typename W>
Error accumulator(KernelContext& ctx, Tensor& out, int64_t count, W** acc) {
  if (out.dtype() == kutil::DtypeOf<W>::value) {
    *acc = out.data_as<W>();
    return Error::ok();
  }
  return red::scratch(ctx, count, "the accumulators", acc);
}

// out[o] = finish(acc[o]) in out's dtype.
template <typename W, typename F>
void finish(Tensor& out, W* acc, int64_t count, F fn) {
  if (static_cast<void*>(acc) == out.mutable_data()) {
    for (int64_t o = 0; o < count; ++o) acc[o] = static_cast<W>(fn(acc[o]));
    return;
  }
  kutil::dispatch_storage(out.dtype(), [&](auto tag) {
    using O = decltype(tag);
    O* y = out.data_as<O>();
    for (int64_t o = 0; o < count; ++o) y[o] = kutil::convert<O>(fn(acc[o]));
  });
}

// Reduces `self` into `out` (already resized) with Op<T> for self's dtype T,
// then out = finish(acc).
template <typename W, typename MakeOp, typename F>
Error reduce_into(KernelContext& ctx, const Tensor& self, Tensor& out, const Plan& plan, MakeOp make_op, F fn) {
  if (out.numel() == 0) return Error::ok();
  W* acc = nullptr;
  ET_CHECK_OK(accumulator(ctx, out, plan.out_numel, &acc));
  Error err;
  const bool handled = kutil::dispatch_storage(self.dtype(), [&](auto tag) {
    using T = decltype(tag);
    make_op(tag, [&](auto& op) { reduce(plan, self.data_as<const T>(), acc, op); }, &err);
  });
  if (!handled) return kutil::unsupported_dtype(ctx, "self", self.dtype(), "every real, float16, bfloat16 and bool");
  ET_CHECK_OK(err);
  finish(out, acc, plan.out_numel, fn);
  return Error::ok();
}

Error resize_to_plan(KernelContext& ctx, Tensor& out, const Plan& plan) {
  return kutil::resize_out(ctx, out, plan.out_sizes, plan.out_rank);
}

// The `ScalarType? dtype` argument: None, or the out tensor's dtype.
Error check_dtype_arg(KernelContext& ctx, std::optional<int64_t> dtype, const Tensor& out) {
  if (!dtype) return Error::ok();
  const int64_t raw = *dtype;
  if (raw < -128 || raw > 127 || !is_known_dtype(static_cast<int8_t>(raw))) {
    return ctx.fail(ErrorCode::InvalidArgument, "dtype %lld is not a known ScalarType", static_cast<long long>(raw));
  }
  if (static_cast<ScalarType>(raw) != out.dtype()) {
    return ctx.fail(ErrorCode::InvalidArgument, "dtype is %s but out is %s", dtype_name(static_cast<ScalarType>(raw)),
                    Described(out).text);
  }
  return Error::ok();
}

// sum/prod/cumsum: out is `dtype`, or int64 for integer and bool self, self's
// dtype for floating self; floating values never go into an integer out.
Error check_accumulating_out(KernelContext& ctx, const Tensor& self, std::optional<int64_t> dtype, const Tensor& out) {
  ET_CHECK_OK(check_dtype_arg(ctx, dtype, out));
  if (!dtype) {
    const ScalarType want = kutil::is_floating(self.dtype()) ? self.dtype() : ScalarType::Int64;
    if (out.dtype() != want) {
      return ctx.fail(ErrorCode::InvalidArgument, "out %s must be %s for self %s (or pass dtype)", Described(out).text,
                      dtype_name(want), Described(self).text);
    }
  }
  if (kutil::is_floating(self.dtype()) && !kutil::is_floating(out.dtype())) {
    return ctx.fail(ErrorCode::NotSupported, "accumulating %s into an integer out %s is not supported",
                    Described(self).text, Described(out).text);
  }
  if (!kutil::is_convertible_dtype(out.dtype())) return kutil::unsupported_dtype(ctx, "out", out.dtype());
  return Error::ok();
}

// ---------------------------------------------------------------------------
// sum / mean / prod
// ---------------------------------------------------------------------------

// Floating values into an integer out are rejected before this point, so
// those instantiations are skipped.
template <typename T, typename W>
constexpr bool kSkipped = !std::is_floating_point_v<W> && (std::is_floating_point_v<T> || kutil::is_half_v<T>);

// out = sum of self over the plan (divided by the count for mean).
Error sum_impl(KernelContext& ctx, const Tensor& self, Tensor& out, const Plan& plan, bool mean) {
  const double count = static_cast<double>(plan.count);
  if (kutil::is_floating(out.dtype())) {
    const bool wide_acc = out.dtype() == ScalarType::Double;
    auto make = [&](auto tag, auto&& run, Error*) {
      using T = decltype(tag);
      if (wide_acc) {
        SumOp<T, double, double> op;
        run(op);
      } else {
        SumOp<T, float, double> op;
        run(op);
      }
    };
    if (mean) return reduce_into<double>(ctx, self, out, plan, make, [count](double v) { return v / count; });
    return reduce_into<double>(ctx, self, out, plan, make, [](double v) { return v; });
  }
  auto make = [&](auto tag, auto&& run, Error*) {
    using T = decltype(tag);
    if constexpr (!kSkipped<T, int64_t>) {
      SumOp<T, int64_t, int64_t> op;
      run(op);
    }
  };
  return reduce_into<int64_t>(ctx, self, out, plan, make, [](int64_t v) { return v; });
}

Error mean_impl(KernelContext& ctx, const Tensor& self, Tensor& out, const Plan& plan, std::optional<int64_t> dtype) {
  ET_CHECK_OK(check_dtype_arg(ctx, dtype, out));
  if (!kutil::is_floating(out.dtype())) {
    return ctx.fail(ErrorCode::NotSupported, "out %s: mean needs a floating result (float32, float64, float16, "
                    "bfloat16)", Described(out).text);
  }
  if (!dtype && self.dtype() != out.dtype()) {
    return ctx.fail(ErrorCode::InvalidArgument, "out %s must have self's dtype %s (or pass dtype)", Described(out).text,
                    dtype_name(self.dtype()));
  }
  ET_CHECK_OK(resize_to_plan(ctx, out, plan));
  return sum_impl(ctx, self, out, plan, true);
}

Error prod_impl(KernelContext& ctx, const Tensor& self, Tensor& out, const Plan& plan, std::optional<int64_t> dtype) {
  ET_CHECK_OK(check_accumulating_out(ctx, self, dtype, out));
  ET_CHECK_OK(resize_to_plan(ctx, out, plan));
  if (out.dtype() == ScalarType::Double) {
    auto make = [](auto tag, auto&& run, Error*) {
      ProdOp<decltype(tag), double> op;
      run(op);
    };
    return reduce_into<double>(ctx, self, out, plan, make, [](double v) { return v; });
  }
  if (kutil::is_floating(out.dtype())) {
    auto make = [](auto tag, auto&& run, Error*) {
      ProdOp<decltype(tag), float> op;
      run(op);
    };
    return reduce_into<float>(ctx, self, out, plan, make, [](float v) { return v; });
  }
  auto make = [](auto tag, auto&& run, Error*) {
    using T = decltype(tag);
    if constexpr (!kSkipped<T, int64_t>) {
      ProdOp<T, int64_t> op;
      run(op);
    }
  };
  return reduce_into<int64_t>(ctx, self, out, plan, make, [](int64_t v) { return v; });
}

// ---------------------------------------------------------------------------
// amax / amin / any
// ---------------------------------------------------------------------------

template <bool kMax>
Error extremum(KernelContext& ctx, const Tensor& self, Span<const int64_t> dim, bool keepdim, Tensor& out) {
  Plan plan;
  ET_CHECK_OK(make_plan(ctx, self, dim, dim.empty(), keepdim, &plan));
  ET_CHECK_OK(linalg::check_dtype(ctx, out, self.dtype(), "out"));
  if (plan.empty_reduced_dim >= 0) {
    return ctx.fail(ErrorCode::InvalidArgument, "cannot take the %s over dim %lld of %s: it has size 0",
                    kMax ? "maximum" : "minimum", static_cast<long long>(plan.empty_reduced_dim), Described(self).text);
  }
  ET_CHECK_OK(resize_to_plan(ctx, out, plan));
  if (out.numel() == 0) return Error::ok();
  Error err;
  bool handled = kutil::dispatch_storage(self.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = std::conditional_t<kutil::is_half_v<T>, float, T>;
    ExtremumOp<T, C, kMax> op;
    C* acc = nullptr;
    err = accumulator(ctx, out, plan.out_numel, &acc);
    if (err) return;
    reduce(plan, self.data_as<const T>(), acc, op);
    finish(out, acc, plan.out_numel, [](C v) { return v; });
  });
  if (!handled) return kutil::unsupported_dtype(ctx, "self", self.dtype(), "every real, float16, bfloat16 and bool");
  return err;
}

Error any_impl(KernelContext& ctx, const Tensor& self, Tensor& out, const Plan& plan) {
  if (out.dtype() != ScalarType::Bool && out.dtype() != ScalarType::UInt8) {
    return ctx.fail(ErrorCode::InvalidArgument, "out %s must be bool (or uint8)", Described(out).text);
  }
  ET_CHECK_OK(resize_to_plan(ctx, out, plan));
  if (out.numel() == 0) return Error::ok();
  uint8_t* acc = out.data_as<uint8_t>();  // bool and uint8 are both one byte, 0 or 1
  bool handled = kutil::dispatch_storage(self.dtype(), [&](auto tag) {
    using T = decltype(tag);
    AnyOp<T> op;
    reduce(plan, self.data_as<const T>(), acc, op);
  });
  if (!handled) return kutil::unsupported_dtype(ctx, "self", self.dtype(), "every real, float16, bfloat16 and bool");
  return Error::ok();
}

// ---------------------------------------------------------------------------
// var
// ---------------------------------------------------------------------------

// Two passes in double: the means, then the squared deviations from them.
Error var_impl(KernelContext& ctx, const Tensor& self, std::optional<Span<const int64_t>> dim, double correction,
               bool keepdim, Tensor& out) {
  Plan plan;
  const Span<const int64_t> dims = dims_or_empty(dim);
  ET_CHECK_OK(make_plan(ctx, self, dims, dims.empty(), keepdim, &plan));
  if (!kutil::is_floating(self.dtype())) {
    return kutil::unsupported_dtype(ctx, "self", self.dtype(), red::kFloatingDtypes);
  }
  ET_CHECK_OK(linalg::check_dtype(ctx, out, self.dtype(), "out"));
  ET_CHECK_OK(resize_to_plan(ctx, out, plan));
  if (out.numel() == 0) return Error::ok();
  double* mean = nullptr;
  double* acc = nullptr;
  ET_CHECK_OK(red::scratch(ctx, plan.out_numel, "the means", &mean));
  ET_CHECK_OK(accumulator(ctx, out, plan.out_numel, &acc));
  const double count = static_cast<double>(plan.count);
  red::dispatch_floating_storage(self.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = self.data_as<const T>();
    SumOp<T, double, double> sum;
    reduce(plan, x, mean, sum);
    for (int64_t o = 0; o < plan.out_numel; ++o) mean[o] /= count;
    SquaredDeviationOp<T> dev{mean};
    reduce(plan, x, acc, dev);
  });
  // torch divides by max(0, N - correction): x / 0 is inf, 0 / 0 (one value) NaN.
  const double divisor = count - correction > 0.0 ? count - correction : 0.0;
  finish(out, acc, plan.out_numel, [divisor](double v) { return v / divisor; });
  return Error::ok();
}

// ---------------------------------------------------------------------------
// cumsum
// ---------------------------------------------------------------------------

// Stores n accumulators into out at `offset`, converted to out's dtype.
template <typename Acc>
using StoreRowFn = void (*)(void* out, int64_t offset, const Acc* src, int64_t n);

template <typename O, typename Acc>
void store_row(void* out, int64_t offset, const Acc* src, int64_t n) {
  red::convert_row(static_cast<O*>(out) + offset, src, n);
}

// Along [outer, n, inner]: running sums in Acc (double for float32/float64,
// as torch's CPU kernel; float for float16/bfloat16; int64 for integers).
template <typename T, typename Acc>
void cumsum_run(const T* x, void* out, StoreRowFn<Acc> store, int64_t outer, int64_t n, int64_t inner, Acc* buf) {
  for (int64_t o = 0; o < outer; ++o) {
    const T* xo = x + o * n * inner;
    const int64_t base = o * n * inner;
    if (inner == 1) {
      Acc sum = Acc(0);
      for (int64_t k = 0; k < n; ++k) {
        sum = kutil::wrap_add(sum, load<Acc>(xo[k]));
        buf[k] = sum;
      }
      store(out, base, buf, n);
      continue;
    }
    for (int64_t i = 0; i < inner; ++i) buf[i] = Acc(0);
    for (int64_t k = 0; k < n; ++k) {
      const T* row = xo + k * inner;
      for (int64_t i = 0; i < inner; ++i) buf[i] = kutil::wrap_add(buf[i], load<Acc>(row[i]));
      store(out, base + k * inner, buf, inner);
    }
  }
}

template <typename Acc>
Error cumsum_with(KernelContext& ctx, const Tensor& self, Tensor& out, int64_t outer, int64_t n, int64_t inner) {
  StoreRowFn<Acc> store = nullptr;
  kutil::dispatch_storage(out.dtype(), [&](auto tag) { store = &store_row<decltype(tag), Acc>; });
  if (store == nullptr) return kutil::unsupported_dtype(ctx, "out", out.dtype());
  Acc* buf = nullptr;
  ET_CHECK_OK(red::scratch(ctx, inner == 1 ? n : inner, "the running sums", &buf));
  bool handled = kutil::dispatch_storage(self.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!kSkipped<T, Acc>) {
      cumsum_run<T, Acc>(self.data_as<const T>(), out.mutable_data(), store, outer, n, inner, buf);
    }
  });
  if (!handled) return kutil::unsupported_dtype(ctx, "self", self.dtype(), "every real, float16, bfloat16 and bool");
  return Error::ok();
}

}  // namespace

namespace portable {

// aten::sum.IntList_out: dim None or [] sums every dim.
Error sum_out(KernelContext& ctx, const Tensor& self, std::optional<Span<const int64_t>> dim, bool keepdim,
              std::optional<int64_t> dtype, Tensor& out) {
  Plan plan;
  const Span<const int64_t> dims = dims_or_empty(dim);
  ET_CHECK_OK(make_plan(ctx, self, dims, dims.empty(), keepdim, &plan));
  ET_CHECK_OK(check_accumulating_out(ctx, self, dtype, out));
  ET_CHECK_OK(resize_to_plan(ctx, out, plan));
  return sum_impl(ctx, self, out, plan, false);
}

// aten::mean.out: dim None or [] averages every dim.
Error mean_out(KernelContext& ctx, const Tensor& self, std::optional<Span<const int64_t>> dim, bool keepdim,
               std::optional<int64_t> dtype, Tensor& out) {
  Plan plan;
  const Span<const int64_t> dims = dims_or_empty(dim);
  ET_CHECK_OK(make_plan(ctx, self, dims, dims.empty(), keepdim, &plan));
  return mean_impl(ctx, self, out, plan, dtype);
}

Error mean_dtype_out(KernelContext& ctx, const Tensor& self, std::optional<int64_t> dtype, Tensor& out) {
  Plan plan;
  ET_CHECK_OK(make_plan(ctx, self, Span<const int64_t>(), true, false, &plan));
  return mean_impl(ctx, self, out, plan, dtype);
}

Error prod_out(KernelContext& ctx, const Tensor& self, std::optional<int64_t> dtype, Tensor& out) {
  Plan plan;
  ET_CHECK_OK(make_plan(ctx, self, Span<const int64_t>(), true, false, &plan));
  return prod_impl(ctx, self, out, plan, dtype);
}

Error prod_int_out(KernelContext& ctx, const Tensor& self, int64_t dim, bool keepdim, std::optional<int64_t> dtype,
                   Tensor& out) {
  Plan plan;
  const int64_t one[1] = {dim};
  ET_CHECK_OK(make_plan(ctx, self, Span<const int64_t>(one, 1), false, keepdim, &plan));
  return prod_impl(ctx, self, out, plan, dtype);
}

Error amax_out(KernelContext& ctx, const Tensor& self, Span<const int64_t> dim, bool keepdim, Tensor& out) {
  return extremum<true>(ctx, self, dim, keepdim, out);
}

Error amin_out(KernelContext& ctx, const Tensor& self, Span<const int64_t> dim, bool keepdim, Tensor& out) {
  return extremum<false>(ctx, self, dim, keepdim, out);
}

Error any_dim_out(KernelContext& ctx, const Tensor& self, int64_t dim, bool keepdim, Tensor& out) {
  Plan plan;
  const int64_t one[1] = {dim};
  ET_CHECK_OK(make_plan(ctx, self, Span<const int64_t>(one, 1), false, keepdim, &plan));
  return any_impl(ctx, self, out, plan);
}

// any.dims: dim None reduces every dim, [] none (torch's semantics, unlike sum's).
Error any_dims_out(KernelContext& ctx, const Tensor& self, std::optional<Span<const int64_t>> dim, bool keepdim,
                   Tensor& out) {
  Plan plan;
  ET_CHECK_OK(make_plan(ctx, self, dims_or_empty(dim), !dim, keepdim, &plan));
  return any_impl(ctx, self, out, plan);
}

Error any_all_out(KernelContext& ctx, const Tensor& self, Tensor& out) {
  Plan plan;
  ET_CHECK_OK(make_plan(ctx, self, Span<const int64_t>(), true, false, &plan));
  return any_impl(ctx, self, out, plan);
}

// correction None means 1 (Bessel's correction).
Error var_correction_out(KernelContext& ctx, const Tensor& self, std::optional<Span<const int64_t>> dim,
                         const EValue& correction, bool keepdim, Tensor& out) {
  double c = 1.0;
  if (!correction.is_none()) {
    if (!correction.is_int() && !correction.is_double() && !correction.is_bool()) {
      return ctx.fail(ErrorCode::InvalidArgument, "correction must be a number or None");
    }
    c = correction.scalar_to_double();
  }
  return var_impl(ctx, self, dim, c, keepdim, out);
}

Error var_dim_out(KernelContext& ctx, const Tensor& self, std::optional<Span<const int64_t>> dim, bool unbiased,
                  bool keepdim, Tensor& out) {
  return var_impl(ctx, self, dim, unbiased ? 1.0 : 0.0, keepdim, out);
}

Error cumsum_out(KernelContext& ctx, const Tensor& self, int64_t dim, std::optional<int64_t> dtype, Tensor& out) {
  ET_CHECK_OK(kutil::check_rank(ctx, self, "self"));
  ET_CHECK_OK(linalg::check_sane(ctx, self, "self"));
  int64_t d = 0;
  if (!linalg::normalize_dim(dim, self.dim(), &d)) return linalg::dim_error(ctx, "dim", dim, self);
  ET_CHECK_OK(check_accumulating_out(ctx, self, dtype, out));
  ET_CHECK_OK(kutil::resize_out(ctx, out, self.sizes(), self.dim()));
  if (self.numel() == 0) return Error::ok();
  int64_t outer = 1, n = 1, inner = 1;
  for (int32_t k = 0; k < self.dim(); ++k) {
    if (k < d) {
      outer *= self.size(k);
    } else if (k == d) {
      n = self.size(k);
    } else {
      inner *= self.size(k);
    }
  }
  switch (out.dtype()) {
    case ScalarType::Float:
    case ScalarType::Double: return cumsum_with<double>(ctx, self, out, outer, n, inner);
    case ScalarType::Half:
    case ScalarType::BFloat16: return cumsum_with<float>(ctx, self, out, outer, n, inner);
    default: return cumsum_with<int64_t>(ctx, self, out, outer, n, inner);
  }
}

}  // namespace portable
}  // namespace etmlir
