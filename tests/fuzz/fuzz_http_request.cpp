// libFuzzer target: the bytes of one HTTP/1.1 connection through what HttpSession does with them
// (api/server/http_session.cpp): Beast's request_parser<string_body> with the server's body limit,
// requests read one after another from one buffer (keep-alive, pipelining), the error a failed
// read is answered with (read_error_answer) and the routing decision on each request
// (route_request, both api/server/http_routes.h), and the chat completions body through
// openai::parse_chat_request: the server's own code for each decision, no copy of it.
//
// What HttpSession does around those decisions is followed here: each request is taken as carrying
// a valid API key (the key lookup needs the database) while the server is not stopping.
//
// The first input byte is a control byte, chosen so that seed files stay readable text:
//   low 4 bits: bytes per read (0: the whole rest at once; 1-15: that many, to split the stream)
//   0x40 set (letters '@', 'A'...): a body limit of 64 bytes instead of the server's 4 MiB, so the
//     413 path is reachable with short inputs ('0'..'9' keep the server's limit)
//
// Beyond "no crash, no exception, no sanitizer report":
// - a parsed body is within the limit (and as long as Content-Length says), and only a body over
//   it is answered 413;
// - the route's path is the target before '?'; only /healthz and /readyz are answered without a key; an upgrade
//   request goes to the WebSocket endpoint or is refused, and no other request does; an endpoint
//   runs only on the method it takes; a route is an error exactly when its error has a status, and
//   the error's message names the path;
// - every answer the server would send (a 404 or 405 of the routing, a 413, a 400 naming the parse
//   error, the chat parser's errors) is an HTTP response that parses again, whose body is JSON
//   carrying the message.
// (Beast itself is not held to more: its serializer and parser disagree on a request with two
// Transfer-Encoding fields, which does not matter to a server that never writes requests.)
// Boost's assertions in this file go through boost::assertion_failed() below, in every build.
#define BOOST_ENABLE_ASSERT_HANDLER 1

#include "api/server/http_routes.h"
#include "api/server/openai_chat.h"
#include "api/server/openai_responses.h"
#include "api/server/server_options.h"
#include "base/status.h"
#include "engine/tokenizer/utf8.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_common.h"

#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

namespace boost {

// Every Boost assertion aborts, as without this handler, except one that is wrong in Boost 1.81:
// Beast's chunk parser asserts n >= 5 when the bytes after a final chunk "0\r\n" arrive in a later
// read (a valid empty chunked body, sent slowly), and then handles that case correctly
// (boostorg/beast#2861, in Boost 1.86). Release builds compile Boost's assertions out; a debug or
// asan build of `hippo serve` aborts on such a request.
void assertion_failed(char const* expr, char const* function, char const* file, long line) {
  if (std::string_view(expr) == "n >= 5" && std::string_view(file).ends_with("boost/beast/http/impl/basic_parser.ipp"))
    return;
  std::fprintf(stderr, "%s:%ld: %s: Boost assertion failed: %s\n", file, line, function, expr);
  std::abort();
}

void assertion_failed_msg(char const* expr, char const* msg, char const* function, char const* file, long line) {
  std::fprintf(stderr, "%s:%ld: %s: Boost assertion failed: %s (%s)\n", file, line, function, expr, msg);
  std::abort();
}

}  // namespace boost

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
namespace openai = hippo::server::openai;
using Request = http::request<http::string_body>;
using hippo::server::Route;

const hippo::server::ServerOptions kOptions{};  // the server's defaults: body limit, model id

// The connection's bytes, handed out `chunk` at a time (all at once when chunk is 0).
class InputStream {
 public:
  InputStream(std::string_view data, size_t chunk) : data_(data), chunk_(chunk == 0 ? data.size() : chunk) {}

  template <typename MutableBufferSequence>
  size_t read_some(const MutableBufferSequence& buffers, boost::system::error_code& ec) {
    if (pos_ == data_.size()) {
      ec = boost::asio::error::eof;
      return 0;
    }
    ec = {};
    const size_t n = boost::asio::buffer_copy(
        buffers, boost::asio::buffer(data_.data() + pos_, std::min(chunk_, data_.size() - pos_)));
    pos_ += n;
    return n;
  }

