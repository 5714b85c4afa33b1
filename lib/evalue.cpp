#include "etmlir/runtime/evalue.h"

#include <cstring>

namespace etmlir {

const char* tag_name(Tag tag) {
  switch (tag) {
    case Tag::None: return "None";
    case Tag::Int: return "int";
    case Tag::Double: return "double";
    case Tag::Bool: return "bool";
    case Tag::String: return "string";
    case Tag::Tensor: return "tensor";
    case Tag::IntList: return "int list";
    case Tag::DoubleList: return "double list";
    case Tag::BoolList: return "bool list";
    case Tag::TensorList: return "tensor list";
    case Tag::OptionalTensorList: return "optional tensor list";
  }
  return "unknown";
}

double EValue::scalar_to_double() const {
  switch (tag) {
    case Tag::Int: return static_cast<double>(payload.as_int);
    case Tag::Bool: return payload.as_bool ? 1.0 : 0.0;
    default: return payload.as_double;
  }
}

int64_t EValue::scalar_to_int() const {
  switch (tag) {
    case Tag::Double: return static_cast<int64_t>(payload.as_double);
    case Tag::Bool: return payload.as_bool ? 1 : 0;
    default: return payload.as_int;
  }
}

bool EValue::string_equals(const char* s) const {
  size_t n = std::strlen(s);
  return payload.as_string.size == n && std::memcmp(payload.as_string.data, s, n) == 0;
}

Span<const int64_t> EValue::to_int_list() const {
  const auto& list = payload.as_int_list;
  for (size_t i = 0; i < list.size; ++i) list.scratch[i] = list.items[i]->payload.as_int;
  return {list.scratch, list.size};
}

}  // namespace etmlir
