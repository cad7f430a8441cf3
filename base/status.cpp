// Names and formatting for Status; the always-on failure path of Result.
#include "base/status.h"

#include <cstdio>
#include <cstdlib>

namespace hippo {

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return "ok";
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kAlreadyExists: return "already_exists";
    case ErrorCode::kCorrupt: return "corrupt";
    case ErrorCode::kIoError: return "io_error";
    case ErrorCode::kResourceExhausted: return "resource_exhausted";
    case ErrorCode::kFailedPrecondition: return "failed_precondition";
    case ErrorCode::kUnavailable: return "unavailable";
    case ErrorCode::kCancelled: return "cancelled";
    case ErrorCode::kInternal: return "internal";
  }
  return "unknown";
}

Status Status::with_context(std::string_view context) const {
  if (ok()) return *this;
  return Status(code_, fmt::format("{}: {}", context, message_));
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  return fmt::format("{}: {}", error_code_name(code_), message_);
}

void die_on_bad_result_access(const Status& status) {
  std::fprintf(stderr, "hippo: bug: value of a failed Result accessed (%s)\n", status.to_string().c_str());
  std::abort();
}

}  // namespace hippo
