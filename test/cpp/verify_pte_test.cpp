// et-verify-pte (tools/et_verify_pte.cpp), the binary this build makes:
//
//  * VerifyPte.NeverLoadsPayloadCode: on a program with a "cpu" delegate it says ok, reports the
//    delegate as checked up to init and unsigned, and the dynamic loader (LD_DEBUG=files) loads
//    nothing while it runs; et-run --allow-native on the same file does load the payload (the
//    control that shows LD_DEBUG would see it);
//  * VerifyPte.CommandLineMisuseIsOneLine: usage errors (exit 2) and unreadable files, folders,
//    devices, empty files, too little --max-memory (exit 1) are one line each, never a crash;
//  * VerifyPteFuzz (below).
//
// VerifyPteFuzz: "et-verify-pte says ok" must mean "the runtime loads every method", and the
// tool must never crash or hang, whatever the file.
//
// Mutated copies of valid .pte files (the engine of pte_mutator.h that fuzz_load_test uses,
// plus a strategy aimed at delegate payload headers) are written to a temporary folder and
// given to the et-verify-pte this build makes (ETMLIR_VERIFY_PTE), in batches of 200 files
// per process, with --quiet --max-memory 256M. Fixtures: the small programs of
// make_fixtures.py that exist in ETMLIR_TEST_PTE_DIR (plain, dynamic, state, nested, nested
// twice) and a program whose one delegate is a "cpu" payload around the test build's
// fixture shared object. Then, in this process, every file it passed is loaded as an
// application would: FileDataLoader, Program::load, and for every method
// MethodMeta::method_allocator_bytes(backends) of method allocator, every kernel, every
// backend of the build, and native code allowed (the cpu fixture is the test's own code).
//
// Checked:
//  * each et-verify-pte run exits 0 or 1 (no signal) within 120 s and reports every file
//    exactly once: "FILE: ok (...)" on stdout or one "FILE: error: ..." line on stderr;
//  * every file it passes loads every method. One divergence is allowed, and counted: a cpu
//    delegate whose shared object the dynamic loader refuses or that lacks a symbol the
//    (mutated) payload header names; et-verify-pte never dlopen()s payload code, so it
//    cannot see that (tools/et_verify_pte.cpp, "Delegates").
//
// ETMLIR_FUZZ_CASES (default 2000, spread over the fixtures), ETMLIR_FUZZ_SEED (default 1),
// ETMLIR_FUZZ_VERBOSE=1 (every finding's message), ETMLIR_VERIFY_PTE=PATH (check another
// et-verify-pte binary, e.g. the installed one). A failing batch's files are kept, and
// their folder printed.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "etmlir/register_backends.h"
#include "etmlir/runtime/data_loader.h"
#include "etmlir/runtime/method.h"
#include "etmlir/runtime/native_code.h"
#include "etmlir/runtime/program.h"
#include "etmlir/schema/program_generated.h"
#include "pte_mutator.h"
#include "test_util.h"

extern char** environ;

