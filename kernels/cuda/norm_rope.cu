// RMSNorm and the rotary embedding on the device (contracts in kernels/backend.h).
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/launch.h"

namespace hippo::kernels::cuda {
namespace {

constexpr int kNormThreads = 256;

__global__ void rms_norm_kernel(const float* x, std::int64_t n, const float* weight, float eps, float* out) {
  __shared__ float shared[kNormThreads];
  const float* xr = x + std::int64_t{blockIdx.x} * n;
  float* yr = out + std::int64_t{blockIdx.x} * n;
  float partial = 0.0f;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) partial += xr[i] * xr[i];
  const float inverse_rms = 1.0f / sqrtf(block_sum(partial, shared) / static_cast<float>(n) + eps);
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float scaled = xr[i] * inverse_rms;
    yr[i] = weight != nullptr ? weight[i] * scaled : scaled;
  }
}

// One thread per rotated pair.
__global__ void rope_kernel(float* x, std::int64_t rows, std::int64_t heads, std::int64_t dim, std::int64_t rope_dims,
                            const float* cos, const float* sin, bool inverse) {
  const std::int64_t pairs = rope_dims / 2;
  const std::int64_t t = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (t >= rows * heads * pairs) return;
  const std::int64_t i = t % pairs, rh = t / pairs, r = rh / heads;
  float* v = x + rh * dim + (dim - rope_dims);
  const float c = cos[r * pairs + i], s = inverse ? -sin[r * pairs + i] : sin[r * pairs + i];
  const float even = v[2 * i], odd = v[2 * i + 1];
  v[2 * i] = even * c - odd * s;
  v[2 * i + 1] = even * s + odd * c;
}

}  // namespace

void rms_norm(const float* x, std::int64_t rows, std::int64_t n, const float* weight, float eps, float* out,
              cudaStream_t stream) {
  if (rows <= 0) return;
  rms_norm_kernel<<<static_cast<unsigned>(rows), kNormThreads, 0, stream>>>(x, n, weight, eps, out);
  check(cudaGetLastError(), "rms_norm");
}

void rope(float* x, std::int64_t rows, std::int64_t heads, std::int64_t dim, std::int64_t rope_dims, const float* cos,
          const float* sin, bool inverse, cudaStream_t stream) {
  const std::int64_t n = rows * heads * (rope_dims / 2);
  if (n <= 0) return;
  rope_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(x, rows, heads, dim, rope_dims, cos, sin, inverse);
  check(cudaGetLastError(), "rope");
}

}  // namespace hippo::kernels::cuda
