// Speculative decoding in the runtime (context or DSpark drafts, verified in the batched decode step): greedy
// output token for token as without it, for a batch of sessions, across turns, after swap-out and
// restore and after a fork, with the state exact against a direct prefill of the log.
#include "agents/runtime.h"
#include "tests/agents/runtime_fixture.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <array>
#include <thread>

namespace hippo::agents {
namespace {

using namespace hippo::agents::testing;

// Auto mode weighs drafts by what the model measures as it runs; costs that record nothing (free)
// make it draft whatever the timing, so that these tests see both drafters at work.
const engine::StepCosts kUnmeasured;

RuntimeOptions speculation(std::optional<engine::DraftMode> mode) {
  RuntimeOptions o;
  o.speculation = mode;
  o.draft_costs = &kUnmeasured;
  return o;
}

// A prompt that repeats itself, so that the drafter finds matches (and the random model's own
// loops give it more); long enough to cross the tiny model's 128-token window.
std::string repetitive_prompt(int i) {
  std::string text;
  for (int k = 0; k < 12; ++k) text += fmt::format("the river {} flows into the lake {}. ", i, k % 3);
  return text;
}

struct Outcome {
  std::vector<std::string> texts;
  std::vector<std::vector<float>> logits;
  int64_t drafted = 0, accepted = 0;
  std::array<int64_t, 2> drafted_by{}, accepted_by{};  // per engine::Drafter
};

// Six sessions in one batch, two turns each, the first session swapped out between them and a fork of
// the second answering the second turn too.
Outcome run_sessions(const std::string& db, std::optional<engine::DraftMode> mode) {
  Outcome out;
  auto rt = open_runtime(db, speculation(mode));
  constexpr int kSessions = 6;
  std::vector<std::string> ids;
  for (int i = 0; i < kSessions; ++i) ids.push_back(*rt->create_session({}, fmt::format("s{}", i)));
  for (int round = 0; round < 2; ++round) {
    if (round == 1) {
      REQUIRE(rt->swap_out(ids[0]).ok());
      auto fork = rt->fork_session(ids[1], "fork");
      REQUIRE(fork.ok());
      ids.push_back(*fork);
    }
    std::vector<std::unique_ptr<Collector>> collectors;
    for (size_t i = 0; i < ids.size(); ++i) {
      REQUIRE(rt->append_input(ids[i], {{InputItem::Kind::kUserMessage, repetitive_prompt(static_cast<int>(i % kSessions) + round), ""}}).ok());
      collectors.push_back(std::make_unique<Collector>());
      REQUIRE(rt->create_response(ids[i], greedy(40 + 7 * static_cast<int64_t>(i)), collectors.back()->sink()).ok());
    }
    for (auto& c : collectors) {
      const ResponseEvent& done = c->wait();
      REQUIRE(done.kind == ResponseEvent::Kind::kCompleted);
      out.texts.push_back(c->text());
      out.drafted += done.usage.drafted_tokens;
      out.accepted += done.usage.accepted_tokens;
      CHECK(done.usage.accepted_tokens <= done.usage.drafted_tokens);
    }
  }
  for (const std::string& id : ids) {
    out.logits.push_back(*rt->next_logits(id));
    check_exact(*rt, db, id);
  }
  const RuntimeStats stats = rt->stats();
  CHECK(stats.drafted_tokens == out.drafted);
  CHECK(stats.accepted_tokens == out.accepted);
  int64_t verifies = 0, accepted = 0;
  for (size_t n = 0; n < stats.drafts_by_accepted.size(); ++n) {
    verifies += stats.drafts_by_accepted[n];
    accepted += static_cast<int64_t>(n) * stats.drafts_by_accepted[n];
  }
  CHECK(accepted == out.accepted);
  CHECK((verifies > 0) == (out.drafted > 0));
  CHECK(stats.drafted_by[0] + stats.drafted_by[1] == out.drafted);
  CHECK(stats.accepted_by[0] + stats.accepted_by[1] == out.accepted);
  out.drafted_by = stats.drafted_by;
  out.accepted_by = stats.accepted_by;
  return out;
}

void check_same_output(const Outcome& plain, const Outcome& drafted) {
  REQUIRE(drafted.texts.size() == plain.texts.size());
  for (size_t i = 0; i < plain.texts.size(); ++i) {
    INFO("response " << i);
    CHECK(drafted.texts[i] == plain.texts[i]);
  }
  CHECK(drafted.logits == plain.logits);
}

TEST_CASE("with context drafts the greedy output and the state are those of decoding one token at a time",
          "[agents][speculative]") {
  TempDir dir;
  const Outcome plain = run_sessions(dir / "plain.db", std::nullopt);
  const Outcome drafted = run_sessions(dir / "drafted.db", engine::DraftMode::kContext);
  CHECK(plain.drafted == 0);
  // The test means something only if drafts were made and some were right, and some wrong.
  CHECK(drafted.drafted > 0);
  CHECK(drafted.accepted > 0);
  CHECK(drafted.accepted < drafted.drafted);
  CHECK(drafted.drafted_by[static_cast<size_t>(engine::Drafter::kDspark)] == 0);
  check_same_output(plain, drafted);
}

TEST_CASE("with DSpark drafts, and with the better drafter per step, the greedy output and the state are those of "
          "decoding one token at a time",
          "[agents][speculative][dspark]") {
  TempDir dir;
  const Outcome plain = run_sessions(dir / "plain.db", std::nullopt);
  // The tiny model's stages are random: their drafts are made (batched across the sessions) and
  // verified, and almost all rejected.
  const Outcome dspark = run_sessions(dir / "dspark.db", engine::DraftMode::kDspark);
  CHECK(dspark.drafted > 0);
  CHECK(dspark.drafted_by[static_cast<size_t>(engine::Drafter::kContext)] == 0);
  check_same_output(plain, dspark);
  const Outcome both = run_sessions(dir / "auto.db", engine::DraftMode::kAuto);
  CHECK(both.drafted > 0);
  // The context drafter's drafts are taken (random stages' only by chance: which steps DSpark
  // drafts depends on how the sessions' steps interleave, the output never does).
  CHECK(both.accepted_by[static_cast<size_t>(engine::Drafter::kContext)] > 0);
  CHECK(both.drafted_by[static_cast<size_t>(engine::Drafter::kDspark)] > 0);
  check_same_output(plain, both);
}

}  // namespace
}  // namespace hippo::agents
