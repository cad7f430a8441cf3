// SessionStore: opening the database, sessions, the conversation log, forks, removal and gc.
// Snapshot writing, reading and export/import live in their own files (snapshot_write.cpp,
// snapshot_read.cpp, transfer.cpp).
#include "storage/store.h"

#include "base/check.h"
#include "storage/schema.h"
#include "storage/sqlite.h"
#include "storage/store_internal.h"
#include "storage/worker_pool.h"

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <random>
#include <unordered_map>

namespace hippo::storage {

std::int64_t SnapshotInfo::raw_bytes() const {
  std::int64_t total = frontier_raw_bytes;
  for (const auto& s : streams) total += s.raw_bytes;
  return total;
}

std::int64_t SnapshotInfo::stored_bytes() const {
  std::int64_t total = frontier_stored_bytes;
  for (const auto& s : streams) total += s.stored_bytes;
  return total;
}

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

Status configure_connection(Db& db, const StoreOptions& options, bool fresh) {
  if (fresh && !options.read_only) {
    // Page size can only change before the first write, and WAL fixes it: set both now.
    HIPPO_RETURN_IF_ERROR(db.exec(fmt::format("PRAGMA page_size = {}", kPageBytes)));
  }
  if (!options.read_only) {
    HIPPO_ASSIGN_OR_RETURN(Statement wal, Statement::prepare(db, "PRAGMA journal_mode = WAL"));
    HIPPO_ASSIGN_OR_RETURN(bool row, wal.step());
    if (!row || wal.column_text(0) != "wal")
      return make_error(ErrorCode::kFailedPrecondition, "database {}: cannot switch to WAL mode", db.path());
  }
  HIPPO_RETURN_IF_ERROR(db.exec(fmt::format(
      "PRAGMA synchronous = {}; PRAGMA foreign_keys = ON; PRAGMA cache_size = -{}; PRAGMA journal_size_limit = {}",
      options.sync_full ? "FULL" : "NORMAL", kCacheKiB, kWalKeepBytes)));
  if (!options.auto_checkpoint) HIPPO_RETURN_IF_ERROR(db.exec("PRAGMA wal_autocheckpoint = 0"));
  if (options.max_bytes > 0) {
    HIPPO_ASSIGN_OR_RETURN(std::int64_t page_bytes, db.query_int("PRAGMA page_size"));
    const std::int64_t pages = std::max<std::int64_t>(1, options.max_bytes / page_bytes);
    HIPPO_RETURN_IF_ERROR(db.exec(fmt::format("PRAGMA max_page_count = {}", pages)));
  }
  return {};
}

Result<std::unique_ptr<SessionStore>> SessionStore::open(const std::string& path, const StoreOptions& options) {
  if (options.zstd_level < 1 || options.zstd_level > 19)
    return make_error(ErrorCode::kInvalidArgument, "zstd level {} is outside 1..19", options.zstd_level);
  if (options.keep_snapshots < 1)
    return make_error(ErrorCode::kInvalidArgument, "keep_snapshots must be at least 1, not {}", options.keep_snapshots);
  const Db::Mode mode = options.read_only ? Db::Mode::kReadOnly
                        : options.create  ? Db::Mode::kReadWriteCreate
                                          : Db::Mode::kReadWrite;
  HIPPO_ASSIGN_OR_RETURN(Db db, Db::open(path, mode, options.busy_timeout_ms));
  HIPPO_ASSIGN_OR_RETURN(std::int64_t n_objects, db.query_int("SELECT count(*) FROM sqlite_schema"));
  HIPPO_RETURN_IF_ERROR(configure_connection(db, options, n_objects == 0));
  HIPPO_RETURN_IF_ERROR(open_schema(db, !options.read_only));
  return std::unique_ptr<SessionStore>(new SessionStore(std::make_unique<Db>(std::move(db)), options));
}

SessionStore::SessionStore(std::unique_ptr<Db> db, const StoreOptions& options)
    : db_(std::move(db)), options_(options) {}

SessionStore::~SessionStore() = default;

const std::string& SessionStore::path() const { return db_->path(); }

Status SessionStore::usable() const {
  if (failed_.ok()) return {};
  return make_error(ErrorCode::kFailedPrecondition,
                    "database {}: closed after an uncertain write ({}); reopen it to continue", db_->path(),
                    failed_.message());
}

Status SessionStore::note_failure(Status status) {
  if (status.code() == ErrorCode::kIoError && failed_.ok()) failed_ = status;
  return status;
}

WorkerPool& SessionStore::pool() {
  if (!pool_) {
    const std::size_t n = std::max<std::size_t>(1, options_.codec_threads);
    for (std::size_t i = 0; i < n; ++i) {
      encoders_.push_back(std::make_unique<ChunkEncoder>());
      decoders_.push_back(std::make_unique<ChunkDecoder>());
    }
    pool_ = std::make_unique<WorkerPool>(n, options_.codec_nice);
  }
  return *pool_;
}

namespace {

std::string make_session_id() {
  std::random_device device;
  const std::uint64_t value = (std::uint64_t{device()} << 32) | device();
  return fmt::format("s_{:016x}", value);
}

Status check_session_id(std::string_view id) {
  if (id.empty() || id.size() > 128)
    return make_error(ErrorCode::kInvalidArgument, "session id '{}' must have 1 to 128 characters", id);
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '-' || c == '.';
    if (!ok) return make_error(ErrorCode::kInvalidArgument, "session id '{}': only letters, digits, '_', '-', '.'", id);
  }
  return {};
}

}  // namespace

