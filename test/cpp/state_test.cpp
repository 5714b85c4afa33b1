// Program state (Method.state) on counter.pte (make_fixtures.py): a buffer n
// (float32[4], zeros) that every call increments before returning x * n. The
// method fills n at load, keeps it across execute() calls, reports it by name,
// and reset_state() puts it back; a second method of the same program has its
// own.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "etmlir/runtime/method.h"
#include "etmlir/runtime/program.h"
#include "test_util.h"

namespace etmlir {
namespace {

const std::vector<float> kX = {1.0f, -2.0f, 0.5f, 4.0f};
const int64_t kSizes[] = {4};

// Sets x, runs once, and checks the output is x * step and the state n is step everywhere.
void expect_step(Method& method, float step) {
  ASSERT_FALSE(method.set_input(0, kX.data(), kX.size() * sizeof(float), ScalarType::Float,
                                Span<const int64_t>(kSizes, 1)));
  Error e = method.execute();
  ASSERT_FALSE(e) << e.message();
  const Tensor& y = method.output(0).to_tensor();
  const Tensor* n = method.state("n");
  ASSERT_NE(n, nullptr);
  for (size_t i = 0; i < kX.size(); ++i) {
    EXPECT_EQ(y.data_as<const float>()[i], kX[i] * step) << "element " << i;
    EXPECT_EQ(n->data_as<const float>()[i], step) << "element " << i;
  }
}

TEST(State, CounterKeepsItsStateAcrossCallsAndResetRestartsIt) {
  ETMLIR_REQUIRE_FIXTURES();
  test::LoadedMethod loaded;
  Error e = test::load_forward("counter.pte", test::LoaderKind::Buffer, nullptr, &loaded);
  ASSERT_FALSE(e) << e.message();
  ASSERT_NE(loaded.method, nullptr) << loaded.error.message();
  Method& method = *loaded.method;
  EXPECT_EQ(loaded.program->program->version(), 2u);  // the version that adds state
  ASSERT_EQ(method.num_state(), 1u);
  EXPECT_STREQ(method.state_name(0), "n");
  EXPECT_EQ(method.state_name(1), nullptr);
  EXPECT_EQ(method.state("missing"), nullptr);
  EXPECT_EQ(method.num_inputs(), 1u);
  EXPECT_EQ(method.num_outputs(), 1u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(method.state("n")->data_as<const float>()[i], 0.0f);
  for (int step = 1; step <= 5; ++step) expect_step(method, static_cast<float>(step));
  ASSERT_FALSE(method.reset_state());
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(method.state(size_t{0})->data_as<const float>()[i], 0.0f);
  expect_step(method, 1.0f);
  expect_step(method, 2.0f);
}

TEST(State, TwoMethodsOfOneProgramKeepTheirOwnState) {
  ETMLIR_REQUIRE_FIXTURES();
  test::LoadedMethod first, second;
  ASSERT_FALSE(test::load_forward("counter.pte", test::LoaderKind::Mmap, nullptr, &first));
  ASSERT_FALSE(test::load_forward("counter.pte", test::LoaderKind::Mmap, nullptr, &second));
  ASSERT_NE(first.method, nullptr);
  ASSERT_NE(second.method, nullptr);
  for (int step = 1; step <= 3; ++step) expect_step(*first.method, static_cast<float>(step));
  expect_step(*second.method, 1.0f);
  expect_step(*first.method, 4.0f);
}

}  // namespace
}  // namespace etmlir
