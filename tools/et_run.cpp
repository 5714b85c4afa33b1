// et-run: load a .pte, run one method on the C++ runtime, print its outputs
// and how long execute() took.
//
//   et-run model.pte [--inputs inputs.npz] [--iterations N] [--warmup N] [--method NAME]
//                    [--temp-bytes N] [--loader mmap|file] [--seed N] [--int-bound N]
//                    [--backend-threads N]   (--cpu-threads N: the same)
//                    [--allow-native] [--trusted-key KEY.pub]...
//                    [--trace out.ettrace [--trace-events N]]
//   et-run model.pte --verify [--method NAME] [...]
//
// --verify runs the test cases a bundled program carries (etmlir.devtools.bundle;
// include/etmlir/runtime/bundled.h) instead of timing a method, and reports each
// output's error against what the case expects; it exits 1 when a case fails.
//
// --trace records the timed runs' events (every instruction, delegate call and
// op a backend reports inside one; include/etmlir/runtime/event_tracer.h) into
// one trace file (runtime/schema/trace.fbs), which etmlir.runtime.load_trace,
// etmlir.devtools.Inspector and et-inspect --trace read.
//
// A delegate whose payload is native code (the "cpu" backend's shared object)
// is refused unless --allow-native says the file is trusted, or the payload is
// signed (et-sign) by a key given with --trusted-key (native_code.h).
//
// Delegates run on every backend the build compiles in (etmlir::register_backends,
// the CMake list ETMLIR_BACKENDS). Like an embedded application would, it gives
// the runtime all of its memory up front: the method allocator
// (MethodMeta::method_allocator_bytes(backends): the method's tables and its
// delegates' state),
// one buffer per planned arena, the kernels' temp allocator and buffers for
// unplanned outputs are allocated before the first execute(); execute()
// itself allocates nothing. This file is setup code: it uses the heap and
// std:: containers, but no exceptions or RTTI (it builds with the runtime's
// flags).
//
// Exit status: 0 on success, 1 on an error (unreadable or invalid file, an
// input that does not fit the method, a kernel failure), 2 on a usage error.
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "etmlir/register_backends.h"
#include "etmlir/runtime/backend.h"
#include "etmlir/runtime/bundled.h"
#include "etmlir/runtime/data_loader.h"
#include "etmlir/runtime/event_tracer.h"
#include "etmlir/runtime/half.h"
#include "etmlir/runtime/kernel.h"
#include "etmlir/runtime/method.h"
#include "etmlir/runtime/native_code.h"
#include "etmlir/runtime/platform.h"
#include "etmlir/runtime/program.h"
#include "cli_support.h"
#include "npz.h"
#include "portable_kernels.h"
#include "trace_file.h"

using namespace etmlir;

