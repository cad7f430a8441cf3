// Per-tenant limits (docs/protocol.md, "Limits"): how many sessions a tenant may have open, and how
// many tokens its responses may use per minute. Refusals carry what the client is told: an HTTP
// status (429), a code (`quota_exceeded`, `rate_limited`) and, for the rate, when to try again.
#pragma once

#include "agents/runtime.h"
#include "api/server/auth.h"
#include "api/server/metrics.h"

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

namespace hippo::server {

inline constexpr std::string_view kQuotaExceeded = "quota_exceeded";
inline constexpr std::string_view kRateLimited = "rate_limited";

struct Refusal {
  unsigned http_status = 429;
  std::string code;
  std::string message;
  int64_t retry_after_seconds = 0;  // > 0: the client may try again after this long (Retry-After)
};

// What a finished response costs against tokens_per_minute: the input it prefilled (not the cached
// context it continued) plus its output.
inline int64_t charged_tokens(const agents::Usage& usage) {
  return usage.input_tokens - usage.cached_tokens + usage.output_tokens;
}

class TenantLimits {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kWindow{60};

  explicit TenantLimits(ServerCounters& counters) : counters_(counters) {}

  // Runs create (which opens one session for the tenant) unless the tenant has max_sessions open
  // already. One tenant's creations run one at a time, so concurrent ones cannot overshoot.
  std::optional<Refusal> open_session(agents::AgentRuntime& runtime, const Tenant& tenant,
                                      const std::function<void()>& create);

  // Checked when a response is created: refused while the tokens the tenant's responses used in
  // the last minute reach tokens_per_minute. A response's tokens are counted when it ends, so
  // one response may take the tenant past its limit; the next waits until the window allows.
  std::optional<Refusal> admit_response(const Tenant& tenant, Clock::time_point now = Clock::now());
  // A finished response's charged_tokens() (cancelled and failed ones too).
  void charge(const Tenant& tenant, int64_t tokens, Clock::time_point now = Clock::now());

 private:
  struct Window {
    std::deque<std::pair<Clock::time_point, int64_t>> charges;  // oldest first
    int64_t total = 0;
  };
  void expire(Window& window, Clock::time_point now);

  ServerCounters& counters_;
  std::mutex mutex_;
  std::map<int64_t, std::shared_ptr<std::mutex>> creating_;  // per tenant: its creations, one at a time
  std::map<int64_t, Window> windows_;
};

}  // namespace hippo::server
