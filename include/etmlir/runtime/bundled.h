// Bundled programs: test cases a .pte carries (inputs and the outputs the model gave where it was
// exported, with tolerances), so a device can check itself with nothing but the file.
//
//   Result<BundledCases> cases = BundledCases::load(program);     // nothing to load: size() == 0
//   for (size_t c = 0; c < cases->size(); ++c) {
//     Result<Method> method = program.load_method(cases->method(c), &memory, &kernels);
//     ET_CHECK_OK(cases->set_inputs(*method, c));
//     ET_CHECK_OK(method->execute());
//     BundledOutputCheck checks[8];
//     Result<bool> passed = cases->check_outputs(*method, c, Span<BundledOutputCheck>(checks, 8));
//   }
//
// The cases come from etmlir.devtools.bundle (schema: runtime/schema/program.fbs, BundledCase);
// et-run --verify runs them. An output passes when every element satisfies
// |actual - expected| <= atol + rtol * |expected| (NaN matches NaN; integers and bools compare
// the same way, so tolerances of 0 mean exactly equal).
//
// Memory: load() reads each case's tensors through the program's DataLoader (a mapped or
// in-memory file hands out views; others copy) and keeps them while the BundledCases lives;
// set_inputs() copies planned inputs into the method's arenas and points unplanned ones at those
// bytes, so the BundledCases must outlive the execute() that follows. Nothing else is allocated.
#pragma once

#include <cstddef>
#include <cstdint>

#include "etmlir/runtime/data_loader.h"
#include "etmlir/runtime/error.h"
#include "etmlir/runtime/span.h"
#include "etmlir/runtime/tensor.h"

namespace etmlir {

class Method;
class Program;

// How one output of a case compared with what was expected.
struct BundledOutputCheck {
  bool passed = false;
  // Non-empty when the output could not be compared at all: "float32[2, 3], expected float32[2, 4]".
  char problem[160] = "";
  uint64_t numel = 0;
  uint64_t mismatched = 0;      // elements outside atol + rtol * |expected|
  double max_abs_error = 0;     // over every element
  uint64_t worst_index = 0;     // the element with the largest excess over its tolerance (flat index)
  double worst_actual = 0;
  double worst_expected = 0;
};

class BundledCases {
 public:
  static constexpr size_t kMaxTensors = 64;  // inputs plus outputs of one case

  BundledCases() = default;
  BundledCases(BundledCases&&) noexcept = default;
  BundledCases& operator=(BundledCases&&) noexcept = default;
  BundledCases(const BundledCases&) = delete;
  BundledCases& operator=(const BundledCases&) = delete;

  // Reads and checks the program's cases: every tensor's dtype, sizes and bytes (inside its
  // segment, nbytes matching the sizes). A case that breaks a rule is an InvalidProgram error
  // naming the case and the tensor. At most `kMaxCases` cases.
  static constexpr size_t kMaxCases = 1024;
  static Result<BundledCases> load(const Program& program);

  size_t size() const { return num_cases_; }
  const char* method(size_t c) const;
  const char* name(size_t c) const;  // "" when the case has none
  double atol(size_t c) const;
  double rtol(size_t c) const;
  size_t num_inputs(size_t c) const;
  size_t num_outputs(size_t c) const;

  // Sets `method`'s inputs to case c's (InvalidArgument when the case is for another method, or
  // its inputs do not fit the method's signature; the message names the case and the input).
  Error set_inputs(Method& method, size_t c) const;
  // Compares `method`'s outputs (after execute()) with case c's expected ones: one entry of
  // `checks` per output (at least num_outputs(c) entries). Returns whether all passed.
  Result<bool> check_outputs(const Method& method, size_t c, Span<BundledOutputCheck> checks) const;

 private:
  const Program* program_ = nullptr;
  const void* cases_ = nullptr;  // the flatbuffer vector of BundledCase
  size_t num_cases_ = 0;
  // The data segments the cases' tensors lie in, loaded once each (at most kMaxSegments of them).
  static constexpr size_t kMaxSegments = 4;
  FreeableBuffer segments_[kMaxSegments];
  uint32_t segment_ids_[kMaxSegments] = {};
  size_t num_segments_ = 0;
  const uint8_t* tensor_data(const void* tensor) const;
};

}  // namespace etmlir
