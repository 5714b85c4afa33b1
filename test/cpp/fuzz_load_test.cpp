// Mutation fuzzing of Program::load, load_method and execute: thousands of
// corrupted copies of valid .pte files must give Error values, never a crash,
// a sanitizer report, a hang, or a write into the program's constants.
//
// Each fixture (mlp.pte, seed_cnn.pte, dynamic.pte, delegate.pte, and two programs whose
// delegate is a whole .pte run by the "nested" backend) is mapped once: where its
// header fields, table scalars, vector lengths, union type bytes, vtable
// entries and offsets are. Each iteration copies the file into a 64-byte
// aligned buffer, applies one seeded mutation strategy (most of them aimed
// inside the FlatBuffer, where the semantic checks are), and then:
//
//   Program::load (BufferDataLoader)                 -> "load failed" or on
//   every MethodMeta accessor, load_method with arenas sized from MethodMeta
//   (skipped above 64 MiB) and every kernel          -> "method failed" or on
//   set_input at the planned sizes (dynamic dims at their bound), execute()
//                                                    -> "executed ok" / "execute failed"
//
// ETMLIR_FUZZ_ITERATIONS (default 3000 per fixture), ETMLIR_FUZZ_SEED,
// ETMLIR_FUZZ_ONLY=N (run iteration N alone, to reproduce a report), and
// ETMLIR_FUZZ_VERBOSE=1 (print every case's outcome and error message). A crash,
// sanitizer report or hang prints the fixture, iteration and strategy, and
// writes the mutated file to $ETMLIR_FUZZ_CRASH_FILE (default
// ./etmlir_fuzz_crash.pte).
#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "etmlir/runtime/backend.h"
#include "etmlir/runtime/bundled.h"
#include "etmlir/runtime/data_loader.h"
#include "etmlir/runtime/method.h"
#include "etmlir/runtime/program.h"
#include "etmlir/schema/program_generated.h"
#include "nested_backend.h"
#include "pte_mutator.h"
#include "test_util.h"

// Present in sanitizer builds only.
extern "C" void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

// A mutated payload of the nested backend can ask for an arena of terabytes:
// the backend must then report OutOfMemory, which it can only do if malloc
// returns nullptr under ASan as it does elsewhere (ASAN_OPTIONS still wins).
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }

