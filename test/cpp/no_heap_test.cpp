// execute() performs no heap allocation: this binary replaces malloc, calloc,
// realloc, free, aligned_alloc, memalign, posix_memalign and every operator
// new/delete with counting versions (forwarding to glibc's __libc_*), armed
// only around the calls under test.
//
// Built in the plain build only: ASan/UBSan replace malloc themselves
// (test/cpp/CMakeLists.txt leaves this test out when ETMLIR_SANITIZE is on).
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "etmlir/runtime/backend.h"
#include "etmlir/runtime/method.h"
#include "etmlir/runtime/program.h"
#include "cpu_backend.h"
#include "nested_backend.h"
#include "test_util.h"

#if defined(__SANITIZE_ADDRESS__)
#error "no_heap_test replaces malloc; build it without sanitizers"
#endif

extern "C" {
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t count, size_t size);
void* __libc_realloc(void* p, size_t size);
void __libc_free(void* p);
void* __libc_memalign(size_t alignment, size_t size);
}

namespace {

std::atomic<bool> g_armed{false};
std::atomic<size_t> g_allocations{0};

inline void note() {
  if (g_armed.load(std::memory_order_relaxed)) g_allocations.fetch_add(1, std::memory_order_relaxed);
}

// Counts heap calls made while it lives.
class HeapCounter {
 public:
  HeapCounter() {
    g_allocations.store(0);
    g_armed.store(true);
  }
  ~HeapCounter() { g_armed.store(false); }
  size_t count() const { return g_allocations.load(); }
};

}  // namespace

extern "C" {
void* malloc(size_t size) noexcept {
  note();
  return __libc_malloc(size);
}
void* calloc(size_t count, size_t size) noexcept {
  note();
  return __libc_calloc(count, size);
}
void* realloc(void* p, size_t size) noexcept {
  note();
  return __libc_realloc(p, size);
}
void free(void* p) noexcept {
  if (p != nullptr) note();
  __libc_free(p);
}
void* aligned_alloc(size_t alignment, size_t size) noexcept {
  note();
  return __libc_memalign(alignment, size);
}
void* memalign(size_t alignment, size_t size) noexcept {
  note();
  return __libc_memalign(alignment, size);
}
int posix_memalign(void** out, size_t alignment, size_t size) noexcept {
  note();
  void* p = __libc_memalign(alignment, size);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}
}  // extern "C"

