// The "nested" backend (runtime/backends/nested): programs whose one
// DelegateCall carries a whole .pte as its payload (make_fixtures.py
// nested_*.pte). Results against PyTorch eager and against the inner program
// run directly, dynamic sizes through the delegate, errors at init and at
// execute (one source location, the inner op's), the delegate lifecycle, and
// the backend called directly (compile specs, a misaligned payload).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "etmlir/runtime/backend.h"
#include "etmlir/runtime/method.h"
#include "etmlir/runtime/program.h"
#include "nested_backend.h"
#include "test_util.h"

namespace etmlir {
namespace {

using test::AlignedBuffer;
using test::LoadedProgram;
using test::LoaderKind;
using test::MethodMemory;

const BackendRegistry& nested_only() {
  static const BackendRegistry* registry = [] {
    auto* r = new BackendRegistry();
    if (Error e = register_nested_backend(*r)) ADD_FAILURE() << e.message();
    return r;
  }();
  return *registry;
}

// A program, its memory and (if it loaded) its method.
using Loaded = test::LoadedMethod;

std::unique_ptr<Loaded> load(const std::string& file, const BackendRegistry* backends = &nested_only(),
                             LoaderKind kind = LoaderKind::Buffer) {
  auto loaded = std::make_unique<Loaded>();
  Error e = test::load_forward(file, kind, backends, loaded.get());
  EXPECT_FALSE(e) << file << ": " << e.message();
  if (e) return nullptr;
  return loaded;
}

std::string where_of_lookup() {
  std::vector<uint8_t> bytes = test::read_file(test::fixture_path("lookup.where.txt"));
  std::string where(bytes.begin(), bytes.end());
  while (!where.empty() && where.back() == '\n') where.pop_back();
  return where;
}

size_t occurrences(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1)) ++n;
  return n;
}

// |actual - expected| <= 1e-4 + 1e-4 * |expected| for every element.
void expect_close(const Tensor& out, const test::Reference& ref) {
  ASSERT_EQ(out.dtype(), ScalarType::Float);
  ASSERT_EQ(static_cast<size_t>(out.dim()), ref.expected_shape.size());
  for (int32_t d = 0; d < out.dim(); ++d) EXPECT_EQ(out.size(d), ref.expected_shape[static_cast<size_t>(d)]) << d;
  ASSERT_EQ(static_cast<size_t>(out.numel()), ref.expected.size());
  size_t bad = 0;
  for (size_t i = 0; i < ref.expected.size(); ++i) {
    float got = out.data_as<float>()[i];
    float tolerance = 1e-4f + 1e-4f * std::fabs(ref.expected[i]);
    if (!(std::fabs(got - ref.expected[i]) <= tolerance) && bad++ < 5)
      ADD_FAILURE() << "element " << i << ": got " << got << ", PyTorch eager gives " << ref.expected[i];
  }
  EXPECT_EQ(bad, 0u) << "of " << ref.expected.size() << " elements";
}

Error set_input(Method& method, const test::Reference& ref) {
  return method.set_input(0, ref.input.data(), ref.input.size() * sizeof(float), ScalarType::Float,
                          Span<const int64_t>(ref.input_shape.data(), ref.input_shape.size()));
}

// The lookup programs' input (planned: set_input copies it into the arena).
Error set_indices(Method& method, const std::vector<int64_t>& indices) {
  int64_t sizes[] = {static_cast<int64_t>(indices.size())};
  return method.set_input(0, indices.data(), indices.size() * sizeof(int64_t), ScalarType::Int64, sizes);
}

// ---- Registration -----------------------------------------------------------------------

TEST(NestedBackend, RegistersOnceUnderNested) {
  BackendRegistry registry;
  ASSERT_FALSE(register_nested_backend(registry));
  Backend* backend = registry.find("nested");
  ASSERT_NE(backend, nullptr);
  EXPECT_TRUE(backend->is_available());
  Error again = register_nested_backend(registry);
  EXPECT_EQ(again.code(), ErrorCode::InvalidArgument);
  EXPECT_STREQ(again.message(), "backend 'nested' is already registered");
}

// ---- Full runs ------------------------------------------------------------------------------

struct RunCase {
  const char* file;
  const char* reference;
  LoaderKind loader;
};

class NestedRun : public ::testing::TestWithParam<RunCase> {};

