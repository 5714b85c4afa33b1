// libetmlir_tosa_reference.so: the TOSA reference model (tosa-tools' static
// libtosa_reference_model_lib.a and libtosa_serialization_lib.a) behind the C
// interface of tosa_reference_abi.h, for the runtime's "tosa" backend. It stands
// in for an NPU driver on a host: it takes the standard TOSA FlatBuffer a vendor's
// NPU compiler would take, and runs it.
//
// Built only when tosa-tools is found (runtime/backends/tosa/CMakeLists.txt), as a
// module with hidden symbols (only the etmlir_tosa_* functions are exported) so that
// the reference model's FlatBuffers release never meets the runtime's.
//
// The reference model writes warnings and errors with printf/fprintf to stdout and
// stderr; the link wraps those calls (-Wl,--wrap=...) so that text goes into the
// message of the call that caused it instead of the host's output.
#include "tosa_reference_abi.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

// The serializer's header-only code (Deserialize, in this translation unit) prints
// with printf: route it to the capture below.
extern "C" int etmlir_tosa_capture_printf(const char* format, ...);
#define printf etmlir_tosa_capture_printf
#include "model_runner.h"
#include "tosa_serialization_handler.h"
#undef printf

namespace {

// What the reference model printed during the current call (one call at a time: g_lock).
std::string g_captured;
std::mutex g_lock;
// The graph whose runner the reference model built last (see etmlir_tosa_graph_run).
const etmlir_tosa_graph* g_current = nullptr;

// A 1.0 graph read by the 1.1-draft serializer is "backward compatible": not worth a message.
constexpr const char* kVersionWarning = "WARNING: Different TOSA spec in flatbuffer and serializer versions";

void capture(const char* format, va_list args) {
  char line[1024];
  vsnprintf(line, sizeof(line), format, args);
  if (std::strncmp(line, kVersionWarning, std::strlen(kVersionWarning)) == 0) return;
  if (g_captured.size() < 4096) g_captured += line;
}

bool is_console(FILE* stream) { return stream == stdout || stream == stderr; }

}  // namespace

extern "C" {

int etmlir_tosa_capture_printf(const char* format, ...) {
  va_list args;
  va_start(args, format);
  capture(format, args);
  va_end(args);
  return 0;
}

// The wrapped C library calls of the static libraries (their objects call the fortified forms).
int __real___fprintf_chk(FILE* stream, int flag, const char* format, ...);
int __real___vfprintf_chk(FILE* stream, int flag, const char* format, va_list args);
int __real_fputs(const char* text, FILE* stream);

__attribute__((visibility("hidden"))) int __wrap___printf_chk(int, const char* format, ...) {
  va_list args;
  va_start(args, format);
  capture(format, args);
  va_end(args);
  return 0;
}

__attribute__((visibility("hidden"))) int __wrap___fprintf_chk(FILE* stream, int flag, const char* format, ...) {
  va_list args;
  va_start(args, format);
  int written = 0;
  if (is_console(stream)) {
    capture(format, args);
  } else {
    written = __real___vfprintf_chk(stream, flag, format, args);
  }
  va_end(args);
  return written;
}

__attribute__((visibility("hidden"))) int __wrap___vfprintf_chk(FILE* stream, int flag, const char* format,
                                                               va_list args) {
  if (is_console(stream)) {
    capture(format, args);
    return 0;
  }
  return __real___vfprintf_chk(stream, flag, format, args);
}

__attribute__((visibility("hidden"))) int __wrap_fputs(const char* text, FILE* stream) {
  if (is_console(stream)) {
    if (g_captured.size() < 4096) g_captured += text;
    return 0;
  }
  return __real_fputs(text, stream);
}

// The reference model prints a backtrace on its assertions by running a debugger on the process:
// slow, and not ours to print. (A C++ function: its mangled name.)
__attribute__((visibility("hidden"))) void __wrap__Z20func_print_backtraceP8_IO_FILEi(FILE*, int) {}

}  // extern "C"

struct etmlir_tosa_graph {
  std::vector<uint8_t> bytes;
  tosa::TosaSerializationHandler handler;
  std::unique_ptr<TosaReference::IModelRunner> runner;
  tosa::TosaSerializationBasicBlock* block = nullptr;
  bool fresh = false;  // the runner was built and has not run yet
  std::vector<std::string> input_names, output_names;
  std::vector<etmlir_tosa_tensor_info> inputs, outputs;
};

