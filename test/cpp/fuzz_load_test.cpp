// Mutation fuzzing of Program::load, load_method and execute: thousands of
// corrupted copies of valid .pte files must give Error values, never a crash,
// a sanitizer report, a hang, or a write into the program's constants.
//
// Each fixture (mlp.pte, seed_cnn.pte, dynamic.pte, delegate.pte, and two programs whose
// delegate is a whole .pte run by the "nested" backend) is mapped once: where its
// header fields, table scalars, vector lengths, union type bytes, vtable
// entries and offsets are. Each iteration copies the file into a 64-byte
// aligned buffer, applies one seeded mutation strategy (most of them aimed
// inside the FlatBuffer, where the semantic checks are), and then:
//
//   Program::load (BufferDataLoader)                 -> "load failed" or on
//   every MethodMeta accessor, load_method with arenas sized from MethodMeta
//   (skipped above 64 MiB) and every kernel          -> "method failed" or on
//   set_input at the planned sizes (dynamic dims at their bound), execute()
//                                                    -> "executed ok" / "execute failed"
//
// ETMLIR_FUZZ_ITERATIONS (default 3000 per fixture), ETMLIR_FUZZ_SEED,
// ETMLIR_FUZZ_ONLY=N (run iteration N alone, to reproduce a report), and
// ETMLIR_FUZZ_VERBOSE=1 (print every case's outcome and error message). A crash,
// sanitizer report or hang prints the fixture, iteration and strategy, and
// writes the mutated file to $ETMLIR_FUZZ_CRASH_FILE (default
// ./etmlir_fuzz_crash.pte).
#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "etmlir/runtime/backend.h"
#include "etmlir/runtime/data_loader.h"
#include "etmlir/runtime/method.h"
#include "etmlir/runtime/program.h"
#include "etmlir/schema/program_generated.h"
#include "nested_backend.h"
#include "test_util.h"

// Present in sanitizer builds only.
extern "C" void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

// A mutated payload of the nested backend can ask for an arena of terabytes:
// the backend must then report OutOfMemory, which it can only do if malloc
// returns nullptr under ASan as it does elsewhere (ASAN_OPTIONS still wins).
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }

namespace etmlir {
namespace {

namespace fbs = etmlir::schema;
using test::AlignedBuffer;

constexpr uint64_t kMaxArenaBytes = uint64_t{64} << 20;
constexpr size_t kTempBytes = size_t{8} << 20;
constexpr unsigned kCaseTimeoutSeconds = 60;

// ---- Deterministic PRNG (SplitMix64) ---------------------------------------------------

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t n) { return n == 0 ? 0 : next() % n; }
  bool percent(unsigned p) { return below(100) < p; }

 private:
  uint64_t state_;
};

// ---- Where the interesting bytes of a valid file are ------------------------------------

struct Location {
  size_t offset;
  uint8_t width;
};

struct FileMap {
  size_t program_offset = 0;
  size_t program_size = 0;
  std::vector<Location> scalars;         // table fields, struct fields, vector elements
  std::vector<Location> lengths;         // vector and string length prefixes
  std::vector<Location> union_types;     // EValue.value_type, Instruction.kind_type
  std::vector<Location> vtable_entries;  // u16 entries of every vtable
  std::vector<Location> offsets;         // uoffset/soffset fields that point at other objects
};

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

// ---- Mutations -----------------------------------------------------------------------

enum Strategy {
  kBitFlips,
  kByteWrites,
  kTruncate,
  kRandomFile,
  kHeaderField,
  kScalarField,
  kLength,
  kUnionType,
  kVtableEntry,
  kOffset,
  kSplice,
  kNumStrategies
};

const char* strategy_name(int s) {
  static const char* names[] = {"bit flips",  "byte writes", "truncate", "random file", "header field", "scalar field",
                                "length",     "union type",  "vtable",   "offset",      "splice"};
  return s >= 0 && s < kNumStrategies ? names[s] : "?";
}

// Percent weights of the strategies (sum 100).
const unsigned kWeights[kNumStrategies] = {12, 12, 5, 3, 7, 26, 5, 8, 8, 6, 8};

int pick_strategy(Rng& rng) {
  uint64_t r = rng.below(100);
  for (int s = 0; s < kNumStrategies; ++s) {
    if (r < kWeights[s]) return s;
    r -= kWeights[s];
  }
  return kScalarField;
}

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