TEST_P(NestedRun, MatchesPyTorchEager) {
  ETMLIR_REQUIRE_FIXTURES();
  test::Reference ref;
  ASSERT_TRUE(test::read_reference(GetParam().reference, &ref));
  auto loaded = load(GetParam().file, &nested_only(), GetParam().loader);
  ASSERT_TRUE(loaded && loaded->method) << (loaded ? loaded->error.message() : "");
  for (int run = 0; run < 2; ++run) {
    ASSERT_FALSE(set_input(*loaded->method, ref));
    Error e = loaded->method->execute();
    ASSERT_FALSE(e) << e.message();
    expect_close(loaded->method->output(0).to_tensor(), ref);
  }
  EXPECT_EQ(loaded->method->failed_debug_handle(), 0u);
  EXPECT_STREQ(loaded->method->instruction_name(0), "nested");
}

INSTANTIATE_TEST_SUITE_P(Payloads, NestedRun,
                         ::testing::Values(RunCase{"nested_mlp.pte", "mlp", LoaderKind::Buffer},
                                           RunCase{"nested_mlp.pte", "mlp", LoaderKind::File},
                                           RunCase{"nested_mlp.pte", "mlp", LoaderKind::Mmap},
                                           // inner input and output unplanned: set_input points the inner
                                           // input at the live-in, the inner output writes the live-out
                                           RunCase{"nested_mlp_unplanned_io.pte", "mlp", LoaderKind::Mmap},
                                           RunCase{"nested_dynamic.pte", "dynamic", LoaderKind::Mmap}),
                         [](const ::testing::TestParamInfo<RunCase>& info) {
                           std::string name = info.param.file;
                           return name.substr(0, name.find('.')) + "_" + test::loader_kind_name(info.param.loader);
                         });

TEST(NestedDynamic, TwoLengthsThroughTheDelegateResizeTheLiveOut) {
  ETMLIR_REQUIRE_FIXTURES();
  test::Reference eight, three;
  ASSERT_TRUE(test::read_reference("dynamic", &eight));        // T = 8
  ASSERT_TRUE(test::read_reference("dynamic_short", &three));  // T = 3
  auto loaded = load("nested_dynamic.pte");
  ASSERT_TRUE(loaded && loaded->method) << (loaded ? loaded->error.message() : "");
  for (const test::Reference* ref : {&eight, &three, &eight}) {
    ASSERT_FALSE(set_input(*loaded->method, *ref));
    Error e = loaded->method->execute();
    ASSERT_FALSE(e) << e.message();
    expect_close(loaded->method->output(0).to_tensor(), *ref);  // [1, 2T, 4]
  }
  // The outer input is bounded like the inner one: 33 is refused before the delegate runs.
  std::vector<float> x(33 * 16, 0.f);
  int64_t above[] = {1, 33, 16};
  Error e = loaded->method->set_input(0, x.data(), x.size() * sizeof(float), ScalarType::Float, above);
  EXPECT_STREQ(e.message(), "method 'forward' input 0: expected float32[1, <=32, 16], got float32[1, 33, 16]");
}

TEST(NestedLookup, MatchesTheInnerProgramRunDirectly) {
  ETMLIR_REQUIRE_FIXTURES();
  auto direct = load("lookup.pte", nullptr);
  ASSERT_TRUE(direct && direct->method) << (direct ? direct->error.message() : "");
  for (const char* file : {"nested_lookup.pte", "nested_nested_lookup.pte"}) {
    auto nested = load(file);
    ASSERT_TRUE(nested && nested->method) << file << ": " << (nested ? nested->error.message() : "");
    for (std::vector<int64_t> indices : {std::vector<int64_t>{1, 2, 3}, std::vector<int64_t>{63, 0, 63}}) {
      ASSERT_FALSE(set_indices(*direct->method, indices));
      ASSERT_FALSE(direct->method->execute());
      ASSERT_FALSE(set_indices(*nested->method, indices));
      Error e = nested->method->execute();
      ASSERT_FALSE(e) << file << ": " << e.message();
      const Tensor& want = direct->method->output(0).to_tensor();
      const Tensor& got = nested->method->output(0).to_tensor();
      ASSERT_EQ(got.numel(), want.numel());
      EXPECT_EQ(std::memcmp(got.data(), want.data(), want.nbytes()), 0) << file;
    }
  }
}

// ---- Errors at execute: one location, the inner op's -------------------------------------

