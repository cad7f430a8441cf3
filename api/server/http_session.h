// One HTTP/1.1 connection: reads requests one at a time (keep-alive), authenticates each (all but
// /healthz need a Bearer API key), answers /healthz, /metrics, /v1/models, /v1/chat/completions
// (plain JSON or Server-Sent Events in chunked encoding, from a bounded outbound queue) and the
// session administration under /v1/sessions (session_admin.h), and hands an upgrade request on
// /v1/agents to a WebSocketSession acting for the key's tenant.
#pragma once

#include "api/server/connection_stream.h"
#include "api/server/auth.h"
#include "api/server/openai_chat.h"
#include "api/server/openai_responses.h"
#include "api/server/server_context.h"
#include "api/server/tenant_limits.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include <deque>
#include <utility>
#include <vector>
#include <memory>
#include <optional>
#include <string>

namespace hippo::server {

class HttpSession : public Connection, public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(ServerContext& ctx, boost::asio::ip::tcp::socket&& socket);
  ~HttpSession() override;

  void run();
  void close_for_shutdown() override;

 private:
  using Request = boost::beast::http::request<boost::beast::http::string_body>;
  using Headers = std::vector<std::pair<boost::beast::http::field, std::string>>;

  void handshake();  // TLS only
  void do_read();
  void on_read(boost::beast::error_code ec, size_t bytes);
  // While a chat completion runs no request is read: this read notices a client that hung up (its
  // response is cancelled at once), and keeps any pipelined bytes for the next request.
  void watch_client();
  void on_watch(boost::beast::error_code ec, size_t bytes);
  void route(const Request& request);
  // The tenant of the request's API key; false when it was answered with 401 (or 500).
  bool authenticate(const Request& request);
  // Sends one whole response, then reads the next request (or closes).
  void respond(unsigned status, std::string_view content_type, std::string body, const Headers& headers = {});
  void respond_error(unsigned status, std::string_view message, std::string_view code, const Headers& headers = {});
  void respond_refusal(const Refusal& refusal);
  void session_admin(const Request& request, std::string_view target);
  void on_responded(bool close, boost::beast::error_code ec, size_t bytes);
  void metrics();
  void readiness(bool strict);
  void chat_completions(const Request& request);
  void responses(const Request& request);
  void stored_response(const Request& request, std::string_view path);
  // Pool thread: the response of an OpenAI endpoint to the conversation (chat_ set up already).
  void run_conversation(const Tenant& tenant, agents::SessionSettings settings, std::vector<agents::InputItem> items,
                        agents::ResponseOptions options);
  void on_chat_event(const agents::ResponseEvent& event);
  void end_response(std::string last_data);
  void cancel_chat();  // cancels the response of a client gone (its session is then closed)
  // Streaming (SSE): chunked-encoding pieces through a bounded queue.
  void stream_write(std::string piece);
  void do_stream_write();
  void on_stream_write(boost::beast::error_code ec, size_t bytes);
  void close_socket();
  template <typename Fn>
  void post_io(Fn fn);

  ServerContext& ctx_;
  ConnectionStream stream_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  uint64_t registry_id_ = 0;
  unsigned version_ = 11;
  Tenant tenant_;  // of the request being answered
  bool keep_alive_ = true;
  bool busy_ = false;           // a request is being answered
  bool shutting_down_ = false;  // close after the current answer
  bool closed_ = false;
  bool watching_ = false;           // watch_client()'s read is pending
  bool read_after_watch_ = false;   // do_read() waits for that read to end

  // The response of an OpenAI endpoint in progress.
  struct Chat {
    std::string session_id;   // while its response runs (cancelled if the client goes)
    std::string answered_by;  // the session that answers
    std::unique_ptr<ResponseWriter> writer;
    bool stream = false;
    bool done = false;
    // The Responses API: the writer, whether to store the response, and its conversation.
    openai::ResponseObject* responses = nullptr;
    bool store = false;
    std::vector<agents::InputItem> conversation;
  };
  std::unique_ptr<Chat> chat_;
  std::deque<std::string> out_;
  size_t out_bytes_ = 0;
  bool writing_ = false;
  bool stream_ended_ = false;  // the last chunk is queued
};

}  // namespace hippo::server
