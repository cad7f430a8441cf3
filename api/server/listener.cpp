#include "api/server/listener.h"

#include "api/server/http_session.h"
#include "base/log.h"

#include <boost/asio/ip/address.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <fmt/format.h>

namespace hippo::server {

namespace net = boost::asio;
using tcp = net::ip::tcp;

Listener::Listener(ServerContext& ctx) : ctx_(ctx), acceptor_(net::make_strand(ctx.ioc)) {}

Result<uint16_t> Listener::open() {
  boost::system::error_code ec;
  const net::ip::address address = net::ip::make_address(ctx_.options.bind, ec);
  if (ec) return make_error(ErrorCode::kInvalidArgument, "--bind {}: not an IP address ({})", ctx_.options.bind, ec.message());
  const tcp::endpoint endpoint(address, ctx_.options.port);
  auto where = [&] { return fmt::format("{}:{}", ctx_.options.bind, ctx_.options.port); };
  if (acceptor_.open(endpoint.protocol(), ec); ec) return make_error(ErrorCode::kIoError, "{}: cannot open a socket: {}", where(), ec.message());
  if (acceptor_.set_option(net::socket_base::reuse_address(true), ec); ec)
    return make_error(ErrorCode::kIoError, "{}: cannot set SO_REUSEADDR: {}", where(), ec.message());
  if (acceptor_.bind(endpoint, ec); ec) return make_error(ErrorCode::kUnavailable, "cannot listen on {}: {}", where(), ec.message());
  if (acceptor_.listen(net::socket_base::max_listen_connections, ec); ec)
    return make_error(ErrorCode::kIoError, "cannot listen on {}: {}", where(), ec.message());
  return acceptor_.local_endpoint().port();
}

void Listener::start() { net::post(acceptor_.get_executor(), [self = shared_from_this()] { self->do_accept(); }); }

void Listener::stop() {
  net::post(acceptor_.get_executor(), [self = shared_from_this()] {
    boost::system::error_code ec;
    self->acceptor_.close(ec);
  });
}

void Listener::do_accept() {
  acceptor_.async_accept(net::make_strand(ctx_.ioc), [self = shared_from_this()](boost::system::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !self->acceptor_.is_open()) return;
    if (ec) {
      log::warn("accept failed", {{"error", ec.message()}});
    } else {
      // Streamed events are small writes: without this, Nagle holds each behind the client's
      // delayed ACK of the previous one (tens of ms).
      boost::system::error_code option_ec;
      socket.set_option(tcp::no_delay(true), option_ec);
      if (self->ctx_.options.socket_send_buffer > 0) {
        socket.set_option(net::socket_base::send_buffer_size(static_cast<int>(self->ctx_.options.socket_send_buffer)),
                          option_ec);
      }
      std::make_shared<HttpSession>(self->ctx_, std::move(socket))->run();
    }
    self->do_accept();
  });
}

}  // namespace hippo::server
