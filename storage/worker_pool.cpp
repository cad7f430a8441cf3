// The worker threads behind storage/worker_pool.h.
#include "storage/worker_pool.h"

#include <sys/resource.h>
#include <unistd.h>

namespace hippo::storage {

void lower_thread_priority(int nice) {
  if (nice > 0) (void)setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), nice);
}

WorkerPool::WorkerPool(std::size_t n_workers, int nice) {
  threads_.reserve(n_workers);
  for (std::size_t i = 0; i < n_workers; ++i) threads_.emplace_back([this, i, nice] { run(i, nice); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (auto& t : threads_) t.join();
}

void WorkerPool::submit(Task task) {
  {
    std::lock_guard lock(mutex_);
    tasks_.push_back(std::move(task));
  }
  ready_.notify_one();
}

void WorkerPool::run(std::size_t worker, int nice) {
  lower_thread_priority(nice);
  for (;;) {
    Task task;
    {
      std::unique_lock lock(mutex_);
      ready_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, and every queued task has run
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task(worker);
  }
}

}  // namespace hippo::storage