namespace {

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;
constexpr size_t kMaxPrintedValues = 8;
constexpr uint64_t kMaxRuns = 10000000;
constexpr uint64_t kMaxTraceEvents = uint64_t{1} << 30;  // 40 GiB of events: a typo, not a plan

const char kUsage[] =
    "usage: et-run MODEL.pte [options]\n"
    "\n"
    "Loads MODEL.pte, runs one method on the etmlir C++ runtime (portable kernels\n"
    "on one thread; delegates on the backends this build compiles in), prints its\n"
    "outputs (dtype, shape, first values) and the latency of execute() over the\n"
    "timed iterations.\n"
    "\n"
    "options:\n"
    "  --inputs FILE       inputs from an .npz written by np.savez(FILE, *arrays):\n"
    "                      arr_0 feeds input 0, arr_1 input 1, ...; an .npz with\n"
    "                      other keys feeds inputs in sorted key order. A single\n"
    "                      .npy file feeds a one-input method. np.savez_compressed\n"
    "                      files are not supported. Without --inputs, inputs are\n"
    "                      deterministic pseudo-random values: floats in [-1, 1],\n"
    "                      ints in [0, --int-bound), bools 0/1, dynamic dims at\n"
    "                      their upper bound.\n"
    "  --iterations N      timed runs (default 10, 1 to 10000000)\n"
    "  --warmup N          untimed runs before them (default 2, at most 10000000)\n"
    "  --method NAME       method to run (default: forward, or the only method)\n"
    "  --temp-bytes N      kernel scratch (temp allocator) size; suffix K, M or G\n"
    "                      for KiB, MiB, GiB (default 64M)\n"
    "  --loader mmap|file  read the program by mmap (default) or by read() into\n"
    "                      heap buffers\n"
    "  --seed N            seed of the pseudo-random inputs and of the method's\n"
    "                      random generator (rand, randn, randperm, dropout),\n"
    "                      reseeded before every run, so each run draws the same\n"
    "                      numbers (default 0)\n"
    "  --int-bound N       integer pseudo-random inputs lie in [0, N) (default 2)\n"
    "  --backend-threads N threads a delegate call may run on, the calling thread\n"
    "                      included (1 to 256, default 1; backends that run on one\n"
    "                      thread ignore it)\n"
    "  --cpu-threads N     the same as --backend-threads N\n"
    "  --allow-native      run delegates whose payload is native code (a \"cpu\"\n"
    "                      delegate's shared object) whether signed or not: only\n"
    "                      for a file you trust as you would a program\n"
    "  --trusted-key FILE  run native payloads signed by this public key (a file\n"
    "                      et-sign keygen writes); repeatable. Without either,\n"
    "                      native payloads are refused\n"
    "  --trace FILE        record the timed runs' events (each instruction, each\n"
    "                      delegate call and the ops its backend reports inside\n"
    "                      it) into the trace file FILE (.ettrace; read it with\n"
    "                      et-inspect --trace or etmlir.runtime.load_trace). If\n"
    "                      the event buffer fills up, the events that fit are\n"
    "                      written (the file counts the dropped ones) and et-run\n"
    "                      exits 1 saying how big a buffer would hold them all\n"
    "  --trace-events N    the event buffer's size (default: 2 per instruction\n"
    "                      plus 4096 per delegate, per timed run; 65536 to\n"
    "                      4194304; at most 1073741824)\n"
    "  --verify            run the test cases a bundled program carries (made by\n"
    "                      etmlir.devtools.bundle; with --method, those of that\n"
    "                      method) and report each output's error against the\n"
    "                      expected one; exit 1 if any case fails\n"
    "  -h, --help          this text\n"
    "\n"
    "exit status: 0 ok, 1 error (bad file, input mismatch, kernel failure),\n"
    "2 usage error\n";

struct Options {
  const char* model = nullptr;
  const char* inputs = nullptr;
  const char* method = nullptr;
  uint64_t iterations = 10;
  uint64_t warmup = 2;
  uint64_t temp_bytes = uint64_t{64} << 20;
  bool mmap = true;
  uint64_t seed = 0;
  uint64_t int_bound = 2;
  uint64_t backend_threads = 1;
  bool allow_native = false;
  std::vector<const char*> trusted_keys;  // public key files
  const char* trace = nullptr;            // --trace FILE
  uint64_t trace_events = 0;              // --trace-events N
  bool trace_events_given = false;        // else devtools::default_trace_events
  bool verify = false;                    // --verify
};

// Every message is one line: names from a corrupt file or an argument may hold newlines or
// escapes (tools::one_line makes them \xNN).
void print_line(const char* prefix, const char* fmt, va_list args, const char* suffix) {
  char message[2048];
  std::vsnprintf(message, sizeof(message), fmt, args);
  std::fprintf(stderr, "et-run: %s%s%s\n", prefix, tools::one_line(message).c_str(), suffix);
}

int usage_error(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
int usage_error(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  print_line("", fmt, args, " (et-run --help for usage)");
  va_end(args);
  return kExitUsage;
}

int fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
int fail(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  print_line("error: ", fmt, args, "");
  va_end(args);
  return kExitError;
}

// A --trusted-key file: the public key et-sign keygen writes (parse_trusted_key).
Error read_trusted_key(const char* path, TrustedKey* out) {
  std::FILE* f = std::fopen(path, "rb");
  if (f == nullptr) return Error::make(ErrorCode::Io, "--trusted-key %s: cannot open: %s", path, std::strerror(errno));
  char text[1024];
  size_t size = std::fread(text, 1, sizeof(text), f);
  bool more = size == sizeof(text) && std::fgetc(f) != EOF;
  bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return Error::make(ErrorCode::Io, "--trusted-key %s: cannot read it", path);
  if (more)
    return Error::make(ErrorCode::InvalidArgument, "--trusted-key %s: over %zu bytes, not a public key file", path,
                       sizeof(text));
  Error e = parse_trusted_key(text, size, out);
  if (e) e.prefix("--trusted-key %s", path);
  return e;
}

// 0: parsed; -1: --help; otherwise the exit status of a usage error.
int parse_options(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    if (std::strcmp(arg, "-h") == 0 || std::strcmp(arg, "--help") == 0) return -1;
    if (std::strncmp(arg, "--", 2) != 0 || arg[2] == '\0') {
      if (arg[0] == '-' && arg[1] != '\0') return usage_error("unknown option '%s'", arg);
      if (o->model != nullptr) return usage_error("more than one model given ('%s' and '%s')", o->model, arg);
      o->model = arg;
      continue;
    }
    // --name VALUE or --name=VALUE
    std::string name(arg);
    const char* value = nullptr;
    size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = arg + eq + 1;
      name.resize(eq);
    }
    if (name == "--allow-native" || name == "--verify") {
      if (value != nullptr) return usage_error("%s takes no value", name.c_str());
      (name == "--verify" ? o->verify : o->allow_native) = true;
      continue;
    }
    static const char* const kKnown[] = {"--inputs", "--iterations", "--warmup", "--method", "--temp-bytes",
                                         "--loader", "--seed",       "--int-bound",  "--cpu-threads",
                                         "--backend-threads", "--trusted-key", "--trace", "--trace-events"};
    bool known = false;
    for (const char* k : kKnown) known = known || name == k;
    if (!known) return usage_error("unknown option '%s'", name.c_str());
    if (value == nullptr) {
      if (i + 1 >= argc) return usage_error("%s needs a value", name.c_str());
      value = argv[++i];
    }
    if (name == "--inputs") {
      o->inputs = value;
    } else if (name == "--trusted-key") {
      o->trusted_keys.push_back(value);
    } else if (name == "--trace") {
      if (value[0] == '\0') return usage_error("--trace needs a file name");
      o->trace = value;
    } else if (name == "--method") {
      o->method = value;
    } else if (name == "--loader") {
      if (std::strcmp(value, "mmap") == 0) {
        o->mmap = true;
      } else if (std::strcmp(value, "file") == 0) {
        o->mmap = false;
      } else {
        return usage_error("--loader takes mmap or file, not '%s'", value);
      }
    } else if (name == "--temp-bytes") {
      if (!tools::parse_count(value, true, &o->temp_bytes))
        return usage_error("--temp-bytes takes a byte count (like 1048576 or 64M), not '%s'", value);
    } else {
      uint64_t* target = name == "--trace-events"                              ? &o->trace_events
                         : name == "--iterations"                              ? &o->iterations
                         : name == "--warmup"                                  ? &o->warmup
                         : name == "--seed"                                    ? &o->seed
                         : name == "--cpu-threads" || name == "--backend-threads" ? &o->backend_threads
                                                                               : &o->int_bound;
      if (!tools::parse_count(value, false, target))
        return usage_error("%s takes a non-negative integer, not '%s'", name.c_str(), value);
      if (target == &o->trace_events) o->trace_events_given = true;
    }
  }
  if (o->model == nullptr) return usage_error("no model given");
  if (o->verify && (o->inputs != nullptr || o->trace != nullptr))
    return usage_error("--verify runs the program's own test cases: it takes no --inputs or --trace");
  if (o->iterations == 0) return usage_error("--iterations must be at least 1");
  // Each timed run keeps its time (8 bytes) for the median: bounded so that the list always fits.
  if (o->iterations > kMaxRuns || o->warmup > kMaxRuns)
    return usage_error("--iterations and --warmup take at most %" PRIu64 " runs each", kMaxRuns);
  if (o->int_bound == 0) return usage_error("--int-bound must be at least 1");
  if (o->trace_events_given) {
    if (o->trace == nullptr) return usage_error("--trace-events needs --trace FILE");
    if (o->trace_events < 1 || o->trace_events > kMaxTraceEvents)
      return usage_error("--trace-events must be 1 to %" PRIu64 ", not %" PRIu64, kMaxTraceEvents, o->trace_events);
  }
  if (o->backend_threads < 1 || o->backend_threads > static_cast<uint64_t>(kMaxBackendThreads))
    return usage_error("--backend-threads (--cpu-threads) must be 1 to %d, not %" PRIu64, kMaxBackendThreads,
                       o->backend_threads);
  return 0;
}

