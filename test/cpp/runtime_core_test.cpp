// The runtime's building blocks on their own: Error/Result, MemoryAllocator,
// Tensor::resize, the kernel and backend registries, boxed int lists, and
// the three data loaders.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "etmlir/runtime/backend.h"
#include "etmlir/runtime/data_loader.h"
#include "etmlir/runtime/error.h"
#include "etmlir/runtime/evalue.h"
#include "etmlir/runtime/kernel.h"
#include "etmlir/runtime/memory.h"
#include "etmlir/runtime/tensor.h"
#include "test_util.h"

namespace etmlir {
namespace {

// ---- Error / Result --------------------------------------------------------------

TEST(Error, DefaultIsOkAndFalse) {
  Error e;
  EXPECT_TRUE(e.is_ok());
  EXPECT_FALSE(static_cast<bool>(e));
  EXPECT_EQ(e.code(), ErrorCode::Ok);
  EXPECT_STREQ(e.message(), "");
}

TEST(Error, MakeFormatsTheMessageAndKeepsTheCode) {
  Error e = Error::make(ErrorCode::NotFound, "no kernel for %s (%d args)", "aten::foo.out", 3);
  EXPECT_TRUE(static_cast<bool>(e));
  EXPECT_EQ(e.code(), ErrorCode::NotFound);
  EXPECT_STREQ(e.message(), "no kernel for aten::foo.out (3 args)");
  EXPECT_STREQ(error_code_name(e.code()), "NotFound");
}

TEST(Error, MakeWithOkCodeBecomesInternal) {
  Error e = Error::make(ErrorCode::Ok, "oops");
  EXPECT_EQ(e.code(), ErrorCode::Internal);
  EXPECT_FALSE(e.is_ok());
}

TEST(Error, EveryCodeHasAName) {
  for (int c = 0; c <= static_cast<int>(ErrorCode::Untrusted); ++c) {
    EXPECT_STRNE(error_code_name(static_cast<ErrorCode>(c)), "Unknown") << c;
  }
  EXPECT_STREQ(error_code_name(ErrorCode::OutOfBounds), "OutOfBounds");
}

TEST(Error, LongMessageIsTruncatedWithEllipsis) {
  std::string long_text(1000, 'x');
  Error e = Error::make(ErrorCode::InvalidProgram, "%s", long_text.c_str());
  EXPECT_EQ(std::strlen(e.message()), Error::kMaxMessage - 1);
  std::string message = e.message();
  EXPECT_EQ(message.substr(message.size() - 3), "...");
  EXPECT_EQ(message.substr(0, 10), std::string(10, 'x'));
}

TEST(Error, MessageOfExactlyMaxMinusOneIsNotMarkedTruncated) {
  std::string text(Error::kMaxMessage - 1, 'y');
  Error e = Error::make(ErrorCode::Io, "%s", text.c_str());
  EXPECT_EQ(std::string(e.message()), text);
}

TEST(Error, PrefixPrependsContext) {
  Error e = Error::make(ErrorCode::KernelFailed, "dim 3 out of range");
  e.prefix("model.py:%d (method '%s')", 41, "forward");
  EXPECT_STREQ(e.message(), "model.py:41 (method 'forward'): dim 3 out of range");
  EXPECT_EQ(e.code(), ErrorCode::KernelFailed);
}

TEST(Error, PrefixOfLongMessageIsTruncatedWithEllipsis) {
  std::string text(Error::kMaxMessage - 1, 'z');
  Error e = Error::make(ErrorCode::Io, "%s", text.c_str());
  e.prefix("context");
  std::string message = e.message();
  EXPECT_EQ(message.size(), Error::kMaxMessage - 1);
  EXPECT_EQ(message.substr(0, 9), "context: ");
  EXPECT_EQ(message.substr(message.size() - 3), "...");
}

Error fails_when(bool fail) {
  ET_CHECK_MSG(!fail, ErrorCode::InvalidArgument, "asked to fail (%d)", 1);
  return Error::ok();
}

Error forwards(bool fail) {
  ET_CHECK_OK(fails_when(fail));
  return Error::make(ErrorCode::Internal, "reached the end");
}

TEST(Error, CheckMacrosReturnEarly) {
  EXPECT_EQ(forwards(true).code(), ErrorCode::InvalidArgument);
  EXPECT_STREQ(forwards(true).message(), "asked to fail (1)");
  EXPECT_EQ(forwards(false).code(), ErrorCode::Internal);
}

struct Counted {
  static int live;
  int value;
  explicit Counted(int v) : value(v) { ++live; }
  Counted(Counted&& other) noexcept : value(other.value) { ++live; }
  ~Counted() { --live; }
};
int Counted::live = 0;

TEST(Result, HoldsAValue) {
  {
    Result<Counted> r(Counted(7));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->value, 7);
    EXPECT_EQ((*r).value, 7);
    EXPECT_EQ(Counted::live, 1);
    Result<Counted> moved(static_cast<Result<Counted>&&>(r));
    EXPECT_EQ(moved->value, 7);
    EXPECT_EQ(Counted::live, 2);  // the moved-from Result still owns its (moved-from) value
  }
  EXPECT_EQ(Counted::live, 0);
}

TEST(Result, HoldsAnErrorAndNoValue) {
  {
    Result<Counted> r(Error::make(ErrorCode::OutOfMemory, "arena 'fast' too small"));
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.error().code(), ErrorCode::OutOfMemory);
    EXPECT_STREQ(r.error().message(), "arena 'fast' too small");
    EXPECT_EQ(Counted::live, 0);
  }
  EXPECT_EQ(Counted::live, 0);
}

