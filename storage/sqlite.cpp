// The sqlite3 C API behind storage/sqlite.h.
#include "storage/sqlite.h"

#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include <utility>

namespace hippo::storage {

Status sqlite_status(int code, std::string_view what, std::string_view detail) {
  const int primary = code & 0xff;
  switch (primary) {
    case SQLITE_FULL:
      return make_error(ErrorCode::kResourceExhausted, "{}: disk full or database size limit reached ({})", what, detail);
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return make_error(ErrorCode::kFailedPrecondition,
                        "{}: database is locked by another connection ({}); retry, or stop the other writer", what,
                        detail);
    case SQLITE_READONLY:
      return make_error(ErrorCode::kFailedPrecondition, "{}: database is read-only ({})", what, detail);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return make_error(ErrorCode::kCorrupt, "{}: database file is corrupt or not a database ({})", what, detail);
    case SQLITE_IOERR:
      return make_error(ErrorCode::kIoError, "{}: I/O error ({})", what, detail);
    case SQLITE_CANTOPEN:
      return make_error(ErrorCode::kNotFound, "{}: cannot open database file ({})", what, detail);
    case SQLITE_CONSTRAINT:
      return make_error(ErrorCode::kAlreadyExists, "{}: {}", what, detail);
    default:
      return make_error(ErrorCode::kInternal, "{}: SQLite error {} ({})", what, code, detail);
  }
}

Db::~Db() {
  if (db_) sqlite3_close_v2(db_);
}

Db::Db(Db&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)), path_(std::move(other.path_)), busy_(std::move(other.busy_)) {}

Db& Db::operator=(Db&& other) noexcept {
  if (this != &other) {
    if (db_) sqlite3_close_v2(db_);
    db_ = std::exchange(other.db_, nullptr);
    path_ = std::move(other.path_);
    busy_ = std::move(other.busy_);
  }
  return *this;
}

struct Db::BusyWait {
  std::chrono::milliseconds timeout;
  std::chrono::steady_clock::time_point since;
};

namespace {

// When a connection of this process last waited for a lock, and which one (its BusyWait).
std::atomic<std::chrono::steady_clock::rep> g_last_wait{0};
std::atomic<const void*> g_last_waiter{nullptr};
constexpr auto kWaitSignal = std::chrono::milliseconds(2);  // a wait this recent is still going on

// Polls every 100 µs for the first 2 ms, then every ms, until the timeout; each poll tells
// yield_to_waiting_writers() that this connection is waiting.
int busy_handler(void* arg, int count) {
  auto* wait = static_cast<Db::BusyWait*>(arg);
  const auto now = std::chrono::steady_clock::now();
  if (count == 0) wait->since = now;
  if (now - wait->since >= wait->timeout) return 0;
  g_last_wait.store(now.time_since_epoch().count());
  g_last_waiter.store(wait);
  std::this_thread::sleep_for(count < 20 ? std::chrono::microseconds(100) : std::chrono::microseconds(1000));
  return 1;
}

}  // namespace

void Db::yield_to_waiting_writers(std::chrono::milliseconds max_wait) const {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + max_wait;
  for (auto now = Clock::now(); now < deadline; now = Clock::now()) {
    const Clock::time_point last{Clock::duration(g_last_wait.load())};
    if (g_last_waiter.load() == busy_.get() || now - last > kWaitSignal) return;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

Result<Db> Db::open(const std::string& path, Mode mode, int busy_timeout_ms) {
  int flags = SQLITE_OPEN_NOMUTEX;
  switch (mode) {
    case Mode::kReadWriteCreate: flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE; break;
    case Mode::kReadWrite: flags |= SQLITE_OPEN_READWRITE; break;
    case Mode::kReadOnly: flags |= SQLITE_OPEN_READONLY; break;
  }
  Db db;
  db.path_ = path;
  const int rc = sqlite3_open_v2(path.c_str(), &db.db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string detail = db.db_ ? sqlite3_errmsg(db.db_) : sqlite3_errstr(rc);
    return sqlite_status(rc, "database " + path, detail);
  }
  sqlite3_extended_result_codes(db.db_, 1);
  db.busy_ = std::make_unique<BusyWait>(BusyWait{std::chrono::milliseconds(std::max(0, busy_timeout_ms)), {}});
  sqlite3_busy_handler(db.db_, busy_handler, db.busy_.get());
  return db;
}

Status Db::error(int code, std::string_view what) const {
  return sqlite_status(code, what, db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(code));
}

Status Db::exec(std::string_view sql) {
  std::string owned(sql);
  const int rc = sqlite3_exec(db_, owned.c_str(), nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return error(rc, "database " + path_);
  return {};
}

Result<std::int64_t> Db::query_int(std::string_view sql) {
  HIPPO_ASSIGN_OR_RETURN(Statement stmt, Statement::prepare(*this, sql));
  HIPPO_ASSIGN_OR_RETURN(bool row, stmt.step());
  if (!row) return make_error(ErrorCode::kInternal, "database {}: no row from '{}'", path_, sql);
  return stmt.column_int(0);
}

std::int64_t Db::last_insert_rowid() const { return sqlite3_last_insert_rowid(db_); }
int Db::changes() const { return sqlite3_changes(db_); }

Statement::~Statement() {
  if (stmt_) sqlite3_finalize(stmt_);
}

Statement::Statement(Statement&& other) noexcept
    : db_(other.db_), stmt_(std::exchange(other.stmt_, nullptr)), bind_status_(std::move(other.bind_status_)) {}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    if (stmt_) sqlite3_finalize(stmt_);
    db_ = other.db_;
    stmt_ = std::exchange(other.stmt_, nullptr);
    bind_status_ = std::move(other.bind_status_);
  }
  return *this;
}

Result<Statement> Statement::prepare(Db& db, std::string_view sql) {
  Statement stmt;
  stmt.db_ = &db;
  const int rc = sqlite3_prepare_v3(db.handle(), sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT,
                                    &stmt.stmt_, nullptr);
  if (rc != SQLITE_OK) return db.error(rc, "database " + db.path());
  return stmt;
}

namespace {
Status bind_result(Db* db, int rc) {
  if (rc == SQLITE_OK) return {};
  return db->error(rc, "database " + db->path() + ": bind");
}
}  // namespace

Statement& Statement::bind(int index, std::int64_t value) {
  if (bind_status_.ok()) bind_status_ = bind_result(db_, sqlite3_bind_int64(stmt_, index, value));
  return *this;
}

Statement& Statement::bind(int index, double value) {
  if (bind_status_.ok()) bind_status_ = bind_result(db_, sqlite3_bind_double(stmt_, index, value));
  return *this;
}

Statement& Statement::bind(int index, std::string_view text) {
  if (bind_status_.ok())
    bind_status_ =
        bind_result(db_, sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_STATIC, SQLITE_UTF8));
  return *this;
}

