// The "cpu" backend (runtime/backends/cpu): real payloads built here, the
// shared objects of fixtures/cpu_payload_fixture.c behind the shared payload
// header (test::write_cpu_payload). Results (static and dynamic outputs, one
// and two threads, through a Method and called directly), every refusal at
// init with its message, argument checks at execute, the method allocator
// (sized by method_allocator_bytes, which init never exceeds), and the
// lifecycle (each delegate its own copy of the library and its own arena).
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
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <atomic>
#include <set>
#include <thread>
#include <string>
#include <vector>

#include "cpu_backend.h"
#include "etmlir/runtime/backend.h"
#include "etmlir/runtime/payload_header.h"
#include "etmlir/runtime/data_loader.h"
#include "etmlir/runtime/event_tracer.h"
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
      Error e = register_cpu_backend(*registry, BackendOptions{num_threads});
      EXPECT_FALSE(e) << e.message();
    }
    return registry->find("cpu");
  }

  // init() on `payload` (copied, so that nothing reads the caller's vector after init), with a
  // method allocator of what method_allocator_bytes() asks for (1 MiB when it refuses the
  // payload), which init() must not exceed.
  Result<DelegateHandle> init(const std::vector<uint8_t>& payload, int num_threads = 1, uint32_t index = 0) {
    payloads_.push_back(std::make_unique<test::AlignedBuffer>(payload.size()));
    if (!payload.empty()) std::memcpy(payloads_.back()->data(), payload.data(), payload.size());
    Span<const uint8_t> bytes(payloads_.back()->data(), payload.size());
    BackendInitContext sizing{nullptr, "forward", index, nullptr, nullptr};
    Result<size_t> needed = backend(num_threads)->method_allocator_bytes(sizing, bytes, Span<const CompileSpec>());
    size_t size = needed.ok() ? needed.get() : size_t{1} << 20;
    memory_.push_back(std::make_unique<test::AlignedBuffer>(size));
    allocators_.push_back(std::make_unique<MemoryAllocator>(memory_.back()->data(), size));
    BackendInitContext context{allocators_.back().get(), "forward", index, nullptr, nullptr, test::allow_native_code()};
    Result<DelegateHandle> handle = backend(num_threads)->init(context, bytes, Span<const CompileSpec>());
    if (handle.ok()) {
      EXPECT_TRUE(needed.ok()) << "init accepts what method_allocator_bytes refuses: " << needed.error().message();
      EXPECT_LE(allocators_.back()->used(), size) << "method_allocator_bytes() is not an upper bound";
    }
    return handle;
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

  // Runs the chunks payload until `threads` threads have run a chunk, for at most ten seconds: the
  // threads that did. (A worker not scheduled when a loop starts, just started and queued behind the
  // spinning caller on its core or its core busy, has its chunk run by the caller, so one run may use
  // fewer threads, and on two cores three threads rarely all run at once.)
  std::set<int64_t> threads_taking_part(DelegateHandle handle, int threads) {
    std::set<int64_t> ran;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (ran.size() < static_cast<size_t>(threads) && std::chrono::steady_clock::now() < deadline) {
      OwnedTensor begins(ScalarType::Int64, {16}, 16), ids(ScalarType::Int64, {16}, 16);
      Error e = execute(handle, {&begins.value, &ids.value}, threads);
      EXPECT_FALSE(e) << e.message();
      if (e) break;
      ran.insert(ids.at<int64_t>(), ids.at<int64_t>() + 16);
    }
    return ran;
  }

  std::vector<uint8_t> so_;
  std::map<int, std::unique_ptr<BackendRegistry>> registries_;
  std::vector<std::unique_ptr<test::AlignedBuffer>> payloads_;
  std::vector<std::unique_ptr<test::AlignedBuffer>> memory_;
  std::vector<std::unique_ptr<MemoryAllocator>> allocators_;
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
  Error again = register_cpu_backend(registry, BackendOptions{2});
  EXPECT_EQ(again.code(), ErrorCode::InvalidArgument);
  EXPECT_STREQ(again.message(), "backend 'cpu' is already registered");
  BackendRegistry other;
  Error zero = register_cpu_backend(other, BackendOptions{0});
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
  EXPECT_EQ(cpu_backend_supported_features(), host_cpu_features());
}