// ---- Memory --------------------------------------------------------------------

struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<uint8_t, FreeDeleter>;

// 64-byte aligned, or null when out of memory.
Buffer allocate_aligned(size_t size) {
  void* p = nullptr;
  if (posix_memalign(&p, 64, size == 0 ? 1 : size) != 0) return Buffer();
  return Buffer(static_cast<uint8_t*>(p));
}

// ---- Values ------------------------------------------------------------------------

// Truncating float -> half for values in [-1, 1] (tiny ones flush to zero).
uint16_t float_to_half_truncating(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  int32_t exp = static_cast<int32_t>((bits >> 23) & 0xFF) - 127 + 15;
  if (exp <= 0) return sign;
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7C00);
  return static_cast<uint16_t>(sign | (exp << 10) | ((bits >> 13) & 0x3FF));
}

// Element `i` of `data` as text (floats with 7 significant digits).
std::string format_element(ScalarType dtype, const void* data, size_t i) {
  char buffer[64];
  switch (dtype) {
    case ScalarType::Float: std::snprintf(buffer, sizeof(buffer), "%.7g", static_cast<const float*>(data)[i]); break;
    case ScalarType::Double: std::snprintf(buffer, sizeof(buffer), "%.10g", static_cast<const double*>(data)[i]); break;
    case ScalarType::Half:
      std::snprintf(buffer, sizeof(buffer), "%.5g", half_to_float(static_cast<const uint16_t*>(data)[i]));
      break;
    case ScalarType::BFloat16:
      std::snprintf(buffer, sizeof(buffer), "%.4g", bfloat16_to_float(static_cast<const uint16_t*>(data)[i]));
      break;
    case ScalarType::Int64:
      std::snprintf(buffer, sizeof(buffer), "%" PRId64, static_cast<const int64_t*>(data)[i]);
      break;
    case ScalarType::Int32:
      std::snprintf(buffer, sizeof(buffer), "%" PRId32, static_cast<const int32_t*>(data)[i]);
      break;
    case ScalarType::Int16: std::snprintf(buffer, sizeof(buffer), "%d", static_cast<const int16_t*>(data)[i]); break;
    case ScalarType::Int8: std::snprintf(buffer, sizeof(buffer), "%d", static_cast<const int8_t*>(data)[i]); break;
    case ScalarType::UInt8: std::snprintf(buffer, sizeof(buffer), "%u", static_cast<const uint8_t*>(data)[i]); break;
    case ScalarType::Bool:
      std::snprintf(buffer, sizeof(buffer), "%s", static_cast<const uint8_t*>(data)[i] ? "true" : "false");
      break;
  }
  return buffer;
}

