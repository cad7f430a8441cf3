// Status and Result<T>: how hippo reports expected failures (docs/ARCHITECTURE.md, "Errors").
//
// Expected failures (bad input, missing files, corrupt snapshots, full disks) travel as values:
// a function that can fail returns Status or Result<T>, and the caller decides. Exceptions never
// cross hippo's own interfaces; third-party exceptions (CLI11, Boost.JSON, std::bad_alloc) are
// caught at the call that can throw them and turned into a Status. Bugs are not expected failures:
// they stop the process through HIPPO_CHECK (base/check.h).
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace hippo {

// A small, closed set: callers branch on the code, people read the message.
enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,     // the caller's input is wrong (flag, frame, request field)
  kNotFound,            // a named thing does not exist (file, session, tensor)
  kAlreadyExists,       // a named thing exists and must not be replaced
  kCorrupt,             // stored or received bytes fail validation (checksum, format, truncation)
  kIoError,             // the operating system refused a read or write
  kResourceExhausted,   // a limit was hit: disk full, memory budget, quota, queue length
  kFailedPrecondition,  // the system is in the wrong state for the request (locked, read-only)
  kUnavailable,         // not built yet, or temporarily unable to serve
  kCancelled,           // the caller or a shutdown cancelled the work
  kInternal,            // a bug surfaced as an error at a boundary
};

std::string_view error_code_name(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok_status() { return {}; }

  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Prefixes the message with where the failure happened: "session 42: " + message.
  Status with_context(std::string_view context) const;

  // "not_found: tensor layers.3.attn.wq_a.weight missing", or "ok".
  std::string to_string() const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

template <typename... Args>
Status make_error(ErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
  return Status(code, fmt::format(format, std::forward<Args>(args)...));
}

// Either a T or a non-ok Status. Accessing the value of an error is a bug (checked, always on).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}  // NOLINT: implicit by design, like std::expected
  Result(Status status) : state_(std::move(status)) {  // NOLINT
    if (std::get<Status>(state_).ok()) state_ = Status(ErrorCode::kInternal, "Result built from an ok Status");
  }

  bool ok() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return ok(); }

  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(state_);
  }
  T& value() & { check_ok(); return std::get<T>(state_); }
  const T& value() const& { check_ok(); return std::get<T>(state_); }
  T&& value() && { check_ok(); return std::get<T>(std::move(state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void check_ok() const;
  std::variant<T, Status> state_;
};

[[noreturn]] void die_on_bad_result_access(const Status& status);

template <typename T>
void Result<T>::check_ok() const {
  if (!ok()) die_on_bad_result_access(std::get<Status>(state_));
}

}  // namespace hippo

// Propagates a non-ok Status from an expression yielding Status.
#define HIPPO_RETURN_IF_ERROR(expr)              \
  do {                                           \
    ::hippo::Status hippo_status_ = (expr);      \
    if (!hippo_status_.ok()) return hippo_status_; \
  } while (false)

#define HIPPO_CONCAT_INNER(a, b) a##b
#define HIPPO_CONCAT(a, b) HIPPO_CONCAT_INNER(a, b)

// HIPPO_ASSIGN_OR_RETURN(auto x, f()): binds the value of a Result or returns its Status.
#define HIPPO_ASSIGN_OR_RETURN(lhs, expr) \
  HIPPO_ASSIGN_OR_RETURN_IMPL(HIPPO_CONCAT(hippo_result_, __LINE__), lhs, expr)
#define HIPPO_ASSIGN_OR_RETURN_IMPL(result, lhs, expr) \
  auto result = (expr);                                \
  if (!result.ok()) return result.status();            \
  lhs = std::move(result).value()
