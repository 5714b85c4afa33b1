// Platform abstraction layer: the only OS services the runtime core uses.
// lib/platform_posix.cpp implements them for Linux/macOS; a port to a target
// without an OS provides its own definitions of these three functions (they
// are weak in the POSIX file, so a strong definition anywhere overrides it).
#pragma once

#include <cstdint>

namespace etmlir {

enum class LogLevel : uint8_t { Debug, Info, Error };

// Writes one line. `file`/`line` name the runtime source that logged it.
void pal_log(LogLevel level, const char* file, int line, const char* message);
// Monotonic clock in nanoseconds (any epoch).
uint64_t pal_now_ns();
// Ends the program after an unrecoverable internal error. Never returns.
[[noreturn]] void pal_abort(const char* message);

// printf-style logging through pal_log (formats into a stack buffer).
void log_message(LogLevel level, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));

}  // namespace etmlir

#define ET_LOG(level, ...) ::etmlir::log_message(::etmlir::LogLevel::level, __FILE__, __LINE__, __VA_ARGS__)
