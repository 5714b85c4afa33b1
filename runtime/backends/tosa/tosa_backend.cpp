// The "tosa" backend (tosa_backend.h, README.md).
#include "tosa_backend.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "etmlir/runtime/payload_header.h"
#include "reference/tosa_reference_abi.h"

namespace etmlir {
namespace {

constexpr const char* kBackendId = "tosa";
constexpr const char* kBodyFormat = "tosa-flatbuffer";
constexpr uint32_t kBodyVersion = 1;

// The library's entry points (tosa_reference_abi.h), resolved once.
struct ReferenceLibrary {
  void* handle = nullptr;
  uint32_t (*abi_version)() = nullptr;
  const char* (*version)() = nullptr;
  etmlir_tosa_graph* (*create)(const uint8_t*, size_t, const char*, const char*, char*, size_t) = nullptr;
  uint32_t (*num_inputs)(const etmlir_tosa_graph*) = nullptr;
  uint32_t (*num_outputs)(const etmlir_tosa_graph*) = nullptr;
  int (*input_info)(const etmlir_tosa_graph*, uint32_t, etmlir_tosa_tensor_info*) = nullptr;
  int (*output_info)(const etmlir_tosa_graph*, uint32_t, etmlir_tosa_tensor_info*) = nullptr;
  int (*run)(etmlir_tosa_graph*, const void* const*, void* const*, char*, size_t) = nullptr;
  void (*destroy)(etmlir_tosa_graph*) = nullptr;
  char problem[1024] = "";
};

ReferenceLibrary g_library;
std::once_flag g_library_once;

constexpr const char* kLibraryName = "libetmlir_tosa_reference.so";

bool try_open(const char* path, char* tried, size_t tried_size) {
  size_t used = std::strlen(tried);
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    std::snprintf(tried + used, tried_size - used, "%s%s (%s)", used ? "; " : "", path, why ? why : "not loadable");
    return false;
  }
  ReferenceLibrary& lib = g_library;
  lib.handle = handle;
  auto resolve = [&](const char* name) { return dlsym(handle, name); };
  lib.abi_version = reinterpret_cast<uint32_t (*)()>(resolve("etmlir_tosa_reference_abi_version"));
  lib.version = reinterpret_cast<const char* (*)()>(resolve("etmlir_tosa_reference_version"));
  lib.create = reinterpret_cast<decltype(lib.create)>(resolve("etmlir_tosa_graph_create"));
  lib.num_inputs = reinterpret_cast<decltype(lib.num_inputs)>(resolve("etmlir_tosa_graph_num_inputs"));
  lib.num_outputs = reinterpret_cast<decltype(lib.num_outputs)>(resolve("etmlir_tosa_graph_num_outputs"));
  lib.input_info = reinterpret_cast<decltype(lib.input_info)>(resolve("etmlir_tosa_graph_input_info"));
  lib.output_info = reinterpret_cast<decltype(lib.output_info)>(resolve("etmlir_tosa_graph_output_info"));
  lib.run = reinterpret_cast<decltype(lib.run)>(resolve("etmlir_tosa_graph_run"));
  lib.destroy = reinterpret_cast<decltype(lib.destroy)>(resolve("etmlir_tosa_graph_destroy"));
  if (!lib.abi_version || !lib.version || !lib.create || !lib.num_inputs || !lib.num_outputs || !lib.input_info ||
      !lib.output_info || !lib.run || !lib.destroy) {
    std::snprintf(tried + used, tried_size - used, "%s%s (not an etmlir TOSA reference library: symbols missing)",
                  used ? "; " : "", path);
  } else if (lib.abi_version() != ETMLIR_TOSA_REFERENCE_ABI_VERSION) {
    std::snprintf(tried + used, tried_size - used, "%s%s (interface version %u; this runtime needs %u)",
                  used ? "; " : "", path, lib.abi_version(), ETMLIR_TOSA_REFERENCE_ABI_VERSION);
  } else {
    return true;
  }
  dlclose(handle);
  lib = ReferenceLibrary();
  return false;
}

void open_library() {
  char tried[sizeof(g_library.problem)] = "";
  const char* explicit_path = std::getenv("ETMLIR_TOSA_REFERENCE_LIB");
  if (explicit_path != nullptr && explicit_path[0] != '\0') {
    if (try_open(explicit_path, tried, sizeof(tried))) return;
    std::snprintf(g_library.problem, sizeof(g_library.problem),
                  "the TOSA reference model library is not available: ETMLIR_TOSA_REFERENCE_LIB names %s", tried);
    return;
  }
  // Beside the binary that holds this code (the Python extension's package, an installed tool).
  Dl_info self;
  if (dladdr(reinterpret_cast<void*>(&open_library), &self) != 0 && self.dli_fname != nullptr) {
    char path[4096];
    std::snprintf(path, sizeof(path), "%s", self.dli_fname);
    char* slash = std::strrchr(path, '/');
    if (slash != nullptr) {
      std::snprintf(slash + 1, sizeof(path) - static_cast<size_t>(slash + 1 - path), "%s", kLibraryName);
      if (try_open(path, tried, sizeof(tried))) return;
    }
  }
#ifdef ETMLIR_TOSA_REFERENCE_BUILD_PATH
  if (try_open(ETMLIR_TOSA_REFERENCE_BUILD_PATH, tried, sizeof(tried))) return;
#endif
  std::snprintf(g_library.problem, sizeof(g_library.problem),
                "the TOSA reference model library is not available: looked for %s (build the runtime with "
                "tosa-tools installed: scripts/setup.sh; or set ETMLIR_TOSA_REFERENCE_LIB): %s",
                kLibraryName, tried[0] ? tried : "not built");
}

const ReferenceLibrary* library() {
  std::call_once(g_library_once, open_library);
  return g_library.handle != nullptr ? &g_library : nullptr;
}

struct TosaDelegate {
  etmlir_tosa_graph* graph = nullptr;
  size_t num_inputs = 0;
  size_t num_outputs = 0;
  etmlir_tosa_tensor_info* infos = nullptr;  // inputs, then outputs
  const void** input_data = nullptr;
  void** output_data = nullptr;
};

const char* plural(size_t n) { return n == 1 ? "" : "s"; }

void format_info(const etmlir_tosa_tensor_info& info, char* buffer, size_t size) {
  format_shape(static_cast<ScalarType>(info.scalar_type), info.sizes, info.rank, nullptr, buffer, size);
}

// The header's spec of a delegate input/output against the graph's.
Error check_spec(const payload_schema::TensorSpec* spec, const etmlir_tosa_tensor_info& info, const char* kind,
                 size_t index) {
  char graph_text[128];
  format_info(info, graph_text, sizeof(graph_text));
  const auto* sizes = spec ? spec->sizes() : nullptr;
  bool same = spec != nullptr && spec->scalar_type() == info.scalar_type && sizes != nullptr &&
              sizes->size() == info.rank;
  for (uint32_t d = 0; same && d < info.rank; ++d) same = sizes->Get(d) == info.sizes[d];
  if (!same)
    return Error::make(ErrorCode::InvalidProgram, "the header's %s %zu does not match the TOSA graph's %s", kind,
                       index, graph_text);
  return Error::ok();
}

Error read_header(Span<const uint8_t> payload, PayloadView* view, const char** region, const char** profile) {
  ET_CHECK_OK(read_payload(payload, kBackendId, view));
  const payload_schema::PayloadHeader& h = *view->header;
  ET_CHECK_OK(check_payload_body(h, kBodyFormat, kBodyVersion));
  *region = payload_entry_symbol(h, "forward");
  if (*region == nullptr) return Error::make(ErrorCode::InvalidProgram, "the payload header names no 'forward' region");
  *profile = payload_entry_symbol(h, "profile");
  if (*profile == nullptr) return Error::make(ErrorCode::InvalidProgram, "the payload header names no TOSA profile");
  if (std::strcmp(*profile, "pro_fp") != 0 && std::strcmp(*profile, "pro_int") != 0)
    return Error::make(ErrorCode::NotSupported,
                       "the payload is for TOSA profile '%.40s'; this backend runs pro_fp and pro_int", *profile);
  return Error::ok();
}

size_t delegate_bytes(size_t num_inputs, size_t num_outputs) {
  size_t n = num_inputs + num_outputs;
  return sizeof(TosaDelegate) + 16 + n * sizeof(etmlir_tosa_tensor_info) + 16 + n * sizeof(void*) + 64;
}

class TosaBackend : public Backend {
 public:
  bool is_available() const override { return library() != nullptr; }
  const char* unavailable_reason() const override { return library() == nullptr ? g_library.problem : nullptr; }

