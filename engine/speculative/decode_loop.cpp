#include "engine/speculative/decode_loop.h"

#include "engine/speculative/context_drafter.h"
#include "engine/speculative/draft_guard.h"
#include "engine/speculative/verify_draft.h"

namespace hippo::engine {

Result<DecodeCounts> decode_tokens(Model& model, SessionState& state, Sampler& sampler, bool drafts,
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
  ContextDrafter drafter;
  DraftGuard guard;
  give(sampler.next(state.next_logits()));
  while (going) {
    std::vector<int32_t> proposal;
    const int64_t room = max_tokens - counts.generated - 1;
    if (drafts && room > 0 && guard.allows()) {
      drafter.follow(state.token_ids(), std::span(&last, 1));
      proposal = drafter.propose();
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
        [&](std::span<const float> row, std::optional<int32_t> draft) {
          return draft ? sampler.next(row, *draft) : sampler.next(row);
        },
        give);
    HIPPO_RETURN_IF_ERROR(model.settle(state, verdict.keep, rows));
    counts.drafted += static_cast<int64_t>(proposal.size());
    counts.accepted += verdict.accepted;
    guard.record(static_cast<int64_t>(proposal.size()), verdict.accepted);
  }
  return counts;
}

}  // namespace hippo::engine
