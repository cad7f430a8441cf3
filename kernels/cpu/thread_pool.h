// A fixed set of worker threads for data-parallel kernels. The calling thread works too, so a
// pool of size 1 runs everything inline. Work is split statically into contiguous ranges: the
// same n and pool size always give every thread the same range.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace hippo::kernels::cpu {

class ThreadPool {
 public:
  // n_threads counts the caller; 0 means one per logical CPU.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) on disjoint ranges covering [0, n), one range per thread, and returns
  // when all have finished. Not reentrant: one parallel_for at a time per pool.
  void parallel_for(std::int64_t n, const std::function<void(std::int64_t begin, std::int64_t end)>& fn);

 private:
  void worker_loop(int index);
  void run_range(int index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  const std::function<void(std::int64_t, std::int64_t)>* task_ = nullptr;
  std::int64_t n_ = 0;
  std::uint64_t generation_ = 0;  // bumped per parallel_for; workers run once per generation
  int pending_ = 0;               // workers still running the current generation
  bool stopping_ = false;
};

}  // namespace hippo::kernels::cpu
