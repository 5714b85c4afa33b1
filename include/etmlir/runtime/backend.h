// Backends (delegates): a backend turns an opaque payload from the .pte into
// a handle once, at method load, and runs it at each DelegateCall.
//
//   class MyBackend : public etmlir::Backend { ... };
//   static MyBackend backend;                       // user-owned, outlives methods
//   backends.add("mine", &backend);                 // explicit registration
//
// The backends a build compiles in (runtime/backends/<id>/, the CMake list
// ETMLIR_BACKENDS) are registered together by etmlir::register_backends
// (generated "etmlir/register_backends.h"), each through its
// register_<id>_backend(registry, BackendOptions).
//
// Lifecycle per delegate of a loaded method: is_available() → init() at
// Method load (a missing or unavailable backend fails the load, naming it) →
// execute() at every DelegateCall → destroy() when the Method goes away.
//
// Memory: init() takes what the delegate keeps (its state, descriptors,
// arenas, payload copies) from BackendInitContext::method_allocator, which
// lives as long as the method; method_allocator_bytes() says how much, so that
// MethodMeta::method_allocator_bytes(backends) can size that allocator before
// the load. destroy() releases what is not in it (threads, loaded code).
#pragma once

#include <cstddef>
#include <cstdint>

#include "etmlir/runtime/error.h"
#include "etmlir/runtime/evalue.h"
#include "etmlir/runtime/event_tracer.h"
#include "etmlir/runtime/memory.h"
#include "etmlir/runtime/native_code.h"
#include "etmlir/runtime/span.h"

namespace etmlir {

struct CompileSpec {
  const char* key;  // NUL-terminated
  const uint8_t* value;
  size_t size;
};

class BackendRegistry;
class KernelRegistry;

// Generic knobs a host (et-run, the Python extension, an application) hands
// every backend it registers (register_backends, register_<id>_backend). A
// backend reads those that apply to it and ignores the rest.
struct BackendOptions {
  // Threads one delegate call may run on, the calling thread included
  // (1 to kMaxBackendThreads). The "cpu" backend gives each delegate a pool
  // of threads - 1 workers; backends that run on one thread ignore it.
  int threads = 1;
};

constexpr int kMaxBackendThreads = 256;

// What init() may use: the method allocator (memory that lives as long as
// the method: the delegate's state belongs there), the delegate's place in
// the program for messages, and the registries the outer method was loaded
// with, so that a backend that runs a program of its own
// (runtime/backends/nested) loads it with the same kernels and backends. The
// registries outlive the method (nullptr when the method was loaded without
// backends). For Backend::method_allocator_bytes, method_allocator is nullptr.
// `trust` and `signatures` decide whether a payload that is native code may
// run (native_code.h: check_native_code); a backend that runs a program of its
// own loads it with the same `trust`.
struct BackendInitContext {
  // {allocator, method, index[, kernels, backends[, trust]]}; signatures are set apart.
  BackendInitContext(MemoryAllocator* method_allocator, const char* method_name, uint32_t delegate_index,
                     const KernelRegistry* kernels = nullptr, const BackendRegistry* backends = nullptr,
                     const NativeCodeTrust* trust = nullptr)
      : method_allocator(method_allocator),
        method_name(method_name),
        delegate_index(delegate_index),
        kernels(kernels),
        backends(backends),
        trust(trust) {}
  MemoryAllocator* method_allocator;
  const char* method_name;
  uint32_t delegate_index;
  const KernelRegistry* kernels = nullptr;
  const BackendRegistry* backends = nullptr;
  // What the host trusts (load_method's `trust`); nullptr: no native code.
  const NativeCodeTrust* trust = nullptr;
  // The delegate's signatures (program.fbs Delegate.signatures), views into the program.
  Span<const PayloadSignature> signatures;
};

// What execute() may use: scratch memory valid during the call. A backend
// that fails can name the debug handle of the op that failed; the runtime
// turns it into the op's source line (through the outer method's debug_info)
// and reports it from Method::failed_debug_handle(). Its message should then
// say what failed, not where: the runtime prefixes the location.
//
// Tracing: when the method has an EventTracer attached, `tracer` is it and
// the runtime has opened the delegate call's event (tracer->parent() is that
// event); a backend may record one DelegateOp event per region it runs
// (tracer->begin(TraceEventKind::DelegateOp, handle, instruction, delegate,
// region_id) ... tracer->end(i)), from the thread that called execute().
// nullptr when nobody traces: a backend must then record nothing.
struct BackendExecuteContext {
  MemoryAllocator* temp_allocator;
  uint32_t failed_debug_handle = 0;
  EventTracer* tracer = nullptr;
  uint32_t instruction = 0;  // the delegate call's instruction (pc) in its method
  uint16_t delegate_index = 0;  // the delegate's index in its method
};

using DelegateHandle = void*;

// What payloads a backend reads, for the runtime manifest (tools/et_manifest.cpp,
// etmlir.runtime.manifest(): a program is checked against a build without a device): the shared
// payload header's body_format and the body_version range it accepts, and whether the body is
// native code that check_payload_target holds to this host's arch and CPU features.
struct BackendPayloadInfo {
  const char* body_format = nullptr;  // nullptr: not declared (a backend without the shared header)
  uint32_t min_body_version = 0;
  uint32_t max_body_version = 0;
  bool native_code = false;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual bool is_available() const = 0;
  // `payload` stays valid until destroy(handle).
  virtual Result<DelegateHandle> init(BackendInitContext& context, Span<const uint8_t> payload,
                                      Span<const CompileSpec> compile_specs) = 0;
  // `args`: the delegate's live-ins, then its live-outs (resize those).
  virtual Error execute(BackendExecuteContext& context, DelegateHandle handle, Span<EValue*> args) = 0;
  // Frees what init() did not take from the method allocator (that memory is
  // the caller's and is not touched).
  virtual void destroy(DelegateHandle handle) = 0;

