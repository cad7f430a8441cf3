// Which endpoint an HTTP request is for, and the answer to one that could not be read
// (api/server/http_routes.h): the decisions HttpSession acts on, with the exact errors the
// end-to-end tests see on the wire.
#include "api/server/http_routes.h"

#include <boost/asio/error.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/verb.hpp>
#include <catch2/catch.hpp>

#include <optional>
#include <string_view>

using namespace hippo::server;
namespace http = boost::beast::http;
using Endpoint = Route::Endpoint;

namespace {

http::request<http::string_body> request(http::verb method, std::string_view target, unsigned version = 11) {
  return http::request<http::string_body>(method, target, version);
}

// A WebSocket opening handshake's request (RFC 6455 4.1) on target.
http::request<http::string_body> upgrade(std::string_view target, http::verb method = http::verb::get, unsigned version = 11) {
  http::request<http::string_body> req(method, target, version);
  req.set(http::field::connection, "keep-alive, Upgrade");
  req.set(http::field::upgrade, "websocket");
  req.set(http::field::sec_websocket_key, "dGhlIHNhbXBsZSBub25jZQ==");
  req.set(http::field::sec_websocket_version, "13");
  return req;
}

void check_endpoint(const Route& route, Endpoint endpoint, std::string_view path) {
  CHECK(route.endpoint == endpoint);
  CHECK(route.path == path);
  CHECK(route.error.status == 0);
  CHECK(route.error.message.empty());
  CHECK(route.error.code.empty());
}

void check_error(const Route& route, Endpoint endpoint, unsigned status, std::string_view message, std::string_view code) {
  CHECK(route.endpoint == endpoint);
  CHECK(route.needs_key);
  CHECK(route.error.status == status);
  CHECK(route.error.message == message);
  CHECK(route.error.code == code);
}

}  // namespace

TEST_CASE("routes: each endpoint on the method it takes", "[server]") {
  const auto healthz = request(http::verb::get, "/healthz");
  check_endpoint(route_request(healthz), Endpoint::kHealthz, "/healthz");
  CHECK_FALSE(route_request(healthz).needs_key);

  const auto metrics = request(http::verb::get, "/metrics");
  check_endpoint(route_request(metrics), Endpoint::kMetrics, "/metrics");
  CHECK(route_request(metrics).needs_key);
  const auto models = request(http::verb::get, "/v1/models");
  check_endpoint(route_request(models), Endpoint::kModels, "/v1/models");
  CHECK(route_request(models).needs_key);
  const auto chat = request(http::verb::post, "/v1/chat/completions");
  check_endpoint(route_request(chat), Endpoint::kChatCompletions, "/v1/chat/completions");
  CHECK(route_request(chat).needs_key);
  const auto agents = upgrade("/v1/agents");
  check_endpoint(route_request(agents), Endpoint::kAgentsUpgrade, "/v1/agents");
  CHECK(route_request(agents).needs_key);
}

TEST_CASE("routes: a wrong method is a 405 naming the one method taken", "[server]") {
  // /healthz answers its 405 before the key is checked, as it answers everything.
  const auto healthz = request(http::verb::post, "/healthz");
  const Route r = route_request(healthz);
  CHECK(r.endpoint == Endpoint::kWrongMethod);
  CHECK_FALSE(r.needs_key);
  CHECK(r.error.status == 405);
  CHECK(r.error.message == "/healthz takes GET only");
  CHECK(r.error.code == "method_not_allowed");

  check_error(route_request(request(http::verb::post, "/metrics")), Endpoint::kWrongMethod, 405,
              "/metrics takes GET only", "method_not_allowed");
  check_error(route_request(request(http::verb::delete_, "/v1/models")), Endpoint::kWrongMethod, 405,
              "/v1/models takes GET only", "method_not_allowed");
  check_error(route_request(request(http::verb::get, "/v1/chat/completions")), Endpoint::kWrongMethod, 405,
              "/v1/chat/completions takes POST only", "method_not_allowed");
  check_error(route_request(request(http::verb::head, "/v1/chat/completions?stream=1")), Endpoint::kWrongMethod, 405,
              "/v1/chat/completions takes POST only", "method_not_allowed");
}

TEST_CASE("routes: the query is not part of the path", "[server]") {
  const auto healthz = request(http::verb::get, "/healthz?probe=1");
  check_endpoint(route_request(healthz), Endpoint::kHealthz, "/healthz");
  const auto models = request(http::verb::get, "/v1/models?a=b?c");
  check_endpoint(route_request(models), Endpoint::kModels, "/v1/models");
  const auto agents = upgrade("/v1/agents?token=x");
  check_endpoint(route_request(agents), Endpoint::kAgentsUpgrade, "/v1/agents");
  const auto sessions = request(http::verb::get, "/v1/sessions?limit=3");
  check_endpoint(route_request(sessions), Endpoint::kSessionAdmin, "/v1/sessions");
  const auto empty_query = request(http::verb::get, "/metrics?");
  check_endpoint(route_request(empty_query), Endpoint::kMetrics, "/metrics");
  // The error names the path, not the query.
  check_error(route_request(request(http::verb::get, "/nowhere?x=1")), Endpoint::kNotFound, 404, "no endpoint at /nowhere",
              "not_found");
  // A path is matched whole: no prefixes, suffixes or other case.
  check_error(route_request(request(http::verb::get, "/v1/models/")), Endpoint::kNotFound, 404,
              "no endpoint at /v1/models/", "not_found");
  check_error(route_request(request(http::verb::get, "/HEALTHZ")), Endpoint::kNotFound, 404, "no endpoint at /HEALTHZ",
              "not_found");
}

