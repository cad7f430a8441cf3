// The sampler: greedy ties, determinism per seed, the distribution it draws from, and the cuts
// (top-k, min-p, top-p) on logits whose probabilities are known.
#include "engine/sampling/sampler.h"
#include "engine/speculative/verify_draft.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <optional>
#include <vector>

using hippo::engine::DraftVerdict;
using hippo::engine::Sampler;
using hippo::engine::SamplingParams;
using hippo::engine::verify_draft;

namespace {

// p = (0.5, 0.25, 0.125, 0.125) at temperature 1.
const std::vector<float> kLogits = {std::log(0.5f), std::log(0.25f), std::log(0.125f), std::log(0.125f)};

std::map<int32_t, int> histogram(SamplingParams params, int draws) {
  Sampler sampler(params);
  std::map<int32_t, int> counts;
  for (int i = 0; i < draws; ++i) ++counts[sampler.next(kLogits)];
  return counts;
}

}  // namespace

TEST_CASE("greedy takes the lowest id among equal maxima", "[sampler]") {
  Sampler greedy({});
  CHECK(greedy.next(std::vector<float>{1.0f, 3.0f, 3.0f, 2.0f}) == 1);
}

TEST_CASE("the same seed gives the same draws, another seed others", "[sampler]") {
  SamplingParams p;
  p.temperature = 1.0;
  p.seed = 42;
  Sampler a(p), b(p);
  p.seed = 43;
  Sampler c(p);
  std::vector<int32_t> da, db, dc;
  for (int i = 0; i < 200; ++i) {
    da.push_back(a.next(kLogits));
    db.push_back(b.next(kLogits));
    dc.push_back(c.next(kLogits));
  }
  CHECK(da == db);
  CHECK(da != dc);
}

TEST_CASE("temperature sampling follows the softmax, the cuts remove what they should", "[sampler]") {
  constexpr int kDraws = 40000;
  SamplingParams p;
  p.temperature = 1.0;
  auto counts = histogram(p, kDraws);
  CHECK(std::abs(counts[0] / double(kDraws) - 0.5) < 0.015);
  CHECK(std::abs(counts[1] / double(kDraws) - 0.25) < 0.015);
  CHECK(std::abs(counts[3] / double(kDraws) - 0.125) < 0.015);

  SamplingParams k = p;
  k.top_k = 2;
  counts = histogram(k, kDraws);
  CHECK(counts.count(2) == 0);
  CHECK(counts.count(3) == 0);
  CHECK(std::abs(counts[0] / double(kDraws) - 2.0 / 3.0) < 0.015);

  SamplingParams m = p;
  m.min_p = 0.4;  // keeps p >= 0.2
  counts = histogram(m, kDraws);
  CHECK(counts.size() == 2);

  SamplingParams t = p;
  t.top_p = 0.7;  // 0.5 + 0.25 reaches it
  counts = histogram(t, kDraws);
  CHECK(counts.size() == 2);
  CHECK(std::abs(counts[1] / double(kDraws) - 1.0 / 3.0) < 0.015);

  SamplingParams cold = p;
  cold.temperature = 0.05;
  counts = histogram(cold, 2000);
  CHECK(counts[0] == 2000);
}

TEST_CASE("over a vocabulary-sized row the draw follows the softmax across blocks", "[sampler]") {
  // Four likely ids in different blocks of 64 (the sampler skips whole blocks), the rest unlikely.
  std::vector<float> logits(1000, -1000.0f);
  const std::map<int32_t, double> p = {{5, 0.1}, {70, 0.2}, {199, 0.3}, {999, 0.4}};
  for (const auto& [id, prob] : p) logits[static_cast<size_t>(id)] = static_cast<float>(std::log(prob));
  SamplingParams params;
  params.temperature = 1.0;
  params.seed = 7;
  Sampler sampler(params);
  constexpr int kDraws = 40000;
  std::map<int32_t, int> counts;
  for (int i = 0; i < kDraws; ++i) ++counts[sampler.next(logits)];
  CHECK(counts.size() == p.size());
  for (const auto& [id, prob] : p) {
    INFO("id " << id);
    CHECK(std::abs(counts[id] / double(kDraws) - prob) < 0.015);
  }
}

