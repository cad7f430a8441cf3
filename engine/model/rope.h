// Rotary position embedding as the reference computes it (docs/reference-model.md D13): interleaved
// pairs (2i, 2i+1) of the trailing `rope_dims` channels rotated as complex numbers; inverse
// frequencies and angles in float32 exactly as transformers does, so that long positions agree.
//   main      rope_theta, plain (window-only layers)
//   compress  compress_rope_theta with YaRN (layers with a compressed branch, their compressed
//             entries, index queries and keys); no attention-magnitude factor.
#pragma once

#include "engine/config/model_config.h"

#include <cstdint>
#include <vector>

namespace hippo::engine {

class Rope {
 public:
  // rope_dims = qk_rope_head_dim; yarn selects the YaRN-scaled frequencies of `theta`.
  Rope(double theta, int64_t rope_dims, const RopeScaling* yarn);

  static Rope main(const TextConfig& text);
  static Rope compress(const TextConfig& text);

  int64_t rope_dims() const { return rope_dims_; }
  const std::vector<float>& inv_freq() const { return inv_freq_; }

  // Rotates the last rope_dims channels of x[0, dim) for `position`; inverse rotates by -angle.
  void apply(float* x, int64_t dim, int64_t position, bool inverse = false) const;

 private:
  int64_t rope_dims_;
  std::vector<float> inv_freq_;
};

}  // namespace hippo::engine
