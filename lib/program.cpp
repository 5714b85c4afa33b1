#include "etmlir/runtime/program.h"

#include <cstdio>
#include <cstring>

#include "etmlir/runtime/method.h"
#include "pte_format.h"

namespace etmlir {
namespace {

using ull = unsigned long long;

const schema::Program& fb(const FreeableBuffer& buffer) { return *schema::GetProgram(buffer.data()); }

const schema::Method& fb_method(const void* method) { return *static_cast<const schema::Method*>(method); }

template <typename V>
size_t count(const V* vector) {
  return vector ? vector->size() : 0;
}

bool tensor_info(const schema::Method& m, const flatbuffers::Vector<int32_t>* indices, size_t i,
                 MethodMeta::TensorInfo* info) {
  if (!indices || i >= indices->size()) return false;
  const schema::EValue* ev = m.values()->Get(static_cast<flatbuffers::uoffset_t>(indices->Get(
      static_cast<flatbuffers::uoffset_t>(i))));
  const schema::Tensor* t = ev->value_as_Tensor();
  if (!t) return false;
  info->dtype = static_cast<ScalarType>(t->dtype());
  info->dim = static_cast<int32_t>(count(t->sizes()));
  info->sizes = t->sizes() ? t->sizes()->data() : nullptr;
  info->dynamic = t->dynamism() == schema::Dynamism::Bounded;
  info->dynamic_dims = t->dynamic_dims() ? reinterpret_cast<const uint8_t*>(t->dynamic_dims()->data()) : nullptr;
  info->planned = t->allocation() != nullptr;
  return true;
}

}  // namespace

// ---- MethodMeta ---------------------------------------------------------------

const char* MethodMeta::name() const { return fb_method(method_).name()->c_str(); }
size_t MethodMeta::num_inputs() const { return count(fb_method(method_).inputs()); }
size_t MethodMeta::num_outputs() const { return count(fb_method(method_).outputs()); }
bool MethodMeta::input_tensor(size_t i, TensorInfo* info) const {
  return tensor_info(fb_method(method_), fb_method(method_).inputs(), i, info);
}
bool MethodMeta::output_tensor(size_t i, TensorInfo* info) const {
  return tensor_info(fb_method(method_), fb_method(method_).outputs(), i, info);
}
size_t MethodMeta::num_arenas() const { return count(fb_method(method_).arenas()); }
uint64_t MethodMeta::arena_size(size_t mem_id) const {
  return fb_method(method_).arenas()->Get(static_cast<flatbuffers::uoffset_t>(mem_id))->size();
}
const char* MethodMeta::arena_name(size_t mem_id) const {
  return fb_method(method_).arenas()->Get(static_cast<flatbuffers::uoffset_t>(mem_id))->name()->c_str();
}
size_t MethodMeta::num_instructions() const { return count(fb_method(method_).instructions()); }
size_t MethodMeta::num_operators() const { return count(fb_method(method_).operators()); }
const char* MethodMeta::operator_name(size_t i, char* buffer, size_t size) const {
  const schema::Operator* op = fb_method(method_).operators()->Get(static_cast<flatbuffers::uoffset_t>(i));
  const char* overload = op->overload() ? op->overload()->c_str() : "";
  std::snprintf(buffer, size, "%s%s%s", op->name()->c_str(), overload[0] ? "." : "", overload);
  return buffer;
}

// ---- Program ------------------------------------------------------------------

Result<Program> Program::load(DataLoader* loader) {
  if (loader == nullptr) return Error::make(ErrorCode::InvalidArgument, "Program::load: no data loader");
  uint64_t file_size = loader->size();
  Result<FreeableBuffer> head = loader->load(0, file_size < pte::kHeaderSize ? file_size : pte::kHeaderSize);
  if (!head.ok()) return head.error();
  pte::Header header;
  ET_CHECK_OK(pte::parse_header(head->bytes(), file_size, &header));
  head->release();

  Result<FreeableBuffer> program = loader->load(header.program_offset, header.program_size);
  if (!program.ok()) return program.error();
  if (reinterpret_cast<uintptr_t>(program->data()) % pte::kProgramAlignment != 0)
    return Error::make(ErrorCode::InvalidArgument,
                       "program bytes are not 8-byte aligned in memory (load the file into an aligned buffer)");
  flatbuffers::Verifier verifier(program->bytes(), program->size());
  if (!schema::ProgramBufferHasIdentifier(program->data()))
    return Error::make(ErrorCode::InvalidProgram, "invalid program: FlatBuffer identifier is not \"%s\"",
                       schema::ProgramIdentifier());
  if (!schema::VerifyProgramBuffer(verifier))
    return Error::make(ErrorCode::InvalidProgram,
                       "invalid program: the FlatBuffers verifier rejected the program (corrupt or truncated)");
  const schema::Program& p = fb(*program);
  if (p.version() > kProgramVersion || p.version() == 0)
    return Error::make(ErrorCode::NotSupported, "program schema version %u; this runtime reads versions 1..%u",
                       p.version(), kProgramVersion);

  // Segments: inside the segment data, aligned.
  size_t num_segments = count(p.segments());
  constexpr size_t kMaxSegments = 4096;
  if (num_segments > kMaxSegments)
    return Error::make(ErrorCode::InvalidProgram, "invalid program: %zu segments (at most %zu)", num_segments,
                       kMaxSegments);
  uint64_t segment_sizes[kMaxSegments];
  for (size_t i = 0; i < num_segments; ++i) {
    const schema::Segment* s = p.segments()->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (!pte::fits(s->offset(), s->size(), header.segment_data_size) || s->offset() % header.segment_alignment != 0)
      return Error::make(ErrorCode::InvalidProgram,
                         "invalid program: segment %zu [%llu, +%llu) is outside the %llu bytes of segment data or "
                         "not %u-aligned",
                         i, static_cast<ull>(s->offset()), static_cast<ull>(s->size()),
                         static_cast<ull>(header.segment_data_size), header.segment_alignment);
    segment_sizes[i] = s->size();
  }
  if (num_segments > 0 && p.constant_segment() >= num_segments)
    return Error::make(ErrorCode::InvalidProgram, "invalid program: constant segment %u of %zu", p.constant_segment(),
                       num_segments);
  if (!p.methods() || p.methods()->size() == 0)
    return Error::make(ErrorCode::InvalidProgram, "invalid program: it has no methods");
  for (size_t i = 0; i < p.methods()->size(); ++i) {
    ET_CHECK_OK(pte::validate_method(p, *p.methods()->Get(static_cast<flatbuffers::uoffset_t>(i)), segment_sizes));
  }

  FreeableBuffer constants;
  if (num_segments > 0) {
    const schema::Segment* s = p.segments()->Get(p.constant_segment());
    Result<FreeableBuffer> loaded = loader->load(header.segment_base_offset + s->offset(), s->size());
    if (!loaded.ok()) return loaded.error();
    constants = static_cast<FreeableBuffer&&>(loaded.get());
    if (s->size() > 0 && reinterpret_cast<uintptr_t>(constants.data()) % 16 != 0)
      return Error::make(ErrorCode::InvalidArgument,
                         "constant segment is not 16-byte aligned in memory (load the file into an aligned buffer)");
  }
  return Program(loader, static_cast<FreeableBuffer&&>(program.get()), static_cast<FreeableBuffer&&>(constants),
                 header.segment_base_offset);
}

uint32_t Program::version() const { return fb(program_).version(); }
size_t Program::num_methods() const { return fb(program_).methods()->size(); }
const char* Program::method_name(size_t i) const {
  if (i >= num_methods()) return nullptr;
  return fb(program_).methods()->Get(static_cast<flatbuffers::uoffset_t>(i))->name()->c_str();
}

int Program::find_method(const char* name) const {
  for (size_t i = 0; i < num_methods(); ++i) {
    if (std::strcmp(method_name(i), name) == 0) return static_cast<int>(i);
  }
  return -1;
}

Result<MethodMeta> Program::method_meta(const char* name) const {
  int i = find_method(name);
  if (i < 0) {
    char names[160] = {0};
    size_t used = 0;
    for (size_t k = 0; k < num_methods() && used < sizeof(names); ++k) {
      int n = std::snprintf(names + used, sizeof(names) - used, "%s'%s'", k ? ", " : "", method_name(k));
      if (n > 0) used += static_cast<size_t>(n);
    }
    return Error::make(ErrorCode::NotFound, "no method '%s' in the program (it has %s)", name, names);
  }
  return MethodMeta(fb(program_).methods()->Get(static_cast<flatbuffers::uoffset_t>(i)), this);
}

Result<FreeableBuffer> Program::load_segment(uint32_t segment, uint64_t offset, uint64_t size) const {
  const schema::Program& p = fb(program_);
  if (segment >= count(p.segments()))
    return Error::make(ErrorCode::InvalidProgram, "segment %u does not exist", segment);
  const schema::Segment* s = p.segments()->Get(segment);
  if (!pte::fits(offset, size, s->size()))
    return Error::make(ErrorCode::InvalidProgram, "bytes [%llu, +%llu) are outside segment %u",
                       static_cast<ull>(offset), static_cast<ull>(size), segment);
  return loader_->load(segment_base_ + s->offset() + offset, size);
}

const char* Program::debug_location(size_t method_index, uint32_t handle) const {
  if (handle == 0 || method_index >= num_methods()) return nullptr;
  const schema::Method* m = fb(program_).methods()->Get(static_cast<flatbuffers::uoffset_t>(method_index));
  for (size_t i = 0; i < count(m->debug_info()); ++i) {
    const schema::DebugEntry* e = m->debug_info()->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (e->handle() == handle) return e->location()->c_str();
  }
  return nullptr;
}

const char* Program::debug_module_path(size_t method_index, uint32_t handle) const {
  if (handle == 0 || method_index >= num_methods()) return nullptr;
  const schema::Method* m = fb(program_).methods()->Get(static_cast<flatbuffers::uoffset_t>(method_index));
  for (size_t i = 0; i < count(m->debug_info()); ++i) {
    const schema::DebugEntry* e = m->debug_info()->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (e->handle() != handle) continue;
    const flatbuffers::String* path = e->module_path();  // absent in files written before the field
    return path != nullptr && path->size() != 0 ? path->c_str() : nullptr;
  }
  return nullptr;
}

}  // namespace etmlir
