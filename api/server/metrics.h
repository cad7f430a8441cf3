// The server's own counters, and /metrics: them plus AgentRuntime::stats() in the Prometheus text
// exposition format (version 0.0.4).
#pragma once

#include "agents/agent_types.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

namespace hippo::server {

// A Prometheus histogram of durations with fixed bucket bounds, updated without locks.
class LatencyHistogram {
 public:
  // Seconds; 75 µs so that a p99 under issue #7's 100 µs shows as such.
  static constexpr std::array<double, 13> kBounds = {10e-6, 25e-6,  50e-6, 75e-6,  100e-6, 250e-6, 500e-6,
                                                     1e-3,  2.5e-3, 5e-3,  10e-3,  25e-3,  100e-3};
  void observe(double seconds);
  // The exposition lines of the histogram `name` (HELP, TYPE, cumulative buckets, sum, count).
  void render(std::string& out, std::string_view name, std::string_view help) const;

 private:
  std::array<std::atomic<int64_t>, kBounds.size() + 1> counts_{};  // per bucket; the last is +Inf
  std::atomic<int64_t> sum_ns_{0};
};

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
  std::atomic<int64_t> client_gone_cancels_total{0};  // HTTP responses cancelled: the client hung up
  std::atomic<int64_t> tls_handshake_failures_total{0};
  std::atomic<int64_t> auth_failures_total{0};       // requests and upgrades refused with 401
  std::atomic<int64_t> rate_limited_total{0};        // responses refused: tenant over its tokens per minute
  std::atomic<int64_t> quota_exceeded_total{0};      // sessions refused: tenant at its max open sessions
  // From the runtime handing a response event to the server until the write of its WebSocket frame
  // begins (the send follows at once): the time a streamed token spends in the server, waiting
  // for an I/O thread and for the frames queued before it (replays not included).
  LatencyHistogram stream_event_delay;
};

std::string prometheus_text(const agents::RuntimeStats& stats, const ServerCounters& counters);

}  // namespace hippo::server