TEST(NestedFailure, OutOfRangeIndexNamesTheInnerOpsSourceLineOnce) {
  ETMLIR_REQUIRE_FIXTURES();
  std::string where = where_of_lookup();
  ASSERT_CONTAINS(where, "make_fixtures.py:");
  // One level of nesting, and the nested program nested again: the same message.
  for (const char* file : {"nested_lookup.pte", "nested_nested_lookup.pte"}) {
    auto loaded = load(file);
    ASSERT_TRUE(loaded && loaded->method) << (loaded ? loaded->error.message() : "");
    ASSERT_FALSE(set_indices(*loaded->method, {1, 70, 3}));
    Error e = loaded->method->execute();
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << file;
    std::string message = e.message();
    EXPECT_EQ(message.rfind(where + " (method 'forward', instruction 0, delegate 'nested'): aten::embedding.out: "
                                    "index 70 (at flat position 1 of indices) is out of range for weight "
                                    "float32[64, 8] with 64 rows",
                            0),
              0u)
        << file << ": " << message;
    EXPECT_EQ(occurrences(message, "(method"), 1u) << message;
    EXPECT_EQ(occurrences(message, ".py:"), 1u) << message;
    // The inner-most handle: the embedding's, which the outer program maps to the same line.
    uint32_t handle = loaded->method->failed_debug_handle();
    ASSERT_NE(handle, 0u) << file;
    const char* location = loaded->program->program->debug_location(0, handle);
    ASSERT_NE(location, nullptr);
    EXPECT_EQ(where, location);
    // The failure leaves the method usable.
    ASSERT_FALSE(set_indices(*loaded->method, {1, 2, 3}));
    Error ok = loaded->method->execute();
    EXPECT_FALSE(ok) << ok.message();
    EXPECT_EQ(loaded->method->failed_debug_handle(), 0u);
  }
}

TEST(NestedFailure, WithoutThePayloadsDebugInfoTheCallsOwnLineIsNamed) {
  ETMLIR_REQUIRE_FIXTURES();
  auto loaded = load("nested_lookup_no_debug.pte");
  ASSERT_TRUE(loaded && loaded->method) << (loaded ? loaded->error.message() : "");
  ASSERT_FALSE(set_indices(*loaded->method, {70, 1, 3}));
  Error e = loaded->method->execute();
  EXPECT_EQ(std::string(e.message()).rfind("outer.py:7 (method 'forward', instruction 0, delegate 'nested'): "
                                           "aten::embedding.out: index 70 (at flat position 0 of indices)",
                                           0),
            0u)
      << e.message();
  // Still the inner-most handle (the embedding's in the payload), not the call's 1000.
  uint32_t handle = loaded->method->failed_debug_handle();
  EXPECT_NE(handle, 0u);
  EXPECT_NE(handle, 1000u);
  EXPECT_EQ(loaded->program->program->debug_location(0, handle), nullptr);
}

TEST(NestedFailure, ACallWithoutItsLiveOutIsRefusedNamingTheCounts) {
  ETMLIR_REQUIRE_FIXTURES();
  test::Reference ref;
  ASSERT_TRUE(test::read_reference("mlp", &ref));
  auto loaded = load("nested_mlp_no_live_out.pte");
  ASSERT_TRUE(loaded && loaded->method) << (loaded ? loaded->error.message() : "");
  ASSERT_FALSE(set_input(*loaded->method, ref));
  Error e = loaded->method->execute();
  EXPECT_EQ(e.code(), ErrorCode::InvalidProgram);
  EXPECT_STREQ(e.message(),
               "unknown location (method 'forward', instruction 0, delegate 'nested'): the call passes 1 argument; "
               "the payload's method 'forward' takes 2 (1 input, then 1 output)");
  EXPECT_EQ(loaded->method->failed_debug_handle(), 0u);
}

// ---- Errors at init --------------------------------------------------------------------------

// The shared payload header a nested payload starts with, around `body` (a .pte, or not).
std::vector<uint8_t> nested_payload(const std::vector<uint8_t>& body) {
  test::PayloadFields header;
  header.backend_id = "nested";
  header.body_format = "pte";
  header.entry_points = {{"forward", "forward"}};
  return test::write_payload(header, body);
}

// The error loading `pte`'s "forward" with the nested backend gives.
std::string load_error(const std::vector<uint8_t>& pte, ErrorCode* code = nullptr) {
  test::LoadedMethod loaded;
  Error e = test::load_forward(pte, &nested_only(), &loaded);
  if (e) return std::string("(the outer program does not load: ") + e.message() + ")";
  if (loaded.method) return "(the method loaded)";
  if (code != nullptr) *code = loaded.error.code();
  return loaded.error.message();
}

