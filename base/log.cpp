// spdlog setup and the two renderings of a structured log line.
#include "base/log.h"

#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cctype>

namespace hippo::log {
namespace {

std::atomic<Format> g_format{Format::kText};

std::string json_quote(std::string_view s) { return boost::json::serialize(boost::json::string(s)); }

// logfmt quoting: bare when the value is a plain token, quoted and escaped otherwise.
std::string logfmt_value(std::string_view v) {
  bool bare = !v.empty();
  for (char c : v) {
    if (c == ' ' || c == '"' || c == '=' || c == '\\' || !std::isprint(static_cast<unsigned char>(c))) {
      bare = false;
      break;
    }
  }
  return bare ? std::string(v) : json_quote(v);
}

}  // namespace

Result<spdlog::level::level_enum> parse_level(std::string_view name) {
  static constexpr std::pair<std::string_view, spdlog::level::level_enum> kLevels[] = {
      {"trace", spdlog::level::trace}, {"debug", spdlog::level::debug}, {"info", spdlog::level::info},
      {"warn", spdlog::level::warn},   {"error", spdlog::level::err},   {"off", spdlog::level::off}};
  for (const auto& [n, level] : kLevels)
    if (n == name) return level;
  return make_error(ErrorCode::kInvalidArgument,
                    "unknown log level '{}' (expected trace, debug, info, warn, error or off)", name);
}

Result<Format> parse_format(std::string_view name) {
  if (name == "text") return Format::kText;
  if (name == "json") return Format::kJson;
  return make_error(ErrorCode::kInvalidArgument, "unknown log format '{}' (expected text or json)", name);
}

void init(const Options& options, std::shared_ptr<spdlog::sinks::sink> sink) {
  if (!sink) sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>("hippo", std::move(sink));
  logger->set_level(options.level);
  logger->flush_on(spdlog::level::warn);
  g_format = options.format;
  // UTC timestamps in ISO 8601 so lines from several machines sort together.
  if (options.format == Format::kJson)
    logger->set_pattern(R"({"ts":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l",%v})", spdlog::pattern_time_type::utc);
  else
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %L %v", spdlog::pattern_time_type::utc);
  spdlog::set_default_logger(std::move(logger));
}

std::string render(std::string_view message, Fields fields) {
  std::string out;
  if (g_format == Format::kJson) {
    out = "\"msg\":" + json_quote(message);
    for (const Field& f : fields) {
      out += ',';
      out += json_quote(f.key());
      out += ':';
      out += f.quoted() ? json_quote(f.value()) : f.value();
    }
  } else {
    out = message;
    for (const Field& f : fields) {
      out += ' ';
      out += f.key();
      out += '=';
      out += logfmt_value(f.value());
    }
  }
  return out;
}

void write(spdlog::level::level_enum level, std::string_view message, Fields fields) {
  auto* logger = spdlog::default_logger_raw();
  if (!logger->should_log(level)) return;  // fields are rendered only for lines that are kept
  logger->log(level, "{}", render(message, fields));
}

}  // namespace hippo::log
