// The "tosa" backend (runtime/backends/tosa) on make_fixtures.py's tosa_conv.pte (a small CNN
// delegated whole to tosa, with a bundled case of eager's outputs) and tosa_conv.tosa (its TOSA
// FlatBuffer alone): the program runs and matches eager; payloads built here around that body,
// a garbage body, a damaged one, wrong profiles and mismatched headers are refused at init with
// a message, never a crash; random byte changes in the body (CRC recomputed, so they reach the
// TOSA parse) never crash; without the reference model library the backend is unavailable and
// says where it looked. Skipped when the fixtures were made without tosa-tools.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "etmlir/register_backends.h"
#include "etmlir/runtime/backend.h"
#include "etmlir/runtime/bundled.h"
#include "etmlir/runtime/method.h"
#include "etmlir/runtime/program.h"
#include "test_util.h"
#include "tosa_backend.h"

namespace etmlir {
namespace {

#define REQUIRE_TOSA_FIXTURES()                                                                 \
  do {                                                                                          \
    ETMLIR_REQUIRE_FIXTURES();                                                                  \
    if (!std::ifstream(test::fixture_path("tosa_conv.tosa")).good())                            \
      GTEST_SKIP() << "no tosa fixtures (make_fixtures.py found no tosa-tools)";                \
  } while (0)

test::PayloadFields tosa_fields(const std::string& profile = "pro_fp") {
  test::PayloadFields fields;
  fields.backend_id = "tosa";
  fields.body_format = "tosa-flatbuffer";
  fields.inputs = {{ScalarType::Float, {1, 2, 4, 4}}};
  fields.outputs = {{ScalarType::Float, {1, 5}}};
  fields.entry_points = {{"forward", "main"}, {"profile", profile}, {"level", "8k"}};
  return fields;
}

// init() then destroy() of one payload on the registered "tosa" backend: its error, if any.
Error init_payload(const std::vector<uint8_t>& payload) {
  static BackendRegistry registry;
  static bool registered = !register_tosa_backend(registry);
  EXPECT_TRUE(registered);
  Backend* backend = registry.find("tosa");
  if (backend == nullptr) return Error::make(ErrorCode::NotFound, "no tosa backend");
  return test::init_and_destroy(*backend, payload);
}

std::vector<uint8_t> tosa_body() { return test::read_file(test::fixture_path("tosa_conv.tosa")); }

TEST(TosaBackend, TheDelegatedProgramMatchesEager) {
  REQUIRE_TOSA_FIXTURES();
  BackendRegistry backends;
  ASSERT_FALSE(register_backends(backends));
  ASSERT_TRUE(backends.find("tosa")->is_available()) << tosa_reference_library_problem();
  test::LoadedMethod loaded;
  Error e = test::load_forward("tosa_conv.pte", test::LoaderKind::Buffer, &backends, &loaded);
  ASSERT_FALSE(e) << e.message();
  ASSERT_NE(loaded.method, nullptr) << loaded.error.message();
  Result<BundledCases> cases = BundledCases::load(*loaded.program->program);
  ASSERT_TRUE(cases.ok()) << cases.error().message();
  ASSERT_EQ(cases->size(), 1u);
  for (int run = 0; run < 3; ++run) {  // the reference model's graph runs again and again
    ASSERT_FALSE(cases->set_inputs(*loaded.method, 0));
    Error executed = loaded.method->execute();
    ASSERT_FALSE(executed) << executed.message();
    BundledOutputCheck checks[1];
    Result<bool> passed = cases->check_outputs(*loaded.method, 0, Span<BundledOutputCheck>(checks, 1));
    ASSERT_TRUE(passed.ok()) << passed.error().message();
    EXPECT_TRUE(passed.get()) << "max abs error " << checks[0].max_abs_error;
  }
}

TEST(TosaBackend, AGoodPayloadInitsAndBadOnesAreRefusedNamingWhy) {
  REQUIRE_TOSA_FIXTURES();
  std::vector<uint8_t> body = tosa_body();
  Error good = init_payload(test::write_payload(tosa_fields(), body));
  ASSERT_FALSE(good) << good.message();

  std::vector<uint8_t> garbage(body.size());
  for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<uint8_t>(body[i] * 7 + 3);
  Error e = init_payload(test::write_payload(tosa_fields(), garbage));
  EXPECT_EQ(e.code(), ErrorCode::InvalidProgram);
  EXPECT_CONTAINS(e.message(), "not a TOSA FlatBuffer");

  // Verifies as a FlatBuffer, but its second half is zeros: the reference model's deserializer
  // would crash on it, so the library reads it in a child process first.
  std::vector<uint8_t> damaged = body;
  std::fill(damaged.begin() + static_cast<long>(damaged.size() / 2), damaged.end(), 0);
  e = init_payload(test::write_payload(tosa_fields(), damaged));
  ASSERT_TRUE(e);
  EXPECT_CONTAINS(e.message(), "the TOSA graph");

  e = init_payload(test::write_payload(tosa_fields("pro_xx"), body));
  EXPECT_EQ(e.code(), ErrorCode::NotSupported);
  EXPECT_CONTAINS(e.message(), "TOSA profile 'pro_xx'; this backend runs pro_fp and pro_int");

  e = init_payload(test::write_payload(tosa_fields("pro_int"), body));
  ASSERT_TRUE(e);
  EXPECT_CONTAINS(e.message(), "which profile pro_int does not allow (the payload says pro_int)");

  test::PayloadFields wrong_output = tosa_fields();
  wrong_output.outputs = {{ScalarType::Float, {1, 6}}};
  e = init_payload(test::write_payload(wrong_output, body));
  EXPECT_EQ(e.code(), ErrorCode::InvalidProgram);
  EXPECT_CONTAINS(e.message(), "the header's output 0 does not match the TOSA graph's float32[1, 5]");

  test::PayloadFields other_format = tosa_fields();
  other_format.body_format = "tosa-json";
  e = init_payload(test::write_payload(other_format, body));
  EXPECT_CONTAINS(e.message(), "payload body_format is 'tosa-json', not 'tosa-flatbuffer'");

  test::PayloadFields no_profile = tosa_fields();
  no_profile.entry_points = {{"forward", "main"}};
  e = init_payload(test::write_payload(no_profile, body));
  EXPECT_CONTAINS(e.message(), "names no TOSA profile");

  test::PayloadFields no_region = tosa_fields();
  no_region.entry_points = {{"forward", "other"}, {"profile", "pro_fp"}};
  e = init_payload(test::write_payload(no_region, body));
  EXPECT_CONTAINS(e.message(), "the graph has no region 'other'");
}

TEST(TosaBackend, RandomChangesInTheBodyNeverCrash) {
  REQUIRE_TOSA_FIXTURES();
  std::vector<uint8_t> body = tosa_body();
  const char* env = std::getenv("ETMLIR_FUZZ_ITERATIONS");
  int iterations = env ? std::atoi(env) : 150;
  std::mt19937 rng(7);
  int refused = 0;
  for (int i = 0; i < iterations; ++i) {
    std::vector<uint8_t> mutated = body;
    int changes = 1 << (rng() % 5);
    for (int c = 0; c < changes; ++c) mutated[rng() % mutated.size()] = static_cast<uint8_t>(rng());
    Error e = init_payload(test::write_payload(tosa_fields(), mutated));  // CRC recomputed
    if (e) {
      ++refused;
      EXPECT_GT(std::strlen(e.message()), 10u);
    }
  }
  EXPECT_GT(refused, 0);
}

TEST(TosaBackendDeathTest, WithoutTheReferenceLibraryTheBackendIsUnavailableAndSaysWhere) {
  REQUIRE_TOSA_FIXTURES();
  // A fresh process (the library is looked up once per process).
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("ETMLIR_TOSA_REFERENCE_LIB", "/nonexistent/libetmlir_tosa_reference.so", 1);
        BackendRegistry registry;
        bool ok = !register_tosa_backend(registry);
        Backend* backend = registry.find("tosa");
        ok = ok && backend != nullptr && !backend->is_available();
        const char* why = backend ? backend->unavailable_reason() : nullptr;
        ok = ok && why != nullptr && std::strstr(why, "/nonexistent/libetmlir_tosa_reference.so") != nullptr;
        Error e = init_payload(test::write_payload(tosa_fields(), tosa_body()));
        ok = ok && e.code() == ErrorCode::NotSupported &&
             std::strstr(e.message(), "TOSA reference model library is not available") != nullptr;
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace etmlir
