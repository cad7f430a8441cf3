// SessionDrafter: the drafts of one decoding session, step by step: the context drafter's
// (context_drafter.h) or DSpark's (Model::draft_dspark), each behind a guard that pauses it while its
// drafts keep failing (DSpark's shared by the sessions of a model: draft_guard.h). In auto mode a step
// takes whichever of the two, or no draft, promises the most tokens per second: each drafter's
// expected tokens (its drafts times its recent acceptance) against what its pass and its verify rows
// cost, as the model measured them (step_costs.h); a drafter that loses to plain decoding still
// drafts now and then (probe_interval()), so that its acceptance stays known. It learns how
// its last proposal fared from the tokens the session committed since (a verified draft keeps the
// accepted prefix), so callers only ask and verify.
//
//   propose()       the context drafter's proposal when it is this step's choice; otherwise empty,
//                   and wants_dspark() says whether to run DSpark for the session (batched across
//                   sessions by the caller) and hand the block to take_dspark().
#pragma once

#include "engine/model/model.h"
#include "engine/model/step_costs.h"
#include "engine/speculative/context_drafter.h"
#include "engine/speculative/draft_guard.h"

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace hippo::engine {

// kContext, kDspark: that drafter whenever it has drafts and its guard allows; kAuto: see above.
enum class DraftMode { kContext, kDspark, kAuto };
// Who proposed a draft.
enum class Drafter { kContext, kDspark };
inline constexpr const char* drafter_name(Drafter d) { return d == Drafter::kContext ? "context" : "dspark"; }

class SessionDrafter {
 public:
  // DSpark takes part only where the model has its stages (dspark_block: its block size, 0 = none);
  // dspark_guard (kDsparkGuard) and costs (Model::step_costs) are the model's, and outlive the drafter.
  SessionDrafter(DraftMode mode, int64_t dspark_block, DraftGuard& dspark_guard, const StepCosts& costs);
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
  // kConfidenceCut (a cut that looks at no later slot, so it keeps the output's law) and `room`. To
  // the guard, a block cut to nothing counts as one rejected draft token (the pass cost time).
  std::vector<int32_t> take_dspark(const DsparkDraft& block, int64_t room);

  // The slot confidence under which a DSpark block is cut.
  static constexpr float kConfidenceCut = 0.25f;
  // In auto mode a drafter that plain decoding beats drafts anyway now and then, so that its
  // acceptance stays known: after kMinProbeInterval declined steps, or as many more as keep what
  // the probes cost beyond plain steps to kProbeShare of the time (probe_interval()).
  static constexpr int64_t kMinProbeInterval = 16;
  static constexpr double kProbeShare = 0.02;
  // Declined steps between probes of a drafter whose draft costs `overhead` decode steps beyond a
  // plain one (its pass and its verify rows).
  static int64_t probe_interval(double overhead);

 private:
  struct DrafterStats {
    DraftGuard* guard;
    double acceptance = 0.5;  // per drafted token, a moving average over its verified drafts
    void record(int64_t drafted, int64_t accepted);
  };
  enum class Choice { kPlain, kContext, kDspark };
  // This step's choice, given the context drafter's drafts and whether DSpark may run.
  Choice choose(int64_t context_drafts, bool dspark, int64_t room);
  // How the last proposal fared, from the tokens committed since it.
  void observe(std::span<const int32_t> tokens);

  DraftMode mode_;
  int64_t dspark_block_;
  const StepCosts& costs_;
  ContextDrafter context_;
  DraftGuard context_guard_;
  DrafterStats context_stats_, dspark_stats_;
  double dspark_drafts_;      // drafts a DSpark block keeps after the confidence cut, a moving average
  int64_t declined_ = 0;      // auto mode: steps plain decoding won since a drafter last drafted
  bool wants_dspark_ = false;
  // The last proposal: its source, the session's length when it was made, its drafts.
  std::optional<Drafter> last_source_;
  int64_t last_length_ = 0;
  int64_t last_drafted_ = 0;
};

}  // namespace hippo::engine
