// Drafts and settle() (speculative decoding) on the tiny preset: a forward of a draft followed by
// settle(keep) leaves the state byte for byte as a forward of only the kept tokens would, wherever
// the draft falls (across window wrap-around, compression groups of every writer, Engram), and the
// verify rows are the logits a plain forward gives. Nothing is computed again.
#include "engine/model/model.h"
#include "engine/sampling/sampler.h"
#include "tests/engine/tiny_model.h"

#include <catch2/catch.hpp>

#include <functional>

namespace hippo::engine {
namespace {

using testing::same_bits;
using testing::tiny_model;
using testing::tokens;

// Serialised, as a snapshot stores it.
void require_same_bytes(const SessionState& a, const SessionState& b) {
  REQUIRE(a.frontier() == b.frontier());
  const auto sa = a.streams(), sb = b.streams();
  REQUIRE(sa.size() == sb.size());
  for (size_t i = 0; i < sa.size(); ++i) {
    INFO(sa[i].name);
    REQUIRE(sa[i].name == sb[i].name);
    REQUIRE(std::equal(sa[i].bytes.begin(), sa[i].bytes.end(), sb[i].bytes.begin(), sb[i].bytes.end()));
  }
  REQUIRE(same_bits(a.next_logits(), b.next_logits()));
  REQUIRE(a == b);
}

ForwardRequest draft_request(SessionState& state, std::span<const int32_t> ids, std::vector<float>& logits) {
  ForwardRequest r;
  r.state = &state;
  r.tokens = ids;
  r.all_logits = &logits;
  r.draft = true;
  return r;
}

TEST_CASE("a settled draft leaves the state of a forward of the kept tokens alone", "[model][speculative]") {
  Model& model = tiny_model();
  const auto draft = tokens(6, 2);
  // Tiny: window 128, ratio-2 and ratio-1 writers, Engram; prefixes at both parities, before and
  // across the ring's wrap-around.
  for (int64_t prefix : {1, 60, 125, 126, 127, 255}) {
    const auto before = tokens(prefix, 1);
    SessionState base = model.new_session();
    REQUIRE(model.forward(base, before).ok());
    for (int64_t keep = 1; keep <= 6; ++keep) {
      INFO("prefix " << prefix << ", keep " << keep);
      SessionState drafted = base;
      std::vector<float> rows;
      ForwardRequest r = draft_request(drafted, draft, rows);
      REQUIRE(model.forward(std::span(&r, 1)).ok());
      REQUIRE(drafted.has_draft());
      REQUIRE(model.settle(drafted, keep, rows).ok());
      REQUIRE_FALSE(drafted.has_draft());

      SessionState plain = base;
      std::vector<float> plain_rows;
      REQUIRE(model.forward(plain, std::span(draft).first(static_cast<size_t>(keep)), &plain_rows).ok());
      REQUIRE(same_bits(std::span(rows).first(plain_rows.size()), plain_rows));
      require_same_bytes(drafted, plain);

      // And they go on alike.
      const auto next = tokens(3, 3);
      std::vector<float> a, b;
      REQUIRE(model.forward(drafted, next, &a).ok());
      REQUIRE(model.forward(plain, next, &b).ok());
      REQUIRE(same_bits(a, b));
      require_same_bytes(drafted, plain);
    }
  }
}

TEST_CASE("a draft in a batch with plain decode rows leaves them as they would be alone", "[model][speculative]") {
  Model& model = tiny_model();
  SessionState a = model.new_session(), b = model.new_session();
  REQUIRE(model.forward(a, tokens(40, 4)).ok());
  REQUIRE(model.forward(b, tokens(41, 5)).ok());
  SessionState b_alone = b;
  const auto draft = tokens(4, 6);
  const int32_t one = 77;
  std::vector<float> rows;
  std::vector<ForwardRequest> batch(2);
  batch[0] = draft_request(a, draft, rows);
  batch[1].state = &b;
  batch[1].tokens = std::span(&one, 1);
  REQUIRE(model.forward(batch).ok());
  REQUIRE(model.settle(a, 2, rows).ok());
  REQUIRE(model.forward(b_alone, std::span(&one, 1)).ok());
  require_same_bytes(b, b_alone);
}

TEST_CASE("drafts are refused where they cannot be taken back", "[model][speculative]") {
  Model& model = tiny_model();
  SessionState state = model.new_session();
  REQUIRE(model.forward(state, tokens(10, 7)).ok());
  std::vector<float> rows;
  const auto draft = tokens(3, 8);
  CHECK(model.settle(state, 1, rows).code() == ErrorCode::kFailedPrecondition);  // no draft
  ForwardRequest no_logits = draft_request(state, draft, rows);
  no_logits.all_logits = nullptr;
  CHECK(model.forward(std::span(&no_logits, 1)).code() == ErrorCode::kInvalidArgument);
  const auto too_long = tokens(model.text().sliding_window + 1, 9);
  ForwardRequest wide = draft_request(state, too_long, rows);
  CHECK(model.forward(std::span(&wide, 1)).code() == ErrorCode::kInvalidArgument);
  CHECK_FALSE(state.has_draft());

  ForwardRequest r = draft_request(state, draft, rows);
  REQUIRE(model.forward(std::span(&r, 1)).ok());
  CHECK(model.forward(state, draft).code() == ErrorCode::kFailedPrecondition);  // not settled
  CHECK(model.forward_encoder(state, draft).code() == ErrorCode::kFailedPrecondition);
  CHECK(model.settle(state, 0, rows).code() == ErrorCode::kInvalidArgument);
  CHECK(model.settle(state, 4, rows).code() == ErrorCode::kInvalidArgument);
  CHECK(model.settle(state, 3, std::span(rows).first(10)).code() == ErrorCode::kInvalidArgument);
  REQUIRE(model.settle(state, 3, rows).ok());
  CHECK(state.n_tokens() == 13);
}

}  // namespace
}  // namespace hippo::engine

