// Tenants, their limits and API keys. A key is stored only as its SHA-256 hash: a copy of the
// database does not reveal working keys, and lookups compare hashes (the key is high-entropy, so no
// salt is needed).
#include "storage/store.h"

#include "storage/sqlite.h"
#include "storage/store_internal.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <array>

namespace hippo::storage {

Result<ApiKeyHash> api_key_hash(std::string_view key) {
  if (key.size() < 16) return make_error(ErrorCode::kInvalidArgument, "API keys must have at least 16 characters");
  ApiKeyHash hash{};
  unsigned int n = 0;
  if (EVP_Digest(key.data(), key.size(), reinterpret_cast<unsigned char*>(hash.data()), &n, EVP_sha256(), nullptr) != 1 ||
      n != hash.size())
    return make_error(ErrorCode::kInternal, "SHA-256 of an API key failed");
  return hash;
}

Result<std::string> new_api_key() {
  // 32 bytes = 256 bits: far beyond guessing, and long enough that an unsalted hash is safe.
  std::array<unsigned char, 32> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1)
    return make_error(ErrorCode::kInternal, "OpenSSL's RAND_bytes failed: no API key was made");
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string key = "hk_";
  // base64url without padding: 32 bytes -> 43 characters.
  std::uint32_t acc = 0;
  int bits = 0;
  for (unsigned char b : bytes) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      key += kAlphabet[(acc >> bits) & 63];
    }
  }
  if (bits > 0) key += kAlphabet[(acc << (6 - bits)) & 63];
  return key;
}

namespace {

constexpr std::string_view kTenantColumns = "id, name, max_sessions, tokens_per_minute, created_at, max_prompt_tokens";

TenantInfo read_tenant_row(const Statement& stmt) {
  TenantInfo t;
  t.id = stmt.column_int(0);
  t.name = stmt.column_text(1);
  if (!stmt.column_is_null(2)) t.limits.max_sessions = stmt.column_int(2);
  if (!stmt.column_is_null(3)) t.limits.tokens_per_minute = stmt.column_int(3);
  t.created_at = stmt.column_int(4);
  if (!stmt.column_is_null(5)) t.limits.max_prompt_tokens = stmt.column_int(5);
  return t;
}

Result<std::optional<TenantInfo>> select_tenant(Db& db, std::string_view where, auto bind) {
  HIPPO_ASSIGN_OR_RETURN(Statement select,
                         Statement::prepare(db, fmt::format("SELECT {} FROM tenants WHERE {}", kTenantColumns, where)));
  bind(select);
  HIPPO_ASSIGN_OR_RETURN(bool row, select.step());
  if (!row) return std::optional<TenantInfo>();
  return std::optional<TenantInfo>(read_tenant_row(select));
}

Result<std::int64_t> insert_tenant(Db& db, std::string_view name) {
  if (name.empty()) return make_error(ErrorCode::kInvalidArgument, "a tenant needs a name");
  HIPPO_ASSIGN_OR_RETURN(Statement insert, Statement::prepare(db, "INSERT INTO tenants(name, created_at) VALUES (?, ?)"));
  Status status = insert.bind(1, name).bind(2, unix_now()).run();
  if (status.code() == ErrorCode::kAlreadyExists)
    return make_error(ErrorCode::kAlreadyExists, "tenant {} already exists", name);
  HIPPO_RETURN_IF_ERROR(status.with_context("tenant " + std::string(name)));
  return db.last_insert_rowid();
}

Result<TenantInfo> ensure_tenant_locked(Db& db, std::string_view name) {
  auto by_name = [&](Statement& s) { s.bind(1, name); };
  HIPPO_ASSIGN_OR_RETURN(std::optional<TenantInfo> found, select_tenant(db, "name = ?", by_name));
  if (found) return *found;
  HIPPO_RETURN_IF_ERROR(insert_tenant(db, name).status());
  HIPPO_ASSIGN_OR_RETURN(found, select_tenant(db, "name = ?", by_name));
  if (!found) return make_error(ErrorCode::kInternal, "tenant {}: not found right after it was created", name);
  return *found;
}

Status check_limit(std::string_view name, const std::optional<std::int64_t>& value) {
  if (value && *value < 0) return make_error(ErrorCode::kInvalidArgument, "{} must be 0 (no limit) or more, not {}", name, *value);
  return {};
}

}  // namespace

