// Semantic checks of a verified FlatBuffer: everything the FlatBuffers
// verifier cannot know (indices in range, byte counts consistent, data inside
// its segment). After these pass, Method loading can index without checks.
#include <cstdio>
#include <cstring>

#include "etmlir/runtime/native_code.h"
#include "etmlir/runtime/tensor.h"
#include "pte_format.h"

namespace etmlir {
namespace pte {
namespace {

uint32_t read_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

uint64_t read_u64(const uint8_t* p) {
  return static_cast<uint64_t>(read_u32(p)) | static_cast<uint64_t>(read_u32(p + 4)) << 32;
}

using ull = unsigned long long;

Error bad(const schema::Method& method, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
Error bad(const schema::Method& method, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  Error error = Error::vmake(ErrorCode::InvalidProgram, fmt, args);
  va_end(args);
  error.prefix("invalid program: method '%s'", method.name() ? method.name()->c_str() : "?");
  return error;
}

template <typename V>
size_t count(const V* vector) {
  return vector ? vector->size() : 0;
}

Error check_tensor(const schema::Method& method, const schema::Tensor& t, size_t index, const uint64_t* segment_sizes,
                   size_t num_segments, uint32_t constant_segment) {
  if (!is_known_dtype(static_cast<int8_t>(t.dtype())))
    return bad(method, "value %zu: tensor dtype %d is not a known ScalarType", index, static_cast<int>(t.dtype()));
  ScalarType dtype = static_cast<ScalarType>(t.dtype());
  size_t dim = count(t.sizes());
  if (dim > static_cast<size_t>(kMaxDims))
    return bad(method, "value %zu: tensor has %zu dims; this runtime supports up to %d", index, dim, kMaxDims);
  // The verifier aligns a vector's length, not its 8-byte elements; an
  // unaligned int64 load faults on some targets (and is UB everywhere).
  if (t.sizes() && reinterpret_cast<uintptr_t>(t.sizes()->data()) % alignof(int64_t) != 0)
    return bad(method, "value %zu: tensor sizes are not 8-byte aligned", index);
  if (count(t.dim_order()) != dim)
    return bad(method, "value %zu: tensor has %zu sizes but %zu dim_order entries", index, dim, count(t.dim_order()));
  uint64_t numel = 1;
  for (size_t d = 0; d < dim; ++d) {
    int64_t s = t.sizes()->Get(static_cast<flatbuffers::uoffset_t>(d));
    if (s < 0) return bad(method, "value %zu: tensor size %zu is %lld", index, d, static_cast<long long>(s));
    if (s != 0 && numel > (UINT64_MAX >> 1) / static_cast<uint64_t>(s))
      return bad(method, "value %zu: tensor element count overflows", index);
    numel *= static_cast<uint64_t>(s);
    if (t.dim_order()->Get(static_cast<flatbuffers::uoffset_t>(d)) != d)
      return Error::make(ErrorCode::NotSupported,
                         "method '%s' value %zu: tensor dim_order is not contiguous (only identity dim orders run)",
                         method.name() ? method.name()->c_str() : "?", index);
  }
  uint64_t elem = element_size(dtype);
  if (numel > UINT64_MAX / elem) return bad(method, "value %zu: tensor byte count overflows", index);
  if (t.nbytes() != numel * elem)
    return bad(method, "value %zu: tensor nbytes is %llu but %s of its sizes is %llu bytes", index,
               static_cast<ull>(t.nbytes()), dtype_name(dtype), static_cast<ull>(numel * elem));
  if (t.dynamic_dims() && t.dynamic_dims()->size() != dim)
    return bad(method, "value %zu: tensor has %zu sizes but %u dynamic_dims entries", index, dim,
               t.dynamic_dims()->size());
  if (t.dynamism() != schema::Dynamism::Static && t.dynamism() != schema::Dynamism::Bounded)
    return bad(method, "value %zu: unknown dynamism %d", index, static_cast<int>(t.dynamism()));
  if (t.allocation() && t.constant())
    return bad(method, "value %zu: tensor is both planned (arena) and constant", index);
  if (const schema::Allocation* a = t.allocation()) {
    size_t arenas = count(method.arenas());
    if (a->mem_id() >= arenas)
      return bad(method, "value %zu: tensor is planned in arena %u; the method has %zu arenas", index, a->mem_id(),
                 arenas);
    uint64_t arena_size = method.arenas()->Get(a->mem_id())->size();
    if (!fits(a->offset(), t.nbytes(), arena_size))
      return bad(method, "value %zu: tensor bytes [%llu, +%llu) overflow arena %u (%llu bytes)", index,
                 static_cast<ull>(a->offset()), static_cast<ull>(t.nbytes()), a->mem_id(), static_cast<ull>(arena_size));
    if (a->offset() % elem != 0)
      return bad(method, "value %zu: tensor offset %llu in arena %u is not %llu-byte aligned", index,
                 static_cast<ull>(a->offset()), a->mem_id(), static_cast<ull>(elem));
  }
  if (const schema::DataLocation* c = t.initial()) {
    // Program state: planned memory the runtime fills from the constant segment.
    if (!t.allocation())
      return bad(method, "value %zu: tensor has initial (state) data but no planned memory", index);
    if (t.dynamism() != schema::Dynamism::Static)
      return bad(method, "value %zu: a state tensor must have static sizes", index);
    if (c->segment() != constant_segment || c->segment() >= num_segments)
      return bad(method, "value %zu: state data is in segment %u; constants live in segment %u of %zu", index,
                 c->segment(), constant_segment, num_segments);
    if (c->size() != t.nbytes())
      return bad(method, "value %zu: state data holds %llu bytes; the tensor needs %llu", index,
                 static_cast<ull>(c->size()), static_cast<ull>(t.nbytes()));
    if (!fits(c->offset(), c->size(), segment_sizes[c->segment()]))
      return bad(method, "value %zu: state data [%llu, +%llu) lies outside segment %u (%llu bytes)", index,
                 static_cast<ull>(c->offset()), static_cast<ull>(c->size()), c->segment(),
                 static_cast<ull>(segment_sizes[c->segment()]));
  }
  if (const schema::DataLocation* c = t.constant()) {
    if (c->segment() != constant_segment || c->segment() >= num_segments)
      return bad(method, "value %zu: constant tensor is in segment %u; constants live in segment %u of %zu", index,
                 c->segment(), constant_segment, num_segments);
    if (c->size() != t.nbytes())
      return bad(method, "value %zu: constant holds %llu bytes; the tensor needs %llu", index,
                 static_cast<ull>(c->size()), static_cast<ull>(t.nbytes()));
    if (!fits(c->offset(), c->size(), segment_sizes[c->segment()]))
      return bad(method, "value %zu: constant bytes [%llu, +%llu) lie outside segment %u (%llu bytes)", index,
                 static_cast<ull>(c->offset()), static_cast<ull>(c->size()), c->segment(),
                 static_cast<ull>(segment_sizes[c->segment()]));
    if (c->offset() % elem != 0)
      return bad(method, "value %zu: constant offset %llu is not %llu-byte aligned", index,
                 static_cast<ull>(c->offset()), static_cast<ull>(elem));
  }
  return Error::ok();
}

// `kind` of value `i` must be `want` (or None when `allow_none`).
bool value_is(const schema::Method& method, int32_t i, schema::Value want) {
  size_t n = count(method.values());
  if (i < 0 || static_cast<size_t>(i) >= n) return false;
  return method.values()->Get(static_cast<flatbuffers::uoffset_t>(i))->value_type() == want;
}

Error check_indices(const schema::Method& method, const flatbuffers::Vector<int32_t>* items, const char* what,
                    size_t where, bool allow_minus_one) {
  size_t n = count(method.values());
  if (!items) return Error::ok();
  for (flatbuffers::uoffset_t k = 0; k < items->size(); ++k) {
    int32_t v = items->Get(k);
    if (v == -1 && allow_minus_one) continue;
    if (v < 0 || static_cast<size_t>(v) >= n)
      return bad(method, "%s %zu: entry %u refers to value %d; the method has %zu values", what, where, k, v, n);
  }
  return Error::ok();
}

}  // namespace

// Checks the header field by field; each message names the field (and its
// byte offset in the header) so that a hand-edited or truncated file can be
// fixed. et-verify-pte reports these same messages.
Error parse_header(const uint8_t* bytes, uint64_t actual_size, Header* h) {
  if (actual_size < kHeaderSize)
    return Error::make(ErrorCode::InvalidProgram, "invalid program: %llu bytes is too short for the %llu-byte header",
                       static_cast<ull>(actual_size), static_cast<ull>(kHeaderSize));
  if (std::memcmp(bytes, "ETXH", 4) != 0) {
    char shown[20];
    int n = 0;
    for (int i = 0; i < 4; ++i) {
      uint8_t c = bytes[i];
      bool plain = c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
      size_t room = sizeof(shown) - static_cast<size_t>(n);
      n += plain ? std::snprintf(shown + n, room, "%c", c) : std::snprintf(shown + n, room, "\\x%02x", c);
    }
    return Error::make(ErrorCode::InvalidProgram,
                       "invalid program: header magic (bytes 0..3) is \"%s\", not \"ETXH\": not an etmlir .pte", shown);
  }
  h->header_version = read_u32(bytes + 4);
  h->header_size = read_u32(bytes + 8);
  h->segment_alignment = read_u32(bytes + 12);
  h->program_offset = read_u64(bytes + 16);
  h->program_size = read_u64(bytes + 24);
  h->segment_base_offset = read_u64(bytes + 32);
  h->segment_data_size = read_u64(bytes + 40);
  h->file_size = read_u64(bytes + 48);
  if (h->header_version != kHeaderVersion)
    return Error::make(ErrorCode::NotSupported, "invalid program: header version %u; this runtime reads version %u",
                       h->header_version, kHeaderVersion);
  if (h->header_size != kHeaderSize)
    return Error::make(ErrorCode::InvalidProgram, "invalid program: header_size is %u, expected %llu", h->header_size,
                       static_cast<ull>(kHeaderSize));
  // Version 1 reserves bytes 56..63: zero now, so that a later version can use them.
  for (uint64_t i = 56; i < kHeaderSize; ++i) {
    if (bytes[i] != 0)
      return Error::make(ErrorCode::InvalidProgram, "invalid program: reserved header byte %llu is %u, expected 0",
                         static_cast<ull>(i), bytes[i]);
  }
  if (h->file_size != actual_size)
    return Error::make(ErrorCode::InvalidProgram,
                       "invalid program: header says the file is %llu bytes but it is %llu (truncated, or bytes appended)",
                       static_cast<ull>(h->file_size), static_cast<ull>(actual_size));
  const char* program_problem = nullptr;
  if (h->program_offset < kHeaderSize) {
    program_problem = "they start inside the header (program_offset, byte 16)";
  } else if (h->program_offset % kProgramAlignment != 0) {
    program_problem = "program_offset (byte 16) is not a multiple of 8 (FlatBuffers reads 8-byte scalars in place)";
  } else if (!fits(h->program_offset, h->program_size, actual_size)) {
    program_problem = "they end past the end of the file (program_size, byte 24)";
  } else if (h->program_size < 8) {
    program_problem = "a FlatBuffer needs at least 8 bytes (program_size, byte 24)";
  } else if (h->program_size >= FLATBUFFERS_MAX_BUFFER_SIZE) {
    program_problem = "FlatBuffers are smaller than 2 GiB (program_size, byte 24)";
  }
  if (program_problem != nullptr)
    return Error::make(ErrorCode::InvalidProgram, "invalid program: program bytes [%llu, +%llu) are not a valid range: %s",
                       static_cast<ull>(h->program_offset), static_cast<ull>(h->program_size), program_problem);
  uint32_t a = h->segment_alignment;
  if (a == 0 || (a & (a - 1)) != 0 || a < 16)
    return Error::make(ErrorCode::InvalidProgram,
                       "invalid program: segment_alignment %u (byte 12) is not a power of two >= 16", a);
  const char* segment_problem = nullptr;
  if (!fits(h->segment_base_offset, h->segment_data_size, actual_size)) {
    segment_problem = "it ends past the end of the file (segment_base_offset, byte 32; segment_data_size, byte 40)";
  } else if (h->segment_base_offset % a != 0) {
    segment_problem = "segment_base_offset (byte 32) is not a multiple of segment_alignment";
  } else if (h->segment_data_size > 0 && h->segment_base_offset < h->program_offset + h->program_size) {
    segment_problem = "it overlaps the program";
  }
  if (segment_problem != nullptr)
    return Error::make(ErrorCode::InvalidProgram, "invalid program: segment data [%llu, +%llu) is not valid: %s",
                       static_cast<ull>(h->segment_base_offset), static_cast<ull>(h->segment_data_size),
                       segment_problem);
  return Error::ok();
}

Error validate_method(const schema::Program& program, const schema::Method& method, const uint64_t* segment_sizes) {
  if (!method.name()) return bad(method, "has no name");
  size_t num_segments = count(program.segments());
  size_t num_values = count(method.values());
  for (size_t i = 0; i < count(method.arenas()); ++i) {
    if (!method.arenas()->Get(static_cast<flatbuffers::uoffset_t>(i))->name())
      return bad(method, "arena %zu has no name", i);
  }
  for (size_t i = 0; i < num_values; ++i) {
    const schema::EValue* ev = method.values()->Get(static_cast<flatbuffers::uoffset_t>(i));
    // The verifier accepts a union whose type is set but whose table is
    // absent; every accessor below (and Method loading) would read through null.
    if (ev->value() == nullptr && ev->value_type() != schema::Value::NONE && ev->value_type() != schema::Value::Null)
      return bad(method, "value %zu has kind %d but no content", i, static_cast<int>(ev->value_type()));
    switch (ev->value_type()) {
      case schema::Value::Null:
      case schema::Value::Int:
      case schema::Value::Double:
      case schema::Value::Bool:
        break;
      case schema::Value::NONE:
        return bad(method, "value %zu has no content", i);
      case schema::Value::String:
        if (!ev->value_as_String()->value()) return bad(method, "value %zu: string has no bytes", i);
        break;
      case schema::Value::Tensor:
        ET_CHECK_OK(check_tensor(method, *ev->value_as_Tensor(), i, segment_sizes, num_segments,
                                 program.constant_segment()));
        break;
      case schema::Value::IntList: {
        const auto* items = ev->value_as_IntList()->items();
        ET_CHECK_OK(check_indices(method, items, "value", i, false));
        for (flatbuffers::uoffset_t k = 0; items && k < items->size(); ++k) {
          if (!value_is(method, items->Get(k), schema::Value::Int))
            return bad(method, "value %zu: int list entry %u (value %d) is not an int", i, k, items->Get(k));
        }
        break;
      }
      case schema::Value::DoubleList: {
        const auto* items = ev->value_as_DoubleList()->items();
        if (items && reinterpret_cast<uintptr_t>(items->data()) % alignof(double) != 0)
          return bad(method, "value %zu: double list items are not 8-byte aligned", i);
        break;
      }
      case schema::Value::BoolList:
        break;
      case schema::Value::TensorList:
      case schema::Value::OptionalTensorList: {
        bool optional = ev->value_type() == schema::Value::OptionalTensorList;
        const auto* items = optional ? ev->value_as_OptionalTensorList()->items() : ev->value_as_TensorList()->items();
        ET_CHECK_OK(check_indices(method, items, "value", i, optional));
        for (flatbuffers::uoffset_t k = 0; items && k < items->size(); ++k) {
          if (items->Get(k) != -1 && !value_is(method, items->Get(k), schema::Value::Tensor))
            return bad(method, "value %zu: tensor list entry %u (value %d) is not a tensor", i, k, items->Get(k));
        }
        break;
      }
      default:
        return bad(method, "value %zu has unknown kind %d", i, static_cast<int>(ev->value_type()));
    }
  }
  ET_CHECK_OK(check_indices(method, method.inputs(), "inputs", 0, false));
  ET_CHECK_OK(check_indices(method, method.outputs(), "outputs", 0, false));
  // A tensor with neither an arena nor a constant gets its memory from the
  // caller, so it must be a method input or output; any other would reach a
  // kernel as a null data pointer.
  auto listed = [](const flatbuffers::Vector<int32_t>* items, size_t value) {
    for (flatbuffers::uoffset_t k = 0; items && k < items->size(); ++k) {
      if (static_cast<size_t>(items->Get(k)) == value) return true;
    }
    return false;
  };
  for (size_t i = 0; i < num_values; ++i) {
    const schema::Tensor* t = method.values()->Get(static_cast<flatbuffers::uoffset_t>(i))->value_as_Tensor();
    if (!t || t->allocation() || t->constant() || t->nbytes() == 0) continue;
    if (!listed(method.inputs(), i) && !listed(method.outputs(), i))
      return bad(method, "value %zu: tensor of %llu bytes has no memory (not planned, not constant) and is not a "
                 "method input or output", i, static_cast<ull>(t->nbytes()));
  }
  // Program state: named tensors with initial data, never a method input or output (the caller
  // would overwrite it, or be handed memory the next execute() writes).
  for (size_t i = 0; i < count(method.state()); ++i) {
    const schema::State* s = method.state()->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (!s->name()) return bad(method, "state %zu has no name", i);
    int32_t v = s->value();
    if (!value_is(method, v, schema::Value::Tensor) ||
        !method.values()->Get(static_cast<flatbuffers::uoffset_t>(v))->value_as_Tensor()->initial())
      return bad(method, "state '%s' refers to value %d, which is not a tensor with initial data", s->name()->c_str(), v);
    if (listed(method.inputs(), static_cast<size_t>(v)) || listed(method.outputs(), static_cast<size_t>(v)))
      return bad(method, "state '%s' (value %d) is also a method input or output", s->name()->c_str(), v);
    for (size_t k = 0; k < i; ++k) {
      const schema::State* other = method.state()->Get(static_cast<flatbuffers::uoffset_t>(k));
      if (other->value() == v || std::strcmp(other->name()->c_str(), s->name()->c_str()) == 0)
        return bad(method, "state '%s' is listed twice", s->name()->c_str());
    }
  }
  for (size_t i = 0; i < count(method.operators()); ++i) {
    const schema::Operator* op = method.operators()->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (!op->name()) return bad(method, "operator %zu has no name", i);
  }
  for (size_t i = 0; i < count(method.delegates()); ++i) {
    const schema::Delegate* d = method.delegates()->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (!d->backend()) return bad(method, "delegate %zu has no backend id", i);
    const schema::DataLocation* p = d->payload();
    if (!p) return bad(method, "delegate %zu has no payload", i);
    if (p->segment() >= num_segments || !fits(p->offset(), p->size(), segment_sizes[p->segment()]))
      return bad(method, "delegate %zu: payload [%llu, +%llu) in segment %u lies outside the program's segments", i,
                 static_cast<ull>(p->offset()), static_cast<ull>(p->size()), p->segment());
    for (size_t k = 0; k < count(d->compile_specs()); ++k) {
      if (!d->compile_specs()->Get(static_cast<flatbuffers::uoffset_t>(k))->key())
        return bad(method, "delegate %zu: compile spec %zu has no key", i, k);
    }
    if (count(d->signatures()) > kMaxPayloadSignatures)
      return bad(method, "delegate %zu has %zu signatures; at most %zu are read", i, count(d->signatures()),
                 kMaxPayloadSignatures);
    for (size_t k = 0; k < count(d->signatures()); ++k) {
      const schema::PayloadSignature* s = d->signatures()->Get(static_cast<flatbuffers::uoffset_t>(k));
      if (count(s->public_key()) != kEd25519PublicKeyBytes || count(s->signature()) != kEd25519SignatureBytes)
        return bad(method, "delegate %zu: signature %zu has a %zu-byte key and a %zu-byte signature (Ed25519: %zu and %zu)",
                   i, k, count(s->public_key()), count(s->signature()), kEd25519PublicKeyBytes, kEd25519SignatureBytes);
    }
  }
  size_t num_instructions = count(method.instructions());
  for (size_t i = 0; i < num_instructions; ++i) {
    const schema::Instruction* ins = method.instructions()->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (ins->kind() == nullptr && ins->kind_type() != schema::InstructionKind::NONE)
      return bad(method, "instruction %zu has kind %d but no content", i, static_cast<int>(ins->kind_type()));
    switch (ins->kind_type()) {
      case schema::InstructionKind::KernelCall: {
        const schema::KernelCall* call = ins->kind_as_KernelCall();
        if (call->op() >= count(method.operators()))
          return bad(method, "instruction %zu calls operator %u; the method has %zu", i, call->op(),
                     count(method.operators()));
        ET_CHECK_OK(check_indices(method, call->args(), "instruction", i, false));
        break;
      }
      case schema::InstructionKind::DelegateCall: {
        const schema::DelegateCall* call = ins->kind_as_DelegateCall();
        if (call->delegate() >= count(method.delegates()))
          return bad(method, "instruction %zu calls delegate %u; the method has %zu", i, call->delegate(),
                     count(method.delegates()));
        if (call->num_outputs() > count(call->args()))
          return bad(method, "instruction %zu: delegate call has %u live-outs but only %zu arguments", i,
                     call->num_outputs(), count(call->args()));
        ET_CHECK_OK(check_indices(method, call->args(), "instruction", i, false));
        break;
      }
      case schema::InstructionKind::JumpFalse: {
        const schema::JumpFalse* jump = ins->kind_as_JumpFalse();
        // A Bool, or a bool tensor (torch.cond's predicate, a while_loop's condition).
        bool bool_tensor = value_is(method, jump->cond(), schema::Value::Tensor) &&
                           method.values()->Get(static_cast<flatbuffers::uoffset_t>(jump->cond()))
                                   ->value_as_Tensor()->dtype() == schema::ScalarType::Bool;
        if (!value_is(method, jump->cond(), schema::Value::Bool) && !bool_tensor)
          return bad(method, "instruction %zu: jump condition (value %d) is not a bool or a bool tensor", i,
                     jump->cond());
        // A backward jump closes a loop (while_loop): like the eager loop, it runs until its
        // condition is false.
        if (jump->target() > num_instructions)
          return bad(method, "instruction %zu jumps to %u; the method has %zu instructions", i, jump->target(),
                     num_instructions);
        break;
      }
      case schema::InstructionKind::Move: {
        const schema::Move* move = ins->kind_as_Move();
        if (move->from() < 0 || static_cast<size_t>(move->from()) >= num_values || move->to() < 0 ||
            static_cast<size_t>(move->to()) >= num_values)
          return bad(method, "instruction %zu moves value %d to %d; the method has %zu values", i, move->from(),
                     move->to(), num_values);
        auto from = method.values()->Get(static_cast<flatbuffers::uoffset_t>(move->from()))->value_type();
        auto to = method.values()->Get(static_cast<flatbuffers::uoffset_t>(move->to()))->value_type();
        if (from != to) return bad(method, "instruction %zu moves between values of different kinds", i);
        if (from == schema::Value::Tensor) {  // copied into the target: same dtype and rank
          const schema::Tensor* a = method.values()->Get(static_cast<flatbuffers::uoffset_t>(move->from()))->value_as_Tensor();
          const schema::Tensor* b = method.values()->Get(static_cast<flatbuffers::uoffset_t>(move->to()))->value_as_Tensor();
          if (a->dtype() != b->dtype() || count(a->sizes()) != count(b->sizes()))
            return bad(method, "instruction %zu moves a tensor into one of another dtype or rank", i);
        }
        break;
      }
      case schema::InstructionKind::Free: {
        int32_t v = ins->kind_as_Free()->value();
        if (v < 0 || static_cast<size_t>(v) >= num_values)
          return bad(method, "instruction %zu frees value %d; the method has %zu values", i, v, num_values);
        break;
      }
      default:
        return bad(method, "instruction %zu has unknown kind %d", i, static_cast<int>(ins->kind_type()));
    }
  }
  for (size_t i = 0; i < count(method.debug_info()); ++i) {
    const schema::DebugEntry* e = method.debug_info()->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (!e->location() || !e->op()) return bad(method, "debug entry %zu lacks a location or op", i);
  }
  return Error::ok();
}

}  // namespace pte
}  // namespace etmlir
