// One WebSocket connection on /v1/agents: reads client events (text frames of JSON), runs them on
// the runtime in the order they came (a strand on the runtime-call pool), and writes server events
// from a bounded outbound queue. Any number of sessions can be used on one connection. A client
// that reads so slowly that more than ServerOptions::max_outbound_bytes of new events wait unsent
// is closed with code 1008 (policy violation; a replay after session.resume, bounded by the replay
// buffer, does not count); a frame over max_message_bytes closes with 1009; server shutdown
// closes with 1001 after the queued events are sent. A session's response events come through its
// stream (session_streams.h), which this connection reads from response.create or session.resume
// on. When the connection ends, a response still running gets ServerOptions::stream_grace for a
// client to reattach with session.resume and after_seq; then it is cancelled. Sessions stay (they
// are durable: session.resume finds them). The connection acts for the tenant whose API key opened
// it: it sees only that tenant's sessions and works within that tenant's limits.
#pragma once

#include "api/server/connection_stream.h"
#include "api/server/fair_call_pool.h"
#include "api/server/protocol.h"
#include "api/server/server_context.h"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/websocket/stream.hpp>
#include <boost/json/object.hpp>

#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <string>

namespace hippo::server {

class WebSocketSession : public Connection, public std::enable_shared_from_this<WebSocketSession> {
 public:
  WebSocketSession(ServerContext& ctx, ConnectionStream&& stream, Tenant tenant);
  ~WebSocketSession() override;

  // Answers the upgrade request, then reads events until the connection ends.
  void run(boost::beast::http::request<boost::beast::http::string_body> request);
  void close_for_shutdown() override;

 private:
  using Executor = boost::asio::strand<boost::asio::io_context::executor_type>;

  void on_accept(boost::beast::error_code ec);
  void do_read();
  void on_read(boost::beast::error_code ec, size_t bytes);
  void handle_text(std::string_view text);
  // Runs one valid client event on the runtime (pool thread).
  void execute(const protocol::ClientEvent& event);
  // What the session streams deliver to: posts to this connection's strand.
  SessionStreams::Deliver stream_deliver();
  template <typename Fn>
  void post_io(Fn fn);

  // Socket strand only:
  void send(boost::json::object event, const std::string& event_id, bool replay = false);
  void send_error(std::string_view code, std::string_view message, const std::string& event_id);
  void send_status_error(const Status& status, const std::string& event_id);
  void send_refusal(const Refusal& refusal, const std::string& event_id);
  void enqueue(std::string frame, bool replay, int64_t emitted_ns = 0);
  void do_write();
  void drop_outbound(bool newest);  // the oldest (written) or newest queued frame, with its bytes
  void on_write(boost::beast::error_code ec, size_t bytes);
  // drain: send what is queued first (shutdown); otherwise drop it (a slow client).
  void close(boost::beast::websocket::close_code code, std::string reason, bool drain);
  void start_close();
  void finished();  // the connection is over: leave its streams and the registry

  ServerContext& ctx_;
  const Tenant tenant_;
  boost::beast::websocket::stream<ConnectionStream, /*deflateSupported=*/false> ws_;
  SerialCalls calls_;  // runtime calls of this connection, in order
  boost::asio::steady_timer close_guard_;
  boost::beast::flat_buffer buffer_;
  uint64_t registry_id_ = 0;
  int64_t seq_ = 0;
  struct Outbound {
    std::string text;
    bool replay = false;
    int64_t emitted_ns = 0;  // a new response event: when the runtime handed it over (steady clock)
  };
  std::deque<Outbound> outbound_;
  size_t live_bytes_ = 0;  // queued bytes of new (not replayed) events
  bool writing_ = false;
  bool closing_ = false;         // no more events are queued
  bool close_started_ = false;
  bool finished_ = false;
  std::optional<boost::beast::websocket::close_reason> pending_close_;
  std::set<std::string> attached_;  // sessions whose stream this connection reads (strand only)
};

}  // namespace hippo::server
