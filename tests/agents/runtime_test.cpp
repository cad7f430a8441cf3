// The agent runtime on the real engine (the tiny checkpoint that `model init` writes, the real
// tokenizer) and a real SQLite file: responses, swap-out and exact resume, batching equal to running
// alone, the memory budget, cancellation, a killed process resumed from snapshot plus log, and a
// corrupt snapshot rebuilt from the log.
#include "agents/response_job.h"
#include "agents/runtime.h"
#include "engine/model/model.h"
#include "engine/tokenizer/dsml_syntax.h"
#include "engine/tokenizer/tokenizer.h"
#include "storage/sqlite.h"
#include "storage/kv_snapshot_writer.h"
#include "storage/store.h"
#include "tests/agents/runtime_fixture.h"
#include "tests/engine/test_paths.h"
#include "tests/storage/faulting_vfs.h"

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <thread>
#include <csignal>
#include <filesystem>
#include <mutex>

namespace hippo::agents {
namespace {

using namespace hippo::agents::testing;

TEST_CASE("a response streams events and completes, the log's ids are the session's", "[agents]") {
  TempDir dir;
  const std::string db = dir / "hippo.db";
  auto rt = open_runtime(db);
  SessionSettings settings;
  settings.instructions = "You are terse.";
  auto id = rt->create_session(settings);
  REQUIRE(id.ok());
  const ResponseEvent done = turn(*rt, *id, "Hello there", 5);
  REQUIRE(done.kind == ResponseEvent::Kind::kCompleted);
  CHECK((done.finish_reason == "length" || done.finish_reason == "stop"));
  CHECK(done.usage.output_tokens >= 1);
  CHECK(done.usage.output_tokens <= 5);
  CHECK(done.usage.cached_tokens == 0);
  const ResponseEvent second = turn(*rt, *id, "And again", 4);
  CHECK(second.usage.cached_tokens > 0);  // the first turn's context was not prefilled again
  check_exact(*rt, db, *id);

  auto store = storage::SessionStore::open(db);
  auto log = (*store)->list_messages(*id);
  REQUIRE(log->size() == 6);  // user, prompt, assistant, twice
  CHECK((*log)[0].role == "user");
  CHECK((*log)[1].role == "prompt");
  CHECK((*log)[2].role == "assistant");
  CHECK((*log)[2].token_ids.back() == model().config().eos_token_id);
}

TEST_CASE("requests the runtime cannot take are clear errors and change nothing", "[agents]") {
  TempDir dir;
  auto rt = open_runtime(dir / "hippo.db");
  auto id = rt->create_session({});
  REQUIRE(id.ok());
  Collector c;
  CHECK(rt->create_response(*id, greedy(0), c.sink()).code() == ErrorCode::kInvalidArgument);
  CHECK(rt->append_input(*id, {{InputItem::Kind::kToolResult, "42", "call_0"}}).code() == ErrorCode::kInvalidArgument);
  CHECK(rt->create_response("nope", greedy(4), c.sink()).code() == ErrorCode::kNotFound);
  REQUIRE(rt->append_input(*id, {{InputItem::Kind::kUserMessage, "hi", ""}}).ok());
  CHECK(rt->create_response(*id, greedy(model().text().max_position_embeddings), c.sink()).code() ==
        ErrorCode::kInvalidArgument);
  RuntimeOptions small;
  small.max_context_tokens = 20;
  TempDir dir2;
  auto rt2 = open_runtime(dir2 / "hippo.db", small);
  auto id2 = rt2->create_session({});
  std::string long_text;
  for (int i = 0; i < 10; ++i) long_text += "a longer message than the context allows ";
  REQUIRE(rt2->append_input(*id2, {{InputItem::Kind::kUserMessage, long_text, ""}}).ok());
  CHECK(rt2->create_response(*id2, greedy(1), c.sink()).code() == ErrorCode::kResourceExhausted);
  CHECK(rt2->session(*id2)->pending_tokens == 0);
  CHECK(rt2->session(*id2)->n_tokens == 0);
}

TEST_CASE("a swapped-out session resumes exactly, with no prefill", "[agents]") {
  TempDir dir;
  const std::string db = dir / "hippo.db";
  auto rt = open_runtime(db);
  auto a = rt->create_session({});
  auto b = rt->create_session({});
  std::string out_a, out_b;
  turn(*rt, *a, "Tell me about hippos.", 6, &out_a);
  turn(*rt, *b, "Tell me about hippos.", 6, &out_b);
  CHECK(out_a == out_b);
  REQUIRE(rt->swap_out(*a).ok());
  CHECK(rt->session(*a)->status == SessionStatus::kSwapped);
  CHECK(rt->session(*a)->resident_bytes == 0);
  const int64_t stored = rt->session(*a)->n_tokens;
  CHECK(stored > 0);
  const ResponseEvent resumed = turn(*rt, *a, "More, please.", 6, &out_a);
  turn(*rt, *b, "More, please.", 6, &out_b);
  CHECK(out_a == out_b);
  CHECK(resumed.usage.cached_tokens == stored);
  CHECK(*rt->next_logits(*a) == *rt->next_logits(*b));
  CHECK(rt->stats().resumes == 1);
  check_exact(*rt, db, *a);
}

TEST_CASE("64 interleaved sessions each equal the same session run alone", "[agents]") {
  TempDir dir;
  const std::string db = dir / "batched.db", alone_db = dir / "alone.db";
  constexpr int kSessions = 64;
  std::vector<std::string> outputs(kSessions), alone(kSessions);
  std::vector<std::vector<float>> logits(kSessions);
  {
    auto rt = open_runtime(db);
    std::vector<std::string> ids;
    std::vector<std::unique_ptr<Collector>> collectors;
    for (int i = 0; i < kSessions; ++i) {
      ids.push_back(*rt->create_session({}));
      REQUIRE(rt->append_input(ids[i], {{InputItem::Kind::kUserMessage, "Question number " + std::to_string(i * 37), ""}}).ok());
    }
    // Requests from many threads at once, as a server's connections make them.
    for (int i = 0; i < kSessions; ++i) collectors.push_back(std::make_unique<Collector>());
    std::vector<std::thread> clients;
    std::atomic<int> created{0};
    for (int i = 0; i < kSessions; ++i) {
      clients.emplace_back([&, i] {
        if (rt->create_response(ids[i], greedy(4 + i % 5), collectors[i]->sink()).ok()) ++created;
      });
    }
    for (std::thread& t : clients) t.join();
    REQUIRE(created == kSessions);
    for (int i = 0; i < kSessions; ++i) {
      CHECK(collectors[i]->wait().kind == ResponseEvent::Kind::kCompleted);
      outputs[i] = collectors[i]->text();
      logits[i] = *rt->next_logits(ids[i]);
    }
    CHECK(rt->stats().largest_batch > 8);
  }
  auto rt = open_runtime(alone_db);
  for (int i = 0; i < kSessions; ++i) {
    auto id = rt->create_session({});
    REQUIRE(rt->append_input(*id, {{InputItem::Kind::kUserMessage, "Question number " + std::to_string(i * 37), ""}}).ok());
    Collector c;
    REQUIRE(rt->create_response(*id, greedy(4 + i % 5), c.sink()).ok());
    c.wait();
    CHECK(c.text() == outputs[i]);
    CHECK(*rt->next_logits(*id) == logits[i]);
  }
}

TEST_CASE("the KV memory budget is never exceeded, evicted sessions continue exactly", "[agents]") {
  TempDir dir;
  const std::string db = dir / "hippo.db";
  RuntimeOptions options;
  const uint64_t one = model().new_session().memory_bytes() + engine::SessionState::growth_bytes(model().text(), 64) +
                       engine::SessionState::logits_bytes(model().text());
  options.kv_memory_bytes = 2 * one;  // one response being restored and run, hardly any idle session beside it
  auto rt = open_runtime(db, options);
  std::vector<std::string> ids;
  for (int i = 0; i < 8; ++i) ids.push_back(*rt->create_session({}));
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 8; ++i) {
      const ResponseEvent done = turn(*rt, ids[i], "Round " + std::to_string(round) + " for " + std::to_string(i), 3);
      REQUIRE(done.kind == ResponseEvent::Kind::kCompleted);
      CHECK(rt->stats().resident_bytes <= options.kv_memory_bytes);
    }
  }
  const RuntimeStats stats = rt->stats();
  CHECK(stats.peak_committed_bytes <= options.kv_memory_bytes);
  CHECK(stats.swap_outs >= 8);
  CHECK(stats.resumes >= 8);
  for (const std::string& id : ids) check_exact(*rt, db, id);
}

