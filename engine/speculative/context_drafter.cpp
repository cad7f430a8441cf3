#include "engine/speculative/context_drafter.h"

#include <algorithm>
#include <bit>

namespace hippo::engine {

ContextDrafter::ContextDrafter(ContextDrafterOptions options) : options_(options) {
  options_.min_match = std::max<int64_t>(options_.min_match, kKeyTokens);
  options_.max_match = std::max(options_.max_match, options_.min_match);
  rehash(1024);
}

size_t ContextDrafter::bucket(int64_t position) const {
  uint64_t h = 0x9E3779B97F4A7C15ull;
  for (int64_t k = 0; k < kKeyTokens; ++k) {
    h = (h ^ static_cast<uint32_t>(tokens_[static_cast<size_t>(position - k)])) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
  }
  return static_cast<size_t>(h) & (latest_.size() - 1);
}

void ContextDrafter::index(int64_t position) {
  if (position < kKeyTokens - 1) {
    previous_.push_back(-1);
    return;
  }
  const size_t b = bucket(position);
  previous_.push_back(latest_[b]);
  latest_[b] = static_cast<int32_t>(position);
}

// Twice as many buckets as tokens keeps chains short; growing by doubling rebuilds in amortised O(1).
void ContextDrafter::rehash(size_t buckets) {
  latest_.assign(buckets, -1);
  previous_.clear();
  for (int64_t p = 0; p < n_tokens(); ++p) index(p);
}

void ContextDrafter::follow(std::span<const int32_t> tokens, std::span<const int32_t> tail) {
  const size_t total = tokens.size() + tail.size();
  auto at = [&](size_t i) { return i < tokens.size() ? tokens[i] : tail[i - tokens.size()]; };
  // A session's tokens only grow, so the last one indexed tells a continuation from another sequence.
  const bool extends = total >= tokens_.size() && (tokens_.empty() || at(tokens_.size() - 1) == tokens_.back());
  if (!extends) {
    tokens_.clear();
    previous_.clear();
    std::fill(latest_.begin(), latest_.end(), -1);
  }
  const size_t first_new = tokens_.size();
  for (size_t i = first_new; i < total; ++i) tokens_.push_back(at(i));
  if (2 * tokens_.size() > latest_.size()) {
    rehash(std::bit_ceil(2 * tokens_.size()));
    return;
  }
  for (size_t p = first_new; p < tokens_.size(); ++p) index(static_cast<int64_t>(p));
}

std::vector<int32_t> ContextDrafter::propose() const {
  const int64_t last = n_tokens() - 1;
  if (last < options_.min_match) return {};
  // Along the chain of the suffix's key, latest first: the longest match wins, the latest on a tie.
  int64_t best = -1, best_length = options_.min_match - 1;
  int64_t candidate = previous_[static_cast<size_t>(last)];
  for (int64_t examined = 0; candidate >= 0 && examined < options_.max_candidates; ++examined) {
    int64_t length = 0;
    while (length < options_.max_match && candidate - length >= 0 &&
           tokens_[static_cast<size_t>(candidate - length)] == tokens_[static_cast<size_t>(last - length)]) {
      ++length;
    }
    if (length > best_length) {
      best = candidate;
      best_length = length;
      if (length == options_.max_match) break;
    }
    candidate = previous_[static_cast<size_t>(candidate)];
  }
  if (best < 0) return {};
  std::vector<int32_t> draft;
  const int64_t n = std::min(options_.max_draft, best_length - options_.min_match + 1);
  for (int64_t k = 0; k < n; ++k) {
    const int64_t at = best + 1 + k;  // <= last + k: in the tokens, or in the draft itself
    draft.push_back(at <= last ? tokens_[static_cast<size_t>(at)] : draft[static_cast<size_t>(at - last - 1)]);
  }
  return draft;
}

uint64_t ContextDrafter::memory_bytes() const {
  return (tokens_.capacity() + previous_.capacity() + latest_.capacity()) * sizeof(int32_t);
}

}  // namespace hippo::engine
