// Program: a verified .pte, ready to load methods from.
//
//   auto loader = etmlir::MmapDataLoader::open("model.pte");
//   auto program = etmlir::Program::load(&*loader);       // verifies everything
//   auto meta = program->method_meta("forward");           // arena sizes, inputs
//   ... give a MemoryManager with one buffer per arena ...
//   auto method = program->load_method("forward", &memory, &kernels, &backends);
//
// Program::load reads the 64-byte header, runs the FlatBuffers verifier over
// the program, then checks the program's meaning: schema version, every
// value/operator/delegate/arena index in range, tensor sizes, dtypes and
// byte counts consistent, constants and payloads inside their segments,
// segments inside the file and aligned. A bad file gives an Error, never a
// crash or an out-of-bounds read. The loader must outlive the Program; the
// Program must outlive its Methods.
#pragma once

#include <cstddef>
#include <cstdint>

#include "etmlir/runtime/backend.h"
#include "etmlir/runtime/data_loader.h"
#include "etmlir/runtime/error.h"
#include "etmlir/runtime/kernel.h"
#include "etmlir/runtime/memory.h"
#include "etmlir/runtime/tensor.h"

namespace etmlir {

class Method;
class Program;

// The newest .pte schema version this runtime reads (Program.version): 2 adds
// method state (Method.state, Tensor.initial); 3 adds control flow (a JumpFalse
// on a bool tensor or backward, a Move that copies a tensor into its target).
// A file gets the lowest version that describes it.
constexpr uint32_t kProgramVersion = 3;

// What a caller needs to know before loading a method: its signature and the
// memory to provide.
class MethodMeta {
 public:
  const char* name() const;
  size_t num_inputs() const;
  size_t num_outputs() const;
  // Tensor inputs/outputs: dtype, rank and planned sizes (upper bounds when dynamic).
  // False for a value that is not a tensor.
  struct TensorInfo {
    ScalarType dtype;
    int32_t dim;
    const int64_t* sizes;  // `dim` entries: exact, or upper bounds if dynamic
    bool dynamic;
    // With `dynamic`: 1 for each dim that may vary, 0 for one that is exact
    // (nullptr: every dim may vary up to its bound).
    const uint8_t* dynamic_dims;
    bool planned;  // memory in an arena (else the caller provides it)
    bool dim_varies(int32_t d) const { return dynamic && (dynamic_dims == nullptr || dynamic_dims[d] != 0); }
  };
  bool input_tensor(size_t i, TensorInfo* info) const;
  bool output_tensor(size_t i, TensorInfo* info) const;
  size_t num_arenas() const;
  uint64_t arena_size(size_t mem_id) const;
  const char* arena_name(size_t mem_id) const;
  // An upper bound on the method allocator bytes load_method uses for the
  // method's own tables (values, tensors, instructions, delegate slots): enough
  // for a method without delegates. Delegates keep their state in the method
  // allocator too: size it with the overload below when the method has some.
  size_t method_allocator_bytes() const;
  // The same plus, for each delegate, what its backend in `backends` takes at
  // init (Backend::method_allocator_bytes on the delegate's payload and compile
  // specs): the size to give the method allocator for load_method(...,
  // backends). An Error when a delegate's backend is not registered or
  // refuses its payload, worded as load_method would.
  Result<size_t> method_allocator_bytes(const BackendRegistry* backends, const KernelRegistry* kernels = nullptr) const;
  size_t num_delegates() const;
  size_t num_instructions() const;
  size_t num_operators() const;
  // "aten::add.out" into buffer.
  const char* operator_name(size_t i, char* buffer, size_t size) const;

 private:
  friend class Program;
  MethodMeta(const void* method, const Program* program) : method_(method), program_(program) {}
  const void* method_;  // etmlir::schema::Method
  const Program* program_;  // for the delegates' payloads
};

class Program {
 public:
  static Result<Program> load(DataLoader* loader);

  Program(Program&&) = default;
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  Program& operator=(Program&&) = delete;

  uint32_t version() const;
  size_t num_methods() const;
  const char* method_name(size_t i) const;
  Result<MethodMeta> method_meta(const char* name) const;
  // `trust`: which delegate payloads that are native code may run (native_code.h; nullptr: none,
  // so a "cpu" delegate is refused unless signed by a key in it or native code is allowed).
  Result<Method> load_method(const char* name, MemoryManager* memory, const KernelRegistry* kernels,
                             const BackendRegistry* backends = nullptr, const NativeCodeTrust* trust = nullptr) const;

  // The constant segment's bytes (valid while the Program lives).
  const uint8_t* constant_data() const { return constants_.bytes(); }
  size_t constant_size() const { return constants_.size(); }
  // Loads [offset, +size) of segment `segment` (payloads); already range-checked by load().
  Result<FreeableBuffer> load_segment(uint32_t segment, uint64_t offset, uint64_t size) const;
  // The source location ("model.py:41") and edge op of a debug handle, or nullptr.
  const char* debug_location(size_t method_index, uint32_t handle) const;
  // The nn.Module path ("layers.3.attn") the op of a debug handle was traced in; nullptr when the
  // file records none or the op belongs to the model's own forward (path "").
  const char* debug_module_path(size_t method_index, uint32_t handle) const;
  DataLoader* loader() const { return loader_; }
  const void* flatbuffer() const { return program_.data(); }

 private:
  Program(DataLoader* loader, FreeableBuffer program, FreeableBuffer constants, uint64_t segment_base)
      : loader_(loader),
        program_(static_cast<FreeableBuffer&&>(program)),
        constants_(static_cast<FreeableBuffer&&>(constants)),
        segment_base_(segment_base) {}
  int find_method(const char* name) const;

  DataLoader* loader_;
  FreeableBuffer program_;
  FreeableBuffer constants_;
  uint64_t segment_base_;
};

}  // namespace etmlir
