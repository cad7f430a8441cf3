// `hippo serve`'s server: one port for HTTP and WebSocket (Boost.Asio/Beast) in front of one
// AgentRuntime. docs/protocol.md is the wire contract.
#pragma once

#include "agents/runtime.h"
#include "api/server/server_context.h"
#include "base/status.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <memory>

namespace hippo::server {

class Listener;

class Server {
 public:
  // The authenticator decides which tenant each request acts for; both must outlive the server.
  Server(agents::AgentRuntime& runtime, Authenticator& auth, ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds; returns the port (options.port 0: a free one).
  Result<uint16_t> listen();
  // Serves until SIGINT or SIGTERM, then: stops accepting, shuts the runtime down (running
  // responses end as cancelled, every resident session is snapshotted), closes WebSockets with
  // 1001 once their queued events are sent, and returns the runtime's shutdown status.
  Status run();
  // Thread-safe: the shutdown that SIGINT starts, for a server run in-process (`hippo bench server`).
  void stop();

 private:
  void run_io();  // one I/O thread's loop, until the io_context stops
  void begin_shutdown(int signal);
  void wait_for_connections(std::chrono::steady_clock::time_point deadline);

  boost::asio::io_context ioc_;
  std::unique_ptr<ServerContext> ctx_;
  std::shared_ptr<Listener> listener_;
  boost::asio::signal_set signals_;
  boost::asio::steady_timer drain_timer_;
  Status shutdown_status_;
  bool shutting_down_ = false;
};

}  // namespace hippo::server
