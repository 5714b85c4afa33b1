// etmlir._runtime: the Python face of the C++ runtime (nanobind).
//
//   program = _runtime.Program.from_file(path)        (mmap) or .from_bytes(b)
//       (allow_native_code=False, trusted_keys=[32-byte keys]: the NativeCodeTrust its methods load with)
//   method = program.load_method("forward", temp_bytes)
//   outputs = method.run([ndarray, ...])              → list of ndarrays (copies)
//   method.set_seed(n)                                 (the random ops' generator)
//   _runtime.run_kernel("aten::add.out", [("tensor", a), ..., ("out", buf, dynamic)], temp_bytes, seed)
//
// Arrays come in as numpy arrays or, for bfloat16 (which numpy lacks), as
// torch tensors through DLPack; tensors go out as numpy arrays, bfloat16 ones
// as torch tensors (an error naming the output when torch is missing).
//
// The Python layer (python/etmlir/runtime/) converts torch tensors, checks
// the input count, and wraps results. This file is binding code: it may use
// the heap and exceptions; the runtime core it calls does neither.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "etmlir/register_backends.h"
#include "etmlir/runtime/backend.h"
#include "etmlir/runtime/bundled.h"
#include "etmlir/runtime/data_loader.h"
#include "etmlir/runtime/generator.h"
#include "etmlir/runtime/kernel.h"
#include "etmlir/runtime/method.h"
#include "etmlir/runtime/native_code.h"
#include "etmlir/runtime/platform.h"
#include "etmlir/runtime/program.h"
#include "etmlir/schema/program_generated.h"
#include "portable_kernels.h"
#include "trace_file.h"
#include "runtime_manifest.h"

namespace nb = nanobind;
using namespace etmlir;

namespace {

// `text` as valid UTF-8: names and messages from a .pte are bytes the file chose, and Python
// decodes every str it gets (a bad byte would raise UnicodeDecodeError in place of the real
// error). Valid sequences are kept, every other byte becomes "\xNN".
std::string valid_utf8(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  size_t n = text.size();
  for (size_t i = 0; i < n;) {
    unsigned char c = s[i];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = len > 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) ok = (s[i + k] & 0xC0) == 0x80;
    if (ok && len > 1) {  // no overlong forms, surrogates or code points past U+10FFFF
      uint32_t cp = c & (0xFF >> (len + 1));
      for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (s[i + k] & 0x3F);
      ok = cp >= (len == 2 ? 0x80u : len == 3 ? 0x800u : 0x10000u) && cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF);
    }
    if (ok) {
      out.append(text, i, len);
      i += len;
    } else {
      static const char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 0xF];
      ++i;
    }
  }
  return out;
}

// An exception type the Python layer re-exports as etmlir.runtime.Error (a RuntimeError).
struct RuntimeFailure : std::runtime_error {
  explicit RuntimeFailure(const std::string& message) : std::runtime_error(valid_utf8(message)) {}
};

[[noreturn]] void raise(const Error& error) { throw RuntimeFailure(error.message()); }

KernelRegistry& kernel_registry() {
  static KernelRegistry* registry = [] {
    auto* r = new KernelRegistry();
    if (Error e = register_prim_kernels(*r)) raise(e);
    if (Error e = register_portable_kernels(*r)) raise(e);
    return r;
  }();
  return *registry;
}

// BackendOptions::threads of the backends methods loaded from now on get (set_backend_threads).
int g_backend_threads = 1;

// The backends a .pte's delegates may name: every backend this build compiles
// in (etmlir::register_backends, the CMake list ETMLIR_BACKENDS), registered
// with g_backend_threads. One registry per thread count, made on first use and
// kept for good: a loaded method keeps the registry it was loaded with.
BackendRegistry& backend_registry() {
  static auto* registries = new std::map<int, std::unique_ptr<BackendRegistry>>();
  std::unique_ptr<BackendRegistry>& slot = (*registries)[g_backend_threads];
  if (!slot) {
    auto r = std::make_unique<BackendRegistry>();
    BackendOptions options;
    options.threads = g_backend_threads;
    if (Error e = register_backends(*r, options)) raise(e);
    slot = std::move(r);
  }
  return *slot;
}

void set_backend_threads(int n, const char* function) {
  if (n < 1 || n > kMaxBackendThreads)
    throw RuntimeFailure(std::string(function) + ": the thread count must be 1 to " +
                         std::to_string(kMaxBackendThreads) + ", got " + std::to_string(n));
  g_backend_threads = n;
}

struct AlignedBuffer {
  // `what` names the buffer in the error when the memory is not there (a size a .pte asks for
  // may be absurd: that is an etmlir.runtime.Error, not a MemoryError from std::bad_alloc).
  explicit AlignedBuffer(size_t n, const std::string& what = "a runtime buffer") : size(n) {
    if (n > 0 && posix_memalign(&data, 64, n) != 0)
      throw RuntimeFailure(what + ": cannot allocate " + std::to_string(n) + " bytes (out of memory)");
  }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer() { std::free(data); }
  void* data = nullptr;
  size_t size;
};

nb::dlpack::dtype to_dlpack(ScalarType t) {
  using C = nb::dlpack::dtype_code;
  auto make = [](C code, int bits) {
    return nb::dlpack::dtype{static_cast<uint8_t>(code), static_cast<uint8_t>(bits), 1};
  };
  switch (t) {
    case ScalarType::UInt8: return make(C::UInt, 8);
    case ScalarType::Int8: return make(C::Int, 8);
    case ScalarType::Int16: return make(C::Int, 16);
    case ScalarType::Int32: return make(C::Int, 32);
    case ScalarType::Int64: return make(C::Int, 64);
    case ScalarType::Half: return make(C::Float, 16);
    case ScalarType::Float: return make(C::Float, 32);
    case ScalarType::Double: return make(C::Float, 64);
    case ScalarType::Bool: return make(C::Bool, 8);
    case ScalarType::BFloat16: return make(C::Bfloat, 16);
  }
  return make(C::Float, 32);
}

bool from_dlpack(nb::dlpack::dtype d, ScalarType* out) {
  for (ScalarType t : {ScalarType::UInt8, ScalarType::Int8, ScalarType::Int16, ScalarType::Int32, ScalarType::Int64,
                       ScalarType::Half, ScalarType::Float, ScalarType::Double, ScalarType::Bool,
                       ScalarType::BFloat16}) {
    nb::dlpack::dtype e = to_dlpack(t);
    if (e.code == d.code && e.bits == d.bits && d.lanes == 1) {
      *out = t;
      return true;
    }
  }
  return false;
}

