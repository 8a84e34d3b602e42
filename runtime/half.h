// 16-bit floating-point storage types: IEEE binary16 (Half) and bfloat16 (BFloat16).
// Arithmetic happens in float; conversion from float rounds to nearest, ties to even, and
// keeps NaN a NaN (quiet) and ±Inf an infinity.
#pragma once

#include <bit>
#include <cstdint>

namespace kiln {

/// float → binary16 bits, round to nearest even; overflow gives ±Inf, underflow denormals.
constexpr uint16_t float_to_half_bits(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) // Inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u |
                                 (abs > 0x7f800000u ? 0x200u | ((abs >> 13) & 0x3ffu) : 0u));
  if (abs >= 0x477ff000u) // rounds to >= 65520: overflow to Inf
    return static_cast<uint16_t>(sign | 0x7c00u);
  if (abs < 0x38800000u) { // below the smallest normal half (2^-14): denormal or zero
    // The half denormal is round(f / 2^-24) = round(mant * 2^(e - 126)).
    uint32_t e = abs >> 23;
    if (e < 102) return static_cast<uint16_t>(sign); // below half of the smallest denormal
    uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e; // 14..24
    uint32_t res = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (res & 1u))) ++res;
    return static_cast<uint16_t>(sign | res);
  }
  // Normal: rebias exponent 127 → 15, round the 13 dropped bits to nearest even.
  uint32_t res = ((abs - 0x38000000u) >> 13);
  uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (res & 1u))) ++res;
  return static_cast<uint16_t>(sign | res);
}

/// binary16 bits → float (exact).
constexpr float half_bits_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else { // denormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | (static_cast<uint32_t>(112 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

/// float → bfloat16 bits, round to nearest even; NaN stays a quiet NaN.
constexpr uint16_t float_to_bf16_bits(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

constexpr float bf16_bits_to_float(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

struct Half {
  uint16_t bits = 0;
  constexpr Half() = default;
  constexpr Half(float f) : bits(float_to_half_bits(f)) {} // NOLINT(google-explicit-constructor)
  static constexpr Half from_bits(uint16_t b) {
    Half h;
    h.bits = b;
    return h;
  }
  constexpr operator float() const { return half_bits_to_float(bits); } // NOLINT
};

struct BFloat16 {
  uint16_t bits = 0;
  constexpr BFloat16() = default;
  constexpr BFloat16(float f)
      : bits(float_to_bf16_bits(f)) {} // NOLINT(google-explicit-constructor)
  static constexpr BFloat16 from_bits(uint16_t b) {
    BFloat16 h;
    h.bits = b;
    return h;
  }
  constexpr operator float() const { return bf16_bits_to_float(bits); } // NOLINT
};

} // namespace kiln
