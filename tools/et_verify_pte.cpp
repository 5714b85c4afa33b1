// et-verify-pte: does this .pte load? Checked without running any of it.
//
//   et-verify-pte [--quiet] [--max-memory N] FILE.pte...
//
// "ok" means that this build's runtime loads every method of the file. The
// checks are the runtime's own, not a copy of them: the tool calls
//
//   Program::load            the 64-byte header (lib/validate.cpp parse_header),
//                            the FlatBuffers verifier, the schema version, every
//                            segment inside the segment data and aligned, and the
//                            meaning of every method (value, operator, delegate
//                            and arena indices, tensor sizes, dtypes and byte
//                            counts, constants and state inside their segment,
//                            jump targets, ...: pte::validate_method)
//   MethodMeta::method_allocator_bytes(backends, kernels)
//                            every delegate's backend is compiled in, available,
//                            and accepts its payload and compile specs
//   Program::load_method     with this build's kernels (the prim kernels and every
//                            portable kernel, as et-run registers them) and
//                            backends: every operator has a kernel whose
//                            signature takes its arguments, no instruction
//                            writes a constant, every delegate initializes
//
// with a FileDataLoader (the file is read into memory once: changing it
// while the tool runs cannot crash it).
//
// Delegates. et-verify-pte never executes payload code, and checks structure,
// not trust. A "nested" delegate (a whole .pte, run by this same runtime) is
// loaded exactly as the runtime loads it, its own delegates included. Any
// other backend is checked with its method_allocator_bytes(): everything it
// checks before init (for "cpu": the payload header, the body's CRC-32, the
// body format and ABI version, arch and CPU features, entry points, the ELF
// header and program headers), but its init() is not called, because the cpu
// backend's init dlopen()s the payload's shared object, which runs the
// object's constructors. So a cpu payload that passes can still fail at load
// for what only the dynamic loader sees (a symbol the shared object does not
// export), and whether the runtime will run native code from this file at
// all (its trust rule) is the loader's decision, not this tool's.
//
// Memory. Each method's method allocator and planned arenas are reserved
// (mmap, MAP_NORESERVE) rather than allocated: loading touches only the bytes
// it writes (tables, program state), so a 2 GB arena costs nothing here. A
// method whose method allocator plus arenas exceed --max-memory (default: this
// machine's physical memory) fails: the runtime could not give it that memory.
//
// Output: "FILE: ok (program N bytes, M methods, S segments)" on stdout, then
// (unless --quiet) one line for the header, one per segment, one per method
// and one per delegate checked up to its init (its signatures and whether
// they verify: information, never a failure); "FILE: error: MESSAGE" on stderr (the runtime's message: it names
// the method, value, instruction or header field). Exit status 0 only if
// every file passes, 1 if one fails, 2 on a usage error.
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "etmlir/register_backends.h"
#include "etmlir/runtime/backend.h"
#include "etmlir/runtime/data_loader.h"
#include "etmlir/runtime/kernel.h"
#include "etmlir/runtime/method.h"
#include "etmlir/runtime/native_code.h"
#include "etmlir/runtime/program.h"
#include "etmlir/schema/program_generated.h"
#include "cli_support.h"
#include "portable_kernels.h"
#include "pte_format.h"

using namespace etmlir;

