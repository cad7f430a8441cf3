// DraftGuard: stops drafting for a session whose drafts mostly fail. A rejected draft costs a verify
// forward wider than a decode step for nothing, so after a run of poor acceptance the session decodes
// plainly for a while, each failed probe doubling the pause (up to a bound), a good one resetting it.
#pragma once

#include <algorithm>
#include <cstdint>

namespace hippo::engine {

class DraftGuard {
 public:
  // Whether to draft this step (a paused guard counts the step).
  bool allows() {
    if (paused_steps_ == 0) return true;
    --paused_steps_;
    return false;
  }

  // The outcome of one verified draft.
  void record(int64_t drafted, int64_t accepted) {
    drafted_ += drafted;
    accepted_ += accepted;
    if (drafted_ < kWindowTokens) return;
    if (accepted_ * 4 < drafted_) {  // under a quarter accepted
      paused_steps_ = pause_;
      pause_ = std::min(pause_ * 2, kMaxPause);
    } else {
      pause_ = kMinPause;
    }
    drafted_ = accepted_ = 0;
  }

 private:
  static constexpr int64_t kWindowTokens = 10;  // drafted tokens judged together
  static constexpr int64_t kMinPause = 8;
  static constexpr int64_t kMaxPause = 256;
  int64_t drafted_ = 0, accepted_ = 0;
  int64_t paused_steps_ = 0;
  int64_t pause_ = kMinPause;
};

}  // namespace hippo::engine
