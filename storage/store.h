// SessionStore: hippo's durable home for agent sessions — their conversation log and their KV
// snapshots — in one SQLite database (docs/storage-format.md). Model-agnostic: a snapshot is a set
// of named, append-only byte streams with a fixed size per entry, plus one frontier blob; what the
// bytes mean is the engine's business, told to us only through the model fingerprint.
//
// Durability invariants (the code refers to them as "keeps (n)"):
//   (1) A snapshot becomes visible in one transaction, all of it or nothing. It is written in
//       short transactions (its row marked incomplete, then its chunks a few MB at a time, then
//       the frontier and the mark that completes it), so the one SQLite writer lock is never
//       held for long and other connections' writes (the conversation log) slip in between.
//       Readers see complete snapshots only. A process killed at any moment leaves the previous
//       snapshot intact and restorable (tests/storage/crash_test.cpp kills writers to prove it);
//       the incomplete one is removed by the session's next snapshot.
//   (2) Chunks are immutable once written and may be shared by several snapshots and sessions
//       (incremental snapshots, forks). A chunk is deleted only when no snapshot references it.
//   (3) A snapshot reuses a previous chunk only if the caller's bytes for that entry range still
//       hash to the chunk's checksum; everything past the last reused chunk is written anew, so an
//       incremental snapshot restores exactly what the caller held, even after a rewind.
//   (4) Every byte handed back was checked: chunk checksums (xxh3-64 of the raw bytes), blob
//       sizes, entry coverage of each stream, the frontier checksum and the model fingerprint.
//       A mismatch is a kCorrupt / kFailedPrecondition error naming the session, the snapshot, the
//       stream and the chunk; nothing wrong is ever returned silently.
//   (5) Fails closed: after an uncertain write (an I/O error, a failed COMMIT or ROLLBACK) the
//       store refuses every further call until it is reopened. Clean failures (disk full, locked,
//       read-only, bad input) roll back and leave it usable.
//   (6) Memory is bounded by the chunk size, not the snapshot size: at most
//       kMaxChunksInFlight chunks are being encoded or decoded at once, and SQLite's page cache is
//       capped (kCacheKiB); a 1M-token snapshot streams through the same ~40 MB as a 1K one.
//   (7) Formats are versioned: a database newer than this build is refused (schema.h).
//
// A snapshot's life:
//
//       write_snapshot()                     a newer snapshot of the session
//   ───────────────────▶ [writing] ──commit──▶ [latest] ───────────────────────▶ [kept]
//                           │  crash or error                                       │ more than
//                           ▼                                                       │ keep_snapshots
//                     [rolled back: never visible]                                  ▼ newer ones
//                                           fork_session() ─▶ copy in the fork   [pruned] ─ its
//                                           export_session() ─▶ copy in a file      chunks no one
//                                           remove_session() ─▶ [pruned]            references ─▶ gc
//
// Threading: one SessionStore is one SQLite connection; calls on it are serialised by an internal
// mutex. Open one store per thread that needs to work in parallel (KvSnapshotWriter does); WAL mode
// lets readers run beside the one writer.
#pragma once

#include "base/status.h"
#include "storage/chunk_codec.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hippo::storage {

class Db;
class Transaction;
class WorkerPool;
struct ChunkSweep;

// 4 MiB = "a few MB": large enough that zstd and SQLite run at streaming speed, small enough that
// kMaxChunksInFlight of them fit the 64 MB memory budget with room to spare.
inline constexpr std::size_t kChunkTargetBytes = std::size_t{4} << 20;
// Chunks being encoded or decoded at once; each costs up to ~3 x kChunkTargetBytes (raw copy or
// filter scratch, compressed bytes).
inline constexpr std::size_t kMaxChunksInFlight = 4;
// SQLite page cache per connection: 8 MiB. Dirty pages beyond it spill to the WAL, not to RAM.
inline constexpr int kCacheKiB = 8192;
// The WAL file is truncated to this size after a checkpoint: a 1M-token snapshot passes through
// the WAL once (~0.8 GB) and does not keep its disk space afterwards.
inline constexpr std::int64_t kWalKeepBytes = std::int64_t{64} << 20;

struct StoreOptions {
  bool read_only = false;
  bool create = true;             // create the file when missing (else a missing file is kNotFound)
  int busy_timeout_ms = 5000;     // how long to wait for another writer before "database is locked"
  std::int64_t max_bytes = 0;     // 0: no limit; else the database may not grow beyond this size
  bool sync_full = true;          // fsync the WAL at every commit (a committed snapshot survives power loss)
  int zstd_level = 3;
  std::size_t codec_threads = 2;  // chunk encode/decode workers beside the calling thread
  int codec_nice = 0;             // > 0: they run at this lower priority (KvSnapshotWriter's: background)
  int keep_snapshots = 2;         // per session: the latest and the one before it
  // true: SQLite copies the WAL into the database file inside whichever commit crosses 64 MiB.
  // false: the owner calls checkpoint() when it suits it (KvSnapshotWriter does, after a
  // snapshot's future is ready, so the copy is not part of the snapshot's latency).
  bool auto_checkpoint = true;
};

