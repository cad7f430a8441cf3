// The number formats of the weights and the session's entries, decoded and encoded on the device
// exactly as kernels/ref/numeric_formats.h and kernels/ref/ref_backend.cpp do on the host (the
// tests compare them bit for bit).
#pragma once

#include "kernels/cuda/gpu_runtime.h"

#include <cstdint>

namespace hippo::kernels::cuda {

__device__ __forceinline__ float bf16_to_f32(std::uint16_t bits) { return __uint_as_float(std::uint32_t{bits} << 16); }

__device__ __forceinline__ float e8m0_to_f32(std::uint8_t byte) {
  if (byte == 0xFF) return __uint_as_float(0x7FC00000u);
  // 2^(byte - 127): a normal float's exponent field, or for byte 0 the subnormal 2^-127.
  return byte == 0 ? __uint_as_float(0x00400000u) : __uint_as_float(std::uint32_t{byte} << 23);
}

__device__ __forceinline__ float e4m3fn_to_f32(std::uint8_t byte) {
  const int exponent = (byte >> 3) & 0xF, mantissa = byte & 0x7;
  float magnitude;
  if (exponent == 0xF && mantissa == 0x7)
    magnitude = __uint_as_float(0x7FC00000u);
  else if (exponent == 0)
    magnitude = static_cast<float>(mantissa) * 0x1p-9f;
  else
    magnitude = ldexpf(static_cast<float>(8 + mantissa), exponent - 10);
  return (byte & 0x80) ? -magnitude : magnitude;
}

__device__ __forceinline__ float e2m1_to_f32(std::uint8_t nibble) {
  const std::uint8_t code = nibble & 0x7;
  const float magnitude = code < 4 ? 0.5f * code : (code == 4 ? 2.0f : (code == 5 ? 3.0f : (code == 6 ? 4.0f : 6.0f)));
  return (nibble & 0x8) ? -magnitude : magnitude;
}

// Round to nearest, ties to even, onto the E4M3FN grid; |value| <= 448.
__device__ __forceinline__ std::uint8_t f32_to_e4m3fn(float value) {
  const std::uint8_t sign = signbit(value) ? 0x80 : 0x00;
  const float magnitude = fabsf(value);
  if (magnitude < 0x1p-6f) return static_cast<std::uint8_t>(sign | static_cast<std::uint8_t>(rintf(magnitude * 0x1p9f)));
  int exponent = 0;
  const float fraction = frexpf(magnitude, &exponent);
  int mantissa = static_cast<int>(rintf((fraction * 2.0f - 1.0f) * 8.0f));
  int biased = exponent - 1 + 7;
  if (mantissa == 8) {
    mantissa = 0;
    ++biased;
  }
  return static_cast<std::uint8_t>(sign | (biased << 3) | mantissa);
}

// The UE8M0 byte of 2^ceil(log2(t)), t > 0: the exponent field, plus one when a mantissa bit is set.
__device__ __forceinline__ std::uint8_t e8m0_pow2_ceil(float t) {
  const std::uint32_t bits = __float_as_uint(t);
  return static_cast<std::uint8_t>(((bits >> 23) & 0xFF) + ((bits & 0x7FFFFF) != 0 ? 1 : 0));
}

// The E2M1 code nearest to q (|q| <= 6), ties to the even code; the sign, also of -0, in bit 3.
__device__ __forceinline__ std::uint8_t e2m1_nearest(float q) {
  const double magnitude = fabs(static_cast<double>(q));
  int best = 0;
  double best_distance = 1e300;
  for (int code = 0; code < 8; ++code) {
    const double distance = fabs(magnitude - static_cast<double>(e2m1_to_f32(static_cast<std::uint8_t>(code))));
    if (distance < best_distance || (distance == best_distance && code % 2 == 0)) {
      best = code;
      best_distance = distance;
    }
  }
  return static_cast<std::uint8_t>(best | (signbit(q) ? 0x8 : 0x0));
}

}  // namespace hippo::kernels::cuda
