// The mHC site on the device (contracts in kernels/backend.h): the mixes with Sinkhorn one thread
// per row (hc² values stay in registers and local memory), collapse and expand one thread per
// channel of a row.
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/launch.h"

namespace hippo::kernels::cuda {
namespace {

constexpr int kMaxHc = 8;

__device__ double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

// One Sinkhorn half-step: each column, or each row, of c divided by (its sum + eps).
__device__ void normalise_columns(double (&c)[kMaxHc][kMaxHc], int hc, double eps) {
  for (int k = 0; k < hc; ++k) {
    double sum = 0.0;
    for (int j = 0; j < hc; ++j) sum += c[j][k];
    for (int j = 0; j < hc; ++j) c[j][k] /= sum + eps;
  }
}
__device__ void normalise_rows(double (&c)[kMaxHc][kMaxHc], int hc, double eps) {
  for (int j = 0; j < hc; ++j) {
    double sum = 0.0;
    for (int k = 0; k < hc; ++k) sum += c[j][k];
    for (int k = 0; k < hc; ++k) c[j][k] /= sum + eps;
  }
}

__global__ void hc_mix_kernel(DeviceHcMix a) {
  const std::int64_t r = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (r >= a.rows) return;
  const int hc = static_cast<int>(a.hc);
  const double eps = a.eps;
  const float* m = a.mixes + r * a.mix_stride;
  for (int i = 0; i < hc; ++i) {
    a.pre[r * hc + i] = static_cast<float>(sigmoid(double{m[i]} * a.scale[0] + a.base[i]) + eps);
    a.post[r * hc + i] = static_cast<float>(2.0 * sigmoid(double{m[hc + i]} * a.scale[1] + a.base[hc + i]));
  }
  double c[kMaxHc][kMaxHc];
  for (int j = 0; j < hc; ++j) {
    double row_max = -INFINITY;
    for (int k = 0; k < hc; ++k) {
      c[j][k] = double{m[2 * hc + j * hc + k]} * a.scale[2] + a.base[2 * hc + j * hc + k];
      row_max = fmax(row_max, c[j][k]);
    }
    double sum = 0.0;
    for (int k = 0; k < hc; ++k) {
      c[j][k] = exp(c[j][k] - row_max);
      sum += c[j][k];
    }
    for (int k = 0; k < hc; ++k) c[j][k] = c[j][k] / sum + eps;
  }
  normalise_columns(c, hc, eps);
  for (std::int64_t it = 0; it + 1 < a.sinkhorn_iters; ++it) {
    normalise_rows(c, hc, eps);
    normalise_columns(c, hc, eps);
  }
  for (int j = 0; j < hc; ++j)
    for (int k = 0; k < hc; ++k) a.comb[(r * hc + j) * hc + k] = static_cast<float>(c[j][k]);
}

__global__ void hc_collapse_kernel(const float* streams, const float* pre, std::int64_t rows, std::int64_t hc, std::int64_t d,
                                   float* out) {
  const std::int64_t t = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (t >= rows * d) return;
  const std::int64_t r = t / d, e = t % d;
  float sum = 0.0f;
  for (std::int64_t i = 0; i < hc; ++i) sum += pre[r * hc + i] * streams[(r * hc + i) * d + e];
  out[t] = sum;
}

// Each thread reads the old value of every stream at its channel before writing any.
__global__ void hc_expand_kernel(float* streams, const float* sub, const float* post, const float* comb, std::int64_t rows,
                                 std::int64_t hc, std::int64_t d) {
  const std::int64_t t = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (t >= rows * d) return;
  const std::int64_t r = t / d, e = t % d;
  float* x = streams + r * hc * d;
  float old[kMaxHc];
  for (std::int64_t j = 0; j < hc; ++j) old[j] = x[j * d + e];
  for (std::int64_t k = 0; k < hc; ++k) {
    float sum = post[r * hc + k] * sub[r * d + e];
    for (std::int64_t j = 0; j < hc; ++j) sum += comb[(r * hc + j) * hc + k] * old[j];
    x[k * d + e] = sum;
  }
}

}  // namespace

void hc_mix(const DeviceHcMix& args, cudaStream_t stream) {
  if (args.rows <= 0) return;
  if (args.hc > kMaxHc) check(cudaErrorInvalidValue, "hc_mix: more than 8 hyper-connection streams");
  hc_mix_kernel<<<blocks_for(args.rows, 64), 64, 0, stream>>>(args);
  check(cudaGetLastError(), "hc_mix");
}

void hc_collapse(const float* streams, const float* pre, std::int64_t rows, std::int64_t hc, std::int64_t d, float* out,
                 cudaStream_t stream) {
  if (rows <= 0) return;
  hc_collapse_kernel<<<blocks_for(rows * d, 256), 256, 0, stream>>>(streams, pre, rows, hc, d, out);
  check(cudaGetLastError(), "hc_collapse");
}

void hc_expand(float* streams, const float* sub, const float* post, const float* comb, std::int64_t rows, std::int64_t hc,
               std::int64_t d, cudaStream_t stream) {
  if (rows <= 0) return;
  if (hc > kMaxHc) check(cudaErrorInvalidValue, "hc_expand: more than 8 hyper-connection streams");
  hc_expand_kernel<<<blocks_for(rows * d, 256), 256, 0, stream>>>(streams, sub, post, comb, rows, hc, d);
  check(cudaGetLastError(), "hc_expand");
}

}  // namespace hippo::kernels::cuda
