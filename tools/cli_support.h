// What the C++ tools (et-run, et-verify-pte) share to keep their promise:
// every failure is one line on stderr and an exit status, never an abort.
//
// parse_count(text, suffixes, out): a count argument (--iterations 10, --temp-bytes 64M).
//
// one_line(text): a message as one printable line. Runtime messages quote
// names from the file (operators, methods, arenas), and a corrupt file can
// put a newline or a terminal escape in them; those become \xNN.
//
// install_fatal_handlers(prog): the last line of defence.
// The tools build with the runtime's flags (-fno-exceptions), so a failed
// allocation inside std::string or std::vector cannot be caught: operator new
// would throw std::bad_alloc straight into std::terminate (SIGABRT, "terminate
// called after throwing..."). The tools size their big buffers with malloc and
// report failures as errors; these handlers turn what is left (an allocation of
// the standard library failing, a length_error) into
//
//   et-run: error: out of memory
//
// and exit status 1.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>

namespace etmlir {
namespace tools {
namespace detail {

inline const char*& fatal_prog() {
  static const char* prog = "etmlir";
  return prog;
}

// write(2) only: no allocation, no stdio locks (the failure may be inside either).
inline void write_fatal(const char* what) {
  const char* parts[] = {fatal_prog(), ": error: ", what, "\n"};
  for (const char* part : parts) {
    ssize_t ignored = ::write(STDERR_FILENO, part, std::strlen(part));
    (void)ignored;
  }
}

[[noreturn]] inline void out_of_memory() {
  write_fatal("out of memory");
  std::_Exit(1);
}

[[noreturn]] inline void terminated() {
  write_fatal("internal error (std::terminate: a size the standard library cannot hold?); please report it");
  std::_Exit(1);
}

}  // namespace detail

// `text` with every control character (newline, escape, DEL, ...) as \xNN; other bytes (UTF-8) as they are.
inline std::string one_line(const char* text) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (const char* p = text; *p != '\0'; ++p) {
    unsigned char c = static_cast<unsigned char>(*p);
    if (c >= 0x20 && c != 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
  return out;
}

// A decimal count, with an optional binary suffix (K, M, G) when `suffixes`: "64M" -> 64 << 20.
// False for anything else (a sign, spaces, overflow), so "-1" is an error, not 2**64 - 1.
inline bool parse_count(const char* text, bool suffixes, uint64_t* out) {
  if (text == nullptr || *text < '0' || *text > '9') return false;
  errno = 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(text, &end, 10);
  if (errno != 0) return false;
  unsigned shift = 0;
  if (suffixes && *end != '\0') {
    switch (*end) {
      case 'k': case 'K': shift = 10; break;
      case 'm': case 'M': shift = 20; break;
      case 'g': case 'G': shift = 30; break;
      default: return false;
    }
    ++end;
  }
  if (*end != '\0') return false;
  if (shift != 0 && v > (UINT64_MAX >> shift)) return false;
  *out = static_cast<uint64_t>(v) << shift;
  return true;
}

// A count with thousands separators for messages and summaries: 1647104 -> "1,647,104".
inline std::string grouped(uint64_t v) {
  std::string digits = std::to_string(v);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// Installs both handlers; `prog` names the tool in the message (a string literal).
inline void install_fatal_handlers(const char* prog) {
  detail::fatal_prog() = prog;
  std::set_new_handler(detail::out_of_memory);
  std::set_terminate(detail::terminated);
}

}  // namespace tools
}  // namespace etmlir
