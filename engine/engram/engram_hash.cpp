// Engram hashing (engram_hash.h): multipliers from the shipped table, primes from the prime search,
// and the per-position rolling XOR of the reference.
#include "engine/engram/engram_hash.h"

#include "base/check.h"
#include "engine/config/engram_primes.h"
#include "engine/engram/engram_token_map.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace hippo::engine {
namespace {

// NumPy PCG64 draws, precomputed by scripts/gen_engram_multipliers.py: one row per layer id, for the
// compressed vocabulary and n-gram size that the release and every preset use (the table's header).
constexpr std::array<std::array<int64_t, 4>, 64> kEngramMultipliers = {{
#include "engine/config/engram_multipliers.inc"
}};
constexpr int64_t kTabulatedCompressedVocab = 99092;
constexpr int64_t kTabulatedMaxNgramSize = 4;

constexpr uint32_t kLookbackFormat = 1;

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

uint32_t get_u32(std::string_view bytes, std::size_t at) {
  uint32_t v = 0;
  for (std::size_t i = 0; i < 4; ++i) {
    v |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  }
  return v;
}

// Python's `%` for a positive modulus: the result has the modulus' sign.
int64_t floor_mod(int64_t value, int64_t modulus) {
  const int64_t r = value % modulus;
  return r < 0 ? r + modulus : r;
}

// torch's int64 multiply: two's-complement wrap-around (never reached with the shipped multipliers,
// which are bounded so that id * multiplier fits).
int64_t wrapping_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

}  // namespace

Result<std::vector<int64_t>> engram_hash_multipliers(int64_t layer_id, int64_t max_ngram_size,
                                                     int64_t compressed_vocab_size) {
  // The draws depend on all three values (the bound on the vocabulary, the count on the n-gram size),
  // so the table answers only for the values it was generated with.
  if (compressed_vocab_size != kTabulatedCompressedVocab || max_ngram_size != kTabulatedMaxNgramSize ||
      layer_id < 0 || layer_id >= static_cast<int64_t>(kEngramMultipliers.size())) {
    return make_error(ErrorCode::kNotFound,
                      "Engram hash multipliers: engine/config/engram_multipliers.inc holds layer ids 0..{} for "
                      "engram_compressed_vocab_size {} and engram_max_ngram_size {}, not layer {} with {} and {}; "
                      "regenerate it with scripts/gen_engram_multipliers.py",
                      kEngramMultipliers.size() - 1, kTabulatedCompressedVocab, kTabulatedMaxNgramSize, layer_id,
                      compressed_vocab_size, max_ngram_size);
  }
  const auto& row = kEngramMultipliers[static_cast<std::size_t>(layer_id)];
  return std::vector<int64_t>(row.begin(), row.end());
}

// ---- EngramLookback --------------------------------------------------------------------------

EngramLookback::EngramLookback(int max_ngram_size) {
  HIPPO_CHECK(max_ngram_size >= 2, "an Engram look-back needs max_ngram_size >= 2");
  history_.assign(static_cast<std::size_t>(max_ngram_size - 1), kEngramDead);
}

void EngramLookback::push(int32_t compressed_id) {
  HIPPO_DCHECK(compressed_id >= kEngramDead, "Engram look-back: negative compressed id");
  std::copy_backward(history_.begin(), history_.end() - 1, history_.end());
  history_[0] = compressed_id;
}

void EngramLookback::reset() { std::fill(history_.begin(), history_.end(), kEngramDead); }

void EngramLookback::window(int32_t current, std::span<int32_t> window) const {
  HIPPO_CHECK(window.size() == history_.size() + 1, "Engram look-back window of the wrong size");
  window[0] = current;
  std::copy(history_.begin(), history_.end(), window.begin() + 1);
}

std::string EngramLookback::serialize() const {
  std::string out;
  out.reserve(8 + 4 * history_.size());
  put_u32(out, kLookbackFormat);
  put_u32(out, static_cast<uint32_t>(history_.size()));
  for (int32_t id : history_) put_u32(out, static_cast<uint32_t>(id));
  return out;
}