// A session decoding a long answer, the time of each of its tokens kept.
struct TimedDecoder {
  Collector events;
  std::mutex mutex;
  std::vector<std::chrono::steady_clock::time_point> times;

  void start(AgentRuntime& rt, const std::string& id) {
    REQUIRE(rt.append_input(id, {{InputItem::Kind::kUserMessage, "Tell me a long story", ""}}).ok());
    EventSink collect = events.sink();
    REQUIRE(rt.create_response(id, greedy(4000), [this, collect](const ResponseEvent& e) {
      if (e.kind == ResponseEvent::Kind::kTextDelta) {
        std::lock_guard lock(mutex);
        times.push_back(std::chrono::steady_clock::now());
      }
      collect(e);
    }).ok());
    for (;;) {  // decoding
      {
        std::lock_guard lock(mutex);
        if (times.size() >= 2) return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  // The longest gap between two of its tokens within [from, to].
  double longest_gap_s(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
    std::lock_guard lock(mutex);
    double longest = 0;
    for (size_t i = 1; i < times.size(); ++i) {
      if (times[i] < from || times[i - 1] > to) continue;
      longest = std::max(longest, std::chrono::duration<double>(times[i] - times[i - 1]).count());
    }
    return longest;
  }
};

// b's decoding is watched for 300 ms after the storage work starts, with no other call to the
// runtime meanwhile (a log write would wait for the snapshot's current chunk transaction: on this
// slowed disk, hundreds of ms). Done on the engine thread, the work would stop b for all of it.
constexpr auto kWatchWindow = std::chrono::milliseconds(300);
constexpr double kMaxGapSeconds = 0.15;

TEST_CASE("a snapshot is written off the engine thread: other sessions decode meanwhile, its own session waits",
          "[agents]") {
  storage::testing::FaultingVfs disk;  // installed before the runtime opens its connections
  TempDir dir;
  const std::string db = dir / "hippo.db";
  RuntimeOptions options;
  options.snapshot_interval = std::chrono::milliseconds(0);  // a snapshot after every response
  auto rt = open_runtime(db, options);
  const std::string a = *rt->create_session({});
  const std::string b = *rt->create_session({});
  REQUIRE(turn(*rt, a, "Hello", 3).kind == ResponseEvent::Kind::kCompleted);
  auto wait_for_snapshots = [&](int64_t n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (rt->stats().snapshots < n && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    REQUIRE(rt->stats().snapshots >= n);
  };
  wait_for_snapshots(1);
  TimedDecoder decoder;
  decoder.start(*rt, b);

  // From here on the snapshot writer's disk is slow: a's next snapshot takes a while.
  disk.slow_io(storage::kThreadName, std::chrono::milliseconds(40));
  const int64_t snapshots = rt->stats().snapshots;
  REQUIRE(turn(*rt, a, "Again", 3).kind == ResponseEvent::Kind::kCompleted);  // its snapshot starts now
  const auto started = std::chrono::steady_clock::now();
  std::this_thread::sleep_until(started + kWatchWindow);
  Collector next;  // a's next response waits for the snapshot, and is exact
  REQUIRE(rt->append_input(a, {{InputItem::Kind::kUserMessage, "Once more", ""}}).ok());
  REQUIRE(rt->create_response(a, greedy(3), next.sink()).ok());
  wait_for_snapshots(snapshots + 1);
  const auto written = std::chrono::steady_clock::now();
  disk.slow_io({}, {});
  const double gap = decoder.longest_gap_s(started, started + kWatchWindow);
  INFO("b's longest gap between tokens while a's snapshot was written: " << gap << " s");
  CHECK(written > started + kWatchWindow);  // the slow disk at work: the window lies within the snapshot
  CHECK(gap < kMaxGapSeconds);
  CHECK(next.wait().kind == ResponseEvent::Kind::kCompleted);
  REQUIRE(rt->cancel(b).ok());
  decoder.events.wait();
  REQUIRE(rt->swap_out(a).ok());
  check_exact(*rt, db, a);
  check_exact(*rt, db, b);
}

TEST_CASE("a swapped-out session is read back off the engine thread: other sessions decode meanwhile", "[agents]") {
  storage::testing::FaultingVfs disk;
  TempDir dir;
  const std::string db = dir / "hippo.db";
  auto rt = open_runtime(db);
  const std::string a = *rt->create_session({});
  const std::string b = *rt->create_session({});
  REQUIRE(turn(*rt, a, "Hello", 3).kind == ResponseEvent::Kind::kCompleted);
  REQUIRE(rt->swap_out(a).ok());
  TimedDecoder decoder;
  decoder.start(*rt, b);

  disk.slow_io(kRestoreThreadName, std::chrono::milliseconds(40));
  Collector resumed;
  REQUIRE(rt->append_input(a, {{InputItem::Kind::kUserMessage, "Again", ""}}).ok());
  REQUIRE(rt->create_response(a, greedy(3), resumed.sink()).ok());  // restored on the restore thread
  const auto started = std::chrono::steady_clock::now();
  CHECK(resumed.wait().kind == ResponseEvent::Kind::kCompleted);
  const auto done = std::chrono::steady_clock::now();
  disk.slow_io({}, {});
  const double gap = decoder.longest_gap_s(started, started + kWatchWindow);
  INFO("b's longest gap between tokens while a was read back: " << gap << " s");
  CHECK(done > started + kWatchWindow);  // the slow disk at work
  CHECK(gap < kMaxGapSeconds);
  CHECK(rt->stats().resumes == 1);
  REQUIRE(rt->cancel(b).ok());
  decoder.events.wait();
  check_exact(*rt, db, a);
  check_exact(*rt, db, b);
}

TEST_CASE("the engine thread does no SQLite work: log, sessions, conversations, snapshots, restores, loads",
          "[agents]") {
  storage::testing::FaultingVfs disk;
  disk.count_io(kEngineThreadName);  // from before the runtime starts: its first retention pass too
  TempDir dir;
  const std::string db = dir / "hippo.db";
  RuntimeOptions options;
  options.snapshot_interval = std::chrono::milliseconds(0);  // a snapshot after every response
  std::string a;
  {
    auto rt = open_runtime(db, options);
    a = *rt->create_session({});
    REQUIRE(turn(*rt, a, "Hello", 3).kind == ResponseEvent::Kind::kCompleted);
    REQUIRE(rt->swap_out(a).ok());
    REQUIRE(turn(*rt, a, "Again", 3).kind == ResponseEvent::Kind::kCompleted);  // read back
    const auto fork = rt->fork_session(a);
    REQUIRE(fork.ok());
    REQUIRE(turn(*rt, *fork, "Forked", 3).kind == ResponseEvent::Kind::kCompleted);  // loaded from the database
    REQUIRE(rt->close_session(*fork).ok());
    // A stateless conversation, then its next turn continuing the idle prefix session.
    Collector first;
    const InputItem one{InputItem::Kind::kUserMessage, "One", ""};
    REQUIRE(rt->respond_to_conversation({}, std::nullopt, {one}, greedy(3), first.sink()).ok());
    REQUIRE(first.wait().kind == ResponseEvent::Kind::kCompleted);
    Collector second;
    const InputItem answer{InputItem::Kind::kAssistantMessage, first.text(), ""};
    const auto next = rt->respond_to_conversation({}, std::nullopt, {one, answer, {InputItem::Kind::kUserMessage, "Two", ""}},
                                                  greedy(3), second.sink());
    REQUIRE(next.ok());
    CHECK(!next->continued_from.empty());
    REQUIRE(second.wait().kind == ResponseEvent::Kind::kCompleted);
    REQUIRE(rt->session_summary(a).ok());
    REQUIRE(rt->list_sessions().ok());
  }
  {
    auto rt = open_runtime(db, options);  // a restart: a is loaded, then read back
    REQUIRE(turn(*rt, a, "After the restart", 3).kind == ResponseEvent::Kind::kCompleted);
    check_exact(*rt, db, a);
  }
  INFO("reads, writes, syncs and locks on the engine thread: " << disk.io_count());
  CHECK(disk.io_count() == 0);
  // The count sees the runtime's SQLite work where it is done.
  disk.count_io(kStoreThreadName);
  auto rt = open_runtime(db, options);
  REQUIRE(turn(*rt, a, "Once more", 3).kind == ResponseEvent::Kind::kCompleted);
  CHECK(disk.io_count() > 0);
}

TEST_CASE("a swap-out that cannot be written fails the response waiting for its memory clearly, and loses nothing",
          "[agents]") {
  TempDir dir;
  const std::string db = dir / "hippo.db";
  RuntimeOptions options;
  const uint64_t empty = model().new_session().memory_bytes();
  const uint64_t logits = engine::SessionState::logits_bytes(model().text());
  // Room for one short response of a new session (its state, its reservation, logits twice over),
  // not for another session's state beside it.
  options.kv_memory_bytes = empty + engine::SessionState::growth_bytes(model().text(), 64) + 2 * logits + empty / 2;
  options.snapshot_interval = std::chrono::hours(100000);  // no periodic snapshots
  auto rt = open_runtime(db, options);
  const std::string a = *rt->create_session({});
  const std::string b = *rt->create_session({});
  REQUIRE(turn(*rt, a, "Hello", 3).kind == ResponseEvent::Kind::kCompleted);  // resident, never snapshotted
  auto exec = [&](const char* sql) {
    auto conn = storage::Db::open(db, storage::Db::Mode::kReadWrite, 1000);
    REQUIRE(conn.ok());
    REQUIRE(conn->exec(sql).ok());
  };
  exec("CREATE TRIGGER no_snapshots BEFORE INSERT ON snapshots BEGIN SELECT RAISE(ABORT, 'injected: no space left'); END");
  const ResponseEvent refused = turn(*rt, b, "Hi", 3);  // needs a's memory
  CHECK(refused.kind == ResponseEvent::Kind::kFailed);
  CHECK(refused.error.code() == ErrorCode::kResourceExhausted);
  CHECK_THAT(refused.error.message(), Catch::Contains("swap-out failed") && Catch::Contains("no space left"));
  exec("DROP TRIGGER no_snapshots");
  check_exact(*rt, db, a);  // still resident, as it was
}

TEST_CASE("a response that cannot fit the budget at all fails clearly", "[agents]") {
  TempDir dir;
  RuntimeOptions options;
  options.kv_memory_bytes = model().new_session().memory_bytes() + 1000;
  auto rt = open_runtime(dir / "hippo.db", options);
  auto id = rt->create_session({});
  REQUIRE(rt->append_input(*id, {{InputItem::Kind::kUserMessage, "hi", ""}}).ok());
  Collector c;
  REQUIRE(rt->create_response(*id, greedy(4), c.sink()).ok());
  const ResponseEvent last = c.wait();
  CHECK(last.kind == ResponseEvent::Kind::kFailed);
  CHECK(last.error.code() == ErrorCode::kResourceExhausted);
}

TEST_CASE("cancelling mid-prefill leaves the session usable and exact", "[agents]") {
  TempDir dir;
  const std::string db = dir / "hippo.db";
  RuntimeOptions options;
  options.prefill_chunk_tokens = 32;
  auto rt = open_runtime(db, options);
  auto id = rt->create_session({});
  std::string long_text;
  for (int i = 0; i < 300; ++i) long_text += "word" + std::to_string(i) + " ";
  REQUIRE(rt->append_input(*id, {{InputItem::Kind::kUserMessage, long_text, ""}}).ok());
  Collector c;
  REQUIRE(rt->create_response(*id, greedy(8), c.sink()).ok());
  REQUIRE(rt->cancel(*id).ok());
  const ResponseEvent cancelled = c.wait();
  CHECK(cancelled.kind == ResponseEvent::Kind::kCompleted);
  CHECK(cancelled.finish_reason == "cancelled");
  const ResponseEvent next = turn(*rt, *id, "Short question?", 4);
  CHECK(next.kind == ResponseEvent::Kind::kCompleted);
  CHECK(next.finish_reason != "cancelled");
  check_exact(*rt, db, *id);
}

TEST_CASE("a killed process: every session continues from its snapshot plus its log", "[agents]") {
  TempDir dir;
  const std::string db = dir / "hippo.db";
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {  // the process that dies: its own model, two turns, one snapshot between them
    engine::ModelOptions mo;
    mo.n_threads = 1;
    auto m = engine::Model::load(Fixture().model_dir, mo);
    auto t = tokenizer::Tokenizer::load(std::filesystem::path(Fixture().model_dir) / "tokenizer.json");
    RuntimeOptions options;
    options.db_path = db;
    options.snapshot_interval = std::chrono::hours(1);
    auto rt = AgentRuntime::open(**m, *t, options);
    if (!rt.ok()) _exit(2);
    for (const char* name : {"alpha", "beta"}) {
      if (!(*rt)->create_session({}, name).ok()) _exit(3);
      if (!(*rt)->append_input(name, {{InputItem::Kind::kUserMessage, std::string("first for ") + name, ""}}).ok()) _exit(5);
      Collector c1;
      if (!(*rt)->create_response(name, greedy(4), c1.sink()).ok()) _exit(6);
      c1.wait();
      if (!(*rt)->snapshot(name).ok()) _exit(4);
      if (!(*rt)->append_input(name, {{InputItem::Kind::kUserMessage, "second", ""}}).ok()) _exit(7);
      Collector c2;
      if (!(*rt)->create_response(name, greedy(4), c2.sink()).ok()) _exit(8);
      c2.wait();
    }
    // Killed in the middle of a response: its prompt is logged, its answer is not.
    if (!(*rt)->append_input("alpha", {{InputItem::Kind::kUserMessage, "a long answer, please", ""}}).ok()) _exit(9);
    std::atomic<int> tokens{0};
    ResponseOptions sampled = greedy(4096);
    sampled.sampling.temperature = 1.0;
    if (!(*rt)->create_response("alpha", sampled, [&](const ResponseEvent& e) {
          tokens += e.kind == ResponseEvent::Kind::kCompleted ? 1000 : 1;
        }).ok())
      _exit(10);
    while (tokens < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (tokens >= 1000) _exit(11);  // it was to be killed mid-response
    raise(SIGKILL);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFSIGNALED(status));
  REQUIRE(WTERMSIG(status) == SIGKILL);

  auto rt = open_runtime(db);
  for (const char* name : {"alpha", "beta"}) {
    const ResponseEvent next = turn(*rt, name, "third", 4);
    REQUIRE(next.kind == ResponseEvent::Kind::kCompleted);
    check_exact(*rt, db, name);
  }
  CHECK(rt->stats().resumes == 2);
  CHECK(rt->stats().rebuilds == 0);
}

TEST_CASE("a corrupt snapshot is rebuilt from the log, never used", "[agents]") {
  TempDir dir;
  const std::string db = dir / "hippo.db";
  std::string id;
  {
    auto rt = open_runtime(db);
    id = *rt->create_session({});
    turn(*rt, id, "Remember this.", 4);
    REQUIRE(rt->shutdown().ok());
  }
  {
    auto raw = storage::Db::open(db, storage::Db::Mode::kReadWrite, 1000);
    REQUIRE(raw.ok());
    REQUIRE(raw->exec("UPDATE kv_chunks SET checksum = checksum + 1").ok());
  }
  auto rt = open_runtime(db);
  const ResponseEvent next = turn(*rt, id, "What was it?", 4);
  REQUIRE(next.kind == ResponseEvent::Kind::kCompleted);
  CHECK(rt->stats().rebuilds == 1);
  check_exact(*rt, db, id);
}

TEST_CASE("a session of another model is refused", "[agents]") {
  TempDir dir;
  const std::string db = dir / "hippo.db";
  {
    auto store = storage::SessionStore::open(db);
    REQUIRE((*store)->create_session({"foreign", std::nullopt, "0000000000000000"}).ok());
  }
  auto rt = open_runtime(db);
  CHECK(rt->session("foreign").status().code() == ErrorCode::kFailedPrecondition);
}

}  // namespace
}  // namespace hippo::agents

namespace hippo::agents {

using namespace hippo::agents::testing;

// The tool-call flow from a log in which the model called two tools (written through the real
// store, ids rendered by the real chat encoder): the session comes back awaiting both results,
// refuses a response until they are in, and renders them in the order of the calls whatever the
// order they were given in.
TEST_CASE("tool calls: awaiting_tool until every result is in, results rendered in call order", "[agents]") {
  TempDir dir;
  const std::string db = dir / "hippo.db";
  SessionSettings settings;
  settings.tools = {{"calc", "Evaluates arithmetic", R"({"type":"object","properties":{"expr":{"type":"string"}}})"},
                    {"whoami", "Names the assistant", R"({"type":"object","properties":{}})"}};
  const tokenizer::DsmlSyntax& x = tokenizer::dsml_syntax(chat_family(tok()));
  const std::string calls = "\n\n" + std::string(x.block_open) + "\n" + std::string(x.invoke_open) + "calc\">\n" +
                            std::string(x.param_open) + "expr\" string=\"true\">2+2" + std::string(x.param_close) + "\n" +
                            std::string(x.invoke_close) + "\n" + std::string(x.invoke_open) + "whoami\">\n" +
                            std::string(x.invoke_close) + "\n" + std::string(x.block_close);
  {
    auto store = storage::SessionStore::open(db);
    REQUIRE(store.ok());
    REQUIRE((*store)->create_session({"tools", std::nullopt, model().fingerprint(), settings_to_json(settings)}).ok());
    tokenizer::ChatOptions options;
    options.family = chat_family(tok());
    options.tools = settings.tools;
    options.thinking = settings.thinking;
    tokenizer::ChatEncoder encoder(tok(), options);
    tokenizer::Message user;
    user.content = "What is 2+2, and who are you?";
    auto prompt = encoder.encode_chat_suffix(std::vector{user}, true);
    REQUIRE(prompt.ok());
    storage::MessageRecord u;
    u.role = "user";
    u.content = user.content;
    REQUIRE((*store)->append_message("tools", u).ok());
    storage::MessageRecord p;
    p.role = "prompt";
    p.token_ids = prompt->ids;
    p.n_tokens = static_cast<int64_t>(p.token_ids.size());
    REQUIRE((*store)->append_message("tools", p).ok());
    storage::MessageRecord a;
    a.role = "assistant";
    a.content = "Let me check." + calls;
    a.tool_calls = calls;
    a.first_token = p.n_tokens;
    a.token_ids = tok().encode(a.content);
    a.token_ids.push_back(static_cast<int32_t>(model().config().eos_token_id));
    a.n_tokens = static_cast<int64_t>(a.token_ids.size());
    REQUIRE((*store)->append_message("tools", a).ok());
  }
  auto rt = open_runtime(db);
  auto view = rt->session("tools");
  INFO(view.status().to_string());
  REQUIRE(view.ok());
  CHECK(view->status == SessionStatus::kAwaitingTool);
  CHECK(view->awaiting_call_ids == std::vector<std::string>{"call_0", "call_1"});
  Collector refused;
  CHECK(rt->create_response("tools", greedy(2), refused.sink()).code() == ErrorCode::kFailedPrecondition);
  REQUIRE(rt->append_input("tools", {{InputItem::Kind::kToolResult, "I am hippo-zeta", "call_1"}}).ok());
  CHECK(rt->session("tools")->status == SessionStatus::kAwaitingTool);
  REQUIRE(rt->append_input("tools", {{InputItem::Kind::kToolResult, "result-four", "call_0"}}).ok());
  CHECK(rt->session("tools")->status == SessionStatus::kSwapped);  // ready, state not loaded yet
  Collector c;
  REQUIRE(rt->create_response("tools", greedy(2), c.sink()).ok());
  CHECK(c.wait().kind == ResponseEvent::Kind::kCompleted);

  auto store = storage::SessionStore::open(db);
  auto log = (*store)->list_messages("tools");
  REQUIRE(log.ok());
  const storage::MessageRecord* last_prompt = nullptr;
  for (const auto& row : *log)
    if (row.role == "prompt") last_prompt = &row;
  REQUIRE(last_prompt != nullptr);
  const std::string rendered = tok().decode(last_prompt->token_ids);
  INFO(rendered);
  const size_t four = rendered.find("result-four"), zeta = rendered.find("I am hippo-zeta");
  REQUIRE(four != std::string::npos);
  REQUIRE(zeta != std::string::npos);
  CHECK(four < zeta);  // call_0's result first, as the calls were written
  check_exact(*rt, db, "tools");
}

TEST_CASE("a tool call required: the answer inside the prompt's block is a call, replayed exactly", "[agents]") {
  TempDir dir;
  const std::string db = dir / "hippo.db";
  SessionSettings settings;
  settings.tools = {{"calc", "Evaluates arithmetic", R"({"type":"object","properties":{"expr":{"type":"string"}}})"}};
  settings.tool_choice = tokenizer::ToolChoice::kRequired;
  const tokenizer::DsmlSyntax& x = tokenizer::dsml_syntax(chat_family(tok()));
  // What the model writes after the generation prompt, which ends with the block's opening.
  const std::string body = std::string(x.invoke_open) + "calc\">\n" + std::string(x.param_open) +
                           "expr\" string=\"true\">2+2" + std::string(x.param_close) + "\n" +
                           std::string(x.invoke_close) + "\n" + std::string(x.block_close);
  tokenizer::ChatOptions options;
  options.family = chat_family(tok());
  options.tools = settings.tools;
  options.thinking = settings.thinking;
  options.tool_choice = settings.tool_choice;
  const OutputStart start = output_start(options);
  CHECK(start.in_tool_calls);
  {
    auto store = storage::SessionStore::open(db);
    REQUIRE(store.ok());
    REQUIRE((*store)->create_session({"required", std::nullopt, model().fingerprint(), settings_to_json(settings)}).ok());
    tokenizer::ChatEncoder encoder(tok(), options);
    tokenizer::Message user;
    user.content = "What is 2+2?";
    auto prompt = encoder.encode_chat_suffix(std::vector{user}, true);
    REQUIRE(prompt.ok());
    CHECK(prompt->text.ends_with("\n\n" + std::string(x.block_open) + "\n"));
    storage::MessageRecord u;
    u.role = "user";
    u.content = user.content;
    REQUIRE((*store)->append_message("required", u).ok());
    storage::MessageRecord p;
    p.role = "prompt";
    p.token_ids = prompt->ids;
    p.n_tokens = static_cast<int64_t>(p.token_ids.size());
    REQUIRE((*store)->append_message("required", p).ok());
    // The answer as the runtime logs one: the sampled ids (here the output's) and EOS.
    const AssistantTurn turn = parse_assistant_output(body, chat_family(tok()), start, 0);
    REQUIRE(turn.calls.size() == 1);
    CHECK(turn.raw_tool_calls == body);
    storage::MessageRecord a;
    a.role = "assistant";
    a.content = body;
    a.tool_calls = turn.raw_tool_calls;
    a.first_token = p.n_tokens;
    a.token_ids = tok().encode(body);
    a.token_ids.push_back(static_cast<int32_t>(model().config().eos_token_id));
    a.n_tokens = static_cast<int64_t>(a.token_ids.size());
    REQUIRE((*store)->append_message("required", a).ok());
    // The replayed turn renders to exactly the ids the live context holds after the prompt.
    auto rendered = encoder.encode_chat_suffix(std::vector{turn.message(settings.thinking)}, false);
    INFO(rendered.status().to_string());
    REQUIRE(rendered.ok());
    CHECK(rendered->ids == a.token_ids);
  }
  auto rt = open_runtime(db);
  auto view = rt->session("required");
  INFO(view.status().to_string());
  REQUIRE(view.ok());
  CHECK(view->status == SessionStatus::kAwaitingTool);
  CHECK(view->awaiting_call_ids == std::vector<std::string>{"call_0"});
  REQUIRE(rt->append_input("required", {{InputItem::Kind::kToolResult, "result-four", "call_0"}}).ok());
  Collector c;
  REQUIRE(rt->create_response("required", greedy(3), c.sink()).ok());
  CHECK(c.wait().kind == ResponseEvent::Kind::kCompleted);
  check_exact(*rt, db, "required");

  auto store = storage::SessionStore::open(db);
  auto log = (*store)->list_messages("required");
  REQUIRE(log.ok());
  const std::string rendered = tok().decode(log->at(log->size() - 2).token_ids);  // the second prompt
  INFO(rendered);
  CHECK(rendered.find("result-four") != std::string::npos);
  CHECK(rendered.ends_with("\n\n" + std::string(x.block_open) + "\n"));  // the block opened again
}

TEST_CASE("a tool call required: live responses keep the session usable and its log replays exactly", "[agents]") {
  TempDir dir;
  const std::string db = dir / "hippo.db";
  SessionSettings settings;
  settings.tools = {{"calc", "Evaluates arithmetic", R"({"type":"object","properties":{"expr":{"type":"string"}}})"}};
  settings.tool_choice = tokenizer::ToolChoice::kRequired;
  for (const bool thinking : {false, true}) {
    settings.thinking = thinking;
    const std::string id = thinking ? "thinking" : "chat";
    {
      auto rt = open_runtime(db);
      REQUIRE(rt->create_session(settings, id).ok());
      // The tiny random model writes no valid call: each answer is text, and the next turn goes on.
      for (const char* text : {"first", "second"}) {
        const ResponseEvent done = turn(*rt, id, text, 4);
        INFO(done.error.to_string());
        REQUIRE(done.kind == ResponseEvent::Kind::kCompleted);
      }
      check_exact(*rt, db, id);
    }
    auto rt = open_runtime(db);  // a new process: the log is replayed
    const ResponseEvent third = turn(*rt, id, "third", 4);
    REQUIRE(third.kind == ResponseEvent::Kind::kCompleted);
    check_exact(*rt, db, id);
  }
}

TEST_CASE("a fork continues exactly as its source would, and belongs to the same tenant", "[agents]") {
  TempDir dir;
  const std::string db = dir / "hippo.db";
  int64_t acme = 0, other = 0;
  {
    auto store = storage::SessionStore::open(db);
    REQUIRE(store.ok());
    acme = (*store)->create_tenant("acme").value();
    other = (*store)->create_tenant("other").value();
  }
  auto rt = open_runtime(db);
  SessionSettings settings;
  settings.instructions = "You are a hippo.";
  auto source = rt->create_session(settings, "source", acme);
  REQUIRE(source.ok());
  REQUIRE(rt->create_session({}, "elsewhere", other).ok());
  turn(*rt, *source, "Tell me about rivers.", 5);
  // An input appended but not yet answered is part of what the fork copies.
  REQUIRE(rt->append_input(*source, {{InputItem::Kind::kUserMessage, "And lakes?", ""}}).ok());

  auto fork = rt->fork_session(*source);
  REQUIRE(fork.ok());
  CHECK(*fork != *source);
  CHECK(rt->session(*fork)->tenant == std::optional<int64_t>(acme));
  CHECK(rt->session(*source)->tenant == std::optional<int64_t>(acme));
  CHECK(rt->session_summary(*fork)->forked_from == *source);
  CHECK(rt->session_summary(*fork)->tenant == std::optional<int64_t>(acme));
  // The source was snapshotted first: the fork restores its whole state, with no prefill.
  CHECK(rt->session(*fork)->n_tokens == rt->session(*source)->n_tokens);
  CHECK(rt->session(*fork)->n_tokens > 0);
  CHECK(rt->session(*fork)->pending_tokens == rt->session(*source)->pending_tokens);
  CHECK(*rt->next_logits(*fork) == *rt->next_logits(*source));
  CHECK(rt->stats().rebuilds == 0);

  // The same response on both: the same text, the same state after it.
  ResponseOptions seeded = greedy(6);
  seeded.sampling.temperature = 1.0;
  seeded.sampling.seed = 7;
  std::string texts[2];
  for (int i = 0; i < 2; ++i) {
    Collector c;
    REQUIRE(rt->create_response(i == 0 ? *source : *fork, seeded, c.sink()).ok());
    REQUIRE(c.wait().kind == ResponseEvent::Kind::kCompleted);
    texts[i] = c.text();
  }
  CHECK(texts[0] == texts[1]);
  CHECK(*rt->next_logits(*fork) == *rt->next_logits(*source));
  check_exact(*rt, db, *fork);

  // A swapped-out source forks from its snapshot; the fork of a fork works too.
  REQUIRE(rt->swap_out(*source).ok());
  auto second = rt->fork_session(*fork, "second");
  REQUIRE(second.ok());
  CHECK(*second == "second");
  auto third = rt->fork_session(*source);
  REQUIRE(third.ok());
  std::string a, b, c;
  turn(*rt, *source, "Continue.", 4, &a);
  turn(*rt, *second, "Continue.", 4, &b);
  turn(*rt, *third, "Continue.", 4, &c);
  CHECK(a == b);
  CHECK(a == c);
  CHECK(*rt->next_logits(*source) == *rt->next_logits(*second));
  CHECK(*rt->next_logits(*source) == *rt->next_logits(*third));

  // Not while a response runs; not of a session that does not exist.
  REQUIRE(rt->append_input(*source, {{InputItem::Kind::kUserMessage, "Talk for a long time.", ""}}).ok());
  Collector running;
  REQUIRE(rt->create_response(*source, greedy(20000), running.sink()).ok());  // still running at the fork
  CHECK(rt->fork_session(*source).status().code() == ErrorCode::kFailedPrecondition);
  REQUIRE(rt->cancel(*source).ok());
  running.wait();
  CHECK(rt->fork_session("missing").status().code() == ErrorCode::kNotFound);

  // Listing and counting by tenant, without loading.
  CHECK(rt->list_sessions(acme)->size() == 4);
  CHECK(rt->list_sessions(other)->size() == 1);
  CHECK(rt->list_sessions()->size() == 5);
  CHECK(rt->count_open_sessions(acme).value() == 4);
  REQUIRE(rt->close_session(*third).ok());
  CHECK(rt->count_open_sessions(acme).value() == 3);
  CHECK(rt->session_summary(*third)->status == SessionStatus::kClosed);
  CHECK(rt->session_summary("missing").status().code() == ErrorCode::kNotFound);
}

}  // namespace hippo::agents

namespace hippo::agents {
namespace {

using namespace hippo::agents::testing;

TEST_CASE("a turn whose log write fails ends with an error, the session then continues from its log, exactly",
          "[agents]") {
  TempDir dir;
  const std::string db = dir / "hippo.db";
  auto rt = open_runtime(db);
  auto id = rt->create_session(SessionSettings{});
  REQUIRE(id.ok());
  CHECK(turn(*rt, *id, "Hello there", 4).kind == ResponseEvent::Kind::kCompleted);
  auto exec = [&](const char* sql) {
    auto conn = storage::Db::open(db, storage::Db::Mode::kReadWrite, 1000);
    REQUIRE(conn.ok());
    REQUIRE(conn->exec(sql).ok());
  };
  // The answer's row cannot be written (as on a full disk); everything else can.
  exec("CREATE TRIGGER no_answers BEFORE INSERT ON messages WHEN NEW.role = 'assistant' "
       "BEGIN SELECT RAISE(ABORT, 'injected: no space left'); END");
  const ResponseEvent failed = turn(*rt, *id, "Again", 4);
  CHECK(failed.kind == ResponseEvent::Kind::kFailed);
  CHECK_THAT(failed.error.message(), Catch::Contains("could not be logged") && Catch::Contains("no space left"));
  exec("DROP TRIGGER no_answers");
  // Loaded again from the database: the failed turn closes as an empty answer, as after a crash.
  CHECK(turn(*rt, *id, "Third", 4).kind == ResponseEvent::Kind::kCompleted);
  check_exact(*rt, db, *id);
}

}  // namespace
}  // namespace hippo::agents
