#include "base/log.h"

#include <catch2/catch.hpp>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <boost/json/parse.hpp>
#include <sstream>

namespace hlog = hippo::log;

namespace {

std::string capture(hlog::Options options, auto&& emit) {
  std::ostringstream out;
  hlog::init(options, std::make_shared<spdlog::sinks::ostream_sink_mt>(out));
  emit();
  spdlog::default_logger()->flush();
  return out.str();
}

}  // namespace

TEST_CASE("text logs are one line per event with logfmt fields", "[log]") {
  std::string line = capture({spdlog::level::info, hlog::Format::kText}, [] {
    hlog::info("snapshot written", {{"session", "s_42"}, {"tokens", 4096}, {"note", "two words"}});
  });
  CHECK_THAT(line, Catch::Matches(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z I snapshot written )"
                                  R"(session=s_42 tokens=4096 note="two words"\n)"));
}

TEST_CASE("json logs are one JSON object per line with typed fields", "[log]") {
  std::string line = capture({spdlog::level::debug, hlog::Format::kJson}, [] {
    hlog::warn("session rebuilt", {{"session", "s_\"7\""}, {"ok", false}, {"ms", 1.5}});
  });
  auto doc = boost::json::parse(line).as_object();
  CHECK(doc.at("level") == "warning");
  CHECK(doc.at("msg") == "session rebuilt");
  CHECK(doc.at("session") == "s_\"7\"");
  CHECK(doc.at("ok") == false);
  CHECK(doc.at("ms").as_double() == 1.5);
  CHECK(doc.at("ts").as_string().ends_with("Z"));
}

TEST_CASE("lines below the level are dropped", "[log]") {
  std::string text = capture({spdlog::level::warn, hlog::Format::kText}, [] {
    hlog::info("hidden");
    hlog::debug("hidden too");
    hlog::error("shown", {{"code", 3}});
  });
  CHECK(text.find("hidden") == std::string::npos);
  CHECK(text.find("shown code=3") != std::string::npos);
}

TEST_CASE("log level and format names parse, and bad names are clear errors", "[log]") {
  CHECK(*hlog::parse_level("debug") == spdlog::level::debug);
  CHECK(*hlog::parse_level("error") == spdlog::level::err);
  CHECK(*hlog::parse_format("json") == hlog::Format::kJson);
  auto bad = hlog::parse_level("loud");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() == "unknown log level 'loud' (expected trace, debug, info, warn, error or off)");
  CHECK_FALSE(hlog::parse_format("xml").ok());
}
