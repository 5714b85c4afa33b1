// Program and Method on real .pte files (make_fixtures.py: mlp, seed_cnn, a
// delegate program) and on small programs built here with FlatBufferBuilder:
// what MethodMeta reports, the errors a user sees for each mistake, full runs
// against PyTorch eager through all three data loaders, and the backend
// lifecycle.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "etmlir/runtime/backend.h"
#include "etmlir/runtime/data_loader.h"
#include "etmlir/runtime/method.h"
#include "etmlir/runtime/program.h"
#include "etmlir/schema/program_generated.h"
#include "test_util.h"

namespace etmlir {
namespace {

namespace fbs = etmlir::schema;
using test::AlignedBuffer;
using test::LoadedProgram;
using test::LoaderKind;
using test::MethodMemory;

// Loads a fixture through the buffer loader (asserting it loads).
std::unique_ptr<LoadedProgram> load_fixture(const std::string& name, LoaderKind kind = LoaderKind::Buffer) {
  auto loaded = std::make_unique<LoadedProgram>();
  Error e = test::load_program(test::fixture_path(name), kind, loaded.get());
  EXPECT_FALSE(e) << name << ": " << e.message();
  return e ? nullptr : std::move(loaded);
}

// Kernels that accept anything and do nothing, one per operator the program
// calls (signature '?' per argument): method loading and set_input checks
// without depending on the real kernels or on which ops the compiler emits.
Error nop_kernel(KernelContext&, EValue**) { return Error::ok(); }
Error failing_kernel(KernelContext& ctx, EValue**) { return ctx.fail(ErrorCode::KernelFailed, "boom"); }

class StubKernels {
 public:
  // `failing`: the operator whose kernel fails; `signatures`: operators registered
  // with the given signature instead of '?'s.
  explicit StubKernels(const Program& program, const std::string& failing = "",
                       const std::vector<std::pair<std::string, std::string>>& signatures = {}) {
    const fbs::Method* m = fbs::GetProgram(program.flatbuffer())->methods()->Get(0);
    for (flatbuffers::uoffset_t i = 0; m->instructions() && i < m->instructions()->size(); ++i) {
      const fbs::KernelCall* call = m->instructions()->Get(i)->kind_as_KernelCall();
      if (call == nullptr) continue;
      const fbs::Operator* op = m->operators()->Get(call->op());
      std::string name = op->name()->str() + (op->overload() && op->overload()->size() ? "." + op->overload()->str() : "");
      if (registry_.find(name.c_str()) != nullptr) continue;
      std::string signature(call->args() ? call->args()->size() : 0, '?');
      for (const auto& [op_name, sig] : signatures) {
        if (op_name == name) signature = sig;
      }
      names_.push_back(name);
      signatures_.push_back(signature);
      EXPECT_FALSE(registry_.add(names_.back().c_str(), signatures_.back().c_str(),
                                 name == failing ? failing_kernel : nop_kernel));
    }
  }
  const KernelRegistry* get() const { return &registry_; }

