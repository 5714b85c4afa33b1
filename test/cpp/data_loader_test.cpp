// Files that change under a loaded program (data_loader.h, "Files that change").
//
// FileDataLoader and BufferDataLoader hold copies: after load, the file can be
// overwritten with garbage or truncated to 0 bytes and execute() still gives
// the same outputs (bit for bit) as before, and PyTorch eager's within the
// tolerance of program_test (|d| <= 1e-4 + 1e-4 |expected|). A method loaded
// *after* the change reads the file again (FileDataLoader: delegate payloads)
// and must fail with an Error, not crash.
//
// MmapDataLoader maps the file: a change it sees before a load() is an Io
// error; what it cannot see (a change while methods execute) is characterized
// here too, so that the documented rule stays true: weights overwritten in
// place give NaN outputs, a whole-file overwrite crashes (the program's tables
// are read from the mapping at every call), a truncation is SIGBUS.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "etmlir/register_backends.h"
#include "etmlir/runtime/data_loader.h"
#include "etmlir/runtime/method.h"
#include "etmlir/runtime/program.h"
#include "test_util.h"

namespace etmlir {
namespace {

using test::AlignedBuffer;
using test::LoaderKind;

// A copy of a fixture in a fresh temporary folder, removed at the end.
class TempCopy {
 public:
  explicit TempCopy(const std::string& fixture) {
    char dir[] = "/tmp/etmlir-loader-test-XXXXXX";
    if (mkdtemp(dir) == nullptr) return;
    dir_ = dir;
    path_ = dir_ + "/" + fixture;
    std::vector<uint8_t> bytes = test::read_file(test::fixture_path(fixture));
    if (bytes.empty()) return;
    std::FILE* f = std::fopen(path_.c_str(), "wb");
    if (f == nullptr) return;
    ok_ = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
    ok_ = std::fclose(f) == 0 && ok_;
    size_ = bytes.size();
  }
  ~TempCopy() {
    if (!path_.empty()) std::remove(path_.c_str());
    if (!dir_.empty()) rmdir(dir_.c_str());
  }
  bool ok() const { return ok_; }
  const std::string& path() const { return path_; }
  size_t size() const { return size_; }

  // The same number of bytes, all 0xA5, written over the file in place (same inode, no O_TRUNC):
  // what a tool rewriting the file where it lies does.
  bool overwrite_with_garbage() const {
    int fd = ::open(path_.c_str(), O_WRONLY);
    if (fd < 0) return false;
    std::vector<uint8_t> garbage(size_, 0xA5);
    bool ok = ::pwrite(fd, garbage.data(), garbage.size(), 0) == static_cast<ssize_t>(garbage.size());
    ok = ::fsync(fd) == 0 && ok;
    return ::close(fd) == 0 && ok;
  }
  bool truncate_to(off_t size) const { return ::truncate(path_.c_str(), size) == 0; }

