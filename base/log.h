// Logging conventions (docs/ARCHITECTURE.md, "Logging"): spdlog underneath, one line per event,
// a fixed message plus structured fields. Fields, not interpolation, carry variable data, so that
// `grep 'session=42'` or a JSON log pipeline finds every line about one session:
//
//   log::info("snapshot written", {{"session", id}, {"tokens", n}, {"ms", elapsed}});
//   text:  2026-12-02T11:03:05.123Z I snapshot written session=s_9f2 tokens=4096 ms=12.5
//   json:  {"ts":"2026-12-02T11:03:05.123Z","level":"info","msg":"snapshot written","session":"s_9f2",...}
//
// Levels: error = a request or background task failed; warn = hippo recovered from something an
// operator should know (a rebuilt session, a dropped client); info = lifecycle (start, stop,
// swap-out, resume); debug = per-request detail; trace = per-token detail, off in production.
#pragma once

#include "base/status.h"

#include <spdlog/common.h>

#include <concepts>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>

namespace spdlog::sinks { class sink; }

namespace hippo::log {

enum class Format { kText, kJson };

struct Options {
  spdlog::level::level_enum level = spdlog::level::info;
  Format format = Format::kText;
};

Result<spdlog::level::level_enum> parse_level(std::string_view name);
Result<Format> parse_format(std::string_view name);

// Installs hippo's logger as spdlog's default. The sink defaults to stderr (stdout stays for
// command output); tests pass their own sink to read what was logged.
void init(const Options& options, std::shared_ptr<spdlog::sinks::sink> sink = nullptr);

// One structured field. Numbers and booleans stay unquoted in JSON; everything else is a string.
class Field {
 public:
  Field(std::string_view key, std::string_view value) : key_(key), value_(value), quoted_(true) {}
  Field(std::string_view key, const char* value) : Field(key, std::string_view(value)) {}
  Field(std::string_view key, const std::string& value) : Field(key, std::string_view(value)) {}
  Field(std::string_view key, bool value) : key_(key), value_(value ? "true" : "false"), quoted_(false) {}
  template <typename T>
    requires(std::integral<T> || std::floating_point<T>)
  Field(std::string_view key, T value) : key_(key), value_(fmt::format("{}", value)), quoted_(false) {}

  std::string_view key() const { return key_; }
  const std::string& value() const { return value_; }
  bool quoted() const { return quoted_; }

 private:
  std::string_view key_;
  std::string value_;
  bool quoted_;
};

using Fields = std::initializer_list<Field>;

// The message and fields as the active format renders them (the part after time and level).
std::string render(std::string_view message, Fields fields);

void write(spdlog::level::level_enum level, std::string_view message, Fields fields);

inline void trace(std::string_view m, Fields f = {}) { write(spdlog::level::trace, m, f); }
inline void debug(std::string_view m, Fields f = {}) { write(spdlog::level::debug, m, f); }
inline void info(std::string_view m, Fields f = {}) { write(spdlog::level::info, m, f); }
inline void warn(std::string_view m, Fields f = {}) { write(spdlog::level::warn, m, f); }
inline void error(std::string_view m, Fields f = {}) { write(spdlog::level::err, m, f); }

}  // namespace hippo::log
