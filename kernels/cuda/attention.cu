// Window + selected-entry attention with the sink on the device (contract in kernels/backend.h):
// one block per (row, head). Scores go to a scratch row, then the softmax with the sink, then the
// weighted sum of the keys (which are the values too). Every reduction has one fixed order, so a
// row's output depends on its own query and keys only.
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/launch.h"

namespace hippo::kernels::cuda {
namespace {

constexpr int kThreads = 128;

__global__ void attention_kernel(DeviceAttention a) {
  __shared__ float shared[kThreads];
  const std::int64_t r = blockIdx.x / a.heads, h = blockIdx.x % a.heads;
  const std::int64_t first = a.key_offset[r], n = a.key_offset[r + 1] - first;
  const float* q = a.q + (r * a.heads + h) * a.dim;
  float* p = a.scratch + std::int64_t{blockIdx.x} * a.max_keys;
  const int lane = threadIdx.x % 32, group = threadIdx.x / 32, groups = kThreads / 32;

  // Scores: a group of 32 lanes per key.
  for (std::int64_t j = group; j < n; j += groups) {
    const float* k = a.keys + a.key_index[first + j] * a.dim;
    float partial = 0.0f;
    for (std::int64_t e = lane; e < a.dim; e += 32) partial += q[e] * k[e];
    const float dot = lane_group_sum(partial);
    if (lane == 0) p[j] = a.scale * dot;
  }
  __syncthreads();

  float top = a.sinks[h];
  for (std::int64_t j = threadIdx.x; j < n; j += kThreads) top = fmaxf(top, p[j]);
  top = block_max(top, shared);
  float partial = 0.0f;
  for (std::int64_t j = threadIdx.x; j < n; j += kThreads) {
    p[j] = expf(p[j] - top);
    partial += p[j];
  }
  const float denominator = block_sum(partial, shared) + expf(a.sinks[h] - top);
  for (std::int64_t j = threadIdx.x; j < n; j += kThreads) p[j] /= denominator;
  __syncthreads();

  float* out = a.out + (r * a.heads + h) * a.dim;
  for (std::int64_t e = threadIdx.x; e < a.dim; e += kThreads) {
    float sum = 0.0f;
    for (std::int64_t j = 0; j < n; ++j) sum += p[j] * a.keys[a.key_index[first + j] * a.dim + e];
    out[e] = sum;
  }
}

}  // namespace

void attention(const DeviceAttention& args, cudaStream_t stream) {
  if (args.rows * args.heads <= 0) return;
  attention_kernel<<<static_cast<unsigned>(args.rows * args.heads), kThreads, 0, stream>>>(args);
  check(cudaGetLastError(), "attention");
}

}  // namespace hippo::kernels::cuda
