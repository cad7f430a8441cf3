#include "engine/sampling/sampler.h"

#include <algorithm>
#include <cmath>
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

// No full sort unless top-p needs one: the weights exp((logit - max) / T) are computed in double in
// id order, top-k selects with nth_element, min-p is a threshold on the weights (the best weighs 1),
// and top-p sorts only what min-p and top-k kept.
int32_t Sampler::next(std::span<const float> logits) {
  if (params_.temperature <= 0.0) return argmax(logits);
  const float top = logits[static_cast<size_t>(argmax(logits))];
  std::vector<int32_t> ids;
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < logits.size()) {
    ids.resize(logits.size());
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
    auto better = [&](int32_t a, int32_t b) {
      const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
      return la > lb || (la == lb && a < b);
    };
    std::nth_element(ids.begin(), ids.begin() + params_.top_k - 1, ids.end(), better);
    ids.resize(static_cast<size_t>(params_.top_k));
    std::sort(ids.begin(), ids.end());  // back to id order
  }
  const size_t n = ids.empty() ? logits.size() : ids.size();
  auto id_at = [&](size_t i) { return ids.empty() ? static_cast<int32_t>(i) : ids[i]; };

  // Weights of the top-k candidates; `total` normalises them (min-p and top-p are relative to it).
  std::vector<double> weight(n);
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) {
    weight[i] = std::exp((static_cast<double>(logits[static_cast<size_t>(id_at(i))]) - top) / params_.temperature);
    total += weight[i];
  }
  std::vector<std::pair<double, int32_t>> kept;  // (weight, id) when min-p or top-p cut the candidates
  const bool cut = params_.min_p > 0.0 || params_.top_p < 1.0;
  if (cut) {
    for (size_t i = 0; i < n; ++i) {
      if (weight[i] >= params_.min_p) kept.emplace_back(weight[i], id_at(i));
    }
    if (params_.top_p < 1.0) {  // the smallest most-likely prefix whose mass reaches top_p
      std::sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
      double mass = 0.0;
      for (size_t i = 0; i < kept.size(); ++i) {
        mass += kept[i].first / total;
        if (mass >= params_.top_p) {
          kept.resize(i + 1);
          break;
        }
      }
    }
  }
  // The draw walks the candidates in order: ids ascending, or by weight after a top-p sort.
  if (!cut) {
    double target = uniform() * total;
    for (size_t i = 0; i < n; ++i) {
      target -= weight[i];
      if (target < 0.0) return id_at(i);
    }
    return id_at(n - 1);
  }
  double kept_total = 0.0;
  for (const auto& [w, id] : kept) kept_total += w;
  double target = uniform() * kept_total;
  for (const auto& [w, id] : kept) {
    target -= w;
    if (target < 0.0) return id;
  }
  return kept.back().second;
}

}  // namespace hippo::engine
