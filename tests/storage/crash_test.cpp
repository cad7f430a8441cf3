// The crash harness: a child process writes snapshots in a loop and is killed with SIGKILL at a
// random moment, many times over. After each kill the database must pass PRAGMA integrity_check and
// every snapshot it holds must restore to exactly the state that was written (store.h (1)).
#include "storage/sqlite.h"
#include "storage/store.h"
#include "tests/storage/storage_test_util.h"

#include <catch2/catch.hpp>

#include <csignal>
#include <chrono>
#include <random>
#include <thread>
#include <sys/wait.h>
#include <unistd.h>

using namespace hippo;
using namespace hippo::storage;
using namespace hippo::storage::testing;

namespace {

// The states a writer cycles through: growing (incremental snapshots) and, every third one, with
// other bytes (a full rewrite), so kills land in both kinds of snapshot.
std::vector<TestState> writer_states() {
  std::vector<TestState> states;
  for (int k = 0; k < 6; ++k) states.emplace_back(default_shapes(), 12'000 + 3'000 * k, k % 3 == 2 ? 7 : 1);
  return states;
}

const TestState& state_for(const std::vector<TestState>& states, std::int64_t n_tokens) {
  for (const auto& s : states)
    if (s.n_tokens() == n_tokens) return s;
  FAIL("no state of " << n_tokens << " tokens");
  return states.front();
}

[[noreturn]] void run_writer(const std::string& path, const std::vector<TestState>& states) {
  auto store = SessionStore::open(path);
  if (!store.ok()) _exit(2);
  for (std::size_t i = 0;; i = (i + 1) % states.size()) {
    if (!(*store)->write_snapshot(states[i].request("s1")).ok()) _exit(3);
  }
}

void check_after_kill(const std::string& path, const std::vector<TestState>& states) {
  {
    auto db = Db::open(path, Db::Mode::kReadWrite, 5000);
    REQUIRE(db.ok());
    Statement check = std::move(Statement::prepare(*db, "PRAGMA integrity_check")).value();
    REQUIRE(check.step().value());
    REQUIRE(check.column_text(0) == "ok");
  }
  auto store = open_store(path);
  auto snapshots = store->list_snapshots("s1");
  REQUIRE(snapshots.ok());
  REQUIRE_FALSE(snapshots->empty());
  for (const auto& snapshot : *snapshots) {  // the latest and the one before it
    const TestState& expected = state_for(states, snapshot.n_tokens);
    auto restored = restore_into_vectors(*store, snapshot);
    INFO(restored.status().to_string());
    REQUIRE(restored.ok());
    REQUIRE(restored->frontier == expected.frontier());
    for (const auto& [name, bytes] : expected.streams()) REQUIRE(restored->streams.at(name) == bytes);
  }
}

void kill_writers(int iterations, int max_delay_ms) {
  TempDir dir;
  const std::string path = dir.file("hippo.db");
  const auto states = writer_states();
  {
    auto store = open_store(path);
    make_session(*store, "s1");
    REQUIRE(store->write_snapshot(states.front().request("s1")).ok());
  }  // no store threads may be running when we fork
  std::mt19937 rng(Catch::rngSeed());
  for (int i = 0; i < iterations; ++i) {
    INFO("kill " << i);
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) run_writer(path, states);
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % (max_delay_ms * 1000)));
    REQUIRE(kill(pid, SIGKILL) == 0);
    int wstatus = 0;
    REQUIRE(waitpid(pid, &wstatus, 0) == pid);
    REQUIRE(WIFSIGNALED(wstatus));  // it was still writing, not dead of an error of its own
    check_after_kill(path, states);
  }
}

}  // namespace

TEST_CASE("writers killed at random moments leave every snapshot restorable", "[storage][crash]") {
  kill_writers(12, 600);
}

TEST_CASE("writers killed at random moments, many times", "[.slow][storage][crash]") { kill_writers(150, 900); }
