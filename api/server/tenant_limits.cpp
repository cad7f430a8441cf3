#include "api/server/tenant_limits.h"

#include "base/log.h"

#include <fmt/format.h>

#include <algorithm>

namespace hippo::server {

std::optional<Refusal> TenantLimits::open_session(agents::AgentRuntime& runtime, const Tenant& tenant,
                                                  const std::function<void()>& create) {
  if (tenant.max_sessions <= 0) {
    create();
    return std::nullopt;
  }
  std::shared_ptr<std::mutex> lock_of_tenant;
  {
    std::lock_guard lock(mutex_);
    auto& slot = creating_[tenant.id];
    if (!slot) slot = std::make_shared<std::mutex>();
    lock_of_tenant = slot;
  }
  std::lock_guard creating(*lock_of_tenant);
  Result<int64_t> open = runtime.count_open_sessions(tenant.id);
  if (!open.ok()) {
    const Status& st = open.status();
    return Refusal{500, std::string(error_code_name(st.code())), st.message(), 0};
  }
  if (*open >= tenant.max_sessions) {
    counters_.quota_exceeded_total.fetch_add(1);
    log::debug("session refused: tenant at its session limit",
               {{"tenant", tenant.name}, {"open", *open}, {"limit", tenant.max_sessions}});
    return Refusal{429, std::string(kQuotaExceeded),
                   fmt::format("tenant {} has {} open sessions, its limit; close one (session.close or DELETE "
                               "/v1/sessions/{{id}}) before opening another",
                               tenant.name, *open),
                   0};
  }
  create();
  return std::nullopt;
}

void TenantLimits::expire(Window& window, Clock::time_point now) {
  while (!window.charges.empty() && window.charges.front().first + kWindow <= now) {
    window.total -= window.charges.front().second;
    window.charges.pop_front();
  }
}

std::optional<Refusal> TenantLimits::admit_response(const Tenant& tenant, Clock::time_point now) {
  if (tenant.tokens_per_minute <= 0) return std::nullopt;
  std::lock_guard lock(mutex_);
  auto it = windows_.find(tenant.id);
  if (it == windows_.end()) return std::nullopt;
  Window& window = it->second;
  expire(window, now);
  if (window.total < tenant.tokens_per_minute) return std::nullopt;
  // The first moment the window falls below the limit: when enough of the oldest charges expire.
  int64_t left = window.total;
  Clock::time_point when = now;
  for (const auto& [at, tokens] : window.charges) {
    left -= tokens;
    when = at + kWindow;
    if (left < tenant.tokens_per_minute) break;
  }
  const auto wait = std::chrono::ceil<std::chrono::seconds>(when - now);
  counters_.rate_limited_total.fetch_add(1);
  log::debug("response refused: tenant over its tokens per minute",
             {{"tenant", tenant.name}, {"tokens", window.total}, {"limit", tenant.tokens_per_minute}});
  return Refusal{429, std::string(kRateLimited),
                 fmt::format("tenant {} used {} tokens in the last minute, its limit is {}; retry in {} s", tenant.name,
                             window.total, tenant.tokens_per_minute, std::max<int64_t>(1, wait.count())),
                 std::max<int64_t>(1, wait.count())};
}

void TenantLimits::charge(const Tenant& tenant, int64_t tokens, Clock::time_point now) {
  if (tenant.tokens_per_minute <= 0 || tokens <= 0) return;
  std::lock_guard lock(mutex_);
  Window& window = windows_[tenant.id];
  expire(window, now);
  window.charges.emplace_back(now, tokens);
  window.total += tokens;
}

}  // namespace hippo::server
