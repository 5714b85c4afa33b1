// EValue: one entry of a method's value table, a tagged union of everything
// an instruction can read or write (tensor, int, double, bool, string, lists,
// None). The method allocator owns every EValue and what it points to.
//
// Int lists are boxed: their items are EValues, so an item can be an Int that
// a kernel (e.g. etmlir_prim::sym_size.int) wrote at run time. int_list()
// gathers the current values into a scratch array reserved at load time, so
// reading one never allocates.
#pragma once

#include <cstddef>
#include <cstdint>

#include "etmlir/runtime/span.h"
#include "etmlir/runtime/tensor.h"

namespace etmlir {

enum class Tag : uint8_t {
  None = 0,
  Int,
  Double,
  Bool,
  String,
  Tensor,
  IntList,
  DoubleList,
  BoolList,
  TensorList,
  OptionalTensorList,
};

const char* tag_name(Tag tag);

struct EValue {
  Tag tag = Tag::None;
  union Payload {
    int64_t as_int;
    double as_double;
    bool as_bool;
    struct {
      const char* data;  // not NUL-terminated in general
      size_t size;
    } as_string;
    Tensor* as_tensor;
    struct {
      EValue* const* items;  // each an Int
      int64_t* scratch;      // `size` entries, refreshed by int_list()
      size_t size;
    } as_int_list;
    struct {
      const double* items;
      size_t size;
    } as_double_list;
    struct {
      const uint8_t* items;  // 0 or 1
      size_t size;
    } as_bool_list;
    struct {
      Tensor* const* items;  // nullptr entries are None (optional lists only)
      size_t size;
    } as_tensor_list;
    Payload() : as_int(0) {}
  } payload;

  bool is_none() const { return tag == Tag::None; }
  bool is_int() const { return tag == Tag::Int; }
  bool is_double() const { return tag == Tag::Double; }
  bool is_bool() const { return tag == Tag::Bool; }
  bool is_tensor() const { return tag == Tag::Tensor; }
  // Int, Double or Bool: what a schema's `Scalar` accepts.
  bool is_scalar() const { return tag == Tag::Int || tag == Tag::Double || tag == Tag::Bool; }

  // Unchecked accessors: the method loader has already checked every
  // kernel argument's tag against the kernel's registered signature.
  int64_t to_int() const { return payload.as_int; }
  double to_double() const { return payload.as_double; }
  bool to_bool() const { return payload.as_bool; }
  Tensor& to_tensor() const { return *payload.as_tensor; }
  // A Scalar (Int, Double or Bool) as a double / as an int64.
  double scalar_to_double() const;
  int64_t scalar_to_int() const;
  // The string's bytes (not NUL-terminated) and whether it equals `s`.
  Span<const char> to_string() const { return {payload.as_string.data, payload.as_string.size}; }
  bool string_equals(const char* s) const;
  // Current values of an IntList (gathered into its scratch array).
  Span<const int64_t> to_int_list() const;
  Span<const double> to_double_list() const { return {payload.as_double_list.items, payload.as_double_list.size}; }
  Span<const uint8_t> to_bool_list() const { return {payload.as_bool_list.items, payload.as_bool_list.size}; }
  Span<Tensor* const> to_tensor_list() const { return {payload.as_tensor_list.items, payload.as_tensor_list.size}; }
};

}  // namespace etmlir
