// Where a program's bytes come from. The runtime has no file system of its
// own: Program::load reads through a DataLoader, and the user picks one.
//
//  * BufferDataLoader: bytes already in memory (flash, a Python bytes object).
//    Views, no copies; the caller keeps the buffer alive.
//  * FileDataLoader: pread() into heap buffers at load time (never during
//    execute); each FreeableBuffer frees its copy.
//  * MmapDataLoader: maps the file read-only; views into the mapping, so
//    constants are paged in on first use and shared between processes.
//
// Files that change. FileDataLoader and BufferDataLoader hold copies: once
// Program::load and load_method have returned, the file can be overwritten,
// truncated or deleted and loaded methods run on unchanged. MmapDataLoader's
// bytes *are* the file (MAP_PRIVATE copies a page only when this process
// writes it, and the runtime never does), so the file must not change or
// shrink while a Program loaded from it, or one of its Methods, lives:
//   * overwritten in place: later calls read the new bytes, as weights (wrong
//     outputs, NaN) and as the program's tables, which set_input() and
//     execute() read at every call and the loader checked only before the
//     change (undefined behaviour: in practice a crash);
//   * truncated: touching a page past the new end raises SIGBUS, which kills
//     the process.
// Replacing the file by rename (write a new file, then rename it over the old
// name) is safe: the mapping keeps the old file's bytes. MmapDataLoader
// checks what it cheaply can: it keeps the file open and, at every load()
// (the header, the program, the constant segment, each delegate payload),
// compares the file's size and modification time with those it mapped, so a
// change made before Program::load or load_method returns an Io error instead
// of a crash (a same-size rewrite within the file system's timestamp
// granularity, a clock tick, goes unseen). A change made after (while methods
// execute) cannot be caught without copying the file, which is what
// FileDataLoader does.
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
  MmapDataLoader(const void* mapping, uint64_t size, int fd, int64_t mtime_ns)
      : mapping_(mapping), size_(size), fd_(fd), mtime_ns_(mtime_ns) {}
  const void* mapping_ = nullptr;
  uint64_t size_ = 0;
  int fd_ = -1;            // kept open to notice a change (load())
  int64_t mtime_ns_ = 0;   // the modification time when mapped
};

}  // namespace etmlir
