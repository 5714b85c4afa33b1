// The "nested" backend: a delegate whose payload is a complete .pte program
// (the delegated subgraph, compiled by etmlir's own pipeline), run by this
// same runtime. It is the reference backend: partitioning, payloads,
// compile specs, the live-in/live-out calling convention and error reporting
// through debug handles all work end to end with it, with no device.
//
//   etmlir::BackendRegistry backends;
//   etmlir::register_nested_backend(backends);          // id "nested"
//   auto method = program->load_method("forward", &memory, &kernels, &backends);
//
// Compile specs: "method" (optional, default "forward") names the payload's
// method; "temp_bytes" (optional, decimal, default 4 MiB) sizes the inner
// method's kernel scratch. Other keys are ignored.
//
// Ownership: init() loads the payload (a view: the outer method keeps the
// payload alive until destroy) with the outer method's kernel and backend
// registries (BackendInitContext), and allocates everything the inner method
// needs: the method allocator (exactly MethodMeta::method_allocator_bytes()),
// one 64-byte-aligned buffer per planned arena and the temp allocator.
// destroy() frees it all. execute() allocates nothing: it copies the
// live-ins into the inner method's inputs, runs it, resizes each live-out to
// the inner output's sizes and copies the data. When the inner method fails,
// its message is returned without a location and the failing op's debug
// handle is reported in BackendExecuteContext::failed_debug_handle, so the
// outer method names the op's source line once.
#pragma once

#include "etmlir/runtime/backend.h"
#include "etmlir/runtime/error.h"

namespace etmlir {

// Adds the backend (one static instance, shared by all its delegates) under "nested".
Error register_nested_backend(BackendRegistry& registry);

}  // namespace etmlir
