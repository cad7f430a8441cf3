// linear() for the generic instruction set: the shared body of linear_impl.h with 4 floats per
// vector, panels of 8 weight rows and tiles of 4 rows of x (8 of the 16 SSE registers hold
// accumulators; -ffp-contract=fast from kernels/CMakeLists.txt).
#define HIPPO_LINEAR_TARGET
#include "kernels/cpu/linear_impl.h"

namespace hippo::kernels::cpu {

void linear_generic(const float* x, std::int64_t m, const WeightView& w, const LinearOut& y, ThreadPool& pool) {
  linear_impl<4, 4>(x, m, w, y, pool);
}

void decode_rows_transposed_generic(const WeightView& w, std::int64_t r0, std::int64_t n, float* kt, std::int64_t ld) {
  Simd<4>::decode_transposed(w, r0, n, kt, ld);
}

}  // namespace hippo::kernels::cpu
