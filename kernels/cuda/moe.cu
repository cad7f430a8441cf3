// The mixture-of-experts ops on the device (contracts in kernels/backend.h): the router's scores
// and top-k (one block per row), the clamped SwiGLU, and the scatter-add of expert outputs.
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/launch.h"

namespace hippo::kernels::cuda {
namespace {

// Scores in double as kernels/ref computes them; thread 0 then picks the top-k by repeated scans in
// expert order (a strict > keeps the lower index on ties), k being a handful.
__global__ void router_kernel(DeviceRouter a) {
  extern __shared__ double router_shared[];
  double* s = router_shared;
  double* biased = router_shared + a.experts;
  bool* taken = reinterpret_cast<bool*>(router_shared + 2 * a.experts);
  const std::int64_t r = blockIdx.x;
  for (std::int64_t e = threadIdx.x; e < a.experts; e += blockDim.x) {
    const double x = double{a.logits[r * a.experts + e]} / a.temperature;
    s[e] = sqrt(x > 20.0 ? x : log1p(exp(x)));
    biased[e] = s[e] + a.bias[e];
    taken[e] = false;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  const std::int64_t k = a.top_k < a.experts ? a.top_k : a.experts;
  double sum = 0.0;
  for (std::int64_t i = 0; i < k; ++i) {
    std::int64_t best = -1;
    for (std::int64_t e = 0; e < a.experts; ++e)
      if (!taken[e] && (best < 0 || biased[e] > biased[best])) best = e;
    taken[best] = true;
    a.expert[r * a.top_k + i] = static_cast<std::int32_t>(best);
    sum += s[best];
  }
  for (std::int64_t i = 0; i < k; ++i) {
    double w = s[a.expert[r * a.top_k + i]];
    if (a.normalise && a.top_k > 1) w /= sum + 1e-20;
    a.weight[r * a.top_k + i] = static_cast<float>(w * a.scaling);
  }
}

__global__ void swiglu_kernel(float* gate, const float* up, std::int64_t rows, std::int64_t width, float limit,
                              const float* row_weight) {
  const std::int64_t t = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (t >= rows * width) return;
  float g = gate[t], u = up[t];
  if (limit > 0) {
    g = fminf(g, limit);
    u = fminf(fmaxf(u, -limit), limit);
  }
  float h = g / (1.0f + expf(-g)) * u;
  if (row_weight != nullptr) h *= row_weight[t / width];
  gate[t] = h;
}

// dst has no repeats, so no two threads add into one place.
__global__ void add_rows_kernel(const float* y, std::int64_t m, std::int64_t d, const std::int64_t* dst, float* out) {
  const std::int64_t t = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (t >= m * d) return;
  out[dst[t / d] * d + t % d] += y[t];
}

}  // namespace

void router(const DeviceRouter& args, cudaStream_t stream) {
  if (args.rows <= 0 || args.top_k <= 0) return;
  const std::size_t shared = static_cast<std::size_t>(args.experts) * (2 * sizeof(double) + sizeof(bool));
  router_kernel<<<static_cast<unsigned>(args.rows), 128, shared, stream>>>(args);
  check(cudaGetLastError(), "router");
}

void swiglu(float* gate, const float* up, std::int64_t rows, std::int64_t width, float limit, const float* row_weight,
            cudaStream_t stream) {
  if (rows * width <= 0) return;
  swiglu_kernel<<<blocks_for(rows * width, 256), 256, 0, stream>>>(gate, up, rows, width, limit, row_weight);
  check(cudaGetLastError(), "swiglu");
}

void add_rows(const float* y, std::int64_t m, std::int64_t d, const std::int64_t* dst, float* out, cudaStream_t stream) {
  if (m * d <= 0) return;
  add_rows_kernel<<<blocks_for(m * d, 256), 256, 0, stream>>>(y, m, d, dst, out);
  check(cudaGetLastError(), "add_rows");
}

}  // namespace hippo::kernels::cuda
