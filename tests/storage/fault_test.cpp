// Faults: corrupt, truncated and missing chunks, unknown format versions, a full disk, read-only
// and locked databases, and I/O errors injected through a faulting VFS. Each must give a clear
// error naming the session (and the chunk where there is one), never wrong bytes.
#include "storage/schema.h"
#include "storage/sqlite.h"
#include "storage/store.h"
#include "tests/storage/faulting_vfs.h"
#include "tests/storage/storage_test_util.h"

#include <catch2/catch.hpp>

using namespace hippo;
using namespace hippo::storage;
using namespace hippo::storage::testing;

namespace {

Db raw_db(const std::string& path) {
  auto db = Db::open(path, Db::Mode::kReadWrite, 1000);
  REQUIRE(db.ok());
  return std::move(db).value();
}

void exec(const std::string& path, const std::string& sql) {
  Db db = raw_db(path);
  Status s = db.exec(sql);
  INFO(s.to_string());
  REQUIRE(s.ok());
}

}  // namespace

TEST_CASE("damaged chunks give errors naming session, snapshot, stream and chunk", "[storage][fault]") {
  TempDir dir;
  const std::string path = dir.file("hippo.db");
  auto store = open_store(path);
  make_session(*store, "s1");
  REQUIRE(store->write_snapshot(TestState(default_shapes(), 40'000).request("s1")).ok());
  const std::string target = "(SELECT c.id FROM kv_chunks c WHERE c.stream = 'kv.layer20' AND c.first_entry > 0)";

  std::string expected;
  SECTION("checksum mismatch") {
    exec(path, "UPDATE kv_chunks SET checksum = checksum + 1 - 2 * (checksum & 1) WHERE id = " + target);
    expected = "checksum mismatch";
  }
  SECTION("a blob of the right size with the wrong bytes") {
    exec(path, "UPDATE kv_chunks SET blob = randomblob(length(blob)) WHERE id = " + target);
    expected = "chunk 1";
  }
  SECTION("truncated blob") {
    exec(path, "UPDATE kv_chunks SET blob = substr(blob, 1, 100) WHERE id = " + target);
    expected = "truncated blob (100 of";
  }
  SECTION("missing chunk row") {
    exec(path, "PRAGMA foreign_keys = OFF; DELETE FROM kv_chunks WHERE id = " + target);
    expected = "missing from kv_chunks";
  }
  SECTION("frontier damaged") {
    exec(path, "UPDATE snapshots SET frontier_checksum = frontier_checksum + 1 - 2 * (frontier_checksum & 1)");
    expected = "frontier";
  }
  auto latest = store->latest_snapshot("s1").value();
  REQUIRE(latest.has_value());
  auto restored = restore_into_vectors(*store, *latest);
  REQUIRE_FALSE(restored.ok());
  CHECK(restored.status().code() == ErrorCode::kCorrupt);
  CHECK_THAT(restored.status().message(), Catch::Contains("session s1: snapshot") && Catch::Contains(expected) &&
                                              Catch::Contains("rebuilt from its log"));
  if (expected != "frontier") CHECK_THAT(restored.status().message(), Catch::Contains("stream kv.layer20: chunk 1"));
  auto report = store->verify_session("s1");
  REQUIRE(report.ok());
  REQUIRE_FALSE(report->problems.empty());
  CHECK_THAT(report->problems.front().message(), Catch::Contains(expected));
}

TEST_CASE("verify reports a healthy session as healthy", "[storage][fault]") {
  TempDir dir;
  auto store = open_store(dir.file("hippo.db"));
  make_session(*store, "s1");
  REQUIRE(store->write_snapshot(TestState(default_shapes(), 30'000).request("s1")).ok());
  REQUIRE(store->write_snapshot(TestState(default_shapes(), 31'000).request("s1")).ok());
  auto report = store->verify_session("s1");
  REQUIRE(report.ok());
  CHECK(report->problems.empty());
  CHECK(report->snapshots == 2);
  CHECK(report->chunks > 0);
}

TEST_CASE("a database of an unknown format version is refused", "[storage][fault]") {
  TempDir dir;
  const std::string path = dir.file("hippo.db");
  open_store(path);
  exec(path, "UPDATE meta SET value = '99' WHERE key = 'format_version'");
  auto store = SessionStore::open(path);
  REQUIRE_FALSE(store.ok());
  CHECK_THAT(store.status().message(), Catch::Contains("unknown format version 99") && Catch::Contains(path));
  exec(path, "UPDATE meta SET value = 'x' WHERE key = 'format_version'");
  CHECK(SessionStore::open(path).status().code() == ErrorCode::kCorrupt);
}

TEST_CASE("a file that is not a hippo database is refused", "[storage][fault]") {
  TempDir dir;
  const std::string path = dir.file("other.db");
  {
    auto db = Db::open(path, Db::Mode::kReadWriteCreate, 1000);
    REQUIRE(db.ok());
    REQUIRE(db->exec("CREATE TABLE t(x)").ok());
  }
  auto store = SessionStore::open(path);
  CHECK(store.status().code() == ErrorCode::kCorrupt);
  CHECK_THAT(store.status().message(), Catch::Contains("not a hippo database"));
}

TEST_CASE("a full disk fails the snapshot cleanly and the previous one stays restorable", "[storage][fault]") {
  TempDir dir;
  const std::string path = dir.file("hippo.db");
  StoreOptions options;
  options.max_bytes = 40 << 20;  // room for the first snapshot (about 14 MB), not for the big one
  auto store = open_store(path, options);
  make_session(*store, "s1");
  TestState small(default_shapes(), 30'000);
  REQUIRE(store->write_snapshot(small.request("s1")).ok());
  TestState big(default_shapes(), 200'000, 9);  // different bytes: nothing can be reused
  auto failed = store->write_snapshot(big.request("s1"));
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.status().code() == ErrorCode::kResourceExhausted);
  CHECK_THAT(failed.status().message(), Catch::Contains("session s1") && Catch::Contains("disk full") &&
                                            Catch::Contains("chunk"));
  // Still usable: a clean failure does not close the store (invariant 5).
  require_restores_to(*store, "s1", small);
  TestState grown(default_shapes(), 31'000);
  REQUIRE(store->write_snapshot(grown.request("s1")).ok());
  require_restores_to(*store, "s1", grown);
}

TEST_CASE("a read-only database refuses writes with a clear error and still restores", "[storage][fault]") {
  TempDir dir;
  const std::string path = dir.file("hippo.db");
  TestState state(default_shapes(), 10'000);
  {
    auto store = open_store(path);
    make_session(*store, "s1");
    REQUIRE(store->write_snapshot(state.request("s1")).ok());
  }
  StoreOptions options;
  options.read_only = true;
  auto store = open_store(path, options);
  require_restores_to(*store, "s1", state);
  auto refused = store->write_snapshot(state.request("s1"));
  CHECK(refused.status().code() == ErrorCode::kFailedPrecondition);
  CHECK_THAT(refused.status().message(), Catch::Contains("read-only") && Catch::Contains("session s1"));
  CHECK(store->create_session({"s2", std::nullopt, "fp"}).status().code() == ErrorCode::kFailedPrecondition);
  require_restores_to(*store, "s1", state);
}

TEST_CASE("a locked database fails after the busy timeout with a clear error", "[storage][fault]") {
  TempDir dir;
  const std::string path = dir.file("hippo.db");
  StoreOptions options;
  options.busy_timeout_ms = 100;
  auto store = open_store(path, options);
  make_session(*store, "s1");
  TestState state(default_shapes(), 5'000);
  REQUIRE(store->write_snapshot(state.request("s1")).ok());
  Db other = raw_db(path);
  REQUIRE(other.exec("BEGIN IMMEDIATE").ok());  // another writer holds the lock
  auto refused = store->write_snapshot(TestState(default_shapes(), 6'000).request("s1"));
  CHECK(refused.status().code() == ErrorCode::kFailedPrecondition);
  CHECK_THAT(refused.status().message(), Catch::Contains("locked") && Catch::Contains("session s1"));
  require_restores_to(*store, "s1", state);  // readers are not blocked by the writer (WAL)
  REQUIRE(other.exec("ROLLBACK").ok());
  REQUIRE(store->write_snapshot(TestState(default_shapes(), 6'000).request("s1")).ok());
}

TEST_CASE("after an I/O error the store fails closed, reopened, the last commit restores", "[storage][fault]") {
  TempDir dir;
  const std::string path = dir.file("hippo.db");
  FaultingVfs vfs;
  TestState first(default_shapes(), 20'000);
  {
    auto store = open_store(path);
    make_session(*store, "s1");
    REQUIRE(store->write_snapshot(first.request("s1")).ok());
  }
  // Fail the Nth write or sync of the next snapshot, for N across the whole snapshot.
  int n_failed = 0;
  for (long n = 1; n <= 1000; n += 13) {
    INFO("fault at write " << n);
    TestState second(default_shapes(), 20'000 + n * 10, static_cast<std::uint64_t>(n));
    {
      auto store = open_store(path);
      vfs.fail_at(n);
      auto result = store->write_snapshot(second.request("s1"));
      const bool fired = vfs.fired();
      vfs.fail_at(0);
      if (!fired) {
        REQUIRE(result.ok());
        break;  // the snapshot needed fewer writes than n: the matrix is covered
      }
      if (!result.ok()) {
        ++n_failed;
        CHECK_THAT(result.status().message(), Catch::Contains("session s1"));
        if (result.status().code() == ErrorCode::kIoError) {
          auto after = store->list_sessions();
          CHECK(after.status().code() == ErrorCode::kFailedPrecondition);
          CHECK_THAT(after.status().message(), Catch::Contains("reopen"));
        }
      }
    }
    // Reopened: consistent, and the latest snapshot is exactly one of the two states.
    auto store = open_store(path);
    Db db = raw_db(path);
    Statement check = std::move(Statement::prepare(db, "PRAGMA integrity_check")).value();
    REQUIRE(check.step().value());
    CHECK(check.column_text(0) == "ok");
    auto latest = store->latest_snapshot("s1").value();
    REQUIRE(latest.has_value());
    require_restores_to(*store, "s1", latest->n_tokens == first.n_tokens() ? first : second);
    if (latest->n_tokens != first.n_tokens()) {  // it committed: make the next round start from `first` again
      REQUIRE(store->write_snapshot(first.request("s1")).ok());
    }
  }
  CHECK(n_failed > 10);
}
