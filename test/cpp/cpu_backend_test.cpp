// The "cpu" backend (runtime/backends/cpu): real payloads built here, the
// shared objects of fixtures/cpu_payload_fixture.c wrapped in a PAYLOAD.md
// header by test::write_cpu_payload. Results (static and dynamic outputs, one
// and two threads, through a Method and called directly), every refusal at
// init with its message, argument checks at execute, and the lifecycle (each
// delegate its own copy of the library and its own arena).
#include <elf.h>
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cpu_backend.h"
#include "etmlir/runtime/backend.h"
#include "etmlir/runtime/data_loader.h"
#include "etmlir/runtime/method.h"
#include "etmlir/runtime/program.h"
#include "test_util.h"

namespace etmlir {
namespace {

using test::CpuFixture;
using test::CpuPayloadHeader;
using test::CpuTensorSpec;

// A tensor with its own sizes/strides arrays (and upper bounds when dynamic), wrapped in an EValue.
struct OwnedTensor {
  OwnedTensor(ScalarType dtype, std::vector<int64_t> shape, size_t capacity_elements,
              std::vector<int64_t> bounds = {})
      : sizes(std::move(shape)),
        strides(sizes.size()),
        dim_order(sizes.size()),
        upper_bounds(std::move(bounds)),
        data(capacity_elements * element_size(dtype), 0) {
    for (size_t d = 0; d < sizes.size(); ++d) dim_order[d] = static_cast<uint8_t>(d);
    tensor = Tensor(dtype, static_cast<int32_t>(sizes.size()), sizes.data(), strides.data(), dim_order.data(),
                    upper_bounds.empty() ? nullptr : upper_bounds.data(), data.data(), data.size());
    value.tag = Tag::Tensor;
    value.payload.as_tensor = &tensor;
  }
  template <typename T>
  T* at() {
    return reinterpret_cast<T*>(data.data());
  }
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  std::vector<uint8_t> dim_order;
  std::vector<int64_t> upper_bounds;
  std::vector<uint8_t> data;
  Tensor tensor;
  EValue value;
};

CpuPayloadHeader add_header() {
  CpuPayloadHeader h;
  h.entry = "add_f32";
  h.inputs = {{ScalarType::Float, {2, 3}}, {ScalarType::Float, {2, 3}}};
  h.outputs = {{ScalarType::Float, {2, 3}}};
  h.debug_handles = {7, 8};
  return h;
}

CpuPayloadHeader scale_header() {
  CpuPayloadHeader h;
  h.entry = "scale2";
  h.shapes_entry = "scale2_shapes";
  h.inputs = {{ScalarType::Float, {-1, 4}}};
  h.outputs = {{ScalarType::Float, {-1, 4}}};
  return h;
}

CpuPayloadHeader chunks_header() {
  CpuPayloadHeader h;
  h.entry = "chunks";
  h.outputs = {{ScalarType::Int64, {16}}, {ScalarType::Int64, {16}}};
  return h;
}

CpuPayloadHeader where_header() {
  CpuPayloadHeader h;
  h.entry = "where";
  h.outputs = {{ScalarType::Int64, {2}}};
  return h;
}

class CpuBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    so_ = test::cpu_fixture_bytes();
    ASSERT_FALSE(so_.empty()) << "the fixture shared object was not built";
  }

  Backend* backend(int num_threads = 1) {
    auto& registry = registries_[num_threads];
    if (!registry) {
      registry = std::make_unique<BackendRegistry>();
      Error e = register_cpu_backend(*registry, CpuBackendOptions{num_threads});
      EXPECT_FALSE(e) << e.message();
    }
    return registry->find("cpu");
  }

  // init() on `payload` (copied, so that nothing reads the caller's vector after init).
  Result<DelegateHandle> init(const std::vector<uint8_t>& payload, int num_threads = 1, uint32_t index = 0) {
    payloads_.push_back(std::make_unique<test::AlignedBuffer>(payload.size()));
    if (!payload.empty()) std::memcpy(payloads_.back()->data(), payload.data(), payload.size());
    BackendInitContext context{&allocator_, "forward", index, nullptr, nullptr};
    return backend(num_threads)->init(context, Span<const uint8_t>(payloads_.back()->data(), payload.size()),
                                      Span<const CompileSpec>());
  }

  // The message init() fails with (and its code in *code).
  std::string init_error(const std::vector<uint8_t>& payload, ErrorCode* code = nullptr, uint32_t index = 0) {
    Result<DelegateHandle> handle = init(payload, 1, index);
    if (handle.ok()) {
      backend()->destroy(handle.get());
      return "(init succeeded)";
    }
    if (code != nullptr) *code = handle.error().code();
    return handle.error().message();
  }

  Error execute(DelegateHandle handle, std::vector<EValue*> args, int num_threads = 1) {
    BackendExecuteContext context{nullptr, 0};
    return backend(num_threads)->execute(context, handle, Span<EValue*>(args.data(), args.size()));
  }

  std::vector<uint8_t> so_;
  MemoryAllocator allocator_;
  std::map<int, std::unique_ptr<BackendRegistry>> registries_;
  std::vector<std::unique_ptr<test::AlignedBuffer>> payloads_;
};

// A delegate handle destroyed by its backend at the end of the scope.
struct Delegate {
  Delegate(Backend* backend, DelegateHandle handle) : backend(backend), handle(handle) {}
  Delegate(const Delegate&) = delete;
  Delegate& operator=(const Delegate&) = delete;
  ~Delegate() {
    if (handle != nullptr) backend->destroy(handle);
  }
  Backend* backend;
  DelegateHandle handle;
};

