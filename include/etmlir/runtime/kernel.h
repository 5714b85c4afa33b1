// Kernels and the kernel registry.
//
// A kernel is a plain function that receives its arguments as EValue
// pointers in schema order, outputs last (the .pte's KernelCall.args):
//
//   // aten::add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out)
//   Error add_out(KernelContext& ctx, EValue** args) {
//     const Tensor& a = args[0]->to_tensor(); ...
//     Tensor& out = args[3]->to_tensor();
//     ET_CHECK_OK(out.resize(...));
//   }
//
// Each kernel is registered under "namespace::name.overload" with a
// signature string, one character per argument, that Method loading checks
// every call against (so a kernel never sees an argument of the wrong kind):
//
//   T tensor            t tensor or None        i int             I int or None
//   f double            F double or None        s Scalar (int/double/bool)
//   S Scalar or None    b bool                  B bool or None    L int list
//   M int list or None  D double list           G double list or None
//   E bool list         Q string                R string or None
//   X tensor list       Y optional-tensor list  ? anything
//
// A '|' separates the inputs from the outputs ("TTs|T" for add.out): the
// loader refuses a program whose call would write a constant tensor, and
// test/python/test_kernel_signatures.py checks every signature against the
// operator's PyTorch schema.
//
// Registration is an explicit call (no static initializers, no
// --whole-archive): register_portable_kernels(registry) and friends call
// ET_REGISTER_KERNEL for each kernel. With selective build (CMake option
// ETMLIR_SELECTED_OPERATORS) only the listed operators are registered, and
// the linker drops the rest.
#pragma once

#include <cstddef>
#include <cstdint>

#include "etmlir/runtime/error.h"
#include "etmlir/runtime/evalue.h"
#include "etmlir/runtime/memory.h"
#include "etmlir/runtime/selective_build.h"

namespace etmlir {

class Generator;  // etmlir/runtime/generator.h

// What a kernel may use besides its arguments.
class KernelContext {
 public:
  KernelContext(const char* op_name, MemoryAllocator* temp, Generator* generator = nullptr)
      : op_name_(op_name), temp_(temp), generator_(generator) {}

  const char* op_name() const { return op_name_; }
  // Scratch memory valid until the kernel returns; nullptr when none is left
  // (or no temp allocator was given): kernels must then fail, not crash.
  void* allocate_temp(size_t size, size_t alignment = 64) {
    return temp_ ? temp_->allocate(size, alignment) : nullptr;
  }
  // The random generator of the running Method (rand, randn, dropout and
  // friends draw from it); nullptr when the caller gave none: random kernels
  // must then fail, not crash.
  Generator* generator() const { return generator_; }
  // An error whose message starts with the op name: "aten::add.out: ...".
  Error fail(ErrorCode code, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

 private:
  const char* op_name_;
  MemoryAllocator* temp_;
  Generator* generator_;
};

using KernelFn = Error (*)(KernelContext& ctx, EValue** args);

// A set of dtypes: bit i set for ScalarType i (tensor.h). 0 means "not declared".
using DtypeMask = uint32_t;
constexpr DtypeMask dtype_bit(ScalarType dtype) { return DtypeMask{1} << static_cast<int>(dtype); }

struct KernelEntry {
  const char* name;       // "aten::add.out"
  const char* signature;  // see the table above
  KernelFn fn;
  // The dtypes the kernel's data tensors (dtypes) and its outputs (out_dtypes) may have, as
  // its kernel table says (runtime/kernels/portable/*.yaml); 0: not declared (the runtime's own
  // kernels, custom ones). Method loading does not read them: the runtime manifest does
  // (tools/et_manifest.cpp, etmlir.devtools.check_loadable), so that a program can be checked
  // against a runtime build without a device.
  DtypeMask dtypes = 0;
  DtypeMask out_dtypes = 0;
};

// A fixed-capacity table (no heap); lookups happen at method load only.
class KernelRegistry {
 public:
  static constexpr size_t kCapacity = 512;

  // Fails if the name is taken, the table is full, or the signature has an
  // unknown character.
  // `dtypes` / `out_dtypes`: see KernelEntry (0: not declared).
  Error add(const char* name, const char* signature, KernelFn fn, DtypeMask dtypes = 0, DtypeMask out_dtypes = 0);
  const KernelEntry* find(const char* name) const;
  const KernelEntry* find(const char* name, size_t name_size) const;
  size_t size() const { return size_; }
  const KernelEntry& entry(size_t i) const { return entries_[i]; }

 private:
  KernelEntry entries_[kCapacity];
  size_t size_ = 0;
};

// True if `value` fits signature character `kind`.
bool matches_signature(char kind, const EValue& value);
// Human-readable meaning of a signature character ("tensor or None").
const char* signature_kind_name(char kind);

// The runtime's own kernels: etmlir_prim::sym_size.int and friends (size
// queries that write an Int value), etmlir_prim::_local_scalar_dense (a
// tensor's one element as a Scalar value) and etmlir_prim::sym_is_contiguous.
// Always registered by the loader helpers.
Error register_prim_kernels(KernelRegistry& registry);

}  // namespace etmlir

// Registers `fn` unless selective build left `name` out (then `fn` is never
// referenced and the linker can drop it). Optional trailing arguments: the
// kernel's dtypes and out_dtypes (DtypeMask), as generated code passes them.
#define ET_REGISTER_KERNEL(registry, name, signature, ...)                \
  do {                                                                    \
    if constexpr (::etmlir::kernel_selected(name)) {                      \
      ET_CHECK_OK((registry).add((name), (signature), __VA_ARGS__));      \
    }                                                                     \
  } while (0)
