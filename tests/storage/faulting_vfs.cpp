// The wrapping VFS behind tests/storage/faulting_vfs.h. Every file method forwards to the real
// file kept right after our header in the same allocation; xWrite and xSync count down first.
#include "tests/storage/faulting_vfs.h"

#include <sqlite3.h>

#include <pthread.h>

#include <cstring>
#include <mutex>
#include <thread>

namespace hippo::storage::testing {
namespace {

std::atomic<long> g_countdown{0};
std::atomic<bool> g_fired{false};
std::mutex g_slow_mutex;
std::string g_slow_thread;
std::chrono::microseconds g_slow_delay{0};
std::string g_counted_thread;
std::atomic<long> g_io_count{0};
sqlite3_vfs* g_real = nullptr;
sqlite3_vfs g_vfs;

struct File {
  sqlite3_file base;
  sqlite3_file* real() { return reinterpret_cast<sqlite3_file*>(this + 1); }
};

File* as_file(sqlite3_file* f) { return reinterpret_cast<File*>(f); }

bool should_fail() {
  long n = g_countdown.load();
  while (n > 0) {
    if (g_countdown.compare_exchange_weak(n, n - 1)) {
      if (n == 1) {
        g_fired = true;
        return true;
      }
      return false;
    }
  }
  return false;
}

int x_close(sqlite3_file* f) { return as_file(f)->real()->pMethods->xClose(as_file(f)->real()); }

std::string this_thread_name() {
  char name[16] = {};
  pthread_getname_np(pthread_self(), name, sizeof name);
  return name;
}

void note_io() {
  std::lock_guard lock(g_slow_mutex);
  if (!g_counted_thread.empty() && g_counted_thread == this_thread_name()) ++g_io_count;
}

void maybe_slow_down() {
  std::chrono::microseconds delay{0};
  {
    std::lock_guard lock(g_slow_mutex);
    if (g_slow_thread.empty()) return;
    if (g_slow_thread == this_thread_name()) delay = g_slow_delay;
  }
  std::this_thread::sleep_for(delay);
}

int x_read(sqlite3_file* f, void* buf, int n, sqlite3_int64 off) {
  note_io();
  maybe_slow_down();
  return as_file(f)->real()->pMethods->xRead(as_file(f)->real(), buf, n, off);
}
int x_write(sqlite3_file* f, const void* buf, int n, sqlite3_int64 off) {
  note_io();
  if (should_fail()) return SQLITE_IOERR_WRITE;
  maybe_slow_down();
  return as_file(f)->real()->pMethods->xWrite(as_file(f)->real(), buf, n, off);
}
int x_truncate(sqlite3_file* f, sqlite3_int64 size) {
  return as_file(f)->real()->pMethods->xTruncate(as_file(f)->real(), size);
}
int x_sync(sqlite3_file* f, int flags) {
  note_io();
  if (should_fail()) return SQLITE_IOERR_FSYNC;
  return as_file(f)->real()->pMethods->xSync(as_file(f)->real(), flags);
}
int x_file_size(sqlite3_file* f, sqlite3_int64* size) {
  return as_file(f)->real()->pMethods->xFileSize(as_file(f)->real(), size);
}
int x_lock(sqlite3_file* f, int level) {
  note_io();
  return as_file(f)->real()->pMethods->xLock(as_file(f)->real(), level); }
int x_unlock(sqlite3_file* f, int level) { return as_file(f)->real()->pMethods->xUnlock(as_file(f)->real(), level); }
int x_check_reserved(sqlite3_file* f, int* out) {
  return as_file(f)->real()->pMethods->xCheckReservedLock(as_file(f)->real(), out);
}
int x_file_control(sqlite3_file* f, int op, void* arg) {
  return as_file(f)->real()->pMethods->xFileControl(as_file(f)->real(), op, arg);
}
int x_sector_size(sqlite3_file* f) { return as_file(f)->real()->pMethods->xSectorSize(as_file(f)->real()); }
int x_device(sqlite3_file* f) { return as_file(f)->real()->pMethods->xDeviceCharacteristics(as_file(f)->real()); }
int x_shm_map(sqlite3_file* f, int region, int size, int extend, void volatile** out) {
  return as_file(f)->real()->pMethods->xShmMap(as_file(f)->real(), region, size, extend, out);
}
int x_shm_lock(sqlite3_file* f, int offset, int n, int flags) {
  note_io();
  return as_file(f)->real()->pMethods->xShmLock(as_file(f)->real(), offset, n, flags);
}
void x_shm_barrier(sqlite3_file* f) { as_file(f)->real()->pMethods->xShmBarrier(as_file(f)->real()); }
int x_shm_unmap(sqlite3_file* f, int remove) {
  return as_file(f)->real()->pMethods->xShmUnmap(as_file(f)->real(), remove);
}
int x_fetch(sqlite3_file* f, sqlite3_int64 off, int n, void** out) {
  return as_file(f)->real()->pMethods->xFetch(as_file(f)->real(), off, n, out);
}
int x_unfetch(sqlite3_file* f, sqlite3_int64 off, void* p) {
  return as_file(f)->real()->pMethods->xUnfetch(as_file(f)->real(), off, p);
}

const sqlite3_io_methods kMethods = {3,           x_close,          x_read,           x_write,       x_truncate,
                                     x_sync,      x_file_size,      x_lock,           x_unlock,      x_check_reserved,
                                     x_file_control, x_sector_size, x_device,         x_shm_map,     x_shm_lock,
                                     x_shm_barrier, x_shm_unmap,    x_fetch,          x_unfetch};

int x_open(sqlite3_vfs*, const char* name, sqlite3_file* f, int flags, int* out_flags) {
  File* file = as_file(f);
  file->base.pMethods = nullptr;
  const int rc = g_real->xOpen(g_real, name, file->real(), flags, out_flags);
  if (rc == SQLITE_OK) file->base.pMethods = &kMethods;
  return rc;
}

int x_delete(sqlite3_vfs*, const char* name, int sync_dir) { return g_real->xDelete(g_real, name, sync_dir); }
int x_access(sqlite3_vfs*, const char* name, int flags, int* out) { return g_real->xAccess(g_real, name, flags, out); }
int x_full_pathname(sqlite3_vfs*, const char* name, int n, char* out) {
  return g_real->xFullPathname(g_real, name, n, out);
}
int x_randomness(sqlite3_vfs*, int n, char* out) { return g_real->xRandomness(g_real, n, out); }
int x_sleep(sqlite3_vfs*, int us) { return g_real->xSleep(g_real, us); }
int x_current_time(sqlite3_vfs*, double* out) { return g_real->xCurrentTime(g_real, out); }
int x_last_error(sqlite3_vfs*, int n, char* out) { return g_real->xGetLastError(g_real, n, out); }
int x_current_time64(sqlite3_vfs*, sqlite3_int64* out) { return g_real->xCurrentTimeInt64(g_real, out); }

}  // namespace

FaultingVfs::FaultingVfs() {
  g_real = sqlite3_vfs_find(nullptr);
  std::memset(&g_vfs, 0, sizeof g_vfs);
  g_vfs.iVersion = 2;
  g_vfs.szOsFile = static_cast<int>(sizeof(File)) + g_real->szOsFile;
  g_vfs.mxPathname = g_real->mxPathname;
  g_vfs.zName = "hippo-faulting";
  g_vfs.xOpen = x_open;
  g_vfs.xDelete = x_delete;
  g_vfs.xAccess = x_access;
  g_vfs.xFullPathname = x_full_pathname;
  g_vfs.xDlOpen = nullptr;
  g_vfs.xRandomness = x_randomness;
  g_vfs.xSleep = x_sleep;
  g_vfs.xCurrentTime = x_current_time;
  g_vfs.xGetLastError = x_last_error;
  g_vfs.xCurrentTimeInt64 = x_current_time64;
  g_countdown = 0;
  g_fired = false;
  slow_io({}, {});
  count_io({});
  sqlite3_vfs_register(&g_vfs, 1);
}

FaultingVfs::~FaultingVfs() {
  sqlite3_vfs_unregister(&g_vfs);
  sqlite3_vfs_register(g_real, 1);
  slow_io({}, {});
  count_io({});
}

void FaultingVfs::fail_at(long n) {
  g_fired = false;
  g_countdown = n;
}

bool FaultingVfs::fired() const { return g_fired; }

void FaultingVfs::slow_io(const std::string& thread_name, std::chrono::microseconds delay) {
  std::lock_guard lock(g_slow_mutex);
  g_slow_thread = thread_name;
  g_slow_delay = delay;
}

void FaultingVfs::count_io(const std::string& thread_name) {
  std::lock_guard lock(g_slow_mutex);
  g_counted_thread = thread_name;
  g_io_count = 0;
}

long FaultingVfs::io_count() const { return g_io_count.load(); }

}  // namespace hippo::storage::testing
