#include "kernels/cpu/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace hippo::kernels::cpu {

namespace {

using Clock = std::chrono::steady_clock;

void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Polls `done` until it holds or `spin` has passed; true when it holds. Checks the clock once per
// 64 polls, and yields now and then so that a thread waiting for this core gets it.
template <typename Done>
bool spin_until(const Done& done, std::chrono::microseconds spin) {
  const auto deadline = Clock::now() + spin;
  for (std::uint32_t i = 1;; ++i) {
    if (done()) return true;
    if (i % 64 == 0) {
      if (Clock::now() > deadline) return false;
      if (i % 1024 == 0) std::this_thread::yield();
    }
    cpu_relax();
  }
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  claimed_ = std::make_unique<Claim[]>(static_cast<std::size_t>(n_threads));
  for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_.store(true);
  }
  work_ready_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_ranges(std::uint64_t gen, int first, const std::function<void(std::int64_t, std::int64_t)>* task,
                            std::int64_t n) {
  const int ranges = size();
  const bool worker = first != 0;  // (the caller starts at its own range, 0)
  const std::int64_t per = n / ranges, extra = n % ranges;
  for (int k = 0; k < ranges; ++k) {
    const int index = (first + k) % ranges;
    // Claimed in this generation, or (for a thread that read an older one) in a later one: taken.
    std::atomic<std::uint64_t>& claim = claimed_[index].generation;
    std::uint64_t last = claim.load(std::memory_order_acquire);
    bool mine = false;
    while (last < gen && !(mine = claim.compare_exchange_weak(last, gen, std::memory_order_acq_rel))) {
    }
    if (!mine) continue;
    // A claim in `gen` means gen is not finished, so task and n are still its own.
    const std::int64_t begin = index * per + std::min<std::int64_t>(index, extra);
    const std::int64_t end = begin + per + (index < extra ? 1 : 0);
    if (begin < end) (*task)(begin, end);
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1 && worker) {
      // The caller may be about to sleep: taking the mutex orders this wake after its check.
      std::lock_guard lock(mutex_);
      work_done_.notify_one();
    }
  }
}

void ThreadPool::worker_loop(int index) {
  std::uint64_t seen = 0;
  for (;;) {
    auto posted = [&] { return stopping_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen; };
    if (!spin_until(posted, kSpin)) {
      std::unique_lock lock(mutex_);
      work_ready_.wait(lock, posted);
    }
    if (stopping_.load(std::memory_order_acquire)) return;
    seen = generation_.load(std::memory_order_acquire);
    // Read after the generation they were published with (or a later one's, whose claims fail).
    run_ranges(seen, index, task_.load(std::memory_order_relaxed), n_.load(std::memory_order_relaxed));
  }
}

void ThreadPool::parallel_for(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& fn) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1) {
    fn(0, n);
    return;
  }
  task_.store(&fn, std::memory_order_relaxed);
  n_.store(n, std::memory_order_relaxed);
  remaining_.store(size(), std::memory_order_relaxed);
  const std::uint64_t gen = generation_.load(std::memory_order_relaxed) + 1;
  {
    // Under the mutex, so that a worker between its last poll and its sleep cannot miss it.
    std::lock_guard lock(mutex_);
    generation_.store(gen, std::memory_order_release);
  }
  work_ready_.notify_all();
  run_ranges(gen, 0, &fn, n);
  auto finished = [&] { return remaining_.load(std::memory_order_acquire) == 0; };
  if (!spin_until(finished, kSpin)) {
    std::unique_lock lock(mutex_);
    work_done_.wait(lock, finished);
  }
}

}  // namespace hippo::kernels::cpu
