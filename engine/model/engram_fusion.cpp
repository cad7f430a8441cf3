// Engram fusion: gathered table rows -> keys and a value -> one gate per stream.
#include "engine/model/forward_pass.h"

#include "engine/model/forward_ops.h"
#include "engine/engram/engram_hash.h"
#include "kernels/ref/numeric_formats.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace hippo::engine {

using namespace ops;  // NOLINT: the shared scalar helpers of the forward pass

// Reference: DeepseekV41Engram.forward.
void ForwardPass::engram(const LayerWeights& lw) {
  const EngramHasher& hasher = *model_.engram_hasher_;
  const int64_t d = t_.hidden_size, hc = t_.hc_mult, hd = t_.engram_head_dim;
  const int64_t cols = hasher.rows_per_position();
  const int64_t layer_index =
      std::find(t_.engram_layer_ids.begin(), t_.engram_layer_ids.end(), lw.role.layer) - t_.engram_layer_ids.begin();
  const EngramWeights& ew = lw.engram;
  const auto* table = reinterpret_cast<const std::uint8_t*>(ew.table.bytes.data());
  const auto* scales = reinterpret_cast<const std::uint8_t*>(ew.table_scales.bytes.data());
  const bool fp8 = ew.table.spec->storage == Storage::kFp8Codes;

  std::vector<float> gathered(static_cast<size_t>(rows_ * cols * hd));
  for (int64_t r = 0; r < rows_; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t row = engram_rows_[static_cast<size_t>((r * hasher.n_layers() + layer_index) * cols + c)];
      float* out = &gathered[static_cast<size_t>((r * cols + c) * hd)];
      for (int64_t i = 0; i < hd; ++i) {
        if (fp8) {
          out[i] = kernels::ref::e4m3fn_to_f32(table[row * hd + i]) *
                   kernels::ref::e8m0_to_f32(scales[row * (hd / 32) + i / 32]);
        } else {
          std::uint16_t bits;
          std::memcpy(&bits, table + (row * hd + i) * 2, 2);
          out[i] = kernels::ref::bf16_to_f32(bits);
        }
      }
    }
  }
  std::vector<float> kv(static_cast<size_t>(rows_ * (hc + 1) * d));
  linear(gathered.data(), rows_, ew.wkv, kv.data());

  const float eps = static_cast<float>(t_.rms_norm_eps);
  const float inv_sqrt_d = static_cast<float>(std::pow(static_cast<double>(d), -0.5));
  for (int64_t r = 0; r < rows_; ++r) {
    const float* key_row = &kv[static_cast<size_t>(r * (hc + 1) * d)];
    const float* value = key_row + hc * d;
    for (int64_t i = 0; i < hc; ++i) {
      float* h = &streams_[static_cast<size_t>((r * hc + i) * d)];
      const float* key = key_row + i * d;
      const float* weight = &ew.gate_weight[static_cast<size_t>(i * d)];
      float hh = 0.0f, kk = 0.0f, hk = 0.0f;
      for (int64_t j = 0; j < d; ++j) {
        hh += h[j] * h[j];
        kk += key[j] * key[j];
        hk += (h[j] * weight[j]) * key[j];
      }
      const float rstd = (1.0f / std::sqrt(hh / static_cast<float>(d) + eps)) *
                         (1.0f / std::sqrt(kk / static_cast<float>(d) + eps));
      const float g = hk * rstd * inv_sqrt_d;
      const float gate = sigmoid(std::copysign(std::sqrt(std::max(std::fabs(g), 1e-6f)), g));
      for (int64_t j = 0; j < d; ++j) h[j] = h[j] + gate * value[j];
    }
  }
}

}  // namespace hippo::engine
