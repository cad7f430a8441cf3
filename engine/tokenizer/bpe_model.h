// Byte-level BPE: the `model` section of tokenizer.json (vocab + ranked merges) applied to one
// pre-tokenized piece.
//
// tokenizer.json spells tokens in the GPT-2 byte-to-unicode alphabet (byte 0x20 is "Ġ", ...). We
// translate every token back to its raw bytes once at load time, so encoding works on the text's
// own bytes and decoding is a concatenation. Merging follows HF `tokenizers`: repeatedly merge the
// adjacent pair with the lowest merge rank, leftmost first on ties.
#pragma once

#include "base/status.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace hippo::tokenizer {

using TokenId = std::int32_t;

class BpeModel {
 public:
  // `vocab`: byte-level token spelling -> id; `merges`: pairs of spellings in rank order. Vocab
  // entries spelled outside the byte-level alphabet (DeepSeek lists BOS, EOS and pad there) can
  // never come out of merging; they are left out and their ids listed in `foreign_ids`, for the
  // caller to check that the added vocabulary covers them.
  static Result<BpeModel> build(const std::vector<std::pair<std::string, TokenId>>& vocab,
                                const std::vector<std::pair<std::string, std::string>>& merges,
                                std::vector<TokenId>& foreign_ids);

  // Appends the ids of one piece (raw bytes, non-empty) to `out`.
  void encode_piece(std::string_view piece, std::vector<TokenId>& out) const;

  // Raw bytes of token `id`, or nullptr when the model has no such id.
  const std::string* token_bytes(TokenId id) const;
  std::size_t n_tokens() const { return id_to_bytes_.size(); }

 private:
  struct MergeEntry {
    std::uint64_t key;     // (left << 32) | right; kEmptyKey when unused
    std::uint32_t rank;
    TokenId merged;
  };
  static constexpr std::uint64_t kEmptyKey = ~std::uint64_t{0};

  const MergeEntry* find_merge(TokenId left, TokenId right) const;
  void merge_short(std::vector<TokenId>& symbols) const;
  void merge_long(std::vector<TokenId>& symbols) const;

  TokenId byte_token_[256] = {};
  std::vector<std::string> id_to_bytes_;       // raw bytes by id; empty for ids the model lacks
  std::vector<MergeEntry> merges_;             // open addressing, power-of-two capacity
  std::uint64_t merge_mask_ = 0;
};

}  // namespace hippo::tokenizer
