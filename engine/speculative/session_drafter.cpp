#include "engine/speculative/session_drafter.h"

#include <algorithm>
#include <cmath>

namespace hippo::engine {

namespace {

constexpr double kWeight = 0.2;  // of the latest draft in the moving averages

}  // namespace

SessionDrafter::SessionDrafter(DraftMode mode, int64_t dspark_block, DraftGuard& dspark_guard, const StepCosts& costs)
    : mode_(mode),
      dspark_block_(dspark_block),
      costs_(costs),
      context_stats_{&context_guard_},
      dspark_stats_{&dspark_guard},
      dspark_drafts_(static_cast<double>(dspark_block)) {}

void SessionDrafter::DrafterStats::record(int64_t drafted, int64_t accepted) {
  guard->record(drafted, accepted);
  acceptance += kWeight * (static_cast<double>(accepted) / static_cast<double>(drafted) - acceptance);
}

SessionDrafter::Choice SessionDrafter::choose(int64_t context_drafts, bool dspark, int64_t room) {
  if (mode_ != DraftMode::kAuto) return context_drafts > 0 ? Choice::kContext : dspark ? Choice::kDspark : Choice::kPlain;
  // Tokens per decode step's worth of time; a plain step gives one. Costs not measured yet count as
  // free, so each drafter gets to show what it costs.
  const StepCostEstimate cost = costs_.estimate();
  const double row = cost.step > 0 ? cost.row / cost.step : 0, pass = cost.step > 0 ? cost.dspark / cost.step : 0;
  auto rate = [&](double drafts, double acceptance, double overhead) {
    return (1 + drafts * acceptance) / (1 + drafts * row + overhead);
  };
  const double dspark_drafts = std::min(dspark_drafts_, static_cast<double>(room));
  const double context_rate =
      context_drafts > 0 ? rate(static_cast<double>(context_drafts), context_stats_.acceptance, 0) : 0;
  const double dspark_rate = dspark ? rate(dspark_drafts, dspark_stats_.acceptance, pass) : 0;
  Choice choice = context_rate > 1 && context_rate >= dspark_rate ? Choice::kContext
                  : dspark_rate > 1                                ? Choice::kDspark
                                                                   : Choice::kPlain;
  if (choice == Choice::kPlain && (context_drafts > 0 || dspark)) {
    const bool context_probe = context_rate >= dspark_rate;  // an unavailable drafter's rate is 0
    const double overhead = context_probe ? static_cast<double>(context_drafts) * row : dspark_drafts * row + pass;
    if (++declined_ >= probe_interval(overhead)) choice = context_probe ? Choice::kContext : Choice::kDspark;
  }
  if (choice != Choice::kPlain) declined_ = 0;
  return choice;
}

int64_t SessionDrafter::probe_interval(double overhead) {
  return std::max(kMinProbeInterval, static_cast<int64_t>(std::ceil(overhead / kProbeShare)));
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
  switch (choose(static_cast<int64_t>(context.size()), dspark, room)) {
    case Choice::kContext:
      last_source_ = Drafter::kContext;
      last_length_ = static_cast<int64_t>(tokens.size());
      last_drafted_ = static_cast<int64_t>(context.size());
      return context;
    case Choice::kDspark:
      wants_dspark_ = true;
      return {};
    case Choice::kPlain:
      return {};
  }
  return {};
}

std::vector<int32_t> SessionDrafter::take_dspark(const DsparkDraft& block, int64_t room) {
  wants_dspark_ = false;
  std::vector<int32_t> drafts;
  for (size_t k = 0; k < block.tokens.size() && static_cast<int64_t>(k) < room; ++k) {
    if (block.confidence[k] < kConfidenceCut) break;
    drafts.push_back(block.tokens[k]);
  }
  dspark_drafts_ += kWeight * (static_cast<double>(drafts.size()) - dspark_drafts_);
  if (drafts.empty()) {  // a DSpark pass for nothing: to the guard, a rejected draft token
    dspark_stats_.guard->record(1, 0);
    return drafts;
  }
  last_source_ = Drafter::kDspark;
  last_length_ = block.state->n_tokens();
  last_drafted_ = static_cast<int64_t>(drafts.size());
  return drafts;
}

}  // namespace hippo::engine
