// The platform layer on POSIX systems. Each function is weak: a port links
// its own strong definition instead (see include/etmlir/runtime/platform.h).
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "etmlir/runtime/platform.h"

namespace etmlir {

__attribute__((weak)) void pal_log(LogLevel level, const char* file, int line, const char* message) {
  const char* tag = level == LogLevel::Error ? "E" : level == LogLevel::Info ? "I" : "D";
  std::fprintf(stderr, "[etmlir %s %s:%d] %s\n", tag, file, line, message);
}

__attribute__((weak)) uint64_t pal_now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

__attribute__((weak)) void pal_abort(const char* message) {
  std::fprintf(stderr, "etmlir: fatal: %s\n", message);
  std::abort();
}

void log_message(LogLevel level, const char* file, int line, const char* fmt, ...) {
  char buffer[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buffer, sizeof(buffer), fmt, args);
  va_end(args);
  pal_log(level, file, line, buffer);
}

}  // namespace etmlir
