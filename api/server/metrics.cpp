#include "api/server/metrics.h"

#include "engine/speculative/session_drafter.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>
#include <utility>

namespace hippo::server {

namespace {

template <typename T>
void metric(std::string& out, std::string_view name, std::string_view type, std::string_view help, T value) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, value);
}

}  // namespace

void LatencyHistogram::observe(double seconds) {
  const auto bucket = static_cast<size_t>(std::lower_bound(kBounds.begin(), kBounds.end(), seconds) - kBounds.begin());
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(static_cast<int64_t>(seconds * 1e9), std::memory_order_relaxed);
}

void LatencyHistogram::render(std::string& out, std::string_view name, std::string_view help) const {
  out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  int64_t cumulative = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    cumulative += counts_[i].load(std::memory_order_relaxed);
    const std::string le = i < kBounds.size() ? fmt::format("{}", kBounds[i]) : "+Inf";
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, le, cumulative);
  }
  out += fmt::format("{}_sum {}\n{}_count {}\n", name, static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e9,
                     name, cumulative);
}

std::string prometheus_text(const agents::RuntimeStats& s, const ServerCounters& c) {
  std::string out;
  metric(out, "hippo_sessions", "gauge", "Sessions the runtime holds (resident or swapped).", s.sessions);
  metric(out, "hippo_resident_sessions", "gauge", "Sessions whose model state is in memory.", s.resident_sessions);
  metric(out, "hippo_resident_bytes", "gauge", "Bytes of model state of resident sessions.", s.resident_bytes);
  metric(out, "hippo_peak_committed_bytes", "gauge",
         "Most bytes that resident state plus running reservations reached.", s.peak_committed_bytes);
  metric(out, "hippo_swap_outs_total", "counter", "Sessions snapshotted and freed to make room.", s.swap_outs);
  metric(out, "hippo_resumes_total", "counter", "Sessions restored from a snapshot.", s.resumes);
  metric(out, "hippo_rebuilds_total", "counter", "Sessions re-prefilled from their log.", s.rebuilds);
  metric(out, "hippo_snapshots_total", "counter", "Snapshots written.", s.snapshots);
  metric(out, "hippo_queued_responses", "gauge", "Responses waiting to be admitted.", s.queued_responses);
  metric(out, "hippo_running_responses", "gauge", "Responses prefilling or decoding.", s.running_responses);
  metric(out, "hippo_largest_batch", "gauge", "Most sessions in one forward step so far.", s.largest_batch);
  out += "# HELP hippo_sessions_by_status Sessions the runtime holds, by status.\n# TYPE hippo_sessions_by_status gauge\n";
  for (agents::SessionStatus status : {agents::SessionStatus::kReady, agents::SessionStatus::kRunning,
                                       agents::SessionStatus::kAwaitingTool, agents::SessionStatus::kSwapped}) {
    out += fmt::format("hippo_sessions_by_status{{status=\"{}\"}} {}\n", agents::status_name(status),
                       s.sessions_by_status[static_cast<size_t>(status)]);
  }
  metric(out, "hippo_input_tokens_total", "counter", "Context tokens of finished responses.", s.input_tokens);
  metric(out, "hippo_cached_tokens_total", "counter",
         "Of those, tokens already in the session's state (not prefilled again).", s.cached_tokens);
  metric(out, "hippo_generated_tokens_total", "counter", "Tokens sampled by finished responses.", s.output_tokens);
  metric(out, "hippo_prefill_seconds_total", "counter", "Prefill time of finished responses.", s.prefill_seconds);
  metric(out, "hippo_decode_seconds_total", "counter", "Decode time of finished responses.", s.decode_seconds);
  metric(out, "hippo_drafted_tokens_total", "counter",
         "Speculative draft tokens verified for finished responses.", s.drafted_tokens);
  metric(out, "hippo_accepted_draft_tokens_total", "counter", "Of those, tokens taken as output.", s.accepted_tokens);
  for (const auto& [name, help, counts] :
       {std::tuple{"hippo_drafted_tokens_by_drafter_total", "Speculative draft tokens verified, by the drafter that proposed them.",
                   &s.drafted_by},
        std::tuple{"hippo_accepted_draft_tokens_by_drafter_total", "Of those, tokens taken as output, by drafter.",
                   &s.accepted_by}}) {
    out += fmt::format("# HELP {} {}\n# TYPE {} counter\n", name, help, name);
    for (engine::Drafter d : {engine::Drafter::kContext, engine::Drafter::kDspark}) {
      out += fmt::format("{}{{drafter=\"{}\"}} {}\n", name, engine::drafter_name(d), (*counts)[static_cast<size_t>(d)]);
    }
  }
  out += "# HELP hippo_draft_accepted_tokens Verified drafts by the tokens of each that were taken.\n"
         "# TYPE hippo_draft_accepted_tokens histogram\n";
  int64_t drafts = 0, accepted = 0;
  for (size_t n = 0; n < s.drafts_by_accepted.size(); ++n) {
    drafts += s.drafts_by_accepted[n];
    accepted += static_cast<int64_t>(n) * s.drafts_by_accepted[n];
    out += fmt::format("hippo_draft_accepted_tokens_bucket{{le=\"{}\"}} {}\n", n, drafts);
  }
  out += fmt::format("hippo_draft_accepted_tokens_bucket{{le=\"+Inf\"}} {}\nhippo_draft_accepted_tokens_sum {}\n"
                     "hippo_draft_accepted_tokens_count {}\n",
                     drafts, accepted, drafts);
  out += "# HELP hippo_step_cost_seconds What automatic speculation weighs drafts by, measured per session: a decode "
         "step, each extra verify row, a DSpark pass (0: not measured yet).\n# TYPE hippo_step_cost_seconds gauge\n";
  for (const auto& [what, seconds] : {std::pair{"decode_step", s.step_costs.step}, std::pair{"verify_row", s.step_costs.row},
                                      std::pair{"dspark_pass", s.step_costs.dspark}}) {
    out += fmt::format("hippo_step_cost_seconds{{what=\"{}\"}} {}\n", what, seconds);
  }
  metric(out, "hippo_snapshot_seconds_total", "counter", "Time spent writing snapshots (until durable).",
         s.snapshot_seconds);
  metric(out, "hippo_resume_seconds_total", "counter", "Time spent restoring sessions from snapshots.",
         s.resume_seconds);
  metric(out, "hippo_snapshot_bytes_written_total", "counter", "Bytes snapshots added to the database.",
         s.snapshot_bytes_written);
  metric(out, "hippo_database_bytes", "gauge", "The SQLite database file and its WAL on disk (KV snapshots, logs).",
         s.database_bytes);
  metric(out, "hippo_connections_total", "counter", "TCP connections accepted.", c.connections_total.load());
  metric(out, "hippo_connections_open", "gauge", "TCP connections open.", c.connections_open.load());
  metric(out, "hippo_websocket_sessions_open", "gauge", "Open WebSocket connections on /v1/agents.",
         c.websocket_sessions_open.load());
  metric(out, "hippo_http_requests_total", "counter", "HTTP requests received.", c.http_requests_total.load());
  metric(out, "hippo_websocket_events_total", "counter", "WebSocket client events received.",
         c.websocket_events_total.load());
  metric(out, "hippo_protocol_errors_total", "counter", "Error events and 4xx answers sent.",
         c.protocol_errors_total.load());
  metric(out, "hippo_responses_completed_total", "counter", "Responses completed (cancelled ones included).",
         c.responses_completed_total.load());
  metric(out, "hippo_responses_failed_total", "counter", "Responses failed.", c.responses_failed_total.load());
  metric(out, "hippo_output_tokens_total", "counter", "Tokens generated for clients.", c.output_tokens_total.load());
  metric(out, "hippo_slow_client_closes_total", "counter",
         "Connections closed because the client read too slowly (outbound queue full).",
         c.slow_client_closes_total.load());
  metric(out, "hippo_client_gone_cancels_total", "counter",
         "HTTP responses cancelled because their client closed the connection.", c.client_gone_cancels_total.load());
  metric(out, "hippo_tls_handshake_failures_total", "counter", "Connections that failed the TLS handshake.",
         c.tls_handshake_failures_total.load());
  metric(out, "hippo_auth_failures_total", "counter",
         "Requests and WebSocket upgrades refused for a missing, unknown or revoked API key (401).",
         c.auth_failures_total.load());
  metric(out, "hippo_rate_limited_total", "counter",
         "Responses refused because their tenant used its tokens per minute (rate_limited).",
         c.rate_limited_total.load());
  metric(out, "hippo_quota_exceeded_total", "counter",
         "Sessions refused because their tenant had its most open sessions (quota_exceeded).",
         c.quota_exceeded_total.load());
  c.stream_event_delay.render(out, "hippo_stream_event_delay_seconds",
                              "Time from a response event leaving the runtime to the write of its WebSocket frame.");
  return out;
}

}  // namespace hippo::server
