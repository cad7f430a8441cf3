// LatencyHistogram: observations land in the right bucket and render as cumulative Prometheus
// buckets with sum and count.
#include "api/server/metrics.h"

#include <catch2/catch.hpp>

namespace hippo::server {
namespace {

TEST_CASE("a latency histogram renders cumulative buckets, sum and count", "[server]") {
  LatencyHistogram h;
  h.observe(5e-6);    // <= 10 µs
  h.observe(10e-6);   // on a bound: that bucket (le is inclusive)
  h.observe(80e-6);   // <= 100 µs, not <= 75 µs
  h.observe(0.2);     // over every bound: +Inf only
  std::string out;
  h.render(out, "x_seconds", "Help text.");
  CHECK_THAT(out, Catch::StartsWith("# HELP x_seconds Help text.\n# TYPE x_seconds histogram\n"));
  CHECK_THAT(out, Catch::Contains("x_seconds_bucket{le=\"1e-05\"} 2\n"));
  CHECK_THAT(out, Catch::Contains("x_seconds_bucket{le=\"5e-05\"} 2\n"));
  CHECK_THAT(out, Catch::Contains("x_seconds_bucket{le=\"7.5e-05\"} 2\n"));
  CHECK_THAT(out, Catch::Contains("x_seconds_bucket{le=\"0.0001\"} 3\n"));
  CHECK_THAT(out, Catch::Contains("x_seconds_bucket{le=\"0.1\"} 3\n"));
  CHECK_THAT(out, Catch::Contains("x_seconds_bucket{le=\"+Inf\"} 4\n"));
  CHECK_THAT(out, Catch::Contains("x_seconds_sum 0.200095\n"));
  CHECK_THAT(out, Catch::EndsWith("x_seconds_count 4\n"));
}

}  // namespace
}  // namespace hippo::server