 private:
  std::string dir_;
  std::string path_;
  size_t size_ = 0;
  bool ok_ = false;
};

// A program loaded from a file by one loader, its method "forward" ready to run on the fixture's reference input.
struct Loaded {
  std::vector<uint8_t> file_bytes;  // BufferDataLoader: the file's bytes, read once
  std::unique_ptr<AlignedBuffer> buffer;
  std::unique_ptr<DataLoader> loader;
  std::unique_ptr<Program> program;
  std::unique_ptr<test::MethodMemory> memory;
  std::unique_ptr<Method> method;
};

Error open_loader(const std::string& path, LoaderKind kind, Loaded* out) {
  switch (kind) {
    case LoaderKind::Buffer: {
      out->file_bytes = test::read_file(path);
      if (out->file_bytes.empty()) return Error::make(ErrorCode::Io, "cannot read %s", path.c_str());
      out->buffer = std::make_unique<AlignedBuffer>(out->file_bytes.size());
      std::memcpy(out->buffer->data(), out->file_bytes.data(), out->file_bytes.size());
      out->loader = std::make_unique<BufferDataLoader>(out->buffer->data(), out->file_bytes.size());
      return Error::ok();
    }
    case LoaderKind::File: {
      Result<FileDataLoader> loader = FileDataLoader::open(path.c_str());
      if (!loader.ok()) return loader.error();
      out->loader = std::make_unique<FileDataLoader>(static_cast<FileDataLoader&&>(loader.get()));
      return Error::ok();
    }
    case LoaderKind::Mmap: {
      Result<MmapDataLoader> loader = MmapDataLoader::open(path.c_str());
      if (!loader.ok()) return loader.error();
      out->loader = std::make_unique<MmapDataLoader>(static_cast<MmapDataLoader&&>(loader.get()));
      return Error::ok();
    }
  }
  return Error::make(ErrorCode::Internal, "unknown loader");
}

Error load_program(Loaded* out) {
  Result<Program> program = Program::load(out->loader.get());
  if (!program.ok()) return program.error();
  out->program = std::make_unique<Program>(static_cast<Program&&>(program.get()));
  return Error::ok();
}

const BackendRegistry& backends() {
  static BackendRegistry* registry = [] {
    auto* r = new BackendRegistry();
    Error e = register_backends(*r, BackendOptions{});
    EXPECT_FALSE(e) << e.message();
    return r;
  }();
  return *registry;
}

Error load_forward(Loaded* out) {
  Result<MethodMeta> meta = out->program->method_meta("forward");
  if (!meta.ok()) return meta.error();
  out->memory = std::make_unique<test::MethodMemory>(*meta, test::kDefaultTempBytes, &backends());
  Result<Method> method = out->program->load_method("forward", &out->memory->manager, &test::all_kernels(), &backends());
  if (!method.ok()) return method.error();
  out->method = std::make_unique<Method>(static_cast<Method&&>(method.get()));
  return Error::ok();
}

// One execute() on the reference input; the output's values.
std::vector<float> run(Method& method, const test::Reference& ref) {
  Error e = method.set_input(0, ref.input.data(), ref.input.size() * sizeof(float), ScalarType::Float,
                             Span<const int64_t>(ref.input_shape.data(), ref.input_shape.size()));
  EXPECT_FALSE(e) << e.message();
  e = method.execute();
  EXPECT_FALSE(e) << e.message();
  if (e) return {};
  const Tensor& out = method.output(0).to_tensor();
  return std::vector<float>(out.data_as<float>(), out.data_as<float>() + out.numel());
}

// |actual - expected| <= 1e-4 + 1e-4 * |expected| (program_test's tolerance against PyTorch eager).
void expect_close(const std::vector<float>& actual, const std::vector<float>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  size_t bad = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (!(std::fabs(actual[i] - expected[i]) <= 1e-4f + 1e-4f * std::fabs(expected[i]))) ++bad;
  }
  EXPECT_EQ(bad, 0u) << "elements differ from PyTorch eager";
}

// Bit-for-bit equality (NaN included).
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// ---- Copying loaders: the file may change once loaded ---------------------------------------

class CopyingLoader : public ::testing::TestWithParam<LoaderKind> {};

TEST_P(CopyingLoader, ExecuteIsUnchangedAfterTheFileIsOverwrittenThenTruncated) {
  ETMLIR_REQUIRE_FIXTURES();
  test::Reference ref;
  ASSERT_TRUE(test::read_reference("mlp", &ref));
  TempCopy file("mlp.pte");
  ASSERT_TRUE(file.ok());
  Loaded loaded;
  Error e = open_loader(file.path(), GetParam(), &loaded);
  ASSERT_FALSE(e) << e.message();
  e = load_program(&loaded);
  ASSERT_FALSE(e) << e.message();
  e = load_forward(&loaded);
  ASSERT_FALSE(e) << e.message();

  std::vector<float> before = run(*loaded.method, ref);
  expect_close(before, ref.expected);

  ASSERT_TRUE(file.overwrite_with_garbage());
  std::vector<float> overwritten = run(*loaded.method, ref);
  EXPECT_TRUE(same_bits(overwritten, before)) << "outputs changed after the file was overwritten";

  ASSERT_TRUE(file.truncate_to(0));
  std::vector<float> truncated = run(*loaded.method, ref);
  EXPECT_TRUE(same_bits(truncated, before)) << "outputs changed after the file was truncated";
  // The program's own accessors read its copies too.
  EXPECT_STREQ(loaded.program->method_name(0), "forward");
}

// A method loaded after the file shrank reads its delegate's payload from the file again
// (FileDataLoader) or from the copy (BufferDataLoader): an Error or a working method, never a crash.
TEST_P(CopyingLoader, AMethodLoadedAfterTheFileShrankFailsCleanlyOrWorks) {
  ETMLIR_REQUIRE_FIXTURES();
  test::Reference ref;
  ASSERT_TRUE(test::read_reference("mlp", &ref));
  TempCopy file("nested_mlp.pte");
  ASSERT_TRUE(file.ok());
  Loaded loaded;
  Error e = open_loader(file.path(), GetParam(), &loaded);
  ASSERT_FALSE(e) << e.message();
  e = load_program(&loaded);
  ASSERT_FALSE(e) << e.message();
  ASSERT_TRUE(file.truncate_to(100));
  e = load_forward(&loaded);
  if (GetParam() == LoaderKind::File) {
    ASSERT_TRUE(e) << "the payload was read from a file that is now 100 bytes";
    EXPECT_EQ(e.code(), ErrorCode::Io) << e.message();
    EXPECT_CONTAINS(e.message(), "unexpected end of file");
  } else {
    ASSERT_FALSE(e) << e.message();
    expect_close(run(*loaded.method, ref), ref.expected);
  }
}

INSTANTIATE_TEST_SUITE_P(Loaders, CopyingLoader, ::testing::Values(LoaderKind::File, LoaderKind::Buffer),
                         [](const ::testing::TestParamInfo<LoaderKind>& info) {
                           return std::string(test::loader_kind_name(info.param));
                         });

// ---- MmapDataLoader: the file must not change ----------------------------------------------

// Past the file system's timestamp granularity (a clock tick), so that a write changes the mtime.
void wait_a_tick() { std::this_thread::sleep_for(std::chrono::milliseconds(30)); }

TEST(MmapDataLoader, RefusesToLoadFromAFileThatShrankSinceItWasMapped) {
  ETMLIR_REQUIRE_FIXTURES();
  TempCopy file("nested_mlp.pte");
  ASSERT_TRUE(file.ok());
  Loaded loaded;
  ASSERT_FALSE(open_loader(file.path(), LoaderKind::Mmap, &loaded));
  Error e = load_program(&loaded);
  ASSERT_FALSE(e) << e.message();
  // The delegate's payload (a 2 MB nested program) lies past byte 4096: touching it now would be SIGBUS.
  ASSERT_TRUE(file.truncate_to(4096));
  e = load_forward(&loaded);
  ASSERT_TRUE(e);
  EXPECT_EQ(e.code(), ErrorCode::Io);
  std::string expected = "the file changed after it was mapped (" + std::to_string(file.size()) + " bytes then, 4096 now)";
  EXPECT_CONTAINS(e.message(), expected.c_str());
  EXPECT_CONTAINS(e.message(), "FileDataLoader");
}

TEST(MmapDataLoader, RefusesToLoadFromAFileOverwrittenInPlace) {
  ETMLIR_REQUIRE_FIXTURES();
  TempCopy file("mlp.pte");
  ASSERT_TRUE(file.ok());
  Loaded loaded;
  ASSERT_FALSE(open_loader(file.path(), LoaderKind::Mmap, &loaded));
  wait_a_tick();
  ASSERT_TRUE(file.overwrite_with_garbage());
  Error e = load_program(&loaded);
  ASSERT_TRUE(e) << "Program::load read a file overwritten after it was mapped";
  EXPECT_EQ(e.code(), ErrorCode::Io);
  EXPECT_CONTAINS(e.message(), "modified in place");
}

TEST(MmapDataLoader, AFileReplacedByRenameIsSafe) {
  ETMLIR_REQUIRE_FIXTURES();
  test::Reference ref;
  ASSERT_TRUE(test::read_reference("mlp", &ref));
  TempCopy file("mlp.pte");
  ASSERT_TRUE(file.ok());
  Loaded loaded;
  ASSERT_FALSE(open_loader(file.path(), LoaderKind::Mmap, &loaded));
  ASSERT_FALSE(load_program(&loaded));
  ASSERT_FALSE(load_forward(&loaded));
  std::vector<float> before = run(*loaded.method, ref);
  // A new file under the old name: the mapping keeps the old inode's bytes.
  std::string replacement = file.path() + ".new";
  {
    std::FILE* f = std::fopen(replacement.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::vector<uint8_t> garbage(file.size() / 2, 0xA5);
    ASSERT_EQ(std::fwrite(garbage.data(), 1, garbage.size(), f), garbage.size());
    ASSERT_EQ(std::fclose(f), 0);
  }
  ASSERT_EQ(std::rename(replacement.c_str(), file.path().c_str()), 0);
  EXPECT_TRUE(same_bits(run(*loaded.method, ref), before));
}

// What the rule protects against, while methods execute (MmapDataLoader cannot see it there).
// Weights overwritten in place are read as weights: all-ones bytes are NaN floats, so NaN outputs.
TEST(MmapDataLoader, WeightsOverwrittenWhileAMethodLivesGiveNaN) {
  ETMLIR_REQUIRE_FIXTURES();
  test::Reference ref;
  ASSERT_TRUE(test::read_reference("mlp", &ref));
  TempCopy file("mlp.pte");
  ASSERT_TRUE(file.ok());
  Loaded loaded;
  ASSERT_FALSE(open_loader(file.path(), LoaderKind::Mmap, &loaded));
  ASSERT_FALSE(load_program(&loaded));
  ASSERT_FALSE(load_forward(&loaded));
  expect_close(run(*loaded.method, ref), ref.expected);
  // The segment data (the constants) starts at the header's segment_base_offset.
  std::vector<uint8_t> head = test::read_file(file.path());
  ASSERT_GE(head.size(), 64u);
  uint64_t base = 0;
  for (int i = 7; i >= 0; --i) base = (base << 8) | head[32 + i];
  int fd = ::open(file.path().c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  std::vector<uint8_t> ones(file.size() - base, 0xFF);
  ASSERT_EQ(::pwrite(fd, ones.data(), ones.size(), static_cast<off_t>(base)), static_cast<ssize_t>(ones.size()));
  ::close(fd);
  std::vector<float> after = run(*loaded.method, ref);
  ASSERT_FALSE(after.empty());
  size_t nans = 0;
  for (float v : after) nans += std::isnan(v) ? 1 : 0;
  EXPECT_EQ(nans, after.size()) << "the mapping did not see the overwrite: update data_loader.h";
}

// The program's tables live in the mapping too, and set_input/execute read them at every call: a
// whole-file overwrite is undefined behaviour, here a crash.
TEST(MmapDataLoaderDeathTest, AFileOverwrittenWhileAMethodLivesCrashes) {
  ETMLIR_REQUIRE_FIXTURES();
  test::Reference ref;
  ASSERT_TRUE(test::read_reference("mlp", &ref));
  TempCopy file("mlp.pte");
  ASSERT_TRUE(file.ok());
  EXPECT_EXIT(
      {
        Loaded loaded;
        if (open_loader(file.path(), LoaderKind::Mmap, &loaded) || load_program(&loaded) || load_forward(&loaded))
          std::_Exit(3);
        if (!file.overwrite_with_garbage()) std::_Exit(4);
        run(*loaded.method, ref);
        std::_Exit(0);
      },
      [](int status) { return !(WIFEXITED(status) && WEXITSTATUS(status) == 0); }, "");
}

TEST(MmapDataLoaderDeathTest, AFileTruncatedWhileAMethodLivesIsSigbus) {
  ETMLIR_REQUIRE_FIXTURES();
  test::Reference ref;
  ASSERT_TRUE(test::read_reference("mlp", &ref));
  TempCopy file("mlp.pte");
  ASSERT_TRUE(file.ok());
  EXPECT_EXIT(
      {
        Loaded loaded;
        if (open_loader(file.path(), LoaderKind::Mmap, &loaded) || load_program(&loaded) || load_forward(&loaded))
          std::_Exit(3);
        if (!file.truncate_to(0)) std::_Exit(4);
        run(*loaded.method, ref);  // reads the program's tables and the weights through the mapping
        std::_Exit(0);
      },
#if defined(__SANITIZE_ADDRESS__)
      // ASan catches the SIGBUS, reports it and exits.
      [](int status) { return WIFEXITED(status) && WEXITSTATUS(status) != 0; }, "BUS on unknown address");
#else
      ::testing::KilledBySignal(SIGBUS), "");
#endif
}

}  // namespace
}  // namespace etmlir
