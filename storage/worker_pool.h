// A fixed set of threads that run chunk encode/decode tasks for one store connection. Each task is
// told which worker runs it, so per-worker state (a zstd context, scratch buffers) needs no locks.
// Callers bound the number of tasks in flight themselves (invariant 6 in store.h).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace hippo::storage {

// Lowers the calling thread's scheduling priority by `nice` (Linux: per thread); best effort.
void lower_thread_priority(int nice);

// Background storage work (the snapshot writer, the runtime's restores, their codec workers) runs
// at the lowest priority: where cores are few, the engine's threads (decoding) go first and the
// storage work takes the time they leave.
inline constexpr int kBackgroundNice = 19;

class WorkerPool {
 public:
  using Task = std::function<void(std::size_t worker)>;

  // nice > 0: the workers run at that lower scheduling priority (background work).
  explicit WorkerPool(std::size_t n_workers, int nice = 0);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  std::size_t size() const { return threads_.size(); }
  void submit(Task task);

 private:
  void run(std::size_t worker, int nice);

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Task> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace hippo::storage
