// Small scalar operations the forward pass's blocks share (internal to engine/model).
#pragma once

#include "kernels/cpu/vector_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace hippo::engine::ops {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// RMSNorm of one vector: weight * (x * rsqrt(mean(x²) + eps)); weight may be null (unweighted).
inline void rms_norm(const float* x, int64_t n, const float* weight, float eps, float* out) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += x[i] * x[i];
  const float r = 1.0f / std::sqrt(sum / static_cast<float>(n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = weight != nullptr ? weight[i] * (x[i] * r) : x[i] * r;
}

inline void rms_norm_rows(std::vector<float>& x, int64_t rows, int64_t n, const std::vector<float>& weight, float eps) {
  for (int64_t r = 0; r < rows; ++r) rms_norm(&x[r * n], n, weight.data(), eps, &x[r * n]);
}

inline float dot(const float* a, const float* b, int64_t n) { return kernels::cpu::dot(a, b, n); }

// The k best of `scores` (higher first, ties to the lower index), as indices in that order. The
// order is total, so the answer is unique: a heap holds the best k so far, its worst on top, and
// entries come in index order, so a later entry displaces the worst only with a higher score.
inline std::vector<int32_t> top_k(const float* scores, int64_t n, int64_t k) {
  auto better = [&](int32_t a, int32_t b) { return scores[a] > scores[b] || (scores[a] == scores[b] && a < b); };
  k = std::max<int64_t>(0, std::min(k, n));
  std::vector<int32_t> best;
  best.reserve(static_cast<size_t>(k));
  if (k == 0) return best;
  int32_t i = 0;
  for (; i < static_cast<int32_t>(k); ++i) best.push_back(i);
  std::make_heap(best.begin(), best.end(), better);
  float worst = scores[best.front()];
  for (; i < static_cast<int32_t>(n); ++i) {
    if (!(scores[i] > worst)) continue;
    std::pop_heap(best.begin(), best.end(), better);
    best.back() = i;
    std::push_heap(best.begin(), best.end(), better);
    worst = scores[best.front()];
  }
  std::sort_heap(best.begin(), best.end(), better);
  return best;
}

}  // namespace hippo::engine::ops
