#include "api/server/http_session.h"

#include "api/server/event_gate.h"
#include "api/server/http_routes.h"
#include "api/server/metrics.h"
#include "api/server/openai_responses.h"
#include "api/server/session_admin.h"
#include "api/server/websocket_session.h"
#include "base/log.h"

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>

#include <chrono>
#include <random>

namespace hippo::server {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;

namespace {

constexpr auto kIoTimeout = std::chrono::seconds(60);

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string chunk_frame(std::string_view data) { return fmt::format("{:x}\r\n{}\r\n", data.size(), data); }

// A stored object's id: unique across restarts (a counter is not).
std::string new_stored_id(std::string_view prefix) {
  static thread_local std::mt19937_64 random(std::random_device{}());
  return fmt::format("{}{:016x}{:08x}", prefix, random(), static_cast<uint32_t>(random()));
}

}  // namespace

HttpSession::HttpSession(ServerContext& ctx, net::ip::tcp::socket&& socket)
    : ctx_(ctx), stream_(std::move(socket), ctx.tls.get()) {
  ctx_.counters.connections_total.fetch_add(1);
  ctx_.counters.connections_open.fetch_add(1);
}

HttpSession::~HttpSession() {
  ctx_.registry.remove(registry_id_);
  ctx_.counters.connections_open.fetch_sub(1);
}

template <typename Fn>
void HttpSession::post_io(Fn fn) {
  net::post(stream_.get_executor(), std::move(fn));
}

void HttpSession::run() {
  registry_id_ = ctx_.registry.add(weak_from_this());
  post_io([self = shared_from_this()] {
    if (self->stream_.is_tls()) self->handshake();
    else self->do_read();
  });
}

void HttpSession::handshake() {
  stream_.next_layer().expires_after(kIoTimeout);
  stream_.tls().async_handshake(net::ssl::stream_base::server, [self = shared_from_this()](beast::error_code ec) {
    if (ec) {
      self->ctx_.counters.tls_handshake_failures_total.fetch_add(1);
      log::debug("tls handshake failed", {{"connection", self->registry_id_}, {"error", ec.message()}});
      return self->close_socket();
    }
    self->do_read();
  });
}

void HttpSession::close_for_shutdown() {
  post_io([self = shared_from_this()] {
    self->shutting_down_ = true;
    self->keep_alive_ = false;
    if (!self->busy_) self->close_socket();
  });
}

void HttpSession::close_socket() {
  if (closed_) return;
  closed_ = true;
  beast::error_code ec;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_both, ec);
  stream_.socket().close(ec);
  ctx_.registry.remove(registry_id_);
}

void HttpSession::do_read() {
  if (closed_) return;
  if (shutting_down_) return close_socket();
  if (watching_) {  // one read at a time: end the watch first (nothing else is pending now)
    read_after_watch_ = true;
    beast::error_code ec;
    stream_.socket().cancel(ec);
    return;
  }
  busy_ = false;
  parser_.emplace();
  parser_->body_limit(ctx_.options.max_message_bytes);
  stream_.next_layer().expires_after(kIoTimeout);
  http::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&HttpSession::on_read, shared_from_this()));
}

void HttpSession::on_read(beast::error_code ec, size_t) {
  if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == net::error::operation_aborted) {
    return close_socket();
  }
  if (ec) {
    log::debug("http read failed", {{"connection", registry_id_}, {"error", ec.message()}});
    std::optional<HttpError> answer = read_error_answer(ec, ctx_.options.max_message_bytes);
    if (!answer) return close_socket();
    busy_ = true;
    keep_alive_ = false;
    return respond_error(answer->status, answer->message, answer->code);
  }
  busy_ = true;
  ctx_.counters.http_requests_total.fetch_add(1);
  Request request = parser_->release();
  version_ = request.version();
  keep_alive_ = request.keep_alive() && !shutting_down_;
  route(request);
}

