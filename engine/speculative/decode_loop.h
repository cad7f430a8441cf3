// One session decoded token by token, with or without context drafts: `hippo run` and `hippo bench
// speculative` (the runtime batches many sessions and walks the same verify rows itself). With
// drafts, each step feeds the last token and the drafter's proposal, walks the rows (verify_draft.h)
// and settles; the tokens are those of plain decoding (greedy: the same; sampled: the same law).
#pragma once

#include "base/status.h"
#include "engine/model/model.h"
#include "engine/sampling/sampler.h"

#include <cstdint>
#include <functional>

namespace hippo::engine {

struct DecodeCounts {
  int64_t generated = 0;  // tokens chosen (the last one, which ended the output, included)
  int64_t drafted = 0;
  int64_t accepted = 0;
};

// Chooses up to max_tokens tokens from the state's next-token logits on, handing each to `take`
// (false: the output has ended, and that token is not fed to the model).
Result<DecodeCounts> decode_tokens(Model& model, SessionState& state, Sampler& sampler, bool drafts,
                                   int64_t max_tokens, const std::function<bool(int32_t)>& take);

}  // namespace hippo::engine