  Result<DelegateHandle> init(BackendInitContext& context, Span<const uint8_t> payload,
                              Span<const CompileSpec> compile_specs) override {
    (void)compile_specs;
    PayloadView view;
    const char* region = nullptr;
    const char* profile = nullptr;
    ET_CHECK_OK(read_header(payload, &view, &region, &profile));
    const ReferenceLibrary* lib = library();
    if (lib == nullptr) return Error::make(ErrorCode::NotSupported, "%s", g_library.problem);
    if (context.method_allocator == nullptr)
      return Error::make(ErrorCode::InvalidArgument, "init needs a method allocator");
    char message[1024] = "";
    etmlir_tosa_graph* graph =
        lib->create(view.body.data(), view.body.size(), region, profile, message, sizeof(message));
    if (graph == nullptr) return Error::make(ErrorCode::InvalidProgram, "the TOSA graph: %s", message);
    Result<DelegateHandle> made = make_delegate(context, *view.header, graph);
    if (!made.ok()) lib->destroy(graph);
    return made;
  }

  Error execute(BackendExecuteContext& context, DelegateHandle handle, Span<EValue*> args) override {
    (void)context;
    TosaDelegate& d = *static_cast<TosaDelegate*>(handle);
    if (args.size() != d.num_inputs + d.num_outputs)
      return Error::make(ErrorCode::InvalidProgram,
                         "the call passes %zu argument%s; the TOSA graph takes %zu input%s, then %zu output%s",
                         args.size(), plural(args.size()), d.num_inputs, plural(d.num_inputs), d.num_outputs,
                         plural(d.num_outputs));
    char given[128];
    char wanted[128];
    for (size_t k = 0; k < args.size(); ++k) {
      if (!args[k]->is_tensor())
        return Error::make(ErrorCode::InvalidProgram, "argument %zu is a %s; a tosa delegate passes tensors only", k,
                           tag_name(args[k]->tag));
      Tensor& tensor = args[k]->to_tensor();
      const etmlir_tosa_tensor_info& info = d.infos[k];
      bool is_input = k < d.num_inputs;
      size_t index = is_input ? k : k - d.num_inputs;
      if (!is_input) {
        char name[32];
        std::snprintf(name, sizeof(name), "live-out %zu", index);
        if (static_cast<int32_t>(tensor.dtype()) == info.scalar_type && static_cast<uint32_t>(tensor.dim()) == info.rank)
          ET_CHECK_OK(tensor.resize(Span<const int64_t>(info.sizes, info.rank), name));
      }
      bool same = static_cast<int32_t>(tensor.dtype()) == info.scalar_type &&
                  static_cast<uint32_t>(tensor.dim()) == info.rank;
      for (uint32_t dd = 0; same && dd < info.rank; ++dd) same = tensor.sizes()[dd] == info.sizes[dd];
      if (!same) {
        format_info(info, wanted, sizeof(wanted));
        return Error::make(ErrorCode::InvalidArgument, "%s %zu is %s; the TOSA graph's is %s (TOSA shapes are static)",
                           is_input ? "input" : "output", index, tensor.describe(given, sizeof(given)), wanted);
      }
      if (info.nbytes == 0) {
        if (is_input) {
          d.input_data[index] = nullptr;
        } else {
          d.output_data[index] = nullptr;
        }
        continue;
      }
      if (is_input) {
        if (tensor.data() == nullptr)
          return Error::make(ErrorCode::InvalidArgument, "input %zu has no data", index);
        d.input_data[index] = tensor.data();
      } else {
        if (tensor.mutable_data() == nullptr || tensor.capacity() < info.nbytes)
          return Error::make(ErrorCode::OutOfMemory, "live-out %zu %s has %zu bytes of memory; it needs %llu", index,
                             tensor.describe(given, sizeof(given)), tensor.capacity(),
                             static_cast<unsigned long long>(info.nbytes));
        d.output_data[index] = tensor.mutable_data();
      }
    }
    char message[1024] = "";
    if (library()->run(d.graph, d.input_data, d.output_data, message, sizeof(message)) != 0)
      return Error::make(ErrorCode::Internal, "the TOSA reference model: %s", message);
    return Error::ok();
  }

