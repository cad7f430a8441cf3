// Export and import: a session, its conversation log and its latest snapshot moved between a
// store and a portable file that is itself a hippo database (same schema and format version, one
// session, rollback journal instead of WAL so that it is a single file).
//
// Both directions ATTACH the other database to this connection and copy rows with SQL, chunk by
// chunk, so a 1M-token session streams through bounded memory and reports progress. Chunks are
// copied as stored (no re-encoding); import first verifies every chunk of the file (store.h (4)).
#include "storage/store.h"

#include "storage/schema.h"
#include "storage/sqlite.h"
#include "storage/store_internal.h"

#include <filesystem>
#include <system_error>

namespace hippo::storage {
namespace {

constexpr std::string_view kTransferSchema = "transfer";

// Attaches `file` as schema "transfer" for the life of the object.
class Attached {
 public:
  static Result<Attached> attach(Db& db, const std::string& file) {
    HIPPO_ASSIGN_OR_RETURN(Statement stmt, Statement::prepare(db, "ATTACH DATABASE ? AS transfer"));
    HIPPO_RETURN_IF_ERROR(stmt.bind(1, std::string_view(file)).run());
    return Attached(db);
  }
  Attached(Attached&& other) noexcept : db_(std::exchange(other.db_, nullptr)) {}
  Attached& operator=(Attached&&) = delete;
  ~Attached() {
    if (db_) (void)db_->exec("DETACH DATABASE transfer");
  }