namespace {

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

const char kUsage[] =
    "usage: et-verify-pte [options] FILE.pte...\n"
    "\n"
    "Checks that this build's runtime loads every method of each file, with the\n"
    "runtime's own checks (Program::load, then load_method with every portable\n"
    "kernel and every compiled-in backend), without running anything: delegates\n"
    "other than 'nested' are checked up to, not through, their init (the cpu\n"
    "backend's payload code is never loaded).\n"
    "\n"
    "options:\n"
    "  -q, --quiet        print only each file's ok line (no header, segment and\n"
    "                     method lines)\n"
    "  --max-memory N     fail a method whose method allocator plus planned arenas\n"
    "                     exceed N bytes (suffix K, M or G; default: this machine's\n"
    "                     physical memory)\n"
    "  -h, --help         this text\n"
    "\n"
    "exit status: 0 every file loads, 1 one does not, 2 usage error\n";

int usage_error(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
int usage_error(const char* fmt, ...) {
  std::fprintf(stderr, "et-verify-pte: ");
  va_list args;
  va_start(args, fmt);
  std::vfprintf(stderr, fmt, args);
  va_end(args);
  std::fprintf(stderr, " (et-verify-pte --help for usage)\n");
  return kExitUsage;
}

std::string plural(uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

uint64_t physical_memory() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return UINT64_MAX;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

// ---- Memory: reserved, committed only where load_method writes ---------------------

class Reservation {
 public:
  Reservation() = default;
  Reservation(const Reservation&) = delete;
  Reservation& operator=(const Reservation&) = delete;
  ~Reservation() {
    if (data_ != nullptr) ::munmap(data_, size_);
  }
  // False when the address space cannot hold `size` bytes.
  bool reserve(uint64_t size) {
    if (size == 0) return true;
    if (size > SIZE_MAX) return false;
    void* p = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return false;
    data_ = static_cast<uint8_t*>(p);
    size_ = static_cast<size_t>(size);
    return true;
  }
  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// ---- Backends: the build's, with init only where it runs no payload code ------------

// The backends whose init() loads its payload with this runtime alone (no
// native code, no device): et-verify-pte runs their init for real.
bool init_runs_no_payload_code(const char* id) { return std::strcmp(id, "nested") == 0; }

// Wraps one compiled-in backend. For the others, init() stops at the checks
// the backend makes before init (method_allocator_bytes) and hands back a
// handle that is never executed.
class CheckingBackend : public Backend {
 public:
  CheckingBackend(Backend* inner, bool real_init) : inner_(inner), real_init_(real_init) {}

  bool is_available() const override { return inner_->is_available(); }

  Result<DelegateHandle> init(BackendInitContext& context, Span<const uint8_t> payload,
                              Span<const CompileSpec> compile_specs) override {
    if (real_init_) return inner_->init(context, payload, compile_specs);
    Result<size_t> checked = inner_->method_allocator_bytes(context, payload, compile_specs);
    if (!checked.ok()) return checked.error();
    ++structure_only_;
    return DelegateHandle(&not_initialized_);
  }

  Error execute(BackendExecuteContext&, DelegateHandle, Span<EValue*>) override {
    return Error::make(ErrorCode::NotSupported, "et-verify-pte runs no delegate");
  }

  void destroy(DelegateHandle handle) override {
    if (handle != &not_initialized_) inner_->destroy(handle);
  }

  Result<size_t> method_allocator_bytes(const BackendInitContext& context, Span<const uint8_t> payload,
                                        Span<const CompileSpec> compile_specs) const override {
    return inner_->method_allocator_bytes(context, payload, compile_specs);
  }

  bool real_init() const { return real_init_; }
  // Delegates (at any nesting depth) checked up to their init since the last reset.
  size_t structure_only() const { return structure_only_; }
  void reset_counts() { structure_only_ = 0; }

 private:
  Backend* inner_;
  bool real_init_;
  size_t structure_only_ = 0;
  char not_initialized_ = 0;
};

struct Runtime {
  KernelRegistry kernels;
  BackendRegistry compiled;  // the build's backends
  BackendRegistry checking;  // what methods are loaded with: one CheckingBackend per compiled one
  std::vector<std::unique_ptr<CheckingBackend>> wrappers;
};

Error make_runtime(Runtime* rt) {
  ET_CHECK_OK(register_prim_kernels(rt->kernels));
  ET_CHECK_OK(register_portable_kernels(rt->kernels));
  ET_CHECK_OK(register_backends(rt->compiled, BackendOptions{}));
  for (size_t i = 0; i < rt->compiled.size(); ++i) {
    const char* id = rt->compiled.id(i);
    rt->wrappers.emplace_back(new CheckingBackend(rt->compiled.find(id), init_runs_no_payload_code(id)));
    ET_CHECK_OK(rt->checking.add(id, rt->wrappers.back().get()));
  }
  return Error::ok();
}

// ---- One file --------------------------------------------------------------------

struct Report {
  std::string ok_line;             // "program N bytes, M methods, S segments"
  std::vector<std::string> lines;  // header, segments, methods
};

// What each segment holds, for the report.
std::vector<std::string> segment_roles(const schema::Program& p) {
  size_t n = p.segments() ? p.segments()->size() : 0;
  std::vector<std::string> roles(n);
  if (n > 0 && p.constant_segment() < n) roles[p.constant_segment()] = "constants";
  for (const schema::Method* m : *p.methods()) {
    for (flatbuffers::uoffset_t d = 0; m->delegates() && d < m->delegates()->size(); ++d) {
      const schema::Delegate* delegate = m->delegates()->Get(d);
      uint32_t s = delegate->payload()->segment();
      if (s >= n) continue;
      std::string role = "payload of '" + std::string(m->name()->c_str()) + "' delegate " + std::to_string(d) +
                         " (" + delegate->backend()->c_str() + ")";
      roles[s] = roles[s].empty() ? role : roles[s] + ", " + role;
    }
  }
  for (std::string& role : roles) {
    if (role.empty()) role = "unused";
  }
  return roles;
}

// One line per delegate whose init et-verify-pte does not run (it may run payload code): its
// signatures, and whether each verifies. Information only: trust is the loader's decision.
void describe_delegates(const Program& program, const char* name, const Runtime& rt, Report* report) {
  const schema::Program& p = *schema::GetProgram(program.flatbuffer());
  const schema::Method* m = nullptr;
  for (const schema::Method* candidate : *p.methods()) {
    if (std::strcmp(candidate->name()->c_str(), name) == 0) m = candidate;
  }
  for (flatbuffers::uoffset_t d = 0; m != nullptr && m->delegates() && d < m->delegates()->size(); ++d) {
    const schema::Delegate* delegate = m->delegates()->Get(d);
    const char* id = delegate->backend()->c_str();
    const CheckingBackend* backend = nullptr;
    for (size_t i = 0; i < rt.compiled.size(); ++i) {
      if (std::strcmp(rt.compiled.id(i), id) == 0) backend = rt.wrappers[i].get();
    }
    if (backend == nullptr || backend->real_init()) continue;
    std::string line = "delegate " + std::to_string(d) + " (" + id + "): checked up to init; ";
    size_t n = delegate->signatures() ? delegate->signatures()->size() : 0;
    if (n == 0) {
      line += "unsigned (if it is native code, a runtime runs it only when told to allow native code)";
    } else {
      const schema::DataLocation* at = delegate->payload();
      Result<FreeableBuffer> payload = program.load_segment(at->segment(), at->offset(), at->size());
      for (size_t k = 0; k < n; ++k) {
        const schema::PayloadSignature* sig = delegate->signatures()->Get(static_cast<flatbuffers::uoffset_t>(k));
        char fingerprint[40];
        bool valid = payload.ok() && sig->public_key() && sig->signature() &&
                     sig->public_key()->size() == kEd25519PublicKeyBytes &&
                     sig->signature()->size() == kEd25519SignatureBytes &&
                     verify_payload_signature(sig->public_key()->data(), sig->signature()->data(),
                                              Span<const uint8_t>(payload->bytes(), payload->size()));
        const char* key = sig->public_key() && sig->public_key()->size() == kEd25519PublicKeyBytes
                              ? key_fingerprint(sig->public_key()->data(), fingerprint, sizeof(fingerprint))
                              : "a malformed key";
        line += std::string(k ? ", " : "signed by ") + key +
                (valid ? " (verifies)"
                       : native_code_signatures_supported() ? " (does NOT verify: changed after signing?)"
                                                            : " (not checked: built without libsodium)");
      }
    }
    report->lines.push_back(line);
  }
}

// Loads method `name` the way the runtime does, into reserved memory; on
// success appends its report line.
Error check_method(const Program& program, const char* name, Runtime& rt, uint64_t max_memory, Report* report) {
  Result<MethodMeta> meta = program.method_meta(name);
  if (!meta.ok()) return meta.error();
  Result<size_t> method_bytes = meta->method_allocator_bytes(&rt.checking, &rt.kernels);
  if (!method_bytes.ok()) return method_bytes.error();
  uint64_t arena_bytes = 0;
  for (size_t i = 0; i < meta->num_arenas(); ++i) {
    uint64_t size = meta->arena_size(i);
    if (size > UINT64_MAX - arena_bytes) return Error::make(ErrorCode::OutOfMemory, "method '%s': arenas overflow", name);
    arena_bytes += size;
  }
  uint64_t total = arena_bytes > UINT64_MAX - method_bytes.get() ? UINT64_MAX : arena_bytes + method_bytes.get();
  if (total > max_memory)
    return Error::make(ErrorCode::OutOfMemory,
                       "method '%s' needs %s bytes of memory (method allocator %s, planned arenas %s), more than "
                       "--max-memory %s",
                       name, tools::grouped(total).c_str(), tools::grouped(method_bytes.get()).c_str(), tools::grouped(arena_bytes).c_str(),
                       tools::grouped(max_memory).c_str());

  // The reservations outlive the Method (declared first, destroyed last).
  Reservation method_memory;
  std::vector<std::unique_ptr<Reservation>> arenas;
  std::vector<Span<uint8_t>> arena_spans;
  if (!method_memory.reserve(method_bytes.get()))
    return Error::make(ErrorCode::OutOfMemory, "method '%s': cannot reserve %s bytes for its method allocator", name,
                       tools::grouped(method_bytes.get()).c_str());
  for (size_t i = 0; i < meta->num_arenas(); ++i) {
    arenas.emplace_back(new Reservation());
    if (!arenas.back()->reserve(meta->arena_size(i)))
      return Error::make(ErrorCode::OutOfMemory, "method '%s': cannot reserve %s bytes for arena %zu ('%s')", name,
                         tools::grouped(meta->arena_size(i)).c_str(), i, meta->arena_name(i));
    arena_spans.emplace_back(arenas.back()->data(), arenas.back()->size());
  }
  MemoryAllocator method_allocator(method_memory.data(), method_memory.size());
  MemoryManager memory;
  memory.method_allocator = &method_allocator;
  memory.planned_arenas = Span<Span<uint8_t>>(arena_spans.data(), arena_spans.size());

  for (auto& wrapper : rt.wrappers) wrapper->reset_counts();
  Result<Method> method = program.load_method(name, &memory, &rt.kernels, &rt.checking);
  if (!method.ok()) return method.error();

  size_t structure_only = 0;
  for (auto& wrapper : rt.wrappers) structure_only += wrapper->structure_only();
  size_t num_delegates = meta->num_delegates();
  std::string line = "method '" + std::string(name) + "': " + plural(meta->num_inputs(), "input", "inputs") + ", " +
                     plural(meta->num_outputs(), "output", "outputs") + ", " +
                     plural(meta->num_instructions(), "instruction", "instructions") + ", " +
                     plural(meta->num_operators(), "operator", "operators") + ", " +
                     plural(num_delegates, "delegate", "delegates");
  if (structure_only > 0)
    line += " (" + plural(structure_only, "delegate", "delegates") + " checked up to init, not initialized)";
  line += "; memory: method allocator " + tools::grouped(method_bytes.get()) + " B, planned arenas " + tools::grouped(arena_bytes) +
          " B";
  report->lines.push_back(line);
  describe_delegates(program, name, rt, report);
  return Error::ok();
}

Error verify_file(const char* path, Runtime& rt, uint64_t max_memory, Report* report) {
  Result<FileDataLoader> opened = FileDataLoader::open(path);
  if (!opened.ok()) return opened.error();
  FileDataLoader& loader = opened.get();
  Result<Program> program = Program::load(&loader);
  if (!program.ok()) return program.error();

  // The header again, through the same parser, for the report (Program::load accepted it).
  pte::Header header;
  {
    Result<FreeableBuffer> head = loader.load(0, pte::kHeaderSize);
    if (!head.ok()) return head.error();
    ET_CHECK_OK(pte::parse_header(head->bytes(), loader.size(), &header));
  }
  const schema::Program& p = *schema::GetProgram(program->flatbuffer());
  size_t num_segments = p.segments() ? p.segments()->size() : 0;

  for (size_t i = 0; i < program->num_methods(); ++i) {
    if (Error e = check_method(*program, program->method_name(i), rt, max_memory, report)) return e;
  }

  report->ok_line = "program " + std::to_string(header.program_size) + " bytes, " +
                    std::to_string(program->num_methods()) + " methods, " + std::to_string(num_segments) + " segments";
  std::vector<std::string> method_lines = std::move(report->lines);
  report->lines.clear();
  report->lines.push_back("file " + tools::grouped(loader.size()) + " B: header v" + std::to_string(header.header_version) +
                          ", program schema v" + std::to_string(program->version()) + " at " +
                          tools::grouped(header.program_offset) + " (" + tools::grouped(header.program_size) +
                          " B), segment data at " + tools::grouped(header.segment_base_offset) + " (" +
                          tools::grouped(header.segment_data_size) + " B, " + std::to_string(header.segment_alignment) +
                          "-aligned)");
  std::vector<std::string> roles = segment_roles(p);
  for (size_t i = 0; i < num_segments; ++i) {
    const schema::Segment* s = p.segments()->Get(static_cast<flatbuffers::uoffset_t>(i));
    report->lines.push_back("segment " + std::to_string(i) + ": " + tools::grouped(s->size()) + " B at file offset " +
                            tools::grouped(header.segment_base_offset + s->offset()) + " (" + roles[i] + ")");
  }
  for (std::string& line : method_lines) report->lines.push_back(std::move(line));
  return Error::ok();
}

}  // namespace

int main(int argc, char** argv) {
  tools::install_fatal_handlers("et-verify-pte");
  bool quiet = false;
  uint64_t max_memory = 0;
  bool max_memory_given = false;
  std::vector<const char*> files;
  bool options_done = false;
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    if (options_done || arg[0] != '-' || arg[1] == '\0') {
      files.push_back(arg);
      continue;
    }
    if (std::strcmp(arg, "--") == 0) {
      options_done = true;
    } else if (std::strcmp(arg, "-h") == 0 || std::strcmp(arg, "--help") == 0) {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (std::strcmp(arg, "-q") == 0 || std::strcmp(arg, "--quiet") == 0) {
      quiet = true;
    } else if (std::strncmp(arg, "--max-memory", 12) == 0 && (arg[12] == '\0' || arg[12] == '=')) {
      const char* value = arg[12] == '=' ? arg + 13 : (i + 1 < argc ? argv[++i] : nullptr);
      if (value == nullptr) return usage_error("--max-memory needs a value");
      if (!tools::parse_count(value, true, &max_memory))
        return usage_error("--max-memory takes a byte count (like 1048576 or 512M), not '%s'", value);
      max_memory_given = true;
    } else {
      return usage_error("unknown option '%s'", arg);
    }
  }
  if (files.empty()) return usage_error("no file given");
  if (!max_memory_given) max_memory = physical_memory();

  Runtime rt;
  if (Error e = make_runtime(&rt)) {
    std::fprintf(stderr, "et-verify-pte: error: %s\n", tools::one_line(e.message()).c_str());
    return kExitError;
  }
  int status = 0;
  for (const char* path : files) {
    Report report;
    // One line each: names from a corrupt file may hold newlines or escapes (one_line makes them \xNN).
    std::string shown = tools::one_line(path);
    if (Error e = verify_file(path, rt, max_memory, &report)) {
      std::fprintf(stderr, "%s: error: %s\n", shown.c_str(), tools::one_line(e.message()).c_str());
      status = kExitError;
      continue;
    }
    std::printf("%s: ok (%s)\n", shown.c_str(), report.ok_line.c_str());
    if (!quiet) {
      for (const std::string& line : report.lines) std::printf("  %s\n", tools::one_line(line.c_str()).c_str());
    }
    std::fflush(stdout);
  }
  return status;
}
