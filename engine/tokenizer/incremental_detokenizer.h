// Streaming detokenisation: token ids in, UTF-8 text out, never half a character.
//
// A token's bytes may end inside a multi-byte character (byte-level BPE splits "😀" over several
// tokens). The detokenizer holds back such an incomplete tail (at most 3 bytes) until the next
// token completes it; invalid sequences become U+FFFD by the same rule as a whole-output decode
// (utf8.h), so the concatenated output always equals repair_utf8(tokenizer.decode(all ids)).
#pragma once

#include "engine/tokenizer/tokenizer.h"

#include <string>

namespace hippo::tokenizer {

class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}

  // Appends the complete characters that token `id` finishes to `out`.
  void push(TokenId id, std::string& out);
  // End of the stream: an incomplete tail becomes U+FFFD.
  void finish(std::string& out);

 private:
  const Tokenizer* tokenizer_;
  std::string pending_;  // bytes of an incomplete character, at most 3
};

}  // namespace hippo::tokenizer