void HttpSession::watch_client() {
  if (closed_ || watching_) return;
  constexpr size_t kWatchBytes = 4096;
  if (buffer_.size() >= ctx_.options.max_message_bytes) return;  // a client pipelining that much waits
  watching_ = true;
  stream_.next_layer().expires_never();  // a response may run for long; the client's silence is fine
  stream_.async_read_some(buffer_.prepare(kWatchBytes), beast::bind_front_handler(&HttpSession::on_watch, shared_from_this()));
}

void HttpSession::on_watch(beast::error_code ec, size_t bytes) {
  watching_ = false;
  if (read_after_watch_) {
    read_after_watch_ = false;
    if (!ec) buffer_.commit(bytes);
    return do_read();
  }
  if (ec == net::error::operation_aborted || closed_) return;
  if (ec) {
    log::debug("http client gone during a response; cancelling it", {{"connection", registry_id_}, {"error", ec.message()}});
    ctx_.counters.client_gone_cancels_total.fetch_add(1);
    cancel_chat();
    chat_.reset();
    out_.clear();
    out_bytes_ = 0;
    return close_socket();
  }
  buffer_.commit(bytes);
  if (chat_) watch_client();
}

void HttpSession::route(const Request& request) {
  const Route dest = route_request(request);
  log::debug("http request", {{"connection", registry_id_}, {"method", std::string(request.method_string())},
                              {"target", std::string(dest.path)}});
  if (dest.needs_key && !authenticate(request)) return;
  switch (dest.endpoint) {
    case Route::Endpoint::kHealthz:
      return readiness(false);
    case Route::Endpoint::kReadyz:
      return readiness(true);
    case Route::Endpoint::kAgentsUpgrade: {
      if (ctx_.stopping.load()) return respond_error(503, "the server is shutting down", "shutting_down");
      closed_ = true;  // the stream belongs to the WebSocket session from here on
      ctx_.registry.remove(registry_id_);
      auto ws = std::make_shared<WebSocketSession>(ctx_, std::move(stream_), tenant_);
      ws->run(request);
      return;
    }
    case Route::Endpoint::kMetrics:
      return metrics();
    case Route::Endpoint::kModels:
      return respond(200, "application/json", openai::models_body(ctx_.options.model_id, unix_seconds()));
    case Route::Endpoint::kModel:
      if (dest.path.substr(kModelsPathPrefix.size()) != ctx_.options.model_id) {
        return respond_error(404, fmt::format("model '{}' is not served here; this server serves '{}'",
                                              dest.path.substr(kModelsPathPrefix.size()), ctx_.options.model_id),
                             "model_not_found");
      }
      return respond(200, "application/json", openai::model_body(ctx_.options.model_id, unix_seconds()));
    case Route::Endpoint::kChatCompletions:
      return chat_completions(request);
    case Route::Endpoint::kResponses:
      return responses(request);
    case Route::Endpoint::kStoredResponse:
      return stored_response(request, dest.path);
    case Route::Endpoint::kSessionAdmin:
      return session_admin(request, dest.path);
    case Route::Endpoint::kNotFound:
    case Route::Endpoint::kWrongMethod:
    case Route::Endpoint::kNoSuchUpgrade:
      return respond_error(dest.error.status, dest.error.message, dest.error.code);
  }
}

bool HttpSession::authenticate(const Request& request) {
  auto header = request.find(http::field::authorization);
  const std::string_view value = header == request.end() ? std::string_view() : std::string_view(header->value().data(), header->value().size());
  Result<Tenant> tenant = ctx_.auth.authenticate(value);
  if (tenant.ok()) {
    tenant_ = std::move(tenant).value();
    return true;
  }
  const Status& st = tenant.status();
  if (st.code() == ErrorCode::kInvalidArgument || st.code() == ErrorCode::kNotFound) {
    ctx_.counters.auth_failures_total.fetch_add(1);
    log::debug("request refused: API key", {{"connection", registry_id_}, {"reason", st.message()}});
    respond_error(401, st.message(), "unauthorized", {{http::field::www_authenticate, "Bearer"}});
  } else {
    log::error("API key lookup failed", {{"connection", registry_id_}, {"error", st.to_string()}});
    respond_error(500, st.message(), error_code_name(st.code()));
  }
  return false;
}

