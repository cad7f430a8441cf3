// Streaming detokenisation (see incremental_detokenizer.h).
#include "engine/tokenizer/incremental_detokenizer.h"

#include "engine/tokenizer/utf8.h"

namespace hippo::tokenizer {

void IncrementalDetokenizer::push(TokenId id, std::string& out) {
  const std::string_view bytes = tokenizer_->token_bytes(id);
  if (pending_.empty()) {
    const std::size_t complete = utf8_complete_prefix(bytes);
    append_repaired_utf8(bytes.substr(0, complete), out);
    pending_.assign(bytes.substr(complete));
    return;
  }
  pending_.append(bytes);
  const std::size_t complete = utf8_complete_prefix(pending_);
  append_repaired_utf8(std::string_view(pending_).substr(0, complete), out);
  pending_.erase(0, complete);
}

void IncrementalDetokenizer::finish(std::string& out) {
  append_repaired_utf8(pending_, out);
  pending_.clear();
}

}  // namespace hippo::tokenizer
