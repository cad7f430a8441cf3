#include "api/cli/chat_connection.h"

#include "api/server/connection_stream.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <fmt/format.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <future>
#include <optional>

namespace hippo::cli::chat {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace net = boost::asio;
namespace ssl = net::ssl;
namespace json = boost::json;
using tcp = net::ip::tcp;
using Stream = server::ConnectionStream;  // plain TCP, or TLS for wss://

constexpr auto kConnectTimeout = std::chrono::seconds(10);
constexpr auto kCloseWait = std::chrono::seconds(5);
constexpr auto kHttpTimeout = std::chrono::seconds(30);

// ---- URL ----

std::string Url::host_header() const {
  const std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return h + ":" + port;
}

Result<Url> parse_ws_url(std::string_view text) {
  Url url;
  url.text = std::string(text);
  std::string_view rest = text;
  url.tls = rest.starts_with("wss://");
  if (!url.tls && !rest.starts_with("ws://"))
    return make_error(ErrorCode::kInvalidArgument,
                      "--url {}: must start with ws:// or wss://, e.g. ws://127.0.0.1:8080/v1/agents", text);
  rest.remove_prefix(url.tls ? 6 : 5);
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  url.target = slash == std::string_view::npos ? "/v1/agents" : std::string(rest.substr(slash));
  url.port = url.tls ? "443" : "80";
  if (authority.starts_with('[')) {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos)
      return make_error(ErrorCode::kInvalidArgument, "--url {}: unclosed '[' in the host", text);
    url.host = std::string(authority.substr(1, close - 1));
    authority.remove_prefix(close + 1);
    if (authority.starts_with(':')) url.port = std::string(authority.substr(1));
    else if (!authority.empty()) return make_error(ErrorCode::kInvalidArgument, "--url {}: bad host", text);
  } else {
    const size_t colon = authority.rfind(':');
    url.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) url.port = std::string(authority.substr(colon + 1));
  }
  if (url.host.empty()) return make_error(ErrorCode::kInvalidArgument, "--url {}: no host", text);
  if (url.port.empty() || url.port.find_first_not_of("0123456789") != std::string::npos || url.port.size() > 5)
    return make_error(ErrorCode::kInvalidArgument, "--url {}: the port must be a number", text);
  return url;
}

// ---- Inbox ----

Inbound Inbound::server_event(json::object e) {
  Inbound in;
  in.kind = Kind::kEvent;
  in.event = std::move(e);
  return in;
}

Inbound Inbound::line(std::string text) {
  Inbound in;
  in.kind = Kind::kLine;
  in.text = std::move(text);
  return in;
}

Inbound Inbound::signal(Kind kind) {
  Inbound in;
  in.kind = kind;
  return in;
}

Inbound Inbound::closed(std::string why) {
  Inbound in;
  in.kind = Kind::kClosed;
  in.text = std::move(why);
  return in;
}

void Inbox::push(Inbound item) {
  {
    std::lock_guard lock(mutex_);
    items_.push_back(std::move(item));
  }
  ready_.notify_one();
}

Inbound Inbox::pop() {
  std::unique_lock lock(mutex_);
  ready_.wait(lock, [this] { return !items_.empty(); });
  Inbound item = std::move(items_.front());
  items_.pop_front();
  return item;
}

// ---- Connection ----

