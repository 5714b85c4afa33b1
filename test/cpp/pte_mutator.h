// Mutations of valid .pte files for the fuzz tests (fuzz_load_test: the runtime's loader;
// verify_pte_test: et-verify-pte against the runtime). One engine, so that both test the
// same corruptions:
//
//   FileMap map;
//   map_file(bytes, size, &map);                 // where the header fields, table scalars, vector
//                                                // lengths, union types, vtables and offsets are
//   Rng rng(seed);
//   int strategy = pick_strategy(rng);
//   mutate(strategy, rng, map, bytes, &size, capacity);   // one seeded corruption, in place
//
// Strategies (weights in pte_mutator.cpp): bit flips and byte writes (mostly inside the
// FlatBuffer), truncation, a random file (sometimes behind a plausible header), a header field,
// a table scalar or struct field, a vector or string length, a union type byte, a vtable entry,
// an offset, and a splice of program bytes. Every value written is "interesting" (0, 1, -1,
// the value +-1, a power of two, the extremes of its width, ...).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace etmlir {
namespace test {
namespace fuzz {

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

uint64_t read_le(const uint8_t* p, unsigned width);
void write_le(uint8_t* p, unsigned width, uint64_t v);

// Maps a valid file (its program must pass the FlatBuffers verifier); false if it does not.
bool map_file(const uint8_t* file, size_t size, FileMap* map);

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

const char* strategy_name(int s);
// A strategy drawn with the engine's weights.
int pick_strategy(Rng& rng);
// Mutates data[0, *size) (capacity bytes available) with `strategy`; may change *size.
void mutate(int strategy, Rng& rng, const FileMap& map, uint8_t* data, size_t* size, size_t capacity);

}  // namespace fuzz
}  // namespace test
}  // namespace etmlir