  template <typename MutableBufferSequence>
  size_t read_some(const MutableBufferSequence& buffers) {
    boost::system::error_code ec;
    const size_t n = read_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }

 private:
  std::string_view data_;
  size_t chunk_;
  size_t pos_ = 0;
};

// HttpSession::respond / respond_error: the response as it goes on the wire, read back by a client.
void check_answer(unsigned status, std::string_view message, std::string_view code, unsigned version, bool keep_alive) {
  const std::string_view type = status >= 500 ? "server_error" : "invalid_request_error";
  http::response<http::string_body> res(static_cast<http::status>(status), version);
  res.set(http::field::server, "hippo");
  res.set(http::field::content_type, "application/json");
  res.keep_alive(keep_alive);
  res.body() = openai::error_body(message, type, code);
  res.prepare_payload();
  std::ostringstream wire;
  wire << res;

  http::response_parser<http::string_body> parser;
  parser.eager(true);
  beast::error_code ec;
  const std::string bytes = wire.str();
  parser.put(boost::asio::buffer(bytes), ec);
  if (!ec && parser.need_eof()) parser.put_eof(ec);
  HIPPO_FUZZ_CHECK(!ec && parser.is_done(), "the " + std::to_string(status) + " response does not parse again (" +
                                                ec.message() + "): " + bytes);
  const json::value body = hippo::fuzz::parse_json_or_die(parser.get().body(), "the error body");
  // The message as sent: the same text, invalid UTF-8 (a raw byte of the target) as U+FFFD.
  HIPPO_FUZZ_CHECK(body.at("error").at("message").as_string() == hippo::tokenizer::repair_utf8(message),
                   "the error message changed on the wire: " + parser.get().body());
}

bool is_error(Route::Endpoint endpoint) {
  return endpoint == Route::Endpoint::kNotFound || endpoint == Route::Endpoint::kWrongMethod ||
         endpoint == Route::Endpoint::kNoSuchUpgrade;
}

// The method an endpoint takes; unknown for session administration (session_admin.cpp checks it)
// and for the errors.
http::verb method_of(Route::Endpoint endpoint) {
  switch (endpoint) {
    case Route::Endpoint::kHealthz:
    case Route::Endpoint::kReadyz:
    case Route::Endpoint::kModel:
    case Route::Endpoint::kAgentsUpgrade:
    case Route::Endpoint::kMetrics:
    case Route::Endpoint::kModels:
      return http::verb::get;
    case Route::Endpoint::kChatCompletions:
    case Route::Endpoint::kResponses:
      return http::verb::post;
    case Route::Endpoint::kStoredResponse:  // GET or DELETE: checked in route()
    case Route::Endpoint::kSessionAdmin:
    case Route::Endpoint::kNotFound:
    case Route::Endpoint::kWrongMethod:
    case Route::Endpoint::kNoSuchUpgrade:
      return http::verb::unknown;
  }
  return http::verb::unknown;
}

