#include "api/server/server.h"

#include "api/server/listener.h"
#include "base/log.h"

#include <boost/asio/post.hpp>

#include <csignal>
#include <thread>
#include <vector>

namespace hippo::server {

namespace net = boost::asio;

Server::Server(agents::AgentRuntime& runtime, Authenticator& auth, ServerOptions options)
    : ioc_(std::max(1, options.io_threads)),
      ctx_(std::make_unique<ServerContext>(runtime, auth, std::move(options), ioc_)),
      listener_(std::make_shared<Listener>(*ctx_)),
      signals_(ioc_, SIGINT, SIGTERM),
      drain_timer_(ioc_) {}

Server::~Server() {
  ctx_->runtime_calls.join();
}

Result<uint16_t> Server::listen() {
  const ServerOptions& o = ctx_->options;
  if (o.tls_cert_file.empty() != o.tls_key_file.empty())
    return make_error(ErrorCode::kInvalidArgument, "TLS needs both --tls-cert and --tls-key");
  if (!o.tls_cert_file.empty()) {
    auto tls = std::make_unique<net::ssl::context>(net::ssl::context::tls_server);
    tls->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                     net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 | net::ssl::context::no_tlsv1_1);
    boost::system::error_code ec;
    if (tls->use_certificate_chain_file(o.tls_cert_file, ec); ec)
      return make_error(ErrorCode::kInvalidArgument, "--tls-cert {}: {}", o.tls_cert_file, ec.message());
    if (tls->use_private_key_file(o.tls_key_file, net::ssl::context::pem, ec); ec)
      return make_error(ErrorCode::kInvalidArgument, "--tls-key {}: {} (it must be the PEM private key of --tls-cert {})",
                        o.tls_key_file, ec.message(), o.tls_cert_file);
    if (SSL_CTX_check_private_key(tls->native_handle()) != 1)
      return make_error(ErrorCode::kInvalidArgument, "--tls-key {} is not the private key of --tls-cert {}",
                        o.tls_key_file, o.tls_cert_file);
    ctx_->tls = std::move(tls);
  }
  return listener_->open();
}

Status Server::run() {
  std::function<void(const boost::system::error_code&, int)> on_signal = [&](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    if (!shutting_down_) {
      begin_shutdown(sig);
      signals_.async_wait(on_signal);
    } else {
      log::warn("second signal: stopping without waiting for connections", {{"signal", sig}});
      ioc_.stop();
    }
  };
  signals_.async_wait(on_signal);
  listener_->start();
  std::vector<std::thread> threads;
  for (int i = 1; i < ctx_->options.io_threads; ++i) threads.emplace_back([this] { run_io(); });
  run_io();
  for (std::thread& t : threads) t.join();
  // Calls still in flight finish (the runtime refuses new ones after shutdown) before the runtime goes.
  ctx_->runtime_calls.join();
  return shutdown_status_;
}

void Server::run_io() {
  const auto spin = ctx_->options.io_spin;
  if (spin.count() == 0) {
    ioc_.run();
    return;
  }
  using Clock = std::chrono::steady_clock;
  Clock::time_point last_work = Clock::now();
  while (!ioc_.stopped()) {
    if (ioc_.poll_one() > 0) {
      last_work = Clock::now();
    } else if (Clock::now() - last_work >= spin) {
      if (ioc_.run_one() == 0) return;  // stopped, or no work left
      last_work = Clock::now();
    }
  }
}

void Server::stop() {
  net::post(ioc_, [this] {
    if (!shutting_down_) begin_shutdown(0);
  });
}

void Server::begin_shutdown(int sig) {
  shutting_down_ = true;
  log::info("shutting down: no new connections, snapshotting sessions", {{"signal", sig}});
  ctx_->stopping.store(true);
  listener_->stop();
  ctx_->runtime_calls.post(FairCallPool::kServer, [this] {
    // Running responses end as cancelled (their last events are queued on their connections
    // before the closes below), and every resident session is snapshotted.
    Status st = ctx_->runtime.shutdown();
    if (st.ok()) log::info("runtime shut down; every session is snapshotted");
    else log::error("runtime shutdown failed", {{"error", st.to_string()}});
    net::post(ioc_, [this, st] {
      shutdown_status_ = st;
      for (const std::shared_ptr<Connection>& c : ctx_->registry.live()) c->close_for_shutdown();
      wait_for_connections(std::chrono::steady_clock::now() + std::chrono::seconds(5));
    });
  });
}

void Server::wait_for_connections(std::chrono::steady_clock::time_point deadline) {
  if (ctx_->registry.size() == 0 || std::chrono::steady_clock::now() >= deadline) {
    if (ctx_->registry.size() != 0) log::warn("connections still open at exit", {{"connections", ctx_->registry.size()}});
    signals_.cancel();
    ioc_.stop();
    return;
  }
  drain_timer_.expires_after(std::chrono::milliseconds(20));
  drain_timer_.async_wait([this, deadline](const boost::system::error_code& ec) {
    if (!ec) wait_for_connections(deadline);
  });
}

}  // namespace hippo::server
