// Helpers shared by the C++ tests: fixture files, aligned buffers, the full
// kernel registry, memory for a method sized from its MethodMeta (and its
// delegates' backends), a writer for hand-made .pte files (FlatBuffer + 64-byte
// header + segments), and delegate payloads (the shared payload header; `cpu`
// payloads around the test build's fixture shared objects).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "etmlir/runtime/backend.h"
#include "etmlir/runtime/data_loader.h"
#include "etmlir/runtime/kernel.h"
#include "etmlir/runtime/memory.h"
#include "etmlir/runtime/method.h"
#include "etmlir/runtime/program.h"

namespace etmlir {
namespace test {

// $ETMLIR_TEST_PTE_DIR ("" when unset): where make_fixtures.py wrote the .pte files.
std::string fixture_dir();
// fixture_dir()/name.
std::string fixture_path(const std::string& name);

// Skips the test when the fixtures are not available.
#define ETMLIR_REQUIRE_FIXTURES()                                                                    \
  do {                                                                                               \
    if (::etmlir::test::fixture_dir().empty())                                                      \
      GTEST_SKIP() << "ETMLIR_TEST_PTE_DIR is not set (scripts/cpp_test.sh writes and sets it)";   \
  } while (0)

// EXPECT_CONTAINS(message, "needle"): gtest's substring check (no gmock needed).
#define EXPECT_CONTAINS(haystack, needle) EXPECT_PRED_FORMAT2(::testing::IsSubstring, needle, haystack)
#define ASSERT_CONTAINS(haystack, needle) ASSERT_PRED_FORMAT2(::testing::IsSubstring, needle, haystack)

// The whole file (empty vector if it cannot be read; the caller asserts).
std::vector<uint8_t> read_file(const std::string& path);

// Zeroed heap memory aligned to 64 bytes (data() is never null).
class AlignedBuffer {
 public:
  explicit AlignedBuffer(size_t size);
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer();
  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_;
  size_t size_;
};

// The prim kernels and every portable kernel, registered once.
const KernelRegistry& all_kernels();

// Memory for one method: method allocator (MethodMeta::method_allocator_bytes(backends):
// the method's tables and its delegates' state; when that fails, the method's own
// bytes + kSpareMethodBytes, so that load_method reports the payload's error rather
// than running out of memory), one 64-byte-aligned buffer per arena, a temp allocator.
constexpr size_t kSpareMethodBytes = size_t{16} << 20;
struct MethodMemory {
  MethodMemory(const MethodMeta& meta, size_t temp_bytes, const BackendRegistry* backends = nullptr);
  std::unique_ptr<AlignedBuffer> method_buffer;
  std::unique_ptr<AlignedBuffer> temp_buffer;
  std::vector<std::unique_ptr<AlignedBuffer>> arena_buffers;
  std::vector<Span<uint8_t>> arenas;
  MemoryAllocator method_allocator;
  MemoryAllocator temp_allocator;
  MemoryManager manager;
};

constexpr size_t kDefaultTempBytes = size_t{16} << 20;

// A loaded Program that owns its bytes and loader.
struct LoadedProgram {
  std::unique_ptr<AlignedBuffer> bytes;  // BufferDataLoader only
  std::unique_ptr<DataLoader> loader;
  std::unique_ptr<Program> program;
};
enum class LoaderKind { Buffer, File, Mmap };
const char* loader_kind_name(LoaderKind kind);
// Loads `path` through `kind`; on failure returns the Error (program is null).
Error load_program(const std::string& path, LoaderKind kind, LoadedProgram* out);

// A fixture's program, its memory (default temp bytes) and, when it loaded, its "forward" method.
struct LoadedMethod {
  std::unique_ptr<LoadedProgram> program;
  std::unique_ptr<MethodMemory> memory;
  std::unique_ptr<Method> method;
  Error error;  // load_method's error, when method is null
};
// Loads fixture `file` through `kind`, then its "forward" method with every kernel,
// `backends` and `trust` (native_code.h: nullptr refuses "cpu" delegates). Returns the error if
// the program (or its MethodMeta) does not load; a method that does not load leaves out->method
// null and its error in out->error.
Error load_forward(const std::string& file, LoaderKind kind, const BackendRegistry* backends, LoadedMethod* out,
                   const NativeCodeTrust* trust = nullptr);
// The same for a program held in memory (copied into an aligned buffer, read by BufferDataLoader).
Error load_forward(const std::vector<uint8_t>& pte, const BackendRegistry* backends, LoadedMethod* out,
                   const NativeCodeTrust* trust = nullptr);

// A NativeCodeTrust that allows native code: the tests' own "cpu" payloads.
const NativeCodeTrust* allow_native_code();

// A reference input/output pair written by make_fixtures.py.
struct Reference {
  std::vector<int64_t> input_shape;
  std::vector<float> input;
  std::vector<int64_t> expected_shape;
  std::vector<float> expected;
};
// Reads <name>.input.bin, <name>.expected.bin, <name>.shapes.txt; false if missing.
bool read_reference(const std::string& name, Reference* out);

// ---- Hand-made .pte files -----------------------------------------------------

constexpr uint32_t kSegmentAlignment = 4096;
// Offsets (from the segment base) of `segments` laid out one after another, each aligned.
std::vector<uint64_t> segment_offsets(const std::vector<std::vector<uint8_t>>& segments,
                                      uint32_t alignment = kSegmentAlignment);
// The container: 64-byte "ETXH" header, the FlatBuffer at 64, then the segments.
std::vector<uint8_t> pack_pte(const uint8_t* flatbuffer, size_t flatbuffer_size,
                              const std::vector<std::vector<uint8_t>>& segments,
                              uint32_t alignment = kSegmentAlignment);

// A signature of a delegate's payload as the program stores it (Delegate.signatures).
struct PteSignature {
  std::vector<uint8_t> public_key;
  std::vector<uint8_t> signature;
};

// A program whose method "forward" is one DelegateCall of `backend` with
// `payload`: x (a planned float32 input of `sizes`) -> live-out y (a planned
// float32 output of the same sizes); the delegate carries `signatures`.
std::vector<uint8_t> one_delegate_program(const char* backend, const std::vector<uint8_t>& payload,
                                          const std::vector<int64_t>& sizes,
                                          const std::vector<PteSignature>& signatures = {});

// ---- Delegate payloads: the shared header (runtime/schema/payload.fbs) + a body ----------

struct PayloadTensorSpec {
  ScalarType dtype;
  std::vector<int64_t> sizes;  // -1: dynamic
};

// The header's fields. write_payload computes body_offset, body_size and body_crc32 unless
// the *_override fields say otherwise (to make corrupt payloads).
struct PayloadFields {
  uint32_t format_version = 1;
  std::string backend_id;
  std::string body_format;
  uint32_t body_version = 1;
  std::string arch;
  uint64_t cpu_features = 0;
  std::vector<PayloadTensorSpec> inputs;
  std::vector<PayloadTensorSpec> outputs;
  std::vector<std::pair<std::string, std::string>> entry_points;  // name -> symbol
  std::vector<uint32_t> debug_handles;                           // the map: id h covers {h}
  uint64_t scratch_bytes = 0;
  int64_t body_offset_override = -1;
  int64_t body_size_override = -1;
  int64_t body_crc32_override = -1;
};

// u32 size prefix + the PayloadHeader FlatBuffer ("ETPH"), zeros to a 64-byte boundary, `body`.
std::vector<uint8_t> write_payload(const PayloadFields& header, const std::vector<uint8_t>& body);
// Where a payload's body starts (its header's body_offset).
size_t payload_body_offset(const std::vector<uint8_t>& payload);

// CRC-32 as zlib.crc32 computes it (PayloadHeader.body_crc32), bit by bit.
uint64_t crc32(const uint8_t* data, size_t size);

// ---- `cpu` delegate payloads (runtime/backends/cpu/PAYLOAD.md) ------------------------

using CpuTensorSpec = PayloadTensorSpec;

// A cpu payload's header fields; write_cpu_payload turns them into PayloadFields
// (backend "cpu", body_format "elf-shared-object", entry points "forward" and "shapes").
struct CpuPayloadHeader {
  std::string arch;  // default: the machine the tests run on ("x86_64", "aarch64")
  uint64_t cpu_features = 0;
  uint64_t arena_bytes = 4096;
  uint32_t abi_version = 1;  // body_version
  std::string entry;         // "forward"; none when empty
  std::string shapes_entry;  // "shapes"; none when empty
  std::vector<CpuTensorSpec> inputs;
  std::vector<CpuTensorSpec> outputs;
  std::vector<uint32_t> debug_handles;
};

PayloadFields cpu_payload_fields(const CpuPayloadHeader& header);
// The shared header + `so`.
std::vector<uint8_t> write_cpu_payload(const CpuPayloadHeader& header, const std::vector<uint8_t>& so);

// The shared objects test/cpp/fixtures/cpu_payload_fixture.c builds (CMakeLists.txt).
enum class CpuFixture {
  Plain,
  Abi2,             // etmlir_cpu_payload_abi() returns 2
  NoHeapFallbacks,  // does not export etmlir_cpu_heap_fallbacks
};
std::vector<uint8_t> cpu_fixture_bytes(CpuFixture which = CpuFixture::Plain);

// init() then destroy() of one payload on `backend`, with a method allocator of the size its
// method_allocator_bytes asks: the first error either gives, if any (the backends' bad-payload tests).
Error init_and_destroy(Backend& backend, const std::vector<uint8_t>& payload);

}  // namespace test
}  // namespace etmlir