// ---- Running one case ------------------------------------------------------------------

enum Outcome { kLoadFailed, kMethodFailed, kSkippedLarge, kSkippedLoop, kExecutedOk, kExecuteFailed, kNumOutcomes };
const char* outcome_name(int o) {
  static const char* names[] = {"load failed",   "method failed", "skipped (arena > 64 MiB)", "skipped (backward jump)",
                                "executed ok",   "execute failed"};
  return names[o];
}

// A backend that accepts any payload and does nothing (the fuzzer tests the runtime, not a backend).
class NopBackend : public Backend {
 public:
  bool is_available() const override { return true; }
  Result<DelegateHandle> init(BackendInitContext&, Span<const uint8_t>, Span<const CompileSpec>) override {
    return DelegateHandle(this);
  }
  Error execute(BackendExecuteContext&, DelegateHandle, Span<EValue*>) override { return Error::ok(); }
  void destroy(DelegateHandle) override {}
};

uint64_t fnv1a(const uint8_t* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// Which check of Program::load refused a file (from its message).
enum LoadStage { kHeader, kVerifier, kSemantic, kNumStages };
const char* stage_name(int s) {
  static const char* names[] = {"header / segment table", "FlatBuffers verifier", "semantic checks"};
  return names[s];
}
LoadStage load_stage(const Error& e) {
  const char* m = e.message();
  if (std::strstr(m, "FlatBuffer") != nullptr) return kVerifier;
  if (std::strstr(m, "method '") != nullptr || std::strstr(m, "no methods") != nullptr ||
      std::strstr(m, "schema version") != nullptr || std::strstr(m, "constant segment") != nullptr ||
      std::strncmp(m, "invalid program: segment ", 25) == 0) {
    return std::strncmp(m, "invalid program: segment data", 29) == 0 ? kHeader : kSemantic;
  }
  return kHeader;
}

struct Stats {
  bool verbose = false;
  Error last_error;  // of the latest case that failed
  uint64_t outcomes[kNumOutcomes] = {};
  uint64_t load_stages[kNumStages] = {};
  uint64_t by_strategy[kNumStrategies][kNumOutcomes] = {};
  uint64_t errors_without_message = 0;
  uint64_t file_writes = 0;  // cases where the runtime wrote into the program's bytes
  std::vector<std::string> file_write_cases;
};

bool error_is_well_formed(const Error& e) { return e.code() != ErrorCode::Ok && e.message()[0] != '\0'; }

// True if an instruction jumps backward (or to itself): execute() could loop forever.
bool has_backward_jump(const Program& program, size_t method_index) {
  const fbs::Program* p = fbs::GetProgram(program.flatbuffer());
  const fbs::Method* m = p->methods()->Get(static_cast<flatbuffers::uoffset_t>(method_index));
  if (!m->instructions()) return false;
  for (flatbuffers::uoffset_t i = 0; i < m->instructions()->size(); ++i) {
    const fbs::JumpFalse* j = m->instructions()->Get(i)->kind_as_JumpFalse();
    if (j && j->target() <= i) return true;
  }
  return false;
}

// Calls every MethodMeta accessor (what a user would, to size memory and print).
void exercise_meta(const MethodMeta& meta) {
  char buffer[256];
  volatile size_t sink = std::strlen(meta.name()) + meta.num_instructions();
  for (size_t i = 0; i < meta.num_operators(); ++i) sink += std::strlen(meta.operator_name(i, buffer, sizeof(buffer)));
  for (size_t i = 0; i < meta.num_arenas(); ++i) sink += std::strlen(meta.arena_name(i)) + meta.arena_size(i);
  MethodMeta::TensorInfo info;
  for (size_t i = 0; i <= meta.num_inputs(); ++i) {
    if (meta.input_tensor(i, &info)) {
      for (int32_t d = 0; d < info.dim; ++d) sink += static_cast<size_t>(info.sizes[d]);
    }
  }
  for (size_t i = 0; i <= meta.num_outputs(); ++i) {
    if (meta.output_tensor(i, &info)) {
      for (int32_t d = 0; d < info.dim; ++d) sink += static_cast<size_t>(info.sizes[d]);
    }
  }
  (void)sink;
}

// Deterministic contents for an input buffer of `dtype`.
void fill_input(uint8_t* data, size_t nbytes, ScalarType dtype, Rng& rng) {
  switch (dtype) {
    case ScalarType::Float: {
      auto* f = reinterpret_cast<float*>(data);
      for (size_t i = 0; i < nbytes / 4; ++i) f[i] = static_cast<float>(static_cast<int64_t>(rng.below(4001)) - 2000) / 1000.f;
      break;
    }
    case ScalarType::Bool:
      for (size_t i = 0; i < nbytes; ++i) data[i] = static_cast<uint8_t>(rng.below(2));
      break;
    default:
      // Small non-negative integers (valid indices for embeddings and the like) in every integer width.
      std::memset(data, 0, nbytes);
      for (size_t i = 0; i < nbytes; i += 8) data[i] = static_cast<uint8_t>(rng.below(4));
      break;
  }
}

Outcome run_method(const Program& program, size_t method_index, const KernelRegistry& kernels,
                   const BackendRegistry& backends, MemoryAllocator* temp, Rng& rng, Stats* stats) {
  const char* name = program.method_name(method_index);
  Result<MethodMeta> meta = program.method_meta(name);
  if (!meta.ok()) {
    // The name came from the program, so the lookup cannot fail.
    ADD_FAILURE() << "method_meta('" << name << "') failed: " << meta.error().message();
    return kMethodFailed;
  }
  exercise_meta(*meta);
  // The method's tables and its delegates' state (a nested delegate's inner method and arenas).
  // When sizing refuses a delegate's payload, load_method must refuse it too: it runs anyway,
  // with the method's own bytes, to check that.
  Result<size_t> sized = meta->method_allocator_bytes(&backends, &kernels);
  if (!sized.ok() && !error_is_well_formed(sized.error())) ++stats->errors_without_message;
  size_t method_bytes = sized.ok() ? sized.get() : meta->method_allocator_bytes();
  if (method_bytes > 2 * kMaxArenaBytes) return kSkippedLarge;
  uint64_t total = method_bytes;
  for (size_t i = 0; i < meta->num_arenas(); ++i) {
    if (meta->arena_size(i) > kMaxArenaBytes) return kSkippedLarge;
    total += meta->arena_size(i);
  }
  if (total > 2 * kMaxArenaBytes) return kSkippedLarge;

  std::vector<std::unique_ptr<AlignedBuffer>> buffers;
  std::vector<Span<uint8_t>> arenas;
  for (size_t i = 0; i < meta->num_arenas(); ++i) {
    buffers.push_back(std::make_unique<AlignedBuffer>(static_cast<size_t>(meta->arena_size(i))));
    arenas.emplace_back(buffers.back()->data(), static_cast<size_t>(meta->arena_size(i)));
  }
  AlignedBuffer method_buffer(method_bytes);
  MemoryAllocator method_allocator(method_buffer.data(), method_buffer.size());
  temp->reset();
  MemoryManager memory;
  memory.method_allocator = &method_allocator;
  memory.planned_arenas = Span<Span<uint8_t>>(arenas.data(), arenas.size());
  memory.temp_allocator = temp;

  Result<Method> method = program.load_method(name, &memory, &kernels, &backends);
  if (!method.ok()) {
    if (!error_is_well_formed(method.error())) ++stats->errors_without_message;
    stats->last_error = method.error();
    return kMethodFailed;
  }
  EXPECT_TRUE(sized.ok()) << "load_method accepts what method_allocator_bytes(backends) refuses: "
                          << sized.error().message();
  EXPECT_LE(method_allocator.used(), method_bytes) << "method_allocator_bytes(backends) is not an upper bound";

  // Inputs at their planned sizes (dynamic dims at the bound), unplanned outputs get buffers.
  MethodMeta::TensorInfo info;
  for (size_t i = 0; i < meta->num_inputs(); ++i) {
    if (!meta->input_tensor(i, &info) || element_size(info.dtype) == 0) continue;
    uint64_t nbytes = element_size(info.dtype);
    for (int32_t d = 0; d < info.dim; ++d) nbytes *= static_cast<uint64_t>(info.sizes[d]);
    if (nbytes > kMaxArenaBytes) return kSkippedLarge;
    buffers.push_back(std::make_unique<AlignedBuffer>(static_cast<size_t>(nbytes)));
    fill_input(buffers.back()->data(), static_cast<size_t>(nbytes), info.dtype, rng);
    Error e = method->set_input(i, buffers.back()->data(), static_cast<size_t>(nbytes), info.dtype,
                                Span<const int64_t>(info.sizes, static_cast<size_t>(info.dim)));
    if (e && !error_is_well_formed(e)) ++stats->errors_without_message;
  }
  for (size_t i = 0; i < meta->num_outputs(); ++i) {
    if (!meta->output_tensor(i, &info) || info.planned || element_size(info.dtype) == 0) continue;
    uint64_t nbytes = element_size(info.dtype);
    for (int32_t d = 0; d < info.dim; ++d) nbytes *= static_cast<uint64_t>(info.sizes[d]);
    if (nbytes > kMaxArenaBytes) return kSkippedLarge;
    buffers.push_back(std::make_unique<AlignedBuffer>(static_cast<size_t>(nbytes)));
    method->set_output_buffer(i, buffers.back()->data(), static_cast<size_t>(nbytes));
  }
  if (has_backward_jump(program, method_index)) return kSkippedLoop;

  Error e = method->execute();
  if (e) {
    if (!error_is_well_formed(e)) ++stats->errors_without_message;
    stats->last_error = e;
    return kExecuteFailed;
  }
  return kExecutedOk;
}

// ---- Crash reporting -----------------------------------------------------------------

char g_case[256];
const uint8_t* g_case_data = nullptr;
size_t g_case_size = 0;

void report_case() {
  ssize_t ignored = write(2, g_case, std::strlen(g_case));
  const char* path = std::getenv("ETMLIR_FUZZ_CRASH_FILE");
  if (path == nullptr) path = "etmlir_fuzz_crash.pte";
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0 && g_case_data != nullptr) {
    ignored = write(fd, g_case_data, g_case_size);
    close(fd);
    const char* note = "fuzz: the mutated file was written to ";
    ignored = write(2, note, std::strlen(note));
    ignored = write(2, path, std::strlen(path));
    ignored = write(2, "\n", 1);
  }
  (void)ignored;
}