using Array = nb::ndarray<nb::c_contig, nb::device::cpu>;

// A numpy array (a torch tensor for bfloat16, which numpy has no dtype for) of `dtype` and `sizes`
// that owns a copy of `nbytes` bytes at `data` (a tensor's contents, a trace's captured copy).
nb::object bytes_to_python(ScalarType dtype, const std::vector<size_t>& shape, const void* data, size_t nbytes);

nb::object tensor_to_python(const Tensor& t) {
  std::vector<size_t> shape(static_cast<size_t>(t.dim()));
  for (int32_t d = 0; d < t.dim(); ++d) shape[static_cast<size_t>(d)] = static_cast<size_t>(t.size(d));
  return bytes_to_python(t.dtype(), shape, t.data(), t.nbytes());
}

nb::object bytes_to_python(ScalarType dtype, const std::vector<size_t>& shape, const void* data, size_t nbytes) {
  bool bfloat16 = dtype == ScalarType::BFloat16;
  if (bfloat16) {
    try {
      nb::module_::import_("torch.utils.dlpack");
    } catch (const nb::python_error&) {
      throw RuntimeFailure(
          "a bfloat16 result needs torch (numpy has no bfloat16 dtype, and a uint16 array would mislabel it); "
          "install torch to receive it as a torch.bfloat16 tensor");
    }
  }
  auto* copy = new (std::nothrow) uint8_t[nbytes ? nbytes : 1];
  if (copy == nullptr)
    throw RuntimeFailure("cannot allocate " + std::to_string(nbytes) + " bytes for a copy of a " +
                         dtype_name(dtype) + " result: out of memory");
  if (nbytes) std::memcpy(copy, data, nbytes);
  nb::capsule owner(copy, [](void* p) noexcept { delete[] static_cast<uint8_t*>(p); });
  if (bfloat16) {
    nb::ndarray<nb::pytorch> array(copy, shape.size(), shape.data(), owner, nullptr, to_dlpack(dtype));
    return nb::cast(array);
  }
  nb::ndarray<nb::numpy> array(copy, shape.size(), shape.data(), owner, nullptr, to_dlpack(dtype));
  return nb::cast(array);
}

nb::object evalue_to_python(const EValue& v) {
  switch (v.tag) {
    case Tag::None: return nb::none();
    case Tag::Int: return nb::int_(v.to_int());
    case Tag::Double: return nb::float_(v.to_double());
    case Tag::Bool: return nb::bool_(v.to_bool());
    case Tag::Tensor: return tensor_to_python(v.to_tensor());
    case Tag::TensorList: {
      nb::list out;
      for (Tensor* t : v.to_tensor_list()) out.append(tensor_to_python(*t));
      return out;
    }
    default: return nb::none();
  }
}

class PyMethod;

// Owns the bytes or mapping, the loader and the verified Program.
class PyProgram {
 public:
  // allow_native_code / trusted_keys (32-byte Ed25519 public keys): the trust every method of this
  // program is loaded with (NativeCodeTrust, native_code.h).
  static std::shared_ptr<PyProgram> from_bytes(nb::bytes data, bool allow_native_code,
                                               const std::vector<nb::bytes>& trusted_keys) {
    auto p = std::shared_ptr<PyProgram>(new PyProgram());
    p->set_trust(allow_native_code, trusted_keys);
    p->buffer_ = std::make_unique<AlignedBuffer>(data.size());
    if (data.size()) std::memcpy(p->buffer_->data, data.c_str(), data.size());
    p->loader_ = std::make_unique<BufferDataLoader>(p->buffer_->data, data.size());
    p->finish_load();
    return p;
  }
  static std::shared_ptr<PyProgram> from_file(const std::string& path, bool allow_native_code,
                                              const std::vector<nb::bytes>& trusted_keys) {
    auto p = std::shared_ptr<PyProgram>(new PyProgram());
    p->set_trust(allow_native_code, trusted_keys);
    Result<MmapDataLoader> loader = MmapDataLoader::open(path.c_str());
    if (!loader.ok()) raise(loader.error());
    p->mmap_ = std::make_unique<MmapDataLoader>(static_cast<MmapDataLoader&&>(loader.get()));
    p->finish_load();
    return p;
  }

  std::vector<std::string> method_names() const {
    std::vector<std::string> names;
    for (size_t i = 0; i < program_->num_methods(); ++i) names.push_back(valid_utf8(program_->method_name(i)));
    return names;
  }

  nb::dict method_meta(const std::string& name) const {
    Result<MethodMeta> meta = program_->method_meta(name.c_str());
    if (!meta.ok()) raise(meta.error());
    nb::dict d;
    d["name"] = name;
    auto tensors = [&](bool inputs) {
      nb::list out;
      size_t n = inputs ? meta->num_inputs() : meta->num_outputs();
      for (size_t i = 0; i < n; ++i) {
        MethodMeta::TensorInfo info;
        bool ok = inputs ? meta->input_tensor(i, &info) : meta->output_tensor(i, &info);
        if (!ok) {
          out.append(nb::none());
          continue;
        }
        nb::dict t;
        nb::list sizes;
        for (int32_t k = 0; k < info.dim; ++k) sizes.append(info.sizes[k]);
        t["dtype"] = std::string(dtype_name(info.dtype));
        t["sizes"] = sizes;
        t["dynamic"] = info.dynamic;
        nb::list varies;
        for (int32_t k = 0; k < info.dim; ++k) varies.append(info.dim_varies(k));
        t["dynamic_dims"] = varies;
        t["planned"] = info.planned;
        out.append(t);
      }
      return out;
    };
    d["inputs"] = tensors(true);
    d["outputs"] = tensors(false);
    nb::list arenas;
    for (size_t i = 0; i < meta->num_arenas(); ++i)
      arenas.append(nb::make_tuple(valid_utf8(meta->arena_name(i)), meta->arena_size(i)));
    d["arenas"] = arenas;
    nb::list ops;
    char buffer[256];
    for (size_t i = 0; i < meta->num_operators(); ++i) ops.append(valid_utf8(meta->operator_name(i, buffer, 256)));
    d["operators"] = ops;
    d["num_instructions"] = meta->num_instructions();
    // The method's own tables; its delegates' state comes on top (PyMethod sizes both).
    d["method_allocator_bytes"] = meta->method_allocator_bytes();
    d["num_delegates"] = meta->num_delegates();
    return d;
  }

  Program& program() { return *program_; }
  const NativeCodeTrust* trust() const { return &trust_; }