Result<EngramLookback> EngramLookback::restore(std::string_view bytes, int max_ngram_size, int32_t num_classes) {
  HIPPO_CHECK(max_ngram_size >= 2, "an Engram look-back needs max_ngram_size >= 2");
  const auto want = static_cast<std::size_t>(max_ngram_size - 1);
  if (bytes.size() < 8) {
    return make_error(ErrorCode::kCorrupt, "Engram look-back: {} bytes, shorter than its 8-byte header", bytes.size());
  }
  if (const uint32_t format = get_u32(bytes, 0); format != kLookbackFormat) {
    return make_error(ErrorCode::kCorrupt, "Engram look-back: format {}, expected {}", format, kLookbackFormat);
  }
  if (const uint32_t count = get_u32(bytes, 4); count != want) {
    return make_error(ErrorCode::kCorrupt, "Engram look-back: {} entries, the model's max_ngram_size {} needs {}",
                      count, max_ngram_size, want);
  }
  if (bytes.size() != 8 + 4 * want) {
    return make_error(ErrorCode::kCorrupt, "Engram look-back: {} bytes, {} entries need {}", bytes.size(), want,
                      8 + 4 * want);
  }
  EngramLookback state(max_ngram_size);
  for (std::size_t i = 0; i < want; ++i) {
    const auto id = static_cast<int32_t>(get_u32(bytes, 8 + 4 * i));
    if (id < kEngramDead || id >= num_classes) {
      return make_error(ErrorCode::kCorrupt, "Engram look-back: entry {} is {}, outside [{}, {})", i, id,
                        kEngramDead, num_classes);
    }
    state.history_[i] = id;
  }
  return state;
}

// ---- EngramHasher ----------------------------------------------------------------------------

Result<EngramHasher> EngramHasher::create(const TextConfig& config, const EngramTokenMap& map) {
  HIPPO_RETURN_IF_ERROR(check_engram_token_map(config, map));
  if (config.engram_pad_token_id < 0 || config.engram_pad_token_id >= map.vocab_size()) {
    return make_error(ErrorCode::kInvalidArgument, "text_config.engram_pad_token_id {} is not a token id below {}",
                      config.engram_pad_token_id, map.vocab_size());
  }
  return create(config, map.compressed_id(static_cast<int32_t>(config.engram_pad_token_id)));
}

Result<EngramHasher> EngramHasher::create(const TextConfig& config, int32_t pad_compressed_id) {
  const auto bad = [](std::string_view field, const std::string& why) {
    return Status(ErrorCode::kInvalidArgument, fmt::format("text_config.{}: {}", field, why));
  };
  if (config.engram_layer_ids.empty()) return bad("engram_layer_ids", "the model has no Engram layers");
  if (config.engram_num_embeddings.size() != config.engram_layer_ids.size())
    return bad("engram_num_embeddings", "needs one entry per engram_layer_ids entry");
  if (config.engram_max_ngram_size < 2 || config.engram_max_ngram_size > 64)
    return bad("engram_max_ngram_size", fmt::format("{} is outside [2, 64]", config.engram_max_ngram_size));
  if (config.engram_n_heads < 1 || config.engram_n_heads > 1024)
    return bad("engram_n_heads", fmt::format("{} is outside [1, 1024]", config.engram_n_heads));
  if (config.engram_vocab_size < 1) return bad("engram_vocab_size", "must be positive");
  if (config.engram_compressed_vocab_size < 1 || config.engram_compressed_vocab_size > INT32_MAX)
    return bad("engram_compressed_vocab_size",
               fmt::format("{} is not a positive int32", config.engram_compressed_vocab_size));
  if (pad_compressed_id < 0 || pad_compressed_id >= config.engram_compressed_vocab_size)
    return bad("engram_pad_token_id", fmt::format("its compressed id {} is outside [0, {})", pad_compressed_id,
                                                  config.engram_compressed_vocab_size));

  EngramHasher hasher;
  hasher.max_ngram_size_ = static_cast<int>(config.engram_max_ngram_size);
  hasher.n_heads_ = static_cast<int>(config.engram_n_heads);
  hasher.pad_id_ = pad_compressed_id;
  hasher.compressed_vocab_size_ = static_cast<int32_t>(config.engram_compressed_vocab_size);
  const auto n_layers = static_cast<int64_t>(config.engram_layer_ids.size());
  const auto primes =
      engram_table_primes(config.engram_vocab_size, n_layers, config.engram_max_ngram_size, config.engram_n_heads);
  for (std::size_t i = 0; i < config.engram_layer_ids.size(); ++i) {
    EngramLayerAddressing layer;
    layer.layer_id = config.engram_layer_ids[i];
    HIPPO_ASSIGN_OR_RETURN(layer.multipliers, engram_hash_multipliers(layer.layer_id, config.engram_max_ngram_size,
                                                                      config.engram_compressed_vocab_size));
    layer.primes = primes[i];
    for (int64_t p : layer.primes) {
      layer.offsets.push_back(layer.rows);
      layer.rows += p;
    }
    if (layer.rows != config.engram_num_embeddings[i]) {
      return bad(fmt::format("engram_num_embeddings[{}]", i),
                 fmt::format("{} rows, but the prime-sized tables for engram_vocab_size {} sum to {}",
                             config.engram_num_embeddings[i], config.engram_vocab_size, layer.rows));
    }
    hasher.layers_.push_back(std::move(layer));
  }
  return hasher;
}

