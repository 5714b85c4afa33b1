// Trace files (trace_file.h): the FlatBuffer of runtime/schema/trace.fbs, SHA-256, the host's CPU.
#include "trace_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "etmlir/runtime/payload_header.h"
#include "etmlir/schema/trace_generated.h"

namespace etmlir {
namespace devtools {
namespace {

namespace fb = etmlir::trace_schema;
using ull = unsigned long long;

// FlatBuffers addresses at most 2 GiB; stay clear of it (the builder would abort).
constexpr uint64_t kMaxFileBytes = (uint64_t{1} << 31) - (uint64_t{64} << 20);

// ---- SHA-256 (FIPS 180-4) ----------------------------------------------------------

constexpr uint32_t kRound[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

class Sha256 {
 public:
  void update(const uint8_t* data, size_t size) {
    total_ += size;
    if (used_ > 0) {
      size_t take = size < 64 - used_ ? size : 64 - used_;
      std::memcpy(block_ + used_, data, take);
      used_ += take;
      data += take;
      size -= take;
      if (used_ < 64) return;
      compress(block_);
      used_ = 0;
    }
    for (; size >= 64; data += 64, size -= 64) compress(data);
    if (size > 0) std::memcpy(block_, data, size);
    used_ = size;
  }

  std::string hex() {
    uint64_t bits = total_ * 8;
    uint8_t pad[72] = {0x80};
    size_t pad_size = (used_ < 56 ? 56 : 120) - used_;
    for (int i = 0; i < 8; ++i) pad[pad_size + static_cast<size_t>(i)] = static_cast<uint8_t>(bits >> (56 - 8 * i));
    update(pad, pad_size + 8);
    static const char digits[] = "0123456789abcdef";
    std::string out;
    for (uint32_t word : state_) {
      for (int shift = 28; shift >= 0; shift -= 4) out += digits[(word >> shift) & 0xF];
    }
    return out;
  }

 private:
  void compress(const uint8_t* p) {
    uint32_t w[64];
    for (int i = 0; i < 16; ++i)
      w[i] = uint32_t{p[4 * i]} << 24 | uint32_t{p[4 * i + 1]} << 16 | uint32_t{p[4 * i + 2]} << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; ++i) {
      uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3];
    uint32_t e = state_[4], f = state_[5], g = state_[6], h = state_[7];
    for (int i = 0; i < 64; ++i) {
      uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kRound[i] + w[i];
      uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    state_[0] += a;
    state_[1] += b;
    state_[2] += c;
    state_[3] += d;
    state_[4] += e;
    state_[5] += f;
    state_[6] += g;
    state_[7] += h;
  }

  uint32_t state_[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                        0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  uint8_t block_[64] = {};
  size_t used_ = 0;
  uint64_t total_ = 0;
};

}  // namespace

std::string sha256_hex(const uint8_t* data, size_t size) {
  Sha256 h;
  if (size > 0) h.update(data, size);
  return h.hex();
}

Error sha256_file(const char* path, std::string* hex) {
  std::FILE* f = std::fopen(path, "rb");
  if (f == nullptr) return Error::make(ErrorCode::Io, "cannot open %s to hash it: %s", path, std::strerror(errno));
  Sha256 h;
  std::vector<uint8_t> buffer(size_t{1} << 20);
  size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), f)) > 0) h.update(buffer.data(), n);
  bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return Error::make(ErrorCode::Io, "cannot read %s to hash it", path);
  *hex = h.hex();
  return Error::ok();
}

std::string host_cpu_description() {
  std::string out = host_arch();
  uint64_t features = host_cpu_features();
  char name[32];
  for (int bit = 0; bit < num_cpu_features(); ++bit) {
    if ((features >> bit) & 1) {
      const char* n = cpu_feature_name(bit, name, sizeof(name));
      if (n[0] != '\0') out += std::string(" ") + n;
    }
  }
  return out;
}

size_t default_trace_events(uint64_t runs, size_t instructions, size_t delegates) {
  // In floating point: no overflow for absurd run counts, and the cap applies all the same.
  double per_run = 2.0 * static_cast<double>(instructions) + static_cast<double>(delegates) * kEventsPerDelegate;
  double total = per_run * static_cast<double>(runs);
  if (total < static_cast<double>(kMinDefaultEvents)) return kMinDefaultEvents;
  if (total > static_cast<double>(kMaxDefaultEvents)) return kMaxDefaultEvents;
  return static_cast<size_t>(total);
}

MethodTraceData method_trace(const char* method, const EventTracer& tracer) {
  MethodTraceData data;
  data.method = method != nullptr ? method : "";
  data.runs = tracer.run();
  data.events = tracer.events();
  data.captures = tracer.captures();
  data.capture_bytes = tracer.capture_bytes();
  data.dropped_events = tracer.dropped_events();
  data.dropped_captures = tracer.dropped_captures();
  return data;
}