void HttpSession::session_admin(const Request& request, std::string_view target) {
  if (ctx_.stopping.load()) return respond_error(503, "the server is shutting down", "shutting_down");
  const std::string_view full(request.target().data(), request.target().size());
  const size_t q = full.find('?');
  std::string query(q == std::string_view::npos ? std::string_view() : full.substr(q + 1));
  ctx_.runtime_calls.post(tenant_.id, [self = shared_from_this(), tenant = tenant_, method = request.method(),
                                 target = std::string(target), query = std::move(query)] {
    admin::Answer answer = admin::handle(self->ctx_, tenant, method, target, query);
    self->post_io([self, answer = std::move(answer)]() mutable {
      Headers headers;
      if (answer.retry_after_seconds > 0) headers.emplace_back(http::field::retry_after, std::to_string(answer.retry_after_seconds));
      self->respond(answer.status, "application/json", std::move(answer.body), headers);
    });
  });
}

void HttpSession::respond(unsigned status, std::string_view content_type, std::string body, const Headers& headers) {
  if (closed_) return;
  if (status >= 400 && status < 500) ctx_.counters.protocol_errors_total.fetch_add(1);
  auto res = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(status), version_);
  res->set(http::field::server, "hippo");
  res->set(http::field::content_type, content_type);
  for (const auto& [field, value] : headers) res->set(field, value);
  res->keep_alive(keep_alive_);
  res->body() = std::move(body);
  res->prepare_payload();
  stream_.next_layer().expires_after(kIoTimeout);
  http::async_write(stream_, *res,
                    [self = shared_from_this(), res](beast::error_code ec, size_t n) {
                      self->on_responded(res->need_eof(), ec, n);
                    });
}

void HttpSession::respond_error(unsigned status, std::string_view message, std::string_view code, const Headers& headers) {
  const std::string_view type = status >= 500 ? "server_error" : "invalid_request_error";
  respond(status, "application/json", openai::error_body(message, type, code), headers);
}

void HttpSession::respond_refusal(const Refusal& refusal) {
  Headers headers;
  if (refusal.retry_after_seconds > 0) headers.emplace_back(http::field::retry_after, std::to_string(refusal.retry_after_seconds));
  respond_error(refusal.http_status, refusal.message, refusal.code, headers);
}

void HttpSession::on_responded(bool close, beast::error_code ec, size_t) {
  if (ec) {
    log::debug("http write failed", {{"connection", registry_id_}, {"error", ec.message()}});
    return close_socket();
  }
  if (close) return close_socket();
  do_read();
}

// /healthz: the process answers (503 only while stopping), with the engine's state for humans.
// /readyz (strict): also 503 while the engine has had work and finished no step or call for longer
// than --stall-seconds. Neither waits for the engine thread.
void HttpSession::readiness(bool strict) {
  const agents::EngineLiveness engine = ctx_.runtime.liveness();
  const bool stalled = engine.working && engine.seconds_since_progress > ctx_.options.engine_stall_bound.count();
  const char* status = ctx_.stopping.load() ? "stopping" : stalled ? "stalled" : strict ? "ready" : "ok";
  const bool ok = !ctx_.stopping.load() && (!strict || !stalled);
  std::string body = fmt::format(
      R"({{"status":"{}","engine":{{"working":{},"seconds_since_progress":{:.3f},"stall_bound_seconds":{:.3f}}}}})", status,
      engine.working, engine.seconds_since_progress, ctx_.options.engine_stall_bound.count());
  respond(ok ? 200 : 503, "application/json", std::move(body));
}

void HttpSession::metrics() {
  ctx_.runtime_calls.post(FairCallPool::kServer, [self = shared_from_this()] {
    const agents::RuntimeStats stats = self->ctx_.runtime.stats();
    std::string body = prometheus_text(stats, self->ctx_.counters);
    self->post_io([self, body = std::move(body)]() mutable {
      self->respond(200, "text/plain; version=0.0.4; charset=utf-8", std::move(body));
    });
  });
}

