// The server's own counters, and /metrics: them plus AgentRuntime::stats() in the Prometheus text
// exposition format (version 0.0.4).
#pragma once

#include "agents/agent_types.h"

#include <atomic>
#include <cstdint>
#include <string>

namespace hippo::server {

struct ServerCounters {
  std::atomic<int64_t> connections_total{0};        // TCP connections accepted
  std::atomic<int64_t> connections_open{0};
  std::atomic<int64_t> websocket_sessions_open{0};  // connections upgraded to /v1/agents
  std::atomic<int64_t> http_requests_total{0};
  std::atomic<int64_t> websocket_events_total{0};   // client events received
  std::atomic<int64_t> protocol_errors_total{0};    // error events sent and 4xx answers
  std::atomic<int64_t> responses_completed_total{0};
  std::atomic<int64_t> responses_failed_total{0};
  std::atomic<int64_t> output_tokens_total{0};
  std::atomic<int64_t> slow_client_closes_total{0};  // closed because the outbound queue overflowed
  std::atomic<int64_t> tls_handshake_failures_total{0};
  std::atomic<int64_t> auth_failures_total{0};       // requests and upgrades refused with 401
  std::atomic<int64_t> rate_limited_total{0};        // responses refused: tenant over its tokens per minute
  std::atomic<int64_t> quota_exceeded_total{0};      // sessions refused: tenant at its max open sessions
};

std::string prometheus_text(const agents::RuntimeStats& stats, const ServerCounters& counters);

}  // namespace hippo::server