// HttpSession::route, with a valid key, while the server runs: what it answers; false when the
// connection ends after it.
bool route(const Request& request, bool keep_alive) {
  const std::string_view full(request.target().data(), request.target().size());
  const Route dest = hippo::server::route_request(request);
  const std::string_view path = dest.path;
  auto what = [&] { return std::string(request.method_string()) + " " + std::string(full); };
  HIPPO_FUZZ_CHECK(path.data() == full.data() && path.find('?') == std::string_view::npos &&
                       (path.size() == full.size() || full[path.size()] == '?'),
                   "the path is not the target before '?': " + what());
  HIPPO_FUZZ_CHECK(dest.needs_key || path == "/healthz" || path == "/readyz", "answered without a key: " + what());
  const bool upgrade = beast::websocket::is_upgrade(request);
  const bool routed_as_upgrade =
      dest.endpoint == Route::Endpoint::kAgentsUpgrade || dest.endpoint == Route::Endpoint::kNoSuchUpgrade;
  HIPPO_FUZZ_CHECK(routed_as_upgrade == upgrade,
                   std::string(upgrade ? "an upgrade request not routed as one: " : "routed as an upgrade: ") + what());
  if (const http::verb takes = method_of(dest.endpoint); takes != http::verb::unknown)
    HIPPO_FUZZ_CHECK(request.method() == takes, "an endpoint runs on a method it does not take: " + what());
  HIPPO_FUZZ_CHECK(is_error(dest.endpoint) == (dest.error.status != 0),
                   "an error without a status, or a status without an error: " + what());

  switch (dest.endpoint) {
    case Route::Endpoint::kNotFound:
    case Route::Endpoint::kWrongMethod:
    case Route::Endpoint::kNoSuchUpgrade:
      HIPPO_FUZZ_CHECK(dest.error.message.find(path) != std::string::npos && !dest.error.code.empty(),
                       "the error does not name the path, or has no code: " + dest.error.message);
      check_answer(dest.error.status, dest.error.message, dest.error.code, request.version(), keep_alive);
      return keep_alive;
    case Route::Endpoint::kAgentsUpgrade:
      return false;  // the stream belongs to a WebSocketSession from here on
    case Route::Endpoint::kChatCompletions: {
      hippo::Result<openai::ChatRequest> parsed =
          openai::parse_chat_request(request.body(), kOptions.model_id, kOptions.default_max_output_tokens);
      if (!parsed.ok()) {
        const hippo::Status& st = parsed.status();
        check_answer(static_cast<unsigned>(openai::request_error_status(st)), st.message(), openai::request_error_code(st),
                     request.version(), keep_alive);
      }
      return keep_alive;  // answered by the runtime, then the next request
    }
    case Route::Endpoint::kResponses: {
      hippo::Result<openai::ResponsesRequest> parsed =
          openai::parse_responses_request(request.body(), kOptions.model_id, kOptions.default_max_output_tokens);
      if (!parsed.ok()) {
        const hippo::Status& st = parsed.status();
        check_answer(static_cast<unsigned>(openai::request_error_status(st)), st.message(), openai::request_error_code(st),
                     request.version(), keep_alive);
      }
      return keep_alive;
    }
    case Route::Endpoint::kStoredResponse:
      HIPPO_FUZZ_CHECK(request.method() == http::verb::get || request.method() == http::verb::delete_,
                       "a stored response answered on another method: " + what());
      return keep_alive;
    case Route::Endpoint::kHealthz:
    case Route::Endpoint::kReadyz:
    case Route::Endpoint::kModel:
    case Route::Endpoint::kMetrics:
    case Route::Endpoint::kModels:
    case Route::Endpoint::kSessionAdmin:
      return keep_alive;  // answered, then the next request
  }
  return keep_alive;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t control = data[0];
  const size_t limit = (control & 0x40) != 0 ? 64 : kOptions.max_message_bytes;
  InputStream stream(hippo::fuzz::as_text(data + 1, size - 1), control & 0x0f);
  beast::flat_buffer buffer;
  // HttpSession::do_read / on_read, once per request of the connection.
  for (int n = 0; n < 1000; ++n) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(limit);
    beast::error_code ec;
    http::read(stream, buffer, parser, ec);
    if (ec == http::error::end_of_stream) return 0;
    if (ec) {
      const std::optional<hippo::server::HttpError> answer = hippo::server::read_error_answer(ec, limit);
      HIPPO_FUZZ_CHECK((ec == http::error::body_limit) == (answer && answer->status == 413),
                       "a body over the limit not answered 413, or a 413 for another error: " + ec.message());
      if (answer) check_answer(answer->status, answer->message, answer->code, 11, false);
      return 0;
    }
    const boost::optional<uint64_t> content_length = parser.content_length();
    Request request = parser.release();
    HIPPO_FUZZ_CHECK(request.body().size() <= limit, "a body over the limit was read: " + std::to_string(request.body().size()));
    if (content_length)
      HIPPO_FUZZ_CHECK(request.body().size() == *content_length,
                       "the body is not as long as Content-Length says: " + std::to_string(*content_length));
    if (!route(request, request.keep_alive())) return 0;
  }
  return 0;
}
