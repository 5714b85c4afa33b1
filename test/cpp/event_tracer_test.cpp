// The event tracer in Method::execute (include/etmlir/runtime/event_tracer.h): one event per
// instruction and run, a delegate call's event with what its backend records (DelegateOp events)
// and a nested delegate's inner steps as its children, a full buffer that is an error of the
// tracer and not of execute(), copies of requested values right after the instruction that wrote
// them, and nothing at all without a tracer. The trace-file writer (runtime/devtools) is checked
// from Python (test/python/test_trace.py) and through et-run; its SHA-256 here.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "etmlir/runtime/backend.h"
#include "etmlir/runtime/event_tracer.h"
#include "etmlir/runtime/method.h"
#include "etmlir/runtime/program.h"
#include "nested_backend.h"
#include "test_util.h"
#include "trace_file.h"

namespace etmlir {
namespace {

// Doubles its live-in into its live-out and, when traced, records two regions (payload ids 7 and 8,
// debug handles 40 and 41) as a real backend would: children of the delegate call's event.
class TracingBackend : public Backend {
 public:
  int executes = 0;
  int traced_executes = 0;
  BackendExecuteContext last{nullptr};

  bool is_available() const override { return true; }
  Result<DelegateHandle> init(BackendInitContext&, Span<const uint8_t>, Span<const CompileSpec>) override {
    return DelegateHandle(this);
  }
  Error execute(BackendExecuteContext& context, DelegateHandle, Span<EValue*> args) override {
    ++executes;
    last = context;
    const Tensor& in = args[0]->to_tensor();
    Tensor& out = args[1]->to_tensor();
    for (uint32_t region = 0; region < 2; ++region) {
      uint32_t event = TraceEvent::kNoParent;
      if (context.tracer != nullptr)
        event = context.tracer->begin(TraceEventKind::DelegateOp, 40 + region, context.instruction,
                                      context.delegate_index, 7 + region);
      for (int64_t i = region; i < in.numel(); i += 2) out.data_as<float>()[i] = 2.f * in.data_as<float>()[i];
      if (context.tracer != nullptr) context.tracer->end(event);
    }
    if (context.tracer != nullptr) ++traced_executes;
    return Error::ok();
  }
  void destroy(DelegateHandle) override {}
};

class OneDelegate : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(backends_.add("tracing_fake", &backend_));
    std::vector<uint8_t> pte = test::one_delegate_program("tracing_fake", {1, 2, 3}, {2, 2});
    Error e = test::load_forward(pte, &backends_, &loaded_);
    ASSERT_FALSE(e) << e.message();
    ASSERT_NE(loaded_.method, nullptr) << loaded_.error.message();
  }
  // Sets x = {1, 2, 3, 4} * scale and runs once.
  void run(float scale = 1.f) {
    float x[4] = {1.f * scale, 2.f * scale, 3.f * scale, 4.f * scale};
    int64_t sizes[] = {2, 2};
    ASSERT_FALSE(loaded_.method->set_input(0, x, sizeof(x), ScalarType::Float, sizes));
    Error e = loaded_.method->execute();
    ASSERT_FALSE(e) << e.message();
    const float* y = loaded_.method->output(0).to_tensor().data_as<float>();
    for (int i = 0; i < 4; ++i) EXPECT_EQ(y[i], 2.f * x[i]) << i;
  }
  Method& method() { return *loaded_.method; }

  TracingBackend backend_;
  BackendRegistry backends_;
  test::LoadedMethod loaded_;
};