namespace hippo::engine {
namespace {

// Greedy decoding of n tokens after the state's last one, each step feeding the last token and the
// drafts `drafts_at(i)` proposes for output position i, verified row by row and settled.
std::vector<int32_t> greedy_decode(Model& model, SessionState& state, int64_t n,
                                   const std::function<std::vector<int32_t>(int64_t)>& drafts_at, int64_t* drafted,
                                   int64_t* accepted) {
  const int64_t V = model.text().vocab_size;
  std::vector<int32_t> out{argmax(state.next_logits())};
  while (static_cast<int64_t>(out.size()) < n) {
    std::vector<int32_t> drafts = drafts_at(static_cast<int64_t>(out.size()));
    *drafted += static_cast<int64_t>(drafts.size());
    std::vector<int32_t> fed{out.back()};
    fed.insert(fed.end(), drafts.begin(), drafts.end());
    std::vector<float> rows;
    ForwardRequest r = draft_request(state, fed, rows);
    REQUIRE(model.forward(std::span(&r, 1)).ok());
    for (int64_t j = 0; j < static_cast<int64_t>(fed.size()); ++j) {
      const int32_t token = argmax(std::span(rows).subspan(static_cast<size_t>(j * V), static_cast<size_t>(V)));
      out.push_back(token);
      const bool matches = j < static_cast<int64_t>(drafts.size()) && token == drafts[static_cast<size_t>(j)];
      if (!matches) {
        REQUIRE(model.settle(state, j + 1, rows).ok());
        break;
      }
      ++*accepted;
    }
  }
  out.resize(static_cast<size_t>(n));
  return out;
}

TEST_CASE("greedy output and state are the same when every draft is accepted and when every one is rejected",
          "[model][speculative]") {
  Model& model = tiny_model();
  const int64_t n = 40;
  SessionState start = model.new_session();
  REQUIRE(model.forward(start, tokens(120, 11)).ok());  // the output crosses the window's wrap-around

  // One token at a time.
  SessionState plain = start;
  std::vector<int32_t> expected{argmax(plain.next_logits())};
  while (static_cast<int64_t>(expected.size()) < n) {
    REQUIRE(model.forward(plain, std::span(&expected.back(), 1)).ok());
    expected.push_back(argmax(plain.next_logits()));
  }

  // An oracle that drafts the right five tokens, and one that drafts five wrong ones.
  const int32_t V = static_cast<int32_t>(model.text().vocab_size);
  auto right = [&](int64_t i) {
    std::vector<int32_t> d;
    for (int64_t k = i; k < std::min<int64_t>(i + 5, n - 1); ++k) d.push_back(expected[static_cast<size_t>(k)]);
    return d;
  };
  auto wrong = [&](int64_t i) {
    std::vector<int32_t> d;
    for (int64_t k = i; k < std::min<int64_t>(i + 5, n - 1); ++k) d.push_back((expected[static_cast<size_t>(k)] + 1) % V);
    return d;
  };
  int64_t drafted_right = 0, accepted_right = 0, drafted_wrong = 0, accepted_wrong = 0;
  SessionState all_accepted = start, all_rejected = start;
  CHECK(greedy_decode(model, all_accepted, n, right, &drafted_right, &accepted_right) == expected);
  CHECK(greedy_decode(model, all_rejected, n, wrong, &drafted_wrong, &accepted_wrong) == expected);
  CHECK(drafted_right > n / 2);
  CHECK(accepted_right == drafted_right);
  CHECK(drafted_wrong > n / 2);
  CHECK(accepted_wrong == 0);
  // Each has fed every output token but the last (the drafts stop short of the n-th), as plain has.
  require_same_bytes(all_accepted, plain);
  require_same_bytes(all_rejected, plain);
}

}  // namespace
}  // namespace hippo::engine
