// The runtime manifest: what a runtime build can load, as JSON, so that a
// program is checked against that build on the host that compiles it
// (etmlir.devtools.check_loadable, to_executorch(runtime_manifest=...),
// et-inspect --check-against) instead of failing at load on the device.
//
// It is written from the registries a host really uses (not from a list kept
// beside them): et-manifest (tools/et_manifest.cpp) registers what et-run
// registers; the Python extension writes the same document from its own
// registries (etmlir.runtime.manifest()). Layout, format_version 1:
//
//   {
//     "format": "etmlir-runtime-manifest", "format_version": 1, "producer": "et-manifest",
//     "selective_build": false,
//     "program_schema": {"min_version": 1, "max_version": 3},       Program.version this runtime reads
//     "payload_header": {"min_format_version": 1, "max_format_version": 1},
//     "host": {"arch": "x86_64", "cpu_features": ["sse4_2", "avx", ...]},
//     "kernels": [{"op": "aten::add.out", "name": "aten::add", "overload": "out",
//                  "signature": "TTs|T", "dtypes": ["f32", ...], "out_dtypes": [...]}, ...],
//     "backends": [{"id": "cpu", "available": true, "body_format": "elf-shared-object",
//                   "body_versions": [1, 1], "native_code": true,
//                   "arch": "x86_64", "cpu_features": [...]}, ...]
//   }
//
// Kernels are sorted by op. dtypes are the edge element type names (f32, i64,
// i1, bf16, ...; kernel_table.json's), from KernelEntry::dtypes; null where the
// registry declares none (the runtime's own etmlir_prim:: kernels, custom
// kernels). A backend's body_format / body_versions are null when it declares
// none (Backend::payload_info); arch and cpu_features appear for backends whose
// payloads are native code: this machine's, which check_payload_target holds
// payloads to (run et-manifest on the device to describe the device).
#pragma once

#include <string>

#include "etmlir/runtime/backend.h"
#include "etmlir/runtime/kernel.h"

namespace etmlir {
namespace tools {

constexpr int kRuntimeManifestFormatVersion = 1;

// The manifest of `kernels` and `backends`, pretty-printed JSON ending in a newline.
// `producer` names what wrote it; `selective_build` says whether the kernels were
// registered under a selective build (kSelectiveBuild of the registering code).
std::string runtime_manifest_json(const KernelRegistry& kernels, const BackendRegistry& backends,
                                  const char* producer, bool selective_build);

}  // namespace tools
}  // namespace etmlir
