// Vector primitives of the attention and indexer inner loops (dot products against cached keys,
// weighted sums of values) and of sampling (exponentials over the vocabulary). The reduction order is fixed by the code, not by the instruction set:
// 16 lane-wise partial sums reduced by one tree, so every machine computes the same bits.
#pragma once

#include <cstdint>

namespace hippo::kernels::cpu {

// Σ a[i] · b[i] over n elements.
float dot(const float* a, const float* b, std::int64_t n);

// y[i] += alpha · x[i].
void axpy(float alpha, const float* x, float* y, std::int64_t n);

// out[i] = exp((x[i] - shift) * scale) in single precision, within a few ulp of expf; the
// exponent is clamped to 88 above and gives 0 below -87.3 (under the smallest normal float). The
// same bits on every machine: a fixed polynomial, no libm. Also block_sums[b], the sum of
// out[kExpBlock * b ...] over one block (the last one may be shorter), added in a fixed order:
// sampling weighs a whole vocabulary with this and then walks the blocks.
constexpr std::int64_t kExpBlock = 64;
void exp_block_sums(const float* x, float shift, float scale, float* out, std::int64_t n, float* block_sums);

}  // namespace hippo::kernels::cpu