const EngramLayerAddressing& EngramHasher::layer(int index) const {
  HIPPO_CHECK(index >= 0 && index < n_layers(), "Engram layer index out of range");
  return layers_[static_cast<std::size_t>(index)];
}

void EngramHasher::hash(int layer_index, std::span<const int32_t> lookback, std::span<int64_t> rows) const {
  const EngramLayerAddressing& addressing = layer(layer_index);
  const auto n = static_cast<std::size_t>(max_ngram_size_);
  const auto heads = static_cast<std::size_t>(n_heads_);
  HIPPO_CHECK(lookback.size() == n, "Engram hash: the look-back needs max_ngram_size entries");
  HIPPO_CHECK(rows.size() == (n - 1) * heads, "Engram hash: rows needs rows_per_position() entries");

  // The reference pads from the first DEAD shift on: an n-gram never reaches across one.
  bool blocked = false;
  int64_t rolling = 0;
  for (std::size_t shift = 0; shift < n; ++shift) {
    const int32_t id = lookback[shift];
    HIPPO_CHECK(id >= kEngramDead && id < compressed_vocab_size_, "Engram hash: compressed id out of range");
    blocked = blocked || id == kEngramDead;
    const int64_t product = wrapping_mul(blocked ? pad_id_ : id, addressing.multipliers[shift]);
    rolling = shift == 0 ? product : rolling ^ product;
    if (shift == 0) continue;
    const std::size_t first = (shift - 1) * heads;
    for (std::size_t k = 0; k < heads; ++k) {
      rows[first + k] = floor_mod(rolling, addressing.primes[first + k]) + addressing.offsets[first + k];
    }
  }
}

void EngramHasher::hash_tokens(const EngramTokenMap& map, std::span<const int32_t> tokens, EngramLookback& state,
                               std::span<int64_t> rows, std::span<const uint8_t> dead) const {
  const auto per_layer = static_cast<std::size_t>(rows_per_position());
  const auto per_position = per_layer * layers_.size();
  HIPPO_CHECK(rows.size() == tokens.size() * per_position, "Engram hash: rows must be [tokens, layers, columns]");
  HIPPO_CHECK(dead.empty() || dead.size() == tokens.size(), "Engram hash: one dead flag per token");
  HIPPO_CHECK(state.max_ngram_size() == max_ngram_size_, "Engram hash: look-back of another max_ngram_size");
  std::vector<int32_t> window(static_cast<std::size_t>(max_ngram_size_));
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    const int32_t id = !dead.empty() && dead[t] != 0 ? kEngramDead : map.compressed_id(tokens[t]);
    state.window(id, window);
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      hash(static_cast<int>(l), window, rows.subspan(t * per_position + l * per_layer, per_layer));
    }
    state.push(id);
  }
}

}  // namespace hippo::engine
