// The "vulkan" backend (runtime/backends/vulkan) on make_fixtures.py's vulkan_mlp.pte (a small MLP
// delegated whole to vulkan, with a bundled case of eager's outputs) and vulkan_mlp.body (its
// dispatch-graph FlatBuffer alone): the program runs on the machine's Vulkan device (lavapipe in
// CI) and matches eager; payloads built here around that body, and dispatch graphs rebuilt with
// one field wrong (a buffer index, a workgroup count, a binding count, broken SPIR-V, no graph)
// are refused at init with a message, never a crash; random byte changes in the body (CRC
// recomputed, so they reach the graph and SPIR-V checks) never crash; without a Vulkan loader
// the backend is unavailable and says why.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "etmlir/register_backends.h"
#include "etmlir/runtime/backend.h"
#include "etmlir/runtime/bundled.h"
#include "etmlir/runtime/method.h"
#include "etmlir/runtime/program.h"
#include "etmlir/schema/vulkan_generated.h"
#include "test_util.h"
#include "vulkan_backend.h"

namespace etmlir {
namespace {

#define REQUIRE_VULKAN()                                                                        \
  do {                                                                                          \
    ETMLIR_REQUIRE_FIXTURES();                                                                  \
    if (vulkan_device_name() == nullptr && std::getenv("CI") == nullptr)                        \
      GTEST_SKIP() << "no Vulkan device: " << vulkan_problem();                                  \
    ASSERT_NE(vulkan_device_name(), nullptr) << vulkan_problem();                                \
  } while (0)

test::PayloadFields vulkan_fields(const std::string& format = "vulkan-dispatch-graph") {
  test::PayloadFields fields;
  fields.backend_id = "vulkan";
  fields.body_format = format;
  fields.inputs = {{ScalarType::Float, {4, 6}}};
  fields.outputs = {{ScalarType::Float, {4, 3}}};
  fields.entry_points = {{"forward", "graphs"}};
  return fields;
}

Error init_payload(const std::vector<uint8_t>& payload) {
  static BackendRegistry registry;
  static bool registered = !register_vulkan_backend(registry, {});
  EXPECT_TRUE(registered);
  Backend* backend = registry.find("vulkan");
  if (backend == nullptr) return Error::make(ErrorCode::NotFound, "no vulkan backend");
  return test::init_and_destroy(*backend, payload);
}

std::vector<uint8_t> body() { return test::read_file(test::fixture_path("vulkan_mlp.body")); }

std::vector<uint8_t> with_body(const std::vector<uint8_t>& b) { return test::write_payload(vulkan_fields(), b); }

// The fixture's module rebuilt through the FlatBuffers builder, `edit` changing one thing on the way.
struct Edit {
  std::function<void(std::vector<uint32_t>& buffers)> dispatch_buffers;  // dispatch 0's buffers
  std::function<void(std::vector<uint32_t>& workgroups)> workgroups;     // dispatch 0's workgroups
  std::function<void(uint32_t& bindings)> shader_bindings;               // shader 0's binding count
  std::function<void(std::vector<uint32_t>& code)> shader_code;          // shader 0's words
  bool no_graphs = false;
  uint32_t version = 1;
};

std::vector<uint8_t> rebuilt(const Edit& edit) {
  std::vector<uint8_t> original = body();
  const vulkan_schema::Module* m = vulkan_schema::GetModule(original.data());
  flatbuffers::FlatBufferBuilder b;
  std::vector<flatbuffers::Offset<vulkan_schema::Graph>> graphs;
  for (uint32_t gi = 0; !edit.no_graphs && gi < m->graphs()->size(); ++gi) {
    const vulkan_schema::Graph* g = m->graphs()->Get(gi);
    std::vector<flatbuffers::Offset<vulkan_schema::Shader>> shaders;
    for (uint32_t s = 0; s < g->shaders()->size(); ++s) {
      const vulkan_schema::Shader* sh = g->shaders()->Get(s);
      std::vector<uint32_t> code(sh->code()->begin(), sh->code()->end());
      uint32_t bindings = sh->num_bindings();
      if (s == 0 && edit.shader_code) edit.shader_code(code);
      if (s == 0 && edit.shader_bindings) edit.shader_bindings(bindings);
      std::vector<uint32_t> size(sh->workgroup_size()->begin(), sh->workgroup_size()->end());
      auto name = b.CreateString(sh->name());
      auto entry = b.CreateString(sh->entry());
      shaders.push_back(vulkan_schema::CreateShader(b, name, entry, b.CreateVector(code), b.CreateVector(size), bindings));
    }
    std::vector<flatbuffers::Offset<vulkan_schema::Buffer>> buffers;
    for (const vulkan_schema::Buffer* buf : *g->buffers())
      buffers.push_back(vulkan_schema::CreateBuffer(b, buf->kind(), buf->index(), buf->size(), buf->slot()));
    std::vector<flatbuffers::Offset<vulkan_schema::Dispatch>> dispatches;
    for (uint32_t d = 0; d < g->dispatches()->size(); ++d) {
      const vulkan_schema::Dispatch* dp = g->dispatches()->Get(d);
      std::vector<uint32_t> bound(dp->buffers()->begin(), dp->buffers()->end());
      std::vector<uint32_t> groups(dp->workgroups()->begin(), dp->workgroups()->end());
      if (d == 0 && edit.dispatch_buffers) edit.dispatch_buffers(bound);
      if (d == 0 && edit.workgroups) edit.workgroups(groups);
      dispatches.push_back(vulkan_schema::CreateDispatchDirect(b, dp->shader(), &bound, &groups, dp->barrier(),
                                                               dp->debug_handle()));
    }
    std::vector<int64_t> in(g->input_sizes()->begin(), g->input_sizes()->end());
    std::vector<int64_t> out(g->output_sizes()->begin(), g->output_sizes()->end());
    std::vector<uint32_t> pinned;
    std::vector<uint64_t> slots(g->slot_sizes()->begin(), g->slot_sizes()->end());
    graphs.push_back(vulkan_schema::CreateGraphDirect(b, &in, &out, g->size(), &pinned, &shaders, &buffers,
                                                      &dispatches, g->num_slots(), &slots));
  }
  std::vector<flatbuffers::Offset<vulkan_schema::Constant>> constants;
  for (const vulkan_schema::Constant* c : *m->constants()) {
    b.ForceVectorAlignment(c->data()->size(), 1, 16);
    std::vector<uint8_t> data(c->data()->begin(), c->data()->end());
    constants.push_back(vulkan_schema::CreateConstantDirect(b, &data));
  }
  b.Finish(vulkan_schema::CreateModuleDirect(b, edit.version, &graphs, &constants), vulkan_schema::ModuleIdentifier());
  return std::vector<uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
}

void expect_refused(const std::vector<uint8_t>& graph_body, const char* words) {
  Error e = init_payload(with_body(graph_body));
  ASSERT_TRUE(e) << "accepted; expected an error with: " << words;
  EXPECT_NE(std::strstr(e.message(), words), nullptr) << e.message();
}

TEST(VulkanBackend, TheDelegatedProgramMatchesEager) {
  REQUIRE_VULKAN();
  BackendRegistry backends;
  ASSERT_FALSE(register_backends(backends));
  test::LoadedMethod loaded;
  Error e = test::load_forward("vulkan_mlp.pte", test::LoaderKind::Buffer, &backends, &loaded);
  ASSERT_FALSE(e) << e.message();
  ASSERT_NE(loaded.method, nullptr) << loaded.error.message();
  Result<BundledCases> cases = BundledCases::load(*loaded.program->program);
  ASSERT_TRUE(cases.ok()) << cases.error().message();
  ASSERT_EQ(cases->size(), 1u);
  for (int run = 0; run < 3; ++run) {  // the recorded command buffer is submitted again and again
    ASSERT_FALSE(cases->set_inputs(*loaded.method, 0));
    Error executed = loaded.method->execute();
    ASSERT_FALSE(executed) << executed.message();
    BundledOutputCheck checks[1];
    Result<bool> passed = cases->check_outputs(*loaded.method, 0, Span<BundledOutputCheck>(checks, 1));
    ASSERT_TRUE(passed.ok()) << passed.error().message();
    EXPECT_TRUE(*passed) << "max abs error " << checks[0].max_abs_error;
  }
}

TEST(VulkanBackend, APayloadBuiltHereAroundTheBodyInits) {
  REQUIRE_VULKAN();
  Error e = init_payload(with_body(body()));
  EXPECT_FALSE(e) << e.message();
  Edit nothing;
  e = init_payload(with_body(rebuilt(nothing)));  // the rebuilding itself changes nothing that matters
  EXPECT_FALSE(e) << e.message();
}

TEST(VulkanBackend, BadPayloadsAreRefusedAtInit) {
  REQUIRE_VULKAN();
  std::vector<uint8_t> garbage(body().size());
  for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<uint8_t>(i * 7 + 3);
  expect_refused(garbage, "not a dispatch graph");
  Error e = init_payload(test::write_payload(vulkan_fields("vulkan-other"), body()));
  ASSERT_TRUE(e);
  EXPECT_NE(std::strstr(e.message(), "vulkan-other"), nullptr) << e.message();
  std::vector<uint8_t> cut = body();
  std::fill(cut.begin() + static_cast<long>(cut.size() / 3), cut.end(), 0);
  expect_refused(cut, "");  // refused, whatever the first failed check
  Edit edit;
  edit.dispatch_buffers = [](std::vector<uint32_t>& b) { b[0] = 999; };
  expect_refused(rebuilt(edit), "binds buffer 999");
  edit = Edit();
  edit.workgroups = [](std::vector<uint32_t>& w) { w[0] = 0; };
  expect_refused(rebuilt(edit), "0 workgroups along x");
  edit = Edit();
  edit.dispatch_buffers = [](std::vector<uint32_t>& b) { b.pop_back(); };
  expect_refused(rebuilt(edit), "takes");
  edit = Edit();
  edit.shader_bindings = [](uint32_t& n) { n = 1000; };
  expect_refused(rebuilt(edit), "storage buffers; the device allows");
  edit = Edit();
  edit.shader_code = [](std::vector<uint32_t>& code) { code[0] = 0x12345678; };
  expect_refused(rebuilt(edit), "is not SPIR-V");
  edit = Edit();
  edit.shader_code = [](std::vector<uint32_t>& code) { code[5] = 0xFFFF0011u; };
  expect_refused(rebuilt(edit), "overruns the module");
  edit = Edit();
  edit.shader_code = [](std::vector<uint32_t>& code) { code.resize(code.size() / 2); };
  expect_refused(rebuilt(edit), "shader 0");
  edit = Edit();
  edit.no_graphs = true;
  expect_refused(rebuilt(edit), "holds no graph");
  edit = Edit();
  edit.version = 7;
  expect_refused(rebuilt(edit), "dispatch graph version 7");
}

TEST(VulkanBackend, RandomBodyChangesNeverCrash) {
  REQUIRE_VULKAN();
  std::vector<uint8_t> original = body();
  std::mt19937 rng(20261127);
  int refused = 0;
  for (int i = 0; i < 200; ++i) {
    std::vector<uint8_t> mutated = original;
    int changes = 1 + static_cast<int>(rng() % 8);
    for (int k = 0; k < changes; ++k) mutated[rng() % mutated.size()] = static_cast<uint8_t>(rng());
    Error e = init_payload(with_body(mutated));
    if (e) {
      ++refused;
      EXPECT_GT(std::strlen(e.message()), 0u);
    }
  }
  EXPECT_GT(refused, 0);
}

TEST(VulkanBackendDeathTest, WithoutALoaderTheBackendIsUnavailableAndSaysWhy) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("ETMLIR_VULKAN_LOADER", "/nonexistent/libvulkan.so.1", 1);
        BackendRegistry registry;
        if (register_vulkan_backend(registry, {})) std::exit(2);
        Backend* backend = registry.find("vulkan");
        const char* why = backend->unavailable_reason();
        bool ok = !backend->is_available() && why != nullptr && std::strstr(why, "no Vulkan loader") != nullptr &&
                  std::strstr(why, "/nonexistent/libvulkan.so.1") != nullptr && vulkan_device_name() == nullptr;
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace etmlir
