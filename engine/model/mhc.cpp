// Single-pass mHC: the mixes of a site, the collapse of the streams and their expansion.
#include "engine/model/forward_pass.h"

#include "engine/model/forward_ops.h"
#include "kernels/cpu/attention_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace hippo::engine {

using namespace ops;  // NOLINT: the shared scalar helpers of the forward pass

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
void sinkhorn4(float* comb, int64_t rows, int64_t iters, float eps) {
  constexpr int64_t kBlock = 8;
  for (int64_t r0 = 0; r0 < rows; r0 += kBlock) {
    const int64_t nb = std::min(kBlock, rows - r0);
    F4 c[kBlock][4];
    for (int64_t b = 0; b < nb; ++b) std::memcpy(c[b], comb + (r0 + b) * 16, sizeof c[b]);
    for (int64_t b = 0; b < nb; ++b) normalise4(c[b], eps);
    for (int64_t it = 0; it + 1 < iters; ++it) {
      for (int64_t b = 0; b < nb; ++b) {
        transpose4(c[b]);
        normalise4(c[b], eps);
        transpose4(c[b]);
        normalise4(c[b], eps);
      }
    }
    for (int64_t b = 0; b < nb; ++b) std::memcpy(comb + (r0 + b) * 16, c[b], sizeof c[b]);
  }
}

}  // namespace

// Reference: hc_mixes — one projection of the normalised flattened streams gives pre, post and the
// Sinkhorn-projected comb.
void ForwardPass::hc_mixes(const kernels::WeightView& fn, const std::vector<float>& base,
                           const std::vector<float>& scale, std::vector<float>& pre, std::vector<float>& post,
                           std::vector<float>& comb) {
  const int64_t d = t_.hidden_size, hc = t_.hc_mult, mix = fn.rows;
  const float eps = static_cast<float>(t_.rms_norm_eps);
  const float hc_eps = static_cast<float>(t_.hc_eps);
  std::vector<float> flat(streams_.size());
  for (int64_t r = 0; r < rows_; ++r) {
    rms_norm(&streams_[static_cast<size_t>(r * hc * d)], hc * d, nullptr, eps, &flat[static_cast<size_t>(r * hc * d)]);
  }
  std::vector<float> mixes(static_cast<size_t>(rows_ * mix));
  linear(flat.data(), rows_, fn, mixes.data());
  pre.assign(static_cast<size_t>(rows_ * hc), 0.0f);
  post.assign(static_cast<size_t>(rows_ * hc), 0.0f);
  comb.assign(static_cast<size_t>(rows_ * hc * hc), 0.0f);
  // Every exp of the step in one call (exp_floats gives std::exp's bits): per row the sigmoids'
  // exp(-x) for pre and post, then the comb rows' exp(c - row max).
  const int64_t per_row = 2 * hc + hc * hc;
  std::vector<float> e(static_cast<size_t>(rows_ * per_row));
  for (int64_t r = 0; r < rows_; ++r) {
    const float* m = &mixes[static_cast<size_t>(r * mix)];
    float* er = &e[static_cast<size_t>(r * per_row)];
    for (int64_t i = 0; i < hc; ++i) {
      er[i] = -(m[i] * scale[0] + base[static_cast<size_t>(i)]);
      er[hc + i] = -(m[hc + i] * scale[1] + base[static_cast<size_t>(hc + i)]);
    }
    for (int64_t i = 0; i < hc; ++i) {
      float* c = er + 2 * hc + i * hc;
      float row_max = kNegInf;
      for (int64_t j = 0; j < hc; ++j) {
        c[j] = m[2 * hc + i * hc + j] * scale[2] + base[static_cast<size_t>(2 * hc + i * hc + j)];
        row_max = std::max(row_max, c[j]);
      }
      for (int64_t j = 0; j < hc; ++j) c[j] = c[j] - row_max;
    }
  }
  kernels::cpu::exp_floats(e.data(), e.data(), static_cast<int64_t>(e.size()));
  for (int64_t r = 0; r < rows_; ++r) {
    const float* er = &e[static_cast<size_t>(r * per_row)];
    for (int64_t i = 0; i < hc; ++i) {  // sigmoid(x) = 1 / (1 + exp(-x))
      pre[static_cast<size_t>(r * hc + i)] = 1.0f / (1.0f + er[i]) + hc_eps;
      post[static_cast<size_t>(r * hc + i)] = 2.0f * (1.0f / (1.0f + er[hc + i]));
    }
    float* c = &comb[static_cast<size_t>(r * hc * hc)];
    for (int64_t i = 0; i < hc; ++i) {  // softmax over each row, then + eps
      const float* ei = er + 2 * hc + i * hc;
      float sum = 0.0f;
      for (int64_t j = 0; j < hc; ++j) sum += ei[j];
      for (int64_t j = 0; j < hc; ++j) c[i * hc + j] = ei[j] / sum + hc_eps;
    }
  }
  if (hc == 4) {
    sinkhorn4(comb.data(), rows_, t_.hc_sinkhorn_iters, hc_eps);
    return;
  }
  for (int64_t r = 0; r < rows_; ++r) {
    float* c = &comb[static_cast<size_t>(r * hc * hc)];
    auto normalise_columns = [&] {
      for (int64_t j = 0; j < hc; ++j) {
        float sum = 0.0f;
        for (int64_t i = 0; i < hc; ++i) sum += c[i * hc + j];
        for (int64_t i = 0; i < hc; ++i) c[i * hc + j] /= (sum + hc_eps);
      }
    };
    auto normalise_rows = [&] {
      for (int64_t i = 0; i < hc; ++i) {
        float sum = 0.0f;
        for (int64_t j = 0; j < hc; ++j) sum += c[i * hc + j];
        for (int64_t j = 0; j < hc; ++j) c[i * hc + j] /= (sum + hc_eps);
      }
    };
    normalise_columns();
    for (int64_t it = 0; it + 1 < t_.hc_sinkhorn_iters; ++it) {
      normalise_rows();
      normalise_columns();
    }
  }
}

