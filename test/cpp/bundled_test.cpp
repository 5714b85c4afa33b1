// Bundled test cases (include/etmlir/runtime/bundled.h) on bundled_mlp.pte (make_fixtures.py):
// the zoo MLP with two cases, 'eager' (PyTorch eager's outputs, atol/rtol 1e-4) and 'wrong'
// (eager's + 0.5). An on-device self-test is exactly this: load the cases, feed each one's
// inputs, execute, compare; no Python, no files but the .pte. A program without cases has none,
// and cases that point outside their segment are refused with the case and tensor named.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "etmlir/runtime/bundled.h"
#include "etmlir/runtime/method.h"
#include "etmlir/runtime/program.h"
#include "etmlir/schema/program_generated.h"
#include "test_util.h"

namespace etmlir {
namespace {

TEST(Bundled, TheEagerCasePassesAndTheWrongOneFailsNamingTheWorstElement) {
  ETMLIR_REQUIRE_FIXTURES();
  for (test::LoaderKind kind : {test::LoaderKind::Buffer, test::LoaderKind::File, test::LoaderKind::Mmap}) {
    SCOPED_TRACE(test::loader_kind_name(kind));
    test::LoadedMethod loaded;
    Error e = test::load_forward("bundled_mlp.pte", kind, nullptr, &loaded);
    ASSERT_FALSE(e) << e.message();
    ASSERT_NE(loaded.method, nullptr) << loaded.error.message();
    Result<BundledCases> cases = BundledCases::load(*loaded.program->program);
    ASSERT_TRUE(cases.ok()) << cases.error().message();
    ASSERT_EQ(cases->size(), 2u);
    EXPECT_STREQ(cases->method(0), "forward");
    EXPECT_STREQ(cases->name(0), "eager");
    EXPECT_STREQ(cases->name(1), "wrong");
    EXPECT_DOUBLE_EQ(cases->atol(0), 1e-4);
    EXPECT_EQ(cases->num_inputs(0), 1u);
    EXPECT_EQ(cases->num_outputs(0), 1u);

    Method& method = *loaded.method;
    BundledOutputCheck checks[1];
    ASSERT_FALSE(cases->set_inputs(method, 0));
    ASSERT_FALSE(method.execute());
    Result<bool> passed = cases->check_outputs(method, 0, Span<BundledOutputCheck>(checks, 1));
    ASSERT_TRUE(passed.ok()) << passed.error().message();
    EXPECT_TRUE(passed.get());
    EXPECT_TRUE(checks[0].passed);
    EXPECT_EQ(checks[0].mismatched, 0u);
    EXPECT_GT(checks[0].numel, 0u);
    EXPECT_LT(checks[0].max_abs_error, 1e-4);

    ASSERT_FALSE(cases->set_inputs(method, 1));
    ASSERT_FALSE(method.execute());
    Result<bool> wrong = cases->check_outputs(method, 1, Span<BundledOutputCheck>(checks, 1));
    ASSERT_TRUE(wrong.ok());
    EXPECT_FALSE(wrong.get());
    EXPECT_EQ(checks[0].mismatched, checks[0].numel);
    EXPECT_NEAR(checks[0].max_abs_error, 0.5, 1e-3);
    EXPECT_NEAR(checks[0].worst_expected - checks[0].worst_actual, 0.5, 1e-3);
  }
}

TEST(Bundled, ARunThatMisusesACaseIsAnErrorNotACrash) {
  ETMLIR_REQUIRE_FIXTURES();
  test::LoadedMethod loaded;
  ASSERT_FALSE(test::load_forward("bundled_mlp.pte", test::LoaderKind::Buffer, nullptr, &loaded));
  Result<BundledCases> cases = BundledCases::load(*loaded.program->program);
  ASSERT_TRUE(cases.ok());
  Error e = cases->set_inputs(*loaded.method, 7);
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_STREQ(e.message(), "bundled test case 7 does not exist (the program has 2)");
  BundledOutputCheck checks[1];
  Result<bool> r = cases->check_outputs(*loaded.method, 0, Span<BundledOutputCheck>(checks, 0));
  ASSERT_FALSE(r.ok());
  EXPECT_STREQ(r.error().message(), "check_outputs: 0 entries for the 1 outputs of test case 0");
}

TEST(Bundled, AProgramWithoutCasesHasNone) {
  ETMLIR_REQUIRE_FIXTURES();
  test::LoadedMethod loaded;
  ASSERT_FALSE(test::load_forward("mlp.pte", test::LoaderKind::Buffer, nullptr, &loaded));
  Result<BundledCases> cases = BundledCases::load(*loaded.program->program);
  ASSERT_TRUE(cases.ok()) << cases.error().message();
  EXPECT_EQ(cases->size(), 0u);
}

// Moves the first case's first input past the end of its segment (the FlatBuffer edited in
// place: DataLocation is a struct, so its offset field has a fixed place).
TEST(Bundled, ATensorOutsideItsSegmentIsRefusedNamingIt) {
  ETMLIR_REQUIRE_FIXTURES();
  std::vector<uint8_t> file = test::read_file(test::fixture_path("bundled_mlp.pte"));
  ASSERT_FALSE(file.empty());
  uint64_t program_offset;
  std::memcpy(&program_offset, file.data() + 16, sizeof(program_offset));
  const schema::Program* program = schema::GetProgram(file.data() + program_offset);
  const schema::DataLocation* location = program->bundled_cases()->Get(0)->inputs()->Get(0)->data();
  ASSERT_NE(location, nullptr);
  // struct DataLocation { uint segment; (4 bytes of padding) ulong offset; ulong size; }
  size_t at = static_cast<size_t>(reinterpret_cast<const uint8_t*>(location) - file.data()) + 8;
  uint64_t offset = location->offset() + (uint64_t{1} << 40);
  std::memcpy(file.data() + at, &offset, sizeof(offset));
  test::LoadedMethod loaded;
  ASSERT_FALSE(test::load_forward(file, nullptr, &loaded));  // the program itself still loads and runs
  Result<BundledCases> cases = BundledCases::load(*loaded.program->program);
  ASSERT_FALSE(cases.ok());
  EXPECT_EQ(cases.error().code(), ErrorCode::InvalidProgram);
  EXPECT_NE(std::string(cases.error().message()).find("bundled test case 0, input 0: bytes ["), std::string::npos)
      << cases.error().message();
}

}  // namespace
}  // namespace etmlir
