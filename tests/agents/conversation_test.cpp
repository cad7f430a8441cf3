// Stateless conversations (AgentRuntime::respond_to_conversation) on the real engine and a real
// SQLite file: the idle session holding the longest prefix is continued exactly and never changed,
// tenants never share prefixes, client-given assistant turns and tool results are rendered and
// replayed after a restart, and the idle prefix sessions stay bounded.
#include "agents/runtime.h"
#include "tests/agents/runtime_fixture.h"

#include <catch2/catch.hpp>

#include <thread>

namespace hippo::agents {
namespace {

using namespace hippo::agents::testing;

InputItem user(std::string text) {
  InputItem item;
  item.content = std::move(text);
  return item;
}

InputItem tool_result(std::string call_id, std::string output) {
  InputItem item;
  item.kind = InputItem::Kind::kToolResult;
  item.tool_call_id = std::move(call_id);
  item.content = std::move(output);
  return item;
}

struct Turn {
  AgentRuntime::ConversationResponse started;
  ResponseEvent last;
  InputItem answer;  // as a client sends it back: the text and the calls it was given
};

Turn respond(AgentRuntime& rt, const SessionSettings& settings, const std::vector<InputItem>& items,
             std::optional<int64_t> tenant = std::nullopt) {
  Collector c;
  auto started = rt.respond_to_conversation(settings, tenant, items, greedy(5), c.sink());
  INFO(started.status().to_string());
  REQUIRE(started.ok());
  Turn t{*started, c.wait(), {}};
  REQUIRE(t.last.kind == ResponseEvent::Kind::kCompleted);
  t.answer.kind = InputItem::Kind::kAssistantMessage;
  std::lock_guard lock(c.mutex);
  for (const ResponseEvent& e : c.events) {
    if (e.kind == ResponseEvent::Kind::kTextDelta) t.answer.content += e.text;
    if (e.kind == ResponseEvent::Kind::kToolCallDone) t.answer.tool_calls.push_back({e.call_id, e.name, e.text});
  }
  return t;
}

std::vector<InputItem> with(std::vector<InputItem> items, std::initializer_list<InputItem> more) {
  items.insert(items.end(), more);
  return items;
}

TEST_CASE("a conversation continues the idle session holding its longest prefix, exactly, leaving it unchanged",
          "[agents][conversation]") {
  TempDir dir;
  const std::string db = dir / "hippo.db";
  const int64_t other_tenant = [&] {
    auto store = storage::SessionStore::open(db);
    REQUIRE(store.ok());
    return (*store)->create_tenant("other").value();
  }();
  auto rt = open_runtime(db);
  SessionSettings settings;
  settings.instructions = "Be brief.";

  const std::vector<InputItem> first{user("Hello there")};
  const Turn t1 = respond(*rt, settings, first);
  CHECK(t1.started.continued_from.empty());
  CHECK(t1.last.usage.cached_tokens == 0);
  const int64_t held = rt->session(t1.started.session_id)->n_tokens;
  const size_t logged = storage::SessionStore::open(db).value()->list_messages(t1.started.session_id)->size();

  // The next turn: only the new message is prefilled.
  const std::vector<InputItem> second = with(first, {t1.answer, user("And then?")});
  const Turn t2 = respond(*rt, settings, second);
  CHECK(t2.started.continued_from == t1.started.session_id);
  CHECK(t2.last.usage.cached_tokens == held);
  CHECK(t2.last.usage.input_tokens > held);
  check_exact(*rt, db, t2.started.session_id);
  // The source is as it was: its log, its tokens, still open for another continuation.
  CHECK(storage::SessionStore::open(db).value()->list_messages(t1.started.session_id)->size() == logged);
  CHECK(rt->session(t1.started.session_id)->n_tokens == held);

  // A conversation that diverges after the first answer continues from there, not from turn two.
  const Turn t3 = respond(*rt, settings, with(first, {t1.answer, user("Something else")}));
  CHECK(t3.started.continued_from == t1.started.session_id);
  CHECK(t3.last.usage.cached_tokens == held);
  check_exact(*rt, db, t3.started.session_id);

  // Nothing matches: another tenant, other settings, an answer the model did not give.
  CHECK(respond(*rt, settings, second, other_tenant).started.continued_from.empty());
  SessionSettings other_settings = settings;
  other_settings.instructions = "Be verbose.";
  CHECK(respond(*rt, other_settings, second).started.continued_from.empty());
  InputItem edited = t1.answer;
  edited.content += " (edited)";
  CHECK(respond(*rt, settings, with(first, {edited, user("And then?")})).started.continued_from.empty());

  // Re-sent after a restart, the conversation still continues (from storage this time), exactly.
  rt.reset();
  rt = open_runtime(db);
  const Turn t4 = respond(*rt, settings, with(second, {t2.answer, user("Go on")}));
  CHECK(t4.started.continued_from == t2.started.session_id);
  CHECK(t4.last.usage.cached_tokens > held);
  check_exact(*rt, db, t4.started.session_id);
  // Idle prefix sessions do not count as the tenant's open sessions.
  CHECK(rt->count_open_sessions(other_tenant).value() == 0);
}

TEST_CASE("continuations of one prefix sent at once each continue it, exactly", "[agents][conversation]") {
  TempDir dir;
  const std::string db = dir / "hippo.db";
  RuntimeOptions options;
  options.snapshot_interval = std::chrono::hours(1);  // the prefix session's state is snapshotted only as a fork takes it
  auto rt = open_runtime(db, options);
  SessionSettings settings;
  const std::vector<InputItem> first{user("Hello there")};
  const Turn t1 = respond(*rt, settings, first);
  // One fork takes the prefix session's state while its snapshot is written; the others copy the
  // storage as it is then (before or after that snapshot) and are read back or rebuilt.
  constexpr size_t kContinuations = 4;
  std::vector<Collector> collectors(kContinuations);
  std::vector<Result<AgentRuntime::ConversationResponse>> started(kContinuations, Status(ErrorCode::kInternal, "not run"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < kContinuations; ++i) {
    threads.emplace_back([&, i] {  // no Catch assertions off the test's thread
      started[i] = rt->respond_to_conversation(settings, std::nullopt,
                                               with(first, {t1.answer, user("Branch " + std::to_string(i))}), greedy(5),
                                               collectors[i].sink());
    });
  }
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < kContinuations; ++i) {
    INFO(started[i].status().to_string());
    REQUIRE(started[i].ok());
    CHECK(started[i]->continued_from == t1.started.session_id);
    CHECK(collectors[i].wait().kind == ResponseEvent::Kind::kCompleted);
  }
  // Checked once every response is done: the reference prefill shares the model's thread pool with
  // the engine thread, one forward at a time.
  for (size_t i = 0; i < kContinuations; ++i) check_exact(*rt, db, started[i]->session_id);
  check_exact(*rt, db, t1.started.session_id);  // the source, as it was
}

TEST_CASE("a conversation with the client's own tool-calling turns renders, continues and replays exactly",
          "[agents][conversation]") {
  TempDir dir;
  const std::string db = dir / "hippo.db";
  auto rt = open_runtime(db);
  SessionSettings settings;
  settings.tools.push_back({"add", "Adds two numbers.", R"({"type":"object","properties":{"a":{"type":"number"}}})"});
  InputItem call;
  call.kind = InputItem::Kind::kAssistantMessage;
  call.tool_calls = {{"call_0", "add", R"({"a": 2})"}, {"call_1", "add", R"({"a": 3})"}};
  const std::vector<InputItem> first{user("Add 2 and 3"), call, tool_result("call_1", "3"), tool_result("call_0", "2")};
  const Turn t1 = respond(*rt, settings, first);
  check_exact(*rt, db, t1.started.session_id);

  // A result for a call that is not open is refused, and nothing is left open.
  Collector refused;
  auto bad = rt->respond_to_conversation(settings, std::nullopt, {user("Hi"), tool_result("call_9", "x")}, greedy(3),
                                         refused.sink());
  CHECK(bad.status().code() == ErrorCode::kInvalidArgument);

  rt.reset();
  rt = open_runtime(db);  // the log's client-given turn replays
  const Turn t2 = respond(*rt, settings, with(first, {t1.answer, user("Thanks")}));
  CHECK(t2.started.continued_from == t1.started.session_id);
  check_exact(*rt, db, t2.started.session_id);
}

TEST_CASE("idle prefix sessions are bounded per tenant, least recently used closed first", "[agents][conversation]") {
  TempDir dir;
  const std::string db = dir / "hippo.db";
  RuntimeOptions options;
  options.max_prefix_sessions = 2;
  auto rt = open_runtime(db, options);
  SessionSettings settings;
  std::vector<std::string> ids;
  for (const char* text : {"one", "two", "three"}) ids.push_back(respond(*rt, settings, {user(text)}).started.session_id);
  CHECK(rt->session_summary(ids[0])->status == SessionStatus::kClosed);
  CHECK(rt->session_summary(ids[1])->status != SessionStatus::kClosed);
  CHECK(rt->session_summary(ids[2])->status != SessionStatus::kClosed);

  // A cancelled response's session is closed: no one can continue it.
  Collector c;
  ResponseOptions long_answer = greedy(20000);  // long enough to be running when cancelled, drafts or not
  auto started = rt->respond_to_conversation(settings, std::nullopt, {user("four")}, long_answer, c.sink());
  REQUIRE(started.ok());
  REQUIRE(rt->cancel(started->session_id).ok());
  CHECK(c.wait().finish_reason == "cancelled");
  CHECK(rt->session_summary(started->session_id)->status == SessionStatus::kClosed);
}

}  // namespace
}  // namespace hippo::agents