// Σ_i pre_i · X_i, then RMSNorm with `norm`.
void ForwardPass::collapse(const std::vector<float>& pre, const std::vector<float>& norm, std::vector<float>& out) {
  const int64_t d = t_.hidden_size, hc = t_.hc_mult;
  out.assign(static_cast<size_t>(rows_ * d), 0.0f);
  for (int64_t r = 0; r < rows_; ++r) {
    float* y = &out[static_cast<size_t>(r * d)];
    for (int64_t i = 0; i < hc; ++i) {
      const float p = pre[static_cast<size_t>(r * hc + i)];
      const float* x = &streams_[static_cast<size_t>((r * hc + i) * d)];
      for (int64_t j = 0; j < d; ++j) y[j] += p * x[j];
    }
    if (!norm.empty()) rms_norm(y, d, norm.data(), static_cast<float>(t_.rms_norm_eps), y);
  }
}

// out_k = post_k · sub + Σ_j comb[j][k] · X_j.
void ForwardPass::expand(const std::vector<float>& sub, const std::vector<float>& post, const std::vector<float>& comb) {
  const int64_t d = t_.hidden_size, hc = t_.hc_mult;
  std::vector<float> mixed(static_cast<size_t>(hc * d));
  for (int64_t r = 0; r < rows_; ++r) {
    float* x = &streams_[static_cast<size_t>(r * hc * d)];
    const float* c = &comb[static_cast<size_t>(r * hc * hc)];
    const float* s = &sub[static_cast<size_t>(r * d)];
    for (int64_t k = 0; k < hc; ++k) {  // each element's sum from 0 in j order, elements side by side
      float* m = &mixed[static_cast<size_t>(k * d)];
      std::fill(m, m + d, 0.0f);
      for (int64_t j = 0; j < hc; ++j) {
        const float weight = c[j * hc + k];
        const float* xj = x + j * d;
        for (int64_t e = 0; e < d; ++e) m[e] += weight * xj[e];
      }
      const float p = post[static_cast<size_t>(r * hc + k)];
      for (int64_t e = 0; e < d; ++e) m[e] = p * s[e] + m[e];
    }
    std::memcpy(x, mixed.data(), mixed.size() * sizeof(float));
  }
}

}  // namespace hippo::engine