// "float32[8, 784]" ("<=" marks a dim that may vary up to its bound, when `bounded` is given).
std::string format_sizes(ScalarType dtype, const int64_t* sizes, size_t dim, const bool* bounded = nullptr) {
  char buffer[512];  // kMaxDims dims of 20 digits fit
  return format_shape(dtype, sizes, dim, bounded, buffer, sizeof(buffer));
}

std::string describe_info(const MethodMeta::TensorInfo& info) {
  bool varies[kMaxDims];
  for (int32_t d = 0; d < info.dim; ++d) varies[d] = info.dim_varies(d);
  return format_sizes(info.dtype, info.sizes, static_cast<size_t>(info.dim), varies) +
         (info.planned ? "" : " (unplanned)");
}

// "float32[8, 10]: [v0, ..., v7, ...] (80 values)"
std::string describe_tensor(const Tensor& t) {
  std::string out = format_sizes(t.dtype(), t.sizes(), static_cast<size_t>(t.dim())) + ": [";
  size_t numel = static_cast<size_t>(t.numel());
  size_t shown = std::min(numel, kMaxPrintedValues);
  for (size_t i = 0; i < shown; ++i) {
    if (i > 0) out += ", ";
    out += format_element(t.dtype(), t.data(), i);
  }
  if (shown < numel) out += ", ...";
  return out + "] (" + tools::grouped(numel) + (numel == 1 ? " value)" : " values)");
}

std::string describe_value(const EValue& v) {
  char buffer[64];
  switch (v.tag) {
    case Tag::Tensor: return describe_tensor(v.to_tensor());
    case Tag::Int: std::snprintf(buffer, sizeof(buffer), "int %" PRId64, v.to_int()); return buffer;
    case Tag::Double: std::snprintf(buffer, sizeof(buffer), "double %.10g", v.to_double()); return buffer;
    case Tag::Bool: return v.to_bool() ? "bool true" : "bool false";
    case Tag::None: return "None";
    case Tag::TensorList: {
      std::string out = "tensor list of " + std::to_string(v.to_tensor_list().size());
      size_t k = 0;
      for (Tensor* t : v.to_tensor_list()) out += "\n    [" + std::to_string(k++) + "] " + describe_tensor(*t);
      return out;
    }
    default: return tag_name(v.tag);
  }
}

// splitmix64: deterministic across platforms.
struct Random {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1].
  double unit() { return static_cast<double>(next() >> 11) * (2.0 / 9007199254740991.0) - 1.0; }
};

void fill_random(ScalarType dtype, void* data, size_t numel, uint64_t int_bound, Random& rng) {
  for (size_t i = 0; i < numel; ++i) {
    switch (dtype) {
      case ScalarType::Float: static_cast<float*>(data)[i] = static_cast<float>(rng.unit()); break;
      case ScalarType::Double: static_cast<double*>(data)[i] = rng.unit(); break;
      case ScalarType::Half: static_cast<uint16_t*>(data)[i] = float_to_half_truncating(static_cast<float>(rng.unit())); break;
      case ScalarType::BFloat16: {
        float f = static_cast<float>(rng.unit());
        uint32_t bits;
        std::memcpy(&bits, &f, sizeof(bits));
        static_cast<uint16_t*>(data)[i] = static_cast<uint16_t>(bits >> 16);
        break;
      }
      case ScalarType::Int64: static_cast<int64_t*>(data)[i] = static_cast<int64_t>(rng.next() % int_bound); break;
      case ScalarType::Int32:
        static_cast<int32_t*>(data)[i] = static_cast<int32_t>(rng.next() % std::min<uint64_t>(int_bound, INT32_MAX));
        break;
      case ScalarType::Int16:
        static_cast<int16_t*>(data)[i] = static_cast<int16_t>(rng.next() % std::min<uint64_t>(int_bound, INT16_MAX));
        break;
      case ScalarType::Int8:
        static_cast<int8_t*>(data)[i] = static_cast<int8_t>(rng.next() % std::min<uint64_t>(int_bound, INT8_MAX));
        break;
      case ScalarType::UInt8:
        static_cast<uint8_t*>(data)[i] = static_cast<uint8_t>(rng.next() % std::min<uint64_t>(int_bound, 256));
        break;
      case ScalarType::Bool: static_cast<uint8_t*>(data)[i] = static_cast<uint8_t>(rng.next() & 1); break;
    }
  }
}

// --trace's event buffer and tracer (allocated before the runs; execute() allocates nothing).
struct TraceBuffer {
  Buffer events;
  std::unique_ptr<EventTracer> tracer;

  Error allocate(size_t count) {
    static_assert(std::is_trivially_copyable<TraceEvent>::value, "TraceEvent is filled by EventTracer::begin");
    events = allocate_aligned(count * sizeof(TraceEvent));
    if (!events)
      return Error::make(ErrorCode::OutOfMemory, "cannot allocate an event buffer of %zu events (%zu bytes)", count,
                         count * sizeof(TraceEvent));
    tracer.reset(new EventTracer(Span<TraceEvent>(reinterpret_cast<TraceEvent*>(events.get()), count)));
    return Error::ok();
  }
};

