// Which endpoint an HTTP request is for, decided from its method, target and upgrade headers
// alone, and the answer to a request that could not be read: no socket, no API key lookup, no
// runtime. HttpSession acts on these decisions (it checks the key, answers 503 while stopping, and
// runs the endpoint), and the fuzz target tests/fuzz/fuzz_http_request.cpp runs this same code
// rather than a copy of it.
#pragma once

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/system/error_code.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace hippo::server {

// Session administration lives at this path and below it (session_admin.h).
inline constexpr std::string_view kSessionsPath = "/v1/sessions";
inline constexpr std::string_view kModelsPathPrefix = "/v1/models/";  // + a model id
inline constexpr std::string_view kResponsesPath = "/v1/responses";    // POST; + "/{id}": GET, DELETE

// Whether path (a target without its query) is kSessionsPath or below it.
bool is_session_admin_path(std::string_view path);

// An error answer (OpenAI's shape, openai::error_body) that the request alone decides.
struct HttpError {
  unsigned status = 0;
  std::string message;
  std::string_view code;  // a constant: not_found, method_not_allowed, ...
};

struct Route {
  enum class Endpoint {
    kHealthz,          // GET /healthz
    kReadyz,           // GET /readyz
    kModel,            // GET /v1/models/{id}
    kAgentsUpgrade,    // a WebSocket upgrade on /v1/agents
    kMetrics,          // GET /metrics
    kModels,           // GET /v1/models
    kChatCompletions,  // POST /v1/chat/completions
    kResponses,        // POST /v1/responses
    kStoredResponse,   // GET or DELETE /v1/responses/{id}
    kSessionAdmin,     // any method under /v1/sessions: session_admin.h checks the method
    kNotFound,         // 404: no endpoint at the path
    kWrongMethod,      // 405: the endpoint takes another method
    kNoSuchUpgrade,    // 404: a WebSocket upgrade on a path other than /v1/agents
  };
  Endpoint endpoint = Endpoint::kNotFound;
  std::string_view path;  // the target before '?', pointing into the request
  // Whether the API key is checked before anything is answered: for every request but one to
  // /healthz that is not an upgrade (load balancers and supervisors probe it without a key).
  bool needs_key = true;
  // The answer for kNotFound, kWrongMethod and kNoSuchUpgrade; status 0 for the endpoints.
  HttpError error;
};

// In this order, which decides the answer to a request wrong in several ways: /healthz (without a
// key, so its 405 too); an upgrade (404 unless on /v1/agents); /metrics, /v1/models,
// /v1/chat/completions and /v1/responses[/{id}] (405 on another method); session administration;
// else 404.
Route route_request(const boost::beast::http::request<boost::beast::http::string_body>& request);

// The answer to a request that failed to read with ec (HttpSession::on_read), after which the
// connection closes: 413 when its body is over body_limit, 400 when Beast found it malformed; none
// for the end of the stream and for socket errors (the connection just closes).
std::optional<HttpError> read_error_answer(const boost::system::error_code& ec, size_t body_limit);

}  // namespace hippo::server
