#include "test_util.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

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

MethodMemory::MethodMemory(const MethodMeta& meta, size_t temp_bytes) {
  method_buffer = std::make_unique<AlignedBuffer>(meta.method_allocator_bytes());
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
Error load_forward_method(const BackendRegistry* backends, LoadedMethod* out) {
  Result<MethodMeta> meta = out->program->program->method_meta("forward");
  if (!meta.ok()) return meta.error();
  out->memory = std::make_unique<MethodMemory>(*meta, kDefaultTempBytes);
  Result<Method> method =
      out->program->program->load_method("forward", &out->memory->manager, &all_kernels(), backends);
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

Error load_forward(const std::string& file, LoaderKind kind, const BackendRegistry* backends, LoadedMethod* out) {
  out->program = std::make_unique<LoadedProgram>();
  if (Error e = load_program(fixture_path(file), kind, out->program.get())) return e;
  return load_forward_method(backends, out);
}

Error load_forward(const std::vector<uint8_t>& pte, const BackendRegistry* backends, LoadedMethod* out) {
  out->program = std::make_unique<LoadedProgram>();
  buffer_loader(pte, out->program.get());
  if (Error e = load_from_loader(out->program.get())) return e;
  return load_forward_method(backends, out);
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
                                          const std::vector<int64_t>& sizes) {
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
  std::vector<flatbuffers::Offset<fbs::Delegate>> delegates = {
      fbs::CreateDelegateDirect(fbb, backend, nullptr, &payload_at)};
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
  // Bit by bit (the backend uses tables): zlib's crc32.
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) {
    c ^= data[i];
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
  }
  return c ^ 0xFFFFFFFFu;
}

std::vector<uint8_t> write_cpu_payload(const CpuPayloadHeader& h, const std::vector<uint8_t>& so) {
  std::vector<uint8_t> header(208, 0);
  auto append_u32 = [&header](uint32_t v) {
    header.resize(header.size() + 4);
    put_u32(&header[header.size() - 4], v);
  };
  auto append_u64 = [&header](uint64_t v) {
    header.resize(header.size() + 8);
    put_u64(&header[header.size() - 8], v);
  };
  for (const std::vector<CpuTensorSpec>* group : {&h.inputs, &h.outputs}) {
    for (const CpuTensorSpec& spec : *group) {
      append_u32(static_cast<uint32_t>(static_cast<int32_t>(spec.dtype)));
      append_u32(static_cast<uint32_t>(spec.sizes.size()));
      for (int64_t s : spec.sizes) append_u64(static_cast<uint64_t>(s));
    }
  }
  for (uint32_t handle : h.debug_handles) append_u32(handle);
  header.resize((header.size() + 63) / 64 * 64, 0);

#if defined(__x86_64__)
  const char* machine = "x86_64";
#elif defined(__aarch64__)
  const char* machine = "aarch64";
#else
  const char* machine = "unknown";
#endif
  std::string arch = h.arch.empty() ? machine : h.arch;
  std::memcpy(&header[0], "ETMLCPU1", 8);
  put_u32(&header[8], static_cast<uint32_t>(header.size()));
  put_u32(&header[12], h.format_version);
  std::memcpy(&header[16], arch.data(), arch.size() < 16 ? arch.size() : 16);
  put_u64(&header[32], h.cpu_features);
  put_u64(&header[40], so.size());
  put_u64(&header[48], crc32(so.data(), so.size()));
  put_u64(&header[56], h.arena_bytes);
  put_u32(&header[64], static_cast<uint32_t>(h.inputs.size()));
  put_u32(&header[68], static_cast<uint32_t>(h.outputs.size()));
  put_u32(&header[72], static_cast<uint32_t>(h.debug_handles.size()));
  put_u32(&header[76], h.abi_version);
  std::memcpy(&header[80], h.entry.data(), h.entry.size() < 64 ? h.entry.size() : 64);
  std::memcpy(&header[144], h.shapes_entry.data(), h.shapes_entry.size() < 64 ? h.shapes_entry.size() : 64);
  header.insert(header.end(), so.begin(), so.end());
  return header;
}

std::vector<uint8_t> cpu_fixture_bytes(CpuFixture which) {
  switch (which) {
    case CpuFixture::Plain: return read_file(ETMLIR_CPU_FIXTURE);
    case CpuFixture::Abi2: return read_file(ETMLIR_CPU_FIXTURE_ABI2);
    case CpuFixture::NoHeapFallbacks: return read_file(ETMLIR_CPU_FIXTURE_NO_HEAP_FALLBACKS);
  }
  return {};
}

}  // namespace test
}  // namespace etmlir
