// The "nested" backend: a delegate whose payload is the shared payload header
// (runtime/schema/payload.fbs) around a complete .pte program (the delegated
// subgraph, compiled by etmlir's own pipeline), run by this same runtime. It
// is the reference backend: partitioning, payloads, compile specs, the
// live-in/live-out calling convention and error reporting through debug
// handles all work end to end with it, with no device.
//
//   etmlir::BackendRegistry backends;
//   etmlir::register_nested_backend(backends, {});   // id "nested" (register_backends does this)
//   auto method = program->load_method("forward", &memory, &kernels, &backends);
//
// Compile specs: "method" (optional) names the payload's method (default: the
// header's "forward" entry point, else "forward"); "temp_bytes" (optional,
// decimal, default 4 MiB) sizes the inner method's kernel scratch. Other keys
// are ignored. BackendOptions are not read.
//
// Ownership: init() checks the header, loads the body (a view: the outer
// method keeps the payload alive until destroy) with the outer method's
// kernel and backend registries and its trust in native code
// (BackendInitContext: an inner "cpu" delegate needs what an outer one
// would, native_code.h), and takes from the
// outer method allocator everything the inner method needs: its own method
// allocator (MethodMeta::method_allocator_bytes(backends), so its delegates'
// state too), one 64-byte-aligned buffer per planned arena and the temp
// allocator (method_allocator_bytes() says how much). destroy() destroys the
// inner method and program and frees nothing. execute() allocates nothing: it
// copies the live-ins into the inner method's inputs, runs it, resizes each
// live-out to the inner output's sizes and copies the data. When the inner
// method fails, its message is returned without a location and the failing
// op's debug handle is reported in BackendExecuteContext::failed_debug_handle,
// so the outer method names the op's source line once.
#pragma once

#include "etmlir/runtime/backend.h"
#include "etmlir/runtime/error.h"

namespace etmlir {

// Adds the backend (one static instance, shared by all its delegates) under "nested".
Error register_nested_backend(BackendRegistry& registry, const BackendOptions& options = {});

}  // namespace etmlir
