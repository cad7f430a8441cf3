// target_clones compiles each function for AVX-512, AVX2 and baseline x86-64 and picks one at load
// time; 8-lane vector types keep the arithmetic identical across them (no FMA contraction).
#include "kernels/cpu/vector_ops.h"

#include <algorithm>

namespace hippo::kernels::cpu {
namespace {

using F8 = float __attribute__((vector_size(32)));
using F8Unaligned = float __attribute__((vector_size(32), aligned(4), may_alias));
using I8 = std::int32_t __attribute__((vector_size(32)));

// exp(t) = 2^k * e^r with k = round(t / ln 2) and r = t - k ln 2 in [-ln2/2, ln2/2]: the
// round-to-nearest by the 1.5 * 2^23 trick (the integer k in the low mantissa bits), ln 2 in two
// parts so that r is exact, e^r by Cephes' expf polynomial, 2^k built in the exponent field.
// By reference and always inlined: a vector passed by value would change the ABI between the clones.
__attribute__((always_inline)) inline void exp8(const F8& arg, F8& out) {
  F8 t = arg;
  const F8 lowest = F8{} - 87.3f;
  const I8 underflow = t < lowest;
  t = t < lowest ? lowest : t;
  t = t > 88.0f ? F8{} + 88.0f : t;
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  const F8 shifted = t * 1.44269504088896341f + kMagic;
  const F8 k = shifted - kMagic;
  const F8 r = (t - k * 0.693359375f) - k * -2.12194440e-4f;
  F8 p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const I8 k_int = __builtin_bit_cast(I8, shifted) - __builtin_bit_cast(std::int32_t, kMagic);
  const F8 two_k = __builtin_bit_cast(F8, (k_int + 127) << 23);
  out = underflow ? F8{} : p * two_k;
}

// The lanes of sum added in a fixed tree: 8 -> 4 (lane i + lane i+4) -> 1.
__attribute__((always_inline)) inline float reduce8(const F8& sum) {
  const float s4[4] = {sum[0] + sum[4], sum[1] + sum[5], sum[2] + sum[6], sum[3] + sum[7]};
  return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

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
  return reduce8(even + odd) + tail;
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void axpy(float alpha, const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void exp_block_sums(const float* x, float shift, float scale,
                                                                                  float* out, std::int64_t n,
                                                                                  float* block_sums) {
  for (std::int64_t b0 = 0; b0 < n; b0 += kExpBlock) {
    const std::int64_t len = std::min(kExpBlock, n - b0);
    F8 sum = {};
    std::int64_t i = 0;
    for (; i + 8 <= len; i += 8) {
      F8 e;
      exp8((*reinterpret_cast<const F8Unaligned*>(x + b0 + i) - shift) * scale, e);
      *reinterpret_cast<F8Unaligned*>(out + b0 + i) = e;
      sum += e;
    }
    if (i < len) {  // the last few: zero lanes past the end, so they add nothing
      F8 tail = {}, e;
      std::copy(x + b0 + i, x + b0 + len, reinterpret_cast<float*>(&tail));
      exp8((tail - shift) * scale, e);
      for (std::int64_t j = len - i; j < 8; ++j) e[j] = 0.0f;
      std::copy(reinterpret_cast<const float*>(&e), reinterpret_cast<const float*>(&e) + (len - i), out + b0 + i);
      sum += e;
    }
    block_sums[b0 / kExpBlock] = reduce8(sum);
  }
}

}  // namespace hippo::kernels::cpu
