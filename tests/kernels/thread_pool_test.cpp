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
      if (begin == 20) std::this_thread::sleep_for(std::chrono::milliseconds(5));  // a worker: the caller waits past its spin
      for (std::int64_t i = begin; i < end; ++i) hits[static_cast<std::size_t>(i)]++;
    });
    for (auto& h : hits) CHECK(h.load() == 1);
  }
}
