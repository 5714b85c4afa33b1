// IEEE binary16 and bfloat16 <-> float conversions, header-only: the portable kernels (which load
// to float, compute, and round back, as PyTorch's CPU kernels do), the runtime core (bundled test
// cases compare half outputs) and the tools share these.
//
// float -> half and float -> bfloat16 round to nearest even; NaN stays NaN, overflow becomes inf.
#pragma once

#include <cstdint>

namespace etmlir {

inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1fu) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf / NaN
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal: normalize
    int e = -1;
    uint32_t m = mant;
    do {
      ++e;
      m <<= 1;
    } while ((m & 0x400u) == 0);
    bits = sign | (static_cast<uint32_t>(112 - e) << 23) | ((m & 0x3ffu) << 13);
  }
  return __builtin_bit_cast(float, bits);
}

inline uint16_t float_to_half(float f) {
  const uint32_t x = __builtin_bit_cast(uint32_t, f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u));
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (a < 0x38800000u) {  // below the smallest normal half: subnormal or zero
    if (a < 0x33000000u) return sign;  // < 2^-25 rounds to 0
    const uint32_t e = a >> 23;
    const uint32_t m = (a & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - e;  // 14..24
    uint32_t v = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (v & 1u))) ++v;
    return static_cast<uint16_t>(sign | v);
  }
  uint32_t v = a - 0x38000000u;  // rebias 127 -> 15 (exponent field)
  const uint32_t rem = v & 0x1fffu;
  v >>= 13;
  if (rem > 0x1000u || (rem == 0x1000u && (v & 1u))) ++v;
  return static_cast<uint16_t>(sign | v);
}

inline float bfloat16_to_float(uint16_t b) { return __builtin_bit_cast(float, static_cast<uint32_t>(b) << 16); }

inline uint16_t float_to_bfloat16(float f) {
  const uint32_t x = __builtin_bit_cast(uint32_t, f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace etmlir
