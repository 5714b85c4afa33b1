// A Method runs one call at a time (method.h, "Threads"): a call that overlaps
// a running execute() (from another thread, or re-entered from a delegate of
// the method itself) is refused with an Error naming both calls, and the method
// works as before once the running call returns.
//
// The overlap is made deterministic with a "gate" backend registered here: its
// delegate copies x + 1 into y, but first tells the test it has entered and
// waits until the test opens the gate (or, in re-entry mode, calls execute()
// of the method it belongs to from inside).
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "etmlir/runtime/backend.h"
#include "etmlir/runtime/method.h"
#include "etmlir/runtime/program.h"
#include "test_util.h"

namespace etmlir {
namespace {

class GateBackend : public Backend {
 public:
  bool is_available() const override { return true; }
  Result<DelegateHandle> init(BackendInitContext&, Span<const uint8_t>, Span<const CompileSpec>) override {
    return DelegateHandle(this);
  }
  Error execute(BackendExecuteContext&, DelegateHandle, Span<EValue*> args) override {
    if (reenter != nullptr) {
      reentry_error = reenter->execute();
    } else {
      std::unique_lock<std::mutex> lock(mutex_);
      ++entered_;
      changed_.notify_all();
      changed_.wait(lock, [this] { return open_; });
    }
    const Tensor& x = args[0]->to_tensor();
    Tensor& y = args[1]->to_tensor();
    for (int64_t i = 0; i < x.numel(); ++i) y.data_as<float>()[i] = x.data_as<float>()[i] + 1.0f;
    return Error::ok();
  }
  void destroy(DelegateHandle) override {}

  // Blocks until `calls` delegate calls are inside execute() (waiting at the gate).
  void wait_until_entered(int calls = 1) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this, calls] { return entered_ >= calls; });
  }
  void open() {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = true;
    changed_.notify_all();
  }

  Method* reenter = nullptr;  // when set, execute() calls reenter->execute() instead of waiting
  Error reentry_error;

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int entered_ = 0;
  bool open_ = false;
};

const int64_t kSizes[] = {2, 3};
const float kX[6] = {0.f, 1.f, -2.f, 3.5f, 4.f, 5.f};

// "forward": one delegate call of "gate", x (float32[2, 3]) -> y = x + 1.
void load_gate_method(GateBackend* gate, BackendRegistry* backends, test::LoadedMethod* loaded) {
  ASSERT_FALSE(backends->add("gate", gate));
  test::PayloadFields header;
  header.backend_id = "gate";
  header.body_format = "none";
  std::vector<uint8_t> pte = test::one_delegate_program("gate", test::write_payload(header, {0}), {2, 3});
  Error e = test::load_forward(pte, backends, loaded);
  ASSERT_FALSE(e) << e.message();
  ASSERT_TRUE(loaded->method) << loaded->error.message();
}

Error set_x(Method& method, float offset) {
  float x[6];
  for (int i = 0; i < 6; ++i) x[i] = kX[i] + offset;
  return method.set_input(0, x, sizeof(x), ScalarType::Float, Span<const int64_t>(kSizes, 2));
}

void expect_y(const Method& method, float offset) {
  const float* y = method.output(0).to_tensor().data_as<const float>();
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y[i], kX[i] + offset + 1.0f) << "element " << i;
}

std::string refusal(const char* running, const char* call) {
  return std::string("method 'forward' is already in ") + running + "() on another thread (or re-entered): " + call +
         "() refused; a Method runs one call at a time (load the method once per thread to run in parallel)";
}

TEST(MethodConcurrency, CallsOverlappingAnExecuteOnAnotherThreadAreRefused) {
  GateBackend gate;
  BackendRegistry backends;
  test::LoadedMethod loaded;
  ASSERT_NO_FATAL_FAILURE(load_gate_method(&gate, &backends, &loaded));
  Method& method = *loaded.method;
  ASSERT_FALSE(set_x(method, 0.f));

  Error first;
  std::thread runner([&] { first = method.execute(); });
  gate.wait_until_entered();  // the runner holds the method, waiting at the gate
  Error second = method.execute();
  Error input = set_x(method, 10.f);
  Error reset = method.reset_state();
  float buffer[6];
  Error output = method.set_output_buffer(0, buffer, sizeof(buffer));
  gate.open();
  runner.join();

  ASSERT_FALSE(first) << first.message();
  expect_y(method, 0.f);  // the refused set_input did not touch the runner's input
  EXPECT_EQ(second.code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(std::string(second.message()), refusal("execute", "execute"));
  EXPECT_EQ(std::string(input.message()), refusal("execute", "set_input"));
  EXPECT_EQ(std::string(reset.message()), refusal("execute", "reset_state"));
  EXPECT_EQ(std::string(output.message()), refusal("execute", "set_output_buffer"));

  // The flag went back with the runner's return: the method takes calls again.
  ASSERT_FALSE(set_x(method, 2.f));
  Error again = method.execute();
  ASSERT_FALSE(again) << again.message();
  expect_y(method, 2.f);
}

TEST(MethodConcurrency, AnExecuteReenteredFromItsOwnDelegateIsRefused) {
  GateBackend gate;
  BackendRegistry backends;
  test::LoadedMethod loaded;
  ASSERT_NO_FATAL_FAILURE(load_gate_method(&gate, &backends, &loaded));
  Method& method = *loaded.method;
  gate.reenter = &method;
  ASSERT_FALSE(set_x(method, 0.f));
  Error outer = method.execute();
  ASSERT_FALSE(outer) << outer.message();
  expect_y(method, 0.f);
  EXPECT_EQ(std::string(gate.reentry_error.message()), refusal("execute", "execute"));

  gate.reenter = nullptr;
  gate.open();
  ASSERT_FALSE(set_x(method, 5.f));
  Error again = method.execute();
  ASSERT_FALSE(again) << again.message();
  expect_y(method, 5.f);
}

TEST(MethodConcurrency, TwoMethodsOfOneProgramRunAtTheSameTime) {
  // Separate methods hold separate flags: one waiting inside execute() does not refuse the other.
  GateBackend gate;
  BackendRegistry backends;
  test::LoadedMethod first;
  ASSERT_NO_FATAL_FAILURE(load_gate_method(&gate, &backends, &first));
  test::MethodMemory memory(*first.program->program->method_meta("forward"), test::kDefaultTempBytes, &backends);
  Result<Method> second = first.program->program->load_method("forward", &memory.manager, &test::all_kernels(),
                                                                &backends);
  ASSERT_TRUE(second.ok()) << second.error().message();
  ASSERT_FALSE(set_x(*first.method, 0.f));
  ASSERT_FALSE(set_x(second.get(), 3.f));

  Error one, two;
  std::thread runner_one([&] { one = first.method->execute(); });
  std::thread runner_two([&] { two = second.get().execute(); });
  gate.wait_until_entered(2);  // both methods are inside execute() at once
  gate.open();
  runner_one.join();
  runner_two.join();
  ASSERT_FALSE(one) << one.message();
  ASSERT_FALSE(two) << two.message();
  expect_y(*first.method, 0.f);
  expect_y(second.get(), 3.f);
}

}  // namespace
}  // namespace etmlir