namespace {

// What the reference model printed, as one line: its own source locations ("REQUIRE() fails AT
// /project/...cpp:617 operator()(): (x >= 0)" and the like) and colour codes left out, the
// messages kept ("OpPow: x is less than 0"), each once.
std::string printed_messages() {
  std::string out;
  size_t start = 0;
  while (start < g_captured.size()) {
    size_t end = g_captured.find('\n', start);
    if (end == std::string::npos) end = g_captured.size();
    std::string line;
    for (size_t i = start; i < end; ++i) {
      if (g_captured[i] == '\x1b') {  // an ANSI colour sequence: ESC [ ... m
        while (i < end && g_captured[i] != 'm') ++i;
        continue;
      }
      line += g_captured[i];
    }
    start = end + 1;
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    if (line.empty() || line.find(" AT /") != std::string::npos || line.find("Terminated early") == 0) continue;
    if (out.find(line) != std::string::npos) continue;
    out += (out.empty() ? "" : "; ") + line;
  }
  return out;
}

void set_message(char* message, size_t size, const std::string& text) {
  if (message == nullptr || size == 0) return;
  std::string full = text;
  // Whatever the reference model printed explains the failure.
  std::string printed = printed_messages();
  if (!printed.empty()) {
    if (printed.size() > 400) printed = printed.substr(0, 400) + "...";
    full += ": " + printed;
  }
  std::snprintf(message, size, "%s", full.c_str());
}

// The runtime's ScalarType code of a TOSA tensor type (-1: none the runtime has).
int32_t scalar_type_of(tosa::DType dtype) {
  switch (dtype) {
    case tosa::DType_BOOL: return 11;
    case tosa::DType_INT8: return 1;
    case tosa::DType_INT16: return 2;
    case tosa::DType_INT32: return 3;
    case tosa::DType_FP16: return 5;
    case tosa::DType_FP32: return 6;
    case tosa::DType_BF16: return 15;
    default: return -1;
  }
}

size_t element_bytes(int32_t scalar_type) {
  switch (scalar_type) {
    case 11: case 1: return 1;
    case 2: case 5: case 15: return 2;
    case 3: case 6: return 4;
    default: return 0;
  }
}

bool is_float(tosa::DType dtype) {
  return dtype == tosa::DType_FP32 || dtype == tosa::DType_FP16 || dtype == tosa::DType_BF16 ||
         dtype == tosa::DType_FP8E4M3 || dtype == tosa::DType_FP8E5M2;
}

// The byte size of a tensor's data as the serializer stores it (0: a type this checks nothing of).
bool stored_bytes(tosa::DType dtype, uint64_t elements, uint64_t* out) {
  switch (dtype) {
    case tosa::DType_BOOL: case tosa::DType_INT8: *out = elements; return true;
    case tosa::DType_INT16: case tosa::DType_FP16: case tosa::DType_BF16: *out = 2 * elements; return true;
    case tosa::DType_INT32: case tosa::DType_FP32: *out = 4 * elements; return true;
    case tosa::DType_SHAPE: case tosa::DType_INT64: *out = 8 * elements; return true;
    case tosa::DType_INT48: *out = 6 * elements; return true;
    default: return false;
  }
}

// The serializer's Deserialize reads fields a FlatBuffer may leave out (the verifier accepts an absent
// field) without checking them: refuse such a graph before it does.
bool check_fields(const tosa::TosaGraph* graph, std::string* why) {
  if (graph->version() == nullptr || graph->regions() == nullptr) {
    *why = "the graph has no version or no regions";
    return false;
  }
  if (graph->software_version() != nullptr && graph->software_version()->_modifier() == nullptr) {
    *why = "the graph's software version has no modifier";
    return false;
  }
  for (const tosa::TosaRegion* region : *graph->regions()) {
    if (region == nullptr || region->name() == nullptr || region->blocks() == nullptr) {
      *why = "a region has no name or no blocks";
      return false;
    }
    for (const tosa::TosaBasicBlock* block : *region->blocks()) {
      if (block == nullptr || block->name() == nullptr || block->operators() == nullptr) {
        *why = "a block has no name or no operators";
        return false;
      }
      for (const tosa::TosaOperator* op : *block->operators()) {
        if (op == nullptr || (op->location() != nullptr && op->location()->text() == nullptr)) {
          *why = "an operator is empty or has a location without text";
          return false;
        }
      }
      if (block->tensors() != nullptr) {
        for (const tosa::TosaTensor* tensor : *block->tensors()) {
          if (tensor == nullptr || tensor->name() == nullptr || tensor->shape() == nullptr) {
            *why = "a tensor has no name or no shape";
            return false;
          }
        }
      }
    }
  }
  return true;
}

bool describe(const tosa::TosaSerializationTensor& tensor, etmlir_tosa_tensor_info* info, std::string* why) {
  info->scalar_type = scalar_type_of(tensor.GetDtype());
  if (info->scalar_type < 0) {
    *why = "has TOSA type " + std::string(tosa::EnumNameDType(tensor.GetDtype())) + ", which the runtime has not";
    return false;
  }
  const std::vector<int32_t>& shape = tensor.GetShape();
  if (shape.size() > ETMLIR_TOSA_MAX_RANK) {
    *why = "has rank " + std::to_string(shape.size());
    return false;
  }
  info->rank = static_cast<uint32_t>(shape.size());
  uint64_t elements = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0) {
      *why = "has a dynamic or negative dimension";
      return false;
    }
    info->sizes[d] = shape[d];
    elements *= static_cast<uint64_t>(shape[d]);
    if (elements > (uint64_t{1} << 40)) {
      *why = "is absurdly large";
      return false;
    }
  }
  info->nbytes = elements * element_bytes(info->scalar_type);
  return true;
}

