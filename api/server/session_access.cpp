#include "api/server/session_access.h"

#include <fmt/format.h>

namespace hippo::server {

namespace {

// Owners are small (an id and a number); the bound only keeps a server with millions of sessions
// from growing without end: past it the cache starts over.
constexpr size_t kMaxOwners = size_t{1} << 20;

}  // namespace

Status SessionAccess::not_found(const std::string& session_id) {
  return make_error(ErrorCode::kNotFound, "session {}: no such session", session_id);
}

Status SessionAccess::check(agents::AgentRuntime& runtime, const Tenant& tenant, const std::string& session_id) {
  std::optional<int64_t> owner;
  bool known = false;
  {
    std::lock_guard lock(mutex_);
    if (auto it = owners_.find(session_id); it != owners_.end()) {
      owner = it->second;
      known = true;
    }
  }
  if (!known) {
    Result<agents::SessionSummary> summary = runtime.session_summary(session_id);
    if (!summary.ok()) {
      // The runtime's own message names the database file: a client gets the one for every id.
      return summary.status().code() == ErrorCode::kNotFound ? not_found(session_id) : summary.status();
    }
    owner = summary->tenant;
    std::lock_guard lock(mutex_);
    if (owners_.size() >= kMaxOwners) owners_.clear();
    owners_[session_id] = owner;
  }
  if (owner != tenant.id) return not_found(session_id);
  return Status::ok_status();
}

void SessionAccess::remember(const std::string& session_id, int64_t tenant_id) {
  std::lock_guard lock(mutex_);
  if (owners_.size() >= kMaxOwners) owners_.clear();
  owners_[session_id] = tenant_id;
}

}  // namespace hippo::server