  void destroy(DelegateHandle handle) override {
    TosaDelegate* d = static_cast<TosaDelegate*>(handle);
    if (d != nullptr && d->graph != nullptr && library() != nullptr) library()->destroy(d->graph);
    if (d != nullptr) d->graph = nullptr;
  }

  Result<size_t> method_allocator_bytes(const BackendInitContext& context, Span<const uint8_t> payload,
                                        Span<const CompileSpec> compile_specs) const override {
    (void)context;
    (void)compile_specs;
    PayloadView view;
    const char* region = nullptr;
    const char* profile = nullptr;
    ET_CHECK_OK(read_header(payload, &view, &region, &profile));
    size_t inputs = view.header->inputs() ? view.header->inputs()->size() : 0;
    size_t outputs = view.header->outputs() ? view.header->outputs()->size() : 0;
    return delegate_bytes(inputs, outputs);
  }

  BackendPayloadInfo payload_info() const override {
    BackendPayloadInfo info;
    info.body_format = kBodyFormat;
    info.min_body_version = info.max_body_version = kBodyVersion;
    return info;
  }

 private:
  Result<DelegateHandle> make_delegate(BackendInitContext& context, const payload_schema::PayloadHeader& header,
                                       etmlir_tosa_graph* graph) {
    const ReferenceLibrary& lib = g_library;
    size_t num_inputs = lib.num_inputs(graph);
    size_t num_outputs = lib.num_outputs(graph);
    size_t header_inputs = header.inputs() ? header.inputs()->size() : 0;
    size_t header_outputs = header.outputs() ? header.outputs()->size() : 0;
    if (num_inputs != header_inputs || num_outputs != header_outputs)
      return Error::make(ErrorCode::InvalidProgram,
                         "the TOSA graph has %zu input%s and %zu output%s; the payload header says %zu and %zu",
                         num_inputs, plural(num_inputs), num_outputs, plural(num_outputs), header_inputs,
                         header_outputs);
    void* at = nullptr;
    MemoryAllocator& allocator = *context.method_allocator;
    ET_CHECK_OK(allocate_at_init(allocator, sizeof(TosaDelegate), alignof(TosaDelegate), "the delegate state", &at));
    TosaDelegate* d = new (at) TosaDelegate();
    d->graph = graph;
    d->num_inputs = num_inputs;
    d->num_outputs = num_outputs;
    size_t n = num_inputs + num_outputs;
    ET_CHECK_OK(allocate_at_init(allocator, n * sizeof(etmlir_tosa_tensor_info) + 1, 16, "the tensor table", &at));
    d->infos = static_cast<etmlir_tosa_tensor_info*>(at);
    ET_CHECK_OK(allocate_at_init(allocator, num_inputs * sizeof(void*) + 1, 16, "the input pointer table", &at));
    d->input_data = static_cast<const void**>(at);
    ET_CHECK_OK(allocate_at_init(allocator, num_outputs * sizeof(void*) + 1, 16, "the output pointer table", &at));
    d->output_data = static_cast<void**>(at);
    for (size_t i = 0; i < n; ++i) {
      bool is_input = i < num_inputs;
      size_t index = is_input ? i : i - num_inputs;
      etmlir_tosa_tensor_info& info = d->infos[i];
      if ((is_input ? lib.input_info(graph, static_cast<uint32_t>(index), &info)
                    : lib.output_info(graph, static_cast<uint32_t>(index), &info)) != 0)
        return Error::make(ErrorCode::Internal, "the reference library lost %s %zu", is_input ? "input" : "output",
                           index);
      const payload_schema::TensorSpec* spec = is_input ? header.inputs()->Get(static_cast<uint32_t>(index))
                                                        : header.outputs()->Get(static_cast<uint32_t>(index));
      ET_CHECK_OK(check_spec(spec, info, is_input ? "input" : "output", index));
    }
    return DelegateHandle(d);
  }
};

}  // namespace

const char* tosa_reference_library_problem() {
  library();
  return g_library.problem;
}

Error register_tosa_backend(BackendRegistry& registry, const BackendOptions& /*options*/) {
  static TosaBackend backend;
  return registry.add(kBackendId, &backend);
}

}  // namespace etmlir
