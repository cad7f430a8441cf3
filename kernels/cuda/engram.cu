// Engram on the device (contracts in kernels/backend.h): table rows that the host gathered,
// decoded; and the gated fusion into the streams, one block per (row, stream).
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/formats.cuh"
#include "kernels/cuda/launch.h"

namespace hippo::kernels::cuda {
namespace {

constexpr int kFuseThreads = 256;

__global__ void decode_table_rows_kernel(int format, const std::uint8_t* codes, const std::uint8_t* scales, std::int64_t n,
                                         std::int64_t cols, float* out) {
  const std::int64_t t = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (t >= n * cols) return;
  if (format == 0) {  // BF16, two bytes per value, little-endian
    const std::uint16_t bits = static_cast<std::uint16_t>(codes[2 * t] | (codes[2 * t + 1] << 8));
    out[t] = bf16_to_f32(bits);
  } else {
    const std::int64_t i = t / cols, c = t % cols;
    out[t] = e4m3fn_to_f32(codes[t]) * e8m0_to_f32(scales[i * (cols / 32) + c / 32]);
  }
}

__global__ void engram_fuse_kernel(float* streams, const float* kv, const float* gate_weight, std::int64_t hc, std::int64_t d,
                                   float eps) {
  __shared__ float shared[kFuseThreads];
  const std::int64_t r = blockIdx.x / hc, i = blockIdx.x % hc;
  float* h = streams + (r * hc + i) * d;
  const float* k = kv + (r * (hc + 1) + i) * d;
  const float* v = kv + (r * (hc + 1) + hc) * d;
  const float* w = gate_weight + i * d;
  float hwk = 0.0f, hh = 0.0f, kk = 0.0f;
  for (std::int64_t e = threadIdx.x; e < d; e += blockDim.x) {
    hwk += h[e] * w[e] * k[e];
    hh += h[e] * h[e];
    kk += k[e] * k[e];
  }
  const double n = static_cast<double>(d);
  const double sum_hwk = block_sum(hwk, shared), sum_hh = block_sum(hh, shared), sum_kk = block_sum(kk, shared);
  const double g = sum_hwk / sqrt(sum_hh / n + eps) / sqrt(sum_kk / n + eps) / sqrt(n);
  // sign(g) as copysign: g = ±0 counts as ±1, as kernels/ref takes it.
  const double gate = 1.0 / (1.0 + exp(-copysign(sqrt(fmax(fabs(g), 1e-6)), g)));
  for (std::int64_t e = threadIdx.x; e < d; e += blockDim.x) h[e] = static_cast<float>(h[e] + gate * v[e]);
}

}  // namespace

void decode_table_rows(int format, const std::uint8_t* codes, const std::uint8_t* scales, std::int64_t n, std::int64_t cols,
                       float* out, cudaStream_t stream) {
  if (n * cols <= 0) return;
  decode_table_rows_kernel<<<blocks_for(n * cols, 256), 256, 0, stream>>>(format, codes, scales, n, cols, out);
  check(cudaGetLastError(), "gather_rows");
}

void engram_fuse(float* streams, const float* kv, const float* gate_weight, std::int64_t rows, std::int64_t hc, std::int64_t d,
                 float eps, cudaStream_t stream) {
  if (rows * hc <= 0) return;
  engram_fuse_kernel<<<static_cast<unsigned>(rows * hc), kFuseThreads, 0, stream>>>(streams, kv, gate_weight, hc, d, eps);
  check(cudaGetLastError(), "engram_fuse");
}

}  // namespace hippo::kernels::cuda
