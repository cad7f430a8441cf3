// Reading snapshots back: listing them, restoring one into the caller's memory, and verifying
// every chunk of a session (store.h (4), (6)).
//
// One read transaction covers a whole restore, so a writer committing (and pruning) meanwhile
// cannot change what is read (WAL gives readers a fixed view). Chunks are read in stream order on
// the calling thread, copied out of SQLite and decoded on the pool straight into their place in
// the caller's buffers; at most kMaxChunksInFlight are held at once.
#include "storage/store.h"

#include "storage/sqlite.h"
#include "storage/store_internal.h"
#include "storage/worker_pool.h"

#include <deque>
#include <future>
#include <map>

namespace hippo::storage {

std::string chunk_context(std::string_view session_id, std::int64_t snapshot_id, std::string_view stream,
                          const ChunkRow& chunk) {
  return fmt::format("session {}: snapshot {}: stream {}: chunk {} (entries {}..{})", session_id, snapshot_id, stream,
                     chunk.seq, chunk.first_entry, chunk.first_entry + chunk.n_entries);
}

Result<std::vector<ChunkRow>> load_chunk_rows(Db& db, std::int64_t snapshot_id, std::int64_t stream_index) {
  HIPPO_ASSIGN_OR_RETURN(
      Statement select,
      Statement::prepare(db, "SELECT c.id, m.seq, c.first_entry, c.n_entries, c.entry_bytes, c.filter, c.codec, "
                             "c.raw_bytes, c.stored_bytes, c.checksum FROM snapshot_chunks m JOIN kv_chunks c ON "
                             "c.id = m.chunk_id WHERE m.snapshot_id = ? AND m.stream_index = ? ORDER BY m.seq"));
  select.bind(1, snapshot_id).bind(2, stream_index);
  std::vector<ChunkRow> rows;
  for (;;) {
    HIPPO_ASSIGN_OR_RETURN(bool row, select.step());
    if (!row) break;
    rows.push_back({select.column_int(0), select.column_int(1), select.column_int(2), select.column_int(3),
                    select.column_int(4), select.column_int(5), select.column_int(6), select.column_int(7),
                    select.column_int(8), from_sql(select.column_int(9))});
  }
  return rows;
}

namespace {

constexpr std::string_view kSnapshotColumns =
    "id, session_id, parent_id, n_tokens, fingerprint, frontier_raw_bytes, length(frontier), created_at";

Result<std::vector<SnapshotInfo>> read_snapshots(Db& db, std::string_view schema, Statement& select) {
  std::vector<SnapshotInfo> snapshots;
  for (;;) {
    HIPPO_ASSIGN_OR_RETURN(bool row, select.step());
    if (!row) break;
    SnapshotInfo info;
    info.id = select.column_int(0);
    info.session_id = select.column_text(1);
    if (!select.column_is_null(2)) info.parent_id = select.column_int(2);
    info.n_tokens = select.column_int(3);
    info.fingerprint = select.column_text(4);
    info.frontier_raw_bytes = select.column_int(5);
    info.frontier_stored_bytes = select.column_int(6);
    info.created_at = select.column_int(7);
    snapshots.push_back(std::move(info));
  }
  HIPPO_ASSIGN_OR_RETURN(
      Statement streams,
      Statement::prepare(db, fmt::format("SELECT s.stream_index, s.name, s.entry_bytes, s.filter, s.n_entries, "
                                         "count(c.id), coalesce(sum(c.raw_bytes), 0), coalesce(sum(c.stored_bytes), 0) "
                                         "FROM {0}.snapshot_streams s LEFT JOIN {0}.snapshot_chunks m ON "
                                         "m.snapshot_id = s.snapshot_id AND m.stream_index = s.stream_index "
                                         "LEFT JOIN {0}.kv_chunks c ON c.id = m.chunk_id WHERE s.snapshot_id = ? "
                                         "GROUP BY s.stream_index ORDER BY s.stream_index",
                                         schema)));
  for (auto& info : snapshots) {
    streams.bind(1, info.id);
    for (;;) {
      HIPPO_ASSIGN_OR_RETURN(bool row, streams.step());
      if (!row) break;
      if (streams.column_int(0) != static_cast<std::int64_t>(info.streams.size()))
        return make_error(ErrorCode::kCorrupt, "session {}: snapshot {}: stream indices are not 0..n-1",
                          info.session_id, info.id);
      StreamInfo s;
      s.name = streams.column_text(1);
      const std::int64_t entry_bytes = streams.column_int(2);
      HIPPO_ASSIGN_OR_RETURN(s.filter, filter_from_int(streams.column_int(3)));
      if (entry_bytes <= 0)
        return make_error(ErrorCode::kCorrupt, "session {}: snapshot {}: stream {}: entry size {}", info.session_id,
                          info.id, s.name, entry_bytes);
      s.entry_bytes = static_cast<std::size_t>(entry_bytes);
      s.n_entries = streams.column_int(4);
      s.n_chunks = streams.column_int(5);
      s.raw_bytes = streams.column_int(6);
      s.stored_bytes = streams.column_int(7);
      info.streams.push_back(std::move(s));
    }
    streams.reset();
  }
  return snapshots;
}

// Keeps a read transaction open for the life of the object, so every query sees one state.
class ReadTransaction {
 public:
  static Result<ReadTransaction> begin(Db& db) {
    HIPPO_RETURN_IF_ERROR(db.exec("BEGIN"));
    return ReadTransaction(db);
  }
  ReadTransaction(ReadTransaction&& other) noexcept : db_(std::exchange(other.db_, nullptr)) {}
  ReadTransaction& operator=(ReadTransaction&&) = delete;
  ~ReadTransaction() {
    if (db_) (void)db_->exec("ROLLBACK");
  }

