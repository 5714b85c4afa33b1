// The header every delegate payload starts with, whatever its backend
// (runtime/schema/payload.fbs; layout and rules in runtime/schema/README.md,
// "Delegate payloads"): a size-prefixed FlatBuffer saying which backend the
// payload is for, what its body is, the machine and CPU features native code
// in it needs, the delegate's tensor specs, its entry points, its debug-handle
// map, the scratch memory it needs, and where the body is (64-byte aligned)
// with the body's CRC-32.
//
//   PayloadView view;
//   if (Error e = read_payload(payload, "cpu", &view)) return e;      // framing, versions, checksum
//   if (Error e = check_payload_target(*view.header)) return e;       // arch and CPU features
//   const char* entry = payload_entry_symbol(*view.header, "forward");
//   ... view.body: the backend's own bytes ...
//
// read_payload checks what every backend needs checked, before a backend
// touches the body: the framing (the size prefix, the file identifier "ETPH",
// the FlatBuffers verifier over the header), the header's format_version, the
// backend id, the body's bounds and alignment, every tensor spec, and the
// body's CRC-32. Payloads from before the shared header (the cpu backend's
// "ETMLCPU1" header, a nested backend's bare .pte) are refused with a
// "rebuild the .pte" message. A backend checks body_format / body_version
// itself (it knows which it reads). Nothing here allocates; the view points
// into `payload`.
#pragma once

#include <cstddef>
#include <cstdint>

#include "etmlir/runtime/error.h"
#include "etmlir/runtime/span.h"
#include "etmlir/schema/payload_generated.h"

namespace etmlir {

// The PayloadHeader.format_version this runtime reads.
constexpr uint32_t kPayloadFormatVersion = 1;
// PayloadHeader.body_offset is a multiple of this.
constexpr size_t kPayloadBodyAlignment = 64;

// A checked payload: its header (FlatBuffer accessors, valid while the payload
// bytes are) and its body.
struct PayloadView {
  const payload_schema::PayloadHeader* header = nullptr;
  Span<const uint8_t> body;
};

// Checks `payload` (see above) as a payload for backend `backend_id` and
// points `out` at its header and body. Messages say what is wrong; the caller
// prefixes where ("cpu delegate 3").
Error read_payload(Span<const uint8_t> payload, const char* backend_id, PayloadView* out);

// The header's body_format against the one a backend reads ("payload body_format is 'x', not 'pte'",
// InvalidProgram) and its body_version against the one it reads (NotSupported).
Error check_payload_body(const payload_schema::PayloadHeader& header, const char* body_format,
                         uint32_t body_version);
// The symbol of the entry point named `name` ("forward", "shapes"), or nullptr.
const char* payload_entry_symbol(const payload_schema::PayloadHeader& header, const char* name);

// The header's arch (when it names one) against this runtime's, and its
// cpu_features against the running CPU: "payload built for aarch64, this
// runtime runs on x86_64", "payload needs CPU features avx512f, avx512bw that
// this CPU lacks" (NotSupported).
Error check_payload_target(const payload_schema::PayloadHeader& header);

// "x86_64" or "aarch64" (compile time): the arch payload code must be built for here.
const char* host_arch();
// PayloadHeader.cpu_features bits the running CPU has (0 off x86-64).
uint64_t host_cpu_features();
// CpuFeature `bit`'s name as GCC spells it ("sse4.2" for sse4_2) into `buffer`; "" when unknown.
const char* cpu_feature_name(int bit, char* buffer, size_t size);
// How many CpuFeature bits the schema names (bits at or above it are unknown).
int num_cpu_features();

// CRC-32 (IEEE 802.3, reflected 0xEDB88320; zlib's crc32) of `size` bytes.
uint32_t crc32(const uint8_t* data, size_t size);

// `size` bytes as text for a message, into `out` (NUL-terminated, truncated to
// fit): printable ASCII as is, quotes, backslashes and the rest as \xNN.
const char* printable_bytes(const uint8_t* bytes, size_t size, char* out, size_t out_size);

}  // namespace etmlir
