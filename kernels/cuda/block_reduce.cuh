// A sum over the threads of a block in one fixed order (a tree over shared memory), so a kernel's
// result never depends on timing: the same inputs give the same bits on every run.
#pragma once

#include "kernels/cuda/gpu_runtime.h"

namespace hippo::kernels::cuda {

// Every thread of the block calls it with its partial; all get the total. `shared` holds blockDim.x
// values of T; blockDim.x is a power of two.
template <typename T>
__device__ T block_sum(T partial, T* shared) {
  shared[threadIdx.x] = partial;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) shared[threadIdx.x] += shared[threadIdx.x + half];
    __syncthreads();
  }
  const T total = shared[0];
  __syncthreads();  // the buffer may be reused at once
  return total;
}

template <typename T>
__device__ T block_max(T partial, T* shared) {
  shared[threadIdx.x] = partial;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) shared[threadIdx.x] = max(shared[threadIdx.x], shared[threadIdx.x + half]);
    __syncthreads();
  }
  const T total = shared[0];
  __syncthreads();
  return total;
}

inline unsigned blocks_for(long long n, int threads) { return static_cast<unsigned>((n + threads - 1) / threads); }

}  // namespace hippo::kernels::cuda

namespace hippo::kernels::cuda {

// The sum over a group of 32 lanes (a CUDA warp, or half an AMD wave64), the same butterfly always.
__device__ __forceinline__ float lane_group_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) {
#if defined(HIPPO_HIP)
    v += __shfl_xor(v, offset);
#else
    v += __shfl_xor_sync(0xffffffffu, v, offset);
#endif
  }
  return v;
}

}  // namespace hippo::kernels::cuda
