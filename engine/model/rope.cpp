#include "engine/model/rope.h"

#include "base/check.h"

#include <algorithm>
#include <cmath>

namespace hippo::engine {
namespace {

// transformers' YaRN correction range: the pair index whose wavelength completes `rotations` turns in
// the original context.
double correction_dim(double rotations, int64_t dim, double base, double max_positions) {
  return (static_cast<double>(dim) * std::log(max_positions / (rotations * 2.0 * M_PI))) / (2.0 * std::log(base));
}

}  // namespace

Rope::Rope(double theta, int64_t rope_dims, const RopeScaling* yarn) : rope_dims_(rope_dims) {
  HIPPO_CHECK(rope_dims >= 0 && rope_dims % 2 == 0 && rope_dims <= kMaxRopeDims, "RoPE dims must be even and at most 512");
  const int64_t pairs = rope_dims / 2;
  inv_freq_.resize(static_cast<size_t>(pairs));
  // base ** (arange(0, dim, 2).float() / dim) in float32, then reciprocals in float32.
  std::vector<float> pos_freq(static_cast<size_t>(pairs));
  for (int64_t i = 0; i < pairs; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(rope_dims);
    pos_freq[static_cast<size_t>(i)] = std::pow(static_cast<float>(theta), exponent);
  }
  if (yarn == nullptr) {
    for (int64_t i = 0; i < pairs; ++i) inv_freq_[static_cast<size_t>(i)] = 1.0f / pos_freq[static_cast<size_t>(i)];
    return;
  }
  const double max_positions = static_cast<double>(yarn->original_max_position_embeddings);
  double low = std::floor(correction_dim(yarn->beta_fast, rope_dims, theta, max_positions));
  double high = std::ceil(correction_dim(yarn->beta_slow, rope_dims, theta, max_positions));
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(rope_dims - 1));
  if (low == high) high += 0.001;  // avoid a zero-width ramp, as transformers does
  const float factor = static_cast<float>(yarn->factor);
  for (int64_t i = 0; i < pairs; ++i) {
    const float p = pos_freq[static_cast<size_t>(i)];
    const float extrapolation = 1.0f / p;
    const float interpolation = 1.0f / (factor * p);
    float ramp = (static_cast<float>(i) - static_cast<float>(low)) / (static_cast<float>(high) - static_cast<float>(low));
    ramp = std::clamp(ramp, 0.0f, 1.0f);
    const float keep = 1.0f - ramp;  // extrapolation factor
    inv_freq_[static_cast<size_t>(i)] = interpolation * (1.0f - keep) + extrapolation * keep;
  }
}

Rope Rope::main(const TextConfig& text) { return Rope(text.rope_theta, text.qk_rope_head_dim, nullptr); }

Rope Rope::compress(const TextConfig& text) {
  const bool yarn = text.rope_scaling.rope_type == "yarn";
  return Rope(text.compress_rope_theta, text.qk_rope_head_dim, yarn ? &text.rope_scaling : nullptr);
}

void Rope::angles(int64_t position, float* cos, float* sin) const {
  const float t = static_cast<float>(position);
  for (size_t i = 0; i < inv_freq_.size(); ++i) {
    const float angle = inv_freq_[i] * t;
    cos[i] = std::cos(angle);
    sin[i] = std::sin(angle);
  }
}

RopeAngles::RopeAngles(const Rope& rope, std::span<const int64_t> positions) : rope_dims_(rope.rope_dims()) {
  const size_t pairs = static_cast<size_t>(rope_dims_ / 2);
  cos_.resize(positions.size() * pairs);
  sin_.resize(positions.size() * pairs);
  for (size_t r = 0; r < positions.size(); ++r) rope.angles(positions[r], &cos_[r * pairs], &sin_[r * pairs]);
}

}  // namespace hippo::engine
