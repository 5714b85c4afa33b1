// The "cpu" backend: a delegate whose payload is native code, an ELF shared
// object compiled ahead of time for the machine's CPU, behind the shared
// payload header that describes it (PAYLOAD.md, runtime/schema/payload.fbs).
// The runtime checks the header, loads the shared object from memory and
// calls its entry points with MLIR memref descriptors built over the
// delegate's live-in and live-out tensors.
//
//   etmlir::BackendRegistry backends;
//   etmlir::BackendOptions options;
//   options.threads = 4;
//   etmlir::register_cpu_backend(backends, options);   // id "cpu" (register_backends does this)
//   etmlir::NativeCodeTrust trust;                        // the payload is code: see below
//   trust.allow_native_code = true;                       // or trust.trusted_keys = ...
//   auto method = program->load_method("forward", &memory, &kernels, &backends, &trust);
//
// Trust: a payload is a shared object that init() loads and runs, so init()
// first refuses it (ErrorCode::Untrusted, before writing or mapping any of it)
// unless the load's NativeCodeTrust allows native code or one of the
// delegate's signatures is by a trusted key and verifies over the payload
// (etmlir/runtime/native_code.h; README.md "Trust"). method_allocator_bytes()
// only reads the header and needs no trust.
//
// Ownership: init() validates the whole header before touching the shared
// object, loads its own copy of it (memfd_create + dlopen; every delegate has
// its own globals), and takes from the method allocator (BackendInitContext)
// everything execute() will use: the delegate state, the payload's arena
// (scratch_bytes, 64-byte aligned), the memref descriptors and packed argument
// arrays and the output-shape buffer; method_allocator_bytes() says how much,
// from the header alone. What is not method-allocator memory: the dlopen'ed
// copy of the shared object and, with more than one thread, the thread pool:
// threads - 1 persistent workers (their stacks, the system's) shared by every
// delegate of the backend instance, started by the first delegate's init()
// and joined by the last one's destroy(). destroy() dlcloses the copy.
// execute() allocates nothing. The payload bytes are only read during init().
//
// Errors at init start with "cpu delegate <index>: " and say what is wrong
// (README.md lists them); errors at execute name the argument.
#pragma once

#include <cstdint>

#include "etmlir/runtime/backend.h"
#include "etmlir/runtime/error.h"

namespace etmlir {

// BackendOptions::threads for this backend: 1 to kCpuMaxThreads.
constexpr int kCpuMaxThreads = kMaxBackendThreads;

// Adds the backend under "cpu", with options.threads threads per delegate call
// (the calling thread included). Backends with the same thread count are one
// static instance with one thread pool; a registry holds one "cpu" backend (a
// second add fails).
Error register_cpu_backend(BackendRegistry& registry, const BackendOptions& options = {});

// The payload header's cpu_features bits that the running CPU has (0 on
// aarch64, whose payloads need no bit): host_cpu_features() of payload_header.h.
uint64_t cpu_backend_supported_features();

// "x86_64" or "aarch64": the arch a payload must have been built for here.
const char* cpu_backend_arch();

// What one delegate did so far (a handle from the "cpu" backend's init()).
struct CpuDelegateStats {
  uint64_t executes = 0;
  // Allocations of the payload that did not fit its arena and went to malloc
  // (etmlir_cpu_heap_fallbacks() after the last execute). Results are still
  // right; a nonzero count means scratch_bytes was too small for these sizes.
  uint64_t heap_fallbacks = 0;
  uint64_t arena_bytes = 0;  // the arena given to the payload
  uint64_t arena_peak = 0;   // etmlir_cpu_arena_peak() after the last execute
  int num_threads = 1;
};
CpuDelegateStats cpu_backend_stats(DelegateHandle handle);

// Heap fallbacks of every "cpu" delegate in the process, summed as they
// happen; also Backend::counter("heap_fallbacks") of the registered backend.
uint64_t cpu_backend_heap_fallbacks();

}  // namespace etmlir
