// Engram's tokenizer compression (design/deepseek-v41-architecture.md §5.2, docs/engram.md): every
// token id maps to a "compressed" class id, so that tokens whose text normalises alike (" The",
// "the", "THE") hash to the same Engram rows. The classes are numbered in order of first appearance
// over the ids 0, 1, 2, ...; the release's tokenizer.json gives 99,092 classes for 129,280 ids, and
// every hash multiplier derives from that count (config `engram_compressed_vocab_size`).
//
// The key of a token, as the reference (transformers' DeepSeek-V4.1 `build_compressed_token_map`)
// computes it with HF `tokenizers`' normalizers:
//   text = the token decoded alone (raw bytes; an added token is its content);
//   if text is not valid UTF-8 or contains U+FFFD: key = the raw token string (tokenizer.json's
//     byte-level spelling; an added token's content);
//   otherwise key = normalize(text), or text itself when that is empty, where normalize is
//     NFKC -> NFD -> drop marks (General_Category M) -> lowercase each character ->
//     runs of [ \t\r\n] become one space -> a text that is exactly " " stays " " (a sentinel
//     protects it from the next step) -> strip leading/trailing White_Space.
// Unicode versions follow `tokenizers` (0.23): normalisation and the mark set as of Unicode 9.0
// (later characters pass through unchanged), lowercasing as Rust's `char::to_lowercase` (full
// mapping, no context: a final capital sigma becomes σ, not ς). ICU does the work; docs/engram.md
// lists where this can differ from the reference (characters new in Unicode 16) and why it does
// not for the release's vocabulary.
#pragma once

#include "base/check.h"
#include "base/status.h"
#include "engine/config/model_config.h"
#include "engine/tokenizer/tokenizer.h"

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hippo::engine {

class EngramTokenMap {
 public:
  // The map of every id below tokenizer.n_vocab(). Fails (kInternal) only if ICU cannot load its
  // normalisation data, or (kInvalidArgument) if the tokenizer has holes in its id range.
  static Result<EngramTokenMap> build(const tokenizer::Tokenizer& tokenizer);
  // Loads tokenizer.json first; its errors name the file.
  static Result<EngramTokenMap> build(const std::filesystem::path& tokenizer_json);

  // The class of token id `token` (0 <= token < vocab_size(); anything else is a caller bug).
  int32_t compressed_id(int32_t token) const {
    HIPPO_CHECK(token >= 0 && static_cast<size_t>(token) < ids_.size(), "token id outside the Engram map");
    return ids_[static_cast<size_t>(token)];
  }
  int32_t num_classes() const { return num_classes_; }
  int32_t vocab_size() const { return static_cast<int32_t>(ids_.size()); }
  // ids()[v] = compressed_id(v), for every token id v.
  std::span<const int32_t> ids() const { return ids_; }

 private:
  std::vector<int32_t> ids_;
  int32_t num_classes_ = 0;
};

// The model's Engram tables were trained with config.engram_compressed_vocab_size classes (every
// hash multiplier derives from it); a tokenizer giving another count would address them all wrongly.
// kInvalidArgument naming both counts when they differ, or when the map does not cover the config's
// vocab_size; ok for a config without Engram layers.
Status check_engram_token_map(const TextConfig& config, const EngramTokenMap& map);

// The normalisation step alone (normalize() above) of valid UTF-8 text; "" when everything is
// stripped. For tests and tools; build() does not call it per token (it reuses one ICU setup).
Result<std::string> engram_normalize(std::string_view valid_utf8);

}  // namespace hippo::engine
