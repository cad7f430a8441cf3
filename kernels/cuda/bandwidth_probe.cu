// STREAM triad on the device, timed with GPU events; the result is checked before it counts.
// Every runtime call is checked: a probe that ignores an error reports a meaningless number.
#include "kernels/cuda/bandwidth_probe.h"

#include "kernels/cuda/device_memory.h"

#include <algorithm>
#include <string>
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
  std::string failed_call;
  auto ok = [&](cudaError_t e, const char* call) {
    if (e != cudaSuccess && failed_call.empty()) failed_call = std::string(call) + ": " + cudaGetErrorString(e);
    return e == cudaSuccess;
  };
  auto failure = [&] {
    out.error = failed_call;
    return out;
  };

  cudaDeviceProp prop{};
  if (!ok(cudaGetDeviceProperties(&prop, 0), "no GPU device")) return failure();
  out.device_name = prop.name;
  const std::size_t n = bytes_per_array / sizeof(float);
  DeviceBuffer a, b, c;
  Event start, stop;
  if (!ok(a.allocate(n * sizeof(float)), "allocate") || !ok(b.allocate(n * sizeof(float)), "allocate") || !ok(c.allocate(n * sizeof(float)), "allocate") ||
      !ok(start.create(), "event") || !ok(stop.create(), "event"))
    return failure();

  const int threads = 256, blocks = prop.multiProcessorCount * 8;
  fill<<<blocks, threads>>>(b.as<float>(), 1.0f, n);
  fill<<<blocks, threads>>>(c.as<float>(), 2.0f, n);
  float best_ms = 1e30f;
  for (int rep = 0; rep <= repetitions; ++rep) {  // rep 0 is the warm-up
    if (!ok(cudaEventRecord(start.get()), "record")) return failure();
    triad<<<blocks, threads>>>(a.as<float>(), b.as<float>(), c.as<float>(), 3.0f, n);
    float ms = 0;
    if (!ok(cudaEventRecord(stop.get()), "record") || !ok(cudaEventSynchronize(stop.get()), "triad") ||
        !ok(cudaEventElapsedTime(&ms, start.get(), stop.get()), "elapsed time"))
      return failure();
    if (rep > 0) best_ms = std::min(best_ms, ms);
  }

  std::vector<float> sample(std::min<std::size_t>(1024, n));
  if (!ok(cudaMemcpy(sample.data(), a.as<float>() + (n - sample.size()), sample.size() * sizeof(float),
                     cudaMemcpyDeviceToHost),
          "copy back"))
    return failure();
  if (std::any_of(sample.begin(), sample.end(), [](float v) { return v != 7.0f; })) {
    out.error = "triad computed a wrong result";
    return out;
  }
  out.ok = true;
  out.triad_bytes_per_second = 3.0 * static_cast<double>(n * sizeof(float)) / (best_ms * 1e-3);
  return out;
}

}  // namespace hippo::kernels::cuda