TEST_F(OneDelegate, WithoutATracerNothingIsRecordedAndTheBackendSeesNone) {
  TraceEvent events[16];
  EventTracer tracer{Span<TraceEvent>(events, 16)};
  run();
  EXPECT_EQ(backend_.last.tracer, nullptr);
  ASSERT_FALSE(method().set_event_tracer(&tracer));
  EXPECT_EQ(method().event_tracer(), &tracer);
  run();
  ASSERT_FALSE(method().set_event_tracer(nullptr));
  run();
  EXPECT_EQ(backend_.executes, 3);
  EXPECT_EQ(backend_.traced_executes, 1);
  EXPECT_EQ(backend_.last.tracer, nullptr);
  EXPECT_EQ(tracer.events().size(), 3u);  // the traced run only: the call and its two regions
  EXPECT_EQ(tracer.run(), 1u);
  EXPECT_FALSE(tracer.status());
}

TEST_F(OneDelegate, DelegateOpsNestUnderTheDelegateCall) {
  TraceEvent events[16];
  EventTracer tracer{Span<TraceEvent>(events, 16)};
  ASSERT_FALSE(method().set_event_tracer(&tracer));
  run();
  run(3.f);
  EXPECT_EQ(backend_.last.tracer, &tracer);
  EXPECT_EQ(backend_.last.instruction, 0u);
  EXPECT_EQ(backend_.last.delegate_index, 0u);
  Span<const TraceEvent> e = tracer.events();
  ASSERT_EQ(e.size(), 6u);
  for (uint32_t run = 0; run < 2; ++run) {
    const TraceEvent& call = e[3 * run];
    EXPECT_EQ(call.kind, TraceEventKind::Delegate);
    EXPECT_EQ(call.run, run);
    EXPECT_EQ(call.depth, 0);
    EXPECT_EQ(call.parent, TraceEvent::kNoParent);
    EXPECT_EQ(call.delegate, 0);
    EXPECT_EQ(call.instruction, 0u);
    for (uint32_t k = 0; k < 2; ++k) {
      const TraceEvent& op = e[3 * run + 1 + k];
      EXPECT_EQ(op.kind, TraceEventKind::DelegateOp);
      EXPECT_EQ(op.parent, 3 * run);
      EXPECT_EQ(op.depth, 1);
      EXPECT_EQ(op.run, run);
      EXPECT_EQ(op.delegate, 0);
      EXPECT_EQ(op.instruction, 0u);
      EXPECT_EQ(op.payload_id, 7 + k);
      EXPECT_EQ(op.debug_handle, 40 + k);
      EXPECT_LE(call.start_ns, op.start_ns);
      EXPECT_LT(op.start_ns, op.end_ns);
      EXPECT_LE(op.end_ns, call.end_ns);
    }
  }
  // Back at the top once the call returned.
  EXPECT_EQ(tracer.depth(), 0);
  EXPECT_EQ(tracer.parent(), TraceEvent::kNoParent);
  EXPECT_EQ(tracer.run(), 2u);
}

TEST_F(OneDelegate, AFullBufferIsTheTracersErrorNotExecutes) {
  TraceEvent events[2];
  EventTracer tracer{Span<TraceEvent>(events, 2)};
  ASSERT_FALSE(method().set_event_tracer(&tracer));
  run();   // the call and one region fit; the second region is dropped
  run(2.f);  // everything dropped; the results are still right (run() checks them)
  EXPECT_EQ(tracer.events().size(), 2u);
  EXPECT_EQ(tracer.dropped_events(), 4u);
  Error status = tracer.status();
  EXPECT_EQ(status.code(), ErrorCode::OutOfMemory);
  EXPECT_STREQ(status.message(), "event buffer full: 2 events kept, 4 dropped (a buffer of 6 events holds them all)");
  tracer.reset();
  run();
  EXPECT_EQ(tracer.events().size(), 2u);
  EXPECT_EQ(tracer.dropped_events(), 1u);
}

