// The runtime manifest as JSON (runtime_manifest.h says what it holds and why).
#include "runtime_manifest.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "etmlir/runtime/payload_header.h"
#include "etmlir/runtime/program.h"
#include "etmlir/runtime/tensor.h"

namespace etmlir {
namespace tools {
namespace {

// ScalarType -> the edge dialect's element type name (kernel_table.json, etmlir.executable.dtypes).
struct DtypeName {
  ScalarType dtype;
  const char* name;
};
// In kernel_table.json's order (scripts/gen_kernels.py DTYPE_GROUPS["all"]).
constexpr DtypeName kDtypeNames[] = {
    {ScalarType::Float, "f32"},  {ScalarType::Double, "f64"},  {ScalarType::Int64, "i64"},
    {ScalarType::Int32, "i32"},  {ScalarType::Int16, "i16"},   {ScalarType::Int8, "i8"},
    {ScalarType::UInt8, "ui8"},  {ScalarType::Half, "f16"},    {ScalarType::BFloat16, "bf16"},
    {ScalarType::Bool, "i1"},
};

void append_string(std::string& out, const char* text) {
  static const char kHex[] = "0123456789abcdef";
  out += '"';
  for (const char* p = text; *p != '\0'; ++p) {
    unsigned char c = static_cast<unsigned char>(*p);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      out += "\\u00";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
}

void append_string(std::string& out, const std::string& text) { append_string(out, text.c_str()); }

void append_dtypes(std::string& out, DtypeMask mask) {
  if (mask == 0) {
    out += "null";
    return;
  }
  out += '[';
  bool first = true;
  DtypeMask named = 0;
  for (const DtypeName& d : kDtypeNames) {
    named |= dtype_bit(d.dtype);
    if (mask & dtype_bit(d.dtype)) {
      if (!first) out += ", ";
      append_string(out, d.name);
      first = false;
    }
  }
  // A bit no element type names (a ScalarType this build does not know): say so, never drop it.
  for (int bit = 0; bit < 32; ++bit) {
    if ((mask & ~named) & (DtypeMask{1} << bit)) {
      if (!first) out += ", ";
      out += "\"scalar_type_" + std::to_string(bit) + "\"";
      first = false;
    }
  }
  out += ']';
}

void append_cpu_features(std::string& out, uint64_t features) {
  out += '[';
  bool first = true;
  for (int bit = 0; bit < num_cpu_features(); ++bit) {
    if (!(features & (uint64_t{1} << bit))) continue;
    if (!first) out += ", ";
    // The schema's enumerator name ("sse4_2"), as payload.fbs and etmlir.backends.payload_header spell it.
    append_string(out, payload_schema::EnumNameCpuFeature(static_cast<payload_schema::CpuFeature>(bit)));
    first = false;
  }
  out += ']';
}

}  // namespace

std::string runtime_manifest_json(const KernelRegistry& kernels, const BackendRegistry& backends,
                                  const char* producer, bool selective_build) {
  std::string out;
  out += "{\n";
  out += "  \"format\": \"etmlir-runtime-manifest\",\n";
  out += "  \"format_version\": " + std::to_string(kRuntimeManifestFormatVersion) + ",\n";
  out += "  \"producer\": ";
  append_string(out, producer);
  out += ",\n";
  out += std::string("  \"selective_build\": ") + (selective_build ? "true" : "false") + ",\n";
  // Program::load accepts 1..kProgramVersion (lib/program.cpp); read_payload exactly kPayloadFormatVersion.
  out += "  \"program_schema\": {\"min_version\": 1, \"max_version\": " + std::to_string(kProgramVersion) + "},\n";
  out += "  \"payload_header\": {\"min_format_version\": " + std::to_string(kPayloadFormatVersion) +
         ", \"max_format_version\": " + std::to_string(kPayloadFormatVersion) + "},\n";
  out += "  \"host\": {\"arch\": ";
  append_string(out, host_arch());
  out += ", \"cpu_features\": ";
  append_cpu_features(out, host_cpu_features());
  out += "},\n";

  std::vector<const KernelEntry*> entries;
  for (size_t i = 0; i < kernels.size(); ++i) entries.push_back(&kernels.entry(i));
  std::sort(entries.begin(), entries.end(),
            [](const KernelEntry* a, const KernelEntry* b) { return std::strcmp(a->name, b->name) < 0; });
  out += "  \"kernels\": [";
  for (size_t i = 0; i < entries.size(); ++i) {
    const KernelEntry& k = *entries[i];
    // "aten::add.out" -> name "aten::add", overload "out" (the .pte's Operator; the overload follows
    // the last '.' after the namespace's "::").
    std::string full = k.name;
    size_t ns = full.find("::");
    size_t dot = full.rfind('.');
    bool has_overload = dot != std::string::npos && (ns == std::string::npos || dot > ns + 1);
    out += i == 0 ? "\n" : ",\n";
    out += "    {\"op\": ";
    append_string(out, full);
    out += ", \"name\": ";
    append_string(out, has_overload ? full.substr(0, dot) : full);
    out += ", \"overload\": ";
    append_string(out, has_overload ? full.substr(dot + 1) : std::string());
    out += ", \"signature\": ";
    append_string(out, k.signature);
    out += ", \"dtypes\": ";
    append_dtypes(out, k.dtypes);
    out += ", \"out_dtypes\": ";
    append_dtypes(out, k.out_dtypes);
    out += '}';
  }
  out += entries.empty() ? "],\n" : "\n  ],\n";

  out += "  \"backends\": [";
  for (size_t i = 0; i < backends.size(); ++i) {
    const char* id = backends.id(i);
    const Backend* backend = backends.find(id);
    BackendPayloadInfo info = backend->payload_info();
    out += i == 0 ? "\n" : ",\n";
    out += "    {\"id\": ";
    append_string(out, id);
    out += std::string(", \"available\": ") + (backend->is_available() ? "true" : "false");
    out += ", \"body_format\": ";
    if (info.body_format != nullptr) {
      append_string(out, info.body_format);
      out += ", \"body_versions\": [" + std::to_string(info.min_body_version) + ", " +
             std::to_string(info.max_body_version) + "]";
    } else {
      out += "null, \"body_versions\": null";
    }
    out += std::string(", \"native_code\": ") + (info.native_code ? "true" : "false");
    if (info.native_code) {
      out += ", \"arch\": ";
      append_string(out, host_arch());
      out += ", \"cpu_features\": ";
      append_cpu_features(out, host_cpu_features());
    }
    out += '}';
  }
  out += backends.size() == 0 ? "]\n" : "\n  ]\n";
  out += "}\n";
  return out;
}

}  // namespace tools
}  // namespace etmlir