// ---- Registration ---------------------------------------------------------------------------

TEST(CpuRegistration, RegistersUnderCpuOncePerRegistry) {
  BackendRegistry registry;
  ASSERT_FALSE(register_cpu_backend(registry));
  Backend* backend = registry.find("cpu");
  ASSERT_NE(backend, nullptr);
  EXPECT_TRUE(backend->is_available());
  Error again = register_cpu_backend(registry, CpuBackendOptions{2});
  EXPECT_EQ(again.code(), ErrorCode::InvalidArgument);
  EXPECT_STREQ(again.message(), "backend 'cpu' is already registered");
  BackendRegistry other;
  Error zero = register_cpu_backend(other, CpuBackendOptions{0});
  EXPECT_EQ(zero.code(), ErrorCode::InvalidArgument);
  EXPECT_STREQ(zero.message(), "cpu backend: num_threads must be 1 to 256, got 0");
  EXPECT_EQ(other.find("cpu"), nullptr);
}

TEST(CpuRegistration, KnowsThisMachine) {
#if defined(__x86_64__)
  EXPECT_STREQ(cpu_backend_arch(), "x86_64");
  EXPECT_NE(cpu_backend_supported_features() & 1, 0u) << "an x86_64 CPU without sse4.2?";
#elif defined(__aarch64__)
  EXPECT_STREQ(cpu_backend_arch(), "aarch64");
  EXPECT_EQ(cpu_backend_supported_features(), 0u);
#endif
  EXPECT_EQ(cpu_backend_supported_features() >> 10, 0u);
}

// ---- Runs -------------------------------------------------------------------------------------

TEST_F(CpuBackendTest, StaticAddMatches) {
  Result<DelegateHandle> handle = init(test::write_cpu_payload(add_header(), so_));
  ASSERT_TRUE(handle.ok()) << handle.error().message();
  Delegate d(backend(), handle.get());
  OwnedTensor a(ScalarType::Float, {2, 3}, 6), b(ScalarType::Float, {2, 3}, 6), out(ScalarType::Float, {2, 3}, 6);
  for (int run = 0; run < 2; ++run) {
    for (int i = 0; i < 6; ++i) {
      a.at<float>()[i] = static_cast<float>(i + run);
      b.at<float>()[i] = 0.5f * static_cast<float>(i);
    }
    Error e = execute(d.handle, {&a.value, &b.value, &out.value});
    ASSERT_FALSE(e) << e.message();
    for (int i = 0; i < 6; ++i) EXPECT_EQ(out.at<float>()[i], static_cast<float>(i + run) + 0.5f * i) << i;
  }
  CpuDelegateStats stats = cpu_backend_stats(d.handle);
  EXPECT_EQ(stats.executes, 2u);
  EXPECT_EQ(stats.heap_fallbacks, 0u);
  EXPECT_EQ(stats.arena_bytes, 4096u);
  EXPECT_EQ(stats.arena_peak, 64u);  // 6 floats, one 64-byte bump
  EXPECT_EQ(stats.num_threads, 1);
}

TEST_F(CpuBackendTest, DynamicOutputIsResizedToWhatTheShapesEntryWrites) {
  Result<DelegateHandle> handle = init(test::write_cpu_payload(scale_header(), so_));
  ASSERT_TRUE(handle.ok()) << handle.error().message();
  Delegate d(backend(), handle.get());
  OwnedTensor out(ScalarType::Float, {8, 4}, 32, {8, 4});  // planned at [<=8, 4]
  for (int64_t rows : {3, 8, 1, 0, 5}) {
    OwnedTensor x(ScalarType::Float, {rows, 4}, static_cast<size_t>(rows * 4));
    for (int64_t i = 0; i < rows * 4; ++i) x.at<float>()[i] = static_cast<float>(i) - 3.f;
    Error e = execute(d.handle, {&x.value, &out.value});
    ASSERT_FALSE(e) << rows << ": " << e.message();
    ASSERT_EQ(out.tensor.dim(), 2);
    EXPECT_EQ(out.tensor.size(0), rows);
    EXPECT_EQ(out.tensor.size(1), 4);
    for (int64_t i = 0; i < rows * 4; ++i) EXPECT_EQ(out.at<float>()[i], 2.f * (static_cast<float>(i) - 3.f)) << i;
  }
}

class CpuThreads : public CpuBackendTest, public ::testing::WithParamInterface<int> {};

TEST_P(CpuThreads, ParallelLoopsRunOnThatManyThreads) {
  int threads = GetParam();
  Result<DelegateHandle> handle = init(test::write_cpu_payload(chunks_header(), so_), threads);
  ASSERT_TRUE(handle.ok()) << handle.error().message();
  Delegate d(backend(threads), handle.get());
  EXPECT_EQ(cpu_backend_stats(d.handle).num_threads, threads);
  OwnedTensor begins(ScalarType::Int64, {16}, 16), ids(ScalarType::Int64, {16}, 16);
  int64_t self = static_cast<int64_t>(pthread_self());
  for (int run = 0; run < 50; ++run) {
    Error e = execute(d.handle, {&begins.value, &ids.value}, threads);
    ASSERT_FALSE(e) << e.message();
    std::set<int64_t> starts(begins.at<int64_t>(), begins.at<int64_t>() + 16);
    std::set<int64_t> workers(ids.at<int64_t>(), ids.at<int64_t>() + 16);
    std::set<int64_t> expected;
    // Balanced chunks, the longer ones first: 16 on 3 threads is 6 + 5 + 5.
    for (int c = 0; c < threads; ++c) expected.insert(c * (16 / threads) + std::min(c, 16 % threads));
    ASSERT_EQ(starts, expected) << "run " << run;
    ASSERT_EQ(workers.size(), static_cast<size_t>(threads)) << "run " << run;
    ASSERT_EQ(ids.at<int64_t>()[0], self) << "the caller runs chunk 0";
  }
}