  // The bundled test cases (bundled.h), loaded and checked on first use.
  const BundledCases& bundled() {
    if (!bundled_) {
      Result<BundledCases> cases = BundledCases::load(*program_);
      if (!cases.ok()) raise(cases.error());
      bundled_ = std::make_unique<BundledCases>(static_cast<BundledCases&&>(cases.get()));
    }
    return *bundled_;
  }

  // [{"method", "name", "atol", "rtol", "num_inputs", "num_outputs"}, ...]
  nb::list bundled_cases() {
    const BundledCases& cases = bundled();
    nb::list out;
    for (size_t c = 0; c < cases.size(); ++c) {
      nb::dict d;
      d["method"] = valid_utf8(cases.method(c));
      d["name"] = valid_utf8(cases.name(c));
      d["atol"] = cases.atol(c);
      d["rtol"] = cases.rtol(c);
      d["num_inputs"] = cases.num_inputs(c);
      d["num_outputs"] = cases.num_outputs(c);
      out.append(d);
    }
    return out;
  }
  bool allow_native_code() const { return trust_.allow_native_code; }

  // Hex SHA-256 of the program's bytes (what a trace file names it by), computed once.
  const std::string& sha256() {
    if (sha256_.empty()) {
      DataLoader* loader = mmap_ ? static_cast<DataLoader*>(mmap_.get()) : loader_.get();
      Result<FreeableBuffer> bytes = loader->load(0, loader->size());
      if (!bytes.ok()) raise(bytes.error());
      nb::gil_scoped_release release;
      sha256_ = devtools::sha256_hex(bytes->bytes(), bytes->size());
    }
    return sha256_;
  }

 private:
  PyProgram() = default;
  void set_trust(bool allow_native_code, const std::vector<nb::bytes>& trusted_keys) {
    keys_.resize(trusted_keys.size());
    for (size_t i = 0; i < trusted_keys.size(); ++i) {
      if (trusted_keys[i].size() != kEd25519PublicKeyBytes)
        throw RuntimeFailure("trusted key " + std::to_string(i) + " is " + std::to_string(trusted_keys[i].size()) +
                             " bytes; an Ed25519 public key is " + std::to_string(kEd25519PublicKeyBytes));
      std::memcpy(keys_[i].bytes, trusted_keys[i].c_str(), kEd25519PublicKeyBytes);
    }
    trust_.allow_native_code = allow_native_code;
    trust_.trusted_keys = Span<const TrustedKey>(keys_.data(), keys_.size());
  }
  void finish_load() {
    DataLoader* loader = mmap_ ? static_cast<DataLoader*>(mmap_.get()) : loader_.get();
    Result<Program> program = Program::load(loader);
    if (!program.ok()) raise(program.error());
    program_ = std::make_unique<Program>(static_cast<Program&&>(program.get()));
  }

  std::unique_ptr<AlignedBuffer> buffer_;
  std::unique_ptr<BufferDataLoader> loader_;
  std::unique_ptr<MmapDataLoader> mmap_;
  std::unique_ptr<Program> program_;
  std::unique_ptr<BundledCases> bundled_;  // after program_: destroyed before it
  std::vector<TrustedKey> keys_;
  NativeCodeTrust trust_;
  std::string sha256_;
};

// Owns every buffer a loaded method uses: method allocator, arenas, temp.
//
// One call at a time: a run sets the inputs, executes (the GIL released) and copies the outputs,
// and another thread's run in between would hand back outputs of its inputs. etmlir.runtime.Method
// serializes its calls with a lock; Busy turns a caller that bypasses it into an error.
class PyMethod {
 public:
  PyMethod(std::shared_ptr<PyProgram> program, const std::string& name, size_t temp_bytes)
      : program_(std::move(program)) {
    Result<MethodMeta> meta = program_->program().method_meta(name.c_str());
    if (!meta.ok()) raise(meta.error());
    BackendRegistry& backends = backend_registry();
    // The method's tables and what its delegates' backends keep (their state, arenas).
    Result<size_t> method_bytes = meta->method_allocator_bytes(&backends, &kernel_registry());
    if (!method_bytes.ok()) raise(method_bytes.error());
    std::string where = "method '" + name + "': ";
    method_buffer_ = std::make_unique<AlignedBuffer>(method_bytes.get(), where + "the method allocator");
    method_allocator_ = MemoryAllocator(method_buffer_->data, method_buffer_->size);
    temp_buffer_ = std::make_unique<AlignedBuffer>(temp_bytes, where + "the temp allocator (temp_bytes)");
    temp_allocator_ = MemoryAllocator(temp_buffer_->data, temp_buffer_->size);
    for (size_t i = 0; i < meta->num_arenas(); ++i) {
      arenas_.push_back(std::make_unique<AlignedBuffer>(
          static_cast<size_t>(meta->arena_size(i)),
          where + "arena " + std::to_string(i) + " ('" + valid_utf8(meta->arena_name(i)) + "')"));
      arena_spans_.emplace_back(static_cast<uint8_t*>(arenas_.back()->data), arenas_.back()->size);
    }
    memory_.method_allocator = &method_allocator_;
    memory_.planned_arenas = Span<Span<uint8_t>>(arena_spans_.data(), arena_spans_.size());
    memory_.temp_allocator = &temp_allocator_;
    Result<Method> method =
        program_->program().load_method(name.c_str(), &memory_, &kernel_registry(), &backends, program_->trust());
    if (!method.ok()) raise(method.error());
    method_ = std::make_unique<Method>(static_cast<Method&&>(method.get()));
    // Unplanned outputs get a buffer here, at their planned (upper-bound) size.
    for (size_t i = 0; i < meta->num_outputs(); ++i) {
      MethodMeta::TensorInfo info;
      if (!meta->output_tensor(i, &info) || info.planned) continue;
      size_t n = element_size(info.dtype);
      for (int32_t d = 0; d < info.dim; ++d) n *= static_cast<size_t>(info.sizes[d]);
      output_buffers_.push_back(std::make_unique<AlignedBuffer>(n, where + "output " + std::to_string(i)));
      if (Error e = method_->set_output_buffer(i, output_buffers_.back()->data, n)) raise(e);
    }
  }

  size_t num_inputs() const { return method_->num_inputs(); }