 private:
  explicit ReadTransaction(Db& db) : db_(&db) {}
  Db* db_;
};

}  // namespace

Result<std::vector<SnapshotInfo>> load_snapshot_infos(Db& db, std::string_view schema, std::string_view session_id,
                                                      int limit) {
  HIPPO_ASSIGN_OR_RETURN(Statement select,
                         Statement::prepare(db, fmt::format("SELECT {} FROM {}.snapshots WHERE session_id = ? AND "
                                                            "complete = 1 ORDER BY id DESC LIMIT ?",
                                                            kSnapshotColumns, schema)));
  select.bind(1, session_id).bind(2, std::int64_t{limit});
  return read_snapshots(db, schema, select);
}

Result<std::optional<SnapshotInfo>> load_snapshot_info(Db& db, std::int64_t snapshot_id) {
  HIPPO_ASSIGN_OR_RETURN(Statement select,
                         Statement::prepare(db, fmt::format("SELECT {} FROM snapshots WHERE id = ? AND complete = 1", kSnapshotColumns)));
  select.bind(1, snapshot_id);
  HIPPO_ASSIGN_OR_RETURN(auto snapshots, read_snapshots(db, "main", select));
  if (snapshots.empty()) return std::optional<SnapshotInfo>();
  return std::optional<SnapshotInfo>(std::move(snapshots.front()));
}

Result<std::optional<SnapshotInfo>> SessionStore::latest_snapshot(std::string_view session_id) {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  HIPPO_RETURN_IF_ERROR(get_session_locked(session_id).status());
  HIPPO_ASSIGN_OR_RETURN(auto snapshots, load_snapshot_infos(*db_, "main", session_id, 1));
  if (snapshots.empty()) return std::optional<SnapshotInfo>();
  return std::optional<SnapshotInfo>(std::move(snapshots.front()));
}

Result<std::vector<SnapshotInfo>> SessionStore::list_snapshots(std::string_view session_id) {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  HIPPO_RETURN_IF_ERROR(get_session_locked(session_id).status());
  return load_snapshot_infos(*db_, "main", session_id, -1);
}

namespace {

struct PendingDecode {
  std::string where;
  std::int64_t raw_bytes;
  std::future<Status> decoded;
};

// Waits for every decode still running, whatever path leaves sweep_chunks(): the tasks write into
// the caller's buffers and must be done before it returns.
struct DecodesInFlight {
  std::deque<PendingDecode> chunks;
  ~DecodesInFlight() {
    for (auto& c : chunks) c.decoded.wait();
  }
};

Status corrupt(std::string_view where, std::string_view what) {
  return make_error(ErrorCode::kCorrupt, "{}: {}; the session must be rebuilt from its log", where, what);
}

}  // namespace

Status SessionStore::sweep_chunks(const SnapshotInfo& snapshot, ChunkSweep& sweep) {
  // Problems found on this thread or by decode tasks; the first one stops a restore.
  auto record = [&](Status problem) -> bool {
    sweep.problems.push_back(std::move(problem));
    return !sweep.stop_at_first_problem;
  };
  DecodesInFlight in_flight;
  bool keep_going = true;
  auto finish_oldest = [&] {
    PendingDecode pending = std::move(in_flight.chunks.front());
    in_flight.chunks.pop_front();
    Status status = pending.decoded.get();
    if (!status.ok()) {
      keep_going = record(corrupt(pending.where, status.message())) && keep_going;
      return;
    }
    ++sweep.chunks;
    sweep.raw_bytes += pending.raw_bytes;
    if (sweep.progress && *sweep.progress) (*sweep.progress)(sweep.raw_bytes, sweep.progress_total);
  };

  HIPPO_ASSIGN_OR_RETURN(
      Statement select,
      Statement::prepare(*db_, "SELECT m.stream_index, m.seq, c.id, c.first_entry, c.n_entries, c.entry_bytes, "
                               "c.filter, c.codec, c.raw_bytes, c.stored_bytes, c.checksum "
                               "FROM snapshot_chunks m LEFT JOIN kv_chunks c ON c.id = m.chunk_id "
                               "WHERE m.snapshot_id = ? ORDER BY m.stream_index, m.seq"));
  select.bind(1, snapshot.id);
  std::vector<std::int64_t> covered(snapshot.streams.size(), 0);
  WorkerPool& workers = pool();
  BlobReader blobs(*db_, "kv_chunks", "blob");
  while (keep_going) {
    HIPPO_ASSIGN_OR_RETURN(bool row, select.step());
    if (!row) break;
    const std::int64_t stream_index = select.column_int(0);
    ChunkRow chunk{select.column_int(2), select.column_int(1), select.column_int(3), select.column_int(4),
                   select.column_int(5), select.column_int(6), select.column_int(7), select.column_int(8),
                   select.column_int(9), from_sql(select.column_int(10))};
    if (stream_index < 0 || stream_index >= static_cast<std::int64_t>(snapshot.streams.size())) {
      keep_going = record(corrupt(fmt::format("session {}: snapshot {}", snapshot.session_id, snapshot.id),
                                  fmt::format("chunk map names stream {} of {}", stream_index, snapshot.streams.size())));
      continue;
    }
    const StreamInfo& stream = snapshot.streams[static_cast<std::size_t>(stream_index)];
    std::int64_t& end = covered[static_cast<std::size_t>(stream_index)];
    const std::string where = chunk_context(snapshot.session_id, snapshot.id, stream.name, chunk);
    if (select.column_is_null(2)) {
      keep_going = record(corrupt(where, "missing from kv_chunks"));
      continue;
    }
    const auto entry_bytes = static_cast<std::int64_t>(stream.entry_bytes);
    auto filter = filter_from_int(chunk.filter);
    auto codec = codec_from_int(chunk.codec);
    auto blob = std::make_shared<std::vector<std::byte>>();
    Status problem = blobs.read(chunk.id, *blob).with_context(where);
    if (!problem.ok()) {
      keep_going = record(std::move(problem)) && keep_going;
      continue;
    }
    if (chunk.first_entry != end)
      problem = corrupt(where, fmt::format("starts at entry {}, expected {}", chunk.first_entry, end));
    else if (chunk.entry_bytes != entry_bytes || chunk.n_entries <= 0 || chunk.raw_bytes != chunk.n_entries * entry_bytes ||
             chunk.first_entry + chunk.n_entries > stream.n_entries)
      problem = corrupt(where, fmt::format("bad geometry ({} entries of {} bytes, raw {} bytes, stream has {} entries)",
                                           chunk.n_entries, chunk.entry_bytes, chunk.raw_bytes, stream.n_entries));
    else if (!filter.ok() || !codec.ok())
      problem = corrupt(where, !filter.ok() ? filter.status().message() : codec.status().message());
    else if (static_cast<std::int64_t>(blob->size()) != chunk.stored_bytes)
      problem = corrupt(where, fmt::format("truncated blob ({} of {} stored bytes)", blob->size(), chunk.stored_bytes));
    if (!problem.ok()) {
      keep_going = record(std::move(problem));
      end = chunk.first_entry + std::max<std::int64_t>(chunk.n_entries, 0);
      continue;
    }
    end += chunk.n_entries;

    while (in_flight.chunks.size() >= kMaxChunksInFlight) finish_oldest();  // keeps (6)
    std::span<std::byte> out;
    if (!sweep.outputs.empty())
      out = sweep.outputs[static_cast<std::size_t>(stream_index)].subspan(
          static_cast<std::size_t>(chunk.first_entry * entry_bytes), static_cast<std::size_t>(chunk.raw_bytes));
    auto promise = std::make_shared<std::promise<Status>>();
    in_flight.chunks.push_back({where, chunk.raw_bytes, promise->get_future()});
    workers.submit([this, promise, blob, out, codec = *codec, filter = *filter, entry = stream.entry_bytes,
                    checksum = chunk.checksum, raw = chunk.raw_bytes](std::size_t worker) {
      std::vector<std::byte> scratch;
      std::span<std::byte> target = out;
      if (target.empty()) {  // verify only: decode into a buffer of this task
        scratch.resize(static_cast<std::size_t>(raw));
        target = scratch;
      }
      promise->set_value(decoders_[worker]->decode(*blob, codec, filter, entry, checksum, target));
    });
  }
  while (!in_flight.chunks.empty()) finish_oldest();
  if (keep_going) {
    for (std::size_t i = 0; i < snapshot.streams.size(); ++i) {
      if (covered[i] != snapshot.streams[i].n_entries)
        if (!record(corrupt(fmt::format("session {}: snapshot {}: stream {}", snapshot.session_id, snapshot.id,
                                        snapshot.streams[i].name),
                            fmt::format("chunks cover entries 0..{} of {}", covered[i], snapshot.streams[i].n_entries))))
          break;
    }
  }
  return {};
}

namespace {

// A snapshot's frontier as stored, read on the calling thread; decode() may run anywhere.
struct StoredFrontier {
  std::string where;
  std::vector<std::byte> blob;
  Codec codec = Codec::kStored;
  std::int64_t raw_bytes = 0;
  std::uint64_t checksum = 0;