// Structural checks the reference model does not make before it trusts a graph.
bool check_graph(tosa::TosaSerializationHandler& handler, const char* region_name, const char* profile,
                 tosa::TosaSerializationBasicBlock** out_block, std::string* why) {
  tosa::TosaSerializationRegion* region = nullptr;
  for (auto& candidate : handler.GetRegions())
    if (candidate && candidate->GetName() == region_name) region = candidate.get();
  if (region == nullptr) {
    *why = std::string("the graph has no region '") + region_name + "'";
    return false;
  }
  if (region->GetBlocks().size() != 1 || !region->GetBlocks()[0]) {
    *why = "region '" + std::string(region_name) + "' has " + std::to_string(region->GetBlocks().size()) +
           " blocks; a delegate graph has one";
    return false;
  }
  tosa::TosaSerializationBasicBlock* block = region->GetBlocks()[0].get();
  bool integer_profile = std::strcmp(profile, "pro_int") == 0;
  for (auto& tensor : block->GetTensors()) {
    if (!tensor) continue;
    const std::vector<int32_t>& shape = tensor->GetShape();
    uint64_t elements = 1;
    for (int32_t d : shape) {
      if (d < 0 || elements > (uint64_t{1} << 40)) {
        *why = "tensor '" + tensor->GetName() + "' has a negative or absurd shape";
        return false;
      }
      elements *= static_cast<uint64_t>(d);
    }
    uint64_t bytes = 0;
    if (!tensor->GetData().empty() && stored_bytes(tensor->GetDtype(), elements, &bytes) &&
        tensor->GetData().size() < bytes) {  // the serializer pads data to 8 bytes
      *why = "constant tensor '" + tensor->GetName() + "' holds " + std::to_string(tensor->GetData().size()) +
             " bytes; its shape needs " + std::to_string(bytes);
      return false;
    }
    if (integer_profile && is_float(tensor->GetDtype())) {
      *why = "tensor '" + tensor->GetName() + "' is " + tosa::EnumNameDType(tensor->GetDtype()) +
             ", which profile pro_int does not allow (the payload says pro_int)";
      return false;
    }
  }
  for (auto* names : {&block->GetInputs(), &block->GetOutputs()})
    for (const std::string& name : *names)
      if (block->GetTensorByName(name) == nullptr) {
        *why = "graph input or output '" + name + "' is not a tensor of the graph";
        return false;
      }
  *out_block = block;
  return true;
}