namespace etmlir {
namespace {

namespace fbs = etmlir::schema;
using test::AlignedBuffer;

constexpr uint64_t kMaxArenaBytes = uint64_t{64} << 20;
constexpr size_t kTempBytes = size_t{8} << 20;
constexpr unsigned kCaseTimeoutSeconds = 60;

// The mutation engine (pte_mutator.h), shared with verify_pte_test.
using test::fuzz::FileMap;
using test::fuzz::Rng;
using test::fuzz::kNumStrategies;
using test::fuzz::map_file;
using test::fuzz::mutate;
using test::fuzz::pick_strategy;
using test::fuzz::strategy_name;

// ---- Running one case ------------------------------------------------------------------

enum Outcome { kLoadFailed, kMethodFailed, kSkippedLarge, kSkippedLoop, kExecutedOk, kExecuteFailed, kNumOutcomes };
const char* outcome_name(int o) {
  static const char* names[] = {"load failed",   "method failed", "skipped (arena > 64 MiB)", "skipped (backward jump)",
                                "executed ok",   "execute failed"};
  return names[o];
}

// A backend that accepts any payload and does nothing (the fuzzer tests the runtime, not a backend).
class NopBackend : public Backend {
 public:
  bool is_available() const override { return true; }
  Result<DelegateHandle> init(BackendInitContext&, Span<const uint8_t>, Span<const CompileSpec>) override {
    return DelegateHandle(this);
  }
  Error execute(BackendExecuteContext&, DelegateHandle, Span<EValue*>) override { return Error::ok(); }
  void destroy(DelegateHandle) override {}
};

uint64_t fnv1a(const uint8_t* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// Which check of Program::load refused a file (from its message).
enum LoadStage { kHeader, kVerifier, kSemantic, kNumStages };
const char* stage_name(int s) {
  static const char* names[] = {"header / segment table", "FlatBuffers verifier", "semantic checks"};
  return names[s];
}
LoadStage load_stage(const Error& e) {
  const char* m = e.message();
  if (std::strstr(m, "FlatBuffer") != nullptr) return kVerifier;
  if (std::strstr(m, "method '") != nullptr || std::strstr(m, "no methods") != nullptr ||
      std::strstr(m, "schema version") != nullptr || std::strstr(m, "constant segment") != nullptr ||
      std::strncmp(m, "invalid program: segment ", 25) == 0) {
    return std::strncmp(m, "invalid program: segment data", 29) == 0 ? kHeader : kSemantic;
  }
  return kHeader;
}

struct Stats {
  bool verbose = false;
  Error last_error;  // of the latest case that failed
  uint64_t outcomes[kNumOutcomes] = {};
  uint64_t load_stages[kNumStages] = {};
  uint64_t by_strategy[kNumStrategies][kNumOutcomes] = {};
  uint64_t errors_without_message = 0;
  uint64_t file_writes = 0;  // cases where the runtime wrote into the program's bytes
  std::vector<std::string> file_write_cases;
};

bool error_is_well_formed(const Error& e) { return e.code() != ErrorCode::Ok && e.message()[0] != '\0'; }

// True if an instruction jumps backward (or to itself): execute() could loop forever.
bool has_backward_jump(const Program& program, size_t method_index) {
  const fbs::Program* p = fbs::GetProgram(program.flatbuffer());
  const fbs::Method* m = p->methods()->Get(static_cast<flatbuffers::uoffset_t>(method_index));
  if (!m->instructions()) return false;
  for (flatbuffers::uoffset_t i = 0; i < m->instructions()->size(); ++i) {
    const fbs::JumpFalse* j = m->instructions()->Get(i)->kind_as_JumpFalse();
    if (j && j->target() <= i) return true;
  }
  return false;
}

// Calls every MethodMeta accessor (what a user would, to size memory and print).
void exercise_meta(const MethodMeta& meta) {
  char buffer[256];
  volatile size_t sink = std::strlen(meta.name()) + meta.num_instructions();
  for (size_t i = 0; i < meta.num_operators(); ++i) sink += std::strlen(meta.operator_name(i, buffer, sizeof(buffer)));
  for (size_t i = 0; i < meta.num_arenas(); ++i) sink += std::strlen(meta.arena_name(i)) + meta.arena_size(i);
  MethodMeta::TensorInfo info;
  for (size_t i = 0; i <= meta.num_inputs(); ++i) {
    if (meta.input_tensor(i, &info)) {
      for (int32_t d = 0; d < info.dim; ++d) sink += static_cast<size_t>(info.sizes[d]);
    }
  }
  for (size_t i = 0; i <= meta.num_outputs(); ++i) {
    if (meta.output_tensor(i, &info)) {
      for (int32_t d = 0; d < info.dim; ++d) sink += static_cast<size_t>(info.sizes[d]);
    }
  }
  (void)sink;
}

// Deterministic contents for an input buffer of `dtype`.
void fill_input(uint8_t* data, size_t nbytes, ScalarType dtype, Rng& rng) {
  switch (dtype) {
    case ScalarType::Float: {
      auto* f = reinterpret_cast<float*>(data);
      for (size_t i = 0; i < nbytes / 4; ++i) f[i] = static_cast<float>(static_cast<int64_t>(rng.below(4001)) - 2000) / 1000.f;
      break;
    }
    case ScalarType::Bool:
      for (size_t i = 0; i < nbytes; ++i) data[i] = static_cast<uint8_t>(rng.below(2));
      break;
    default:
      // Small non-negative integers (valid indices for embeddings and the like) in every integer width.
      std::memset(data, 0, nbytes);
      for (size_t i = 0; i < nbytes; i += 8) data[i] = static_cast<uint8_t>(rng.below(4));
      break;
  }
}

Outcome run_method(const Program& program, size_t method_index, const KernelRegistry& kernels,
                   const BackendRegistry& backends, MemoryAllocator* temp, Rng& rng, Stats* stats) {
  const char* name = program.method_name(method_index);
  Result<MethodMeta> meta = program.method_meta(name);
  if (!meta.ok()) {
    // The name came from the program, so the lookup cannot fail.
    ADD_FAILURE() << "method_meta('" << name << "') failed: " << meta.error().message();
    return kMethodFailed;
  }
  exercise_meta(*meta);
  // The method's tables and its delegates' state (a nested delegate's inner method and arenas).
  // When sizing refuses a delegate's payload, load_method must refuse it too: it runs anyway,
  // with the method's own bytes, to check that.
  Result<size_t> sized = meta->method_allocator_bytes(&backends, &kernels);
  if (!sized.ok() && !error_is_well_formed(sized.error())) ++stats->errors_without_message;
  size_t method_bytes = sized.ok() ? sized.get() : meta->method_allocator_bytes();
  if (method_bytes > 2 * kMaxArenaBytes) return kSkippedLarge;
  uint64_t total = method_bytes;
  for (size_t i = 0; i < meta->num_arenas(); ++i) {
    if (meta->arena_size(i) > kMaxArenaBytes) return kSkippedLarge;
    total += meta->arena_size(i);
  }
  if (total > 2 * kMaxArenaBytes) return kSkippedLarge;

  std::vector<std::unique_ptr<AlignedBuffer>> buffers;
  std::vector<Span<uint8_t>> arenas;
  for (size_t i = 0; i < meta->num_arenas(); ++i) {
    buffers.push_back(std::make_unique<AlignedBuffer>(static_cast<size_t>(meta->arena_size(i))));
    arenas.emplace_back(buffers.back()->data(), static_cast<size_t>(meta->arena_size(i)));
  }
  AlignedBuffer method_buffer(method_bytes);
  MemoryAllocator method_allocator(method_buffer.data(), method_buffer.size());
  temp->reset();
  MemoryManager memory;
  memory.method_allocator = &method_allocator;
  memory.planned_arenas = Span<Span<uint8_t>>(arenas.data(), arenas.size());
  memory.temp_allocator = temp;

  Result<Method> method = program.load_method(name, &memory, &kernels, &backends);
  if (!method.ok()) {
    if (!error_is_well_formed(method.error())) ++stats->errors_without_message;
    stats->last_error = method.error();
    return kMethodFailed;
  }
  EXPECT_TRUE(sized.ok()) << "load_method accepts what method_allocator_bytes(backends) refuses: "
                          << sized.error().message();
  EXPECT_LE(method_allocator.used(), method_bytes) << "method_allocator_bytes(backends) is not an upper bound";

  // Inputs at their planned sizes (dynamic dims at the bound), unplanned outputs get buffers.
  MethodMeta::TensorInfo info;
  for (size_t i = 0; i < meta->num_inputs(); ++i) {
    if (!meta->input_tensor(i, &info) || element_size(info.dtype) == 0) continue;
    uint64_t nbytes = element_size(info.dtype);
    for (int32_t d = 0; d < info.dim; ++d) nbytes *= static_cast<uint64_t>(info.sizes[d]);
    if (nbytes > kMaxArenaBytes) return kSkippedLarge;
    buffers.push_back(std::make_unique<AlignedBuffer>(static_cast<size_t>(nbytes)));
    fill_input(buffers.back()->data(), static_cast<size_t>(nbytes), info.dtype, rng);
    Error e = method->set_input(i, buffers.back()->data(), static_cast<size_t>(nbytes), info.dtype,
                                Span<const int64_t>(info.sizes, static_cast<size_t>(info.dim)));
    if (e && !error_is_well_formed(e)) ++stats->errors_without_message;
  }
  for (size_t i = 0; i < meta->num_outputs(); ++i) {
    if (!meta->output_tensor(i, &info) || info.planned || element_size(info.dtype) == 0) continue;
    uint64_t nbytes = element_size(info.dtype);
    for (int32_t d = 0; d < info.dim; ++d) nbytes *= static_cast<uint64_t>(info.sizes[d]);
    if (nbytes > kMaxArenaBytes) return kSkippedLarge;
    buffers.push_back(std::make_unique<AlignedBuffer>(static_cast<size_t>(nbytes)));
    method->set_output_buffer(i, buffers.back()->data(), static_cast<size_t>(nbytes));
  }
  if (has_backward_jump(program, method_index)) return kSkippedLoop;

  Error e = method->execute();
  if (e) {
    if (!error_is_well_formed(e)) ++stats->errors_without_message;
    stats->last_error = e;
    return kExecuteFailed;
  }
  return kExecutedOk;
}

// ---- Crash reporting -----------------------------------------------------------------

char g_case[256];
const uint8_t* g_case_data = nullptr;
size_t g_case_size = 0;

void report_case() {
  ssize_t ignored = write(2, g_case, std::strlen(g_case));
  const char* path = std::getenv("ETMLIR_FUZZ_CRASH_FILE");
  if (path == nullptr) path = "etmlir_fuzz_crash.pte";
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0 && g_case_data != nullptr) {
    ignored = write(fd, g_case_data, g_case_size);
    close(fd);
    const char* note = "fuzz: the mutated file was written to ";
    ignored = write(2, note, std::strlen(note));
    ignored = write(2, path, std::strlen(path));
    ignored = write(2, "\n", 1);
  }
  (void)ignored;
}

void on_signal(int signal) {
  const char* what = signal == SIGALRM ? "\nfuzz: TIMEOUT (a case ran too long: a hang)\n" : "\nfuzz: CRASH\n";
  ssize_t ignored = write(2, what, std::strlen(what));
  (void)ignored;
  report_case();
  if (signal == SIGALRM) _exit(124);
  struct sigaction action = {};
  action.sa_handler = SIG_DFL;
  sigaction(signal, &action, nullptr);
  raise(signal);
}

void install_crash_reporting() {
  static bool installed = false;
  if (installed) return;
  installed = true;
  // ASan and UBSan each carry their own copy of the callback (GCC links two
  // runtimes): register with both.
  using SetCallback = void (*)(void (*)(void));
  void (*on_death)(void) = [] {
    const char* what = "\nfuzz: SANITIZER REPORT above\n";
    ssize_t ignored = write(2, what, std::strlen(what));
    (void)ignored;
    report_case();
  };
  if (__sanitizer_set_death_callback != nullptr) __sanitizer_set_death_callback(on_death);
  for (const char* runtime : {"libubsan.so.1", "libasan.so.8", "libasan.so.6"}) {
    if (void* handle = dlopen(runtime, RTLD_NOW | RTLD_NOLOAD)) {
      if (auto set = reinterpret_cast<SetCallback>(dlsym(handle, "__sanitizer_set_death_callback"))) set(on_death);
    }
  }
  struct sigaction action = {};
  action.sa_handler = on_signal;
  sigaction(SIGALRM, &action, nullptr);
  if (__sanitizer_set_death_callback == nullptr) {  // the sanitizers handle these themselves
    for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) sigaction(s, &action, nullptr);
  }
}

uint64_t env_u64(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 0) : fallback;
}

