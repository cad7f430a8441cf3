// The token side of Engram for the forward pass: compressed ids of the tokens and, for every
// position, the hashed table rows of each Engram layer (design §5.2-§5.3, docs/reference-model.md D16).
#pragma once

#include "base/status.h"
#include "engine/config/model_config.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace hippo::engine {

class EngramHashing {
 public:
  // Builds the compressed-id map from tokenizer.json in `tokenizer_dir`; its class count must equal
  // engram_compressed_vocab_size.
  static Result<std::unique_ptr<EngramHashing>> create(const TextConfig& text, const std::string& tokenizer_dir);
  ~EngramHashing();

  int64_t n_layers() const;   // Engram layers
  int64_t n_columns() const;  // rows gathered per position and layer: (max_ngram_size - 1) x n_heads
  int64_t lookback() const;   // max_ngram_size - 1

  int32_t compressed_id(int32_t token) const;

  // rows[layer_index * n_columns() + c] for the position whose compressed id is `current` and whose
  // look-back (newest first, lookback() entries, kEngramDead where nothing lives) is `previous`.
  void rows(int32_t current, std::span<const int32_t> previous, int64_t* rows) const;

 private:
  struct Impl;
  explicit EngramHashing(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hippo::engine