TEST_CASE("without a seed each sampler draws one and reports it, the reported seed repeats the draws", "[sampler]") {
  std::vector<float> logits(1000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(i % 7) * 0.1f;
  SamplingParams p;
  p.temperature = 1.0;
  Sampler a(p), b(p);
  CHECK(a.seed() != b.seed());
  CHECK(a.seed() < (uint64_t{1} << 63));  // fits OpenAI's signed 64-bit seed
  std::vector<int32_t> first;
  for (int i = 0; i < 32; ++i) first.push_back(a.next(logits));
  p.seed = a.seed();
  Sampler again(p);
  CHECK(again.seed() == a.seed());
  std::vector<int32_t> repeated;
  for (int i = 0; i < 32; ++i) repeated.push_back(again.next(logits));
  CHECK(repeated == first);
}

TEST_CASE("a verified draft leaves the token distributed as the target, whatever is drafted", "[sampler][speculative]") {
  // verify_draft chooses each row's token as plain decoding does and keeps the draft only when they
  // agree: the draft is taken with probability p(draft) and the token is a plain draw. A rule that
  // favoured the draft (or never took it) moves the shares far beyond the tolerance, as the biased
  // rule checked at the end shows.
  constexpr int kDraws = 60000;
  struct Shares {
    std::map<int32_t, double> token;  // the first token taken
    double accepted = 0;              // how often the draft was
  };
  auto shares = [&](SamplingParams params, int32_t draft, const std::vector<float>& logits) {
    params.seed = 11;
    Sampler sampler(params);
    std::vector<float> rows = logits;  // the draft's row, then the row after it
    rows.insert(rows.end(), logits.begin(), logits.end());
    Shares out;
    for (int i = 0; i < kDraws; ++i) {
      std::optional<int32_t> first;
      const DraftVerdict v = verify_draft(
          rows, static_cast<int64_t>(logits.size()), std::vector<int32_t>{draft},
          [&](std::span<const float> row) { return sampler.next(row); },
          [&](int32_t token) {
            if (!first) first = token;
            return true;
          });
      out.token[*first] += 1.0 / kDraws;
      out.accepted += static_cast<double>(v.accepted) / kDraws;
    }
    return out;
  };
  SamplingParams p;
  p.temperature = 1.0;
  const double target[] = {0.5, 0.25, 0.125, 0.125};
  for (int32_t draft : {0, 1, 3}) {  // likely, middling, unlikely
    INFO("draft " << draft);
    Shares share = shares(p, draft, kLogits);
    for (int32_t t = 0; t < 4; ++t) CHECK(std::abs(share.token[t] - target[t]) < 0.012);
    CHECK(std::abs(share.accepted - target[draft]) < 0.012);
  }
  // Cut candidates: top-k (the block-walk path) and top-p (the sorted path); a draft outside them is never taken.
  SamplingParams k = p;
  k.top_k = 2;
  Shares share = shares(k, 1, kLogits);
  CHECK(std::abs(share.token[0] - 2.0 / 3.0) < 0.012);
  CHECK(std::abs(share.token[1] - 1.0 / 3.0) < 0.012);
  CHECK(shares(k, 3, kLogits).token.count(3) == 0);
  SamplingParams t = p;
  t.top_p = 0.7;
  share = shares(t, 1, kLogits);
  CHECK(std::abs(share.token[0] - 2.0 / 3.0) < 0.012);
  CHECK(std::abs(share.token[1] - 1.0 / 3.0) < 0.012);
  CHECK(shares(t, 2, kLogits).accepted == 0);
  // A vocabulary-sized row, the draft in a block of its own.
  std::vector<float> wide(1000, -1000.0f);
  wide[5] = std::log(0.6f);
  wide[700] = std::log(0.4f);
  share = shares(p, 700, wide);
  CHECK(std::abs(share.token[5] - 0.6) < 0.012);
  CHECK(std::abs(share.token[700] - 0.4) < 0.012);
  CHECK(share.token.size() == 2);

  // The tolerance tells rules apart: one that takes the draft when a plain draw of it or a second
  // draw agrees (a common bias) gives the unlikely draft 0.234 instead of 0.125.
  SamplingParams seeded = p;
  seeded.seed = 11;
  Sampler biased(seeded);
  double taken = 0;
  for (int i = 0; i < kDraws; ++i) {
    const bool take = biased.next(kLogits) == 3 || biased.next(kLogits) == 3;
    taken += take ? 1.0 / kDraws : 0.0;
  }
  CHECK_FALSE(std::abs(taken - 0.125) < 0.012);
}
