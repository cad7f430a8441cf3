// The compressor's per-channel softmax pooling of a group on the device (contract in
// kernels/backend.h): one thread per (group, channel).
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/launch.h"

namespace hippo::kernels::cuda {
namespace {

__global__ void compressor_pool_kernel(const float* kv, const float* gate, std::int64_t groups, std::int64_t ratio,
                                       std::int64_t dim, float* latents) {
  const std::int64_t t = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (t >= groups * dim) return;
  const std::int64_t g = t / dim, c = t % dim;
  const float* gate_c = gate + g * ratio * dim + c;
  const float* kv_c = kv + g * ratio * dim + c;
  float top = -INFINITY;
  for (std::int64_t j = 0; j < ratio; ++j) top = fmaxf(top, gate_c[j * dim]);
  float denominator = 0.0f, sum = 0.0f;
  for (std::int64_t j = 0; j < ratio; ++j) {
    const float e = expf(gate_c[j * dim] - top);
    denominator += e;
    sum += e * kv_c[j * dim];
  }
  latents[t] = sum / denominator;
}

}  // namespace

void compressor_pool(const float* kv, const float* gate, std::int64_t groups, std::int64_t ratio, std::int64_t dim,
                     float* latents, cudaStream_t stream) {
  if (groups * dim <= 0) return;
  compressor_pool_kernel<<<blocks_for(groups * dim, 256), 256, 0, stream>>>(kv, gate, groups, ratio, dim, latents);
  check(cudaGetLastError(), "compressor_pool");
}

}  // namespace hippo::kernels::cuda
