// The kernel launchers of the CUDA backend (cuda_backend.cpp) on device pointers: one function per
// op family, each enqueued on the given stream and returning at once. The op contracts are those of
// kernels/backend.h; this header is what the .cu files and the C++ side share, so it stays plain
// C++17 with no hippo headers (nvcc compiles the .cu files as C++17).
#pragma once

#include "kernels/cuda/gpu_runtime.h"

#include <cstdint>

namespace hippo::kernels::cuda {

// WeightFormat's values (kernels/weight_view.h; cuda_backend.cpp checks that they agree).
enum class DeviceWeightFormat : int { kF32 = 0, kBF16 = 1, kFp8Block = 2, kFp4Row32 = 3 };

// One weight matrix W [rows, cols] in device memory, laid out exactly as WeightView describes.
struct DeviceWeight {
  DeviceWeightFormat format = DeviceWeightFormat::kF32;
  const void* data = nullptr;
  const std::uint8_t* scales = nullptr;
  std::int64_t rows = 0, cols = 0;
  std::int64_t block = 0;         // kFp8Block: the square block edge of the scales
  std::int64_t code_stride = 0;   // kFp4Row32: bytes from one row's codes to the next's
  std::int64_t scale_stride = 0;  // kFp4Row32: bytes from one row's scales to the next's
};

// y [m, w.rows] = x [m, w.cols] · Wᵀ, fp32 activations and accumulation. Each output element is
// reduced in one fixed order that depends on (format, cols) only, never on m or on which rows came
// with it: the bits of a row are the same alone as in a batch.
void linear(const float* x, std::int64_t m, const DeviceWeight& w, float* y, cudaStream_t stream);

}  // namespace hippo::kernels::cuda

namespace hippo::kernels::cuda {

// KvFormat's values (kernels/kv_entry_formats.h): rows of `dim` floats to and from their entries,
// bit for bit what kernels/ref writes and reads.
enum class DeviceKvFormat : int { kWindow = 0, kCompressed = 1, kIndex = 2 };
void kv_encode(DeviceKvFormat format, const float* x, std::int64_t rows, std::int64_t dim, std::uint8_t* entries,
               cudaStream_t stream);
void kv_decode(DeviceKvFormat format, const std::uint8_t* entries, std::int64_t rows, std::int64_t dim, float* x,
               cudaStream_t stream);
void fp4_round_trip(float* x, std::int64_t rows, std::int64_t dim, cudaStream_t stream);

void rms_norm(const float* x, std::int64_t rows, std::int64_t n, const float* weight, float eps, float* out,
              cudaStream_t stream);
void rope(float* x, std::int64_t rows, std::int64_t heads, std::int64_t dim, std::int64_t rope_dims, const float* cos,
          const float* sin, bool inverse, cudaStream_t stream);

// The mHC site (HcMixArgs of backend.h, with device pointers).
struct DeviceHcMix {
  const float* mixes = nullptr;
  std::int64_t rows = 0, hc = 0, mix_stride = 0;
  const float* scale = nullptr;
  const float* base = nullptr;
  float eps = 0;
  std::int64_t sinkhorn_iters = 0;
  float* pre = nullptr;
  float* post = nullptr;
  float* comb = nullptr;
};
void hc_mix(const DeviceHcMix& args, cudaStream_t stream);
void hc_collapse(const float* streams, const float* pre, std::int64_t rows, std::int64_t hc, std::int64_t d, float* out,
                 cudaStream_t stream);
void hc_expand(float* streams, const float* sub, const float* post, const float* comb, std::int64_t rows, std::int64_t hc,
               std::int64_t d, cudaStream_t stream);

// Attention with the sink (AttentionArgs of backend.h) over keys gathered into one array: row r's
// keys are keys[key_index[key_offset[r]] .. key_index[key_offset[r + 1] - 1]], window keys first.
// scratch holds rows · heads · max_keys floats (the scores).
struct DeviceAttention {
  std::int64_t rows = 0, heads = 0, dim = 0;
  float scale = 0;
  const float* sinks = nullptr;            // [heads]
  const float* q = nullptr;                // [rows, heads, dim]
  const float* keys = nullptr;             // [n, dim]
  const std::int64_t* key_index = nullptr;   // into keys
  const std::int64_t* key_offset = nullptr;  // [rows + 1]
  std::int64_t max_keys = 0;               // the most keys of any row
  float* scratch = nullptr;
  float* out = nullptr;                    // [rows, heads, dim]
};
void attention(const DeviceAttention& args, cudaStream_t stream);

// The indexer's scores (IndexerArgs of backend.h): scores[r, w] for w < n_keys, = Σ_h relu(q[r, h] ·
// key_w) · scale · weights[r, h] summed from 0 in h order, for the keys row r sees (w < visible[r],
// and in a block of candidates[r] when candidates is set), -inf for every other key.
struct DeviceIndexScores {
  std::int64_t rows = 0, heads = 0, dim = 0;
  const float* q = nullptr;        // [rows, heads, dim]
  const float* weights = nullptr;  // [rows, heads]
  float scale = 0;
  const std::uint8_t* keys = nullptr;  // n_keys KvFormat::kIndex entries
  std::int64_t n_keys = 0;
  const std::int64_t* visible = nullptr;      // [rows]
  const std::uint64_t* candidates = nullptr;  // [rows, words] bitsets, or null
  std::int64_t block = 0, words = 0;
  float* scores = nullptr;  // [rows, n_keys]
};
void index_scores(const DeviceIndexScores& args, cudaStream_t stream);

void compressor_pool(const float* kv, const float* gate, std::int64_t groups, std::int64_t ratio, std::int64_t dim,
                     float* latents, cudaStream_t stream);

// The router (RouterArgs of backend.h).
struct DeviceRouter {
  const float* logits = nullptr;
  std::int64_t rows = 0, experts = 0, top_k = 0;
  const float* bias = nullptr;
  float temperature = 1, scaling = 1;
  bool normalise = false;
  std::int32_t* expert = nullptr;
  float* weight = nullptr;
};
void router(const DeviceRouter& args, cudaStream_t stream);
void swiglu(float* gate, const float* up, std::int64_t rows, std::int64_t width, float limit, const float* row_weight,
            cudaStream_t stream);
void add_rows(const float* y, std::int64_t m, std::int64_t d, const std::int64_t* dst, float* out, cudaStream_t stream);

// Rows of a table (TableFormat of backend.h: 0 BF16, 1 FP8 with E8M0 scales per 32), already gathered
// into `codes` (n rows of the table's row bytes) and `scales` (n rows of cols / 32 bytes), decoded.
void decode_table_rows(int format, const std::uint8_t* codes, const std::uint8_t* scales, std::int64_t n,
                       std::int64_t cols, float* out, cudaStream_t stream);
void engram_fuse(float* streams, const float* kv, const float* gate_weight, std::int64_t rows, std::int64_t hc,
                 std::int64_t d, float eps, cudaStream_t stream);

// Aborts with the call and the error: a failed launch or copy leaves the op's outputs undefined, and
// the op layer has no error path (its callers are the forward pass's steps).
void check(cudaError_t status, const char* what);

}  // namespace hippo::kernels::cuda
