#include "base/status.h"

#include <catch2/catch.hpp>

#include <memory>
#include <set>

using hippo::ErrorCode;
using hippo::Result;
using hippo::Status;

namespace {

Result<int> parse_positive(int v) {
  if (v <= 0) return hippo::make_error(ErrorCode::kInvalidArgument, "expected a positive number, got {}", v);
  return v;
}

Result<int> doubled(int v) {
  HIPPO_ASSIGN_OR_RETURN(int x, parse_positive(v));
  return 2 * x;
}

Status check_all(std::initializer_list<int> values) {
  for (int v : values) HIPPO_RETURN_IF_ERROR(parse_positive(v).status().with_context(fmt::format("value {}", v)));
  return {};
}

}  // namespace

TEST_CASE("Status carries code and message, and context prefixes the message", "[status]") {
  Status ok;
  CHECK(ok.ok());
  CHECK(ok.to_string() == "ok");
  Status s = hippo::make_error(ErrorCode::kCorrupt, "chunk {} of stream {}: checksum mismatch", 17, "kv.layer8");
  CHECK_FALSE(s.ok());
  CHECK(s.code() == ErrorCode::kCorrupt);
  CHECK(s.with_context("session 42").message() == "session 42: chunk 17 of stream kv.layer8: checksum mismatch");
  CHECK(s.to_string() == "corrupt: chunk 17 of stream kv.layer8: checksum mismatch");
  CHECK(ok.with_context("ignored").ok());
}

TEST_CASE("Result holds a value or an error and propagates through the macros", "[status]") {
  auto good = doubled(21);
  REQUIRE(good.ok());
  CHECK(*good == 42);
  auto bad = doubled(-1);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == ErrorCode::kInvalidArgument);
  CHECK(bad.status().message() == "expected a positive number, got -1");

  CHECK(check_all({1, 2, 3}).ok());
  Status s = check_all({1, -5, 3});
  CHECK(s.message() == "value -5: expected a positive number, got -5");
}

TEST_CASE("Result works with move-only values", "[status]") {
  Result<std::unique_ptr<int>> r(std::make_unique<int>(7));
  REQUIRE(r.ok());
  std::unique_ptr<int> p = std::move(r).value();
  CHECK(*p == 7);
}

TEST_CASE("A Result built from an ok Status is an internal error, never a silent success", "[status]") {
  Result<int> r{Status{}};
  CHECK_FALSE(r.ok());
  CHECK(r.status().code() == ErrorCode::kInternal);
}

TEST_CASE("Every error code has a distinct name", "[status]") {
  std::set<std::string_view> names;
  for (int c = 0; c <= static_cast<int>(ErrorCode::kInternal); ++c)
    names.insert(hippo::error_code_name(static_cast<ErrorCode>(c)));
  CHECK(names.size() == static_cast<std::size_t>(ErrorCode::kInternal) + 1);
  CHECK_FALSE(names.contains("unknown"));
}