// ---- MemoryAllocator ---------------------------------------------------------------

TEST(MemoryAllocator, ReturnsPointersWithTheRequestedAlignment) {
  alignas(256) static uint8_t storage[4096];
  MemoryAllocator alloc(storage + 8, sizeof(storage) - 8);  // base deliberately misaligned
  for (size_t alignment : {1, 2, 16, 64, 256}) {
    void* p = alloc.allocate(3, alignment);
    ASSERT_NE(p, nullptr) << alignment;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % alignment, 0u) << alignment;
  }
  int64_t* array = alloc.allocate_array<int64_t>(5);
  ASSERT_NE(array, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(array) % 16, 0u);
}

TEST(MemoryAllocator, RejectsAlignmentThatIsNotAPowerOfTwo) {
  alignas(64) static uint8_t storage[256];
  MemoryAllocator alloc(storage, sizeof(storage));
  EXPECT_EQ(alloc.allocate(8, 0), nullptr);
  EXPECT_EQ(alloc.allocate(8, 24), nullptr);
  EXPECT_EQ(alloc.used(), 0u);
}

TEST(MemoryAllocator, ExhaustionReturnsNullAndKeepsState) {
  alignas(64) static uint8_t storage[128];
  MemoryAllocator alloc(storage, sizeof(storage));
  ASSERT_NE(alloc.allocate(100, 16), nullptr);
  size_t used = alloc.used();
  EXPECT_EQ(alloc.allocate(29, 1), nullptr);
  EXPECT_EQ(alloc.used(), used);
  EXPECT_NE(alloc.allocate(28, 1), nullptr);  // exactly fills the buffer
  EXPECT_EQ(alloc.used(), sizeof(storage));
  EXPECT_EQ(alloc.allocate(1, 1), nullptr);
  EXPECT_EQ(alloc.allocate(0, 1), static_cast<void*>(storage + sizeof(storage)));
}

TEST(MemoryAllocator, AlignmentPaddingCountsAgainstCapacity) {
  alignas(64) static uint8_t storage[64];
  MemoryAllocator alloc(storage, sizeof(storage));
  ASSERT_NE(alloc.allocate(1, 1), nullptr);
  EXPECT_EQ(alloc.allocate(1, 64), nullptr);  // the next 64-aligned address is the end
}

