// What the generated boxed wrappers (generated/register_kernels.cpp) need to
// turn a kernel's EValue arguments into the typed parameters of its C++
// function, and what those parameters' types are. Kernel authors never index
// `args`: they write the prototype in generated/<family>.h.
//
//   // aten::clamp.out(Tensor self, Scalar? min=None, Scalar? max=None, *, Tensor(a!) out)
//   Error clamp_out(KernelContext& ctx, const Tensor& self, const EValue& min, const EValue& max, Tensor& out);
//
// Optional schema arguments arrive as std::optional (an optional tensor as a
// pointer, nullptr for None); Scalars stay EValues (Int, Double or Bool, or
// None for `Scalar?`), read with kutil::scalar_as<T>.
#pragma once

#include <cstdint>
#include <optional>

#include "etmlir/runtime/error.h"
#include "etmlir/runtime/evalue.h"
#include "etmlir/runtime/kernel.h"
#include "etmlir/runtime/span.h"
#include "etmlir/runtime/tensor.h"

namespace etmlir {
namespace kargs {

inline const Tensor* opt_tensor(const EValue* v) { return v->is_none() ? nullptr : &v->to_tensor(); }
inline std::optional<int64_t> opt_int(const EValue* v) {
  return v->is_none() ? std::nullopt : std::optional<int64_t>(v->to_int());
}
// `float` arguments accept an Int too (the loader's 'f'/'F' kinds): read it as a number.
inline std::optional<double> opt_double(const EValue* v) {
  return v->is_none() ? std::nullopt : std::optional<double>(v->scalar_to_double());
}
inline std::optional<bool> opt_bool(const EValue* v) {
  return v->is_none() ? std::nullopt : std::optional<bool>(v->to_bool());
}
inline std::optional<Span<const int64_t>> opt_int_list(const EValue* v) {
  return v->is_none() ? std::nullopt : std::optional<Span<const int64_t>>(v->to_int_list());
}
inline std::optional<Span<const double>> opt_double_list(const EValue* v) {
  return v->is_none() ? std::nullopt : std::optional<Span<const double>>(v->to_double_list());
}
inline std::optional<Span<const char>> opt_string(const EValue* v) {
  return v->is_none() ? std::nullopt : std::optional<Span<const char>>(v->to_string());
}

}  // namespace kargs
}  // namespace etmlir
