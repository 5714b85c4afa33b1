// Errors as values: every fallible runtime call returns an Error or a
// Result<T>. No exceptions, no heap: the message lives inside the Error.
//
//   Result<Program> program = Program::load(&loader);
//   if (!program.ok()) log(program.error().message());
#pragma once

#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>

namespace etmlir {

enum class ErrorCode : uint8_t {
  Ok = 0,
  InvalidArgument,   // a caller passed something wrong (input shape, dtype, name)
  InvalidProgram,    // the .pte is malformed or inconsistent
  NotFound,          // no such method, kernel or backend
  NotSupported,      // valid, but this runtime cannot do it (version, dtype)
  OutOfMemory,       // an allocator or arena is too small
  OutOfBounds,       // a resize beyond a planned upper bound
  Io,                // the data loader could not read
  KernelFailed,      // a kernel or delegate reported a failure at run time
  Internal,
  Untrusted,         // native code the host neither allowed nor trusts a signature of (native_code.h)
};

const char* error_code_name(ErrorCode code);

// A code plus a human-readable message. Cheap to test, ~260 bytes to copy.
class Error {
 public:
  static constexpr size_t kMaxMessage = 256;

  Error() = default;
  static Error ok() { return Error(); }
  // printf-style message; truncated (with "...") at kMaxMessage - 1 bytes.
  static Error make(ErrorCode code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  static Error vmake(ErrorCode code, const char* fmt, va_list args);

  bool is_ok() const { return code_ == ErrorCode::Ok; }
  // True when something went wrong: `if (Error e = f()) return e;`
  explicit operator bool() const { return code_ != ErrorCode::Ok; }
  ErrorCode code() const { return code_; }
  const char* message() const { return message_; }

  // Prepends "context: " to the message (e.g. the op and source line).
  Error& prefix(const char* fmt, ...) __attribute__((format(printf, 2, 3)));

 private:
  ErrorCode code_ = ErrorCode::Ok;
  char message_[kMaxMessage] = {0};
};

// Either a T or an Error. T must be movable.
template <typename T>
class Result {
 public:
  Result(T&& value) : has_value_(true) { new (&storage_) T(std::move(value)); }  // NOLINT
  Result(const T& value) : has_value_(true) { new (&storage_) T(value); }        // NOLINT
  Result(Error error) : error_(error), has_value_(false) {}                      // NOLINT
  Result(Result&& other) : error_(other.error_), has_value_(other.has_value_) {
    if (has_value_) new (&storage_) T(std::move(other.get()));
  }
  Result(const Result&) = delete;
  Result& operator=(const Result&) = delete;
  Result& operator=(Result&&) = delete;
  ~Result() {
    if (has_value_) get().~T();
  }

  bool ok() const { return has_value_; }
  const Error& error() const { return error_; }
  T& get() { return *std::launder(reinterpret_cast<T*>(&storage_)); }
  const T& get() const { return *std::launder(reinterpret_cast<const T*>(&storage_)); }
  T& operator*() { return get(); }
  T* operator->() { return &get(); }
  const T* operator->() const { return &get(); }

 private:
  Error error_;
  bool has_value_;
  alignas(T) unsigned char storage_[sizeof(T)];
};

}  // namespace etmlir

// Returns the Error from the enclosing function if `expr` failed.
#define ET_CHECK_OK(expr)                       \
  do {                                          \
    ::etmlir::Error et_error_ = (expr);         \
    if (et_error_) return et_error_;            \
  } while (0)

// Returns an Error with `code` and a printf-style message unless `cond` holds.
#define ET_CHECK_MSG(cond, code, ...)                                   \
  do {                                                                  \
    if (!(cond)) return ::etmlir::Error::make((code), __VA_ARGS__);     \
  } while (0)
