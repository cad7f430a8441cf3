// The single-pass mHC site: the mixes with their Sinkhorn projection, the collapse of the streams
// and their expansion (contracts in kernels/backend.h).
#include "kernels/cpu/model_ops.h"

#include "kernels/cpu/attention_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace hippo::kernels::cpu {
namespace {

using F4 = float __attribute__((vector_size(16)));
using I4 = int __attribute__((vector_size(16)));

// c[j] <- c[j] / (Σ_i c[i] + eps) lane-wise: the column normalisation of a 4x4 matrix held as its
// rows (or the row normalisation of one held as its columns), the sum from 0 in i order as the
// scalar loop adds.
void normalise4(F4 (&c)[4], float eps) {
  const F4 zero = {0.0f, 0.0f, 0.0f, 0.0f};
  const F4 d = ((((zero + c[0]) + c[1]) + c[2]) + c[3]) + eps;
  for (F4& v : c) v /= d;
}

void transpose4(F4 (&c)[4]) {
  constexpr I4 kLow = {0, 4, 1, 5}, kHigh = {2, 6, 3, 7}, kFirst = {0, 1, 4, 5}, kSecond = {2, 3, 6, 7};
  const F4 t0 = __builtin_shuffle(c[0], c[1], kLow);
  const F4 t1 = __builtin_shuffle(c[2], c[3], kLow);
  const F4 t2 = __builtin_shuffle(c[0], c[1], kHigh);
  const F4 t3 = __builtin_shuffle(c[2], c[3], kHigh);
  c[0] = __builtin_shuffle(t0, t1, kFirst);
  c[1] = __builtin_shuffle(t0, t1, kSecond);
  c[2] = __builtin_shuffle(t2, t3, kFirst);
  c[3] = __builtin_shuffle(t2, t3, kSecond);
}

// The Sinkhorn iterations of hc_mixes for hc = 4, the same divisions and sums as its scalar loops:
// columns, then (rows, columns) iters - 1 times. Rows go in blocks so that their latency chains
// (add, add, add, add, divide per step) overlap.
void sinkhorn4(float* comb, std::int64_t rows, std::int64_t iters, float eps) {
  constexpr std::int64_t kBlock = 8;
  for (std::int64_t r0 = 0; r0 < rows; r0 += kBlock) {
    const std::int64_t nb = std::min(kBlock, rows - r0);
    F4 c[kBlock][4];
    for (std::int64_t b = 0; b < nb; ++b) std::memcpy(c[b], comb + (r0 + b) * 16, sizeof c[b]);
    for (std::int64_t b = 0; b < nb; ++b) normalise4(c[b], eps);
    for (std::int64_t it = 0; it + 1 < iters; ++it) {
      for (std::int64_t b = 0; b < nb; ++b) {
        transpose4(c[b]);
        normalise4(c[b], eps);
        transpose4(c[b]);
        normalise4(c[b], eps);
      }
    }
    for (std::int64_t b = 0; b < nb; ++b) std::memcpy(comb + (r0 + b) * 16, c[b], sizeof c[b]);
  }
}

}  // namespace

