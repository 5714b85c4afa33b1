// The "vulkan" backend (vulkan_backend.h, README.md).
//
// init: header and dispatch graph checked (FlatBuffers verifier, then every index and size against
// the graph and the device's limits, every shader through SPIRV-Tools' validator when the build has
// it), then one host-visible buffer per input, output, weight and memory-plan slot, weights copied
// in, one pipeline per shader, one descriptor set per dispatch, and one command buffer holding every
// dispatch and barrier. Buffers never change, so the command buffer is recorded once.
// execute: inputs copied in, the command buffer submitted, the fence waited on, outputs copied out;
// nothing is allocated.
#include "vulkan_backend.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>

#include "etmlir/runtime/payload_header.h"
#include "etmlir/schema/vulkan_generated.h"

#ifdef ETMLIR_VULKAN_HEADERS
#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>
#endif
#ifdef ETMLIR_VULKAN_SPIRV_TOOLS
#include <spirv-tools/libspirv.h>
#endif

namespace etmlir {
namespace {

constexpr const char* kBackendId = "vulkan";
constexpr const char* kBodyFormat = "vulkan-dispatch-graph";
constexpr uint32_t kBodyVersion = 1;
constexpr uint32_t kGraphVersion = 1;
constexpr uint32_t kSpirvMagic = 0x07230203;

const char* plural(size_t n) { return n == 1 ? "" : "s"; }

size_t scalar_bytes(int8_t scalar_type) {
  switch (scalar_type) {
    case 0: case 1: case 11: return 1;   // u8, i8, bool
    case 2: case 5: case 15: return 2;   // i16, f16, bf16
    case 3: case 6: return 4;            // i32, f32
    case 4: case 7: return 8;            // i64, f64
    default: return 0;
  }
}

// ---- the dispatch graph, checked without a device --------------------------------------------

// A SPIR-V module's structure: the header, every instruction's length, a GLCompute entry point
// called `entry` whose LocalSize is `size`, and storage buffer bindings in set 0 below `bindings`.
Error check_spirv_structure(const uint32_t* words, size_t count, const char* entry, const uint32_t size[3],
                            uint32_t bindings, bool int64, const char* name) {
  if (count < 5 || words[0] != kSpirvMagic)
    return Error::make(ErrorCode::InvalidProgram, "shader %s is not SPIR-V (%zu words, magic %#x)", name, count,
                       count ? words[0] : 0u);
  uint32_t entry_id = 0;
  bool found_entry = false;
  bool found_size = false;
  for (size_t at = 5; at < count;) {
    uint32_t length = words[at] >> 16;
    uint32_t opcode = words[at] & 0xffffu;
    if (length == 0 || at + length > count)
      return Error::make(ErrorCode::InvalidProgram, "shader %s: instruction at word %zu overruns the module", name, at);
    if (opcode == 17 && length == 2 && words[at + 1] == 11 && !int64)  // OpCapability Int64
      return Error::make(ErrorCode::NotSupported,
                         "shader %s computes with 64-bit integers (capability Int64); this device lacks shaderInt64", name);
    if (opcode == 15 && length >= 4) {  // OpEntryPoint model id name...
      size_t chars = (length - 3) * 4;
      const char* text = reinterpret_cast<const char*>(words + at + 3);
      if (words[at + 1] == 5 && strnlen(text, chars) < chars && std::strcmp(text, entry) == 0) {  // GLCompute
        entry_id = words[at + 2];
        found_entry = true;
      }
    } else if (opcode == 16 && length >= 6 && found_entry && words[at + 1] == entry_id && words[at + 2] == 17) {
      // OpExecutionMode id LocalSize x y z
      if (words[at + 3] != size[0] || words[at + 4] != size[1] || words[at + 5] != size[2])
        return Error::make(ErrorCode::InvalidProgram,
                           "shader %s declares workgroup size %ux%ux%u; the graph says %ux%ux%u", name, words[at + 3],
                           words[at + 4], words[at + 5], size[0], size[1], size[2]);
      found_size = true;
    } else if (opcode == 71 && length >= 4) {  // OpDecorate target decoration value
      if (words[at + 2] == 33 && words[at + 3] >= bindings)  // Binding
        return Error::make(ErrorCode::InvalidProgram, "shader %s uses binding %u; the graph gives it %u", name,
                           words[at + 3], bindings);
      if (words[at + 2] == 34 && words[at + 3] != 0)  // DescriptorSet
        return Error::make(ErrorCode::InvalidProgram, "shader %s uses descriptor set %u; only set 0 is bound", name,
                           words[at + 3]);
    }
    at += length;
  }
  if (!found_entry)
    return Error::make(ErrorCode::InvalidProgram, "shader %s has no GLCompute entry point '%.64s'", name, entry);
  if (!found_size)
    return Error::make(ErrorCode::InvalidProgram, "shader %s declares no workgroup size (LocalSize)", name);
  return Error::ok();
}

#ifdef ETMLIR_VULKAN_SPIRV_TOOLS
Error validate_spirv(const uint32_t* words, size_t count, const char* name) {
  uint32_t version = count > 1 ? words[1] : 0;
  spv_target_env env = version <= 0x10000   ? SPV_ENV_VULKAN_1_0
                       : version <= 0x10300 ? SPV_ENV_VULKAN_1_1
                       : version <= 0x10500 ? SPV_ENV_VULKAN_1_2
                                            : SPV_ENV_VULKAN_1_3;
  spv_context context = spvContextCreate(env);
  spv_const_binary_t binary{words, count};
  spv_diagnostic diagnostic = nullptr;
  spv_result_t result = spvValidate(context, &binary, &diagnostic);
  Error error = Error::ok();
  if (result != SPV_SUCCESS)
    error = Error::make(ErrorCode::InvalidProgram, "shader %s fails SPIR-V validation: %.300s", name,
                        diagnostic && diagnostic->error ? diagnostic->error : "invalid module");
  spvDiagnosticDestroy(diagnostic);
  spvContextDestroy(context);
  return error;
}
#endif

struct Limits {
  bool int64 = false;  // shaderInt64: shaders may declare the Int64 capability
  uint32_t max_group_count[3] = {65535, 65535, 65535};
  uint32_t max_group_size[3] = {128, 128, 64};
  uint32_t max_invocations = 128;
  uint32_t max_storage_buffers = 4;
  uint64_t max_storage_range = 1u << 27;
};

size_t rank_sum(const flatbuffers::Vector<flatbuffers::Offset<payload_schema::TensorSpec>>* specs) {
  size_t n = 0;
  for (uint32_t i = 0; specs && i < specs->size(); ++i) n += specs->Get(i)->sizes() ? specs->Get(i)->sizes()->size() : 0;
  return n;
}

// The bytes of tensor `index` of `specs` at the concrete `sizes` (every tensor's sizes concatenated).
size_t sized_bytes(const flatbuffers::Vector<flatbuffers::Offset<payload_schema::TensorSpec>>* specs, uint32_t index,
                   const flatbuffers::Vector<int64_t>* sizes) {
  size_t at = 0;
  for (uint32_t i = 0; i < index; ++i) at += specs->Get(i)->sizes()->size();
  const payload_schema::TensorSpec* spec = specs->Get(index);
  size_t n = scalar_bytes(spec->scalar_type());
  for (uint32_t d = 0; d < spec->sizes()->size(); ++d) n *= static_cast<size_t>(sizes->Get(static_cast<uint32_t>(at + d)));
  return n;
}

// Everything init() relies on in graph `number`, before any Vulkan object exists.
Error check_graph(const vulkan_schema::Graph& g, uint32_t number, size_t num_constants,
                  const flatbuffers::Vector<flatbuffers::Offset<vulkan_schema::Constant>>* constants,
                  const payload_schema::PayloadHeader& header, const Limits& limits) {
  using vulkan_schema::BufferKind;
  if (!g.shaders() || !g.buffers() || !g.dispatches() || !g.input_sizes() || !g.output_sizes())
    return Error::make(ErrorCode::InvalidProgram, "graph %u lacks its shaders, buffers, dispatches or sizes", number);
  if (g.input_sizes()->size() != rank_sum(header.inputs()) || g.output_sizes()->size() != rank_sum(header.outputs()))
    return Error::make(ErrorCode::InvalidProgram, "graph %u's input or output sizes do not match the header's ranks",
                       number);
  for (uint32_t kind = 0; kind < 2; ++kind) {
    const auto* specs = kind == 0 ? header.inputs() : header.outputs();
    const auto* sizes = kind == 0 ? g.input_sizes() : g.output_sizes();
    uint32_t at = 0;
    for (uint32_t i = 0; specs && i < specs->size(); ++i)
      for (uint32_t d = 0; d < specs->Get(i)->sizes()->size(); ++d, ++at) {
        int64_t want = specs->Get(i)->sizes()->Get(d);
        int64_t got = sizes->Get(at);
        if (got < 0 || got > (int64_t{1} << 40) || (want >= 0 && got != want))
          return Error::make(ErrorCode::InvalidProgram, "graph %u: %s %u dim %u is %lld; the header says %lld", number,
                             kind == 0 ? "input" : "output", i, d, static_cast<long long>(got),
                             static_cast<long long>(want));
      }
  }
  size_t num_inputs = header.inputs() ? header.inputs()->size() : 0;
  size_t num_outputs = header.outputs() ? header.outputs()->size() : 0;
  for (uint32_t k = 0; g.pinned_inputs() && k < g.pinned_inputs()->size(); ++k) {
    uint32_t input = g.pinned_inputs()->Get(k);
    const payload_schema::TensorSpec* spec = input < num_inputs ? header.inputs()->Get(input) : nullptr;
    if (spec == nullptr || spec->sizes()->size() != 0 || scalar_bytes(spec->scalar_type()) != 8)
      return Error::make(ErrorCode::InvalidProgram, "graph %u pins input %u, which is not a 0-d 64-bit integer", number,
                         input);
  }
  uint32_t num_slots = g.num_slots();
  if ((g.slot_sizes() ? g.slot_sizes()->size() : 0) != num_slots)
    return Error::make(ErrorCode::InvalidProgram, "the dispatch graph has %u slots but %u slot sizes", num_slots,
                       g.slot_sizes() ? g.slot_sizes()->size() : 0);
  for (uint32_t i = 0; i < g.shaders()->size(); ++i) {
    const vulkan_schema::Shader* s = g.shaders()->Get(i);
    char name[48];
    std::snprintf(name, sizeof(name), "%u (%.32s)", i, s->name() ? s->name()->c_str() : "?");
    if (!s->code() || !s->entry() || !s->workgroup_size() || s->workgroup_size()->size() != 3)
      return Error::make(ErrorCode::InvalidProgram, "shader %s lacks its code, entry point or workgroup size", name);
    uint32_t size[3];
    uint64_t invocations = 1;
    for (uint32_t d = 0; d < 3; ++d) {
      size[d] = s->workgroup_size()->Get(d);
      invocations *= size[d];
      if (size[d] == 0 || size[d] > limits.max_group_size[d])
        return Error::make(ErrorCode::NotSupported, "shader %s: workgroup size %u along %c; the device allows %u",
                           name, size[d], "xyz"[d], limits.max_group_size[d]);
    }
    if (invocations > limits.max_invocations)
      return Error::make(ErrorCode::NotSupported,
                         "shader %s has %llu threads per workgroup; the device allows %u (compile with a smaller "
                         "'tile' or 'max_workgroup_invocations')",
                         name, static_cast<unsigned long long>(invocations), limits.max_invocations);
    if (s->num_bindings() > limits.max_storage_buffers)
      return Error::make(ErrorCode::NotSupported, "shader %s binds %u storage buffers; the device allows %u", name,
                         s->num_bindings(), limits.max_storage_buffers);
    ET_CHECK_OK(check_spirv_structure(s->code()->data(), s->code()->size(), s->entry()->c_str(), size,
                                      s->num_bindings(), limits.int64, name));
#ifdef ETMLIR_VULKAN_SPIRV_TOOLS
    ET_CHECK_OK(validate_spirv(s->code()->data(), s->code()->size(), name));
#endif
  }
  for (uint32_t i = 0; i < g.buffers()->size(); ++i) {
    const vulkan_schema::Buffer* b = g.buffers()->Get(i);
    uint64_t size = b->size();
    if (size > limits.max_storage_range)
      return Error::make(ErrorCode::NotSupported, "buffer %u has %llu bytes; the device binds at most %llu", i,
                         static_cast<unsigned long long>(size), static_cast<unsigned long long>(limits.max_storage_range));
    switch (b->kind()) {
      case BufferKind::Input:
      case BufferKind::Output: {
        bool input = b->kind() == BufferKind::Input;
        size_t count = input ? num_inputs : num_outputs;
        if (b->index() >= count)
          return Error::make(ErrorCode::InvalidProgram, "buffer %u is %s %u; the delegate has %zu", i,
                             input ? "input" : "output", b->index(), count);
        size_t expected = sized_bytes(input ? header.inputs() : header.outputs(), b->index(),
                                      input ? g.input_sizes() : g.output_sizes());
        if (size != expected)
          return Error::make(ErrorCode::InvalidProgram, "buffer %u (%s %u) has %llu bytes; the header's spec has %zu",
                             i, input ? "input" : "output", b->index(), static_cast<unsigned long long>(size), expected);
        break;
      }
      case BufferKind::Weight: {
        const vulkan_schema::Constant* c = b->index() < num_constants ? constants->Get(b->index()) : nullptr;
        if (c == nullptr || !c->data() || c->data()->size() != size)
          return Error::make(ErrorCode::InvalidProgram, "buffer %u (weight %u) has no constant of %llu bytes", i,
                             b->index(), static_cast<unsigned long long>(size));
        break;
      }
      case BufferKind::Intermediate:
        if (b->slot() >= num_slots || g.slot_sizes()->Get(b->slot()) < size)
          return Error::make(ErrorCode::InvalidProgram, "buffer %u (intermediate, %llu bytes) has slot %u of %u", i,
                             static_cast<unsigned long long>(size), b->slot(), num_slots);
        break;
      default:
        return Error::make(ErrorCode::InvalidProgram, "buffer %u has unknown kind %d", i, static_cast<int>(b->kind()));
    }
  }
  for (uint32_t i = 0; i < num_slots; ++i)
    if (g.slot_sizes()->Get(i) > limits.max_storage_range)
      return Error::make(ErrorCode::NotSupported, "memory-plan slot %u has %llu bytes; the device binds at most %llu",
                         i, static_cast<unsigned long long>(g.slot_sizes()->Get(i)),
                         static_cast<unsigned long long>(limits.max_storage_range));
  for (uint32_t i = 0; i < g.dispatches()->size(); ++i) {
    const vulkan_schema::Dispatch* d = g.dispatches()->Get(i);
    if (d->shader() >= g.shaders()->size())
      return Error::make(ErrorCode::InvalidProgram, "dispatch %u runs shader %u; the graph has %u", i, d->shader(),
                         g.shaders()->size());
    const vulkan_schema::Shader* s = g.shaders()->Get(d->shader());
    size_t bound = d->buffers() ? d->buffers()->size() : 0;
    if (bound != s->num_bindings())
      return Error::make(ErrorCode::InvalidProgram, "dispatch %u binds %zu buffer%s; shader %u takes %u", i, bound,
                         plural(bound), d->shader(), s->num_bindings());
    for (uint32_t k = 0; k < bound; ++k)
      if (d->buffers()->Get(k) >= g.buffers()->size())
        return Error::make(ErrorCode::InvalidProgram, "dispatch %u binds buffer %u; the graph has %u", i,
                           d->buffers()->Get(k), g.buffers()->size());
    if (!d->workgroups() || d->workgroups()->size() != 3)
      return Error::make(ErrorCode::InvalidProgram, "dispatch %u has no workgroup counts", i);
    for (uint32_t k = 0; k < 3; ++k) {
      uint32_t n = d->workgroups()->Get(k);
      if (n == 0 || n > limits.max_group_count[k])
        return Error::make(ErrorCode::NotSupported, "dispatch %u: %u workgroups along %c; the device allows 1 to %u",
                           i, n, "xyz"[k], limits.max_group_count[k]);
    }
  }
  return Error::ok();
}

// The module's version, graphs and constants, and every graph against the header and the device.
Error check_module(const vulkan_schema::Module& m, const payload_schema::PayloadHeader& header, const Limits& limits) {
  if (m.version() != kGraphVersion)
    return Error::make(ErrorCode::NotSupported, "dispatch graph version %u; this runtime reads version %u", m.version(),
                       kGraphVersion);
  if (!m.graphs() || m.graphs()->size() == 0)
    return Error::make(ErrorCode::InvalidProgram, "the dispatch module holds no graph");
  for (uint32_t c = 0; m.constants() && c < m.constants()->size(); ++c)
    if (!m.constants()->Get(c)->data())
      return Error::make(ErrorCode::InvalidProgram, "constant %u has no data", c);
  for (uint32_t i = 0; i < m.graphs()->size(); ++i)
    ET_CHECK_OK(check_graph(*m.graphs()->Get(i), i, m.constants() ? m.constants()->size() : 0, m.constants(), header,
                            limits));
  return Error::ok();
}

Error read_graph(Span<const uint8_t> payload, PayloadView* view, const vulkan_schema::Module** graph) {
  ET_CHECK_OK(read_payload(payload, kBackendId, view));
  ET_CHECK_OK(check_payload_body(*view->header, kBodyFormat, kBodyVersion));
  const uint8_t* body = view->body.data();
  size_t size = view->body.size();
  if (size < 8 || !flatbuffers::BufferHasIdentifier(body, vulkan_schema::ModuleIdentifier()))
    return Error::make(ErrorCode::InvalidProgram, "the payload body is not a dispatch graph (no 'ETVK' identifier)");
  flatbuffers::Verifier verifier(body, size);
  if (!vulkan_schema::VerifyModuleBuffer(verifier))
    return Error::make(ErrorCode::InvalidProgram, "the dispatch graph is corrupt (FlatBuffers verifier)");
  *graph = vulkan_schema::GetModule(body);
  return Error::ok();
}

#ifdef ETMLIR_VULKAN_HEADERS

// ---- the device: the loader opened once, one instance, device and compute queue per process ------

#define ETMLIR_VK_GLOBAL(X) X(vkCreateInstance) X(vkEnumerateInstanceLayerProperties)
#define ETMLIR_VK_INSTANCE(X)                                                                                   \
  X(vkDestroyInstance) X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceProperties)                           \
  X(vkGetPhysicalDeviceQueueFamilyProperties) X(vkGetPhysicalDeviceMemoryProperties) X(vkCreateDevice)          \
  X(vkGetDeviceProcAddr) X(vkGetPhysicalDeviceFeatures) X(vkEnumerateDeviceExtensionProperties)
#define ETMLIR_VK_DEVICE(X)                                                                                     \
  X(vkGetDeviceQueue) X(vkCreateBuffer) X(vkDestroyBuffer) X(vkGetBufferMemoryRequirements) X(vkAllocateMemory) \
  X(vkFreeMemory) X(vkBindBufferMemory) X(vkMapMemory) X(vkUnmapMemory) X(vkCreateShaderModule)                 \
  X(vkDestroyShaderModule) X(vkCreateDescriptorSetLayout) X(vkDestroyDescriptorSetLayout)                       \
  X(vkCreatePipelineLayout) X(vkDestroyPipelineLayout) X(vkCreateComputePipelines) X(vkDestroyPipeline)         \
  X(vkCreateDescriptorPool) X(vkDestroyDescriptorPool) X(vkAllocateDescriptorSets) X(vkUpdateDescriptorSets)    \
  X(vkCreateCommandPool) X(vkDestroyCommandPool) X(vkAllocateCommandBuffers) X(vkBeginCommandBuffer)            \
  X(vkEndCommandBuffer) X(vkCmdBindPipeline) X(vkCmdBindDescriptorSets) X(vkCmdDispatch)                        \
  X(vkCmdPipelineBarrier) X(vkCreateFence) X(vkDestroyFence) X(vkWaitForFences) X(vkResetFences)                \
  X(vkQueueSubmit)

struct Vk {
  void* loader = nullptr;
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
#define ETMLIR_VK_MEMBER(name) PFN_##name name = nullptr;
  ETMLIR_VK_GLOBAL(ETMLIR_VK_MEMBER)
  ETMLIR_VK_INSTANCE(ETMLIR_VK_MEMBER)
  ETMLIR_VK_DEVICE(ETMLIR_VK_MEMBER)
#undef ETMLIR_VK_MEMBER
  PFN_vkCreateDebugUtilsMessengerEXT vkCreateDebugUtilsMessengerEXT = nullptr;
  VkInstance instance = VK_NULL_HANDLE;
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  uint32_t queue_family = 0;
  VkPhysicalDeviceProperties properties{};
  VkPhysicalDeviceMemoryProperties memory{};
  Limits limits;
  std::mutex queue_mutex;  // vkQueueSubmit needs the queue externally synchronized
  char device_name[VK_MAX_PHYSICAL_DEVICE_NAME_SIZE + 32] = "";
  char problem[512] = "";
};

Vk g_vk;
std::once_flag g_vk_once;
std::atomic<uint64_t> g_validation_messages{0};
std::atomic<uint64_t> g_submits{0};

VKAPI_ATTR VkBool32 VKAPI_CALL on_validation_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                     VkDebugUtilsMessageTypeFlagsEXT, const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                     void*) {
  if (severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
    g_validation_messages.fetch_add(1);
    std::fprintf(stderr, "[etmlir vulkan validation] %s\n", data && data->pMessage ? data->pMessage : "?");
  }
  return VK_FALSE;
}

