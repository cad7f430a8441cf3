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

// The k best of `scores` (higher first, ties to the lower index), as indices in that order. The
// order is total, so the answer is unique: small k keeps a sorted list of the best so far (one
// compare for most entries), larger k selects then sorts.
inline std::vector<int32_t> top_k(const float* scores, int64_t n, int64_t k) {
  auto better = [&](int32_t a, int32_t b) { return scores[a] > scores[b] || (scores[a] == scores[b] && a < b); };
  k = std::max<int64_t>(0, std::min(k, n));
  std::vector<int32_t> best;
  if (k <= 32) {
    if (k == 0) return best;
    best.reserve(static_cast<size_t>(k));
    // Once k are held, entry i (after all of them) is better than the k-th only with a higher score.
    float kth = 0.0f;
    for (int32_t i = 0; i < static_cast<int32_t>(n); ++i) {
      const bool full = static_cast<int64_t>(best.size()) == k;
      if (full) {
        if (!(scores[i] > kth)) continue;
        best.pop_back();
      }
      size_t p = best.size();
      best.push_back(i);
      for (; p > 0 && better(i, best[p - 1]); --p) best[p] = best[p - 1];
      best[p] = i;
      if (static_cast<int64_t>(best.size()) == k) kth = scores[best.back()];
    }
    return best;
  }
  best.resize(static_cast<size_t>(n));
  std::iota(best.begin(), best.end(), 0);
  std::nth_element(best.begin(), best.begin() + (k - 1), best.end(), better);
  best.resize(static_cast<size_t>(k));
  std::sort(best.begin(), best.end(), better);
  best.shrink_to_fit();  // not the whole candidate range's capacity
  return best;
}

}  // namespace hippo::engine::ops
