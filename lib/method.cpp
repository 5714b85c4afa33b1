// Method loading (value table, kernels, delegates) and execution.
#include "etmlir/runtime/method.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>

#include "etmlir/runtime/platform.h"
#include "etmlir/runtime/program.h"
#include "pte_format.h"

// ETMLIR_EVENT_TRACER=0 (CMake -DETMLIR_EVENT_TRACER=OFF) compiles the tracer's checks out of
// Method::execute; set_event_tracer then refuses a tracer.
#ifndef ETMLIR_EVENT_TRACER
#define ETMLIR_EVENT_TRACER 1
#endif

namespace etmlir {
namespace detail {

enum class StepKind : uint8_t { Kernel, Delegate, JumpFalse, Move, Free };

struct Step {
  StepKind kind;
  uint32_t debug_handle;
  KernelFn fn;
  const char* name;  // kernel name, or the delegate's backend id
  EValue** args;
  uint32_t num_args;
  uint32_t delegate;
  int32_t a;  // JumpFalse: cond; Move: from; Free: value
  int32_t b;  // Move: to
  uint32_t target;
};

struct LoadedDelegate {
  Backend* backend = nullptr;
  DelegateHandle handle = nullptr;
  bool initialized = false;
  FreeableBuffer payload;
};

}  // namespace detail

namespace {

using detail::LoadedDelegate;
using detail::Step;
using detail::StepKind;
using ull = unsigned long long;

template <typename V>
size_t count(const V* vector) {
  return vector ? vector->size() : 0;
}

// Every allocation rounds up to 16 bytes and may lose up to 15 to alignment.
constexpr size_t padded(size_t bytes) { return ((bytes + 15) & ~size_t{15}) + 16; }

// Method allocator bytes for one method; mirrors Program::load_method below.
size_t method_bytes(const schema::Method& m) {
  size_t total = padded(sizeof(Generator)) + padded(count(m.values()) * sizeof(EValue));
  for (size_t i = 0; i < count(m.values()); ++i) {
    const schema::EValue* ev = m.values()->Get(static_cast<flatbuffers::uoffset_t>(i));
    switch (ev->value_type()) {
      case schema::Value::Tensor: {
        size_t dim = count(ev->value_as_Tensor()->sizes());
        total += padded(sizeof(Tensor)) + 3 * padded(dim * sizeof(int64_t)) + padded(dim);
        break;
      }
      case schema::Value::IntList: {
        size_t k = count(ev->value_as_IntList()->items());
        total += padded(k * sizeof(EValue*)) + padded(k * sizeof(int64_t));
        break;
      }
      case schema::Value::DoubleList: total += padded(count(ev->value_as_DoubleList()->items()) * sizeof(double)); break;
      case schema::Value::TensorList: total += padded(count(ev->value_as_TensorList()->items()) * sizeof(Tensor*)); break;
      case schema::Value::OptionalTensorList:
        total += padded(count(ev->value_as_OptionalTensorList()->items()) * sizeof(Tensor*));
        break;
      default: break;
    }
  }
  total += padded(count(m.operators()) * sizeof(const KernelEntry*)) + padded(count(m.operators()) * sizeof(char*));
  for (size_t i = 0; i < count(m.operators()); ++i) {
    const schema::Operator* op = m.operators()->Get(static_cast<flatbuffers::uoffset_t>(i));
    total += padded(op->name()->size() + (op->overload() ? op->overload()->size() : 0) + 2);
  }
  total += padded(count(m.instructions()) * sizeof(Step));
  for (size_t i = 0; i < count(m.instructions()); ++i) {
    const schema::Instruction* ins = m.instructions()->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (const schema::KernelCall* k = ins->kind_as_KernelCall()) total += padded(count(k->args()) * sizeof(EValue*));
    if (const schema::DelegateCall* d = ins->kind_as_DelegateCall()) total += padded(count(d->args()) * sizeof(EValue*));
  }
  total += padded(count(m.delegates()) * sizeof(LoadedDelegate));
  for (size_t i = 0; i < count(m.delegates()); ++i) {
    total += padded(count(m.delegates()->Get(static_cast<flatbuffers::uoffset_t>(i))->compile_specs()) *
                    sizeof(CompileSpec));
  }
  return total;
}

// The truth of a JumpFalse condition: a Bool, or a bool tensor holding one element (the loader
// checked the kind and dtype; torch.cond's predicate and a while_loop's condition are 0-d).
Error read_condition(const EValue& value, bool* out) {
  if (value.is_bool()) {
    *out = value.to_bool();
    return Error::ok();
  }
  const Tensor& t = value.to_tensor();
  if (t.numel() != 1)
    return Error::make(ErrorCode::InvalidArgument, "the condition of a branch or loop has %lld elements; it must "
                       "have exactly one", static_cast<long long>(t.numel()));
  *out = *static_cast<const uint8_t*>(t.data()) != 0;
  return Error::ok();
}

// Move: `to` takes `from`'s value. A tensor's sizes and bytes are copied into `to`'s own memory,
// so a slot (a branch's result, a loop-carried value) never aliases the tensor it was given and
// the memory plan holds; anything else is assigned.
Error move_value(const EValue& from, EValue& to) {
  if (!from.is_tensor()) {
    to = from;
    return Error::ok();
  }
  const Tensor& source = from.to_tensor();
  Tensor& target = to.to_tensor();
  if (&source == &target) return Error::ok();
  ET_CHECK_OK(target.resize(source.sizes(), source.dim(), "move target"));
  if (source.nbytes() > 0) std::memmove(target.mutable_data(), source.data(), source.nbytes());
  return Error::ok();
}

Error out_of_method_memory(const char* method, const char* what) {
  return Error::make(ErrorCode::OutOfMemory,
                     "method '%s': the method allocator ran out of memory for %s (size it with "
                     "MethodMeta::method_allocator_bytes())",
                     method, what);
}

// True if dim d of a tensor with this schema may vary at run time.
bool dim_varies(const Tensor& t, const schema::Tensor* fb, int32_t d) {
  if (!t.is_dynamic()) return false;
  if (fb == nullptr || fb->dynamic_dims() == nullptr) return true;
  return fb->dynamic_dims()->Get(static_cast<flatbuffers::uoffset_t>(d)) != 0;
}

// "int64[1, <=256]": what an input accepts ("<=" on the dims that may vary).
const char* describe_expected(const Tensor& t, const schema::Tensor* fb, char* buffer, size_t size) {
  bool varies[kMaxDims];
  for (int32_t d = 0; d < t.dim(); ++d) varies[d] = dim_varies(t, fb, d);
  return format_shape(t.dtype(), t.upper_bounds(), static_cast<size_t>(t.dim()), varies, buffer, size);
}

const char* describe_given(ScalarType dtype, Span<const int64_t> sizes, char* buffer, size_t size) {
  return format_shape(dtype, sizes.data(), sizes.size(), nullptr, buffer, size);
}

// The backend delegate `i` of `method_name` names: registered and available, or the error load_method reports.
Result<Backend*> delegate_backend(const BackendRegistry* backends, const char* method_name, size_t i, const char* id) {
  Backend* backend = backends ? backends->find(id) : nullptr;
  if (backend == nullptr)
    return Error::make(ErrorCode::NotFound, "method '%s' delegate %zu needs backend '%s', which is not registered",
                       method_name, i, id);
  if (!backend->is_available()) {
    const char* why = backend->unavailable_reason();
    return Error::make(ErrorCode::NotSupported, "method '%s' delegate %zu: backend '%s' is not available here%s%s",
                       method_name, i, id, why ? ": " : "", why ? why : "");
  }
  return backend;
}

// The delegate's compile specs into `out` (room for all of them); views into the program's bytes.
void read_compile_specs(const schema::Delegate& d, CompileSpec* out) {
  for (size_t k = 0; k < count(d.compile_specs()); ++k) {
    const schema::CompileSpec* s = d.compile_specs()->Get(static_cast<flatbuffers::uoffset_t>(k));
    out[k] = CompileSpec{s->key()->c_str(), s->value() ? s->value()->data() : nullptr, count(s->value())};
  }
}

// Holds a Method's busy flag for one call (method.h, "Threads"): the first call takes it with a
// compare-exchange; a call that overlaps it (another thread, or a kernel re-entering its own
// method) does not get it and is refused with refusal(). Lock-free and allocation-free, so
// execute() keeps its no-heap promise.
class CallGuard {
 public:
  CallGuard(std::atomic<const char*>& busy, const char* call) : busy_(busy), call_(call) {
    held_ = busy.compare_exchange_strong(running_, call, std::memory_order_acquire, std::memory_order_relaxed);
  }
  CallGuard(const CallGuard&) = delete;
  CallGuard& operator=(const CallGuard&) = delete;
  ~CallGuard() {
    if (held_) busy_.store(nullptr, std::memory_order_release);
  }
  bool held() const { return held_; }
  Error refusal(const char* method) const {
    return Error::make(ErrorCode::InvalidArgument,
                       "method '%s' is already in %s() on another thread (or re-entered): %s() refused; a Method "
                       "runs one call at a time (load the method once per thread to run in parallel)",
                       method, running_ ? running_ : "a call", call_);
  }

