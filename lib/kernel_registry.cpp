#include <cstdarg>
#include <cstring>

#include "etmlir/runtime/kernel.h"

namespace etmlir {

Error KernelContext::fail(ErrorCode code, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  Error error = Error::vmake(code, fmt, args);
  va_end(args);
  error.prefix("%s", op_name_);
  return error;
}

namespace {
constexpr const char kSignatureKinds[] = "TtiIfFsSbBLMDGEQRXY?|";
}

const char* signature_kind_name(char kind) {
  switch (kind) {
    case 'T': return "tensor";
    case 't': return "tensor or None";
    case 'i': return "int";
    case 'I': return "int or None";
    case 'f': return "double";
    case 'F': return "double or None";
    case 's': return "Scalar";
    case 'S': return "Scalar or None";
    case 'b': return "bool";
    case 'B': return "bool or None";
    case 'L': return "int list";
    case 'M': return "int list or None";
    case 'D': return "double list";
    case 'G': return "double list or None";
    case 'E': return "bool list";
    case 'Q': return "string";
    case 'R': return "string or None";
    case 'X': return "tensor list";
    case 'Y': return "optional tensor list";
    case '?': return "any value";
  }
  return "unknown kind";
}

bool matches_signature(char kind, const EValue& v) {
  switch (kind) {
    case 'T': return v.tag == Tag::Tensor;
    case 't': return v.tag == Tag::Tensor || v.is_none();
    case 'i': return v.tag == Tag::Int;
    case 'I': return v.tag == Tag::Int || v.is_none();
    case 'f': return v.tag == Tag::Double || v.tag == Tag::Int;
    case 'F': return v.tag == Tag::Double || v.tag == Tag::Int || v.is_none();
    case 's': return v.is_scalar();
    case 'S': return v.is_scalar() || v.is_none();
    case 'b': return v.tag == Tag::Bool;
    case 'B': return v.tag == Tag::Bool || v.is_none();
    case 'L': return v.tag == Tag::IntList;
    case 'M': return v.tag == Tag::IntList || v.is_none();
    case 'D': return v.tag == Tag::DoubleList;
    case 'G': return v.tag == Tag::DoubleList || v.is_none();
    case 'E': return v.tag == Tag::BoolList;
    case 'Q': return v.tag == Tag::String;
    case 'R': return v.tag == Tag::String || v.is_none();
    case 'X': return v.tag == Tag::TensorList;
    case 'Y': return v.tag == Tag::OptionalTensorList;
    case '?': return true;
  }
  return false;
}

Error KernelRegistry::add(const char* name, const char* signature, KernelFn fn, DtypeMask dtypes,
                          DtypeMask out_dtypes) {
  if (name == nullptr || signature == nullptr || fn == nullptr) {
    return Error::make(ErrorCode::InvalidArgument, "kernel registration needs a name, a signature and a function");
  }
  int bars = 0;
  for (const char* c = signature; *c; ++c) {
    bars += *c == '|';
    if (std::strchr(kSignatureKinds, *c) == nullptr || bars > 1) {
      return Error::make(ErrorCode::InvalidArgument, "kernel %s: unknown signature character '%c' in \"%s\"", name,
                         *c, signature);
    }
  }
  if (find(name) != nullptr) {
    return Error::make(ErrorCode::InvalidArgument, "kernel %s is already registered", name);
  }
  if (size_ == kCapacity) {
    return Error::make(ErrorCode::OutOfMemory, "kernel registry is full (%zu kernels); cannot add %s", kCapacity,
                       name);
  }
  entries_[size_++] = KernelEntry{name, signature, fn, dtypes, out_dtypes};
  return Error::ok();
}

const KernelEntry* KernelRegistry::find(const char* name, size_t name_size) const {
  for (size_t i = 0; i < size_; ++i) {
    const char* candidate = entries_[i].name;
    if (std::strncmp(candidate, name, name_size) == 0 && candidate[name_size] == '\0') return &entries_[i];
  }
  return nullptr;
}

const KernelEntry* KernelRegistry::find(const char* name) const { return find(name, std::strlen(name)); }

}  // namespace etmlir
