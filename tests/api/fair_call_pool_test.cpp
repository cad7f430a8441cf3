// FairCallPool: one tenant's flood of runtime calls does not starve another tenant's call, and a
// connection's SerialCalls run in order, one at a time.
#include "api/server/fair_call_pool.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <vector>

using namespace hippo::server;

TEST_CASE("a tenant's call waits for one call per tenant ahead of it, not for another tenant's flood", "[server]") {
  FairCallPool pool(1);
  std::promise<void> release;
  std::shared_future<void> go = release.get_future().share();
  std::mutex mutex;
  std::vector<int> order;
  auto record = [&](int what) {
    std::lock_guard lock(mutex);
    order.push_back(what);
  };
  std::promise<void> busy;
  pool.post(1, [go, &busy] {  // the one thread is busy while the queues fill
    busy.set_value();
    go.wait();
  });
  busy.get_future().wait();
  for (int i = 0; i < 100; ++i) pool.post(1, [&, i] { record(i); });
  std::promise<void> b_done;
  pool.post(2, [&] {
    record(-1);
    b_done.set_value();
  });
  release.set_value();
  REQUIRE(b_done.get_future().wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  pool.join();
  REQUIRE(order.size() == 101);
  // Tenant 1's flood queued first, so one of its calls runs first; then tenant 2's call, then the
  // rest of the flood in order.
  CHECK(order[0] == 0);
  CHECK(order[1] == -1);
  for (int i = 1; i < 100; ++i) CHECK(order[static_cast<size_t>(i) + 1] == i);
}

TEST_CASE("a connection's calls run one at a time, in order, taking turns with other tenants", "[server]") {
  FairCallPool pool(4);
  SerialCalls serial(pool, 7);
  std::atomic<int> running{0};
  std::atomic<bool> overlapped{false};
  std::mutex mutex;
  std::vector<int> order;
  for (int i = 0; i < 200; ++i) {
    serial.post([&, i] {
      if (running.fetch_add(1) != 0) overlapped = true;
      {
        std::lock_guard lock(mutex);
        order.push_back(i);
      }
      running.fetch_sub(1);
    });
    pool.post(8, [] {});  // another tenant's calls in between
  }
  pool.join();
  CHECK_FALSE(overlapped.load());
  REQUIRE(order.size() == 200);
  for (int i = 0; i < 200; ++i) CHECK(order[static_cast<size_t>(i)] == i);
}
