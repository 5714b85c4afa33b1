// The "nested" backend: a .pte payload run as an inner Method (nested_backend.h).
#include "nested_backend.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>

#include "etmlir/runtime/data_loader.h"
#include "etmlir/runtime/evalue.h"
#include "etmlir/runtime/memory.h"
#include "etmlir/runtime/method.h"
#include "etmlir/runtime/payload_header.h"
#include "etmlir/runtime/program.h"
#include "etmlir/runtime/tensor.h"

namespace etmlir {
namespace {

constexpr size_t kAlignment = 64;
constexpr size_t kDefaultTempBytes = size_t{4} << 20;
constexpr size_t kMaxMethodName = 128;
constexpr uint32_t kBodyVersion = 1;  // PayloadHeader.body_version: a .pte run through one tensor-only method
constexpr const char* kBodyFormat = "pte";

size_t round_up(size_t n, size_t alignment) { return (n + alignment - 1) / alignment * alignment; }

const char* plural(size_t n) { return n == 1 ? "" : "s"; }

// The compile specs, read once (init and method_allocator_bytes read them alike).
struct Options {
  char method_name[kMaxMethodName] = "";  // "": the header's "forward" entry point, else "forward"
  size_t temp_bytes = kDefaultTempBytes;
};

Error read_options(Span<const CompileSpec> compile_specs, Options* out) {
  for (const CompileSpec& spec : compile_specs) {
    if (std::strcmp(spec.key, "method") == 0) {
      if (spec.size == 0 || spec.size >= sizeof(out->method_name) || spec.value == nullptr)
        return Error::make(ErrorCode::InvalidProgram,
                           "compile spec 'method' must name a method (1 to %zu bytes), got %zu bytes",
                           sizeof(out->method_name) - 1, spec.size);
      std::memcpy(out->method_name, spec.value, spec.size);
      out->method_name[spec.size] = '\0';
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
      out->temp_bytes = value;
    }
  }
  return Error::ok();
}

// The shared header (read_payload), this backend's body format and version,
// and the method to run: the "method" compile spec, else the header's
// "forward" entry point, else "forward".
Error read_header(Span<const uint8_t> payload, const Options& options, PayloadView* view, const char** method_name) {
  ET_CHECK_OK(read_payload(payload, "nested", view));
  const payload_schema::PayloadHeader& h = *view->header;
  ET_CHECK_OK(check_payload_body(h, kBodyFormat, kBodyVersion));
  ET_CHECK_OK(check_payload_target(h));
  const char* entry = payload_entry_symbol(h, "forward");
  *method_name = options.method_name[0] != '\0' ? options.method_name : entry != nullptr ? entry : "forward";
  return Error::ok();
}

// What the inner method needs besides its program: from its MethodMeta.
struct InnerNeeds {
  size_t num_outputs = 0;
  size_t num_arenas = 0;
  size_t arena_bytes = 0;   // every arena at a 64-byte-aligned offset of one block
  size_t method_bytes = 0;  // its method allocator, its own delegates included
};

Error inner_needs(const MethodMeta& meta, const BackendInitContext& context, InnerNeeds* out) {
  MethodMeta::TensorInfo info;
  for (size_t i = 0; i < meta.num_inputs(); ++i) {
    if (!meta.input_tensor(i, &info))
      return Error::make(ErrorCode::NotSupported,
                         "payload method '%s' input %zu is not a tensor (a nested delegate passes tensors only)",
                         meta.name(), i);
  }
  for (size_t i = 0; i < meta.num_outputs(); ++i) {
    if (!meta.output_tensor(i, &info))
      return Error::make(ErrorCode::NotSupported,
                         "payload method '%s' output %zu is not a tensor (a nested delegate passes tensors only)",
                         meta.name(), i);
  }
  out->num_outputs = meta.num_outputs();
  out->num_arenas = meta.num_arenas();
  out->arena_bytes = 0;
  for (size_t i = 0; i < out->num_arenas; ++i) {
    uint64_t size = meta.arena_size(i);
    if (size > SIZE_MAX / 4 || out->arena_bytes > SIZE_MAX / 4)
      return Error::make(ErrorCode::OutOfMemory, "the payload's arena %zu of %llu bytes does not fit in memory", i,
                         static_cast<unsigned long long>(size));
    out->arena_bytes += round_up(static_cast<size_t>(size), kAlignment);
  }
  // The inner method's delegates (a payload may nest more) take their state from its allocator too.
  Result<size_t> method_bytes = meta.method_allocator_bytes(context.backends, context.kernels);
  if (!method_bytes.ok()) {
    Error error = method_bytes.error();
    error.prefix("loading the payload");
    return error;
  }
  out->method_bytes = method_bytes.get();
  return Error::ok();
}

// The payload body as a program (an error saying the payload is not one).
Result<Program> load_program(DataLoader* loader) {
  Result<Program> program = Program::load(loader);
  if (!program.ok()) {
    Error error = program.error();
    error.prefix("payload is not a valid program");
    return error;
  }
  return program;
}

// The payload program's method `method_name` and what running it needs (errors blame the payload).
Result<MethodMeta> inner_method(const Program& program, const char* method_name, const BackendInitContext& context,
                                InnerNeeds* needs) {
  Result<MethodMeta> meta = program.method_meta(method_name);
  if (!meta.ok()) {
    Error error = meta.error();
    error.prefix("payload");
    return error;
  }
  ET_CHECK_OK(inner_needs(*meta, context, needs));
  return meta;
}

// Everything one delegate owns. Built in place in the method allocator at
// init, torn down (method, then program) at destroy; the buffers are the
// method allocator's too, so nothing is freed.
struct NestedDelegate {
  explicit NestedDelegate(const uint8_t* body, size_t size) : loader(body, size) {}
  NestedDelegate(const NestedDelegate&) = delete;
  NestedDelegate& operator=(const NestedDelegate&) = delete;
  ~NestedDelegate() {
    if (method != nullptr) method->~Method();  // destroys the inner method's own delegates
    if (program != nullptr) program->~Program();
  }

