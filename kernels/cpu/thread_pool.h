// A fixed set of worker threads for data-parallel kernels. The calling thread works too, so a
// pool of size 1 runs everything inline. Work is split statically into one contiguous range per
// thread (the same n and pool size always give the same ranges), and each thread runs its own range
// first; a thread with nothing left takes any range that no thread has started. So a worker the OS
// has not scheduled (another process on the cores) delays a call by its range's work, not by a
// time slice: with both cores of a 2-core machine busy elsewhere, a decode step of the demo model
// was 13x slower when the caller waited for its worker's range (docs/BENCHMARKS.md).
//
// A decode step is hundreds of short parallel_for calls, so the hand-off must be cheap: workers and
// the caller spin on atomics for a while (kSpin) before they sleep on a condition variable. Waking
// a sleeping thread costs tens of microseconds on some VMs (an idle vCPU is halted and needs an
// interrupt), which made a 2-thread decode of `tiny` 20x slower than 1 thread there
// (docs/BENCHMARKS.md).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
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
  // How long an idle worker, or a caller waiting for the workers, polls before it sleeps: longer
  // than the gaps between a forward's parallel_for calls, short enough not to matter when idle.
  static constexpr std::chrono::microseconds kSpin{2000};

  void worker_loop(int index);
  // Runs every range of generation `gen` not yet claimed, from `first` on (wrapping).
  void run_ranges(std::uint64_t gen, int first, const std::function<void(std::int64_t, std::int64_t)>* task,
                  std::int64_t n);

  std::vector<std::thread> workers_;
  std::mutex mutex_;  // for sleeping and waking only; the hand-off itself is the atomics below
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  // The current call's, published by generation_; atomics because a thread that read an older
  // generation may read them while the next call writes them (its claims then fail).
  std::atomic<const std::function<void(std::int64_t, std::int64_t)>*> task_{nullptr};
  std::atomic<std::int64_t> n_{0};
  std::atomic<std::uint64_t> generation_{0};  // bumped per parallel_for
  // Per range: the last generation a thread claimed it in (a range runs once per generation); a
  // cache line each, so that claiming one's own range does not take the others' lines.
  struct alignas(64) Claim {
    std::atomic<std::uint64_t> generation{0};
  };
  std::unique_ptr<Claim[]> claimed_;
  std::atomic<int> remaining_{0};  // ranges of the current generation not finished
  std::atomic<bool> stopping_{false};
};

}  // namespace hippo::kernels::cpu
