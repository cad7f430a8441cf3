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

// The k best of a sequence of scores fed in index order (higher first, ties to the lower index).
// The order is total, so the answer is unique: a heap holds the best k so far, its worst on top, and
// entries come in index order, so a later entry displaces the worst only with a higher score. Fed
// in pieces (the indexer's key tiles), it keeps exactly what top_k() over the whole array picks.
class StreamingTopK {
 public:
  explicit StreamingTopK(int64_t k) : k_(std::max<int64_t>(0, k)) { best_.reserve(static_cast<size_t>(k_)); }

  void push(int32_t index, float score) {
    if (static_cast<int64_t>(best_.size()) < k_) {
      best_.push_back({score, index});
      if (static_cast<int64_t>(best_.size()) == k_) std::make_heap(best_.begin(), best_.end(), better);
      return;
    }
    if (k_ == 0 || !(score > best_.front().score)) return;
    std::pop_heap(best_.begin(), best_.end(), better);
    best_.back() = {score, index};
    std::push_heap(best_.begin(), best_.end(), better);
  }

  // The picks, best first, with their scores; the object is spent.
  struct Entry {
    float score;
    int32_t index;
  };
  std::vector<Entry> take() {
    if (static_cast<int64_t>(best_.size()) == k_) std::sort_heap(best_.begin(), best_.end(), better);
    else std::sort(best_.begin(), best_.end(), better);  // fewer than k fed: all of them, in order
    return std::move(best_);
  }

 private:
  static bool better(const Entry& a, const Entry& b) { return a.score > b.score || (a.score == b.score && a.index < b.index); }
  int64_t k_;
  std::vector<Entry> best_;
};

// The k best of `scores` (higher first, ties to the lower index), as indices in that order.
inline std::vector<int32_t> top_k(const float* scores, int64_t n, int64_t k) {
  StreamingTopK best(std::min(k, n));
  for (int32_t i = 0; i < static_cast<int32_t>(n); ++i) best.push(i, scores[i]);
  std::vector<int32_t> out;
  for (const StreamingTopK::Entry& e : best.take()) out.push_back(e.index);
  return out;
}

}  // namespace hippo::engine::ops
