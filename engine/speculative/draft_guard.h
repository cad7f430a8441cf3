// DraftGuard: stops drafting whose drafts mostly fail. A rejected draft costs a verify forward wider
// than a decode step for nothing, so after a run of poor acceptance drafting pauses for a while,
// each failed probe doubling the pause (up to a bound), a good one resetting it. A session's context
// drafter has its own; DSpark's is one per model and runtime (its stages draft well or not,
// whichever session asks), counting every session's requests.
#pragma once

#include <algorithm>
#include <cstdint>

namespace hippo::engine {

struct DraftGuardOptions {
  int64_t window_tokens = 10;  // drafted tokens judged together
  int64_t min_pause = 8;       // requests refused after the first poor window
  int64_t max_pause = 256;
};

// DSpark's: a pass of the stages costs a share of a decode step even when it drafts nothing, so it
// backs off further.
inline constexpr DraftGuardOptions kDsparkGuard{10, 64, 4096};

class DraftGuard {
 public:
  explicit DraftGuard(DraftGuardOptions options = {}) : options_(options), pause_(options.min_pause) {}

  // Whether to draft now (a paused guard counts the request).
  bool allows() {
    if (paused_ == 0) return true;
    --paused_;
    return false;
  }

  // The outcome of one verified draft.
  void record(int64_t drafted, int64_t accepted) {
    drafted_ += drafted;
    accepted_ += accepted;
    if (drafted_ < options_.window_tokens) return;
    if (accepted_ * 4 < drafted_) {  // under a quarter accepted
      paused_ = pause_;
      pause_ = std::min(pause_ * 2, options_.max_pause);
    } else {
      pause_ = options_.min_pause;
    }
    drafted_ = accepted_ = 0;
  }

 private:
  DraftGuardOptions options_;
  int64_t drafted_ = 0, accepted_ = 0;
  int64_t paused_ = 0;
  int64_t pause_;
};

}  // namespace hippo::engine
