// The byte stream under one connection: plain TCP, or TLS over TCP when the server has a
// certificate (`hippo serve --tls-cert --tls-key`). HttpSession and WebSocketSession are written
// once against this type; Beast's HTTP and WebSocket code see an ordinary async stream whose
// lowest layer is the beast::tcp_stream (timeouts, close), and the WebSocket close handshake tears
// down TLS properly through the teardown hooks below.
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <boost/beast/websocket/teardown.hpp>

#include <memory>
#include <optional>
#include <utility>

namespace hippo::server {

class ConnectionStream {
 public:
  using executor_type = boost::beast::tcp_stream::executor_type;
  using next_layer_type = boost::beast::tcp_stream;
  using Tls = boost::beast::ssl_stream<boost::beast::tcp_stream>;

  // tls: the server's TLS context, or null for plain TCP.
  ConnectionStream(boost::asio::ip::tcp::socket&& socket, boost::asio::ssl::context* tls) {
    if (tls != nullptr) tls_ = std::make_unique<Tls>(boost::beast::tcp_stream(std::move(socket)), *tls);
    else tcp_.emplace(std::move(socket));
  }
  ConnectionStream(ConnectionStream&&) = default;
  ConnectionStream& operator=(ConnectionStream&&) = default;

  bool is_tls() const { return tls_ != nullptr; }
  Tls& tls() { return *tls_; }
  next_layer_type& next_layer() { return tls_ ? tls_->next_layer() : *tcp_; }
  boost::asio::ip::tcp::socket& socket() { return next_layer().socket(); }
  executor_type get_executor() { return next_layer().get_executor(); }

  template <typename Buffers, typename Handler>
  void async_read_some(const Buffers& buffers, Handler&& handler) {
    if (tls_) tls_->async_read_some(buffers, std::forward<Handler>(handler));
    else tcp_->async_read_some(buffers, std::forward<Handler>(handler));
  }
  template <typename Buffers, typename Handler>
  void async_write_some(const Buffers& buffers, Handler&& handler) {
    if (tls_) tls_->async_write_some(buffers, std::forward<Handler>(handler));
    else tcp_->async_write_some(buffers, std::forward<Handler>(handler));
  }

  // The WebSocket close handshake ends with these (found by argument-dependent lookup).
  friend void teardown(boost::beast::role_type role, ConnectionStream& s, boost::system::error_code& ec) {
    using boost::beast::websocket::teardown;
    if (s.tls_) teardown(role, *s.tls_, ec);
    else teardown(role, s.tcp_->socket(), ec);
  }
  template <typename Handler>
  friend void async_teardown(boost::beast::role_type role, ConnectionStream& s, Handler&& handler) {
    using boost::beast::websocket::async_teardown;
    if (s.tls_) async_teardown(role, *s.tls_, std::forward<Handler>(handler));
    else async_teardown(role, s.tcp_->socket(), std::forward<Handler>(handler));
  }

 private:
  std::optional<boost::beast::tcp_stream> tcp_;  // plain
  std::unique_ptr<Tls> tls_;                     // TLS (its own tcp_stream inside)
};

}  // namespace hippo::server
