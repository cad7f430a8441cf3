// What every connection of the server shares: the runtime, the authenticator, the options, the
// counters, the tenants' limits and session owners, the pool that makes the runtime's blocking
// calls, and the registry of open connections (so that shutdown can close them).
#pragma once

#include "agents/runtime.h"
#include "api/server/auth.h"
#include "api/server/fair_call_pool.h"
#include "api/server/metrics.h"
#include "api/server/server_options.h"
#include "api/server/session_streams.h"
#include "api/server/session_access.h"
#include "api/server/tenant_limits.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/thread_pool.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace hippo::server {

// A connection that shutdown can close (WebSocket: close code 1001; HTTP: the socket).
class Connection {
 public:
  virtual ~Connection() = default;
  virtual void close_for_shutdown() = 0;  // thread-safe: posts to the connection's strand
};

class ConnectionRegistry {
 public:
  uint64_t add(std::weak_ptr<Connection> connection) {
    std::lock_guard lock(mutex_);
    const uint64_t id = next_id_++;
    connections_[id] = std::move(connection);
    return id;
  }
  void remove(uint64_t id) {
    std::lock_guard lock(mutex_);
    connections_.erase(id);
  }
  size_t size() {
    std::lock_guard lock(mutex_);
    return connections_.size();
  }
  std::vector<std::shared_ptr<Connection>> live() {
    std::lock_guard lock(mutex_);
    std::vector<std::shared_ptr<Connection>> out;
    for (auto& [id, weak] : connections_)
      if (auto c = weak.lock()) out.push_back(std::move(c));
    return out;
  }

 private:
  std::mutex mutex_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::weak_ptr<Connection>> connections_;
};

struct ServerContext {
  ServerContext(agents::AgentRuntime& rt, Authenticator& authenticator, ServerOptions opts, boost::asio::io_context& io)
      : runtime(rt),
        auth(authenticator),
        options(std::move(opts)),
        ioc(io),
        runtime_calls(static_cast<size_t>(options.runtime_call_threads)),
        streams(options.stream_replay_bytes) {}

  agents::AgentRuntime& runtime;
  Authenticator& auth;
  const ServerOptions options;
  boost::asio::io_context& ioc;
  std::unique_ptr<boost::asio::ssl::context> tls;  // null: plain TCP (Server::listen() loads it)
  // AgentRuntime's methods block until the engine thread has done the work: they run here, never
  // on a socket thread, shared fairly between tenants (a WebSocket session keeps its calls in order
  // with SerialCalls).
  FairCallPool runtime_calls;
  SessionStreams streams;  // each session's response events, replayable after a reconnect
  ServerCounters counters;
  TenantLimits limits{counters};
  SessionAccess access;
  ConnectionRegistry registry;
  std::atomic<bool> stopping{false};
  std::atomic<uint64_t> next_response_id{1};

  std::string new_response_id() { return "resp_" + std::to_string(next_response_id.fetch_add(1)); }
};

}  // namespace hippo::server