TEST(NestedInit, APayloadWithoutTheHeaderSaysRebuild) {
  ETMLIR_REQUIRE_FIXTURES();
  auto loaded = load("nested_junk.pte");  // payload "opaque bytes"
  ASSERT_TRUE(loaded);
  ASSERT_FALSE(loaded->method);
  EXPECT_EQ(loaded->error.code(), ErrorCode::InvalidProgram);
  EXPECT_STREQ(loaded->error.message(),
               "method 'forward' delegate 0 (backend 'nested'): init failed: not an etmlir payload header (a payload "
               "from before format 1?): rebuild the .pte (bytes 8 to 12 are \"ytes\", not \"ETPH\")");
  // A bare .pte: the nested payload from before the shared header.
  std::vector<uint8_t> mlp = test::read_file(test::fixture_path("mlp.pte"));
  ASSERT_FALSE(mlp.empty());
  ErrorCode code = ErrorCode::Ok;
  EXPECT_EQ(load_error(test::one_delegate_program("nested", mlp, {8, 784}), &code),
            "method 'forward' delegate 0 (backend 'nested'): init failed: a bare .pte, a nested payload from before "
            "the shared payload header: rebuild the .pte with this etmlir");
  EXPECT_EQ(code, ErrorCode::NotSupported);
}

TEST(NestedInit, ABodyThatIsNoProgramFailsTheLoadNamingTheBackend) {
  std::string junk = "opaque bytes";
  ErrorCode code = ErrorCode::Ok;
  EXPECT_EQ(load_error(test::one_delegate_program("nested", nested_payload({junk.begin(), junk.end()}), {2, 2}), &code),
            "method 'forward' delegate 0 (backend 'nested'): init failed: payload is not a valid program: invalid "
            "program: 12 bytes is too short for the 64-byte header");
  EXPECT_EQ(code, ErrorCode::InvalidProgram);
  ETMLIR_REQUIRE_FIXTURES();
  // A .pte body with a broken FlatBuffer identifier (at 64 + 4) and a checksum that matches it.
  std::vector<uint8_t> mlp = test::read_file(test::fixture_path("mlp.pte"));
  ASSERT_FALSE(mlp.empty());
  ASSERT_EQ(std::memcmp(&mlp[64 + 4], "ETX1", 4), 0);
  mlp[64 + 4] = 'X';
  EXPECT_EQ(load_error(test::one_delegate_program("nested", nested_payload(mlp), {8, 784})),
            "method 'forward' delegate 0 (backend 'nested'): init failed: payload is not a valid program: invalid "
            "program: FlatBuffer identifier is not \"ETX1\"");
}

TEST(NestedInit, HeaderChecks) {
  ETMLIR_REQUIRE_FIXTURES();
  std::vector<uint8_t> mlp = test::read_file(test::fixture_path("mlp.pte"));
  ASSERT_FALSE(mlp.empty());
  test::PayloadFields header;
  header.backend_id = "cpu";
  header.body_format = "pte";
  EXPECT_EQ(load_error(test::one_delegate_program("nested", test::write_payload(header, mlp), {8, 784})),
            "method 'forward' delegate 0 (backend 'nested'): init failed: payload is for backend 'cpu', not 'nested'");
  header.backend_id = "nested";
  header.body_format = "elf-shared-object";
  EXPECT_EQ(load_error(test::one_delegate_program("nested", test::write_payload(header, mlp), {8, 784})),
            "method 'forward' delegate 0 (backend 'nested'): init failed: payload body_format is 'elf-shared-object', "
            "not 'pte'");
  header.body_format = "pte";
  header.body_version = 2;
  ErrorCode code = ErrorCode::Ok;
  EXPECT_EQ(load_error(test::one_delegate_program("nested", test::write_payload(header, mlp), {8, 784}), &code),
            "method 'forward' delegate 0 (backend 'nested'): init failed: payload body_version 2 is not supported "
            "(this runtime reads 1)");
  EXPECT_EQ(code, ErrorCode::NotSupported);
}

