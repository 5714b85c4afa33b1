// Compile-time operator selection for selective builds.
//
// A normal build registers every kernel. A selective build defines
// ETMLIR_SELECTIVE_BUILD and generates "etmlir_selected_operators.h" (CMake
// option ETMLIR_SELECTED_OPERATORS, or scripts/selected_operators.py from a
// .pte) which defines ETMLIR_SELECTED_OPERATORS as a comma-separated list of
// string literals. kernel_selected() is constexpr, so unselected kernels are
// never referenced.
#pragma once

#include <cstddef>

#ifdef ETMLIR_SELECTIVE_BUILD
#include "etmlir_selected_operators.h"
#endif

namespace etmlir {
namespace detail {

constexpr bool string_equal(const char* a, const char* b) {
  while (*a != '\0' && *a == *b) {
    ++a;
    ++b;
  }
  return *a == *b;
}

#ifdef ETMLIR_SELECTIVE_BUILD
constexpr const char* kSelectedOperators[] = {ETMLIR_SELECTED_OPERATORS};
#endif

}  // namespace detail

constexpr bool kSelectiveBuild =
#ifdef ETMLIR_SELECTIVE_BUILD
    true;
#else
    false;
#endif

constexpr bool kernel_selected(const char* name) {
#ifdef ETMLIR_SELECTIVE_BUILD
  for (const char* selected : detail::kSelectedOperators) {
    if (detail::string_equal(selected, name)) return true;
  }
  return false;
#else
  (void)name;
  return true;
#endif
}

}  // namespace etmlir
