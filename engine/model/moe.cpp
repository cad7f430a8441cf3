// The MoE block: router, routed experts in expert order, the shared expert.
#include "engine/model/forward_pass.h"

#include "engine/model/forward_ops.h"
#include "kernels/cpu/attention_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace hippo::engine {

using namespace ops;  // NOLINT: the shared scalar helpers of the forward pass

// Reference: DeepseekV41SparseMoeBlock, DeepseekV41TopKRouter, DeepseekV41Expert.
void ForwardPass::moe(const LayerWeights& lw, const std::vector<float>& v, std::vector<float>& out) {
  const int64_t d = t_.hidden_size, E = t_.n_routed_experts, k = t_.num_experts_per_tok, I = t_.moe_intermediate_size;
  std::vector<float> scores(static_cast<size_t>(rows_ * E));
  linear(v.data(), rows_, lw.router, scores.data());
  const float temp = static_cast<float>(t_.gate_temp.value_or(1.0));
  for (float& s : scores) {
    const float x = s / temp;
    const float softplus = x > 20.0f ? x : std::log1p(std::exp(x));
    s = std::sqrt(softplus);
  }
  // Per row: the chosen experts and their weights.
  std::vector<std::vector<std::pair<int64_t, float>>> by_expert(static_cast<size_t>(E));
  std::vector<float> biased(static_cast<size_t>(E));
  for (int64_t r = 0; r < rows_; ++r) {
    const float* s = &scores[static_cast<size_t>(r * E)];
    for (int64_t e = 0; e < E; ++e) biased[static_cast<size_t>(e)] = s[e] + lw.router_bias[static_cast<size_t>(e)];
    const std::vector<int32_t> chosen = top_k(biased.data(), E, k);
    float sum = 0.0f;
    for (int32_t e : chosen) sum += s[e];
    for (int32_t e : chosen) {
      float w = s[e];
      if (t_.norm_topk_prob && k > 1) w = w / (sum + 1e-20f);
      by_expert[static_cast<size_t>(e)].push_back({r, w * static_cast<float>(t_.routed_scaling_factor)});
    }
  }
  std::fill(out.begin(), out.end(), 0.0f);
  const float limit = static_cast<float>(t_.swiglu_limit);
  auto run_expert = [&](const ExpertWeights& ew, const std::vector<std::pair<int64_t, float>>& rows, bool weighted) {
    const int64_t m = static_cast<int64_t>(rows.size());
    std::vector<float> x(static_cast<size_t>(m * d)), gate(static_cast<size_t>(m * I)), up(static_cast<size_t>(m * I)),
        y(static_cast<size_t>(m * d));
    for (int64_t i = 0; i < m; ++i) {
      std::memcpy(&x[static_cast<size_t>(i * d)], &v[static_cast<size_t>(rows[static_cast<size_t>(i)].first * d)],
                  static_cast<size_t>(d) * sizeof(float));
    }
    linear(x.data(), m, ew.w1, gate.data());
    linear(x.data(), m, ew.w3, up.data());
    // SwiGLU: the clamps, every exp(-g) in one exp_floats call (std::exp's bits), then
    // silu(g) · u = g / (1 + exp(-g)) · u, times the routing weight.
    std::vector<float> e(gate.size());
    for (size_t i = 0; i < gate.size(); ++i) {
      if (limit > 0) {
        up[i] = std::clamp(up[i], -limit, limit);
        gate[i] = std::min(gate[i], limit);
      }
      e[i] = -gate[i];
    }
    kernels::cpu::exp_floats(e.data(), e.data(), static_cast<int64_t>(e.size()));
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < I; ++j) {
        const size_t at = static_cast<size_t>(i * I + j);
        float h = (gate[at] / (1.0f + e[at])) * up[at];
        if (weighted) h = rows[static_cast<size_t>(i)].second * h;
        gate[at] = h;
      }
    }
    linear(gate.data(), m, ew.w2, y.data());
    for (int64_t i = 0; i < m; ++i) {
      float* o = &out[static_cast<size_t>(rows[static_cast<size_t>(i)].first * d)];
      for (int64_t j = 0; j < d; ++j) o[j] += y[static_cast<size_t>(i * d + j)];
    }
  };
  for (int64_t e = 0; e < E; ++e) {
    if (!by_expert[static_cast<size_t>(e)].empty()) run_expert(lw.experts[static_cast<size_t>(e)], by_expert[static_cast<size_t>(e)], true);
  }
  if (lw.has_shared_expert) {
    std::vector<std::pair<int64_t, float>> all(static_cast<size_t>(rows_));
    for (int64_t r = 0; r < rows_; ++r) all[static_cast<size_t>(r)] = {r, 1.0f};
    run_expert(lw.shared_expert, all, false);
  }
}

}  // namespace hippo::engine
