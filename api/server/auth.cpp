#include "api/server/auth.h"

#include "base/log.h"
#include "storage/store.h"

#include <algorithm>
#include <cctype>

namespace hippo::server {

namespace {

// Unknown keys are never cached (a key made a moment ago must work at once), so the cache holds
// only keys that worked: this bound is for a server with very many clients, not for attackers.
constexpr size_t kMaxCachedKeys = 10000;

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::string_view bearer_token(std::string_view authorization) {
  authorization = trim(authorization);
  constexpr std::string_view kScheme = "Bearer";
  if (authorization.size() <= kScheme.size() || !iequals(authorization.substr(0, kScheme.size()), kScheme)) return {};
  const char separator = authorization[kScheme.size()];
  if (separator != ' ' && separator != '\t') return {};
  std::string_view token = trim(authorization.substr(kScheme.size()));
  if (token.find_first_of(" \t") != std::string_view::npos) return {};
  return token;
}

Result<std::unique_ptr<Authenticator>> Authenticator::open(const std::string& db_path, const AuthOptions& options) {
  HIPPO_ASSIGN_OR_RETURN(std::unique_ptr<storage::SessionStore> store, storage::SessionStore::open(db_path));
  HIPPO_ASSIGN_OR_RETURN(int64_t adopted, store->adopt_untenanted_sessions(kDefaultTenant));
  if (adopted > 0) {
    log::info("sessions without a tenant now belong to tenant default", {{"sessions", adopted}, {"tenant", kDefaultTenant}});
  }
  int64_t default_tenant = 0;
  if (!options.enabled) {
    HIPPO_ASSIGN_OR_RETURN(storage::TenantInfo tenant, store->ensure_tenant(kDefaultTenant));
    default_tenant = tenant.id;
  }
  return std::unique_ptr<Authenticator>(new Authenticator(std::move(store), options, default_tenant));
}

Result<std::optional<std::string>> Authenticator::make_first_key() {
  if (!options_.enabled) return std::optional<std::string>();
  HIPPO_ASSIGN_OR_RETURN(int64_t keys, store_->count_api_keys());
  if (keys != 0) return std::optional<std::string>();
  HIPPO_ASSIGN_OR_RETURN(storage::TenantInfo tenant, store_->ensure_tenant(kDefaultTenant));
  HIPPO_ASSIGN_OR_RETURN(std::string key, storage::new_api_key());
  HIPPO_ASSIGN_OR_RETURN(int64_t key_id, store_->add_api_key(tenant.id, key, "first start"));
  log::info("API key created: the database had none", {{"tenant", tenant.name}, {"key_id", key_id}});
  return std::optional<std::string>(std::move(key));
}

Authenticator::Authenticator(std::unique_ptr<storage::SessionStore> store, AuthOptions options, int64_t default_tenant)
    : store_(std::move(store)), options_(std::move(options)), default_tenant_(default_tenant) {}

Authenticator::~Authenticator() = default;

Result<Tenant> Authenticator::load_tenant(int64_t tenant_id) {
  HIPPO_ASSIGN_OR_RETURN(storage::TenantInfo info, store_->get_tenant(tenant_id));
  Tenant t;
  t.id = info.id;
  t.name = info.name;
  t.max_sessions = info.limits.max_sessions.value_or(options_.default_max_sessions);
  t.tokens_per_minute = info.limits.tokens_per_minute.value_or(options_.default_tokens_per_minute);
  t.max_prompt_tokens = info.limits.max_prompt_tokens.value_or(options_.default_max_prompt_tokens);
  return t;
}

Result<Tenant> Authenticator::authenticate(std::string_view authorization) {
  std::string cache_key;  // "": the default tenant (auth off)
  if (options_.enabled) {
    const std::string_view key = bearer_token(authorization);
    if (key.empty()) {
      return Status(ErrorCode::kInvalidArgument, authorization.empty()
                                                     ? "no API key: send the header `Authorization: Bearer <key>`"
                                                     : "the Authorization header must be `Bearer <key>`");
    }
    Result<storage::ApiKeyHash> hash = storage::api_key_hash(key);
    if (!hash.ok()) return make_error(ErrorCode::kNotFound, "invalid or revoked API key");  // too short to be one
    cache_key.assign(reinterpret_cast<const char*>(hash->data()), hash->size());
  }
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mutex_);
    auto it = cache_.find(cache_key);
    if (it != cache_.end() && it->second.expires > now) return it->second.tenant;
  }
  // The database is read outside the lock: a slow read holds up only the requests that need one.
  int64_t tenant_id = default_tenant_;
  if (options_.enabled) {
    HIPPO_ASSIGN_OR_RETURN(std::optional<int64_t> found, store_->tenant_for_api_key(bearer_token(authorization)));
    if (!found) return make_error(ErrorCode::kNotFound, "invalid or revoked API key");
    tenant_id = *found;
  }
  HIPPO_ASSIGN_OR_RETURN(Tenant tenant, load_tenant(tenant_id));
  std::lock_guard lock(mutex_);
  if (cache_.size() >= kMaxCachedKeys) std::erase_if(cache_, [&](const auto& entry) { return entry.second.expires <= now; });
  if (cache_.size() >= kMaxCachedKeys) cache_.clear();
  cache_[cache_key] = Cached{tenant, now + options_.cache_ttl};
  return tenant;
}

}  // namespace hippo::server