// The reference model's deserializer and graph builder trust the FlatBuffer's contents past
// what the checks above can see (an attribute table left empty, an operator naming tensors that
// do not fit): a damaged graph can crash them. So a child process reads and builds the graph
// first; only if it survives does this process do the same. This runs once per delegate, at
// init, on the host the reference model stands in for a driver on.
bool survives_reading(const std::vector<uint8_t>& bytes, const char* region, const char* profile,
                      int* signal_number) {
  std::fflush(nullptr);
  pid_t child = fork();
  if (child < 0) return true;  // no process to spare: read it here, as without the check
  if (child == 0) {
    // The host's crash handlers (Python's faulthandler, a sanitizer's) are the host's business:
    // this process just dies and the parent reads the signal.
    for (int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL}) std::signal(sig, SIG_DFL);
    int code = 1;
    {
      tosa::TosaSerializationHandler handler;
      if (handler.LoadFileTosaFlatbuffer(bytes.data(), bytes.size()) == tosa::TOSA_OK) {
        tosa::TosaSerializationBasicBlock* block = nullptr;
        std::string why;
        if (check_graph(handler, region, profile, &block, &why)) {
          TosaReference::IModelRunner runner;
          (void)runner.initialize(*block);
        }
        code = 0;
      }
    }
    _exit(code);
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) return true;
  }
  if (WIFSIGNALED(status)) {
    *signal_number = WTERMSIG(status);
    return false;
  }
  return true;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) uint32_t etmlir_tosa_reference_abi_version(void) {
  return ETMLIR_TOSA_REFERENCE_ABI_VERSION;
}

__attribute__((visibility("default"))) const char* etmlir_tosa_reference_version(void) {
  static const std::string version = [] {
    tosa::TosaSerializationHandler handler;
    return "TOSA reference model (tosa-tools " ETMLIR_TOSA_TOOLS_VERSION "), serialization library " +
           handler.GetVersion().to_string();
  }();
  return version.c_str();
}

__attribute__((visibility("default"))) etmlir_tosa_graph* etmlir_tosa_graph_create(
    const uint8_t* data, size_t size, const char* region, const char* profile, char* message, size_t message_size) {
  std::lock_guard<std::mutex> lock(g_lock);
  g_captured.clear();
  if (data == nullptr || size == 0) {
    set_message(message, message_size, "the TOSA FlatBuffer is empty");
    return nullptr;
  }
  if (std::strcmp(profile, "pro_fp") != 0 && std::strcmp(profile, "pro_int") != 0) {
    set_message(message, message_size, std::string("profile '") + profile + "' is not one the reference model runs "
                                       "here (pro_fp, pro_int)");
    return nullptr;
  }
  etmlir_tosa_graph* graph = nullptr;
  try {
    graph = new etmlir_tosa_graph();
    graph->bytes.assign(data, data + size);
    // The FlatBuffers verifier with its default limits first: the serializer's own call lifts the
    // size limit, which turns some of the verifier's structure checks off.
    flatbuffers::Verifier verifier(graph->bytes.data(), graph->bytes.size());
    if (size < 8 || !tosa::TosaGraphBufferHasIdentifier(graph->bytes.data()) ||
        !tosa::VerifyTosaGraphBuffer(verifier)) {
      set_message(message, message_size, "the body is not a TOSA FlatBuffer (identifier or FlatBuffers verifier)");
      delete graph;
      return nullptr;
    }
    std::string field_problem;
    if (!check_fields(tosa::GetTosaGraph(graph->bytes.data()), &field_problem)) {
      set_message(message, message_size, "the body is not a complete TOSA graph: " + field_problem);
      delete graph;
      return nullptr;
    }
    int signal_number = 0;
    if (!survives_reading(graph->bytes, region, profile, &signal_number)) {
      set_message(message, message_size, "the TOSA graph is damaged: the reference model crashes reading it (signal " +
                                             std::to_string(signal_number) + ")");
      delete graph;
      return nullptr;
    }
    tosa::tosa_err_t loaded = graph->handler.LoadFileTosaFlatbuffer(graph->bytes.data(), graph->bytes.size());
    if (loaded != tosa::TOSA_OK) {
      set_message(message, message_size, "the body is not a TOSA FlatBuffer this reference model reads (error " +
                                             std::to_string(static_cast<int>(loaded)) + ")");
      delete graph;
      return nullptr;
    }
    tosa::TosaSerializationBasicBlock* block = nullptr;
    std::string why;
    if (!check_graph(graph->handler, region, profile, &block, &why)) {
      set_message(message, message_size, why);
      delete graph;
      return nullptr;
    }
    graph->input_names = block->GetInputs();
    graph->output_names = block->GetOutputs();
    for (auto [names, infos] : {std::pair{&graph->input_names, &graph->inputs},
                                std::pair{&graph->output_names, &graph->outputs}}) {
      for (const std::string& name : *names) {
        etmlir_tosa_tensor_info info{};
        if (!describe(*block->GetTensorByName(name), &info, &why)) {
          set_message(message, message_size, "graph tensor '" + name + "' " + why);
          delete graph;
          return nullptr;
        }
        infos->push_back(info);
      }
    }
    graph->block = block;
    graph->runner = std::make_unique<TosaReference::IModelRunner>();
    GraphStatus status = graph->runner->initialize(*block);
    if (status != GraphStatus::TOSA_VALID) {
      set_message(message, message_size, status == GraphStatus::TOSA_ERROR
                                              ? "the reference model refused the graph (an ERROR_IF of the spec)"
                                              : "the reference model found the graph's result unpredictable");
      delete graph;
      return nullptr;
    }
    graph->fresh = true;
    g_current = graph;
  } catch (const std::exception& error) {
    set_message(message, message_size, std::string("the reference model failed: ") + error.what());
    delete graph;
    return nullptr;
  } catch (...) {
    set_message(message, message_size, "the reference model failed");
    delete graph;
    return nullptr;
  }
  return graph;
}

