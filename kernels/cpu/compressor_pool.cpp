// The compressor's pooling of a group's rows (contract in kernels/backend.h).
#include "kernels/cpu/model_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace hippo::kernels::cpu {

void compressor_pool(const float* kv, const float* gate, std::int64_t groups, std::int64_t ratio, std::int64_t dim,
                     float* latents) {
  std::vector<float> e(static_cast<size_t>(ratio));
  for (std::int64_t g = 0; g < groups; ++g) {
    const float* gk = kv + g * ratio * dim;
    const float* gg = gate + g * ratio * dim;
    for (std::int64_t c = 0; c < dim; ++c) {  // per-channel softmax over the group's rows (fp32)
      float m = -std::numeric_limits<float>::infinity();
      for (std::int64_t j = 0; j < ratio; ++j) m = std::max(m, gg[j * dim + c]);
      float sum = 0.0f;
      for (std::int64_t j = 0; j < ratio; ++j) {
        e[static_cast<size_t>(j)] = std::exp(gg[j * dim + c] - m);
        sum += e[static_cast<size_t>(j)];
      }
      float acc = 0.0f;
      for (std::int64_t j = 0; j < ratio; ++j) acc += gk[j * dim + c] * (e[static_cast<size_t>(j)] / sum);
      latents[g * dim + c] = acc;
    }
  }
}

}  // namespace hippo::kernels::cpu