// The trace file of --trace: the tracer's events for `method`, the program's SHA-256, this host.
Error write_trace(const Options& o, const char* method, const EventTracer& tracer) {
  devtools::TraceFileInfo info;
  info.writer = "et-run";
  info.program_path = o.model;
  info.backend_threads = static_cast<uint32_t>(o.backend_threads);
  if (Error e = devtools::sha256_file(o.model, &info.program_sha256)) return e;
  std::vector<devtools::MethodTraceData> methods{devtools::method_trace(method, tracer)};
  if (Error e = devtools::write_trace_file(o.trace, info, methods)) return e;
  std::printf("trace: %s (%zu events, %" PRIu64 " dropped, %u runs)\n", o.trace, tracer.events().size(),
              tracer.dropped_events(), tracer.run());
  return Error::ok();
}

// Everything one method needs allocated before its first execute(): the method allocator (its
// tables plus what its delegates' backends keep), one buffer per planned arena, the kernels' temp
// allocator and buffers for unplanned outputs.
struct MethodMemory {
  Buffer method_buffer;
  Buffer temp_buffer;
  std::unique_ptr<MemoryAllocator> method_allocator;
  std::unique_ptr<MemoryAllocator> temp_allocator;
  std::vector<Buffer> arenas;
  std::vector<Span<uint8_t>> arena_spans;
  std::vector<Buffer> output_buffers;
  MemoryManager memory;
  std::string summary;  // "method allocator N B, arena 0 'x' N B, temp N B"

  Error allocate(const MethodMeta& meta, const BackendRegistry& backends, const KernelRegistry& kernels,
                 uint64_t temp_bytes) {
    Result<size_t> method_allocator_bytes = meta.method_allocator_bytes(&backends, &kernels);
    if (!method_allocator_bytes.ok()) return method_allocator_bytes.error();
    size_t method_bytes = method_allocator_bytes.get();
    method_buffer = allocate_aligned(method_bytes);
    if (!method_buffer)
      return Error::make(ErrorCode::OutOfMemory, "out of memory for the method allocator (%zu bytes)", method_bytes);
    temp_buffer = allocate_aligned(static_cast<size_t>(temp_bytes));
    if (!temp_buffer)
      return Error::make(ErrorCode::OutOfMemory,
                         "cannot allocate the temp allocator's %s bytes (--temp-bytes): out of memory",
                         tools::grouped(temp_bytes).c_str());
    method_allocator.reset(new MemoryAllocator(method_buffer.get(), method_bytes));
    temp_allocator.reset(new MemoryAllocator(temp_buffer.get(), static_cast<size_t>(temp_bytes)));
    summary = "method allocator " + tools::grouped(method_bytes) + " B";
    for (size_t i = 0; i < meta.num_arenas(); ++i) {
      size_t size = static_cast<size_t>(meta.arena_size(i));
      arenas.push_back(allocate_aligned(size));
      if (!arenas.back()) return Error::make(ErrorCode::OutOfMemory, "out of memory for arena %zu (%zu bytes)", i, size);
      arena_spans.emplace_back(arenas.back().get(), size);
      summary += ", arena " + std::to_string(i) + " '" + meta.arena_name(i) + "' " + tools::grouped(size) + " B";
    }
    summary += ", temp " + tools::grouped(temp_bytes) + " B";
    memory.method_allocator = method_allocator.get();
    memory.planned_arenas = Span<Span<uint8_t>>(arena_spans.data(), arena_spans.size());
    memory.temp_allocator = temp_allocator.get();
    return Error::ok();
  }

  // Gives each unplanned output of the loaded `method` a buffer of its largest size.
  Error give_outputs(Method& method, const MethodMeta& meta) {
    for (size_t i = 0; i < meta.num_outputs(); ++i) {
      MethodMeta::TensorInfo info;
      if (!meta.output_tensor(i, &info) || info.planned) continue;
      size_t n = element_size(info.dtype);
      for (int32_t d = 0; d < info.dim; ++d) n *= static_cast<size_t>(info.sizes[d]);
      output_buffers.push_back(allocate_aligned(n));
      if (!output_buffers.back())
        return Error::make(ErrorCode::OutOfMemory, "out of memory for output %zu (%zu bytes)", i, n);
      if (Error e = method.set_output_buffer(i, output_buffers.back().get(), n)) return e;
    }
    return Error::ok();
  }
};

// "[1, 0, 3]": the index of flat element `flat` of a contiguous tensor with these sizes.
std::string unflatten(uint64_t flat, const int64_t* sizes, size_t dim) {
  std::vector<uint64_t> index(dim);
  for (size_t d = dim; d-- > 0;) {
    uint64_t s = sizes[d] > 0 ? static_cast<uint64_t>(sizes[d]) : 1;
    index[d] = flat % s;
    flat /= s;
  }
  std::string out = "[";
  for (size_t d = 0; d < dim; ++d) out += (d ? ", " : "") + std::to_string(index[d]);
  return out + "]";
}