SessionInfo read_session_row(const Statement& stmt) {
  SessionInfo info;
  info.id = stmt.column_text(0);
  if (!stmt.column_is_null(1)) info.tenant_id = stmt.column_int(1);
  info.model_fingerprint = stmt.column_text(2);
  info.status = stmt.column_text(3);
  info.settings = stmt.column_text(4);
  info.forked_from = stmt.column_text(5);
  info.created_at = stmt.column_int(6);
  info.updated_at = stmt.column_int(7);
  info.kind = stmt.column_text(8);
  return info;
}

Result<SessionInfo> SessionStore::create_session(const NewSession& session) {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  const std::string id = session.id.empty() ? make_session_id() : session.id;
  HIPPO_RETURN_IF_ERROR(check_session_id(id));
  if (session.model_fingerprint.empty())
    return make_error(ErrorCode::kInvalidArgument, "session {}: a model fingerprint is required", id);
  HIPPO_ASSIGN_OR_RETURN(
      Statement insert,
      Statement::prepare(*db_, "INSERT INTO sessions(id, tenant_id, model_fingerprint, status, settings, created_at, "
                               "updated_at, kind) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"));
  const std::int64_t now = unix_now();
  insert.bind(1, std::string_view(id));
  if (session.tenant_id) insert.bind(2, *session.tenant_id); else insert.bind_null(2);
  insert.bind(3, std::string_view(session.model_fingerprint))
      .bind(4, std::string_view(session.status))
      .bind(5, std::string_view(session.settings))
      .bind(6, now)
      .bind(7, now)
      .bind(8, std::string_view(session.kind));
  Status status = insert.run();
  if (status.code() == ErrorCode::kAlreadyExists)
    return make_error(ErrorCode::kAlreadyExists, "session {} already exists in {}", id, db_->path());
  HIPPO_RETURN_IF_ERROR(note_failure(status.with_context("session " + id)));
  return get_session_locked(id);
}

Result<SessionInfo> SessionStore::get_session_locked(std::string_view id) {
  HIPPO_ASSIGN_OR_RETURN(Statement select,
                         Statement::prepare(*db_, fmt::format("SELECT {} FROM sessions WHERE id = ?", kSessionColumns)));
  select.bind(1, id);
  HIPPO_ASSIGN_OR_RETURN(bool row, select.step());
  if (!row) return make_error(ErrorCode::kNotFound, "session {}: no such session in {}", id, db_->path());
  return read_session_row(select);
}

Result<SessionInfo> SessionStore::get_session(std::string_view id) {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  return get_session_locked(id);
}

