// target_clones compiles each kernel for x86-64-v4 (AVX-512), x86-64-v3 (AVX2 + FMA) and baseline
// x86-64 and picks one at load time (index_scores and weighted_rows: one version per ISA by
// target("...") overloads, whose register tiles differ); -ffp-contract=fast (kernels/CMakeLists.txt)
// turns a*b+c into one FMA where the clone has FMA, as the linear kernel does, so FMA machines agree
// bit for bit.
//
// Each output element is its own accumulator, carried through its reduction in order: 16-float
// vectors only place independent elements side by side. A partial vector at the end is computed by
// recomputing the last full vector (overlapping elements get the same bits again) or, when there is
// no full vector, from a zero-padded copy.
#include "kernels/cpu/attention_ops.h"

#include "kernels/cpu/isa.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace hippo::kernels::cpu {
namespace {

constexpr std::int64_t kLanes = 16;
using V = float __attribute__((vector_size(64)));
using VU = float __attribute__((vector_size(64), aligned(4), may_alias));

// Heads and 16-float vectors per register tile of transposed_scores: 8 accumulators keep two FMA
// pipes busy and fit the 32 AVX-512 registers with room (the AVX2 clone holds each vector in two of
// its 16). weighted_rows takes kSumHeads heads at a time, its vectors per ISA (weighted_rows_for_isa).
constexpr int kScoreHeads = 4, kScoreVectors = 2;
constexpr int kSumHeads = 4;

// acc[h][c] += Σ_{d < len} q[h·q_stride + d] · kt[d·ld + c·16 + lane], in d order.
template <int HB, int CB>
[[gnu::always_inline]] inline void score_tile(const float* q, std::int64_t q_stride, const float* kt, std::int64_t ld,
                                              std::int64_t len, V (&acc)[HB][CB]) {
  // Unrolled in full, so that the accumulators live in registers (-O2 leaves 8 heads as a loop over memory).
  for (std::int64_t d = 0; d < len; ++d) {
    V k[CB];
#pragma GCC unroll 4
    for (int c = 0; c < CB; ++c) k[c] = *reinterpret_cast<const VU*>(kt + d * ld + c * kLanes);
#pragma GCC unroll 16
    for (int h = 0; h < HB; ++h) {
      const float x = q[h * q_stride + d];
#pragma GCC unroll 4
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

// Fewer than 16 columns (n < 16): score_tile over all `dim` through a zero-padded copy of the
// columns, a slab of d at a time.
template <int HB>
[[gnu::always_inline]] inline void score_few_columns(const float* q, std::int64_t q_stride, const float* kt,
                                                     std::int64_t ld, std::int64_t n, std::int64_t dim,
                                                     V (&acc)[HB][1]) {
  constexpr std::int64_t kSlab = 64;
  alignas(64) float pad[kSlab * kLanes];
  for (std::int64_t d0 = 0; d0 < dim; d0 += kSlab) {
    const std::int64_t len = std::min(kSlab, dim - d0);
    for (std::int64_t d = 0; d < len; ++d) {  // element by element: no library call per row
      const float* src = kt + (d0 + d) * ld;
      for (std::int64_t l = 0; l < kLanes; ++l) pad[d * kLanes + l] = l < n ? src[l] : 0.0f;
    }
    score_tile<HB, 1>(q + d0, q_stride, pad, kLanes, len, acc);
  }
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
  V acc[HB][1] = {};
  score_few_columns<HB>(q, q_stride, kt, ld, n, dim, acc);
  alignas(64) float lanes[HB * kLanes];
  store_scores<HB, 1>(acc, lanes, kLanes);
  for (int h = 0; h < HB; ++h) std::memcpy(scores + h * score_stride, lanes + h * kLanes, static_cast<std::size_t>(n) * sizeof(float));
}

// s[c] += max(acc[h][c], 0)·scale·weights[h], in h order (std::max's NaN: a NaN dot stays NaN).
template <int HB, int CB>
[[gnu::always_inline]] inline void add_index_scores(const V (&acc)[HB][CB], const float* weights, float scale, V (&s)[CB]) {
  const V zero = {};
#pragma GCC unroll 16
  for (int h = 0; h < HB; ++h) {
    const float weight = weights[h];
#pragma GCC unroll 4
    for (int c = 0; c < CB; ++c) s[c] += (acc[h][c] < zero ? zero : acc[h][c]) * scale * weight;
  }
}

// Index scores of keys [j, j + 16·CB): all heads' dots, HB heads at a time, folded in as they finish.
template <int HB, int CB>
[[gnu::always_inline]] inline void index_score_columns(const float* q, std::int64_t heads, std::int64_t dim,
                                                       const float* kt, std::int64_t ld, std::int64_t j,
                                                       const float* weights, float scale, float* scores) {
  V s[CB] = {};
  std::int64_t h = 0;
  for (; h + HB <= heads; h += HB) {
    V acc[HB][CB] = {};
    score_tile<HB, CB>(q + h * dim, dim, kt + j, ld, dim, acc);
    add_index_scores<HB, CB>(acc, weights + h, scale, s);
  }
  for (; h < heads; ++h) {
    V acc[1][CB] = {};
    score_tile<1, CB>(q + h * dim, dim, kt + j, ld, dim, acc);
    add_index_scores<1, CB>(acc, weights + h, scale, s);
  }
  for (int c = 0; c < CB; ++c) *reinterpret_cast<VU*>(scores + j + c * kLanes) = s[c];
}

template <int HB, int CB>
[[gnu::always_inline]] inline void index_scores_tiled(const float* q, std::int64_t heads, std::int64_t dim,
                                                      const float* kt, std::int64_t ld, std::int64_t n,
                                                      const float* weights, float scale, float* scores) {
  std::int64_t j = 0;
  for (; j + CB * kLanes <= n; j += CB * kLanes) index_score_columns<HB, CB>(q, heads, dim, kt, ld, j, weights, scale, scores);
  for (; j + kLanes <= n; j += kLanes) index_score_columns<HB, 1>(q, heads, dim, kt, ld, j, weights, scale, scores);
  if (j == n) return;
  if (n >= kLanes) {  // the last full vector again
    index_score_columns<HB, 1>(q, heads, dim, kt, ld, n - kLanes, weights, scale, scores);
    return;
  }
  V s[1] = {};  // fewer than 16 keys: head by head
  for (std::int64_t h = 0; h < heads; ++h) {
    V acc[1][1] = {};
    score_few_columns<1>(q + h * dim, dim, kt, ld, n, dim, acc);
    add_index_scores<1, 1>(acc, weights + h, scale, s);
  }
  alignas(64) float lanes[kLanes];
  *reinterpret_cast<VU*>(lanes) = s[0];
  std::memcpy(scores, lanes, static_cast<std::size_t>(n) * sizeof(float));
}

// One version per instruction set (dispatched at load, within this file): 8 heads × 2 vectors of
// keys is 16 accumulators, which AVX-512's 32 registers hold with the keys and the scores beside
// them; AVX2 holds each 16-float vector in two of its 16 registers, so it takes 4 heads × 1.
__attribute__((target("arch=x86-64-v4"))) void index_scores_for_isa(const float* q, std::int64_t heads, std::int64_t dim,
                                                                   const float* kt, std::int64_t ld, std::int64_t n,
                                                                   const float* weights, float scale, float* scores) {
  index_scores_tiled<8, 2>(q, heads, dim, kt, ld, n, weights, scale, scores);
}
__attribute__((target("arch=x86-64-v3"))) void index_scores_for_isa(const float* q, std::int64_t heads, std::int64_t dim,
                                                                   const float* kt, std::int64_t ld, std::int64_t n,
                                                                   const float* weights, float scale, float* scores) {
  index_scores_tiled<4, 1>(q, heads, dim, kt, ld, n, weights, scale, scores);
}
__attribute__((target("default"))) void index_scores_for_isa(const float* q, std::int64_t heads, std::int64_t dim,
                                                            const float* kt, std::int64_t ld, std::int64_t n,
                                                            const float* weights, float scale, float* scores) {
  index_scores_tiled<4, 1>(q, heads, dim, kt, ld, n, weights, scale, scores);
}

// acc[h][e] += q[h·q_stride + d] · rows[e][d] lane by lane for d < dim in vectors of 16 (the last
// one zero-padded): lane l of acc is chain l of row_scores.
template <int HB, int EB>
[[gnu::always_inline]] inline void row_dot_tile(const float* q, std::int64_t q_stride, const float* const* rows,
                                                std::int64_t dim, V (&acc)[HB][EB]) {
  std::int64_t d = 0;
  for (; d + kLanes <= dim; d += kLanes) {
    V k[EB];
#pragma GCC unroll 4
    for (int e = 0; e < EB; ++e) k[e] = *reinterpret_cast<const VU*>(rows[e] + d);
#pragma GCC unroll 4
    for (int h = 0; h < HB; ++h) {
      const V x = *reinterpret_cast<const VU*>(q + h * q_stride + d);
#pragma GCC unroll 4
      for (int e = 0; e < EB; ++e) acc[h][e] += x * k[e];
    }
  }
  if (d == dim) return;
  alignas(64) float pad[kLanes] = {};
  const std::size_t tail = static_cast<std::size_t>(dim - d) * sizeof(float);
  V k[EB];
  for (int e = 0; e < EB; ++e) {
    std::memcpy(pad, rows[e] + d, tail);
    k[e] = *reinterpret_cast<const V*>(pad);
  }
  for (int h = 0; h < HB; ++h) {
    std::memcpy(pad, q + h * q_stride + d, tail);
    const V x = *reinterpret_cast<const V*>(pad);
    for (int e = 0; e < EB; ++e) acc[h][e] += x * k[e];
  }
}

// row_scores' tree over the 16 chains.
[[gnu::always_inline]] inline float lane_tree(V t) {
  using M = std::int32_t __attribute__((vector_size(64)));
  t += __builtin_shuffle(t, M{8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15});
  t += __builtin_shuffle(t, M{4, 5, 6, 7, 4, 5, 6, 7, 4, 5, 6, 7, 4, 5, 6, 7});
  t += __builtin_shuffle(t, M{2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3});
  t += __builtin_shuffle(t, M{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
  return t[0];
}

// Scores of heads [h, h + HB) against keys [j, j + EB).
template <int HB, int EB>
[[gnu::always_inline]] inline void row_score_block(const float* q, std::int64_t q_stride, const float* const* rows,
                                                   std::int64_t dim, std::int64_t h, std::int64_t j, float* scores,
                                                   std::int64_t score_stride) {
  V acc[HB][EB] = {};
  row_dot_tile<HB, EB>(q + h * q_stride, q_stride, rows + j, dim, acc);
  for (int a = 0; a < HB; ++a) {
    for (int e = 0; e < EB; ++e) scores[(h + a) * score_stride + j + e] = lane_tree(acc[a][e]);
  }
}

// Keys [j, j + EB) against every head: the keys stay in the L1 while the heads' queries pass (a
// release row's 64 queries of 512 floats, 128 KB, sit in the L2; its 512 entries, 1 MB, would not).
template <int HB, int EB>
[[gnu::always_inline]] inline void row_scores_keys(const float* q, std::int64_t heads, std::int64_t q_stride,
                                                   const float* const* rows, std::int64_t dim, std::int64_t j,
                                                   float* scores, std::int64_t score_stride) {
  std::int64_t h = 0;
  for (; h + HB <= heads; h += HB) row_score_block<HB, EB>(q, q_stride, rows, dim, h, j, scores, score_stride);
  for (; h < heads; ++h) row_score_block<1, EB>(q, q_stride, rows, dim, h, j, scores, score_stride);
}

template <int HB, int EB>
[[gnu::always_inline]] inline void row_scores_tiled(const float* q, std::int64_t heads, std::int64_t q_stride,
                                                    const float* const* rows, std::int64_t n, std::int64_t dim,
                                                    float* scores, std::int64_t score_stride) {
  std::int64_t j = 0;
  for (; j + EB <= n; j += EB) row_scores_keys<HB, EB>(q, heads, q_stride, rows, dim, j, scores, score_stride);
  for (; j < n; ++j) row_scores_keys<HB, 1>(q, heads, q_stride, rows, dim, j, scores, score_stride);
}

// One version per instruction set: 4 heads × 4 keys is 16 accumulators in AVX-512's 32 registers;
// AVX2 holds each 16-float vector in two of its 16, so it takes 2 × 2.
__attribute__((target("arch=x86-64-v4"))) void row_scores_avx512(const float* q, std::int64_t heads,
                                                                std::int64_t q_stride, const float* const* rows,
                                                                std::int64_t n, std::int64_t dim, float* scores,
                                                                std::int64_t score_stride) {
  row_scores_tiled<4, 4>(q, heads, q_stride, rows, n, dim, scores, score_stride);
}
__attribute__((target("arch=x86-64-v3"))) void row_scores_avx2(const float* q, std::int64_t heads,
                                                              std::int64_t q_stride, const float* const* rows,
                                                              std::int64_t n, std::int64_t dim, float* scores,
                                                              std::int64_t score_stride) {
  row_scores_tiled<2, 2>(q, heads, q_stride, rows, n, dim, scores, score_stride);
}
void row_scores_generic(const float* q, std::int64_t heads, std::int64_t q_stride, const float* const* rows,
                        std::int64_t n, std::int64_t dim, float* scores, std::int64_t score_stride) {
  row_scores_tiled<2, 2>(q, heads, q_stride, rows, n, dim, scores, score_stride);
}

using RowScoresFn = void (*)(const float*, std::int64_t, std::int64_t, const float* const*, std::int64_t, std::int64_t,
                             float*, std::int64_t);

// The version for `isa`, or null where this CPU cannot run it.
RowScoresFn row_scores_version(Isa isa) {
  if (!cpu_runs(isa)) return nullptr;
  switch (isa) {
    case Isa::kAvx512Vbmi:  // (no byte permutes here: the AVX-512 version)
    case Isa::kAvx512: return row_scores_avx512;
    case Isa::kAvx2: return row_scores_avx2;
    case Isa::kGeneric: break;
  }
  return row_scores_generic;
}

RowScoresFn best_row_scores() {
  for (Isa isa : kIsasBestFirst)
    if (RowScoresFn fn = row_scores_version(isa)) return fn;
  return row_scores_generic;  // not reached: every CPU runs the generic version
}

// out[h][d0 + c·16 + lane] = Σ_j p[h·p_stride + j] · rows[j][d0 + c·16 + lane], in j order.
template <int HB, int CB>
[[gnu::always_inline]] inline void sum_columns(const float* p, std::int64_t p_stride, const float* const* rows,
                                               std::int64_t n, std::int64_t d0, float* out, std::int64_t out_stride) {
  V acc[HB][CB] = {};
  for (std::int64_t j = 0; j < n; ++j) {
    const float* row = rows[j] + d0;
    V k[CB];
#pragma GCC unroll 4
    for (int c = 0; c < CB; ++c) k[c] = *reinterpret_cast<const VU*>(row + c * kLanes);
#pragma GCC unroll 16
    for (int h = 0; h < HB; ++h) {
      const float x = p[h * p_stride + j];
#pragma GCC unroll 4
      for (int c = 0; c < CB; ++c) acc[h][c] += x * k[c];
    }
  }
  for (int h = 0; h < HB; ++h) {
    for (int c = 0; c < CB; ++c) *reinterpret_cast<VU*>(out + h * out_stride + d0 + c * kLanes) = acc[h][c];
  }
}

// Columns [d0, d0 + CB·16) of every head's output: the keys' columns there (a release row's 640 keys,
// 160 KB at CB = 4) stay in the L2 while the heads pass, where heads outside columns read every key
// whole, from the L3, once per head block.
template <int HB, int CB>
[[gnu::always_inline]] inline void sum_column_block(const float* p, std::int64_t heads, std::int64_t p_stride,
                                                    const float* const* rows, std::int64_t n, std::int64_t d0, float* out,
                                                    std::int64_t out_stride) {
  std::int64_t h = 0;
  for (; h + HB <= heads; h += HB) sum_columns<HB, CB>(p + h * p_stride, p_stride, rows, n, d0, out + h * out_stride, out_stride);
  for (; h < heads; ++h) sum_columns<1, CB>(p + h * p_stride, p_stride, rows, n, d0, out + h * out_stride, out_stride);
}

template <int HB, int CB>
[[gnu::always_inline]] inline void weighted_rows_tiled(const float* p, std::int64_t heads, std::int64_t p_stride,
                                                       const float* const* rows, std::int64_t n, std::int64_t dim,
                                                       float* out, std::int64_t out_stride) {
  std::int64_t d = 0;
  for (; d + CB * kLanes <= dim; d += CB * kLanes) sum_column_block<HB, CB>(p, heads, p_stride, rows, n, d, out, out_stride);
  for (; d + kLanes <= dim; d += kLanes) sum_column_block<HB, 1>(p, heads, p_stride, rows, n, d, out, out_stride);
  if (d == dim) return;
  if (dim >= kLanes) {  // the last full vector again
    sum_column_block<HB, 1>(p, heads, p_stride, rows, n, dim - kLanes, out, out_stride);
    return;
  }
  for (std::int64_t h = 0; h < heads; ++h) {  // fewer than 16 columns: one scalar chain per element
    for (std::int64_t e = 0; e < dim; ++e) {
      float acc = 0.0f;
      for (std::int64_t j = 0; j < n; ++j) acc += p[h * p_stride + j] * rows[j][e];
      out[h * out_stride + e] = acc;
    }
  }
}

// One version per instruction set, as index_scores: AVX-512 takes 4 vectors of each row per pass
// (four whole cache lines, 16 accumulators), AVX2 two.
__attribute__((target("arch=x86-64-v4"))) void weighted_rows_for_isa(const float* p, std::int64_t heads,
                                                                    std::int64_t p_stride, const float* const* rows,
                                                                    std::int64_t n, std::int64_t dim, float* out,
                                                                    std::int64_t out_stride) {
  weighted_rows_tiled<kSumHeads, 4>(p, heads, p_stride, rows, n, dim, out, out_stride);
}
__attribute__((target("arch=x86-64-v3"))) void weighted_rows_for_isa(const float* p, std::int64_t heads,
                                                                    std::int64_t p_stride, const float* const* rows,
                                                                    std::int64_t n, std::int64_t dim, float* out,
                                                                    std::int64_t out_stride) {
  weighted_rows_tiled<kSumHeads, 2>(p, heads, p_stride, rows, n, dim, out, out_stride);
}
__attribute__((target("default"))) void weighted_rows_for_isa(const float* p, std::int64_t heads, std::int64_t p_stride,
                                                             const float* const* rows, std::int64_t n, std::int64_t dim,
                                                             float* out, std::int64_t out_stride) {
  weighted_rows_tiled<kSumHeads, 2>(p, heads, p_stride, rows, n, dim, out, out_stride);
}

// glibc's expf (sysdeps/ieee754/flt-32/e_expf.c, glibc 2.28 and later) for 8 floats in double
// lanes, with its table, constants and steps: k = round(x·32/ln2), r = x·32/ln2 - k,
// exp(x) = 2^(k/32) · (1 + C2 r + (C0 r + C1) r²), rounded once to float. With -ffp-contract=fast
// the multiply-adds fuse exactly where glibc's FMA build fuses them (and nowhere without FMA, as
// its generic build), so each result has std::exp's bits. |x| >= 88, infinities and NaN take
// std::exp itself.
constexpr std::int64_t kExpLanes = 8;
using D8 = double __attribute__((vector_size(64)));
using U8 = std::uint64_t __attribute__((vector_size(64)));
using F8 = float __attribute__((vector_size(32)));
using I8 = std::int32_t __attribute__((vector_size(32)));

constexpr std::uint64_t kExp2Table[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51, 0x3fef72b83c7d517b,
    0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1, 0x3fef06fe0a31b715, 0x3feef1a7373aa9cb,
    0x3feedea64c123422, 0x3feece086061892d, 0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429,
    0x3feea47eb03a5585, 0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d, 0x3feee89f995ad3ad,
    0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069, 0x3fef5818dcfba487, 0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da, 0x3fefd0765b6e4540};
constexpr U8 kExp2Low0 = {kExp2Table[0], kExp2Table[1], kExp2Table[2], kExp2Table[3],
                          kExp2Table[4], kExp2Table[5], kExp2Table[6], kExp2Table[7]};
constexpr U8 kExp2Low1 = {kExp2Table[8], kExp2Table[9], kExp2Table[10], kExp2Table[11],
                          kExp2Table[12], kExp2Table[13], kExp2Table[14], kExp2Table[15]};
constexpr U8 kExp2High0 = {kExp2Table[16], kExp2Table[17], kExp2Table[18], kExp2Table[19],
                           kExp2Table[20], kExp2Table[21], kExp2Table[22], kExp2Table[23]};
constexpr U8 kExp2High1 = {kExp2Table[24], kExp2Table[25], kExp2Table[26], kExp2Table[27],
                           kExp2Table[28], kExp2Table[29], kExp2Table[30], kExp2Table[31]};
constexpr double kInvLn2N = 0x1.71547652b82fep+5;  // 32 / ln 2
constexpr double kShift = 0x1.8p+52;               // adding it rounds to an integer, ties to even
constexpr double kC0 = 0x1.c6af84b912394p-20, kC1 = 0x1.ebfce50fac4f3p-13, kC2 = 0x1.62e42ff0c52d6p-6;

[[gnu::always_inline]] inline void exp8(const F8& x, float* out) {
  const D8 xd = __builtin_convertvector(x, D8);
  const D8 z = kInvLn2N * xd;
  D8 kd = z + kShift;
  U8 ki;
  std::memcpy(&ki, &kd, sizeof ki);
  kd -= kShift;
  const D8 r = z - kd;
  // T[ki % 32]: two 16-entry permutes, then bit 4 picks one.
  const U8 low = __builtin_shuffle(kExp2Low0, kExp2Low1, ki), high = __builtin_shuffle(kExp2High0, kExp2High1, ki);
  U8 t = (ki & 16) != 0 ? high : low;
  t += ki << 47;
  D8 s;
  std::memcpy(&s, &t, sizeof s);
  const D8 p = kC0 * r + kC1;
  const D8 r2 = r * r;
  D8 q = kC2 * r + 1.0;
  q = p * r2 + q;
  q = q * s;
  const F8 result = __builtin_convertvector(q, F8);
  I8 bits;
  std::memcpy(&bits, &x, sizeof bits);
  // glibc's special-case test, top12(x) & 0x7ff >= top12(88.0f): with the sign cleared, the bits
  // compare as the magnitude does; the largest lane tells whether any needs std::exp.
  const I8 magnitude = bits & 0x7FFFFFFF;
  std::memcpy(out, &result, sizeof result);
  std::int32_t largest = 0;
  for (int l = 0; l < kExpLanes; ++l) largest = std::max(largest, magnitude[l]);
  if (largest >= 0x42B00000) {
    for (int l = 0; l < kExpLanes; ++l) {
      if (magnitude[l] >= 0x42B00000) out[l] = std::exp(x[l]);
    }
  }
}

// sums[h] += Σ_{j < n} x[h·stride + j] in j order, for NH heads at once.
template <int NH>
[[gnu::always_inline]] inline void ordered_sums(const float* x, std::int64_t stride, std::int64_t n, float* sums) {
  float acc[NH];
  for (int h = 0; h < NH; ++h) acc[h] = sums[h];
  for (std::int64_t j = 0; j < n; ++j) {
    for (int h = 0; h < NH; ++h) acc[h] += x[h * stride + j];
  }
  for (int h = 0; h < NH; ++h) sums[h] = acc[h];
}

// Transposes a 16 x 16 tile held as 16 row vectors: for each index bit b, rows i and i + b (bit b of
// i clear) exchange the elements whose column has bit b set with the other's elements whose column has
// it clear, which swaps bit b of the row and the column index; after the four bits, (r, c) -> (c, r).
using M16 = std::int32_t __attribute__((vector_size(64)));
template <int B>
[[gnu::always_inline]] inline void transpose16_step(V (&t)[kLanes]) {
  constexpr M16 kKeep = {(0 & B) ? 16 + 0 - B : 0,    (1 & B) ? 16 + 1 - B : 1,    (2 & B) ? 16 + 2 - B : 2,
                         (3 & B) ? 16 + 3 - B : 3,    (4 & B) ? 16 + 4 - B : 4,    (5 & B) ? 16 + 5 - B : 5,
                         (6 & B) ? 16 + 6 - B : 6,    (7 & B) ? 16 + 7 - B : 7,    (8 & B) ? 16 + 8 - B : 8,
                         (9 & B) ? 16 + 9 - B : 9,    (10 & B) ? 16 + 10 - B : 10, (11 & B) ? 16 + 11 - B : 11,
                         (12 & B) ? 16 + 12 - B : 12, (13 & B) ? 16 + 13 - B : 13, (14 & B) ? 16 + 14 - B : 14,
                         (15 & B) ? 16 + 15 - B : 15};
  constexpr M16 kTake = {(0 & B) ? 16 + 0 : 0 + B,    (1 & B) ? 16 + 1 : 1 + B,    (2 & B) ? 16 + 2 : 2 + B,
                         (3 & B) ? 16 + 3 : 3 + B,    (4 & B) ? 16 + 4 : 4 + B,    (5 & B) ? 16 + 5 : 5 + B,
                         (6 & B) ? 16 + 6 : 6 + B,    (7 & B) ? 16 + 7 : 7 + B,    (8 & B) ? 16 + 8 : 8 + B,
                         (9 & B) ? 16 + 9 : 9 + B,    (10 & B) ? 16 + 10 : 10 + B, (11 & B) ? 16 + 11 : 11 + B,
                         (12 & B) ? 16 + 12 : 12 + B, (13 & B) ? 16 + 13 : 13 + B, (14 & B) ? 16 + 14 : 14 + B,
                         (15 & B) ? 16 + 15 : 15 + B};
  for (int i = 0; i < kLanes; ++i) {
    if (i & B) continue;
    const V low = __builtin_shuffle(t[i], t[i + B], kKeep);
    const V high = __builtin_shuffle(t[i], t[i + B], kTake);
    t[i] = low;
    t[i + B] = high;
  }
}

[[gnu::always_inline]] inline void transpose16(V (&t)[kLanes]) {
  transpose16_step<8>(t);
  transpose16_step<4>(t);
  transpose16_step<2>(t);
  transpose16_step<1>(t);
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

void row_scores(const float* q, std::int64_t heads, std::int64_t q_stride, const float* const* rows, std::int64_t n,
                std::int64_t dim, float* scores, std::int64_t score_stride) {
  static const RowScoresFn chosen = best_row_scores();
  chosen(q, heads, q_stride, rows, n, dim, scores, score_stride);
}

Status row_scores_with_isa(std::string_view isa, const float* q, std::int64_t heads, std::int64_t q_stride,
                           const float* const* rows, std::int64_t n, std::int64_t dim, float* scores,
                           std::int64_t score_stride) {
  const std::optional<Isa> named = isa_named(isa);
  const RowScoresFn fn = named ? row_scores_version(*named) : nullptr;
  if (fn == nullptr) {
    return make_error(ErrorCode::kInvalidArgument, "row_scores: instruction set '{}' does not run on this CPU", isa);
  }
  fn(q, heads, q_stride, rows, n, dim, scores, score_stride);
  return {};
}

void index_scores(const float* q, std::int64_t heads, std::int64_t dim, const float* kt, std::int64_t ld,
                  std::int64_t n, const float* weights, float scale, float* scores) {
  if (n > 0) index_scores_for_isa(q, heads, dim, kt, ld, n, weights, scale, scores);
}

void weighted_rows(const float* p, std::int64_t heads, std::int64_t p_stride, const float* const* rows, std::int64_t n,
                   std::int64_t dim, float* out, std::int64_t out_stride) {
  weighted_rows_for_isa(p, heads, p_stride, rows, n, dim, out, out_stride);
}

__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) void exp_floats(
    const float* x, float* y, std::int64_t n) {
  std::int64_t i = 0;
  F8 v;
  for (; i + kExpLanes <= n; i += kExpLanes) {
    std::memcpy(&v, x + i, sizeof v);
    exp8(v, y + i);
  }
  if (i < n) {
    float pad[kExpLanes] = {};
    std::memcpy(pad, x + i, static_cast<std::size_t>(n - i) * sizeof(float));
    std::memcpy(&v, pad, sizeof v);
    exp8(v, pad);
    std::memcpy(y + i, pad, static_cast<std::size_t>(n - i) * sizeof(float));
  }
}

__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) void softmax_with_sink(
    float* x, std::int64_t heads, std::int64_t stride, std::int64_t n, float scale, const float* sinks) {
  constexpr std::int64_t kHeads = 8;  // heads whose sums advance together
  for (std::int64_t h0 = 0; h0 < heads; h0 += kHeads) {
    const std::int64_t nh = std::min(kHeads, heads - h0);
    static_assert(kHeads <= kExpLanes, "the sink terms take one exp8");
    float denom[kHeads] = {}, sink_term[kExpLanes] = {};
    for (std::int64_t h = 0; h < nh; ++h) {
      float* row = x + (h0 + h) * stride;
      const float sink = sinks[h0 + h];
      // The maximum is the same whatever order finds it (a -0/+0 choice cannot change s_j - m).
      V lane_max;
      for (std::int64_t l = 0; l < kLanes; ++l) lane_max[l] = sink;
      std::int64_t j = 0;
      for (; j + kLanes <= n; j += kLanes) {
        const V s = *reinterpret_cast<const VU*>(row + j) * scale;
        *reinterpret_cast<VU*>(row + j) = s;
        lane_max = lane_max < s ? s : lane_max;
      }
      float mh = sink;
      for (std::int64_t l = 0; l < kLanes; ++l) mh = std::max(mh, lane_max[l]);
      for (; j < n; ++j) {
        row[j] *= scale;
        mh = std::max(mh, row[j]);
      }
      sink_term[h] = sink - mh;
      // exp(s_j - m), 8 at a time; the last partial group through a zero-padded copy.
      F8 diff;
      for (j = 0; j + kExpLanes <= n; j += kExpLanes) {
        std::memcpy(&diff, row + j, sizeof diff);
        exp8(diff - mh, row + j);
      }
      if (j < n) {
        float pad[kExpLanes] = {};
        for (std::int64_t l = 0; l < n - j; ++l) pad[l] = row[j + l] - mh;
        std::memcpy(&diff, pad, sizeof diff);
        exp8(diff, pad);
        std::memcpy(row + j, pad, static_cast<std::size_t>(n - j) * sizeof(float));
      }
    }
    F8 sink_diff;
    std::memcpy(&sink_diff, sink_term, sizeof sink_diff);
    exp8(sink_diff, sink_term);
    // Each head's sum in j order, the heads' chains interleaved in registers.
    std::int64_t summed = 0;
    if (nh == 8) {
      ordered_sums<8>(x + h0 * stride, stride, n, denom);
      summed = 8;
    }
    for (; summed + 4 <= nh; summed += 4) ordered_sums<4>(x + (h0 + summed) * stride, stride, n, denom + summed);
    for (; summed < nh; ++summed) ordered_sums<1>(x + (h0 + summed) * stride, stride, n, denom + summed);
    for (std::int64_t h = 0; h < nh; ++h) {
      const float d = denom[h] + sink_term[h];
      float* row = x + (h0 + h) * stride;
      for (std::int64_t j = 0; j < n; ++j) row[j] /= d;
    }
  }
}

__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) void transpose_rows(
    const float* const* rows, std::int64_t n, std::int64_t dim, float* kt, std::int64_t ld) {
  std::int64_t j0 = 0;
  for (; j0 + kLanes <= n; j0 += kLanes) {  // 16 x 16 tiles in registers
    std::int64_t d0 = 0;
    for (; d0 + kLanes <= dim; d0 += kLanes) {
      V tile[kLanes];
      for (std::int64_t i = 0; i < kLanes; ++i) tile[i] = *reinterpret_cast<const VU*>(rows[j0 + i] + d0);
      transpose16(tile);
      for (std::int64_t i = 0; i < kLanes; ++i) *reinterpret_cast<VU*>(kt + (d0 + i) * ld + j0) = tile[i];
    }
    for (std::int64_t d = d0; d < dim; ++d) {
      for (std::int64_t j = j0; j < j0 + kLanes; ++j) kt[d * ld + j] = rows[j][d];
    }
  }
  for (std::int64_t d = 0; d < dim; ++d) {
    for (std::int64_t j = j0; j < n; ++j) kt[d * ld + j] = rows[j][d];
  }
}

}  // namespace hippo::kernels::cpu
