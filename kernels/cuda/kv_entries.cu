// The session state's quantised entries (kernels/kv_entry_formats.h) on the device: one thread per
// scale block, each the scalar quantiser of kernels/ref, so the bytes are the reference's exactly.
#include "kernels/cuda/formats.cuh"
#include "kernels/cuda/launch.h"

namespace hippo::kernels::cuda {
namespace {

constexpr float kFp8Max = 448.0f;
constexpr float kFp4Max = 6.0f;
constexpr int kWindowBlock = 32, kCompressedBlock = 16, kIndexBlock = 32;

__device__ __forceinline__ float clampf(float v, float lo, float hi) { return v < lo ? lo : (hi < v ? hi : v); }

__device__ float block_amax(const float* x, int n) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = fmaxf(amax, fabsf(x[i]));
  return amax;
}

__device__ std::int64_t entry_bytes(DeviceKvFormat format, std::int64_t dim) {
  switch (format) {
    case DeviceKvFormat::kWindow: return dim + dim / kWindowBlock;
    case DeviceKvFormat::kCompressed: return dim / 2 + dim / kCompressedBlock;
    case DeviceKvFormat::kIndex: return dim / 2 + dim / kIndexBlock;
  }
  return 0;
}

__host__ __device__ int scale_block(DeviceKvFormat format) {
  return format == DeviceKvFormat::kCompressed ? kCompressedBlock : (format == DeviceKvFormat::kWindow ? kWindowBlock : kIndexBlock);
}

// Block b of one entry: its scale and codes (each thread owns whole bytes: blocks hold an even count).
__device__ void encode_block(DeviceKvFormat format, const float* x, std::int64_t dim, std::int64_t b, std::uint8_t* entry) {
  if (format == DeviceKvFormat::kWindow) {
    const float* block = x + b * kWindowBlock;
    const std::uint8_t scale_byte = e8m0_pow2_ceil(fmaxf(block_amax(block, kWindowBlock), 1e-4f) * (1.0f / kFp8Max));
    entry[dim + b] = scale_byte;
    const float scale = e8m0_to_f32(scale_byte);
    for (int i = 0; i < kWindowBlock; ++i) entry[b * kWindowBlock + i] = f32_to_e4m3fn(clampf(block[i] / scale, -kFp8Max, kFp8Max));
    return;
  }
  const int n = format == DeviceKvFormat::kCompressed ? kCompressedBlock : kIndexBlock;
  const float* block = x + b * n;
  float scale;
  if (format == DeviceKvFormat::kCompressed) {
    const std::uint8_t scale_byte = f32_to_e4m3fn(fmaxf(block_amax(block, n), kFp4Max * 0x1p-9f) / kFp4Max);
    entry[dim / 2 + b] = scale_byte;
    scale = e4m3fn_to_f32(scale_byte);
  } else {
    const std::uint8_t scale_byte = e8m0_pow2_ceil(fmaxf(block_amax(block, n), kFp4Max * 0x1p-126f) * (1.0f / kFp4Max));
    entry[dim / 2 + b] = scale_byte;
    scale = e8m0_to_f32(scale_byte);
  }
  for (int i = 0; i < n; i += 2) {
    const std::uint8_t even = e2m1_nearest(clampf(block[i] / scale, -kFp4Max, kFp4Max));
    const std::uint8_t odd = e2m1_nearest(clampf(block[i + 1] / scale, -kFp4Max, kFp4Max));
    entry[(b * n + i) / 2] = static_cast<std::uint8_t>(even | (odd << 4));
  }
}

__device__ float decode_at(DeviceKvFormat format, const std::uint8_t* entry, std::int64_t dim, std::int64_t i) {
  switch (format) {
    case DeviceKvFormat::kWindow: return e4m3fn_to_f32(entry[i]) * e8m0_to_f32(entry[dim + i / kWindowBlock]);
    case DeviceKvFormat::kCompressed: {
      const std::uint8_t byte = entry[i / 2];
      return e2m1_to_f32(i % 2 == 0 ? byte & 0xF : byte >> 4) * e4m3fn_to_f32(entry[dim / 2 + i / kCompressedBlock]);
    }
    case DeviceKvFormat::kIndex: {
      const std::uint8_t byte = entry[i / 2];
      return e2m1_to_f32(i % 2 == 0 ? byte & 0xF : byte >> 4) * e8m0_to_f32(entry[dim / 2 + i / kIndexBlock]);
    }
  }
  return 0.0f;
}

__global__ void encode_kernel(DeviceKvFormat format, const float* x, std::int64_t rows, std::int64_t dim, std::uint8_t* entries) {
  const std::int64_t blocks_per_row = dim / scale_block(format);
  const std::int64_t t = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (t >= rows * blocks_per_row) return;
  const std::int64_t r = t / blocks_per_row, b = t % blocks_per_row;
  encode_block(format, x + r * dim, dim, b, entries + r * entry_bytes(format, dim));
}

__global__ void decode_kernel(DeviceKvFormat format, const std::uint8_t* entries, std::int64_t rows, std::int64_t dim, float* x) {
  const std::int64_t t = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (t >= rows * dim) return;
  const std::int64_t r = t / dim, i = t % dim;
  x[t] = decode_at(format, entries + r * entry_bytes(format, dim), dim, i);
}

// One thread per index block of 32, encoded as an entry of its own and decoded in place.
__global__ void fp4_round_trip_kernel(float* x, std::int64_t rows, std::int64_t dim) {
  const std::int64_t blocks_per_row = dim / kIndexBlock;
  const std::int64_t t = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (t >= rows * blocks_per_row) return;
  float* block = x + (t / blocks_per_row) * dim + (t % blocks_per_row) * kIndexBlock;
  std::uint8_t entry[kIndexBlock / 2 + 1];
  encode_block(DeviceKvFormat::kIndex, block, kIndexBlock, 0, entry);
  for (int i = 0; i < kIndexBlock; ++i) block[i] = decode_at(DeviceKvFormat::kIndex, entry, kIndexBlock, i);
}

unsigned grid_for(std::int64_t n, int threads) { return static_cast<unsigned>((n + threads - 1) / threads); }

}  // namespace

void kv_encode(DeviceKvFormat format, const float* x, std::int64_t rows, std::int64_t dim, std::uint8_t* entries,
               cudaStream_t stream) {
  if (rows <= 0) return;
  encode_kernel<<<grid_for(rows * (dim / scale_block(format)), 128), 128, 0, stream>>>(format, x, rows, dim, entries);
  check(cudaGetLastError(), "kv_encode");
}

void kv_decode(DeviceKvFormat format, const std::uint8_t* entries, std::int64_t rows, std::int64_t dim, float* x,
               cudaStream_t stream) {
  if (rows <= 0) return;
  decode_kernel<<<grid_for(rows * dim, 256), 256, 0, stream>>>(format, entries, rows, dim, x);
  check(cudaGetLastError(), "kv_decode");
}

void fp4_round_trip(float* x, std::int64_t rows, std::int64_t dim, cudaStream_t stream) {
  if (rows <= 0) return;
  fp4_round_trip_kernel<<<grid_for(rows * (dim / kIndexBlock), 128), 128, 0, stream>>>(x, rows, dim);
  check(cudaGetLastError(), "fp4_round_trip");
}

}  // namespace hippo::kernels::cuda
