#include "api/cli/config_layers.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

using hippo::cli::apply_config_file;
using hippo::cli::bind_environment;

namespace {

// A small command tree like hippo's: a global option and a subcommand with its own options.
struct TestApp {
  CLI::App app{"test"};
  std::string log_level = "info";
  int port = 8000;
  std::string host = "127.0.0.1";
  std::string db = "hippo.db";
  CLI::App* serve = nullptr;
  CLI::App* other = nullptr;
  int other_port = 1;

  TestApp() {
    app.add_option("--log-level", log_level);
    serve = app.add_subcommand("serve");
    serve->add_option("--port", port);
    serve->add_option("--host", host);
    serve->add_option("--db", db);
    other = app.add_subcommand("other");
    other->add_option("--port", other_port);
    bind_environment(app);
  }
  void parse(std::vector<std::string> args) {
    std::reverse(args.begin(), args.end());  // CLI11 takes the reversed vector form
    app.parse(args);
  }
};

struct TempFile {
  std::filesystem::path path;
  explicit TempFile(const std::string& text)
      : path(std::filesystem::temp_directory_path() / ("hippo_config_" + std::to_string(::getpid()) + ".toml")) {
    std::ofstream(path) << text;
  }
  ~TempFile() { std::filesystem::remove(path); }
};

struct ScopedEnv {
  std::string name;
  ScopedEnv(std::string n, const char* value) : name(std::move(n)) { ::setenv(name.c_str(), value, 1); }
  ~ScopedEnv() { ::unsetenv(name.c_str()); }
};

}  // namespace

TEST_CASE("environment names derive from the long option name", "[config]") {
  CHECK(hippo::cli::env_name_for("kv-memory") == "HIPPO_KV_MEMORY");
  CHECK(hippo::cli::env_name_for("port") == "HIPPO_PORT");
}

TEST_CASE("precedence: flag over HIPPO_* environment over config file over default", "[config]") {
  TempFile file("log-level = \"debug\"\nport = 7000\nhost = \"0.0.0.0\"\n[serve]\ndb = \"file.db\"\n");

  SECTION("the file fills what nothing else set, flat keys and [section] keys alike") {
    TestApp t;
    t.parse({"serve"});
    REQUIRE(apply_config_file(t.app, file.path.string()).ok());
    CHECK(t.log_level == "debug");
    CHECK(t.port == 7000);
    CHECK(t.host == "0.0.0.0");
    CHECK(t.db == "file.db");
    CHECK(t.other_port == 1);  // `other` was not selected: its options keep their defaults
  }
  SECTION("the environment beats the file") {
    ScopedEnv env("HIPPO_PORT", "7500");
    TestApp t;
    t.parse({"serve"});
    REQUIRE(apply_config_file(t.app, file.path.string()).ok());
    CHECK(t.port == 7500);
    CHECK(t.host == "0.0.0.0");
  }
  SECTION("a flag beats the environment and the file") {
    ScopedEnv env("HIPPO_PORT", "7500");
    TestApp t;
    t.parse({"serve", "--port", "9000"});
    REQUIRE(apply_config_file(t.app, file.path.string()).ok());
    CHECK(t.port == 9000);
  }
  SECTION("without any layer the default stands") {
    TestApp t;
    t.parse({"serve"});
    CHECK(t.port == 8000);
    CHECK(t.db == "hippo.db");
  }
}

TEST_CASE("config file errors name the file and the key", "[config]") {
  SECTION("unknown setting") {
    TempFile file("prot = 7000\n");
    TestApp t;
    t.parse({"serve"});
    auto s = apply_config_file(t.app, file.path.string());
    REQUIRE_FALSE(s.ok());
    CHECK(s.code() == hippo::ErrorCode::kInvalidArgument);
    CHECK(s.message() == "config file " + file.path.string() + ": unknown setting 'prot'");
  }
  SECTION("a value of the wrong type") {
    TempFile file("port = \"high\"\n");
    TestApp t;
    t.parse({"serve"});
    auto s = apply_config_file(t.app, file.path.string());
    REQUIRE_FALSE(s.ok());
    CHECK_THAT(s.message(), Catch::StartsWith("config file " + file.path.string() + ": key 'port': "));
  }
  SECTION("a missing file") {
    TestApp t;
    t.parse({"serve"});
    auto s = apply_config_file(t.app, "/nonexistent/hippo.toml");
    CHECK(s.code() == hippo::ErrorCode::kNotFound);
  }
}

TEST_CASE("help and version take no environment variable", "[config]") {
  TestApp t;
  t.app.set_version_flag("--version", "1.0");
  bind_environment(t.app);
  CHECK(t.app.get_help_ptr()->get_envname().empty());
  CHECK(t.app.get_version_ptr()->get_envname().empty());
  CHECK(t.app.get_option("--log-level")->get_envname() == "HIPPO_LOG_LEVEL");
  ScopedEnv env("HIPPO_VERSION", "1");
  CHECK_NOTHROW(t.parse({"serve"}));
}

TEST_CASE("a bad environment value is a parse error naming the variable", "[config]") {
  ScopedEnv env("HIPPO_PORT", "high");
  TestApp t;
  CHECK_THROWS_AS(t.parse({"serve"}), CLI::ParseError);
}
