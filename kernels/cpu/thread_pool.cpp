#include "kernels/cpu/thread_pool.h"

#include <algorithm>

namespace hippo::kernels::cpu {

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_range(int index) {
  const std::int64_t per = n_ / size(), extra = n_ % size();
  const std::int64_t begin = index * per + std::min<std::int64_t>(index, extra);
  const std::int64_t end = begin + per + (index < extra ? 1 : 0);
  if (begin < end) (*task_)(begin, end);
}

void ThreadPool::worker_loop(int index) {
  std::uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      work_ready_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
    }
    run_range(index);
    {
      std::lock_guard lock(mutex_);
      if (--pending_ == 0) work_done_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& fn) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    task_ = &fn;
    n_ = n;
    pending_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  work_ready_.notify_all();
  run_range(0);
  std::unique_lock lock(mutex_);
  work_done_.wait(lock, [&] { return pending_ == 0; });
  task_ = nullptr;
}

}  // namespace hippo::kernels::cpu