// Of a tenant's open sessions keyed with one of the keys asked for: the one whose key comes latest
// in the list (the longest conversation prefix), and that key's index.
struct PrefixMatch {
  std::string session_id;
  std::size_t key_index = 0;
};

// A stored response object of OpenAI's Responses API (format 5); conversation and body are JSON
// text, opaque here.
struct StoredResponse {
  std::string id;
  std::optional<std::int64_t> tenant_id;
  std::string session_id;
  std::int64_t created_at = 0;
  std::string conversation;
  std::string body;
};

// What made a session (format version 4): kept until removed, or the temporary session of a
// stateless HTTP request, removed under a retention rule (apply_retention).
inline constexpr std::string_view kSessionKindAgent = "agent";
inline constexpr std::string_view kSessionKindCompletion = "completion";

struct SessionInfo {
  std::string id;
  std::optional<std::int64_t> tenant_id;
  std::string model_fingerprint;
  std::string status;
  std::string settings;  // JSON text, opaque here
  std::string forked_from;
  std::int64_t created_at = 0;
  std::int64_t updated_at = 0;
  std::string kind = std::string(kSessionKindAgent);
};

struct NewSession {
  std::string id;  // empty: the store makes one ("s_" + 16 hex digits)
  std::optional<std::int64_t> tenant_id;
  std::string model_fingerprint;
  std::string settings = "{}";
  std::string status = "ready";
  std::string kind = std::string(kSessionKindAgent);
};

struct MessageRecord {
  std::int64_t seq = 0;  // assigned by append_message()
  std::string role;
  std::string content;     // bytes, stored as a blob: byte-exact
  std::string tool_calls;  // DSML as sampled, byte-exact; empty when none
  std::int64_t first_token = 0;
  std::int64_t n_tokens = 0;
  std::int64_t created_at = 0;
  std::vector<std::int32_t> token_ids;  // the ids the model saw, when the writer keeps them
};

// One append-only stream of a session state, as the caller holds it in memory.
struct StreamData {
  std::string name;            // "kv.layer2", "index.layer2", "token_ids", ...
  std::size_t entry_bytes = 0;
  Filter filter = Filter::kBytePlane;
  std::span<const std::byte> bytes;  // n_entries x entry_bytes
};

struct SnapshotRequest {
  std::string session_id;
  std::string fingerprint;  // must equal the session's model fingerprint
  std::int64_t n_tokens = 0;
  std::vector<std::byte> frontier;
  std::vector<StreamData> streams;
  std::shared_ptr<const void> owner;  // keeps the streams' bytes alive (KvSnapshotWriter holds it)
};

struct StreamInfo {
  std::string name;
  std::size_t entry_bytes = 0;
  Filter filter = Filter::kNone;
  std::int64_t n_entries = 0;
  std::int64_t n_chunks = 0;
  std::int64_t raw_bytes = 0;
  std::int64_t stored_bytes = 0;
};

struct SnapshotInfo {
  std::int64_t id = 0;
  std::string session_id;
  std::optional<std::int64_t> parent_id;
  std::int64_t n_tokens = 0;
  std::string fingerprint;
  std::int64_t frontier_raw_bytes = 0;
  std::int64_t frontier_stored_bytes = 0;
  std::int64_t created_at = 0;
  std::vector<StreamInfo> streams;

  std::int64_t raw_bytes() const;     // streams + frontier
  std::int64_t stored_bytes() const;  // streams + frontier, as stored
};

struct SnapshotWriteStats {
  std::int64_t snapshot_id = 0;
  std::int64_t raw_bytes = 0;             // the whole state
  std::int64_t written_raw_bytes = 0;     // raw bytes of the chunks this snapshot wrote
  std::int64_t written_stored_bytes = 0;  // what they took on disk, frontier included
  std::int64_t frontier_stored_bytes = 0; // the frontier's share of it (rewritten by every snapshot)
  std::int64_t reused_chunks = 0;
  std::int64_t written_chunks = 0;
};

// Where restore puts one stream: exactly n_entries x entry_bytes of caller memory.
struct RestoreTarget {
  std::string name;
  std::span<std::byte> bytes;
};

struct VerifyReport {
  std::int64_t snapshots = 0;
  std::int64_t chunks = 0;
  std::int64_t raw_bytes = 0;
  std::vector<Status> problems;  // empty: everything checked out
};

