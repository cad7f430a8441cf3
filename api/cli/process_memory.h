// Memory of this process, as `hippo bench` commands report it (Linux /proc, glibc's allocator).
#pragma once

#include <malloc.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>

namespace hippo::cli {

// A /proc/self/status field in bytes: "VmRSS:" now, "VmHWM:" the peak since the last reset_peak_rss();
// 0 when it cannot be read.
inline std::int64_t proc_status_bytes(const char* key) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind(key, 0) == 0) return std::stoll(line.substr(std::strlen(key) + 1)) * 1024;
  return 0;
}

// Resets VmHWM to the current RSS; false when the kernel refuses.
inline bool reset_peak_rss() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  return static_cast<bool>(clear.flush());
}

// Bytes the allocator has handed out and not had back (glibc, all arenas and mmapped blocks). Unlike
// RSS it grows with what a workload keeps even when freed memory from earlier work is reused.
inline std::int64_t heap_bytes_in_use() {
  const struct mallinfo2 m = mallinfo2();
  return static_cast<std::int64_t>(m.uordblks + m.hblkhd);
}

}  // namespace hippo::cli
