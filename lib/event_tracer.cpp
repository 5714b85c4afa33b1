// EventTracer (include/etmlir/runtime/event_tracer.h): events and captures into the caller's spans.
// Nothing here allocates: a full span drops what does not fit and counts it.
#include "etmlir/runtime/event_tracer.h"

#include <cstring>

#include "etmlir/runtime/platform.h"
#include "etmlir/runtime/tensor.h"

namespace etmlir {

namespace {
using ull = unsigned long long;
}  // namespace

uint32_t EventTracer::begin(TraceEventKind kind, uint32_t debug_handle, uint32_t instruction, uint16_t delegate,
                            uint32_t payload_id) {
  if (size_ >= events_.size()) {
    ++dropped_;
    return TraceEvent::kNoParent;
  }
  TraceEvent& e = events_[size_];
  e.kind = kind;
  e.debug_handle = debug_handle;
  e.payload_id = payload_id;
  e.instruction = instruction;
  e.run = run_;
  e.parent = parent_;
  e.delegate = delegate;
  e.depth = depth_;
  e.end_ns = 0;
  e.start_ns = pal_now_ns();
  return static_cast<uint32_t>(size_++);
}

void EventTracer::end(uint32_t index) {
  if (index >= size_) return;  // dropped at begin()
  uint64_t now = pal_now_ns();
  TraceEvent& e = events_[index];
  // A clock that did not advance still gives a closed event (end_ns 0 means open).
  e.end_ns = now > e.start_ns ? now : e.start_ns + 1;
}

bool EventTracer::wants_capture(uint32_t instruction) const {
  // Requests are sorted by instruction: binary search for the first one at or after it.
  size_t lo = 0, hi = requests_.size();
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (requests_[mid].instruction < instruction) lo = mid + 1; else hi = mid;
  }
  return lo < requests_.size() && requests_[lo].instruction == instruction;
}

void EventTracer::capture(uint32_t instruction, int32_t value, const Tensor& tensor) {
  bool requested = false;
  for (const CaptureRequest& r : requests_) {
    if (r.instruction == instruction && r.value == value) {
      requested = true;
      break;
    }
  }
  if (!requested) return;
  // A value an instruction names twice (an in-place update: `self` is also `out`) is copied once.
  for (size_t i = num_captures_; i > 0; --i) {
    const TraceCapture& c = captures_[i - 1];
    if (c.run != run_ || c.instruction != instruction) break;
    if (c.value == value) return;
  }
  uint64_t nbytes = tensor.nbytes();
  capture_bytes_wanted_ += nbytes;
  if (num_captures_ >= captures_.size() || tensor.dim() > static_cast<int32_t>(TraceCapture::kMaxRank) ||
      capture_used_ + nbytes > capture_bytes_.size() || (nbytes > 0 && tensor.data() == nullptr)) {
    ++dropped_captures_;
    return;
  }
  TraceCapture& c = captures_[num_captures_++];
  c.run = run_;
  c.instruction = instruction;
  c.value = value;
  c.scalar_type = static_cast<int8_t>(tensor.dtype());
  c.rank = static_cast<uint8_t>(tensor.dim());
  for (int32_t d = 0; d < tensor.dim(); ++d) c.sizes[d] = tensor.size(d);
  c.offset = capture_used_;
  c.nbytes = nbytes;
  if (nbytes > 0) std::memcpy(capture_bytes_.data() + capture_used_, tensor.data(), nbytes);
  // Keep every copy 16-byte aligned in the buffer (a reader may view it as its dtype).
  capture_used_ += (nbytes + 15) & ~uint64_t{15};
  if (capture_used_ > capture_bytes_.size()) capture_used_ = capture_bytes_.size();
}

Error EventTracer::status() const {
  if (dropped_ > 0)
    return Error::make(ErrorCode::OutOfMemory,
                       "event buffer full: %zu events kept, %llu dropped (a buffer of %llu events holds them all)",
                       size_, static_cast<ull>(dropped_), static_cast<ull>(size_ + dropped_));
  if (dropped_captures_ > 0)
    return Error::make(ErrorCode::OutOfMemory,
                       "capture buffer full: %zu copies kept, %llu dropped (%llu records of %zu and %llu bytes of "
                       "%zu were needed; or a tensor has over %zu dims)",
                       num_captures_, static_cast<ull>(dropped_captures_),
                       static_cast<ull>(num_captures_ + dropped_captures_), captures_.size(),
                       static_cast<ull>(capture_bytes_wanted_), capture_bytes_.size(), TraceCapture::kMaxRank);
  return Error::ok();
}

void EventTracer::reset() {
  size_ = 0;
  dropped_ = 0;
  num_captures_ = 0;
  capture_used_ = 0;
  dropped_captures_ = 0;
  capture_bytes_wanted_ = 0;
  run_ = 0;
  parent_ = TraceEvent::kNoParent;
  depth_ = 0;
}

EventTracer::Scope EventTracer::enter(uint32_t parent_event) {
  Scope saved{parent_, depth_};
  parent_ = parent_event;
  if (depth_ < 255) ++depth_;
  return saved;
}

void EventTracer::leave(Scope saved) {
  parent_ = saved.parent;
  depth_ = saved.depth;
}

}  // namespace etmlir
