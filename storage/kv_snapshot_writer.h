// KvSnapshotWriter: takes snapshots and WAL checkpoints off the engine's thread. It owns one
// thread and its own store connection; submit() only queues the request.
//
// The contract with the caller (the agents layer): the streams of a submitted request point into
// memory that request.owner keeps alive (the writer holds it until the snapshot is written, so the
// caller may drop its own reference at any time) and that nobody changes or reallocates until
// then: the caller must not append to a state whose snapshot is in flight, since growing a buffer
// may move it. Nothing is copied up front, so a queued 1M-token snapshot costs a few hundred bytes,
// and a running one kMaxChunksInFlight chunks (store.h (6)).
//
// A snapshot's outcome comes through its future and, when given, the on_written callback (on the
// writer thread, after the future is ready: it must not block). Only then does the thread
// checkpoint the WAL into the database file, so that copy never delays the caller; it also
// checkpoints every kCheckpointInterval while idle, for the other connections' writes (the caller
// opens its own with auto_checkpoint off, so its commits never copy the WAL).
#pragma once

#include "base/status.h"
#include "storage/store.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace hippo::storage {

// Requests waiting for the writer thread; a full queue is answered with kResourceExhausted so a
// caller producing snapshots faster than the disk takes them finds out instead of piling up.
inline constexpr std::size_t kMaxQueuedSnapshots = 16;
inline constexpr std::chrono::seconds kCheckpointInterval{5};
inline constexpr const char* kThreadName = "hippo-snapshot";  // in top, gdb and perf

class KvSnapshotWriter {
 public:
  static Result<std::unique_ptr<KvSnapshotWriter>> open(const std::string& path, const StoreOptions& options = {});
  // Writes every queued snapshot, then stops the thread.
  ~KvSnapshotWriter();
  KvSnapshotWriter(const KvSnapshotWriter&) = delete;
  KvSnapshotWriter& operator=(const KvSnapshotWriter&) = delete;

  using WrittenFn = std::function<void(const Result<SnapshotWriteStats>&)>;
  Result<std::future<Result<SnapshotWriteStats>>> submit(SnapshotRequest request, WrittenFn on_written = {});

 private:
  explicit KvSnapshotWriter(std::unique_ptr<SessionStore> store);
  void run();

  struct Job {
    SnapshotRequest request;
    std::promise<Result<SnapshotWriteStats>> done;
    WrittenFn on_written;
  };

  std::unique_ptr<SessionStore> store_;  // used only by thread_
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace hippo::storage
