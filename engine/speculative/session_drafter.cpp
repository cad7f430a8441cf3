#include "engine/speculative/session_drafter.h"

#include <algorithm>

namespace hippo::engine {

SessionDrafter::SessionDrafter(DraftMode mode, int64_t dspark_block, DraftGuard& dspark_guard)
    : mode_(mode), dspark_block_(dspark_block), context_stats_{&context_guard_}, dspark_stats_{&dspark_guard} {}

void SessionDrafter::DrafterStats::record(int64_t drafted, int64_t accepted) {
  guard->record(drafted, accepted);
  constexpr double kWeight = 0.2;  // of the latest draft in the moving average
  acceptance += kWeight * (static_cast<double>(accepted) / static_cast<double>(drafted) - acceptance);
}

void SessionDrafter::observe(std::span<const int32_t> tokens) {
  if (!last_source_) return;
  // A verified draft leaves the token fed before it and the drafts it accepted.
  const int64_t accepted = std::clamp<int64_t>(static_cast<int64_t>(tokens.size()) - last_length_ - 1, 0, last_drafted_);
  (*last_source_ == Drafter::kContext ? context_stats_ : dspark_stats_).record(last_drafted_, accepted);
  last_source_.reset();
}

std::vector<int32_t> SessionDrafter::propose(std::span<const int32_t> tokens, int32_t last, int64_t room) {
  observe(tokens);
  wants_dspark_ = false;
  if (room <= 0) return {};
  std::vector<int32_t> context;
  if (mode_ != DraftMode::kDspark && context_stats_.guard->allows()) {
    context_.follow(tokens, std::span(&last, 1));
    context = context_.propose();
    if (static_cast<int64_t>(context.size()) > room) context.resize(static_cast<size_t>(room));
  }
  const bool dspark = mode_ != DraftMode::kContext && dspark_block_ > 0 && dspark_stats_.guard->allows();
  // Expected accepted tokens: the drafts times the drafter's recent acceptance per drafted token.
  const double context_yield = static_cast<double>(context.size()) * context_stats_.acceptance;
  const double dspark_yield = dspark ? static_cast<double>(std::min(dspark_block_, room)) * dspark_stats_.acceptance : 0;
  if (!context.empty() && context_yield >= dspark_yield) {
    last_source_ = Drafter::kContext;
    last_length_ = static_cast<int64_t>(tokens.size());
    last_drafted_ = static_cast<int64_t>(context.size());
    return context;
  }
  wants_dspark_ = dspark;
  return {};
}

std::vector<int32_t> SessionDrafter::take_dspark(const DsparkDraft& block, int64_t room) {
  wants_dspark_ = false;
  std::vector<int32_t> drafts;
  for (size_t k = 0; k < block.tokens.size() && static_cast<int64_t>(k) < room; ++k) {
    if (block.confidence[k] < kConfidenceCut) break;
    drafts.push_back(block.tokens[k]);
  }
  if (drafts.empty()) {  // a DSpark pass for nothing: as a rejected draft token, so that the guard sees it
    dspark_stats_.record(1, 0);
    return drafts;
  }
  last_source_ = Drafter::kDspark;
  last_length_ = block.state->n_tokens();
  last_drafted_ = static_cast<int64_t>(drafts.size());
  return drafts;
}

}  // namespace hippo::engine
