// The shared delegate payload header (payload_header.h, runtime/schema/payload.fbs).
#include "etmlir/runtime/payload_header.h"

#include <cstdio>
#include <cstring>

#include "etmlir/runtime/tensor.h"

namespace etmlir {
namespace {

using payload_schema::CpuFeature;
using payload_schema::PayloadHeader;
using ull = unsigned long long;

uint32_t read_u32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

// CRC-32 tables, eight bytes a step (slicing-by-8).
struct Crc32Tables {
  uint32_t t[8][256];
};

constexpr Crc32Tables make_crc32_tables() {
  Crc32Tables tables{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    tables.t[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; ++i) {
    for (int s = 1; s < 8; ++s) tables.t[s][i] = (tables.t[s - 1][i] >> 8) ^ tables.t[0][tables.t[s - 1][i] & 0xff];
  }
  return tables;
}

constexpr Crc32Tables kCrc32 = make_crc32_tables();

const char* plural(size_t n) { return n == 1 ? "" : "s"; }

template <typename V>
size_t count(const V* vector) {
  return vector ? vector->size() : 0;
}

Error check_specs(const flatbuffers::Vector<flatbuffers::Offset<payload_schema::TensorSpec>>* specs,
                  const char* kind) {
  for (size_t i = 0; i < count(specs); ++i) {
    const payload_schema::TensorSpec* spec = specs->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (!is_known_dtype(spec->scalar_type()))
      return Error::make(ErrorCode::InvalidProgram, "tensor spec of %s %zu has unknown dtype %d", kind, i,
                         spec->scalar_type());
    size_t rank = count(spec->sizes());
    if (rank > static_cast<size_t>(kMaxDims))
      return Error::make(ErrorCode::InvalidProgram, "tensor spec of %s %zu has rank %zu (0 to %d)", kind, i, rank,
                         kMaxDims);
    for (size_t d = 0; d < rank; ++d) {
      int64_t s = spec->sizes()->Get(static_cast<flatbuffers::uoffset_t>(d));
      if (s < -1)
        return Error::make(ErrorCode::InvalidProgram, "tensor spec of %s %zu has size %lld for dim %zu (-1: dynamic)",
                           kind, i, static_cast<long long>(s), d);
    }
  }
  return Error::ok();
}

// Whether the running CPU has `feature`. A CpuFeature the schema gains and this
// switch lacks is a compile error (-Wswitch, -Werror): the list stays the schema's.
bool host_has(CpuFeature feature) {
#if defined(__x86_64__)
  switch (feature) {
    case CpuFeature::sse4_2: return __builtin_cpu_supports("sse4.2");
    case CpuFeature::avx: return __builtin_cpu_supports("avx");
    case CpuFeature::avx2: return __builtin_cpu_supports("avx2");
    case CpuFeature::fma: return __builtin_cpu_supports("fma");
    case CpuFeature::f16c: return __builtin_cpu_supports("f16c");
    case CpuFeature::avx512f: return __builtin_cpu_supports("avx512f");
    case CpuFeature::avx512dq: return __builtin_cpu_supports("avx512dq");
    case CpuFeature::avx512bw: return __builtin_cpu_supports("avx512bw");
    case CpuFeature::avx512vl: return __builtin_cpu_supports("avx512vl");
    case CpuFeature::bmi2: return __builtin_cpu_supports("bmi2");
  }
#else
  (void)feature;
#endif
  return false;
}

}  // namespace

uint32_t crc32(const uint8_t* data, size_t size) {
  uint32_t c = 0xFFFFFFFFu;
  const auto& t = kCrc32.t;
  while (size >= 8) {
    uint32_t lo = c ^ read_u32(data);
    uint32_t hi = read_u32(data + 4);
    c = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^ t[3][hi & 0xff] ^
        t[2][(hi >> 8) & 0xff] ^ t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
    data += 8;
    size -= 8;
  }
  while (size-- > 0) c = t[0][(c ^ *data++) & 0xff] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

Error read_payload(Span<const uint8_t> payload, const char* backend_id, PayloadView* out) {
  const uint8_t* p = payload.data();
  size_t size = payload.size();
  if (p == nullptr) size = 0;
  // Payloads from before the shared header: say so, and what to do.
  if (size >= 8 && std::memcmp(p, "ETMLCPU1", 8) == 0)
    return Error::make(ErrorCode::NotSupported,
                       "a cpu payload in the format from before the shared payload header (magic \"ETMLCPU1\"): "
                       "rebuild the .pte with this etmlir");
  if (size >= 4 && std::memcmp(p, "ETXH", 4) == 0)
    return Error::make(ErrorCode::NotSupported,
                       "a bare .pte, a nested payload from before the shared payload header: rebuild the .pte with "
                       "this etmlir");
  const char* identifier = payload_schema::PayloadHeaderIdentifier();
  if (size < 12)
    return Error::make(ErrorCode::InvalidProgram,
                       "not an etmlir payload header (a payload from before format 1?): rebuild the .pte (the "
                       "payload is only %zu bytes)",
                       size);
  if (std::memcmp(p + 8, identifier, 4) != 0) {
    char got[24];
    return Error::make(ErrorCode::InvalidProgram,
                       "not an etmlir payload header (a payload from before format 1?): rebuild the .pte (bytes 8 to "
                       "12 are \"%s\", not \"%s\")",
                       printable_bytes(p + 8, 4, got, sizeof(got)), identifier);
  }
  if (reinterpret_cast<uintptr_t>(p) % 8 != 0)
    return Error::make(ErrorCode::InvalidArgument,
                       "payload is not 8-byte aligned in memory (load the .pte into an aligned buffer)");
  uint32_t header_bytes = read_u32(p);
  if (header_bytes > size - 4)
    return Error::make(ErrorCode::InvalidProgram,
                       "payload header of %u bytes does not fit in the payload's %zu bytes: it is truncated or corrupt",
                       header_bytes, size);
  flatbuffers::Verifier verifier(p, size_t{header_bytes} + 4, /*max_depth=*/16, /*max_tables=*/1u << 20);
  if (!payload_schema::VerifySizePrefixedPayloadHeaderBuffer(verifier))
    return Error::make(ErrorCode::InvalidProgram,
                       "payload header is not a valid FlatBuffer (the FlatBuffers verifier refuses its %u bytes): the "
                       "payload is corrupt",
                       header_bytes);
  const PayloadHeader* header = payload_schema::GetSizePrefixedPayloadHeader(p);
  if (header->format_version() != kPayloadFormatVersion)
    return Error::make(ErrorCode::NotSupported,
                       "payload header format_version %u is not supported (this runtime reads version %u)",
                       header->format_version(), kPayloadFormatVersion);
  const char* id = header->backend_id() ? header->backend_id()->c_str() : "";
  if (backend_id != nullptr && std::strcmp(id, backend_id) != 0) {
    char shown[80];
    return Error::make(ErrorCode::InvalidProgram, "payload is for backend '%s', not '%s'",
                       printable_bytes(reinterpret_cast<const uint8_t*>(id), std::strlen(id), shown, sizeof(shown)),
                       backend_id);
  }
  uint64_t body_offset = header->body_offset();
  uint64_t body_size = header->body_size();
  if (body_offset % kPayloadBodyAlignment != 0)
    return Error::make(ErrorCode::InvalidProgram, "payload body_offset %llu is not a multiple of %zu",
                       static_cast<ull>(body_offset), kPayloadBodyAlignment);
  if (body_offset < uint64_t{header_bytes} + 4)
    return Error::make(ErrorCode::InvalidProgram, "payload body_offset %llu lies inside its %u-byte header",
                       static_cast<ull>(body_offset), header_bytes + 4);
  if (body_offset > size || body_size != size - body_offset)
    return Error::make(ErrorCode::InvalidProgram,
                       "payload body_offset %llu + body_size %llu does not match the payload's %zu bytes: it is "
                       "truncated or padded",
                       static_cast<ull>(body_offset), static_cast<ull>(body_size), size);
  ET_CHECK_OK(check_specs(header->inputs(), "input"));
  ET_CHECK_OK(check_specs(header->outputs(), "output"));
  for (size_t i = 0; i < count(header->entry_points()); ++i) {
    const payload_schema::EntryPoint* entry = header->entry_points()->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (entry->name() == nullptr || entry->symbol() == nullptr || entry->symbol()->size() == 0)
      return Error::make(ErrorCode::InvalidProgram, "payload entry point %zu has no name or no symbol", i);
  }
  const uint8_t* body = p + body_offset;
  uint32_t crc = crc32(body, static_cast<size_t>(body_size));
  if (crc != header->body_crc32())
    return Error::make(ErrorCode::InvalidProgram,
                       "payload checksum mismatch: the body is corrupt (CRC-32 of its %llu bytes is 0x%08x, the "
                       "header says 0x%08x)",
                       static_cast<ull>(body_size), crc, header->body_crc32());
  out->header = header;
  out->body = Span<const uint8_t>(body, static_cast<size_t>(body_size));
  return Error::ok();
}

Error check_payload_body(const payload_schema::PayloadHeader& header, const char* body_format,
                         uint32_t body_version) {
  const char* format = header.body_format() ? header.body_format()->c_str() : "";
  if (std::strcmp(format, body_format) != 0)
    return Error::make(ErrorCode::InvalidProgram, "payload body_format is '%.40s', not '%s'", format, body_format);
  if (header.body_version() != body_version)
    return Error::make(ErrorCode::NotSupported, "payload body_version %u is not supported (this runtime reads %u)",
                       header.body_version(), body_version);
  return Error::ok();
}

const char* payload_entry_symbol(const PayloadHeader& header, const char* name) {
  for (size_t i = 0; i < count(header.entry_points()); ++i) {
    const payload_schema::EntryPoint* entry = header.entry_points()->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (entry->name() != nullptr && std::strcmp(entry->name()->c_str(), name) == 0)
      return entry->symbol() ? entry->symbol()->c_str() : nullptr;
  }
  return nullptr;
}

const char* host_arch() {
#if defined(__x86_64__)
  return "x86_64";
#elif defined(__aarch64__)
  return "aarch64";
#else
  return "unsupported";
#endif
}

int num_cpu_features() { return static_cast<int>(CpuFeature::MAX) + 1; }

uint64_t host_cpu_features() {
#if defined(__x86_64__)
  __builtin_cpu_init();
#endif
  uint64_t bits = 0;
  for (int bit = 0; bit < num_cpu_features(); ++bit) {
    if (host_has(static_cast<CpuFeature>(bit))) bits |= uint64_t{1} << bit;
  }
  return bits;
}

const char* cpu_feature_name(int bit, char* buffer, size_t size) {
  if (size == 0) return buffer;
  buffer[0] = '\0';
  if (bit < 0 || bit >= num_cpu_features()) return buffer;
  const char* name = payload_schema::EnumNameCpuFeature(static_cast<CpuFeature>(bit));
  size_t n = 0;
  for (; name[n] != '\0' && n + 1 < size; ++n) buffer[n] = name[n] == '_' ? '.' : name[n];
  buffer[n] = '\0';
  return buffer;
}

Error check_payload_target(const PayloadHeader& header) {
  const char* arch = header.arch() ? header.arch()->c_str() : "";
  if (arch[0] != '\0' && std::strcmp(arch, host_arch()) != 0) {
    char shown[80];
    return Error::make(ErrorCode::NotSupported, "payload built for %s, this runtime runs on %s",
                       printable_bytes(reinterpret_cast<const uint8_t*>(arch), std::strlen(arch), shown, sizeof(shown)),
                       host_arch());
  }
  uint64_t features = header.cpu_features();
  uint64_t unknown = num_cpu_features() >= 64 ? 0 : features & ~((uint64_t{1} << num_cpu_features()) - 1);
  if (unknown != 0)
    return Error::make(ErrorCode::NotSupported, "payload needs CPU feature bits 0x%llx that this runtime does not know",
                       static_cast<ull>(unknown));
  uint64_t missing = features & ~host_cpu_features();
  if (missing != 0) {
    char names[160];
    size_t used = 0;
    size_t n = 0;
    names[0] = '\0';
    for (int bit = 0; bit < num_cpu_features(); ++bit) {
      if (!(missing >> bit & 1)) continue;
      char name[32];
      int wrote = std::snprintf(names + used, sizeof(names) - used, "%s%s", n ? ", " : "",
                                cpu_feature_name(bit, name, sizeof(name)));
      if (wrote > 0) used += static_cast<size_t>(wrote);
      if (used >= sizeof(names)) used = sizeof(names) - 1;
      ++n;
    }
    return Error::make(ErrorCode::NotSupported, "payload needs CPU feature%s %s that this CPU lacks", plural(n), names);
  }
  return Error::ok();
}

const char* printable_bytes(const uint8_t* bytes, size_t size, char* out, size_t out_size) {
  size_t used = 0;
  for (size_t i = 0; i < size && used + 5 < out_size; ++i) {
    if (bytes[i] >= 0x20 && bytes[i] < 0x7f && bytes[i] != '"' && bytes[i] != '\\') {
      out[used++] = static_cast<char>(bytes[i]);
    } else {
      used += static_cast<size_t>(std::snprintf(out + used, out_size - used, "\\x%02x", bytes[i]));
    }
  }
  out[used] = '\0';
  return out;
}

}  // namespace etmlir