namespace {

// Runs the io_context on this thread until its queued work is done, then makes it runnable again.
// Runs handlers until the operation that sets `result` has completed: not until the context is
// idle, since a timer the operation armed (the WebSocket handshake's 30 s) may still be pending
// after a quick answer such as a 401.
void run_until_done(net::io_context& ioc, const beast::error_code& result) {
  while (result == net::error::would_block && ioc.run_one() > 0) {
  }
  ioc.restart();
}

// TLS 1.2 or later, with the server's certificate verified against `trust`.
Result<std::unique_ptr<ssl::context>> client_tls(const TlsTrust& trust) {
  auto context = std::make_unique<ssl::context>(ssl::context::tls_client);
  context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                       ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  boost::system::error_code ec;
  if (!trust.ca_file.empty()) {
    context->load_verify_file(trust.ca_file, ec);
    if (ec) return make_error(ErrorCode::kInvalidArgument, "--ca-file {}: cannot load it: {}", trust.ca_file, ec.message());
  } else {
    context->set_default_verify_paths(ec);
    if (ec) return make_error(ErrorCode::kIoError, "cannot load the system's certificate authorities: {}", ec.message());
  }
  context->set_verify_mode(ssl::verify_peer);
  return context;
}

// Connects `stream` to the URL's host and port and, for wss://, shakes hands with TLS; the
// timeout covers both. The certificate must name the URL's host (or address).
Status connect_stream(net::io_context& ioc, const Url& url, Stream& stream, std::chrono::seconds timeout) {
  tcp::resolver resolver(ioc);
  beast::error_code ec;
  auto endpoints = resolver.resolve(url.host, url.port, ec);
  if (ec) return make_error(ErrorCode::kIoError, "cannot connect to {}: cannot resolve {}: {}", url.text, url.host, ec.message());
  beast::tcp_stream& tcp_stream = stream.next_layer();
  tcp_stream.expires_after(timeout);
  beast::error_code connect_ec = net::error::would_block;
  tcp_stream.async_connect(endpoints, [&](beast::error_code e, const tcp::endpoint&) { connect_ec = e; });
  run_until_done(ioc, connect_ec);
  if (connect_ec) {
    return make_error(ErrorCode::kIoError, "cannot connect to {}: {} (is `hippo serve` running there?)", url.text,
                      connect_ec == beast::error::timeout ? "timed out" : connect_ec.message());
  }
  if (stream.is_tls()) {
    Stream::Tls& tls = stream.tls();
    net::ip::make_address(url.host, ec);
    if (ec) {  // SNI names hosts, not addresses; SSL_set_tlsext_host_name spelled out (its macro casts C-style)
      SSL_ctrl(tls.native_handle(), SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name, const_cast<char*>(url.host.c_str()));
    }
    tls.set_verify_callback(ssl::host_name_verification(url.host));
    beast::error_code handshake_ec = net::error::would_block;
    tls.async_handshake(ssl::stream_base::client, [&](beast::error_code e) { handshake_ec = e; });
    run_until_done(ioc, handshake_ec);
    if (handshake_ec) {
      const std::string why = handshake_ec == beast::error::timeout ? "timed out" : handshake_ec.message();
      const bool untrusted = why.find("certificate verify failed") != std::string::npos;
      return make_error(ErrorCode::kIoError, "{}: the TLS handshake failed: {}{}", url.text, why,
                        untrusted ? " (the server's certificate is not trusted for this host: give its CA with --ca-file)"
                                  : "");
    }
  }
  tcp_stream.expires_never();
  return Status::ok_status();
}

std::string refused_upgrade_message(const Url& url, const websocket::response_type& res, bool has_key) {
  std::string body(res.body());
  // hippo's HTTP errors are OpenAI-shaped: {"error": {"message": ...}}; show the message.
  boost::system::error_code ec;
  json::value doc = json::parse(body, ec);
  if (!ec && doc.is_object()) {
    if (const json::value* error = doc.get_object().if_contains("error"); error && error->is_object()) {
      if (const json::value* m = error->get_object().if_contains("message"); m && m->is_string())
        body = std::string(m->get_string());
    }
  }
  while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) body.pop_back();
  std::string message = fmt::format("{}: the server refused the WebSocket upgrade: HTTP {} {}", url.text,
                                    res.result_int(), std::string(res.reason()));
  if (!body.empty()) message += ": " + body;
  if (res.result() == http::status::unauthorized || res.result() == http::status::forbidden) {
    message += has_key ? " (check the API key given by --api-key or HIPPO_API_KEY)"
                       : " (give an API key with --api-key or HIPPO_API_KEY)";
  }
  return message;
}

}  // namespace

struct Connection::Impl {
  explicit Impl(Inbox& box) : inbox(box) {}