TEST(CpuRegistration, CountsHeapFallbacksAsAGenericCounter) {
  BackendRegistry registry;
  ASSERT_FALSE(register_cpu_backend(registry));
  EXPECT_EQ(registry.find("cpu")->counter("heap_fallbacks"), cpu_backend_heap_fallbacks());
  EXPECT_EQ(registry.find("cpu")->counter("no_such_counter"), 0u);
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

// A failed run-time check inside the payload (et-cpu-report-failures) is an error naming the
// check, with the edge op's handle in the context; the arena is reset and the delegate works again.
// With a tracer, each region is one DelegateOp event, and a failure closes the open one.
TEST_F(CpuBackendTest, AFailedCheckIsAnErrorWithItsHandleAndRegionsAreTraced) {
  CpuPayloadHeader h;
  h.entry = "checked";
  h.shapes_entry = "scale2_shapes";
  h.inputs = {{ScalarType::Float, {-1, 4}}};
  h.outputs = {{ScalarType::Float, {-1, 4}}};
  h.arena_bytes = 4096;
  Result<DelegateHandle> handle = init(test::write_cpu_payload(h, so_));
  ASSERT_TRUE(handle.ok()) << handle.error().message();
  Delegate d(backend(), handle.get());
  OwnedTensor out(ScalarType::Float, {8, 4}, 32, {8, 4});
  TraceEvent events[16];
  EventTracer tracer{Span<TraceEvent>(events, 16)};
  for (int round = 0; round < 3; ++round) {
    OwnedTensor bad(ScalarType::Float, {5, 4}, 20);
    std::vector<EValue*> args = {&bad.value, &out.value};
    BackendExecuteContext context{nullptr, 0};
    context.tracer = round == 2 ? &tracer : nullptr;
    context.delegate_index = 3;
    Error e = backend()->execute(context, d.handle, Span<EValue*>(args.data(), args.size()));
    EXPECT_EQ(e.code(), ErrorCode::KernelFailed);
    EXPECT_STREQ(e.message(), "cpu delegate 0: rows above 3");
    EXPECT_EQ(context.failed_debug_handle, 12u);
  }
  // Regions 1 and 2 of the failed traced run, both closed.
  ASSERT_EQ(tracer.events().size(), 2u);
  EXPECT_EQ(events[0].payload_id, 1u);
  EXPECT_EQ(events[0].debug_handle, 11u);
  EXPECT_EQ(events[1].payload_id, 2u);
  EXPECT_EQ(events[1].debug_handle, 12u);
  for (const TraceEvent& event : tracer.events()) {
    EXPECT_EQ(event.kind, TraceEventKind::DelegateOp);
    EXPECT_EQ(event.delegate, 3u);
    EXPECT_GE(event.end_ns, event.start_ns);
    EXPECT_NE(event.end_ns, 0u);
  }
  OwnedTensor x(ScalarType::Float, {3, 4}, 12);
  for (int i = 0; i < 12; ++i) x.at<float>()[i] = static_cast<float>(i);
  tracer.reset();
  std::vector<EValue*> args = {&x.value, &out.value};
  BackendExecuteContext context{nullptr, 0};
  context.tracer = &tracer;
  ASSERT_FALSE(backend()->execute(context, d.handle, Span<EValue*>(args.data(), args.size())));
  for (int i = 0; i < 12; ++i) EXPECT_EQ(out.at<float>()[i], 2.f * static_cast<float>(i));
  EXPECT_EQ(tracer.events().size(), 2u);
  EXPECT_EQ(cpu_backend_stats(d.handle).heap_fallbacks, 0u);  // the failed runs' scratch was given back
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
  std::set<int64_t> pool = threads_taking_part(d.handle, threads);
  EXPECT_EQ(pool.size(), static_cast<size_t>(threads));
  for (int run = 0; run < 50; ++run) {
    Error e = execute(d.handle, {&begins.value, &ids.value}, threads);
    ASSERT_FALSE(e) << e.message();
    std::set<int64_t> starts(begins.at<int64_t>(), begins.at<int64_t>() + 16);
    std::set<int64_t> workers(ids.at<int64_t>(), ids.at<int64_t>() + 16);
    std::set<int64_t> expected;
    // Balanced chunks, the longer ones first: 16 on 3 threads is 6 + 5 + 5.
    for (int c = 0; c < threads; ++c) expected.insert(c * (16 / threads) + std::min(c, 16 % threads));
    ASSERT_EQ(starts, expected) << "run " << run;
    ASSERT_EQ(ids.at<int64_t>()[0], self) << "the caller runs chunk 0";
    for (int64_t id : workers) ASSERT_EQ(pool.count(id), 1u) << "run " << run << ": a thread of the pool";
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

// The delegates of one backend instance share its pool: the same workers run
// both delegates' loops. The last destroy joins the workers and the next init
// starts new ones, which must not mistake the old pool's last loop for a new
// one. Two threads executing at once each get every chunk done (one of them
// runs its loops serially while the other holds the pool).
TEST_F(CpuBackendTest, DelegatesShareOnePoolThatRestartsAfterTheLast) {
  constexpr int kThreads = 3;
  std::vector<uint8_t> payload = test::write_cpu_payload(chunks_header(), so_);
  auto worker_ids = [&](DelegateHandle handle) { return threads_taking_part(handle, kThreads); };
  for (int round = 0; round < 3; ++round) {
    Result<DelegateHandle> first = init(payload, kThreads), second = init(payload, kThreads, 1);
    ASSERT_TRUE(first.ok()) << first.error().message();
    ASSERT_TRUE(second.ok()) << second.error().message();
    Delegate a(backend(kThreads), first.get()), b(backend(kThreads), second.get());
    std::set<int64_t> from_a = worker_ids(a.handle), from_b = worker_ids(b.handle);
    EXPECT_EQ(from_a.size(), static_cast<size_t>(kThreads)) << "round " << round;
    EXPECT_EQ(from_a, from_b) << "round " << round << ": one pool, the same workers";

    std::atomic<int> complete{0};
    auto hammer = [&](DelegateHandle handle) {
      for (int run = 0; run < 200; ++run) {
        OwnedTensor begins(ScalarType::Int64, {16}, 16), ids(ScalarType::Int64, {16}, 16);
        if (execute(handle, {&begins.value, &ids.value}, kThreads)) return;
        std::set<int64_t> starts(begins.at<int64_t>(), begins.at<int64_t>() + 16);
        if (!starts.count(0)) return;
      }
      complete.fetch_add(1);
    };
    std::thread other(hammer, b.handle);
    hammer(a.handle);
    other.join();
    EXPECT_EQ(complete.load(), 2) << "round " << round;
  }
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
  EXPECT_EQ(backend()->counter("heap_fallbacks") - before, 2u);
}

// ---- Through a Method (a hand-built .pte with one "cpu" delegate) --------------------------

TEST_F(CpuBackendTest, RunsAsAMethodsDelegate) {
  CpuPayloadHeader h;
  h.entry = "scale2";
  h.inputs = {{ScalarType::Float, {4, 4}}};
  h.outputs = {{ScalarType::Float, {4, 4}}};
  std::vector<uint8_t> pte = test::one_delegate_program("cpu", test::write_cpu_payload(h, so_), {4, 4});
  BackendRegistry backends;
  ASSERT_FALSE(register_cpu_backend(backends, BackendOptions{2}));
  test::LoadedMethod loaded;
  Error loaded_program = test::load_forward(pte, &backends, &loaded, test::allow_native_code());
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
  Error loaded_program = test::load_forward(pte, &backends, &loaded, test::allow_native_code());
  ASSERT_FALSE(loaded_program) << loaded_program.message();
  ASSERT_FALSE(loaded.method);
  EXPECT_EQ(loaded.error.code(), ErrorCode::NotSupported);
  EXPECT_EQ(std::string(loaded.error.message()),
            std::string("method 'forward' delegate 0 (backend 'cpu'): init failed: ") +
                "cpu delegate 0: payload built for " +
                h.arch + ", this runtime runs on " + cpu_backend_arch());
}

// ---- Refusals at init: the header is checked before the shared object is touched -----------

// The fixture shared object with `edit` applied (a payload written around it has a good checksum).
std::vector<uint8_t> edited_so(std::vector<uint8_t> so, void (*edit)(std::vector<uint8_t>&)) {
  edit(so);
  return so;
}

TEST_F(CpuBackendTest, ThePayloadsFraming) {
  std::vector<uint8_t> good = test::write_cpu_payload(add_header(), so_);
  size_t body_at = test::payload_body_offset(good);
  ASSERT_EQ(body_at % 64, 0u);
  ErrorCode code = ErrorCode::Ok;
  EXPECT_EQ(init_error(std::vector<uint8_t>(good.begin(), good.begin() + 10), &code, 3),
            "cpu delegate 3: not an etmlir payload header (a payload from before format 1?): rebuild the .pte (the "
            "payload is only 10 bytes)");
  EXPECT_EQ(code, ErrorCode::InvalidProgram);
  EXPECT_CONTAINS(init_error(std::vector<uint8_t>()), "cpu delegate 0: not an etmlir payload header");
  char expected[256];
  std::snprintf(expected, sizeof(expected),
                "cpu delegate 0: payload body_offset %zu + body_size %zu does not match the payload's %zu bytes: it "
                "is truncated or padded",
                body_at, so_.size(), good.size() - 1);
  EXPECT_EQ(init_error(std::vector<uint8_t>(good.begin(), good.end() - 1)), expected);
  std::vector<uint8_t> padded = good;
  padded.push_back(0);
  EXPECT_CONTAINS(init_error(padded), "it is truncated or padded");
  test::PayloadFields f = test::cpu_payload_fields(add_header());
  f.body_offset_override = 100;
  EXPECT_EQ(init_error(test::write_payload(f, so_)), "cpu delegate 0: payload body_offset 100 is not a multiple of 64");
}

TEST_F(CpuBackendTest, APayloadFromBeforeTheSharedHeaderSaysRebuild) {
  // The format-1 cpu header ("ETMLCPU1", then header_bytes, format_version, arch, ...) and its shared object.
  std::vector<uint8_t> old(320, 0);
  std::memcpy(old.data(), "ETMLCPU1", 8);
  old[8] = 0x40;
  old[9] = 0x01;
  old[12] = 1;
  std::memcpy(&old[16], "x86_64", 6);
  old.insert(old.end(), so_.begin(), so_.end());
  ErrorCode code = ErrorCode::Ok;
  EXPECT_EQ(init_error(old, &code, 3),
            "cpu delegate 3: a cpu payload in the format from before the shared payload header (magic "
            "\"ETMLCPU1\"): rebuild the .pte with this etmlir");
  EXPECT_EQ(code, ErrorCode::NotSupported);
}

TEST_F(CpuBackendTest, VersionsFormatBackendAndArch) {
  ErrorCode code = ErrorCode::Ok;
  test::PayloadFields f = test::cpu_payload_fields(add_header());
  f.format_version = 2;
  EXPECT_EQ(init_error(test::write_payload(f, so_), &code),
            "cpu delegate 0: payload header format_version 2 is not supported (this runtime reads version 1)");
  EXPECT_EQ(code, ErrorCode::NotSupported);
  f = test::cpu_payload_fields(add_header());
  f.backend_id = "nested";
  EXPECT_EQ(init_error(test::write_payload(f, so_), &code), "cpu delegate 0: payload is for backend 'nested', not 'cpu'");
  EXPECT_EQ(code, ErrorCode::InvalidProgram);
  f = test::cpu_payload_fields(add_header());
  f.body_format = "pte";
  EXPECT_EQ(init_error(test::write_payload(f, so_)),
            "cpu delegate 0: payload body_format is 'pte', not 'elf-shared-object'");
  CpuPayloadHeader h = add_header();
  h.abi_version = 2;
  EXPECT_EQ(init_error(test::write_cpu_payload(h, so_), &code),
            "cpu delegate 0: payload body_version 2 is not supported (this runtime calls abi_version 1)");
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
  f = test::cpu_payload_fields(add_header());
  f.arch = "";  // a payload of native code must name its machine
  EXPECT_EQ(init_error(test::write_payload(f, so_), &code),
            "cpu delegate 0: payload names no arch (this runtime runs on " + here + ")");
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
  // The names runtime/schema/payload.fbs gives the CpuFeature bits, as GCC spells them.
  static const char* const kNames[] = {"sse4.2", "avx",      "avx2",     "fma",      "f16c",
                                       "avx512f", "avx512dq", "avx512bw", "avx512vl", "bmi2"};
  uint64_t missing = ~cpu_backend_supported_features() & ((uint64_t{1} << 10) - 1);
  if (missing == 0)
    GTEST_SKIP() << "this CPU has all ten features the payload schema names, so no payload can need one it lacks "
                    "(the arch mismatch is tested in VersionsFormatBackendAndArch)";
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
  size_t body_at = test::payload_body_offset(good);
  std::vector<uint8_t> flipped = good;
  flipped[body_at + so_.size() / 2] ^= 0x20;
  ErrorCode code = ErrorCode::Ok;
  std::string message = init_error(flipped, &code);
  EXPECT_EQ(message.rfind("cpu delegate 0: payload checksum mismatch: the body is corrupt (CRC-32 of its ", 0), 0u)
      << message;
  EXPECT_EQ(code, ErrorCode::InvalidProgram);
  test::PayloadFields f = test::cpu_payload_fields(add_header());
  f.body_crc32_override = static_cast<int64_t>(test::crc32(so_.data(), so_.size()) ^ 1);
  EXPECT_CONTAINS(init_error(test::write_payload(f, so_)), "payload checksum mismatch: the body is corrupt");
}

TEST_F(CpuBackendTest, ACorruptElfWithAGoodChecksumIsRefusedWithoutACrash) {
  ErrorCode code = ErrorCode::Ok;
  auto payload_of = [this](void (*edit)(std::vector<uint8_t>&)) {
    return test::write_cpu_payload(add_header(), edited_so(so_, edit));
  };
  EXPECT_EQ(init_error(payload_of([](std::vector<uint8_t>& so) { so[1] = 'X'; }), &code),
            "cpu delegate 0: the shared object is not an ELF file (it starts with \"\\x7fXLF\")");
  EXPECT_EQ(code, ErrorCode::InvalidProgram);
  EXPECT_EQ(init_error(payload_of([](std::vector<uint8_t>& so) { so[4] = 1; })),
            "cpu delegate 0: the shared object is ELF class 1, not 64-bit (2)");
  std::string machine = init_error(payload_of([](std::vector<uint8_t>& so) {
                                     so[18] = 40;
                                     so[19] = 0;
                                   }),
                                   &code);
  EXPECT_EQ(machine, std::string("cpu delegate 0: the shared object is for ELF machine 40, this runtime runs on ") +
                         cpu_backend_arch() + (std::string(cpu_backend_arch()) == "x86_64" ? " (machine 62)"
                                                                                             : " (machine 183)"));
  EXPECT_EQ(code, ErrorCode::NotSupported);
  EXPECT_EQ(init_error(payload_of([](std::vector<uint8_t>& so) { so[16] = 2; })),
            "cpu delegate 0: the ELF file is not a shared object (e_type 2, expected ET_DYN 3)");
  // Program headers that point past the end, and the shared object cut short (the header's
  // sizes and checksum say so): glibc's dlopen would map past the end of the file and fault.
  std::string phoff = init_error(payload_of([](std::vector<uint8_t>& so) {
                                   for (int i = 0; i < 7; ++i) so[32 + i] = 0x7f;  // e_phoff
                                 }),
                                 &code);
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
  std::string version = init_error(payload_of([](std::vector<uint8_t>& so) { so[6] = 0; }), &code);  // EI_VERSION
  EXPECT_EQ(version.rfind("cpu delegate 0: cannot load the shared object: ", 0), 0u) << version;
  EXPECT_CONTAINS(version, "ELF file version");
  EXPECT_EQ(code, ErrorCode::InvalidProgram);
}

TEST_F(CpuBackendTest, SpecsAndEntryPoints) {
  CpuPayloadHeader h = add_header();
  h.inputs[0].dtype = static_cast<ScalarType>(9);
  EXPECT_EQ(init_error(test::write_cpu_payload(h, so_)), "cpu delegate 0: tensor spec of input 0 has unknown dtype 9");
  h = add_header();
  h.inputs[1].sizes.assign(17, 1);
  EXPECT_EQ(init_error(test::write_cpu_payload(h, so_)), "cpu delegate 0: tensor spec of input 1 has rank 17 (0 to 16)");
  h = add_header();
  h.inputs[0].sizes = {-2, 3};
  EXPECT_EQ(init_error(test::write_cpu_payload(h, so_)),
            "cpu delegate 0: tensor spec of input 0 has size -2 for dim 0 (-1: dynamic)");
  h = scale_header();
  h.shapes_entry = "";
  EXPECT_EQ(init_error(test::write_cpu_payload(h, so_)),
            "cpu delegate 0: an output has dynamic dims (-1) but the header names no 'shapes' entry point");
  h = add_header();
  h.entry = "";
  EXPECT_EQ(init_error(test::write_cpu_payload(h, so_)), "cpu delegate 0: the header names no entry point 'forward'");
}

// ---- The method allocator ----------------------------------------------------------------------

TEST_F(CpuBackendTest, StateArenaAndPoolComeFromTheMethodAllocator) {
  std::vector<uint8_t> payload = test::write_cpu_payload(add_header(), so_);
  BackendInitContext sizing{nullptr, "forward", 0, nullptr, nullptr};
  for (int threads : {1, 3}) {
    Result<size_t> bytes = backend(threads)->method_allocator_bytes(
        sizing, Span<const uint8_t>(payload.data(), payload.size()), Span<const CompileSpec>());
    ASSERT_TRUE(bytes.ok()) << bytes.error().message();
    EXPECT_GE(bytes.get(), 4096u + 64u) << "the 4096-byte arena and the delegate state";
    test::AlignedBuffer memory(bytes.get());
    MemoryAllocator allocator(memory.data(), memory.size());
    BackendInitContext context{&allocator, "forward", 0, nullptr, nullptr, test::allow_native_code()};
    Result<DelegateHandle> handle = backend(threads)->init(
        context, Span<const uint8_t>(payload.data(), payload.size()), Span<const CompileSpec>());
    ASSERT_TRUE(handle.ok()) << handle.error().message();
    EXPECT_LE(allocator.used(), bytes.get());
    EXPECT_GE(allocator.used(), 4096u);
    // The handle (the delegate state) lies in the method allocator's buffer.
    uint8_t* state = static_cast<uint8_t*>(handle.get());
    EXPECT_TRUE(state >= memory.data() && state < memory.data() + memory.size());
    OwnedTensor a(ScalarType::Float, {2, 3}, 6), b(ScalarType::Float, {2, 3}, 6), out(ScalarType::Float, {2, 3}, 6);
    a.at<float>()[2] = 1.f;
    ASSERT_FALSE(execute(handle.get(), {&a.value, &b.value, &out.value}, threads));
    EXPECT_EQ(out.at<float>()[2], 1.f);
    backend(threads)->destroy(handle.get());
  }
}

TEST_F(CpuBackendTest, ATooSmallMethodAllocatorIsOutOfMemory) {
  std::vector<uint8_t> payload = test::write_cpu_payload(add_header(), so_);
  test::AlignedBuffer memory(1024);  // the delegate state fits, the 4096-byte arena does not
  MemoryAllocator allocator(memory.data(), memory.size());
  BackendInitContext context{&allocator, "forward", 1, nullptr, nullptr, test::allow_native_code()};
  Result<DelegateHandle> handle =
      backend()->init(context, Span<const uint8_t>(payload.data(), payload.size()), Span<const CompileSpec>());
  ASSERT_FALSE(handle.ok());
  EXPECT_EQ(handle.error().code(), ErrorCode::OutOfMemory);
  std::string message = handle.error().message();
  EXPECT_EQ(message.rfind("cpu delegate 1: the method allocator has ", 0), 0u) << message;
  EXPECT_CONTAINS(message, "of its 1024 bytes left; the payload's arena needs 4096 (size it with "
                           "MethodMeta::method_allocator_bytes(backends))");
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