 private:
  std::deque<std::string> names_;  // stable addresses: the registry keeps the pointers
  std::deque<std::string> signatures_;
  KernelRegistry registry_;
};

// The index of the first instruction that calls `kernel`, or -1.
int first_call_of(const Method& method, const char* kernel) {
  for (size_t i = 0; i < method.num_instructions(); ++i) {
    if (std::strcmp(method.instruction_name(i), kernel) == 0) return static_cast<int>(i);
  }
  return -1;
}

// ---- Loading and MethodMeta --------------------------------------------------------------

TEST(Program, LoadsMlpAndReportsItsMethodMeta) {
  ETMLIR_REQUIRE_FIXTURES();
  auto loaded = load_fixture("mlp.pte");
  ASSERT_TRUE(loaded);
  const Program& program = *loaded->program;
  EXPECT_EQ(program.version(), 1u);  // no state: the lowest version that reads it right
  ASSERT_EQ(program.num_methods(), 1u);
  EXPECT_STREQ(program.method_name(0), "forward");
  EXPECT_EQ(program.method_name(1), nullptr);
  EXPECT_GT(program.constant_size(), 784u * 512u * 4u);  // the first layer's weights at least
  EXPECT_EQ(reinterpret_cast<uintptr_t>(program.constant_data()) % 16, 0u);

  Result<MethodMeta> meta = program.method_meta("forward");
  ASSERT_TRUE(meta.ok()) << meta.error().message();
  EXPECT_STREQ(meta->name(), "forward");
  ASSERT_EQ(meta->num_inputs(), 1u);
  ASSERT_EQ(meta->num_outputs(), 1u);
  MethodMeta::TensorInfo input;
  ASSERT_TRUE(meta->input_tensor(0, &input));
  EXPECT_EQ(input.dtype, ScalarType::Float);
  ASSERT_EQ(input.dim, 2);
  EXPECT_EQ(input.sizes[0], 8);
  EXPECT_EQ(input.sizes[1], 784);
  EXPECT_FALSE(input.dynamic);
  EXPECT_TRUE(input.planned);
  EXPECT_FALSE(meta->input_tensor(1, &input));
  MethodMeta::TensorInfo output;
  ASSERT_TRUE(meta->output_tensor(0, &output));
  ASSERT_EQ(output.dim, 2);
  EXPECT_EQ(output.sizes[0], 8);
  EXPECT_EQ(output.sizes[1], 10);

  ASSERT_EQ(meta->num_arenas(), 1u);
  EXPECT_STREQ(meta->arena_name(0), "planned");
  // The input and the largest activation (8x512) are live together at least.
  EXPECT_GE(meta->arena_size(0), (8u * 784u + 8u * 512u) * 4u);
  EXPECT_GT(meta->method_allocator_bytes(), 5 * sizeof(EValue));
  // Three linear layers and two ReLUs, however the compiler lowers them.
  EXPECT_GE(meta->num_instructions(), 5u);
  std::vector<std::string> ops;
  char buffer[64];
  for (size_t i = 0; i < meta->num_operators(); ++i) ops.push_back(meta->operator_name(i, buffer, sizeof(buffer)));
  EXPECT_NE(std::find(ops.begin(), ops.end(), "aten::addmm.out"), ops.end());
  EXPECT_NE(std::find(ops.begin(), ops.end(), "aten::relu.out"), ops.end());
  char tiny[8];
  EXPECT_STREQ(meta->operator_name(0, tiny, sizeof(tiny)), ops[0].substr(0, 7).c_str());  // truncated, terminated
}

TEST(Program, MethodAllocatorBytesIsAnUpperBoundThatLoadingRespects) {
  ETMLIR_REQUIRE_FIXTURES();
  for (const char* name : {"mlp.pte", "seed_cnn.pte"}) {
    auto loaded = load_fixture(name);
    ASSERT_TRUE(loaded);
    Result<MethodMeta> meta = loaded->program->method_meta("forward");
    ASSERT_TRUE(meta.ok());
    MethodMemory memory(*meta, test::kDefaultTempBytes);
    Result<Method> method = loaded->program->load_method("forward", &memory.manager, &test::all_kernels());
    ASSERT_TRUE(method.ok()) << name << ": " << method.error().message();
    EXPECT_LE(memory.method_allocator.used(), meta->method_allocator_bytes()) << name;
    EXPECT_GT(memory.method_allocator.used(), 0u);
  }
}

TEST(Program, LoadWithoutALoaderIsInvalidArgument) {
  Result<Program> program = Program::load(nullptr);
  ASSERT_FALSE(program.ok());
  EXPECT_EQ(program.error().code(), ErrorCode::InvalidArgument);
  EXPECT_CONTAINS(program.error().message(), "no data loader");
}

TEST(Program, UnalignedBufferIsRejectedWithAHint) {
  ETMLIR_REQUIRE_FIXTURES();
  std::vector<uint8_t> bytes = test::read_file(test::fixture_path("seed_cnn.pte"));
  ASSERT_FALSE(bytes.empty());
  AlignedBuffer buffer(bytes.size() + 1);
  std::memcpy(buffer.data() + 1, bytes.data(), bytes.size());
  BufferDataLoader loader(buffer.data() + 1, bytes.size());
  Result<Program> program = Program::load(&loader);
  ASSERT_FALSE(program.ok());
  EXPECT_EQ(program.error().code(), ErrorCode::InvalidArgument);
  EXPECT_CONTAINS(program.error().message(), "not 8-byte aligned");
}

// Header and FlatBuffer corruptions each give their own message.
struct Corruption {
  const char* label;
  void (*apply)(std::vector<uint8_t>&);
  ErrorCode code;
  const char* message;
};

void put_u32(std::vector<uint8_t>& b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
void put_u64(std::vector<uint8_t>& b, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
// The Program table's `version` field, found through the generated accessors.
size_t version_offset(const std::vector<uint8_t>& b) {
  const uint8_t* fb = b.data() + 64;
  const fbs::Program* p = fbs::GetProgram(fb);
  const uint8_t* field = reinterpret_cast<const flatbuffers::Table*>(p)->GetAddressOf(fbs::Program::VT_VERSION);
  return static_cast<size_t>(field - b.data());
}

const Corruption kCorruptions[] = {
    {"empty file", [](std::vector<uint8_t>& b) { b.clear(); }, ErrorCode::InvalidProgram, "too short"},
    {"truncated", [](std::vector<uint8_t>& b) { b.resize(100); }, ErrorCode::InvalidProgram, "truncated"},
    {"bytes appended", [](std::vector<uint8_t>& b) { b.push_back(0); }, ErrorCode::InvalidProgram, "truncated"},
    {"magic", [](std::vector<uint8_t>& b) { b[0] = 'X'; }, ErrorCode::InvalidProgram, "not \"ETXH\""},
    {"header version", [](std::vector<uint8_t>& b) { put_u32(b, 4, 2); }, ErrorCode::NotSupported,
     "header version 2"},
    {"header size", [](std::vector<uint8_t>& b) { put_u32(b, 8, 65); }, ErrorCode::InvalidProgram,
     "header_size is 65"},
    {"segment alignment", [](std::vector<uint8_t>& b) { put_u32(b, 12, 24); }, ErrorCode::InvalidProgram,
     "segment_alignment 24"},
    {"program offset", [](std::vector<uint8_t>& b) { put_u64(b, 16, 60); }, ErrorCode::InvalidProgram,
     "program bytes [60,"},
    {"program size", [](std::vector<uint8_t>& b) { put_u64(b, 24, b.size()); }, ErrorCode::InvalidProgram,
     "not a valid range"},
    {"segment base", [](std::vector<uint8_t>& b) { put_u64(b, 32, 4097); }, ErrorCode::InvalidProgram,
     "segment data [4097"},
    {"identifier", [](std::vector<uint8_t>& b) { std::memcpy(&b[68], "NOPE", 4); }, ErrorCode::InvalidProgram,
     "identifier is not \"ETX1\""},
    {"flatbuffer root", [](std::vector<uint8_t>& b) { put_u32(b, 64, 0x7ffffff0); }, ErrorCode::InvalidProgram,
     "FlatBuffers verifier rejected"},
    {"schema version", [](std::vector<uint8_t>& b) { put_u32(b, version_offset(b), kProgramVersion + 1); },
     ErrorCode::NotSupported, "program schema version"},
};

TEST(Program, CorruptFilesAreRejectedWithAMessage) {
  ETMLIR_REQUIRE_FIXTURES();
  std::vector<uint8_t> good = test::read_file(test::fixture_path("seed_cnn.pte"));
  ASSERT_FALSE(good.empty());
  for (const Corruption& c : kCorruptions) {
    std::vector<uint8_t> bytes = good;
    c.apply(bytes);
    AlignedBuffer buffer(bytes.size());
    if (!bytes.empty()) std::memcpy(buffer.data(), bytes.data(), bytes.size());
    BufferDataLoader loader(buffer.data(), bytes.size());
    Result<Program> program = Program::load(&loader);
    ASSERT_FALSE(program.ok()) << c.label;
    EXPECT_EQ(program.error().code(), c.code) << c.label << ": " << program.error().message();
    EXPECT_CONTAINS(program.error().message(), c.message) << c.label;
  }
}

TEST(Program, LoadSegmentChecksItsRange) {
  ETMLIR_REQUIRE_FIXTURES();
  auto loaded = load_fixture("seed_cnn.pte");
  ASSERT_TRUE(loaded);
  const Program& program = *loaded->program;
  Result<FreeableBuffer> all = program.load_segment(0, 0, program.constant_size());
  ASSERT_TRUE(all.ok()) << all.error().message();
  EXPECT_EQ(all->data(), program.constant_data());
  EXPECT_FALSE(program.load_segment(0, program.constant_size(), 1).ok());
  EXPECT_FALSE(program.load_segment(0, 1, UINT64_MAX).ok());
  Result<FreeableBuffer> missing = program.load_segment(7, 0, 0);
  ASSERT_FALSE(missing.ok());
  EXPECT_CONTAINS(missing.error().message(), "segment 7 does not exist");
}

TEST(Program, DebugLocationMapsHandlesToSourceLines) {
  ETMLIR_REQUIRE_FIXTURES();
  auto loaded = load_fixture("seed_cnn.pte");
  ASSERT_TRUE(loaded);
  EXPECT_EQ(loaded->program->debug_location(0, 0), nullptr);
  EXPECT_EQ(loaded->program->debug_location(5, 1), nullptr);
  bool found = false;
  for (uint32_t handle = 1; handle < 64 && !found; ++handle) {
    const char* where = loaded->program->debug_location(0, handle);
    if (where != nullptr && std::strstr(where, "seed_cnn.py:") != nullptr) found = true;
  }
  EXPECT_TRUE(found) << "no debug handle maps to seed_cnn.py";
}

// ---- The errors a user sees ------------------------------------------------------------

TEST(LoadMethod, EmptyKernelRegistryNamesTheMissingKernel) {
  ETMLIR_REQUIRE_FIXTURES();
  struct Case {
    const char* file;
    const char* source;
  };
  for (const Case& c : {Case{"mlp.pte", "mlp.py:"}, Case{"seed_cnn.pte", "seed_cnn.py:"}}) {
    auto loaded = load_fixture(c.file);
    ASSERT_TRUE(loaded);
    Result<MethodMeta> meta = loaded->program->method_meta("forward");
    ASSERT_TRUE(meta.ok());
    // The kernel instruction 0 calls.
    const fbs::Method* m = fbs::GetProgram(loaded->program->flatbuffer())->methods()->Get(0);
    const fbs::KernelCall* call = m->instructions()->Get(0)->kind_as_KernelCall();
    ASSERT_NE(call, nullptr);
    char kernel[128];
    meta->operator_name(call->op(), kernel, sizeof(kernel));
    MethodMemory memory(*meta, 0);
    KernelRegistry empty;
    Result<Method> method = loaded->program->load_method("forward", &memory.manager, &empty);
    ASSERT_FALSE(method.ok()) << c.file;
    EXPECT_EQ(method.error().code(), ErrorCode::NotFound);
    EXPECT_CONTAINS(method.error().message(), std::string("no kernel for ") + kernel + " (needed by");
    EXPECT_CONTAINS(method.error().message(), "needed by method 'forward', instruction 0");
    EXPECT_CONTAINS(method.error().message(), c.source);
    EXPECT_CONTAINS(method.error().message(), "this runtime has 0 kernels");
  }
}

TEST(LoadMethod, TooSmallArenaIsOutOfMemoryNamingTheArena) {
  ETMLIR_REQUIRE_FIXTURES();
  auto loaded = load_fixture("mlp.pte");
  ASSERT_TRUE(loaded);
  Result<MethodMeta> meta = loaded->program->method_meta("forward");
  ASSERT_TRUE(meta.ok());
  MethodMemory memory(*meta, 0);
  size_t needed = static_cast<size_t>(meta->arena_size(0));
  memory.arenas[0] = Span<uint8_t>(memory.arenas[0].data(), needed - 1);
  StubKernels kernels(*loaded->program);
  Result<Method> method = loaded->program->load_method("forward", &memory.manager, kernels.get());
  ASSERT_FALSE(method.ok());
  EXPECT_EQ(method.error().code(), ErrorCode::OutOfMemory);
  std::string expected = "arena 0 ('planned') needs " + std::to_string(needed) +
                         " bytes; the memory manager gives " + std::to_string(needed - 1);
  EXPECT_CONTAINS(method.error().message(), expected);
}

TEST(LoadMethod, MissingArenaBufferIsInvalidArgument) {
  ETMLIR_REQUIRE_FIXTURES();
  auto loaded = load_fixture("mlp.pte");
  ASSERT_TRUE(loaded);
  Result<MethodMeta> meta = loaded->program->method_meta("forward");
  ASSERT_TRUE(meta.ok());
  MethodMemory memory(*meta, 0);
  memory.manager.planned_arenas = Span<Span<uint8_t>>();
  StubKernels kernels(*loaded->program);
  Result<Method> method = loaded->program->load_method("forward", &memory.manager, kernels.get());
  ASSERT_FALSE(method.ok());
  EXPECT_EQ(method.error().code(), ErrorCode::InvalidArgument);
  EXPECT_CONTAINS(method.error().message(), "plans 1 arenas but the memory manager provides 0");
}

TEST(LoadMethod, MisalignedArenaIsInvalidArgument) {
  ETMLIR_REQUIRE_FIXTURES();
  auto loaded = load_fixture("mlp.pte");
  ASSERT_TRUE(loaded);
  Result<MethodMeta> meta = loaded->program->method_meta("forward");
  ASSERT_TRUE(meta.ok());
  MethodMemory memory(*meta, 0);
  AlignedBuffer bigger(static_cast<size_t>(meta->arena_size(0)) + 8);
  memory.arenas[0] = Span<uint8_t>(bigger.data() + 8, static_cast<size_t>(meta->arena_size(0)));
  StubKernels kernels(*loaded->program);
  Result<Method> method = loaded->program->load_method("forward", &memory.manager, kernels.get());
  ASSERT_FALSE(method.ok());
  EXPECT_CONTAINS(method.error().message(), "arena 0 buffer is not 16-byte aligned");
}

TEST(LoadMethod, TooSmallMethodAllocatorIsOutOfMemory) {
  ETMLIR_REQUIRE_FIXTURES();
  auto loaded = load_fixture("mlp.pte");
  ASSERT_TRUE(loaded);
  Result<MethodMeta> meta = loaded->program->method_meta("forward");
  ASSERT_TRUE(meta.ok());
  MethodMemory memory(*meta, 0);
  StubKernels kernels(*loaded->program);
  for (size_t size : {size_t{0}, size_t{64}, size_t{1024}}) {
    memory.method_allocator = MemoryAllocator(memory.method_buffer->data(), size);
    Result<Method> method = loaded->program->load_method("forward", &memory.manager, kernels.get());
    ASSERT_FALSE(method.ok()) << size;
    EXPECT_EQ(method.error().code(), ErrorCode::OutOfMemory);
    EXPECT_CONTAINS(method.error().message(), "the method allocator ran out of memory");
    EXPECT_CONTAINS(method.error().message(), "method_allocator_bytes()");
  }
  MemoryManager no_allocator;
  Result<Method> method = loaded->program->load_method("forward", &no_allocator, kernels.get());
  ASSERT_FALSE(method.ok());
  EXPECT_EQ(method.error().code(), ErrorCode::InvalidArgument);
  Result<Method> no_kernels = loaded->program->load_method("forward", &memory.manager, nullptr);
  ASSERT_FALSE(no_kernels.ok());
  EXPECT_CONTAINS(no_kernels.error().message(), "no kernel registry");
}

TEST(LoadMethod, WrongMethodNameIsNotFoundListingTheMethods) {
  ETMLIR_REQUIRE_FIXTURES();
  auto loaded = load_fixture("mlp.pte");
  ASSERT_TRUE(loaded);
  Result<MethodMeta> meta = loaded->program->method_meta("backward");
  ASSERT_FALSE(meta.ok());
  EXPECT_EQ(meta.error().code(), ErrorCode::NotFound);
  EXPECT_STREQ(meta.error().message(), "no method 'backward' in the program (it has 'forward')");
  MemoryManager memory;
  Result<Method> method = loaded->program->load_method("backward", &memory, &test::all_kernels());
  ASSERT_FALSE(method.ok());
  EXPECT_EQ(method.error().code(), ErrorCode::NotFound);
  EXPECT_CONTAINS(method.error().message(), "(it has 'forward')");
}

TEST(LoadMethod, SignatureArityMismatchIsInvalidProgram) {
  ETMLIR_REQUIRE_FIXTURES();
  auto loaded = load_fixture("mlp.pte");
  ASSERT_TRUE(loaded);
  Result<MethodMeta> meta = loaded->program->method_meta("forward");
  ASSERT_TRUE(meta.ok());
  MethodMemory memory(*meta, 0);
  // addmm.out(self, mat1, mat2, beta, alpha, out): 6 arguments, registered with 7.
  StubKernels kernels(*loaded->program, "", {{"aten::addmm.out", "TTTssTT"}});
  Result<Method> method = loaded->program->load_method("forward", &memory.manager, kernels.get());
  ASSERT_FALSE(method.ok());
  EXPECT_EQ(method.error().code(), ErrorCode::InvalidProgram);
  EXPECT_CONTAINS(method.error().message(), "calls aten::addmm.out with 6 arguments; its kernel takes 7");
}

TEST(LoadMethod, SignatureKindMismatchNamesTheArgument) {
  ETMLIR_REQUIRE_FIXTURES();
  auto loaded = load_fixture("mlp.pte");
  ASSERT_TRUE(loaded);
  Result<MethodMeta> meta = loaded->program->method_meta("forward");
  ASSERT_TRUE(meta.ok());
  MethodMemory memory(*meta, 0);
  // beta (argument 3) is an int, not a tensor.
  StubKernels kernels(*loaded->program, "", {{"aten::addmm.out", "TTTTsT"}});
  Result<Method> method = loaded->program->load_method("forward", &memory.manager, kernels.get());
  ASSERT_FALSE(method.ok());
  EXPECT_EQ(method.error().code(), ErrorCode::InvalidProgram);
  EXPECT_CONTAINS(method.error().message(), "(aten::addmm.out): argument 3 is a int; the kernel expects tensor");
}

class SetInput : public ::testing::Test {
 protected:
  void SetUp() override {
    if (test::fixture_dir().empty()) GTEST_SKIP() << "ETMLIR_TEST_PTE_DIR is not set";
    loaded_ = load_fixture("mlp.pte");
    ASSERT_TRUE(loaded_);
    Result<MethodMeta> meta = loaded_->program->method_meta("forward");
    ASSERT_TRUE(meta.ok());
    memory_ = std::make_unique<MethodMemory>(*meta, 0);
    kernels_ = std::make_unique<StubKernels>(*loaded_->program);
    Result<Method> method = loaded_->program->load_method("forward", &memory_->manager, kernels_->get());
    ASSERT_TRUE(method.ok()) << method.error().message();
    method_ = std::make_unique<Method>(static_cast<Method&&>(method.get()));
  }
  Error set(ScalarType dtype, std::vector<int64_t> sizes, size_t nbytes = sizeof(float) * 8 * 784, size_t index = 0) {
    return method_->set_input(index, data_.data(), nbytes, dtype, Span<const int64_t>(sizes.data(), sizes.size()));
  }
  std::unique_ptr<LoadedProgram> loaded_;
  std::unique_ptr<MethodMemory> memory_;
  std::unique_ptr<StubKernels> kernels_;
  std::unique_ptr<Method> method_;
  std::vector<float> data_ = std::vector<float>(8 * 784, 0.5f);
};

TEST_F(SetInput, WrongDtypeNamesInputExpectedAndActual) {
  Error e = set(ScalarType::Int64, {8, 784});
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_STREQ(e.message(), "method 'forward' input 0: expected float32[8, 784], got int64[8, 784]");
}

TEST_F(SetInput, WrongShapeNamesInputExpectedAndActual) {
  Error e = set(ScalarType::Float, {8, 783});
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_STREQ(e.message(), "method 'forward' input 0: expected float32[8, 784], got float32[8, 783]");
  Error rank = set(ScalarType::Float, {8, 784, 1});
  EXPECT_STREQ(rank.message(), "method 'forward' input 0: expected float32[8, 784], got float32[8, 784, 1]");
}

TEST_F(SetInput, TooFewBytesIsInvalidArgument) {
  Error e = set(ScalarType::Float, {8, 784}, 100);
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_CONTAINS(e.message(), "100 bytes given, float32[8, 784] needs 25088");
}

TEST_F(SetInput, IndexPastTheInputsIsInvalidArgument) {
  Error e = set(ScalarType::Float, {8, 784}, sizeof(float) * 8 * 784, 1);
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_STREQ(e.message(), "method 'forward' has 1 inputs; there is no input 1");
  EXPECT_FALSE(method_->set_output_buffer(3, nullptr, 0).is_ok());
}

TEST_F(SetInput, PlannedInputIsCopiedIntoItsArena) {
  ASSERT_FALSE(set(ScalarType::Float, {8, 784}));
  const Tensor& input = method_->input(0).to_tensor();
  EXPECT_NE(input.data(), static_cast<const void*>(data_.data()));
  const uint8_t* arena = memory_->arenas[0].data();
  EXPECT_GE(input.data_as<uint8_t>(), arena);
  EXPECT_LT(input.data_as<uint8_t>(), arena + memory_->arenas[0].size());
  EXPECT_EQ(std::memcmp(input.data(), data_.data(), input.nbytes()), 0);
}

TEST_F(SetInput, ExecuteNamesTheFailingKernelAndSourceLine) {
  StubKernels failing_relu(*loaded_->program, "aten::relu.out");
  Result<MethodMeta> meta = loaded_->program->method_meta("forward");
  ASSERT_TRUE(meta.ok());
  MethodMemory memory(*meta, 0);
  Result<Method> method = loaded_->program->load_method("forward", &memory.manager, failing_relu.get());
  ASSERT_TRUE(method.ok());
  int relu = first_call_of(*method, "aten::relu.out");
  ASSERT_GE(relu, 0) << "mlp calls no aten::relu.out";
  ASSERT_FALSE(method->set_input(0, data_.data(), data_.size() * 4, ScalarType::Float,
                                 Span<const int64_t>())
                   .is_ok());  // rank 0 given: refused
  int64_t sizes[] = {8, 784};
  ASSERT_FALSE(method->set_input(0, data_.data(), data_.size() * 4, ScalarType::Float, sizes));
  Error e = method->execute();
  EXPECT_EQ(e.code(), ErrorCode::KernelFailed);
  EXPECT_CONTAINS(e.message(), "mlp.py:");
  // The relu is MLP.layers[1] (an nn.Sequential): the message names its module path too.
  EXPECT_CONTAINS(e.message(),
                  "(layers.1; method 'forward', instruction " + std::to_string(relu) + "): aten::relu.out: boom");
  EXPECT_STREQ(method->instruction_name(method->num_instructions()), "");
}

TEST_F(SetInput, ProfilingRecordsEveryInstruction) {
  ASSERT_FALSE(set(ScalarType::Float, {8, 784}));
  std::vector<uint64_t> ns(method_->num_instructions(), UINT64_MAX);
  method_->set_profiling(ns.data());
  ASSERT_FALSE(method_->execute());
  for (uint64_t t : ns) EXPECT_NE(t, UINT64_MAX);
  method_->set_profiling(nullptr);
}

// mlp planned without its input and output: the caller gives that memory.
class UnplannedIo : public ::testing::Test {
 protected:
  void SetUp() override {
    if (test::fixture_dir().empty()) GTEST_SKIP() << "ETMLIR_TEST_PTE_DIR is not set";
    loaded_ = load_fixture("mlp_unplanned_io.pte");
    ASSERT_TRUE(loaded_);
    Result<MethodMeta> meta = loaded_->program->method_meta("forward");
    ASSERT_TRUE(meta.ok());
    MethodMeta::TensorInfo info;
    ASSERT_TRUE(meta->input_tensor(0, &info));
    EXPECT_FALSE(info.planned);
    memory_ = std::make_unique<MethodMemory>(*meta, 0);
    kernels_ = std::make_unique<StubKernels>(*loaded_->program);
    Result<Method> method = loaded_->program->load_method("forward", &memory_->manager, kernels_->get());
    ASSERT_TRUE(method.ok()) << method.error().message();
    method_ = std::make_unique<Method>(static_cast<Method&&>(method.get()));
  }
  std::unique_ptr<LoadedProgram> loaded_;
  std::unique_ptr<MethodMemory> memory_;
  std::unique_ptr<StubKernels> kernels_;
  std::unique_ptr<Method> method_;
  int64_t sizes_[2] = {8, 784};
};

TEST_F(UnplannedIo, ExecuteWithoutInputOrOutputMemoryIsAnError) {
  Error no_input = method_->execute();
  EXPECT_EQ(no_input.code(), ErrorCode::InvalidArgument);
  EXPECT_CONTAINS(no_input.message(), "input 0 was not set (call set_input)");
  std::vector<float> x(8 * 784, 1.f);
  ASSERT_FALSE(method_->set_input(0, x.data(), x.size() * 4, ScalarType::Float, sizes_));
  Error no_output = method_->execute();
  EXPECT_EQ(no_output.code(), ErrorCode::InvalidArgument);
  EXPECT_CONTAINS(no_output.message(), "output 0 is not planned and has no buffer (call set_output_buffer)");
  std::vector<float> y(8 * 10);
  Error small = method_->set_output_buffer(0, y.data(), 8);
  EXPECT_CONTAINS(small.message(), "output 0 needs 320 bytes; 8 given");
  ASSERT_FALSE(method_->set_output_buffer(0, y.data(), y.size() * 4));
  EXPECT_EQ(method_->output(0).to_tensor().data(), static_cast<const void*>(y.data()));
  EXPECT_FALSE(method_->execute());
}

TEST_F(UnplannedIo, EachSetInputPointsAtTheNewBufferAndLeavesTheOldOne) {
  std::vector<float> first(8 * 784, 1.f);
  std::vector<float> second(8 * 784, 2.f);
  ASSERT_FALSE(method_->set_input(0, first.data(), first.size() * 4, ScalarType::Float, sizes_));
  EXPECT_EQ(method_->input(0).to_tensor().data(), static_cast<const void*>(first.data()));
  ASSERT_FALSE(method_->set_input(0, second.data(), second.size() * 4, ScalarType::Float, sizes_));
  // The second buffer is the input now; the first (which the caller may have freed) is not written.
  EXPECT_EQ(method_->input(0).to_tensor().data(), static_cast<const void*>(second.data()));
  EXPECT_EQ(first[0], 1.f);
  EXPECT_EQ(first.back(), 1.f);
}

// ---- Full runs against PyTorch eager ------------------------------------------------------

struct RunCase {
  const char* model;      // <model>.pte
  const char* reference;  // <reference>.input.bin / .expected.bin / .shapes.txt
  LoaderKind loader;
};

class FullRun : public ::testing::TestWithParam<RunCase> {};

// |actual - expected| <= 1e-4 + 1e-4 * |expected| for every element.
void expect_close(const float* actual, const std::vector<float>& expected) {
  size_t bad = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    float tolerance = 1e-4f + 1e-4f * std::fabs(expected[i]);
    if (!(std::fabs(actual[i] - expected[i]) <= tolerance) && bad++ < 5) {
      ADD_FAILURE() << "element " << i << ": got " << actual[i] << ", PyTorch eager gives " << expected[i];
    }
  }
  EXPECT_EQ(bad, 0u) << "of " << expected.size() << " elements";
}

TEST_P(FullRun, MatchesPyTorchEager) {
  ETMLIR_REQUIRE_FIXTURES();
  const RunCase& c = GetParam();
  test::Reference ref;
  ASSERT_TRUE(test::read_reference(c.reference, &ref)) << "missing reference files for " << c.reference;
  auto loaded = std::make_unique<LoadedProgram>();
  Error e = test::load_program(test::fixture_path(std::string(c.model) + ".pte"), c.loader, loaded.get());
  ASSERT_FALSE(e) << e.message();
  Result<MethodMeta> meta = loaded->program->method_meta("forward");
  ASSERT_TRUE(meta.ok());
  MethodMemory memory(*meta, test::kDefaultTempBytes);
  Result<Method> method = loaded->program->load_method("forward", &memory.manager, &test::all_kernels());
  ASSERT_TRUE(method.ok()) << method.error().message();
  ASSERT_FALSE(method->set_input(0, ref.input.data(), ref.input.size() * sizeof(float), ScalarType::Float,
                                 Span<const int64_t>(ref.input_shape.data(), ref.input_shape.size())));
  for (int run = 0; run < 2; ++run) {  // the second run sees the arena the first one left behind
    Error error = method->execute();
    ASSERT_FALSE(error) << error.message();
    const Tensor& out = method->output(0).to_tensor();
    ASSERT_EQ(out.dtype(), ScalarType::Float);
    ASSERT_EQ(static_cast<size_t>(out.dim()), ref.expected_shape.size());
    for (int32_t d = 0; d < out.dim(); ++d) EXPECT_EQ(out.size(d), ref.expected_shape[static_cast<size_t>(d)]);
    ASSERT_EQ(static_cast<size_t>(out.numel()), ref.expected.size());
    expect_close(out.data_as<float>(), ref.expected);
    // seed_cnn's input shares its arena bytes with later tensors: set it again.
    ASSERT_FALSE(method->set_input(0, ref.input.data(), ref.input.size() * sizeof(float), ScalarType::Float,
                                   Span<const int64_t>(ref.input_shape.data(), ref.input_shape.size())));
  }
}

INSTANTIATE_TEST_SUITE_P(ZooModels, FullRun,
                         ::testing::Values(RunCase{"mlp", "mlp", LoaderKind::Buffer},
                                           RunCase{"mlp", "mlp", LoaderKind::File},
                                           RunCase{"mlp", "mlp", LoaderKind::Mmap},
                                           RunCase{"seed_cnn", "seed_cnn", LoaderKind::Buffer},
                                           RunCase{"seed_cnn", "seed_cnn", LoaderKind::File},
                                           RunCase{"seed_cnn", "seed_cnn", LoaderKind::Mmap},
                                           // T = 8 and T = 3 of at most 32: outputs resized below their bound
                                           RunCase{"dynamic", "dynamic", LoaderKind::Mmap},
                                           RunCase{"dynamic", "dynamic_short", LoaderKind::Buffer}),
                         [](const ::testing::TestParamInfo<RunCase>& info) {
                           return std::string(info.param.reference) + "_" + test::loader_kind_name(info.param.loader);
                         });

TEST(DynamicInput, SizesWithinTheBoundAreAcceptedAndAboveAreRefused) {
  ETMLIR_REQUIRE_FIXTURES();
  auto loaded = load_fixture("dynamic.pte");
  ASSERT_TRUE(loaded);
  Result<MethodMeta> meta = loaded->program->method_meta("forward");
  ASSERT_TRUE(meta.ok());
  MethodMeta::TensorInfo info;
  ASSERT_TRUE(meta->input_tensor(0, &info));
  EXPECT_TRUE(info.dynamic);
  ASSERT_EQ(info.dim, 3);
  EXPECT_EQ(info.sizes[1], 32);  // the upper bound
  MethodMemory memory(*meta, test::kDefaultTempBytes);
  Result<Method> method = loaded->program->load_method("forward", &memory.manager, &test::all_kernels());
  ASSERT_TRUE(method.ok()) << method.error().message();
  std::vector<float> x(33 * 16, 0.25f);
  int64_t above[] = {1, 33, 16};
  Error e = method->set_input(0, x.data(), x.size() * 4, ScalarType::Float, above);
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  // Only the exported dynamic dim (Tensor.dynamic_dims) shows as a bound; the others are exact.
  EXPECT_STREQ(e.message(), "method 'forward' input 0: expected float32[1, <=32, 16], got float32[1, 33, 16]");
  EXPECT_TRUE(info.dim_varies(1));
  EXPECT_FALSE(info.dim_varies(0));
  EXPECT_FALSE(info.dim_varies(2));
  int64_t other_batch[] = {0, 8, 16};
  Error batch = method->set_input(0, x.data(), x.size() * 4, ScalarType::Float, other_batch);
  EXPECT_STREQ(batch.message(), "method 'forward' input 0: expected float32[1, <=32, 16], got float32[0, 8, 16]");
  for (int64_t t : {32, 2, 17}) {
    int64_t sizes[] = {1, t, 16};
    ASSERT_FALSE(method->set_input(0, x.data(), x.size() * 4, ScalarType::Float, sizes)) << t;
    Error run = method->execute();
    ASSERT_FALSE(run) << t << ": " << run.message();
    const Tensor& out = method->output(0).to_tensor();
    EXPECT_EQ(out.size(1), 2 * t);  // [1, T, 8] reshaped to [1, 2T, 4]
    EXPECT_EQ(out.numel(), 8 * t);
  }
}

// ---- Delegates -------------------------------------------------------------------------

// Records the lifecycle; execute doubles the input into the output.
class RecordingBackend : public Backend {
 public:
  bool available = true;
  bool fail_init = false;
  bool fail_execute = false;
  int inits = 0;
  int executes = 0;
  int destroys = 0;
  std::string payload;
  std::string spec_key;
  std::string spec_value;
  std::string method_name;
  uint32_t delegate_index = 99;
  const KernelRegistry* kernels = nullptr;
  const BackendRegistry* backends = nullptr;
  size_t num_args = 0;
  int handle_token = 0;

  bool is_available() const override { return available; }
  Result<DelegateHandle> init(BackendInitContext& context, Span<const uint8_t> data,
                              Span<const CompileSpec> specs) override {
    ++inits;
    if (fail_init) return Error::make(ErrorCode::NotSupported, "payload version 9 is too new");
    payload.assign(reinterpret_cast<const char*>(data.data()), data.size());
    if (specs.size() == 1) {
      spec_key = specs[0].key;
      spec_value.assign(reinterpret_cast<const char*>(specs[0].value), specs[0].size);
    }
    method_name = context.method_name;
    delegate_index = context.delegate_index;
    kernels = context.kernels;
    backends = context.backends;
    EXPECT_NE(context.method_allocator, nullptr);
    return DelegateHandle(&handle_token);
  }
  Error execute(BackendExecuteContext&, DelegateHandle handle, Span<EValue*> args) override {
    ++executes;
    EXPECT_EQ(handle, static_cast<DelegateHandle>(&handle_token));
    num_args = args.size();
    if (fail_execute) return Error::make(ErrorCode::KernelFailed, "device lost");
    const Tensor& in = args[0]->to_tensor();
    Tensor& out = args[1]->to_tensor();
    for (int64_t i = 0; i < in.numel(); ++i) out.data_as<float>()[i] = 2.f * in.data_as<float>()[i];
    return Error::ok();
  }
  void destroy(DelegateHandle handle) override {
    ++destroys;
    EXPECT_EQ(handle, static_cast<DelegateHandle>(&handle_token));
  }
};

class Delegate : public ::testing::Test {
 protected:
  void SetUp() override {
    if (test::fixture_dir().empty()) GTEST_SKIP() << "ETMLIR_TEST_PTE_DIR is not set";
    loaded_ = load_fixture("delegate.pte");
    ASSERT_TRUE(loaded_);
    Result<MethodMeta> meta = loaded_->program->method_meta("forward");
    ASSERT_TRUE(meta.ok());
    memory_ = std::make_unique<MethodMemory>(*meta, 1024);
    ASSERT_FALSE(backends_.add("fake_delegate", &backend_));
  }
  Result<Method> load() { return loaded_->program->load_method("forward", &memory_->manager, &kernels_, &backends_); }
  std::unique_ptr<LoadedProgram> loaded_;
  std::unique_ptr<MethodMemory> memory_;
  KernelRegistry kernels_;
  RecordingBackend backend_;
  BackendRegistry backends_;
};

TEST_F(Delegate, BackendGetsInitExecuteAndDestroy) {
  {
    Result<Method> method = load();
    ASSERT_TRUE(method.ok()) << method.error().message();
    EXPECT_EQ(backend_.inits, 1);
    EXPECT_EQ(backend_.payload, "opaque bytes");
    EXPECT_EQ(backend_.spec_key, "level");
    EXPECT_EQ(backend_.spec_value, "2");
    EXPECT_EQ(backend_.method_name, "forward");
    EXPECT_EQ(backend_.delegate_index, 0u);
    EXPECT_EQ(backend_.kernels, &kernels_);  // the outer method's registries, for nested programs
    EXPECT_EQ(backend_.backends, &backends_);
    EXPECT_EQ(backend_.destroys, 0);
    float x[4] = {1.f, -2.f, 3.5f, 0.f};
    int64_t sizes[] = {2, 2};
    ASSERT_FALSE(method->set_input(0, x, sizeof(x), ScalarType::Float, sizes));
    ASSERT_FALSE(method->execute());
    ASSERT_FALSE(method->execute());
    EXPECT_EQ(backend_.executes, 2);
    EXPECT_EQ(backend_.num_args, 2u);
    const float* y = method->output(0).to_tensor().data_as<float>();
    EXPECT_EQ(y[0], 2.f);
    EXPECT_EQ(y[1], -4.f);
    EXPECT_EQ(y[2], 7.f);
    EXPECT_STREQ(method->instruction_name(0), "fake_delegate");
    // Moving the Method hands the delegate over: destroyed once, by the last owner.
    Method moved(static_cast<Method&&>(method.get()));
    EXPECT_EQ(backend_.destroys, 0);
  }
  EXPECT_EQ(backend_.destroys, 1);
}

TEST_F(Delegate, MissingBackendIsNotFoundNamingIt) {
  BackendRegistry none;
  Result<Method> method = loaded_->program->load_method("forward", &memory_->manager, &kernels_, &none);
  ASSERT_FALSE(method.ok());
  EXPECT_EQ(method.error().code(), ErrorCode::NotFound);
  EXPECT_CONTAINS(method.error().message(), "delegate 0 needs backend 'fake_delegate', which is not registered");
  memory_->method_allocator.reset();
  Result<Method> no_registry = loaded_->program->load_method("forward", &memory_->manager, &kernels_);
  EXPECT_EQ(no_registry.error().code(), ErrorCode::NotFound);
}

TEST_F(Delegate, UnavailableBackendIsNotSupported) {
  backend_.available = false;
  Result<Method> method = load();
  ASSERT_FALSE(method.ok());
  EXPECT_EQ(method.error().code(), ErrorCode::NotSupported);
  EXPECT_CONTAINS(method.error().message(), "backend 'fake_delegate' is not available here");
  EXPECT_EQ(backend_.inits, 0);
}

TEST_F(Delegate, InitFailureIsPrefixedAndNotDestroyed) {
  backend_.fail_init = true;
  {
    Result<Method> method = load();
    ASSERT_FALSE(method.ok());
    EXPECT_EQ(method.error().code(), ErrorCode::NotSupported);
    EXPECT_STREQ(method.error().message(),
                 "method 'forward' delegate 0 (backend 'fake_delegate'): init failed: payload version 9 is too new");
  }
  EXPECT_EQ(backend_.destroys, 0);
}

TEST_F(Delegate, ExecuteFailureNamesTheInstruction) {
  backend_.fail_execute = true;
  Result<Method> method = load();
  ASSERT_TRUE(method.ok());
  float x[4] = {};
  int64_t sizes[] = {2, 2};
  ASSERT_FALSE(method->set_input(0, x, sizeof(x), ScalarType::Float, sizes));
  Error e = method->execute();
  EXPECT_EQ(e.code(), ErrorCode::KernelFailed);
  // The instruction has no debug handle and the backend names none.
  EXPECT_STREQ(e.message(),
               "unknown location (method 'forward', instruction 0, delegate 'fake_delegate'): device lost");
  EXPECT_EQ(method->failed_debug_handle(), 0u);
}

// ---- Hand-built programs: what Program::load and load_method must refuse ------------------

// One method: out = add.out(x, c, alpha=1) with x a planned float[2] input and
// c a constant float[2] = {1, 2}. `out` is planned, or (to break it) the
// constant itself, or a tensor with no memory that is not an output.
enum class AddOut { Planned, IsTheConstant, NoMemory };

std::vector<uint8_t> add_program(AddOut variant) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<int64_t> sizes = {2};
  std::vector<uint8_t> dim_order = {0};
  fbs::Allocation x_at(0, 0);
  fbs::Allocation out_at(0, 16);
  fbs::DataLocation c_at(0, 0, 8);
  auto tensor = [&](const fbs::Allocation* a, const fbs::DataLocation* c) {
    auto t = fbs::CreateTensorDirect(fbb, fbs::ScalarType::Float, &sizes, &dim_order, fbs::Dynamism::Static, a, c, 8);
    return fbs::CreateEValue(fbb, fbs::Value::Tensor, t.Union());
  };
  std::vector<flatbuffers::Offset<fbs::EValue>> values = {
      tensor(&x_at, nullptr),                                                           // 0: x
      fbs::CreateEValue(fbb, fbs::Value::Int, fbs::CreateInt(fbb, 1).Union()),          // 1: alpha
      tensor(variant == AddOut::NoMemory ? nullptr : &out_at, nullptr),                 // 2: out
      tensor(nullptr, &c_at),                                                           // 3: c
  };
  int32_t out = variant == AddOut::IsTheConstant ? 3 : 2;
  std::vector<int32_t> args = {0, 3, 1, out};
  auto call = fbs::CreateKernelCallDirect(fbb, 0, &args);
  std::vector<flatbuffers::Offset<fbs::Instruction>> instructions = {
      fbs::CreateInstruction(fbb, fbs::InstructionKind::KernelCall, call.Union(), 0)};
  std::vector<flatbuffers::Offset<fbs::Operator>> operators = {fbs::CreateOperatorDirect(fbb, "aten::add", "out")};
  std::vector<flatbuffers::Offset<fbs::Arena>> arenas = {fbs::CreateArenaDirect(fbb, "planned", 32)};
  std::vector<int32_t> inputs = {0};
  std::vector<int32_t> outputs = {variant == AddOut::NoMemory ? 0 : out};
  auto method = fbs::CreateMethodDirect(fbb, "forward", &values, &inputs, &outputs, &instructions, &operators,
                                        nullptr, &arenas);
  std::vector<std::vector<uint8_t>> segments(1);
  float c[2] = {1.f, 2.f};
  segments[0].assign(reinterpret_cast<uint8_t*>(c), reinterpret_cast<uint8_t*>(c) + sizeof(c));
  std::vector<uint64_t> offsets = test::segment_offsets(segments);
  std::vector<flatbuffers::Offset<fbs::Segment>> segment_table = {fbs::CreateSegment(fbb, offsets[0], 8)};
  std::vector<flatbuffers::Offset<fbs::Method>> methods = {method};
  fbb.Finish(fbs::CreateProgramDirect(fbb, 1, &methods, &segment_table, 0), fbs::ProgramIdentifier());
  return test::pack_pte(fbb.GetBufferPointer(), fbb.GetSize(), segments);
}

struct BuiltProgram {
  std::unique_ptr<AlignedBuffer> bytes;
  std::unique_ptr<BufferDataLoader> loader;
  std::unique_ptr<Program> program;  // null if the load failed
  Error error;
};

std::unique_ptr<BuiltProgram> load_bytes(const std::vector<uint8_t>& bytes) {
  auto built = std::make_unique<BuiltProgram>();
  built->bytes = std::make_unique<AlignedBuffer>(bytes.size());
  std::memcpy(built->bytes->data(), bytes.data(), bytes.size());
  built->loader = std::make_unique<BufferDataLoader>(built->bytes->data(), bytes.size());
  Result<Program> program = Program::load(built->loader.get());
  if (program.ok()) {
    built->program = std::make_unique<Program>(static_cast<Program&&>(program.get()));
  } else {
    built->error = program.error();
  }
  return built;
}

TEST(BuiltProgram, AddWithPlannedOutputRuns) {
  auto built = load_bytes(add_program(AddOut::Planned));
  ASSERT_TRUE(built->program) << built->error.message();
  Result<MethodMeta> meta = built->program->method_meta("forward");
  ASSERT_TRUE(meta.ok());
  MethodMemory memory(*meta, 0);
  Result<Method> method = built->program->load_method("forward", &memory.manager, &test::all_kernels());
  ASSERT_TRUE(method.ok()) << method.error().message();
  float x[2] = {10.f, 20.f};
  int64_t sizes[] = {2};
  ASSERT_FALSE(method->set_input(0, x, sizeof(x), ScalarType::Float, sizes));
  Error e = method->execute();
  ASSERT_FALSE(e) << e.message();
  const float* y = method->output(0).to_tensor().data_as<float>();
  EXPECT_EQ(y[0], 11.f);
  EXPECT_EQ(y[1], 22.f);
}

TEST(BuiltProgram, KernelWritingAConstantIsRefusedAtLoad) {
  auto built = load_bytes(add_program(AddOut::IsTheConstant));
  ASSERT_TRUE(built->program) << built->error.message();
  Result<MethodMeta> meta = built->program->method_meta("forward");
  ASSERT_TRUE(meta.ok());
  MethodMemory memory(*meta, 0);
  Result<Method> method = built->program->load_method("forward", &memory.manager, &test::all_kernels());
  // Constants live in the loader's memory (read-only when mmapped): writing one
  // would crash or change the program for every other method using it.
  ASSERT_FALSE(method.ok()) << "aten::add.out may write constant value 3";
  EXPECT_EQ(method.error().code(), ErrorCode::InvalidProgram);
  EXPECT_CONTAINS(method.error().message(), "writes constant tensor value 3");
}

// One method: a delegate call with live-in x (a planned float[2] input) and
// one argument `out`, which is planned or the constant c; `num_outputs` says
// how many trailing arguments are live-outs.
std::vector<uint8_t> delegate_program(bool out_is_constant, uint32_t num_outputs) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<int64_t> sizes = {2};
  std::vector<uint8_t> dim_order = {0};
  fbs::Allocation x_at(0, 0);
  fbs::Allocation out_at(0, 16);
  fbs::DataLocation c_at(0, 0, 8);
  fbs::DataLocation payload_at(1, 0, 4);
  auto tensor = [&](const fbs::Allocation* a, const fbs::DataLocation* c) {
    auto t = fbs::CreateTensorDirect(fbb, fbs::ScalarType::Float, &sizes, &dim_order, fbs::Dynamism::Static, a, c, 8);
    return fbs::CreateEValue(fbb, fbs::Value::Tensor, t.Union());
  };
  std::vector<flatbuffers::Offset<fbs::EValue>> values = {tensor(&x_at, nullptr), tensor(&out_at, nullptr),
                                                           tensor(nullptr, &c_at)};
  std::vector<int32_t> args = {0, out_is_constant ? 2 : 1};
  auto call = fbs::CreateDelegateCallDirect(fbb, 0, &args, num_outputs);
  std::vector<flatbuffers::Offset<fbs::Instruction>> instructions = {
      fbs::CreateInstruction(fbb, fbs::InstructionKind::DelegateCall, call.Union(), 0)};
  std::vector<flatbuffers::Offset<fbs::Delegate>> delegates = {
      fbs::CreateDelegateDirect(fbb, "fake_delegate", nullptr, &payload_at)};
  std::vector<flatbuffers::Offset<fbs::Arena>> arenas = {fbs::CreateArenaDirect(fbb, "planned", 32)};
  std::vector<int32_t> inputs = {0};
  std::vector<int32_t> outputs = {1};
  auto method = fbs::CreateMethodDirect(fbb, "forward", &values, &inputs, &outputs, &instructions, nullptr,
                                        &delegates, &arenas);
  std::vector<std::vector<uint8_t>> segments(2);
  float c[2] = {1.f, 2.f};
  segments[0].assign(reinterpret_cast<uint8_t*>(c), reinterpret_cast<uint8_t*>(c) + sizeof(c));
  segments[1] = {'b', 'l', 'o', 'b'};
  std::vector<uint64_t> offsets = test::segment_offsets(segments);
  std::vector<flatbuffers::Offset<fbs::Segment>> segment_table = {fbs::CreateSegment(fbb, offsets[0], 8),
                                                                  fbs::CreateSegment(fbb, offsets[1], 4)};
  std::vector<flatbuffers::Offset<fbs::Method>> methods = {method};
  fbb.Finish(fbs::CreateProgramDirect(fbb, 1, &methods, &segment_table, 0), fbs::ProgramIdentifier());
  return test::pack_pte(fbb.GetBufferPointer(), fbb.GetSize(), segments);
}

TEST(BuiltProgram, DelegateWritingAConstantIsRefusedAtLoad) {
  auto built = load_bytes(delegate_program(/*out_is_constant=*/true, /*num_outputs=*/1));
  ASSERT_TRUE(built->program) << built->error.message();
  Result<MethodMeta> meta = built->program->method_meta("forward");
  ASSERT_TRUE(meta.ok());
  MethodMemory memory(*meta, 0);
  Result<Method> method = built->program->load_method("forward", &memory.manager, &test::all_kernels());
  ASSERT_FALSE(method.ok());
  EXPECT_EQ(method.error().code(), ErrorCode::InvalidProgram);
  EXPECT_CONTAINS(method.error().message(), "instruction 0 (delegate 'fake_delegate') writes constant tensor value 2");
}

TEST(BuiltProgram, DelegateCallWithMoreLiveOutsThanArgumentsIsRefused) {
  auto built = load_bytes(delegate_program(/*out_is_constant=*/false, /*num_outputs=*/3));
  ASSERT_FALSE(built->program);
  EXPECT_CONTAINS(built->error.message(), "instruction 0: delegate call has 3 live-outs but only 2 arguments");
}

TEST(BuiltProgram, DelegateCallWithoutLiveOutCountReadsAsBefore) {
  // A file written before num_outputs: the constant argument cannot be known to be written.
  auto built = load_bytes(delegate_program(/*out_is_constant=*/true, /*num_outputs=*/0));
  ASSERT_TRUE(built->program) << built->error.message();
  Result<MethodMeta> meta = built->program->method_meta("forward");
  ASSERT_TRUE(meta.ok());
  MethodMemory memory(*meta, 0);
  Result<Method> method = built->program->load_method("forward", &memory.manager, &test::all_kernels());
  ASSERT_FALSE(method.ok());  // no backend registered: the load stops there, not at the live-outs
  EXPECT_CONTAINS(method.error().message(), "needs backend 'fake_delegate', which is not registered");
}

TEST(BuiltProgram, TensorWithoutMemoryThatIsNoInputOrOutputIsRefused) {
  auto built = load_bytes(add_program(AddOut::NoMemory));
  ASSERT_FALSE(built->program) << "a kernel would write through a null data pointer";
  EXPECT_EQ(built->error.code(), ErrorCode::InvalidProgram);
  EXPECT_CONTAINS(built->error.message(), "value 2: tensor of 8 bytes has no memory");
}

TEST(BuiltProgram, UnionWithATypeButNoTableIsRefused) {
  flatbuffers::FlatBufferBuilder fbb;
  // An Int value whose table is missing (the verifier accepts that).
  std::vector<flatbuffers::Offset<fbs::EValue>> values = {fbs::CreateEValue(fbb, fbs::Value::Int, 0)};
  auto method = fbs::CreateMethodDirect(fbb, "forward", &values);
  std::vector<flatbuffers::Offset<fbs::Method>> methods = {method};
  fbb.Finish(fbs::CreateProgramDirect(fbb, 1, &methods), fbs::ProgramIdentifier());
  auto built = load_bytes(test::pack_pte(fbb.GetBufferPointer(), fbb.GetSize(), {}));
  ASSERT_FALSE(built->program);
  EXPECT_CONTAINS(built->error.message(), "value 0 has kind 2 but no content");

  flatbuffers::FlatBufferBuilder fbb2;
  std::vector<flatbuffers::Offset<fbs::Instruction>> instructions = {
      fbs::CreateInstruction(fbb2, fbs::InstructionKind::KernelCall, 0, 0)};
  auto method2 = fbs::CreateMethodDirect(fbb2, "forward", nullptr, nullptr, nullptr, &instructions);
  std::vector<flatbuffers::Offset<fbs::Method>> methods2 = {method2};
  fbb2.Finish(fbs::CreateProgramDirect(fbb2, 1, &methods2), fbs::ProgramIdentifier());
  auto built2 = load_bytes(test::pack_pte(fbb2.GetBufferPointer(), fbb2.GetSize(), {}));
  ASSERT_FALSE(built2->program);
  EXPECT_CONTAINS(built2->error.message(), "instruction 0 has kind 1 but no content");
}

TEST(BuiltProgram, MisalignedInt64VectorIsRefused) {
  ETMLIR_REQUIRE_FIXTURES();
  // Point the first tensor's `sizes` 4 bytes further: the FlatBuffers verifier
  // only checks the 4-byte alignment of a vector's length, not of its int64s.
  std::vector<uint8_t> bytes = test::read_file(test::fixture_path("delegate.pte"));
  ASSERT_FALSE(bytes.empty());
  const fbs::Program* p = fbs::GetProgram(bytes.data() + 64);
  const fbs::Tensor* t = p->methods()->Get(0)->values()->Get(0)->value_as_Tensor();
  ASSERT_NE(t, nullptr);
  const uint8_t* field = reinterpret_cast<const flatbuffers::Table*>(t)->GetAddressOf(fbs::Tensor::VT_SIZES);
  ASSERT_NE(field, nullptr);
  size_t at = static_cast<size_t>(field - bytes.data());
  put_u32(bytes, at, flatbuffers::ReadScalar<uint32_t>(field) + 4);
  auto built = load_bytes(bytes);
  ASSERT_FALSE(built->program) << "int64 sizes read from a 4-byte-aligned address";
  EXPECT_CONTAINS(built->error.message(), "value 0: tensor sizes are not 8-byte aligned");
}

// A loop of control-flow instructions only (what et-to-out-variants makes of a while_loop):
//   0: move c_true -> cond        (a 0-d bool tensor, copied from a constant)
//   1: jump_false cond -> 5       (a bool tensor condition)
//   2: move x -> out              (a copy into out's own memory, not an alias)
//   3: move c_false -> cond
//   4: jump_false false -> 1      (backward: the loop)
// `into_constant` makes instruction 3 move into the constant c_true instead.
std::vector<uint8_t> loop_program(bool into_constant) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<int64_t> sizes = {2};
  std::vector<uint8_t> dim_order = {0};
  fbs::Allocation x_at(0, 0), out_at(0, 16), cond_at(0, 32);
  fbs::DataLocation true_at(0, 0, 1), false_at(0, 1, 1);
  auto floats = [&](const fbs::Allocation* a) {
    auto t = fbs::CreateTensorDirect(fbb, fbs::ScalarType::Float, &sizes, &dim_order, fbs::Dynamism::Static, a,
                                     nullptr, 8);
    return fbs::CreateEValue(fbb, fbs::Value::Tensor, t.Union());
  };
  auto flag = [&](const fbs::Allocation* a, const fbs::DataLocation* c) {  // 0-d: no sizes vector
    auto t = fbs::CreateTensorDirect(fbb, fbs::ScalarType::Bool, nullptr, nullptr, fbs::Dynamism::Static, a, c, 1);
    return fbs::CreateEValue(fbb, fbs::Value::Tensor, t.Union());
  };
  std::vector<flatbuffers::Offset<fbs::EValue>> values = {
      floats(&x_at), floats(&out_at), flag(&cond_at, nullptr), flag(nullptr, &true_at), flag(nullptr, &false_at),
      fbs::CreateEValue(fbb, fbs::Value::Bool, fbs::CreateBool(fbb, false).Union())};
  enum { kX, kOut, kCond, kTrue, kFalse, kFalseBool };
  auto move = [&](int32_t from, int32_t to) {
    return fbs::CreateInstruction(fbb, fbs::InstructionKind::Move, fbs::CreateMove(fbb, from, to).Union(), 0);
  };
  auto jump = [&](int32_t cond, uint32_t target) {
    return fbs::CreateInstruction(fbb, fbs::InstructionKind::JumpFalse, fbs::CreateJumpFalse(fbb, cond, target).Union(),
                                  0);
  };
  std::vector<flatbuffers::Offset<fbs::Instruction>> instructions = {
      move(kTrue, kCond), jump(kCond, 5), move(kX, kOut), move(kFalse, into_constant ? kTrue : kCond),
      jump(kFalseBool, 1)};
  std::vector<flatbuffers::Offset<fbs::Arena>> arenas = {fbs::CreateArenaDirect(fbb, "planned", 48)};
  std::vector<int32_t> inputs = {kX};
  std::vector<int32_t> outputs = {kOut};
  auto method = fbs::CreateMethodDirect(fbb, "forward", &values, &inputs, &outputs, &instructions, nullptr, nullptr,
                                        &arenas);
  std::vector<std::vector<uint8_t>> segments = {{1, 0}};
  std::vector<uint64_t> offsets = test::segment_offsets(segments);
  std::vector<flatbuffers::Offset<fbs::Segment>> segment_table = {fbs::CreateSegment(fbb, offsets[0], 2)};
  std::vector<flatbuffers::Offset<fbs::Method>> methods = {method};
  fbb.Finish(fbs::CreateProgramDirect(fbb, 3, &methods, &segment_table, 0), fbs::ProgramIdentifier());
  return test::pack_pte(fbb.GetBufferPointer(), fbb.GetSize(), segments);
}

