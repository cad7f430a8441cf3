// The failure path of HIPPO_CHECK: report through the log (so it lands where operators look) and
// stderr (in case logging itself is broken), then abort for a core dump.
#include "base/check.h"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>

namespace hippo::detail {

void check_failed(const char* condition, const char* file, int line, const char* message) {
  spdlog::critical("bug: check failed: {} ({}) at {}:{}", condition, message, file, line);
  spdlog::shutdown();
  std::fprintf(stderr, "hippo: bug: check failed: %s (%s) at %s:%d\n", condition, message, file, line);
  std::abort();
}

}  // namespace hippo::detail
