// Small scalar operations the forward pass's blocks share (internal to engine/model).
#pragma once

#include "kernels/cpu/vector_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
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

// The k best of `scores` (higher first, ties to the lower index), as indices in that order.
inline std::vector<int32_t> top_k(const float* scores, int64_t n, int64_t k) {
  std::vector<int32_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  auto better = [&](int32_t a, int32_t b) { return scores[a] > scores[b] || (scores[a] == scores[b] && a < b); };
  k = std::min(k, n);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), better);
  return std::vector<int32_t>(order.begin(), order.begin() + k);  // not the whole candidate range's capacity
}

}  // namespace hippo::engine::ops
