// et-manifest: what this runtime build can load, as JSON (the runtime manifest).
//
//   et-manifest                      print it
//   et-manifest --output FILE.json   write it (replaced atomically)
//
// It registers exactly what et-run registers (the prim kernels, every portable
// kernel the build compiled, selective build permitting, and every compiled-in
// backend) and writes the registries' own view of them
// (tools/runtime_manifest.h has the layout): the kernels with their signatures
// and dtypes, the backends with is_available() on this machine and the payload
// bodies they read, the Program.version range and payload header format it
// reads, and this machine's arch and CPU features. The build runs it once
// (CMake post-build step: <build>/runtime-manifest.json, installed next to the
// Python extension); run it on a device to describe the device.
//
// Then, on the host that compiles models:
//   et-inspect --check-against runtime-manifest.json model.pte
//   etmlir.to_executorch(edge, runtime_manifest="runtime-manifest.json")
//
// Exit status: 0 on success, 1 when a registry refuses a registration or the
// file cannot be written, 2 on a usage error.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "cli_support.h"
#include "etmlir/register_backends.h"
#include "etmlir/runtime/backend.h"
#include "etmlir/runtime/kernel.h"
#include "portable_kernels.h"
#include "runtime_manifest.h"

namespace {

using namespace etmlir;

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

constexpr const char kUsage[] =
    "usage: et-manifest [--output FILE.json]\n"
    "Writes this runtime build's manifest (its kernels with their dtypes, its backends, the .pte schema\n"
    "versions and payload header format it reads, this machine's arch and CPU features) as JSON, to stdout\n"
    "or FILE.json. Check a .pte against it: et-inspect --check-against FILE.json model.pte\n";

int usage_error(const char* message, const char* arg = "") {
  std::fprintf(stderr, "et-manifest: error: %s%s\n%s", message, tools::one_line(arg).c_str(), kUsage);
  return kExitUsage;
}

// Writes `text` to `path` through a temporary file in the same folder, renamed over it, so that a
// reader (a build step, a test) never sees half a manifest.
bool write_file(const char* path, const std::string& text, std::string* error) {
  std::string temporary = std::string(path) + ".tmp." + std::to_string(::getpid());
  std::FILE* f = std::fopen(temporary.c_str(), "wb");
  if (f == nullptr) {
    *error = std::string("cannot write '") + temporary + "': " + std::strerror(errno);
    return false;
  }
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  int saved = errno;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) {
    *error = std::string("cannot write '") + temporary + "': " + std::strerror(saved ? saved : errno);
    std::remove(temporary.c_str());
    return false;
  }
  if (std::rename(temporary.c_str(), path) != 0) {
    *error = std::string("cannot rename '") + temporary + "' to '" + path + "': " + std::strerror(errno);
    std::remove(temporary.c_str());
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  tools::install_fatal_handlers("et-manifest");
  const char* output = nullptr;
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    if (std::strcmp(arg, "-h") == 0 || std::strcmp(arg, "--help") == 0) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (std::strcmp(arg, "-o") == 0 || std::strcmp(arg, "--output") == 0) {
      if (i + 1 >= argc) return usage_error("--output needs a file name");
      output = argv[++i];
    } else if (std::strncmp(arg, "--output=", 9) == 0) {
      output = arg + 9;
    } else {
      return usage_error("unknown argument ", arg);
    }
    if (output != nullptr && output[0] == '\0') return usage_error("--output needs a file name");
  }

  // The registries et-run builds (tools/et_run.cpp): prim kernels, portable kernels, compiled-in backends.
  static KernelRegistry kernels;
  static BackendRegistry backends;
  Error e = register_prim_kernels(kernels);
  if (!e) e = register_portable_kernels(kernels);
  if (!e) e = register_backends(backends, BackendOptions{});
  if (e) {
    std::fprintf(stderr, "et-manifest: error: %s\n", tools::one_line(e.message()).c_str());
    return kExitError;
  }
  std::string json = tools::runtime_manifest_json(kernels, backends, "et-manifest", kSelectiveBuild);
  if (output == nullptr) {
    std::fputs(json.c_str(), stdout);
    return std::fflush(stdout) == 0 ? 0 : kExitError;
  }
  std::string error;
  if (!write_file(output, json, &error)) {
    std::fprintf(stderr, "et-manifest: error: %s\n", tools::one_line(error.c_str()).c_str());
    return kExitError;
  }
  return 0;
}
