// The mutation engine of the fuzz tests: see pte_mutator.h.
#include "pte_mutator.h"

#include <cstring>
#include <initializer_list>
#include <set>

#include "etmlir/schema/program_generated.h"

namespace etmlir {
namespace test {
namespace fuzz {
namespace {

namespace fbs = etmlir::schema;

class Mapper {
 public:
  Mapper(const uint8_t* file, FileMap* map) : file_(file), map_(map) {}

  void program(const fbs::Program* p) {
    table(p);
    field(p, fbs::Program::VT_VERSION, 4);
    field(p, fbs::Program::VT_CONSTANT_SEGMENT, 4);
    offset(p, fbs::Program::VT_METHODS);
    offset(p, fbs::Program::VT_SEGMENTS);
    vector(p->segments(), false);
    for (const fbs::Segment* s : each(p->segments())) {
      table(s);
      field(s, fbs::Segment::VT_OFFSET, 8);
      field(s, fbs::Segment::VT_SIZE, 8);
    }
    vector(p->methods(), false);
    for (const fbs::Method* m : each(p->methods())) method(m);
  }

 private:
  template <typename T>
  struct Each {
    const flatbuffers::Vector<flatbuffers::Offset<T>>* v;
    struct It {
      const flatbuffers::Vector<flatbuffers::Offset<T>>* v;
      flatbuffers::uoffset_t i;
      const T* operator*() const { return v->Get(i); }
      It& operator++() {
        ++i;
        return *this;
      }
      bool operator!=(const It& o) const { return i != o.i; }
    };
    It begin() const { return {v, 0}; }
    It end() const { return {v, v ? v->size() : 0}; }
  };
  template <typename T>
  static Each<T> each(const flatbuffers::Vector<flatbuffers::Offset<T>>* v) {
    return {v};
  }

  size_t at(const void* p) const { return static_cast<size_t>(static_cast<const uint8_t*>(p) - file_); }
  static const flatbuffers::Table* as_table(const void* t) { return reinterpret_cast<const flatbuffers::Table*>(t); }

  void table(const void* t) {
    const uint8_t* start = static_cast<const uint8_t*>(t);
    map_->offsets.push_back({at(start), 4});  // soffset to the vtable
    const uint8_t* vtable = start - flatbuffers::ReadScalar<flatbuffers::soffset_t>(start);
    if (!vtables_.insert(vtable).second) return;
    uint16_t size = flatbuffers::ReadScalar<uint16_t>(vtable);
    for (uint16_t i = 0; i < size; i += 2) map_->vtable_entries.push_back({at(vtable + i), 2});
  }
  void field(const void* t, uint16_t vt, uint8_t width) {
    if (const uint8_t* p = as_table(t)->GetAddressOf(vt)) map_->scalars.push_back({at(p), width});
  }
  void union_type(const void* t, uint16_t vt) {
    if (const uint8_t* p = as_table(t)->GetAddressOf(vt)) map_->union_types.push_back({at(p), 1});
  }
  void offset(const void* t, uint16_t vt) {
    if (const uint8_t* p = as_table(t)->GetAddressOf(vt)) map_->offsets.push_back({at(p), 4});
  }
  // A struct field of a table: each member's (offset in the struct, width).
  void struct_field(const void* t, uint16_t vt, std::initializer_list<Location> members) {
    if (const uint8_t* p = as_table(t)->GetAddressOf(vt)) {
      for (const Location& m : members) map_->scalars.push_back({at(p) + m.offset, m.width});
    }
  }
  template <typename V>
  void vector(const V* v, bool elements) {
    if (!v) return;
    map_->lengths.push_back({at(v), 4});
    if (!elements) return;
    for (flatbuffers::uoffset_t i = 0; i < v->size(); ++i) {
      map_->scalars.push_back({at(v->Data() + i * sizeof(typename V::return_type)),
                               static_cast<uint8_t>(sizeof(typename V::return_type))});
    }
  }
  void string(const flatbuffers::String* s) {
    if (s) map_->lengths.push_back({at(s), 4});
  }

