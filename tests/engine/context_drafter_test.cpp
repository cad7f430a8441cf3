// The context drafter's proposals (what followed the best earlier match of the suffix) and the
// verify walk's bookkeeping (what is kept, what is accepted).
#include "engine/speculative/context_drafter.h"
#include "engine/speculative/draft_guard.h"
#include "engine/speculative/verify_draft.h"

#include <catch2/catch.hpp>

#include <vector>

namespace hippo::engine {
namespace {

std::vector<int32_t> proposal(const std::vector<int32_t>& tokens, ContextDrafterOptions options = {}) {
  ContextDrafter drafter(options);
  drafter.follow(tokens);
  return drafter.propose();
}

TEST_CASE("the drafter proposes what followed the earlier occurrence of the suffix", "[speculative]") {
  // ... 6 7 8 9 10 11 12 13 14 15 16 17 ... 6 7 8 9 10 11 12 -> 13 14 15 16 17 (a 7-token match)
  const std::vector<int32_t> tokens = {1, 2, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 3, 4, 6, 7, 8, 9, 10, 11, 12};
  CHECK(proposal(tokens) == std::vector<int32_t>{13, 14, 15, 16, 17});
  ContextDrafterOptions two;
  two.max_draft = 2;
  CHECK(proposal(tokens, two) == std::vector<int32_t>{13, 14});
  // As many tokens as the match is longer than min_match (3), plus one.
  CHECK(proposal({1, 10, 11, 12, 13, 14, 2, 10, 11, 12}) == std::vector<int32_t>{13});
  CHECK(proposal({8, 9, 10, 11, 12, 13, 14, 15, 2, 8, 9, 10, 11, 12}) == std::vector<int32_t>{13, 14, 15});
  // Shorter than min_match (3): nothing.
  CHECK(proposal({1, 2, 10, 11, 12, 13, 3, 4, 11, 12}).empty());
  CHECK(proposal({}).empty());
  CHECK(proposal({5, 5}).empty());
}

TEST_CASE("the longest match wins over a later shorter one", "[speculative]") {
  // Suffix 7 8 9: "6 7 8 9 -> 40" matches 4 tokens, the later "5 7 8 9 -> 50" only 3.
  const std::vector<int32_t> tokens = {6, 7, 8, 9, 40, 41, 1, 5, 7, 8, 9, 50, 51, 2, 6, 7, 8, 9};
  CHECK(proposal(tokens) == std::vector<int32_t>{40, 41});
  // Equal lengths: the latest.
  const std::vector<int32_t> tie = {7, 8, 9, 40, 1, 7, 8, 9, 50, 2, 7, 8, 9};
  CHECK(proposal(tie).front() == 50);
}

TEST_CASE("a repeating pattern is continued past the end of the sequence", "[speculative]") {
  CHECK(proposal({3, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2}) == std::vector<int32_t>{1, 2, 1, 2, 1});  // an 8-token match
  CHECK(proposal({9, 9, 9, 9, 9, 9, 9, 9}) == std::vector<int32_t>{9, 9, 9, 9, 9});
}

TEST_CASE("following a growing sequence indexes only what is new, another sequence from scratch", "[speculative]") {
  std::vector<int32_t> tokens;
  ContextDrafter drafter;
  for (int round = 0; round < 3000; ++round) {  // past several rehashes
    tokens.push_back(round % 997);
    drafter.follow(tokens);
  }
  // Position 2999 (token 8) matches 2002 (2999 - 997), after which came 9, 10, ...
  CHECK(drafter.propose() == std::vector<int32_t>{9, 10, 11, 12, 13});
  drafter.follow(std::vector<int32_t>{4, 5, 6, 1, 4, 5, 6});
  CHECK(drafter.n_tokens() == 7);
  CHECK(drafter.propose() == std::vector<int32_t>{1});
  CHECK(drafter.memory_bytes() > 0);
}

TEST_CASE("the verify walk keeps the accepted drafts and the model's own token after them", "[speculative]") {
  // Rows are one float wide: the row's value is the token the "model" chooses there.
  const std::vector<float> rows = {20, 21, 99, 23};
  auto choose = [](std::span<const float> row) { return static_cast<int32_t>(row[0]); };
  std::vector<int32_t> taken;
  auto take = [&](int32_t token) {
    taken.push_back(token);
    return true;
  };
  // Drafts 20 21 22: the third is rejected, the model's 99 is taken in its place.
  DraftVerdict v = verify_draft(rows, 1, std::vector<int32_t>{20, 21, 22}, choose, take);
  CHECK(v.accepted == 2);
  CHECK(v.keep == 3);
  CHECK(taken == std::vector<int32_t>{20, 21, 99});
  // All accepted: a bonus token from the last row.
  taken.clear();
  const std::vector<float> all = {20, 21, 22, 23};
  v = verify_draft(all, 1, std::vector<int32_t>{20, 21, 22}, choose, take);
  CHECK(v.accepted == 3);
  CHECK(v.keep == 4);
  CHECK(taken == std::vector<int32_t>{20, 21, 22, 23});
  // The output ends at an accepted draft: what follows is neither taken nor kept.
  taken.clear();
  auto ends_at_21 = [&](int32_t token) {
    taken.push_back(token);
    return token != 21;
  };
  v = verify_draft(all, 1, std::vector<int32_t>{20, 21, 22}, choose, ends_at_21);
  CHECK(v.keep == 2);
  CHECK(taken == std::vector<int32_t>{20, 21});
}

TEST_CASE("the guard pauses a session whose drafts fail, longer each time, and not one whose drafts hold", "[speculative]") {
  DraftGuard guard;
  guard.record(5, 4);
  guard.record(5, 5);
  CHECK(guard.allows());
  guard.record(5, 0);
  guard.record(5, 1);  // 1 of 10
  int paused = 0;
  while (!guard.allows()) ++paused;
  CHECK(paused == 8);
  guard.record(10, 0);
  paused = 0;
  while (!guard.allows()) ++paused;
  CHECK(paused == 16);
  guard.record(10, 9);  // a good window resets the pause
  guard.record(10, 0);
  paused = 0;
  while (!guard.allows()) ++paused;
  CHECK(paused == 8);
}

}  // namespace
}  // namespace hippo::engine
