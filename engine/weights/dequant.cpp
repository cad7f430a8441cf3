// Whole-tensor dequantisation through the exact scalar decoders of kernels/ref.
#include "engine/weights/dequant.h"

#include "base/check.h"
#include "kernels/ref/numeric_formats.h"


namespace hippo::engine {

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
          kernels::ref::e4m3fn_to_f32(codes[static_cast<size_t>(r * cols + c)]) * kernels::ref::e8m0_to_f32(scale_row[c / block_cols]);
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
      const float scale = kernels::ref::e8m0_to_f32(scales[static_cast<size_t>((r * cols + k) / kFp4BlockSize)]);
      out[static_cast<size_t>(r * cols + k)] = kernels::ref::e2m1_to_f32(nibble) * scale;
    }
  }
}

}  // namespace hippo::engine
