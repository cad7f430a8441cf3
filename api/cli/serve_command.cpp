// `hippo serve`: the WebSocket + HTTP agent server (api/server/, docs/protocol.md) on one model and
// one SQLite database. Without --model it serves the embedded default model, the trained demo
// checkpoint (default_model.h), copied into models/default under the working directory the first
// time. Requests need an API key of the database (`hippo key`); a first start on a database without
// any makes one and shows it once.
#include "agents/runtime.h"
#include "api/cli/cli.h"
#include "api/cli/default_model.h"
#include "api/server/auth.h"
#include "api/server/server.h"
#include "base/log.h"
#include "engine/model/model.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/backend_registry.h"

#include <boost/asio/ip/address.hpp>
#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <optional>
#include <ostream>

namespace hippo::cli {
namespace {

namespace fs = std::filesystem;

struct ServeCommand {
  std::string model_dir;
  std::string tokenizer_dir = default_tokenizer_dir();
  std::string db = "hippo.db";
  std::string bind = "127.0.0.1";
  uint16_t port = 8080;
  uint64_t kv_memory = uint64_t{8} << 30;
  int threads = 0;
  std::string backend = kernels::kDefaultBackend;
  int io_threads = 2;
  int64_t io_spin_us = 0;
  int64_t max_output_tokens = 256;
  uint64_t max_outbound_bytes = uint64_t{8} << 20;
  uint64_t socket_send_buffer = 0;
  double stream_grace_seconds = 30;
  std::string tls_cert;
  std::string tls_key;
  std::string auth = "on";
  int64_t tenant_max_sessions = 0;
  int64_t tenant_tokens_per_minute = 0;
  int64_t max_prompt_tokens = 0;
  double stall_seconds = 30;
  double max_step_seconds = 0.25;
  double completion_max_age_hours = 24;
  std::string speculative = "auto";
  uint64_t completion_max_bytes = uint64_t{1} << 30;
  int64_t max_prefix_sessions = agents::RuntimeOptions{}.max_prefix_sessions;
};

// Without keys, anyone who reaches the port acts as tenant default: only this machine may.
Status check_auth_setting(const ServeCommand& cmd) {
  if (cmd.auth == "on") return Status::ok_status();
  boost::system::error_code ec;
  const auto address = boost::asio::ip::make_address(cmd.bind, ec);
  if (ec || !address.is_loopback()) {
    return make_error(ErrorCode::kInvalidArgument,
                      "--auth off serves every request without an API key, so it needs a loopback --bind (127.0.0.1 "
                      "or ::1), not {}; create keys with `hippo key create` instead",
                      cmd.bind);
  }
  return Status::ok_status();
}

// A key made by the first start is shown here, once: the database keeps only its hash.
void show_first_key(const std::string& key, const std::string& db) {
  std::cerr << fmt::format(
                   "\nhippo: {} had no API key, so one was made for tenant \"{}\":\n\n    {}\n\n"
                   "It will not be shown again: keep it now. Clients send it as `Authorization: Bearer <key>`;\n"
                   "`hippo key create|list|revoke --db {}` manages keys.\n\n",
                   db, server::kDefaultTenant, key, db)
            << std::flush;
}

// The id /v1/models lists: the checkpoint folder's name.
std::string model_id_for(const std::string& dir) {
  fs::path p = fs::path(dir).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();
  std::string name = p.filename().string();
  return name.empty() || name == "." ? "hippo" : name;
}

Status run_server(const ServeCommand& cmd, std::ostream& out) {
  HIPPO_RETURN_IF_ERROR(check_auth_setting(cmd));
  server::AuthOptions auth_options;
  auth_options.enabled = cmd.auth == "on";
  auth_options.default_max_sessions = cmd.tenant_max_sessions;
  auth_options.default_tokens_per_minute = cmd.tenant_tokens_per_minute;
  auth_options.default_max_prompt_tokens = cmd.max_prompt_tokens;
  HIPPO_ASSIGN_OR_RETURN(std::unique_ptr<server::Authenticator> auth, server::Authenticator::open(cmd.db, auth_options));
  if (!auth_options.enabled) log::warn("authentication is off: every request acts for tenant default", {{"bind", cmd.bind}});

  std::string model_dir = cmd.model_dir;
  if (model_dir.empty()) {
    HIPPO_ASSIGN_OR_RETURN(model_dir, ensure_default_model(cmd.tokenizer_dir));
  }
  const auto start = std::chrono::steady_clock::now();
  engine::ModelOptions model_options;
  model_options.n_threads = cmd.threads;
  model_options.backend = cmd.backend;
  HIPPO_ASSIGN_OR_RETURN(std::unique_ptr<engine::Model> model, engine::Model::load(model_dir, model_options));
  HIPPO_ASSIGN_OR_RETURN(tokenizer::Tokenizer tokenizer,
                         tokenizer::Tokenizer::load(fs::path(model_dir) / "tokenizer.json"));
  agents::RuntimeOptions runtime_options;
  runtime_options.db_path = cmd.db;
  runtime_options.kv_memory_bytes = cmd.kv_memory;
  runtime_options.max_output_tokens = std::max<int64_t>(runtime_options.max_output_tokens, cmd.max_output_tokens);
  runtime_options.max_step_seconds = std::chrono::duration<double>(cmd.max_step_seconds);
  runtime_options.completion_max_age = std::chrono::seconds(static_cast<int64_t>(cmd.completion_max_age_hours * 3600));
  runtime_options.completion_max_bytes = cmd.completion_max_bytes;
  runtime_options.max_prefix_sessions = cmd.max_prefix_sessions;
  HIPPO_ASSIGN_OR_RETURN(const std::optional<engine::DraftMode> drafts, draft_mode(cmd.speculative, *model));
  runtime_options.speculation = drafts;
  HIPPO_ASSIGN_OR_RETURN(std::unique_ptr<agents::AgentRuntime> runtime,
                         agents::AgentRuntime::open(*model, tokenizer, runtime_options));
  log::info("model loaded", {{"dir", model_dir},
                             {"seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()},
                             {"backend", model->backend_name()},
                             {"threads", model->n_threads()},
                             {"db", cmd.db},
                             {"kv_memory_bytes", cmd.kv_memory}});

  server::ServerOptions options;
  options.bind = cmd.bind;
  options.port = cmd.port;
  options.model_id = model_id_for(model_dir);
  options.io_threads = cmd.io_threads;
  options.io_spin = std::chrono::microseconds(cmd.io_spin_us);
  options.default_max_output_tokens = cmd.max_output_tokens;
  options.max_outbound_bytes = cmd.max_outbound_bytes;
  options.socket_send_buffer = cmd.socket_send_buffer;
  options.tls_cert_file = cmd.tls_cert;
  options.tls_key_file = cmd.tls_key;
  options.stream_grace = std::chrono::milliseconds(static_cast<int64_t>(cmd.stream_grace_seconds * 1000));
  options.engine_stall_bound = std::chrono::duration<double>(cmd.stall_seconds);
  Status result;
  {
    server::Server srv(*runtime, *auth, options);
    HIPPO_ASSIGN_OR_RETURN(uint16_t port, srv.listen());
    HIPPO_ASSIGN_OR_RETURN(std::optional<std::string> first_key, auth->make_first_key());
    if (first_key) show_first_key(*first_key, cmd.db);
    const std::string host = cmd.bind.find(':') != std::string::npos ? "[" + cmd.bind + "]" : cmd.bind;
    const std::string url = fmt::format("{}://{}:{}", cmd.tls_cert.empty() ? "http" : "https", host, port);
    log::info("listening", {{"url", url}, {"model", options.model_id}});
    out << "listening on " << url << std::endl;
    result = srv.run();
    // The runtime goes first: after its shutdown nothing calls into the server's connections.
    runtime.reset();
  }
  if (result.ok()) log::info("stopped");
  return result;
}

}  // namespace

void add_serve_command(CLI::App& app, Invocation& inv) {
  auto cmd = std::make_shared<ServeCommand>();
  CLI::App* serve = app.add_subcommand("serve", "Run the WebSocket + HTTP agent server");
  serve->add_option("--model", cmd->model_dir,
                    "Checkpoint directory; default: the embedded default model (the trained demo model) in models/default");
  serve->add_option("--tokenizer", cmd->tokenizer_dir, "Directory holding tokenizer.json, for the embedded default model")
      ->capture_default_str();
  serve->add_option("--db", cmd->db, "SQLite database of the sessions")->capture_default_str();
  serve->add_option("--bind", cmd->bind, "Address to listen on")->capture_default_str();
  serve->add_option("--port", cmd->port, "Port (0: any free one; the `listening on` line says which)")->capture_default_str();
  serve->add_option("--kv-memory", cmd->kv_memory, "Memory for resident sessions' model state (e.g. 8GiB)")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  add_engine_threads_option(*serve, cmd->threads);
  add_backend_option(*serve, cmd->backend);
  add_speculative_option(*serve, cmd->speculative);
  serve->add_option("--io-threads", cmd->io_threads, "Threads serving the sockets")->check(CLI::PositiveNumber)->capture_default_str();
  serve->add_option("--io-spin-us", cmd->io_spin_us,
                    "Microseconds an I/O thread keeps polling for work before it sleeps (0: at once). Lower "
                    "latency per streamed token for a core per I/O thread while the server is busy")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  serve->add_option("--max-output-tokens", cmd->max_output_tokens, "Output tokens of a response that asks for no limit")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  serve->add_option("--max-outbound-bytes", cmd->max_outbound_bytes,
                    "Unsent bytes a connection may queue before it is closed as too slow (e.g. 8MiB)")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  serve->add_option("--socket-send-buffer", cmd->socket_send_buffer,
                    "Kernel send buffer of each connection (SO_SNDBUF, e.g. 64KiB); 0: the kernel's autotuning")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 30))
      ->capture_default_str();
  serve->add_option("--stream-grace", cmd->stream_grace_seconds,
                    "Seconds a response keeps running after its WebSocket drops, for the client to reconnect "
                    "(session.resume with after_seq); also how long finished responses stay replayable once no "
                    "client reads them")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  serve->add_option("--tls-cert", cmd->tls_cert, "PEM certificate chain: serve HTTPS and wss:// (with --tls-key)");
  serve->add_option("--tls-key", cmd->tls_key, "PEM private key of --tls-cert");
  serve->add_option("--auth", cmd->auth,
                    "on: every request but GET /healthz needs `Authorization: Bearer <key>` (hippo key); off: all "
                    "act as tenant default (loopback --bind only)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  serve->add_option("--tenant-max-sessions", cmd->tenant_max_sessions,
                    "Open sessions a tenant may have, unless its own limit says otherwise (0 = no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  serve->add_option("--tenant-tokens-per-minute", cmd->tenant_tokens_per_minute,
                    "Input + output tokens a tenant's responses may use per minute, unless its own limit says "
                    "otherwise (0 = no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  serve->add_option("--max-prompt-tokens", cmd->max_prompt_tokens,
                    "Prompt tokens one request may render to (a chat completion's whole conversation, a WebSocket "
                    "response's new input), unless the tenant's own limit says otherwise (0 = the context limit); "
                    "above it the request is refused with 400")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  serve->add_option("--max-step-seconds", cmd->max_step_seconds,
                    "About how long one engine step that only prefills may take: a long prompt is prefilled in "
                    "chunks this size, so that new requests and other calls wait at most about this long")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  serve->add_option("--max-prefix-sessions", cmd->max_prefix_sessions,
                    "Idle chat-completion sessions kept per tenant for the next turn of their conversation (prefix "
                    "reuse; the least recently used are closed first; 0: none, every conversation is prefilled anew)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  serve->add_option("--completion-max-age-hours", cmd->completion_max_age_hours,
                    "Chat completions' sessions are closed once unused this long, and closed ones (kept for "
                    "inspection) removed once older than this (0: no bound); also `hippo session gc`")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  serve->add_option("--completion-max-bytes", cmd->completion_max_bytes,
                    "Only the newest closed chat-completion sessions that hold this much are kept (e.g. 1GiB; 0: no bound)")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  serve->add_option("--stall-seconds", cmd->stall_seconds,
                    "GET /readyz answers 503 while the engine has had work and finished nothing for longer than this")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  serve->parse_complete_callback([&inv, cmd] {
    inv.action = [&inv, cmd] { return run_server(*cmd, *inv.out); };
  });
}

}  // namespace hippo::cli
