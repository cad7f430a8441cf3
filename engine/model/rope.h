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

  // Rotates the last rope_dims channels of x[0, dim) for `position`; inverse rotates by -angle.
  void apply(float* x, int64_t dim, int64_t position, bool inverse = false) const;

  // The pair angles' cos and sin at `position`, as apply computes them (rope_dims / 2 each).
  void angles(int64_t position, float* cos, float* sin) const;

  // Rotates the last rope_dims channels of `count` vectors x + k·dim (k < count) by the angles that
  // `angles` gave; the same arithmetic as apply.
  static void rotate(float* x, int64_t count, int64_t dim, int64_t rope_dims, const float* cos, const float* sin,
                     bool inverse);

 private:
  int64_t rope_dims_;
  std::vector<float> inv_freq_;
};

// One Rope's cos and sin at a list of positions (the rows of a forward step), computed once and then
// applied to every head of every layer at those positions, with the bits Rope::apply gives.
class RopeAngles {
 public:
  RopeAngles() = default;
  RopeAngles(const Rope& rope, std::span<const int64_t> positions);

  // Rotates `count` vectors x + k·dim at positions[row]; inverse rotates by -angle.
  void apply(float* x, int64_t count, int64_t dim, int64_t row, bool inverse = false) const;

 private:
  int64_t rope_dims_ = 0;
  std::vector<float> cos_, sin_;  // [rows, rope_dims / 2]
};

}  // namespace hippo::engine