  // An upper bound on the bytes init() takes from context.method_allocator
  // for this payload and these compile specs (the same ones init() will get).
  // MethodMeta::method_allocator_bytes(backends) adds it to the method's own
  // bytes; a payload init() would refuse may return its Error here already.
  // Default: 0 (a backend that keeps nothing there).
  virtual Result<size_t> method_allocator_bytes(const BackendInitContext& context, Span<const uint8_t> payload,
                                                Span<const CompileSpec> compile_specs) const {
    (void)context;
    (void)payload;
    (void)compile_specs;
    return size_t{0};
  }

  // A named statistic the backend keeps, summed over its delegates in this
  // process (each backend's README lists its names; "cpu" keeps
  // "heap_fallbacks"). 0 for a name it does not keep.
  virtual uint64_t counter(const char* name) const {
    (void)name;
    return 0;
  }

  // Why is_available() is false, for the load error (a library it could not find, ...); nullptr: not said.
  virtual const char* unavailable_reason() const { return nullptr; }

  // The device it runs delegates on, for tools and benchmarks ("vulkan": the GPU's name); nullptr: not said.
  virtual const char* device() const { return nullptr; }

  // The payloads it reads (see BackendPayloadInfo). Default: nothing declared.
  virtual BackendPayloadInfo payload_info() const { return {}; }
};

class BackendRegistry {
 public:
  static constexpr size_t kCapacity = 16;
  Error add(const char* id, Backend* backend);
  Backend* find(const char* id, size_t id_size) const;
  Backend* find(const char* id) const;
  size_t size() const { return size_; }
  const char* id(size_t i) const { return ids_[i]; }

 private:
  const char* ids_[kCapacity] = {};
  Backend* backends_[kCapacity] = {};
  size_t size_ = 0;
};

// For a backend's init(): `size` bytes at `alignment` from `allocator` (the
// method allocator) into *out, or OutOfMemory saying what needed them, how much
// is left, and how to size the allocator (MethodMeta::method_allocator_bytes).
Error allocate_at_init(MemoryAllocator& allocator, size_t size, size_t alignment, const char* what, void** out);

}  // namespace etmlir
