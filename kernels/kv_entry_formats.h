// The quantised entries of the per-session state (product.md §5): the QAT round trips that are part
// of DeepSeek-V4.1 (docs/reference-model.md D6), kept as their codes. Every round trip's output is
// exactly "code × scale", so storing the codes loses nothing: the decoded floats are bit-identical to
// the reference's fake-quantised tensors. The byte layouts are the snapshot format, the same for
// every backend (the kKvEncode and kKvDecode ops of backend.h write and read them).
//
//   kWindow      a post-RoPE KV latent [head_dim]: E4M3 codes, then one UE8M0 scale per 32 values;
//                scale = 2^ceil(log2(max(amax, 1e-4) / 448)).
//   kCompressed  a RoPE'd compressed latent [head_dim]: E2M1 codes (two per byte, even element in the
//                low nibble), then one E4M3 scale per 16 values; scale = e4m3(max(amax, 6·2⁻⁹) / 6).
//   kIndex       an index key [index_head_dim]: E2M1 codes, then one UE8M0 scale per 32 values;
//                scale = 2^ceil(log2(max(amax, 6·2⁻¹²⁶) / 6)). Index queries take the same round trip
//                but are never stored (the kFp4RoundTrip op). Its layout is WeightFormat::kFp4Row32's
//                rows kept as records, so the indexer reads stored keys as a weight matrix in place.
#pragma once

#include <cstdint>

namespace hippo::kernels {

enum class KvFormat { kWindow, kCompressed, kIndex };

inline constexpr std::int64_t kWindowScaleBlock = 32;
inline constexpr std::int64_t kCompressedScaleBlock = 16;
inline constexpr std::int64_t kIndexScaleBlock = 32;

constexpr std::int64_t window_entry_bytes(std::int64_t dim) { return dim + dim / kWindowScaleBlock; }
constexpr std::int64_t compressed_entry_bytes(std::int64_t dim) { return dim / 2 + dim / kCompressedScaleBlock; }
constexpr std::int64_t index_entry_bytes(std::int64_t dim) { return dim / 2 + dim / kIndexScaleBlock; }

constexpr std::int64_t kv_entry_bytes(KvFormat format, std::int64_t dim) {
  switch (format) {
    case KvFormat::kWindow: return window_entry_bytes(dim);
    case KvFormat::kCompressed: return compressed_entry_bytes(dim);
    case KvFormat::kIndex: return index_entry_bytes(dim);
  }
  return 0;
}

}  // namespace hippo::kernels