TEST(NestedInit, ACorruptPayloadFailsItsChecksum) {
  ETMLIR_REQUIRE_FIXTURES();
  std::vector<uint8_t> bytes = test::read_file(test::fixture_path("nested_mlp.pte"));
  ASSERT_FALSE(bytes.empty());
  // The payload's body is the second .pte in the file: break its FlatBuffer identifier (at 64 + 4).
  size_t inner = std::string(bytes.begin() + 1, bytes.end()).find("ETXH");
  ASSERT_NE(inner, std::string::npos);
  inner += 1;
  ASSERT_EQ(std::memcmp(&bytes[inner + 64 + 4], "ETX1", 4), 0);
  bytes[inner + 64 + 4] = 'X';
  AlignedBuffer buffer(bytes.size());
  std::memcpy(buffer.data(), bytes.data(), bytes.size());
  BufferDataLoader loader(buffer.data(), buffer.size());
  Result<Program> program = Program::load(&loader);
  ASSERT_TRUE(program.ok()) << program.error().message();  // the outer program is intact
  Result<MethodMeta> meta = program->method_meta("forward");
  ASSERT_TRUE(meta.ok());
  MethodMemory memory(*meta, 0, &nested_only());
  Result<Method> method = program->load_method("forward", &memory.manager, &test::all_kernels(), &nested_only());
  ASSERT_FALSE(method.ok());
  EXPECT_EQ(method.error().code(), ErrorCode::InvalidProgram);
  std::string message = method.error().message();
  EXPECT_EQ(message.rfind("method 'forward' delegate 0 (backend 'nested'): init failed: payload checksum mismatch: "
                          "the body is corrupt (CRC-32 of its ",
                          0),
            0u)
      << message;
}

TEST(NestedInit, MissingInnerKernelIsReportedThroughTheDelegate) {
  ETMLIR_REQUIRE_FIXTURES();
  auto loaded = std::make_unique<LoadedProgram>();
  ASSERT_FALSE(test::load_program(test::fixture_path("nested_lookup.pte"), LoaderKind::Buffer, loaded.get()));
  Result<MethodMeta> meta = loaded->program->method_meta("forward");
  ASSERT_TRUE(meta.ok());
  MethodMemory memory(*meta, 0, &nested_only());
  KernelRegistry empty;
  Result<Method> method = loaded->program->load_method("forward", &memory.manager, &empty, &nested_only());
  ASSERT_FALSE(method.ok());
  EXPECT_EQ(method.error().code(), ErrorCode::NotFound);
  EXPECT_CONTAINS(method.error().message(),
                  "method 'forward' delegate 0 (backend 'nested'): init failed: loading the payload: no kernel for "
                  "aten::embedding.out (needed by method 'forward', instruction 0 at ");
}

// ---- Memory: the inner method's, from the outer method allocator --------------------------

TEST(NestedMemory, MethodAllocatorBytesCoversTheInnerMethodAndNothingIsLeftOut) {
  ETMLIR_REQUIRE_FIXTURES();
  for (const char* file : {"nested_mlp.pte", "nested_dynamic.pte", "nested_nested_lookup.pte"}) {
    auto loaded = std::make_unique<LoadedProgram>();
    ASSERT_FALSE(test::load_program(test::fixture_path(file), LoaderKind::Mmap, loaded.get()));
    Result<MethodMeta> meta = loaded->program->method_meta("forward");
    ASSERT_TRUE(meta.ok());
    Result<size_t> bytes = meta->method_allocator_bytes(&nested_only());
    ASSERT_TRUE(bytes.ok()) << file << ": " << bytes.error().message();
    // The inner method's 4 MiB temp allocator (the default temp_bytes) and its arenas are in there.
    EXPECT_GT(bytes.get(), meta->method_allocator_bytes() + (size_t{4} << 20)) << file;
    MethodMemory memory(*meta, 0, &nested_only());
    Result<Method> method = loaded->program->load_method("forward", &memory.manager, &test::all_kernels(),
                                                         &nested_only());
    ASSERT_TRUE(method.ok()) << file << ": " << method.error().message();
    EXPECT_LE(memory.method_allocator.used(), bytes.get()) << file;
    EXPECT_GT(memory.method_allocator.used(), size_t{4} << 20) << file;
  }
}

TEST(NestedMemory, ATooSmallMethodAllocatorIsOutOfMemoryNamingWhat) {
  ETMLIR_REQUIRE_FIXTURES();
  auto loaded = std::make_unique<LoadedProgram>();
  ASSERT_FALSE(test::load_program(test::fixture_path("nested_mlp.pte"), LoaderKind::Buffer, loaded.get()));
  Result<MethodMeta> meta = loaded->program->method_meta("forward");
  ASSERT_TRUE(meta.ok());
  MethodMemory memory(*meta, 0, &nested_only());
  // The outer method's own bytes only: no room for the delegate's inner method.
  memory.method_allocator = MemoryAllocator(memory.method_buffer->data(), meta->method_allocator_bytes());
  Result<Method> method =
      loaded->program->load_method("forward", &memory.manager, &test::all_kernels(), &nested_only());
  ASSERT_FALSE(method.ok());
  EXPECT_EQ(method.error().code(), ErrorCode::OutOfMemory);
  EXPECT_CONTAINS(method.error().message(), "method 'forward' delegate 0 (backend 'nested'): init failed: the method "
                                            "allocator has ");
  EXPECT_CONTAINS(method.error().message(), "(size it with MethodMeta::method_allocator_bytes(backends))");
}

