// The arithmetic of the attention core: scores of a row's query heads against keys held transposed,
// and the probability-weighted sum of key rows. Every output element is one sequential chain (a fused
// multiply-add per step on machines with FMA, a multiply then an add elsewhere) over its reduction
// index, starting from zero: its bits depend only on the values it reads, never on n, strides, the
// number of heads, or which vector lane or tile computed it. The forward pass relies on this to give
// one row the same result in a prefill chunk of any size, a decode step and a batch of sessions.
#pragma once

#include "base/status.h"

#include <cstdint>
#include <string_view>

namespace hippo::kernels::cpu {

// scores[h·score_stride + j] = Σ_{d < dim, ascending} q[h·q_stride + d] · kt[d·ld + j]
// for h < heads, j < n: keys are the columns of kt ([dim][ld] floats, only columns [0, n) are read).
void transposed_scores(const float* q, std::int64_t heads, std::int64_t q_stride, const float* kt, std::int64_t ld,
                       std::int64_t n, std::int64_t dim, float* scores, std::int64_t score_stride);

// scores[h·score_stride + j] = the dot of q[h·q_stride + ·] and rows[j] over d < dim, for h < heads,
// j < n, in one fixed order: 16 chains from zero, chain l over d ≡ l (mod 16) ascending (a term past
// dim is zero), then the tree ((c_l + c_{l+8}) for l < 8, then + the lane 4 on, 2 on, 1 on). Keys
// are read as rows, so nothing is transposed: for keys that no two rows share (a row's selected
// entries), transposing them cost more than scoring them.
void row_scores(const float* q, std::int64_t heads, std::int64_t q_stride, const float* const* rows, std::int64_t n,
                std::int64_t dim, float* scores, std::int64_t score_stride);
// row_scores as one instruction set's version computes it ("avx512", "avx2": a fused multiply-add per
// chain step; "generic": a multiply then an add), for tests that run every version this CPU can;
// an error where it cannot run that one.
Status row_scores_with_isa(std::string_view isa, const float* q, std::int64_t heads, std::int64_t q_stride,
                           const float* const* rows, std::int64_t n, std::int64_t dim, float* scores,
                           std::int64_t score_stride);

// The lightning indexer's score of each key: scores[j] = Σ_{h ascending, from 0}
// max(dot_hj, 0)·scale·weights[h], where dot_hj is transposed_scores' chain of q[h·dim + ·] against key
// column j of kt ([dim][ld] floats, columns [0, n) read). Each score is one such fixed sequence, so
// the same bits whatever n, ld or tile computed it.
void index_scores(const float* q, std::int64_t heads, std::int64_t dim, const float* kt, std::int64_t ld,
                  std::int64_t n, const float* weights, float scale, float* scores);

// out[h·out_stride + d] = Σ_{j < n, ascending} p[h·p_stride + j] · rows[j][d]   for h < heads, d < dim.
void weighted_rows(const float* p, std::int64_t heads, std::int64_t p_stride, const float* const* rows, std::int64_t n,
                   std::int64_t dim, float* out, std::int64_t out_stride);

// y[i] = exp(x[i]) with std::exp's bits on glibc 2.28 and later (its expf algorithm, table and
// rounding steps, 8 at a time); x and y may be the same array.
void exp_floats(const float* x, float* y, std::int64_t n);

// In place for each head h < heads, over x[h·stride + j], j < n:
//   x <- exp(s_j - m) / (Σ_j exp(s_j - m) + exp(sink_h - m)),  s_j = scale · x,  m = max(sink_h, max_j s_j),
// the sum in j order, each exp as exp_floats (so std::exp's value).
void softmax_with_sink(float* x, std::int64_t heads, std::int64_t stride, std::int64_t n, float scale,
                       const float* sinks);

// kt[d·ld + j] = rows[j][d] for j < n, d < dim (ld >= n).
void transpose_rows(const float* const* rows, std::int64_t n, std::int64_t dim, float* kt, std::int64_t ld);

}  // namespace hippo::kernels::cpu
