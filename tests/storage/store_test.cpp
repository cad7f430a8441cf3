// SessionStore against real SQLite files: sessions and their log, snapshots (full, incremental,
// rewound), pruning, forks, gc, export and import.
#include "storage/kv_snapshot_writer.h"
#include "storage/schema.h"
#include "storage/sqlite.h"
#include "storage/store.h"
#include "tests/storage/storage_test_util.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <thread>
#include <iterator>

using namespace hippo;
using namespace hippo::storage;
using namespace hippo::storage::testing;

namespace {

std::int64_t count_rows(const std::string& path, const std::string& sql) {
  auto db = Db::open(path, Db::Mode::kReadOnly, 1000);
  REQUIRE(db.ok());
  auto n = db->query_int(sql);
  REQUIRE(n.ok());
  return *n;
}

}  // namespace

TEST_CASE("a new database gets the schema, WAL mode and the format version", "[storage]") {
  TempDir dir;
  const std::string path = dir.file("hippo.db");
  open_store(path);
  CHECK(count_rows(path, "SELECT value FROM meta WHERE key = 'format_version'") == kFormatVersion);
  CHECK(count_rows(path, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN ('meta', 'tenants', "
                         "'api_keys', 'sessions', 'messages', 'snapshots', 'kv_chunks')") == 7);
  auto db = Db::open(path, Db::Mode::kReadOnly, 1000);
  REQUIRE(db.ok());
  Statement mode = std::move(Statement::prepare(*db, "PRAGMA journal_mode")).value();
  REQUIRE(mode.step().value());
  CHECK(mode.column_text(0) == "wal");
  CHECK(db->query_int("PRAGMA page_size").value() == kPageBytes);
  open_store(path);  // reopening applies nothing and keeps the data
}

TEST_CASE("sessions: create, get, list, status, remove, ids are checked", "[storage]") {
  TempDir dir;
  auto store = open_store(dir.file("hippo.db"));
  make_session(*store, "alpha");
  auto generated = store->create_session({"", std::nullopt, "fp"});
  REQUIRE(generated.ok());
  CHECK_THAT(generated->id, Catch::StartsWith("s_"));
  CHECK(store->create_session({"alpha", std::nullopt, "fp"}).status().code() == ErrorCode::kAlreadyExists);
  CHECK(store->create_session({"bad id!", std::nullopt, "fp"}).status().code() == ErrorCode::kInvalidArgument);
  CHECK(store->create_session({"nofp", std::nullopt, ""}).status().code() == ErrorCode::kInvalidArgument);
  REQUIRE(store->set_session_status("alpha", "swapped").ok());
  CHECK(store->get_session("alpha")->status == "swapped");
  CHECK(store->list_sessions()->size() == 2);
  auto missing = store->get_session("nope");
  CHECK(missing.status().code() == ErrorCode::kNotFound);
  CHECK_THAT(missing.status().message(), Catch::Contains("session nope"));
  REQUIRE(store->remove_session("alpha").ok());
  CHECK(store->remove_session("alpha").code() == ErrorCode::kNotFound);
  CHECK(store->list_sessions()->size() == 1);
}

TEST_CASE("the conversation log keeps content and tool calls byte-exact", "[storage]") {
  TempDir dir;
  auto store = open_store(dir.file("hippo.db"));
  make_session(*store, "s1");
  MessageRecord user{0, "user", std::string("hello\0world\xff\xfe", 13), "", 0, 5, 0, {}};
  MessageRecord assistant{0, "assistant", "",
                          "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"f\">\r\n  {\"a\": 1}\t</｜DSML｜invoke>", 5,
                          40, 0, {}};
  CHECK(store->append_message("s1", user).value() == 1);
  CHECK(store->append_message("s1", assistant).value() == 2);
  CHECK(store->append_message("ghost", user).status().code() == ErrorCode::kNotFound);
  auto log = store->list_messages("s1");
  REQUIRE(log.ok());
  REQUIRE(log->size() == 2);
  CHECK((*log)[0].content == user.content);
  CHECK((*log)[0].content.size() == 13);
  CHECK((*log)[1].tool_calls == assistant.tool_calls);
  CHECK((*log)[1].first_token == 5);
  CHECK((*log)[1].n_tokens == 40);
  CHECK((*log)[1].seq == 2);
  CHECK((*log)[0].token_ids.empty());
}

TEST_CASE("the log keeps each message's token ids, a version-1 database is migrated", "[storage]") {
  TempDir dir;
  const std::string path = dir.file("hippo.db");
  {
    auto store = open_store(path);
    make_session(*store, "s1");
    MessageRecord user{0, "user", "hi", "", 0, 3, 0, {0, 129279, -1}};
    REQUIRE(store->append_message("s1", user).ok());
    CHECK(store->list_messages("s1").value()[0].token_ids == user.token_ids);
  }
  {  // back to the first format: no token_ids column, no tenant limits, no session kinds
    auto db = Db::open(path, Db::Mode::kReadWrite, 1000);
    REQUIRE(db.ok());
    REQUIRE(db->exec("DROP INDEX sessions_by_tenant; ALTER TABLE tenants DROP COLUMN max_sessions; ALTER TABLE "
                     "tenants DROP COLUMN tokens_per_minute; ALTER TABLE tenants DROP COLUMN max_prompt_tokens; ALTER "
                     "TABLE sessions DROP COLUMN kind; DROP INDEX sessions_by_prefix_key; ALTER TABLE sessions DROP COLUMN "
                     "prefix_key; DROP TABLE responses; ALTER TABLE snapshots DROP COLUMN complete; ALTER TABLE messages DROP "
                     "COLUMN token_ids; UPDATE meta "
                     "SET value = '1' WHERE key = 'format_version'").ok());
  }
  auto store = open_store(path);
  CHECK(count_rows(path, "SELECT value FROM meta WHERE key = 'format_version'") == kFormatVersion);
  auto log = store->list_messages("s1");
  REQUIRE(log.ok());
  CHECK(log->at(0).content == "hi");
  CHECK(log->at(0).token_ids.empty());
}

TEST_CASE("API keys are stored hashed and resolve to their tenant until revoked", "[storage]") {
  TempDir dir;
  const std::string path = dir.file("hippo.db");
  const std::string key = "hk_live_0123456789abcdef0123";
  {
    auto store = open_store(path);
    auto tenant = store->create_tenant("acme");
    REQUIRE(tenant.ok());
    CHECK(store->create_tenant("acme").status().code() == ErrorCode::kAlreadyExists);
    REQUIRE(store->add_api_key(*tenant, key, "ci").ok());
    CHECK(store->add_api_key(*tenant, key, "again").status().code() == ErrorCode::kAlreadyExists);
    CHECK(store->add_api_key(*tenant, "short", "x").status().code() == ErrorCode::kInvalidArgument);
    CHECK(store->tenant_for_api_key(key).value() == *tenant);
    CHECK_FALSE(store->tenant_for_api_key("hk_live_not_a_real_key_000").value().has_value());
    REQUIRE(store->revoke_api_key(key).ok());
    CHECK_FALSE(store->tenant_for_api_key(key).value().has_value());
  }
  for (const char* suffix : {"", "-wal"}) {
    std::ifstream file(path + suffix, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    CHECK(bytes.find(key) == std::string::npos);
  }
}

TEST_CASE("API keys are listed and revoked by id, never shown, and new keys are long and distinct", "[storage]") {
  TempDir dir;
  auto store = open_store(dir.file("hippo.db"));
  CHECK(store->count_api_keys().value() == 0);
  const std::string a = new_api_key().value(), b = new_api_key().value();
  CHECK(a != b);
  CHECK(a.size() == 3 + 43);
  CHECK_THAT(a, Catch::StartsWith("hk_"));
  CHECK(a.find_first_not_of("hk_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-") == std::string::npos);
  const TenantInfo acme = store->ensure_tenant("acme").value();
  CHECK(store->ensure_tenant("acme").value().id == acme.id);  // found, not made again
  const std::int64_t first = store->add_api_key(acme.id, a, "laptop").value();
  const std::int64_t second = store->add_api_key(store->ensure_tenant("zeta")->id, b, "").value();
  CHECK(second > first);
  CHECK(store->count_api_keys().value() == 2);
  REQUIRE(store->revoke_api_key(first).ok());
  CHECK(store->revoke_api_key(first).code() == ErrorCode::kNotFound);
  CHECK(store->revoke_api_key(std::int64_t{999}).code() == ErrorCode::kNotFound);
  CHECK_FALSE(store->tenant_for_api_key(a).value().has_value());
  CHECK(store->tenant_for_api_key(b).value().has_value());
  auto keys = store->list_api_keys();
  REQUIRE(keys.ok());
  REQUIRE(keys->size() == 2);
  CHECK((*keys)[0].id == first);
  CHECK((*keys)[0].tenant == "acme");
  CHECK((*keys)[0].label == "laptop");
  CHECK((*keys)[0].revoked_at.has_value());
  CHECK((*keys)[1].tenant == "zeta");
  CHECK_FALSE((*keys)[1].revoked_at.has_value());
  CHECK(store->count_api_keys().value() == 2);  // revoked keys still count: the server makes no new one
}

TEST_CASE("tenant limits: NULL is the server default and 0 no limit, open sessions are counted", "[storage]") {
  TempDir dir;
  auto store = open_store(dir.file("hippo.db"));
  const TenantInfo acme = store->ensure_tenant("acme").value();
  CHECK_FALSE(acme.limits.max_sessions.has_value());
  CHECK_FALSE(acme.limits.tokens_per_minute.has_value());
  REQUIRE(store->set_tenant_limits(acme.id, {3, 0, 7}).ok());
  TenantInfo read = store->get_tenant(acme.id).value();
  CHECK(read.name == "acme");
  CHECK(read.limits.max_sessions == std::optional<std::int64_t>(3));
  CHECK(read.limits.tokens_per_minute == std::optional<std::int64_t>(0));
  CHECK(read.limits.max_prompt_tokens == std::optional<std::int64_t>(7));
  REQUIRE(store->set_tenant_limits(acme.id, {std::nullopt, 500, std::nullopt}).ok());
  read = store->find_tenant("acme").value().value();
  CHECK_FALSE(read.limits.max_sessions.has_value());
  CHECK(read.limits.tokens_per_minute == std::optional<std::int64_t>(500));
  CHECK_FALSE(read.limits.max_prompt_tokens.has_value());
  CHECK(store->set_tenant_limits(acme.id, {-1, std::nullopt, std::nullopt}).code() == ErrorCode::kInvalidArgument);
  CHECK(store->set_tenant_limits(999, {}).code() == ErrorCode::kNotFound);
  CHECK(store->get_tenant(999).status().code() == ErrorCode::kNotFound);
  CHECK_FALSE(store->find_tenant("nobody").value().has_value());

  const std::int64_t other = store->create_tenant("other").value();
  for (const char* id : {"a1", "a2", "a3"}) REQUIRE(store->create_session({id, acme.id, "fp"}).ok());
  REQUIRE(store->create_session({"b1", other, "fp"}).ok());
  REQUIRE(store->create_session({"orphan", std::nullopt, "fp"}).ok());
  REQUIRE(store->set_session_status("a2", "closed").ok());
  CHECK(store->count_open_sessions(acme.id).value() == 2);
  CHECK(store->count_open_sessions(other).value() == 1);
  CHECK(store->list_tenant_sessions(acme.id)->size() == 3);  // closed ones are listed too

  // Sessions without a tenant go to the named one (created when missing), once.
  CHECK(store->adopt_untenanted_sessions("default").value() == 1);
  const TenantInfo fallback = store->find_tenant("default").value().value();
  CHECK(store->get_session("orphan")->tenant_id == std::optional<std::int64_t>(fallback.id));
  CHECK(store->adopt_untenanted_sessions("default").value() == 0);
  CHECK_FALSE(store->find_tenant("unused").value().has_value());
  CHECK(store->adopt_untenanted_sessions("unused").value() == 0);
  CHECK_FALSE(store->find_tenant("unused").value().has_value());  // no tenant made for nothing
}

TEST_CASE("a version-2 database gets tenant limits and session kinds and keeps its tenants and keys", "[storage]") {
  TempDir dir;
  const std::string path = dir.file("hippo.db");
  const std::string key = "hk_test_0123456789abcdef0123";
  std::int64_t tenant = 0;
  {
    auto store = open_store(path);
    tenant = store->create_tenant("acme").value();
    REQUIRE(store->add_api_key(tenant, key, "ci").ok());
    REQUIRE(store->create_session({"s1", tenant, "fp"}).ok());
  }
  {  // back to format 2: the tenants and sessions tables as they were
    auto db = Db::open(path, Db::Mode::kReadWrite, 1000);
    REQUIRE(db.ok());
    REQUIRE(db->exec("DROP INDEX sessions_by_tenant; ALTER TABLE tenants DROP COLUMN max_sessions; ALTER TABLE "
                     "tenants DROP COLUMN tokens_per_minute; ALTER TABLE tenants DROP COLUMN max_prompt_tokens; "
                     "ALTER TABLE sessions DROP COLUMN kind; DROP INDEX sessions_by_prefix_key; ALTER TABLE sessions DROP "
                     "COLUMN prefix_key; DROP TABLE responses; ALTER TABLE snapshots DROP COLUMN complete; UPDATE meta SET value = '2' WHERE key = "
                     "'format_version'").ok());
  }
  {  // a read-only open cannot migrate: a clear error, nothing changed
    StoreOptions read_only;
    read_only.read_only = true;
    auto refused = SessionStore::open(path, read_only);
    CHECK(refused.status().code() == ErrorCode::kFailedPrecondition);
    CHECK_THAT(refused.status().message(), Catch::Contains("needs migrating to 6"));
  }
  auto store = open_store(path);
  CHECK(count_rows(path, "SELECT value FROM meta WHERE key = 'format_version'") == 6);
  CHECK(count_rows(path, "SELECT count(*) FROM sessions WHERE kind = 'agent'") == 1);  // what existed is kept
  CHECK(count_rows(path, "SELECT count(*) FROM sqlite_schema WHERE name = 'sessions_by_tenant'") == 1);
  CHECK(store->tenant_for_api_key(key).value() == std::optional<std::int64_t>(tenant));
  const TenantInfo read = store->get_tenant(tenant).value();
  CHECK_FALSE(read.limits.max_sessions.has_value());  // migrated tenants take the server's defaults
  CHECK_FALSE(read.limits.tokens_per_minute.has_value());
  CHECK_FALSE(read.limits.max_prompt_tokens.has_value());
  CHECK(store->count_open_sessions(tenant).value() == 1);
  REQUIRE(store->set_tenant_limits(tenant, {2, 100, std::nullopt}).ok());
}

TEST_CASE("a snapshot restores byte-identical streams and frontier", "[storage][snapshot]") {
  TempDir dir;
  auto store = open_store(dir.file("hippo.db"));
  make_session(*store, "s1");
  for (Filter filter : {Filter::kNone, Filter::kBytePlane}) {
    // 40,000 tokens: kv.layer20 spans three 4 MiB chunks, the last one partial.
    TestState state(default_shapes(), 40'000, filter == Filter::kNone ? 3 : 4);
    auto stats = store->write_snapshot(state.request("s1", filter));
    INFO(stats.status().to_string());
    REQUIRE(stats.ok());
    CHECK(stats->written_chunks >= 6);
    CHECK(stats->written_stored_bytes < stats->raw_bytes);
    require_restores_to(*store, "s1", state);
  }
  // Reopened from disk, it still restores.
  store.reset();
  store = open_store(dir.file("hippo.db"));
  require_restores_to(*store, "s1", TestState(default_shapes(), 40'000, 4));
}

TEST_CASE("an empty state and an empty frontier are snapshots too", "[storage][snapshot]") {
  TempDir dir;
  auto store = open_store(dir.file("hippo.db"));
  make_session(*store, "s1");
  SnapshotRequest request{"s1", std::string(kFingerprint), 0, {}, {}, {}};
  std::vector<std::byte> none;
  request.streams.push_back({"token_ids", 4, Filter::kNone, none});
  REQUIRE(store->write_snapshot(request).ok());
  auto latest = store->latest_snapshot("s1").value();
  REQUIRE(latest.has_value());
  auto restored = restore_into_vectors(*store, *latest);
  REQUIRE(restored.ok());
  CHECK(restored->frontier.empty());
  CHECK(restored->streams.at("token_ids").empty());
}

TEST_CASE("incremental snapshots write only what lies past the previous one", "[storage][snapshot]") {
  TempDir dir;
  auto store = open_store(dir.file("hippo.db"));
  make_session(*store, "s1");
  TestState base(default_shapes(), 100'000);
  auto full = store->write_snapshot(base.request("s1"));
  REQUIRE(full.ok());
  CHECK(full->reused_chunks == 0);

  // 1% more tokens: each stream writes one small chunk up to its grid line, nothing else.
  TestState grown(default_shapes(), 101'000);
  auto delta = store->write_snapshot(grown.request("s1"));
  REQUIRE(delta.ok());
  CHECK(delta->reused_chunks == full->written_chunks);
  const auto stream_bytes = [](const SnapshotWriteStats& s, const TestState& t) {
    return s.raw_bytes - static_cast<std::int64_t>(t.frontier().size());
  };
  CHECK(delta->written_raw_bytes == stream_bytes(*delta, grown) - stream_bytes(*full, base));
  CHECK(delta->written_stored_bytes <= full->written_stored_bytes / 50);  // at most 2% of the full bytes
  require_restores_to(*store, "s1", grown);

  // Another 1%: the small chunk of the last snapshot is kept, not rewritten.
  TestState grown2(default_shapes(), 102'000);
  auto delta2 = store->write_snapshot(grown2.request("s1"));
  REQUIRE(delta2.ok());
  CHECK(delta2->reused_chunks == delta->reused_chunks + delta->written_chunks);
  require_restores_to(*store, "s1", grown2);
}

TEST_CASE("a rewound or rewritten state is not restored from stale chunks", "[storage][snapshot]") {
  TempDir dir;
  auto store = open_store(dir.file("hippo.db"));
  make_session(*store, "s1");
  TestState long_state(default_shapes(), 60'000);
  REQUIRE(store->write_snapshot(long_state.request("s1")).ok());

  SECTION("shorter: chunks past the new end are not reused") {
    TestState short_state(default_shapes(), 30'001);
    auto stats = store->write_snapshot(short_state.request("s1"));
    REQUIRE(stats.ok());
    require_restores_to(*store, "s1", short_state);
  }
  SECTION("same length, different bytes in the middle: rewritten from the first changed chunk") {
    TestState changed(default_shapes(), 60'000);
    changed.stream("kv.layer20")[288 * 20'000] ^= std::byte{0x40};
    auto stats = store->write_snapshot(changed.request("s1"));
    REQUIRE(stats.ok());
    CHECK(stats->written_chunks >= 1);
    require_restores_to(*store, "s1", changed);
  }
}

TEST_CASE("old snapshots are pruned to keep_snapshots and their private chunks deleted", "[storage][snapshot]") {
  TempDir dir;
  const std::string path = dir.file("hippo.db");
  auto store = open_store(path);
  make_session(*store, "s1");
  for (std::int64_t n : {10'000, 20'000, 15'000, 25'000}) REQUIRE(store->write_snapshot(TestState(default_shapes(), n).request("s1")).ok());
  auto snapshots = store->list_snapshots("s1");
  REQUIRE(snapshots->size() == 2);
  CHECK((*snapshots)[0].n_tokens == 25'000);
  CHECK((*snapshots)[1].n_tokens == 15'000);
  CHECK((*snapshots)[0].parent_id == (*snapshots)[1].id);
  // No chunk without a snapshot is left behind.
  CHECK(count_rows(path, "SELECT count(*) FROM kv_chunks WHERE id NOT IN (SELECT chunk_id FROM snapshot_chunks)") == 0);
  // The previous snapshot still restores.
  auto restored = restore_into_vectors(*store, (*snapshots)[1]);
  REQUIRE(restored.ok());
  CHECK(restored->streams.at("kv.layer20") == TestState(default_shapes(), 15'000).streams().at("kv.layer20"));
}

TEST_CASE("an incomplete snapshot is never read and goes with the session's next snapshot", "[storage][snapshot]") {
  TempDir dir;
  const std::string path = dir.file("hippo.db");
  auto store = open_store(path);
  make_session(*store, "s1");
  const TestState first(default_shapes(), 10'000);
  REQUIRE(store->write_snapshot(first.request("s1")).ok());
  {  // what a writer killed between its chunk transactions leaves: a row marked incomplete, mapped chunks
    auto db = Db::open(path, Db::Mode::kReadWrite, 1000);
    REQUIRE(db.ok());
    REQUIRE(db->exec("INSERT INTO snapshots(session_id, n_tokens, fingerprint, frontier, frontier_codec, "
                     "frontier_raw_bytes, frontier_checksum, created_at, complete) SELECT session_id, 99999, "
                     "fingerprint, x'', 0, 0, 0, created_at, 0 FROM snapshots; "
                     "INSERT INTO kv_chunks(origin_session, stream, first_entry, n_entries, entry_bytes, filter, codec, "
                     "raw_bytes, stored_bytes, checksum, blob) VALUES ('s1', 'kv.layer2', 0, 1, 4, 0, 0, 4, 4, 0, x'00000000'); "
                     "INSERT INTO snapshot_chunks(snapshot_id, stream_index, seq, chunk_id) SELECT max(id), 0, 0, "
                     "(SELECT max(id) FROM kv_chunks) FROM snapshots").ok());
  }
  CHECK(store->list_snapshots("s1")->size() == 1);
  CHECK(store->latest_snapshot("s1").value()->n_tokens == 10'000);
  require_restores_to(*store, "s1", first);
  CHECK(store->gc()->chunks_removed == 0);  // its map keeps its chunks from gc
  auto fork = store->fork_session("s1", "f1");
  REQUIRE(fork.ok());
  CHECK(store->latest_snapshot("f1").value()->n_tokens == 10'000);

  const TestState second(default_shapes(), 12'000);
  REQUIRE(store->write_snapshot(second.request("s1")).ok());
  CHECK(count_rows(path, "SELECT count(*) FROM snapshots WHERE complete = 0") == 0);
  CHECK(count_rows(path, "SELECT count(*) FROM kv_chunks WHERE id NOT IN (SELECT chunk_id FROM snapshot_chunks)") == 0);
  require_restores_to(*store, "s1", second);
}

TEST_CASE("a large snapshot lets another connection's log writes through between its chunks", "[storage][snapshot]") {
  TempDir dir;
  const std::string path = dir.file("hippo.db");
  auto store = open_store(path);
  make_session(*store, "big");
  make_session(*store, "chat");
  const TestState state(default_shapes(), 120'000);  // 56 MB: 14 chunks of 4 MiB
  auto log_store = open_store(path);
  std::atomic<bool> writing{true};
  std::atomic<int> appended_during{0};
  double snapshot_ms = 0;
  std::thread writer([&] {
    const auto start = std::chrono::steady_clock::now();
    CHECK(store->write_snapshot(state.request("big")).ok());
    snapshot_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    writing = false;
  });
  std::vector<double> waits_ms;
  while (writing) {
    MessageRecord row;
    row.role = "user";
    row.content = "hello";
    const auto start = std::chrono::steady_clock::now();
    REQUIRE(log_store->append_message("chat", row).ok());
    waits_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    if (writing) ++appended_during;
  }
  writer.join();
  const double slowest_ms = *std::max_element(waits_ms.begin(), waits_ms.end());
  INFO("log writes during the " << snapshot_ms << " ms snapshot: " << appended_during << ", slowest " << slowest_ms << " ms");
  // One transaction for the whole snapshot would let none through, and hold the first for all of it.
  CHECK(appended_during >= 5);
  CHECK(slowest_ms < snapshot_ms / 2);
  require_restores_to(*store, "big", state);
}

TEST_CASE("fingerprints: a snapshot of another model is refused on write and on restore", "[storage][snapshot]") {
  TempDir dir;
  auto store = open_store(dir.file("hippo.db"));
  make_session(*store, "s1");
  TestState state(default_shapes(), 1'000);
  auto wrong = store->write_snapshot(state.request("s1", Filter::kBytePlane, "other-model"));
  CHECK(wrong.status().code() == ErrorCode::kFailedPrecondition);
  CHECK_THAT(wrong.status().message(), Catch::Contains("session s1") && Catch::Contains("fingerprint"));
  REQUIRE(store->write_snapshot(state.request("s1")).ok());
  auto latest = store->latest_snapshot("s1").value();
  auto restored = restore_into_vectors(*store, *latest, "test-model:v2");
  CHECK(restored.status().code() == ErrorCode::kFailedPrecondition);
  CHECK_THAT(restored.status().message(), Catch::Contains("session s1") && Catch::Contains("fingerprint mismatch"));
}

TEST_CASE("bad snapshot requests and restore targets are clear errors", "[storage][snapshot]") {
  TempDir dir;
  auto store = open_store(dir.file("hippo.db"));
  make_session(*store, "s1");
  std::vector<std::byte> bytes(10);
  SnapshotRequest request{"s1", std::string(kFingerprint), 10, {}, {{"kv", 4, Filter::kNone, bytes}}, {}};
  CHECK(store->write_snapshot(request).status().code() == ErrorCode::kInvalidArgument);  // 10 bytes, 4-byte entries
  request.streams = {{"kv", 5, Filter::kNone, bytes}, {"kv", 5, Filter::kNone, bytes}};
  CHECK(store->write_snapshot(request).status().code() == ErrorCode::kInvalidArgument);  // repeated name
  request.streams = {{"kv", 5, Filter::kNone, bytes}};
  request.session_id = "ghost";
  CHECK(store->write_snapshot(request).status().code() == ErrorCode::kNotFound);
  request.session_id = "s1";
  REQUIRE(store->write_snapshot(request).ok());
  auto latest = store->latest_snapshot("s1").value();
  std::vector<std::byte> small(5);
  std::vector<RestoreTarget> targets{{"kv", small}};
  CHECK(store->restore_snapshot(*latest, kFingerprint, targets).status().code() == ErrorCode::kInvalidArgument);
  targets = {{"other", bytes}};
  CHECK(store->restore_snapshot(*latest, kFingerprint, targets).status().code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("fork shares chunks by reference, the fork and its parent then diverge", "[storage][fork]") {
  TempDir dir;
  const std::string path = dir.file("hippo.db");
  auto store = open_store(path);
  make_session(*store, "parent");
  REQUIRE(store->append_message("parent", {0, "user", "hi", "", 0, 2, 0, {}}).ok());
  TestState state(default_shapes(), 50'000);
  REQUIRE(store->write_snapshot(state.request("parent")).ok());
  const std::int64_t chunks_before = count_rows(path, "SELECT count(*) FROM kv_chunks");

  auto fork = store->fork_session("parent", "child");
  REQUIRE(fork.ok());
  CHECK(fork->forked_from == "parent");
  CHECK(count_rows(path, "SELECT count(*) FROM kv_chunks") == chunks_before);  // nothing copied
  CHECK(store->list_messages("child")->size() == 1);
  require_restores_to(*store, "child", state);
  CHECK(store->fork_session("parent", "child").status().code() == ErrorCode::kAlreadyExists);
  CHECK(store->fork_session("ghost", "x").status().code() == ErrorCode::kNotFound);

  // The child grows; the parent is untouched. Removing the parent keeps the child whole.
  TestState grown(default_shapes(), 51'000);
  REQUIRE(store->write_snapshot(grown.request("child")).ok());
  require_restores_to(*store, "parent", state);
  REQUIRE(store->remove_session("parent").ok());
  auto gc = store->gc();
  REQUIRE(gc.ok());
  CHECK(gc->chunks_removed == 0);  // every parent chunk is still the child's
  require_restores_to(*store, "child", grown);
  REQUIRE(store->remove_session("child").ok());
  gc = store->gc();
  REQUIRE(gc.ok());
  CHECK(gc->chunks_removed > 0);
  CHECK(gc->bytes_removed > 0);
  CHECK(count_rows(path, "SELECT count(*) FROM kv_chunks") == 0);
}

TEST_CASE("export writes one portable file, import checks it and brings the session back", "[storage][transfer]") {
  TempDir dir;
  auto store = open_store(dir.file("hippo.db"));
  make_session(*store, "s1");
  REQUIRE(store->append_message("s1", {0, "user", "question", "", 0, 3, 0, {}}).ok());
  REQUIRE(store->write_snapshot(TestState(default_shapes(), 20'000).request("s1")).ok());
  TestState state(default_shapes(), 30'000);
  REQUIRE(store->write_snapshot(state.request("s1")).ok());
  const std::string file = dir.file("s1.hippo");
  std::int64_t last_done = 0, last_total = -1;
  REQUIRE(store->export_session("s1", file, [&](std::int64_t done, std::int64_t total) {
                 CHECK(done >= last_done);
                 last_done = done;
                 last_total = total;
               }).ok());
  CHECK(last_done == last_total);
  CHECK(std::filesystem::exists(file));
  CHECK_FALSE(std::filesystem::exists(file + "-wal"));
  CHECK(count_rows(file, "SELECT count(*) FROM snapshots") == 1);  // the latest only
  CHECK(store->export_session("s1", file).code() == ErrorCode::kAlreadyExists);

  auto other = open_store(dir.file("other.db"));
  auto imported = other->import_session(file, kFingerprint);
  INFO(imported.status().to_string());
  REQUIRE(imported.ok());
  CHECK(imported->id == "s1");
  CHECK(other->list_messages("s1")->front().content == "question");
  require_restores_to(*other, "s1", state);

  SECTION("the same id twice is refused; --as renames") {
    CHECK(other->import_session(file).status().code() == ErrorCode::kAlreadyExists);
    REQUIRE(other->import_session(file, {}, "s1-copy").ok());
    require_restores_to(*other, "s1-copy", state);
  }
  SECTION("another model's fingerprint is refused") {
    auto refused = store->import_session(file, "other-model", "s2");
    CHECK(refused.status().code() == ErrorCode::kFailedPrecondition);
    CHECK_THAT(refused.status().message(), Catch::Contains("fingerprint"));
  }
  SECTION("a corrupted file is refused, naming the chunk, and imports nothing") {
    {
      auto db = Db::open(file, Db::Mode::kReadWrite, 1000);
      REQUIRE(db.ok());
      REQUIRE(db->exec("UPDATE kv_chunks SET checksum = checksum + 1 WHERE id = (SELECT max(id) FROM kv_chunks)").ok());
    }
    auto refused = other->import_session(file, {}, "s3");
    CHECK(refused.status().code() == ErrorCode::kCorrupt);
    CHECK_THAT(refused.status().message(), Catch::Contains("chunk") && Catch::Contains("checksum mismatch"));
    CHECK(other->get_session("s3").status().code() == ErrorCode::kNotFound);
  }
  SECTION("a file that is not a database is refused") {
    const std::string junk = dir.file("junk.hippo");
    std::ofstream(junk) << "not a database at all, just some text that is long enough to fill a header";
    CHECK_FALSE(other->import_session(junk).ok());
  }
}

TEST_CASE("KvSnapshotWriter writes off the caller's thread and reports through futures", "[storage][writer]") {
  TempDir dir;
  const std::string path = dir.file("hippo.db");
  auto store = open_store(path);
  for (const char* id : {"a", "b", "c"}) make_session(*store, id);
  std::vector<TestState> states;
  for (int i = 0; i < 3; ++i) states.emplace_back(default_shapes(), 10'000 + 5'000 * i, i + 1);
  {
    auto writer = KvSnapshotWriter::open(path);
    REQUIRE(writer.ok());
    std::vector<std::future<Result<SnapshotWriteStats>>> futures;
    const char* ids[] = {"a", "b", "c"};
    for (int i = 0; i < 3; ++i) {
      auto submitted = (*writer)->submit(states[static_cast<std::size_t>(i)].request(ids[i]));
      REQUIRE(submitted.ok());
      futures.push_back(std::move(submitted).value());
    }
    auto bad = (*writer)->submit(states[0].request("ghost"));
    REQUIRE(bad.ok());
    CHECK(bad->get().status().code() == ErrorCode::kNotFound);
    for (auto& f : futures) CHECK(f.get().ok());
  }
  require_restores_to(*store, "a", states[0]);
  require_restores_to(*store, "b", states[1]);
  require_restores_to(*store, "c", states[2]);
}

TEST_CASE("the retention rule removes closed sessions of a kind by age and by bytes, newest kept", "[storage]") {
  TempDir dir;
  const std::string path = dir.file("hippo.db");
  auto store = open_store(path);
  auto completion = [&](const std::string& id, std::int64_t updated_at, std::size_t bytes, const char* status) {
    NewSession s{id, std::nullopt, std::string(testing::kFingerprint)};
    s.kind = std::string(kSessionKindCompletion);
    REQUIRE(store->create_session(s).ok());
    MessageRecord m{0, "user", std::string(bytes, 'x'), "", 0, 0, 0, {}};
    REQUIRE(store->append_message(id, m).ok());
    REQUIRE(store->set_session_status(id, status).ok());
    auto db = Db::open(path, Db::Mode::kReadWrite, 1000);
    REQUIRE(db->exec(fmt::format("UPDATE sessions SET updated_at = {} WHERE id = '{}'", updated_at, id)).ok());
  };
  make_session(*store, "agent");  // another kind: never touched
  REQUIRE(store->set_session_status("agent", "closed").ok());
  completion("old", 1000, 100, "closed");
  completion("mid", 5000, 300, "closed");
  completion("new", 6000, 300, "closed");
  completion("open", 10, 100, "ready");  // not closed: in use, never removed
  CHECK(store->get_session("new")->kind == kSessionKindCompletion);
  CHECK(store->get_session("agent")->kind == kSessionKindAgent);

  // No bound: nothing goes.
  CHECK(store->apply_retention(kSessionKindCompletion, {}, 7000)->sessions_removed == 0);
  // By age: older than 3000 s at t = 7000.
  RetentionStats by_age = store->apply_retention(kSessionKindCompletion, {3000, 0}, 7000).value();
  CHECK(by_age.sessions_removed == 1);
  CHECK(by_age.bytes_removed >= 100);
  CHECK(by_age.sessions_kept == 2);
  CHECK(store->get_session("old").status().code() == ErrorCode::kNotFound);
  // By bytes: the newest that fit.
  RetentionStats by_bytes = store->apply_retention(kSessionKindCompletion, {0, 400}, 7000).value();
  CHECK(by_bytes.sessions_removed == 1);
  CHECK(store->get_session("mid").status().code() == ErrorCode::kNotFound);
  CHECK(store->get_session("new").ok());
  CHECK(store->get_session("open").ok());
  CHECK(store->get_session("agent").ok());
  CHECK(count_rows(path, "SELECT count(*) FROM messages WHERE session_id IN ('old', 'mid')") == 0);
}

TEST_CASE("prefix keys: the longest keyed prefix of the tenant's open sessions, bounded, not counted as open",
          "[storage]") {
  TempDir dir;
  const std::string path = dir.file("hippo.db");
  auto store = open_store(path);
  const std::int64_t acme = store->create_tenant("acme").value();
  const std::int64_t other = store->create_tenant("other").value();
  auto completion = [&](const std::string& id, std::optional<std::int64_t> tenant) {
    NewSession s{id, tenant, std::string(testing::kFingerprint)};
    s.kind = std::string(kSessionKindCompletion);
    REQUIRE(store->create_session(s).ok());
  };
  completion("turn1", acme);
  completion("turn2", acme);
  completion("theirs", other);
  completion("untenanted", std::nullopt);
  REQUIRE(store->set_prefix_key("turn1", "k1").ok());
  REQUIRE(store->set_prefix_key("turn2", "k2").ok());
  REQUIRE(store->set_prefix_key("theirs", "k3").ok());
  REQUIRE(store->set_prefix_key("untenanted", "k1").ok());
  CHECK(store->set_prefix_key("ghost", "k9").code() == ErrorCode::kNotFound);
  CHECK(store->count_open_sessions(acme).value() == 0);  // keyed: a cache, not a session in use

  const std::vector<std::string> keys{"k0", "k1", "k2", "k3"};
  auto found = store->find_prefix_session(acme, keys).value();
  REQUIRE(found.has_value());
  CHECK(found->session_id == "turn2");  // k3 is another tenant's
  CHECK(found->key_index == 2);
  CHECK(store->find_prefix_session(std::nullopt, keys).value()->session_id == "untenanted");
  CHECK_FALSE(store->find_prefix_session(acme, std::vector<std::string>{"k0"}).value().has_value());
  // A closed session matches nothing.
  REQUIRE(store->set_session_status("turn2", "closed").ok());
  CHECK(store->find_prefix_session(acme, keys).value()->session_id == "turn1");
  // A forked session keeps its kind and starts without a key.
  REQUIRE(store->fork_session("turn1", "turn1b").ok());
  CHECK(store->get_session("turn1b")->kind == kSessionKindCompletion);
  CHECK(store->count_open_sessions(acme).value() == 1);

  REQUIRE(store->set_prefix_key("turn1b", "k5").ok());
  CHECK(store->excess_prefix_sessions(acme, 1).value() == std::vector<std::string>{"turn1"});  // newest kept
  CHECK(store->excess_prefix_sessions(acme, 2).value().empty());
  REQUIRE(store->set_prefix_key("turn1b", std::nullopt).ok());
  CHECK(store->excess_prefix_sessions(acme, 0).value() == std::vector<std::string>{"turn1"});
  auto db = Db::open(path, Db::Mode::kReadWrite, 1000);
  REQUIRE(db->exec("UPDATE sessions SET updated_at = 100 WHERE id = 'theirs'").ok());
  CHECK(store->prefix_sessions_unused_since(200).value() == std::vector<std::string>{"theirs"});
}

TEST_CASE("stored responses: written once, read and deleted by their tenant only, removed by age", "[storage]") {
  TempDir dir;
  auto store = open_store(dir.file("hippo.db"));
  const std::int64_t acme = store->create_tenant("acme").value();
  const std::int64_t other = store->create_tenant("other").value();
  REQUIRE(store->put_response({"resp_1", acme, "s1", 0, "[]", R"({"id":"resp_1"})"}).ok());
  CHECK(store->put_response({"resp_1", acme, "s1", 0, "[]", "{}"}).code() == ErrorCode::kAlreadyExists);
  auto got = store->get_response("resp_1", acme).value();
  REQUIRE(got.has_value());
  CHECK(got->body == R"({"id":"resp_1"})");
  CHECK(got->session_id == "s1");
  CHECK(got->created_at > 0);
  CHECK_FALSE(store->get_response("resp_1", other).value().has_value());
  CHECK_FALSE(store->get_response("resp_1", std::nullopt).value().has_value());
  CHECK_FALSE(store->delete_response("resp_1", other).value());
  CHECK(store->delete_response("resp_1", acme).value());
  CHECK_FALSE(store->get_response("resp_1", acme).value().has_value());
  REQUIRE(store->put_response({"resp_2", std::nullopt, "s2", 0, "[]", "{}"}).ok());
  CHECK(store->remove_responses_before(1).value() == 0);
  CHECK(store->remove_responses_before(got->created_at + 3600).value() == 1);
}
