#include "engine/speculative/verify_draft.h"

namespace hippo::engine {

DraftVerdict verify_draft(std::span<const float> all_logits, int64_t vocab, std::span<const int32_t> drafts,
                          const std::function<int32_t(std::span<const float>)>& choose,
                          const std::function<bool(int32_t)>& take) {
  DraftVerdict verdict;
  const auto n = static_cast<int64_t>(drafts.size());
  for (int64_t j = 0; j <= n; ++j) {
    verdict.keep = j + 1;
    const int32_t token = choose(all_logits.subspan(static_cast<size_t>(j * vocab), static_cast<size_t>(vocab)));
    if (!take(token) || j == n || token != drafts[static_cast<size_t>(j)]) break;
    ++verdict.accepted;
  }
  return verdict;
}

}  // namespace hippo::engine
