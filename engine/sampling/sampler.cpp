#include "engine/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace hippo::engine {

int32_t argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
  }
  return best;
}

double Sampler::uniform() { return static_cast<double>(generator_() >> 11) * 0x1p-53; }

int32_t Sampler::next(std::span<const float> logits) {
  if (params_.temperature <= 0.0) return argmax(logits);
  // Candidates sorted by logit (ties: lower id first), cut by top-k.
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  const size_t k = params_.top_k > 0 ? std::min(order.size(), static_cast<size_t>(params_.top_k)) : order.size();
  auto better = [&](int32_t a, int32_t b) { return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)] || (logits[static_cast<size_t>(a)] == logits[static_cast<size_t>(b)] && a < b); };
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(), better);
  order.resize(k);
  // Softmax at the temperature, in double.
  std::vector<double> p(k);
  const double top = logits[static_cast<size_t>(order[0])];
  double sum = 0.0;
  for (size_t i = 0; i < k; ++i) {
    p[i] = std::exp((logits[static_cast<size_t>(order[i])] - top) / params_.temperature);
    sum += p[i];
  }
  for (double& x : p) x /= sum;
  // min-p, then top-p (the smallest prefix whose mass reaches top_p).
  size_t keep = k;
  if (params_.min_p > 0.0) {
    while (keep > 1 && p[keep - 1] < params_.min_p * p[0]) --keep;
  }
  if (params_.top_p < 1.0) {
    double mass = 0.0;
    for (size_t i = 0; i < keep; ++i) {
      mass += p[i];
      if (mass >= params_.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  double total = 0.0;
  for (size_t i = 0; i < keep; ++i) total += p[i];
  double target = uniform() * total;
  for (size_t i = 0; i < keep; ++i) {
    target -= p[i];
    if (target < 0.0) return order[i];
  }
  return order[keep - 1];
}

}  // namespace hippo::engine