bool fail(const char* format, const char* detail) {
  char clipped[400];
  std::snprintf(clipped, sizeof(clipped), "%.399s", detail);
  std::snprintf(g_vk.problem, sizeof(g_vk.problem), format, clipped);
  return false;
}

bool layer_present(const char* name) {
  uint32_t count = 0;
  if (g_vk.vkEnumerateInstanceLayerProperties(&count, nullptr) != VK_SUCCESS || count == 0) return false;
  VkLayerProperties layers[64];
  if (count > 64) count = 64;
  if (g_vk.vkEnumerateInstanceLayerProperties(&count, layers) < 0) return false;
  for (uint32_t i = 0; i < count; ++i)
    if (std::strcmp(layers[i].layerName, name) == 0) return true;
  return false;
}

bool open_device() {
  Vk& vk = g_vk;
  const char* path = std::getenv("ETMLIR_VULKAN_LOADER");
  if (path == nullptr || path[0] == '\0') path = "libvulkan.so.1";
  vk.loader = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (vk.loader == nullptr) {
    const char* why = dlerror();
    char detail[400];
    std::snprintf(detail, sizeof(detail), "%s (%s)", path, why ? why : "not loadable");
    return fail("no Vulkan loader: could not open %s (install a Vulkan driver, e.g. Debian's libvulkan1 "
                "mesa-vulkan-drivers)", detail);
  }
  vk.vkGetInstanceProcAddr = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(vk.loader, "vkGetInstanceProcAddr"));
  if (vk.vkGetInstanceProcAddr == nullptr) return fail("the Vulkan loader %s has no vkGetInstanceProcAddr", path);
