// The MoE block's ops: the router, the experts' SwiGLU and the scatter-add of their outputs.
#include "kernels/cpu/model_ops.h"

#include "kernels/cpu/attention_ops.h"
#include "kernels/top_k.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace hippo::kernels::cpu {

void router(const RouterArgs& a) {
  const std::int64_t E = a.experts, k = a.top_k;
  std::vector<float> s(static_cast<size_t>(E)), biased(static_cast<size_t>(E));
  for (std::int64_t r = 0; r < a.rows; ++r) {
    for (std::int64_t e = 0; e < E; ++e) {
      const float x = a.logits[r * E + e] / a.temperature;
      const float softplus = x > 20.0f ? x : std::log1p(std::exp(x));
      s[static_cast<size_t>(e)] = std::sqrt(softplus);
      biased[static_cast<size_t>(e)] = s[static_cast<size_t>(e)] + a.bias[e];
    }
    const std::vector<std::int32_t> chosen = top_k(biased.data(), E, k);
    float sum = 0.0f;
    for (std::int32_t e : chosen) sum += s[static_cast<size_t>(e)];
    for (size_t j = 0; j < chosen.size(); ++j) {
      float w = s[static_cast<size_t>(chosen[j])];
      if (a.normalise && k > 1) w = w / (sum + 1e-20f);
      a.expert[r * k + static_cast<std::int64_t>(j)] = chosen[j];
      a.weight[r * k + static_cast<std::int64_t>(j)] = w * a.scaling;
    }
  }
}

// The clamps, every exp(-g) in one exp_floats call (std::exp's bits), then
// silu(g) · u = g / (1 + exp(-g)) · u, times the routing weight.
void swiglu(float* gate, const float* up, std::int64_t rows, std::int64_t width, float limit, const float* row_weight) {
  const size_t n = static_cast<size_t>(rows * width);
  std::vector<float> e(n), u(up, up + n);
  for (size_t i = 0; i < n; ++i) {
    if (limit > 0) {
      u[i] = std::clamp(u[i], -limit, limit);
      gate[i] = std::min(gate[i], limit);
    }
    e[i] = -gate[i];
  }
  exp_floats(e.data(), e.data(), static_cast<std::int64_t>(n));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t j = 0; j < width; ++j) {
      const size_t at = static_cast<size_t>(r * width + j);
      float h = (gate[at] / (1.0f + e[at])) * u[at];
      if (row_weight != nullptr) h = row_weight[r] * h;
      gate[at] = h;
    }
  }
}

void add_rows(const float* y, std::int64_t m, std::int64_t d, const std::int64_t* dst, float* out) {
  for (std::int64_t i = 0; i < m; ++i) {
    float* o = out + dst[i] * d;
    for (std::int64_t j = 0; j < d; ++j) o[j] += y[i * d + j];
  }
}

}  // namespace hippo::kernels::cpu
