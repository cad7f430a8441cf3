// Token counts on `hippo bench` command lines: "512", "32K" (x 1024), "1M" (x 1024²).
#pragma once

#include "base/status.h"

#include <cstdint>
#include <exception>
#include <string>
#include <string_view>

namespace hippo::cli {

// `flag` and `examples` name the option in the error: "--tokens: 'x' is not a token count like 32K, 1M".
inline Result<std::int64_t> parse_token_count(const std::string& text, std::string_view flag, std::string_view examples) {
  std::int64_t multiplier = 1;
  std::string digits = text;
  if (!digits.empty() && (digits.back() == 'K' || digits.back() == 'k')) multiplier = 1024;
  if (!digits.empty() && (digits.back() == 'M' || digits.back() == 'm')) multiplier = 1024 * 1024;
  if (multiplier != 1) digits.pop_back();
  try {
    std::size_t used = 0;
    const long long n = std::stoll(digits, &used);
    if (used == digits.size() && n > 0) return n * multiplier;
  } catch (const std::exception&) {
  }
  return make_error(ErrorCode::kInvalidArgument, "{}: '{}' is not a token count like {}", flag, text, examples);
}

}  // namespace hippo::cli
