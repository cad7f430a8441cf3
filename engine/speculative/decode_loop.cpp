#include "engine/speculative/decode_loop.h"

#include "engine/speculative/verify_draft.h"

#include <memory>
#include <optional>

namespace hippo::engine {

DraftSource session_draft_source(Model& model, SessionState& state, DraftMode mode) {
  return session_draft_source(model, state, mode, model.step_costs());
}

DraftSource session_draft_source(Model& model, SessionState& state, DraftMode mode, const StepCosts& costs) {
  // The drafter and its DSpark guard (one session: the guard is its own).
  struct Drafting {
    DraftGuard dspark_guard{kDsparkGuard};
    std::optional<SessionDrafter> drafter;
  };
  auto drafting = std::make_shared<Drafting>();
  drafting->drafter.emplace(mode, model.has_dspark() ? model.text().dspark_block_size : 0, drafting->dspark_guard,
                           costs);
  return [drafting, &model, &state](std::span<const int32_t> tokens, int32_t last) -> Result<std::vector<int32_t>> {
    SessionDrafter& drafter = *drafting->drafter;
    std::vector<int32_t> context = drafter.propose(tokens, last, kMaxDraftTokens);
    if (!drafter.wants_dspark()) return context;
    DsparkDraft block{&state, last, {}, {}};
    HIPPO_RETURN_IF_ERROR(model.draft_dspark(std::span(&block, 1)));
    return drafter.take_dspark(block, kMaxDraftTokens);
  };
}

Result<DecodeCounts> decode_tokens(Model& model, SessionState& state, Sampler& sampler, const DraftSource& drafts,
                                   int64_t max_tokens, const std::function<bool(int32_t)>& take) {
  DecodeCounts counts;
  if (max_tokens <= 0) return counts;
  int32_t last = 0;
  bool going = true;
  auto give = [&](int32_t token) {
    last = token;
    ++counts.generated;
    going = take(token) && counts.generated < max_tokens;
    return going;
  };
  give(sampler.next(state.next_logits()));
  while (going) {
    std::vector<int32_t> proposal;
    const int64_t room = std::min(max_tokens - counts.generated - 1, kMaxDraftTokens);
    if (drafts && room > 0) {
      HIPPO_ASSIGN_OR_RETURN(proposal, drafts(state.token_ids(), last));
      if (static_cast<int64_t>(proposal.size()) > room) proposal.resize(static_cast<size_t>(room));
    }
    if (proposal.empty()) {
      HIPPO_RETURN_IF_ERROR(model.forward(state, std::span(&last, 1)));
      give(sampler.next(state.next_logits()));
      continue;
    }
    std::vector<int32_t> fed{last};
    fed.insert(fed.end(), proposal.begin(), proposal.end());
    std::vector<float> rows;
    ForwardRequest request{&state, fed, &rows, true};
    HIPPO_RETURN_IF_ERROR(model.forward(std::span(&request, 1)));
    const DraftVerdict verdict = verify_draft(
        rows, model.text().vocab_size, proposal,
        [&](std::span<const float> row) { return sampler.next(row); },
        give);
    HIPPO_RETURN_IF_ERROR(model.settle(state, verdict.keep, rows));
    const auto n = static_cast<int64_t>(proposal.size());
    counts.drafted += n;
    counts.accepted += verdict.accepted;
    ++counts.verifies;
    for (int64_t j = 0; j < n; ++j) ++counts.drafted_at[static_cast<size_t>(j)];
    for (int64_t j = 0; j < verdict.accepted; ++j) ++counts.accepted_at[static_cast<size_t>(j)];
  }
  return counts;
}

}  // namespace hippo::engine
