// Checks for bugs, never for user input (docs/ARCHITECTURE.md, "Errors").
//
// HIPPO_CHECK is always on and cheap: use it at interface boundaries for conditions that only a
// programming error can break. HIPPO_DCHECK compiles away in release builds: use it inside hot code.
// Either one firing means hippo has a bug; input from users, files or sockets is validated and
// answered with a Status instead.
#pragma once

namespace hippo::detail {
[[noreturn]] void check_failed(const char* condition, const char* file, int line, const char* message);
}  // namespace hippo::detail

#define HIPPO_CHECK(condition, message)                                          \
  do {                                                                           \
    if (!(condition)) [[unlikely]]                                               \
      ::hippo::detail::check_failed(#condition, __FILE__, __LINE__, (message));  \
  } while (false)

#ifdef NDEBUG
#define HIPPO_DCHECK(condition, message) \
  do {                                   \
  } while (false && (condition))
#else
#define HIPPO_DCHECK(condition, message) HIPPO_CHECK(condition, message)
#endif