// Which closed sessions of a kind to keep: none older than max_age_seconds, and the newest ones
// whose bytes (log + the KV chunks they wrote) add up to at most max_bytes. 0: no bound.
struct RetentionRule {
  std::int64_t max_age_seconds = 0;
  std::int64_t max_bytes = 0;
};

struct RetentionStats {
  std::int64_t sessions_removed = 0;
  std::int64_t bytes_removed = 0;  // their logs and the chunks they wrote (shared chunks stay until gc())
  std::int64_t sessions_kept = 0;
  std::int64_t bytes_kept = 0;
};

struct GcStats {
  std::int64_t chunks_removed = 0;
  std::int64_t bytes_removed = 0;
};

// A tenant's own limits (format version 3). nullopt: the server's default applies; 0: no limit.
struct TenantLimits {
  std::optional<std::int64_t> max_sessions;       // sessions open (not closed) at once
  std::optional<std::int64_t> tokens_per_minute;  // input + output tokens over a sliding minute
  std::optional<std::int64_t> max_prompt_tokens;  // prompt tokens one request may render to
};

struct TenantInfo {
  std::int64_t id = 0;
  std::string name;
  TenantLimits limits;
  std::int64_t created_at = 0;
};

// An API key as listed: never the key itself (only its hash is stored).
struct ApiKeyInfo {
  std::int64_t id = 0;
  std::int64_t tenant_id = 0;
  std::string tenant;  // the tenant's name
  std::string label;
  std::int64_t created_at = 0;
  std::optional<std::int64_t> revoked_at;
};

// SHA-256 of an API key: what the database stores and compares. Keys have at least 16 characters.
using ApiKeyHash = std::array<std::byte, 32>;
Result<ApiKeyHash> api_key_hash(std::string_view key);
// A new high-entropy key: "hk_" + 43 base64url characters (32 bytes from OpenSSL's RAND_bytes).
Result<std::string> new_api_key();

// Called with bytes done and bytes total while long work runs.
using ProgressFn = std::function<void(std::int64_t done, std::int64_t total)>;

class SessionStore {
 public:
  static Result<std::unique_ptr<SessionStore>> open(const std::string& path, const StoreOptions& options = {});
  ~SessionStore();
  SessionStore(const SessionStore&) = delete;
  SessionStore& operator=(const SessionStore&) = delete;

  const std::string& path() const;
  const StoreOptions& options() const { return options_; }

  // Sessions and their conversation log.
  Result<SessionInfo> create_session(const NewSession& session);
  Result<SessionInfo> get_session(std::string_view id);
  Result<std::vector<SessionInfo>> list_sessions();
  Result<std::vector<SessionInfo>> list_tenant_sessions(std::int64_t tenant_id);
  // Sessions of the tenant whose status is not "closed" and that hold no prefix key (idle prefix
  // sessions are a cache, bounded on their own).
  Result<std::int64_t> count_open_sessions(std::int64_t tenant_id);
  Status set_session_status(std::string_view id, std::string_view status);
  Status remove_session(std::string_view id);  // its snapshots go; chunks wait for gc()
  Result<std::int64_t> append_message(std::string_view session_id, const MessageRecord& message);
  Result<std::vector<MessageRecord>> list_messages(std::string_view session_id);

  // Prefix keys (format 5): an open session may carry the key of the conversation it holds
  // (nullopt removes it); setting one also marks the session used now.
  Status set_prefix_key(std::string_view id, std::optional<std::string_view> key);
  // Among the open sessions of the tenant (none: those without one), the one keyed with the latest
  // of `keys` (the most recently used on a tie).
  Result<std::optional<PrefixMatch>> find_prefix_session(std::optional<std::int64_t> tenant_id,
                                                         std::span<const std::string> keys);
  // Open keyed sessions to close: the tenant's beyond its `keep` most recently used.
  Result<std::vector<std::string>> excess_prefix_sessions(std::optional<std::int64_t> tenant_id, std::int64_t keep);
  // Open keyed sessions of every tenant last used before `before` (Unix seconds).
  Result<std::vector<std::string>> prefix_sessions_unused_since(std::int64_t before);

  // Stored responses: written once; read and deleted only by their tenant (another tenant's reads
  // as none). created_at is set here.
  Status put_response(const StoredResponse& response);
  Result<std::optional<StoredResponse>> get_response(std::string_view id, std::optional<std::int64_t> tenant_id);
  Result<bool> delete_response(std::string_view id, std::optional<std::int64_t> tenant_id);
  // Removes those created before `before` (Unix seconds); returns how many.
  Result<std::int64_t> remove_responses_before(std::int64_t before);