  // Runs bundled test case `c` (it must be for this method): {"passed", "error" (the execute()
  // failure's message, or None), "outputs": [{"passed", "problem", "numel", "mismatched",
  // "max_abs_error", "worst_index", "worst_actual", "worst_expected", "actual"}, ...]}.
  nb::dict verify_bundled(size_t c) {
    Busy busy(this, "verify_bundled");
    const BundledCases& cases = program_->bundled();
    if (Error e = cases.set_inputs(*method_, c)) raise(e);
    Error error;
    {
      nb::gil_scoped_release release;
      error = method_->execute();
    }
    nb::dict d;
    nb::list outputs;
    d["outputs"] = outputs;
    if (error) {
      d["passed"] = false;
      d["error"] = valid_utf8(error.message());
      return d;
    }
    d["error"] = nb::none();
    std::vector<BundledOutputCheck> checks(cases.num_outputs(c));
    Result<bool> passed = cases.check_outputs(*method_, c, Span<BundledOutputCheck>(checks.data(), checks.size()));
    if (!passed.ok()) raise(passed.error());
    d["passed"] = passed.get();
    for (size_t o = 0; o < checks.size(); ++o) {
      const BundledOutputCheck& k = checks[o];
      nb::dict out;
      out["passed"] = k.passed;
      out["problem"] = valid_utf8(k.problem);
      out["numel"] = k.numel;
      out["mismatched"] = k.mismatched;
      out["max_abs_error"] = k.max_abs_error;
      out["worst_index"] = k.worst_index;
      out["worst_actual"] = k.worst_actual;
      out["worst_expected"] = k.worst_expected;
      out["actual"] = evalue_to_python(method_->output(o));
      outputs.append(out);
    }
    return d;
  }

  void set_seed(uint64_t seed) {
    Busy busy(this, "set_seed");
    method_->set_seed(seed);
  }
  uint64_t seed() const { return method_->generator().seed(); }

  nb::list run(const std::vector<Array>& inputs) {
    Busy busy(this, "run");
    if (inputs.size() != method_->num_inputs())
      throw RuntimeFailure("method '" + std::string(method_->name()) + "' takes " +
                           std::to_string(method_->num_inputs()) + " inputs, got " + std::to_string(inputs.size()));
    set_inputs(inputs);
    last_inputs_ = inputs;
    Error error;
    {
      nb::gil_scoped_release release;
      error = method_->execute();
    }
    if (error) raise(error);
    nb::list outputs;
    for (size_t i = 0; i < method_->num_outputs(); ++i) outputs.append(evalue_to_python(method_->output(i)));
    return outputs;
  }

