// Top-k in the reference's order (kernels/top_k.h).
#include "kernels/top_k.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

namespace hippo::kernels {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::vector<int32_t> reference_top_k(const std::vector<float>& scores, int64_t k) {
  std::vector<int32_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return scores[a] > scores[b]; });
  order.resize(static_cast<size_t>(std::min<int64_t>(k, static_cast<int64_t>(scores.size()))));
  return order;
}

TEST_CASE("top_k is the stable order's first k, ties to the lower index", "[model]") {
  uint32_t seed = 11;
  for (int64_t n : {0, 1, 2, 8, 31, 100, 257, 2000}) {
    for (int levels : {3, 1000000}) {  // many exact ties, or almost none
      std::vector<float> scores(static_cast<size_t>(n));
      for (float& s : scores) {
        seed = seed * 1664525u + 1013904223u;
        s = static_cast<float>((seed >> 8) % static_cast<uint32_t>(levels));
        if ((seed & 0xF) == 0) s = kNegInf;
      }
      for (int64_t k : {0, 1, 2, 4, 16, 32, 33, 100, 3000}) {
        INFO("n " << n << " levels " << levels << " k " << k);
        CHECK(top_k(scores.data(), n, k) == reference_top_k(scores, k));
      }
    }
  }
  const std::vector<float> ascending = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};  // every entry displaces one
  CHECK(top_k(ascending.data(), 10, 3) == std::vector<int32_t>{9, 8, 7});
}

// The indexer feeds a row's keys tile by tile, and asks for more picks than it has keys early on.
TEST_CASE("a streaming top-k with k above n keeps all, best first, with their scores", "[model]") {
  const std::vector<float> scores = {2, kNegInf, 5, 2, 7};
  StreamingTopK best(8);
  for (int32_t i = 0; i < 5; ++i) best.push(i, scores[static_cast<size_t>(i)]);
  const std::vector<StreamingTopK::Entry> picked = best.take();
  std::vector<int32_t> order;
  for (const StreamingTopK::Entry& e : picked) {
    CHECK(e.score == scores[static_cast<size_t>(e.index)]);
    order.push_back(e.index);
  }
  CHECK(order == std::vector<int32_t>{4, 2, 0, 3, 1});
  StreamingTopK none(0);
  none.push(0, 1.0f);
  CHECK(none.take().empty());
}

// The indexer skips runs of keys below worst() once full(): nothing below it could have entered.
TEST_CASE("a full streaming top-k says the score a new entry must beat", "[model]") {
  StreamingTopK best(3);
  CHECK_FALSE(best.full());
  for (int32_t i = 0; i < 3; ++i) best.push(i, static_cast<float>(10 - i));
  REQUIRE(best.full());
  CHECK(best.worst() == 8.0f);
  best.push(3, 8.0f);  // a tie with the worst stays out: the held one has the lower index
  CHECK(best.worst() == 8.0f);
  best.push(4, 9.5f);
  CHECK(best.worst() == 9.0f);
  StreamingTopK none(0);
  CHECK(none.full());
  CHECK(none.worst() == std::numeric_limits<float>::infinity());
}

}  // namespace
}  // namespace hippo::kernels
