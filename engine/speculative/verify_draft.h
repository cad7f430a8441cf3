// The lossless walk over a draft's verify rows (Model::forward with ForwardRequest::draft): row j
// holds the logits after the request's first j + 1 tokens, the request being the last sampled token
// followed by the drafts. Row j's token is chosen as plain decoding chooses it (the same sampler, the
// same draw), handed on, and the walk goes on only while it equals draft j: the first mismatch is
// the model's own token, and a fully accepted draft earns one more from the last row. A draft is thus
// taken with probability p(draft), the most any lossless rule takes a drafter's one proposed token
// with, and the output is plain decoding's, draw for draw.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

namespace hippo::engine {

struct DraftVerdict {
  int64_t keep = 0;      // the request's tokens to keep (Model::settle)
  int64_t accepted = 0;  // drafts taken
};

// choose(row) -> token; take(token) -> whether the output goes on (false: it ended,
// and the token is not fed to the model).
DraftVerdict verify_draft(std::span<const float> all_logits, int64_t vocab, std::span<const int32_t> drafts,
                          const std::function<int32_t(std::span<const float>)>& choose,
                          const std::function<bool(int32_t)>& take);

}  // namespace hippo::engine