  // Sets every input (copying planned ones into their arena). Runs before
  // each execute: the memory plan may reuse an input's bytes once it is dead.
  void set_inputs(const std::vector<Array>& inputs) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Array& a = inputs[i];
      ScalarType dtype;
      if (!from_dlpack(a.dtype(), &dtype))
        throw RuntimeFailure("method '" + std::string(method_->name()) + "' input " + std::to_string(i) +
                             ": unsupported element type");
      int64_t sizes[kMaxDims];
      if (a.ndim() > static_cast<size_t>(kMaxDims))
        throw RuntimeFailure("input " + std::to_string(i) + " has too many dims");
      for (size_t d = 0; d < a.ndim(); ++d) sizes[d] = static_cast<int64_t>(a.shape(d));
      if (Error e = method_->set_input(i, a.data(), a.nbytes(), dtype, Span<const int64_t>(sizes, a.ndim()))) raise(e);
    }
  }

  // Runs `iterations` times on the inputs of the last run() (set again,
  // untimed, before each execute); returns ns per execute.
  std::vector<uint64_t> time_runs(size_t iterations) {
    Busy busy(this, "time_runs");
    if (last_inputs_.size() != method_->num_inputs()) throw RuntimeFailure("time_runs: call the method once first");
    std::vector<uint64_t> times;
    for (size_t i = 0; i < iterations; ++i) {
      set_inputs(last_inputs_);
      Error error;
      uint64_t elapsed = 0;
      {
        nb::gil_scoped_release release;
        uint64_t start = pal_now_ns();
        error = method_->execute();
        elapsed = pal_now_ns() - start;
      }
      if (error) raise(error);
      times.push_back(elapsed);
    }
    return times;
  }

  // Per-instruction time of one execute: [(name, ns), ...].
  nb::list profile() {
    Busy busy(this, "profile");
    if (last_inputs_.size() != method_->num_inputs()) throw RuntimeFailure("profile: call the method once first");
    set_inputs(last_inputs_);
    std::vector<uint64_t> ns(method_->num_instructions());
    method_->set_profiling(ns.data());
    Error e = method_->execute();
    method_->set_profiling(nullptr);
    if (e) raise(e);
    nb::list out;
    for (size_t i = 0; i < ns.size(); ++i) out.append(nb::make_tuple(valid_utf8(method_->instruction_name(i)), ns[i]));
    return out;
  }

  size_t temp_peak() const { return temp_allocator_.peak(); }

  // Runs `runs` times on `inputs` with an EventTracer of `max_events` events attached (0: the
  // default size, devtools::default_trace_events) and copies of the values `capture` names
  // ((instruction, value index) pairs) taken; returns what etmlir.runtime.Trace is made of:
  // {"events": bytes of packed TraceEvents, "captures": [(run, instruction, value, array)],
  // "dropped_events", "dropped_captures", "runs", "status" (the tracer's message or None),
  // "outputs" (the last run's), "max_events", "program_sha256", "backend_threads", "cpu"}.
  nb::dict trace(const std::vector<Array>& inputs, size_t runs, size_t max_events,
                 std::vector<std::pair<int64_t, int64_t>> capture) {
    Busy busy(this, "trace");
    std::string where = "method '" + std::string(method_->name()) + "': trace: ";
    if (inputs.size() != method_->num_inputs())
      throw RuntimeFailure(where + "the method takes " + std::to_string(method_->num_inputs()) + " inputs, got " +
                           std::to_string(inputs.size()));
    if (runs < 1) throw RuntimeFailure(where + "runs must be at least 1");
    Result<MethodMeta> meta = program_->program().method_meta(method_->name());
    if (!meta.ok()) raise(meta.error());
    if (max_events == 0)
      max_events = devtools::default_trace_events(runs, method_->num_instructions(), meta->num_delegates());
    if (max_events > (size_t{1} << 30))
      throw RuntimeFailure(where + "max_events " + std::to_string(max_events) + " is over 2**30 (40 bytes each)");
    std::vector<TraceEvent> events(max_events);

    // Captures: checked against the program (an instruction and a tensor value of this method), sorted
    // by instruction as the tracer wants, their buffers sized for every run (planned upper bounds).
    const schema::Program* fb = schema::GetProgram(program_->program().flatbuffer());
    const schema::Method* m = nullptr;
    for (flatbuffers::uoffset_t i = 0; fb->methods() && i < fb->methods()->size(); ++i) {
      if (fb->methods()->Get(i)->name()->str() == method_->name()) m = fb->methods()->Get(i);
    }
    std::sort(capture.begin(), capture.end());
    capture.erase(std::unique(capture.begin(), capture.end()), capture.end());
    std::vector<CaptureRequest> requests;
    size_t bytes_per_run = 0;
    size_t num_values = m && m->values() ? m->values()->size() : 0;
    for (const auto& [instruction, value] : capture) {
      if (instruction < 0 || static_cast<size_t>(instruction) >= method_->num_instructions())
        throw RuntimeFailure(where + "capture names instruction " + std::to_string(instruction) + "; the method has " +
                             std::to_string(method_->num_instructions()));
      const schema::Tensor* t = value >= 0 && static_cast<size_t>(value) < num_values
                                    ? m->values()->Get(static_cast<flatbuffers::uoffset_t>(value))->value_as_Tensor()
                                    : nullptr;
      if (t == nullptr)
        throw RuntimeFailure(where + "capture names value " + std::to_string(value) + ", which is not a tensor value " +
                             "of the method (it has " + std::to_string(num_values) + " values)");
      size_t nbytes = element_size(static_cast<ScalarType>(t->dtype()));
      for (flatbuffers::uoffset_t d = 0; t->sizes() && d < t->sizes()->size(); ++d)
        nbytes *= static_cast<size_t>(std::max<int64_t>(t->sizes()->Get(d), 0));
      bytes_per_run += (std::max<size_t>(nbytes, static_cast<size_t>(t->nbytes())) + 15) & ~size_t{15};
      requests.push_back(CaptureRequest{static_cast<uint32_t>(instruction), static_cast<int32_t>(value)});
    }
    std::vector<TraceCapture> records(requests.size() * runs);
    auto capture_bytes = std::make_unique<AlignedBuffer>(bytes_per_run * runs, where + "the capture buffer");
    EventTracer tracer(Span<TraceEvent>(events.data(), events.size()));
    tracer.set_capture(Span<const CaptureRequest>(requests.data(), requests.size()),
                       Span<TraceCapture>(records.data(), records.size()),
                       Span<uint8_t>(static_cast<uint8_t*>(capture_bytes->data), capture_bytes->size));
    if (Error e = method_->set_event_tracer(&tracer)) raise(e);
    Error error;
    for (size_t run = 0; run < runs && !error; ++run) {
      try {
        set_inputs(inputs);
      } catch (...) {
        (void)method_->set_event_tracer(nullptr);
        throw;
      }
      nb::gil_scoped_release release;
      error = method_->execute();
    }
    (void)method_->set_event_tracer(nullptr);
    last_inputs_ = inputs;
    if (error) raise(error);

    nb::dict out;
    Span<const TraceEvent> recorded = tracer.events();
    static_assert(sizeof(TraceEvent) == 40, "etmlir/runtime/trace.py reads TraceEvents as 40-byte records");
    out["events"] = nb::bytes(reinterpret_cast<const char*>(recorded.data()), recorded.size() * sizeof(TraceEvent));
    nb::list captures;
    for (const TraceCapture& c : tracer.captures()) {
      std::vector<size_t> shape(c.sizes, c.sizes + c.rank);
      captures.append(nb::make_tuple(c.run, c.instruction, c.value,
                                     bytes_to_python(static_cast<ScalarType>(c.scalar_type), shape,
                                                     tracer.capture_bytes() + c.offset, c.nbytes)));
    }
    out["captures"] = captures;
    out["dropped_events"] = tracer.dropped_events();
    out["dropped_captures"] = tracer.dropped_captures();
    out["runs"] = tracer.run();
    Error status = tracer.status();
    out["status"] = status ? nb::object(nb::str(valid_utf8(status.message()).c_str())) : nb::none();
    nb::list outputs;
    for (size_t i = 0; i < method_->num_outputs(); ++i) outputs.append(evalue_to_python(method_->output(i)));
    out["outputs"] = outputs;
    out["max_events"] = max_events;
    out["program_sha256"] = program_->sha256();
    out["backend_threads"] = backend_threads_;
    out["cpu"] = devtools::host_cpu_description();
    return out;
  }

  // Program state: names, a copy of one state tensor's current value, and refilling all of it.
  std::vector<std::string> state_names() const {
    std::vector<std::string> names;
    for (size_t i = 0; i < method_->num_state(); ++i) names.push_back(valid_utf8(method_->state_name(i)));
    return names;
  }
  nb::object state(const std::string& name) const {
    const Tensor* t = method_->state(name.c_str());
    if (t == nullptr) {
      std::string known;
      for (const std::string& n : state_names()) known += (known.empty() ? "" : ", ") + n;
      throw RuntimeFailure("method '" + std::string(method_->name()) + "' has no state '" + name + "' (its state: " +
                           (known.empty() ? "none" : known) + ")");
    }
    return tensor_to_python(*t);
  }
  void reset_state() {
    Busy busy(this, "reset_state");
    if (Error e = method_->reset_state()) raise(e);
  }

 private:
  std::shared_ptr<PyProgram> program_;
  std::unique_ptr<AlignedBuffer> method_buffer_;
  std::unique_ptr<AlignedBuffer> temp_buffer_;
  std::vector<std::unique_ptr<AlignedBuffer>> arenas_;
  std::vector<std::unique_ptr<AlignedBuffer>> output_buffers_;
  std::vector<Span<uint8_t>> arena_spans_;
  MemoryAllocator method_allocator_;
  MemoryAllocator temp_allocator_;
  MemoryManager memory_;
  std::unique_ptr<Method> method_;
  std::vector<Array> last_inputs_;  // keeps the arrays alive for time_runs/profile
  std::atomic<bool> busy_{false};
  int backend_threads_ = g_backend_threads;  // what its delegates were loaded with

  struct Busy {
    Busy(PyMethod* m, const char* call) : method(m) {
      bool expected = false;
      if (!method->busy_.compare_exchange_strong(expected, true))
        throw RuntimeFailure("method '" + std::string(method->method_->name()) + "': " + call +
                             "() while another call of this method runs on another thread: call it through "
                             "etmlir.runtime.Method (which serializes calls), or load one method per thread");
    }
    ~Busy() { method->busy_.store(false); }
    Busy(const Busy&) = delete;
    Busy& operator=(const Busy&) = delete;
    PyMethod* method;
  };
};

// ---- run_kernel: one kernel call on Python values (for kernel tests) ----------

