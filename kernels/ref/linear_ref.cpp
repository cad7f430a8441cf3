#include "kernels/ref/linear_ref.h"

#include "kernels/ref/numeric_formats.h"

#include <cstring>

namespace hippo::kernels::ref {

float weight_at(const WeightView& w, std::int64_t row, std::int64_t col) {
  const auto* bytes = static_cast<const std::uint8_t*>(w.data);
  switch (w.format) {
    case WeightFormat::kF32:
      return static_cast<const float*>(w.data)[row * w.cols + col];
    case WeightFormat::kBF16:
      return bf16_to_f32(static_cast<const std::uint16_t*>(w.data)[row * w.cols + col]);
    case WeightFormat::kFp8Block: {
      const std::int64_t scale_cols = (w.cols + w.block - 1) / w.block;
      const float scale = e8m0_to_f32(w.scales[(row / w.block) * scale_cols + col / w.block]);
      return e4m3fn_to_f32(bytes[row * w.cols + col]) * scale;
    }
    case WeightFormat::kFp4Row32: {
      const float scale = e8m0_to_f32(w.scales[row * fp4_scale_stride(w) + col / 32]);
      return e2m1_to_f32(fp4_code(w, row, col)) * scale;
    }
  }
  return 0.0f;
}

void linear(const float* x, std::int64_t m, const WeightView& w, float* y) {
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t r = 0; r < w.rows; ++r) {
      double sum = 0.0;
      for (std::int64_t c = 0; c < w.cols; ++c) sum += double{x[i * w.cols + c]} * double{weight_at(w, r, c)};
      y[i * w.rows + r] = static_cast<float>(sum);
    }
  }
}

}  // namespace hippo::kernels::ref
