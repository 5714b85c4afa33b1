#include "etmlir/runtime/memory.h"

namespace etmlir {

void* MemoryAllocator::allocate(size_t size, size_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) return nullptr;
  uintptr_t base = reinterpret_cast<uintptr_t>(base_);
  uintptr_t start = (base + used_ + alignment - 1) & ~(static_cast<uintptr_t>(alignment) - 1);
  size_t offset = start - base;
  if (offset > size_ || size > size_ - offset) return nullptr;
  used_ = offset + size;
  if (used_ > peak_) peak_ = used_;
  return base_ + offset;
}

}  // namespace etmlir
