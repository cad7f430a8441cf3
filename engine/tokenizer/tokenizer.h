// hippo's DeepSeek V4 tokenizer: loads the real tokenizer.json and encodes exactly as Hugging Face
// `tokenizers` does with it (added tokens, pre-tokenizer, byte-level BPE), and decodes to bytes.
//
// Two encodings of text:
//   encode()       HF's encode: added-token text in the input becomes that token. For prompts
//                  that hippo writes itself and for reproducing HF.
//   encode_plain() no added-token matching: "<｜User｜>" typed by a user is seven plain tokens. For
//                  user and tool content (what DeepSeek's reference encoder does between the
//                  special tokens it places itself), so that content can never forge a turn.
// Invalid UTF-8 input is first repaired with U+FFFD (utf8.h); HF only accepts valid strings.
//
// A Tokenizer is immutable after load and safe to use from many threads; each thread keeps its own
// scratch buffers and piece cache.
#pragma once

#include "base/status.h"
#include "engine/tokenizer/added_vocabulary.h"
#include "engine/tokenizer/bpe_model.h"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hippo::tokenizer {

class Tokenizer {
 public:
  // Reads and validates a tokenizer.json; errors name the file and what is wrong.
  static Result<Tokenizer> load(const std::filesystem::path& path);
  // The same from the file's contents; `origin` names it in errors.
  static Result<Tokenizer> parse(std::string_view json, std::string_view origin);

  std::vector<TokenId> encode(std::string_view text) const;
  void encode(std::string_view text, std::vector<TokenId>& out) const;  // appends
  void encode_plain(std::string_view text, std::vector<TokenId>& out) const;  // appends

  // The bytes of `ids` concatenated: raw, not UTF-8-repaired (IncrementalDetokenizer repairs).
  // Unknown ids are a bug of the caller (checked).
  std::string decode(std::span<const TokenId> ids) const;
  std::string_view token_bytes(TokenId id) const;
  bool is_valid_id(TokenId id) const;

  // The id of an added token spelled exactly `content` ("<｜User｜>"), if any.
  std::optional<TokenId> added_token_id(std::string_view content) const { return added_.find(content); }
  const AddedVocabulary& added_vocabulary() const { return added_; }

  // One past the largest id (129,280 for DeepSeek V4).
  std::size_t n_vocab() const { return n_vocab_; }

 private:
  void encode_text(std::string_view valid_utf8, std::vector<TokenId>& out) const;

  BpeModel model_;
  AddedVocabulary added_;
  std::size_t n_vocab_ = 0;
  std::uint64_t instance_id_ = 0;  // keys the per-thread piece cache
};

}  // namespace hippo::tokenizer
