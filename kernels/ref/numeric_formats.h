// The weight number formats of DeepSeek-V4.1 checkpoints, decoded exactly to float
// (deepseek-v41-architecture.md §4.3). These scalar decoders are the source of truth that every
// SIMD or GPU decoder is tested against.
//
//   BF16      the upper 16 bits of an IEEE float
//   E8M0      (UE8M0) a power of two: 2^(byte - 127); byte 255 is NaN
//   E4M3FN    FP8: sign, 4 exponent bits (bias 7), 3 mantissa bits; subnormals; 0x7F/0xFF are NaN; no infinity
//   E2M1      FP4: sign (bit 3) and a magnitude code 0..7 -> {0, 0.5, 1, 1.5, 2, 3, 4, 6}
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace hippo::kernels::ref {

inline float bf16_to_f32(std::uint16_t bits) { return std::bit_cast<float>(std::uint32_t{bits} << 16); }

// Round to nearest, ties to even; NaN stays a (quiet) NaN with its sign.
inline std::uint16_t f32_to_bf16(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if (std::isnan(value)) return static_cast<std::uint16_t>((bits >> 16) | 0x40);
  const std::uint32_t rounding = 0x7FFF + ((bits >> 16) & 1);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

inline float e8m0_to_f32(std::uint8_t byte) {
  if (byte == 0xFF) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, int{byte} - 127);  // exact: 2^-127 is a float subnormal, 2^127 the largest power
}

inline float e4m3fn_to_f32(std::uint8_t byte) {
  const bool negative = byte & 0x80;
  const int exponent = (byte >> 3) & 0xF;
  const int mantissa = byte & 0x7;
  float magnitude;
  if (exponent == 0xF && mantissa == 0x7)
    magnitude = std::numeric_limits<float>::quiet_NaN();
  else if (exponent == 0)
    magnitude = std::ldexp(static_cast<float>(mantissa), -9);  // subnormal: mantissa/8 * 2^(1-7)
  else
    magnitude = std::ldexp(static_cast<float>(8 + mantissa), exponent - 10);  // (1 + m/8) * 2^(e-7)
  return negative ? -magnitude : magnitude;
}

inline float e2m1_to_f32(std::uint8_t nibble) {
  static constexpr float kMagnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float magnitude = kMagnitudes[nibble & 0x7];
  return (nibble & 0x8) ? -magnitude : magnitude;
}

// Round to nearest, ties to even, onto the E4M3FN grid (torch's float -> float8_e4m3fn cast). The
// caller keeps |value| <= 448 (the QAT quantisers clamp first); larger magnitudes are a bug.
inline std::uint8_t f32_to_e4m3fn(float value) {
  const std::uint8_t sign = std::signbit(value) ? 0x80 : 0x00;
  const float magnitude = std::fabs(value);
  if (magnitude < 0x1p-6f) {  // subnormal range: multiples of 2^-9 (code 8 = 2^-6 is the smallest normal)
    return static_cast<std::uint8_t>(sign | static_cast<std::uint8_t>(std::nearbyint(magnitude * 0x1p9f)));
  }
  int exponent = 0;
  const float fraction = std::frexp(magnitude, &exponent);  // magnitude = fraction * 2^exponent, fraction in [0.5, 1)
  int mantissa = static_cast<int>(std::nearbyint((fraction * 2.0f - 1.0f) * 8.0f));  // exact product, RNE
  int biased = exponent - 1 + 7;
  if (mantissa == 8) {
    mantissa = 0;
    ++biased;
  }
  return static_cast<std::uint8_t>(sign | (biased << 3) | mantissa);
}

}  // namespace hippo::kernels::ref