void HttpSession::chat_completions(const Request& request) {
  if (ctx_.stopping.load()) return respond_error(503, "the server is shutting down", "shutting_down");
  Result<openai::ChatRequest> parsed =
      openai::parse_chat_request(request.body(), ctx_.options.model_id, ctx_.options.default_max_output_tokens);
  if (!parsed.ok()) {
    const Status& st = parsed.status();
    return respond_error(static_cast<unsigned>(openai::request_error_status(st)), st.message(), openai::request_error_code(st));
  }
  parsed->options.max_prompt_tokens = tenant_.max_prompt_tokens;
  chat_ = std::make_unique<Chat>();
  chat_->writer = std::make_unique<openai::ChatCompletion>("chatcmpl-" + ctx_.new_response_id(), ctx_.options.model_id,
                                                           unix_seconds(), parsed->include_usage,
                                                           parsed->options.top_logprobs >= 0);
  chat_->stream = parsed->stream;
  watch_client();
  ctx_.runtime_calls.post(tenant_.id, [self = shared_from_this(), tenant = tenant_, r = std::move(parsed).value()]() mutable {
    self->run_conversation(tenant, std::move(r.settings), std::move(r.inputs), std::move(r.options));
  });
}

void HttpSession::responses(const Request& request) {
  if (ctx_.stopping.load()) return respond_error(503, "the server is shutting down", "shutting_down");
  Result<openai::ResponsesRequest> parsed =
      openai::parse_responses_request(request.body(), ctx_.options.model_id, ctx_.options.default_max_output_tokens);
  if (!parsed.ok()) {
    const Status& st = parsed.status();
    return respond_error(static_cast<unsigned>(openai::request_error_status(st)), st.message(), openai::request_error_code(st));
  }
  parsed->options.max_prompt_tokens = tenant_.max_prompt_tokens;
  auto object = std::make_unique<openai::ResponseObject>(new_stored_id("resp_"), ctx_.options.model_id, unix_seconds(),
                                                         parsed->echo);
  chat_ = std::make_unique<Chat>();
  chat_->responses = object.get();
  chat_->writer = std::move(object);
  chat_->stream = parsed->stream;
  chat_->store = parsed->store;
  watch_client();
  ctx_.runtime_calls.post(tenant_.id, [self = shared_from_this(), tenant = tenant_, r = std::move(parsed).value()]() mutable {
    auto fail = [&](const Status& st, unsigned status) {
      self->post_io([self, st, status] {
        self->chat_.reset();
        self->respond_error(status, st.message(), error_code_name(st.code()));
      });
    };
    std::vector<agents::InputItem> previous;
    if (!r.previous_response_id.empty()) {
      Result<std::optional<storage::StoredResponse>> stored = self->ctx_.runtime.get_response(r.previous_response_id, tenant.id);
      if (!stored.ok()) return fail(stored.status(), 500);
      if (!*stored) {
        return fail(Status(ErrorCode::kNotFound,
                           fmt::format("previous_response_id '{}': no stored response of this tenant has that id",
                                       r.previous_response_id)),
                    404);
      }
      Result<std::vector<agents::InputItem>> conversation = openai::conversation_from_json((*stored)->conversation);
      if (!conversation.ok()) return fail(conversation.status(), 500);
      previous = std::move(*conversation);
    }
    std::vector<agents::InputItem> items;
    Status built = openai::build_conversation(r, previous, r.settings, items);
    if (!built.ok()) return fail(built, static_cast<unsigned>(openai::request_error_status(built)));
    self->post_io([self, items] {
      if (self->chat_) self->chat_->conversation = items;
    });
    self->run_conversation(tenant, std::move(r.settings), std::move(items), std::move(r.options));
  });
}

