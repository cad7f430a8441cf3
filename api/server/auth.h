// Bearer API keys (docs/protocol.md, "Authentication"): which tenant a request acts for. Every
// request but GET /healthz, and the WebSocket upgrade, carries `Authorization: Bearer <key>`; the
// key's SHA-256 is looked up in the database's api_keys (storage keeps only hashes). Answers are
// cached for AuthOptions::cache_ttl, so a request costs no SQLite lookup in the common case, and a
// revoked key (or a tenant's new limits) takes effect within that time.
#pragma once

#include "base/status.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace hippo::storage {
class SessionStore;
}

namespace hippo::server {

// The tenant every request acts for with --auth off, the one a first start makes a key for, and the
// owner of sessions made without a tenant.
inline constexpr std::string_view kDefaultTenant = "default";

// A tenant as a request acts for it, with the limits in force: its own, else the server's defaults.
struct Tenant {
  int64_t id = 0;
  std::string name;
  int64_t max_sessions = 0;       // open (not closed) sessions at once; 0: no limit
  int64_t tokens_per_minute = 0;  // input + output tokens over a sliding minute; 0: no limit
  int64_t max_prompt_tokens = 0;  // prompt tokens one request may render to; 0: no limit
};

struct AuthOptions {
  bool enabled = true;  // false: every request acts for tenant `default`, with or without a key
  std::chrono::milliseconds cache_ttl{5000};
  int64_t default_max_sessions = 0;       // for tenants whose own limit is NULL; 0: no limit
  int64_t default_tokens_per_minute = 0;
  int64_t default_max_prompt_tokens = 0;
};

// "Bearer <key>" (the scheme in any case) → the key; empty when the value is anything else.
std::string_view bearer_token(std::string_view authorization);

class Authenticator {
 public:
  // Opens its own connection to the database, then prepares its tenants: sessions without a
  // tenant become tenant `default`'s; with auth off, tenant `default` is made if missing.
  static Result<std::unique_ptr<Authenticator>> open(const std::string& db_path, const AuthOptions& options);
  ~Authenticator();
  Authenticator(const Authenticator&) = delete;
  Authenticator& operator=(const Authenticator&) = delete;

  const AuthOptions& options() const { return options_; }

  // With auth on and no API key in the database at all (revoked ones count): a new key for tenant
  // `default`, for the caller to show once. The server calls it once it listens, so that a start
  // that fails makes no key the user never sees working.
  Result<std::optional<std::string>> make_first_key();

  // The tenant for the value of an Authorization header (empty: none was sent). Refusals, which the
  // server answers with 401: kInvalidArgument (no key, or not a Bearer one) and kNotFound (an
  // unknown or revoked key). Anything else is the database failing.
  Result<Tenant> authenticate(std::string_view authorization);

 private:
  Authenticator(std::unique_ptr<storage::SessionStore> store, AuthOptions options, int64_t default_tenant);
  // tenant id -> Tenant with the limits in force, read from the database (not cached).
  Result<Tenant> load_tenant(int64_t tenant_id);

  struct Cached {
    Tenant tenant;
    std::chrono::steady_clock::time_point expires;
  };

  std::unique_ptr<storage::SessionStore> store_;
  const AuthOptions options_;
  const int64_t default_tenant_;  // 0 unless auth is off
  std::mutex mutex_;
  std::unordered_map<std::string, Cached> cache_;  // key hash (32 bytes) -> tenant; "" the default tenant
};

}  // namespace hippo::server