TEST(MemoryAllocator, HugeRequestsDoNotWrapAround) {
  alignas(64) static uint8_t storage[64];
  MemoryAllocator alloc(storage, sizeof(storage));
  EXPECT_EQ(alloc.allocate(SIZE_MAX, 16), nullptr);
  EXPECT_EQ(alloc.allocate(SIZE_MAX - 8, 16), nullptr);
  EXPECT_EQ(alloc.allocate_array<int64_t>(SIZE_MAX / 4), nullptr);
  EXPECT_EQ(alloc.used(), 0u);
}

TEST(MemoryAllocator, ResetReusesMemoryAndPeakRemembers) {
  alignas(64) static uint8_t storage[256];
  MemoryAllocator alloc(storage, sizeof(storage));
  void* first = alloc.allocate(200, 16);
  ASSERT_NE(first, nullptr);
  alloc.reset();
  EXPECT_EQ(alloc.used(), 0u);
  EXPECT_EQ(alloc.allocate(16, 16), first);
  EXPECT_EQ(alloc.peak(), 200u);
  EXPECT_EQ(alloc.size(), sizeof(storage));
}

TEST(MemoryAllocator, EmptyAllocatorGivesNothing) {
  MemoryAllocator alloc;
  EXPECT_EQ(alloc.allocate(1, 16), nullptr);
}

// ---- Tensor ------------------------------------------------------------------------

// A 2-D float tensor over caller-owned arrays, static or dynamic.
struct TestTensor {
  int64_t sizes[2];
  int64_t strides[2];
  uint8_t dim_order[2] = {0, 1};
  int64_t bounds[2];
  float data[12] = {};
  Tensor tensor;
  TestTensor(int64_t rows, int64_t cols, bool dynamic) : sizes{rows, cols}, bounds{rows, cols} {
    tensor = Tensor(ScalarType::Float, 2, sizes, strides, dim_order, dynamic ? bounds : nullptr, data, sizeof(data));
  }
};

TEST(Tensor, ConstructionComputesContiguousStridesAndNumel) {
  TestTensor t(3, 4, false);
  EXPECT_EQ(t.tensor.numel(), 12);
  EXPECT_EQ(t.tensor.nbytes(), 48u);
  EXPECT_EQ(t.tensor.strides()[0], 4);
  EXPECT_EQ(t.tensor.strides()[1], 1);
  EXPECT_FALSE(t.tensor.is_dynamic());
  char buffer[64];
  EXPECT_STREQ(t.tensor.describe(buffer, sizeof(buffer)), "float32[3, 4]");
}

TEST(Tensor, DescribeTruncatesToTheBuffer) {
  TestTensor t(3, 4, false);
  char buffer[8];
  t.tensor.describe(buffer, sizeof(buffer));
  EXPECT_EQ(std::strlen(buffer), 7u);
  EXPECT_EQ(std::string(buffer), "float32");
}

TEST(Tensor, DynamicResizeWithinBoundsUpdatesSizesStridesNumel) {
  TestTensor t(3, 4, true);
  int64_t smaller[] = {2, 3};
  ASSERT_FALSE(t.tensor.resize(Span<const int64_t>(smaller, 2))) << "resize within bounds";
  EXPECT_EQ(t.tensor.size(0), 2);
  EXPECT_EQ(t.tensor.size(1), 3);
  EXPECT_EQ(t.tensor.strides()[0], 3);
  EXPECT_EQ(t.tensor.numel(), 6);
  EXPECT_EQ(t.tensor.nbytes(), 24u);
  EXPECT_EQ(t.tensor.upper_bounds()[0], 3);
  EXPECT_EQ(t.tensor.upper_bounds()[1], 4);
  int64_t empty[] = {0, 4};
  EXPECT_FALSE(t.tensor.resize(Span<const int64_t>(empty, 2)));
  EXPECT_EQ(t.tensor.numel(), 0);
  int64_t full[] = {3, 4};
  EXPECT_FALSE(t.tensor.resize(Span<const int64_t>(full, 2)));
  EXPECT_EQ(t.tensor.numel(), 12);
}