TEST_F(OneDelegate, CapturesCopyALiveOutRightAfterTheCall) {
  TraceEvent events[16];
  EventTracer tracer{Span<TraceEvent>(events, 16)};
  CaptureRequest requests[] = {{0, 1}, {0, 5}};  // y after the call; value 5 is no argument of it
  TraceCapture records[4];
  alignas(16) uint8_t bytes[256];
  tracer.set_capture(Span<const CaptureRequest>(requests, 2), Span<TraceCapture>(records, 4),
                     Span<uint8_t>(bytes, sizeof(bytes)));
  ASSERT_FALSE(method().set_event_tracer(&tracer));
  run();
  run(-1.f);
  ASSERT_EQ(tracer.captures().size(), 2u);
  for (uint32_t run = 0; run < 2; ++run) {
    const TraceCapture& c = tracer.captures()[run];
    EXPECT_EQ(c.run, run);
    EXPECT_EQ(c.instruction, 0u);
    EXPECT_EQ(c.value, 1);
    EXPECT_EQ(c.scalar_type, static_cast<int8_t>(ScalarType::Float));
    ASSERT_EQ(c.rank, 2);
    EXPECT_EQ(c.sizes[0], 2);
    EXPECT_EQ(c.sizes[1], 2);
    ASSERT_EQ(c.nbytes, 16u);
    float y[4];
    std::memcpy(y, tracer.capture_bytes() + c.offset, sizeof(y));
    float sign = run == 0 ? 1.f : -1.f;
    for (int i = 0; i < 4; ++i) EXPECT_EQ(y[i], sign * 2.f * static_cast<float>(i + 1)) << run << " " << i;
  }
  EXPECT_FALSE(tracer.status());

  // Too few bytes for a copy: dropped and counted, execute() still fine.
  EventTracer small{Span<TraceEvent>(events, 16)};
  small.set_capture(Span<const CaptureRequest>(requests, 1), Span<TraceCapture>(records, 4),
                    Span<uint8_t>(bytes, 8));
  ASSERT_FALSE(method().set_event_tracer(&small));
  run();
  EXPECT_EQ(small.captures().size(), 0u);
  EXPECT_EQ(small.dropped_captures(), 1u);
  EXPECT_EQ(small.status().code(), ErrorCode::OutOfMemory);
  EXPECT_CONTAINS(small.status().message(), "capture buffer full: 0 copies kept, 1 dropped");
}

// A portable program (the zoo MLP): one Instruction event per step and run, with the step's debug
// handle, which the program's debug_info names.
TEST(EventTracer, OneInstructionEventPerStepOfAPortableProgram) {
  ETMLIR_REQUIRE_FIXTURES();
  test::LoadedMethod loaded;
  ASSERT_FALSE(test::load_forward("mlp.pte", test::LoaderKind::Buffer, nullptr, &loaded));
  ASSERT_NE(loaded.method, nullptr) << loaded.error.message();
  Method& method = *loaded.method;
  test::Reference ref;
  ASSERT_TRUE(test::read_reference("mlp", &ref));
  std::vector<TraceEvent> events(64);
  EventTracer tracer{Span<TraceEvent>(events.data(), events.size())};
  ASSERT_FALSE(method.set_event_tracer(&tracer));
  for (int run = 0; run < 2; ++run) {
    ASSERT_FALSE(method.set_input(0, ref.input.data(), ref.input.size() * sizeof(float), ScalarType::Float,
                                  Span<const int64_t>(ref.input_shape.data(), ref.input_shape.size())));
    ASSERT_FALSE(method.execute());
  }
  size_t n = method.num_instructions();
  ASSERT_EQ(tracer.events().size(), 2 * n);
  size_t named = 0;
  for (size_t i = 0; i < tracer.events().size(); ++i) {
    const TraceEvent& e = tracer.events()[i];
    EXPECT_EQ(e.kind, TraceEventKind::Instruction);
    EXPECT_EQ(e.run, i / n);
    EXPECT_EQ(e.instruction, i % n);
    EXPECT_EQ(e.depth, 0);
    EXPECT_EQ(e.parent, TraceEvent::kNoParent);
    EXPECT_EQ(e.delegate, TraceEvent::kNoDelegate);
    EXPECT_LT(e.start_ns, e.end_ns);
    if (i > 0) {
      EXPECT_LE(tracer.events()[i - 1].end_ns, e.start_ns);
    }
    if (e.debug_handle != 0 && loaded.program->program->debug_location(0, e.debug_handle) != nullptr) ++named;
  }
  EXPECT_GT(named, 0u);
}

