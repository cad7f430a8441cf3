// linear() for AVX-512 with VBMI (Ice Lake, Zen 4 and later): linear_avx512.cpp's body, whose FP8
// decode takes 64 columns at a time through byte permutes (linear_impl.h's fp8_group) instead of a
// conversion from fp16 per 16.
#if defined(__x86_64__)
#define HIPPO_LINEAR_TARGET __attribute__((target("avx512f,avx512bw,avx512vbmi,fma")))
#define HIPPO_LINEAR_VBMI 1
#else  // never dispatched to off x86; compiled generic so the build stays whole
#define HIPPO_LINEAR_TARGET
#endif
#include "kernels/cpu/linear_impl.h"

namespace hippo::kernels::cpu {

void linear_avx512vbmi(const float* x, std::int64_t m, const WeightView& w, const LinearOut& y, ThreadPool& pool) {
  linear_impl<16, 8>(x, m, w, y, pool);
}

void decode_rows_transposed_avx512vbmi(const WeightView& w, std::int64_t r0, std::int64_t n, float* kt, std::int64_t ld) {
  Simd<16>::decode_transposed(w, r0, n, kt, ld);
}

}  // namespace hippo::kernels::cpu