TEST(Tensor, DynamicResizeBeyondBoundIsOutOfBoundsAndLeavesSizes) {
  TestTensor t(3, 4, true);
  int64_t bigger[] = {3, 5};
  Error e = t.tensor.resize(Span<const int64_t>(bigger, 2), "out");
  EXPECT_EQ(e.code(), ErrorCode::OutOfBounds);
  EXPECT_CONTAINS(e.message(), "cannot resize out float32[3, 4]");
  EXPECT_CONTAINS(e.message(), "dim 1 would be 5, planned upper bound is 4");
  EXPECT_EQ(t.tensor.size(1), 4);
  EXPECT_EQ(t.tensor.numel(), 12);
}

TEST(Tensor, DynamicResizeToNegativeSizeIsOutOfBounds) {
  TestTensor t(3, 4, true);
  int64_t negative[] = {-1, 4};
  EXPECT_EQ(t.tensor.resize(Span<const int64_t>(negative, 2)).code(), ErrorCode::OutOfBounds);
  EXPECT_EQ(t.tensor.size(0), 3);
}

TEST(Tensor, StaticTensorAcceptsOnlyItsOwnSizes) {
  TestTensor t(3, 4, false);
  int64_t same[] = {3, 4};
  EXPECT_FALSE(t.tensor.resize(Span<const int64_t>(same, 2)));
  int64_t smaller[] = {2, 4};
  Error e = t.tensor.resize(Span<const int64_t>(smaller, 2), "self");
  EXPECT_EQ(e.code(), ErrorCode::OutOfBounds);
  EXPECT_CONTAINS(e.message(), "dim 0 would be 2, static size is 3");
  EXPECT_EQ(t.tensor.size(0), 3);
}

TEST(Tensor, ResizeToAnotherRankIsInvalidArgument) {
  TestTensor t(3, 4, true);
  int64_t rank3[] = {1, 3, 4};
  Error e = t.tensor.resize(Span<const int64_t>(rank3, 3), "out");
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_CONTAINS(e.message(), "to rank 3");
  EXPECT_EQ(t.tensor.dim(), 2);
}

TEST(Tensor, ElementSizesAndNames) {
  EXPECT_EQ(element_size(ScalarType::Float), 4u);
  EXPECT_EQ(element_size(ScalarType::Int64), 8u);
  EXPECT_EQ(element_size(ScalarType::Bool), 1u);
  EXPECT_EQ(element_size(ScalarType::BFloat16), 2u);
  EXPECT_STREQ(dtype_name(ScalarType::Half), "float16");
  EXPECT_TRUE(is_known_dtype(6));
  EXPECT_FALSE(is_known_dtype(8));   // ComplexHalf: not supported
  EXPECT_FALSE(is_known_dtype(-1));
  EXPECT_FALSE(is_known_dtype(100));
  EXPECT_STREQ(dtype_name(static_cast<ScalarType>(42)), "unknown");
}

// ---- KernelRegistry ------------------------------------------------------------------

Error kernel_a(KernelContext&, EValue**) { return Error::ok(); }
Error kernel_b(KernelContext& ctx, EValue**) { return ctx.fail(ErrorCode::KernelFailed, "b failed with %d", 2); }

TEST(KernelRegistry, FindReturnsTheRegisteredEntry) {
  KernelRegistry registry;
  ASSERT_FALSE(registry.add("test::a.out", "TT", kernel_a));
  ASSERT_FALSE(registry.add("test::b.out", "TsT", kernel_b));
  EXPECT_EQ(registry.size(), 2u);
  const KernelEntry* a = registry.find("test::a.out");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->fn, &kernel_a);
  EXPECT_STREQ(a->signature, "TT");
  EXPECT_EQ(registry.find("test::b.out")->fn, &kernel_b);
  EXPECT_EQ(registry.find("test::c.out"), nullptr);
  EXPECT_EQ(registry.find("test::a"), nullptr);       // a prefix is not a match
  EXPECT_EQ(registry.find("test::a.out.x"), nullptr);
  const char* longer = "test::a.outXYZ";
  EXPECT_EQ(registry.find(longer, 11), a);            // counted name, not NUL-terminated
}

