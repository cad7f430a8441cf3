#include "kernels/cpu/thread_pool.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

using hippo::kernels::cpu::ThreadPool;

TEST_CASE("parallel_for covers every index exactly once", "[thread_pool]") {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    CHECK(pool.size() == threads);
    for (std::int64_t n : {0, 1, 2, 7, 64, 1001}) {
      std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
      pool.parallel_for(n, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) hits[static_cast<std::size_t>(i)]++;
      });
      for (auto& h : hits) CHECK(h.load() == 1);
    }
  }
}

TEST_CASE("a pool runs many rounds and splits the same n the same way", "[thread_pool]") {
  ThreadPool pool(4);
  std::vector<std::int64_t> first;
  for (int round = 0; round < 200; ++round) {
    std::vector<std::int64_t> begins(4, -1);
    std::atomic<int> slot{0};
    pool.parallel_for(10, [&](std::int64_t begin, std::int64_t) { begins[static_cast<std::size_t>(slot++)] = begin; });
    std::sort(begins.begin(), begins.end());
    if (round == 0) first = begins;
    CHECK(begins == first);
  }
  CHECK(first == std::vector<std::int64_t>{0, 3, 6, 8});
}

TEST_CASE("workers that went to sleep after spinning wake for the next call", "[thread_pool]") {
  ThreadPool pool(3);
  for (int round = 0; round < 4; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // past the pool's spin: its workers sleep
    std::vector<std::atomic<int>> hits(30);
    pool.parallel_for(30, [&](std::int64_t begin, std::int64_t end) {
      // The last range: whoever runs it, the others wait past their spin.
      if (begin == 20) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      for (std::int64_t i = begin; i < end; ++i) hits[static_cast<std::size_t>(i)]++;
    });
    for (auto& h : hits) CHECK(h.load() == 1);
  }
}

TEST_CASE("with more threads than cores, every range still runs exactly once, whoever runs it", "[thread_pool]") {
  // Eight threads on this machine's cores: workers are often not scheduled when a call starts, and
  // the threads that are take their ranges (thread_pool.h). Each range is one of the static split's.
  ThreadPool pool(8);
  const std::thread::id caller = std::this_thread::get_id();
  int caller_took_others = 0;
  for (int round = 0; round < 2000; ++round) {
    const std::int64_t n = 1 + round % 37;
    std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
    std::atomic<int> by_caller{0}, ranges{0};
    std::atomic<bool> split_kept{true};
    pool.parallel_for(n, [&](std::int64_t begin, std::int64_t end) {
      const std::int64_t per = n / 8, extra = n % 8;
      bool found = false;
      for (std::int64_t r = 0; r < 8; ++r) {
        const std::int64_t b = r * per + std::min(r, extra);
        found = found || (b == begin && b + per + (r < extra ? 1 : 0) == end);
      }
      if (!found) split_kept = false;
      if (std::this_thread::get_id() == caller) by_caller++;
      ranges++;
      for (std::int64_t i = begin; i < end; ++i) hits[static_cast<std::size_t>(i)]++;
    });
    for (auto& h : hits) REQUIRE(h.load() == 1);
    REQUIRE(split_kept.load());
    REQUIRE(ranges.load() == std::min<std::int64_t>(n, 8));
    caller_took_others += by_caller.load() > 1;
  }
  INFO("rounds in which the caller ran more than its own range: " << caller_took_others);
  SUCCEED();
}
