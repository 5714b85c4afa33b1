// The "tosa" backend: a delegate whose payload is the shared payload header
// (runtime/schema/payload.fbs: backend "tosa", body_format "tosa-flatbuffer",
// body_version 1) around a standard TOSA 1.0 FlatBuffer (tosa.fbs), compiled by
// python/etmlir/backends/tosa. On a host it runs the graph with the TOSA
// reference model, standing in for an NPU driver (README.md says where a vendor's
// NPU compiler takes over).
//
//   etmlir::BackendRegistry backends;
//   etmlir::register_tosa_backend(backends, {});   // id "tosa" (register_backends does this)
//
// The reference model lives in libetmlir_tosa_reference.so (reference/), built when
// tosa-tools is installed and loaded at first use from, in order: the path in
// ETMLIR_TOSA_REFERENCE_LIB, the folder of the binary that holds this backend (the
// Python extension's package), the build tree. Without it the runtime still builds
// and runs; is_available() is false and a tosa-delegated program fails at load
// naming the backend and the library.
//
// init() checks the header (read_payload), the body format and version, the entry
// points "forward" (the TOSA region, "main") and "profile" ("pro_fp" or
// "pro_int"), then hands the FlatBuffer to the library, which verifies it,
// checks the profile's tensor types and builds the reference model's graph; the
// graph's inputs and outputs must match the header's tensor specs. The delegate's
// state (pointer tables) comes from the method allocator. execute() checks every
// live-in against the graph's shape and dtype, sizes the live-outs and runs the
// graph: our code allocates nothing there; the reference model allocates as a
// driver would. Compile specs and BackendOptions are not read.
#pragma once

#include "etmlir/runtime/backend.h"
#include "etmlir/runtime/error.h"

namespace etmlir {

// Adds the backend (one static instance, shared by all its delegates) under "tosa".
Error register_tosa_backend(BackendRegistry& registry, const BackendOptions& options = {});

// Where the reference model library was looked for and why it did not load ("" when it did).
const char* tosa_reference_library_problem();

}  // namespace etmlir
