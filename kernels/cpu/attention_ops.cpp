// target_clones compiles each kernel for x86-64-v4 (AVX-512), x86-64-v3 (AVX2 + FMA) and baseline
// x86-64 and picks one at load time; -ffp-contract=fast (kernels/CMakeLists.txt) turns a*b+c into one
// FMA where the clone has FMA, as the linear kernel does, so FMA machines agree bit for bit.
//
// Each output element is its own accumulator, carried through its reduction in order: 16-float
// vectors only place independent elements side by side. A partial vector at the end is computed by
// recomputing the last full vector (overlapping elements get the same bits again) or, when there is
// no full vector, from a zero-padded copy.
#include "kernels/cpu/attention_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace hippo::kernels::cpu {
namespace {

constexpr std::int64_t kLanes = 16;
using V = float __attribute__((vector_size(64)));
using VU = float __attribute__((vector_size(64), aligned(4), may_alias));

// Heads and 16-float vectors per register tile: 8 accumulators keep two FMA pipes busy and fit the
// 32 AVX-512 registers with room (the AVX2 clone holds each vector in two of its 16).
constexpr int kScoreHeads = 4, kScoreVectors = 2;
constexpr int kSumHeads = 4, kSumVectors = 2;

// acc[h][c] += Σ_{d < len} q[h·q_stride + d] · kt[d·ld + c·16 + lane], in d order.
template <int HB, int CB>
[[gnu::always_inline]] inline void score_tile(const float* q, std::int64_t q_stride, const float* kt, std::int64_t ld,
                                              std::int64_t len, V (&acc)[HB][CB]) {
  for (std::int64_t d = 0; d < len; ++d) {
    V k[CB];
    for (int c = 0; c < CB; ++c) k[c] = *reinterpret_cast<const VU*>(kt + d * ld + c * kLanes);
    for (int h = 0; h < HB; ++h) {
      const float x = q[h * q_stride + d];
      for (int c = 0; c < CB; ++c) acc[h][c] += x * k[c];
    }
  }
}

template <int HB, int CB>
[[gnu::always_inline]] inline void store_scores(const V (&acc)[HB][CB], float* scores, std::int64_t score_stride) {
  for (int h = 0; h < HB; ++h) {
    for (int c = 0; c < CB; ++c) *reinterpret_cast<VU*>(scores + h * score_stride + c * kLanes) = acc[h][c];
  }
}

// Columns [j, j + 16·CB) of HB heads.
template <int HB, int CB>
[[gnu::always_inline]] inline void score_columns(const float* q, std::int64_t q_stride, const float* kt, std::int64_t ld,
                                                 std::int64_t j, std::int64_t dim, float* scores,
                                                 std::int64_t score_stride) {
  V acc[HB][CB] = {};
  score_tile<HB, CB>(q, q_stride, kt + j, ld, dim, acc);
  store_scores<HB, CB>(acc, scores + j, score_stride);
}

template <int HB>
[[gnu::always_inline]] inline void score_heads(const float* q, std::int64_t q_stride, const float* kt, std::int64_t ld,
                                               std::int64_t n, std::int64_t dim, float* scores,
                                               std::int64_t score_stride) {
  std::int64_t j = 0;
  for (; j + kScoreVectors * kLanes <= n; j += kScoreVectors * kLanes) {
    score_columns<HB, kScoreVectors>(q, q_stride, kt, ld, j, dim, scores, score_stride);
  }
  for (; j + kLanes <= n; j += kLanes) score_columns<HB, 1>(q, q_stride, kt, ld, j, dim, scores, score_stride);
  if (j == n) return;
  if (n >= kLanes) {  // the last full vector again
    score_columns<HB, 1>(q, q_stride, kt, ld, n - kLanes, dim, scores, score_stride);
    return;
  }
  // Fewer than 16 columns: through a zero-padded copy, a slab of d at a time.
  constexpr std::int64_t kSlab = 64;
  alignas(64) float pad[kSlab * kLanes];
  V acc[HB][1] = {};
  for (std::int64_t d0 = 0; d0 < dim; d0 += kSlab) {
    const std::int64_t len = std::min(kSlab, dim - d0);
    for (std::int64_t d = 0; d < len; ++d) {
      float* row = pad + d * kLanes;
      std::memcpy(row, kt + (d0 + d) * ld, static_cast<std::size_t>(n) * sizeof(float));
      std::fill(row + n, row + kLanes, 0.0f);
    }
    score_tile<HB, 1>(q + d0, q_stride, pad, kLanes, len, acc);
  }
  alignas(64) float lanes[HB * kLanes];
  store_scores<HB, 1>(acc, lanes, kLanes);
  for (int h = 0; h < HB; ++h) std::memcpy(scores + h * score_stride, lanes + h * kLanes, static_cast<std::size_t>(n) * sizeof(float));
}

// out[h][d0 + c·16 + lane] = Σ_j p[h·p_stride + j] · rows[j][d0 + c·16 + lane], in j order.
template <int HB, int CB>
[[gnu::always_inline]] inline void sum_columns(const float* p, std::int64_t p_stride, const float* const* rows,
                                               std::int64_t n, std::int64_t d0, float* out, std::int64_t out_stride) {
  V acc[HB][CB] = {};
  for (std::int64_t j = 0; j < n; ++j) {
    const float* row = rows[j] + d0;
    V k[CB];
    for (int c = 0; c < CB; ++c) k[c] = *reinterpret_cast<const VU*>(row + c * kLanes);
    for (int h = 0; h < HB; ++h) {
      const float x = p[h * p_stride + j];
      for (int c = 0; c < CB; ++c) acc[h][c] += x * k[c];
    }
  }
  for (int h = 0; h < HB; ++h) {
    for (int c = 0; c < CB; ++c) *reinterpret_cast<VU*>(out + h * out_stride + d0 + c * kLanes) = acc[h][c];
  }
}

template <int HB>
[[gnu::always_inline]] inline void sum_heads(const float* p, std::int64_t p_stride, const float* const* rows,
                                             std::int64_t n, std::int64_t dim, float* out, std::int64_t out_stride) {
  std::int64_t d = 0;
  for (; d + kSumVectors * kLanes <= dim; d += kSumVectors * kLanes) {
    sum_columns<HB, kSumVectors>(p, p_stride, rows, n, d, out, out_stride);
  }
  for (; d + kLanes <= dim; d += kLanes) sum_columns<HB, 1>(p, p_stride, rows, n, d, out, out_stride);
  if (d == dim) return;
  if (dim >= kLanes) {  // the last full vector again
    sum_columns<HB, 1>(p, p_stride, rows, n, dim - kLanes, out, out_stride);
    return;
  }
  for (int h = 0; h < HB; ++h) {  // fewer than 16 columns: one scalar chain per element
    for (std::int64_t e = 0; e < dim; ++e) {
      float acc = 0.0f;
      for (std::int64_t j = 0; j < n; ++j) acc += p[h * p_stride + j] * rows[j][e];
      out[h * out_stride + e] = acc;
    }
  }
}

}  // namespace

