// linear() for the avx512 instruction set: the shared body of linear_impl.h with 16 floats per
// vector, panels of 32 weight rows and tiles of 8 rows of x (16 of the 32 vector registers hold
// accumulators; -ffp-contract=fast from kernels/CMakeLists.txt).
#if defined(__x86_64__)
#define HIPPO_LINEAR_TARGET __attribute__((target("avx512f,avx512bw,fma")))
#else  // never dispatched to off x86; compiled generic so the build stays whole
#define HIPPO_LINEAR_TARGET
#endif
#include "kernels/cpu/linear_impl.h"

namespace hippo::kernels::cpu {

void linear_avx512(const float* x, std::int64_t m, const WeightView& w, const LinearOut& y, ThreadPool& pool) {
  linear_impl<16, 8>(x, m, w, y, pool);
}

void decode_rows_transposed_avx512(const WeightView& w, std::int64_t r0, std::int64_t n, float* kt, std::int64_t ld) {
  Simd<16>::decode_transposed(w, r0, n, kt, ld);
}

}  // namespace hippo::kernels::cpu