// A nested delegate forwards its inner method's events: under the delegate call's event, one level
// deeper, with debug handles the outer program's debug_info names; its inner execute() counts no run.
TEST(EventTracer, NestedDelegateForwardsItsInnerSteps) {
  ETMLIR_REQUIRE_FIXTURES();
  BackendRegistry backends;
  ASSERT_FALSE(register_nested_backend(backends));
  test::LoadedMethod loaded;
  ASSERT_FALSE(test::load_forward("nested_lookup.pte", test::LoaderKind::Buffer, &backends, &loaded));
  ASSERT_NE(loaded.method, nullptr) << loaded.error.message();
  Method& method = *loaded.method;
  std::vector<TraceEvent> events(64);
  EventTracer tracer{Span<TraceEvent>(events.data(), events.size())};
  ASSERT_FALSE(method.set_event_tracer(&tracer));
  int64_t ids[3] = {1, 2, 3};
  int64_t sizes[] = {3};
  for (int run = 0; run < 2; ++run) {
    ASSERT_FALSE(method.set_input(0, ids, sizeof(ids), ScalarType::Int64, sizes));
    Error e = method.execute();
    ASSERT_FALSE(e) << e.message();
  }
  EXPECT_EQ(tracer.run(), 2u);
  size_t calls = 0, inner = 0, named = 0;
  for (size_t i = 0; i < tracer.events().size(); ++i) {
    const TraceEvent& e = tracer.events()[i];
    if (e.depth == 0) {
      if (e.kind == TraceEventKind::Delegate) ++calls;
      continue;
    }
    ++inner;
    EXPECT_EQ(e.depth, 1);
    ASSERT_LT(e.parent, i);
    const TraceEvent& call = tracer.events()[e.parent];
    EXPECT_EQ(call.kind, TraceEventKind::Delegate);
    EXPECT_EQ(call.depth, 0);
    EXPECT_EQ(call.run, e.run);
    EXPECT_LE(call.start_ns, e.start_ns);
    EXPECT_LE(e.end_ns, call.end_ns);
    if (e.debug_handle != 0 && loaded.program->program->debug_location(0, e.debug_handle) != nullptr) ++named;
  }
  EXPECT_EQ(calls, 2u);
  EXPECT_GE(inner, 4u);  // the embedding and the multiplication, per run
  EXPECT_GE(named, 2u);
}

TEST(TraceFile, Sha256KnownAnswers) {
  EXPECT_EQ(devtools::sha256_hex(nullptr, 0), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const char* abc = "abc";
  EXPECT_EQ(devtools::sha256_hex(reinterpret_cast<const uint8_t*>(abc), 3),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  std::string million(1000000, 'a');  // crosses many blocks and the padding boundary
  EXPECT_EQ(devtools::sha256_hex(reinterpret_cast<const uint8_t*>(million.data()), million.size()),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(TraceFile, SerializedTraceVerifies) {
  TraceEvent events[2];
  events[0].end_ns = 5;
  events[1].kind = TraceEventKind::DelegateOp;
  events[1].parent = 0;
  devtools::MethodTraceData data;
  data.method = "forward";
  data.runs = 1;
  data.events = Span<const TraceEvent>(events, 2);
  devtools::TraceFileInfo info;
  info.writer = "event_tracer_test";
  std::vector<uint8_t> bytes;
  ASSERT_FALSE(devtools::serialize_trace(info, {data}, &bytes));
  EXPECT_FALSE(devtools::verify_trace(bytes.data(), bytes.size()));
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(bytes.data()) + 4, 4), "ETTR");
  EXPECT_TRUE(devtools::verify_trace(bytes.data(), bytes.size() / 2));
}

}  // namespace
}  // namespace etmlir
