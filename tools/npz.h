// A small reader for NumPy's .npy and .npz files, for et-run's --inputs.
//
//   etmlir::tools::NpzFile npz;
//   if (etmlir::Error e = etmlir::tools::read_npz("inputs.npz", &npz)) { ... e.message() ... }
//   for (const NpyArray& a : npz.arrays) use(a.name, a.dtype, a.shape, a.data, a.nbytes);
//
// What it reads: an .npz written by np.savez (a zip of "<key>.npy" entries
// stored without compression, ZIP64 extra fields included, which numpy always
// writes) or a single .npy file. Each .npy must be format version 1, 2 or 3,
// little-endian (or byte-sized) with descr '<f4' '<f8' '<f2' '<i8' '<i4' '<i2'
// '|i1' '|u1' '|b1', fortran_order False. np.savez_compressed's deflated
// entries are refused with "compressed npz is not supported, use np.savez".
//
// Every offset and size read from the file is checked before it is used, and
// each entry's CRC-32 is verified: a malformed file gives an Error naming the
// file and what is wrong, never a crash or an out-of-bounds read.
//
// NpzFile owns the file's bytes; each NpyArray's `data` points into them (not
// aligned: copy before handing it to a kernel).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "etmlir/runtime/error.h"
#include "etmlir/runtime/tensor.h"

namespace etmlir {
namespace tools {

struct NpyArray {
  std::string name;  // the npz key ("arr_0" for "arr_0.npy"), or the .npy file's path
  ScalarType dtype = ScalarType::Float;
  std::vector<int64_t> shape;  // empty for a 0-d array
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
};

struct NpzFile {
  NpzFile() = default;
  NpzFile(const NpzFile&) = delete;
  NpzFile& operator=(const NpzFile&) = delete;
  ~NpzFile() { std::free(bytes); }
  uint8_t* bytes = nullptr;      // the whole file (malloc'ed: a file too large for memory is an Error, not an abort)
  size_t size = 0;
  std::vector<NpyArray> arrays;  // in the zip's central-directory order
};

// Reads `path` (an .npz, or an .npy recognised by its magic) into `out`.
Error read_npz(const char* path, NpzFile* out);

// Parses `size` bytes of an .npz (or .npy) already in memory; `label` names
// it in messages. The arrays point into `data`, which must outlive them.
Error parse_npz(const uint8_t* data, size_t size, const char* label, std::vector<NpyArray>* arrays);

// Parses one .npy image (`name` goes in messages and into the result).
Error parse_npy(const uint8_t* data, size_t size, const char* name, NpyArray* out);

// Orders arrays for a method's inputs: when every key is arr_<N> (np.savez(f,
// *arrays)) by N, otherwise by key in byte order. Stable, so a duplicate key
// keeps file order.
void sort_for_inputs(std::vector<NpyArray>* arrays);

}  // namespace tools
}  // namespace etmlir