Result<std::vector<SessionInfo>> SessionStore::list_sessions() {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  HIPPO_ASSIGN_OR_RETURN(Statement select,
                         Statement::prepare(*db_, fmt::format("SELECT {} FROM sessions ORDER BY created_at, id",
                                                              kSessionColumns)));
  std::vector<SessionInfo> sessions;
  for (;;) {
    HIPPO_ASSIGN_OR_RETURN(bool row, select.step());
    if (!row) break;
    sessions.push_back(read_session_row(select));
  }
  return sessions;
}

Result<std::vector<SessionInfo>> SessionStore::list_tenant_sessions(std::int64_t tenant_id) {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  HIPPO_ASSIGN_OR_RETURN(Statement select,
                         Statement::prepare(*db_, fmt::format("SELECT {} FROM sessions WHERE tenant_id = ? ORDER BY "
                                                              "created_at, id",
                                                              kSessionColumns)));
  select.bind(1, tenant_id);
  std::vector<SessionInfo> sessions;
  for (;;) {
    HIPPO_ASSIGN_OR_RETURN(bool row, select.step());
    if (!row) break;
    sessions.push_back(read_session_row(select));
  }
  return sessions;
}

Result<std::int64_t> SessionStore::count_open_sessions(std::int64_t tenant_id) {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  HIPPO_ASSIGN_OR_RETURN(Statement count, Statement::prepare(*db_, "SELECT count(*) FROM sessions WHERE tenant_id = ? "
                                                                   "AND status != 'closed' AND prefix_key IS NULL"));
  count.bind(1, tenant_id);
  HIPPO_ASSIGN_OR_RETURN(bool row, count.step());
  HIPPO_CHECK(row, "aggregate query yields a row");
  return count.column_int(0);
}

Status SessionStore::set_session_status(std::string_view id, std::string_view status) {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  HIPPO_ASSIGN_OR_RETURN(Statement update,
                         Statement::prepare(*db_, "UPDATE sessions SET status = ?, updated_at = ? WHERE id = ?"));
  HIPPO_RETURN_IF_ERROR(note_failure(update.bind(1, status).bind(2, unix_now()).bind(3, id).run()));
  if (db_->changes() == 0) return make_error(ErrorCode::kNotFound, "session {}: no such session in {}", id, db_->path());
  return {};
}

Status SessionStore::remove_session(std::string_view id) {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  HIPPO_ASSIGN_OR_RETURN(Transaction tx, Transaction::begin(*db_));
  HIPPO_ASSIGN_OR_RETURN(Statement remove, Statement::prepare(*db_, "DELETE FROM sessions WHERE id = ?"));
  // Snapshots, their stream rows and chunk maps, and messages go by ON DELETE CASCADE; chunks that
  // no snapshot references any more wait for gc() (keeps (2)).
  HIPPO_RETURN_IF_ERROR(note_failure(remove.bind(1, id).run().with_context("session " + std::string(id))));
  if (db_->changes() == 0) return make_error(ErrorCode::kNotFound, "session {}: no such session in {}", id, db_->path());
  return note_failure(tx.commit().with_context("session " + std::string(id)));
}