  // Tenants and API keys. Keys are stored as SHA-256 hashes only.
  Result<std::int64_t> create_tenant(std::string_view name);
  Result<TenantInfo> get_tenant(std::int64_t id);
  Result<std::optional<TenantInfo>> find_tenant(std::string_view name);
  // The tenant of that name, created when missing.
  Result<TenantInfo> ensure_tenant(std::string_view name);
  Status set_tenant_limits(std::int64_t tenant_id, const TenantLimits& limits);
  // Returns the key's id.
  Result<std::int64_t> add_api_key(std::int64_t tenant_id, std::string_view key, std::string_view label);
  Result<std::optional<std::int64_t>> tenant_for_api_key(std::string_view key);  // nullopt: unknown or revoked
  Status revoke_api_key(std::string_view key);
  Status revoke_api_key(std::int64_t key_id);
  Result<std::vector<ApiKeyInfo>> list_api_keys();
  Result<std::int64_t> count_api_keys();  // revoked ones included
  // Gives every session without a tenant (made before API keys existed, or imported: tenants are
  // per database) to the tenant of that name, created if needed; returns how many there were.
  Result<std::int64_t> adopt_untenanted_sessions(std::string_view tenant_name);

  // Snapshots. write_snapshot() runs on the calling thread (KvSnapshotWriter moves it off the
  // engine's); the streams' bytes must not change until it returns.
  Result<SnapshotWriteStats> write_snapshot(const SnapshotRequest& request);
  Result<std::optional<SnapshotInfo>> latest_snapshot(std::string_view session_id);
  Result<std::vector<SnapshotInfo>> list_snapshots(std::string_view session_id);
  // Restores every stream of the snapshot into targets (one per stream, exact sizes) and returns
  // the frontier. expected_fingerprint must equal the snapshot's (keeps (4)).
  Result<std::vector<std::byte>> restore_snapshot(const SnapshotInfo& snapshot, std::string_view expected_fingerprint,
                                                  std::span<const RestoreTarget> targets,
                                                  const ProgressFn& progress = {});
  // Decodes and checks every chunk of every snapshot of the session.
  Result<VerifyReport> verify_session(std::string_view session_id, const ProgressFn& progress = {});

  // A new session with the source's log and latest snapshot; chunks are shared, not copied (2).
  Result<SessionInfo> fork_session(std::string_view source_id, std::string_view new_id = {});
  Result<GcStats> gc();
  // Removes the closed sessions of `kind` that `rule` does not keep (their chunks wait for gc()).
  Result<RetentionStats> apply_retention(std::string_view kind, const RetentionRule& rule, std::int64_t now);
  // Copies committed WAL content into the database file without blocking readers or writers
  // (a passive checkpoint); the WAL file is then cut back to kWalKeepBytes.
  Status checkpoint();

  // Export writes a new portable database file holding the session, its log and its latest
  // snapshot. Import checks the file's format version, every chunk's checksum and, when given,
  // the fingerprint, then adds the session (renamed to new_id when given).
  Status export_session(std::string_view session_id, const std::string& file, const ProgressFn& progress = {});
  Result<SessionInfo> import_session(const std::string& file, std::string_view expected_fingerprint = {},
                                     std::string_view new_id = {}, const ProgressFn& progress = {});

 private:
  SessionStore(std::unique_ptr<Db> db, const StoreOptions& options);

  Status usable() const;
  // Records an uncertain failure so that the store fails closed (keeps (5)); returns the status.
  Status note_failure(Status status);
  WorkerPool& pool();
  Result<SessionInfo> get_session_locked(std::string_view id);
  Result<SnapshotWriteStats> write_snapshot_locked(const SnapshotRequest& request);
  Status write_snapshot_content(const SnapshotRequest& request, const std::optional<SnapshotInfo>& previous,
                                const std::string& context, SnapshotWriteStats& stats);
  Status commit_or_fail_closed(Transaction& tx);
  // Reads, decodes and checks every chunk of one snapshot (snapshot_read.cpp).
  Status sweep_chunks(const SnapshotInfo& snapshot, ChunkSweep& sweep);
  // The session's complete snapshots beyond keep_snapshots, the newest kept.
  Status prune_snapshots(std::string_view session_id);
  Status remove_incomplete_snapshots(std::string_view session_id);
  // Deletes the snapshots and the chunks no other snapshot references (2); inside a transaction.
  Status remove_snapshots(std::span<const std::int64_t> ids);

  std::mutex mutex_;
  std::unique_ptr<Db> db_;
  StoreOptions options_;
  // One encoder and one decoder per pool worker; declared before pool_ so they outlive its threads.
  std::vector<std::unique_ptr<ChunkEncoder>> encoders_;
  std::vector<std::unique_ptr<ChunkDecoder>> decoders_;
  std::unique_ptr<WorkerPool> pool_;
  Status failed_;
};

}  // namespace hippo::storage
