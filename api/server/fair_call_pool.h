// The threads that make the runtime's blocking calls for the connections (AgentRuntime's methods
// wait for the engine thread), shared fairly between tenants: each tenant's calls wait in a queue
// of their own, and a free thread takes the oldest call of the next tenant in turn. A tenant that
// floods the server delays another tenant's call by at most one call of each tenant ahead of it in
// the turn, never by the whole flood.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace hippo::server {

class FairCallPool {
 public:
  using Call = std::function<void()>;
  static constexpr int64_t kServer = -1;  // the server's own calls (metrics, shutdown): a tenant of their own

  explicit FairCallPool(size_t threads);
  ~FairCallPool();  // join()
  FairCallPool(const FairCallPool&) = delete;
  FairCallPool& operator=(const FairCallPool&) = delete;

  void post(int64_t tenant, Call call);
  // Runs what is queued, calls posted meanwhile included, then stops the threads (idempotent).
  void join();

 private:
  void work();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::map<int64_t, std::deque<Call>> queues_;  // tenants with calls waiting
  std::deque<int64_t> turn_;                    // those tenants, in turn order
  bool joining_ = false;
  std::vector<std::thread> threads_;
};

// Calls of one connection, run one at a time in the order posted (a WebSocket session's events),
// each as a call of the connection's tenant on the pool.
class SerialCalls {
 public:
  SerialCalls(FairCallPool& pool, int64_t tenant);
  void post(FairCallPool::Call call);

 private:
  struct State {
    std::mutex mutex;
    std::deque<FairCallPool::Call> calls;
    bool scheduled = false;  // a call of this serial is on the pool
  };
  static void run_next(FairCallPool& pool, int64_t tenant, const std::shared_ptr<State>& state);

  FairCallPool& pool_;
  int64_t tenant_;
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

}  // namespace hippo::server
