// ContextDrafter: speculative drafts from the session's own tokens. Agents copy a lot (file contents,
// tool results, their own earlier code), so the tokens that followed the latest earlier occurrence of
// the longest matching suffix are a cheap and often right guess at what comes next. Proposals are
// checked by the model (Model::settle, verify_draft.h), so a wrong one costs speed, never output.
//
// The index is LZ77's hash chain: per position, the previous position whose last kKeyTokens tokens
// hash to the same bucket, and per bucket the latest; 4 bytes per token plus the bucket table.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace hippo::engine {

// The most tokens one draft holds: DSpark's five-slot block (../shared/design/dspark.md), whose
// verify forward of six positions the context drafter's drafts fit as well.
inline constexpr int64_t kMaxDraftTokens = 5;

struct ContextDrafterOptions {
  int64_t max_draft = kMaxDraftTokens;  // tokens per proposal
  int64_t min_match = 3;       // suffix tokens an earlier occurrence must share
  int64_t max_match = 64;      // how far back a match is compared (the longest wins)
  int64_t max_candidates = 32;  // earlier occurrences compared per proposal
};

class ContextDrafter {
 public:
  explicit ContextDrafter(ContextDrafterOptions options = {});

  // Follows the sequence so far: what extends the tokens seen is indexed; a sequence that does not
  // (shorter, or another token at the last position indexed) is indexed from scratch.
  // The sequence is `tokens` then `tail` (a token sampled but not yet in the model's state).
  void follow(std::span<const int32_t> tokens, std::span<const int32_t> tail = {});
  // The tokens that followed the best earlier match of the sequence's suffix, continued
  // periodically where that match runs into the suffix itself; empty when nothing matches
  // min_match tokens. As many as the match is longer than min_match, plus one, up to max_draft: a
  // verify row costs a fraction of a decode step and a longer match is likelier to go on (a
  // one-token draft pays off from about 10% acceptance, five need about 60%; docs/BENCHMARKS.md).
  std::vector<int32_t> propose() const;

  int64_t n_tokens() const { return static_cast<int64_t>(tokens_.size()); }
  uint64_t memory_bytes() const;

 private:
  static constexpr int64_t kKeyTokens = 2;
  void index(int64_t position);  // the key that ends at `position`
  size_t bucket(int64_t position) const;
  void rehash(size_t buckets);

  ContextDrafterOptions options_;
  std::vector<int32_t> tokens_;
  std::vector<int32_t> previous_;  // per position: the previous one in its bucket's chain, -1 none
  std::vector<int32_t> latest_;    // per bucket: the latest position, -1 none
};

}  // namespace hippo::engine
