// Schema and migrations. Each migration is appended, never edited: a released database was made by
// exactly these statements.
#include "storage/schema.h"

#include "base/version.h"

#include <array>
#include <string>

namespace hippo::storage {
namespace {

// Migration i (1-based) brings a database from version i-1 to version i.
constexpr std::array<const char*, kFormatVersion> kMigrations = {
    R"sql(
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
) STRICT;
CREATE TABLE tenants (
  id         INTEGER PRIMARY KEY,
  name       TEXT NOT NULL UNIQUE,
  created_at INTEGER NOT NULL                 -- Unix seconds
) STRICT;
CREATE TABLE api_keys (
  id         INTEGER PRIMARY KEY,
  tenant_id  INTEGER NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  key_hash   BLOB NOT NULL UNIQUE,            -- SHA-256 of the key; the key itself is never stored
  label      TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  revoked_at INTEGER
) STRICT;
CREATE TABLE sessions (
  id                TEXT PRIMARY KEY,
  tenant_id         INTEGER REFERENCES tenants(id),
  model_fingerprint TEXT NOT NULL,
  status            TEXT NOT NULL,
  settings          TEXT NOT NULL,            -- JSON, opaque to storage
  forked_from       TEXT,
  created_at        INTEGER NOT NULL,
  updated_at        INTEGER NOT NULL
) STRICT;
CREATE TABLE messages (
  session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  seq         INTEGER NOT NULL,
  role        TEXT NOT NULL,
  content     BLOB NOT NULL,                  -- bytes as the model saw them
  tool_calls  BLOB NOT NULL,                  -- DSML exactly as sampled (empty when none)
  first_token INTEGER NOT NULL,
  n_tokens    INTEGER NOT NULL,
  created_at  INTEGER NOT NULL,
  PRIMARY KEY (session_id, seq)
) STRICT;
CREATE TABLE snapshots (
  id                 INTEGER PRIMARY KEY,
  session_id         TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  parent_id          INTEGER,                 -- the snapshot this one extends (no FK: it may be pruned)
  n_tokens           INTEGER NOT NULL,
  fingerprint        TEXT NOT NULL,
  frontier           BLOB NOT NULL,           -- encoded like a chunk (codec, filter none)
  frontier_codec     INTEGER NOT NULL,
  frontier_raw_bytes INTEGER NOT NULL,
  frontier_checksum  INTEGER NOT NULL,        -- xxh3-64 of the raw frontier, as a signed 64-bit value
  created_at         INTEGER NOT NULL
) STRICT;
CREATE INDEX snapshots_by_session ON snapshots(session_id, id);
CREATE TABLE snapshot_streams (
  snapshot_id  INTEGER NOT NULL REFERENCES snapshots(id) ON DELETE CASCADE,
  stream_index INTEGER NOT NULL,
  name         TEXT NOT NULL,
  entry_bytes  INTEGER NOT NULL,
  filter       INTEGER NOT NULL,
  n_entries    INTEGER NOT NULL,
  PRIMARY KEY (snapshot_id, stream_index),
  UNIQUE (snapshot_id, name)
) STRICT;
CREATE TABLE kv_chunks (
  id             INTEGER PRIMARY KEY,
  origin_session TEXT NOT NULL,               -- the session that wrote it (forks share it)
  stream         TEXT NOT NULL,
  first_entry    INTEGER NOT NULL,
  n_entries      INTEGER NOT NULL,
  entry_bytes    INTEGER NOT NULL,
  filter         INTEGER NOT NULL,
  codec          INTEGER NOT NULL,
  raw_bytes      INTEGER NOT NULL,
  stored_bytes   INTEGER NOT NULL,
  checksum       INTEGER NOT NULL,            -- xxh3-64 of the raw bytes, as a signed 64-bit value
  blob           BLOB NOT NULL
) STRICT;
CREATE TABLE snapshot_chunks (
  snapshot_id  INTEGER NOT NULL REFERENCES snapshots(id) ON DELETE CASCADE,
  stream_index INTEGER NOT NULL,
  seq          INTEGER NOT NULL,              -- chunk order within the stream
  chunk_id     INTEGER NOT NULL REFERENCES kv_chunks(id),
  PRIMARY KEY (snapshot_id, stream_index, seq)
) WITHOUT ROWID, STRICT;
CREATE INDEX snapshot_chunks_by_chunk ON snapshot_chunks(chunk_id);
)sql",
    // 2: each logged message keeps the exact token ids the model saw (int32 little-endian), so a
    // session can be rebuilt by re-prefill to exactly the state it had.
    R"sql(
ALTER TABLE messages ADD COLUMN token_ids BLOB NOT NULL DEFAULT x'';
)sql",
    // 3: per-tenant limits (NULL: the server's default; 0: no limit), and an index for counting a
    // tenant's open sessions and listing them.
    R"sql(
