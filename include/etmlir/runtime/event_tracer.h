// EventTracer: timed events of a Method's execution, written into memory the
// caller owns.
//
//   etmlir::TraceEvent events[4096];
//   etmlir::EventTracer tracer(etmlir::Span<etmlir::TraceEvent>(events));
//   method->set_event_tracer(&tracer);
//   method->execute();                       // one Instruction event per step, one Delegate event per
//                                            // delegate call, DelegateOp events inside it
//   if (Error e = tracer.status()) { ... }   // "event buffer full: 4096 events kept, 37 dropped; ..."
//   method->set_event_tracer(nullptr);
//
// What an event says: when it started and ended (pal_now_ns), its kind, the
// debug handle of the op it ran (the .pte's Method.debug_info maps it to the
// op, its source line and module path), where it ran (the method's
// instruction; for a delegate, the delegate's index; inside a delegate, the
// backend's own id of the region, which the payload header's
// debug_handle_map expands to every edge op the region covers), and the
// event that encloses it (a DelegateOp's parent is its delegate call's
// event): enough for a table per op and a nested timeline.
//
// Cost: a Method without a tracer tests one pointer per instruction (what
// set_profiling already did); backends test EventTracer* in their execute
// context. Nothing is allocated: begin() writes into the caller's span.
//
// A full buffer is not an abort: the events that did not fit are counted,
// execute() still succeeds (the model's results are right), and status()
// returns an OutOfMemory Error saying how many were kept and dropped and how
// big a buffer would have held them all.
//
// Captures (for numeric debugging): a caller may also ask for copies of
// chosen values right after the instruction that writes them
// (set_capture). Arenas reuse memory, so a value can only be read then.
//
// Threads: a tracer belongs to one Method's execute() at a time; a backend
// records from the thread that runs its execute() (a delegate's worker
// threads do not record).
#pragma once

#include <cstddef>
#include <cstdint>

#include "etmlir/runtime/error.h"
#include "etmlir/runtime/span.h"

namespace etmlir {

class Tensor;

enum class TraceEventKind : uint8_t {
  Instruction = 0,  // a kernel call, jump or move of a method
  Delegate = 1,     // a delegate call, as a whole (its backend's execute())
  DelegateOp = 2,   // inside a delegate: one region its backend timed (a fused loop nest, a microkernel call)
};

struct TraceEvent {
  static constexpr uint32_t kNoParent = 0xFFFFFFFFu;
  static constexpr uint16_t kNoDelegate = 0xFFFFu;

  uint64_t start_ns = 0;
  uint64_t end_ns = 0;  // 0 while the event is open
  // The op's debug handle (0: none). A DelegateOp's is the first edge op its region covers.
  uint32_t debug_handle = 0;
  // DelegateOp: the backend's id of the region (PayloadHeader.debug_handle_map id). Otherwise 0.
  uint32_t payload_id = 0;
  // The instruction (pc) of the method that ran it; for a DelegateOp, that of its delegate call.
  uint32_t instruction = 0;
  // Which execute() since the tracer was made or reset (0 first).
  uint32_t run = 0;
  // The index of the enclosing event in the buffer (a DelegateOp's delegate call; an inner method's
  // events under the nested delegate's call), kNoParent at the top.
  uint32_t parent = kNoParent;
  // Delegate and DelegateOp: the delegate's index in its method. Otherwise kNoDelegate.
  uint16_t delegate = kNoDelegate;
  TraceEventKind kind = TraceEventKind::Instruction;
  // 0: the traced method's own steps; 1: inside one of its delegates; 2 and up: nested delegates.
  uint8_t depth = 0;
};

// A copy of one value a caller asked for (set_capture), made after `instruction` ran.
struct TraceCapture {
  static constexpr size_t kMaxRank = 8;
  uint32_t run = 0;
  uint32_t instruction = 0;
  int32_t value = 0;        // the method's value index
  int8_t scalar_type = 0;   // ScalarType code
  uint8_t rank = 0;
  int64_t sizes[kMaxRank] = {};
  uint64_t offset = 0;      // where its bytes are in the capture buffer
  uint64_t nbytes = 0;
};

// Which value to copy after which instruction ran.
struct CaptureRequest {
  uint32_t instruction;
  int32_t value;
};

class EventTracer {
 public:
  explicit EventTracer(Span<TraceEvent> events) : events_(events) {}

  // Copies of values (see the top of this file): `requests` sorted by instruction; `records` and
  // `bytes` receive them. A copy that does not fit is dropped and counted like an event.
  void set_capture(Span<const CaptureRequest> requests, Span<TraceCapture> records, Span<uint8_t> bytes) {
    requests_ = requests;
    captures_ = records;
    capture_bytes_ = bytes;
  }

  // Opens an event (start_ns now); returns its index, or TraceEvent::kNoParent when the buffer is full
  // (then end() ignores it). `parent`: the enclosing event's index (kNoParent: the current parent,
  // which Method sets to the delegate call's event while its backend runs).
  uint32_t begin(TraceEventKind kind, uint32_t debug_handle, uint32_t instruction, uint16_t delegate,
                 uint32_t payload_id = 0);
  void end(uint32_t index);

  // Records a copy of `tensor` (values[value] after `instruction`) if it was requested.
  void capture(uint32_t instruction, int32_t value, const Tensor& tensor);
  // True when some request names `instruction` (Method asks before looking at the step's values).
  bool wants_capture(uint32_t instruction) const;

  // Ok, or OutOfMemory: "event buffer full: N events kept, M dropped (a buffer of K events holds them
  // all)" (and the same for captures).
  Error status() const;

  Span<const TraceEvent> events() const { return Span<const TraceEvent>(events_.data(), size_); }
  Span<const TraceCapture> captures() const { return Span<const TraceCapture>(captures_.data(), num_captures_); }
  const uint8_t* capture_bytes() const { return capture_bytes_.data(); }
  uint64_t dropped_events() const { return dropped_; }
  uint64_t dropped_captures() const { return dropped_captures_; }

  // Forgets every event and capture (the buffers are reused); run counts from 0 again.
  void reset();

  // For Method and backends: the run number, the nesting depth and the enclosing event.
  uint32_t run() const { return run_; }
  void next_run() { ++run_; }
  uint8_t depth() const { return depth_; }
  uint32_t parent() const { return parent_; }
  // Enters an enclosing event (a delegate call): events begun until leave() are its children, one
  // level deeper. Returns what leave() restores.
  struct Scope {
    uint32_t parent;
    uint8_t depth;
  };
  Scope enter(uint32_t parent_event);
  void leave(Scope saved);

 private:
  Span<TraceEvent> events_;
  size_t size_ = 0;
  uint64_t dropped_ = 0;
  Span<const CaptureRequest> requests_;
  Span<TraceCapture> captures_;
  Span<uint8_t> capture_bytes_;
  size_t num_captures_ = 0;
  uint64_t capture_used_ = 0;
  uint64_t dropped_captures_ = 0;
  uint64_t capture_bytes_wanted_ = 0;
  uint32_t run_ = 0;
  uint32_t parent_ = TraceEvent::kNoParent;
  uint8_t depth_ = 0;
};

}  // namespace etmlir