#define ETMLIR_VK_LOAD_GLOBAL(name) \
  vk.name = reinterpret_cast<PFN_##name>(vk.vkGetInstanceProcAddr(VK_NULL_HANDLE, #name));
  ETMLIR_VK_GLOBAL(ETMLIR_VK_LOAD_GLOBAL)
#undef ETMLIR_VK_LOAD_GLOBAL
  if (!vk.vkCreateInstance || !vk.vkEnumerateInstanceLayerProperties)
    return fail("the Vulkan loader %s lacks vkCreateInstance", path);
  const char* validation = std::getenv("ETMLIR_VULKAN_VALIDATION");
  bool want_validation = validation != nullptr && std::strcmp(validation, "1") == 0;
  const char* layer = "VK_LAYER_KHRONOS_validation";
  bool validate = want_validation && layer_present(layer);
  const char* debug_utils = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "etmlir";
  app.pEngineName = "etmlir";
  app.apiVersion = VK_API_VERSION_1_0;
  VkInstanceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  info.pApplicationInfo = &app;
  if (validate) {
    info.enabledLayerCount = 1;
    info.ppEnabledLayerNames = &layer;
    info.enabledExtensionCount = 1;
    info.ppEnabledExtensionNames = &debug_utils;
  }
  VkResult r = vk.vkCreateInstance(&info, nullptr, &vk.instance);
  if (r != VK_SUCCESS) {
    char code[32];
    std::snprintf(code, sizeof(code), "%d", static_cast<int>(r));
    return fail("vkCreateInstance failed (VkResult %s): no usable Vulkan driver", code);
  }
