// The "vulkan" backend: SPIR-V compute shaders and their dispatch graph, compiled by MLIR
// (python/etmlir/backends/vulkan/), run through the Vulkan API. README.md says how.
//
//   etmlir::BackendRegistry backends;
//   etmlir::register_vulkan_backend(backends, {});
//
// The Vulkan loader (libvulkan.so.1) is opened at run time: the runtime links and runs
// where there is no Vulkan; the backend then reports is_available() == false and
// unavailable_reason() says why, and a method with a vulkan delegate fails to load naming it.
#pragma once

#include "etmlir/runtime/backend.h"
#include "etmlir/runtime/error.h"

namespace etmlir {

Error register_vulkan_backend(BackendRegistry& registry, const BackendOptions& options);

// The Vulkan device the backend runs on ("llvmpipe (LLVM 15.0.6, 256 bits)"), or nullptr
// when there is none (vulkan_problem() says why). Opens the loader on first use.
const char* vulkan_device_name();
const char* vulkan_problem();

// Messages the Vulkan validation layer reported (errors and warnings) since the process
// started; the layer is enabled when ETMLIR_VULKAN_VALIDATION=1 and it is installed.
uint64_t vulkan_validation_messages();

}  // namespace etmlir
