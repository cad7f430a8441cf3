// A synthetic session state in the engine's storage layout for `hippo bench storage`: the
// small-fullkv geometry (docs/benchmarks/storage.md), 890 B per token, with value distributions
// modelled on a real model's quantised KV instead of random bytes, which would make compression
// look either hopeless (uniform bytes) or trivial (zeros).
//
//   stream             entry  entries per token   content
//   kv.layer{2,8,14}   288 B  1/2 (ratio 2)       512-d latent, FP4 E2M1 codes (256 B) + E4M3 scale per 16 (32 B)
//   index.layer{2,8,14} 68 B  1/2                 128-d index key, FP4 codes (64 B) + UE8M0 scale per 32 (4 B)
//   kv.layer20         288 B  1   (ratio 1)       as above
//   index.layer20       68 B  1                   as above
//   token_ids            4 B  1                   uint32 LE, Zipf-like over a 129,280-token vocabulary
//   3 x (288 + 68) / 2 + (288 + 68) + 4 = 890 B per token
//
// Values: x = sigma_channel x g_token x z, z ~ N(0, 1). Channel scales are log-normal (sigma 0.5)
// with 2% outlier channels 8x larger, as in LLM activations; the per-token gain follows a slow AR(1)
// process in log space (neighbouring tokens have similar norms). Each block is quantised the way
// the engine does: the scale is amax / 6 rounded to E4M3 (or up to a power of two for UE8M0), and
// each value is rounded to the nearest FP4 E2M1 value. Bytes depend only on (stream, entry index),
// so a state of n tokens is a prefix of a state of n + k tokens, like the engine's streams.
#pragma once

#include "engine/model/session_state.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace hippo::cli {

struct SyntheticStream {
  std::string name;
  std::size_t entry_bytes;
  int tokens_per_entry;
  std::vector<std::byte> bytes;  // for the largest token count requested

  std::span<const std::byte> prefix(std::int64_t n_tokens) const {
    return std::span<const std::byte>(bytes).first(static_cast<std::size_t>(n_tokens / tokens_per_entry) * entry_bytes);
  }
};

struct SyntheticKvState {
  std::int64_t max_tokens = 0;
  std::vector<SyntheticStream> streams;
  std::vector<std::byte> frontier;  // window rings of 43 layers (FP8 + UE8M0) and f32 next-token logits: ~3.4 MB
};

inline constexpr std::size_t kSyntheticBytesPerToken = 890;

// Generates the streams for max_tokens on `threads` threads (one stream at a time per thread).
SyntheticKvState make_synthetic_kv_state(std::int64_t max_tokens, int threads);

// The fill of SessionState::synthetic from these streams: each engine stream takes the synthetic
// stream of its name (another model's geometry: the first stream), its bytes tiled over it.
engine::SessionState::StreamFill synthetic_stream_fill(const SyntheticKvState& kv);

}  // namespace hippo::cli
