// target_clones compiles each function for AVX-512, AVX2 and baseline x86-64 and picks one at load
// time; 8-lane vector types keep the arithmetic identical across them (no FMA contraction).
#include "kernels/cpu/vector_ops.h"


namespace hippo::kernels::cpu {
namespace {

using F8 = float __attribute__((vector_size(32)));
using F8Unaligned = float __attribute__((vector_size(32), aligned(4), may_alias));

}  // namespace

// Two 8-lane accumulators (16 partial sums), combined lane-wise, then an 8 -> 1 tree.
__attribute__((target_clones("avx512f", "avx2", "default"))) float dot(const float* a, const float* b, std::int64_t n) {
  F8 even = {}, odd = {};
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    even += *reinterpret_cast<const F8Unaligned*>(a + i) * *reinterpret_cast<const F8Unaligned*>(b + i);
    odd += *reinterpret_cast<const F8Unaligned*>(a + i + 8) * *reinterpret_cast<const F8Unaligned*>(b + i + 8);
  }
  float tail = 0.0f;
  for (; i < n; ++i) tail += a[i] * b[i];
  F8 sum = even + odd;
  const float s4[4] = {sum[0] + sum[4], sum[1] + sum[5], sum[2] + sum[6], sum[3] + sum[7]};
  return ((s4[0] + s4[2]) + (s4[1] + s4[3])) + tail;
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void axpy(float alpha, const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

}  // namespace hippo::kernels::cpu
