// Accepts TCP connections on one address and port and gives each to an HttpSession (which hands
// WebSocket upgrades on to a WebSocketSession).
#pragma once

#include "api/server/server_context.h"
#include "base/status.h"

#include <boost/asio/ip/tcp.hpp>

#include <memory>

namespace hippo::server {

class Listener : public std::enable_shared_from_this<Listener> {
 public:
  explicit Listener(ServerContext& ctx);

  // Binds and listens; the port actually bound (options.port 0 picks a free one).
  Result<uint16_t> open();
  void start();
  void stop();  // thread-safe: stops accepting

 private:
  void do_accept();

  ServerContext& ctx_;
  boost::asio::ip::tcp::acceptor acceptor_;
};

}  // namespace hippo::server