void on_signal(int signal) {
  const char* what = signal == SIGALRM ? "\nfuzz: TIMEOUT (a case ran too long: a hang)\n" : "\nfuzz: CRASH\n";
  ssize_t ignored = write(2, what, std::strlen(what));
  (void)ignored;
  report_case();
  if (signal == SIGALRM) _exit(124);
  struct sigaction action = {};
  action.sa_handler = SIG_DFL;
  sigaction(signal, &action, nullptr);
  raise(signal);
}

void install_crash_reporting() {
  static bool installed = false;
  if (installed) return;
  installed = true;
  // ASan and UBSan each carry their own copy of the callback (GCC links two
  // runtimes): register with both.
  using SetCallback = void (*)(void (*)(void));
  void (*on_death)(void) = [] {
    const char* what = "\nfuzz: SANITIZER REPORT above\n";
    ssize_t ignored = write(2, what, std::strlen(what));
    (void)ignored;
    report_case();
  };
  if (__sanitizer_set_death_callback != nullptr) __sanitizer_set_death_callback(on_death);
  for (const char* runtime : {"libubsan.so.1", "libasan.so.8", "libasan.so.6"}) {
    if (void* handle = dlopen(runtime, RTLD_NOW | RTLD_NOLOAD)) {
      if (auto set = reinterpret_cast<SetCallback>(dlsym(handle, "__sanitizer_set_death_callback"))) set(on_death);
    }
  }
  struct sigaction action = {};
  action.sa_handler = on_signal;
  sigaction(SIGALRM, &action, nullptr);
  if (__sanitizer_set_death_callback == nullptr) {  // the sanitizers handle these themselves
    for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) sigaction(s, &action, nullptr);
  }
}

