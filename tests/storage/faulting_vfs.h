// A SQLite VFS for fault tests: it wraps the default VFS and makes the Nth write (or sync) fail
// with SQLITE_IOERR, the way a failing disk would, makes one thread's reads and writes slow, or
// counts one thread's file work. Installed as
// the default VFS while a FaultingVfs object lives, so the real store code runs unchanged on top
// of it.
#pragma once

#include <atomic>
#include <chrono>
#include <string>

namespace hippo::storage::testing {

class FaultingVfs {
 public:
  FaultingVfs();
  ~FaultingVfs();
  FaultingVfs(const FaultingVfs&) = delete;
  FaultingVfs& operator=(const FaultingVfs&) = delete;

  // The n-th write or sync from now fails (1 = the next one); 0 disables faults.
  void fail_at(long n);
  // Whether the armed fault has fired.
  bool fired() const;
  // Every read and write of threads named thread_name (pthread_setname_np) takes `delay` longer;
  // an empty name: none.
  void slow_io(const std::string& thread_name, std::chrono::microseconds delay);
  // From now on, counts the reads, writes, syncs and locks of threads named thread_name.
  void count_io(const std::string& thread_name);
  long io_count() const;
};

}  // namespace hippo::storage::testing
