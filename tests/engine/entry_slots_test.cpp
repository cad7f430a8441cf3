#include "engine/model/entry_slots.h"

#include <catch2/catch.hpp>

#include <map>
#include <random>

namespace hippo::engine {
namespace {

TEST_CASE("entry slots find what was inserted, nothing else, across growth and clears", "[engine]") {
  EntrySlots slots;
  CHECK(slots.find(0) == -1);
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::int32_t> id(0, 1 << 20);
  for (int round = 0; round < 3; ++round) {
    std::map<std::int32_t, std::int32_t> expected;
    // Past several doublings of the table (it starts at 1,024 slots), with runs of neighbouring ids
    // as a row's ascending selection has.
    while (expected.size() < 5000) {
      const std::int32_t first = id(rng);
      for (std::int32_t w = first; w < first + 7; ++w) {
        if (expected.count(w) != 0) continue;
        const auto row = static_cast<std::int32_t>(expected.size());
        slots.insert(w, row);
        expected[w] = row;
      }
    }
    CHECK(slots.size() == expected.size());
    for (const auto& [w, row] : expected) REQUIRE(slots.find(w) == row);
    for (int probe = 0; probe < 20000; ++probe) {
      const std::int32_t w = id(rng);
      REQUIRE(slots.find(w) == (expected.count(w) != 0 ? expected[w] : -1));
    }
    slots.clear();
    CHECK(slots.size() == 0);
    for (const auto& [w, row] : expected) REQUIRE(slots.find(w) == -1);
  }
}

}  // namespace
}  // namespace hippo::engine
