// The writer thread behind storage/kv_snapshot_writer.h.
#include "storage/kv_snapshot_writer.h"

#include "base/log.h"
#include "storage/worker_pool.h"

#include <pthread.h>

namespace hippo::storage {

Result<std::unique_ptr<KvSnapshotWriter>> KvSnapshotWriter::open(const std::string& path, const StoreOptions& options) {
  if (options.read_only) return make_error(ErrorCode::kInvalidArgument, "a snapshot writer needs a writable store");
  StoreOptions writer_options = options;
  writer_options.auto_checkpoint = false;  // run() checkpoints after each snapshot instead
  writer_options.codec_nice = kBackgroundNice;
  HIPPO_ASSIGN_OR_RETURN(auto store, SessionStore::open(path, writer_options));
  return std::unique_ptr<KvSnapshotWriter>(new KvSnapshotWriter(std::move(store)));
}

KvSnapshotWriter::KvSnapshotWriter(std::unique_ptr<SessionStore> store)
    : store_(std::move(store)), thread_([this] { run(); }) {}

KvSnapshotWriter::~KvSnapshotWriter() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_one();
  thread_.join();
}

Result<std::future<Result<SnapshotWriteStats>>> KvSnapshotWriter::submit(SnapshotRequest request,
                                                                         WrittenFn on_written) {
  std::future<Result<SnapshotWriteStats>> future;
  {
    std::lock_guard lock(mutex_);
    if (queue_.size() >= kMaxQueuedSnapshots)
      return make_error(ErrorCode::kResourceExhausted, "session {}: {} snapshots already queued; the disk is behind",
                        request.session_id, queue_.size());
    queue_.push_back(Job{std::move(request), {}, std::move(on_written)});
    future = queue_.back().done.get_future();
  }
  ready_.notify_one();
  return future;
}

void KvSnapshotWriter::run() {
  pthread_setname_np(pthread_self(), kThreadName);
  lower_thread_priority(kBackgroundNice);
  auto checkpoint = [this] {
    Status checkpointed = store_->checkpoint();
    if (!checkpointed.ok()) log::warn("checkpoint failed", {{"db", store_->path()}, {"error", checkpointed.message()}});
  };
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mutex_);
      if (!ready_.wait_for(lock, kCheckpointInterval, [this] { return stopping_ || !queue_.empty(); })) {
        lock.unlock();
        checkpoint();  // idle: what the other connections committed since
        continue;
      }
      if (queue_.empty()) return;  // stopping, and the queue is written out
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    Result<SnapshotWriteStats> written = store_->write_snapshot(job.request);
    job.request = {};  // the owner's bytes are released before anyone hears of the outcome
    job.done.set_value(written);
    if (job.on_written) job.on_written(written);
    checkpoint();
  }
}

}  // namespace hippo::storage
