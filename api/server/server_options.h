// `hippo serve`'s settings as the server sees them (api/cli/serve_command.cpp fills them from flags,
// environment and config file).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace hippo::server {

struct ServerOptions {
  std::string bind = "127.0.0.1";
  uint16_t port = 8080;                      // 0: any free port (Server::listen() says which)
  std::string model_id = "hippo";            // the one model /v1/models lists
  int io_threads = 2;                        // threads running the sockets
  // How long an I/O thread keeps polling for work after its last handler before it sleeps. 0:
  // it sleeps at once. Polling holds a core per I/O thread while the server is busy and spares
  // each streamed token the wake-up of a sleeping thread (tens of µs, on a VM up to milliseconds).
  std::chrono::microseconds io_spin{0};
  int runtime_call_threads = 4;              // threads making the runtime's blocking calls
  size_t max_message_bytes = size_t{4} << 20;  // a WebSocket frame or an HTTP body
  size_t max_outbound_bytes = size_t{8} << 20;  // queued, unsent bytes per connection before it is closed
  size_t socket_send_buffer = 0;  // SO_SNDBUF of accepted sockets; 0: the kernel's autotuning
  int64_t default_max_output_tokens = 256;   // when a request gives none
  // A response whose WebSocket dropped keeps running this long for a client to reattach
  // (session.resume with after_seq); its stream's events stay replayable until the stream
  // has had no reader for this long.
  std::chrono::milliseconds stream_grace{30000};
  size_t stream_replay_bytes = size_t{1} << 20;  // kept events per session stream
  // GET /readyz answers 503 while the engine has had work and finished no step or call for longer.
  std::chrono::duration<double> engine_stall_bound{30.0};
  // TLS: both set, or neither (plain TCP). PEM files: the certificate chain and its private key.
  std::string tls_cert_file;
  std::string tls_key_file;
  // Benchmarks only (`hippo bench server`; no flag of `hippo serve` sets it): WebSocket response
  // events carry `t_emit_ns`, the server's steady clock in ns when the runtime handed the event to
  // the connection's sink, so that a client in the same process can measure the time outside the engine.
  bool emit_timestamps = false;
};

}  // namespace hippo::server
