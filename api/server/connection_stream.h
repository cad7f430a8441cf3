// The byte stream under one connection: plain TCP, or TLS over TCP when the server has a
// certificate (`hippo serve --tls-cert --tls-key`). HttpSession and WebSocketSession are written
// once against this type; Beast's HTTP and WebSocket code see an ordinary async stream whose
// lowest layer is the beast::tcp_stream (timeouts, close), and the WebSocket close handshake tears
// down TLS properly through the teardown hooks below.
#pragma once

#include <boost/asio/buffer.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <boost/beast/websocket/teardown.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
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
    if (close_code_ && boost::asio::buffer_size(buffers) >= 4) {
      // The next close frame goes out with close_code_ (replace_next_close_code).
      patched_.resize(boost::asio::buffer_size(buffers));
      boost::asio::buffer_copy(boost::asio::buffer(patched_), buffers);
      if (static_cast<unsigned char>(patched_[0]) == 0x88 && (static_cast<unsigned char>(patched_[1]) & 0x7f) >= 2) {
        patched_[2] = static_cast<char>(*close_code_ >> 8);
        patched_[3] = static_cast<char>(*close_code_ & 0xff);
        close_code_.reset();
        if (tls_) tls_->async_write_some(boost::asio::buffer(patched_), std::forward<Handler>(handler));
        else tcp_->async_write_some(boost::asio::buffer(patched_), std::forward<Handler>(handler));
        return;
      }
    }
    if (tls_) tls_->async_write_some(buffers, std::forward<Handler>(handler));
    else tcp_->async_write_some(buffers, std::forward<Handler>(handler));
  }

  // Beast answers a close frame with the peer's own code, and it takes codes of 5000 and above,
  // which RFC 6455 §7.4 leaves undefined: the WebSocket session sets the code the answer must
  // carry instead (1002), patched into the next close frame written (unmasked, short: the
  // code is bytes 2–3).
  void replace_next_close_code(uint16_t code) { close_code_ = code; }

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
  std::optional<uint16_t> close_code_;
  std::string patched_;  // the patched close frame while it is written
};

}  // namespace hippo::server