Result<RetentionStats> SessionStore::apply_retention(std::string_view kind, const RetentionRule& rule,
                                                    std::int64_t now) {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  if (rule.max_age_seconds <= 0 && rule.max_bytes <= 0) return RetentionStats{};
  HIPPO_ASSIGN_OR_RETURN(Transaction tx, Transaction::begin(*db_));
  // Newest first, with what each keeps: its log and the KV chunks it wrote.
  HIPPO_ASSIGN_OR_RETURN(
      Statement select,
      Statement::prepare(*db_, "SELECT s.id, s.updated_at, "
                               "(SELECT coalesce(sum(length(content) + length(tool_calls) + length(token_ids)), 0) "
                               "FROM messages WHERE session_id = s.id) + "
                               "(SELECT coalesce(sum(stored_bytes), 0) FROM kv_chunks WHERE origin_session = s.id) "
                               "FROM sessions s WHERE s.kind = ? AND s.status = 'closed' "
                               "ORDER BY s.updated_at DESC, s.rowid DESC"));
  select.bind(1, kind);
  std::vector<std::pair<std::string, std::int64_t>> expired;  // id, bytes
  RetentionStats stats;
  std::int64_t kept_bytes = 0;
  for (;;) {
    HIPPO_ASSIGN_OR_RETURN(bool row, select.step());
    if (!row) break;
    const std::int64_t updated_at = select.column_int(1);
    const std::int64_t bytes = select.column_int(2);
    const bool too_old = rule.max_age_seconds > 0 && updated_at < now - rule.max_age_seconds;
    const bool over = rule.max_bytes > 0 && kept_bytes + bytes > rule.max_bytes;
    if (too_old || over) {
      expired.emplace_back(select.column_text(0), bytes);
    } else {
      kept_bytes += bytes;
      ++stats.sessions_kept;
    }
  }
  HIPPO_ASSIGN_OR_RETURN(Statement remove, Statement::prepare(*db_, "DELETE FROM sessions WHERE id = ?"));
  for (const auto& [id, bytes] : expired) {
    HIPPO_RETURN_IF_ERROR(note_failure(remove.bind(1, std::string_view(id)).run().with_context("session " + id)));
    remove.reset();
    ++stats.sessions_removed;
    stats.bytes_removed += bytes;
  }
  stats.bytes_kept = kept_bytes;
  HIPPO_RETURN_IF_ERROR(note_failure(tx.commit().with_context("retention of " + std::string(kind) + " sessions")));
  return stats;
}

