// RMSNorm and the rotary embedding, row by row.
#include "kernels/cpu/model_ops.h"

#include <cmath>

namespace hippo::kernels::cpu {

void rms_norm(const float* x, std::int64_t rows, std::int64_t n, const float* weight, float eps, float* out) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* o = out + r * n;
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n; ++i) sum += xr[i] * xr[i];
    const float scale = 1.0f / std::sqrt(sum / static_cast<float>(n) + eps);
    for (std::int64_t i = 0; i < n; ++i) o[i] = weight != nullptr ? weight[i] * (xr[i] * scale) : xr[i] * scale;
  }
}

void rope(float* x, std::int64_t rows, std::int64_t heads, std::int64_t dim, std::int64_t rope_dims, const float* cos,
          const float* sin, bool inverse) {
  const std::int64_t pairs = rope_dims / 2;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* c = cos + r * pairs;
    const float* s = sin + r * pairs;
    for (std::int64_t k = 0; k < heads; ++k) {
      float* v = x + (r * heads + k) * dim + (dim - rope_dims);
      for (std::int64_t i = 0; i < pairs; ++i) {
        const float si = inverse ? -s[i] : s[i];
        const float even = v[2 * i];
        const float odd = v[2 * i + 1];
        v[2 * i] = even * c[i] - odd * si;
        v[2 * i + 1] = even * si + odd * c[i];
      }
    }
  }
}

}  // namespace hippo::kernels::cpu