// GET /v1/responses/{id}: the stored response; DELETE: removes it. Another tenant's reads as none.
void HttpSession::stored_response(const Request& request, std::string_view path) {
  const std::string id(path.substr(kResponsesPath.size() + 1));
  const bool remove = request.method() == http::verb::delete_;
  ctx_.runtime_calls.post(tenant_.id, [self = shared_from_this(), tenant = tenant_, id, remove] {
    unsigned status = 200;
    std::string body;
    auto not_found = [&] {
      status = 404;
      body = openai::error_body(fmt::format("no stored response '{}'", id), "invalid_request_error", "not_found");
    };
    if (remove) {
      Result<bool> deleted = self->ctx_.runtime.delete_response(id, tenant.id);
      if (!deleted.ok()) status = 500, body = openai::error_body(deleted.status().message(), "server_error", "internal");
      else if (!*deleted) not_found();
      else body = openai::deleted_body(id);
    } else {
      Result<std::optional<storage::StoredResponse>> stored = self->ctx_.runtime.get_response(id, tenant.id);
      if (!stored.ok()) status = 500, body = openai::error_body(stored.status().message(), "server_error", "internal");
      else if (!*stored) not_found();
      else body = std::move((*stored)->body);
    }
    self->post_io([self, status, body = std::move(body)]() mutable {
      if (status >= 400 && status < 500) self->ctx_.counters.protocol_errors_total.fetch_add(1);
      self->respond(status, "application/json", std::move(body));
    });
  });
}

void HttpSession::run_conversation(const Tenant& tenant, agents::SessionSettings settings,
                                   std::vector<agents::InputItem> items, agents::ResponseOptions options) {
  agents::AgentRuntime& rt = ctx_.runtime;
  auto self = shared_from_this();
  auto refuse = [&](Refusal refusal) {
    post_io([self, refusal = std::move(refusal)] {
      self->chat_.reset();
      self->respond_refusal(refusal);
    });
  };
  auto fail = [&](const Status& st) {
    post_io([self, st] {
      self->chat_.reset();
      self->respond_error(static_cast<unsigned>(openai::http_status_for(st)), st.message(), error_code_name(st.code()));
    });
  };
  if (auto refused = ctx_.limits.admit_response(tenant)) return refuse(std::move(*refused));
  // The runtime drops the sink when the response ends.
  auto exec = stream_.get_executor();
  auto gate = std::make_shared<EventGate>([self, exec, tenant](const agents::ResponseEvent& event) {
    if (event.kind == agents::ResponseEvent::Kind::kCompleted || event.kind == agents::ResponseEvent::Kind::kFailed)
      self->ctx_.limits.charge(tenant, charged_tokens(event.usage));
    net::post(exec, [self, event] { self->on_chat_event(event); });
  });
  // The request's session counts against the tenant's open sessions while the request runs.
  Result<agents::AgentRuntime::ConversationResponse> started = Status(ErrorCode::kInternal, "no session was created");
  if (auto refused = ctx_.limits.open_session(rt, tenant, [&] {
        started = rt.respond_to_conversation(settings, tenant.id, std::move(items), std::move(options), EventGate::sink(gate));
      }))
    return refuse(std::move(*refused));
  if (!started.ok()) return fail(started.status());
  gate->open([&] {
    post_io([self, id = started->session_id] {
      if (!self->chat_) return;
      self->chat_->session_id = id;
      self->chat_->answered_by = id;
      if (!self->chat_->stream) return;
      std::string head = fmt::format(
          "HTTP/1.1 200 OK\r\nServer: hippo\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
          "Transfer-Encoding: chunked\r\nConnection: {}\r\n\r\n",
          self->keep_alive_ ? "keep-alive" : "close");
      self->stream_write(head + chunk_frame(self->chat_->writer->stream_start()));
    });
  });
}

