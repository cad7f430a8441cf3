// StoreLane: the runtime's thread for the SQLite work of its sessions (log rows, session rows,
// loads, retention), on a connection of its own, so that the engine thread posts and goes on and
// never waits for the disk. Jobs run in the order posted: a session's rows are written in the
// order the engine thread made them, and a load sees every write posted before it. Whoever needs
// the outcome waits for the future, off the engine thread.
//
// A session whose log write fails is broken: its later log writes are refused, so the log never
// holds a row after a missing one, until the engine thread has dropped the session from memory
// and calls forget() (the next use loads it again from the log, the truth). The same call ends
// the session's "loaded" mark, which keeps a second load from replaying a log the engine thread
// is writing to.
#pragma once

#include "agents/serial_thread.h"
#include "base/status.h"
#include "storage/store.h"

#include <fmt/format.h>

#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace hippo::agents {

class StoreLane {
 public:
  // on_broken: a session's log write failed (called on the lane's thread, before the write's
  // future is ready). on_appended: after every append(), once its future is ready.
  using BrokenFn = std::function<void(const std::string& session_id)>;
  StoreLane(std::string thread_name, std::unique_ptr<storage::SessionStore> store, BrokenFn on_broken,
            std::function<void()> on_appended)
      : store_(std::move(store)), on_broken_(std::move(on_broken)), on_appended_(std::move(on_appended)),
        thread_(std::move(thread_name)) {}

  // Runs fn(store) on the lane; its result comes in the future.
  template <typename Fn>
  auto post(Fn fn) -> std::future<decltype(fn(std::declval<storage::SessionStore&>()))> {
    using R = decltype(fn(std::declval<storage::SessionStore&>()));
    auto task = std::make_shared<std::packaged_task<R()>>([this, fn = std::move(fn)]() mutable { return fn(*store_); });
    std::future<R> result = task->get_future();
    thread_.post([task] { (*task)(); });
    return result;
  }

  // Appends the rows to the session's log, in order, stopping at the first that fails. unkey:
  // first clears the session's prefix key (its conversation is no longer the one the key names).
  // on_written, if given, gets the outcome on the lane's thread, and may go on with the store.
  using WrittenFn = std::function<void(storage::SessionStore&, const Status&)>;
  std::shared_future<Status> append(std::string session_id, std::vector<storage::MessageRecord> rows,
                                    bool unkey = false, WrittenFn on_written = {}) {
    std::shared_future<Status> written =
        post([this, id = std::move(session_id), rows = std::move(rows), unkey,
              on_written = std::move(on_written)](storage::SessionStore& store) -> Status {
          Status st = write(store, id, rows, unkey);
          if (on_written) on_written(store, st);
          return st;
        }).share();
    thread_.post(on_appended_);
    return written;
  }

  // Loads a session unless it is loaded already (nullopt then): fn(store) reads it.
  template <typename Fn>
  auto load(std::string session_id, Fn fn) {
    using R = decltype(fn(std::declval<storage::SessionStore&>()));  // Result<T>
    using T = std::remove_cvref_t<decltype(*std::declval<R&>())>;
    return post([this, id = std::move(session_id), fn = std::move(fn)](
                    storage::SessionStore& store) mutable -> Result<std::optional<T>> {
      if (loaded_.contains(id)) return std::optional<T>();
      R loaded = fn(store);
      if (!loaded.ok()) return loaded.status();
      loaded_.insert(id);
      return std::optional<T>(std::move(*loaded));
    });
  }

  // The session is in the engine thread's memory (made there, not loaded).
  void mark_loaded(std::string session_id) {
    thread_.post([this, id = std::move(session_id)] { loaded_.insert(id); });
  }

  // The engine thread has dropped the session from memory.
  void forget(std::string session_id) {
    thread_.post([this, id = std::move(session_id)] {
      broken_.erase(id);
      loaded_.erase(id);
    });
  }

  // Ready once every job posted before it has run.
  std::shared_future<void> barrier() {
    return post([](storage::SessionStore&) {}).share();
  }

  // For calls from any thread (the store locks itself).
  storage::SessionStore& store() { return *store_; }

 private:
  Status write(storage::SessionStore& store, const std::string& id, const std::vector<storage::MessageRecord>& rows,
               bool unkey) {
    if (broken_.contains(id)) {
      return Status(ErrorCode::kUnavailable,
                    fmt::format("session {}: an earlier write of its log failed; it is loaded again from the database "
                                "when next used",
                                id));
    }
    Status st = unkey ? store.set_prefix_key(id, std::nullopt) : Status::ok_status();
    for (size_t i = 0; st.ok() && i < rows.size(); ++i) st = store.append_message(id, rows[i]).status();
    if (!st.ok()) {
      broken_.insert(id);
      on_broken_(id);
    }
    return st;
  }

  std::unique_ptr<storage::SessionStore> store_;
  BrokenFn on_broken_;
  std::function<void()> on_appended_;
  std::set<std::string> broken_;  // the lane's thread only
  std::set<std::string> loaded_;  // the lane's thread only
  SerialThread thread_;           // last: runs what is queued before the rest goes
};

}  // namespace hippo::agents
