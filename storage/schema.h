// The database schema, its format version and its migrations (docs/storage-format.md).
//
// The format version in `meta` is the number of migrations applied. open_schema() applies the
// missing ones in one transaction, so a database is always at some whole version; a database
// newer than this build is refused rather than misread.
#pragma once

#include "base/status.h"
#include "storage/sqlite.h"

#include <cstdint>

namespace hippo::storage {

// 1 = the first schema (meta, tenants, api_keys, sessions, messages, snapshots, snapshot_streams,
// snapshot_chunks, kv_chunks); 2 = messages.token_ids; 3 = tenants.max_sessions and
// tenants.tokens_per_minute (per-tenant limits), sessions_by_tenant; 4 = tenants.max_prompt_tokens,
// sessions.kind; 5 = sessions.prefix_key, responses; 6 = snapshots.complete.
inline constexpr std::int64_t kFormatVersion = 6;

// Page size of new databases: 64 KiB (SQLite's largest), so that a 4 MiB chunk spans 64 overflow
// pages instead of 1,024 and blob reads and writes stay close to sequential I/O.
inline constexpr int kPageBytes = 65536;

// Reads the format version of an open database (0 for an empty file).
Result<std::int64_t> read_format_version(Db& db, std::string_view schema_name = "main");

// Checks the format version; creates or migrates the schema when `writable`. A newer version, or an
// older one on a read-only connection, is an error naming the file.
Status open_schema(Db& db, bool writable);

}  // namespace hippo::storage
