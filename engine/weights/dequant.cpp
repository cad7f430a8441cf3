// Exact scalar decoders; std::ldexp scales by powers of two without rounding.
#include "engine/weights/dequant.h"

#include "base/check.h"

#include <bit>
#include <cmath>
#include <limits>

namespace hippo::engine {

float bf16_to_float(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

uint16_t float_to_bf16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  if (std::isnan(value)) return static_cast<uint16_t>((bits >> 16) | 0x40);  // keep sign, force a quiet NaN
  uint32_t rounding = 0x7fff + ((bits >> 16) & 1);                           // ties to even
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float e4m3_to_float(uint8_t code) {
  const bool negative = (code & 0x80) != 0;
  const int exponent = (code >> 3) & 0xf;
  const int mantissa = code & 0x7;
  float magnitude;
  if (exponent == 0xf && mantissa == 0x7) {
    magnitude = std::numeric_limits<float>::quiet_NaN();
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -9);  // subnormal: m/8 * 2^(1-7)
  } else {
    magnitude = std::ldexp(static_cast<float>(8 + mantissa), exponent - 7 - 3);  // (1 + m/8) * 2^(e-7)
  }
  return negative ? -magnitude : magnitude;
}

float e8m0_to_float(uint8_t code) {
  if (code == 0xff) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, static_cast<int>(code) - 127);
}

float e2m1_to_float(uint8_t nibble) {
  // Magnitude codes 0..7 in units of 0.5: 0, 1, 2, 3, 4, 6, 8, 12.
  static constexpr int kHalves[8] = {0, 1, 2, 3, 4, 6, 8, 12};
  const float magnitude = static_cast<float>(kHalves[nibble & 0x7]) * 0.5f;
  return (nibble & 0x8) != 0 ? -magnitude : magnitude;
}

void dequantize_fp8(std::span<const uint8_t> codes, std::span<const uint8_t> scales, int64_t rows, int64_t cols,
                    int64_t block_rows, int64_t block_cols, std::span<float> out) {
  HIPPO_CHECK(block_rows > 0 && block_cols > 0, "dequantize_fp8: block sizes must be positive");
  const int64_t scale_rows = (rows + block_rows - 1) / block_rows;
  const int64_t scale_cols = (cols + block_cols - 1) / block_cols;
  HIPPO_CHECK(static_cast<int64_t>(codes.size()) == rows * cols, "dequantize_fp8: codes size");
  HIPPO_CHECK(static_cast<int64_t>(scales.size()) == scale_rows * scale_cols, "dequantize_fp8: scales size");
  HIPPO_CHECK(static_cast<int64_t>(out.size()) == rows * cols, "dequantize_fp8: output size");
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* scale_row = scales.data() + (r / block_rows) * scale_cols;
    for (int64_t c = 0; c < cols; ++c)
      out[static_cast<size_t>(r * cols + c)] =
          e4m3_to_float(codes[static_cast<size_t>(r * cols + c)]) * e8m0_to_float(scale_row[c / block_cols]);
  }
}

void dequantize_fp4(std::span<const uint8_t> packed, std::span<const uint8_t> scales, int64_t rows, int64_t cols,
                    std::span<float> out) {
  HIPPO_CHECK(cols % kFp4BlockSize == 0, "dequantize_fp4: cols must be a multiple of 32");
  HIPPO_CHECK(static_cast<int64_t>(packed.size()) * 2 == rows * cols, "dequantize_fp4: packed size");
  HIPPO_CHECK(static_cast<int64_t>(scales.size()) * kFp4BlockSize == rows * cols, "dequantize_fp4: scales size");
  HIPPO_CHECK(static_cast<int64_t>(out.size()) == rows * cols, "dequantize_fp4: output size");
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < cols; ++k) {
      const uint8_t byte = packed[static_cast<size_t>((r * cols + k) / 2)];
      const uint8_t nibble = (k % 2 == 0) ? (byte & 0xf) : (byte >> 4);
      const float scale = e8m0_to_float(scales[static_cast<size_t>((r * cols + k) / kFp4BlockSize)]);
      out[static_cast<size_t>(r * cols + k)] = e2m1_to_float(nibble) * scale;
    }
  }
}

}  // namespace hippo::engine