  void method(const fbs::Method* m) {
    table(m);
    for (uint16_t vt = fbs::Method::VT_NAME; vt <= fbs::Method::VT_DEBUG_INFO; vt += 2) offset(m, vt);
    string(m->name());
    vector(m->values(), false);
    for (const fbs::EValue* ev : each(m->values())) evalue(ev);
    vector(m->inputs(), true);
    vector(m->outputs(), true);
    vector(m->instructions(), false);
    for (const fbs::Instruction* ins : each(m->instructions())) instruction(ins);
    vector(m->operators(), false);
    for (const fbs::Operator* op : each(m->operators())) {
      table(op);
      string(op->name());
      string(op->overload());
    }
    vector(m->delegates(), false);
    for (const fbs::Delegate* d : each(m->delegates())) {
      table(d);
      string(d->backend());
      struct_field(d, fbs::Delegate::VT_PAYLOAD, {{0, 4}, {8, 8}, {16, 8}});
      vector(d->compile_specs(), false);
      for (const fbs::CompileSpec* s : each(d->compile_specs())) {
        table(s);
        string(s->key());
        vector(s->value(), false);
      }
    }
    vector(m->arenas(), false);
    for (const fbs::Arena* a : each(m->arenas())) {
      table(a);
      string(a->name());
      field(a, fbs::Arena::VT_SIZE, 8);
    }
    vector(m->debug_info(), false);
    for (const fbs::DebugEntry* e : each(m->debug_info())) {
      table(e);
      field(e, fbs::DebugEntry::VT_HANDLE, 4);
      string(e->location());
      string(e->op());
    }
  }

  void evalue(const fbs::EValue* ev) {
    table(ev);
    union_type(ev, fbs::EValue::VT_VALUE_TYPE);
    offset(ev, fbs::EValue::VT_VALUE);
    if (!ev->value()) return;
    table(ev->value());
    switch (ev->value_type()) {
      case fbs::Value::Int: field(ev->value(), fbs::Int::VT_VALUE, 8); break;
      case fbs::Value::Double: field(ev->value(), fbs::Double::VT_VALUE, 8); break;
      case fbs::Value::Bool: field(ev->value(), fbs::Bool::VT_VALUE, 1); break;
      case fbs::Value::String: string(ev->value_as_String()->value()); break;
      case fbs::Value::Tensor: {
        const fbs::Tensor* t = ev->value_as_Tensor();
        field(t, fbs::Tensor::VT_DTYPE, 1);
        vector(t->sizes(), true);
        vector(t->dim_order(), true);
        field(t, fbs::Tensor::VT_DYNAMISM, 1);
        struct_field(t, fbs::Tensor::VT_ALLOCATION, {{0, 4}, {8, 8}});
        struct_field(t, fbs::Tensor::VT_CONSTANT, {{0, 4}, {8, 8}, {16, 8}});
        field(t, fbs::Tensor::VT_NBYTES, 8);
        break;
      }
      case fbs::Value::IntList: vector(ev->value_as_IntList()->items(), true); break;
      case fbs::Value::DoubleList: vector(ev->value_as_DoubleList()->items(), true); break;
      case fbs::Value::BoolList: vector(ev->value_as_BoolList()->items(), true); break;
      case fbs::Value::TensorList: vector(ev->value_as_TensorList()->items(), true); break;
      case fbs::Value::OptionalTensorList: vector(ev->value_as_OptionalTensorList()->items(), true); break;
      default: break;
    }
  }

  void instruction(const fbs::Instruction* ins) {
    table(ins);
    union_type(ins, fbs::Instruction::VT_KIND_TYPE);
    offset(ins, fbs::Instruction::VT_KIND);
    field(ins, fbs::Instruction::VT_DEBUG_HANDLE, 4);
    if (!ins->kind()) return;
    table(ins->kind());
    switch (ins->kind_type()) {
      case fbs::InstructionKind::KernelCall:
        field(ins->kind(), fbs::KernelCall::VT_OP, 4);
        vector(ins->kind_as_KernelCall()->args(), true);
        break;
      case fbs::InstructionKind::DelegateCall:
        field(ins->kind(), fbs::DelegateCall::VT_DELEGATE, 4);
        vector(ins->kind_as_DelegateCall()->args(), true);
        break;
      case fbs::InstructionKind::JumpFalse:
        field(ins->kind(), fbs::JumpFalse::VT_COND, 4);
        field(ins->kind(), fbs::JumpFalse::VT_TARGET, 4);
        break;
      case fbs::InstructionKind::Move:
        field(ins->kind(), fbs::Move::VT_FROM, 4);
        field(ins->kind(), fbs::Move::VT_TO, 4);
        break;
      case fbs::InstructionKind::Free: field(ins->kind(), fbs::Free::VT_VALUE, 4); break;
      default: break;
    }
  }