Statement& Statement::bind_blob(int index, std::span<const std::byte> blob) {
  // A zero-length blob must still be a blob, not NULL: SQLite binds NULL for a null pointer.
  static const std::byte kEmpty{};
  const void* data = blob.empty() ? &kEmpty : blob.data();
  if (bind_status_.ok()) bind_status_ = bind_result(db_, sqlite3_bind_blob64(stmt_, index, data, blob.size(), SQLITE_STATIC));
  return *this;
}

Statement& Statement::bind_null(int index) {
  if (bind_status_.ok()) bind_status_ = bind_result(db_, sqlite3_bind_null(stmt_, index));
  return *this;
}

Result<bool> Statement::step() {
  if (!bind_status_.ok()) return std::exchange(bind_status_, Status{});
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  Status status = db_->error(rc, "database " + db_->path());
  sqlite3_reset(stmt_);
  return status;
}

Status Statement::run() {
  HIPPO_ASSIGN_OR_RETURN(bool row, step());
  (void)row;
  reset();
  return {};
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  bind_status_ = {};
}

std::int64_t Statement::column_int(int index) const { return sqlite3_column_int64(stmt_, index); }
double Statement::column_double(int index) const { return sqlite3_column_double(stmt_, index); }

std::string Statement::column_text(int index) const {
  const auto* text = sqlite3_column_text(stmt_, index);
  const int n = sqlite3_column_bytes(stmt_, index);
  return text ? std::string(reinterpret_cast<const char*>(text), static_cast<std::size_t>(n)) : std::string();
}

std::span<const std::byte> Statement::column_blob(int index) const {
  const void* data = sqlite3_column_blob(stmt_, index);
  const int n = sqlite3_column_bytes(stmt_, index);
  return {static_cast<const std::byte*>(data), static_cast<std::size_t>(n)};
}

bool Statement::column_is_null(int index) const { return sqlite3_column_type(stmt_, index) == SQLITE_NULL; }

BlobReader::~BlobReader() {
  if (blob_) sqlite3_blob_close(blob_);
}

Status BlobReader::read(std::int64_t rowid, std::vector<std::byte>& out) {
  int rc = blob_ ? sqlite3_blob_reopen(blob_, rowid)
                 : sqlite3_blob_open(db_->handle(), "main", table_.c_str(), column_.c_str(), rowid, 0, &blob_);
  if (rc != SQLITE_OK) return db_->error(rc, fmt::format("database {}: {} row {}", db_->path(), table_, rowid));
  out.resize(static_cast<std::size_t>(sqlite3_blob_bytes(blob_)));
  rc = sqlite3_blob_read(blob_, out.data(), static_cast<int>(out.size()), 0);
  if (rc != SQLITE_OK) return db_->error(rc, fmt::format("database {}: {} row {}", db_->path(), table_, rowid));
  return {};
}

Result<Transaction> Transaction::begin(Db& db) {
  HIPPO_RETURN_IF_ERROR(db.exec("BEGIN IMMEDIATE"));
  return Transaction(db);
}

Transaction::Transaction(Transaction&& other) noexcept : db_(other.db_), open_(std::exchange(other.open_, false)) {}

Transaction::~Transaction() {
  if (open_) (void)rollback();
}

Status Transaction::commit() {
  Status status = db_->exec("COMMIT");
  if (status.ok()) open_ = false;
  return status;
}

Status Transaction::rollback() {
  open_ = false;
  // After some errors SQLite has already rolled back; ROLLBACK then fails harmlessly.
  if (sqlite3_get_autocommit(db_->handle())) return {};
  return db_->exec("ROLLBACK");
}

}  // namespace hippo::storage