  Result<std::vector<std::byte>> decode(ChunkDecoder& decoder) const {
    std::vector<std::byte> frontier(static_cast<std::size_t>(raw_bytes));
    Status decoded = decoder.decode(blob, codec, Filter::kNone, 1, checksum, frontier);
    if (!decoded.ok()) return corrupt(where, decoded.message());
    return frontier;
  }
};

Result<StoredFrontier> read_frontier(Db& db, const SnapshotInfo& snapshot) {
  HIPPO_ASSIGN_OR_RETURN(Statement select,
                         Statement::prepare(db, "SELECT frontier, frontier_codec, frontier_raw_bytes, frontier_checksum "
                                                "FROM snapshots WHERE id = ?"));
  select.bind(1, snapshot.id);
  HIPPO_ASSIGN_OR_RETURN(bool row, select.step());
  StoredFrontier stored;
  stored.where = fmt::format("session {}: snapshot {}: frontier", snapshot.session_id, snapshot.id);
  if (!row) return make_error(ErrorCode::kNotFound, "{}: snapshot no longer exists", stored.where);
  stored.raw_bytes = select.column_int(2);
  auto codec = codec_from_int(select.column_int(1));
  if (!codec.ok() || stored.raw_bytes < 0) return corrupt(stored.where, "bad codec or size");
  stored.codec = *codec;
  stored.checksum = from_sql(select.column_int(3));
  const auto blob = select.column_blob(0);
  stored.blob.assign(blob.begin(), blob.end());
  return stored;
}

// The frontier decoding on a pool worker while the chunks are read; waits on every exit path.
struct FrontierInFlight {
  std::future<Result<std::vector<std::byte>>> decoded;
  ~FrontierInFlight() {
    if (decoded.valid()) decoded.wait();
  }
};

}  // namespace

Result<std::vector<std::byte>> SessionStore::restore_snapshot(const SnapshotInfo& requested,
                                                              std::string_view expected_fingerprint,
                                                              std::span<const RestoreTarget> targets,
                                                              const ProgressFn& progress) {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  HIPPO_ASSIGN_OR_RETURN(ReadTransaction read, ReadTransaction::begin(*db_));
  HIPPO_ASSIGN_OR_RETURN(auto found, load_snapshot_info(*db_, requested.id));
  const std::string where = fmt::format("session {}: snapshot {}", requested.session_id, requested.id);
  if (!found || found->session_id != requested.session_id)
    return make_error(ErrorCode::kNotFound, "{}: no longer exists (pruned after a newer snapshot); restore the latest",
                      where);
  const SnapshotInfo& snapshot = *found;
  if (snapshot.fingerprint != expected_fingerprint)  // keeps (4): never stale KV
    return make_error(ErrorCode::kFailedPrecondition,
                      "{}: model fingerprint mismatch (snapshot {}, running model {}); the session must be rebuilt "
                      "from its log",
                      where, snapshot.fingerprint, expected_fingerprint);

  ChunkSweep sweep;
  sweep.progress = &progress;
  sweep.progress_total = snapshot.raw_bytes() - snapshot.frontier_raw_bytes;
  if (targets.size() != snapshot.streams.size())
    return make_error(ErrorCode::kInvalidArgument, "{}: {} restore targets for {} streams", where, targets.size(),
                      snapshot.streams.size());
  std::map<std::string_view, std::span<std::byte>> by_name;
  for (const auto& t : targets) by_name[t.name] = t.bytes;
  for (const auto& stream : snapshot.streams) {
    auto it = by_name.find(stream.name);
    if (it == by_name.end())
      return make_error(ErrorCode::kInvalidArgument, "{}: no restore target for stream {}", where, stream.name);
    const auto expected = static_cast<std::size_t>(stream.n_entries) * stream.entry_bytes;
    if (it->second.size() != expected)
      return make_error(ErrorCode::kInvalidArgument, "{}: stream {} needs {} bytes, target has {}", where, stream.name,
                        expected, it->second.size());
    sweep.outputs.push_back(it->second);
  }
  HIPPO_ASSIGN_OR_RETURN(auto stored, read_frontier(*db_, snapshot));
  auto stored_frontier = std::make_shared<StoredFrontier>(std::move(stored));
  auto promise = std::make_shared<std::promise<Result<std::vector<std::byte>>>>();
  FrontierInFlight frontier{promise->get_future()};
  pool().submit([this, promise, stored_frontier](std::size_t worker) {
    promise->set_value(stored_frontier->decode(*decoders_[worker]));
  });
  HIPPO_RETURN_IF_ERROR(sweep_chunks(snapshot, sweep));
  if (!sweep.problems.empty()) return sweep.problems.front();
  return frontier.decoded.get();
}

Result<VerifyReport> SessionStore::verify_session(std::string_view session_id, const ProgressFn& progress) {
  std::lock_guard lock(mutex_);
  HIPPO_RETURN_IF_ERROR(usable());
  HIPPO_ASSIGN_OR_RETURN(ReadTransaction read, ReadTransaction::begin(*db_));
  HIPPO_ASSIGN_OR_RETURN(SessionInfo session, get_session_locked(session_id));
  HIPPO_ASSIGN_OR_RETURN(auto snapshots, load_snapshot_infos(*db_, "main", session_id, -1));
  VerifyReport report;
  ChunkSweep sweep;
  sweep.stop_at_first_problem = false;
  sweep.progress = &progress;
  for (const auto& s : snapshots) sweep.progress_total += s.raw_bytes() - s.frontier_raw_bytes;
  for (const auto& snapshot : snapshots) {
    ++report.snapshots;
    if (snapshot.fingerprint != session.model_fingerprint)
      sweep.problems.push_back(make_error(ErrorCode::kFailedPrecondition,
                                          "session {}: snapshot {}: fingerprint {} differs from the session's {}",
                                          session_id, snapshot.id, snapshot.fingerprint, session.model_fingerprint));
    auto stored = read_frontier(*db_, snapshot);
    ChunkDecoder decoder;
    auto frontier = stored.ok() ? stored->decode(decoder) : Result<std::vector<std::byte>>(stored.status());
    if (!frontier.ok()) sweep.problems.push_back(frontier.status());
    HIPPO_RETURN_IF_ERROR(sweep_chunks(snapshot, sweep));
  }
  report.chunks = sweep.chunks;
  report.raw_bytes = sweep.raw_bytes;
  report.problems = std::move(sweep.problems);
  return report;
}

}  // namespace hippo::storage
