// Added tokens (tokenizer.json "added_tokens"): the special and control tokens that are matched in
// the text before pre-tokenisation and never split by BPE.
//
// Matching follows HF `tokenizers`' AddedVocabulary: tokens with normalized=false are matched first
// on the raw text, then tokens with normalized=true on the gaps (the DeepSeek normalizer is empty, so
// only this order is left of normalisation); each pass takes the leftmost match and, at that
// position, the longest token.
#pragma once

#include "engine/tokenizer/bpe_model.h"

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace hippo::tokenizer {

struct AddedToken {
  std::string content;
  TokenId id = -1;
  bool special = false;     // "special" in tokenizer.json (skip_special_tokens would drop it)
  bool normalized = false;  // matched in the second pass
};

// A part of the input: plain text (id < 0) or one added token.
struct TextSegment {
  std::string_view text;
  TokenId id = -1;
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;
  explicit AddedVocabulary(std::vector<AddedToken> tokens);

  // Splits `text` into plain-text segments and added tokens, in order; `out` is cleared first.
  void split(std::string_view text, std::vector<TextSegment>& out) const;

  std::optional<TokenId> find(std::string_view content) const;
  const AddedToken* by_id(TokenId id) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  // One matching pass: the tokens with the given `normalized` flag, grouped by first byte and
  // ordered longest first, so the first hit at a position is the longest.
  struct Pass {
    std::vector<std::uint32_t> by_first_byte[256];
  };
  void split_pass(const Pass& pass, std::string_view text, std::vector<TextSegment>& out) const;

  std::vector<AddedToken> tokens_;
  Pass first_pass_;   // normalized = false
  Pass second_pass_;  // normalized = true
  std::unordered_map<std::string, std::size_t> by_content_;
  std::unordered_map<TokenId, std::size_t> by_id_;
};

}  // namespace hippo::tokenizer
