// Table rows (the token embedding, Engram's tables) and Engram's gated fusion into the streams.
#include "kernels/cpu/model_ops.h"

#include "kernels/ref/numeric_formats.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace hippo::kernels::cpu {

void gather_rows(const RowTable& table, const std::int64_t* ids, std::int64_t n, float* out) {
  const std::int64_t cols = table.cols;
  const auto* bytes = static_cast<const std::uint8_t*>(table.data);
  for (std::int64_t k = 0; k < n; ++k) {
    const std::int64_t row = ids[k];
    float* o = out + k * cols;
    for (std::int64_t i = 0; i < cols; ++i) {
      if (table.format == TableFormat::kFp8Row32) {
        o[i] = ref::e4m3fn_to_f32(bytes[row * cols + i]) * ref::e8m0_to_f32(table.scales[row * (cols / 32) + i / 32]);
      } else {
        std::uint16_t bits;
        std::memcpy(&bits, bytes + (row * cols + i) * 2, 2);
        o[i] = ref::bf16_to_f32(bits);
      }
    }
  }
}

void engram_fuse(float* streams, const float* kv, const float* gate_weight, std::int64_t rows, std::int64_t hc,
                 std::int64_t d, float eps) {
  const float inv_sqrt_d = static_cast<float>(std::pow(static_cast<double>(d), -0.5));
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* key_row = kv + r * (hc + 1) * d;
    const float* value = key_row + hc * d;
    for (std::int64_t i = 0; i < hc; ++i) {
      float* h = streams + (r * hc + i) * d;
      const float* key = key_row + i * d;
      const float* weight = gate_weight + i * d;
      float hh = 0.0f, kk = 0.0f, hk = 0.0f;
      for (std::int64_t j = 0; j < d; ++j) {
        hh += h[j] * h[j];
        kk += key[j] * key[j];
        hk += (h[j] * weight[j]) * key[j];
      }
      const float rstd = (1.0f / std::sqrt(hh / static_cast<float>(d) + eps)) * (1.0f / std::sqrt(kk / static_cast<float>(d) + eps));
      const float g = hk * rstd * inv_sqrt_d;
      const float gate = 1.0f / (1.0f + std::exp(-std::copysign(std::sqrt(std::max(std::fabs(g), 1e-6f)), g)));
      for (std::int64_t j = 0; j < d; ++j) h[j] = h[j] + gate * value[j];
    }
  }
}

}  // namespace hippo::kernels::cpu