// ---- Lifecycle -------------------------------------------------------------------------------

// Forwards to the nested backend, counting the calls.
class CountingBackend : public Backend {
 public:
  explicit CountingBackend(Backend* inner) : inner_(inner) {}
  int inits = 0;
  int executes = 0;
  int destroys = 0;
  const KernelRegistry* kernels = nullptr;
  const BackendRegistry* backends = nullptr;
  bool is_available() const override { return inner_->is_available(); }
  Result<DelegateHandle> init(BackendInitContext& context, Span<const uint8_t> payload,
                              Span<const CompileSpec> specs) override {
    ++inits;
    kernels = context.kernels;
    backends = context.backends;
    return inner_->init(context, payload, specs);
  }
  Error execute(BackendExecuteContext& context, DelegateHandle handle, Span<EValue*> args) override {
    ++executes;
    return inner_->execute(context, handle, args);
  }
  void destroy(DelegateHandle handle) override {
    ++destroys;
    inner_->destroy(handle);
  }
  Result<size_t> method_allocator_bytes(const BackendInitContext& context, Span<const uint8_t> payload,
                                        Span<const CompileSpec> specs) const override {
    return inner_->method_allocator_bytes(context, payload, specs);
  }

 private:
  Backend* inner_;
};

TEST(NestedLifecycle, EachDelegateIsInitializedAndDestroyedOnceAcrossMoves) {
  ETMLIR_REQUIRE_FIXTURES();
  CountingBackend counting(nested_only().find("nested"));
  BackendRegistry backends;
  ASSERT_FALSE(backends.add("nested", &counting));
  {
    // The outer delegate, and the payload's own nested delegate: it is loaded
    // with the outer method's registries (BackendInitContext), so it counts too.
    auto loaded = load("nested_nested_lookup.pte", &backends);
    ASSERT_TRUE(loaded && loaded->method) << (loaded ? loaded->error.message() : "");
    EXPECT_EQ(counting.inits, 2);
    EXPECT_EQ(counting.kernels, &test::all_kernels());
    EXPECT_EQ(counting.backends, &backends);
    ASSERT_FALSE(set_indices(*loaded->method, {1, 2, 3}));
    ASSERT_FALSE(loaded->method->execute());
    EXPECT_EQ(counting.executes, 2);
    Method moved(static_cast<Method&&>(*loaded->method));
    loaded->method.reset();
    EXPECT_EQ(counting.destroys, 0);
    ASSERT_FALSE(moved.execute());
    EXPECT_EQ(counting.executes, 4);
  }
  EXPECT_EQ(counting.destroys, 2);
}

TEST(NestedLifecycle, AFailedInitIsNotDestroyed) {
  ETMLIR_REQUIRE_FIXTURES();
  CountingBackend counting(nested_only().find("nested"));
  BackendRegistry backends;
  ASSERT_FALSE(backends.add("nested", &counting));
  {
    auto loaded = load("nested_junk.pte", &backends);
    ASSERT_TRUE(loaded);
    EXPECT_FALSE(loaded->method);
  }
  EXPECT_EQ(counting.inits, 1);
  EXPECT_EQ(counting.destroys, 0);
}

// ---- The backend called directly ----------------------------------------------------------------

// A tensor with its own sizes/strides arrays, wrapped in an EValue.
struct OwnedTensor {
  OwnedTensor(ScalarType dtype, std::vector<int64_t> shape, void* data, size_t capacity)
      : sizes(std::move(shape)), strides(sizes.size()), dim_order(sizes.size()) {
    for (size_t d = 0; d < sizes.size(); ++d) dim_order[d] = static_cast<uint8_t>(d);
    tensor = Tensor(dtype, static_cast<int32_t>(sizes.size()), sizes.data(), strides.data(), dim_order.data(),
                    nullptr, data, capacity);
    value.tag = Tag::Tensor;
    value.payload.as_tensor = &tensor;
  }
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  std::vector<uint8_t> dim_order;
  Tensor tensor;
  EValue value;
};

