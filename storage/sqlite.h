// Small RAII wrappers over the sqlite3 C API: a connection, a prepared statement and a
// transaction guard, plus the mapping from SQLite result codes to hippo's ErrorCode. No ORM:
// callers write SQL, bind values by position and read columns by index.
//
// Why our own: storage needs exact control of transactions (one per snapshot), of blob binding
// without copies (SQLITE_STATIC) and of how each failure is classified (full disk, locked,
// read-only, corrupt), which generic wrappers hide.
#pragma once

#include "base/status.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

struct sqlite3;
struct sqlite3_stmt;
struct sqlite3_blob;

namespace hippo::storage {

// Translates a SQLite result code into a Status: SQLITE_FULL -> kResourceExhausted ("disk full"),
// SQLITE_BUSY/LOCKED -> kFailedPrecondition ("locked"), SQLITE_READONLY -> kFailedPrecondition,
// SQLITE_CORRUPT/NOTADB -> kCorrupt, SQLITE_IOERR -> kIoError, anything else kInternal.
// kIoError is what the store treats as uncertain (store.h, invariant 5).
Status sqlite_status(int code, std::string_view what, std::string_view detail);

class Db {
 public:
  enum class Mode { kReadWriteCreate, kReadWrite, kReadOnly };

  Db() = default;
  ~Db();
  Db(Db&& other) noexcept;
  Db& operator=(Db&& other) noexcept;
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  static Result<Db> open(const std::string& path, Mode mode, int busy_timeout_ms);

  // Runs one or more statements without results ("PRAGMA ...; CREATE ...").
  Status exec(std::string_view sql);
  // Runs a statement yielding one integer (a PRAGMA or a count).
  Result<std::int64_t> query_int(std::string_view sql);

  std::int64_t last_insert_rowid() const;
  int changes() const;
  sqlite3* handle() const { return db_; }
  const std::string& path() const { return path_; }
  bool is_open() const { return db_ != nullptr; }

  // The Status for the connection's most recent failure, with `what` as context.
  Status error(int code, std::string_view what) const;

  // Waits (up to max_wait) while another connection of this process waits for the write lock. A
  // writer that commits many short transactions in a row calls it before each, so that the others
  // get the lock in between: SQLite's busy handler only polls, and would mostly find it taken.
  void yield_to_waiting_writers(std::chrono::milliseconds max_wait) const;

  struct BusyWait;  // the busy handler's state (on the heap: a Db moves)

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
  std::unique_ptr<BusyWait> busy_;
};

class Statement {
 public:
  Statement() = default;
  ~Statement();
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  static Result<Statement> prepare(Db& db, std::string_view sql);

  // Binding (1-based like SQLite). Blobs and text are bound without a copy: the bytes must stay
  // valid until the statement is stepped and reset.
  Statement& bind(int index, std::int64_t value);
  Statement& bind(int index, double value);
  Statement& bind(int index, std::string_view text);
  Statement& bind_blob(int index, std::span<const std::byte> blob);
  Statement& bind_null(int index);

  // Steps once: true while a row is available, false when done, or an error.
  Result<bool> step();
  // Steps a statement that returns no rows, then resets it for reuse.
  Status run();
  void reset();

  std::int64_t column_int(int index) const;
  double column_double(int index) const;
  std::string column_text(int index) const;
  // Valid until the next step or reset.
  std::span<const std::byte> column_blob(int index) const;
  bool column_is_null(int index) const;

 private:
  Db* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  Status bind_status_;
};

// Reads whole blobs of one column row by row with SQLite's incremental blob I/O: one copy from the
// database pages into the caller's buffer, where a SELECT of the column would copy twice.
class BlobReader {
 public:
  BlobReader(Db& db, std::string table, std::string column)
      : db_(&db), table_(std::move(table)), column_(std::move(column)) {}
  ~BlobReader();
  BlobReader(const BlobReader&) = delete;
  BlobReader& operator=(const BlobReader&) = delete;

  // Replaces out with the blob of row `rowid`.
  Status read(std::int64_t rowid, std::vector<std::byte>& out);

 private:
  Db* db_;
  std::string table_;
  std::string column_;
  sqlite3_blob* blob_ = nullptr;
};

// BEGIN IMMEDIATE on construction (takes the write lock up front, so a locked database fails
// before any work), ROLLBACK on destruction unless commit() succeeded.
class Transaction {
 public:
  static Result<Transaction> begin(Db& db);
  Transaction(Transaction&& other) noexcept;
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  ~Transaction();

  Status commit();
  // Rolls back now; an error here means the file's state is uncertain.
  Status rollback();

 private:
  explicit Transaction(Db& db) : db_(&db) {}
  Db* db_;
  bool open_ = true;
};

}  // namespace hippo::storage