// --verify: every bundled test case (of --method, when given) on a freshly loaded method.
int verify(const Options& o, const Program& program, const KernelRegistry& kernels, const BackendRegistry& backends,
           const NativeCodeTrust& trust) {
  Result<BundledCases> cases = BundledCases::load(program);
  if (!cases.ok()) return fail("%s: %s", o.model, cases.error().message());
  if (cases->size() == 0)
    return fail("%s carries no bundled test cases (add them with etmlir.devtools.bundle)", o.model);
  size_t ran = 0, passed = 0;
  for (size_t c = 0; c < cases->size(); ++c) {
    const char* method_name = cases->method(c);
    if (o.method != nullptr && std::strcmp(o.method, method_name) != 0) continue;
    ++ran;
    std::string label = "case " + std::to_string(c) + (cases->name(c)[0] ? std::string(" '") + cases->name(c) + "'" : "") +
                        " (method '" + method_name + "')";
    Result<MethodMeta> meta = program.method_meta(method_name);
    if (!meta.ok()) return fail("%s: %s", label.c_str(), meta.error().message());
    MethodMemory memory;
    if (Error e = memory.allocate(*meta, backends, kernels, o.temp_bytes)) return fail("%s: %s", label.c_str(), e.message());
    Result<Method> method = program.load_method(method_name, &memory.memory, &kernels, &backends, &trust);
    if (!method.ok()) return fail("%s: %s", label.c_str(), method.error().message());
    if (Error e = memory.give_outputs(*method, *meta)) return fail("%s: %s", label.c_str(), e.message());
    if (Error e = cases->set_inputs(*method, c)) return fail("%s", e.message());
    method->set_seed(o.seed);
    if (Error e = method->execute()) {
      std::printf("  %s: FAIL: %s\n", label.c_str(), e.message());
      continue;
    }
    std::vector<BundledOutputCheck> checks(cases->num_outputs(c));
    Result<bool> ok = cases->check_outputs(*method, c, Span<BundledOutputCheck>(checks.data(), checks.size()));
    if (!ok.ok()) return fail("%s: %s", label.c_str(), ok.error().message());
    std::printf("  %s: %s (atol %g, rtol %g)\n", label.c_str(), ok.get() ? "pass" : "FAIL", cases->atol(c),
                cases->rtol(c));
    for (size_t k = 0; k < checks.size(); ++k) {
      const BundledOutputCheck& check = checks[k];
      if (check.problem[0] != '\0') {
        std::printf("    output %zu: %s\n", k, check.problem);
        continue;
      }
      const Tensor& t = method->output(k).to_tensor();
      std::string line;
      char numbers[200];
      std::snprintf(numbers, sizeof(numbers), "%s: max abs error %.3g, %s of %s elements outside tolerance",
                    format_sizes(t.dtype(), t.sizes(), static_cast<size_t>(t.dim())).c_str(), check.max_abs_error,
                    tools::grouped(check.mismatched).c_str(), tools::grouped(check.numel).c_str());
      line = numbers;
      if (check.mismatched > 0) {
        std::snprintf(numbers, sizeof(numbers), "; worst at %s: %.7g, expected %.7g",
                      unflatten(check.worst_index, t.sizes(), static_cast<size_t>(t.dim())).c_str(), check.worst_actual,
                      check.worst_expected);
        line += numbers;
      }
      std::printf("    output %zu %s\n", k, line.c_str());
    }
    if (ok.get()) ++passed;
  }
  if (ran == 0) return fail("%s has no bundled test case for method '%s'", o.model, o.method);
  std::printf("verify: %zu of %zu case%s passed\n", passed, ran, ran == 1 ? "" : "s");
  return passed == ran ? 0 : kExitError;
}

// One method input, owned here until the run ends.
struct Input {
  ScalarType dtype;
  std::vector<int64_t> sizes;
  Buffer data;
  size_t nbytes;
  std::string source;  // "x.npz:arr_0" or "random"
};