TEST(KernelRegistry, DuplicateNameIsRejected) {
  KernelRegistry registry;
  ASSERT_FALSE(registry.add("test::a.out", "TT", kernel_a));
  Error e = registry.add("test::a.out", "T", kernel_b);
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_CONTAINS(e.message(), "test::a.out is already registered");
  EXPECT_EQ(registry.size(), 1u);
  EXPECT_EQ(registry.find("test::a.out")->fn, &kernel_a);
}

TEST(KernelRegistry, UnknownSignatureCharacterIsRejected) {
  KernelRegistry registry;
  Error e = registry.add("test::a.out", "TzT", kernel_a);
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_CONTAINS(e.message(), "unknown signature character 'z' in \"TzT\"");
  EXPECT_EQ(registry.size(), 0u);
}

TEST(KernelRegistry, MissingPartsAreRejected) {
  KernelRegistry registry;
  EXPECT_EQ(registry.add(nullptr, "T", kernel_a).code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(registry.add("x", nullptr, kernel_a).code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(registry.add("x", "T", nullptr).code(), ErrorCode::InvalidArgument);
}

TEST(KernelRegistry, FullRegistryIsOutOfMemory) {
  static char names[KernelRegistry::kCapacity + 1][32];
  auto registry = std::make_unique<KernelRegistry>();
  for (size_t i = 0; i < KernelRegistry::kCapacity; ++i) {
    std::snprintf(names[i], sizeof(names[i]), "test::k%zu.out", i);
    ASSERT_FALSE(registry->add(names[i], "T", kernel_a)) << i;
  }
  std::snprintf(names[KernelRegistry::kCapacity], 32, "test::one_too_many.out");
  Error e = registry->add(names[KernelRegistry::kCapacity], "T", kernel_a);
  EXPECT_EQ(e.code(), ErrorCode::OutOfMemory);
  EXPECT_CONTAINS(e.message(), "test::one_too_many.out");
}

TEST(KernelRegistry, PrimKernelsRegisterOnce) {
  KernelRegistry registry;
  ASSERT_FALSE(register_prim_kernels(registry));
  EXPECT_NE(registry.find("etmlir_prim::sym_size.int"), nullptr);
  EXPECT_EQ(register_prim_kernels(registry).code(), ErrorCode::InvalidArgument);
}

TEST(KernelRegistry, AllKernelsHaveValidSignaturesAndDistinctNames) {
  const KernelRegistry& registry = test::all_kernels();
  EXPECT_GE(registry.size(), 4u);
  for (size_t i = 0; i < registry.size(); ++i) {
    EXPECT_EQ(registry.find(registry.entry(i).name), &registry.entry(i)) << registry.entry(i).name;
  }
}

TEST(KernelContext, FailPrefixesTheOpName) {
  KernelContext ctx("test::b.out", nullptr);
  Error e = kernel_b(ctx, nullptr);
  EXPECT_EQ(e.code(), ErrorCode::KernelFailed);
  EXPECT_STREQ(e.message(), "test::b.out: b failed with 2");
  EXPECT_EQ(ctx.allocate_temp(16), nullptr);  // no temp allocator: nullptr, not a crash
}

TEST(KernelSignature, KindsMatchValues) {
  EValue none;
  EValue i;
  i.tag = Tag::Int;
  EValue d;
  d.tag = Tag::Double;
  EValue b;
  b.tag = Tag::Bool;
  EValue list;
  list.tag = Tag::IntList;
  EXPECT_TRUE(matches_signature('t', none));
  EXPECT_FALSE(matches_signature('T', none));
  EXPECT_TRUE(matches_signature('f', i));  // an int literal where a double is expected
  EXPECT_FALSE(matches_signature('i', d));
  EXPECT_TRUE(matches_signature('s', b));
  EXPECT_TRUE(matches_signature('S', none));
  EXPECT_TRUE(matches_signature('M', list));
  EXPECT_FALSE(matches_signature('L', none));
  EXPECT_TRUE(matches_signature('?', list));
  EXPECT_FALSE(matches_signature('z', i));
  EXPECT_STREQ(signature_kind_name('t'), "tensor or None");
  EXPECT_STREQ(signature_kind_name('z'), "unknown kind");
}

// ---- BackendRegistry -----------------------------------------------------------------

class NullBackend : public Backend {
 public:
  bool is_available() const override { return true; }
  Result<DelegateHandle> init(BackendInitContext&, Span<const uint8_t>, Span<const CompileSpec>) override {
    return DelegateHandle(nullptr);
  }
  Error execute(BackendExecuteContext&, DelegateHandle, Span<EValue*>) override { return Error::ok(); }
  void destroy(DelegateHandle) override {}
};

TEST(BackendRegistry, AddThenFindById) {
  NullBackend first;
  NullBackend second;
  BackendRegistry registry;
  ASSERT_FALSE(registry.add("cpu", &first));
  ASSERT_FALSE(registry.add("nested", &second));
  EXPECT_EQ(registry.size(), 2u);
  EXPECT_EQ(registry.find("cpu"), &first);
  EXPECT_EQ(registry.find("nested"), &second);
  EXPECT_EQ(registry.find("cp"), nullptr);
  EXPECT_EQ(registry.find("gpu"), nullptr);
  EXPECT_EQ(registry.find("nested-not", 6), &second);
  EXPECT_STREQ(registry.id(1), "nested");
}

TEST(BackendRegistry, DuplicateAndMissingPartsAreRejected) {
  NullBackend backend;
  BackendRegistry registry;
  ASSERT_FALSE(registry.add("cpu", &backend));
  Error e = registry.add("cpu", &backend);
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_CONTAINS(e.message(), "'cpu' is already registered");
  EXPECT_EQ(registry.add(nullptr, &backend).code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(registry.add("x", nullptr).code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(registry.size(), 1u);
}

TEST(BackendRegistry, FullRegistryIsOutOfMemory) {
  static char ids[BackendRegistry::kCapacity + 1][16];
  NullBackend backend;
  BackendRegistry registry;
  for (size_t i = 0; i < BackendRegistry::kCapacity; ++i) {
    std::snprintf(ids[i], sizeof(ids[i]), "b%zu", i);
    ASSERT_FALSE(registry.add(ids[i], &backend));
  }
  std::snprintf(ids[BackendRegistry::kCapacity], 16, "extra");
  EXPECT_EQ(registry.add(ids[BackendRegistry::kCapacity], &backend).code(), ErrorCode::OutOfMemory);
}

// ---- EValue --------------------------------------------------------------------------

TEST(EValue, IntListGathersTheCurrentValuesOfItsBoxedInts) {
  EValue items[3];
  for (int k = 0; k < 3; ++k) {
    items[k].tag = Tag::Int;
    items[k].payload.as_int = 10 * (k + 1);
  }
  EValue* boxed[3] = {&items[0], &items[1], &items[2]};
  int64_t scratch[3] = {-1, -1, -1};
  EValue list;
  list.tag = Tag::IntList;
  list.payload.as_int_list.items = boxed;
  list.payload.as_int_list.scratch = scratch;
  list.payload.as_int_list.size = 3;
  Span<const int64_t> values = list.to_int_list();
  ASSERT_EQ(values.size(), 3u);
  EXPECT_EQ(values[0], 10);
  EXPECT_EQ(values[2], 30);
  EXPECT_EQ(values.data(), scratch);
  items[1].payload.as_int = 77;  // a kernel (sym_size) wrote the slot at run time
  EXPECT_EQ(list.to_int_list()[1], 77);
}

TEST(EValue, ScalarConversions) {
  EValue i;
  i.tag = Tag::Int;
  i.payload.as_int = -3;
  EValue d;
  d.tag = Tag::Double;
  d.payload.as_double = 2.75;
  EValue b;
  b.tag = Tag::Bool;
  b.payload.as_bool = true;
  EXPECT_DOUBLE_EQ(i.scalar_to_double(), -3.0);
  EXPECT_EQ(d.scalar_to_int(), 2);
  EXPECT_DOUBLE_EQ(b.scalar_to_double(), 1.0);
  EXPECT_EQ(b.scalar_to_int(), 1);
  EXPECT_TRUE(i.is_scalar() && d.is_scalar() && b.is_scalar());
  EXPECT_STREQ(tag_name(Tag::OptionalTensorList), "optional tensor list");
}

TEST(EValue, StringEqualsComparesCountedBytes) {
  const char bytes[] = "tanhXX";
  EValue s;
  s.tag = Tag::String;
  s.payload.as_string.data = bytes;
  s.payload.as_string.size = 4;
  EXPECT_TRUE(s.string_equals("tanh"));
  EXPECT_FALSE(s.string_equals("tanhX"));
  EXPECT_FALSE(s.string_equals("none"));
  EXPECT_EQ(s.to_string().size(), 4u);
}

// ---- Data loaders --------------------------------------------------------------------

TEST(FreeableBuffer, ReleaseCallsTheFreeFunctionOnce) {
  static int frees = 0;
  frees = 0;
  auto count_free = [](void* context, const void*, size_t) { ++*static_cast<int*>(context); };
  {
    FreeableBuffer a(reinterpret_cast<const void*>(0x1000), 8, count_free, &frees);
    FreeableBuffer b(static_cast<FreeableBuffer&&>(a));
    EXPECT_EQ(a.size(), 0u);
    EXPECT_EQ(b.size(), 8u);
    FreeableBuffer c;
    c = static_cast<FreeableBuffer&&>(b);
    EXPECT_EQ(frees, 0);
  }
  EXPECT_EQ(frees, 1);
}

TEST(BufferDataLoader, LoadReturnsAViewOfTheBuffer) {
  uint8_t bytes[32];
  for (int i = 0; i < 32; ++i) bytes[i] = static_cast<uint8_t>(i);
  BufferDataLoader loader(bytes, sizeof(bytes));
  EXPECT_EQ(loader.size(), 32u);
  Result<FreeableBuffer> part = loader.load(4, 8);
  ASSERT_TRUE(part.ok()) << part.error().message();
  EXPECT_EQ(part->data(), bytes + 4);
  EXPECT_EQ(part->size(), 8u);
  EXPECT_TRUE(loader.load(32, 0).ok());
  EXPECT_TRUE(loader.load(0, 32).ok());
}

TEST(BufferDataLoader, OutOfRangeLoadIsAnError) {
  uint8_t bytes[32] = {};
  BufferDataLoader loader(bytes, sizeof(bytes));
  Result<FreeableBuffer> past_end = loader.load(30, 4);
  ASSERT_FALSE(past_end.ok());
  EXPECT_EQ(past_end.error().code(), ErrorCode::InvalidProgram);
  EXPECT_CONTAINS(past_end.error().message(), "bytes [30, +4) are outside the 32-byte data");
  EXPECT_FALSE(loader.load(33, 0).ok());
  EXPECT_FALSE(loader.load(UINT64_MAX, 2).ok());  // offset + size wraps around
  EXPECT_FALSE(loader.load(2, UINT64_MAX).ok());
}

// A temporary file with known bytes, removed at the end.
class TempFile {
 public:
  explicit TempFile(const std::vector<uint8_t>& bytes) {
    char path[] = "/tmp/etmlir_loader_test_XXXXXX";
    int fd = mkstemp(path);
    EXPECT_GE(fd, 0);
    if (!bytes.empty()) {
      EXPECT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    }
    close(fd);
    path_ = path;
  }
  ~TempFile() { unlink(path_.c_str()); }
  const char* path() const { return path_.c_str(); }

 private:
  std::string path_;
};

std::vector<uint8_t> pattern(size_t n) {
  std::vector<uint8_t> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 3);
  return bytes;
}

template <typename Loader>
void expect_reads_back(const char* path, const std::vector<uint8_t>& bytes) {
  Result<Loader> loader = Loader::open(path);
  ASSERT_TRUE(loader.ok()) << loader.error().message();
  EXPECT_EQ(loader->size(), bytes.size());
  Result<FreeableBuffer> all = loader->load(0, bytes.size());
  ASSERT_TRUE(all.ok()) << all.error().message();
  EXPECT_EQ(std::memcmp(all->data(), bytes.data(), bytes.size()), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(all->data()) % 64, 0u);
  Result<FreeableBuffer> middle = loader->load(4096, 100);
  ASSERT_TRUE(middle.ok()) << middle.error().message();
  EXPECT_EQ(std::memcmp(middle->data(), bytes.data() + 4096, 100), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(middle->data()) % 16, 0u);
  Result<FreeableBuffer> past_end = loader->load(bytes.size() - 10, 11);
  ASSERT_FALSE(past_end.ok());
  EXPECT_CONTAINS(past_end.error().message(), "outside the 10000-byte data");
  EXPECT_FALSE(loader->load(UINT64_MAX - 1, 4).ok());
  EXPECT_TRUE(loader->load(bytes.size(), 0).ok());
  // Moving the loader keeps it working.
  Loader moved(static_cast<Loader&&>(loader.get()));
  Result<FreeableBuffer> again = moved.load(1, 3);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(std::memcmp(again->data(), bytes.data() + 1, 3), 0);
}

TEST(FileDataLoader, ReadsBackTheFileBytes) {
  std::vector<uint8_t> bytes = pattern(10000);
  TempFile file(bytes);
  expect_reads_back<FileDataLoader>(file.path(), bytes);
}

TEST(MmapDataLoader, ReadsBackTheFileBytes) {
  std::vector<uint8_t> bytes = pattern(10000);
  TempFile file(bytes);
  expect_reads_back<MmapDataLoader>(file.path(), bytes);
}

template <typename Loader>
void expect_missing_file_error() {
  const char* path = "/tmp/etmlir_no_such_dir/missing_model.pte";
  Result<Loader> loader = Loader::open(path);
  ASSERT_FALSE(loader.ok());
  EXPECT_EQ(loader.error().code(), ErrorCode::Io);
  EXPECT_CONTAINS(loader.error().message(), path);
  EXPECT_CONTAINS(loader.error().message(), "No such file");
}

TEST(FileDataLoader, MissingFileErrorNamesThePath) { expect_missing_file_error<FileDataLoader>(); }
TEST(MmapDataLoader, MissingFileErrorNamesThePath) { expect_missing_file_error<MmapDataLoader>(); }

TEST(FileDataLoader, DirectoryIsNotARegularFile) {
  Result<FileDataLoader> loader = FileDataLoader::open("/tmp");
  ASSERT_FALSE(loader.ok());
  EXPECT_CONTAINS(loader.error().message(), "/tmp is not a regular file");
  Result<MmapDataLoader> mapped = MmapDataLoader::open("/tmp");
  ASSERT_FALSE(mapped.ok());
  EXPECT_CONTAINS(mapped.error().message(), "/tmp is not a regular file");
}

TEST(MmapDataLoader, EmptyFileHasSizeZero) {
  TempFile file({});
  Result<MmapDataLoader> loader = MmapDataLoader::open(file.path());
  ASSERT_TRUE(loader.ok()) << loader.error().message();
  EXPECT_EQ(loader->size(), 0u);
  EXPECT_TRUE(loader->load(0, 0).ok());
  EXPECT_FALSE(loader->load(0, 1).ok());
  Result<FileDataLoader> file_loader = FileDataLoader::open(file.path());
  ASSERT_TRUE(file_loader.ok());
  EXPECT_TRUE(file_loader->load(0, 0).ok());
}

}  // namespace
}  // namespace etmlir
