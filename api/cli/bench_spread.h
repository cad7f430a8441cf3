// The summary every `hippo bench` command reports for repeated timed runs: median, min and max.
#pragma once

#include <algorithm>
#include <vector>

namespace hippo::cli {

struct Spread {
  double median = 0, min = 0, max = 0;
};

// `values` must not be empty.
inline Spread spread_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return {values[values.size() / 2], values.front(), values.back()};
}

}  // namespace hippo::cli