class DirectCall : public ::testing::Test {
 protected:
  void SetUp() override {
    if (test::fixture_dir().empty()) GTEST_SKIP() << "ETMLIR_TEST_PTE_DIR is not set";
    backend_ = nested_only().find("nested");
    ASSERT_NE(backend_, nullptr);
    std::vector<uint8_t> mlp = test::read_file(test::fixture_path("mlp.pte"));
    ASSERT_FALSE(mlp.empty());
    bytes_ = nested_payload(mlp);
  }
  // A method allocator with room for everything init takes (the inner mlp method, its 4 MiB
  // temp allocator, its arena and a copy of the payload).
  BackendInitContext context() {
    return BackendInitContext{&allocator_, "outer", 3, &test::all_kernels(), &nested_only()};
  }
  Backend* backend_ = nullptr;
  std::vector<uint8_t> bytes_;
  AlignedBuffer memory_{size_t{16} << 20};
  MemoryAllocator allocator_{memory_.data(), memory_.size()};
};

TEST_F(DirectCall, AMisalignedPayloadIsCopiedAndRuns) {
  test::Reference ref;
  ASSERT_TRUE(test::read_reference("mlp", &ref));
  AlignedBuffer buffer(bytes_.size() + 8);
  std::memcpy(buffer.data() + 8, bytes_.data(), bytes_.size());  // 8-byte aligned only
  BackendInitContext init = context();
  CompileSpec spec{"method", reinterpret_cast<const uint8_t*>("forward"), 7};
  Span<const uint8_t> misaligned(buffer.data() + 8, bytes_.size());
  Result<DelegateHandle> handle = backend_->init(init, misaligned, Span<const CompileSpec>(&spec, 1));
  ASSERT_TRUE(handle.ok()) << handle.error().message();
  EXPECT_GT(allocator_.used(), bytes_.size()) << "the body's copy is in the method allocator";
  // Before init copies it, a misaligned body cannot be read to size the method allocator.
  BackendInitContext sizing{nullptr, "outer", 3, &test::all_kernels(), &nested_only()};
  Result<size_t> bytes = backend_->method_allocator_bytes(sizing, misaligned, Span<const CompileSpec>(&spec, 1));
  ASSERT_FALSE(bytes.ok());
  EXPECT_EQ(bytes.error().code(), ErrorCode::NotSupported);
  EXPECT_CONTAINS(bytes.error().message(), "the payload body is not 16-byte aligned in memory");
  std::vector<float> y(ref.expected.size(), -1.f);
  OwnedTensor in(ScalarType::Float, ref.input_shape, ref.input.data(), ref.input.size() * sizeof(float));
  OwnedTensor out(ScalarType::Float, ref.expected_shape, y.data(), y.size() * sizeof(float));
  EValue* args[] = {&in.value, &out.value};
  BackendExecuteContext run{nullptr, 0};
  Error e = backend_->execute(run, handle.get(), Span<EValue*>(args, 2));
  ASSERT_FALSE(e) << e.message();
  expect_close(out.tensor, ref);

  // Arguments that are not tensors, and too many of them.
  EValue seven;
  seven.tag = Tag::Int;
  seven.payload.as_int = 7;
  EValue* wrong_kind[] = {&in.value, &seven};
  Error kind = backend_->execute(run, handle.get(), Span<EValue*>(wrong_kind, 2));
  EXPECT_STREQ(kind.message(), "argument 1 is a int; a nested delegate passes tensors only");
  EValue* three[] = {&in.value, &out.value, &out.value};
  Error count = backend_->execute(run, handle.get(), Span<EValue*>(three, 3));
  EXPECT_STREQ(count.message(),
               "the call passes 3 arguments; the payload's method 'forward' takes 2 (1 input, then 1 output)");
  // A live-in of the wrong shape: the inner method's set_input says what it expected.
  OwnedTensor short_in(ScalarType::Float, {4, 784}, ref.input.data(), ref.input.size() * sizeof(float));
  EValue* short_args[] = {&short_in.value, &out.value};
  Error shape = backend_->execute(run, handle.get(), Span<EValue*>(short_args, 2));
  EXPECT_STREQ(shape.message(),
               "payload: method 'forward' input 0: expected float32[8, 784], got float32[4, 784]");
  // A live-out of another dtype.
  std::vector<int64_t> ints(ref.expected.size());
  OwnedTensor int_out(ScalarType::Int64, ref.expected_shape, ints.data(), ints.size() * sizeof(int64_t));
  EValue* int_args[] = {&in.value, &int_out.value};
  Error dtype = backend_->execute(run, handle.get(), Span<EValue*>(int_args, 2));
  EXPECT_STREQ(dtype.message(), "live-out 0 is int64[8, 10]; the payload's output 0 is float32[8, 10]");
  backend_->destroy(handle.get());
}