namespace etmlir {
namespace {

namespace fbs = etmlir::schema;
using test::fuzz::FileMap;
using test::fuzz::Rng;

constexpr size_t kBatch = 200;
constexpr int kBatchTimeoutSeconds = 120;
constexpr const char* kMaxMemory = "256M";
constexpr uint64_t kMaxMemoryBytes = uint64_t{256} << 20;
// A strategy of this test, after the engine's: bytes of a delegate payload's header.
constexpr int kPayloadHeader = test::fuzz::kNumStrategies;
constexpr int kNumStrategies = test::fuzz::kNumStrategies + 1;

const char* strategy_name(int s) { return s == kPayloadHeader ? "payload header" : test::fuzz::strategy_name(s); }

uint64_t env_u64(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

const char* verify_pte_path() {
  const char* tool = std::getenv("ETMLIR_VERIFY_PTE");
  return tool != nullptr && *tool != '\0' ? tool : ETMLIR_VERIFY_PTE;
}

// A fresh temporary folder, removed (with its files) at the end.
class TempDir {
 public:
  TempDir() {
    char path[] = "/tmp/etmlir-verify-test-XXXXXX";
    if (mkdtemp(path) != nullptr) path_ = path;
  }
  ~TempDir() {
    if (path_.empty()) return;
    std::string command = "rm -rf '" + path_ + "'";
    int ignored = std::system(command.c_str());
    (void)ignored;
  }
  const std::string& path() const { return path_; }
  std::string write(const std::string& name, const std::vector<uint8_t>& bytes) const {
    std::string file = path_ + "/" + name;
    std::ofstream(file, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return file;
  }

 private:
  std::string path_;
};

// The cpu fixture program of the fuzz test (one "cpu" delegate around the test's shared object).
std::vector<uint8_t> cpu_program() {
  test::CpuPayloadHeader h;
  h.entry = "scale2";
  h.inputs = {{ScalarType::Float, {4, 4}}};
  h.outputs = {{ScalarType::Float, {4, 4}}};
  std::vector<uint8_t> so = test::cpu_fixture_bytes();
  return so.empty() ? so : test::one_delegate_program("cpu", test::write_cpu_payload(h, so), {4, 4});
}

struct Fixture {
  std::string name;
  std::vector<uint8_t> bytes;
  FileMap map;
  std::vector<std::pair<size_t, size_t>> payloads;  // [file offset, size) of each delegate payload
};

// Where each delegate's payload lies in the file.
std::vector<std::pair<size_t, size_t>> payload_ranges(const std::vector<uint8_t>& file) {
  std::vector<std::pair<size_t, size_t>> out;
  uint64_t program_offset = test::fuzz::read_le(file.data() + 16, 8);
  uint64_t segment_base = test::fuzz::read_le(file.data() + 32, 8);
  const fbs::Program* p = fbs::GetProgram(file.data() + program_offset);
  for (const fbs::Method* m : *p->methods()) {
    for (flatbuffers::uoffset_t d = 0; m->delegates() && d < m->delegates()->size(); ++d) {
      const fbs::DataLocation* at = m->delegates()->Get(d)->payload();
      const fbs::Segment* s = p->segments()->Get(at->segment());
      out.emplace_back(static_cast<size_t>(segment_base + s->offset() + at->offset()), static_cast<size_t>(at->size()));
    }
  }
  return out;
}

// The small fixtures that exist, and the cpu program; empty when none can be read.
std::vector<Fixture> load_fixtures() {
  std::vector<Fixture> fixtures;
  for (const char* name : {"seed_cnn.pte", "dynamic.pte", "lookup.pte", "counter.pte", "nested_lookup.pte",
                           "nested_dynamic.pte", "nested_nested_lookup.pte"}) {
    std::vector<uint8_t> bytes = test::read_file(test::fixture_path(name));
    if (!bytes.empty()) fixtures.push_back(Fixture{name, bytes, {}, {}});
  }
  std::vector<uint8_t> cpu = cpu_program();
  if (!cpu.empty()) fixtures.push_back(Fixture{"cpu_scale2 (hand-made)", cpu, {}, {}});
  for (Fixture& f : fixtures) {
    EXPECT_TRUE(test::fuzz::map_file(f.bytes.data(), f.bytes.size(), &f.map)) << f.name;
    f.payloads = payload_ranges(f.bytes);
  }
  return fixtures;
}

// ---- Running et-verify-pte ------------------------------------------------------------------

struct ToolRun {
  bool exited = false;  // else killed by a signal, or timed out
  int status = -1;      // exit status, or the signal
  bool timed_out = false;
  std::string out;
  std::string err;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

ToolRun run_tool(const std::vector<std::string>& args, const std::string& dir,
                 const std::vector<std::string>& extra_env = {}) {
  ToolRun result;
  std::string out_path = dir + "/stdout.txt";
  std::string err_path = dir + "/stderr.txt";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env_strings(extra_env);
  for (char** e = environ; *e != nullptr; ++e) env_strings.push_back(*e);
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  pid_t pid = -1;
  int spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    ADD_FAILURE() << "cannot run " << argv[0] << ": " << std::strerror(spawned);
    return result;
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kBatchTimeoutSeconds);
  int wstatus = 0;
  for (;;) {
    pid_t done = waitpid(pid, &wstatus, WNOHANG);
    if (done == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &wstatus, 0);
      result.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  result.exited = !result.timed_out && WIFEXITED(wstatus);
  result.status = result.exited ? WEXITSTATUS(wstatus) : (WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : -1);
  result.out = read_text(out_path);
  result.err = read_text(err_path);
  return result;
}

// ---- Loading in this process ------------------------------------------------------------------

const BackendRegistry& backends() {
  static BackendRegistry* registry = [] {
    auto* r = new BackendRegistry();
    Error e = register_backends(*r, BackendOptions{});
    EXPECT_FALSE(e) << e.message();
    return r;
  }();
  return *registry;
}

// Loads every method of `path` as an application would; the first error, or ok.
Error load_everything(const std::string& path) {
  Result<FileDataLoader> loader = FileDataLoader::open(path.c_str());
  if (!loader.ok()) return loader.error();
  Result<Program> program = Program::load(&loader.get());
  if (!program.ok()) return program.error();
  NativeCodeTrust trust;
  trust.allow_native_code = true;
  for (size_t i = 0; i < program->num_methods(); ++i) {
    const char* name = program->method_name(i);
    Result<MethodMeta> meta = program->method_meta(name);
    if (!meta.ok()) return meta.error();
    Result<size_t> bytes = meta->method_allocator_bytes(&backends(), &test::all_kernels());
    if (!bytes.ok()) return bytes.error();
    // What et-verify-pte was told the machine has (--max-memory); more must not have passed.
    uint64_t total = bytes.get();
    for (size_t a = 0; a < meta->num_arenas(); ++a)
      total = meta->arena_size(a) > kMaxMemoryBytes ? kMaxMemoryBytes + 1 : total + meta->arena_size(a);
    if (total > kMaxMemoryBytes)
      return Error::make(ErrorCode::OutOfMemory, "method '%s' needs more than the %s bytes et-verify-pte was given",
                         name, kMaxMemory);
    test::MethodMemory memory(*meta, size_t{1} << 20, &backends());
    Result<Method> method = program->load_method(name, &memory.manager, &test::all_kernels(), &backends(), &trust);
    if (!method.ok()) return method.error();
  }
  return Error::ok();
}

// What only the dynamic loader sees (et_verify_pte.cpp, "Delegates").
bool is_native_load_failure(const Error& e) {
  const char* m = e.message();
  return std::strstr(m, "(backend 'cpu'): init failed") != nullptr &&
         (std::strstr(m, "cannot load the shared object") != nullptr || std::strstr(m, "does not export") != nullptr ||
          std::strstr(m, "etmlir_cpu_payload_abi() returns") != nullptr);
}

// ---- The test ---------------------------------------------------------------------------------

struct Case {
  std::string path;
  std::string fixture;
  int strategy;
  uint64_t index;
};

struct Stats {
  uint64_t cases = 0;
  uint64_t verified = 0;
  uint64_t refused = 0;
  uint64_t loaded = 0;
  uint64_t native_only = 0;  // verified; the dynamic loader refused the cpu payload
  uint64_t by_strategy[kNumStrategies][2] = {};  // refused, verified
  std::vector<std::string> findings;
};

void mutate_case(const Fixture& f, int strategy, Rng& rng, std::vector<uint8_t>* work, size_t* size) {
  if (strategy == kPayloadHeader && !f.payloads.empty()) {
    // 1 to 4 bytes of the first KiB of a payload: its size prefix, the header FlatBuffer (backend id,
    // format, arch, entry point names, tensor specs), the padding before the body.
    const auto& range = f.payloads[rng.below(f.payloads.size())];
    size_t span = range.second < 1024 ? range.second : 1024;
    uint64_t n = 1 + rng.below(4);
    for (uint64_t i = 0; i < n && span > 0; ++i) {
      uint8_t& b = (*work)[range.first + rng.below(span)];
      b = rng.percent(50) ? static_cast<uint8_t>(b ^ (1u << rng.below(8))) : static_cast<uint8_t>(rng.next());
    }
    return;
  }
  test::fuzz::mutate(strategy == kPayloadHeader ? test::fuzz::kBitFlips : strategy, rng, f.map, work->data(), size,
                     work->size());
}

void check_batch(const std::vector<Case>& batch, const std::string& dir, bool verbose, Stats* stats, bool* keep) {
  std::vector<std::string> args = {verify_pte_path(), "--quiet", std::string("--max-memory=") + kMaxMemory, "--"};
  for (const Case& c : batch) args.push_back(c.path);
  ToolRun run = run_tool(args, dir);
  if (run.timed_out || !run.exited || (run.status != 0 && run.status != 1)) {
    *keep = true;
    ADD_FAILURE() << "et-verify-pte " << (run.timed_out ? "hung (killed after 120 s)"
                                          : run.exited ? "exited with status " + std::to_string(run.status)
                                                       : "was killed by signal " + std::to_string(run.status))
                  << " on a batch of " << batch.size() << " files in " << dir << "; its stderr ends with:\n"
                  << run.err.substr(run.err.size() > 2000 ? run.err.size() - 2000 : 0);
    return;
  }
  // Every file exactly once: "PATH: ok (" on stdout, or one "PATH: error: " line on stderr.
  std::map<std::string, int> ok, errors;
  std::istringstream out(run.out), err(run.err);
  for (std::string line; std::getline(out, line);) {
    size_t at = line.find(": ok (");
    if (at == std::string::npos) {
      ADD_FAILURE() << "et-verify-pte --quiet printed an unexpected line: " << line;
      continue;
    }
    ++ok[line.substr(0, at)];
  }
  for (std::string line; std::getline(err, line);) {
    size_t at = line.find(": error: ");
    if (at == std::string::npos || line.size() == at + 9) {
      ADD_FAILURE() << "et-verify-pte printed an error that is not one 'FILE: error: MESSAGE' line: " << line;
      continue;
    }
    ++errors[line.substr(0, at)];
  }
  for (const Case& c : batch) {
    int reports = ok[c.path] + errors[c.path];
    if (reports != 1) {
      *keep = true;
      ADD_FAILURE() << c.path << " (" << c.fixture << ", " << strategy_name(c.strategy) << ") was reported " << reports
                    << " times";
      continue;
    }
    ++stats->cases;
    bool verified = ok[c.path] == 1;
    ++stats->by_strategy[c.strategy][verified ? 1 : 0];
    if (!verified) {
      ++stats->refused;
      continue;
    }
    ++stats->verified;
    Error e = load_everything(c.path);
    if (!e) {
      ++stats->loaded;
    } else if (is_native_load_failure(e)) {
      ++stats->native_only;
      if (verbose) std::printf("[verify-fuzz] native-only: case %" PRIu64 ": %s\n", c.index, e.message());
    } else {
      *keep = true;
      std::string finding = c.path + " (" + c.fixture + ", case " + std::to_string(c.index) + ", " +
                            strategy_name(c.strategy) + "): et-verify-pte said ok; the runtime: " + e.message();
      stats->findings.push_back(finding);
    }
  }
}

TEST(VerifyPte, NeverLoadsPayloadCode) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  std::vector<uint8_t> program = cpu_program();
  ASSERT_FALSE(program.empty());
  std::string path = dir.write("cpu.pte", program);

  ToolRun verify = run_tool({verify_pte_path(), path}, dir.path(), {"LD_DEBUG=files"});
  ASSERT_TRUE(verify.exited) << verify.err;
  EXPECT_EQ(verify.status, 0) << verify.err;
  EXPECT_NE(verify.out.find(path + ": ok (program "), std::string::npos) << verify.out;
  EXPECT_NE(verify.out.find("1 delegate (1 delegate checked up to init, not initialized)"), std::string::npos)
      << verify.out;
  EXPECT_NE(verify.out.find("delegate 0 (cpu): checked up to init; unsigned"), std::string::npos) << verify.out;
  // glibc's loader prints "file=... dynamically loaded by ..." for every dlopen().
  EXPECT_EQ(verify.err.find("dynamically loaded by"), std::string::npos)
      << "et-verify-pte dlopen()ed something:\n" << verify.err;

  ToolRun run = run_tool({ETMLIR_ET_RUN, path, "--allow-native", "--iterations", "1", "--warmup", "0"}, dir.path(),
                         {"LD_DEBUG=files"});
  ASSERT_TRUE(run.exited) << run.err;
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.err.find("dynamically loaded by"), std::string::npos)
      << "the control failed: et-run ran the cpu delegate but LD_DEBUG saw no dlopen()";
}

// One line on stderr, starting with `prefix`, and the exit status.
void expect_one_line(const ToolRun& r, int status, const std::string& prefix, const std::string& contains,
                     const std::string& what) {
  ASSERT_TRUE(r.exited) << what << ": killed by signal " << r.status << (r.timed_out ? " (timed out)" : "");
  EXPECT_EQ(r.status, status) << what << ": " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << what << ": not one line: " << r.err;
  EXPECT_EQ(r.err.rfind(prefix, 0), 0u) << what << ": " << r.err;
  EXPECT_NE(r.err.find(contains), std::string::npos) << what << ": " << r.err;
}

TEST(VerifyPte, CommandLineMisuseIsOneLine) {
  ETMLIR_REQUIRE_FIXTURES();
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string tool = verify_pte_path();
  const std::string good = test::fixture_path("seed_cnn.pte");
  const std::string usage = "et-verify-pte: ";
  struct Usage {
    std::vector<std::string> args;
    const char* contains;
  } usages[] = {
      {{}, "no file given"},
      {{"--frobnicate", good}, "unknown option '--frobnicate'"},
      {{"-x", good}, "unknown option '-x'"},
      {{good, "--max-memory"}, "--max-memory needs a value"},
      {{"--max-memory=", good}, "not ''"},
      {{"--max-memory", "-1", good}, "not '-1'"},
      {{"--max-memory", "12Q", good}, "not '12Q'"},
      {{"--max-memory", "99999999999999999999", good}, "not '99999999999999999999'"},
      {{"--max-memory", "17179869184G", good}, "not '17179869184G'"},
  };
  for (const Usage& u : usages) {
    std::vector<std::string> args = {tool};
    args.insert(args.end(), u.args.begin(), u.args.end());
    ToolRun r = run_tool(args, dir.path());
    expect_one_line(r, 2, usage, u.contains, "usage error " + std::string(u.contains));
    EXPECT_NE(r.err.find("(et-verify-pte --help for usage)"), std::string::npos) << r.err;
  }

  std::string empty = dir.write("empty.pte", {});
  std::string fifo = dir.path() + "/fifo.pte";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  std::string name_with_newline = dir.write("new\nline.pte", {1, 2, 3});
  struct Bad {
    std::string file;
    const char* contains;
  } bad[] = {
      {dir.path() + "/missing.pte", "cannot open"},
      {dir.path(), "is not a regular file"},
      {"/dev/null", "is not a regular file"},
      {fifo, "is not a regular file"},  // no writer: opening it must not block
      {empty, "0 bytes is too short for the 64-byte header"},
      {name_with_newline, "too short"},
  };
  for (const Bad& b : bad) {
    ToolRun r = run_tool({tool, b.file}, dir.path());
    std::string shown = b.file;
    size_t newline = shown.find('\n');
    if (newline != std::string::npos) shown.replace(newline, 1, "\\x0a");  // one line: the name is escaped
    expect_one_line(r, 1, shown + ": error: ", b.contains, b.file);
  }

  // Too little memory: the method's needs, named.
  ToolRun small = run_tool({tool, "--max-memory", "1K", good}, dir.path());
  expect_one_line(small, 1, good + ": error: ", "more than --max-memory 1,024", "--max-memory 1K");
  // A good file and a bad one: the good one's ok line, then the bad one's error; exit 1.
  ToolRun mixed = run_tool({tool, "--quiet", good, empty}, dir.path());
  expect_one_line(mixed, 1, empty + ": error: ", "too short", "mixed");
  EXPECT_EQ(mixed.out.rfind(good + ": ok (program ", 0), 0u) << mixed.out;
  EXPECT_EQ(std::count(mixed.out.begin(), mixed.out.end(), '\n'), 1) << "--quiet prints one line per file";
  // -- ends the options: a file named like one.
  std::string dashed = dir.write("--quiet", test::read_file(good));
  ToolRun after = run_tool({tool, "-q", "--", dashed}, dir.path());
  EXPECT_TRUE(after.exited && after.status == 0) << after.err;
}

TEST(VerifyPteFuzz, EveryFileItPassesLoadsAndItNeverCrashes) {
  ETMLIR_REQUIRE_FIXTURES();
  std::vector<Fixture> fixtures = load_fixtures();
  ASSERT_GE(fixtures.size(), 3u) << "too few fixtures in " << test::fixture_dir();
  const uint64_t cases = env_u64("ETMLIR_FUZZ_CASES", 2000);
  const uint64_t seed = env_u64("ETMLIR_FUZZ_SEED", 1);
  const bool verbose = env_u64("ETMLIR_FUZZ_VERBOSE", 0) != 0;

  char dir_template[] = "/tmp/etmlir-verify-fuzz-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;

  // The pristine files pass and load: the baseline the mutations start from.
  {
    std::vector<Case> batch;
    for (size_t i = 0; i < fixtures.size(); ++i) {
      std::string path = dir + "/pristine_" + std::to_string(i) + ".pte";
      std::ofstream(path, std::ios::binary)
          .write(reinterpret_cast<const char*>(fixtures[i].bytes.data()), static_cast<std::streamsize>(fixtures[i].bytes.size()));
      batch.push_back(Case{path, fixtures[i].name, 0, i});
    }
    Stats pristine;
    bool keep = false;
    check_batch(batch, dir, verbose, &pristine, &keep);
    EXPECT_EQ(pristine.verified, fixtures.size()) << "a pristine fixture does not verify";
    EXPECT_EQ(pristine.loaded, fixtures.size()) << "a pristine fixture does not load";
    for (const Case& c : batch) std::remove(c.path.c_str());
  }

  Stats stats;
  bool keep = false;
  std::vector<Case> batch;
  std::vector<uint8_t> work;
  for (uint64_t i = 0; i < cases; ++i) {
    const Fixture& f = fixtures[i % fixtures.size()];
    Rng rng(seed * 0x9E3779B97F4A7C15ull ^ (i + 1) * 0xD1B54A32D192ED03ull);
    int strategy = rng.percent(10) ? kPayloadHeader : test::fuzz::pick_strategy(rng);
    work.assign(f.bytes.begin(), f.bytes.end());
    work.resize(f.bytes.size() + 64);  // the capacity mutate() may write into (a random file)
    size_t size = f.bytes.size();
    mutate_case(f, strategy, rng, &work, &size);
    std::string path = dir + "/case_" + std::to_string(i) + ".pte";
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(work.data()), static_cast<std::streamsize>(size));
    batch.push_back(Case{path, f.name, strategy, i});
    if (batch.size() == kBatch || i + 1 == cases) {
      bool keep_batch = false;
      check_batch(batch, dir, verbose, &stats, &keep_batch);
      keep = keep || keep_batch;
      if (!keep_batch) {
        for (const Case& c : batch) std::remove(c.path.c_str());
      }
      batch.clear();
    }
  }

  std::printf("[verify-fuzz] %" PRIu64 " mutated files (seed %" PRIu64 ", %zu fixtures): et-verify-pte refused %" PRIu64
              ", passed %" PRIu64 "; of those the runtime loaded %" PRIu64 ", the dynamic loader alone refused %" PRIu64
              ", findings %zu\n",
              stats.cases, seed, fixtures.size(), stats.refused, stats.verified, stats.loaded, stats.native_only,
              stats.findings.size());
  std::printf("[verify-fuzz] by strategy (refused / passed):\n");
  for (int s = 0; s < kNumStrategies; ++s)
    std::printf("[verify-fuzz]   %-15s %5" PRIu64 " %5" PRIu64 "\n", strategy_name(s), stats.by_strategy[s][0],
                stats.by_strategy[s][1]);
  std::fflush(stdout);

  std::string findings;
  for (size_t k = 0; k < stats.findings.size() && k < 10; ++k) findings += "\n  " + stats.findings[k];
  EXPECT_TRUE(stats.findings.empty()) << stats.findings.size()
                                      << " files passed et-verify-pte but do not load (kept in " << dir << "):" << findings;
  EXPECT_EQ(stats.cases, cases) << "some files were not reported";
  // The mutations must reach both sides: some files pass, most are refused.
  EXPECT_GT(stats.verified * 20, stats.cases) << "fewer than 5% of the mutated files passed";
  EXPECT_GT(stats.refused * 2, stats.cases) << "fewer than half of the mutated files were refused";
  if (!keep) rmdir(dir.c_str());
}

}  // namespace
}  // namespace etmlir
