// Internal: the .pte container header (layout in runtime/schema/README.md)
// and helpers shared by program.cpp and method.cpp.
#pragma once

#include <cstdint>

#include "etmlir/runtime/error.h"
#include "etmlir/schema/program_generated.h"

namespace etmlir {
namespace pte {

constexpr uint64_t kHeaderSize = 64;
constexpr uint32_t kHeaderVersion = 1;
// FlatBuffers reads 8-byte scalars in place.
constexpr uint64_t kProgramAlignment = 8;

struct Header {
  uint32_t header_version;
  uint32_t header_size;
  uint32_t segment_alignment;
  uint64_t program_offset;
  uint64_t program_size;
  uint64_t segment_base_offset;
  uint64_t segment_data_size;
  uint64_t file_size;
};

// Parses and checks the header against the data's real size.
Error parse_header(const uint8_t* bytes, uint64_t actual_size, Header* header);

// True if [offset, offset + size) lies inside [0, limit).
inline bool fits(uint64_t offset, uint64_t size, uint64_t limit) { return offset <= limit && size <= limit - offset; }

// Checks one method's meaning (indices, sizes, dtypes, locations) against
// the program's segments. `segment_sizes` has one entry per segment.
Error validate_method(const schema::Program& program, const schema::Method& method, const uint64_t* segment_sizes);

}  // namespace pte
}  // namespace etmlir