Result<std::int64_t> SessionStore::create_tenant(std::string_view name) {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  Result<std::int64_t> id = insert_tenant(*db_, name);
  if (!id.ok()) return note_failure(id.status());
  return id;
}

Result<TenantInfo> SessionStore::get_tenant(std::int64_t id) {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  HIPPO_ASSIGN_OR_RETURN(std::optional<TenantInfo> found,
                         select_tenant(*db_, "id = ?", [&](Statement& s) { s.bind(1, id); }));
  if (!found) return make_error(ErrorCode::kNotFound, "tenant {}: no such tenant in {}", id, db_->path());
  return *found;
}

Result<std::optional<TenantInfo>> SessionStore::find_tenant(std::string_view name) {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  return select_tenant(*db_, "name = ?", [&](Statement& s) { s.bind(1, name); });
}

Result<TenantInfo> SessionStore::ensure_tenant(std::string_view name) {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  HIPPO_ASSIGN_OR_RETURN(Transaction tx, Transaction::begin(*db_));
  Result<TenantInfo> tenant = ensure_tenant_locked(*db_, name);
  if (!tenant.ok()) return note_failure(tenant.status());
  HIPPO_RETURN_IF_ERROR(note_failure(tx.commit().with_context("tenant " + std::string(name))));
  return tenant;
}

Status SessionStore::set_tenant_limits(std::int64_t tenant_id, const TenantLimits& limits) {
  HIPPO_RETURN_IF_ERROR(check_limit("max_sessions", limits.max_sessions));
  HIPPO_RETURN_IF_ERROR(check_limit("tokens_per_minute", limits.tokens_per_minute));
  HIPPO_RETURN_IF_ERROR(check_limit("max_prompt_tokens", limits.max_prompt_tokens));
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  HIPPO_ASSIGN_OR_RETURN(Statement update, Statement::prepare(*db_, "UPDATE tenants SET max_sessions = ?, "
                                                                    "tokens_per_minute = ?, max_prompt_tokens = ? "
                                                                    "WHERE id = ?"));
  if (limits.max_sessions) update.bind(1, *limits.max_sessions); else update.bind_null(1);
  if (limits.tokens_per_minute) update.bind(2, *limits.tokens_per_minute); else update.bind_null(2);
  if (limits.max_prompt_tokens) update.bind(3, *limits.max_prompt_tokens); else update.bind_null(3);
  update.bind(4, tenant_id);
  HIPPO_RETURN_IF_ERROR(note_failure(update.run().with_context(fmt::format("limits of tenant {}", tenant_id))));
  if (db_->changes() == 0) return make_error(ErrorCode::kNotFound, "tenant {}: no such tenant in {}", tenant_id, db_->path());
  return {};
}

Result<std::int64_t> SessionStore::add_api_key(std::int64_t tenant_id, std::string_view key, std::string_view label) {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  HIPPO_ASSIGN_OR_RETURN(ApiKeyHash hash, api_key_hash(key));
  HIPPO_ASSIGN_OR_RETURN(Statement insert, Statement::prepare(*db_, "INSERT INTO api_keys(tenant_id, key_hash, label, "
                                                                    "created_at) VALUES (?, ?, ?, ?)"));
  Status status = insert.bind(1, tenant_id).bind_blob(2, hash).bind(3, label).bind(4, unix_now()).run();
  if (status.code() == ErrorCode::kAlreadyExists)
    return make_error(ErrorCode::kAlreadyExists, "API key '{}': the key exists already, or tenant {} does not", label,
                      tenant_id);
  HIPPO_RETURN_IF_ERROR(note_failure(status.with_context("API key " + std::string(label))));
  return db_->last_insert_rowid();
}