  Inbox& inbox;
  net::io_context ioc;
  std::unique_ptr<ssl::context> tls;  // wss:// only
  std::optional<websocket::stream<Stream, /*deflateSupported=*/false>> ws;
  std::optional<net::signal_set> signals;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  beast::flat_buffer buffer;
  std::deque<std::string> outbox;  // io thread only
  bool writing = false;            // io thread only
  bool closing = false;            // io thread only
  bool ended = false;              // io thread only: the read loop has ended
  std::promise<void> close_done;
  bool close_done_set = false;     // io thread only
  std::thread thread;

  Status connect(const Url& url, const TlsTrust& trust, const std::string& api_key) {
    if (url.tls) {
      HIPPO_ASSIGN_OR_RETURN(tls, client_tls(trust));
    }
    ws.emplace(tcp::socket(ioc), tls.get());
    HIPPO_RETURN_IF_ERROR(connect_stream(ioc, url, ws->next_layer(), kConnectTimeout));
    ws->set_option(websocket::stream_base::timeout::suggested(beast::role_type::client));
    ws->set_option(websocket::stream_base::decorator([api_key](websocket::request_type& req) {
      req.set(http::field::user_agent, "hippo-chat");
      if (!api_key.empty()) req.set(http::field::authorization, "Bearer " + api_key);
    }));
    ws->read_message_max(64 << 20);
    websocket::response_type res;
    beast::error_code handshake_ec = net::error::would_block;
    ws->async_handshake(res, url.host_header(), url.target, [&](beast::error_code e) { handshake_ec = e; });
    run_until_done(ioc, handshake_ec);
    if (handshake_ec == websocket::error::upgrade_declined || (handshake_ec && res.result_int() >= 300))
      return Status(ErrorCode::kIoError, refused_upgrade_message(url, res, !api_key.empty()));
    if (handshake_ec)
      return make_error(ErrorCode::kIoError, "{}: the WebSocket handshake failed: {}", url.text, handshake_ec.message());
    ws->text(true);
    return Status::ok_status();
  }

  void start() {
    work.emplace(ioc.get_executor());
    signals.emplace(ioc, SIGINT);
    wait_signal();
    read();
    thread = std::thread([this] { ioc.run(); });
  }

  void wait_signal() {
    signals->async_wait([this](beast::error_code ec, int) {
      if (ec) return;  // cancelled at close
      inbox.push(Inbound::signal(Inbound::Kind::kInterrupt));
      wait_signal();
    });
  }

  void read() {
    ws->async_read(buffer, [this](beast::error_code ec, size_t) {
      if (ec) {
        ended = true;
        on_read_end(ec);
        return;
      }
      std::string text = beast::buffers_to_string(buffer.data());
      buffer.consume(buffer.size());
      boost::system::error_code parse_ec;
      json::value doc = json::parse(text, parse_ec);
      if (parse_ec || !doc.is_object()) {
        inbox.push(Inbound::server_event({{"type", "error"},
                                          {"code", "invalid_json"},
                                          {"message", "the server sent a frame that is not a JSON object"}}));
      } else {
        inbox.push(Inbound::server_event(std::move(doc.get_object())));
      }
      read();
    });
  }

  void on_read_end(beast::error_code ec) {
    if (closing) {
      finish_close();
      return;
    }
    std::string why;
    if (ec == websocket::error::closed) {
      const websocket::close_reason& r = ws->reason();
      why = fmt::format("the server closed the connection (code {}{}{})", static_cast<unsigned>(r.code),
                        r.reason.empty() ? "" : ": ", std::string(r.reason.data(), r.reason.size()));
    } else {
      why = fmt::format("the connection was lost: {}", ec.message());
    }
    inbox.push(Inbound::closed(std::move(why)));
  }

  void write() {
    writing = true;
    ws->async_write(net::buffer(outbox.front()), [this](beast::error_code ec, size_t) {
      writing = false;
      if (ec) {
        outbox.clear();  // the read loop reports the end of the connection
        if (closing) finish_close();
        return;
      }
      outbox.pop_front();
      if (!outbox.empty()) write();
      else if (closing) do_close();
    });
  }

  void do_close() {
    if (ended) {
      finish_close();
      return;
    }
    ws->async_close(websocket::close_code::normal, [this](beast::error_code) {
      // The read loop sees the close completing (or already has); the answer is in.
      finish_close();
    });
  }