Error serialize_trace(const TraceFileInfo& info, const std::vector<MethodTraceData>& methods,
                      std::vector<uint8_t>* out) {
  // Refuse what the 2 GiB FlatBuffer cannot hold before the builder would abort on it.
  uint64_t estimate = 4096;
  for (const MethodTraceData& m : methods) {
    estimate += m.method.size() + 64 + m.events.size() * sizeof(fb::Event);
    for (const TraceCapture& c : m.captures) estimate += c.nbytes + 8 * (c.rank + 8);
  }
  if (estimate > kMaxFileBytes)
    return Error::make(ErrorCode::OutOfMemory,
                       "a trace of about %llu bytes does not fit one trace file (FlatBuffers hold under 2 GiB): "
                       "trace fewer runs or capture fewer values",
                       static_cast<ull>(estimate));
  flatbuffers::FlatBufferBuilder builder(static_cast<size_t>(estimate < (64u << 20) ? estimate : (64u << 20)));
  std::vector<flatbuffers::Offset<fb::MethodTrace>> method_offsets;
  for (const MethodTraceData& m : methods) {
    std::vector<flatbuffers::Offset<fb::Capture>> captures;
    for (size_t i = 0; i < m.captures.size(); ++i) {
      const TraceCapture& c = m.captures[i];
      if (c.rank > TraceCapture::kMaxRank)
        return Error::make(ErrorCode::InvalidArgument, "method '%s' capture %zu has rank %u (at most %zu)",
                           m.method.c_str(), i, c.rank, TraceCapture::kMaxRank);
      if (c.nbytes > 0 && m.capture_bytes == nullptr)
        return Error::make(ErrorCode::InvalidArgument, "method '%s' capture %zu has %llu bytes but no buffer",
                           m.method.c_str(), i, static_cast<ull>(c.nbytes));
      auto sizes = builder.CreateVector(c.sizes, c.rank);
      auto data = builder.CreateVector(c.nbytes > 0 ? m.capture_bytes + c.offset : nullptr,
                                       static_cast<size_t>(c.nbytes));
      captures.push_back(fb::CreateCapture(builder, c.run, c.instruction, c.value, c.scalar_type, sizes, data));
    }
    std::vector<fb::Event> events;
    events.reserve(m.events.size());
    for (const TraceEvent& e : m.events) {
      events.emplace_back(e.start_ns, e.end_ns, e.debug_handle, e.payload_id, e.instruction, e.run, e.parent,
                          e.delegate, static_cast<uint8_t>(e.kind), e.depth);
    }
    auto name = builder.CreateString(m.method);
    auto event_vector = builder.CreateVectorOfStructs(events);
    auto capture_vector = builder.CreateVector(captures);
    method_offsets.push_back(fb::CreateMethodTrace(builder, name, m.runs, event_vector, capture_vector,
                                                   m.dropped_events, m.dropped_captures));
  }
  auto sha = builder.CreateString(info.program_sha256);
  auto path = builder.CreateString(info.program_path);
  auto writer = builder.CreateString(info.writer);
  auto cpu = builder.CreateString(info.cpu.empty() ? host_cpu_description() : info.cpu);
  auto method_vector = builder.CreateVector(method_offsets);
  auto root = fb::CreateTrace(builder, kTraceFormatVersion, sha, path, writer, info.backend_threads, cpu,
                              method_vector);
  fb::FinishTraceBuffer(builder, root);
  out->assign(builder.GetBufferPointer(), builder.GetBufferPointer() + builder.GetSize());
  return Error::ok();
}

Error verify_trace(const uint8_t* data, size_t size) {
  if (data == nullptr || size < 8 || !fb::TraceBufferHasIdentifier(data))
    return Error::make(ErrorCode::InvalidArgument, "not a trace file (no \"ETTR\" file identifier)");
  flatbuffers::Verifier verifier(data, size);
  if (!fb::VerifyTraceBuffer(verifier))
    return Error::make(ErrorCode::InvalidArgument, "a damaged trace file (its FlatBuffer does not verify)");
  uint32_t version = fb::GetTrace(data)->format_version();
  if (version > kTraceFormatVersion)
    return Error::make(ErrorCode::NotSupported, "trace format version %u is newer than this reader's (%u)", version,
                       kTraceFormatVersion);
  return Error::ok();
}

Error write_trace_file(const char* path, const TraceFileInfo& info, const std::vector<MethodTraceData>& methods) {
  std::vector<uint8_t> bytes;
  if (Error e = serialize_trace(info, methods, &bytes)) return e;
  std::FILE* f = std::fopen(path, "wb");
  if (f == nullptr) return Error::make(ErrorCode::Io, "cannot write trace file %s: %s", path, std::strerror(errno));
  size_t written = std::fwrite(bytes.data(), 1, bytes.size(), f);
  int saved = errno;
  bool closed = std::fclose(f) == 0;
  if (written != bytes.size() || !closed)
    return Error::make(ErrorCode::Io, "cannot write trace file %s: %s", path,
                       std::strerror(written != bytes.size() ? saved : errno));
  return Error::ok();
}

}  // namespace devtools
}  // namespace etmlir