TEST(BuiltProgram, BackwardJumpLoopsUntilItsTensorConditionIsFalse) {
  auto built = load_bytes(loop_program(/*into_constant=*/false));
  ASSERT_TRUE(built->program) << built->error.message();
  Result<MethodMeta> meta = built->program->method_meta("forward");
  ASSERT_TRUE(meta.ok());
  MethodMemory memory(*meta, 0);
  Result<Method> method = built->program->load_method("forward", &memory.manager, &test::all_kernels());
  ASSERT_TRUE(method.ok()) << method.error().message();
  float x[2] = {3.f, -4.f};
  int64_t sizes[] = {2};
  ASSERT_FALSE(method->set_input(0, x, sizeof(x), ScalarType::Float, sizes));
  Error e = method->execute();
  ASSERT_FALSE(e) << e.message();
  const Tensor& out = method->output(0).to_tensor();
  EXPECT_EQ(out.data_as<float>()[0], 3.f);
  EXPECT_EQ(out.data_as<float>()[1], -4.f);
  // The move copied x into out's planned bytes: out does not alias x.
  EXPECT_NE(out.data(), method->input(0).to_tensor().data());
}

TEST(BuiltProgram, MoveIntoAConstantIsRefusedAtLoad) {
  auto built = load_bytes(loop_program(/*into_constant=*/true));
  ASSERT_TRUE(built->program) << built->error.message();
  Result<MethodMeta> meta = built->program->method_meta("forward");
  ASSERT_TRUE(meta.ok());
  MethodMemory memory(*meta, 0);
  Result<Method> method = built->program->load_method("forward", &memory.manager, &test::all_kernels());
  ASSERT_FALSE(method.ok());
  EXPECT_EQ(method.error().code(), ErrorCode::InvalidProgram);
  EXPECT_CONTAINS(method.error().message(), "moves into constant tensor value 3");
}