__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) void transposed_scores(
    const float* q, std::int64_t heads, std::int64_t q_stride, const float* kt, std::int64_t ld, std::int64_t n,
    std::int64_t dim, float* scores, std::int64_t score_stride) {
  if (n <= 0) return;
  std::int64_t h = 0;
  for (; h + kScoreHeads <= heads; h += kScoreHeads) {
    score_heads<kScoreHeads>(q + h * q_stride, q_stride, kt, ld, n, dim, scores + h * score_stride, score_stride);
  }
  for (; h < heads; ++h) score_heads<1>(q + h * q_stride, q_stride, kt, ld, n, dim, scores + h * score_stride, score_stride);
}

__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) void weighted_rows(
    const float* p, std::int64_t heads, std::int64_t p_stride, const float* const* rows, std::int64_t n,
    std::int64_t dim, float* out, std::int64_t out_stride) {
  std::int64_t h = 0;
  for (; h + kSumHeads <= heads; h += kSumHeads) {
    sum_heads<kSumHeads>(p + h * p_stride, p_stride, rows, n, dim, out + h * out_stride, out_stride);
  }
  for (; h < heads; ++h) sum_heads<1>(p + h * p_stride, p_stride, rows, n, dim, out + h * out_stride, out_stride);
}

__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) void softmax_with_sink(
    float* x, std::int64_t n, float scale, float sink) {
  // The maximum is the same whatever order finds it (a -0/+0 choice cannot change s_j - m).
  V lane_max;
  for (std::int64_t l = 0; l < kLanes; ++l) lane_max[l] = sink;
  std::int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    const V s = *reinterpret_cast<const VU*>(x + j) * scale;
    *reinterpret_cast<VU*>(x + j) = s;
    lane_max = lane_max < s ? s : lane_max;
  }
  float m = sink;
  for (std::int64_t l = 0; l < kLanes; ++l) m = std::max(m, lane_max[l]);
  for (; j < n; ++j) {
    x[j] *= scale;
    m = std::max(m, x[j]);
  }
  float denom = 0.0f;
  for (j = 0; j < n; ++j) {
    x[j] = std::exp(x[j] - m);
    denom += x[j];
  }
  denom += std::exp(sink - m);
  for (j = 0; j < n; ++j) x[j] /= denom;
}

void transpose_rows(const float* const* rows, std::int64_t n, std::int64_t dim, float* kt, std::int64_t ld) {
  constexpr std::int64_t kBlock = 16;  // rows per pass: 16 read streams, contiguous writes
  for (std::int64_t j0 = 0; j0 < n; j0 += kBlock) {
    const std::int64_t j1 = std::min(n, j0 + kBlock);
    for (std::int64_t d = 0; d < dim; ++d) {
      float* out = kt + d * ld;
      for (std::int64_t j = j0; j < j1; ++j) out[j] = rows[j][d];
    }
  }
}

}  // namespace hippo::kernels::cpu