Result<std::optional<std::int64_t>> SessionStore::tenant_for_api_key(std::string_view key) {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  auto hash = api_key_hash(key);
  if (!hash.ok()) return std::optional<std::int64_t>();  // too short to be one of ours
  HIPPO_ASSIGN_OR_RETURN(Statement select, Statement::prepare(*db_, "SELECT tenant_id FROM api_keys WHERE key_hash = ? "
                                                                    "AND revoked_at IS NULL"));
  select.bind_blob(1, *hash);
  HIPPO_ASSIGN_OR_RETURN(bool row, select.step());
  if (!row) return std::optional<std::int64_t>();
  return std::optional<std::int64_t>(select.column_int(0));
}

Status SessionStore::revoke_api_key(std::string_view key) {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  HIPPO_ASSIGN_OR_RETURN(ApiKeyHash hash, api_key_hash(key));
  HIPPO_ASSIGN_OR_RETURN(Statement update, Statement::prepare(*db_, "UPDATE api_keys SET revoked_at = ? WHERE key_hash "
                                                                    "= ? AND revoked_at IS NULL"));
  HIPPO_RETURN_IF_ERROR(note_failure(update.bind(1, unix_now()).bind_blob(2, hash).run()));
  if (db_->changes() == 0) return make_error(ErrorCode::kNotFound, "API key not found or already revoked");
  return {};
}

Status SessionStore::revoke_api_key(std::int64_t key_id) {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  HIPPO_ASSIGN_OR_RETURN(Statement update, Statement::prepare(*db_, "UPDATE api_keys SET revoked_at = ? WHERE id = ? "
                                                                    "AND revoked_at IS NULL"));
  HIPPO_RETURN_IF_ERROR(note_failure(update.bind(1, unix_now()).bind(2, key_id).run()));
  if (db_->changes() == 0)
    return make_error(ErrorCode::kNotFound, "API key {}: no such key in {}, or it is revoked already", key_id,
                      db_->path());
  return {};
}

Result<std::vector<ApiKeyInfo>> SessionStore::list_api_keys() {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  HIPPO_ASSIGN_OR_RETURN(Statement select,
                         Statement::prepare(*db_, "SELECT k.id, k.tenant_id, t.name, k.label, k.created_at, k.revoked_at "
                                                  "FROM api_keys k JOIN tenants t ON t.id = k.tenant_id ORDER BY k.id"));
  std::vector<ApiKeyInfo> keys;
  for (;;) {
    HIPPO_ASSIGN_OR_RETURN(bool row, select.step());
    if (!row) break;
    ApiKeyInfo k;
    k.id = select.column_int(0);
    k.tenant_id = select.column_int(1);
    k.tenant = select.column_text(2);
    k.label = select.column_text(3);
    k.created_at = select.column_int(4);
    if (!select.column_is_null(5)) k.revoked_at = select.column_int(5);
    keys.push_back(std::move(k));
  }
  return keys;
}

Result<std::int64_t> SessionStore::count_api_keys() {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  return db_->query_int("SELECT count(*) FROM api_keys");
}

Result<std::int64_t> SessionStore::adopt_untenanted_sessions(std::string_view tenant_name) {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  HIPPO_ASSIGN_OR_RETURN(std::int64_t orphans, db_->query_int("SELECT count(*) FROM sessions WHERE tenant_id IS NULL"));
  if (orphans == 0) return std::int64_t{0};  // no write, and no tenant made for nothing
  const std::string context = fmt::format("sessions without a tenant, to tenant {}", tenant_name);
  HIPPO_ASSIGN_OR_RETURN(Transaction tx, Transaction::begin(*db_));
  HIPPO_ASSIGN_OR_RETURN(TenantInfo tenant, ensure_tenant_locked(*db_, tenant_name));
  HIPPO_ASSIGN_OR_RETURN(Statement update, Statement::prepare(*db_, "UPDATE sessions SET tenant_id = ? WHERE tenant_id "
                                                                    "IS NULL"));
  HIPPO_RETURN_IF_ERROR(note_failure(update.bind(1, tenant.id).run().with_context(context)));
  const std::int64_t adopted = db_->changes();
  HIPPO_RETURN_IF_ERROR(note_failure(tx.commit().with_context(context)));
  return adopted;
}

}  // namespace hippo::storage