struct KernelArgs {
  std::vector<std::unique_ptr<AlignedBuffer>> buffers;
  std::vector<std::unique_ptr<int64_t[]>> int_arrays;
  std::vector<std::unique_ptr<Tensor>> tensors;
  std::vector<std::unique_ptr<EValue>> values;
  std::vector<std::unique_ptr<EValue*[]>> boxes;
  std::vector<std::unique_ptr<Tensor*[]>> lists;
  std::vector<std::unique_ptr<double[]>> doubles;
  std::vector<std::unique_ptr<uint8_t[]>> bools;
  std::vector<std::string> strings;
  std::vector<Tensor*> outs;

  Tensor* make_tensor(const Array& a, bool dynamic, bool copy) {
    ScalarType dtype;
    if (!from_dlpack(a.dtype(), &dtype)) throw RuntimeFailure("run_kernel: unsupported element type");
    size_t dim = a.ndim();
    auto sizes = std::make_unique<int64_t[]>(dim + 1);
    auto strides = std::make_unique<int64_t[]>(dim + 1);
    auto bounds = std::make_unique<int64_t[]>(dim + 1);
    auto order = std::make_unique<uint8_t[]>(dim + 1);
    for (size_t d = 0; d < dim; ++d) {
      sizes[d] = bounds[d] = static_cast<int64_t>(a.shape(d));
      order[d] = static_cast<uint8_t>(d);
    }
    buffers.push_back(std::make_unique<AlignedBuffer>(a.nbytes()));
    if (copy && a.nbytes()) std::memcpy(buffers.back()->data, a.data(), a.nbytes());
    tensors.push_back(std::make_unique<Tensor>(dtype, static_cast<int32_t>(dim), sizes.get(), strides.get(),
                                               order.get(), dynamic ? bounds.get() : nullptr, buffers.back()->data,
                                               a.nbytes()));
    int_arrays.push_back(std::move(sizes));
    int_arrays.push_back(std::move(strides));
    int_arrays.push_back(std::move(bounds));
    bools.push_back(std::move(order));
    return tensors.back().get();
  }

  EValue* value() {
    values.push_back(std::make_unique<EValue>());
    return values.back().get();
  }

  EValue* convert(const nb::tuple& arg) {
    std::string kind = nb::cast<std::string>(arg[0]);
    EValue* v = value();
    if (kind == "none") {
      v->tag = Tag::None;
    } else if (kind == "int") {
      v->tag = Tag::Int;
      v->payload.as_int = nb::cast<int64_t>(arg[1]);
    } else if (kind == "double") {
      v->tag = Tag::Double;
      v->payload.as_double = nb::cast<double>(arg[1]);
    } else if (kind == "bool") {
      v->tag = Tag::Bool;
      v->payload.as_bool = nb::cast<bool>(arg[1]);
    } else if (kind == "str") {
      strings.push_back(nb::cast<std::string>(arg[1]));
      v->tag = Tag::String;
      v->payload.as_string.data = strings.back().data();
      v->payload.as_string.size = strings.back().size();
    } else if (kind == "tensor" || kind == "out") {
      bool out = kind == "out";
      v->tag = Tag::Tensor;
      v->payload.as_tensor = make_tensor(nb::cast<Array>(arg[1]), out && nb::cast<bool>(arg[2]), !out);
      if (out) outs.push_back(v->payload.as_tensor);
    } else if (kind == "int_list") {
      auto items = nb::cast<std::vector<int64_t>>(arg[1]);
      auto box = std::make_unique<EValue*[]>(items.size() + 1);
      for (size_t i = 0; i < items.size(); ++i) {
        EValue* item = value();
        item->tag = Tag::Int;
        item->payload.as_int = items[i];
        box[i] = item;
      }
      int_arrays.push_back(std::make_unique<int64_t[]>(items.size() + 1));
      v->tag = Tag::IntList;
      v->payload.as_int_list.items = box.get();
      v->payload.as_int_list.scratch = int_arrays.back().get();
      v->payload.as_int_list.size = items.size();
      boxes.push_back(std::move(box));
    } else if (kind == "double_list") {
      auto items = nb::cast<std::vector<double>>(arg[1]);
      doubles.push_back(std::make_unique<double[]>(items.size() + 1));
      std::copy(items.begin(), items.end(), doubles.back().get());
      v->tag = Tag::DoubleList;
      v->payload.as_double_list.items = doubles.back().get();
      v->payload.as_double_list.size = items.size();
    } else if (kind == "bool_list") {
      auto items = nb::cast<std::vector<bool>>(arg[1]);
      bools.push_back(std::make_unique<uint8_t[]>(items.size() + 1));
      for (size_t i = 0; i < items.size(); ++i) bools.back()[i] = items[i];
      v->tag = Tag::BoolList;
      v->payload.as_bool_list.items = bools.back().get();
      v->payload.as_bool_list.size = items.size();
    } else if (kind == "tensor_list" || kind == "out_list" || kind == "optional_tensor_list") {
      nb::list items = nb::cast<nb::list>(arg[1]);
      auto list = std::make_unique<Tensor*[]>(items.size() + 1);
      for (size_t i = 0; i < items.size(); ++i) {
        nb::handle item = items[i];
        if (kind == "out_list") {
          nb::tuple spec = nb::cast<nb::tuple>(item);
          list[i] = make_tensor(nb::cast<Array>(spec[0]), nb::cast<bool>(spec[1]), false);
          outs.push_back(list[i]);
        } else if (item.is_none()) {
          list[i] = nullptr;
        } else {
          list[i] = make_tensor(nb::cast<Array>(item), false, true);
        }
      }
      v->tag = kind == "optional_tensor_list" ? Tag::OptionalTensorList : Tag::TensorList;
      v->payload.as_tensor_list.items = list.get();
      v->payload.as_tensor_list.size = items.size();
      lists.push_back(std::move(list));
    } else {
      throw RuntimeFailure("run_kernel: unknown argument kind '" + kind + "'");
    }
    return v;
  }
};

