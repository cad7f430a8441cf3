// The quantisation round trips that are part of DeepSeek-V4.1 (QAT, docs/reference-model.md D6), as
// encoders into the byte layouts the session state stores (product.md §5) and decoders back to float.
// Because every round trip's output is exactly "code × scale", storing the codes loses nothing: the
// decoded floats are bit-identical to the reference's fake-quantised tensors.
//
//   window entry   a post-RoPE KV latent [head_dim]: E4M3 codes, then one UE8M0 scale per 32 values;
//                  scale = 2^ceil(log2(max(amax, 1e-4) / 448)).
//   compressed KV  a RoPE'd compressed latent [head_dim]: E2M1 codes (two per byte, even element in the
//                  low nibble), then one E4M3 scale per 16 values; scale = e4m3(max(amax, 6·2⁻⁹) / 6).
//   index key      an index key [index_head_dim]: E2M1 codes, then one UE8M0 scale per 32 values;
//                  scale = 2^ceil(log2(max(amax, 6·2⁻¹²⁶) / 6)). Index queries take the same round trip
//                  but are never stored (fp4_ue8m0_round_trip).
#pragma once

#include <cstddef>
#include <cstdint>

namespace hippo::engine {

inline constexpr int64_t kWindowScaleBlock = 32;
inline constexpr int64_t kCompressedScaleBlock = 16;
inline constexpr int64_t kIndexScaleBlock = 32;

constexpr int64_t window_entry_bytes(int64_t dim) { return dim + dim / kWindowScaleBlock; }
constexpr int64_t compressed_entry_bytes(int64_t dim) { return dim / 2 + dim / kCompressedScaleBlock; }
constexpr int64_t index_entry_bytes(int64_t dim) { return dim / 2 + dim / kIndexScaleBlock; }

void encode_window_entry(const float* x, int64_t dim, std::uint8_t* out);
void decode_window_entry(const std::uint8_t* in, int64_t dim, float* x);

void encode_compressed_entry(const float* x, int64_t dim, std::uint8_t* out);
void decode_compressed_entry(const std::uint8_t* in, int64_t dim, float* x);

void encode_index_entry(const float* x, int64_t dim, std::uint8_t* out);
void decode_index_entry(const std::uint8_t* in, int64_t dim, float* x);

// The index-query round trip in place (E2M1, UE8M0 scale per 32).
void fp4_ue8m0_round_trip(float* x, int64_t dim);

}  // namespace hippo::engine