  void finish_close() {
    if (close_done_set) return;
    close_done_set = true;
    close_done.set_value();
  }

  void shutdown() {
    if (!thread.joinable()) return;
    std::future<void> done = close_done.get_future();
    net::post(ioc, [this] {
      if (signals) signals->cancel();
      closing = true;
      if (ended) finish_close();
      else if (!writing) do_close();
    });
    done.wait_for(kCloseWait);
    work.reset();
    ioc.stop();
    thread.join();
  }
};

Connection::Connection(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Connection::~Connection() {
  if (impl_) impl_->shutdown();
}

Result<std::unique_ptr<Connection>> Connection::open(const Url& url, const TlsTrust& trust, const std::string& api_key,
                                                     Inbox& inbox) {
  auto impl = std::make_unique<Impl>(inbox);
  HIPPO_RETURN_IF_ERROR(impl->connect(url, trust, api_key));
  impl->start();
  return std::unique_ptr<Connection>(new Connection(std::move(impl)));
}

void Connection::send(const json::object& event) {
  net::post(impl_->ioc, [impl = impl_.get(), text = json::serialize(event)]() mutable {
    if (impl->ended || impl->closing) return;
    impl->outbox.push_back(std::move(text));
    if (!impl->writing) impl->write();
  });
}

void Connection::close() { impl_->shutdown(); }

// ---- stdin ----

InputReader::InputReader(Inbox& inbox) : inbox_(inbox) {
  if (::pipe(wake_) != 0) wake_[0] = wake_[1] = -1;
  thread_ = std::thread([this] { run(); });
}

InputReader::~InputReader() {
  if (wake_[1] >= 0) {
    const char byte = 0;
    [[maybe_unused]] ssize_t n = ::write(wake_[1], &byte, 1);
  }
  thread_.join();
  for (int fd : wake_)
    if (fd >= 0) ::close(fd);
}

void InputReader::run() {
  std::string pending;
  char chunk[4096];
  for (;;) {
    pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    const int n_fds = wake_[0] >= 0 ? 2 : 1;
    if (::poll(fds, n_fds, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (n_fds == 2 && fds[1].revents != 0) return;  // stopping: no more input wanted
    if (fds[0].revents == 0) continue;
    const ssize_t n = ::read(STDIN_FILENO, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    pending.append(chunk, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
      std::string line = pending.substr(start, nl - start);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      inbox_.push(Inbound::line(std::move(line)));
    }
    pending.erase(0, start);
  }
  if (!pending.empty()) inbox_.push(Inbound::line(std::move(pending)));
  inbox_.push(Inbound::signal(Inbound::Kind::kEndOfInput));
}

// ---- HTTP ----

Result<HttpReply> http_get(const Url& url, const TlsTrust& trust, std::string_view path, const std::string& api_key) {
  net::io_context ioc;
  std::unique_ptr<ssl::context> tls;
  if (url.tls) {
    HIPPO_ASSIGN_OR_RETURN(tls, client_tls(trust));
  }
  Stream stream(tcp::socket(ioc), tls.get());
  HIPPO_RETURN_IF_ERROR(connect_stream(ioc, url, stream, kConnectTimeout));
  http::request<http::empty_body> req{http::verb::get, std::string(path), 11};
  req.set(http::field::host, url.host_header());
  req.set(http::field::user_agent, "hippo-chat");
  if (!api_key.empty()) req.set(http::field::authorization, "Bearer " + api_key);
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  beast::error_code result = net::error::would_block;
  stream.next_layer().expires_after(kHttpTimeout);
  http::async_write(stream, req, [&](beast::error_code we, size_t) {
    if (we) {
      result = we;
      return;
    }
    http::async_read(stream, buffer, res, [&](beast::error_code re, size_t) { result = re; });
  });
  run_until_done(ioc, result);
  if (result) {
    return make_error(ErrorCode::kIoError, "GET {} on {}: {}", path, url.host_header(),
                      result == beast::error::timeout ? "timed out" : result.message());
  }
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  return HttpReply{static_cast<int>(res.result_int()), std::move(res.body())};
}

}  // namespace hippo::cli::chat