TEST(BuiltProgram, JumpOnAnIntIsRefused) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<fbs::EValue>> values = {
      fbs::CreateEValue(fbb, fbs::Value::Int, fbs::CreateInt(fbb, 0).Union())};
  std::vector<flatbuffers::Offset<fbs::Instruction>> instructions = {
      fbs::CreateInstruction(fbb, fbs::InstructionKind::JumpFalse, fbs::CreateJumpFalse(fbb, 0, 1).Union(), 0)};
  auto method = fbs::CreateMethodDirect(fbb, "forward", &values, nullptr, nullptr, &instructions);
  std::vector<flatbuffers::Offset<fbs::Method>> methods = {method};
  fbb.Finish(fbs::CreateProgramDirect(fbb, 1, &methods), fbs::ProgramIdentifier());
  auto built = load_bytes(test::pack_pte(fbb.GetBufferPointer(), fbb.GetSize(), {}));
  ASSERT_FALSE(built->program);
  EXPECT_EQ(built->error.code(), ErrorCode::InvalidProgram);
  EXPECT_CONTAINS(built->error.message(), "jump condition (value 0) is not a bool or a bool tensor");
}

TEST(BuiltProgram, ProgramWithoutMethodsIsRefused) {
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(fbs::CreateProgramDirect(fbb, 1), fbs::ProgramIdentifier());
  auto built = load_bytes(test::pack_pte(fbb.GetBufferPointer(), fbb.GetSize(), {}));
  ASSERT_FALSE(built->program);
  EXPECT_CONTAINS(built->error.message(), "it has no methods");
}

}  // namespace
}  // namespace etmlir
