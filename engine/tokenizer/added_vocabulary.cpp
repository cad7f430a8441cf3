// Two-pass leftmost-longest matching of added tokens (see added_vocabulary.h).
#include "engine/tokenizer/added_vocabulary.h"

#include <algorithm>

namespace hippo::tokenizer {

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  for (std::size_t i = 0; i < tokens_.size(); ++i) {
    const AddedToken& t = tokens_[i];
    if (t.content.empty()) continue;
    Pass& pass = t.normalized ? second_pass_ : first_pass_;
    pass.by_first_byte[static_cast<unsigned char>(t.content[0])].push_back(static_cast<std::uint32_t>(i));
    by_content_.emplace(t.content, i);
    by_id_.emplace(t.id, i);
  }
  for (Pass* pass : {&first_pass_, &second_pass_}) {
    for (auto& bucket : pass->by_first_byte) {
      std::stable_sort(bucket.begin(), bucket.end(), [&](std::uint32_t a, std::uint32_t b) {
        return tokens_[a].content.size() > tokens_[b].content.size();
      });
    }
  }
}

void AddedVocabulary::split_pass(const Pass& pass, std::string_view text, std::vector<TextSegment>& out) const {
  std::size_t gap_begin = 0;
  for (std::size_t pos = 0; pos < text.size();) {
    const auto& bucket = pass.by_first_byte[static_cast<unsigned char>(text[pos])];
    const AddedToken* hit = nullptr;
    for (std::uint32_t index : bucket) {
      const std::string& content = tokens_[index].content;
      if (text.compare(pos, content.size(), content) == 0) {
        hit = &tokens_[index];
        break;
      }
    }
    if (hit == nullptr) {
      ++pos;
      continue;
    }
    if (gap_begin < pos) out.push_back({text.substr(gap_begin, pos - gap_begin), -1});
    out.push_back({text.substr(pos, hit->content.size()), hit->id});
    pos += hit->content.size();
    gap_begin = pos;
  }
  if (gap_begin < text.size()) out.push_back({text.substr(gap_begin), -1});
}

void AddedVocabulary::split(std::string_view text, std::vector<TextSegment>& out) const {
  out.clear();
  std::vector<TextSegment> first;
  split_pass(first_pass_, text, first);
  for (const TextSegment& segment : first) {
    if (segment.id >= 0) {
      out.push_back(segment);
    } else {
      split_pass(second_pass_, segment.text, out);
    }
  }
}

std::optional<TokenId> AddedVocabulary::find(std::string_view content) const {
  const auto it = by_content_.find(std::string(content));
  if (it == by_content_.end()) return std::nullopt;
  return tokens_[it->second].id;
}

const AddedToken* AddedVocabulary::by_id(TokenId id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

}  // namespace hippo::tokenizer
