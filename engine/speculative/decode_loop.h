// One session decoded token by token, with or without drafts: `hippo run` and `hippo bench
// speculative` (the runtime batches many sessions and walks the same verify rows itself). With
// drafts, each step feeds the last token and the draft source's proposal, walks the rows
// (verify_draft.h) and settles; the tokens are those of plain decoding (greedy: the same; sampled:
// the same law).
#pragma once

#include "base/status.h"
#include "engine/model/model.h"
#include "engine/sampling/sampler.h"
#include "engine/speculative/context_drafter.h"
#include "engine/speculative/session_drafter.h"

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace hippo::engine {

// Drafts to verify after the state's tokens and `last` (the token about to be fed); at most
// kMaxDraftTokens are used.
using DraftSource = std::function<Result<std::vector<int32_t>>(std::span<const int32_t> tokens, int32_t last)>;

// A session's drafter (session_drafter.h) as the draft source of `state`: the context drafter,
// DSpark or the better of both (or none, for its cost) each step, each behind its guard.
DraftSource session_draft_source(Model& model, SessionState& state, DraftMode mode);
// The same weighing drafts by `costs` (which outlive the source) instead of the model's measurements;
// a StepCosts that records nothing makes auto mode's choice independent of timing (tests).
DraftSource session_draft_source(Model& model, SessionState& state, DraftMode mode, const StepCosts& costs);

struct DecodeCounts {
  int64_t generated = 0;  // tokens chosen (the last one, which ended the output, included)
  int64_t drafted = 0;
  int64_t accepted = 0;
  int64_t verifies = 0;   // forwards with drafts
  std::array<int64_t, kMaxDraftTokens> drafted_at{}, accepted_at{};  // per draft slot
};

// Chooses up to max_tokens tokens from the state's next-token logits on, handing each to `take`
// (false: the output has ended, and that token is not fed to the model). No source: no drafts.
Result<DecodeCounts> decode_tokens(Model& model, SessionState& state, Sampler& sampler, const DraftSource& drafts,
                                   int64_t max_tokens, const std::function<bool(int32_t)>& take);

}  // namespace hippo::engine