__attribute__((visibility("default"))) uint32_t etmlir_tosa_graph_num_inputs(const etmlir_tosa_graph* graph) {
  return static_cast<uint32_t>(graph->inputs.size());
}

__attribute__((visibility("default"))) uint32_t etmlir_tosa_graph_num_outputs(const etmlir_tosa_graph* graph) {
  return static_cast<uint32_t>(graph->outputs.size());
}

__attribute__((visibility("default"))) int etmlir_tosa_graph_input_info(const etmlir_tosa_graph* graph, uint32_t index,
                                                                       etmlir_tosa_tensor_info* out) {
  if (index >= graph->inputs.size()) return -1;
  *out = graph->inputs[index];
  return 0;
}

__attribute__((visibility("default"))) int etmlir_tosa_graph_output_info(const etmlir_tosa_graph* graph,
                                                                        uint32_t index, etmlir_tosa_tensor_info* out) {
  if (index >= graph->outputs.size()) return -1;
  *out = graph->outputs[index];
  return 0;
}

__attribute__((visibility("default"))) int etmlir_tosa_graph_run(etmlir_tosa_graph* graph, const void* const* inputs,
                                                                void* const* outputs, char* message,
                                                                size_t message_size) {
  std::lock_guard<std::mutex> lock(g_lock);
  g_captured.clear();
  try {
    if (g_current != graph || !graph->fresh) {
      // A reference model runner runs once: after run() its input tensors are no longer
      // allocated, and building another graph's runner leaves this one's unallocated too. So a
      // graph's runner is rebuilt before every run but the first after it was built (one graph
      // runs at a time: g_lock).
      graph->runner = std::make_unique<TosaReference::IModelRunner>();
      if (graph->runner->initialize(*graph->block) != GraphStatus::TOSA_VALID) {
        set_message(message, message_size, "the reference model could not rebuild the graph");
        return -1;
      }
      graph->fresh = true;
      g_current = graph;
    }
    for (size_t i = 0; i < graph->inputs.size(); ++i) {
      if (graph->runner->setInput(graph->input_names[i], static_cast<uint8_t*>(const_cast<void*>(inputs[i])),
                                 graph->inputs[i].nbytes) != 0) {
        set_message(message, message_size, "the reference model refused input '" + graph->input_names[i] + "'");
        return -1;
      }
    }
    graph->fresh = false;
    GraphStatus status = graph->runner->run();
    if (status != GraphStatus::TOSA_VALID) {
      set_message(message, message_size, status == GraphStatus::TOSA_ERROR
                                             ? "the graph failed (an ERROR_IF of the spec)"
                                             : "the graph's result is unpredictable (a REQUIRE of the spec)");
      return -1;
    }
    for (size_t i = 0; i < graph->outputs.size(); ++i) {
      if (graph->runner->getOutput(graph->output_names[i], static_cast<uint8_t*>(outputs[i]),
                                  graph->outputs[i].nbytes) != 0) {
        set_message(message, message_size, "the reference model gave no output '" + graph->output_names[i] + "'");
        return -1;
      }
    }
  } catch (const std::exception& error) {
    set_message(message, message_size, std::string("the reference model failed: ") + error.what());
    return -1;
  } catch (...) {
    set_message(message, message_size, "the reference model failed");
    return -1;
  }
  return 0;
}

__attribute__((visibility("default"))) void etmlir_tosa_graph_destroy(etmlir_tosa_graph* graph) {
  std::lock_guard<std::mutex> lock(g_lock);
  if (g_current == graph) g_current = nullptr;
  delete graph;
}

}  // extern "C"
