#include "etmlir/runtime/data_loader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace etmlir {
namespace {

bool in_range(uint64_t offset, uint64_t size, uint64_t limit) { return offset <= limit && size <= limit - offset; }

Error range_error(const char* what, uint64_t offset, uint64_t size, uint64_t limit) {
  return Error::make(ErrorCode::InvalidProgram, "%s: bytes [%llu, +%llu) are outside the %llu-byte data", what,
                     static_cast<unsigned long long>(offset), static_cast<unsigned long long>(size),
                     static_cast<unsigned long long>(limit));
}

void free_heap(void*, const void* data, size_t) { std::free(const_cast<void*>(data)); }

// Opens `path` read-only; it must be a regular file. On success the caller owns *fd.
Error open_regular_file(const char* path, int* fd, uint64_t* size) {
  // O_NONBLOCK: a FIFO or a device must not block the open (it is refused below); reads of a
  // regular file ignore the flag.
  *fd = ::open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (*fd < 0) return Error::make(ErrorCode::Io, "cannot open %s: %s", path, std::strerror(errno));
  struct stat st;
  if (::fstat(*fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(*fd);
    *fd = -1;
    return Error::make(ErrorCode::Io, "%s is not a regular file", path);
  }
  *size = static_cast<uint64_t>(st.st_size);
  return Error::ok();
}

}  // namespace

Result<FreeableBuffer> BufferDataLoader::load(uint64_t offset, uint64_t size) {
  if (!in_range(offset, size, size_)) return range_error("buffer loader", offset, size, size_);
  return FreeableBuffer(data_ + offset, static_cast<size_t>(size));
}

Result<FileDataLoader> FileDataLoader::open(const char* path) {
  int fd = -1;
  uint64_t size = 0;
  ET_CHECK_OK(open_regular_file(path, &fd, &size));
  return FileDataLoader(fd, size);
}

FileDataLoader::FileDataLoader(FileDataLoader&& other) noexcept : fd_(other.fd_), size_(other.size_) {
  other.fd_ = -1;
}

FileDataLoader::~FileDataLoader() {
  if (fd_ >= 0) ::close(fd_);
}

Result<FreeableBuffer> FileDataLoader::load(uint64_t offset, uint64_t size) {
  if (!in_range(offset, size, size_)) return range_error("file loader", offset, size, size_);
  if (size == 0) return FreeableBuffer(nullptr, 0);
  void* buffer = nullptr;
  if (posix_memalign(&buffer, 64, static_cast<size_t>(size)) != 0) {
    return Error::make(ErrorCode::OutOfMemory, "file loader: cannot allocate %llu bytes",
                       static_cast<unsigned long long>(size));
  }
  uint8_t* cursor = static_cast<uint8_t*>(buffer);
  uint64_t done = 0;
  while (done < size) {
    ssize_t n = ::pread(fd_, cursor + done, static_cast<size_t>(size - done), static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::free(buffer);
      return Error::make(ErrorCode::Io, "file loader: read of [%llu, +%llu) failed: %s",
                         static_cast<unsigned long long>(offset), static_cast<unsigned long long>(size),
                         n == 0 ? "unexpected end of file" : std::strerror(errno));
    }
    done += static_cast<uint64_t>(n);
  }
  return FreeableBuffer(buffer, static_cast<size_t>(size), free_heap);
}

namespace {

int64_t mtime_ns(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + static_cast<int64_t>(st.st_mtim.tv_nsec);
}

}  // namespace

Result<MmapDataLoader> MmapDataLoader::open(const char* path) {
  int fd = -1;
  uint64_t size = 0;
  ET_CHECK_OK(open_regular_file(path, &fd, &size));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int saved = errno;
    ::close(fd);
    return Error::make(ErrorCode::Io, "cannot stat %s: %s", path, std::strerror(saved));
  }
  const void* mapping = nullptr;
  if (size > 0) {
    void* m = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      int saved = errno;
      ::close(fd);
      return Error::make(ErrorCode::Io, "cannot mmap %s: %s", path, std::strerror(saved));
    }
    mapping = m;
  }
  return MmapDataLoader(mapping, size, fd, mtime_ns(st));
}

MmapDataLoader::MmapDataLoader(MmapDataLoader&& other) noexcept
    : mapping_(other.mapping_), size_(other.size_), fd_(other.fd_), mtime_ns_(other.mtime_ns_) {
  other.mapping_ = nullptr;
  other.size_ = 0;
  other.fd_ = -1;
}

MmapDataLoader::~MmapDataLoader() {
  if (mapping_ != nullptr) ::munmap(const_cast<void*>(mapping_), static_cast<size_t>(size_));
  if (fd_ >= 0) ::close(fd_);
}

Result<FreeableBuffer> MmapDataLoader::load(uint64_t offset, uint64_t size) {
  if (!in_range(offset, size, size_)) return range_error("mmap loader", offset, size, size_);
  // The mapping is the file: a file that changed since it was mapped would be read as garbage
  // (overwritten) or fault with SIGBUS (truncated). One fstat per load catches a change made
  // before this load; data_loader.h says what it cannot catch.
  struct stat st;
  if (fd_ >= 0 && ::fstat(fd_, &st) == 0 &&
      (static_cast<uint64_t>(st.st_size) != size_ || mtime_ns(st) != mtime_ns_)) {
    return Error::make(ErrorCode::Io,
                       "mmap loader: the file changed after it was mapped (%llu bytes then, %llu now%s): a file "
                       "loaded by mmap must not change while a program loaded from it lives; replace it by "
                       "rename, or load it with FileDataLoader (et-run --loader file)",
                       static_cast<unsigned long long>(size_), static_cast<unsigned long long>(st.st_size),
                       static_cast<uint64_t>(st.st_size) == size_ ? ", modified in place" : "");
  }
  return FreeableBuffer(static_cast<const uint8_t*>(mapping_) + offset, static_cast<size_t>(size));
}

}  // namespace etmlir
