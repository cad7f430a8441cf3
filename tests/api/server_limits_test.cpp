// The server's pieces that need no socket: reading a Bearer key from an Authorization header, and
// the tokens-per-minute window of TenantLimits on a clock the test moves.
#include "api/server/auth.h"
#include "api/server/tenant_limits.h"

#include <catch2/catch.hpp>

using namespace hippo::server;
using std::chrono::milliseconds;
using std::chrono::seconds;

TEST_CASE("the key of a Bearer Authorization header, and nothing else", "[server]") {
  CHECK(bearer_token("Bearer hk_abc") == "hk_abc");
  CHECK(bearer_token("bearer   hk_abc  ") == "hk_abc");
  CHECK(bearer_token("BEARER\thk_abc") == "hk_abc");
  CHECK(bearer_token("") == "");
  CHECK(bearer_token("Bearer") == "");
  CHECK(bearer_token("Bearer ") == "");
  CHECK(bearer_token("Bearerhk_abc") == "");
  CHECK(bearer_token("Basic aGk6dGhlcmU=") == "");
  CHECK(bearer_token("Bearer two words") == "");
  CHECK(bearer_token("hk_abc") == "");
}

TEST_CASE("tokens per minute: a sliding window, charged when responses end", "[server]") {
  ServerCounters counters;
  TenantLimits limits(counters);
  Tenant slow{1, "slow", 0, 100};
  Tenant free{2, "free", 0, 0};
  const auto t0 = TenantLimits::Clock::now();

  CHECK_FALSE(limits.admit_response(slow, t0));  // nothing used yet
  limits.charge(slow, 60, t0);
  CHECK_FALSE(limits.admit_response(slow, t0 + seconds(1)));  // 60 < 100: one more may start
  limits.charge(slow, 70, t0 + seconds(20));                 // and may take the tenant past its limit
  auto refused = limits.admit_response(slow, t0 + seconds(30));
  REQUIRE(refused);
  CHECK(refused->http_status == 429);
  CHECK(refused->code == kRateLimited);
  CHECK(refused->retry_after_seconds == 30);  // the first charge leaves the window at t0 + 60 s: 70 < 100
  CHECK_THAT(refused->message, Catch::Contains("130 tokens"));
  CHECK(counters.rate_limited_total.load() == 1);
  // A moment before the first charge expires: still refused; at that moment: admitted.
  REQUIRE(limits.admit_response(slow, t0 + seconds(60) - milliseconds(500)));
  CHECK(limits.admit_response(slow, t0 + seconds(60) - milliseconds(500))->retry_after_seconds == 1);
  CHECK_FALSE(limits.admit_response(slow, t0 + seconds(60)));
  CHECK_FALSE(limits.admit_response(slow, t0 + seconds(200)));  // everything expired

  // When one charge is not enough to get below the limit, the wait is for the later one.
  limits.charge(slow, 80, t0 + seconds(300));
  limits.charge(slow, 90, t0 + seconds(310));
  limits.charge(slow, 10, t0 + seconds(320));
  refused = limits.admit_response(slow, t0 + seconds(330));
  REQUIRE(refused);
  CHECK(refused->retry_after_seconds == 40);  // at t0 + 370 s only the last 10 tokens are left

  // Tenants without a limit are never refused and not even counted; tenants do not share a window.
  limits.charge(free, 1000000, t0);
  CHECK_FALSE(limits.admit_response(free, t0));
  Tenant other{3, "other", 0, 100};
  CHECK_FALSE(limits.admit_response(other, t0 + seconds(330)));
}
