#include "api/server/fair_call_pool.h"

namespace hippo::server {

FairCallPool::FairCallPool(size_t threads) {
  for (size_t i = 0; i < std::max<size_t>(1, threads); ++i) threads_.emplace_back([this] { work(); });
}

FairCallPool::~FairCallPool() { join(); }

void FairCallPool::post(int64_t tenant, Call call) {
  {
    std::lock_guard lock(mutex_);
    std::deque<Call>& queue = queues_[tenant];
    if (queue.empty()) turn_.push_back(tenant);
    queue.push_back(std::move(call));
  }
  wake_.notify_one();
}

void FairCallPool::join() {
  {
    std::lock_guard lock(mutex_);
    joining_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_)
    if (t.joinable() && t.get_id() != std::this_thread::get_id()) t.join();
}

void FairCallPool::work() {
  for (;;) {
    Call call;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return !turn_.empty() || joining_; });
      if (turn_.empty()) return;  // joining, and nothing left
      const int64_t tenant = turn_.front();
      turn_.pop_front();
      auto it = queues_.find(tenant);
      call = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty()) queues_.erase(it);
      else turn_.push_back(tenant);  // its next call waits for the others' turns
    }
    call();
  }
}

SerialCalls::SerialCalls(FairCallPool& pool, int64_t tenant) : pool_(pool), tenant_(tenant) {}

void SerialCalls::post(FairCallPool::Call call) {
  {
    std::lock_guard lock(state_->mutex);
    state_->calls.push_back(std::move(call));
    if (state_->scheduled) return;
    state_->scheduled = true;
  }
  run_next(pool_, tenant_, state_);
}

// One call per turn of the pool, so that a busy connection takes its turns like any other.
void SerialCalls::run_next(FairCallPool& pool, int64_t tenant, const std::shared_ptr<State>& state) {
  pool.post(tenant, [&pool, tenant, state] {
    FairCallPool::Call call;
    {
      std::lock_guard lock(state->mutex);
      call = std::move(state->calls.front());
      state->calls.pop_front();
    }
    call();
    std::lock_guard lock(state->mutex);
    if (state->calls.empty()) {
      state->scheduled = false;
      return;
    }
    run_next(pool, tenant, state);
  });
}

}  // namespace hippo::server
