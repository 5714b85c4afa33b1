#include "etmlir/runtime/error.h"

#include <cstdio>
#include <cstring>

namespace etmlir {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::Ok: return "Ok";
    case ErrorCode::InvalidArgument: return "InvalidArgument";
    case ErrorCode::InvalidProgram: return "InvalidProgram";
    case ErrorCode::NotFound: return "NotFound";
    case ErrorCode::NotSupported: return "NotSupported";
    case ErrorCode::OutOfMemory: return "OutOfMemory";
    case ErrorCode::OutOfBounds: return "OutOfBounds";
    case ErrorCode::Io: return "Io";
    case ErrorCode::KernelFailed: return "KernelFailed";
    case ErrorCode::Internal: return "Internal";
    case ErrorCode::Untrusted: return "Untrusted";
  }
  return "Unknown";
}

namespace {
void mark_truncated(char* message, int written) {
  if (written >= static_cast<int>(Error::kMaxMessage)) {
    std::memcpy(message + Error::kMaxMessage - 4, "...", 4);
  }
}
}  // namespace

Error Error::vmake(ErrorCode code, const char* fmt, va_list args) {
  Error error;
  error.code_ = code == ErrorCode::Ok ? ErrorCode::Internal : code;
  int written = std::vsnprintf(error.message_, kMaxMessage, fmt, args);
  mark_truncated(error.message_, written);
  return error;
}

Error Error::make(ErrorCode code, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  Error error = vmake(code, fmt, args);
  va_end(args);
  return error;
}

Error& Error::prefix(const char* fmt, ...) {
  char head[kMaxMessage];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(head, sizeof(head), fmt, args);
  va_end(args);
  char joined[kMaxMessage];
  int written = std::snprintf(joined, sizeof(joined), "%s: %s", head, message_);
  mark_truncated(joined, written);
  std::memcpy(message_, joined, kMaxMessage);
  return *this;
}

}  // namespace etmlir