TEST_P(CpuThreads, AddAndDynamicScaleMatch) {
  int threads = GetParam();
  Result<DelegateHandle> add = init(test::write_cpu_payload(add_header(), so_), threads);
  Result<DelegateHandle> scale = init(test::write_cpu_payload(scale_header(), so_), threads);
  ASSERT_TRUE(add.ok()) << add.error().message();
  ASSERT_TRUE(scale.ok()) << scale.error().message();
  Delegate a_d(backend(threads), add.get()), s_d(backend(threads), scale.get());
  OwnedTensor a(ScalarType::Float, {2, 3}, 6), b(ScalarType::Float, {2, 3}, 6), sum(ScalarType::Float, {2, 3}, 6);
  for (int i = 0; i < 6; ++i) a.at<float>()[i] = b.at<float>()[i] = static_cast<float>(i);
  ASSERT_FALSE(execute(a_d.handle, {&a.value, &b.value, &sum.value}, threads));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(sum.at<float>()[i], 2.f * i);
  OwnedTensor x(ScalarType::Float, {37, 4}, 37 * 4), y(ScalarType::Float, {64, 4}, 64 * 4, {64, 4});
  for (int i = 0; i < 37 * 4; ++i) x.at<float>()[i] = static_cast<float>(i);
  ASSERT_FALSE(execute(s_d.handle, {&x.value, &y.value}, threads));
  EXPECT_EQ(y.tensor.size(0), 37);
  for (int i = 0; i < 37 * 4; ++i) ASSERT_EQ(y.at<float>()[i], 2.f * i) << i;
}

INSTANTIATE_TEST_SUITE_P(Threads, CpuThreads, ::testing::Values(1, 2, 3),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "threads_" + std::to_string(info.param);
                         });