ALTER TABLE tenants ADD COLUMN max_sessions INTEGER;
ALTER TABLE tenants ADD COLUMN tokens_per_minute INTEGER;
CREATE INDEX sessions_by_tenant ON sessions(tenant_id, status);
)sql",
    // 4: a tenant's cap on the prompt tokens of one request (NULL: the server's default; 0: no
    // limit), and what made a session: 'agent' (kept until deleted) or 'completion' (the temporary
    // session of a stateless HTTP request, kept under the retention rule of `hippo session gc`).
    R"sql(
ALTER TABLE tenants ADD COLUMN max_prompt_tokens INTEGER;
ALTER TABLE sessions ADD COLUMN kind TEXT NOT NULL DEFAULT 'agent';
)sql",
    // 5: the key of the conversation an idle completion session holds (agents/conversation_key.h),
    // so that a stateless request continues the session holding the longest prefix of its own; and
    // the stored objects of OpenAI's Responses API (retrieve, delete, previous_response_id).
    R"sql(
ALTER TABLE sessions ADD COLUMN prefix_key TEXT;
CREATE INDEX sessions_by_prefix_key ON sessions(prefix_key) WHERE prefix_key IS NOT NULL;
CREATE TABLE responses (
  id           TEXT PRIMARY KEY,
  tenant_id    INTEGER REFERENCES tenants(id),
  session_id   TEXT NOT NULL,                 -- the session that answered (it may be gone since)
  created_at   INTEGER NOT NULL,
  conversation TEXT NOT NULL,                 -- JSON, opaque to storage: what a continuation starts from
  body         TEXT NOT NULL                  -- JSON, opaque to storage: the response object
) STRICT;
CREATE INDEX responses_by_age ON responses(created_at);
)sql",
    // 6: a snapshot is written in several short transactions (so that the one writer lock is never
    // held for long) and made visible by its last one; until then it is marked incomplete, and
    // readers never see it. Existing snapshots are complete.
    R"sql(
ALTER TABLE snapshots ADD COLUMN complete INTEGER NOT NULL DEFAULT 1;
)sql",
};

}  // namespace

Result<std::int64_t> read_format_version(Db& db, std::string_view schema_name) {
  const std::string schema(schema_name);
  HIPPO_ASSIGN_OR_RETURN(std::int64_t has_meta,
                         db.query_int("SELECT count(*) FROM " + schema +
                                      ".sqlite_schema WHERE type = 'table' AND name = 'meta'"));
  if (has_meta == 0) {
    HIPPO_ASSIGN_OR_RETURN(std::int64_t n_tables, db.query_int("SELECT count(*) FROM " + schema + ".sqlite_schema"));
    if (n_tables != 0)
      return make_error(ErrorCode::kCorrupt, "database {}: has tables but no hippo meta table: not a hippo database",
                        db.path());
    return std::int64_t{0};
  }
  HIPPO_ASSIGN_OR_RETURN(Statement stmt,
                         Statement::prepare(db, "SELECT value FROM " + schema + ".meta WHERE key = 'format_version'"));
  HIPPO_ASSIGN_OR_RETURN(bool row, stmt.step());
  if (!row) return make_error(ErrorCode::kCorrupt, "database {}: meta has no format_version", db.path());
  const std::string text = stmt.column_text(0);
  try {
    std::size_t used = 0;
    const long long version = std::stoll(text, &used);
    if (used == text.size() && version > 0) return static_cast<std::int64_t>(version);
  } catch (const std::exception&) {
  }
  return make_error(ErrorCode::kCorrupt, "database {}: format_version '{}' is not a positive number", db.path(), text);
}

Status open_schema(Db& db, bool writable) {
  HIPPO_ASSIGN_OR_RETURN(std::int64_t version, read_format_version(db));
  if (version > kFormatVersion)
    return make_error(ErrorCode::kFailedPrecondition,
                      "database {}: unknown format version {} (this hippo {} reads versions up to {}); upgrade hippo",
                      db.path(), version, kVersion, kFormatVersion);
  if (version == kFormatVersion) return {};
  if (!writable)
    return make_error(ErrorCode::kFailedPrecondition,
                      "database {}: format version {} needs migrating to {}; open it once writable", db.path(), version,
                      kFormatVersion);

  HIPPO_ASSIGN_OR_RETURN(Transaction tx, Transaction::begin(db));
  // Re-read under the write lock: another process may have migrated meanwhile.
  HIPPO_ASSIGN_OR_RETURN(version, read_format_version(db));
  for (std::int64_t v = version; v < kFormatVersion; ++v) {
    HIPPO_RETURN_IF_ERROR(db.exec(kMigrations[static_cast<std::size_t>(v)]).with_context(
        fmt::format("migration to format version {}", v + 1)));
  }
  HIPPO_ASSIGN_OR_RETURN(Statement put, Statement::prepare(db, "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)"));
  const std::string version_text = std::to_string(kFormatVersion);
  HIPPO_RETURN_IF_ERROR(put.bind(1, std::string_view("format_version")).bind(2, std::string_view(version_text)).run());
  if (version == 0) {
    HIPPO_RETURN_IF_ERROR(put.bind(1, std::string_view("created_by")).bind(2, std::string_view(kVersion)).run());
  }
  return tx.commit();
}

}  // namespace hippo::storage
