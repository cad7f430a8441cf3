// Tenants and API keys. A key is stored only as its SHA-256 hash: a copy of the database does not
// reveal working keys, and lookups compare hashes (the key is high-entropy, so no salt is needed).
#include "storage/store.h"

#include "storage/sqlite.h"
#include "storage/store_internal.h"

#include <openssl/evp.h>

#include <array>

namespace hippo::storage {
namespace {

using KeyHash = std::array<std::byte, 32>;

Result<KeyHash> hash_key(std::string_view key) {
  if (key.size() < 16) return make_error(ErrorCode::kInvalidArgument, "API keys must have at least 16 characters");
  KeyHash hash{};
  unsigned int n = 0;
  if (EVP_Digest(key.data(), key.size(), reinterpret_cast<unsigned char*>(hash.data()), &n, EVP_sha256(), nullptr) != 1 ||
      n != hash.size())
    return make_error(ErrorCode::kInternal, "SHA-256 of an API key failed");
  return hash;
}

}  // namespace

Result<std::int64_t> SessionStore::create_tenant(std::string_view name) {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  if (name.empty()) return make_error(ErrorCode::kInvalidArgument, "a tenant needs a name");
  HIPPO_ASSIGN_OR_RETURN(Statement insert, Statement::prepare(*db_, "INSERT INTO tenants(name, created_at) VALUES (?, ?)"));
  Status status = insert.bind(1, name).bind(2, unix_now()).run();
  if (status.code() == ErrorCode::kAlreadyExists)
    return make_error(ErrorCode::kAlreadyExists, "tenant {} already exists", name);
  HIPPO_RETURN_IF_ERROR(note_failure(status.with_context("tenant " + std::string(name))));
  return db_->last_insert_rowid();
}

Status SessionStore::add_api_key(std::int64_t tenant_id, std::string_view key, std::string_view label) {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  HIPPO_ASSIGN_OR_RETURN(KeyHash hash, hash_key(key));
  HIPPO_ASSIGN_OR_RETURN(Statement insert, Statement::prepare(*db_, "INSERT INTO api_keys(tenant_id, key_hash, label, "
                                                                    "created_at) VALUES (?, ?, ?, ?)"));
  Status status = insert.bind(1, tenant_id).bind_blob(2, hash).bind(3, label).bind(4, unix_now()).run();
  if (status.code() == ErrorCode::kAlreadyExists)
    return make_error(ErrorCode::kAlreadyExists, "API key '{}': the key exists already, or tenant {} does not", label,
                      tenant_id);
  return note_failure(status.with_context("API key " + std::string(label)));
}

Result<std::optional<std::int64_t>> SessionStore::tenant_for_api_key(std::string_view key) {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  auto hash = hash_key(key);
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
  HIPPO_ASSIGN_OR_RETURN(KeyHash hash, hash_key(key));
  HIPPO_ASSIGN_OR_RETURN(Statement update, Statement::prepare(*db_, "UPDATE api_keys SET revoked_at = ? WHERE key_hash "
                                                                    "= ? AND revoked_at IS NULL"));
  HIPPO_RETURN_IF_ERROR(note_failure(update.bind(1, unix_now()).bind_blob(2, hash).run()));
  if (db_->changes() == 0) return make_error(ErrorCode::kNotFound, "API key not found or already revoked");
  return {};
}

}  // namespace hippo::storage
