#include "engine/model/step_costs.h"

#include <algorithm>

namespace hippo::engine {
namespace {

// The weight of the latest measurement: about the last ten count.
constexpr double kWeight = 0.1;

void average(double& into, double sample) { into = into == 0 ? sample : into + kWeight * (sample - into); }

}  // namespace

void StepCosts::record_forward(int64_t sessions, int64_t rows, double seconds) {
  if (sessions <= 0 || rows < sessions) return;
  const std::lock_guard lock(mutex_);
  const double share = seconds / static_cast<double>(sessions);
  if (rows == sessions) {
    average(estimate_.step, share);
    return;
  }
  // A forward with verify rows: what it took beyond a plain step, per extra row of a session.
  if (estimate_.step == 0) return;
  const double extra_rows = static_cast<double>(rows - sessions) / static_cast<double>(sessions);
  average(estimate_.row, std::max(0.0, (share - estimate_.step) / extra_rows));
}

void StepCosts::record_dspark(int64_t blocks, double seconds) {
  if (blocks <= 0) return;
  const std::lock_guard lock(mutex_);
  average(estimate_.dspark, seconds / static_cast<double>(blocks));
}

StepCostEstimate StepCosts::estimate() const {
  const std::lock_guard lock(mutex_);
  return estimate_;
}

}  // namespace hippo::engine
