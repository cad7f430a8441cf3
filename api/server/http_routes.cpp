#include "api/server/http_routes.h"

#include <boost/beast/http/error.hpp>
#include <boost/beast/http/verb.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <fmt/format.h>

#include <utility>

namespace hippo::server {

namespace http = boost::beast::http;

namespace {

Route to(Route::Endpoint endpoint, std::string_view path) {
  Route route;
  route.endpoint = endpoint;
  route.path = path;
  return route;
}

Route refuse(Route::Endpoint why, std::string_view path, unsigned status, std::string message, std::string_view code) {
  Route route = to(why, path);
  route.error = {status, std::move(message), code};
  return route;
}

// The endpoint when the request has the one method it takes, else a 405.
Route only(http::verb allowed, http::verb method, Route::Endpoint endpoint, std::string_view path) {
  if (method == allowed) return to(endpoint, path);
  return refuse(Route::Endpoint::kWrongMethod, path, 405,
                fmt::format("{} takes {} only", path, std::string_view(http::to_string(allowed))), "method_not_allowed");
}

}  // namespace

bool is_session_admin_path(std::string_view path) {
  return path == kSessionsPath || (path.size() > kSessionsPath.size() && path.starts_with(kSessionsPath) &&
                                   path[kSessionsPath.size()] == '/');
}

Route route_request(const http::request<http::string_body>& request) {
  std::string_view path(request.target().data(), request.target().size());
  if (auto q = path.find('?'); q != std::string_view::npos) path = path.substr(0, q);
  const http::verb method = request.method();
  const bool upgrade = boost::beast::websocket::is_upgrade(request);

  if ((path == "/healthz" || path == "/readyz") && !upgrade) {
    Route route = only(http::verb::get, method, path == "/healthz" ? Route::Endpoint::kHealthz : Route::Endpoint::kReadyz, path);
    route.needs_key = false;
    return route;
  }
  if (upgrade) {
    if (path == "/v1/agents") return to(Route::Endpoint::kAgentsUpgrade, path);
    return refuse(Route::Endpoint::kNoSuchUpgrade, path, 404,
                  fmt::format("no WebSocket endpoint at {}; use /v1/agents", path), "not_found");
  }
  if (path == "/metrics") return only(http::verb::get, method, Route::Endpoint::kMetrics, path);
  if (path == "/v1/models") return only(http::verb::get, method, Route::Endpoint::kModels, path);
  if (path.size() > kModelsPathPrefix.size() && path.starts_with(kModelsPathPrefix))
    return only(http::verb::get, method, Route::Endpoint::kModel, path);
  if (path == "/v1/chat/completions") return only(http::verb::post, method, Route::Endpoint::kChatCompletions, path);
  if (path == kResponsesPath) return only(http::verb::post, method, Route::Endpoint::kResponses, path);
  if (path.size() > kResponsesPath.size() + 1 && path.starts_with(kResponsesPath) && path[kResponsesPath.size()] == '/' &&
      path.find('/', kResponsesPath.size() + 1) == std::string_view::npos) {
    if (method == http::verb::get || method == http::verb::delete_) return to(Route::Endpoint::kStoredResponse, path);
    return refuse(Route::Endpoint::kWrongMethod, path, 405, fmt::format("{} takes GET or DELETE only", path),
                  "method_not_allowed");
  }
  if (is_session_admin_path(path)) return to(Route::Endpoint::kSessionAdmin, path);
  return refuse(Route::Endpoint::kNotFound, path, 404, fmt::format("no endpoint at {}", path), "not_found");
}

std::optional<HttpError> read_error_answer(const boost::system::error_code& ec, size_t body_limit) {
  if (ec == http::error::body_limit)
    return HttpError{413, fmt::format("the request body is over the limit of {} bytes", body_limit), "request_too_large"};
  // Beast's parse errors: a malformed request. Its end_of_stream, of the same category, is a client
  // that closed between requests.
  if (ec.category() == http::make_error_code(http::error::bad_target).category() && ec != http::error::end_of_stream)
    return HttpError{400, fmt::format("malformed HTTP request: {}", ec.message()), "bad_request"};
  return std::nullopt;
}

}  // namespace hippo::server
