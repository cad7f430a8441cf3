// StepCosts: what a model's decode-shaped forwards and DSpark passes have cost lately, per session,
// so that a drafter can weigh the tokens a draft promises against what drafting and verifying it
// costs (engine/speculative/session_drafter.h). Moving averages of measured wall time; a batch's
// time is shared equally by its sessions. The figures differ by orders of magnitude between models:
// on the demo model the vocabulary head dominates, and a DSpark pass (its head at five rows) costs
// about two decode steps; on the release model it is a small share of one.
#pragma once

#include <cstdint>
#include <mutex>

namespace hippo::engine {

// Seconds; 0 where nothing has been measured yet.
struct StepCostEstimate {
  double step = 0;    // a decode step: one token fed
  double row = 0;     // each verify row beyond the first
  double dspark = 0;  // a DSpark pass, per block
};

class StepCosts {
 public:
  // A forward in which each of `sessions` sessions was fed one token or a draft to verify, `rows`
  // tokens in all.
  void record_forward(int64_t sessions, int64_t rows, double seconds);
  // A DSpark pass drafting `blocks` blocks.
  void record_dspark(int64_t blocks, double seconds);
  StepCostEstimate estimate() const;

 private:
  mutable std::mutex mutex_;
  StepCostEstimate estimate_;
};

}  // namespace hippo::engine
