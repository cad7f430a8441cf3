// Vector primitives of the attention and indexer inner loops (dot products against cached keys,
// weighted sums of values). The reduction order is fixed by the code, not by the instruction set:
// 16 lane-wise partial sums reduced by one tree, so every machine computes the same bits.
#pragma once

#include <cstdint>

namespace hippo::kernels::cpu {

// Σ a[i] · b[i] over n elements.
float dot(const float* a, const float* b, std::int64_t n);

// y[i] += alpha · x[i].
void axpy(float alpha, const float* x, float* y, std::int64_t n);

}  // namespace hippo::kernels::cpu