TEST_F(DirectCall, CompileSpecMethodMustNameAMethodOfThePayload) {
  AlignedBuffer buffer(bytes_.size());
  std::memcpy(buffer.data(), bytes_.data(), bytes_.size());
  Span<const uint8_t> payload(buffer.data(), bytes_.size());
  BackendInitContext init = context();
  CompileSpec decode{"method", reinterpret_cast<const uint8_t*>("decode"), 6};
  Result<DelegateHandle> handle = backend_->init(init, payload, Span<const CompileSpec>(&decode, 1));
  ASSERT_FALSE(handle.ok());
  EXPECT_EQ(handle.error().code(), ErrorCode::NotFound);
  EXPECT_STREQ(handle.error().message(), "payload: no method 'decode' in the program (it has 'forward')");
  CompileSpec empty{"method", reinterpret_cast<const uint8_t*>(""), 0};
  Result<DelegateHandle> unnamed = backend_->init(init, payload, Span<const CompileSpec>(&empty, 1));
  ASSERT_FALSE(unnamed.ok());
  EXPECT_CONTAINS(unnamed.error().message(), "compile spec 'method' must name a method");
  CompileSpec temp{"temp_bytes", reinterpret_cast<const uint8_t*>("64k"), 3};
  Result<DelegateHandle> bad_temp = backend_->init(init, payload, Span<const CompileSpec>(&temp, 1));
  ASSERT_FALSE(bad_temp.ok());
  EXPECT_STREQ(bad_temp.error().message(), "compile spec 'temp_bytes' must be a decimal byte count, got '64k'");
  // Unknown keys are ignored; a small temp allocator still runs (gemm falls back to its stack buffer).
  CompileSpec ok[] = {{"temp_bytes", reinterpret_cast<const uint8_t*>("4096"), 4},
                      {"level", reinterpret_cast<const uint8_t*>("2"), 1}};
  Result<DelegateHandle> small = backend_->init(init, payload, Span<const CompileSpec>(ok, 2));
  ASSERT_TRUE(small.ok()) << small.error().message();
  test::Reference ref;
  ASSERT_TRUE(test::read_reference("mlp", &ref));
  std::vector<float> y(ref.expected.size());
  OwnedTensor in(ScalarType::Float, ref.input_shape, ref.input.data(), ref.input.size() * sizeof(float));
  OwnedTensor out(ScalarType::Float, ref.expected_shape, y.data(), y.size() * sizeof(float));
  EValue* args[] = {&in.value, &out.value};
  BackendExecuteContext run{nullptr, 0};
  Error e = backend_->execute(run, small.get(), Span<EValue*>(args, 2));
  ASSERT_FALSE(e) << e.message();
  expect_close(out.tensor, ref);
  backend_->destroy(small.get());
}

// ---- Method::set_describe_failures ------------------------------------------------------------

TEST(DescribeFailures, OffLeavesTheKernelsMessageAndStillRecordsTheHandle) {
  ETMLIR_REQUIRE_FIXTURES();
  std::string where = where_of_lookup();
  auto loaded = load("lookup.pte", nullptr);
  ASSERT_TRUE(loaded && loaded->method);
  Method& method = *loaded->method;
  ASSERT_FALSE(set_indices(method, {64, 0, 0}));
  Error described = method.execute();
  EXPECT_EQ(std::string(described.message()).rfind(where + " (method 'forward', instruction 0): aten::embedding.out: "
                                                           "index 64",
                                                   0),
            0u)
      << described.message();
  uint32_t handle = method.failed_debug_handle();
  EXPECT_NE(handle, 0u);
  method.set_describe_failures(false);
  Error bare = method.execute();
  EXPECT_EQ(std::string(bare.message()).rfind("aten::embedding.out: index 64 (at flat position 0 of indices)", 0), 0u)
      << bare.message();
  EXPECT_EQ(method.failed_debug_handle(), handle);
  EXPECT_STREQ(loaded->program->program->debug_location(0, handle), where.c_str());
}

}  // namespace
}  // namespace etmlir
