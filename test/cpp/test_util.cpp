#include "test_util.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "etmlir/schema/payload_generated.h"
#include "etmlir/schema/program_generated.h"
#include "portable_kernels.h"

namespace etmlir {
namespace test {

std::string fixture_dir() {
  const char* dir = std::getenv("ETMLIR_TEST_PTE_DIR");
  return dir ? std::string(dir) : std::string();
}

std::string fixture_path(const std::string& name) { return fixture_dir() + "/" + name; }

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

AlignedBuffer::AlignedBuffer(size_t size) : data_(nullptr), size_(size) {
  void* p = nullptr;
  if (posix_memalign(&p, 64, size ? size : 1) != 0) std::abort();
  data_ = static_cast<uint8_t*>(p);
  std::memset(data_, 0, size ? size : 1);
}

AlignedBuffer::~AlignedBuffer() { std::free(data_); }

const KernelRegistry& all_kernels() {
  static const KernelRegistry* registry = [] {
    auto* r = new KernelRegistry();
    if (Error e = register_prim_kernels(*r)) {
      std::fprintf(stderr, "register_prim_kernels: %s\n", e.message());
      std::abort();
    }
    if (Error e = register_portable_kernels(*r)) {
      std::fprintf(stderr, "register_portable_kernels: %s\n", e.message());
      std::abort();
    }
    return r;
  }();
  return *registry;
}

MethodMemory::MethodMemory(const MethodMeta& meta, size_t temp_bytes, const BackendRegistry* backends) {
  Result<size_t> bytes = meta.method_allocator_bytes(backends, &all_kernels());
  method_buffer = std::make_unique<AlignedBuffer>(bytes.ok() ? bytes.get()
                                                             : meta.method_allocator_bytes() + kSpareMethodBytes);
  temp_buffer = std::make_unique<AlignedBuffer>(temp_bytes);
  for (size_t i = 0; i < meta.num_arenas(); ++i) {
    arena_buffers.push_back(std::make_unique<AlignedBuffer>(static_cast<size_t>(meta.arena_size(i))));
    arenas.emplace_back(arena_buffers.back()->data(), static_cast<size_t>(meta.arena_size(i)));
  }
  method_allocator = MemoryAllocator(method_buffer->data(), method_buffer->size());
  temp_allocator = MemoryAllocator(temp_buffer->data(), temp_buffer->size());
  manager.method_allocator = &method_allocator;
  manager.planned_arenas = Span<Span<uint8_t>>(arenas.data(), arenas.size());
  manager.temp_allocator = &temp_allocator;
}

const char* loader_kind_name(LoaderKind kind) {
  switch (kind) {
    case LoaderKind::Buffer: return "buffer";
    case LoaderKind::File: return "file";
    case LoaderKind::Mmap: return "mmap";
  }
  return "?";
}

namespace {

// A program already in out->program: its "forward" method (see load_forward).
Error load_forward_method(const BackendRegistry* backends, LoadedMethod* out, const NativeCodeTrust* trust) {
  Result<MethodMeta> meta = out->program->program->method_meta("forward");
  if (!meta.ok()) return meta.error();
  out->memory = std::make_unique<MethodMemory>(*meta, kDefaultTempBytes, backends);
  Result<Method> method =
      out->program->program->load_method("forward", &out->memory->manager, &all_kernels(), backends, trust);
  if (method.ok()) {
    out->method = std::make_unique<Method>(static_cast<Method&&>(method.get()));
  } else {
    out->error = method.error();
  }
  return Error::ok();
}

// `bytes` into an aligned buffer read by a BufferDataLoader (out->bytes, out->loader).
void buffer_loader(const std::vector<uint8_t>& bytes, LoadedProgram* out) {
  out->bytes = std::make_unique<AlignedBuffer>(bytes.size());
  std::memcpy(out->bytes->data(), bytes.data(), bytes.size());
  out->loader = std::make_unique<BufferDataLoader>(out->bytes->data(), bytes.size());
}

Error load_from_loader(LoadedProgram* out) {
  Result<Program> program = Program::load(out->loader.get());
  if (!program.ok()) return program.error();
  out->program = std::make_unique<Program>(static_cast<Program&&>(program.get()));
  return Error::ok();
}

}  // namespace

Error load_forward(const std::string& file, LoaderKind kind, const BackendRegistry* backends, LoadedMethod* out,
                   const NativeCodeTrust* trust) {
  out->program = std::make_unique<LoadedProgram>();
  if (Error e = load_program(fixture_path(file), kind, out->program.get())) return e;
  return load_forward_method(backends, out, trust);
}

Error load_forward(const std::vector<uint8_t>& pte, const BackendRegistry* backends, LoadedMethod* out,
                   const NativeCodeTrust* trust) {
  out->program = std::make_unique<LoadedProgram>();
  buffer_loader(pte, out->program.get());
  if (Error e = load_from_loader(out->program.get())) return e;
  return load_forward_method(backends, out, trust);
}

const NativeCodeTrust* allow_native_code() {
  static const NativeCodeTrust trust = [] {
    NativeCodeTrust t;
    t.allow_native_code = true;
    return t;
  }();
  return &trust;
}

Error load_program(const std::string& path, LoaderKind kind, LoadedProgram* out) {
  switch (kind) {
    case LoaderKind::Buffer: {
      std::vector<uint8_t> bytes = read_file(path);
      if (bytes.empty()) return Error::make(ErrorCode::Io, "cannot read %s", path.c_str());
      buffer_loader(bytes, out);
      break;
    }
    case LoaderKind::File: {
      Result<FileDataLoader> loader = FileDataLoader::open(path.c_str());
      if (!loader.ok()) return loader.error();
      out->loader = std::make_unique<FileDataLoader>(static_cast<FileDataLoader&&>(loader.get()));
      break;
    }
    case LoaderKind::Mmap: {
      Result<MmapDataLoader> loader = MmapDataLoader::open(path.c_str());
      if (!loader.ok()) return loader.error();
      out->loader = std::make_unique<MmapDataLoader>(static_cast<MmapDataLoader&&>(loader.get()));
      break;
    }
  }
  return load_from_loader(out);
}

namespace {

bool read_floats(const std::string& path, std::vector<float>* out) {
  std::vector<uint8_t> bytes = read_file(path);
  if (bytes.empty() || bytes.size() % sizeof(float) != 0) return false;
  out->resize(bytes.size() / sizeof(float));
  std::memcpy(out->data(), bytes.data(), bytes.size());
  return true;
}

}  // namespace

bool read_reference(const std::string& name, Reference* out) {
  std::ifstream shapes(fixture_path(name + ".shapes.txt"));
  if (!shapes) return false;
  std::string line;
  while (std::getline(shapes, line)) {
    std::istringstream words(line);
    std::string which;
    words >> which;
    std::vector<int64_t>* shape = which == "input" ? &out->input_shape
                                  : which == "expected" ? &out->expected_shape
                                                        : nullptr;
    if (shape == nullptr) continue;
    int64_t d;
    while (words >> d) shape->push_back(d);
  }
  return read_floats(fixture_path(name + ".input.bin"), &out->input) &&
         read_floats(fixture_path(name + ".expected.bin"), &out->expected);
}

std::vector<uint64_t> segment_offsets(const std::vector<std::vector<uint8_t>>& segments, uint32_t alignment) {
  std::vector<uint64_t> offsets;
  uint64_t cursor = 0;
  for (const auto& s : segments) {
    cursor = (cursor + alignment - 1) / alignment * alignment;
    offsets.push_back(cursor);
    cursor += s.size();
  }
  return offsets;
}

namespace {
void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void put_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
}  // namespace

std::vector<uint8_t> pack_pte(const uint8_t* flatbuffer, size_t flatbuffer_size,
                              const std::vector<std::vector<uint8_t>>& segments, uint32_t alignment) {
  std::vector<uint64_t> offsets = segment_offsets(segments, alignment);
  uint64_t data_size = segments.empty() ? 0 : offsets.back() + segments.back().size();
  uint64_t program_offset = 64;
  uint64_t base = (program_offset + flatbuffer_size + alignment - 1) / alignment * alignment;
  std::vector<uint8_t> out(static_cast<size_t>(base + data_size), 0);
  std::memcpy(out.data(), "ETXH", 4);
  put_u32(&out[4], 1);
  put_u32(&out[8], 64);
  put_u32(&out[12], alignment);
  put_u64(&out[16], program_offset);
  put_u64(&out[24], flatbuffer_size);
  put_u64(&out[32], base);
  put_u64(&out[40], data_size);
  put_u64(&out[48], out.size());
  std::memcpy(&out[program_offset], flatbuffer, flatbuffer_size);
  for (size_t i = 0; i < segments.size(); ++i) {
    if (!segments[i].empty()) std::memcpy(&out[base + offsets[i]], segments[i].data(), segments[i].size());
  }
  return out;
}

std::vector<uint8_t> one_delegate_program(const char* backend, const std::vector<uint8_t>& payload,
                                          const std::vector<int64_t>& sizes,
                                          const std::vector<PteSignature>& signatures) {
  namespace fbs = etmlir::schema;
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<uint8_t> dim_order(sizes.size());
  for (size_t d = 0; d < sizes.size(); ++d) dim_order[d] = static_cast<uint8_t>(d);
  uint64_t nbytes = sizeof(float);
  for (int64_t s : sizes) nbytes *= static_cast<uint64_t>(s);
  uint64_t slot = (nbytes + 63) / 64 * 64;
  fbs::Allocation x_at(0, 0);
  fbs::Allocation y_at(0, slot);
  fbs::DataLocation payload_at(1, 0, payload.size());
  auto tensor = [&](const fbs::Allocation* a) {
    auto t = fbs::CreateTensorDirect(fbb, fbs::ScalarType::Float, &sizes, &dim_order, fbs::Dynamism::Static, a,
                                     nullptr, nbytes);
    return fbs::CreateEValue(fbb, fbs::Value::Tensor, t.Union());
  };
  std::vector<flatbuffers::Offset<fbs::EValue>> values = {tensor(&x_at), tensor(&y_at)};
  std::vector<int32_t> args = {0, 1};
  auto call = fbs::CreateDelegateCallDirect(fbb, 0, &args, 1);
  std::vector<flatbuffers::Offset<fbs::Instruction>> instructions = {
      fbs::CreateInstruction(fbb, fbs::InstructionKind::DelegateCall, call.Union(), 0)};
  std::vector<flatbuffers::Offset<fbs::PayloadSignature>> signature_tables;
  for (const PteSignature& s : signatures)
    signature_tables.push_back(fbs::CreatePayloadSignatureDirect(fbb, &s.public_key, &s.signature));
  std::vector<flatbuffers::Offset<fbs::Delegate>> delegates = {fbs::CreateDelegateDirect(
      fbb, backend, nullptr, &payload_at, signatures.empty() ? nullptr : &signature_tables)};
  std::vector<flatbuffers::Offset<fbs::Arena>> arenas = {fbs::CreateArenaDirect(fbb, "planned", 2 * slot)};
  std::vector<int32_t> inputs = {0};
  std::vector<int32_t> outputs = {1};
  auto method = fbs::CreateMethodDirect(fbb, "forward", &values, &inputs, &outputs, &instructions, nullptr,
                                        &delegates, &arenas);
  std::vector<std::vector<uint8_t>> segments(2);
  segments[0].assign(8, 0);  // the (unused) constant segment
  segments[1] = payload;
  std::vector<uint64_t> offsets = segment_offsets(segments);
  std::vector<flatbuffers::Offset<fbs::Segment>> segment_table = {
      fbs::CreateSegment(fbb, offsets[0], segments[0].size()), fbs::CreateSegment(fbb, offsets[1], payload.size())};
  std::vector<flatbuffers::Offset<fbs::Method>> methods = {method};
  fbb.Finish(fbs::CreateProgramDirect(fbb, 1, &methods, &segment_table, 0), fbs::ProgramIdentifier());
  return pack_pte(fbb.GetBufferPointer(), fbb.GetSize(), segments);
}

uint64_t crc32(const uint8_t* data, size_t size) {
  // Bit by bit (the runtime uses tables): zlib's crc32.
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) {
    c ^= data[i];
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
  }
  return c ^ 0xFFFFFFFFu;
}

std::vector<uint8_t> write_payload(const PayloadFields& h, const std::vector<uint8_t>& body) {
  namespace ps = etmlir::payload_schema;
  // The FlatBuffer's size does not depend on a nonzero body_offset's value: build it once with
  // a placeholder (64) to learn the size, then again with the real offset.
  auto build = [&](uint64_t body_offset) {
    flatbuffers::FlatBufferBuilder b;
    std::vector<flatbuffers::Offset<ps::TensorSpec>> in, out;
    for (const PayloadTensorSpec& spec : h.inputs)
      in.push_back(ps::CreateTensorSpecDirect(b, static_cast<int8_t>(spec.dtype), &spec.sizes));
    for (const PayloadTensorSpec& spec : h.outputs)
      out.push_back(ps::CreateTensorSpecDirect(b, static_cast<int8_t>(spec.dtype), &spec.sizes));
    std::vector<flatbuffers::Offset<ps::EntryPoint>> e;
    for (const auto& entry : h.entry_points)
      e.push_back(ps::CreateEntryPointDirect(b, entry.first.c_str(), entry.second.c_str()));
    std::vector<flatbuffers::Offset<ps::DebugHandles>> m;
    for (uint32_t handle : h.debug_handles) {
      std::vector<uint32_t> covered = {handle};
      m.push_back(ps::CreateDebugHandlesDirect(b, handle, &covered));
    }
    uint64_t size = h.body_size_override >= 0 ? static_cast<uint64_t>(h.body_size_override) : body.size();
    uint32_t crc = h.body_crc32_override >= 0 ? static_cast<uint32_t>(h.body_crc32_override)
                                              : static_cast<uint32_t>(crc32(body.data(), body.size()));
    auto root = ps::CreatePayloadHeaderDirect(
        b, h.format_version, h.backend_id.c_str(), h.body_format.c_str(), h.body_version, h.arch.c_str(),
        h.cpu_features, &in, &out, &e, &m, h.scratch_bytes, body_offset, size, crc);
    ps::FinishSizePrefixedPayloadHeaderBuffer(b, root);
    return std::vector<uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
  };
  size_t header_size = build(64).size();
  size_t body_offset = (header_size + 63) / 64 * 64;
  std::vector<uint8_t> header =
      build(h.body_offset_override >= 0 ? static_cast<uint64_t>(h.body_offset_override) : body_offset);
  std::vector<uint8_t> out(body_offset + body.size(), 0);
  std::memcpy(out.data(), header.data(), header.size());
  if (!body.empty()) std::memcpy(out.data() + body_offset, body.data(), body.size());
  return out;
}

size_t payload_body_offset(const std::vector<uint8_t>& payload) {
  return static_cast<size_t>(etmlir::payload_schema::GetSizePrefixedPayloadHeader(payload.data())->body_offset());
}

PayloadFields cpu_payload_fields(const CpuPayloadHeader& h) {
#if defined(__x86_64__)
  const char* machine = "x86_64";
#elif defined(__aarch64__)
  const char* machine = "aarch64";
#else
  const char* machine = "unknown";
#endif
  PayloadFields f;
  f.backend_id = "cpu";
  f.body_format = "elf-shared-object";
  f.body_version = h.abi_version;
  f.arch = h.arch.empty() ? machine : h.arch;
  f.cpu_features = h.cpu_features;
  f.inputs = h.inputs;
  f.outputs = h.outputs;
  if (!h.entry.empty()) f.entry_points.emplace_back("forward", h.entry);
  if (!h.shapes_entry.empty()) f.entry_points.emplace_back("shapes", h.shapes_entry);
  f.debug_handles = h.debug_handles;
  f.scratch_bytes = h.arena_bytes;
  return f;
}

std::vector<uint8_t> write_cpu_payload(const CpuPayloadHeader& h, const std::vector<uint8_t>& so) {
  return write_payload(cpu_payload_fields(h), so);
}

std::vector<uint8_t> cpu_fixture_bytes(CpuFixture which) {
#ifdef ETMLIR_CPU_FIXTURE
  switch (which) {
    case CpuFixture::Plain: return read_file(ETMLIR_CPU_FIXTURE);
    case CpuFixture::Abi2: return read_file(ETMLIR_CPU_FIXTURE_ABI2);
    case CpuFixture::NoHeapFallbacks: return read_file(ETMLIR_CPU_FIXTURE_NO_HEAP_FALLBACKS);
  }
#else
  (void)which;  // a build without the "cpu" backend has no fixtures
#endif
  return {};
}

Error init_and_destroy(Backend& backend, const std::vector<uint8_t>& payload) {
  Span<const uint8_t> bytes(payload.data(), payload.size());
  Result<size_t> needed = backend.method_allocator_bytes(BackendInitContext(nullptr, "forward", 0), bytes, {});
  if (!needed.ok()) return needed.error();
  std::vector<uint8_t> memory(*needed + 4096);
  MemoryAllocator allocator(memory.data(), memory.size());
  BackendInitContext context(&allocator, "forward", 0);
  Result<DelegateHandle> handle = backend.init(context, bytes, {});
  if (!handle.ok()) return handle.error();
  backend.destroy(handle.get());
  return Error::ok();
}

}  // namespace test
}  // namespace etmlir
