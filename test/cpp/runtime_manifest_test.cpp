// The runtime manifest's sources: the dtypes the kernel registry keeps (KernelEntry::dtypes, set by
// the generated registration), the payloads a backend declares (Backend::payload_info), and the
// JSON tools/runtime_manifest.cpp writes from them (et-manifest, etmlir.runtime.manifest()).
// test/python/test_runtime_manifest.py checks the shipped manifest against the kernel table and the
// loadability check built on it.
#include <gtest/gtest.h>

#include <string>

#include "etmlir/register_backends.h"
#include "etmlir/runtime/kernel.h"
#include "etmlir/runtime/payload_header.h"
#include "etmlir/runtime/program.h"
#include "portable_kernels.h"
#include "runtime_manifest.h"

namespace etmlir {
namespace {

Error noop(KernelContext& ctx, EValue** args) {
  (void)ctx;
  (void)args;
  return Error::ok();
}

constexpr DtypeMask kF32 = dtype_bit(ScalarType::Float);
constexpr DtypeMask kBool = dtype_bit(ScalarType::Bool);
constexpr DtypeMask kBf16 = dtype_bit(ScalarType::BFloat16);

TEST(KernelRegistryDtypes, AddKeepsDtypesAndZeroMeansUndeclared) {
  KernelRegistry r;
  ASSERT_FALSE(r.add("test::a.out", "T|T", noop));
  ASSERT_FALSE(r.add("test::b.out", "T|T", noop, kF32 | kBool, kBool));
  EXPECT_EQ(r.find("test::a.out")->dtypes, 0u);
  EXPECT_EQ(r.find("test::a.out")->out_dtypes, 0u);
  EXPECT_EQ(r.find("test::b.out")->dtypes, kF32 | kBool);
  EXPECT_EQ(r.find("test::b.out")->out_dtypes, kBool);
}

Error register_with_macro(KernelRegistry& r) {
  ET_REGISTER_KERNEL(r, "test::plain.out", "T|T", noop);
  ET_REGISTER_KERNEL(r, "test::typed.out", "T|T", noop, kF32, kBf16);
  return Error::ok();
}

TEST(KernelRegistryDtypes, RegisterMacroTakesOptionalDtypes) {
  KernelRegistry r;
  ASSERT_FALSE(register_with_macro(r));
  EXPECT_EQ(r.find("test::plain.out")->dtypes, 0u);
  EXPECT_EQ(r.find("test::typed.out")->dtypes, kF32);
  EXPECT_EQ(r.find("test::typed.out")->out_dtypes, kBf16);
}

TEST(KernelRegistryDtypes, PortableKernelsCarryTheirTablesDtypes) {
  KernelRegistry r;
  ASSERT_FALSE(register_prim_kernels(r));
  ASSERT_FALSE(register_portable_kernels(r));
  // binary_ops.yaml: add [real, half, bool]; bitwise_and [integral, bool]; div out_dtypes [floating, half].
  EXPECT_EQ(r.find("aten::add.out")->dtypes & (kF32 | kBool | kBf16), kF32 | kBool | kBf16);
  EXPECT_EQ(r.find("aten::bitwise_and.Tensor_out")->dtypes & kF32, 0u);
  EXPECT_NE(r.find("aten::bitwise_and.Tensor_out")->dtypes & dtype_bit(ScalarType::Int64), 0u);
  EXPECT_EQ(r.find("aten::div.out")->out_dtypes & dtype_bit(ScalarType::Int64), 0u);
  EXPECT_EQ(r.find("etmlir_prim::sym_size.int")->dtypes, 0u);  // the runtime's own: undeclared
  for (size_t i = 0; i < r.size(); ++i) {
    const KernelEntry& e = r.entry(i);
    if (std::string(e.name).rfind("etmlir_prim::", 0) != 0) {
      EXPECT_NE(e.dtypes, 0u) << e.name;
      EXPECT_NE(e.out_dtypes, 0u) << e.name;
    }
  }
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(RuntimeManifest, JsonListsKernelsSortedWithDtypesAndEveryBackend) {
  KernelRegistry kernels;
  ASSERT_FALSE(kernels.add("zz::last.out", "TT|T", noop, kF32 | kBf16, kBool));
  ASSERT_FALSE(kernels.add("aa::first", "s|s", noop));
  ASSERT_FALSE(kernels.add("mm::odd.out", "T|T", noop, DtypeMask{1} << 20, kF32));
  BackendRegistry backends;
  ASSERT_FALSE(register_backends(backends));
  std::string json = tools::runtime_manifest_json(kernels, backends, "test \"quoted\"\n", true);

  EXPECT_TRUE(contains(json, "\"format\": \"etmlir-runtime-manifest\"")) << json;
  EXPECT_TRUE(contains(json, "\"producer\": \"test \\\"quoted\\\"\\u000a\"")) << json;
  EXPECT_TRUE(contains(json, "\"selective_build\": true"));
  EXPECT_TRUE(contains(json, "\"max_version\": " + std::to_string(kProgramVersion)));
  EXPECT_TRUE(contains(json, "\"max_format_version\": " + std::to_string(kPayloadFormatVersion)));
  EXPECT_TRUE(contains(json, std::string("\"arch\": \"") + host_arch() + "\""));
  // Sorted by op; name and overload split where the .pte's Operator splits them.
  size_t first = json.find("\"op\": \"aa::first\""), odd = json.find("mm::odd.out"), last = json.find("zz::last.out");
  ASSERT_NE(first, std::string::npos);
  EXPECT_LT(first, odd);
  EXPECT_LT(odd, last);
  EXPECT_TRUE(contains(json, "{\"op\": \"aa::first\", \"name\": \"aa::first\", \"overload\": \"\", \"signature\": "
                             "\"s|s\", \"dtypes\": null, \"out_dtypes\": null}"));
  EXPECT_TRUE(contains(json, "\"name\": \"zz::last\", \"overload\": \"out\", \"signature\": \"TT|T\", \"dtypes\": "
                             "[\"f32\", \"bf16\"], \"out_dtypes\": [\"i1\"]"));
  EXPECT_TRUE(contains(json, "\"dtypes\": [\"scalar_type_20\"]"));  // a bit no dtype names: kept, not dropped
  // Every registered backend; "toy" (an out-of-tree test backend) declares no payload format.
  for (size_t i = 0; i < num_compiled_backends(); ++i) {
    EXPECT_TRUE(contains(json, std::string("{\"id\": \"") + compiled_backend_id(i) + "\", \"available\": "));
  }
  if (backends.find("toy") != nullptr) {
    EXPECT_TRUE(contains(json, "\"body_format\": null, \"body_versions\": null, \"native_code\": false}"));
  }
  if (backends.find("nested") != nullptr) {
    EXPECT_TRUE(contains(json, "\"body_format\": \"pte\", \"body_versions\": [1, 1], \"native_code\": false}"));
  }
  if (backends.find("cpu") != nullptr) {
    EXPECT_TRUE(contains(json, "\"body_format\": \"elf-shared-object\", \"body_versions\": [1, 1], "
                               "\"native_code\": true, \"arch\": "));
  }
}

TEST(RuntimeManifest, EmptyRegistriesAreStillADocument) {
  KernelRegistry kernels;
  BackendRegistry backends;
  std::string json = tools::runtime_manifest_json(kernels, backends, "empty", false);
  EXPECT_TRUE(contains(json, "\"kernels\": [],\n  \"backends\": []\n}\n")) << json;
}

}  // namespace
}  // namespace etmlir
