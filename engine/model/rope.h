// Rotary position embedding as the reference computes it (docs/reference-model.md D13): interleaved
// pairs (2i, 2i+1) of the trailing `rope_dims` channels rotated as complex numbers; inverse
// frequencies and angles in float32 exactly as transformers does, so that long positions agree.
//   main      rope_theta, plain (window-only layers)
//   compress  compress_rope_theta with YaRN (layers with a compressed branch, their compressed
//             entries, index queries and keys); no attention-magnitude factor.
#pragma once

#include "engine/config/model_config.h"

#include <cstdint>
#include <span>
#include <vector>

namespace hippo::engine {

class Rope {
 public:
  static constexpr int64_t kMaxRopeDims = 512;

  // rope_dims = qk_rope_head_dim; yarn selects the YaRN-scaled frequencies of `theta`.
  Rope(double theta, int64_t rope_dims, const RopeScaling* yarn);

  static Rope main(const TextConfig& text);
  static Rope compress(const TextConfig& text);

  int64_t rope_dims() const { return rope_dims_; }
  const std::vector<float>& inv_freq() const { return inv_freq_; }

  // The pair angles' cos and sin at `position` (rope_dims / 2 each), in float32 as transformers.
  void angles(int64_t position, float* cos, float* sin) const;

 private:
  int64_t rope_dims_;
  std::vector<float> inv_freq_;
};

// One Rope's cos and sin at a list of positions (the rows of a forward step), computed once and then
// applied to every head of every layer at those positions by the backend's rope op.
class RopeAngles {
 public:
  RopeAngles() = default;
  RopeAngles(const Rope& rope, std::span<const int64_t> positions);

  int64_t rope_dims() const { return rope_dims_; }
  // From positions[row] on, rope_dims / 2 per row.
  const float* cos(int64_t row) const { return cos_.data() + row * (rope_dims_ / 2); }
  const float* sin(int64_t row) const { return sin_.data() + row * (rope_dims_ / 2); }

 private:
  int64_t rope_dims_ = 0;
  std::vector<float> cos_, sin_;  // [rows, rope_dims / 2]
};

}  // namespace hippo::engine
