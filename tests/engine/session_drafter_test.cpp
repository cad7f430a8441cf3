// The drafter's choice each step: in auto mode, the context drafter, DSpark or no draft, whichever
// promises the most tokens for the time it costs (step_costs.h); in the forced modes, the named
// drafter whenever it can.
#include "engine/model/step_costs.h"
#include "engine/speculative/session_drafter.h"

#include <catch2/catch.hpp>

#include <numeric>
#include <vector>

namespace hippo::engine {
namespace {

constexpr int64_t kBlock = 5;

// Costs as a model would have measured them: a decode step of 1 ms, 0.2 ms per extra verify row and a
// DSpark pass of `dspark_ms`.
void measure(StepCosts& costs, double dspark_ms) {
  costs.record_forward(1, 1, 1e-3);
  costs.record_forward(2, 2 + 2 * 5, 2 * (1e-3 + 5 * 0.2e-3));  // two sessions with five drafts each
  costs.record_dspark(3, 3 * dspark_ms * 1e-3);
}

// Tokens without a repeat: the context drafter has nothing to propose.
std::vector<int32_t> fresh_tokens() {
  std::vector<int32_t> tokens(40);
  std::iota(tokens.begin(), tokens.end(), 100);
  return tokens;
}

// At the 12 the context drafter proposes 13 14 15 16 17 (what followed the earlier 6 ... 12).
const std::vector<int32_t> kRepeating = {6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 3, 4, 6, 7, 8, 9, 10, 11};

TEST_CASE("step costs are per session and per extra verify row", "[speculative]") {
  StepCosts costs;
  CHECK(costs.estimate().step == 0);
  costs.record_forward(2, 8, 1.0);  // verify rows before any plain step: nothing to compare with yet
  CHECK(costs.estimate().row == 0);
  measure(costs, 3.0);
  const StepCostEstimate e = costs.estimate();
  CHECK(e.step == Approx(1e-3));
  CHECK(e.row == Approx(0.2e-3));
  CHECK(e.dspark == Approx(3e-3));
}

TEST_CASE("in auto mode a DSpark pass that costs more than its drafts give is skipped, but probed now and then",
          "[speculative]") {
  StepCosts costs;
  measure(costs, 3.0);  // five drafts at acceptance 0.5: 3.5 tokens for 1 + 1 + 3 steps' time
  DraftGuard guard(kDsparkGuard);
  SessionDrafter drafter(DraftMode::kAuto, kBlock, guard, costs);
  const std::vector<int32_t> tokens = fresh_tokens();
  // A probe costs 3 + 5 x 0.2 steps beyond a plain one: one in 200 steps keeps that at 2% of the time.
  const int64_t interval = SessionDrafter::probe_interval(3 + 5 * 0.2);
  CHECK(interval == 200);
  std::vector<int64_t> dspark_steps;
  for (int64_t step = 1; step <= 2 * interval; ++step) {
    CHECK(drafter.propose(tokens, 7, kBlock).empty());
    if (drafter.wants_dspark()) dspark_steps.push_back(step);
  }
  CHECK(dspark_steps == std::vector<int64_t>{interval, 2 * interval});
  // Cheap probes still wait kMinProbeInterval declined steps.
  CHECK(SessionDrafter::probe_interval(0.01) == SessionDrafter::kMinProbeInterval);
}

TEST_CASE("in auto mode a cheap DSpark pass runs every step, and context drafts go first when they promise more",
          "[speculative]") {
  StepCosts costs;
  measure(costs, 0.1);
  DraftGuard guard(kDsparkGuard);
  SessionDrafter drafter(DraftMode::kAuto, kBlock, guard, costs);
  const std::vector<int32_t> tokens = fresh_tokens();
  for (int step = 0; step < 4; ++step) {
    CHECK(drafter.propose(tokens, 7, kBlock).empty());
    CHECK(drafter.wants_dspark());
  }
  // Five context drafts cost no pass: at the same acceptance they beat DSpark's five.
  SessionDrafter repeating(DraftMode::kAuto, kBlock, guard, costs);
  CHECK(repeating.propose(kRepeating, 12, kBlock) == std::vector<int32_t>{13, 14, 15, 16, 17});
  CHECK_FALSE(repeating.wants_dspark());
}

TEST_CASE("before any cost is measured the drafters draft; the forced modes draft whatever it costs", "[speculative]") {
  StepCosts unmeasured;
  DraftGuard guard(kDsparkGuard);
  SessionDrafter first(DraftMode::kAuto, kBlock, guard, unmeasured);
  CHECK(first.propose(fresh_tokens(), 7, kBlock).empty());
  CHECK(first.wants_dspark());

  StepCosts costs;
  measure(costs, 50.0);
  SessionDrafter dspark(DraftMode::kDspark, kBlock, guard, costs);
  for (int step = 0; step < 4; ++step) {
    CHECK(dspark.propose(kRepeating, 12, kBlock).empty());
    CHECK(dspark.wants_dspark());
  }
  // Context drafts whose verify rows cost more than they give: auto decodes plainly, context mode drafts.
  StepCosts dear_rows;
  dear_rows.record_forward(1, 1, 1e-3);
  dear_rows.record_forward(1, 6, 1e-3 + 5 * 2e-3);
  SessionDrafter automatic(DraftMode::kAuto, 0, guard, dear_rows);
  CHECK(automatic.propose(kRepeating, 12, kBlock).empty());
  SessionDrafter context(DraftMode::kContext, 0, guard, dear_rows);
  CHECK(context.propose(kRepeating, 12, kBlock) == std::vector<int32_t>{13, 14, 15, 16, 17});
}

}  // namespace
}  // namespace hippo::engine
