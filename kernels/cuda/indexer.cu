// The lightning indexer's scores on the device (contract in kernels/backend.h): one block per (row,
// tile of 32 keys). The tile's FP4 keys are decoded into shared memory, each (head, key) dot product
// is one chain over the key's dims, and each key's score sums its heads from 0 in head order. The
// top-k over the scores is the host's (cuda_backend.cpp), with kernels/top_k.h's order.
#include "kernels/cuda/formats.cuh"
#include "kernels/cuda/launch.h"

namespace hippo::kernels::cuda {
namespace {

constexpr int kTile = 32, kThreads = 256;

__global__ void index_scores_kernel(DeviceIndexScores a) {
  extern __shared__ float index_shared[];
  const std::int64_t stride = a.dim + 1;  // padded: lanes read different keys at one dim without bank conflicts
  float* keys = index_shared;                  // [kTile][dim + 1]
  float* dots = index_shared + kTile * stride;  // [heads][kTile]
  const std::int64_t r = blockIdx.y, w0 = std::int64_t{blockIdx.x} * kTile;
  const std::int64_t entry_bytes = a.dim / 2 + a.dim / 32;
  for (std::int64_t t = threadIdx.x; t < kTile * a.dim; t += kThreads) {
    const std::int64_t j = t / a.dim, e = t % a.dim, w = w0 + j;
    float value = 0.0f;
    if (w < a.n_keys) {
      const std::uint8_t* entry = a.keys + w * entry_bytes;
      const std::uint8_t byte = entry[e / 2];
      value = e2m1_to_f32(e % 2 == 0 ? byte & 0xF : byte >> 4) * e8m0_to_f32(entry[a.dim / 2 + e / 32]);
    }
    keys[j * stride + e] = value;
  }
  __syncthreads();
  const int j = threadIdx.x % kTile;
  for (std::int64_t h = threadIdx.x / kTile; h < a.heads; h += kThreads / kTile) {
    const float* q = a.q + (r * a.heads + h) * a.dim;
    float dot = 0.0f;
    for (std::int64_t e = 0; e < a.dim; ++e) dot += q[e] * keys[j * stride + e];
    dots[h * kTile + j] = dot;
  }
  __syncthreads();
  if (threadIdx.x >= kTile) return;
  const std::int64_t w = w0 + j;
  if (w >= a.n_keys) return;
  bool seen = w < a.visible[r];
  if (seen && a.candidates != nullptr) {
    const std::int64_t b = w / a.block;
    seen = ((a.candidates[r * a.words + b / 64] >> (b % 64)) & 1) != 0;
  }
  float score = -INFINITY;
  if (seen) {
    score = 0.0f;
    for (std::int64_t h = 0; h < a.heads; ++h) score += fmaxf(dots[h * kTile + j], 0.0f) * a.scale * a.weights[r * a.heads + h];
  }
  a.scores[r * a.n_keys + w] = score;
}

}  // namespace

void index_scores(const DeviceIndexScores& args, cudaStream_t stream) {
  if (args.rows <= 0 || args.n_keys <= 0) return;
  if (args.rows > 65535) check(cudaErrorInvalidValue, "index_scores: more than 65535 rows in one call");
  const std::size_t shared = sizeof(float) * static_cast<std::size_t>(kTile * (args.dim + 1) + args.heads * kTile);
  const dim3 grid(static_cast<unsigned>((args.n_keys + kTile - 1) / kTile), static_cast<unsigned>(args.rows));
  index_scores_kernel<<<grid, kThreads, shared, stream>>>(args);
  check(cudaGetLastError(), "index_scores");
}

}  // namespace hippo::kernels::cuda
