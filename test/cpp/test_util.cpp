#include "test_util.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

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

Error load_forward(const std::string& file, LoaderKind kind, const BackendRegistry* backends, LoadedMethod* out) {
  out->program = std::make_unique<LoadedProgram>();
  if (Error e = load_program(fixture_path(file), kind, out->program.get())) return e;
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

Error load_program(const std::string& path, LoaderKind kind, LoadedProgram* out) {
  switch (kind) {
    case LoaderKind::Buffer: {
      std::vector<uint8_t> bytes = read_file(path);
      if (bytes.empty()) return Error::make(ErrorCode::Io, "cannot read %s", path.c_str());
      out->bytes = std::make_unique<AlignedBuffer>(bytes.size());
      std::memcpy(out->bytes->data(), bytes.data(), bytes.size());
      out->loader = std::make_unique<BufferDataLoader>(out->bytes->data(), bytes.size());
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
  Result<Program> program = Program::load(out->loader.get());
  if (!program.ok()) return program.error();
  out->program = std::make_unique<Program>(static_cast<Program&&>(program.get()));
  return Error::ok();
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

}  // namespace test
}  // namespace etmlir
