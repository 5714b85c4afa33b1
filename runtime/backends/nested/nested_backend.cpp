// The "nested" backend: a .pte payload run as an inner Method (nested_backend.h).
#include "nested_backend.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "etmlir/runtime/data_loader.h"
#include "etmlir/runtime/evalue.h"
#include "etmlir/runtime/memory.h"
#include "etmlir/runtime/method.h"
#include "etmlir/runtime/program.h"
#include "etmlir/runtime/tensor.h"

namespace etmlir {
namespace {

constexpr size_t kAlignment = 64;
constexpr size_t kDefaultTempBytes = size_t{4} << 20;
constexpr size_t kMaxMethodName = 128;

size_t round_up(size_t n, size_t alignment) { return (n + alignment - 1) / alignment * alignment; }

// 64-byte-aligned heap memory (at least 64 bytes, so never nullptr for 0), or nullptr.
void* allocate_aligned(size_t size) {
  if (size > SIZE_MAX - kAlignment) return nullptr;
  return std::aligned_alloc(kAlignment, round_up(size ? size : 1, kAlignment));
}

const char* plural(size_t n) { return n == 1 ? "" : "s"; }

Error out_of_memory(const char* what, size_t bytes) {
  return Error::make(ErrorCode::OutOfMemory, "cannot allocate %zu bytes for the payload's %s", bytes, what);
}

// Everything one delegate owns. Built in place in malloc'd memory at init,
// torn down (method, then program, then buffers) at destroy.
struct NestedDelegate {
  explicit NestedDelegate(const uint8_t* payload, size_t size) : loader(payload, size) {}
  NestedDelegate(const NestedDelegate&) = delete;
  NestedDelegate& operator=(const NestedDelegate&) = delete;
  ~NestedDelegate() {
    if (method != nullptr) method->~Method();  // destroys the inner method's own delegates
    if (program != nullptr) program->~Program();
    std::free(unplanned_outputs);
    std::free(arenas);
    std::free(arena_buffer);
    std::free(temp_buffer);
    std::free(method_buffer);
    std::free(payload_copy);
  }

  Error load(const BackendInitContext& context, const char* method_name, size_t temp_bytes);