// ---- The test ------------------------------------------------------------------------

class FuzzLoad : public ::testing::TestWithParam<const char*> {};

TEST_P(FuzzLoad, MutatedProgramsGiveErrorsNotCrashes) {
  ETMLIR_REQUIRE_FIXTURES();
  install_crash_reporting();
  const std::string fixture = GetParam();
  std::vector<uint8_t> pristine = test::read_file(test::fixture_path(fixture));
  ASSERT_FALSE(pristine.empty()) << "cannot read " << test::fixture_path(fixture);
  FileMap map;
  ASSERT_TRUE(map_file(pristine.data(), pristine.size(), &map)) << fixture << " is not a valid .pte";
  ASSERT_FALSE(map.scalars.empty());

  const KernelRegistry& kernels = test::all_kernels();
  static NopBackend backend;
  BackendRegistry backends;
  ASSERT_FALSE(backends.add("fake_delegate", &backend));
  ASSERT_FALSE(register_nested_backend(backends));
  AlignedBuffer temp_buffer(kTempBytes);
  MemoryAllocator temp(temp_buffer.data(), temp_buffer.size());

  const size_t capacity = pristine.size() + 8192;
  AlignedBuffer work(capacity);
  Stats stats;
  stats.verbose = env_u64("ETMLIR_FUZZ_VERBOSE", 0) != 0;

  // The unmutated file: loads, and tells whether this runtime can run it at all.
  Outcome pristine_outcome;
  {
    std::memcpy(work.data(), pristine.data(), pristine.size());
    BufferDataLoader loader(work.data(), pristine.size());
    Result<Program> program = Program::load(&loader);
    ASSERT_TRUE(program.ok()) << fixture << ": " << program.error().message();
    Rng rng(1);
    pristine_outcome = run_method(*program, 0, kernels, backends, &temp, rng, &stats);
    EXPECT_EQ(std::memcmp(work.data(), pristine.data(), pristine.size()), 0)
        << "running the unmutated program changed its bytes (a kernel wrote a constant?)";
    std::printf("[fuzz] %s: unmutated file: %s\n", fixture.c_str(), outcome_name(pristine_outcome));
  }

  const uint64_t iterations = env_u64("ETMLIR_FUZZ_ITERATIONS", 3000);
  const uint64_t seed = env_u64("ETMLIR_FUZZ_SEED", 20240601);
  const char* only = std::getenv("ETMLIR_FUZZ_ONLY");
  uint64_t first = only ? std::strtoull(only, nullptr, 0) : 0;
  uint64_t last = only ? first + 1 : iterations;
  uint64_t fixture_salt = fnv1a(reinterpret_cast<const uint8_t*>(fixture.data()), fixture.size());

  for (uint64_t iteration = first; iteration < last; ++iteration) {
    Rng rng(seed ^ fixture_salt ^ (iteration * 0x9E3779B97F4A7C15ull));
    std::memcpy(work.data(), pristine.data(), pristine.size());
    size_t size = pristine.size();
    int strategy = pick_strategy(rng);
    mutate(strategy, rng, map, work.data(), &size, capacity);
    std::snprintf(g_case, sizeof(g_case),
                  "fuzz case: fixture %s, iteration %" PRIu64 " (reproduce: ETMLIR_FUZZ_ONLY=%" PRIu64
                  " ETMLIR_FUZZ_SEED=%" PRIu64 "), strategy '%s', %zu bytes\n",
                  fixture.c_str(), iteration, iteration, seed, strategy_name(strategy), size);
    // The mutated bytes: for a crash report, and to check that nothing writes into them.
    static std::vector<uint8_t> snapshot;
    snapshot.assign(work.data(), work.data() + size);
    g_case_data = snapshot.data();
    g_case_size = size;

    alarm(kCaseTimeoutSeconds);
    Outcome outcome;
    BufferDataLoader loader(work.data(), size);
    Result<Program> program = Program::load(&loader);
    if (!program.ok()) {
      if (!error_is_well_formed(program.error())) ++stats.errors_without_message;
      ++stats.load_stages[load_stage(program.error())];
      stats.last_error = program.error();
      outcome = kLoadFailed;
    } else {
      // Every accessor of a loaded program must be safe.
      for (size_t s = 0; s < 8; ++s) {
        Result<FreeableBuffer> segment = program->load_segment(static_cast<uint32_t>(s), 0, 1);
        (void)segment;
      }
      for (uint32_t handle = 0; handle < 64; ++handle) (void)program->debug_location(0, handle);
      EXPECT_EQ(program->method_meta("no such method").error().code(), ErrorCode::NotFound);
      // Bundled test cases (bundled_mlp.pte): read and checked, or refused with a message.
      Result<BundledCases> cases = BundledCases::load(*program);
      if (!cases.ok() && !error_is_well_formed(cases.error())) ++stats.errors_without_message;
      if (cases.ok()) {
        for (size_t c = 0; c < cases->size(); ++c) (void)cases->name(c), (void)cases->method(c);
      }
      outcome = run_method(*program, 0, kernels, backends, &temp, rng, &stats);
      for (size_t m = 1; m < program->num_methods() && m < 4; ++m) {
        run_method(*program, m, kernels, backends, &temp, rng, &stats);
      }
    }
    alarm(0);
    if (std::memcmp(work.data(), snapshot.data(), size) != 0) {
      ++stats.file_writes;
      if (stats.file_write_cases.size() < 5) stats.file_write_cases.push_back(g_case);
    }
    ++stats.outcomes[outcome];
    ++stats.by_strategy[strategy][outcome];
    if (stats.verbose) {
      std::printf("[fuzz] %" PRIu64 " %s: %s%s%s\n", iteration, strategy_name(strategy), outcome_name(outcome),
                  outcome == kExecutedOk ? "" : ": ", outcome == kExecutedOk ? "" : stats.last_error.message());
    }
  }
  g_case_data = nullptr;

  uint64_t total = last - first;
  std::printf("[fuzz] %s: %" PRIu64 " mutated copies (seed %" PRIu64 ")\n", fixture.c_str(), total, seed);
  for (int o = 0; o < kNumOutcomes; ++o) {
    std::printf("[fuzz]   %-26s %6" PRIu64 "\n", outcome_name(o), stats.outcomes[o]);
    if (o == kLoadFailed) {
      for (int s = 0; s < kNumStages; ++s) {
        std::printf("[fuzz]     by %-24s %5" PRIu64 "\n", stage_name(s), stats.load_stages[s]);
      }
    }
  }
  std::printf("[fuzz]   by strategy (load failed / method failed / skipped / executed ok / execute failed):\n");
  for (int s = 0; s < kNumStrategies; ++s) {
    const uint64_t* c = stats.by_strategy[s];
    std::printf("[fuzz]     %-13s %5" PRIu64 " %5" PRIu64 " %5" PRIu64 " %5" PRIu64 " %5" PRIu64 "\n",
                strategy_name(s), c[kLoadFailed], c[kMethodFailed], c[kSkippedLarge] + c[kSkippedLoop],
                c[kExecutedOk], c[kExecuteFailed]);
  }
  const uint64_t* o = stats.outcomes;
  const uint64_t* l = stats.load_stages;
  std::printf("[fuzz] summary %s: %" PRIu64 " copies: load failed %" PRIu64 " (header %" PRIu64 ", verifier %" PRIu64
              ", semantic %" PRIu64 "), method failed %" PRIu64 ", skipped %" PRIu64 ", executed ok %" PRIu64
              ", execute failed %" PRIu64 "\n",
              fixture.c_str(), total, o[kLoadFailed], l[kHeader], l[kVerifier], l[kSemantic], o[kMethodFailed],
              o[kSkippedLarge] + o[kSkippedLoop], o[kExecutedOk], o[kExecuteFailed]);
  std::fflush(stdout);

  EXPECT_EQ(stats.errors_without_message, 0u) << "an Error came back with code Ok or an empty message";
  std::string cases;
  for (const std::string& c : stats.file_write_cases) cases += c;
  EXPECT_EQ(stats.file_writes, 0u) << "the runtime wrote into the program's bytes (constants are read-only):\n"
                                   << cases;
  if (only != nullptr) return;
  uint64_t past_load = total - stats.outcomes[kLoadFailed];
  uint64_t rejected = stats.outcomes[kLoadFailed] + stats.outcomes[kMethodFailed] + stats.outcomes[kExecuteFailed];
  EXPECT_GT(rejected * 2, total) << "most mutations should be rejected";
  EXPECT_GE(past_load * 20, total) << "at least 5% of the copies should get past Program::load";
  EXPECT_GT(stats.load_stages[kSemantic] * 50, total) << "the semantic checks should refuse at least 2% of the copies";
  if (pristine_outcome == kExecutedOk) {
    EXPECT_GT(stats.outcomes[kExecutedOk], 0u) << "no mutated copy reached execute()";
    EXPECT_GT(stats.outcomes[kMethodFailed] + stats.outcomes[kExecuteFailed], 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FuzzLoad,
                         ::testing::Values("mlp.pte", "seed_cnn.pte", "dynamic.pte", "delegate.pte",
                                           "nested_lookup.pte", "nested_dynamic.pte", "bundled_mlp.pte"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           return name.substr(0, name.find('.'));
                         });

}  // namespace
}  // namespace etmlir
