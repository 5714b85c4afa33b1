// The shared delegate payload header (include/etmlir/runtime/payload_header.h,
// runtime/schema/payload.fbs): what read_payload accepts, every refusal with
// its message, the machine checks, and the CPU feature names that come from
// the schema's enum.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "etmlir/runtime/payload_header.h"
#include "test_util.h"

namespace etmlir {
namespace {

test::PayloadFields fields() {
  test::PayloadFields h;
  h.backend_id = "toy";
  h.body_format = "bytes";
  h.inputs = {{ScalarType::Float, {-1, 4}}};
  h.outputs = {{ScalarType::Int64, {3}}};
  h.entry_points = {{"forward", "run_it"}};
  h.debug_handles = {5, 9};
  h.scratch_bytes = 128;
  return h;
}

const std::vector<uint8_t> kBody = {'b', 'o', 'd', 'y', 0, 1, 2, 3, 4, 5};

// read_payload over a 64-byte-aligned copy of `payload`.
struct Read {
  explicit Read(const std::vector<uint8_t>& payload, const char* backend = "toy")
      : buffer(payload.size()), size(payload.size()) {
    if (!payload.empty()) std::memcpy(buffer.data(), payload.data(), payload.size());
    error = read_payload(Span<const uint8_t>(buffer.data(), size), backend, &view);
  }
  test::AlignedBuffer buffer;
  size_t size;
  PayloadView view;
  Error error;
};

TEST(PayloadHeader, AGoodPayloadReadsBack) {
  std::vector<uint8_t> payload = test::write_payload(fields(), kBody);
  size_t body_at = test::payload_body_offset(payload);
  EXPECT_EQ(body_at % 64, 0u);
  EXPECT_EQ(payload.size(), body_at + kBody.size());
  EXPECT_EQ(std::memcmp(&payload[8], "ETPH", 4), 0);  // the file identifier after the size prefix
  Read r(payload);
  ASSERT_FALSE(r.error) << r.error.message();
  const payload_schema::PayloadHeader& h = *r.view.header;
  EXPECT_EQ(h.format_version(), kPayloadFormatVersion);
  EXPECT_STREQ(h.backend_id()->c_str(), "toy");
  EXPECT_STREQ(h.body_format()->c_str(), "bytes");
  EXPECT_EQ(h.scratch_bytes(), 128u);
  ASSERT_EQ(h.inputs()->size(), 1u);
  EXPECT_EQ(h.inputs()->Get(0)->scalar_type(), static_cast<int8_t>(ScalarType::Float));
  EXPECT_EQ(h.inputs()->Get(0)->sizes()->Get(0), -1);
  ASSERT_EQ(h.debug_handle_map()->size(), 2u);
  EXPECT_EQ(h.debug_handle_map()->Get(1)->id(), 9u);
  EXPECT_EQ(h.debug_handle_map()->Get(1)->handles()->Get(0), 9u);
  EXPECT_STREQ(payload_entry_symbol(h, "forward"), "run_it");
  EXPECT_EQ(payload_entry_symbol(h, "shapes"), nullptr);
  ASSERT_EQ(r.view.body.size(), kBody.size());
  EXPECT_EQ(std::memcmp(r.view.body.data(), kBody.data(), kBody.size()), 0);
  EXPECT_EQ(r.view.body.data(), r.buffer.data() + body_at);
  // No backend id to check: any backend's payload reads.
  Read any(payload, nullptr);
  EXPECT_FALSE(any.error) << any.error.message();
}

TEST(PayloadHeader, PayloadsFromBeforeTheSharedHeaderSayRebuild) {
  std::vector<uint8_t> old_cpu(256, 0);
  std::memcpy(old_cpu.data(), "ETMLCPU1", 8);
  Read cpu(old_cpu);
  EXPECT_EQ(cpu.error.code(), ErrorCode::NotSupported);
  EXPECT_STREQ(cpu.error.message(),
               "a cpu payload in the format from before the shared payload header (magic \"ETMLCPU1\"): rebuild "
               "the .pte with this etmlir");
  std::vector<uint8_t> bare_pte(256, 0);
  std::memcpy(bare_pte.data(), "ETXH", 4);
  EXPECT_STREQ(Read(bare_pte).error.message(),
               "a bare .pte, a nested payload from before the shared payload header: rebuild the .pte with this "
               "etmlir");
  std::string junk = "opaque bytes";
  Read opaque(std::vector<uint8_t>(junk.begin(), junk.end()));
  EXPECT_EQ(opaque.error.code(), ErrorCode::InvalidProgram);
  EXPECT_STREQ(opaque.error.message(),
               "not an etmlir payload header (a payload from before format 1?): rebuild the .pte (bytes 8 to 12 are "
               "\"ytes\", not \"ETPH\")");
  EXPECT_STREQ(Read(std::vector<uint8_t>(5, 1)).error.message(),
               "not an etmlir payload header (a payload from before format 1?): rebuild the .pte (the payload is only "
               "5 bytes)");
  EXPECT_CONTAINS(Read(std::vector<uint8_t>()).error.message(), "the payload is only 0 bytes");
}

TEST(PayloadHeader, FramingAndTheVerifier) {
  std::vector<uint8_t> good = test::write_payload(fields(), kBody);
  std::vector<uint8_t> big = good;
  big[0] = 0xff;
  big[1] = 0xff;
  char expected[200];
  std::snprintf(expected, sizeof(expected),
                "payload header of %u bytes does not fit in the payload's %zu bytes: it is truncated or corrupt",
                good[0] | 0xffffu, good.size());
  EXPECT_STREQ(Read(big).error.message(), expected);
  // The root offset pointing outside the buffer: the verifier refuses it.
  std::vector<uint8_t> root = good;
  root[4] = 0xf0;
  root[5] = 0x7f;
  Read bad_root(root);
  EXPECT_EQ(bad_root.error.code(), ErrorCode::InvalidProgram);
  EXPECT_CONTAINS(bad_root.error.message(), "payload header is not a valid FlatBuffer");
  // Misaligned in memory.
  test::AlignedBuffer shifted(good.size() + 4);
  std::memcpy(shifted.data() + 4, good.data(), good.size());
  PayloadView view;
  Error misaligned = read_payload(Span<const uint8_t>(shifted.data() + 4, good.size()), "toy", &view);
  EXPECT_EQ(misaligned.code(), ErrorCode::InvalidArgument);
  EXPECT_STREQ(misaligned.message(), "payload is not 8-byte aligned in memory (load the .pte into an aligned buffer)");
}

TEST(PayloadHeader, VersionsAndBackendId) {
  test::PayloadFields h = fields();
  h.format_version = 2;
  Read v2(test::write_payload(h, kBody));
  EXPECT_EQ(v2.error.code(), ErrorCode::NotSupported);
  EXPECT_STREQ(v2.error.message(), "payload header format_version 2 is not supported (this runtime reads version 1)");
  EXPECT_STREQ(Read(test::write_payload(fields(), kBody), "cpu").error.message(),
               "payload is for backend 'toy', not 'cpu'");
  h = fields();
  h.backend_id = "";
  EXPECT_STREQ(Read(test::write_payload(h, kBody)).error.message(), "payload is for backend '', not 'toy'");
}

TEST(PayloadHeader, BodyBoundsAndChecksum) {
  std::vector<uint8_t> good = test::write_payload(fields(), kBody);
  size_t body_at = test::payload_body_offset(good);
  test::PayloadFields h = fields();
  h.body_offset_override = 100;
  EXPECT_STREQ(Read(test::write_payload(h, kBody)).error.message(), "payload body_offset 100 is not a multiple of 64");
  h = fields();
  h.body_offset_override = 0;
  EXPECT_CONTAINS(Read(test::write_payload(h, kBody)).error.message(), "payload body_offset 0 lies inside its");
  h = fields();
  h.body_size_override = static_cast<int64_t>(kBody.size()) + 1;
  char expected[200];
  std::snprintf(expected, sizeof(expected),
                "payload body_offset %zu + body_size %zu does not match the payload's %zu bytes: it is truncated or "
                "padded",
                body_at, kBody.size() + 1, good.size());
  EXPECT_STREQ(Read(test::write_payload(h, kBody)).error.message(), expected);
  std::vector<uint8_t> truncated(good.begin(), good.end() - 1);
  EXPECT_CONTAINS(Read(truncated).error.message(), "it is truncated or padded");
  std::vector<uint8_t> corrupt = good;
  corrupt[body_at + 3] ^= 0x20;
  Read bad(corrupt);
  EXPECT_EQ(bad.error.code(), ErrorCode::InvalidProgram);
  std::snprintf(expected, sizeof(expected),
                "payload checksum mismatch: the body is corrupt (CRC-32 of its %zu bytes is 0x%08x, the header says "
                "0x%08x)",
                kBody.size(), static_cast<unsigned>(test::crc32(&corrupt[body_at], kBody.size())),
                static_cast<unsigned>(test::crc32(kBody.data(), kBody.size())));
  EXPECT_STREQ(bad.error.message(), expected);
  // The runtime's CRC-32 is zlib's.
  const char* check = "123456789";
  EXPECT_EQ(crc32(reinterpret_cast<const uint8_t*>(check), 9), 0xCBF43926u);
  std::vector<uint8_t> long_input(1000);
  for (size_t i = 0; i < long_input.size(); ++i) long_input[i] = static_cast<uint8_t>(i * 7);
  EXPECT_EQ(crc32(long_input.data(), long_input.size()), test::crc32(long_input.data(), long_input.size()));
}

TEST(PayloadHeader, TensorSpecsAndEntryPoints) {
  test::PayloadFields h = fields();
  h.inputs[0].dtype = static_cast<ScalarType>(9);
  EXPECT_STREQ(Read(test::write_payload(h, kBody)).error.message(), "tensor spec of input 0 has unknown dtype 9");
  h = fields();
  h.outputs[0].sizes.assign(17, 1);
  EXPECT_STREQ(Read(test::write_payload(h, kBody)).error.message(), "tensor spec of output 0 has rank 17 (0 to 16)");
  h = fields();
  h.inputs[0].sizes = {3, -2};
  EXPECT_STREQ(Read(test::write_payload(h, kBody)).error.message(),
               "tensor spec of input 0 has size -2 for dim 1 (-1: dynamic)");
  h = fields();
  h.entry_points = {{"forward", ""}};
  EXPECT_STREQ(Read(test::write_payload(h, kBody)).error.message(), "payload entry point 0 has no name or no symbol");
}

TEST(PayloadHeader, MachineChecks) {
  std::string here = host_arch();
  test::PayloadFields h = fields();
  h.arch = here == "x86_64" ? "aarch64" : "x86_64";
  Read other(test::write_payload(h, kBody));
  ASSERT_FALSE(other.error) << other.error.message();
  Error arch = check_payload_target(*other.view.header);
  EXPECT_EQ(arch.code(), ErrorCode::NotSupported);
  EXPECT_EQ(std::string(arch.message()), "payload built for " + h.arch + ", this runtime runs on " + here);
  h.arch = "";  // any machine
  h.cpu_features = host_cpu_features();
  Read any(test::write_payload(h, kBody));
  EXPECT_FALSE(check_payload_target(*any.view.header));
  h.cpu_features = uint64_t{1} << 40;
  Read unknown(test::write_payload(h, kBody));
  EXPECT_STREQ(check_payload_target(*unknown.view.header).message(),
               "payload needs CPU feature bits 0x10000000000 that this runtime does not know");
}

TEST(PayloadHeader, FeatureNamesComeFromTheSchema) {
  EXPECT_EQ(num_cpu_features(), 10);
  char name[32];
  EXPECT_STREQ(cpu_feature_name(0, name, sizeof(name)), "sse4.2");
  EXPECT_STREQ(cpu_feature_name(2, name, sizeof(name)), "avx2");
  EXPECT_STREQ(cpu_feature_name(9, name, sizeof(name)), "bmi2");
  EXPECT_STREQ(cpu_feature_name(10, name, sizeof(name)), "");
  EXPECT_EQ(host_cpu_features() >> num_cpu_features(), 0u);
#if defined(__x86_64__)
  EXPECT_STREQ(host_arch(), "x86_64");
  EXPECT_NE(host_cpu_features() & 1, 0u) << "an x86_64 CPU without sse4.2?";
#endif
}

}  // namespace
}  // namespace etmlir