// Runs one kernel. With `seed`, its KernelContext has a generator seeded
// with it (random kernels); without, none (random kernels then fail).
nb::list run_kernel(const std::string& name, const std::vector<nb::tuple>& args, size_t temp_bytes,
                    std::optional<uint64_t> seed) {
  const KernelEntry* entry = kernel_registry().find(name.c_str());
  if (entry == nullptr) throw RuntimeFailure("no kernel registered for " + name);
  KernelArgs holder;
  std::vector<EValue*> values;
  for (const nb::tuple& arg : args) values.push_back(holder.convert(arg));
  size_t expected = 0;
  for (const char* c = entry->signature; *c; ++c) expected += *c != '|';
  if (values.size() != expected)
    throw RuntimeFailure(name + " takes " + std::to_string(expected) + " arguments (signature \"" + entry->signature +
                         "\"), got " + std::to_string(values.size()));
  size_t k = 0;
  for (const char* c = entry->signature; *c; ++c) {
    if (*c == '|') continue;
    if (!matches_signature(*c, *values[k]))
      throw RuntimeFailure(name + ": argument " + std::to_string(k) + " is a " + tag_name(values[k]->tag) +
                           "; the kernel expects " + signature_kind_name(*c));
    ++k;
  }
  AlignedBuffer temp(temp_bytes);
  MemoryAllocator temp_allocator(temp.data, temp.size);
  Generator generator(seed.value_or(Generator::kDefaultSeed));
  KernelContext context(entry->name, &temp_allocator, seed ? &generator : nullptr);
  Error error = entry->fn(context, values.data());
  if (error) raise(error);
  nb::list outs;
  for (Tensor* t : holder.outs) outs.append(tensor_to_python(*t));
  // Int results of prim kernels (written into an Int argument) come back too.
  nb::list ints;
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i]->tag == Tag::Int) ints.append(values[i]->to_int());
  }
  // And every scalar argument after the signature's '|' (the slots prim kernels write).
  nb::list scalars;
  const char* bar = std::strchr(entry->signature, '|');
  size_t first_output = bar ? static_cast<size_t>(bar - entry->signature) : values.size();
  for (size_t i = first_output; i < values.size(); ++i) {
    if (values[i]->is_scalar()) scalars.append(evalue_to_python(*values[i]));
  }
  nb::list result;
  result.append(outs);
  result.append(ints);
  result.append(scalars);
  return result;
}

// ---- Trace files: etmlir.runtime.Trace.save through the one C++ writer (runtime/devtools) ----------

// One method of a trace as Python hands it over: (name, runs, events as packed 40-byte TraceEvents,
// [(run, instruction, value, scalar_type, sizes, data bytes)], dropped_events, dropped_captures).
using PyMethodTrace = std::tuple<std::string, uint32_t, nb::bytes, std::vector<nb::tuple>, uint64_t, uint64_t>;

void write_trace(const std::string& path, const std::string& program_sha256, const std::string& program_path,
                 const std::string& writer, uint32_t backend_threads, const std::string& cpu,
                 const std::vector<PyMethodTrace>& methods) {
  // Copies first (the writer takes views), then the file.
  std::vector<std::vector<TraceEvent>> events(methods.size());
  std::vector<std::vector<TraceCapture>> captures(methods.size());
  std::vector<std::vector<uint8_t>> bytes(methods.size());
  std::vector<devtools::MethodTraceData> data(methods.size());
  for (size_t i = 0; i < methods.size(); ++i) {
    const auto& [name, runs, packed, method_captures, dropped_events, dropped_captures] = methods[i];
    if (packed.size() % sizeof(TraceEvent) != 0)
      throw RuntimeFailure("write_trace: method '" + name + "': " + std::to_string(packed.size()) +
                           " bytes of events is not a whole number of 40-byte events");
    events[i].resize(packed.size() / sizeof(TraceEvent));
    if (packed.size()) std::memcpy(events[i].data(), packed.c_str(), packed.size());
    for (const nb::tuple& c : method_captures) {
      TraceCapture record;
      record.run = nb::cast<uint32_t>(c[0]);
      record.instruction = nb::cast<uint32_t>(c[1]);
      record.value = nb::cast<int32_t>(c[2]);
      record.scalar_type = nb::cast<int8_t>(c[3]);
      auto sizes = nb::cast<std::vector<int64_t>>(c[4]);
      if (sizes.size() > TraceCapture::kMaxRank)
        throw RuntimeFailure("write_trace: method '" + name + "': a capture of rank " + std::to_string(sizes.size()) +
                             " (at most " + std::to_string(TraceCapture::kMaxRank) + ")");
      record.rank = static_cast<uint8_t>(sizes.size());
      std::copy(sizes.begin(), sizes.end(), record.sizes);
      nb::bytes payload = nb::cast<nb::bytes>(c[5]);
      record.offset = bytes[i].size();
      record.nbytes = payload.size();
      bytes[i].insert(bytes[i].end(), payload.c_str(), payload.c_str() + payload.size());
      captures[i].push_back(record);
    }
    data[i].method = name;
    data[i].runs = runs;
    data[i].events = Span<const TraceEvent>(events[i].data(), events[i].size());
    data[i].captures = Span<const TraceCapture>(captures[i].data(), captures[i].size());
    data[i].capture_bytes = bytes[i].data();
    data[i].dropped_events = dropped_events;
    data[i].dropped_captures = dropped_captures;
  }
  devtools::TraceFileInfo info;
  info.program_sha256 = program_sha256;
  info.program_path = program_path;
  info.writer = writer;
  info.backend_threads = backend_threads;
  info.cpu = cpu;
  Error error;
  {
    nb::gil_scoped_release release;
    error = devtools::write_trace_file(path.c_str(), info, data);
  }
  if (error) raise(error);
}

}  // namespace

