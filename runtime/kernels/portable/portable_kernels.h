// The portable kernels: plain C++17, a kernel for every Core ATen operator the
// edge dialect accepts (docs/op_coverage.md), in every dtype the edge dtype
// table allows for it.
//
//   etmlir::KernelRegistry registry;
//   etmlir::register_prim_kernels(registry);
//   etmlir::register_portable_kernels(registry);
//
// One .cpp per op family, each beside its part of the kernel table
// (<family>.yaml); scripts/gen_kernels.py generates each family's typed
// prototypes and register function (generated/<family>.h, declaring
// register_<family>_kernels, so a runtime can take only some families) and
// the registration code (generated/register_kernels.cpp). Selective build
// (CMake option ETMLIR_SELECTED_OPERATORS) narrows each family to the listed
// operators.
#pragma once

#include "etmlir/runtime/error.h"
#include "etmlir/runtime/kernel.h"

namespace etmlir {

// Every family of the kernel table (generated/register_kernels.cpp).
Error register_portable_kernels(KernelRegistry& registry);

}  // namespace etmlir
