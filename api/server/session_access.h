// Tenant isolation: before a request uses a session, the server checks that the session belongs to
// the request's tenant. A session of another tenant answers exactly like one that does not exist
// (`not_found`, the same message), so a key cannot even learn which ids exist elsewhere. A
// session's tenant never changes, so owners are cached after the first look.
#pragma once

#include "agents/runtime.h"
#include "api/server/auth.h"

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace hippo::server {

class SessionAccess {
 public:
  // ok: the session exists (possibly closed) and is the tenant's. Otherwise kNotFound as for a
  // missing session, or the database's failure.
  Status check(agents::AgentRuntime& runtime, const Tenant& tenant, const std::string& session_id);
  // A session this server just made for the tenant.
  void remember(const std::string& session_id, int64_t tenant_id);
  static Status not_found(const std::string& session_id);

 private:
  std::mutex mutex_;
  std::unordered_map<std::string, std::optional<int64_t>> owners_;
};

}  // namespace hippo::server
