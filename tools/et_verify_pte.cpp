// et-verify-pte: check that .pte files are well formed, before a runtime
// trusts their offsets.
//
//   et-verify-pte FILE.pte...
//
// For each file it checks the 64-byte "ETXH" header (magic, version, sizes,
// every range inside the file), runs the FlatBuffers verifier over the
// program (root etmlir.schema.Program, identifier "ETX1"), and checks every
// Program.segments entry lies inside the segment data at a multiple of
// segment_alignment. It prints "FILE: ok (...)" on stdout or
// "FILE: error: ..." on stderr, and exits 0 only if every file passes
// (1 if one fails, 2 on a usage error).
//
// The header (runtime/schema/program.fbs has the layout), little-endian:
//    0 magic "ETXH"           4 u32 header_version (1)   8 u32 header_size (64)
//   12 u32 segment_alignment 16 u64 program_offset     24 u64 program_size
//   32 u64 segment_base_offset  40 u64 segment_data_size  48 u64 file_size
//   56 reserved, zero, up to 64

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "etmlir/schema/program_generated.h"

namespace {

constexpr char kMagic[4] = {'E', 'T', 'X', 'H'};
constexpr uint32_t kHeaderVersion = 1;
constexpr uint64_t kHeaderSize = 64;
constexpr uint64_t kReservedOffset = 56;
// FlatBuffers reads scalars in place; its largest scalar is 8 bytes.
constexpr uint64_t kProgramAlignment = 8;
// Root offset (4 bytes) then the file identifier (4 bytes).
constexpr uint64_t kMinProgramSize = 8;

// What went wrong and where; an empty message means nothing did.
struct Error {
  std::string message;
  explicit operator bool() const { return !message.empty(); }
};

Error ok() { return Error{}; }
Error fail(std::string message) { return Error{std::move(message)}; }

std::string num(uint64_t value) { return std::to_string(value); }

// "[begin, begin + size)" in file offsets, without overflowing.
std::string range(uint64_t begin, uint64_t size) {
  if (size > UINT64_MAX - begin) return "[" + num(begin) + ", " + num(begin) + " + " + num(size) + ")";
  return "[" + num(begin) + ", " + num(begin + size) + ")";
}

// True if [begin, begin + size) lies inside [0, limit).
bool fits(uint64_t begin, uint64_t size, uint64_t limit) {
  return begin <= limit && size <= limit - begin;
}

// Bytes as a C-like literal, e.g. "ET\x00\xff".
std::string quoted(const uint8_t* bytes, size_t count) {
  static const char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (size_t i = 0; i < count; ++i) {
    uint8_t c = bytes[i];
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
  return out + "\"";
}

uint32_t read_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

uint64_t read_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

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

Header parse_header(const uint8_t* bytes) {
  Header h;
  h.header_version = read_u32(bytes + 4);
  h.header_size = read_u32(bytes + 8);
  h.segment_alignment = read_u32(bytes + 12);
  h.program_offset = read_u64(bytes + 16);
  h.program_size = read_u64(bytes + 24);
  h.segment_base_offset = read_u64(bytes + 32);
  h.segment_data_size = read_u64(bytes + 40);
  h.file_size = read_u64(bytes + 48);
  return h;
}

// Checks the header alone against the file's real size.
Error check_header(const uint8_t* bytes, const Header& h, uint64_t actual_size) {
  if (std::memcmp(bytes, kMagic, sizeof(kMagic)) != 0)
    return fail("header: magic (bytes [0, 4)) is " + quoted(bytes, 4) + ", expected \"ETXH\": not an etmlir .pte file");
  if (h.header_version != kHeaderVersion)
    return fail("header: header_version (offset 4) is " + num(h.header_version) + "; this tool reads version " +
                num(kHeaderVersion));
  if (h.header_size != kHeaderSize)
    return fail("header: header_size (offset 8) is " + num(h.header_size) + ", expected " + num(kHeaderSize) +
                " for header_version 1");
  for (uint64_t i = kReservedOffset; i < kHeaderSize; ++i) {
    if (bytes[i] != 0)
      return fail("header: reserved byte at offset " + num(i) + " is " + num(bytes[i]) + ", expected 0");
  }
  if (h.file_size != actual_size)
    return fail("header: file_size (offset 48) is " + num(h.file_size) + " but the file is " + num(actual_size) +
                " bytes (truncated, or bytes appended)");

  // The program: after the header, aligned, inside the file.
  if (h.program_offset < kHeaderSize)
    return fail("header: program_offset (offset 16) is " + num(h.program_offset) + ", inside the " +
                num(kHeaderSize) + "-byte header");
  if (h.program_offset % kProgramAlignment != 0)
    return fail("header: program_offset (offset 16) is " + num(h.program_offset) + ", not a multiple of " +
                num(kProgramAlignment) + " (FlatBuffers reads 8-byte scalars in place)");
  if (!fits(h.program_offset, h.program_size, actual_size))
    return fail("header: program " + range(h.program_offset, h.program_size) +
                " (program_offset at 16, program_size at 24) ends past the end of the file (" + num(actual_size) +
                " bytes)");
  if (h.program_size < kMinProgramSize)
    return fail("header: program_size (offset 24) is " + num(h.program_size) +
                "; a FlatBuffer needs at least 8 bytes (root offset and file identifier)");
  if (h.program_size >= FLATBUFFERS_MAX_BUFFER_SIZE)
    return fail("header: program_size (offset 24) is " + num(h.program_size) + "; FlatBuffers are smaller than " +
                num(FLATBUFFERS_MAX_BUFFER_SIZE) + " bytes");

  // The segment data: after the program, inside the file.
  if (h.segment_alignment == 0 || (h.segment_alignment & (h.segment_alignment - 1)) != 0)
    return fail("header: segment_alignment (offset 12) is " + num(h.segment_alignment) +
                ", not a power of two");
  uint64_t program_end = h.program_offset + h.program_size;
  if (h.segment_base_offset < program_end)
    return fail("header: segment_base_offset (offset 32) is " + num(h.segment_base_offset) +
                ", before the end of the program " + range(h.program_offset, h.program_size));
  if (!fits(h.segment_base_offset, h.segment_data_size, actual_size))
    return fail("header: segment data " + range(h.segment_base_offset, h.segment_data_size) +
                " (segment_base_offset at 32, segment_data_size at 40) ends past the end of the file (" +
                num(actual_size) + " bytes)");
  return ok();
}

// Checks the FlatBuffer, then the segments it lists against the header.
Error check_program(const std::vector<uint8_t>& program, const Header& h, size_t* num_methods, size_t* num_segments) {
  const uint8_t* data = program.data();
  std::string where = "program " + range(h.program_offset, h.program_size);
  if (!etmlir::schema::ProgramBufferHasIdentifier(data))
    return fail(where + ": file identifier (program bytes [4, 8)) is " + quoted(data + 4, 4) + ", expected \"" +
                etmlir::schema::ProgramIdentifier() + "\"");
  flatbuffers::Verifier verifier(data, program.size());
  if (!etmlir::schema::VerifyProgramBuffer(verifier))
    return fail(where + ": the FlatBuffers verifier rejects it as an etmlir.schema.Program (an offset or length "
                        "points outside the program, data is misaligned, or tables nest too deep)");

  const etmlir::schema::Program* root = etmlir::schema::GetProgram(data);
  *num_methods = root->methods() ? root->methods()->size() : 0;
  const auto* segments = root->segments();
  *num_segments = segments ? segments->size() : 0;
  for (size_t i = 0; i < *num_segments; ++i) {
    const etmlir::schema::Segment* segment = segments->Get(static_cast<flatbuffers::uoffset_t>(i));
    std::string name = "Program.segments[" + num(i) + "] (offset " + num(segment->offset()) + ", size " +
                       num(segment->size()) + ")";
    if (!fits(segment->offset(), segment->size(), h.segment_data_size))
      return fail(name + " ends past the segment data (segment_data_size " + num(h.segment_data_size) + ")");
    uint64_t start = h.segment_base_offset + segment->offset();
    if (start % h.segment_alignment != 0)
      return fail(name + " starts at file offset " + num(start) + ", not a multiple of segment_alignment " +
                  num(h.segment_alignment));
  }
  return ok();
}

// Reads `size` bytes at `offset` of an open file into `out`.
Error read_at(std::FILE* file, uint64_t offset, uint64_t size, std::vector<uint8_t>* out, const char* what) {
  out->resize(size);
  errno = 0;
  if (fseeko(file, static_cast<off_t>(offset), SEEK_SET) != 0 ||
      std::fread(out->data(), 1, out->size(), file) != out->size()) {
    int err = errno;
    return fail("cannot read the " + std::string(what) + " " + range(offset, size) + ": " +
                (std::ferror(file) && err != 0 ? std::strerror(err) : "the file is shorter than it was"));
  }
  return ok();
}

// Closes its FILE when it goes out of scope.
class OpenFile {
 public:
  explicit OpenFile(const char* path) : file_(std::fopen(path, "rb")) {}
  ~OpenFile() {
    if (file_) std::fclose(file_);
  }
  OpenFile(const OpenFile&) = delete;
  OpenFile& operator=(const OpenFile&) = delete;
  std::FILE* get() const { return file_; }

 private:
  std::FILE* file_;
};

// Verifies one file; on success fills `summary` with the ok line's details.
Error verify_file(const char* path, std::string* summary) {
  errno = 0;
  OpenFile file(path);
  if (!file.get()) return fail(std::string("cannot open: ") + std::strerror(errno));
  if (fseeko(file.get(), 0, SEEK_END) != 0) return fail(std::string("cannot seek: ") + std::strerror(errno));
  off_t end = ftello(file.get());
  if (end < 0) return fail(std::string("cannot find its size: ") + std::strerror(errno));
  uint64_t actual_size = static_cast<uint64_t>(end);
  if (actual_size < kHeaderSize)
    return fail("the file is " + num(actual_size) + " bytes, shorter than the " + num(kHeaderSize) +
                "-byte .pte header");

  std::vector<uint8_t> header_bytes;
  if (Error e = read_at(file.get(), 0, kHeaderSize, &header_bytes, "header")) return e;
  Header header = parse_header(header_bytes.data());
  if (Error e = check_header(header_bytes.data(), header, actual_size)) return e;

  std::vector<uint8_t> program;
  if (Error e = read_at(file.get(), header.program_offset, header.program_size, &program, "program")) return e;
  size_t num_methods = 0;
  size_t num_segments = 0;
  if (Error e = check_program(program, header, &num_methods, &num_segments)) return e;

  *summary = "program " + num(header.program_size) + " bytes, " + num(num_methods) + " methods, " +
             num(num_segments) + " segments";
  return ok();
}

void print_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: et-verify-pte FILE.pte...\n"
               "Checks each file's header, program FlatBuffer and segments; exits 0 only if all pass.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  if (argc == 2 && (std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0)) {
    print_usage(stdout);
    return 0;
  }
  int status = 0;
  for (int i = 1; i < argc; ++i) {
    std::string summary;
    if (Error e = verify_file(argv[i], &summary)) {
      std::fprintf(stderr, "%s: error: %s\n", argv[i], e.message.c_str());
      status = 1;
    } else {
      std::printf("%s: ok (%s)\n", argv[i], summary.c_str());
    }
  }
  return status;
}
