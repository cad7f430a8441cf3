#include "api/server/session_streams.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <thread>
#include <vector>

namespace hippo::server {
namespace {

boost::json::object delta(std::string_view text) { return {{"type", "response.output_text.delta"}, {"delta", text}}; }

int64_t seq_of(const boost::json::object& event) { return event.at("session_seq").as_int64(); }

TEST_CASE("a reconnecting client gets exactly the events it missed, then the live ones", "[server]") {
  SessionStreams streams(1 << 20);
  std::vector<int64_t> first, second;
  REQUIRE(streams.attach("s", 1, [&](boost::json::object e, bool) { first.push_back(seq_of(e)); }, std::nullopt).value() == 0);
  streams.publish("s", delta("a"));
  streams.publish("s", delta("b"));
  CHECK(first == std::vector<int64_t>{1, 2});
  CHECK(streams.detach("s", 1));
  CHECK_FALSE(streams.attached("s"));
  streams.publish("s", delta("c"));  // nobody attached: kept only
  streams.publish("s", delta("d"));
  CHECK(first.size() == 2);

  std::vector<bool> replayed;
  auto last = streams.attach("s", 2, [&](boost::json::object e, bool replay) {
    second.push_back(seq_of(e));
    replayed.push_back(replay);
  }, 2);
  REQUIRE(last.ok());
  CHECK(*last == 4);
  streams.publish("s", delta("e"));
  CHECK(second == std::vector<int64_t>{3, 4, 5});
  CHECK(replayed == std::vector<bool>{true, true, false});
  CHECK_FALSE(streams.detach("s", 1));  // the old connection no longer owns the stream
  CHECK(streams.attached("s"));
}

TEST_CASE("a new attachment replaces the old one, after_seq must be a seq of the stream", "[server]") {
  SessionStreams streams(1 << 20);
  int old_calls = 0, new_calls = 0;
  REQUIRE(streams.attach("s", 1, [&](boost::json::object, bool) { ++old_calls; }, std::nullopt).ok());
  streams.publish("s", delta("a"));
  REQUIRE(streams.attach("s", 2, [&](boost::json::object, bool) { ++new_calls; }, std::nullopt).ok());
  streams.publish("s", delta("b"));
  CHECK(old_calls == 1);
  CHECK(new_calls == 1);
  CHECK(streams.attach("s", 3, [](boost::json::object, bool) {}, 3).status().code() == ErrorCode::kInvalidArgument);
  CHECK(streams.attach("s", 3, [](boost::json::object, bool) {}, -1).status().code() == ErrorCode::kInvalidArgument);
  CHECK(streams.detach("s", 2));  // the failed attaches changed nothing
}

TEST_CASE("the replay buffer is bounded, asking for dropped events is an error, not a silent gap", "[server]") {
  SessionStreams streams(2000);
  for (int i = 0; i < 100; ++i) streams.publish("s", delta(std::string(50, 'x')));
  CHECK(streams.kept_bytes() <= 2000);
  CHECK(streams.kept_bytes() > 1000);
  CHECK_FALSE(streams.attach("s", 1, [](boost::json::object, bool) {}, 0).ok());
  std::vector<int64_t> got;
  REQUIRE(streams.attach("s", 1, [&](boost::json::object e, bool) { got.push_back(seq_of(e)); }, 95).ok());
  CHECK(got == std::vector<int64_t>{96, 97, 98, 99, 100});

  streams.forget("s");
  CHECK(streams.kept_bytes() == 0);
}

TEST_CASE("a finished response stays replayable while a reader is attached and for the grace after it leaves",
          "[server]") {
  using std::chrono::hours;
  SessionStreams streams(1 << 20);
  REQUIRE(streams.attach("s", 1, [](boost::json::object, bool) {}, std::nullopt).ok());
  streams.publish("s", {{"type", "response.created"}}, SessionStreams::Phase::kStart);
  streams.publish("s", delta("a"));
  streams.publish("s", {{"type", "response.completed"}}, SessionStreams::Phase::kEnd);  // seq 3
  streams.publish("s", {{"type", "response.created"}}, SessionStreams::Phase::kStart);  // the next one runs
  CHECK_FALSE(streams.trim_finished("s", hours(0)));  // a reader is attached: it may still ask again
  REQUIRE(streams.detach("s", 1));
  CHECK_FALSE(streams.trim_finished("s", hours(1)));  // it left less than the grace ago
  CHECK(streams.attach("s", 2, [](boost::json::object, bool) {}, 0).ok());
  REQUIRE(streams.detach("s", 2));
  CHECK(streams.trim_finished("s", hours(0)));
  CHECK_FALSE(streams.attach("s", 3, [](boost::json::object, bool) {}, 2).ok());  // the finished one is gone
  std::vector<int64_t> got;
  REQUIRE(streams.attach("s", 3, [&](boost::json::object e, bool) { got.push_back(seq_of(e)); }, 3).ok());
  CHECK(got == std::vector<int64_t>{4});  // the running one is kept
  CHECK_FALSE(streams.trim_finished("unknown", hours(0)));
  streams.forget("s");
  CHECK(streams.kept_bytes() == 0);
}

TEST_CASE("the answer to a resume precedes the replay, a running response knows when it lost its reader", "[server]") {
  SessionStreams streams(1 << 20);
  CHECK_FALSE(streams.unattached_for("s"));
  std::vector<std::string> order;
  auto deliver = [&](boost::json::object e, bool) { order.emplace_back(e.at("type").as_string()); };
  REQUIRE(streams.attach("s", 1, deliver, std::nullopt).ok());
  streams.publish("s", {{"type", "response.created"}}, SessionStreams::Phase::kStart);
  streams.publish("s", delta("a"));
  CHECK_FALSE(streams.unattached_for("s"));  // attached
  REQUIRE(streams.detach("s", 1));
  REQUIRE(streams.unattached_for("s"));
  CHECK(*streams.unattached_for("s") >= SessionStreams::Clock::duration::zero());
  order.clear();
  auto last = streams.attach("s", 2, deliver, 1, [&](int64_t last_seq) {
    CHECK(last_seq == 2);
    order.emplace_back("session.resumed");
  });
  REQUIRE(last.ok());
  CHECK(order == std::vector<std::string>{"session.resumed", "response.output_text.delta"});
  CHECK_FALSE(streams.unattached_for("s"));
  streams.publish("s", {{"type", "response.completed"}}, SessionStreams::Phase::kEnd);
  REQUIRE(streams.detach("s", 2));
  CHECK_FALSE(streams.unattached_for("s"));  // nothing runs
}

TEST_CASE("reconnecting while events are published loses and repeats nothing", "[server]") {
  SessionStreams streams(size_t{1} << 30);
  constexpr int64_t kEvents = 20000;
  std::atomic<bool> done{false};
  std::thread publisher([&] {
    for (int64_t i = 0; i < kEvents; ++i) streams.publish("s", delta("t"));
    done = true;
  });
  std::vector<int64_t> seen;  // written only by deliver, which runs under the streams' lock
  std::atomic<int64_t> last_seen{0};
  uint64_t connection = 1;
  while (!done.load() || last_seen.load() < kEvents) {
    auto deliver = [&](boost::json::object e, bool) {
      seen.push_back(seq_of(e));
      last_seen = seq_of(e);
    };
    REQUIRE(streams.attach("s", connection, deliver, last_seen.load()).ok());
    std::this_thread::yield();
    streams.detach("s", connection);
    ++connection;
  }
  publisher.join();
  REQUIRE(seen.size() == static_cast<size_t>(kEvents));
  for (size_t i = 0; i < seen.size(); ++i) REQUIRE(seen[i] == static_cast<int64_t>(i) + 1);
}

}  // namespace
}  // namespace hippo::server