  Error load(const BackendInitContext& context, const char* method_name, size_t temp_bytes,
             MemoryAllocator& allocator);

  BufferDataLoader loader;
  Program* program = nullptr;  // in program_storage once loaded
  Method* method = nullptr;    // in method_storage once loaded
  size_t num_inputs = 0;
  size_t num_outputs = 0;
  Span<uint8_t>* arenas = nullptr;
  bool* unplanned_outputs = nullptr;  // per output: written straight into the live-out
  MemoryAllocator method_allocator;
  MemoryAllocator temp_allocator;
  MemoryManager memory;
  alignas(Program) unsigned char program_storage[sizeof(Program)];
  alignas(Method) unsigned char method_storage[sizeof(Method)];
};

// The most init() takes from the method allocator (each piece plus its alignment padding).
size_t delegate_bytes(size_t copy_bytes, size_t temp_bytes, const InnerNeeds& inner) {
  return sizeof(NestedDelegate) + alignof(NestedDelegate) + (copy_bytes ? round_up(copy_bytes, kAlignment) : 0) +
         kAlignment + inner.num_outputs * sizeof(bool) + 16 + inner.method_bytes + kAlignment + temp_bytes +
         kAlignment + inner.arena_bytes + kAlignment + inner.num_arenas * sizeof(Span<uint8_t>) + 16;
}

Error NestedDelegate::load(const BackendInitContext& context, const char* method_name, size_t temp_bytes,
                           MemoryAllocator& allocator) {
  Result<Program> loaded = load_program(&loader);
  if (!loaded.ok()) return loaded.error();
  program = new (program_storage) Program(static_cast<Program&&>(loaded.get()));
  InnerNeeds needs;
  Result<MethodMeta> meta = inner_method(*program, method_name, context, &needs);
  if (!meta.ok()) return meta.error();
  num_inputs = meta->num_inputs();
  num_outputs = meta->num_outputs();
  void* at = nullptr;
  ET_CHECK_OK(allocate_at_init(allocator, sizeof(bool) * num_outputs, 16, "the output table", &at));
  unplanned_outputs = static_cast<bool*>(at);
  MethodMeta::TensorInfo info;
  for (size_t i = 0; i < num_outputs; ++i) {
    meta->output_tensor(i, &info);
    unplanned_outputs[i] = !info.planned;
  }

  // Memory: all of it now, from the outer method allocator; none during execute.
  ET_CHECK_OK(allocate_at_init(allocator, needs.method_bytes, kAlignment, "the payload's method allocator", &at));
  method_allocator = MemoryAllocator(at, needs.method_bytes);
  ET_CHECK_OK(allocate_at_init(allocator, temp_bytes, kAlignment, "the payload's temp allocator", &at));
  temp_allocator = MemoryAllocator(at, temp_bytes);
  ET_CHECK_OK(allocate_at_init(allocator, needs.arena_bytes, kAlignment, "the payload's arenas", &at));
  uint8_t* arena_block = static_cast<uint8_t*>(at);
  ET_CHECK_OK(allocate_at_init(allocator, sizeof(Span<uint8_t>) * needs.num_arenas, 16, "the arena table", &at));
  arenas = static_cast<Span<uint8_t>*>(at);
  size_t offset = 0;
  for (size_t i = 0; i < needs.num_arenas; ++i) {
    size_t size = static_cast<size_t>(meta->arena_size(i));
    new (&arenas[i]) Span<uint8_t>(arena_block + offset, size);
    offset += round_up(size, kAlignment);
  }
  memory.method_allocator = &method_allocator;
  memory.planned_arenas = Span<Span<uint8_t>>(arenas, needs.num_arenas);
  memory.temp_allocator = &temp_allocator;

  // The outer load's trust: an inner delegate of native code runs under the same rule as an outer one.
  Result<Method> inner = program->load_method(meta->name(), &memory, context.kernels, context.backends, context.trust);
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
  Result<size_t> method_allocator_bytes(const BackendInitContext& context, Span<const uint8_t> payload,
                                        Span<const CompileSpec> compile_specs) const override;
  BackendPayloadInfo payload_info() const override {
    BackendPayloadInfo info;
    info.body_format = kBodyFormat;
    info.min_body_version = info.max_body_version = kBodyVersion;
    return info;
  }
};

// Program::load wants the program 8- and its constants 16-byte aligned in
// memory; a body at a 64-byte offset of a payload that is only 8-byte aligned
// (a payload handed to init directly) is copied once.
bool body_needs_copy(const PayloadView& view) { return reinterpret_cast<uintptr_t>(view.body.data()) % 16 != 0; }

Result<size_t> NestedBackend::method_allocator_bytes(const BackendInitContext& context, Span<const uint8_t> payload,
                                                     Span<const CompileSpec> compile_specs) const {
  Options options;
  ET_CHECK_OK(read_options(compile_specs, &options));
  PayloadView view;
  const char* method_name = nullptr;
  ET_CHECK_OK(read_header(payload, options, &view, &method_name));
  if (body_needs_copy(view))
    return Error::make(ErrorCode::NotSupported,
                       "the payload body is not 16-byte aligned in memory, so its program cannot be read before "
                       "init copies it: give init a generous method allocator instead");
  BufferDataLoader loader(view.body.data(), view.body.size());
  Result<Program> program = load_program(&loader);
  if (!program.ok()) return program.error();
  InnerNeeds needs;
  Result<MethodMeta> meta = inner_method(*program, method_name, context, &needs);
  if (!meta.ok()) return meta.error();
  return delegate_bytes(0, options.temp_bytes, needs);
}

Result<DelegateHandle> NestedBackend::init(BackendInitContext& context, Span<const uint8_t> payload,
                                           Span<const CompileSpec> compile_specs) {
  Options options;
  ET_CHECK_OK(read_options(compile_specs, &options));
  PayloadView view;
  const char* method_name = nullptr;
  ET_CHECK_OK(read_header(payload, options, &view, &method_name));
  if (context.method_allocator == nullptr)
    return Error::make(ErrorCode::InvalidArgument, "init needs a method allocator");
  MemoryAllocator& allocator = *context.method_allocator;

  const uint8_t* body = view.body.data();
  if (body_needs_copy(view)) {
    void* copy = nullptr;
    ET_CHECK_OK(allocate_at_init(allocator, view.body.size(), kAlignment, "the payload copy", &copy));
    std::memcpy(copy, body, view.body.size());
    body = static_cast<const uint8_t*>(copy);
  }
  void* memory = nullptr;
  ET_CHECK_OK(allocate_at_init(allocator, sizeof(NestedDelegate), alignof(NestedDelegate), "the delegate state", &memory));
  NestedDelegate* delegate = new (memory) NestedDelegate(body, view.body.size());
  if (Error error = delegate->load(context, method_name, options.temp_bytes, allocator)) {
    delegate->~NestedDelegate();
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
  // Tracing: the inner method records into the outer tracer while it runs. The outer method
  // entered this call's event, so the inner steps are its children, one level deeper (their
  // instruction is the inner method's pc; their debug handles are the outer program's, as for
  // failed_debug_handle). A depth above 0 keeps the inner execute() from counting a run.
  if (context.tracer != nullptr) {
    if (Error error = inner.set_event_tracer(context.tracer)) return error;
  }
  Error executed = inner.execute();
  if (context.tracer != nullptr) (void)inner.set_event_tracer(nullptr);
  if (executed) {
    context.failed_debug_handle = inner.failed_debug_handle();
    return executed;
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
  // Tears down the inner method and program; the memory is the outer method allocator's.
  static_cast<NestedDelegate*>(handle)->~NestedDelegate();
}

}  // namespace

Error register_nested_backend(BackendRegistry& registry, const BackendOptions& /*options*/) {
  static NestedBackend backend;
  return registry.add("nested", &backend);
}

}  // namespace etmlir
