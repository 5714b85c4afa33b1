// Adding a backend is its folder plus one list entry: the "toy" backend
// (fixtures/backends/toy, outside runtime/) is compiled in only because
// test/cpp/CMakeLists.txt lists it in ETMLIR_BACKENDS and its parent folder in
// ETMLIR_BACKEND_DIRS. register_backends (generated from that list) registers
// it, and a program with one "toy" delegate runs through a Method whose
// method allocator is sized with the delegate's needs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "etmlir/register_backends.h"
#include "etmlir/runtime/backend.h"
#include "etmlir/runtime/method.h"
#include "etmlir/runtime/program.h"
#include "test_util.h"

namespace etmlir {
namespace {

std::vector<uint8_t> toy_payload(float constant, const char* backend_id = "toy") {
  test::PayloadFields header;
  header.backend_id = backend_id;
  header.body_format = "add-constant";
  header.inputs = {{ScalarType::Float, {2, 3}}};
  header.outputs = {{ScalarType::Float, {2, 3}}};
  std::vector<uint8_t> body(sizeof(float));
  std::memcpy(body.data(), &constant, sizeof(float));
  return test::write_payload(header, body);
}

std::vector<std::string> compiled_backends() {
  std::vector<std::string> compiled;
  for (size_t i = 0; i < num_compiled_backends(); ++i) compiled.push_back(compiled_backend_id(i));
  return compiled;
}

bool compiled_in(const char* id) {
  std::vector<std::string> compiled = compiled_backends();
  return std::find(compiled.begin(), compiled.end(), id) != compiled.end();
}

TEST(ToyBackend, RegisterBackendsRegistersEveryListedBackendInOrder) {
  // test/cpp/CMakeLists.txt's list (ETMLIR_BACKENDS, default "nested;cpu;tosa;toy"), in its order.
  std::vector<std::string> compiled = compiled_backends();
  ASSERT_TRUE(compiled_in("toy"));
  EXPECT_EQ(compiled_backend_id(num_compiled_backends()), nullptr);
  BackendRegistry registry;
  ASSERT_FALSE(register_backends(registry));
  ASSERT_EQ(registry.size(), compiled.size());
  for (size_t i = 0; i < registry.size(); ++i) EXPECT_STREQ(registry.id(i), compiled[i].c_str());
  ASSERT_NE(registry.find("toy"), nullptr);
  // Twice into one registry: the first backend says it is there already.
  Error again = register_backends(registry);
  EXPECT_EQ(again.code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(std::string(again.message()), "registering backend '" + compiled[0] + "': backend '" + compiled[0] +
                                              "' is already registered");
}

TEST(ToyBackend, OptionsOutOfRangeNameTheBackendThatRefusesThem) {
  if (!compiled_in("cpu")) GTEST_SKIP() << "no cpu backend in this build (it is the one that reads threads)";
  BackendRegistry registry;
  BackendOptions options;
  options.threads = 0;
  Error e = register_backends(registry, options);
  EXPECT_STREQ(e.message(), "registering backend 'cpu': cpu backend: num_threads must be 1 to 256, got 0");
}

TEST(ToyBackend, RunsAOneDelegateProgram) {
  BackendRegistry backends;
  ASSERT_FALSE(register_backends(backends));
  std::vector<uint8_t> pte = test::one_delegate_program("toy", toy_payload(1.5f), {2, 3});
  test::LoadedMethod loaded;
  Error e = test::load_forward(pte, &backends, &loaded);
  ASSERT_FALSE(e) << e.message();
  ASSERT_TRUE(loaded.method) << loaded.error.message();
  // The method allocator was sized with the delegate's state (MethodMeta::method_allocator_bytes(backends)).
  Result<MethodMeta> meta = loaded.program->program->method_meta("forward");
  ASSERT_TRUE(meta.ok());
  Result<size_t> bytes = meta->method_allocator_bytes(&backends);
  ASSERT_TRUE(bytes.ok()) << bytes.error().message();
  EXPECT_GT(bytes.get(), meta->method_allocator_bytes());
  EXPECT_LE(loaded.memory->method_allocator.used(), bytes.get());
  EXPECT_GT(loaded.memory->method_allocator.used(), meta->method_allocator_bytes() / 4);

  uint64_t executes = backends.find("toy")->counter("executes");
  float x[6] = {0.f, 1.f, -2.f, 3.5f, 4.f, 5.f};
  int64_t sizes[] = {2, 3};
  ASSERT_FALSE(loaded.method->set_input(0, x, sizeof(x), ScalarType::Float, sizes));
  Error run = loaded.method->execute();
  ASSERT_FALSE(run) << run.message();
  const float* y = loaded.method->output(0).to_tensor().data_as<float>();
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y[i], x[i] + 1.5f) << i;
  EXPECT_EQ(backends.find("toy")->counter("executes"), executes + 1);
  EXPECT_EQ(backends.find("toy")->counter("no such counter"), 0u);
  EXPECT_STREQ(loaded.method->instruction_name(0), "toy");
}

TEST(ToyBackend, APayloadForAnotherBackendIsRefusedAtLoad) {
  BackendRegistry backends;
  ASSERT_FALSE(register_backends(backends));
  std::vector<uint8_t> pte = test::one_delegate_program("toy", toy_payload(1.f, "cpu"), {2, 3});
  test::LoadedMethod loaded;
  ASSERT_FALSE(test::load_forward(pte, &backends, &loaded));
  ASSERT_FALSE(loaded.method);
  EXPECT_STREQ(loaded.error.message(),
               "method 'forward' delegate 0 (backend 'toy'): init failed: payload is for backend 'cpu', not 'toy'");
  // Sizing the method allocator reads the same header and says the same.
  Result<MethodMeta> meta = loaded.program->program->method_meta("forward");
  ASSERT_TRUE(meta.ok());
  Result<size_t> bytes = meta->method_allocator_bytes(&backends);
  ASSERT_FALSE(bytes.ok());
  EXPECT_STREQ(bytes.error().message(), loaded.error.message());
  BackendRegistry none;
  Result<size_t> missing = meta->method_allocator_bytes(&none);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), ErrorCode::NotFound);
  EXPECT_STREQ(missing.error().message(), "method 'forward' delegate 0 needs backend 'toy', which is not registered");
}

}  // namespace
}  // namespace etmlir
