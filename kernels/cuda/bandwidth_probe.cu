// STREAM triad on the device, timed with CUDA events; the result is checked before it counts.
#include "kernels/cuda/bandwidth_probe.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

namespace hippo::kernels::cuda {
namespace {

__global__ void fill(float* x, float value, std::size_t n) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += std::size_t{gridDim.x} * blockDim.x)
    x[i] = value;
}

__global__ void triad(float* a, const float* b, const float* c, float scale, std::size_t n) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += std::size_t{gridDim.x} * blockDim.x)
    a[i] = b[i] + scale * c[i];
}

}  // namespace

DeviceBandwidth measure_device_bandwidth(std::size_t bytes_per_array, int repetitions) {
  DeviceBandwidth out;
  auto fail = [&](cudaError_t e, const char* what) {
    out.error = std::string(what) + ": " + cudaGetErrorString(e);
    return out;
  };
  cudaDeviceProp prop{};
  if (cudaError_t e = cudaGetDeviceProperties(&prop, 0); e != cudaSuccess) return fail(e, "no CUDA device");
  out.device_name = prop.name;
  const std::size_t n = bytes_per_array / sizeof(float);
  float *a = nullptr, *b = nullptr, *c = nullptr;
  if (cudaError_t e = cudaMalloc(&a, n * sizeof(float)); e != cudaSuccess) return fail(e, "cudaMalloc");
  if (cudaError_t e = cudaMalloc(&b, n * sizeof(float)); e != cudaSuccess) { cudaFree(a); return fail(e, "cudaMalloc"); }
  if (cudaError_t e = cudaMalloc(&c, n * sizeof(float)); e != cudaSuccess) { cudaFree(a); cudaFree(b); return fail(e, "cudaMalloc"); }
  const int threads = 256, blocks = prop.multiProcessorCount * 8;
  fill<<<blocks, threads>>>(b, 1.0f, n);
  fill<<<blocks, threads>>>(c, 2.0f, n);
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  float best_ms = 1e30f;
  for (int rep = 0; rep <= repetitions; ++rep) {  // rep 0 is the warm-up
    cudaEventRecord(start);
    triad<<<blocks, threads>>>(a, b, c, 3.0f, n);
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    if (rep > 0) best_ms = std::min(best_ms, ms);
  }
  std::vector<float> sample(1024);
  cudaError_t e = cudaMemcpy(sample.data(), a + (n - sample.size()), sample.size() * sizeof(float), cudaMemcpyDeviceToHost);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  if (e != cudaSuccess) return fail(e, "triad");
  if (std::any_of(sample.begin(), sample.end(), [](float v) { return v != 7.0f; })) {
    out.error = "triad computed a wrong result";
    return out;
  }
  out.ok = true;
  out.triad_bytes_per_second = 3.0 * static_cast<double>(n * sizeof(float)) / (best_ms * 1e-3);
  return out;
}

}  // namespace hippo::kernels::cuda
