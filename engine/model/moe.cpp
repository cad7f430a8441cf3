// The MoE block: router, routed experts in expert order, the shared expert.
#include "engine/model/forward_pass.h"

#include <cstring>

namespace hippo::engine {

// Reference: DeepseekV41SparseMoeBlock, DeepseekV41TopKRouter, DeepseekV41Expert.
void ForwardPass::moe(const LayerWeights& lw, const std::vector<float>& v, std::vector<float>& out) {
  const int64_t d = t_.hidden_size, E = static_cast<int64_t>(lw.experts.size()), k = lw.experts_per_token,
                I = t_.moe_intermediate_size;
  std::vector<float> logits(static_cast<size_t>(rows_ * E));
  linear(v.data(), rows_, lw.router, logits.data());
  std::vector<int32_t> chosen(static_cast<size_t>(rows_ * k));
  std::vector<float> chosen_weight(static_cast<size_t>(rows_ * k));
  kernels::RouterArgs route;
  route.logits = logits.data();
  route.rows = rows_;
  route.experts = E;
  route.top_k = k;
  route.bias = lw.router_bias.data();
  route.temperature = static_cast<float>(t_.gate_temp.value_or(1.0));
  route.scaling = static_cast<float>(t_.routed_scaling_factor);
  route.normalise = t_.norm_topk_prob;
  route.expert = chosen.data();
  route.weight = chosen_weight.data();
  ops_.router(route);
  // Per expert: its rows and their routing weights, in row order.
  std::vector<std::vector<int64_t>> expert_rows(static_cast<size_t>(E));
  std::vector<std::vector<float>> expert_weights(static_cast<size_t>(E));
  for (int64_t r = 0; r < rows_; ++r) {
    for (int64_t j = 0; j < k; ++j) {
      const size_t e = static_cast<size_t>(chosen[static_cast<size_t>(r * k + j)]);
      expert_rows[e].push_back(r);
      expert_weights[e].push_back(chosen_weight[static_cast<size_t>(r * k + j)]);
    }
  }
  std::fill(out.begin(), out.end(), 0.0f);
  const float limit = static_cast<float>(t_.swiglu_limit);
  auto run_expert = [&](const ExpertWeights& ew, const std::vector<int64_t>& rows, const float* row_weight) {
    const int64_t m = static_cast<int64_t>(rows.size());
    std::vector<float> x(static_cast<size_t>(m * d)), gate(static_cast<size_t>(m * I)), up(static_cast<size_t>(m * I)),
        y(static_cast<size_t>(m * d));
    for (int64_t i = 0; i < m; ++i) {
      std::memcpy(&x[static_cast<size_t>(i * d)], &v[static_cast<size_t>(rows[static_cast<size_t>(i)] * d)],
                  static_cast<size_t>(d) * sizeof(float));
    }
    linear(x.data(), m, ew.w1, gate.data());
    linear(x.data(), m, ew.w3, up.data());
    ops_.swiglu(gate.data(), up.data(), m, I, limit, row_weight);
    linear(gate.data(), m, ew.w2, y.data());
    ops_.add_rows(y.data(), m, d, rows.data(), out.data());
  };
  for (int64_t e = 0; e < E; ++e) {
    if (!expert_rows[static_cast<size_t>(e)].empty())
      run_expert(lw.experts[static_cast<size_t>(e)], expert_rows[static_cast<size_t>(e)], expert_weights[static_cast<size_t>(e)].data());
  }
  if (lw.has_shared_expert) {
    std::vector<int64_t> all(static_cast<size_t>(rows_));
    for (int64_t r = 0; r < rows_; ++r) all[static_cast<size_t>(r)] = r;
    run_expert(lw.shared_expert, all, nullptr);
  }
}

}  // namespace hippo::engine
