// The reference linear layer: y = x · Wᵀ with every weight decoded by the exact scalar decoders
// and every dot product accumulated in double. Slow and plain on purpose: it is the truth the
// SIMD and GPU kernels are measured against.
#pragma once

#include "kernels/weight_view.h"

#include <cstdint>

namespace hippo::kernels::ref {

// W[row, col] as an exact float.
float weight_at(const WeightView& w, std::int64_t row, std::int64_t col);

// x: f32 [m, w.cols], y: f32 [m, w.rows]. The view must be validated.
void linear(const float* x, std::int64_t m, const WeightView& w, float* y);

}  // namespace hippo::kernels::ref