uint64_t env_u64(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 0) : fallback;
}

// ---- The test ------------------------------------------------------------------------

class FuzzLoad : public ::testing::TestWithParam<const char*> {};

TEST_P(FuzzLoad, MutatedProgramsGiveErrorsNotCrashes) {
  ETMLIR_REQUIRE_FIXTURES();
  install_crash_reporting();
  const std::string fixture = GetParam();
  std::vector<uint8_t> pristine = test::read_file(test::fixture_path(fixture));
  ASSERT_FALSE(pristine.empty()) << "cannot read " << test::fixture_path(fixture);
  FileMap map;
  ASSERT_TRUE(map_file(pristine.data(), pristine.size(), &map)) << fixture << " is not a valid .pte";
  ASSERT_FALSE(map.scalars.empty());

  const KernelRegistry& kernels = test::all_kernels();
  static NopBackend backend;
  BackendRegistry backends;
  ASSERT_FALSE(backends.add("fake_delegate", &backend));
  ASSERT_FALSE(register_nested_backend(backends));
  AlignedBuffer temp_buffer(kTempBytes);
  MemoryAllocator temp(temp_buffer.data(), temp_buffer.size());

  const size_t capacity = pristine.size() + 8192;
  AlignedBuffer work(capacity);
  Stats stats;
  stats.verbose = env_u64("ETMLIR_FUZZ_VERBOSE", 0) != 0;

  // The unmutated file: loads, and tells whether this runtime can run it at all.
  Outcome pristine_outcome;
  {
    std::memcpy(work.data(), pristine.data(), pristine.size());
    BufferDataLoader loader(work.data(), pristine.size());
    Result<Program> program = Program::load(&loader);
    ASSERT_TRUE(program.ok()) << fixture << ": " << program.error().message();
    Rng rng(1);
    pristine_outcome = run_method(*program, 0, kernels, backends, &temp, rng, &stats);
    EXPECT_EQ(std::memcmp(work.data(), pristine.data(), pristine.size()), 0)
        << "running the unmutated program changed its bytes (a kernel wrote a constant?)";
    std::printf("[fuzz] %s: unmutated file: %s\n", fixture.c_str(), outcome_name(pristine_outcome));
  }

  const uint64_t iterations = env_u64("ETMLIR_FUZZ_ITERATIONS", 3000);
  const uint64_t seed = env_u64("ETMLIR_FUZZ_SEED", 20240601);
  const char* only = std::getenv("ETMLIR_FUZZ_ONLY");
  uint64_t first = only ? std::strtoull(only, nullptr, 0) : 0;
  uint64_t last = only ? first + 1 : iterations;
  uint64_t fixture_salt = fnv1a(reinterpret_cast<const uint8_t*>(fixture.data()), fixture.size());

  for (uint64_t iteration = first; iteration < last; ++iteration) {
    Rng rng(seed ^ fixture_salt ^ (iteration * 0x9E3779B97F4A7C15ull));
    std::memcpy(work.data(), pristine.data(), pristine.size());
    size_t size = pristine.size();
    int strategy = pick_strategy(rng);
    mutate(strategy, rng, map, work.data(), &size, capacity);
    std::snprintf(g_case, sizeof(g_case),
                  "fuzz case: fixture %s, iteration %" PRIu64 " (reproduce: ETMLIR_FUZZ_ONLY=%" PRIu64
                  " ETMLIR_FUZZ_SEED=%" PRIu64 "), strategy '%s', %zu bytes\n",
                  fixture.c_str(), iteration, iteration, seed, strategy_name(strategy), size);
    // The mutated bytes: for a crash report, and to check that nothing writes into them.
    static std::vector<uint8_t> snapshot;
    snapshot.assign(work.data(), work.data() + size);
    g_case_data = snapshot.data();
    g_case_size = size;

    alarm(kCaseTimeoutSeconds);
    Outcome outcome;
    BufferDataLoader loader(work.data(), size);
    Result<Program> program = Program::load(&loader);
    if (!program.ok()) {
      if (!error_is_well_formed(program.error())) ++stats.errors_without_message;
      ++stats.load_stages[load_stage(program.error())];
      stats.last_error = program.error();
      outcome = kLoadFailed;
    } else {
      // Every accessor of a loaded program must be safe.
      for (size_t s = 0; s < 8; ++s) {
        Result<FreeableBuffer> segment = program->load_segment(static_cast<uint32_t>(s), 0, 1);
        (void)segment;
      }
      for (uint32_t handle = 0; handle < 64; ++handle) (void)program->debug_location(0, handle);
      EXPECT_EQ(program->method_meta("no such method").error().code(), ErrorCode::NotFound);
      outcome = run_method(*program, 0, kernels, backends, &temp, rng, &stats);
      for (size_t m = 1; m < program->num_methods() && m < 4; ++m) {
        run_method(*program, m, kernels, backends, &temp, rng, &stats);
      }
    }
    alarm(0);
    if (std::memcmp(work.data(), snapshot.data(), size) != 0) {
      ++stats.file_writes;
      if (stats.file_write_cases.size() < 5) stats.file_write_cases.push_back(g_case);
    }
    ++stats.outcomes[outcome];
    ++stats.by_strategy[strategy][outcome];
    if (stats.verbose) {
      std::printf("[fuzz] %" PRIu64 " %s: %s%s%s\n", iteration, strategy_name(strategy), outcome_name(outcome),
                  outcome == kExecutedOk ? "" : ": ", outcome == kExecutedOk ? "" : stats.last_error.message());
    }
  }
  g_case_data = nullptr;

  uint64_t total = last - first;
  std::printf("[fuzz] %s: %" PRIu64 " mutated copies (seed %" PRIu64 ")\n", fixture.c_str(), total, seed);
  for (int o = 0; o < kNumOutcomes; ++o) {
    std::printf("[fuzz]   %-26s %6" PRIu64 "\n", outcome_name(o), stats.outcomes[o]);
    if (o == kLoadFailed) {
      for (int s = 0; s < kNumStages; ++s) {
        std::printf("[fuzz]     by %-24s %5" PRIu64 "\n", stage_name(s), stats.load_stages[s]);
      }
    }
  }
  std::printf("[fuzz]   by strategy (load failed / method failed / skipped / executed ok / execute failed):\n");
  for (int s = 0; s < kNumStrategies; ++s) {
    const uint64_t* c = stats.by_strategy[s];
    std::printf("[fuzz]     %-13s %5" PRIu64 " %5" PRIu64 " %5" PRIu64 " %5" PRIu64 " %5" PRIu64 "\n",
                strategy_name(s), c[kLoadFailed], c[kMethodFailed], c[kSkippedLarge] + c[kSkippedLoop],
                c[kExecutedOk], c[kExecuteFailed]);
  }
  const uint64_t* o = stats.outcomes;
  const uint64_t* l = stats.load_stages;
  std::printf("[fuzz] summary %s: %" PRIu64 " copies: load failed %" PRIu64 " (header %" PRIu64 ", verifier %" PRIu64
              ", semantic %" PRIu64 "), method failed %" PRIu64 ", skipped %" PRIu64 ", executed ok %" PRIu64
              ", execute failed %" PRIu64 "\n",
              fixture.c_str(), total, o[kLoadFailed], l[kHeader], l[kVerifier], l[kSemantic], o[kMethodFailed],
              o[kSkippedLarge] + o[kSkippedLoop], o[kExecutedOk], o[kExecuteFailed]);
  std::fflush(stdout);

  EXPECT_EQ(stats.errors_without_message, 0u) << "an Error came back with code Ok or an empty message";
  std::string cases;
  for (const std::string& c : stats.file_write_cases) cases += c;
  EXPECT_EQ(stats.file_writes, 0u) << "the runtime wrote into the program's bytes (constants are read-only):\n"
                                   << cases;
  if (only != nullptr) return;
  uint64_t past_load = total - stats.outcomes[kLoadFailed];
  uint64_t rejected = stats.outcomes[kLoadFailed] + stats.outcomes[kMethodFailed] + stats.outcomes[kExecuteFailed];
  EXPECT_GT(rejected * 2, total) << "most mutations should be rejected";
  EXPECT_GE(past_load * 20, total) << "at least 5% of the copies should get past Program::load";
  EXPECT_GT(stats.load_stages[kSemantic] * 50, total) << "the semantic checks should refuse at least 2% of the copies";
  if (pristine_outcome == kExecutedOk) {
    EXPECT_GT(stats.outcomes[kExecutedOk], 0u) << "no mutated copy reached execute()";
    EXPECT_GT(stats.outcomes[kMethodFailed] + stats.outcomes[kExecuteFailed], 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FuzzLoad,
                         ::testing::Values("mlp.pte", "seed_cnn.pte", "dynamic.pte", "delegate.pte",
                                           "nested_lookup.pte", "nested_dynamic.pte"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           return name.substr(0, name.find('.'));
                         });

}  // namespace
}  // namespace etmlir