  void* payload_copy = nullptr;  // the payload, when the outer program's was not 16-byte aligned
  BufferDataLoader loader;
  Program* program = nullptr;  // in program_storage once loaded
  Method* method = nullptr;    // in method_storage once loaded
  size_t num_inputs = 0;
  size_t num_outputs = 0;
  void* method_buffer = nullptr;
  void* temp_buffer = nullptr;
  void* arena_buffer = nullptr;  // every arena, each at a 64-byte-aligned offset
  Span<uint8_t>* arenas = nullptr;
  bool* unplanned_outputs = nullptr;  // per output: written straight into the live-out
  MemoryAllocator method_allocator;
  MemoryAllocator temp_allocator;
  MemoryManager memory;
  alignas(Program) unsigned char program_storage[sizeof(Program)];
  alignas(Method) unsigned char method_storage[sizeof(Method)];
};

Error NestedDelegate::load(const BackendInitContext& context, const char* method_name, size_t temp_bytes) {
  Result<Program> loaded = Program::load(&loader);
  if (!loaded.ok()) {
    Error error = loaded.error();
    error.prefix("payload is not a valid program");
    return error;
  }
  program = new (program_storage) Program(static_cast<Program&&>(loaded.get()));

  Result<MethodMeta> meta = program->method_meta(method_name);
  if (!meta.ok()) {
    Error error = meta.error();
    error.prefix("payload");
    return error;
  }
  num_inputs = meta->num_inputs();
  num_outputs = meta->num_outputs();
  MethodMeta::TensorInfo info;
  for (size_t i = 0; i < num_inputs; ++i) {
    if (!meta->input_tensor(i, &info))
      return Error::make(ErrorCode::NotSupported,
                         "payload method '%s' input %zu is not a tensor (a nested delegate passes tensors only)",
                         meta->name(), i);
  }
  unplanned_outputs = static_cast<bool*>(std::malloc(sizeof(bool) * (num_outputs ? num_outputs : 1)));
  if (unplanned_outputs == nullptr) return out_of_memory("output table", num_outputs);
  for (size_t i = 0; i < num_outputs; ++i) {
    if (!meta->output_tensor(i, &info))
      return Error::make(ErrorCode::NotSupported,
                         "payload method '%s' output %zu is not a tensor (a nested delegate passes tensors only)",
                         meta->name(), i);
    unplanned_outputs[i] = !info.planned;
  }

  // Memory: all of it now, none during execute.
  size_t method_bytes = meta->method_allocator_bytes();
  method_buffer = allocate_aligned(method_bytes);
  if (method_buffer == nullptr) return out_of_memory("method allocator", method_bytes);
  method_allocator = MemoryAllocator(method_buffer, method_bytes);
  temp_buffer = allocate_aligned(temp_bytes);
  if (temp_buffer == nullptr) return out_of_memory("temp allocator", temp_bytes);
  temp_allocator = MemoryAllocator(temp_buffer, temp_bytes);
  size_t num_arenas = meta->num_arenas();
  size_t arena_bytes = 0;
  for (size_t i = 0; i < num_arenas; ++i) {
    uint64_t size = meta->arena_size(i);
    if (size > SIZE_MAX / 2 || arena_bytes > SIZE_MAX / 2) return out_of_memory("arenas", SIZE_MAX);
    arena_bytes += round_up(static_cast<size_t>(size), kAlignment);
  }
  arena_buffer = allocate_aligned(arena_bytes);
  arenas = static_cast<Span<uint8_t>*>(std::malloc(sizeof(Span<uint8_t>) * (num_arenas ? num_arenas : 1)));
  if (arena_buffer == nullptr || arenas == nullptr) return out_of_memory("arenas", arena_bytes);
  size_t offset = 0;
  for (size_t i = 0; i < num_arenas; ++i) {
    size_t size = static_cast<size_t>(meta->arena_size(i));
    new (&arenas[i]) Span<uint8_t>(static_cast<uint8_t*>(arena_buffer) + offset, size);
    offset += round_up(size, kAlignment);
  }
  memory.method_allocator = &method_allocator;
  memory.planned_arenas = Span<Span<uint8_t>>(arenas, num_arenas);
  memory.temp_allocator = &temp_allocator;

  Result<Method> inner = program->load_method(meta->name(), &memory, context.kernels, context.backends);
  if (!inner.ok()) {
    Error error = inner.error();
    error.prefix("loading the payload");
    return error;
  }
  method = new (method_storage) Method(static_cast<Method&&>(inner.get()));
  // The outer method names the location from failed_debug_handle().
  method->set_describe_failures(false);
  return Error::ok();
}

class NestedBackend : public Backend {
 public:
  bool is_available() const override { return true; }
  Result<DelegateHandle> init(BackendInitContext& context, Span<const uint8_t> payload,
                              Span<const CompileSpec> compile_specs) override;
  Error execute(BackendExecuteContext& context, DelegateHandle handle, Span<EValue*> args) override;
  void destroy(DelegateHandle handle) override;
};

Result<DelegateHandle> NestedBackend::init(BackendInitContext& context, Span<const uint8_t> payload,
                                           Span<const CompileSpec> compile_specs) {
  char method_name[kMaxMethodName] = "forward";
  size_t temp_bytes = kDefaultTempBytes;
  for (const CompileSpec& spec : compile_specs) {
    if (std::strcmp(spec.key, "method") == 0) {
      if (spec.size == 0 || spec.size >= sizeof(method_name) || spec.value == nullptr)
        return Error::make(ErrorCode::InvalidProgram,
                           "compile spec 'method' must name a method (1 to %zu bytes), got %zu bytes",
                           sizeof(method_name) - 1, spec.size);
      std::memcpy(method_name, spec.value, spec.size);
      method_name[spec.size] = '\0';
    } else if (std::strcmp(spec.key, "temp_bytes") == 0) {
      size_t value = 0;
      bool ok = spec.size > 0 && spec.size <= 15 && spec.value != nullptr;
      for (size_t i = 0; ok && i < spec.size; ++i) {
        ok = spec.value[i] >= '0' && spec.value[i] <= '9';
        value = value * 10 + static_cast<size_t>(spec.value[i] - '0');
      }
      if (!ok)
        return Error::make(ErrorCode::InvalidProgram,
                           "compile spec 'temp_bytes' must be a decimal byte count, got '%.*s'",
                           static_cast<int>(spec.size < 32 ? spec.size : 32),
                           spec.value ? reinterpret_cast<const char*>(spec.value) : "");
      temp_bytes = value;
    }
  }

  // Program::load wants the program 8- and its constants 16-byte aligned in
  // memory; an outer program with a small segment alignment may not give that.
  void* copy = nullptr;
  const uint8_t* bytes = payload.data();
  if (reinterpret_cast<uintptr_t>(bytes) % 16 != 0) {
    copy = allocate_aligned(payload.size());
    if (copy == nullptr) return out_of_memory("payload copy", payload.size());
    std::memcpy(copy, payload.data(), payload.size());
    bytes = static_cast<const uint8_t*>(copy);
  }
  void* memory = std::malloc(sizeof(NestedDelegate));
  if (memory == nullptr) {
    std::free(copy);
    return out_of_memory("delegate state", sizeof(NestedDelegate));
  }
  NestedDelegate* delegate = new (memory) NestedDelegate(bytes, payload.size());
  delegate->payload_copy = copy;
  if (Error error = delegate->load(context, method_name, temp_bytes)) {
    delegate->~NestedDelegate();
    std::free(memory);
    return error;
  }
  return DelegateHandle(delegate);
}

Error NestedBackend::execute(BackendExecuteContext& context, DelegateHandle handle, Span<EValue*> args) {
  NestedDelegate& d = *static_cast<NestedDelegate*>(handle);
  Method& inner = *d.method;
  if (args.size() != d.num_inputs + d.num_outputs)
    return Error::make(ErrorCode::InvalidProgram,
                       "the call passes %zu argument%s; the payload's method '%s' takes %zu (%zu input%s, then %zu "
                       "output%s)",
                       args.size(), plural(args.size()), inner.name(), d.num_inputs + d.num_outputs, d.num_inputs,
                       plural(d.num_inputs), d.num_outputs, plural(d.num_outputs));
  for (size_t k = 0; k < args.size(); ++k) {
    if (!args[k]->is_tensor())
      return Error::make(ErrorCode::InvalidProgram, "argument %zu is a %s; a nested delegate passes tensors only", k,
                         tag_name(args[k]->tag));
  }

  for (size_t i = 0; i < d.num_inputs; ++i) {
    const Tensor& live_in = args[i]->to_tensor();
    Error error = inner.set_input(i, live_in.data(), live_in.nbytes(), live_in.dtype(),
                                  Span<const int64_t>(live_in.sizes(), static_cast<size_t>(live_in.dim())));
    if (error) return error.prefix("payload");
  }
  // An unplanned output (compiled with alloc_outputs off) is written in place.
  for (size_t i = 0; i < d.num_outputs; ++i) {
    if (!d.unplanned_outputs[i]) continue;
    Tensor& live_out = args[d.num_inputs + i]->to_tensor();
    Error error = inner.set_output_buffer(i, live_out.mutable_data(), live_out.capacity());
    if (error) return error.prefix("payload");
  }
  if (Error error = inner.execute()) {
    context.failed_debug_handle = inner.failed_debug_handle();
    return error;
  }

  char given[128];
  char wanted[128];
  for (size_t i = 0; i < d.num_outputs; ++i) {
    const Tensor& result = inner.output(i).to_tensor();
    Tensor& live_out = args[d.num_inputs + i]->to_tensor();
    if (live_out.dtype() != result.dtype() || live_out.dim() != result.dim())
      return Error::make(ErrorCode::InvalidProgram, "live-out %zu is %s; the payload's output %zu is %s", i,
                         live_out.describe(wanted, sizeof(wanted)), i, result.describe(given, sizeof(given)));
    char name[32];
    std::snprintf(name, sizeof(name), "live-out %zu", i);
    ET_CHECK_OK(live_out.resize(Span<const int64_t>(result.sizes(), static_cast<size_t>(result.dim())), name));
    size_t nbytes = result.nbytes();
    if (nbytes == 0) continue;
    if (live_out.mutable_data() == nullptr || live_out.capacity() < nbytes)
      return Error::make(ErrorCode::OutOfMemory, "live-out %zu %s has %zu bytes of memory; it needs %zu", i,
                         live_out.describe(wanted, sizeof(wanted)), live_out.capacity(), nbytes);
    if (live_out.mutable_data() != result.data()) std::memcpy(live_out.mutable_data(), result.data(), nbytes);
  }
  return Error::ok();
}

void NestedBackend::destroy(DelegateHandle handle) {
  NestedDelegate* delegate = static_cast<NestedDelegate*>(handle);
  delegate->~NestedDelegate();
  std::free(delegate);
}

}  // namespace

Error register_nested_backend(BackendRegistry& registry) {
  static NestedBackend backend;
  return registry.add("nested", &backend);
}

}  // namespace etmlir