int run(const Options& o) {
  // ---- Program ----
  std::unique_ptr<DataLoader> loader;
  if (o.mmap) {
    Result<MmapDataLoader> opened = MmapDataLoader::open(o.model);
    if (!opened.ok()) return fail("%s", opened.error().message());
    loader.reset(new MmapDataLoader(static_cast<MmapDataLoader&&>(opened.get())));
  } else {
    Result<FileDataLoader> opened = FileDataLoader::open(o.model);
    if (!opened.ok()) return fail("%s", opened.error().message());
    loader.reset(new FileDataLoader(static_cast<FileDataLoader&&>(opened.get())));
  }
  Result<Program> program = Program::load(loader.get());
  if (!program.ok()) return fail("%s: %s", o.model, program.error().message());

  // ---- Kernels, backends, trust in native code (--allow-native, --trusted-key; native_code.h) ----
  std::unique_ptr<KernelRegistry> kernels(new KernelRegistry());
  if (Error e = register_prim_kernels(*kernels)) return fail("registering kernels: %s", e.message());
  if (Error e = register_portable_kernels(*kernels)) return fail("registering kernels: %s", e.message());
  BackendRegistry backends;
  BackendOptions backend_options;
  backend_options.threads = static_cast<int>(o.backend_threads);
  if (Error e = register_backends(backends, backend_options)) return fail("%s", e.message());
  std::vector<TrustedKey> trusted_keys(o.trusted_keys.size());
  for (size_t i = 0; i < o.trusted_keys.size(); ++i) {
    if (Error e = read_trusted_key(o.trusted_keys[i], &trusted_keys[i])) return fail("%s", e.message());
  }
  NativeCodeTrust trust;
  trust.allow_native_code = o.allow_native;
  trust.trusted_keys = Span<const TrustedKey>(trusted_keys.data(), trusted_keys.size());
  if (o.verify) {
    std::printf("program: %s (%s bytes): its bundled test cases\n", o.model, tools::grouped(loader->size()).c_str());
    return verify(o, *program, *kernels, backends, trust);
  }

  std::string methods;
  const char* method_name = o.method;
  for (size_t i = 0; i < program->num_methods(); ++i) {
    methods += std::string(i ? ", " : "") + program->method_name(i);
    if (o.method == nullptr && std::strcmp(program->method_name(i), "forward") == 0) method_name = "forward";
  }
  if (method_name == nullptr) {
    if (program->num_methods() != 1)
      return fail("%s has no method 'forward'; pick one with --method (methods: %s)", o.model, methods.c_str());
    method_name = program->method_name(0);
  }
  Result<MethodMeta> meta = program->method_meta(method_name);
  if (!meta.ok())
    return fail("%s has no method '%s' (methods: %s)", o.model, method_name,
                methods.empty() ? "none" : methods.c_str());

  std::printf("program: %s (%s bytes, %s loader), methods: %s\n", o.model, tools::grouped(loader->size()).c_str(),
              o.mmap ? "mmap" : "file", methods.c_str());
  std::printf("method '%s': %zu instructions, %zu operators\n", method_name, meta->num_instructions(),
              meta->num_operators());
  if (meta->num_operators() > 0) {
    std::string ops;
    char name[256];
    for (size_t i = 0; i < meta->num_operators(); ++i)
      ops += std::string(i ? ", " : "") + meta->operator_name(i, name, sizeof(name));
    std::printf("  operators: %s\n", ops.c_str());
  }
  std::vector<MethodMeta::TensorInfo> input_info(meta->num_inputs());
  for (size_t i = 0; i < meta->num_inputs(); ++i) {
    if (!meta->input_tensor(i, &input_info[i])) {
      std::printf("  input %zu: not a tensor\n", i);
      return fail("method '%s' input %zu is not a tensor; et-run feeds tensor inputs only", method_name, i);
    }
    std::printf("  input %zu: %s\n", i, describe_info(input_info[i]).c_str());
  }
  for (size_t i = 0; i < meta->num_outputs(); ++i) {
    MethodMeta::TensorInfo info;
    if (meta->output_tensor(i, &info)) {
      std::printf("  output %zu: %s\n", i, describe_info(info).c_str());
    } else {
      std::printf("  output %zu: not a tensor\n", i);
    }
  }

  // ---- Kernels ----
#ifdef ETMLIR_SELECTIVE_BUILD
  std::printf("kernels: %zu registered (selective build of %zu operators)\n", kernels->size(),
              sizeof(detail::kSelectedOperators) / sizeof(detail::kSelectedOperators[0]));
#else
  std::printf("kernels: %zu registered (all portable kernels)\n", kernels->size());
#endif

  // ---- Inputs (read and checked before any memory is planned) ----
  std::vector<Input> inputs;
  if (o.inputs != nullptr) {
    tools::NpzFile npz;
    if (Error e = tools::read_npz(o.inputs, &npz)) return fail("%s", e.message());
    tools::sort_for_inputs(&npz.arrays);
    if (npz.arrays.size() != meta->num_inputs()) {
      std::string keys;
      for (const tools::NpyArray& a : npz.arrays) keys += std::string(keys.empty() ? "" : ", ") + a.name;
      return fail("%s has %zu array%s (%s); method '%s' takes %zu input%s", o.inputs, npz.arrays.size(),
                  npz.arrays.size() == 1 ? "" : "s", keys.c_str(), method_name, meta->num_inputs(),
                  meta->num_inputs() == 1 ? "" : "s");
    }
    std::printf("inputs: from %s (arr_0 -> input 0, arr_1 -> input 1, ...; other keys in sorted order)\n", o.inputs);
    for (const tools::NpyArray& a : npz.arrays) {
      // An .npz array is "file.npz:key"; a lone .npy is named by its path.
      std::string source = a.name == o.inputs ? a.name : std::string(o.inputs) + ":" + a.name;
      Input in{a.dtype, a.shape, allocate_aligned(a.nbytes), a.nbytes, source};
      if (!in.data) return fail("out of memory for %s (%zu bytes)", in.source.c_str(), a.nbytes);
      if (a.nbytes) std::memcpy(in.data.get(), a.data, a.nbytes);
      inputs.push_back(std::move(in));
    }
  } else {
    std::printf(
        "inputs: pseudo-random (seed %" PRIu64 "): floats in [-1, 1], ints in [0, %" PRIu64
        "), bools 0/1, dynamic dims at their upper bound\n",
        o.seed, o.int_bound);
    Random rng{o.seed};
    for (const MethodMeta::TensorInfo& info : input_info) {
      std::vector<int64_t> sizes(info.sizes, info.sizes + info.dim);
      size_t numel = 1;
      for (int64_t s : sizes) numel *= static_cast<size_t>(s);
      size_t nbytes = numel * element_size(info.dtype);
      Input in{info.dtype, sizes, allocate_aligned(nbytes), nbytes, "random"};
      if (!in.data) return fail("out of memory for a random input (%zu bytes)", nbytes);
      fill_random(info.dtype, in.data.get(), numel, o.int_bound, rng);
      inputs.push_back(std::move(in));
    }
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::printf("  input %zu <- %s %s\n", i, inputs[i].source.c_str(),
                format_sizes(inputs[i].dtype, inputs[i].sizes.data(), inputs[i].sizes.size()).c_str());
  }

  // ---- Memory: everything the method will use, allocated now ----
  MethodMemory memory;
  if (Error e = memory.allocate(*meta, backends, *kernels, o.temp_bytes)) return fail("%s", e.message());
  std::printf("memory (allocated before execute): %s\n", memory.summary.c_str());
  Result<Method> method = program->load_method(method_name, &memory.memory, kernels.get(), &backends, &trust);
  if (!method.ok()) return fail("%s", method.error().message());
  if (Error e = memory.give_outputs(*method, *meta)) return fail("%s", e.message());

  // ---- Run ----
  // Inputs are set before every execute (outside the timed region): a planned
  // input's arena bytes may be reused by later instructions.
  auto set_inputs = [&]() -> Error {
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Input& in = inputs[i];
      Error e = method->set_input(i, in.data.get(), in.nbytes, in.dtype,
                                  Span<const int64_t>(in.sizes.data(), in.sizes.size()));
      if (e) {
        if (in.source != "random") e.prefix("%s", in.source.c_str());
        return e;
      }
    }
    return Error::ok();
  };
  // --trace: an event buffer allocated now, attached for the timed runs only.
  TraceBuffer trace;
  if (o.trace != nullptr) {
    uint64_t events = o.trace_events_given ? o.trace_events
                                           : devtools::default_trace_events(o.iterations, meta->num_instructions(),
                                                                            meta->num_delegates());
    if (Error e = trace.allocate(static_cast<size_t>(events))) return fail("--trace: %s", e.message());
  }
  std::vector<uint64_t> times;
  times.reserve(static_cast<size_t>(o.iterations));
  for (uint64_t run = 0; run < o.warmup + o.iterations; ++run) {
    if (Error e = set_inputs()) return fail("%s", e.message());
    method->set_seed(o.seed);  // every run computes what one run with this seed does
    if (run == o.warmup && trace.tracer) {
      if (Error e = method->set_event_tracer(trace.tracer.get())) return fail("--trace: %s", e.message());
    }
    uint64_t start = pal_now_ns();
    Error e = method->execute();
    uint64_t elapsed = pal_now_ns() - start;
    if (e) {
      // The events up to the failure are worth having: the trace is written all the same.
      if (trace.tracer) {
        (void)method->set_event_tracer(nullptr);
        if (Error w = write_trace(o, method_name, *trace.tracer)) return fail("%s; and %s", e.message(), w.message());
      }
      return fail("%s", e.message());
    }
    if (run >= o.warmup) times.push_back(elapsed);
  }
  if (trace.tracer) {
    (void)method->set_event_tracer(nullptr);
    if (Error w = write_trace(o, method_name, *trace.tracer)) return fail("%s", w.message());
  }

  std::printf("outputs:\n");
  for (size_t i = 0; i < method->num_outputs(); ++i)
    std::printf("  output %zu: %s\n", i, describe_value(method->output(i)).c_str());

  std::sort(times.begin(), times.end());
  size_t n = times.size();
  double median_ns = n % 2 ? static_cast<double>(times[n / 2])
                           : (static_cast<double>(times[n / 2 - 1]) + static_cast<double>(times[n / 2])) / 2.0;
  std::printf("iterations: %zu (after %" PRIu64 " warmup)\n", n, o.warmup);
  std::string compiled;
  for (size_t i = 0; i < num_compiled_backends(); ++i)
    compiled += std::string(i ? ", " : "") + compiled_backend_id(i);
  std::printf("threads: 1 (portable kernels), %" PRIu64 " per delegate call (backends: %s)\n", o.backend_threads,
              compiled.c_str());
  std::printf("latency (ms): min %.4f  median %.4f  max %.4f%s\n", static_cast<double>(times.front()) / 1e6,
              median_ns / 1e6, static_cast<double>(times.back()) / 1e6, trace.tracer ? " (traced)" : "");
  // A full buffer fails the command after the file is written (it is marked incomplete: its
  // dropped_events count what did not fit) and the outputs are printed (they are right).
  if (trace.tracer) {
    if (Error e = trace.tracer->status())
      return fail("--trace: %s; %s is incomplete (raise --trace-events)", e.message(), o.trace);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  tools::install_fatal_handlers("et-run");
  Options options;
  int parsed = parse_options(argc, argv, &options);
  if (parsed == -1) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (parsed != 0) return parsed;
  return run(options);
}