void HttpSession::on_chat_event(const agents::ResponseEvent& event) {
  if (!chat_ || chat_->done) return;
  const bool last = event.kind == agents::ResponseEvent::Kind::kCompleted || event.kind == agents::ResponseEvent::Kind::kFailed;
  if (event.kind == agents::ResponseEvent::Kind::kCompleted) {
    ctx_.counters.responses_completed_total.fetch_add(1);
    ctx_.counters.output_tokens_total.fetch_add(event.usage.output_tokens);
  } else if (event.kind == agents::ResponseEvent::Kind::kFailed) {
    ctx_.counters.responses_failed_total.fetch_add(1);
  }
  std::string data;
  if (chat_->stream) data = chat_->writer->stream_event(event);
  else chat_->writer->add(event);
  if (!last) {
    if (!data.empty()) stream_write(chunk_frame(data));
    return;
  }
  chat_->done = true;
  chat_->session_id.clear();  // the runtime keeps it for the next turn, or closes it
  if (chat_->responses != nullptr && chat_->store && event.kind == agents::ResponseEvent::Kind::kCompleted) {
    // Stored before the client sees the end: a retrieve or a previous_response_id right after finds it.
    std::vector<agents::InputItem> conversation = std::move(chat_->conversation);
    conversation.push_back(chat_->responses->answer_item());
    storage::StoredResponse stored;
    stored.id = chat_->responses->id();
    stored.tenant_id = tenant_.id;
    stored.session_id = chat_->answered_by;
    stored.conversation = openai::conversation_to_json(conversation);
    stored.body = chat_->writer->body();
    ctx_.runtime_calls.post(tenant_.id, [self = shared_from_this(), stored = std::move(stored), data = std::move(data)]() mutable {
      Status st = self->ctx_.runtime.put_response(stored);
      if (!st.ok()) log::error("response not stored", {{"response", stored.id}, {"error", st.to_string()}});
      self->post_io([self, data = std::move(data)]() mutable { self->end_response(std::move(data)); });
    });
    return;
  }
  end_response(std::move(data));
}

// The end of a response: the last SSE events, or the whole body.
void HttpSession::end_response(std::string last_data) {
  if (!chat_) return;
  if (chat_->stream) {
    if (!last_data.empty()) stream_write(chunk_frame(last_data));
    stream_write("0\r\n\r\n");
    stream_ended_ = true;
    return;
  }
  const ResponseWriter& w = *chat_->writer;
  std::string body = w.failed() ? openai::error_body(w.error().message(), "server_error", error_code_name(w.error().code()))
                                : w.body();
  const unsigned status = w.failed() ? static_cast<unsigned>(openai::http_status_for(w.error())) : 200;
  chat_.reset();
  respond(status, "application/json", std::move(body));
}

void HttpSession::cancel_chat() {
  if (!chat_ || chat_->session_id.empty()) return;
  ctx_.runtime_calls.post(tenant_.id, [&rt = ctx_.runtime, sid = chat_->session_id] {
    Status st = rt.cancel(sid);  // the runtime then closes the request's session
    if (!st.ok()) log::debug("response of a client gone not cancelled", {{"session", sid}, {"error", st.to_string()}});
  });
  chat_->session_id.clear();
}

void HttpSession::stream_write(std::string piece) {
  if (closed_) return;
  if (out_bytes_ + piece.size() > ctx_.options.max_outbound_bytes) {
    ctx_.counters.slow_client_closes_total.fetch_add(1);
    log::warn("http client reads too slowly; closing the stream",
              {{"connection", registry_id_}, {"queued_bytes", out_bytes_}, {"limit_bytes", ctx_.options.max_outbound_bytes}});
    cancel_chat();
    return close_socket();
  }
  out_bytes_ += piece.size();
  out_.push_back(std::move(piece));
  if (!writing_) do_stream_write();
}

void HttpSession::do_stream_write() {
  writing_ = true;
  stream_.next_layer().expires_after(kIoTimeout);
  net::async_write(stream_, net::buffer(out_.front()),
                   beast::bind_front_handler(&HttpSession::on_stream_write, shared_from_this()));
}

void HttpSession::on_stream_write(beast::error_code ec, size_t) {
  writing_ = false;
  if (out_.empty()) return;  // the queue was dropped (socket closed)
  out_bytes_ -= out_.front().size();
  out_.pop_front();
  if (ec) {
    log::debug("http stream write failed; the client is gone", {{"connection", registry_id_}, {"error", ec.message()}});
    out_.clear();
    out_bytes_ = 0;
    cancel_chat();
    chat_.reset();
    return close_socket();
  }
  if (!out_.empty()) return do_stream_write();
  if (stream_ended_) {
    stream_ended_ = false;
    chat_.reset();
    if (!keep_alive_) return close_socket();
    do_read();
  }
}

}  // namespace hippo::server
