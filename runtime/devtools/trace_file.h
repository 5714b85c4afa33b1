// Trace files (runtime/schema/trace.fbs, ".ettrace"): the one writer of them, shared by et-run
// (--trace) and the Python extension (etmlir.runtime.Trace.save). The Python reader is
// python/etmlir/runtime/trace.py (over the generated python/etmlir/trace_schema).
//
//   etmlir::TraceEvent events[65536];
//   etmlir::EventTracer tracer(etmlir::Span<etmlir::TraceEvent>(events));
//   method.set_event_tracer(&tracer);  ... method.execute() ...
//   etmlir::devtools::TraceFileInfo info;
//   info.writer = "my-app";
//   info.program_sha256 = etmlir::devtools::sha256_hex(pte_bytes, pte_size);
//   etmlir::devtools::MethodTraceData data = etmlir::devtools::method_trace(method.name(), tracer);
//   if (etmlir::Error e = etmlir::devtools::write_trace_file("out.ettrace", info, {data})) ...
//
// This is host tooling, not the runtime core (which does no file I/O): a small static library
// (etmlir_devtools) that uses the heap and std::, built with the runtime's flags (no exceptions
// or RTTI), errors returned as values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "etmlir/runtime/error.h"
#include "etmlir/runtime/event_tracer.h"
#include "etmlir/runtime/span.h"

namespace etmlir {
namespace devtools {

// trace.fbs Trace.format_version this writer writes.
constexpr uint32_t kTraceFormatVersion = 1;

// One method's trace: views of what a tracer recorded (or of a reader's copy of it).
struct MethodTraceData {
  std::string method;
  uint32_t runs = 0;  // execute() calls traced
  Span<const TraceEvent> events;
  Span<const TraceCapture> captures;
  const uint8_t* capture_bytes = nullptr;  // TraceCapture::offset/nbytes index it
  uint64_t dropped_events = 0;             // 0: every event is there
  uint64_t dropped_captures = 0;
};

// What the file says about where the trace was taken.
struct TraceFileInfo {
  std::string program_sha256;  // hex SHA-256 of the .pte's bytes (sha256_hex)
  std::string program_path;    // informational
  std::string writer;          // "et-run", "etmlir.runtime"
  uint32_t backend_threads = 1;
  std::string cpu;  // empty: host_cpu_description()
};

// The default event buffer of a trace of `runs` execute() calls of a method with `instructions`
// instructions and `delegates` delegates (et-run --trace, Method.trace): per run, one event per
// instruction plus kEventsPerDelegate per delegate (a "cpu" delegate records one event per fused
// region it runs, a "nested" one its inner method's steps and their delegates'), doubled for
// instructions a loop runs more than once, and at least kMinDefaultEvents; at most
// kMaxDefaultEvents (40 bytes each: 160 MiB), beyond which a caller names a size. A trace that
// overflows it says how big a buffer would have held everything.
constexpr size_t kEventsPerDelegate = 4096;
constexpr size_t kMinDefaultEvents = size_t{1} << 16;
constexpr size_t kMaxDefaultEvents = size_t{1} << 22;
size_t default_trace_events(uint64_t runs, size_t instructions, size_t delegates);

// The tracer's events, captures and drop counts as one method's trace (views: the tracer must
// outlive the result's use). `runs` is tracer.run(): the top-level execute() calls it saw.
MethodTraceData method_trace(const char* method, const EventTracer& tracer);

// The trace file's bytes (a FlatBuffer with file identifier "ETTR"), or an Error naming what does
// not fit the format (a capture whose bytes lie outside capture_bytes, a rank over kMaxRank).
Error serialize_trace(const TraceFileInfo& info, const std::vector<MethodTraceData>& methods,
                      std::vector<uint8_t>* out);
// serialize_trace, then the bytes to `path` (replaced); an Io Error names the path and why.
Error write_trace_file(const char* path, const TraceFileInfo& info, const std::vector<MethodTraceData>& methods);

// Whether `size` bytes are a trace file this reader can walk safely (the FlatBuffers verifier, the
// "ETTR" identifier); InvalidArgument saying what is wrong otherwise.
Error verify_trace(const uint8_t* data, size_t size);

// Lower-case hex SHA-256 (FIPS 180-4) of `size` bytes, and of a file's contents.
std::string sha256_hex(const uint8_t* data, size_t size);
Error sha256_file(const char* path, std::string* hex);

// "x86_64 avx avx2 fma ...": the arch and the CPU features the payload schema names that this CPU has.
std::string host_cpu_description();

}  // namespace devtools
}  // namespace etmlir
