// KvSnapshotWriter: takes snapshots off the engine's thread. It owns one thread and its own store
// connection; submit() only queues the request and returns a future for its outcome.
//
// The contract with the caller (the agents layer): the streams of a submitted request point into
// the session's live state, which is append-only; the bytes they cover must not change (nor move)
// until the future is ready. Appending past them is fine. Nothing is copied up front, so a queued
// 1M-token snapshot costs a few hundred bytes, and a running one kMaxChunksInFlight chunks
// (store.h (6)).
//
// A future is ready when its snapshot is committed (durable in the WAL). Only then does the thread
// checkpoint the WAL into the database file, so that copy never delays the caller.
#pragma once

#include "base/status.h"
#include "storage/store.h"

#include <condition_variable>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace hippo::storage {

// Requests waiting for the writer thread; a full queue is answered with kResourceExhausted so a
// caller producing snapshots faster than the disk takes them finds out instead of piling up.
inline constexpr std::size_t kMaxQueuedSnapshots = 16;

class KvSnapshotWriter {
 public:
  static Result<std::unique_ptr<KvSnapshotWriter>> open(const std::string& path, const StoreOptions& options = {});
  // Writes every queued snapshot, then stops the thread.
  ~KvSnapshotWriter();
  KvSnapshotWriter(const KvSnapshotWriter&) = delete;
  KvSnapshotWriter& operator=(const KvSnapshotWriter&) = delete;

  Result<std::future<Result<SnapshotWriteStats>>> submit(SnapshotRequest request);

 private:
  explicit KvSnapshotWriter(std::unique_ptr<SessionStore> store);
  void run();

  struct Job {
    SnapshotRequest request;
    std::promise<Result<SnapshotWriteStats>> done;
  };

  std::unique_ptr<SessionStore> store_;  // used only by thread_
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace hippo::storage
