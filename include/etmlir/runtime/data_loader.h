// Where a program's bytes come from. The runtime has no file system of its
// own: Program::load reads through a DataLoader, and the user picks one.
//
//  * BufferDataLoader: bytes already in memory (flash, a Python bytes object).
//    Views, no copies; the caller keeps the buffer alive.
//  * FileDataLoader: pread() into heap buffers at load time (never during
//    execute); each FreeableBuffer frees its copy.
//  * MmapDataLoader: maps the file read-only; views into the mapping, so
//    constants are paged in on first use and shared between processes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "etmlir/runtime/error.h"

namespace etmlir {

// Bytes plus, optionally, how to release them. Move-only.
class FreeableBuffer {
 public:
  using FreeFn = void (*)(void* context, const void* data, size_t size);

  FreeableBuffer() = default;
  FreeableBuffer(const void* data, size_t size, FreeFn free_fn = nullptr, void* context = nullptr)
      : data_(data), size_(size), free_fn_(free_fn), context_(context) {}
  FreeableBuffer(FreeableBuffer&& other) noexcept { *this = static_cast<FreeableBuffer&&>(other); }
  FreeableBuffer& operator=(FreeableBuffer&& other) noexcept {
    if (this != &other) {
      release();
      data_ = other.data_;
      size_ = other.size_;
      free_fn_ = other.free_fn_;
      context_ = other.context_;
      other.data_ = nullptr;
      other.size_ = 0;
      other.free_fn_ = nullptr;
    }
    return *this;
  }
  FreeableBuffer(const FreeableBuffer&) = delete;
  FreeableBuffer& operator=(const FreeableBuffer&) = delete;
  ~FreeableBuffer() { release(); }

  const void* data() const { return data_; }
  const uint8_t* bytes() const { return static_cast<const uint8_t*>(data_); }
  size_t size() const { return size_; }
  void release() {
    if (free_fn_ != nullptr) free_fn_(context_, data_, size_);
    data_ = nullptr;
    size_ = 0;
    free_fn_ = nullptr;
  }

 private:
  const void* data_ = nullptr;
  size_t size_ = 0;
  FreeFn free_fn_ = nullptr;
  void* context_ = nullptr;
};

class DataLoader {
 public:
  virtual ~DataLoader() = default;
  // [offset, offset + size) of the underlying data; an error if that range
  // is not inside it. The returned data is at least 16-byte aligned when
  // `offset` is (file buffers are 64-byte aligned).
  virtual Result<FreeableBuffer> load(uint64_t offset, uint64_t size) = 0;
  virtual uint64_t size() const = 0;
};

class BufferDataLoader : public DataLoader {
 public:
  BufferDataLoader(const void* data, size_t size) : data_(static_cast<const uint8_t*>(data)), size_(size) {}
  Result<FreeableBuffer> load(uint64_t offset, uint64_t size) override;
  uint64_t size() const override { return size_; }

 private:
  const uint8_t* data_;
  size_t size_;
};

class FileDataLoader : public DataLoader {
 public:
  static Result<FileDataLoader> open(const char* path);
  FileDataLoader(FileDataLoader&& other) noexcept;
  FileDataLoader(const FileDataLoader&) = delete;
  FileDataLoader& operator=(const FileDataLoader&) = delete;
  FileDataLoader& operator=(FileDataLoader&&) = delete;
  ~FileDataLoader() override;

  Result<FreeableBuffer> load(uint64_t offset, uint64_t size) override;
  uint64_t size() const override { return size_; }

 private:
  FileDataLoader(int fd, uint64_t size) : fd_(fd), size_(size) {}
  int fd_ = -1;
  uint64_t size_ = 0;
};

class MmapDataLoader : public DataLoader {
 public:
  static Result<MmapDataLoader> open(const char* path);
  MmapDataLoader(MmapDataLoader&& other) noexcept;
  MmapDataLoader(const MmapDataLoader&) = delete;
  MmapDataLoader& operator=(const MmapDataLoader&) = delete;
  MmapDataLoader& operator=(MmapDataLoader&&) = delete;
  ~MmapDataLoader() override;

  Result<FreeableBuffer> load(uint64_t offset, uint64_t size) override;
  uint64_t size() const override { return size_; }

 private:
  MmapDataLoader(const void* mapping, uint64_t size) : mapping_(mapping), size_(size) {}
  const void* mapping_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace etmlir