void hc_mix(const HcMixArgs& a) {
  const std::int64_t rows = a.rows, hc = a.hc;
  const float* base = a.base;
  const float* scale = a.scale;
  // Every exp of the step in one call (exp_floats gives std::exp's bits): per row the sigmoids'
  // exp(-x) for pre and post, then the comb rows' exp(c - row max).
  const std::int64_t per_row = 2 * hc + hc * hc;
  std::vector<float> e(static_cast<size_t>(rows * per_row));
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* m = a.mixes + r * a.mix_stride;
    float* er = &e[static_cast<size_t>(r * per_row)];
    for (std::int64_t i = 0; i < hc; ++i) {
      er[i] = -(m[i] * scale[0] + base[i]);
      er[hc + i] = -(m[hc + i] * scale[1] + base[hc + i]);
    }
    for (std::int64_t i = 0; i < hc; ++i) {
      float* c = er + 2 * hc + i * hc;
      float row_max = -std::numeric_limits<float>::infinity();
      for (std::int64_t j = 0; j < hc; ++j) {
        c[j] = m[2 * hc + i * hc + j] * scale[2] + base[2 * hc + i * hc + j];
        row_max = std::max(row_max, c[j]);
      }
      for (std::int64_t j = 0; j < hc; ++j) c[j] = c[j] - row_max;
    }
  }
  exp_floats(e.data(), e.data(), static_cast<std::int64_t>(e.size()));
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* er = &e[static_cast<size_t>(r * per_row)];
    for (std::int64_t i = 0; i < hc; ++i) {  // sigmoid(x) = 1 / (1 + exp(-x))
      a.pre[r * hc + i] = 1.0f / (1.0f + er[i]) + a.eps;
      a.post[r * hc + i] = 2.0f * (1.0f / (1.0f + er[hc + i]));
    }
    float* c = a.comb + r * hc * hc;
    for (std::int64_t i = 0; i < hc; ++i) {  // softmax over each row, then + eps
      const float* ei = er + 2 * hc + i * hc;
      float sum = 0.0f;
      for (std::int64_t j = 0; j < hc; ++j) sum += ei[j];
      for (std::int64_t j = 0; j < hc; ++j) c[i * hc + j] = ei[j] / sum + a.eps;
    }
  }
  if (hc == 4) {
    sinkhorn4(a.comb, rows, a.sinkhorn_iters, a.eps);
    return;
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    float* c = a.comb + r * hc * hc;
    auto normalise_columns = [&] {
      for (std::int64_t j = 0; j < hc; ++j) {
        float sum = 0.0f;
        for (std::int64_t i = 0; i < hc; ++i) sum += c[i * hc + j];
        for (std::int64_t i = 0; i < hc; ++i) c[i * hc + j] /= (sum + a.eps);
      }
    };
    auto normalise_rows = [&] {
      for (std::int64_t i = 0; i < hc; ++i) {
        float sum = 0.0f;
        for (std::int64_t j = 0; j < hc; ++j) sum += c[i * hc + j];
        for (std::int64_t j = 0; j < hc; ++j) c[i * hc + j] /= (sum + a.eps);
      }
    };
    normalise_columns();
    for (std::int64_t it = 0; it + 1 < a.sinkhorn_iters; ++it) {
      normalise_rows();
      normalise_columns();
    }
  }
}

void hc_collapse(const float* streams, const float* pre, std::int64_t rows, std::int64_t hc, std::int64_t d, float* out) {
  for (std::int64_t r = 0; r < rows; ++r) {
    float* y = out + r * d;
    std::fill(y, y + d, 0.0f);
    for (std::int64_t i = 0; i < hc; ++i) {
      const float p = pre[r * hc + i];
      const float* x = streams + (r * hc + i) * d;
      for (std::int64_t j = 0; j < d; ++j) y[j] += p * x[j];
    }
  }
}

void hc_expand(float* streams, const float* sub, const float* post, const float* comb, std::int64_t rows,
               std::int64_t hc, std::int64_t d) {
  std::vector<float> mixed(static_cast<size_t>(hc * d));
  for (std::int64_t r = 0; r < rows; ++r) {
    float* x = streams + r * hc * d;
    const float* c = comb + r * hc * hc;
    const float* s = sub + r * d;
    for (std::int64_t k = 0; k < hc; ++k) {  // each element's sum from 0 in j order, elements side by side
      float* m = &mixed[static_cast<size_t>(k * d)];
      std::fill(m, m + d, 0.0f);
      for (std::int64_t j = 0; j < hc; ++j) {
        const float weight = c[j * hc + k];
        const float* xj = x + j * d;
        for (std::int64_t e = 0; e < d; ++e) m[e] += weight * xj[e];
      }
      const float p = post[r * hc + k];
      for (std::int64_t e = 0; e < d; ++e) m[e] = p * s[e] + m[e];
    }
    std::memcpy(x, mixed.data(), mixed.size() * sizeof(float));
  }
}

}  // namespace hippo::kernels::cpu
