// Engram's multi-head n-gram hashing (design/deepseek-v41-architecture.md §5.3, docs/engram.md):
// from the compressed ids of a position and the max_ngram_size - 1 positions before it, the rows of
// one Engram layer's table that the forward pass gathers. As the reference
// (`DeepseekV41NgramHashState` in transformers' DeepSeek-V4.1):
//
//   look-back x[0..N-1] = x'_t, x'_{t-1}, ..., x'_{t-N+1}   (N = max_ngram_size, newest first)
//   once x[s] is DEAD (before the sequence start, or a masked/image position), x[s..N-1] all become
//     pad = compressed_id(engram_pad_token_id); a DEAD current token pads the whole window
//   p[s] = x[s] * M[layer][s]                               (int64; M odd, bounded: no overflow)
//   h_1 = p[0] ^ p[1], h_n = h_{n-1} ^ p[n]                 (h_n hashes the (n+1)-gram ending at t)
//   row[(n-1) * H + k] = (h_n mod prime[n-1][k]) + offset   (Python mod; H = n_heads heads per order)
//
// The multipliers come from NumPy PCG64 (`default_rng(10007 * layer_id)`, docs/reference-model.md
// D16); hippo ships them precomputed in engine/config/engram_multipliers.inc. Primes and offsets:
// engine/config/engram_primes.h.
#pragma once

#include "base/status.h"
#include "engine/config/model_config.h"

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hippo::engine {

class EngramTokenMap;

// A look-back entry with no token: before the sequence start, or a position that must not take part
// in an n-gram (a pad, an image span).
inline constexpr int32_t kEngramDead = -1;

// The hash multipliers of an Engram layer: one per look-back shift (max_ngram_size of them), for a
// compressed vocabulary of `compressed_vocab_size` classes. kNotFound when the shipped table lacks
// that (layer, vocabulary) pair: the message says how to add it.
Result<std::vector<int64_t>> engram_hash_multipliers(int64_t layer_id, int64_t max_ngram_size,
                                                     int64_t compressed_vocab_size);

// The addressing of one Engram layer's table.
struct EngramLayerAddressing {
  int64_t layer_id = 0;
  std::vector<int64_t> multipliers;  // [max_ngram_size], one per look-back shift
  std::vector<int64_t> primes;       // [(max_ngram_size - 1) * n_heads]: order-major, then head
  std::vector<int64_t> offsets;      // first row of each sub-table: running sum of `primes`
  int64_t rows = 0;                  // sum of `primes`: the table's row count
};

// The last max_ngram_size - 1 compressed ids of a sequence (or kEngramDead), newest first: what
// hashing the next token needs. A value type; the engine's per-session state embeds it.
class EngramLookback {
 public:
  // A fresh sequence: max_ngram_size - 1 DEAD entries (max_ngram_size >= 2).
  explicit EngramLookback(int max_ngram_size);

  // Appends the compressed id of the newest position (kEngramDead for a masked one).
  void push(int32_t compressed_id);
  // Back to a fresh sequence.
  void reset();

  int max_ngram_size() const { return static_cast<int>(history_.size()) + 1; }
  // history()[0] = x'_{t-1} (the newest pushed), history()[1] = x'_{t-2}, ...
  std::span<const int32_t> history() const { return history_; }
  // The look-back of a new position whose compressed id is `current`: window[0] = current, then
  // history(). `window` has max_ngram_size() entries.
  void window(int32_t current, std::span<int32_t> window) const;

  // Bytes: u32 format version (1), u32 entry count, the entries as i32; all little-endian.
  std::string serialize() const;
  // The inverse; kCorrupt when the bytes are malformed, hold another count than
  // max_ngram_size - 1, or an id outside [kEngramDead, num_classes).
  static Result<EngramLookback> restore(std::string_view bytes, int max_ngram_size, int32_t num_classes);

  bool operator==(const EngramLookback&) const = default;

 private:
  std::vector<int32_t> history_;
};

// The addressing of every Engram layer of a model.
class EngramHasher {
 public:
  // From the config's Engram fields and the tokenizer's map (checked with check_engram_token_map;
  // the pad is map.compressed_id(engram_pad_token_id)). kInvalidArgument for a config without Engram
  // layers or whose table sizes disagree with the prime search; kNotFound for missing multipliers.
  static Result<EngramHasher> create(const TextConfig& config, const EngramTokenMap& map);
  // The same with the pad's compressed id given (no map needed).
  static Result<EngramHasher> create(const TextConfig& config, int32_t pad_compressed_id);

  int n_layers() const { return static_cast<int>(layers_.size()); }
  int max_ngram_size() const { return max_ngram_size_; }
  int n_heads() const { return n_heads_; }
  // (max_ngram_size - 1) * n_heads: rows gathered per position and Engram layer.
  int rows_per_position() const { return (max_ngram_size_ - 1) * n_heads_; }
  int32_t pad_id() const { return pad_id_; }
  int32_t compressed_vocab_size() const { return compressed_vocab_size_; }
  // Engram layer `index` (0 <= index < n_layers(), in the order of engram_layer_ids).
  const EngramLayerAddressing& layer(int index) const;

  // The rows of Engram layer `layer_index` for one position: `lookback` holds max_ngram_size
  // compressed ids (or kEngramDead) newest first, `rows` receives rows_per_position() table rows
  // (offsets included). Sizes and ids are checked (caller bugs).
  void hash(int layer_index, std::span<const int32_t> lookback, std::span<int64_t> rows) const;

  // A chunk of a sequence: maps `tokens` through `map`, hashes every position for every Engram
  // layer and advances `state`. `rows` is [tokens.size(), n_layers(), rows_per_position()],
  // row-major. `dead`, when not empty, has one entry per token: non-zero marks the token DEAD.
  void hash_tokens(const EngramTokenMap& map, std::span<const int32_t> tokens, EngramLookback& state,
                   std::span<int64_t> rows, std::span<const uint8_t> dead = {}) const;

 private:
  std::vector<EngramLayerAddressing> layers_;
  int max_ngram_size_ = 0;
  int n_heads_ = 0;
  int32_t pad_id_ = 0;
  int32_t compressed_vocab_size_ = 0;
};

}  // namespace hippo::engine