#define ETMLIR_VK_LOAD_INSTANCE(name) \
  vk.name = reinterpret_cast<PFN_##name>(vk.vkGetInstanceProcAddr(vk.instance, #name));
  ETMLIR_VK_INSTANCE(ETMLIR_VK_LOAD_INSTANCE)
#undef ETMLIR_VK_LOAD_INSTANCE
  if (validate) {
    vk.vkCreateDebugUtilsMessengerEXT = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vk.vkGetInstanceProcAddr(vk.instance, "vkCreateDebugUtilsMessengerEXT"));
    if (vk.vkCreateDebugUtilsMessengerEXT) {
      VkDebugUtilsMessengerCreateInfoEXT m{};
      m.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT;
      m.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
      m.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                      VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
      m.pfnUserCallback = on_validation_message;
      VkDebugUtilsMessengerEXT messenger;
      vk.vkCreateDebugUtilsMessengerEXT(vk.instance, &m, nullptr, &messenger);  // lives as long as the process
    }
  }
  uint32_t count = 0;
  vk.vkEnumeratePhysicalDevices(vk.instance, &count, nullptr);
  if (count == 0) return fail("the Vulkan loader found no device%s (is a driver installed? lavapipe: Debian's "
                              "mesa-vulkan-drivers)", "");
  VkPhysicalDevice devices[16];
  if (count > 16) count = 16;
  vk.vkEnumeratePhysicalDevices(vk.instance, &count, devices);
  // ETMLIR_VULKAN_DEVICE=<index> picks one; else the first GPU with a compute queue, discrete first.
  const char* wanted = std::getenv("ETMLIR_VULKAN_DEVICE");
  int best = -1;
  int best_rank = -1;
  uint32_t best_family = 0;
  for (uint32_t i = 0; i < count; ++i) {
    VkPhysicalDeviceProperties p;
    vk.vkGetPhysicalDeviceProperties(devices[i], &p);
    uint32_t families = 0;
    vk.vkGetPhysicalDeviceQueueFamilyProperties(devices[i], &families, nullptr);
    VkQueueFamilyProperties props[16];
    if (families > 16) families = 16;
    vk.vkGetPhysicalDeviceQueueFamilyProperties(devices[i], &families, props);
    int family = -1;
    for (uint32_t f = 0; f < families; ++f)
      if (props[f].queueFlags & VK_QUEUE_COMPUTE_BIT) {
        family = static_cast<int>(f);
        break;
      }
    if (family < 0) continue;
    int rank = p.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU     ? 4
               : p.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU ? 3
               : p.deviceType == VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU    ? 2
                                                                         : 1;
    if (wanted != nullptr && wanted[0] != '\0') rank = std::atoi(wanted) == static_cast<int>(i) ? 100 : 0;
    if (rank > best_rank) {
      best = static_cast<int>(i);
      best_rank = rank;
      best_family = static_cast<uint32_t>(family);
    }
  }
  if (best < 0 || best_rank == 0) return fail("no Vulkan device with a compute queue%s", wanted ? " (ETMLIR_VULKAN_DEVICE)" : "");
  vk.physical = devices[best];
  vk.queue_family = best_family;
  vk.vkGetPhysicalDeviceProperties(vk.physical, &vk.properties);
  vk.vkGetPhysicalDeviceMemoryProperties(vk.physical, &vk.memory);
  const VkPhysicalDeviceLimits& l = vk.properties.limits;
  for (int d = 0; d < 3; ++d) {
    vk.limits.max_group_count[d] = l.maxComputeWorkGroupCount[d];
    vk.limits.max_group_size[d] = l.maxComputeWorkGroupSize[d];
  }
  vk.limits.max_invocations = l.maxComputeWorkGroupInvocations;
  vk.limits.max_storage_buffers = l.maxPerStageDescriptorStorageBuffers;
  vk.limits.max_storage_range = l.maxStorageBufferRange;
  std::snprintf(vk.device_name, sizeof(vk.device_name), "%.255s", vk.properties.deviceName);
  float priority = 1.0f;
  VkDeviceQueueCreateInfo queue{};
  queue.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  queue.queueFamilyIndex = vk.queue_family;
  queue.queueCount = 1;
  queue.pQueuePriorities = &priority;
  // Bounds-checked buffer access where the device has it: a shader that indexes past a buffer (a
  // corrupt payload that still validates) reads zeros instead of another allocation's memory.
  VkPhysicalDeviceFeatures supported{};
  vk.vkGetPhysicalDeviceFeatures(vk.physical, &supported);
  VkPhysicalDeviceFeatures features{};
  features.robustBufferAccess = supported.robustBufferAccess;
  features.shaderInt64 = supported.shaderInt64;  // i64 tensors inside a delegate (index arithmetic, masks)
  vk.limits.int64 = supported.shaderInt64 == VK_TRUE;
  VkDeviceCreateInfo device{};
  device.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  device.queueCreateInfoCount = 1;
  device.pQueueCreateInfos = &queue;
  device.pEnabledFeatures = &features;
  // The shaders declare SPV_KHR_storage_buffer_storage_class (core in Vulkan 1.1; an extension on 1.0 devices).
  const char* extension = "VK_KHR_storage_buffer_storage_class";
  uint32_t extensions = 0;
  vk.vkEnumerateDeviceExtensionProperties(vk.physical, nullptr, &extensions, nullptr);
  VkExtensionProperties available[256];
  if (extensions > 256) extensions = 256;
  vk.vkEnumerateDeviceExtensionProperties(vk.physical, nullptr, &extensions, available);
  for (uint32_t e = 0; e < extensions; ++e)
    if (std::strcmp(available[e].extensionName, extension) == 0) {
      device.enabledExtensionCount = 1;
      device.ppEnabledExtensionNames = &extension;
    }
  if (vk.vkCreateDevice(vk.physical, &device, nullptr, &vk.device) != VK_SUCCESS)
    return fail("vkCreateDevice failed on %s", vk.device_name);
#define ETMLIR_VK_LOAD_DEVICE(name) vk.name = reinterpret_cast<PFN_##name>(vk.vkGetDeviceProcAddr(vk.device, #name));
  ETMLIR_VK_DEVICE(ETMLIR_VK_LOAD_DEVICE)
#undef ETMLIR_VK_LOAD_DEVICE
  vk.vkGetDeviceQueue(vk.device, vk.queue_family, 0, &vk.queue);
  return true;
}

