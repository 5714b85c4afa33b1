#include <cstring>

#include "etmlir/runtime/backend.h"

namespace etmlir {

Error BackendRegistry::add(const char* id, Backend* backend) {
  if (id == nullptr || backend == nullptr) {
    return Error::make(ErrorCode::InvalidArgument, "backend registration needs an id and a backend");
  }
  if (find(id) != nullptr) return Error::make(ErrorCode::InvalidArgument, "backend '%s' is already registered", id);
  if (size_ == kCapacity) {
    return Error::make(ErrorCode::OutOfMemory, "backend registry is full (%zu); cannot add '%s'", kCapacity, id);
  }
  ids_[size_] = id;
  backends_[size_] = backend;
  ++size_;
  return Error::ok();
}

Backend* BackendRegistry::find(const char* id, size_t id_size) const {
  for (size_t i = 0; i < size_; ++i) {
    if (std::strncmp(ids_[i], id, id_size) == 0 && ids_[i][id_size] == '\0') return backends_[i];
  }
  return nullptr;
}

Backend* BackendRegistry::find(const char* id) const { return find(id, std::strlen(id)); }

Error allocate_at_init(MemoryAllocator& allocator, size_t size, size_t alignment, const char* what, void** out) {
  *out = allocator.allocate(size, alignment);
  if (*out != nullptr) return Error::ok();
  return Error::make(ErrorCode::OutOfMemory,
                     "the method allocator has %zu of its %zu bytes left; %s needs %zu (size it with "
                     "MethodMeta::method_allocator_bytes(backends))",
                     allocator.size() - allocator.used(), allocator.size(), what, size);
}

}  // namespace etmlir
