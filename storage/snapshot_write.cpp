// SessionStore::write_snapshot(): one incremental snapshot, made visible by one transaction
// (store.h (1)–(3), (6)).
//
// The calling thread walks the streams, decides which previous chunks still hold (3), and cuts
// the rest into chunks on a fixed grid of entries_per_chunk entries, so a stream that grew by a
// little writes one small chunk up to the next grid line and whole chunks after it; a partial last
// chunk of an earlier snapshot is never rewritten. Encoding (filter, zstd, xxh3) runs on the pool;
// the calling thread inserts finished chunks in order, never more than kMaxChunksInFlight ahead.
#include "storage/store.h"

#include "base/log.h"
#include "storage/sqlite.h"
#include "storage/store_internal.h"
#include "storage/worker_pool.h"

#include <chrono>
#include <deque>
#include <future>
#include <set>

namespace hippo::storage {
namespace {

// Between its chunk transactions a snapshot lets waiting writers (the conversation log) go first,
// for at most this long each time.
constexpr auto kYieldToWritersMax = std::chrono::milliseconds(50);

struct EncodedChunk {
  Status status;
  Codec codec = Codec::kStored;
  std::uint64_t checksum = 0;
  std::vector<std::byte> compressed;  // empty for kStored: the blob is the raw range itself
};

struct PendingChunk {
  std::int64_t stream_index;
  ChunkRow row;  // id unset until inserted
  std::span<const std::byte> raw;
  std::future<EncodedChunk> encoded;
};

// Waits for every chunk still being encoded, whatever path leaves write_snapshot_locked(): the
// tasks read the caller's bytes and must be done before it returns.
struct InFlight {
  std::future<EncodedChunk> frontier;
  std::deque<PendingChunk> chunks;
  ~InFlight() {
    if (frontier.valid()) frontier.wait();
    for (auto& c : chunks) c.encoded.wait();
  }
};

// The integers in the first column of every row the statement yields.
Result<std::vector<std::int64_t>> first_column_ints(Statement& select) {
  std::vector<std::int64_t> out;
  for (;;) {
    HIPPO_ASSIGN_OR_RETURN(bool row, select.step());
    if (!row) return out;
    out.push_back(select.column_int(0));
  }
}

Status validate(const SnapshotRequest& request) {
  const std::string& id = request.session_id;
  if (request.fingerprint.empty())
    return make_error(ErrorCode::kInvalidArgument, "session {}: snapshot without a model fingerprint", id);
  if (request.n_tokens < 0)
    return make_error(ErrorCode::kInvalidArgument, "session {}: snapshot of {} tokens", id, request.n_tokens);
  std::set<std::string_view> names;
  for (const auto& s : request.streams) {
    if (s.name.empty() || !names.insert(s.name).second)
      return make_error(ErrorCode::kInvalidArgument, "session {}: stream name '{}' is empty or repeated", id, s.name);
    if (s.entry_bytes == 0 || s.entry_bytes > kChunkTargetBytes)
      return make_error(ErrorCode::kInvalidArgument, "session {}: stream {}: entry size {} outside 1..{}", id, s.name,
                        s.entry_bytes, kChunkTargetBytes);
    if (s.bytes.size() % s.entry_bytes != 0)
      return make_error(ErrorCode::kInvalidArgument, "session {}: stream {}: {} bytes is not a whole number of {}-byte entries",
                        id, s.name, s.bytes.size(), s.entry_bytes);
  }
  return {};
}

}  // namespace

Result<SnapshotWriteStats> SessionStore::write_snapshot(const SnapshotRequest& request) {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  HIPPO_RETURN_IF_ERROR(validate(request));
  const auto start = std::chrono::steady_clock::now();
  auto stats = write_snapshot_locked(request);
  if (!stats.ok()) {
    log::warn("snapshot failed", {{"session", request.session_id}, {"error", stats.status().message()}});
    return note_failure(stats.status());
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  log::debug("snapshot written", {{"session", request.session_id},
                                  {"snapshot", stats->snapshot_id},
                                  {"tokens", request.n_tokens},
                                  {"written_bytes", stats->written_stored_bytes},
                                  {"reused_chunks", stats->reused_chunks},
                                  {"ms", ms}});
  return stats;
}

// Phase 1, one transaction: the snapshot's row, marked incomplete, and its stream rows. An
// incomplete snapshot of the session that an earlier attempt left (killed, or failed and not
// cleaned up) goes first.
Result<SnapshotWriteStats> SessionStore::write_snapshot_locked(const SnapshotRequest& request) {
  const std::string& session_id = request.session_id;
  const std::string context = fmt::format("session {}: snapshot at {} tokens", session_id, request.n_tokens);
  SnapshotWriteStats stats;
  std::optional<SnapshotInfo> previous;
  {
    auto begun = Transaction::begin(*db_);
    if (!begun.ok()) return begun.status().with_context(context);
    Transaction tx = std::move(begun).value();
    HIPPO_ASSIGN_OR_RETURN(SessionInfo session, get_session_locked(session_id));
    if (session.model_fingerprint != request.fingerprint)
      return make_error(ErrorCode::kFailedPrecondition,
                        "{}: model fingerprint {} differs from the session's {}; refusing to mix model states", context,
                        request.fingerprint, session.model_fingerprint);
    HIPPO_RETURN_IF_ERROR(remove_incomplete_snapshots(session_id).with_context(context));
    HIPPO_ASSIGN_OR_RETURN(auto latest, load_snapshot_infos(*db_, "main", session_id, 1));
    if (!latest.empty()) previous = std::move(latest.front());
    HIPPO_ASSIGN_OR_RETURN(
        Statement snapshot,
        Statement::prepare(*db_, "INSERT INTO snapshots(session_id, parent_id, n_tokens, fingerprint, frontier, "
                                 "frontier_codec, frontier_raw_bytes, frontier_checksum, created_at, complete) "
                                 "VALUES (?, ?, ?, ?, x'', 0, ?, 0, ?, 0)"));
    snapshot.bind(1, std::string_view(session_id));
    if (previous) snapshot.bind(2, previous->id); else snapshot.bind_null(2);
    snapshot.bind(3, request.n_tokens)
        .bind(4, std::string_view(request.fingerprint))
        .bind(5, static_cast<std::int64_t>(request.frontier.size()))
        .bind(6, unix_now());
    HIPPO_RETURN_IF_ERROR(snapshot.run().with_context(context));
    stats.snapshot_id = db_->last_insert_rowid();
    HIPPO_ASSIGN_OR_RETURN(Statement stream_row,
                           Statement::prepare(*db_, "INSERT INTO snapshot_streams(snapshot_id, stream_index, name, "
                                                    "entry_bytes, filter, n_entries) VALUES (?, ?, ?, ?, ?, ?)"));
    for (std::size_t i = 0; i < request.streams.size(); ++i) {
      const StreamData& stream = request.streams[i];
      stream_row.bind(1, stats.snapshot_id)
          .bind(2, static_cast<std::int64_t>(i))
          .bind(3, std::string_view(stream.name))
          .bind(4, static_cast<std::int64_t>(stream.entry_bytes))
          .bind(5, static_cast<std::int64_t>(stream.filter))
          .bind(6, static_cast<std::int64_t>(stream.bytes.size() / stream.entry_bytes));
      HIPPO_RETURN_IF_ERROR(stream_row.run().with_context(context + ": stream " + stream.name));
    }
    HIPPO_RETURN_IF_ERROR(commit_or_fail_closed(tx).with_context(context));
  }
  Status written = write_snapshot_content(request, previous, context, stats);
  if (!written.ok() && usable().ok()) {
    // Best effort: what stays is removed by the session's next snapshot (or with the session).
    auto begun = Transaction::begin(*db_);
    if (begun.ok()) {
      Transaction tx = std::move(begun).value();
      const std::int64_t id = stats.snapshot_id;
      if (remove_snapshots(std::span(&id, 1)).ok()) (void)commit_or_fail_closed(tx);
    }
  }
  HIPPO_RETURN_IF_ERROR(written);
  return stats;
}

// Phase 2, in transactions of about kChunkTargetBytes each (the writer lock is never held for
// longer than one chunk's insert): the chunks of the previous snapshot that still hold (3) and the
// new ones, with the chunk map; the incomplete snapshot's map keeps gc() off its chunks. Phase 3,
// one transaction: the frontier, the mark that makes the snapshot visible, and the pruning.
Status SessionStore::write_snapshot_content(const SnapshotRequest& request, const std::optional<SnapshotInfo>& previous,
                                           const std::string& context, SnapshotWriteStats& stats) {
  const std::string& session_id = request.session_id;
  std::optional<Transaction> tx;
  std::size_t tx_bytes = 0;
  auto open_tx = [&]() -> Status {
    if (tx) return {};
    db_->yield_to_waiting_writers(kYieldToWritersMax);
    auto begun = Transaction::begin(*db_);
    if (!begun.ok()) return begun.status().with_context(context);
    tx.emplace(std::move(begun).value());
    return {};
  };
  auto commit_tx = [&]() -> Status {
    if (!tx) return {};
    Status committed = commit_or_fail_closed(*tx);
    tx.reset();
    tx_bytes = 0;
    return committed.with_context(context);
  };

  InFlight in_flight;
  WorkerPool& workers = pool();
  // Encodes the caller's bytes on a pool worker; the future carries the blob and checksum.
  auto submit_encode = [&](std::span<const std::byte> raw, std::size_t entry_bytes, Filter filter) {
    auto promise = std::make_shared<std::promise<EncodedChunk>>();
    auto future = promise->get_future();
    workers.submit([this, promise, raw, entry_bytes, filter, level = options_.zstd_level](std::size_t worker) {
      EncodedChunk out;
      auto encoded = encoders_[worker]->encode(raw, entry_bytes, filter, level, out.compressed);
      if (encoded.ok()) {
        out.codec = encoded->codec;
        out.checksum = encoded->checksum;
      } else {
        out.status = encoded.status();
      }
      promise->set_value(std::move(out));
    });
    return future;
  };
  // The frontier (a few MB, one chunk of 1-byte entries) is encoded beside the streams' chunks and
  // written by complete_snapshot().
  in_flight.frontier = submit_encode(request.frontier, 1, Filter::kNone);
  stats.raw_bytes = static_cast<std::int64_t>(request.frontier.size());

  HIPPO_ASSIGN_OR_RETURN(Statement chunk_map,
                         Statement::prepare(*db_, "INSERT INTO snapshot_chunks(snapshot_id, stream_index, seq, chunk_id) "
                                                  "VALUES (?, ?, ?, ?)"));
  HIPPO_ASSIGN_OR_RETURN(
      Statement chunk_insert,
      Statement::prepare(*db_, "INSERT INTO kv_chunks(origin_session, stream, first_entry, n_entries, entry_bytes, "
                               "filter, codec, raw_bytes, stored_bytes, checksum, blob) "
                               "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));

  // Inserts the oldest chunk in flight once its encoding is done; the map keeps stream order.
  auto insert_oldest = [&]() -> Status {
    PendingChunk pending = std::move(in_flight.chunks.front());
    in_flight.chunks.pop_front();
    EncodedChunk encoded = pending.encoded.get();
    const StreamData& stream = request.streams[static_cast<std::size_t>(pending.stream_index)];
    const std::string where = chunk_context(session_id, stats.snapshot_id, stream.name, pending.row);
    HIPPO_RETURN_IF_ERROR(encoded.status.with_context(where));
    const std::span<const std::byte> blob =
        encoded.codec == Codec::kStored ? pending.raw : std::span<const std::byte>(encoded.compressed);
    HIPPO_RETURN_IF_ERROR(open_tx());
    chunk_insert.bind(1, std::string_view(session_id))
        .bind(2, std::string_view(stream.name))
        .bind(3, pending.row.first_entry)
        .bind(4, pending.row.n_entries)
        .bind(5, static_cast<std::int64_t>(stream.entry_bytes))
        .bind(6, static_cast<std::int64_t>(encoded.codec == Codec::kStored ? Filter::kNone : stream.filter))
        .bind(7, static_cast<std::int64_t>(encoded.codec))
        .bind(8, static_cast<std::int64_t>(pending.raw.size()))
        .bind(9, static_cast<std::int64_t>(blob.size()))
        .bind(10, to_sql(encoded.checksum))
        .bind_blob(11, blob);
    HIPPO_RETURN_IF_ERROR(chunk_insert.run().with_context(where));
    chunk_map.bind(1, stats.snapshot_id).bind(2, pending.stream_index).bind(3, pending.row.seq).bind(4, db_->last_insert_rowid());
    HIPPO_RETURN_IF_ERROR(chunk_map.run().with_context(where));
    stats.written_raw_bytes += static_cast<std::int64_t>(pending.raw.size());
    stats.written_stored_bytes += static_cast<std::int64_t>(blob.size());
    ++stats.written_chunks;
    tx_bytes += blob.size();
    return tx_bytes >= kChunkTargetBytes ? commit_tx() : Status{};
  };

  for (std::size_t i = 0; i < request.streams.size(); ++i) {
    const StreamData& stream = request.streams[i];
    const auto stream_index = static_cast<std::int64_t>(i);
    const auto entry_bytes = static_cast<std::int64_t>(stream.entry_bytes);
    const auto n_entries = static_cast<std::int64_t>(stream.bytes.size()) / entry_bytes;
    stats.raw_bytes += static_cast<std::int64_t>(stream.bytes.size());

    // Reuse the previous snapshot's chunks while the caller's bytes still match them (keeps (3)).
    std::int64_t seq = 0;
    std::int64_t end = 0;
    if (previous) {
      const auto& prev_streams = previous->streams;
      for (std::size_t p = 0; p < prev_streams.size(); ++p) {
        if (prev_streams[p].name != stream.name || prev_streams[p].entry_bytes != stream.entry_bytes) continue;
        HIPPO_ASSIGN_OR_RETURN(auto rows, load_chunk_rows(*db_, previous->id, static_cast<std::int64_t>(p)));
        for (const ChunkRow& row : rows) {
          if (row.first_entry != end || row.first_entry + row.n_entries > n_entries) break;
          const auto range = stream.bytes.subspan(static_cast<std::size_t>(row.first_entry * entry_bytes),
                                                  static_cast<std::size_t>(row.n_entries * entry_bytes));
          if (checksum_bytes(range) != row.checksum) break;
          HIPPO_RETURN_IF_ERROR(open_tx());
          chunk_map.bind(1, stats.snapshot_id).bind(2, stream_index).bind(3, seq++).bind(4, row.id);
          HIPPO_RETURN_IF_ERROR(chunk_map.run().with_context(context + ": stream " + stream.name));
          end += row.n_entries;
          ++stats.reused_chunks;
        }
        break;
      }
    }

    // Everything after the reused prefix, cut on the grid of entries_per_chunk.
    const std::int64_t entries_per_chunk = std::max<std::int64_t>(1, static_cast<std::int64_t>(kChunkTargetBytes) / entry_bytes);
    while (end < n_entries) {
      const std::int64_t next = std::min(n_entries, (end / entries_per_chunk + 1) * entries_per_chunk);
      while (in_flight.chunks.size() >= kMaxChunksInFlight) HIPPO_RETURN_IF_ERROR(insert_oldest());  // keeps (6)
      PendingChunk pending;
      pending.stream_index = stream_index;
      pending.row.seq = seq++;
      pending.row.first_entry = end;
      pending.row.n_entries = next - end;
      pending.raw = stream.bytes.subspan(static_cast<std::size_t>(end * entry_bytes),
                                         static_cast<std::size_t>((next - end) * entry_bytes));
      pending.encoded = submit_encode(pending.raw, stream.entry_bytes, stream.filter);
      in_flight.chunks.push_back(std::move(pending));
      end = next;
    }
  }
  while (!in_flight.chunks.empty()) HIPPO_RETURN_IF_ERROR(insert_oldest());
  HIPPO_RETURN_IF_ERROR(commit_tx());

  EncodedChunk frontier = in_flight.frontier.get();
  HIPPO_RETURN_IF_ERROR(frontier.status.with_context(context + ": frontier"));
  const std::span<const std::byte> frontier_stored = frontier.codec == Codec::kStored
                                                         ? std::span<const std::byte>(request.frontier)
                                                         : std::span<const std::byte>(frontier.compressed);
  HIPPO_RETURN_IF_ERROR(open_tx());
  HIPPO_ASSIGN_OR_RETURN(Statement complete,
                         Statement::prepare(*db_, "UPDATE snapshots SET frontier = ?, frontier_codec = ?, "
                                                  "frontier_checksum = ?, complete = 1 WHERE id = ?"));
  complete.bind_blob(1, frontier_stored)
      .bind(2, static_cast<std::int64_t>(frontier.codec))
      .bind(3, to_sql(frontier.checksum))
      .bind(4, stats.snapshot_id);
  HIPPO_RETURN_IF_ERROR(complete.run().with_context(context + ": frontier"));
  if (db_->changes() == 0)
    return make_error(ErrorCode::kNotFound, "{}: the session was removed while its snapshot was written", context);
  stats.frontier_stored_bytes = static_cast<std::int64_t>(frontier_stored.size());
  stats.written_stored_bytes += stats.frontier_stored_bytes;

  HIPPO_RETURN_IF_ERROR(prune_snapshots(session_id).with_context(context));
  HIPPO_ASSIGN_OR_RETURN(Statement touch, Statement::prepare(*db_, "UPDATE sessions SET updated_at = ? WHERE id = ?"));
  HIPPO_RETURN_IF_ERROR(touch.bind(1, unix_now()).bind(2, std::string_view(session_id)).run().with_context(context));
  return commit_tx();
}

Status SessionStore::commit_or_fail_closed(Transaction& tx) {
  Status committed = tx.commit();
  // The outcome of a failed COMMIT is not known to us: fail closed (keeps (5)).
  if (!committed.ok() && failed_.ok()) failed_ = committed;
  return committed;
}

Status SessionStore::remove_incomplete_snapshots(std::string_view session_id) {
  HIPPO_ASSIGN_OR_RETURN(Statement select,
                         Statement::prepare(*db_, "SELECT id FROM snapshots WHERE session_id = ? AND complete = 0"));
  select.bind(1, session_id);
  HIPPO_ASSIGN_OR_RETURN(std::vector<std::int64_t> ids, first_column_ints(select));
  return remove_snapshots(ids);
}

Status SessionStore::prune_snapshots(std::string_view session_id) {
  HIPPO_ASSIGN_OR_RETURN(Statement old, Statement::prepare(*db_, "SELECT id FROM snapshots WHERE session_id = ? AND "
                                                                 "complete = 1 ORDER BY id DESC LIMIT -1 OFFSET ?"));
  old.bind(1, session_id).bind(2, std::int64_t{options_.keep_snapshots});
  HIPPO_ASSIGN_OR_RETURN(std::vector<std::int64_t> doomed, first_column_ints(old));
  return remove_snapshots(doomed);
}

Status SessionStore::remove_snapshots(std::span<const std::int64_t> ids) {
  if (ids.empty()) return {};
  HIPPO_RETURN_IF_ERROR(db_->exec("CREATE TEMP TABLE IF NOT EXISTS pruned_chunks(id INTEGER PRIMARY KEY); "
                                  "DELETE FROM temp.pruned_chunks"));
  HIPPO_ASSIGN_OR_RETURN(Statement collect,
                         Statement::prepare(*db_, "INSERT OR IGNORE INTO temp.pruned_chunks SELECT chunk_id FROM "
                                                  "snapshot_chunks WHERE snapshot_id = ?"));
  HIPPO_ASSIGN_OR_RETURN(Statement remove, Statement::prepare(*db_, "DELETE FROM snapshots WHERE id = ?"));
  for (std::int64_t id : ids) {
    HIPPO_RETURN_IF_ERROR(collect.bind(1, id).run());
    HIPPO_RETURN_IF_ERROR(remove.bind(1, id).run());
  }
  // Chunks of the removed snapshots that no other snapshot (a newer one, a fork) still uses (2).
  return db_->exec("DELETE FROM kv_chunks WHERE id IN (SELECT id FROM temp.pruned_chunks) AND NOT EXISTS "
                   "(SELECT 1 FROM snapshot_chunks WHERE chunk_id = kv_chunks.id); DELETE FROM temp.pruned_chunks");
}

}  // namespace hippo::storage