TEST_CASE("routes: upgrades are for /v1/agents only", "[server]") {
  check_error(route_request(upgrade("/v1/chat/completions")), Endpoint::kNoSuchUpgrade, 404,
              "no WebSocket endpoint at /v1/chat/completions; use /v1/agents", "not_found");
  check_error(route_request(upgrade("/")), Endpoint::kNoSuchUpgrade, 404, "no WebSocket endpoint at /; use /v1/agents",
              "not_found");
  // An upgrade to /healthz is not the open probe: it needs a key, then is refused.
  check_error(route_request(upgrade("/healthz")), Endpoint::kNoSuchUpgrade, 404,
              "no WebSocket endpoint at /healthz; use /v1/agents", "not_found");
  // Without an upgrade (not GET, or HTTP/1.0), /v1/agents is no endpoint at all.
  check_error(route_request(request(http::verb::get, "/v1/agents")), Endpoint::kNotFound, 404,
              "no endpoint at /v1/agents", "not_found");
  check_error(route_request(upgrade("/v1/agents", http::verb::post)), Endpoint::kNotFound, 404,
              "no endpoint at /v1/agents", "not_found");
  check_error(route_request(upgrade("/v1/agents", http::verb::get, 10)), Endpoint::kNotFound, 404,
              "no endpoint at /v1/agents", "not_found");
}

TEST_CASE("routes: session administration takes /v1/sessions and below, on any method", "[server]") {
  // session_admin.cpp checks the method and the rest of the path once the server is not stopping.
  for (const char* target : {"/v1/sessions", "/v1/sessions/", "/v1/sessions/s_1", "/v1/sessions/s_1/fork",
                             "/v1/sessions/s_1/nonsense/deeper"}) {
    for (http::verb method : {http::verb::get, http::verb::post, http::verb::delete_, http::verb::put}) {
      const auto req = request(method, target);
      const Route r = route_request(req);
      check_endpoint(r, Endpoint::kSessionAdmin, target);
      CHECK(r.needs_key);
    }
  }
  CHECK(is_session_admin_path("/v1/sessions"));
  CHECK(is_session_admin_path("/v1/sessions/x"));
  CHECK_FALSE(is_session_admin_path("/v1/sessionsx"));
  CHECK_FALSE(is_session_admin_path("/v1/session"));
  CHECK_FALSE(is_session_admin_path("/v1/Sessions"));
  CHECK_FALSE(is_session_admin_path("/v2/sessions"));
  CHECK_FALSE(is_session_admin_path(""));
  check_error(route_request(request(http::verb::get, "/v1/sessionsx")), Endpoint::kNotFound, 404,
              "no endpoint at /v1/sessionsx", "not_found");
}

TEST_CASE("routes: anything else is a 404 naming the path", "[server]") {
  check_error(route_request(request(http::verb::get, "/")), Endpoint::kNotFound, 404, "no endpoint at /", "not_found");
  check_error(route_request(request(http::verb::post, "/v1/completions")), Endpoint::kNotFound, 404,
              "no endpoint at /v1/completions", "not_found");
  check_error(route_request(request(http::verb::get, "*")), Endpoint::kNotFound, 404, "no endpoint at *", "not_found");
  check_error(route_request(request(http::verb::get, "?x")), Endpoint::kNotFound, 404, "no endpoint at ", "not_found");
}

TEST_CASE("a request that could not be read: 413 over the body limit, 400 when malformed, else no answer", "[server]") {
  const std::optional<HttpError> too_large = read_error_answer(http::error::body_limit, 4096);
  REQUIRE(too_large);
  CHECK(too_large->status == 413);
  CHECK(too_large->message == "the request body is over the limit of 4096 bytes");
  CHECK(too_large->code == "request_too_large");

  for (http::error malformed : {http::error::bad_target, http::error::bad_method, http::error::bad_version,
                                http::error::bad_field, http::error::bad_chunk, http::error::partial_message}) {
    const boost::system::error_code ec = malformed;
    const std::optional<HttpError> answer = read_error_answer(ec, 4096);
    REQUIRE(answer);
    CHECK(answer->status == 400);
    CHECK(answer->message == "malformed HTTP request: " + ec.message());
    CHECK(answer->code == "bad_request");
  }
  // A client that closed between requests, or a socket error: the connection just closes.
  CHECK_FALSE(read_error_answer(http::error::end_of_stream, 4096));
  CHECK_FALSE(read_error_answer(boost::asio::error::connection_reset, 4096));
  CHECK_FALSE(read_error_answer(boost::beast::error::timeout, 4096));
}
