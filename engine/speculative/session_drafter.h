// SessionDrafter: the drafts of one decoding session, step by step: the context drafter's
// (context_drafter.h) or DSpark's (Model::draft_dspark), whichever promises more accepted tokens this
// step, each behind a guard that pauses it while its drafts keep failing (DSpark's shared by the
// sessions of a model: draft_guard.h). It learns how its last
// proposal fared from the tokens the session committed since (a verified draft keeps the accepted
// prefix), so callers only ask and verify.
//
//   propose()       the context drafter's proposal when it is this step's choice; otherwise empty,
//                   and wants_dspark() says whether to run DSpark for the session (batched across
//                   sessions by the caller) and hand the block to take_dspark().
#pragma once

#include "engine/model/model.h"
#include "engine/speculative/context_drafter.h"
#include "engine/speculative/draft_guard.h"

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace hippo::engine {

enum class DraftMode { kContext, kDspark, kAuto };
// Who proposed a draft.
enum class Drafter { kContext, kDspark };
inline constexpr const char* drafter_name(Drafter d) { return d == Drafter::kContext ? "context" : "dspark"; }

class SessionDrafter {
 public:
  // DSpark takes part only where the model has its stages (dspark_block: its block size, 0 = none);
  // dspark_guard (kDsparkGuard) is the model's, and outlives the drafter.
  SessionDrafter(DraftMode mode, int64_t dspark_block, DraftGuard& dspark_guard);
  SessionDrafter(const SessionDrafter&) = delete;
  SessionDrafter& operator=(const SessionDrafter&) = delete;

  // For the session's tokens and `last` (chosen, not yet fed): the context drafter's drafts (at most
  // `room`), or none.
  std::vector<int32_t> propose(std::span<const int32_t> tokens, int32_t last, int64_t room);
  bool wants_dspark() const { return wants_dspark_; }
  // Who proposed the drafts propose() or take_dspark() returned last (none: no drafts since the
  // last outcome was learnt).
  std::optional<Drafter> last_drafter() const { return last_source_; }
  // After propose() asked for it: the block's drafts up to the first whose confidence is below
  // kConfidenceCut (a cut that looks at no later slot, so it keeps the output's law) and `room`. A
  // block cut to nothing counts as one rejected draft token (the pass cost a fifth of a step or so).
  std::vector<int32_t> take_dspark(const DsparkDraft& block, int64_t room);

  // The slot confidence under which a DSpark block is cut.
  static constexpr float kConfidenceCut = 0.25f;

 private:
  struct DrafterStats {
    DraftGuard* guard;
    double acceptance = 0.5;  // per drafted token, a moving average over its verified drafts
    void record(int64_t drafted, int64_t accepted);
  };
  // How the last proposal fared, from the tokens committed since it.
  void observe(std::span<const int32_t> tokens);

  DraftMode mode_;
  int64_t dspark_block_;
  ContextDrafter context_;
  DraftGuard context_guard_;
  DrafterStats context_stats_, dspark_stats_;
  bool wants_dspark_ = false;
  // The last proposal: its source, the session's length when it was made, its drafts.
  std::optional<Drafter> last_source_;
  int64_t last_length_ = 0;
  int64_t last_drafted_ = 0;
};

}  // namespace hippo::engine
