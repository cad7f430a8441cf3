#include "engine/sampling/sampler.h"

#include "kernels/cpu/vector_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace hippo::engine {

namespace {

// In independent lanes, which the compiler vectorises (one running maximum would make every step
// wait for the previous compare).
float max_value(std::span<const float> values) {
  constexpr size_t kLanes = 16;
  float lane_max[kLanes];
  std::fill(lane_max, lane_max + kLanes, -std::numeric_limits<float>::infinity());
  size_t i = 0;
  for (; i + kLanes <= values.size(); i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) lane_max[j] = std::max(lane_max[j], values[i + j]);
  }
  float best = *std::max_element(lane_max, lane_max + kLanes);
  for (; i < values.size(); ++i) best = std::max(best, values[i]);
  return best;
}

}  // namespace

int32_t argmax(std::span<const float> logits) {
  const auto found = std::find(logits.begin(), logits.end(), max_value(logits));
  return found == logits.end() ? 0 : static_cast<int32_t>(found - logits.begin());  // all NaN: 0
}

// 63 bits: a drawn seed is reported to clients, and OpenAI's `seed` is a signed 64-bit integer.
uint64_t Sampler::random_seed() {
  std::random_device device;
  return ((static_cast<uint64_t>(device()) << 32) ^ device()) >> 1;
}

double Sampler::uniform() { return static_cast<double>(generator_() >> 11) * 0x1p-53; }

// No full sort unless top-p needs one: the weights exp((logit - max) / T) are computed in id order,
// top-k selects with nth_element, min-p is a threshold on the weights (the best weighs 1), and
// top-p sorts only what min-p and top-k kept.
int32_t Sampler::next(std::span<const float> logits) {
  if (params_.temperature <= 0.0) return argmax(logits);
  const float top = max_value(logits);
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

  // Weights of the top-k candidates, in single precision by a vectorised exp (this runs over the
  // whole vocabulary per token), with their sums per block of kExpBlock so that the draw can skip
  // whole blocks. `total` normalises them (min-p and top-p are relative to it).
  std::vector<float>& weight = weights_;
  weight.resize(n);
  const float* candidate_logits = logits.data();
  if (!ids.empty()) {
    for (size_t i = 0; i < n; ++i) weight[i] = logits[static_cast<size_t>(ids[i])];
    candidate_logits = weight.data();
  }
  constexpr auto kBlock = static_cast<size_t>(kernels::cpu::kExpBlock);
  block_totals_.resize((n + kBlock - 1) / kBlock);
  kernels::cpu::exp_block_sums(candidate_logits, top, static_cast<float>(1.0 / params_.temperature), weight.data(),
                               static_cast<int64_t>(n), block_totals_.data());
  double total = 0.0;
  for (const float block_total : block_totals_) total += block_total;
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
  // The draw walks the candidates in order: ids ascending, or by weight after a top-p sort. The last
  // candidate with weight takes what rounding leaves of the target.
  if (!cut) {
    double target = uniform() * total;
    size_t b = 0;
    while (b + 1 < block_totals_.size() && target >= block_totals_[b]) target -= block_totals_[b++];
    for (size_t i = b * kBlock; i < n; ++i) {
      target -= weight[i];
      if (target < 0.0) return id_at(i);
    }
    size_t last = n - 1;
    while (last > 0 && weight[last] <= 0.0f) --last;
    return id_at(last);
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