const Vk* vulkan() {
  std::call_once(g_vk_once, [] {
    if (!open_device()) g_vk.device = VK_NULL_HANDLE;
  });
  return g_vk.device != VK_NULL_HANDLE ? &g_vk : nullptr;
}

// ---- one delegate ---------------------------------------------------------------------------------

struct DeviceBuffer {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  void* mapped = nullptr;
  uint64_t size = 0;
};

struct Pipeline {
  VkShaderModule module = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
};

// One graph of the module: its own buffers (inputs, outputs, memory-plan slots), pipelines,
// descriptor sets and recorded command buffer.
struct GraphState {
  const vulkan_schema::Graph* graph = nullptr;
  DeviceBuffer* buffers = nullptr;     // inputs, outputs, then slots
  uint32_t num_buffers = 0;
  const DeviceBuffer** bound = nullptr;  // graph buffer i -> the device buffer it is
  uint64_t* input_bytes = nullptr;     // per input, then per output
  uint64_t* output_bytes = nullptr;
  Pipeline* pipelines = nullptr;
  uint32_t num_pipelines = 0;
  VkDescriptorPool pool = VK_NULL_HANDLE;
  VkCommandPool command_pool = VK_NULL_HANDLE;
  VkCommandBuffer commands = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
};

struct VulkanDelegate {
  const vulkan_schema::Module* module = nullptr;
  const payload_schema::PayloadHeader* header = nullptr;
  uint32_t num_inputs = 0;
  uint32_t num_outputs = 0;
  DeviceBuffer* weights = nullptr;     // Module.constants, shared by the graphs
  uint32_t num_weights = 0;
  GraphState* graphs = nullptr;
  uint32_t num_graphs = 0;
};

size_t graph_bytes(const vulkan_schema::Graph& g, size_t inputs, size_t outputs) {
  size_t n = inputs + outputs + g.num_slots();
  return 16 + n * sizeof(DeviceBuffer) + 16 + g.buffers()->size() * sizeof(void*) + 16 +
         (inputs + outputs) * sizeof(uint64_t) + 32 + g.shaders()->size() * sizeof(Pipeline);
}

size_t delegate_bytes(const vulkan_schema::Module& m, size_t inputs, size_t outputs) {
  size_t n = sizeof(VulkanDelegate) + 64 + (m.constants() ? m.constants()->size() : 0) * sizeof(DeviceBuffer) + 16 +
             m.graphs()->size() * sizeof(GraphState) + 16;
  for (uint32_t i = 0; i < m.graphs()->size(); ++i) n += graph_bytes(*m.graphs()->Get(i), inputs, outputs);
  return n;
}

Error vk_error(const char* what, VkResult result) {
  return Error::make(ErrorCode::Internal, "%s failed (VkResult %d) on %s", what, static_cast<int>(result),
                     g_vk.device_name);
}

Error make_buffer(const Vk& vk, uint64_t size, DeviceBuffer* out) {
  out->size = size;
  VkBufferCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  // Whole 16-byte words: shaders read 8-bit data (bool masks) as 32-bit words, and robust buffer access
  // would turn a word that ends past the buffer into zeros.
  info.size = (size + 15) / 16 * 16;
  if (info.size == 0) info.size = 16;
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkResult r = vk.vkCreateBuffer(vk.device, &info, nullptr, &out->buffer);
  if (r != VK_SUCCESS) return vk_error("vkCreateBuffer", r);
  VkMemoryRequirements needs;
  vk.vkGetBufferMemoryRequirements(vk.device, out->buffer, &needs);
  // Host-visible, coherent memory (device-local too where the device has such: integrated GPUs,
  // resizable BAR): inputs and outputs are copied with memcpy, no staging pass.
  const VkMemoryPropertyFlags host = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  int chosen = -1;
  for (int pass = 0; pass < 2 && chosen < 0; ++pass) {
    VkMemoryPropertyFlags want = pass == 0 ? (host | VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) : host;
    for (uint32_t t = 0; t < vk.memory.memoryTypeCount; ++t)
      if ((needs.memoryTypeBits & (1u << t)) && (vk.memory.memoryTypes[t].propertyFlags & want) == want) {
        chosen = static_cast<int>(t);
        break;
      }
  }
  if (chosen < 0)
    return Error::make(ErrorCode::NotSupported, "%s has no host-visible coherent memory for storage buffers",
                       vk.device_name);
  VkMemoryAllocateInfo allocate{};
  allocate.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  allocate.allocationSize = needs.size;
  allocate.memoryTypeIndex = static_cast<uint32_t>(chosen);
  r = vk.vkAllocateMemory(vk.device, &allocate, nullptr, &out->memory);
  if (r != VK_SUCCESS)
    return Error::make(ErrorCode::OutOfMemory, "vkAllocateMemory of %llu bytes failed (VkResult %d) on %s",
                       static_cast<unsigned long long>(needs.size), static_cast<int>(r), vk.device_name);
  r = vk.vkBindBufferMemory(vk.device, out->buffer, out->memory, 0);
  if (r != VK_SUCCESS) return vk_error("vkBindBufferMemory", r);
  r = vk.vkMapMemory(vk.device, out->memory, 0, VK_WHOLE_SIZE, 0, &out->mapped);
  if (r != VK_SUCCESS) return vk_error("vkMapMemory", r);
  return Error::ok();
}

void release_buffer(const Vk& vk, DeviceBuffer& b) {
  if (b.mapped) vk.vkUnmapMemory(vk.device, b.memory);
  if (b.buffer) vk.vkDestroyBuffer(vk.device, b.buffer, nullptr);
  if (b.memory) vk.vkFreeMemory(vk.device, b.memory, nullptr);
  b = DeviceBuffer();
}

void release(const Vk& vk, GraphState& d) {
  if (d.fence) vk.vkDestroyFence(vk.device, d.fence, nullptr);
  if (d.command_pool) vk.vkDestroyCommandPool(vk.device, d.command_pool, nullptr);
  if (d.pool) vk.vkDestroyDescriptorPool(vk.device, d.pool, nullptr);
  for (uint32_t i = 0; d.pipelines && i < d.num_pipelines; ++i) {
    Pipeline& p = d.pipelines[i];
    if (p.pipeline) vk.vkDestroyPipeline(vk.device, p.pipeline, nullptr);
    if (p.layout) vk.vkDestroyPipelineLayout(vk.device, p.layout, nullptr);
    if (p.set_layout) vk.vkDestroyDescriptorSetLayout(vk.device, p.set_layout, nullptr);
    if (p.module) vk.vkDestroyShaderModule(vk.device, p.module, nullptr);
    p = Pipeline();
  }
  for (uint32_t i = 0; d.buffers && i < d.num_buffers; ++i) release_buffer(vk, d.buffers[i]);
  d.fence = VK_NULL_HANDLE;
  d.command_pool = VK_NULL_HANDLE;
  d.pool = VK_NULL_HANDLE;
}

void release(const Vk& vk, VulkanDelegate& d) {
  for (uint32_t i = 0; d.graphs && i < d.num_graphs; ++i) release(vk, d.graphs[i]);
  for (uint32_t i = 0; d.weights && i < d.num_weights; ++i) release_buffer(vk, d.weights[i]);
}

