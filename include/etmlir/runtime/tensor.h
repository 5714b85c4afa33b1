// Tensor: dtype, sizes, dim order and a data pointer, as the runtime sees it.
//
// A Tensor does not own its data: the data lives in a planned arena, in the
// program's constant segment, or in a buffer the caller set as an input. Its
// sizes/strides arrays live in the method allocator. Every tensor the runtime
// builds is contiguous in its dim order (identity today), so kernels index
// with the contiguous strides.
//
// Dynamic tensors (dynamism Bounded in the .pte) were planned at their upper
// bounds; kernels call resize() on their outputs, which fails with
// ErrorCode::OutOfBounds instead of writing past the planned bytes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "etmlir/runtime/error.h"
#include "etmlir/runtime/span.h"

namespace etmlir {

// Values match c10::ScalarType and the schema's ScalarType.
enum class ScalarType : int8_t {
  UInt8 = 0,
  Int8 = 1,
  Int16 = 2,
  Int32 = 3,
  Int64 = 4,
  Half = 5,
  Float = 6,
  Double = 7,
  Bool = 11,
  BFloat16 = 15,
};

// Bytes per element, or 0 for a value that is not a known ScalarType.
size_t element_size(ScalarType dtype);
// "float32", "int64", ... ("unknown" otherwise).
const char* dtype_name(ScalarType dtype);
bool is_known_dtype(int8_t raw);
// "float32[2, 3]" into `buffer`, truncated to fit; returns buffer. With
// `bounded` (one flag per dim, may be nullptr), flagged dims print as upper
// bounds: "int64[1, <=256]". A negative size is a dim only known at run time
// (a signature, not a tensor): "float32[?, 4]".
const char* format_shape(ScalarType dtype, const int64_t* sizes, size_t dim, const bool* bounded, char* buffer,
                         size_t size);

constexpr int kMaxDims = 16;

class Tensor {
 public:
  Tensor() = default;
  // `sizes`, `strides`, `dim_order` are arrays of `dim` entries owned by the
  // caller (the method allocator); `upper_bounds` too (nullptr = static).
  Tensor(ScalarType dtype, int32_t dim, int64_t* sizes, int64_t* strides, uint8_t* dim_order,
         const int64_t* upper_bounds, void* data, size_t capacity);

  ScalarType dtype() const { return dtype_; }
  int32_t dim() const { return dim_; }
  const int64_t* sizes() const { return sizes_; }
  int64_t size(int32_t d) const { return sizes_[d]; }
  const int64_t* strides() const { return strides_; }
  const uint8_t* dim_order() const { return dim_order_; }
  // Planned sizes: the upper bounds of a dynamic tensor, the sizes otherwise.
  const int64_t* upper_bounds() const { return upper_bounds_ ? upper_bounds_ : sizes_; }
  bool is_dynamic() const { return upper_bounds_ != nullptr; }
  int64_t numel() const { return numel_; }
  size_t element_size() const { return etmlir::element_size(dtype_); }
  size_t nbytes() const { return static_cast<size_t>(numel_) * element_size(); }
  // Bytes reserved at data() (planned, constant, or set by the caller).
  size_t capacity() const { return capacity_; }

  void* mutable_data() const { return data_; }
  const void* data() const { return data_; }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }

  // New sizes with the same rank. Static tensors accept only their own sizes;
  // dynamic ones any sizes within their upper bounds. `name` goes in the
  // message (e.g. "out").
  Error resize(Span<const int64_t> new_sizes, const char* name = "tensor");
  Error resize(const int64_t* new_sizes, int32_t new_dim, const char* name = "tensor") {
    return resize(Span<const int64_t>(new_sizes, static_cast<size_t>(new_dim)), name);
  }

  // Points the tensor at caller-owned memory (unplanned inputs/outputs).
  void set_data(void* data, size_t capacity) {
    data_ = data;
    capacity_ = capacity;
  }

  // "float32[2, 3]" into `buffer`; returns buffer.
  const char* describe(char* buffer, size_t size) const;

 private:
  void recompute_strides();

  ScalarType dtype_ = ScalarType::Float;
  int32_t dim_ = 0;
  int64_t* sizes_ = nullptr;
  int64_t* strides_ = nullptr;
  uint8_t* dim_order_ = nullptr;
  const int64_t* upper_bounds_ = nullptr;
  void* data_ = nullptr;
  size_t capacity_ = 0;
  int64_t numel_ = 1;
};

}  // namespace etmlir
