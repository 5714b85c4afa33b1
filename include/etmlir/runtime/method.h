// Method: one loaded, executable method of a Program.
//
//   method->set_input(0, data, ScalarType::Float, sizes);   // checked against the signature
//   if (Error e = method->execute()) { ... e.message() names op and source line ... }
//   const Tensor& y = method->output(0).to_tensor();
//
// Everything a Method holds lives in the MemoryManager's method allocator
// (value table, tensors, instruction table) or in its planned arenas; the
// caller keeps those, the Program and the registries alive while it lives.
// execute() performs no heap allocation: kernels get scratch from the temp
// allocator, which is reset after each instruction.
//
// Random ops (rand, randn, randperm, dropout) draw from the method's own
// Generator (etmlir/runtime/generator.h), seeded with
// Generator::kDefaultSeed at load. The stream continues across execute()
// calls, as PyTorch's global generator does; set_seed(n) restarts it, so
// `set_seed(n); execute();` gives the same numbers every time.
//
// Program state (the buffers a model mutates: KV caches, step counters,
// running statistics; Method.state in the .pte) lives in planned arena bytes
// no other value shares. load_method fills each state tensor from its initial
// value; execute() reads and updates it in place, so it carries over from one
// call to the next; reset_state() refills it (no allocation, like execute).
//
// Threads: a Method runs one call at a time. execute(), set_input(),
// set_output_buffer() and reset_state() hold the method's busy flag (an
// atomic compare-exchange: no lock, no allocation) while they run, and a call
// that finds it taken (another thread in execute(), or a kernel re-entering
// its own method) returns an InvalidArgument Error naming both calls instead
// of racing on the shared arenas. To run in parallel, load the method once
// per thread: the methods of one Program share only read-only bytes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "etmlir/runtime/backend.h"
#include "etmlir/runtime/data_loader.h"
#include "etmlir/runtime/error.h"
#include "etmlir/runtime/evalue.h"
#include "etmlir/runtime/event_tracer.h"
#include "etmlir/runtime/generator.h"
#include "etmlir/runtime/kernel.h"
#include "etmlir/runtime/memory.h"
#include "etmlir/runtime/span.h"

namespace etmlir {

class Program;

namespace detail {
struct Step;
struct LoadedDelegate;
}  // namespace detail

class Method {
 public:
  Method(Method&& other) noexcept;
  Method(const Method&) = delete;
  Method& operator=(const Method&) = delete;
  Method& operator=(Method&&) = delete;
  ~Method();

  const char* name() const { return name_; }
  size_t num_inputs() const { return num_inputs_; }
  size_t num_outputs() const { return num_outputs_; }
  EValue& input(size_t i) const { return values_[inputs_[i]]; }
  const EValue& output(size_t i) const { return values_[outputs_[i]]; }

  // Sets tensor input i from `data` (a contiguous buffer of `nbytes`).
  // dtype and rank must match; sizes must equal the planned sizes, or lie
  // within the upper bounds of a dynamic input. A planned input is copied into
  // its arena; an unplanned one points at `data`, which must outlive execute().
  Error set_input(size_t i, const void* data, size_t nbytes, ScalarType dtype, Span<const int64_t> sizes);
  // Gives an unplanned output memory to write to (at least its planned nbytes).
  Error set_output_buffer(size_t i, void* data, size_t nbytes);

  Error execute();

  // Program state: how many state tensors, each one's name (the buffer's fully
  // qualified name) and current value (what the next execute() reads).
  size_t num_state() const;
  const char* state_name(size_t i) const;
  const Tensor* state(size_t i) const;
  const Tensor* state(const char* name) const;  // nullptr when no state has that name
  // Refills every state tensor with its initial value (as right after load_method).
  Error reset_state();

  // Restarts the random generator of this method's kernels from `seed`.
  void set_seed(uint64_t seed) { generator_->set_seed(seed); }
  Generator& generator() const { return *generator_; }

  // The debug handle of the instruction that made the last execute() fail
  // (for a delegate: the handle its backend named, the inner-most one when
  // delegates nest), 0 after a success or when nothing names one.
  uint32_t failed_debug_handle() const { return failed_debug_handle_; }
  // With `describe` (the default) a failure's message starts with where it
  // happened: "model.py:41 (method 'forward', instruction 3): ". Without, it
  // is the kernel's or backend's message alone: for a caller that reports the
  // location itself from failed_debug_handle() (the nested backend).
  void set_describe_failures(bool describe) { describe_failures_ = describe; }

  size_t num_instructions() const { return num_steps_; }
  // Nanoseconds spent in each instruction during the last execute(), when
  // profiling is on (nullptr otherwise).
  void set_profiling(uint64_t* per_instruction_ns) { profile_ = per_instruction_ns; }
  const char* instruction_name(size_t i) const;

  // Events of every execute() into `tracer` (event_tracer.h), nullptr to stop; the caller keeps it
  // alive while set. Each step records one Instruction event (a delegate call one Delegate event,
  // with the backend's DelegateOp events as its children), after each instruction the values the
  // tracer's capture requests name among the step's arguments are copied, and a top-level
  // execute() (tracer->depth() 0) ends with tracer->next_run(). A full buffer does not fail
  // execute(): tracer->status() says so. Without a tracer execute() tests one pointer per step.
  // NotSupported when the runtime was built with ETMLIR_EVENT_TRACER=OFF (its execute() has no
  // tracing code at all).
  Error set_event_tracer(EventTracer* tracer);
  EventTracer* event_tracer() const { return tracer_; }

 private:
  friend class Program;
  Method() = default;
  Error fail(Error error, size_t pc, uint32_t handle);
  void capture_step(EventTracer& tracer, size_t pc) const;

  const Program* program_ = nullptr;
  size_t method_index_ = 0;
  const char* name_ = "";
  EValue* values_ = nullptr;
  size_t num_values_ = 0;
  const int32_t* inputs_ = nullptr;
  size_t num_inputs_ = 0;
  const int32_t* outputs_ = nullptr;
  size_t num_outputs_ = 0;
  detail::Step* steps_ = nullptr;
  size_t num_steps_ = 0;
  detail::LoadedDelegate* delegates_ = nullptr;
  size_t num_delegates_ = 0;
  MemoryAllocator* temp_ = nullptr;
  Generator* generator_ = nullptr;  // in the method allocator
  uint64_t* profile_ = nullptr;
  EventTracer* tracer_ = nullptr;
  uint32_t failed_debug_handle_ = 0;
  bool describe_failures_ = true;
  // The call holding the method now ("execute", "set_input", ...), nullptr when none (see Threads above).
  std::atomic<const char*> busy_{nullptr};
};

}  // namespace etmlir