NB_MODULE(_runtime, m) {
  m.doc() = "etmlir C++ runtime bindings (use etmlir.runtime instead)";
  nb::exception<RuntimeFailure>(m, "Error", PyExc_RuntimeError);

  nb::class_<PyProgram>(m, "Program")
      .def_static("from_bytes", &PyProgram::from_bytes, nb::arg("data"), nb::arg("allow_native_code") = false,
                  nb::arg("trusted_keys") = std::vector<nb::bytes>())
      .def_static("from_file", &PyProgram::from_file, nb::arg("path"), nb::arg("allow_native_code") = false,
                  nb::arg("trusted_keys") = std::vector<nb::bytes>())
      .def("allow_native_code", &PyProgram::allow_native_code)
      .def("method_names", &PyProgram::method_names)
      .def("bundled_cases", &PyProgram::bundled_cases)
      .def("method_meta", &PyProgram::method_meta);

  nb::class_<PyMethod>(m, "Method")
      .def(nb::init<std::shared_ptr<PyProgram>, const std::string&, size_t>())
      .def("num_inputs", &PyMethod::num_inputs)
      .def("set_seed", &PyMethod::set_seed, nb::arg("seed"))
      .def("seed", &PyMethod::seed)
      .def("run", &PyMethod::run)
      .def("verify_bundled", &PyMethod::verify_bundled, nb::arg("case_index"))
      .def("time_runs", &PyMethod::time_runs)
      .def("profile", &PyMethod::profile)
      .def("temp_peak", &PyMethod::temp_peak)
      .def("state_names", &PyMethod::state_names)
      .def("state", &PyMethod::state, nb::arg("name"))
      .def("reset_state", &PyMethod::reset_state)
      .def("trace", &PyMethod::trace, nb::arg("inputs"), nb::arg("runs"), nb::arg("max_events"), nb::arg("capture"));

  // Backends: generic over every compiled-in backend (set_cpu_threads / cpu_threads are
  // the historical names of the thread setting; the "cpu" backend is what reads it).
  m.def("set_backend_threads", [](int n) { set_backend_threads(n, "set_backend_threads"); }, nb::arg("n"));
  m.def("backend_threads", [] { return g_backend_threads; });
  m.def("set_cpu_threads", [](int n) { set_backend_threads(n, "set_cpu_threads"); }, nb::arg("n"));
  m.def("cpu_threads", [] { return g_backend_threads; });
  m.def("compiled_backends", [] {
    std::vector<std::string> ids;
    for (size_t i = 0; i < num_compiled_backends(); ++i) ids.emplace_back(compiled_backend_id(i));
    return ids;
  });
  m.def(
      "backend_counter",
      [](const std::string& backend, const std::string& name) {
        const Backend* b = backend_registry().find(backend.c_str());
        if (b == nullptr) throw RuntimeFailure("backend_counter: no backend '" + backend + "' in this runtime");
        return b->counter(name.c_str());
      },
      nb::arg("backend"), nb::arg("name"));
  m.def(
      "backend_status",
      [](const std::string& backend) {
        const Backend* b = backend_registry().find(backend.c_str());
        if (b == nullptr) throw RuntimeFailure("backend_status: no backend '" + backend + "' in this runtime");
        bool available = b->is_available();
        const char* reason = available ? nullptr : b->unavailable_reason();
        const char* device = available ? b->device() : nullptr;
        return std::make_tuple(available, std::string(reason ? reason : ""), std::string(device ? device : ""));
      },
      nb::arg("backend"));
  m.def("max_backend_threads", [] { return kMaxBackendThreads; });
  // Trust in native code (native_code.h): keys, fingerprints, payload signatures (libsodium).
  m.def("signatures_supported", [] { return native_code_signatures_supported(); });
  m.def("parse_trusted_key", [](nb::bytes text) {
    TrustedKey key;
    if (Error e = parse_trusted_key(text.c_str(), text.size(), &key)) raise(e);
    return nb::bytes(reinterpret_cast<const char*>(key.bytes), sizeof(key.bytes));
  }, nb::arg("text"));
  auto exact = [](const nb::bytes& b, size_t n, const char* what) {
    if (b.size() != n)
      throw RuntimeFailure(std::string(what) + " is " + std::to_string(b.size()) + " bytes, not " + std::to_string(n));
    return reinterpret_cast<const uint8_t*>(b.c_str());
  };
  m.def("key_fingerprint", [exact](nb::bytes key) {
    char buffer[32];
    return std::string(key_fingerprint(exact(key, kEd25519PublicKeyBytes, "an Ed25519 public key"), buffer,
                                       sizeof(buffer)));
  }, nb::arg("public_key"));
  m.def("ed25519_public_key", [exact](nb::bytes seed) {
    uint8_t key[kEd25519PublicKeyBytes];
    if (Error e = ed25519_public_key(exact(seed, kEd25519SeedBytes, "an Ed25519 secret key (seed)"), key)) raise(e);
    return nb::bytes(reinterpret_cast<const char*>(key), sizeof(key));
  }, nb::arg("seed"));
  m.def("sign_payload", [exact](nb::bytes seed, nb::bytes payload) {
    uint8_t signature[kEd25519SignatureBytes];
    Span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(payload.c_str()), payload.size());
    if (Error e = sign_payload(exact(seed, kEd25519SeedBytes, "an Ed25519 secret key (seed)"), bytes, signature))
      raise(e);
    return nb::bytes(reinterpret_cast<const char*>(signature), sizeof(signature));
  }, nb::arg("seed"), nb::arg("payload"));
  m.def("verify_payload_signature", [exact](nb::bytes key, nb::bytes signature, nb::bytes payload) {
    Span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(payload.c_str()), payload.size());
    return verify_payload_signature(exact(key, kEd25519PublicKeyBytes, "an Ed25519 public key"),
                                    exact(signature, kEd25519SignatureBytes, "an Ed25519 signature"), bytes);
  }, nb::arg("public_key"), nb::arg("signature"), nb::arg("payload"));
  m.def("run_kernel", &run_kernel, nb::arg("name"), nb::arg("args"), nb::arg("temp_bytes") = size_t{64} << 20,
        nb::arg("seed") = nb::none());
  m.def("default_seed", [] { return Generator::kDefaultSeed; });
  m.def("write_trace", &write_trace, nb::arg("path"), nb::arg("program_sha256"), nb::arg("program_path"),
        nb::arg("writer"), nb::arg("backend_threads"), nb::arg("cpu"), nb::arg("methods"));
  m.def("default_trace_events", &devtools::default_trace_events, nb::arg("runs"), nb::arg("instructions"),
        nb::arg("delegates"));
  m.def("verify_trace", [](nb::bytes data) {
    if (Error e = devtools::verify_trace(reinterpret_cast<const uint8_t*>(data.c_str()), data.size())) raise(e);
  }, nb::arg("data"));
  m.def("sha256_hex", [](nb::bytes data) {
    return devtools::sha256_hex(reinterpret_cast<const uint8_t*>(data.c_str()), data.size());
  }, nb::arg("data"));
  // Philox-4x32-10 of one counter and key (for the generator's known-answer test).
  m.def("philox4x32_10", [](const std::vector<uint32_t>& ctr, const std::vector<uint32_t>& key) {
    if (ctr.size() != 4 || key.size() != 2) throw RuntimeFailure("philox4x32_10 takes 4 counter and 2 key words");
    std::vector<uint32_t> out(4);
    Generator::philox4x32_10(ctr.data(), key.data(), out.data());
    return out;
  });
  m.def("registered_kernels", [] {
    std::vector<std::string> names;
    for (size_t i = 0; i < kernel_registry().size(); ++i) names.emplace_back(kernel_registry().entry(i).name);
    return names;
  });
  // The runtime manifest of this process's registries (tools/runtime_manifest.h), as JSON text.
  m.def("runtime_manifest_json", [] {
    return tools::runtime_manifest_json(kernel_registry(), backend_registry(), "etmlir._runtime", kSelectiveBuild);
  });
  m.def("kernel_signature", [](const std::string& name) {
    const KernelEntry* e = kernel_registry().find(name.c_str());
    if (!e) throw RuntimeFailure("no kernel registered for " + name);
    return std::string(e->signature);
  });
}