 private:
  std::atomic<const char*>& busy_;
  const char* call_;
  const char* running_ = nullptr;  // who held the flag when this call was refused
  bool held_ = false;
};

}  // namespace

size_t MethodMeta::method_allocator_bytes() const {
  return method_bytes(*static_cast<const schema::Method*>(method_));
}

size_t MethodMeta::num_delegates() const { return count(static_cast<const schema::Method*>(method_)->delegates()); }

Result<size_t> MethodMeta::method_allocator_bytes(const BackendRegistry* backends, const KernelRegistry* kernels) const {
  // Compile specs are passed as load_method passes them, from a stack array here (no allocator yet).
  constexpr size_t kMaxSpecs = 64;
  const schema::Method& m = *static_cast<const schema::Method*>(method_);
  const char* method_name = m.name()->c_str();
  size_t total = method_bytes(m);
  for (size_t i = 0; i < count(m.delegates()); ++i) {
    const schema::Delegate* d = m.delegates()->Get(static_cast<flatbuffers::uoffset_t>(i));
    const char* id = d->backend()->c_str();
    Result<Backend*> found = delegate_backend(backends, method_name, i, id);
    if (!found.ok()) return found.error();
    Backend* backend = found.get();
    size_t num_specs = count(d->compile_specs());
    if (num_specs > kMaxSpecs)
      return Error::make(ErrorCode::NotSupported,
                         "method '%s' delegate %zu has %zu compile specs; method_allocator_bytes reads at most %zu",
                         method_name, i, num_specs, kMaxSpecs);
    CompileSpec specs[kMaxSpecs];
    read_compile_specs(*d, specs);
    Result<FreeableBuffer> payload =
        program_->load_segment(d->payload()->segment(), d->payload()->offset(), d->payload()->size());
    if (!payload.ok()) return payload.error();
    BackendInitContext context{nullptr, method_name, static_cast<uint32_t>(i), kernels, backends};
    Result<size_t> bytes = backend->method_allocator_bytes(
        context, Span<const uint8_t>(payload->bytes(), payload->size()), Span<const CompileSpec>(specs, num_specs));
    if (!bytes.ok()) {
      Error error = bytes.error();
      error.prefix("method '%s' delegate %zu (backend '%s'): init failed", method_name, i, id);
      return error;
    }
    if (bytes.get() > SIZE_MAX - total)
      return Error::make(ErrorCode::OutOfMemory, "method '%s' delegate %zu (backend '%s') needs %zu bytes: too many",
                         method_name, i, id, bytes.get());
    total += bytes.get();
  }
  return total;
}

// ---- Loading ------------------------------------------------------------------

Result<Method> Program::load_method(const char* name, MemoryManager* memory, const KernelRegistry* kernels,
                                    const BackendRegistry* backends, const NativeCodeTrust* trust) const {
  int index = find_method(name);
  if (index < 0) return method_meta(name).error();
  if (memory == nullptr || memory->method_allocator == nullptr)
    return Error::make(ErrorCode::InvalidArgument, "load_method('%s'): the memory manager has no method allocator",
                       name);
  if (kernels == nullptr) return Error::make(ErrorCode::InvalidArgument, "load_method('%s'): no kernel registry", name);
  const schema::Program& p = *schema::GetProgram(program_.data());
  const schema::Method& m = *p.methods()->Get(static_cast<flatbuffers::uoffset_t>(index));
  MemoryAllocator& alloc = *memory->method_allocator;
  const char* method_name = m.name()->c_str();

  // Arenas: one user buffer per mem_id, each large enough.
  size_t num_arenas = count(m.arenas());
  if (memory->planned_arenas.size() < num_arenas)
    return Error::make(ErrorCode::InvalidArgument,
                       "method '%s' plans %zu arenas but the memory manager provides %zu buffers", method_name,
                       num_arenas, memory->planned_arenas.size());
  for (size_t i = 0; i < num_arenas; ++i) {
    const schema::Arena* arena = m.arenas()->Get(static_cast<flatbuffers::uoffset_t>(i));
    const Span<uint8_t>& buffer = memory->planned_arenas[i];
    if (buffer.size() < arena->size() || (arena->size() > 0 && buffer.data() == nullptr))
      return Error::make(ErrorCode::OutOfMemory,
                         "method '%s': arena %zu ('%s') needs %llu bytes; the memory manager gives %zu", method_name,
                         i, arena->name()->c_str(), static_cast<ull>(arena->size()), buffer.size());
    if (reinterpret_cast<uintptr_t>(buffer.data()) % 16 != 0)
      return Error::make(ErrorCode::InvalidArgument, "method '%s': arena %zu buffer is not 16-byte aligned",
                         method_name, i);
  }

  Method method;
  method.program_ = this;
  method.method_index_ = static_cast<size_t>(index);
  method.name_ = method_name;
  method.temp_ = memory->temp_allocator;
  method.generator_ = alloc.allocate_array<Generator>(1);
  if (!method.generator_) return out_of_method_memory(method_name, "the random generator");
  new (method.generator_) Generator(Generator::kDefaultSeed);

  // Values.
  size_t num_values = count(m.values());
  method.num_values_ = num_values;
  method.values_ = alloc.allocate_array<EValue>(num_values ? num_values : 1);
  if (!method.values_) return out_of_method_memory(method_name, "the value table");
  for (size_t i = 0; i < num_values; ++i) new (&method.values_[i]) EValue();
  for (size_t i = 0; i < num_values; ++i) {
    const schema::EValue* ev = m.values()->Get(static_cast<flatbuffers::uoffset_t>(i));
    EValue& v = method.values_[i];
    switch (ev->value_type()) {
      case schema::Value::Null: v.tag = Tag::None; break;
      case schema::Value::Int: v.tag = Tag::Int; v.payload.as_int = ev->value_as_Int()->value(); break;
      case schema::Value::Double: v.tag = Tag::Double; v.payload.as_double = ev->value_as_Double()->value(); break;
      case schema::Value::Bool: v.tag = Tag::Bool; v.payload.as_bool = ev->value_as_Bool()->value(); break;
      case schema::Value::String:
        v.tag = Tag::String;
        v.payload.as_string.data = ev->value_as_String()->value()->c_str();
        v.payload.as_string.size = ev->value_as_String()->value()->size();
        break;
      case schema::Value::Tensor: {
        const schema::Tensor* t = ev->value_as_Tensor();
        int32_t dim = static_cast<int32_t>(count(t->sizes()));
        size_t d = static_cast<size_t>(dim);
        Tensor* tensor = alloc.allocate_array<Tensor>(1);
        int64_t* sizes = alloc.allocate_array<int64_t>(d ? d : 1);
        int64_t* strides = alloc.allocate_array<int64_t>(d ? d : 1);
        uint8_t* dim_order = alloc.allocate_array<uint8_t>(d ? d : 1);
        bool dynamic = t->dynamism() == schema::Dynamism::Bounded;
        int64_t* bounds = dynamic ? alloc.allocate_array<int64_t>(d ? d : 1) : nullptr;
        if (!tensor || !sizes || !strides || !dim_order || (dynamic && !bounds))
          return out_of_method_memory(method_name, "tensor headers");
        for (size_t k = 0; k < d; ++k) {
          sizes[k] = t->sizes()->Get(static_cast<flatbuffers::uoffset_t>(k));
          dim_order[k] = static_cast<uint8_t>(k);
          if (bounds) bounds[k] = sizes[k];
        }
        void* data = nullptr;
        size_t capacity = 0;
        if (const schema::Allocation* a = t->allocation()) {
          data = memory->planned_arenas[a->mem_id()].data() + a->offset();
          capacity = static_cast<size_t>(t->nbytes());
        } else if (const schema::DataLocation* c = t->constant()) {
          // Read-only: the loader rejects any instruction that would write it.
          data = const_cast<uint8_t*>(constants_.bytes()) + c->offset();
          capacity = static_cast<size_t>(t->nbytes());
        }
        new (tensor) Tensor(static_cast<ScalarType>(t->dtype()), dim, sizes, strides, dim_order, bounds, data, capacity);
        v.tag = Tag::Tensor;
        v.payload.as_tensor = tensor;
        break;
      }
      case schema::Value::IntList: {
        const auto* items = ev->value_as_IntList()->items();
        size_t k = count(items);
        EValue** boxed = alloc.allocate_array<EValue*>(k ? k : 1);
        int64_t* scratch = alloc.allocate_array<int64_t>(k ? k : 1);
        if (!boxed || !scratch) return out_of_method_memory(method_name, "int lists");
        for (size_t j = 0; j < k; ++j) boxed[j] = &method.values_[items->Get(static_cast<flatbuffers::uoffset_t>(j))];
        v.tag = Tag::IntList;
        v.payload.as_int_list.items = boxed;
        v.payload.as_int_list.scratch = scratch;
        v.payload.as_int_list.size = k;
        break;
      }
      case schema::Value::DoubleList: {
        const auto* items = ev->value_as_DoubleList()->items();
        size_t k = count(items);
        double* copy = alloc.allocate_array<double>(k ? k : 1);
        if (!copy) return out_of_method_memory(method_name, "double lists");
        for (size_t j = 0; j < k; ++j) copy[j] = items->Get(static_cast<flatbuffers::uoffset_t>(j));
        v.tag = Tag::DoubleList;
        v.payload.as_double_list.items = copy;
        v.payload.as_double_list.size = k;
        break;
      }
      case schema::Value::BoolList: {
        const auto* items = ev->value_as_BoolList()->items();
        v.tag = Tag::BoolList;
        v.payload.as_bool_list.items = items ? reinterpret_cast<const uint8_t*>(items->data()) : nullptr;
        v.payload.as_bool_list.size = count(items);
        break;
      }
      case schema::Value::TensorList:
      case schema::Value::OptionalTensorList: {
        bool optional = ev->value_type() == schema::Value::OptionalTensorList;
        const auto* items = optional ? ev->value_as_OptionalTensorList()->items() : ev->value_as_TensorList()->items();
        size_t k = count(items);
        Tensor** list = alloc.allocate_array<Tensor*>(k ? k : 1);
        if (!list) return out_of_method_memory(method_name, "tensor lists");
        v.tag = optional ? Tag::OptionalTensorList : Tag::TensorList;
        v.payload.as_tensor_list.items = list;
        v.payload.as_tensor_list.size = k;
        // Filled below, once every tensor exists.
        break;
      }
      default:
        return Error::make(ErrorCode::InvalidProgram, "method '%s': value %zu has an unknown kind", method_name, i);
    }
  }
  for (size_t i = 0; i < num_values; ++i) {
    EValue& v = method.values_[i];
    if (v.tag != Tag::TensorList && v.tag != Tag::OptionalTensorList) continue;
    const schema::EValue* ev = m.values()->Get(static_cast<flatbuffers::uoffset_t>(i));
    const auto* items = v.tag == Tag::OptionalTensorList ? ev->value_as_OptionalTensorList()->items()
                                                         : ev->value_as_TensorList()->items();
    Tensor** list = const_cast<Tensor**>(v.payload.as_tensor_list.items);
    for (size_t j = 0; j < v.payload.as_tensor_list.size; ++j) {
      int32_t idx = items->Get(static_cast<flatbuffers::uoffset_t>(j));
      list[j] = idx < 0 ? nullptr : method.values_[idx].payload.as_tensor;
    }
  }
  auto is_constant_tensor = [&](int32_t idx) {
    const schema::Tensor* t = m.values()->Get(static_cast<flatbuffers::uoffset_t>(idx))->value_as_Tensor();
    return t != nullptr && t->constant() != nullptr;
  };
  // A constant tensor, or a tensor list holding one.
  auto holds_constant = [&](int32_t idx) {
    if (is_constant_tensor(idx)) return true;
    const schema::EValue* ev = m.values()->Get(static_cast<flatbuffers::uoffset_t>(idx));
    const flatbuffers::Vector<int32_t>* items = nullptr;
    if (const schema::TensorList* list = ev->value_as_TensorList()) items = list->items();
    if (const schema::OptionalTensorList* list = ev->value_as_OptionalTensorList()) items = list->items();
    for (flatbuffers::uoffset_t k = 0; items && k < items->size(); ++k) {
      if (items->Get(k) >= 0 && is_constant_tensor(items->Get(k))) return true;
    }
    return false;
  };

  // Inputs and outputs: indices into the value table (checked by Program::load).
  method.inputs_ = m.inputs() ? m.inputs()->data() : nullptr;
  method.num_inputs_ = count(m.inputs());
  method.outputs_ = m.outputs() ? m.outputs()->data() : nullptr;
  method.num_outputs_ = count(m.outputs());
  for (size_t i = 0; i < method.num_inputs_; ++i) {
    if (is_constant_tensor(method.inputs_[i]))
      return Error::make(ErrorCode::InvalidProgram, "invalid program: method '%s' input %zu is a constant tensor",
                         method_name, i);
  }

  // Program state starts from its initial values (Program::load checked them).
  ET_CHECK_OK(method.reset_state());

  // Operators → kernels. A missing kernel fails here, not at execute.
  size_t num_ops = count(m.operators());
  const KernelEntry** entries = alloc.allocate_array<const KernelEntry*>(num_ops ? num_ops : 1);
  char** op_names = alloc.allocate_array<char*>(num_ops ? num_ops : 1);
  if (!entries || !op_names) return out_of_method_memory(method_name, "the operator table");
  for (size_t i = 0; i < num_ops; ++i) {
    const schema::Operator* op = m.operators()->Get(static_cast<flatbuffers::uoffset_t>(i));
    size_t n = op->name()->size() + (op->overload() ? op->overload()->size() : 0) + 2;
    op_names[i] = alloc.allocate_array<char>(n);
    if (!op_names[i]) return out_of_method_memory(method_name, "operator names");
    const char* overload = op->overload() ? op->overload()->c_str() : "";
    std::snprintf(op_names[i], n, "%s%s%s", op->name()->c_str(), overload[0] ? "." : "", overload);
    entries[i] = kernels->find(op_names[i]);
  }

  // Instructions.
  size_t num_instructions = count(m.instructions());
  method.steps_ = alloc.allocate_array<Step>(num_instructions ? num_instructions : 1);
  if (!method.steps_) return out_of_method_memory(method_name, "the instruction table");
  method.num_steps_ = num_instructions;
  for (size_t pc = 0; pc < num_instructions; ++pc) {
    const schema::Instruction* ins = m.instructions()->Get(static_cast<flatbuffers::uoffset_t>(pc));
    Step& step = method.steps_[pc];
    std::memset(static_cast<void*>(&step), 0, sizeof(Step));
    step.debug_handle = ins->debug_handle();
    const flatbuffers::Vector<int32_t>* args = nullptr;
    switch (ins->kind_type()) {
      case schema::InstructionKind::KernelCall: {
        const schema::KernelCall* call = ins->kind_as_KernelCall();
        step.kind = StepKind::Kernel;
        step.name = op_names[call->op()];
        const KernelEntry* entry = entries[call->op()];
        if (entry == nullptr) {
          const char* where = debug_location(method.method_index_, step.debug_handle);
          const char* module = debug_module_path(method.method_index_, step.debug_handle);
          return Error::make(ErrorCode::NotFound,
                             "no kernel for %s (needed by method '%s', instruction %zu%s%s%s%s); this runtime has %zu "
                             "kernels: register one, or build with the operator selected",
                             step.name, method_name, pc, where ? " at " : "", where ? where : "",
                             module ? " in " : "", module ? module : "", kernels->size());
        }
        step.fn = entry->fn;
        args = call->args();
        // Arity and kinds against the registered signature. Outputs must not
        // be constants (a kernel would write the loader's read-only bytes):
        // those after '|' if the signature marks them, else the last argument
        // (out variants take their outputs last).
        size_t expected = 0;
        for (const char* c = entry->signature; *c; ++c) expected += *c != '|';
        const char* bar = std::strchr(entry->signature, '|');
        size_t first_output = bar ? static_cast<size_t>(bar - entry->signature) : (expected ? expected - 1 : 0);
        if (count(args) != expected) {
          return Error::make(ErrorCode::InvalidProgram,
                             "invalid program: method '%s' instruction %zu calls %s with %zu arguments; its kernel "
                             "takes %zu",
                             method_name, pc, step.name, count(args), expected);
        }
        size_t k = 0;
        for (const char* c = entry->signature; *c; ++c) {
          if (*c == '|') continue;
          int32_t idx = args->Get(static_cast<flatbuffers::uoffset_t>(k));
          if (!matches_signature(*c, method.values_[idx])) {
            return Error::make(ErrorCode::InvalidProgram,
                               "invalid program: method '%s' instruction %zu (%s): argument %zu is a %s; the kernel "
                               "expects %s",
                               method_name, pc, step.name, k, tag_name(method.values_[idx].tag),
                               signature_kind_name(*c));
          }
          if (k >= first_output && holds_constant(idx)) {
            return Error::make(ErrorCode::InvalidProgram,
                               "invalid program: method '%s' instruction %zu (%s) writes constant tensor value %d",
                               method_name, pc, step.name, idx);
          }
          ++k;
        }
        break;
      }
      case schema::InstructionKind::DelegateCall: {
        const schema::DelegateCall* call = ins->kind_as_DelegateCall();
        step.kind = StepKind::Delegate;
        step.delegate = call->delegate();
        step.name = m.delegates()->Get(call->delegate())->backend()->c_str();
        args = call->args();
        // The live-outs are written by the backend: never a constant's read-only bytes.
        for (size_t k = count(args) - call->num_outputs(); k < count(args); ++k) {
          int32_t idx = args->Get(static_cast<flatbuffers::uoffset_t>(k));
          if (holds_constant(idx)) {
            return Error::make(ErrorCode::InvalidProgram,
                               "invalid program: method '%s' instruction %zu (delegate '%s') writes constant tensor "
                               "value %d",
                               method_name, pc, step.name, idx);
          }
        }
        break;
      }
      case schema::InstructionKind::JumpFalse:
        step.kind = StepKind::JumpFalse;
        step.a = ins->kind_as_JumpFalse()->cond();
        step.target = ins->kind_as_JumpFalse()->target();
        break;
      case schema::InstructionKind::Move:
        step.kind = StepKind::Move;
        step.a = ins->kind_as_Move()->from();
        step.b = ins->kind_as_Move()->to();
        // A move copies into `to`'s own memory (see move_value): never into a constant's bytes.
        if (is_constant_tensor(step.b))
          return Error::make(ErrorCode::InvalidProgram,
                             "invalid program: method '%s' instruction %zu moves into constant tensor value %d",
                             method_name, pc, step.b);
        break;
      case schema::InstructionKind::Free:
        step.kind = StepKind::Free;
        step.a = ins->kind_as_Free()->value();
        break;
      default:
        return Error::make(ErrorCode::InvalidProgram, "method '%s': instruction %zu has an unknown kind", method_name,
                           pc);
    }
    if (args != nullptr) {
      size_t n = args->size();
      step.args = alloc.allocate_array<EValue*>(n ? n : 1);
      if (!step.args) return out_of_method_memory(method_name, "instruction arguments");
      for (size_t k = 0; k < n; ++k) step.args[k] = &method.values_[args->Get(static_cast<flatbuffers::uoffset_t>(k))];
      step.num_args = static_cast<uint32_t>(n);
    }
  }

  // Delegates: find the backend, load the payload, init once.
  size_t num_delegates = count(m.delegates());
  if (num_delegates > 0) {
    method.delegates_ = alloc.allocate_array<LoadedDelegate>(num_delegates);
    if (!method.delegates_) return out_of_method_memory(method_name, "delegates");
    for (size_t i = 0; i < num_delegates; ++i) new (&method.delegates_[i]) LoadedDelegate();
    method.num_delegates_ = num_delegates;
  }
  for (size_t i = 0; i < num_delegates; ++i) {
    const schema::Delegate* d = m.delegates()->Get(static_cast<flatbuffers::uoffset_t>(i));
    const char* id = d->backend()->c_str();
    Result<Backend*> found = delegate_backend(backends, method_name, i, id);
    if (!found.ok()) return found.error();
    Backend* backend = found.get();
    LoadedDelegate& loaded = method.delegates_[i];
    loaded.backend = backend;
    Result<FreeableBuffer> payload = load_segment(d->payload()->segment(), d->payload()->offset(), d->payload()->size());
    if (!payload.ok()) return payload.error();
    loaded.payload = static_cast<FreeableBuffer&&>(payload.get());
    size_t num_specs = count(d->compile_specs());
    CompileSpec* specs = alloc.allocate_array<CompileSpec>(num_specs ? num_specs : 1);
    if (!specs) return out_of_method_memory(method_name, "compile specs");
    read_compile_specs(*d, specs);
    BackendInitContext context{&alloc, method_name, static_cast<uint32_t>(i), kernels, backends, trust};
    // The payload's signatures, for a backend whose payload is native code (native_code.h): views into the
    // program, needed during init only (Program::load checked their count and sizes).
    PayloadSignature signatures[kMaxPayloadSignatures];
    size_t num_signatures = count(d->signatures());
    for (size_t k = 0; k < num_signatures; ++k) {
      const schema::PayloadSignature* s = d->signatures()->Get(static_cast<flatbuffers::uoffset_t>(k));
      signatures[k] = PayloadSignature{s->public_key()->data(), s->signature()->data()};
    }
    context.signatures = Span<const PayloadSignature>(signatures, num_signatures);
    Result<DelegateHandle> handle =
        backend->init(context, Span<const uint8_t>(loaded.payload.bytes(), loaded.payload.size()),
                      Span<const CompileSpec>(specs, num_specs));
    if (!handle.ok()) {
      Error error = handle.error();
      error.prefix("method '%s' delegate %zu (backend '%s'): init failed", method_name, i, id);
      return error;
    }
    loaded.handle = handle.get();
    loaded.initialized = true;
  }
  return Result<Method>(static_cast<Method&&>(method));
}

// ---- Method -------------------------------------------------------------------

Method::Method(Method&& other) noexcept
    : program_(other.program_),
      method_index_(other.method_index_),
      name_(other.name_),
      values_(other.values_),
      num_values_(other.num_values_),
      inputs_(other.inputs_),
      num_inputs_(other.num_inputs_),
      outputs_(other.outputs_),
      num_outputs_(other.num_outputs_),
      steps_(other.steps_),
      num_steps_(other.num_steps_),
      delegates_(other.delegates_),
      num_delegates_(other.num_delegates_),
      temp_(other.temp_),
      generator_(other.generator_),
      profile_(other.profile_),
      tracer_(other.tracer_),
      failed_debug_handle_(other.failed_debug_handle_),
      describe_failures_(other.describe_failures_) {
  other.delegates_ = nullptr;
  other.num_delegates_ = 0;
}

Method::~Method() {
  for (size_t i = 0; i < num_delegates_; ++i) {
    LoadedDelegate& d = delegates_[i];
    if (d.initialized) d.backend->destroy(d.handle);
    d.~LoadedDelegate();
  }
}

const char* Method::instruction_name(size_t i) const {
  if (i >= num_steps_) return "";
  switch (steps_[i].kind) {
    case StepKind::Kernel:
    case StepKind::Delegate: return steps_[i].name;
    case StepKind::JumpFalse: return "jump_false";
    case StepKind::Move: return "move";
    case StepKind::Free: return "free";
  }
  return "";
}

Error Method::set_input(size_t i, const void* data, size_t nbytes, ScalarType dtype, Span<const int64_t> sizes) {
  CallGuard guard(busy_, "set_input");
  if (!guard.held()) return guard.refusal(name_);
  if (i >= num_inputs_)
    return Error::make(ErrorCode::InvalidArgument, "method '%s' has %zu inputs; there is no input %zu", name_,
                       num_inputs_, i);
  EValue& v = values_[inputs_[i]];
  if (!v.is_tensor())
    return Error::make(ErrorCode::NotSupported, "method '%s' input %zu is a %s, not a tensor", name_, i,
                       tag_name(v.tag));
  Tensor& t = v.to_tensor();
  const schema::Method* m =
      schema::GetProgram(program_->flatbuffer())->methods()->Get(static_cast<flatbuffers::uoffset_t>(method_index_));
  const schema::Tensor* fb = m->values()->Get(static_cast<flatbuffers::uoffset_t>(inputs_[i]))->value_as_Tensor();
  char expected[192];
  char given[192];
  bool ok = dtype == t.dtype() && static_cast<int64_t>(sizes.size()) == t.dim();
  for (size_t d = 0; ok && d < sizes.size(); ++d) {
    int64_t bound = t.upper_bounds()[d];
    ok = dim_varies(t, fb, static_cast<int32_t>(d)) ? (sizes[d] >= 0 && sizes[d] <= bound) : sizes[d] == bound;
  }
  if (!ok)
    return Error::make(ErrorCode::InvalidArgument, "method '%s' input %zu: expected %s, got %s", name_, i,
                       describe_expected(t, fb, expected, sizeof(expected)),
                       describe_given(dtype, sizes, given, sizeof(given)));
  ET_CHECK_OK(t.resize(sizes, "input"));
  if (nbytes < t.nbytes() || (data == nullptr && t.nbytes() > 0))
    return Error::make(ErrorCode::InvalidArgument, "method '%s' input %zu: %zu bytes given, %s needs %zu", name_, i,
                       nbytes, describe_given(dtype, sizes, given, sizeof(given)), t.nbytes());
  // Planned-ness comes from the program: after a first set_input an unplanned
  // input points at the caller's previous buffer, which must not be written.
  if (fb != nullptr && fb->allocation() != nullptr) {
    if (t.nbytes() > 0 && t.mutable_data() != data) std::memcpy(t.mutable_data(), data, t.nbytes());  // into the arena
  } else {
    t.set_data(const_cast<void*>(data), nbytes);  // unplanned: the caller's memory
  }
  return Error::ok();
}

Error Method::set_output_buffer(size_t i, void* data, size_t nbytes) {
  CallGuard guard(busy_, "set_output_buffer");
  if (!guard.held()) return guard.refusal(name_);
  if (i >= num_outputs_)
    return Error::make(ErrorCode::InvalidArgument, "method '%s' has %zu outputs; there is no output %zu", name_,
                       num_outputs_, i);
  EValue& v = values_[outputs_[i]];
  if (!v.is_tensor())
    return Error::make(ErrorCode::InvalidArgument, "method '%s' output %zu is a %s, not a tensor", name_, i,
                       tag_name(v.tag));
  Tensor& t = v.to_tensor();
  size_t planned = static_cast<size_t>(1);
  for (int32_t d = 0; d < t.dim(); ++d) planned *= static_cast<size_t>(t.upper_bounds()[d]);
  planned *= t.element_size();
  if (nbytes < planned)
    return Error::make(ErrorCode::InvalidArgument, "method '%s' output %zu needs %zu bytes; %zu given", name_, i,
                       planned, nbytes);
  t.set_data(data, nbytes);
  return Error::ok();
}

// Records which instruction failed and, unless the caller names locations
// itself, says where: the source line of `handle` (the op that failed; for a
// delegate, the op its backend named), else that of the instruction.
Error Method::fail(Error error, size_t pc, uint32_t handle) {
  const Step& step = steps_[pc];
  failed_debug_handle_ = handle != 0 ? handle : step.debug_handle;
  if (!describe_failures_) return error;
  uint32_t located = failed_debug_handle_;
  const char* where = program_->debug_location(method_index_, located);
  if (where == nullptr) where = program_->debug_location(method_index_, located = step.debug_handle);
  if (where == nullptr) where = "unknown location";
  // The op's nn.Module, when known: "model.py:41 (layers.3.attn; method 'forward', instruction 3)".
  const char* module = program_->debug_module_path(method_index_, located);
  const char* module_sep = module != nullptr ? "; " : "";
  if (module == nullptr) module = "";
  if (step.kind == StepKind::Delegate) {
    error.prefix("%s (%s%smethod '%s', instruction %zu, delegate '%s')", where, module, module_sep, name_, pc,
                 step.name);
  } else {
    error.prefix("%s (%s%smethod '%s', instruction %zu)", where, module, module_sep, name_, pc);
  }
  return error;
}

// ---- Program state -------------------------------------------------------------
// Each Method.state entry names a planned tensor value with `initial` data in
// the constant segment; Program::load checked the indices, kinds and sizes.

namespace {
const schema::Method& schema_method(const Program& program, size_t index) {
  return *schema::GetProgram(program.flatbuffer())->methods()->Get(static_cast<flatbuffers::uoffset_t>(index));
}
}  // namespace

size_t Method::num_state() const { return count(schema_method(*program_, method_index_).state()); }

const char* Method::state_name(size_t i) const {
  if (i >= num_state()) return nullptr;
  return schema_method(*program_, method_index_).state()->Get(static_cast<flatbuffers::uoffset_t>(i))->name()->c_str();
}

const Tensor* Method::state(size_t i) const {
  if (i >= num_state()) return nullptr;
  int32_t index = schema_method(*program_, method_index_).state()->Get(static_cast<flatbuffers::uoffset_t>(i))->value();
  return values_[index].payload.as_tensor;
}

const Tensor* Method::state(const char* name) const {
  for (size_t i = 0; name != nullptr && i < num_state(); ++i) {
    if (std::strcmp(state_name(i), name) == 0) return state(i);
  }
  return nullptr;
}

Error Method::reset_state() {
  CallGuard guard(busy_, "reset_state");
  if (!guard.held()) return guard.refusal(name_);
  const schema::Method& m = schema_method(*program_, method_index_);
  for (size_t i = 0; i < count(m.state()); ++i) {
    int32_t index = m.state()->Get(static_cast<flatbuffers::uoffset_t>(i))->value();
    const schema::DataLocation* initial = m.values()->Get(static_cast<flatbuffers::uoffset_t>(index))->value_as_Tensor()->initial();
    Tensor& t = *values_[index].payload.as_tensor;
    if (t.mutable_data() == nullptr || t.nbytes() != initial->size())
      return Error::make(ErrorCode::Internal, "method '%s': state '%s' has %zu bytes of memory for %llu bytes of data",
                         name_, state_name(i), t.nbytes(), static_cast<ull>(initial->size()));
    if (initial->size() > 0) std::memcpy(t.mutable_data(), program_->constant_data() + initial->offset(), initial->size());
  }
  return Error::ok();
}

Error Method::execute() {
  CallGuard guard(busy_, "execute");
  if (!guard.held()) return guard.refusal(name_);
  failed_debug_handle_ = 0;
  for (size_t i = 0; i < num_inputs_; ++i) {
    const EValue& v = values_[inputs_[i]];
    if (v.is_tensor() && v.to_tensor().mutable_data() == nullptr && v.to_tensor().nbytes() > 0)
      return Error::make(ErrorCode::InvalidArgument, "method '%s': input %zu was not set (call set_input)", name_, i);
  }
  for (size_t i = 0; i < num_outputs_; ++i) {
    const EValue& v = values_[outputs_[i]];
    if (v.is_tensor() && v.to_tensor().mutable_data() == nullptr && v.to_tensor().capacity() == 0 &&
        v.to_tensor().nbytes() > 0)
      return Error::make(ErrorCode::InvalidArgument,
                         "method '%s': output %zu is not planned and has no buffer (call set_output_buffer)", name_, i);
  }
#if ETMLIR_EVENT_TRACER
  // The tracer (event_tracer.h): read once; nullptr costs one test per step. A top-level run
  // (depth 0: not an inner method of a nested delegate) counts as one run when it ends, even a
  // failed one, so the next run's events are told apart.
  EventTracer* const tracer = tracer_;
  struct RunEnd {
    EventTracer* tracer;
    ~RunEnd() {
      if (tracer != nullptr && tracer->depth() == 0) tracer->next_run();
    }
  } run_end{tracer};
  uint32_t event = TraceEvent::kNoParent;
#endif
  size_t pc = 0;
  while (pc < num_steps_) {
    const Step& step = steps_[pc];
    uint64_t start = profile_ ? pal_now_ns() : 0;
    size_t next = pc + 1;
#if ETMLIR_EVENT_TRACER
    if (tracer != nullptr) {
      bool delegate = step.kind == StepKind::Delegate;
      event = tracer->begin(delegate ? TraceEventKind::Delegate : TraceEventKind::Instruction, step.debug_handle,
                            static_cast<uint32_t>(pc),
                            delegate ? static_cast<uint16_t>(step.delegate) : TraceEvent::kNoDelegate);
    }
#define ET_TRACE_END() \
  if (tracer != nullptr) tracer->end(event)
#else
#define ET_TRACE_END() ((void)0)
#endif
    switch (step.kind) {
      case StepKind::Kernel: {
        KernelContext context(step.name, temp_, generator_);
        Error error = step.fn(context, step.args);
        if (temp_) temp_->reset();
        if (error) {
          ET_TRACE_END();
          return fail(error, pc, step.debug_handle);
        }
        break;
      }
      case StepKind::Delegate: {
        const LoadedDelegate& d = delegates_[step.delegate];
        BackendExecuteContext context{temp_, 0};
#if ETMLIR_EVENT_TRACER
        // The backend's events (and a nested delegate's inner method's) are children of this call's.
        EventTracer::Scope scope{};
        if (tracer != nullptr) {
          context.tracer = tracer;
          context.instruction = static_cast<uint32_t>(pc);
          context.delegate_index = static_cast<uint16_t>(step.delegate);
          scope = tracer->enter(event);
        }
#endif
        Error error = d.backend->execute(context, d.handle, Span<EValue*>(step.args, step.num_args));
#if ETMLIR_EVENT_TRACER
        if (tracer != nullptr) tracer->leave(scope);
#endif
        if (temp_) temp_->reset();
        if (error) {
          ET_TRACE_END();
          return fail(error, pc, context.failed_debug_handle);
        }
        break;
      }
      case StepKind::JumpFalse: {
        bool taken = false;
        Error error = read_condition(values_[step.a], &taken);
        if (error) {
          ET_TRACE_END();
          return fail(error, pc, step.debug_handle);
        }
        if (!taken) next = step.target;
        break;
      }
      case StepKind::Move: {
        Error error = move_value(values_[step.a], values_[step.b]);
        if (error) {
          ET_TRACE_END();
          return fail(error, pc, step.debug_handle);
        }
        break;
      }
      case StepKind::Free:
        break;
    }
#if ETMLIR_EVENT_TRACER
    if (tracer != nullptr) {
      tracer->end(event);
      if (tracer->wants_capture(static_cast<uint32_t>(pc))) capture_step(*tracer, pc);
    }
#endif
#undef ET_TRACE_END
    if (profile_) profile_[pc] = pal_now_ns() - start;
    pc = next;
  }
  return Error::ok();
}

Error Method::set_event_tracer(EventTracer* tracer) {
#if ETMLIR_EVENT_TRACER
  tracer_ = tracer;
  return Error::ok();
#else
  if (tracer == nullptr) return Error::ok();
  return Error::make(ErrorCode::NotSupported,
                     "method '%s': this runtime was built without the event tracer (ETMLIR_EVENT_TRACER=OFF); "
                     "rebuild it with -DETMLIR_EVENT_TRACER=ON to trace",
                     name_);
#endif
}

// Copies what the tracer asked for among step `pc`'s values (right after it ran: arenas reuse
// memory, so later is too late): every tensor argument of a kernel or delegate call (a tensor
// list's items under their own value indices), a move's target.
void Method::capture_step(EventTracer& tracer, size_t pc) const {
  const Step& step = steps_[pc];
  uint32_t instruction = static_cast<uint32_t>(pc);
  auto capture_value = [&](int32_t index) {
    const EValue& v = values_[index];
    if (v.is_tensor()) tracer.capture(instruction, index, v.to_tensor());
  };
  if (step.kind == StepKind::Move) {
    capture_value(step.b);
    return;
  }
  if (step.kind != StepKind::Kernel && step.kind != StepKind::Delegate) return;
  const schema::Method& m = *schema::GetProgram(program_->flatbuffer())
                                 ->methods()
                                 ->Get(static_cast<flatbuffers::uoffset_t>(method_index_));
  for (uint32_t k = 0; k < step.num_args; ++k) {
    int32_t index = static_cast<int32_t>(step.args[k] - values_);
    const EValue& v = *step.args[k];
    if (v.is_tensor()) {
      tracer.capture(instruction, index, v.to_tensor());
    } else if (v.tag == Tag::TensorList) {
      const schema::TensorList* list =
          m.values()->Get(static_cast<flatbuffers::uoffset_t>(index))->value_as_TensorList();
      for (size_t i = 0; list != nullptr && i < count(list->items()); ++i)
        capture_value(list->items()->Get(static_cast<flatbuffers::uoffset_t>(i)));
    }
  }
}

}  // namespace etmlir
