// Helpers shared by the files that implement SessionStore (store.cpp, snapshot_write.cpp,
// snapshot_read.cpp, transfer.cpp, tenants.cpp). Not part of the storage interface.
#pragma once

#include "storage/chunk_codec.h"
#include "storage/sqlite.h"
#include "storage/store.h"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hippo::storage {

std::int64_t unix_now();

// WAL mode, synchronous level, foreign keys, cache size and the size limit of one connection.
Status configure_connection(Db& db, const StoreOptions& options, bool fresh);

inline constexpr std::string_view kSessionColumns =
    "id, tenant_id, model_fingerprint, status, settings, coalesce(forked_from, ''), created_at, updated_at, kind";
SessionInfo read_session_row(const Statement& stmt);

// One row of kv_chunks as a snapshot's chunk map sees it, in stream order.
struct ChunkRow {
  std::int64_t id = 0;
  std::int64_t seq = 0;
  std::int64_t first_entry = 0;
  std::int64_t n_entries = 0;
  std::int64_t entry_bytes = 0;
  std::int64_t filter = 0;
  std::int64_t codec = 0;
  std::int64_t raw_bytes = 0;
  std::int64_t stored_bytes = 0;
  std::uint64_t checksum = 0;
};

// The chunks of one stream of one snapshot, in order, without their blobs.
Result<std::vector<ChunkRow>> load_chunk_rows(Db& db, std::int64_t snapshot_id, std::int64_t stream_index);

// The snapshots of a session, newest first (at most `limit` when given), with their streams.
Result<std::vector<SnapshotInfo>> load_snapshot_infos(Db& db, std::string_view schema, std::string_view session_id,
                                                      int limit);

// One snapshot, by id (nullopt when it no longer exists), with its streams.
Result<std::optional<SnapshotInfo>> load_snapshot_info(Db& db, std::int64_t snapshot_id);

// What SessionStore::sweep_chunks() does with each decoded chunk: write it into the caller's
// memory (restore) or only check it (verify), and whether to stop at the first problem.
struct ChunkSweep {
  std::vector<std::span<std::byte>> outputs;  // per stream, in stream order; empty: check only
  bool stop_at_first_problem = true;
  std::vector<Status> problems;
  std::int64_t chunks = 0;
  std::int64_t raw_bytes = 0;  // decoded so far, over every sweep with this object (verify runs several)
  std::int64_t progress_total = 0;
  const ProgressFn* progress = nullptr;
};

// "session s_1: snapshot 7: stream kv.layer8: chunk 17 (entries 14563..29126)": the prefix of
// every error about one chunk (keeps (4)).
std::string chunk_context(std::string_view session_id, std::int64_t snapshot_id, std::string_view stream,
                          const ChunkRow& chunk);

// Checksums are unsigned 64-bit; SQLite integers are signed. Stored bit for bit.
inline std::int64_t to_sql(std::uint64_t checksum) { return static_cast<std::int64_t>(checksum); }
inline std::uint64_t from_sql(std::int64_t checksum) { return static_cast<std::uint64_t>(checksum); }

}  // namespace hippo::storage
