#include "etmlir/runtime/tensor.h"

#include <cstdio>

namespace etmlir {

size_t element_size(ScalarType dtype) {
  switch (dtype) {
    case ScalarType::UInt8:
    case ScalarType::Int8:
    case ScalarType::Bool: return 1;
    case ScalarType::Int16:
    case ScalarType::Half:
    case ScalarType::BFloat16: return 2;
    case ScalarType::Int32:
    case ScalarType::Float: return 4;
    case ScalarType::Int64:
    case ScalarType::Double: return 8;
  }
  return 0;
}

const char* dtype_name(ScalarType dtype) {
  switch (dtype) {
    case ScalarType::UInt8: return "uint8";
    case ScalarType::Int8: return "int8";
    case ScalarType::Int16: return "int16";
    case ScalarType::Int32: return "int32";
    case ScalarType::Int64: return "int64";
    case ScalarType::Half: return "float16";
    case ScalarType::Float: return "float32";
    case ScalarType::Double: return "float64";
    case ScalarType::Bool: return "bool";
    case ScalarType::BFloat16: return "bfloat16";
  }
  return "unknown";
}

bool is_known_dtype(int8_t raw) { return element_size(static_cast<ScalarType>(raw)) != 0; }

Tensor::Tensor(ScalarType dtype, int32_t dim, int64_t* sizes, int64_t* strides, uint8_t* dim_order,
               const int64_t* upper_bounds, void* data, size_t capacity)
    : dtype_(dtype),
      dim_(dim),
      sizes_(sizes),
      strides_(strides),
      dim_order_(dim_order),
      upper_bounds_(upper_bounds),
      data_(data),
      capacity_(capacity) {
  recompute_strides();
}

void Tensor::recompute_strides() {
  int64_t running = 1;
  for (int32_t d = dim_ - 1; d >= 0; --d) {
    if (strides_) strides_[d] = running;
    running *= sizes_[d];
  }
  numel_ = running;
}

Error Tensor::resize(Span<const int64_t> new_sizes, const char* name) {
  char have[128];
  if (static_cast<int64_t>(new_sizes.size()) != dim_) {
    return Error::make(ErrorCode::InvalidArgument, "cannot resize %s %s to rank %zu", name, describe(have, sizeof(have)),
                       new_sizes.size());
  }
  const int64_t* bounds = upper_bounds();
  for (int32_t d = 0; d < dim_; ++d) {
    int64_t s = new_sizes[static_cast<size_t>(d)];
    bool fits = upper_bounds_ ? (s >= 0 && s <= bounds[d]) : s == sizes_[d];
    if (!fits) {
      return Error::make(ErrorCode::OutOfBounds, "cannot resize %s %s: dim %d would be %lld, %s %lld", name,
                         describe(have, sizeof(have)), d, static_cast<long long>(s),
                         upper_bounds_ ? "planned upper bound is" : "static size is",
                         static_cast<long long>(bounds[d]));
    }
  }
  for (int32_t d = 0; d < dim_; ++d) sizes_[d] = new_sizes[static_cast<size_t>(d)];
  recompute_strides();
  return Error::ok();
}

const char* format_shape(ScalarType dtype, const int64_t* sizes, size_t dim, const bool* bounded, char* buffer,
                         size_t size) {
  if (size == 0) return buffer;
  size_t used = 0;
  auto put = [&](const char* fmt, auto... args) {
    if (used < size) {
      int n = std::snprintf(buffer + used, size - used, fmt, args...);
      if (n > 0) used += static_cast<size_t>(n);
    }
  };
  put("%s[", dtype_name(dtype));
  for (size_t d = 0; d < dim; ++d) {
    if (sizes[d] < 0) {
      put("%s?", d ? ", " : "");
    } else {
      put("%s%s%lld", d ? ", " : "", bounded && bounded[d] ? "<=" : "", static_cast<long long>(sizes[d]));
    }
  }
  put("]");
  buffer[used < size ? used : size - 1] = '\0';
  return buffer;
}

const char* Tensor::describe(char* buffer, size_t size) const {
  return format_shape(dtype_, sizes_, static_cast<size_t>(dim_), nullptr, buffer, size);
}

}  // namespace etmlir