  const uint8_t* file_;
  FileMap* map_;
  std::set<const uint8_t*> vtables_;
};

// Percent weights of the strategies (sum 100).
const unsigned kWeights[kNumStrategies] = {12, 12, 5, 3, 7, 26, 5, 8, 8, 6, 8};

// A value likely to hit an edge of a check, for a field of `width` bytes now holding `v`.
uint64_t interesting(Rng& rng, uint64_t v, unsigned width) {
  uint64_t mask = width >= 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * width)) - 1;
  uint64_t top = uint64_t{1} << (8 * width - 1);
  uint64_t r;
  switch (rng.below(14)) {
    case 0: r = 0; break;
    case 1: r = 1; break;
    case 2: r = mask; break;  // -1
    case 3: r = v + 1; break;
    case 4: r = v - 1; break;
    case 5: r = v ^ (uint64_t{1} << rng.below(8 * width)); break;
    case 6: r = v * 2; break;
    case 7: r = v + rng.below(33) - 16; break;
    case 8: r = top; break;      // most negative
    case 9: r = top - 1; break;  // most positive
    case 10: r = rng.below(64); break;
    case 11: r = uint64_t{1} << rng.below(8 * width); break;
    case 12: r = v + 8 * (rng.below(9) - 4); break;
    default: r = rng.next(); break;
  }
  return r & mask;
}

// Offset of a byte to mutate: mostly inside the FlatBuffer.
size_t pick_byte(Rng& rng, const FileMap& map, size_t size) {
  if (rng.percent(80) && map.program_size > 0) return map.program_offset + rng.below(map.program_size);
  return rng.below(size);
}

void mutate_location(Rng& rng, uint8_t* data, const std::vector<Location>& where) {
  if (where.empty()) return;
  const Location& l = where[rng.below(where.size())];
  write_le(data + l.offset, l.width, interesting(rng, read_le(data + l.offset, l.width), l.width));
}

}  // namespace

uint64_t read_le(const uint8_t* p, unsigned width) {
  uint64_t v = 0;
  for (unsigned i = 0; i < width; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

void write_le(uint8_t* p, unsigned width, uint64_t v) {
  for (unsigned i = 0; i < width; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

bool map_file(const uint8_t* file, size_t size, FileMap* map) {
  if (size < 64) return false;
  map->program_offset = static_cast<size_t>(read_le(file + 16, 8));
  map->program_size = static_cast<size_t>(read_le(file + 24, 8));
  if (map->program_offset + map->program_size > size) return false;
  const uint8_t* fb = file + map->program_offset;
  flatbuffers::Verifier verifier(fb, map->program_size);
  if (!fbs::VerifyProgramBuffer(verifier)) return false;
  Mapper(file, map).program(fbs::GetProgram(fb));
  return true;
}

const char* strategy_name(int s) {
  static const char* names[] = {"bit flips",  "byte writes", "truncate", "random file", "header field", "scalar field",
                                "length",     "union type",  "vtable",   "offset",      "splice"};
  return s >= 0 && s < kNumStrategies ? names[s] : "?";
}

int pick_strategy(Rng& rng) {
  uint64_t r = rng.below(100);
  for (int s = 0; s < kNumStrategies; ++s) {
    if (r < kWeights[s]) return s;
    r -= kWeights[s];
  }
  return kScalarField;
}

// Mutates data[0, *size) (capacity bytes available) with `strategy`.
void mutate(int strategy, Rng& rng, const FileMap& map, uint8_t* data, size_t* size, size_t capacity) {
  size_t n = *size;
  switch (strategy) {
    case kBitFlips: {
      uint64_t flips = 1 + rng.below(8);
      for (uint64_t i = 0; i < flips; ++i) data[pick_byte(rng, map, n)] ^= static_cast<uint8_t>(1u << rng.below(8));
      break;
    }
    case kByteWrites: {
      uint64_t writes = 1 + rng.below(8);
      for (uint64_t i = 0; i < writes; ++i) {
        size_t at = pick_byte(rng, map, n);
        data[at] = rng.percent(30) ? static_cast<uint8_t>(rng.percent(50) ? 0 : 0xff) : static_cast<uint8_t>(rng.next());
      }
      break;
    }
    case kTruncate: {
      // Anywhere, but mostly inside the header and the FlatBuffer.
      size_t limit = rng.percent(70) ? map.program_offset + map.program_size : n;
      *size = static_cast<size_t>(rng.below(limit));
      if (*size >= 56 && rng.percent(50)) write_le(data + 48, 8, *size);  // header agrees with the length
      break;
    }
    case kRandomFile: {
      size_t len = static_cast<size_t>(rng.below(capacity < 8192 ? capacity : 8192));
      for (size_t i = 0; i < len; ++i) data[i] = static_cast<uint8_t>(rng.next());
      if (len >= 64 && rng.percent(50)) {  // a plausible header over random bytes
        std::memcpy(data, "ETXH", 4);
        write_le(data + 4, 4, 1);
        write_le(data + 8, 4, 64);
        write_le(data + 12, 4, 16);
        write_le(data + 16, 8, 64);
        write_le(data + 24, 8, rng.below(len - 64 + 1));
        write_le(data + 32, 8, len / 16 * 16);
        write_le(data + 40, 8, 0);
        write_le(data + 48, 8, len);
        if (len >= 72 && rng.percent(50)) std::memcpy(data + 68, "ETX1", 4);
      }
      *size = len;
      break;
    }
    case kHeaderField: {
      static const Location fields[] = {{0, 4},  {4, 4},  {8, 4},  {12, 4}, {16, 8},
                                        {24, 8}, {32, 8}, {40, 8}, {48, 8}, {56, 8}};
      const Location& f = fields[rng.below(sizeof(fields) / sizeof(fields[0]))];
      write_le(data + f.offset, f.width, interesting(rng, read_le(data + f.offset, f.width), f.width));
      break;
    }
    case kScalarField: {
      uint64_t count = 1 + (rng.percent(25) ? rng.below(3) : 0);
      for (uint64_t i = 0; i < count; ++i) mutate_location(rng, data, map.scalars);
      break;
    }
    case kLength: mutate_location(rng, data, map.lengths); break;
    case kUnionType: {
      if (map.union_types.empty()) break;
      const Location& l = map.union_types[rng.below(map.union_types.size())];
      data[l.offset] = static_cast<uint8_t>(rng.percent(90) ? rng.below(13) : rng.next());
      break;
    }
    case kVtableEntry: {
      if (map.vtable_entries.empty()) break;
      const Location& l = map.vtable_entries[rng.below(map.vtable_entries.size())];
      uint64_t v = read_le(data + l.offset, 2);
      write_le(data + l.offset, 2, rng.percent(60) ? 0 : interesting(rng, v, 2));  // 0: the field is absent
      break;
    }
    case kOffset: {
      if (map.offsets.empty()) break;
      const Location& l = map.offsets[rng.below(map.offsets.size())];
      uint64_t v = read_le(data + l.offset, 4);
      write_le(data + l.offset, 4, rng.percent(70) ? v + 4 * (rng.below(9) - 4) : interesting(rng, v, 4));
      break;
    }
    case kSplice: {
      if (map.program_size < 16) break;
      size_t len = 1 + static_cast<size_t>(rng.below(32));
      if (len > map.program_size) len = map.program_size;
      size_t from = map.program_offset + rng.below(map.program_size - len + 1);
      size_t to = map.program_offset + rng.below(map.program_size - len + 1);
      std::memmove(data + to, data + from, len);
      break;
    }
  }
}

}  // namespace fuzz
}  // namespace test
}  // namespace etmlir