Result<std::int64_t> SessionStore::append_message(std::string_view session_id, const MessageRecord& message) {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  HIPPO_ASSIGN_OR_RETURN(Transaction tx, Transaction::begin(*db_));
  HIPPO_RETURN_IF_ERROR(get_session_locked(session_id).status());
  HIPPO_ASSIGN_OR_RETURN(Statement next, Statement::prepare(*db_, "SELECT coalesce(max(seq), 0) + 1 FROM messages "
                                                                  "WHERE session_id = ?"));
  next.bind(1, session_id);
  HIPPO_ASSIGN_OR_RETURN(bool row, next.step());
  HIPPO_CHECK(row, "aggregate query yields a row");
  const std::int64_t seq = next.column_int(0);
  HIPPO_ASSIGN_OR_RETURN(Statement insert,
                         Statement::prepare(*db_, "INSERT INTO messages(session_id, seq, role, content, tool_calls, "
                                                  "first_token, n_tokens, created_at, token_ids) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  insert.bind(1, session_id)
      .bind(2, seq)
      .bind(3, std::string_view(message.role))
      .bind_blob(4, std::as_bytes(std::span(message.content)))
      .bind_blob(5, std::as_bytes(std::span(message.tool_calls)))
      .bind(6, message.first_token)
      .bind(7, message.n_tokens)
      .bind(8, message.created_at != 0 ? message.created_at : unix_now())
      .bind_blob(9, std::as_bytes(std::span(message.token_ids)));
  const std::string context = "session " + std::string(session_id);
  HIPPO_RETURN_IF_ERROR(note_failure(insert.run().with_context(context)));
  HIPPO_RETURN_IF_ERROR(note_failure(tx.commit().with_context(context)));
  return seq;
}

Result<std::vector<MessageRecord>> SessionStore::list_messages(std::string_view session_id) {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  HIPPO_RETURN_IF_ERROR(get_session_locked(session_id).status());
  HIPPO_ASSIGN_OR_RETURN(Statement select,
                         Statement::prepare(*db_, "SELECT seq, role, content, tool_calls, first_token, n_tokens, "
                                                  "created_at, token_ids FROM messages WHERE session_id = ? ORDER BY seq"));
  select.bind(1, session_id);
  std::vector<MessageRecord> messages;
  for (;;) {
    HIPPO_ASSIGN_OR_RETURN(bool row, select.step());
    if (!row) break;
    MessageRecord m;
    m.seq = select.column_int(0);
    m.role = select.column_text(1);
    const auto content = select.column_blob(2);
    m.content.assign(reinterpret_cast<const char*>(content.data()), content.size());
    const auto tool_calls = select.column_blob(3);
    m.tool_calls.assign(reinterpret_cast<const char*>(tool_calls.data()), tool_calls.size());
    m.first_token = select.column_int(4);
    m.n_tokens = select.column_int(5);
    m.created_at = select.column_int(6);
    const auto ids = select.column_blob(7);
    m.token_ids.resize(ids.size() / sizeof(std::int32_t));
    if (!m.token_ids.empty()) {  // memcpy's pointers must be valid even for zero bytes
      std::memcpy(m.token_ids.data(), ids.data(), m.token_ids.size() * sizeof(std::int32_t));
    }
    messages.push_back(std::move(m));
  }
  return messages;
}

namespace {

// "tenant_id IS ?": a NULL tenant matches sessions without one.
void bind_tenant(Statement& stmt, int index, std::optional<std::int64_t> tenant_id) {
  if (tenant_id) stmt.bind(index, *tenant_id);
  else stmt.bind_null(index);
}

Result<std::vector<std::string>> read_ids(Statement& select) {
  std::vector<std::string> ids;
  for (;;) {
    HIPPO_ASSIGN_OR_RETURN(bool row, select.step());
    if (!row) return ids;
    ids.push_back(select.column_text(0));
  }
}

}  // namespace

Status SessionStore::set_prefix_key(std::string_view id, std::optional<std::string_view> key) {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  HIPPO_ASSIGN_OR_RETURN(Statement update,
                         Statement::prepare(*db_, "UPDATE sessions SET prefix_key = ?, updated_at = ? WHERE id = ?"));
  if (key) update.bind(1, *key);
  else update.bind_null(1);
  update.bind(2, unix_now()).bind(3, id);
  HIPPO_RETURN_IF_ERROR(note_failure(update.run().with_context(fmt::format("prefix key of session {}", id))));
  if (db_->changes() == 0) return make_error(ErrorCode::kNotFound, "session {}: no such session in {}", id, db_->path());
  return {};
}

Result<std::optional<PrefixMatch>> SessionStore::find_prefix_session(std::optional<std::int64_t> tenant_id,
                                                                     std::span<const std::string> keys) {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  // The tenant's keyed sessions are few (bounded by their owner, agents' max_prefix_sessions): one
  // query reads them all, most recently used first, and the longest key among them wins.
  std::unordered_map<std::string_view, std::size_t> index;
  for (std::size_t i = 0; i < keys.size(); ++i) index.emplace(keys[i], i);
  HIPPO_ASSIGN_OR_RETURN(Statement select,
                         Statement::prepare(*db_, "SELECT id, prefix_key FROM sessions WHERE tenant_id IS ? AND status != "
                                                  "'closed' AND prefix_key IS NOT NULL ORDER BY updated_at DESC, rowid DESC"));
  bind_tenant(select, 1, tenant_id);
  std::optional<PrefixMatch> best;
  for (;;) {
    HIPPO_ASSIGN_OR_RETURN(bool row, select.step());
    if (!row) return best;
    auto it = index.find(select.column_text(1));
    if (it != index.end() && (!best || it->second > best->key_index)) best = PrefixMatch{select.column_text(0), it->second};
  }
}

Result<std::vector<std::string>> SessionStore::excess_prefix_sessions(std::optional<std::int64_t> tenant_id,
                                                                      std::int64_t keep) {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  HIPPO_ASSIGN_OR_RETURN(Statement select,
                         Statement::prepare(*db_, "SELECT id FROM sessions WHERE prefix_key IS NOT NULL AND tenant_id IS ? "
                                                  "AND status != 'closed' ORDER BY updated_at DESC, rowid DESC LIMIT -1 "
                                                  "OFFSET ?"));
  bind_tenant(select, 1, tenant_id);
  select.bind(2, keep);
  return read_ids(select);
}

Result<std::vector<std::string>> SessionStore::prefix_sessions_unused_since(std::int64_t before) {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  HIPPO_ASSIGN_OR_RETURN(Statement select,
                         Statement::prepare(*db_, "SELECT id FROM sessions WHERE prefix_key IS NOT NULL AND status != "
                                                  "'closed' AND updated_at < ?"));
  select.bind(1, before);
  return read_ids(select);
}

Status SessionStore::put_response(const StoredResponse& response) {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  HIPPO_ASSIGN_OR_RETURN(Statement insert,
                         Statement::prepare(*db_, "INSERT INTO responses(id, tenant_id, session_id, created_at, "
                                                  "conversation, body) VALUES (?, ?, ?, ?, ?, ?)"));
  insert.bind(1, std::string_view(response.id));
  bind_tenant(insert, 2, response.tenant_id);
  insert.bind(3, std::string_view(response.session_id))
      .bind(4, unix_now())
      .bind(5, std::string_view(response.conversation))
      .bind(6, std::string_view(response.body));
  Status status = insert.run();
  if (status.code() == ErrorCode::kAlreadyExists)
    return make_error(ErrorCode::kAlreadyExists, "response {} already exists in {}", response.id, db_->path());
  return note_failure(status.with_context("response " + response.id));
}

Result<std::optional<StoredResponse>> SessionStore::get_response(std::string_view id,
                                                                 std::optional<std::int64_t> tenant_id) {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  HIPPO_ASSIGN_OR_RETURN(Statement select,
                         Statement::prepare(*db_, "SELECT id, tenant_id, session_id, created_at, conversation, body "
                                                  "FROM responses WHERE id = ? AND tenant_id IS ?"));
  select.bind(1, id);
  bind_tenant(select, 2, tenant_id);
  HIPPO_ASSIGN_OR_RETURN(bool row, select.step());
  if (!row) return std::optional<StoredResponse>();
  StoredResponse out;
  out.id = select.column_text(0);
  if (!select.column_is_null(1)) out.tenant_id = select.column_int(1);
  out.session_id = select.column_text(2);
  out.created_at = select.column_int(3);
  out.conversation = select.column_text(4);
  out.body = select.column_text(5);
  return std::optional<StoredResponse>(std::move(out));
}

Result<bool> SessionStore::delete_response(std::string_view id, std::optional<std::int64_t> tenant_id) {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  HIPPO_ASSIGN_OR_RETURN(Statement remove,
                         Statement::prepare(*db_, "DELETE FROM responses WHERE id = ? AND tenant_id IS ?"));
  remove.bind(1, id);
  bind_tenant(remove, 2, tenant_id);
  HIPPO_RETURN_IF_ERROR(note_failure(remove.run().with_context(fmt::format("deleting response {}", id))));
  return db_->changes() > 0;
}

Result<std::int64_t> SessionStore::remove_responses_before(std::int64_t before) {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  HIPPO_ASSIGN_OR_RETURN(Statement remove, Statement::prepare(*db_, "DELETE FROM responses WHERE created_at < ?"));
  remove.bind(1, before);
  HIPPO_RETURN_IF_ERROR(note_failure(remove.run().with_context("removing old responses")));
  return static_cast<std::int64_t>(db_->changes());
}

Result<SessionInfo> SessionStore::fork_session(std::string_view source_id, std::string_view new_id) {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  const std::string id = new_id.empty() ? make_session_id() : std::string(new_id);
  HIPPO_RETURN_IF_ERROR(check_session_id(id));
  HIPPO_ASSIGN_OR_RETURN(Transaction tx, Transaction::begin(*db_));
  HIPPO_RETURN_IF_ERROR(get_session_locked(source_id).status());
  const std::string context = fmt::format("fork of session {} as {}", source_id, id);
  const std::int64_t now = unix_now();

  HIPPO_ASSIGN_OR_RETURN(
      Statement session,
      Statement::prepare(*db_, "INSERT INTO sessions(id, tenant_id, model_fingerprint, status, settings, forked_from, "
                               "created_at, updated_at, kind) SELECT ?, tenant_id, model_fingerprint, status, settings, "
                               "id, ?, ?, kind FROM sessions WHERE id = ?"));
  Status inserted = session.bind(1, std::string_view(id)).bind(2, now).bind(3, now).bind(4, source_id).run();
  if (inserted.code() == ErrorCode::kAlreadyExists)
    return make_error(ErrorCode::kAlreadyExists, "session {} already exists in {}", id, db_->path());
  HIPPO_RETURN_IF_ERROR(note_failure(inserted.with_context(context)));

  HIPPO_ASSIGN_OR_RETURN(
      Statement messages,
      Statement::prepare(*db_, "INSERT INTO messages(session_id, seq, role, content, tool_calls, first_token, "
                               "n_tokens, created_at, token_ids) SELECT ?, seq, role, content, tool_calls, "
                               "first_token, n_tokens, created_at, token_ids FROM messages WHERE session_id = ?"));
  HIPPO_RETURN_IF_ERROR(note_failure(messages.bind(1, std::string_view(id)).bind(2, source_id).run().with_context(context)));

  HIPPO_ASSIGN_OR_RETURN(Statement latest, Statement::prepare(*db_, "SELECT max(id) FROM snapshots WHERE session_id = ? "
                                                                    "AND complete = 1"));
  latest.bind(1, source_id);
  HIPPO_ASSIGN_OR_RETURN(bool row, latest.step());
  if (row && !latest.column_is_null(0)) {
    const std::int64_t source_snapshot = latest.column_int(0);
    HIPPO_ASSIGN_OR_RETURN(
        Statement snapshot,
        Statement::prepare(*db_, "INSERT INTO snapshots(session_id, parent_id, n_tokens, fingerprint, frontier, "
                                 "frontier_codec, frontier_raw_bytes, frontier_checksum, created_at) SELECT ?, id, "
                                 "n_tokens, fingerprint, frontier, frontier_codec, frontier_raw_bytes, "
                                 "frontier_checksum, ? FROM snapshots WHERE id = ?"));
    HIPPO_RETURN_IF_ERROR(
        note_failure(snapshot.bind(1, std::string_view(id)).bind(2, now).bind(3, source_snapshot).run().with_context(context)));
    const std::int64_t fork_snapshot = db_->last_insert_rowid();
    // The fork's chunk map points at the parent's chunks: shared by reference (keeps (2)).
    for (const char* sql :
         {"INSERT INTO snapshot_streams(snapshot_id, stream_index, name, entry_bytes, filter, n_entries) SELECT ?, "
          "stream_index, name, entry_bytes, filter, n_entries FROM snapshot_streams WHERE snapshot_id = ?",
          "INSERT INTO snapshot_chunks(snapshot_id, stream_index, seq, chunk_id) SELECT ?, stream_index, seq, chunk_id "
          "FROM snapshot_chunks WHERE snapshot_id = ?"}) {
      HIPPO_ASSIGN_OR_RETURN(Statement copy, Statement::prepare(*db_, sql));
      HIPPO_RETURN_IF_ERROR(
          note_failure(copy.bind(1, fork_snapshot).bind(2, source_snapshot).run().with_context(context)));
    }
  }
  HIPPO_RETURN_IF_ERROR(note_failure(tx.commit().with_context(context)));
  return get_session_locked(id);
}

Status SessionStore::checkpoint() {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  HIPPO_ASSIGN_OR_RETURN(Statement run, Statement::prepare(*db_, "PRAGMA wal_checkpoint(PASSIVE)"));
  return note_failure(run.step().status().with_context("checkpoint"));
}

Result<GcStats> SessionStore::gc() {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  HIPPO_ASSIGN_OR_RETURN(Transaction tx, Transaction::begin(*db_));
  constexpr std::string_view kUnreferenced =
      "FROM kv_chunks WHERE NOT EXISTS (SELECT 1 FROM snapshot_chunks WHERE chunk_id = kv_chunks.id)";
  GcStats stats;
  HIPPO_ASSIGN_OR_RETURN(Statement count,
                         Statement::prepare(*db_, fmt::format("SELECT count(*), coalesce(sum(stored_bytes), 0) {}",
                                                              kUnreferenced)));
  HIPPO_ASSIGN_OR_RETURN(bool row, count.step());
  HIPPO_CHECK(row, "aggregate query yields a row");
  stats.chunks_removed = count.column_int(0);
  stats.bytes_removed = count.column_int(1);
  HIPPO_RETURN_IF_ERROR(note_failure(db_->exec(fmt::format("DELETE {}", kUnreferenced)).with_context("gc")));
  HIPPO_RETURN_IF_ERROR(note_failure(tx.commit().with_context("gc")));
  return stats;
}

}  // namespace hippo::storage