TEST_F(CpuBackendTest, ArenaTooSmallFallsBackToTheHeapAndCounts) {
  CpuPayloadHeader h = add_header();
  h.arena_bytes = 0;
  Result<DelegateHandle> handle = init(test::write_cpu_payload(h, so_));
  ASSERT_TRUE(handle.ok()) << handle.error().message();
  Delegate d(backend(), handle.get());
  uint64_t before = cpu_backend_heap_fallbacks();
  OwnedTensor a(ScalarType::Float, {2, 3}, 6), b(ScalarType::Float, {2, 3}, 6), out(ScalarType::Float, {2, 3}, 6);
  for (int i = 0; i < 6; ++i) a.at<float>()[i] = b.at<float>()[i] = 1.f;
  for (int run = 0; run < 2; ++run) ASSERT_FALSE(execute(d.handle, {&a.value, &b.value, &out.value}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out.at<float>()[i], 2.f);  // still right
  CpuDelegateStats stats = cpu_backend_stats(d.handle);
  EXPECT_EQ(stats.heap_fallbacks, 2u);
  EXPECT_EQ(stats.arena_bytes, 0u);
  EXPECT_EQ(cpu_backend_heap_fallbacks() - before, 2u);
}

// ---- Through a Method (a hand-built .pte with one "cpu" delegate) --------------------------

TEST_F(CpuBackendTest, RunsAsAMethodsDelegate) {
  CpuPayloadHeader h;
  h.entry = "scale2";
  h.inputs = {{ScalarType::Float, {4, 4}}};
  h.outputs = {{ScalarType::Float, {4, 4}}};
  std::vector<uint8_t> pte = test::one_delegate_program("cpu", test::write_cpu_payload(h, so_), {4, 4});
  BackendRegistry backends;
  ASSERT_FALSE(register_cpu_backend(backends, CpuBackendOptions{2}));
  test::LoadedMethod loaded;
  Error loaded_program = test::load_forward(pte, &backends, &loaded);
  ASSERT_FALSE(loaded_program) << loaded_program.message();
  ASSERT_TRUE(loaded.method) << loaded.error.message();
  Method* method = loaded.method.get();
  float x[16];
  for (int i = 0; i < 16; ++i) x[i] = static_cast<float>(i);
  int64_t sizes[] = {4, 4};
  for (int run = 0; run < 3; ++run) {
    ASSERT_FALSE(method->set_input(0, x, sizeof(x), ScalarType::Float, sizes));
    Error e = method->execute();
    ASSERT_FALSE(e) << e.message();
    const float* y = method->output(0).to_tensor().data_as<float>();
    for (int i = 0; i < 16; ++i) EXPECT_EQ(y[i], 2.f * i);
  }
  EXPECT_STREQ(method->instruction_name(0), "cpu");
}

TEST_F(CpuBackendTest, AMethodWithABadPayloadFailsToLoadNamingTheDelegate) {
  CpuPayloadHeader h;
  h.entry = "scale2";
  h.arch = std::string(cpu_backend_arch()) == "x86_64" ? "aarch64" : "x86_64";
  h.inputs = {{ScalarType::Float, {4, 4}}};
  h.outputs = {{ScalarType::Float, {4, 4}}};
  std::vector<uint8_t> pte = test::one_delegate_program("cpu", test::write_cpu_payload(h, so_), {4, 4});
  BackendRegistry backends;
  ASSERT_FALSE(register_cpu_backend(backends));
  test::LoadedMethod loaded;
  Error loaded_program = test::load_forward(pte, &backends, &loaded);
  ASSERT_FALSE(loaded_program) << loaded_program.message();
  ASSERT_FALSE(loaded.method);
  EXPECT_EQ(loaded.error.code(), ErrorCode::NotSupported);
  EXPECT_EQ(std::string(loaded.error.message()),
            std::string("method 'forward' delegate 0 (backend 'cpu'): init failed: ") +
                "cpu delegate 0: payload built for " +
                h.arch + ", this runtime runs on " + cpu_backend_arch());
}

// ---- Refusals at init: the header is checked before the shared object is touched -----------

void set_u32(std::vector<uint8_t>& p, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

// The payload with `edit` applied, then (when `rehash`) the shared object's checksum recomputed.
std::vector<uint8_t> edited(std::vector<uint8_t> payload, void (*edit)(std::vector<uint8_t>&, size_t so_at),
                            bool rehash = false) {
  size_t so_at = payload[test::kCpuHeaderBytesOffset] | payload[test::kCpuHeaderBytesOffset + 1] << 8;
  edit(payload, so_at);
  if (rehash) {
    uint64_t hash = test::crc32(payload.data() + so_at, payload.size() - so_at);
    for (int i = 0; i < 8; ++i) payload[test::kCpuSoCrc32Offset + i] = static_cast<uint8_t>(hash >> (8 * i));
  }
  return payload;
}

TEST_F(CpuBackendTest, SizeChecks) {
  std::vector<uint8_t> good = test::write_cpu_payload(add_header(), so_);
  size_t header_bytes = good[8] | good[9] << 8;
  ASSERT_EQ(header_bytes, 320u);  // 208, 3 specs of 24 bytes, 2 debug handles: 288, padded to 320
  ErrorCode code = ErrorCode::Ok;
  EXPECT_EQ(init_error(std::vector<uint8_t>(good.begin(), good.begin() + 100), &code, 3),
            "cpu delegate 3: payload is 100 bytes, shorter than the 208-byte header");
  EXPECT_EQ(code, ErrorCode::InvalidProgram);
  EXPECT_EQ(init_error(std::vector<uint8_t>()), "cpu delegate 0: payload is 0 bytes, shorter than the 208-byte header");
  char expected[256];
  std::snprintf(expected, sizeof(expected),
                "cpu delegate 0: so_bytes %zu does not match the %zu bytes after the header (payload %zu bytes, "
                "header_bytes 320): the payload is truncated or padded",
                so_.size(), so_.size() - 1, good.size() - 1);
  EXPECT_EQ(init_error(std::vector<uint8_t>(good.begin(), good.end() - 1)), expected);
  std::vector<uint8_t> padded = good;
  padded.push_back(0);
  EXPECT_CONTAINS(init_error(padded), "does not match the");
  EXPECT_EQ(init_error(edited(good, [](std::vector<uint8_t>& p, size_t) { set_u32(p, 8, 324); })),
            "cpu delegate 0: header_bytes 324 is not a multiple of 64");
  EXPECT_EQ(init_error(edited(good, [](std::vector<uint8_t>& p, size_t) { set_u32(p, 8, 128); })),
            "cpu delegate 0: header_bytes 128 is smaller than the 208-byte fixed header");
  std::snprintf(expected, sizeof(expected), "cpu delegate 0: header_bytes %u is beyond the payload's %zu bytes",
                0x100000u, good.size());
  EXPECT_EQ(init_error(edited(good, [](std::vector<uint8_t>& p, size_t) { set_u32(p, 8, 0x100000); })), expected);
}

TEST_F(CpuBackendTest, MagicVersionsAndArch) {
  std::vector<uint8_t> good = test::write_cpu_payload(add_header(), so_);
  ErrorCode code = ErrorCode::Ok;
  EXPECT_EQ(init_error(edited(good, [](std::vector<uint8_t>& p, size_t) { p[4] = 'G'; }), &code),
            "cpu delegate 0: payload does not start with the magic \"ETMLCPU1\" (got \"ETMLGPU1\")");
  EXPECT_EQ(code, ErrorCode::InvalidProgram);
  EXPECT_EQ(init_error(edited(good, [](std::vector<uint8_t>& p, size_t) { p[0] = 0x7f; p[1] = 0; })),
            "cpu delegate 0: payload does not start with the magic \"ETMLCPU1\" (got \"\\x7f\\x00MLCPU1\")");
  EXPECT_EQ(init_error(edited(good, [](std::vector<uint8_t>& p, size_t) { p[12] = 2; }), &code),
            "cpu delegate 0: payload format_version 2 is not supported (this runtime reads version 1)");
  EXPECT_EQ(code, ErrorCode::NotSupported);
  CpuPayloadHeader h = add_header();
  h.abi_version = 2;
  EXPECT_EQ(init_error(test::write_cpu_payload(h, so_), &code),
            "cpu delegate 0: payload abi_version 2 is not supported (this runtime calls abi_version 1)");
  EXPECT_EQ(code, ErrorCode::NotSupported);

  std::string here = cpu_backend_arch();
  h = add_header();
  h.arch = here == "x86_64" ? "aarch64" : "x86_64";
  EXPECT_EQ(init_error(test::write_cpu_payload(h, so_), &code),
            "cpu delegate 0: payload built for " + h.arch + ", this runtime runs on " + here);
  EXPECT_EQ(code, ErrorCode::NotSupported);
  h.arch = here + "_v2";
  EXPECT_EQ(init_error(test::write_cpu_payload(h, so_)),
            "cpu delegate 0: payload built for " + h.arch + ", this runtime runs on " + here);
  h.arch = "";  // the writer's default is this machine: the field is zeroed below
  std::vector<uint8_t> no_arch =
      edited(test::write_cpu_payload(h, so_), [](std::vector<uint8_t>& p, size_t) { std::memset(&p[16], 0, 16); });
  EXPECT_EQ(init_error(no_arch, &code), "cpu delegate 0: payload names no arch (this runtime runs on " + here + ")");
  EXPECT_EQ(code, ErrorCode::InvalidProgram);
}

TEST_F(CpuBackendTest, UnknownFeatureBitsAreRefused) {
  CpuPayloadHeader h = add_header();
  h.cpu_features = (uint64_t{1} << 12) | 1;
  ErrorCode code = ErrorCode::Ok;
  EXPECT_EQ(init_error(test::write_cpu_payload(h, so_), &code),
            "cpu delegate 0: payload needs CPU feature bits 0x1000 that this runtime does not know");
  EXPECT_EQ(code, ErrorCode::NotSupported);
  h.cpu_features = cpu_backend_supported_features();  // everything this CPU has: accepted
  Result<DelegateHandle> handle = init(test::write_cpu_payload(h, so_));
  ASSERT_TRUE(handle.ok()) << handle.error().message();
  backend()->destroy(handle.get());
}

TEST_F(CpuBackendTest, MissingFeaturesAreNamed) {
  static const char* const kNames[] = {"sse4.2", "avx",      "avx2",     "fma",      "f16c",
                                       "avx512f", "avx512dq", "avx512bw", "avx512vl", "bmi2"};
  uint64_t missing = ~cpu_backend_supported_features() & ((uint64_t{1} << 10) - 1);
  if (missing == 0)
    GTEST_SKIP() << "this CPU has all ten features PAYLOAD.md names, so no payload can need one it lacks "
                    "(the arch mismatch is tested in MagicVersionsAndArch)";
  std::string names;
  int count = 0;
  for (int bit = 0; bit < 10; ++bit) {
    if (!(missing >> bit & 1)) continue;
    names += std::string(count++ ? ", " : "") + kNames[bit];
  }
  CpuPayloadHeader h = add_header();
  h.cpu_features = missing | cpu_backend_supported_features();
  ErrorCode code = ErrorCode::Ok;
  EXPECT_EQ(init_error(test::write_cpu_payload(h, so_), &code),
            "cpu delegate 0: payload needs CPU feature" + std::string(count == 1 ? "" : "s") + " " + names +
                " that this CPU lacks");
  EXPECT_EQ(code, ErrorCode::NotSupported);
}

TEST_F(CpuBackendTest, ACorruptSharedObjectFailsTheChecksum) {
  std::vector<uint8_t> good = test::write_cpu_payload(add_header(), so_);
  ErrorCode code = ErrorCode::Ok;
  std::string message = init_error(
      edited(good, [](std::vector<uint8_t>& p, size_t so_at) { p[so_at + (p.size() - so_at) / 2] ^= 0x20; }), &code);
  EXPECT_EQ(message.rfind("cpu delegate 0: payload checksum mismatch: the shared object is corrupt (CRC-32 of its ",
                          0),
            0u)
      << message;
  EXPECT_EQ(code, ErrorCode::InvalidProgram);
  std::string header =
      init_error(edited(good, [](std::vector<uint8_t>& p, size_t) { p[test::kCpuSoCrc32Offset] ^= 1; }));
  EXPECT_CONTAINS(header, "payload checksum mismatch: the shared object is corrupt");
  // The high 32 bits of the field are zero.
  std::string high =
      init_error(edited(good, [](std::vector<uint8_t>& p, size_t) { p[test::kCpuSoCrc32Offset + 4] = 1; }));
  EXPECT_CONTAINS(high, "payload checksum mismatch: the shared object is corrupt");
  // The writer's CRC-32 is zlib's (the compiler writes zlib.crc32).
  const char* check = "123456789";
  EXPECT_EQ(test::crc32(reinterpret_cast<const uint8_t*>(check), 9), 0xCBF43926u);
}

TEST_F(CpuBackendTest, ACorruptElfWithAGoodChecksumIsRefusedWithoutACrash) {
  std::vector<uint8_t> good = test::write_cpu_payload(add_header(), so_);
  ErrorCode code = ErrorCode::Ok;
  EXPECT_EQ(init_error(edited(good, [](std::vector<uint8_t>& p, size_t so_at) { p[so_at + 1] = 'X'; }, true), &code),
            "cpu delegate 0: the shared object is not an ELF file (it starts with \"\\x7fXLF\")");
  EXPECT_EQ(code, ErrorCode::InvalidProgram);
  EXPECT_EQ(init_error(edited(good, [](std::vector<uint8_t>& p, size_t so_at) { p[so_at + 4] = 1; }, true)),
            "cpu delegate 0: the shared object is ELF class 1, not 64-bit (2)");
  std::string machine = init_error(
      edited(good, [](std::vector<uint8_t>& p, size_t so_at) { p[so_at + 18] = 40; p[so_at + 19] = 0; }, true), &code);
  EXPECT_EQ(machine, std::string("cpu delegate 0: the shared object is for ELF machine 40, this runtime runs on ") +
                         cpu_backend_arch() + (std::string(cpu_backend_arch()) == "x86_64" ? " (machine 62)"
                                                                                             : " (machine 183)"));
  EXPECT_EQ(code, ErrorCode::NotSupported);
  EXPECT_EQ(init_error(edited(good, [](std::vector<uint8_t>& p, size_t so_at) { p[so_at + 16] = 2; }, true)),
            "cpu delegate 0: the ELF file is not a shared object (e_type 2, expected ET_DYN 3)");
  // Program headers that point past the end, and the shared object cut short (the header's
  // sizes and checksum say so): glibc's dlopen would map past the end of the file and fault.
  std::string phoff = init_error(edited(
      good,
      [](std::vector<uint8_t>& p, size_t so_at) {
        for (int i = 0; i < 7; ++i) p[so_at + 32 + i] = 0x7f;  // e_phoff
      },
      true), &code);
  EXPECT_EQ(phoff.rfind("cpu delegate 0: the shared object's program headers (", 0), 0u) << phoff;
  EXPECT_CONTAINS(phoff, "lie outside its");
  EXPECT_EQ(code, ErrorCode::InvalidProgram);
  // Cut inside the last loadable segment (what follows it, like debug info, is not mapped).
  Elf64_Ehdr elf;
  std::memcpy(&elf, so_.data(), sizeof(elf));
  uint64_t loaded_end = 0;
  for (uint16_t i = 0; i < elf.e_phnum; ++i) {
    Elf64_Phdr segment;
    std::memcpy(&segment, so_.data() + elf.e_phoff + i * sizeof(Elf64_Phdr), sizeof(segment));
    if (segment.p_type == PT_LOAD) loaded_end = std::max<uint64_t>(loaded_end, segment.p_offset + segment.p_filesz);
  }
  ASSERT_GT(loaded_end, 64u);
  std::vector<uint8_t> cut(so_.begin(), so_.begin() + static_cast<std::ptrdiff_t>(loaded_end - 8));
  std::string truncated = init_error(test::write_cpu_payload(add_header(), cut), &code);
  EXPECT_EQ(truncated.rfind("cpu delegate 0: the shared object's segment ", 0), 0u) << truncated;
  EXPECT_CONTAINS(truncated, "it is truncated or corrupt");
  EXPECT_EQ(code, ErrorCode::InvalidProgram);
  // What the checks here let through, dlopen refuses: its message is passed on.
  std::string version = init_error(
      edited(good, [](std::vector<uint8_t>& p, size_t so_at) { p[so_at + 6] = 0; }, true), &code);  // EI_VERSION
  EXPECT_EQ(version.rfind("cpu delegate 0: cannot load the shared object: ", 0), 0u) << version;
  EXPECT_CONTAINS(version, "ELF file version");
  EXPECT_EQ(code, ErrorCode::InvalidProgram);
}

TEST_F(CpuBackendTest, SpecsMustFitTheHeader) {
  std::vector<uint8_t> good = test::write_cpu_payload(add_header(), so_);
  // 200 inputs: the output's record is read as input 2, the debug handles {7, 8} as input 3 of
  // dtype 7 (float64) and rank 8, which runs past header_bytes.
  EXPECT_EQ(init_error(edited(good, [](std::vector<uint8_t>& p, size_t) { set_u32(p, 64, 200); })),
            "cpu delegate 0: tensor spec of input 3 does not fit in header_bytes 320");
  EXPECT_EQ(init_error(edited(good, [](std::vector<uint8_t>& p, size_t) { set_u32(p, 72, 20); })),
            "cpu delegate 0: 20 debug handles do not fit in header_bytes 320");
  EXPECT_EQ(init_error(edited(good, [](std::vector<uint8_t>& p, size_t) { set_u32(p, 208, 9); })),
            "cpu delegate 0: tensor spec of input 0 has unknown dtype 9");
  EXPECT_EQ(init_error(edited(good, [](std::vector<uint8_t>& p, size_t) { set_u32(p, 212, 17); })),
            "cpu delegate 0: tensor spec of input 0 has rank 17 (0 to 16)");
  EXPECT_EQ(init_error(edited(good,
                              [](std::vector<uint8_t>& p, size_t) {
                                set_u32(p, 216, 0xfffffffe);  // size -2
                                set_u32(p, 220, 0xffffffff);
                              })),
            "cpu delegate 0: tensor spec of input 0 has size -2 for dim 0 (-1: dynamic)");
  CpuPayloadHeader h = scale_header();
  h.shapes_entry = "";
  EXPECT_EQ(init_error(test::write_cpu_payload(h, so_)),
            "cpu delegate 0: an output has dynamic dims (-1) but the header names no shapes_entry");
  h = add_header();
  h.entry = "";
  EXPECT_EQ(init_error(test::write_cpu_payload(h, so_)), "cpu delegate 0: the header names no entry point");
}

TEST_F(CpuBackendTest, MissingSymbolsAreNamed) {
  CpuPayloadHeader h = add_header();
  h.entry = "no_such_entry";
  ErrorCode code = ErrorCode::Ok;
  EXPECT_EQ(init_error(test::write_cpu_payload(h, so_), &code),
            "cpu delegate 0: the shared object does not export the entry point 'no_such_entry'");
  EXPECT_EQ(code, ErrorCode::InvalidProgram);
  h = scale_header();
  h.shapes_entry = "no_shapes";
  EXPECT_EQ(init_error(test::write_cpu_payload(h, so_)),
            "cpu delegate 0: the shared object does not export the shapes entry point 'no_shapes'");
  // fixture_alloc is in the library but not exported (hidden visibility).
  h = add_header();
  h.entry = "fixture_alloc";
  EXPECT_EQ(init_error(test::write_cpu_payload(h, so_)),
            "cpu delegate 0: the shared object does not export the entry point 'fixture_alloc'");
  std::vector<uint8_t> no_counter = test::cpu_fixture_bytes(CpuFixture::NoHeapFallbacks);
  ASSERT_FALSE(no_counter.empty());
  EXPECT_EQ(init_error(test::write_cpu_payload(add_header(), no_counter)),
            "cpu delegate 0: the shared object does not export 'etmlir_cpu_heap_fallbacks' (required by "
            "abi_version 1)");
}

TEST_F(CpuBackendTest, TheSharedObjectsAbiMustMatchTheHeader) {
  std::vector<uint8_t> abi2 = test::cpu_fixture_bytes(CpuFixture::Abi2);
  ASSERT_FALSE(abi2.empty());
  ErrorCode code = ErrorCode::Ok;
  EXPECT_EQ(init_error(test::write_cpu_payload(add_header(), abi2), &code),
            "cpu delegate 0: the shared object's etmlir_cpu_payload_abi() returns 2; the header says 1");
  EXPECT_EQ(code, ErrorCode::InvalidProgram);
}

// ---- Argument checks at execute -------------------------------------------------------------

TEST_F(CpuBackendTest, ArgumentsAreCheckedAgainstTheSpecs) {
  Result<DelegateHandle> handle = init(test::write_cpu_payload(add_header(), so_), 1, 2);
  ASSERT_TRUE(handle.ok()) << handle.error().message();
  Delegate d(backend(), handle.get());
  OwnedTensor a(ScalarType::Float, {2, 3}, 6), b(ScalarType::Float, {2, 3}, 6), out(ScalarType::Float, {2, 3}, 6);
  Error count = execute(d.handle, {&a.value, &b.value});
  EXPECT_STREQ(count.message(),
               "cpu delegate 2: the call passes 2 arguments; the payload takes 3 (2 inputs, then 1 output)");
  EValue seven;
  seven.tag = Tag::Int;
  seven.payload.as_int = 7;
  EXPECT_STREQ(execute(d.handle, {&a.value, &seven, &out.value}).message(),
               "cpu delegate 2: argument 1 (input 1) is a int, not a tensor");
  OwnedTensor ints(ScalarType::Int64, {2, 3}, 6);
  Error dtype = execute(d.handle, {&a.value, &ints.value, &out.value});
  EXPECT_EQ(dtype.code(), ErrorCode::InvalidArgument);
  EXPECT_STREQ(dtype.message(), "cpu delegate 2: argument 1 (input 1): expected float32[2, 3], got int64[2, 3]");
  OwnedTensor flat(ScalarType::Float, {6}, 6);
  EXPECT_STREQ(execute(d.handle, {&flat.value, &b.value, &out.value}).message(),
               "cpu delegate 2: argument 0 (input 0): expected float32[2, 3], got float32[6]");
  OwnedTensor wide(ScalarType::Float, {2, 4}, 8);
  EXPECT_STREQ(execute(d.handle, {&a.value, &wide.value, &out.value}).message(),
               "cpu delegate 2: argument 1 (input 1): expected float32[2, 3], got float32[2, 4]");
  EXPECT_STREQ(execute(d.handle, {&a.value, &b.value, &ints.value}).message(),
               "cpu delegate 2: argument 2 (output 0): expected float32[2, 3], got int64[2, 3]");
  // A static live-out of other sizes cannot be resized to the payload's.
  Error resize = execute(d.handle, {&a.value, &b.value, &wide.value});
  EXPECT_EQ(resize.code(), ErrorCode::OutOfBounds);
  EXPECT_STREQ(resize.message(),
               "cpu delegate 2: cannot resize output 0 float32[2, 4]: dim 1 would be 3, static size is 4");
  // A live-out whose memory is too small.
  OwnedTensor small(ScalarType::Float, {2, 3}, 2);
  Error memory = execute(d.handle, {&a.value, &b.value, &small.value});
  EXPECT_EQ(memory.code(), ErrorCode::OutOfMemory);
  EXPECT_STREQ(memory.message(), "cpu delegate 2: output 0 float32[2, 3] has 8 bytes of memory; it needs 24");
  // Still usable.
  EXPECT_FALSE(execute(d.handle, {&a.value, &b.value, &out.value}));
  EXPECT_EQ(cpu_backend_stats(d.handle).executes, 1u);
}

TEST_F(CpuBackendTest, DynamicSizesAreCheckedToo) {
  Result<DelegateHandle> handle = init(test::write_cpu_payload(scale_header(), so_));
  ASSERT_TRUE(handle.ok()) << handle.error().message();
  Delegate d(backend(), handle.get());
  OwnedTensor x(ScalarType::Float, {9, 4}, 36), out(ScalarType::Float, {8, 4}, 32, {8, 4});
  Error beyond = execute(d.handle, {&x.value, &out.value});
  EXPECT_EQ(beyond.code(), ErrorCode::OutOfBounds);
  EXPECT_STREQ(beyond.message(),
               "cpu delegate 0: cannot resize output 0 float32[8, 4]: dim 0 would be 9, planned upper bound is 8");
  OwnedTensor x5(ScalarType::Float, {9, 5}, 45);
  EXPECT_STREQ(execute(d.handle, {&x5.value, &out.value}).message(),
               "cpu delegate 0: argument 0 (input 0): expected float32[?, 4], got float32[9, 5]");

  CpuPayloadHeader h = scale_header();
  h.shapes_entry = "bad_shapes";
  Result<DelegateHandle> bad = init(test::write_cpu_payload(h, so_));
  ASSERT_TRUE(bad.ok()) << bad.error().message();
  Delegate b(backend(), bad.get());
  OwnedTensor x3(ScalarType::Float, {3, 4}, 12);
  Error e = execute(b.handle, {&x3.value, &out.value});
  EXPECT_EQ(e.code(), ErrorCode::KernelFailed);
  EXPECT_STREQ(e.message(),
               "cpu delegate 0: the shapes entry gave output 0 size 5 for dim 1; its spec is float32[?, 4]");
}

// ---- Lifecycle ------------------------------------------------------------------------------

// Each delegate loads its own copy of the library: its own globals, its own arena.
TEST_F(CpuBackendTest, InstancesOfOnePayloadShareNothing) {
  std::vector<uint8_t> payload = test::write_cpu_payload(where_header(), so_);
  for (int round = 0; round < 2; ++round) {
    std::vector<std::unique_ptr<Delegate>> delegates;
    std::set<int64_t> arenas, globals;
    for (int i = 0; i < 6; ++i) {
      Result<DelegateHandle> handle = init(payload);
      ASSERT_TRUE(handle.ok()) << handle.error().message();
      delegates.push_back(std::make_unique<Delegate>(backend(), handle.get()));
      // Destroying one in the middle frees its fd number and library name for the next.
      if (i == 2) delegates.erase(delegates.begin() + 1);
    }
    for (auto& d : delegates) {
      OwnedTensor out(ScalarType::Int64, {2}, 2);
      ASSERT_FALSE(execute(d->handle, {&out.value}));
      EXPECT_NE(out.at<int64_t>()[0], 0);
      arenas.insert(out.at<int64_t>()[0]);
      globals.insert(out.at<int64_t>()[1]);
    }
    EXPECT_EQ(arenas.size(), delegates.size()) << "round " << round;
    EXPECT_EQ(globals.size(), delegates.size()) << "round " << round;
  }
}

TEST_F(CpuBackendTest, InitAndDestroyTwice) {
  std::vector<uint8_t> payload = test::write_cpu_payload(add_header(), so_);
  for (int threads : {1, 2, 1, 2}) {
    Result<DelegateHandle> handle = init(payload, threads);
    ASSERT_TRUE(handle.ok()) << handle.error().message();
    OwnedTensor a(ScalarType::Float, {2, 3}, 6), b(ScalarType::Float, {2, 3}, 6), out(ScalarType::Float, {2, 3}, 6);
    a.at<float>()[5] = 1.f;
    b.at<float>()[5] = 2.f;
    ASSERT_FALSE(execute(handle.get(), {&a.value, &b.value, &out.value}, threads));
    EXPECT_EQ(out.at<float>()[5], 3.f);
    EXPECT_EQ(cpu_backend_stats(handle.get()).executes, 1u);  // a fresh delegate
    backend(threads)->destroy(handle.get());
  }
}

// Without memfd_create (a seccomp filter makes it fail with ENOSYS, in a
// child process), the shared object goes through a file in $TMPDIR, which is
// unlinked right after dlopen.
TEST_F(CpuBackendTest, WithoutMemfdCreateATemporaryFileIsUsedAndRemoved) {
  std::vector<uint8_t> payload = test::write_cpu_payload(add_header(), so_);
  char dir[] = "/tmp/etmlir-cpu-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(pipe_fds[0]);
    auto finish = [&](int status, const char* message) {
      if (message != nullptr) (void)!write(pipe_fds[1], message, std::strlen(message));
      _exit(status);
    };
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_memfd_create, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog program{static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])), filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0)
      finish(77, "cannot install a seccomp filter here");
    if (syscall(__NR_memfd_create, "probe", 0) >= 0 || errno != ENOSYS) finish(1, "memfd_create still works");
    setenv("TMPDIR", dir, 1);
    Result<DelegateHandle> handle = init(payload);
    if (!handle.ok()) finish(2, handle.error().message());
    OwnedTensor a(ScalarType::Float, {2, 3}, 6), b(ScalarType::Float, {2, 3}, 6), out(ScalarType::Float, {2, 3}, 6);
    a.at<float>()[4] = 1.5f;
    b.at<float>()[4] = 2.f;
    Error e = execute(handle.get(), {&a.value, &b.value, &out.value});
    if (e) finish(3, e.message());
    if (out.at<float>()[4] != 3.5f) finish(4, "wrong result");
    backend()->destroy(handle.get());
    finish(0, nullptr);
  }
  close(pipe_fds[1]);
  char message[512] = {};
  ssize_t n = read(pipe_fds[0], message, sizeof(message) - 1);
  (void)n;
  close(pipe_fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  std::vector<std::string> left;
  std::string listing = std::string("ls -A ") + dir;
  if (FILE* ls = popen(listing.c_str(), "r")) {
    char name[256];
    while (std::fgets(name, sizeof(name), ls)) left.push_back(name);
    pclose(ls);
  }
  rmdir(dir);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died: status " << status;
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << message;
  ASSERT_EQ(WEXITSTATUS(status), 0) << message;
  EXPECT_TRUE(left.empty()) << "left in " << dir << ": " << left.front();
}

}  // namespace
}  // namespace etmlir