void* operator new(size_t size) {
  void* p = malloc(size ? size : 1);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void* operator new[](size_t size) { return operator new(size); }
void* operator new(size_t size, const std::nothrow_t&) noexcept { return malloc(size ? size : 1); }
void* operator new[](size_t size, const std::nothrow_t&) noexcept { return malloc(size ? size : 1); }
void* operator new(size_t size, std::align_val_t alignment) {
  void* p = nullptr;
  if (posix_memalign(&p, static_cast<size_t>(alignment), size ? size : 1) != 0) throw std::bad_alloc();
  return p;
}
void* operator new[](size_t size, std::align_val_t alignment) { return operator new(size, alignment); }
void operator delete(void* p) noexcept { free(p); }
void operator delete[](void* p) noexcept { free(p); }
void operator delete(void* p, size_t) noexcept { free(p); }
void operator delete[](void* p, size_t) noexcept { free(p); }
void operator delete(void* p, std::align_val_t) noexcept { free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { free(p); }

namespace etmlir {
namespace {

using test::LoaderKind;

// Keeps the compiler from removing an allocation whose result is unused.
void* volatile g_sink;

TEST(NoHeap, CounterSeesEveryKindOfAllocation) {
  HeapCounter counter;
  void* (*volatile do_malloc)(size_t) = malloc;
  g_sink = do_malloc(16);
  free(g_sink);
  void* p = nullptr;
  ASSERT_EQ(posix_memalign(&p, 64, 128), 0);
  g_sink = p;
  free(g_sink);
  auto owned = std::make_unique<std::string>(100, 'x');
  g_sink = owned.get();
  owned.reset();
  EXPECT_GE(counter.count(), 6u) << "the malloc replacement is not in use: the other tests would prove nothing";
}

// A loaded method with its inputs set from the fixture's reference input (or zeros).
struct Loaded : test::LoadedMethod {
  std::vector<std::unique_ptr<test::AlignedBuffer>> inputs;
};

std::unique_ptr<Loaded> load(const std::string& file, LoaderKind kind, const BackendRegistry* backends = nullptr) {
  auto loaded = std::make_unique<Loaded>();
  Error e = test::load_forward(file, kind, backends, loaded.get());
  EXPECT_FALSE(e) << file << ": " << e.message();
  if (e) return nullptr;
  EXPECT_TRUE(loaded->method) << file << ": " << loaded->error.message();
  if (!loaded->method) return nullptr;
  Result<MethodMeta> meta = loaded->program->program->method_meta("forward");
  for (size_t i = 0; i < meta->num_inputs(); ++i) {
    MethodMeta::TensorInfo info;
    if (!meta->input_tensor(i, &info)) continue;
    size_t nbytes = element_size(info.dtype);
    for (int32_t d = 0; d < info.dim; ++d) nbytes *= static_cast<size_t>(info.sizes[d]);
    loaded->inputs.push_back(std::make_unique<test::AlignedBuffer>(nbytes));
    Error set = loaded->method->set_input(i, loaded->inputs.back()->data(), nbytes, info.dtype,
                                          Span<const int64_t>(info.sizes, static_cast<size_t>(info.dim)));
    EXPECT_FALSE(set) << set.message();
  }
  return loaded;
}

struct Case {
  const char* file;
  LoaderKind loader;
};

class NoHeapExecute : public ::testing::TestWithParam<Case> {};

TEST_P(NoHeapExecute, ThreeExecutesAllocateNothing) {
  ETMLIR_REQUIRE_FIXTURES();
  auto loaded = load(GetParam().file, GetParam().loader);
  ASSERT_TRUE(loaded);
  Error errors[3];
  size_t allocations;
  {
    HeapCounter counter;
    for (Error& e : errors) e = loaded->method->execute();
    allocations = counter.count();
  }
  for (const Error& e : errors) ASSERT_FALSE(e) << e.message();
  EXPECT_EQ(allocations, 0u) << "heap calls during execute() of " << GetParam().file;
}

TEST_P(NoHeapExecute, SetInputAndProfiledExecuteAllocateNothing) {
  ETMLIR_REQUIRE_FIXTURES();
  auto loaded = load(GetParam().file, GetParam().loader);
  ASSERT_TRUE(loaded);
  Result<MethodMeta> meta = loaded->program->program->method_meta("forward");
  ASSERT_TRUE(meta.ok());
  MethodMeta::TensorInfo info;
  ASSERT_TRUE(meta->input_tensor(0, &info));
  std::vector<uint64_t> profile(loaded->method->num_instructions());
  Error set;
  Error run;
  size_t allocations;
  {
    HeapCounter counter;
    set = loaded->method->set_input(0, loaded->inputs[0]->data(), loaded->inputs[0]->size(), info.dtype,
                                    Span<const int64_t>(info.sizes, static_cast<size_t>(info.dim)));
    loaded->method->set_profiling(profile.data());
    run = loaded->method->execute();
    allocations = counter.count();
  }
  ASSERT_FALSE(set) << set.message();
  ASSERT_FALSE(run) << run.message();
  EXPECT_EQ(allocations, 0u);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, NoHeapExecute,
                         ::testing::Values(Case{"mlp.pte", LoaderKind::Buffer}, Case{"mlp.pte", LoaderKind::File},
                                           Case{"mlp.pte", LoaderKind::Mmap}, Case{"seed_cnn.pte", LoaderKind::Buffer},
                                           Case{"seed_cnn.pte", LoaderKind::File},
                                           Case{"seed_cnn.pte", LoaderKind::Mmap},
                                           Case{"dynamic.pte", LoaderKind::Mmap}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string name = info.param.file;
                           return name.substr(0, name.find('.')) + "_" + test::loader_kind_name(info.param.loader);
                         });

// A backend that copies its input to its output.
class CopyBackend : public Backend {
 public:
  bool is_available() const override { return true; }
  Result<DelegateHandle> init(BackendInitContext&, Span<const uint8_t>, Span<const CompileSpec>) override {
    return DelegateHandle(this);
  }
  Error execute(BackendExecuteContext&, DelegateHandle, Span<EValue*> args) override {
    const Tensor& in = args[0]->to_tensor();
    std::memcpy(args[1]->to_tensor().mutable_data(), in.data(), in.nbytes());
    return Error::ok();
  }
  void destroy(DelegateHandle) override {}
};

TEST(NoHeap, DelegateCallAllocatesNothing) {
  ETMLIR_REQUIRE_FIXTURES();
  CopyBackend backend;
  BackendRegistry backends;
  ASSERT_FALSE(backends.add("fake_delegate", &backend));
  auto loaded = load("delegate.pte", LoaderKind::Mmap, &backends);
  ASSERT_TRUE(loaded);
  Error run;
  size_t allocations;
  {
    HeapCounter counter;
    for (int i = 0; i < 3; ++i) run = loaded->method->execute();
    allocations = counter.count();
  }
  ASSERT_FALSE(run) << run.message();
  EXPECT_EQ(allocations, 0u);
}

// Programs whose delegate is a whole .pte run by the "nested" backend (all of
// its memory is allocated at init), including a delegate inside a delegate
// and a dynamic inner program. The inputs are zeros (valid indices for lookup).
TEST(NoHeap, NestedDelegatesAllocateNothing) {
  ETMLIR_REQUIRE_FIXTURES();
  BackendRegistry backends;
  ASSERT_FALSE(register_nested_backend(backends));
  for (const char* file : {"nested_mlp.pte", "nested_mlp_unplanned_io.pte", "nested_dynamic.pte",
                           "nested_nested_lookup.pte"}) {
    auto loaded = load(file, LoaderKind::Mmap, &backends);
    ASSERT_TRUE(loaded) << file;
    Error run;
    size_t allocations;
    {
      HeapCounter counter;
      for (int i = 0; i < 3; ++i) run = loaded->method->execute();
      allocations = counter.count();
    }
    ASSERT_FALSE(run) << file << ": " << run.message();
    EXPECT_EQ(allocations, 0u) << "heap calls during execute() of " << file;
  }
}

// With an event tracer attached (events, nested delegates forwarding theirs, captures of a value
// every instruction writes, and a buffer that overflows): still no heap call.
TEST(NoHeap, TracedExecuteAllocatesNothing) {
  ETMLIR_REQUIRE_FIXTURES();
  BackendRegistry backends;
  ASSERT_FALSE(register_nested_backend(backends));
  for (const char* file : {"mlp.pte", "nested_nested_lookup.pte"}) {
    auto loaded = load(file, LoaderKind::Mmap, &backends);
    ASSERT_TRUE(loaded) << file;
    std::vector<TraceEvent> events(8);  // too few for three runs: the overflow path runs too
    std::vector<CaptureRequest> requests;
    for (uint32_t pc = 0; pc < loaded->method->num_instructions(); ++pc)
      for (int32_t value = 0; value < 4; ++value) requests.push_back(CaptureRequest{pc, value});
    std::vector<TraceCapture> records(4);
    std::vector<uint8_t> bytes(1 << 16);
    EventTracer tracer(Span<TraceEvent>(events.data(), events.size()));
    tracer.set_capture(Span<const CaptureRequest>(requests.data(), requests.size()),
                       Span<TraceCapture>(records.data(), records.size()), Span<uint8_t>(bytes.data(), bytes.size()));
    ASSERT_FALSE(loaded->method->set_event_tracer(&tracer));
    Error run;
    size_t allocations;
    {
      HeapCounter counter;
      for (int i = 0; i < 3 && !run; ++i) run = loaded->method->execute();
      allocations = counter.count();
    }
    ASSERT_FALSE(run) << file << ": " << run.message();
    EXPECT_EQ(allocations, 0u) << "heap calls during a traced execute() of " << file;
    EXPECT_EQ(tracer.events().size(), events.size()) << file;
    EXPECT_GT(tracer.dropped_events(), 0u) << file;
  }
}

TEST(NoHeap, AFailureInsideANestedDelegateAllocatesNothing) {
  ETMLIR_REQUIRE_FIXTURES();
  BackendRegistry backends;
  ASSERT_FALSE(register_nested_backend(backends));
  auto loaded = load("nested_nested_lookup.pte", LoaderKind::Mmap, &backends);
  ASSERT_TRUE(loaded);
  int64_t indices[] = {1, 70, 3};
  int64_t sizes[] = {3};
  Error set;
  Error run;
  size_t allocations;
  {
    HeapCounter counter;
    set = loaded->method->set_input(0, indices, sizeof(indices), ScalarType::Int64, sizes);
    run = loaded->method->execute();
    allocations = counter.count();
  }
  ASSERT_FALSE(set) << set.message();
  ASSERT_TRUE(run) << "index 70 of a 64-row table must fail";
  EXPECT_EQ(allocations, 0u);
}

// "cpu" delegates (runtime/backends/cpu) take everything at init, from the
// method allocator: the descriptors, the shape buffer, the payload's arena and
// nothing else (the backend's shared thread pool starts at the first init).
// Called directly (a static and a dynamic payload, one and two threads) and
// through a Method.
struct Float2d {
  Float2d(int64_t rows, int64_t cols, bool dynamic) : sizes{rows, cols}, bounds{rows, cols}, data(rows * cols, 1.f) {
    tensor = Tensor(ScalarType::Float, 2, sizes, strides, dim_order, dynamic ? bounds : nullptr, data.data(),
                    data.size() * sizeof(float));
    value.tag = Tag::Tensor;
    value.payload.as_tensor = &tensor;
  }
  int64_t sizes[2];
  int64_t strides[2] = {};
  uint8_t dim_order[2] = {0, 1};
  int64_t bounds[2];
  std::vector<float> data;
  Tensor tensor;
  EValue value;
};

TEST(NoHeap, CpuDelegatesAllocateNothing) {
  std::vector<uint8_t> so = test::cpu_fixture_bytes();
  ASSERT_FALSE(so.empty());
  test::CpuPayloadHeader add;
  add.entry = "add_f32";
  add.inputs = {{ScalarType::Float, {2, 3}}, {ScalarType::Float, {2, 3}}};
  add.outputs = {{ScalarType::Float, {2, 3}}};
  test::CpuPayloadHeader scale;
  scale.entry = "scale2";
  scale.shapes_entry = "scale2_shapes";
  scale.inputs = {{ScalarType::Float, {-1, 4}}};
  scale.outputs = {{ScalarType::Float, {-1, 4}}};
  std::vector<uint8_t> add_payload = test::write_cpu_payload(add, so);
  std::vector<uint8_t> scale_payload = test::write_cpu_payload(scale, so);
  for (int threads : {1, 2}) {
    BackendRegistry backends;
    ASSERT_FALSE(register_cpu_backend(backends, BackendOptions{threads}));
    Backend* backend = backends.find("cpu");
    test::AlignedBuffer memory(size_t{1} << 20);  // the delegates' state, descriptors and arenas
    MemoryAllocator method_allocator(memory.data(), memory.size());
    BackendInitContext init{&method_allocator, "forward", 0, nullptr, nullptr, test::allow_native_code()};
    Result<DelegateHandle> add_handle =
        backend->init(init, Span<const uint8_t>(add_payload.data(), add_payload.size()), Span<const CompileSpec>());
    Result<DelegateHandle> scale_handle = backend->init(
        init, Span<const uint8_t>(scale_payload.data(), scale_payload.size()), Span<const CompileSpec>());
    ASSERT_TRUE(add_handle.ok()) << add_handle.error().message();
    ASSERT_TRUE(scale_handle.ok()) << scale_handle.error().message();
    Float2d a(2, 3, false), b(2, 3, false), sum(2, 3, false);
    Float2d x7(7, 4, false), x3(3, 4, false), y(8, 4, true);
    EValue* add_args[] = {&a.value, &b.value, &sum.value};
    EValue* scale7[] = {&x7.value, &y.value};
    EValue* scale3[] = {&x3.value, &y.value};
    Error errors[6];
    size_t allocations;
    {
      HeapCounter counter;
      BackendExecuteContext run{nullptr, 0};
      for (int i = 0; i < 2; ++i) {
        errors[3 * i] = backend->execute(run, add_handle.get(), Span<EValue*>(add_args, 3));
        errors[3 * i + 1] = backend->execute(run, scale_handle.get(), Span<EValue*>(scale7, 2));
        errors[3 * i + 2] = backend->execute(run, scale_handle.get(), Span<EValue*>(scale3, 2));
      }
      allocations = counter.count();
    }
    for (const Error& e : errors) ASSERT_FALSE(e) << e.message();
    EXPECT_EQ(allocations, 0u) << "heap calls during execute() with " << threads << " thread(s)";
    EXPECT_EQ(y.tensor.size(0), 3);
    EXPECT_EQ(sum.data[5], 2.f);
    EXPECT_EQ(cpu_backend_stats(add_handle.get()).heap_fallbacks, 0u);
    backend->destroy(add_handle.get());
    backend->destroy(scale_handle.get());
  }
}

TEST(NoHeap, AMethodWithACpuDelegateAllocatesNothing) {
  std::vector<uint8_t> so = test::cpu_fixture_bytes();
  ASSERT_FALSE(so.empty());
  test::CpuPayloadHeader h;
  h.entry = "scale2";
  h.inputs = {{ScalarType::Float, {4, 4}}};
  h.outputs = {{ScalarType::Float, {4, 4}}};
  std::vector<uint8_t> pte = test::one_delegate_program("cpu", test::write_cpu_payload(h, so), {4, 4});
  BackendRegistry backends;
  ASSERT_FALSE(register_cpu_backend(backends, BackendOptions{2}));
  test::LoadedMethod loaded;
  Error loaded_program = test::load_forward(pte, &backends, &loaded, test::allow_native_code());
  ASSERT_FALSE(loaded_program) << loaded_program.message();
  ASSERT_TRUE(loaded.method) << loaded.error.message();
  Method* method = loaded.method.get();
  float x[16] = {};
  int64_t sizes[] = {4, 4};
  Error set;
  Error run;
  size_t allocations;
  {
    HeapCounter counter;
    for (int i = 0; i < 3; ++i) {
      set = method->set_input(0, x, sizeof(x), ScalarType::Float, sizes);
      run = method->execute();
    }
    allocations = counter.count();
  }
  ASSERT_FALSE(set) << set.message();
  ASSERT_FALSE(run) << run.message();
  EXPECT_EQ(allocations, 0u);
}

}  // namespace
}  // namespace etmlir
