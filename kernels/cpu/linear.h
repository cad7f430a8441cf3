// The CPU linear layer y = x · Wᵀ for every weight format of the release, multithreaded.
//
// Invariant (the engine's bit-exact tests rely on it): y[i, r] depends only on x[i, :], W[r, :]
// and the instruction set chosen at start-up, never on m, on the other rows of x, or on the
// number of threads. So a batch of sessions equals each session alone, and a chunked prefill
// equals a one-shot one, bit for bit. linear_impl.h keeps it by one reduction order that its
// decode (m <= 8) and prefill kernels share: 16 lane-strided partial sums over k (lane l takes
// columns l, l + 16, ..., one FMA each from 0), then a fixed tree over the 16 lanes.
#pragma once

#include "kernels/cpu/thread_pool.h"
#include "kernels/weight_view.h"

#include <cstdint>
#include <string>
#include <vector>

namespace hippo::kernels::cpu {

// x: f32 [m, w.cols], y: f32 [m, w.rows]. The view must be validated (WeightView::validate).
void linear(const float* x, std::int64_t m, const WeightView& w, float* y, ThreadPool& pool);

// The same with row i of y at y_rows[i] (w.rows floats each): a decode batch writes each session's
// logits straight into that session's buffer.
void linear_rows(const float* x, std::int64_t m, const WeightView& w, float* const* y_rows, ThreadPool& pool);

// Where the implementations write row i of y: one [m, n] matrix, or a pointer per row.
struct LinearOut {
  float* y = nullptr;
  float* const* rows = nullptr;  // when set, y is unused
  float* row(std::int64_t i, std::int64_t n) const { return rows != nullptr ? rows[i] : y + i * n; }
};

// Rows r0 .. r0 + n of W decoded (the values of kernels/ref) and transposed, W rows at a time
// through registers: kt[d·ld + j] = W[r0 + j, d] for j < n, d < w.cols (a multiple of 16). The
// indexer reads its FP4 keys so, many at once, for transposed_scores (attention_ops.h).
void decode_rows_transposed(const WeightView& w, std::int64_t r0, std::int64_t n, float* kt, std::int64_t ld);

// The instruction set linear() dispatches to on this CPU: "avx512vbmi", "avx512", "avx2" or "generic".
std::string linear_isa();

// Whether linear() on this instruction set reads FP4 weights faster from a copy in lane order
// (weight_view.h's fp4_to_lane_order) than packed: AVX-512's decodes do; AVX2 reads packed codes
// through byte lookups that cost less than its lane-order permutes, so it needs no copy.
bool fp4_lane_order_pays(const std::string& isa);

// Whether linear() on this instruction set decodes FP8 weights faster with their special blocks
// marked (weight_view.h's fp8_special_blocks): AVX2 and AVX-512 read the unmarked blocks through a
// byte table (AVX-512 VBMI: byte permutes for one or two rows of x, which take every code), and
// AVX-512 past two rows of x straight into fp32 bits, without a NaN check.
bool fp8_special_blocks_pay(const std::string& isa);

// Every instruction set this CPU can run (up to limit_isa's cap), best first, and linear() or decode_rows_transposed()
// forced onto one of them (tests compare each against kernels/ref; benchmarks compare them with one another).
std::vector<std::string> runnable_linear_isas();
Status linear_with_isa(const std::string& isa, const float* x, std::int64_t m, const WeightView& w, float* y,
                       ThreadPool& pool);
Status decode_rows_transposed_with_isa(const std::string& isa, const WeightView& w, std::int64_t r0, std::int64_t n,
                                      float* kt, std::int64_t ld);

}  // namespace hippo::kernels::cpu