Error build(const Vk& vk, GraphState& d, const VulkanDelegate& owner) {
  const vulkan_schema::Graph& g = *d.graph;
  using vulkan_schema::BufferKind;
  // Buffers: inputs, outputs, slots (weights are the delegate's, shared by its graphs).
  uint32_t slots_at = owner.num_inputs + owner.num_outputs;
  for (uint32_t i = 0; i < g.buffers()->size(); ++i) {
    const vulkan_schema::Buffer* b = g.buffers()->Get(i);
    if (b->kind() == BufferKind::Weight) {
      d.bound[i] = &owner.weights[b->index()];
      continue;
    }
    uint32_t at = b->kind() == BufferKind::Input    ? b->index()
                  : b->kind() == BufferKind::Output ? owner.num_inputs + b->index()
                                                    : slots_at + b->slot();
    uint64_t size = b->kind() == BufferKind::Intermediate ? g.slot_sizes()->Get(b->slot()) : b->size();
    if (d.buffers[at].buffer == VK_NULL_HANDLE) ET_CHECK_OK(make_buffer(vk, size, &d.buffers[at]));
    d.bound[i] = &d.buffers[at];
    if (b->kind() == BufferKind::Input) d.input_bytes[b->index()] = b->size();
    if (b->kind() == BufferKind::Output) d.output_bytes[b->index()] = b->size();
  }
  // Pipelines.
  for (uint32_t s = 0; s < g.shaders()->size(); ++s) {
    const vulkan_schema::Shader* shader = g.shaders()->Get(s);
    Pipeline& p = d.pipelines[s];
    VkShaderModuleCreateInfo module{};
    module.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
    module.codeSize = shader->code()->size() * sizeof(uint32_t);
    module.pCode = shader->code()->data();
    VkResult r = vk.vkCreateShaderModule(vk.device, &module, nullptr, &p.module);
    if (r != VK_SUCCESS) return vk_error("vkCreateShaderModule", r);
    VkDescriptorSetLayoutBinding bindings[64];
    uint32_t n = shader->num_bindings();
    for (uint32_t k = 0; k < n; ++k) {
      bindings[k] = VkDescriptorSetLayoutBinding{};
      bindings[k].binding = k;
      bindings[k].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      bindings[k].descriptorCount = 1;
      bindings[k].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    }
    VkDescriptorSetLayoutCreateInfo set{};
    set.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
    set.bindingCount = n;
    set.pBindings = bindings;
    r = vk.vkCreateDescriptorSetLayout(vk.device, &set, nullptr, &p.set_layout);
    if (r != VK_SUCCESS) return vk_error("vkCreateDescriptorSetLayout", r);
    VkPipelineLayoutCreateInfo layout{};
    layout.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
    layout.setLayoutCount = 1;
    layout.pSetLayouts = &p.set_layout;
    r = vk.vkCreatePipelineLayout(vk.device, &layout, nullptr, &p.layout);
    if (r != VK_SUCCESS) return vk_error("vkCreatePipelineLayout", r);
    VkComputePipelineCreateInfo info{};
    info.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
    info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    info.stage.module = p.module;
    info.stage.pName = shader->entry()->c_str();
    info.layout = p.layout;
    r = vk.vkCreateComputePipelines(vk.device, VK_NULL_HANDLE, 1, &info, nullptr, &p.pipeline);
    if (r != VK_SUCCESS)
      return Error::make(ErrorCode::InvalidProgram, "the driver refused shader %u (%.32s): vkCreateComputePipelines "
                         "returned VkResult %d", s, shader->name() ? shader->name()->c_str() : "?", static_cast<int>(r));
  }
  // One descriptor set per dispatch, written now: the buffers never change.
  uint32_t num_dispatches = g.dispatches()->size();
  uint32_t descriptors = 0;
  for (uint32_t i = 0; i < num_dispatches; ++i) descriptors += g.dispatches()->Get(i)->buffers()->size();
  VkDescriptorPoolSize sizes{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptors ? descriptors : 1};
  VkDescriptorPoolCreateInfo pool{};
  pool.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
  pool.maxSets = num_dispatches ? num_dispatches : 1;
  pool.poolSizeCount = 1;
  pool.pPoolSizes = &sizes;
  VkResult r = vk.vkCreateDescriptorPool(vk.device, &pool, nullptr, &d.pool);
  if (r != VK_SUCCESS) return vk_error("vkCreateDescriptorPool", r);
  VkCommandPoolCreateInfo command_pool{};
  command_pool.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  command_pool.queueFamilyIndex = vk.queue_family;
  r = vk.vkCreateCommandPool(vk.device, &command_pool, nullptr, &d.command_pool);
  if (r != VK_SUCCESS) return vk_error("vkCreateCommandPool", r);
  VkCommandBufferAllocateInfo allocate{};
  allocate.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  allocate.commandPool = d.command_pool;
  allocate.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  allocate.commandBufferCount = 1;
  r = vk.vkAllocateCommandBuffers(vk.device, &allocate, &d.commands);
  if (r != VK_SUCCESS) return vk_error("vkAllocateCommandBuffers", r);
  VkCommandBufferBeginInfo begin{};
  begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  r = vk.vkBeginCommandBuffer(d.commands, &begin);
  if (r != VK_SUCCESS) return vk_error("vkBeginCommandBuffer", r);
  // Host writes (inputs) visible to the shaders; shader writes visible to the host (outputs) at the end.
  VkMemoryBarrier host_to_shader{VK_STRUCTURE_TYPE_MEMORY_BARRIER, nullptr, VK_ACCESS_HOST_WRITE_BIT,
                                 VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
  vk.vkCmdPipelineBarrier(d.commands, VK_PIPELINE_STAGE_HOST_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1,
                          &host_to_shader, 0, nullptr, 0, nullptr);
  for (uint32_t i = 0; i < num_dispatches; ++i) {
    const vulkan_schema::Dispatch* dispatch = g.dispatches()->Get(i);
    const Pipeline& p = d.pipelines[dispatch->shader()];
    VkDescriptorSetAllocateInfo set{};
    set.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
    set.descriptorPool = d.pool;
    set.descriptorSetCount = 1;
    set.pSetLayouts = &p.set_layout;
    VkDescriptorSet descriptor_set;
    r = vk.vkAllocateDescriptorSets(vk.device, &set, &descriptor_set);
    if (r != VK_SUCCESS) return vk_error("vkAllocateDescriptorSets", r);
    uint32_t n = dispatch->buffers()->size();
    VkDescriptorBufferInfo infos[64];
    VkWriteDescriptorSet writes[64];
    for (uint32_t k = 0; k < n; ++k) {
      const DeviceBuffer& b = *d.bound[dispatch->buffers()->Get(k)];
      infos[k] = VkDescriptorBufferInfo{b.buffer, 0, VK_WHOLE_SIZE};
      writes[k] = VkWriteDescriptorSet{};
      writes[k].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
      writes[k].dstSet = descriptor_set;
      writes[k].dstBinding = k;
      writes[k].descriptorCount = 1;
      writes[k].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[k].pBufferInfo = &infos[k];
    }
    vk.vkUpdateDescriptorSets(vk.device, n, writes, 0, nullptr);
    if (dispatch->barrier()) {
      VkMemoryBarrier between{VK_STRUCTURE_TYPE_MEMORY_BARRIER, nullptr, VK_ACCESS_SHADER_WRITE_BIT,
                              VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
      vk.vkCmdPipelineBarrier(d.commands, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                              0, 1, &between, 0, nullptr, 0, nullptr);
    }
    vk.vkCmdBindPipeline(d.commands, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
    vk.vkCmdBindDescriptorSets(d.commands, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &descriptor_set, 0,
                               nullptr);
    vk.vkCmdDispatch(d.commands, dispatch->workgroups()->Get(0), dispatch->workgroups()->Get(1),
                     dispatch->workgroups()->Get(2));
  }
  VkMemoryBarrier shader_to_host{VK_STRUCTURE_TYPE_MEMORY_BARRIER, nullptr, VK_ACCESS_SHADER_WRITE_BIT,
                                 VK_ACCESS_HOST_READ_BIT};
  vk.vkCmdPipelineBarrier(d.commands, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                          &shader_to_host, 0, nullptr, 0, nullptr);
  r = vk.vkEndCommandBuffer(d.commands);
  if (r != VK_SUCCESS) return vk_error("vkEndCommandBuffer", r);
  VkFenceCreateInfo fence{};
  fence.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  r = vk.vkCreateFence(vk.device, &fence, nullptr, &d.fence);
  if (r != VK_SUCCESS) return vk_error("vkCreateFence", r);
  return Error::ok();
}

#endif  // ETMLIR_VULKAN_HEADERS

const char* unavailable_problem() {
#ifdef ETMLIR_VULKAN_HEADERS
  return vulkan() == nullptr ? g_vk.problem : nullptr;
#else
  return "this runtime was built without the Vulkan headers (Debian: libvulkan-dev): rebuild it to run vulkan "
         "delegates";
#endif
}

class VulkanBackend : public Backend {
 public:
  bool is_available() const override { return unavailable_problem() == nullptr; }
  const char* unavailable_reason() const override { return unavailable_problem(); }
  const char* device() const override { return vulkan_device_name(); }

  Result<DelegateHandle> init(BackendInitContext& context, Span<const uint8_t> payload,
                              Span<const CompileSpec> compile_specs) override {
    (void)compile_specs;
    PayloadView view;
    const vulkan_schema::Module* module = nullptr;
    ET_CHECK_OK(read_graph(payload, &view, &module));
    if (const char* problem = unavailable_problem()) return Error::make(ErrorCode::NotSupported, "%s", problem);
#ifdef ETMLIR_VULKAN_HEADERS
    const Vk& vk = *vulkan();
    ET_CHECK_OK(check_module(*module, *view.header, vk.limits));
    if (context.method_allocator == nullptr)
      return Error::make(ErrorCode::InvalidArgument, "init needs a method allocator");
    MemoryAllocator& allocator = *context.method_allocator;
    size_t inputs = view.header->inputs() ? view.header->inputs()->size() : 0;
    size_t outputs = view.header->outputs() ? view.header->outputs()->size() : 0;
    void* at = nullptr;
    ET_CHECK_OK(allocate_at_init(allocator, sizeof(VulkanDelegate), alignof(VulkanDelegate), "the delegate state", &at));
    VulkanDelegate* d = new (at) VulkanDelegate();
    d->module = module;
    d->header = view.header;
    d->num_inputs = static_cast<uint32_t>(inputs);
    d->num_outputs = static_cast<uint32_t>(outputs);
    d->num_weights = module->constants() ? module->constants()->size() : 0;
    ET_CHECK_OK(allocate_at_init(allocator, d->num_weights * sizeof(DeviceBuffer) + 1, alignof(DeviceBuffer),
                                 "the weight buffer table", &at));
    d->weights = static_cast<DeviceBuffer*>(at);
    for (uint32_t i = 0; i < d->num_weights; ++i) new (&d->weights[i]) DeviceBuffer();
    d->num_graphs = module->graphs()->size();
    ET_CHECK_OK(allocate_at_init(allocator, d->num_graphs * sizeof(GraphState), alignof(GraphState), "the graph table",
                                 &at));
    d->graphs = static_cast<GraphState*>(at);
    for (uint32_t i = 0; i < d->num_graphs; ++i) new (&d->graphs[i]) GraphState();
    for (uint32_t i = 0; i < d->num_graphs; ++i) {
      GraphState& g = d->graphs[i];
      g.graph = module->graphs()->Get(i);
      g.num_buffers = static_cast<uint32_t>(inputs + outputs + g.graph->num_slots());
      ET_CHECK_OK(allocate_at_init(allocator, g.num_buffers * sizeof(DeviceBuffer) + 1, alignof(DeviceBuffer),
                                   "a graph's buffer table", &at));
      g.buffers = static_cast<DeviceBuffer*>(at);
      for (uint32_t k = 0; k < g.num_buffers; ++k) new (&g.buffers[k]) DeviceBuffer();
      ET_CHECK_OK(allocate_at_init(allocator, g.graph->buffers()->size() * sizeof(void*) + 1, alignof(void*),
                                   "a graph's buffer map", &at));
      g.bound = static_cast<const DeviceBuffer**>(at);
      ET_CHECK_OK(allocate_at_init(allocator, (inputs + outputs) * sizeof(uint64_t) + 1, 16, "a graph's tensor sizes",
                                   &at));
      g.input_bytes = static_cast<uint64_t*>(at);
      g.output_bytes = g.input_bytes + inputs;
      for (size_t k = 0; k < inputs + outputs; ++k) g.input_bytes[k] = 0;
      g.num_pipelines = g.graph->shaders()->size();
      ET_CHECK_OK(allocate_at_init(allocator, g.num_pipelines * sizeof(Pipeline) + 1, alignof(Pipeline),
                                   "a graph's pipeline table", &at));
      g.pipelines = static_cast<Pipeline*>(at);
      for (uint32_t k = 0; k < g.num_pipelines; ++k) new (&g.pipelines[k]) Pipeline();
    }
    Error built = Error::ok();
    for (uint32_t c = 0; !built && c < d->num_weights; ++c) {
      const flatbuffers::Vector<uint8_t>* data = module->constants()->Get(c)->data();
      built = make_buffer(vk, data->size(), &d->weights[c]);
      if (!built && data->size()) std::memcpy(d->weights[c].mapped, data->data(), data->size());
    }
    for (uint32_t i = 0; !built && i < d->num_graphs; ++i) {
      built = build(vk, d->graphs[i], *d);
      if (built) built.prefix("graph %u", i);
    }
    if (built) {
      release(vk, *d);
      return built;
    }
    return DelegateHandle(d);
#else
    (void)context;
    return Error::make(ErrorCode::NotSupported, "%s", unavailable_problem());
#endif
  }

  Error execute(BackendExecuteContext& context, DelegateHandle handle, Span<EValue*> args) override {
    (void)context;
#ifdef ETMLIR_VULKAN_HEADERS
    VulkanDelegate& d = *static_cast<VulkanDelegate*>(handle);
    const Vk& vk = g_vk;
    size_t total = d.num_inputs + d.num_outputs;
    if (args.size() != total)
      return Error::make(ErrorCode::InvalidProgram,
                         "the call passes %zu argument%s; the dispatch graph takes %u input%s, then %u output%s",
                         args.size(), plural(args.size()), d.num_inputs, plural(d.num_inputs), d.num_outputs,
                         plural(d.num_outputs));
    for (size_t k = 0; k < total; ++k)
      if (!args[k]->is_tensor())
        return Error::make(ErrorCode::InvalidProgram, "argument %zu is a %s; a vulkan delegate passes tensors only", k,
                           tag_name(args[k]->tag));
    uint32_t picked = 0;
    ET_CHECK_OK(pick_graph(d, args, &picked));
    GraphState& g = d.graphs[picked];
    char given[128];
    for (uint32_t i = 0; i < d.num_inputs; ++i) {
      const Tensor& tensor = args[i]->to_tensor();
      uint64_t bytes = g.input_bytes[i];
      if (bytes == 0 || g.buffers[i].mapped == nullptr) continue;  // an input no shader reads (a pinned size)
      if (tensor.data() == nullptr) return Error::make(ErrorCode::InvalidArgument, "input %u has no data", i);
      std::memcpy(g.buffers[i].mapped, tensor.data(), bytes);
    }
    size_t at = 0;
    for (uint32_t o = 0; o < d.num_outputs; ++o) {
      Tensor& tensor = args[d.num_inputs + o]->to_tensor();
      const payload_schema::TensorSpec* spec = d.header->outputs()->Get(o);
      size_t rank = spec->sizes()->size();
      char name[32];
      std::snprintf(name, sizeof(name), "live-out %u", o);
      ET_CHECK_OK(tensor.resize(Span<const int64_t>(g.graph->output_sizes()->data() + at, rank), name));
      at += rank;
      uint64_t bytes = g.output_bytes[o];
      if (bytes && (tensor.mutable_data() == nullptr || tensor.capacity() < bytes))
        return Error::make(ErrorCode::OutOfMemory, "live-out %u %s has %zu bytes of memory; it needs %llu", o,
                           tensor.describe(given, sizeof(given)), tensor.capacity(),
                           static_cast<unsigned long long>(bytes));
    }
    {
      std::lock_guard<std::mutex> lock(g_vk.queue_mutex);
      VkSubmitInfo submit{};
      submit.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
      submit.commandBufferCount = 1;
      submit.pCommandBuffers = &g.commands;
      VkResult r = vk.vkQueueSubmit(vk.queue, 1, &submit, g.fence);
      if (r != VK_SUCCESS) return vk_error("vkQueueSubmit", r);
    }
    g_submits.fetch_add(1);
    constexpr uint64_t kTimeout = 120ull * 1000 * 1000 * 1000;
    VkResult r = vk.vkWaitForFences(vk.device, 1, &g.fence, VK_TRUE, kTimeout);
    if (r == VK_TIMEOUT)
      return Error::make(ErrorCode::Internal, "the dispatch graph did not finish within 120 s on %s", vk.device_name);
    if (r != VK_SUCCESS) return vk_error("vkWaitForFences", r);
    r = vk.vkResetFences(vk.device, 1, &g.fence);
    if (r != VK_SUCCESS) return vk_error("vkResetFences", r);
    for (uint32_t o = 0; o < d.num_outputs; ++o) {
      uint64_t bytes = g.output_bytes[o];
      const DeviceBuffer& b = g.buffers[d.num_inputs + o];
      if (bytes && b.mapped) std::memcpy(args[d.num_inputs + o]->to_tensor().mutable_data(), b.mapped, bytes);
    }
    return Error::ok();
#else
    (void)handle;
    (void)args;
    return Error::make(ErrorCode::NotSupported, "%s", unavailable_problem());
#endif
  }

#ifdef ETMLIR_VULKAN_HEADERS
  // The graph whose input sizes (and pinned sizes) the call's inputs have, into *picked; an error
  // naming the first input that matches no graph otherwise.
  static Error pick_graph(const VulkanDelegate& d, Span<EValue*> args, uint32_t* picked) {
    char given[128];
    char wanted[256];
    for (uint32_t i = 0; i < d.num_graphs; ++i) {
      const vulkan_schema::Graph& g = *d.graphs[i].graph;
      bool same = true;
      size_t at = 0;
      for (uint32_t k = 0; same && k < d.num_inputs; ++k) {
        const Tensor& tensor = args[k]->to_tensor();
        const payload_schema::TensorSpec* spec = d.header->inputs()->Get(k);
        size_t rank = spec->sizes()->size();
        same = static_cast<int8_t>(tensor.dtype()) == spec->scalar_type() && static_cast<size_t>(tensor.dim()) == rank;
        for (size_t dd = 0; same && dd < rank; ++dd) same = tensor.sizes()[dd] == g.input_sizes()->Get(static_cast<uint32_t>(at + dd));
        at += rank;
      }
      for (uint32_t k = 0; same && g.pinned_inputs() && k < g.pinned_inputs()->size(); ++k) {
        const Tensor& tensor = args[g.pinned_inputs()->Get(k)]->to_tensor();
        same = tensor.data() != nullptr && *static_cast<const int64_t*>(tensor.data()) == g.size();
      }
      if (same) {
        *picked = i;
        return Error::ok();
      }
    }
    // No graph: name the first input that differs from graph 0, and the sizes compiled.
    size_t used = 0;
    wanted[0] = '\0';
    for (uint32_t i = 0; i < d.num_graphs && used < sizeof(wanted); ++i)
      used += static_cast<size_t>(std::snprintf(wanted + used, sizeof(wanted) - used, "%s%lld", i ? ", " : "",
                                                static_cast<long long>(d.graphs[i].graph->size())));
    for (uint32_t k = 0; k < d.num_inputs; ++k) {
      const Tensor& tensor = args[k]->to_tensor();
      const payload_schema::TensorSpec* spec = d.header->inputs()->Get(k);
      bool dynamic = false;
      for (int64_t s : *spec->sizes()) dynamic |= s < 0;
      if (d.num_graphs > 1 && (dynamic || spec->sizes()->size() == 0))
        return Error::make(ErrorCode::InvalidArgument,
                           "input %u is %s; this vulkan delegate was compiled for its dynamic dims = %s (compile spec "
                           "'sizes')", k, tensor.describe(given, sizeof(given)), wanted);
      char shape[128];
      format_shape(static_cast<ScalarType>(spec->scalar_type()), spec->sizes()->data(),
                   static_cast<uint32_t>(spec->sizes()->size()), nullptr, shape, sizeof(shape));
      bool same = static_cast<int8_t>(tensor.dtype()) == spec->scalar_type() &&
                  static_cast<size_t>(tensor.dim()) == spec->sizes()->size();
      for (size_t dd = 0; same && dd < spec->sizes()->size(); ++dd) same = tensor.sizes()[dd] == spec->sizes()->Get(static_cast<uint32_t>(dd));
      if (!same)
        return Error::make(ErrorCode::InvalidArgument, "input %u is %s; the dispatch graph's is %s (its shapes are static)",
                           k, tensor.describe(given, sizeof(given)), shape);
    }
    return Error::make(ErrorCode::InvalidArgument, "the inputs match none of the graphs compiled for sizes %s", wanted);
  }
#endif

  void destroy(DelegateHandle handle) override {
#ifdef ETMLIR_VULKAN_HEADERS
    if (handle != nullptr && vulkan() != nullptr) release(g_vk, *static_cast<VulkanDelegate*>(handle));
#else
    (void)handle;
#endif
  }

  Result<size_t> method_allocator_bytes(const BackendInitContext& context, Span<const uint8_t> payload,
                                        Span<const CompileSpec> compile_specs) const override {
    (void)context;
    (void)compile_specs;
    PayloadView view;
    const vulkan_schema::Module* graph = nullptr;
    ET_CHECK_OK(read_graph(payload, &view, &graph));
    if (!graph->graphs())
      return Error::make(ErrorCode::InvalidProgram, "the dispatch module holds no graph");
    for (uint32_t i = 0; i < graph->graphs()->size(); ++i)
      if (!graph->graphs()->Get(i)->shaders() || !graph->graphs()->Get(i)->buffers())
        return Error::make(ErrorCode::InvalidProgram, "graph %u lacks its shaders or buffers", i);
    size_t inputs = view.header->inputs() ? view.header->inputs()->size() : 0;
    size_t outputs = view.header->outputs() ? view.header->outputs()->size() : 0;
#ifdef ETMLIR_VULKAN_HEADERS
    return delegate_bytes(*graph, inputs, outputs);
#else
    (void)inputs;
    (void)outputs;
    return size_t{0};
#endif
  }

  uint64_t counter(const char* name) const override {
    if (std::strcmp(name, "validation_messages") == 0) return vulkan_validation_messages();
#ifdef ETMLIR_VULKAN_HEADERS
    if (std::strcmp(name, "submits") == 0) return g_submits.load();
#endif
    return 0;
  }

  BackendPayloadInfo payload_info() const override {
    BackendPayloadInfo info;
    info.body_format = kBodyFormat;
    info.min_body_version = info.max_body_version = kBodyVersion;
    return info;
  }
};

}  // namespace

const char* vulkan_device_name() {
#ifdef ETMLIR_VULKAN_HEADERS
  return vulkan() != nullptr ? g_vk.device_name : nullptr;
#else
  return nullptr;
#endif
}

const char* vulkan_problem() { return unavailable_problem(); }

uint64_t vulkan_validation_messages() {
#ifdef ETMLIR_VULKAN_HEADERS
  return g_validation_messages.load();
#else
  return 0;
#endif
}

Error register_vulkan_backend(BackendRegistry& registry, const BackendOptions& /*options*/) {
  static VulkanBackend backend;
  return registry.add(kBackendId, &backend);
}

}  // namespace etmlir
