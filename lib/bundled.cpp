// Bundled test cases of a program (bundled.h): reading them, feeding a method, comparing outputs.
#include "etmlir/runtime/bundled.h"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "etmlir/runtime/evalue.h"
#include "etmlir/runtime/half.h"
#include "etmlir/runtime/method.h"
#include "etmlir/runtime/program.h"
#include "pte_format.h"

namespace etmlir {
namespace {

using ull = unsigned long long;
using CaseVector = flatbuffers::Vector<flatbuffers::Offset<schema::BundledCase>>;

const schema::BundledCase& case_at(const void* cases, size_t c) {
  return *static_cast<const CaseVector*>(cases)->Get(static_cast<flatbuffers::uoffset_t>(c));
}

template <typename V>
size_t count(const V* vector) {
  return vector ? vector->size() : 0;
}

const schema::BundledTensor* tensor_at(const schema::BundledCase& c, bool input, size_t i) {
  const auto* list = input ? c.inputs() : c.expected_outputs();
  return list->Get(static_cast<flatbuffers::uoffset_t>(i));
}

// Element `i` of a contiguous buffer of `dtype`, as a double.
double element(ScalarType dtype, const uint8_t* data, uint64_t i) {
  const uint8_t* at = data + i * element_size(dtype);
  switch (dtype) {
    case ScalarType::UInt8: return *at;
    case ScalarType::Bool: return *at != 0;
    case ScalarType::Int8: { int8_t v; std::memcpy(&v, at, 1); return v; }
    case ScalarType::Int16: { int16_t v; std::memcpy(&v, at, 2); return v; }
    case ScalarType::Int32: { int32_t v; std::memcpy(&v, at, 4); return v; }
    case ScalarType::Int64: { int64_t v; std::memcpy(&v, at, 8); return static_cast<double>(v); }
    case ScalarType::Half: { uint16_t v; std::memcpy(&v, at, 2); return half_to_float(v); }
    case ScalarType::BFloat16: { uint16_t v; std::memcpy(&v, at, 2); return bfloat16_to_float(v); }
    case ScalarType::Float: { float v; std::memcpy(&v, at, 4); return v; }
    case ScalarType::Double: { double v; std::memcpy(&v, at, 8); return v; }
  }
  return 0;
}

}  // namespace

Result<BundledCases> BundledCases::load(const Program& program) {
  BundledCases out;
  out.program_ = &program;
  const schema::Program& p = *schema::GetProgram(program.flatbuffer());
  const CaseVector* cases = p.bundled_cases();
  out.num_cases_ = count(cases);
  out.cases_ = cases;
  if (out.num_cases_ > kMaxCases)
    return Error::make(ErrorCode::InvalidProgram, "the program carries %zu bundled test cases (at most %zu)",
                       out.num_cases_, kMaxCases);
  size_t num_segments = count(p.segments());
  for (size_t c = 0; c < out.num_cases_; ++c) {
    const schema::BundledCase& bc = case_at(cases, c);
    if (bc.method() == nullptr || bc.method()->size() == 0)
      return Error::make(ErrorCode::InvalidProgram, "bundled test case %zu names no method", c);
    if (program.method_meta(bc.method()->c_str()).ok() == false)
      return Error::make(ErrorCode::InvalidProgram, "bundled test case %zu is for method '%.64s', which the program lacks",
                         c, bc.method()->c_str());
    if (!(bc.atol() >= 0) || !(bc.rtol() >= 0))
      return Error::make(ErrorCode::InvalidProgram, "bundled test case %zu has atol %g and rtol %g (both must be >= 0)",
                         c, bc.atol(), bc.rtol());
    size_t n_in = count(bc.inputs()), n_out = count(bc.expected_outputs());
    if (n_in + n_out > kMaxTensors)
      return Error::make(ErrorCode::InvalidProgram, "bundled test case %zu has %zu tensors (at most %zu)", c,
                         n_in + n_out, kMaxTensors);
    for (size_t k = 0; k < n_in + n_out; ++k) {
      bool input = k < n_in;
      size_t i = input ? k : k - n_in;
      const char* kind = input ? "input" : "expected output";
      const schema::BundledTensor* t = tensor_at(bc, input, i);
      ScalarType dtype = static_cast<ScalarType>(t->scalar_type());
      if (!is_known_dtype(static_cast<int8_t>(t->scalar_type())))
        return Error::make(ErrorCode::InvalidProgram, "bundled test case %zu, %s %zu: unknown scalar type %d", c, kind,
                           i, static_cast<int>(t->scalar_type()));
      size_t dim = count(t->sizes());
      if (dim > static_cast<size_t>(kMaxDims))
        return Error::make(ErrorCode::InvalidProgram, "bundled test case %zu, %s %zu: %zu dims (at most %d)", c, kind, i,
                           dim, kMaxDims);
      uint64_t numel = 1;
      for (size_t d = 0; d < dim; ++d) {
        int64_t s = t->sizes()->Get(static_cast<flatbuffers::uoffset_t>(d));
        if (s < 0 || (s > 0 && numel > (UINT64_MAX >> 4) / static_cast<uint64_t>(s)))
          return Error::make(ErrorCode::InvalidProgram, "bundled test case %zu, %s %zu: size %lld of dim %zu", c, kind,
                             i, static_cast<long long>(s), d);
        numel *= static_cast<uint64_t>(s);
      }
      const schema::DataLocation* where = t->data();
      uint64_t nbytes = numel * element_size(dtype);
      if (where == nullptr || where->size() != nbytes || where->segment() >= num_segments)
        return Error::make(ErrorCode::InvalidProgram,
                           "bundled test case %zu, %s %zu: its data (%llu bytes in segment %u) does not hold the %llu "
                           "bytes of %s[%zu dims]",
                           c, kind, i, where ? static_cast<ull>(where->size()) : 0ull, where ? where->segment() : 0u,
                           static_cast<ull>(nbytes), dtype_name(dtype), dim);
      const schema::Segment* segment = p.segments()->Get(where->segment());
      if (where->offset() > segment->size() || nbytes > segment->size() - where->offset() ||
          where->offset() % element_size(dtype) != 0)
        return Error::make(ErrorCode::InvalidProgram,
                           "bundled test case %zu, %s %zu: bytes [%llu, +%llu) are outside segment %u (%llu bytes) or "
                           "not aligned to the element size",
                           c, kind, i, static_cast<ull>(where->offset()), static_cast<ull>(nbytes), where->segment(),
                           static_cast<ull>(segment->size()));
      // The segment, loaded once.
      size_t s = 0;
      while (s < out.num_segments_ && out.segment_ids_[s] != where->segment()) ++s;
      if (s == out.num_segments_) {
        if (s == kMaxSegments)
          return Error::make(ErrorCode::InvalidProgram, "bundled test cases spread over more than %zu segments",
                             kMaxSegments);
        Result<FreeableBuffer> loaded = program.load_segment(where->segment(), 0, segment->size());
        if (!loaded.ok()) {
          Error e = loaded.error();
          return e.prefix("bundled test case %zu, %s %zu", c, kind, i);
        }
        if (reinterpret_cast<uintptr_t>(loaded->data()) % 16 != 0)
          return Error::make(ErrorCode::InvalidArgument,
                             "segment %u of bundled test data is not 16-byte aligned in memory (load the file into an "
                             "aligned buffer)",
                             where->segment());
        out.segments_[s] = static_cast<FreeableBuffer&&>(loaded.get());
        out.segment_ids_[s] = where->segment();
        ++out.num_segments_;
      }
    }
  }
  return out;
}

const char* BundledCases::method(size_t c) const { return c < num_cases_ ? case_at(cases_, c).method()->c_str() : ""; }

const char* BundledCases::name(size_t c) const {
  if (c >= num_cases_) return "";
  const flatbuffers::String* n = case_at(cases_, c).name();
  return n ? n->c_str() : "";
}

double BundledCases::atol(size_t c) const { return c < num_cases_ ? case_at(cases_, c).atol() : 0; }
double BundledCases::rtol(size_t c) const { return c < num_cases_ ? case_at(cases_, c).rtol() : 0; }
size_t BundledCases::num_inputs(size_t c) const { return c < num_cases_ ? count(case_at(cases_, c).inputs()) : 0; }
size_t BundledCases::num_outputs(size_t c) const {
  return c < num_cases_ ? count(case_at(cases_, c).expected_outputs()) : 0;
}

const uint8_t* BundledCases::tensor_data(const void* tensor) const {
  const schema::DataLocation* where = static_cast<const schema::BundledTensor*>(tensor)->data();
  for (size_t s = 0; s < num_segments_; ++s) {
    if (segment_ids_[s] == where->segment())
      return static_cast<const uint8_t*>(segments_[s].data()) + where->offset();
  }
  return nullptr;  // not reached: load() loaded every segment a tensor names
}

Error BundledCases::set_inputs(Method& method, size_t c) const {
  if (c >= num_cases_)
    return Error::make(ErrorCode::InvalidArgument, "bundled test case %zu does not exist (the program has %zu)", c,
                       num_cases_);
  const schema::BundledCase& bc = case_at(cases_, c);
  size_t name_size = std::strlen(method.name());
  if (bc.method()->size() != name_size || std::memcmp(bc.method()->data(), method.name(), name_size) != 0)
    return Error::make(ErrorCode::InvalidArgument, "bundled test case %zu is for method '%.64s', not '%.64s'", c,
                       bc.method()->c_str(), method.name());
  size_t n = count(bc.inputs());
  if (n != method.num_inputs())
    return Error::make(ErrorCode::InvalidArgument, "bundled test case %zu has %zu inputs; method '%s' takes %zu", c, n,
                       method.name(), method.num_inputs());
  for (size_t i = 0; i < n; ++i) {
    const schema::BundledTensor* t = tensor_at(bc, true, i);
    Span<const int64_t> sizes(t->sizes() ? t->sizes()->data() : nullptr, count(t->sizes()));
    if (Error e = method.set_input(i, tensor_data(t), t->data()->size(), static_cast<ScalarType>(t->scalar_type()),
                                   sizes))
      return e.prefix("bundled test case %zu, input %zu", c, i);
  }
  return Error::ok();
}

Result<bool> BundledCases::check_outputs(const Method& method, size_t c, Span<BundledOutputCheck> checks) const {
  if (c >= num_cases_)
    return Error::make(ErrorCode::InvalidArgument, "bundled test case %zu does not exist (the program has %zu)", c,
                       num_cases_);
  const schema::BundledCase& bc = case_at(cases_, c);
  size_t n = count(bc.expected_outputs());
  if (checks.size() < n)
    return Error::make(ErrorCode::InvalidArgument, "check_outputs: %zu entries for the %zu outputs of test case %zu",
                       checks.size(), n, c);
  if (n != method.num_outputs())
    return Error::make(ErrorCode::InvalidArgument, "bundled test case %zu expects %zu outputs; method '%s' has %zu", c,
                       n, method.name(), method.num_outputs());
  bool all = true;
  for (size_t o = 0; o < n; ++o) {
    BundledOutputCheck& check = checks[o];
    check = BundledOutputCheck{};
    const schema::BundledTensor* want = tensor_at(bc, false, o);
    ScalarType want_dtype = static_cast<ScalarType>(want->scalar_type());
    size_t want_dim = count(want->sizes());
    const EValue& value = method.output(o);
    char got[96], expected[96];
    format_shape(want_dtype, want->sizes() ? want->sizes()->data() : nullptr, want_dim, nullptr, expected,
                 sizeof(expected));
    if (!value.is_tensor()) {
      std::snprintf(check.problem, sizeof(check.problem), "a %s, expected %s", tag_name(value.tag), expected);
      all = false;
      continue;
    }
    const Tensor& t = value.to_tensor();
    bool same = t.dtype() == want_dtype && static_cast<size_t>(t.dim()) == want_dim;
    for (size_t d = 0; same && d < want_dim; ++d)
      same = t.size(static_cast<int32_t>(d)) == want->sizes()->Get(static_cast<flatbuffers::uoffset_t>(d));
    if (!same) {
      std::snprintf(check.problem, sizeof(check.problem), "%s, expected %s", t.describe(got, sizeof(got)), expected);
      all = false;
      continue;
    }
    const uint8_t* actual = static_cast<const uint8_t*>(t.data());
    const uint8_t* reference = tensor_data(want);
    check.numel = static_cast<uint64_t>(t.numel());
    double atol = bc.atol(), rtol = bc.rtol(), worst_excess = -1;
    for (uint64_t i = 0; i < check.numel; ++i) {
      double a = element(want_dtype, actual, i), e = element(want_dtype, reference, i);
      if (std::isnan(a) && std::isnan(e)) continue;
      double error = std::fabs(a - e);
      if (std::isnan(error)) error = INFINITY;  // one NaN, or infinities of opposite signs
      if (a == e) error = 0;                    // equal infinities
      if (error > check.max_abs_error) check.max_abs_error = error;
      double excess = error - (atol + rtol * std::fabs(e));
      if (excess > 0) ++check.mismatched;
      if (excess > worst_excess) {
        worst_excess = excess;
        check.worst_index = i;
        check.worst_actual = a;
        check.worst_expected = e;
      }
    }
    check.passed = check.mismatched == 0;
    all = all && check.passed;
  }
  return all;
}

}  // namespace etmlir