 private:
  explicit Attached(Db& db) : db_(&db) {}
  Db* db_;
};

// Copies one session (log and latest snapshot, chunks included) from schema `from` to schema `to`
// inside the caller's transaction. Tenants are per database, so the copy has none.
Status copy_session(Db& db, std::string_view from, std::string_view to, std::string_view source_id,
                    std::string_view new_id, const ProgressFn& progress) {
  const std::string context = fmt::format("session {}", source_id);
  HIPPO_ASSIGN_OR_RETURN(
      Statement session,
      Statement::prepare(db, fmt::format("INSERT INTO {}.sessions(id, tenant_id, model_fingerprint, status, settings, "
                                         "forked_from, created_at, updated_at) SELECT ?, NULL, model_fingerprint, "
                                         "status, settings, forked_from, created_at, updated_at FROM {}.sessions "
                                         "WHERE id = ?",
                                         to, from)));
  Status inserted = session.bind(1, new_id).bind(2, source_id).run();
  if (inserted.code() == ErrorCode::kAlreadyExists)
    return make_error(ErrorCode::kAlreadyExists, "session {} already exists; import it under another id (--as)", new_id);
  HIPPO_RETURN_IF_ERROR(inserted.with_context(context));
  if (db.changes() == 0) return make_error(ErrorCode::kNotFound, "session {}: no such session", source_id);

  HIPPO_ASSIGN_OR_RETURN(
      Statement messages,
      Statement::prepare(db, fmt::format("INSERT INTO {}.messages(session_id, seq, role, content, tool_calls, "
                                         "first_token, n_tokens, created_at, token_ids) SELECT ?, seq, role, content, "
                                         "tool_calls, first_token, n_tokens, created_at, token_ids FROM {}.messages WHERE session_id = ?",
                                         to, from)));
  HIPPO_RETURN_IF_ERROR(messages.bind(1, new_id).bind(2, source_id).run().with_context(context));

  HIPPO_ASSIGN_OR_RETURN(Statement latest, Statement::prepare(db, fmt::format("SELECT max(id) FROM {}.snapshots WHERE "
                                                                              "session_id = ? AND complete = 1",
                                                                              from)));
  latest.bind(1, source_id);
  HIPPO_ASSIGN_OR_RETURN(bool row, latest.step());
  if (!row || latest.column_is_null(0)) return {};  // a log without KV: nothing more to copy
  const std::int64_t source_snapshot = latest.column_int(0);

  HIPPO_ASSIGN_OR_RETURN(
      Statement snapshot,
      Statement::prepare(db, fmt::format("INSERT INTO {}.snapshots(session_id, parent_id, n_tokens, fingerprint, "
                                         "frontier, frontier_codec, frontier_raw_bytes, frontier_checksum, created_at) "
                                         "SELECT ?, NULL, n_tokens, fingerprint, frontier, frontier_codec, "
                                         "frontier_raw_bytes, frontier_checksum, created_at FROM {}.snapshots "
                                         "WHERE id = ?",
                                         to, from)));
  HIPPO_RETURN_IF_ERROR(snapshot.bind(1, new_id).bind(2, source_snapshot).run().with_context(context));
  const std::int64_t new_snapshot = db.last_insert_rowid();
  HIPPO_ASSIGN_OR_RETURN(
      Statement streams,
      Statement::prepare(db, fmt::format("INSERT INTO {}.snapshot_streams(snapshot_id, stream_index, name, entry_bytes, "
                                         "filter, n_entries) SELECT ?, stream_index, name, entry_bytes, filter, "
                                         "n_entries FROM {}.snapshot_streams WHERE snapshot_id = ?",
                                         to, from)));
  HIPPO_RETURN_IF_ERROR(streams.bind(1, new_snapshot).bind(2, source_snapshot).run().with_context(context));

  HIPPO_ASSIGN_OR_RETURN(
      Statement total, Statement::prepare(db, fmt::format("SELECT coalesce(sum(c.stored_bytes), 0) FROM "
                                                          "{0}.snapshot_chunks m JOIN {0}.kv_chunks c ON "
                                                          "c.id = m.chunk_id WHERE m.snapshot_id = ?",
                                                          from)));
  total.bind(1, source_snapshot);
  HIPPO_ASSIGN_OR_RETURN(row, total.step());
  const std::int64_t total_bytes = total.column_int(0);

  HIPPO_ASSIGN_OR_RETURN(
      Statement chunks,
      Statement::prepare(db, fmt::format("SELECT m.stream_index, m.seq, m.chunk_id, c.stored_bytes FROM "
                                         "{0}.snapshot_chunks m JOIN {0}.kv_chunks c ON c.id = m.chunk_id "
                                         "WHERE m.snapshot_id = ? ORDER BY m.stream_index, m.seq",
                                         from)));
  HIPPO_ASSIGN_OR_RETURN(
      Statement chunk_copy,
      Statement::prepare(db, fmt::format("INSERT INTO {}.kv_chunks(origin_session, stream, first_entry, n_entries, "
                                         "entry_bytes, filter, codec, raw_bytes, stored_bytes, checksum, blob) "
                                         "SELECT ?, stream, first_entry, n_entries, entry_bytes, filter, codec, "
                                         "raw_bytes, stored_bytes, checksum, blob FROM {}.kv_chunks WHERE id = ?",
                                         to, from)));
  HIPPO_ASSIGN_OR_RETURN(Statement chunk_map,
                         Statement::prepare(db, fmt::format("INSERT INTO {}.snapshot_chunks(snapshot_id, stream_index, "
                                                            "seq, chunk_id) VALUES (?, ?, ?, ?)",
                                                            to)));
  chunks.bind(1, source_snapshot);
  std::int64_t done_bytes = 0;
  for (;;) {
    HIPPO_ASSIGN_OR_RETURN(row, chunks.step());
    if (!row) break;
    const std::string where = fmt::format("{}: chunk {} of stream #{}", context, chunks.column_int(1), chunks.column_int(0));
    HIPPO_RETURN_IF_ERROR(chunk_copy.bind(1, new_id).bind(2, chunks.column_int(2)).run().with_context(where));
    HIPPO_RETURN_IF_ERROR(chunk_map.bind(1, new_snapshot)
                              .bind(2, chunks.column_int(0))
                              .bind(3, chunks.column_int(1))
                              .bind(4, db.last_insert_rowid())
                              .run()
                              .with_context(where));
    done_bytes += chunks.column_int(3);
    if (progress) progress(done_bytes, total_bytes);
  }
  return {};
}

// Runs `body` in a transaction that writes only the attached or the main database; BEGIN IMMEDIATE
// would also take main's write lock when exporting, which a running server does not need to give up.
template <typename Body>
Status in_transaction(Db& db, bool immediate, Body body) {
  HIPPO_RETURN_IF_ERROR(db.exec(immediate ? "BEGIN IMMEDIATE" : "BEGIN"));
  Status status = body();
  if (status.ok()) status = db.exec("COMMIT");
  if (!status.ok()) (void)db.exec("ROLLBACK");
  return status;
}

}  // namespace

Status SessionStore::export_session(std::string_view session_id, const std::string& file, const ProgressFn& progress) {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  HIPPO_RETURN_IF_ERROR(get_session_locked(session_id).status());
  std::error_code ec;
  if (std::filesystem::exists(file, ec))
    return make_error(ErrorCode::kAlreadyExists, "export file {} exists; choose another name or remove it", file);
  const std::string context = fmt::format("export of session {} to {}", session_id, file);
  Status status = [&]() -> Status {
    {
      // A fresh database with our schema, as one file (rollback journal, not WAL).
      HIPPO_ASSIGN_OR_RETURN(Db out, Db::open(file, Db::Mode::kReadWriteCreate, options_.busy_timeout_ms));
      HIPPO_RETURN_IF_ERROR(out.exec(fmt::format("PRAGMA page_size = {}; PRAGMA journal_mode = DELETE", kPageBytes)));
      HIPPO_RETURN_IF_ERROR(open_schema(out, true));
    }
    HIPPO_ASSIGN_OR_RETURN(Attached attached, Attached::attach(*db_, file));
    return in_transaction(*db_, false, [&] {
      return copy_session(*db_, "main", kTransferSchema, session_id, session_id, progress);
    });
  }();
  if (!status.ok()) {
    std::filesystem::remove(file, ec);
    return status.with_context(context);
  }
  return {};
}

Result<SessionInfo> SessionStore::import_session(const std::string& file, std::string_view expected_fingerprint,
                                                 std::string_view new_id, const ProgressFn& progress) {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  const std::string context = fmt::format("import of {}", file);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec))
    return make_error(ErrorCode::kNotFound, "{}: no such file", context);

  // Check the file on its own connection first: format version (open refuses unknown ones), one
  // session, fingerprint, and every chunk's checksum.
  SessionInfo source;
  {
    StoreOptions check_options = options_;
    check_options.read_only = true;
    HIPPO_ASSIGN_OR_RETURN(auto check, SessionStore::open(file, check_options));
    HIPPO_ASSIGN_OR_RETURN(auto sessions, check->list_sessions());
    if (sessions.size() != 1)
      return make_error(ErrorCode::kCorrupt, "{}: holds {} sessions, an export holds exactly one", context,
                        sessions.size());
    source = sessions.front();
    if (!expected_fingerprint.empty() && source.model_fingerprint != expected_fingerprint)
      return make_error(ErrorCode::kFailedPrecondition,
                        "{}: session {} was made with model fingerprint {}, this model is {}; it cannot be imported",
                        context, source.id, source.model_fingerprint, expected_fingerprint);
    HIPPO_ASSIGN_OR_RETURN(VerifyReport report, check->verify_session(source.id));
    if (!report.problems.empty()) return report.problems.front().with_context(context);
  }
  const std::string id = new_id.empty() ? source.id : std::string(new_id);
  HIPPO_ASSIGN_OR_RETURN(Attached attached, Attached::attach(*db_, file));
  HIPPO_ASSIGN_OR_RETURN(std::int64_t version, read_format_version(*db_, kTransferSchema));
  if (version != kFormatVersion)
    return make_error(ErrorCode::kFailedPrecondition, "{}: format version {} changed during import", context, version);
  Status status = in_transaction(*db_, true, [&] {
    return copy_session(*db_, kTransferSchema, "main", source.id, id, progress);
  });
  HIPPO_RETURN_IF_ERROR(note_failure(status.with_context(context)));
  return get_session_locked(id);
}

}  // namespace hippo::storage
