// Memory the runtime uses, all of it handed in by the user:
//
//  * MemoryAllocator: a bump allocator over a caller-owned buffer. The method
//    allocator holds everything a loaded method keeps (value table, tensor
//    headers, instruction table); the temp allocator gives kernels scratch
//    space during one instruction and is reset after it.
//  * planned arenas: one buffer per mem_id of the method's memory plan, sized
//    at least MethodMeta::arena_size(mem_id). A user can put arena 0 in fast
//    memory and arena 1 in slow memory.
//
// Nothing here calls malloc; MemoryManager only holds pointers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "etmlir/runtime/span.h"

namespace etmlir {

class MemoryAllocator {
 public:
  MemoryAllocator() = default;
  MemoryAllocator(void* base, size_t size) : base_(static_cast<uint8_t*>(base)), size_(size) {}

  // `size` bytes aligned to `alignment` (a power of two), or nullptr when the
  // buffer is exhausted.
  void* allocate(size_t size, size_t alignment = 16);
  template <typename T>
  T* allocate_array(size_t count, size_t alignment = alignof(T)) {
    if (count > SIZE_MAX / sizeof(T)) return nullptr;
    return static_cast<T*>(allocate(count * sizeof(T), alignment < 16 ? 16 : alignment));
  }
  void reset() { used_ = 0; }
  size_t used() const { return used_; }
  size_t size() const { return size_; }
  // The most ever in use at once (for sizing buffers).
  size_t peak() const { return peak_; }

 private:
  uint8_t* base_ = nullptr;
  size_t size_ = 0;
  size_t used_ = 0;
  size_t peak_ = 0;
};

struct MemoryManager {
  // Load-time structures of one method; must outlive the Method.
  MemoryAllocator* method_allocator = nullptr;
  // planned_arenas[mem_id] is the buffer for that arena.
  Span<Span<uint8_t>> planned_arenas;
  // Kernel scratch, reset after every instruction (may be nullptr).
  MemoryAllocator* temp_allocator = nullptr;
};

}  // namespace etmlir
