#include "api/server/websocket_session.h"

#include "api/server/event_gate.h"
#include "base/log.h"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/json/serialize.hpp>
#include <fmt/format.h>

#include <chrono>

namespace hippo::server {

namespace beast = boost::beast;
namespace websocket = beast::websocket;
namespace net = boost::asio;
namespace json = boost::json;

namespace {

// When the runtime handed a response event to the server (steady clock, ns). It travels with the
// event to the write of its frame, where it feeds hippo_stream_event_delay_seconds; clients see it
// only with ServerOptions::emit_timestamps (`hippo bench server`).
constexpr std::string_view kEmitField = "t_emit_ns";

// Cancels the session's response once it has had no reader for the grace period (a reattached
// reader that left again restarts the count).
void cancel_when_abandoned(ServerContext& ctx, const std::string& session_id) {
  const auto unattached = ctx.streams.unattached_for(session_id);
  if (!unattached) return;  // it ended, or a client came back
  const auto grace = std::chrono::duration_cast<SessionStreams::Clock::duration>(ctx.options.stream_grace);
  if (*unattached >= grace) {
    ctx.runtime_calls.post(FairCallPool::kServer, [&ctx, session_id] {
      log::info("no client came back for a running response; cancelling it", {{"session", session_id}});
      Status st = ctx.runtime.cancel(session_id);
      if (!st.ok()) log::debug("cancel after disconnect failed", {{"session", session_id}, {"error", st.to_string()}});
    });
    return;
  }
  auto timer = std::make_shared<net::steady_timer>(ctx.ioc, grace - *unattached);
  timer->async_wait([timer, &ctx, session_id](const boost::system::error_code& ec) {
    if (!ec) cancel_when_abandoned(ctx, session_id);
  });
}

// Finished responses' events stay replayable until the session's stream has had no reader for the
// grace period: for a client that lost its connection just before the end, and for one still
// reading a long replay when the grace would have run out. Armed when a response ends and when a
// reader leaves; a timer that finds a reader, or one gone for less than the grace, leaves the
// events to the timer of that reader's leaving.
void forget_finished_after_grace(ServerContext& ctx, const std::string& session_id) {
  auto timer = std::make_shared<net::steady_timer>(ctx.ioc, ctx.options.stream_grace);
  timer->async_wait([timer, &ctx, session_id](const boost::system::error_code& ec) {
    if (!ec)
      ctx.streams.trim_finished(session_id,
                                std::chrono::duration_cast<SessionStreams::Clock::duration>(ctx.options.stream_grace));
  });
}

}  // namespace

WebSocketSession::WebSocketSession(ServerContext& ctx, ConnectionStream&& stream, Tenant tenant)
    : ctx_(ctx),
      tenant_(std::move(tenant)),
      ws_(std::move(stream)),
      calls_(ctx.runtime_calls, tenant_.id),
      close_guard_(ws_.get_executor()) {
  ctx_.counters.websocket_sessions_open.fetch_add(1);
  ctx_.counters.connections_open.fetch_add(1);
}

WebSocketSession::~WebSocketSession() {
  ctx_.registry.remove(registry_id_);
  ctx_.counters.websocket_sessions_open.fetch_sub(1);
  ctx_.counters.connections_open.fetch_sub(1);
}

template <typename Fn>
void WebSocketSession::post_io(Fn fn) {
  net::post(ws_.get_executor(), std::move(fn));
}

void WebSocketSession::run(beast::http::request<beast::http::string_body> request) {
  registry_id_ = ctx_.registry.add(weak_from_this());
  // Beast's own timeouts: the handshake, and an idle limit with keep-alive pings at half of it.
  beast::get_lowest_layer(ws_).expires_never();
  ws_.set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
  ws_.set_option(websocket::stream_base::decorator(
      [](websocket::response_type& res) { res.set(beast::http::field::server, "hippo"); }));
  ws_.read_message_max(ctx_.options.max_message_bytes);
  // A close code of 5000 or above is not defined (RFC 6455 §7.4): answered with 1002 (protocol
  // error) rather than echoed, as Beast would. Beast itself refuses the reserved ones below 3000.
  ws_.control_callback([this](websocket::frame_type kind, beast::string_view) {
    if (kind == websocket::frame_type::close && ws_.reason().code > 4999)
      ws_.next_layer().replace_next_close_code(static_cast<uint16_t>(websocket::close_code::protocol_error));
  });
  ws_.async_accept(request, beast::bind_front_handler(&WebSocketSession::on_accept, shared_from_this()));
}

void WebSocketSession::close_for_shutdown() {
  post_io([self = shared_from_this()] { self->close(websocket::close_code::going_away, "server shutting down", true); });
}

void WebSocketSession::on_accept(beast::error_code ec) {
  if (ec) {
    log::debug("websocket handshake failed", {{"error", ec.message()}});
    finished();
    return;
  }
  log::debug("websocket connected", {{"connection", registry_id_}, {"tenant", tenant_.name}});
  do_read();
}

void WebSocketSession::do_read() {
  ws_.async_read(buffer_, beast::bind_front_handler(&WebSocketSession::on_read, shared_from_this()));
}

void WebSocketSession::on_read(beast::error_code ec, size_t) {
  if (ec) {
    if (ec == websocket::error::message_too_big) {
      // Beast has closed the connection with 1009 (message too big).
      log::warn("websocket frame over the limit; closed with 1009",
                {{"connection", registry_id_}, {"limit_bytes", ctx_.options.max_message_bytes}});
    } else if (ec != websocket::error::closed) {
      log::debug("websocket read ended", {{"connection", registry_id_}, {"error", ec.message()}});
    }
    finished();
    return;
  }
  ctx_.counters.websocket_events_total.fetch_add(1);
  if (!ws_.got_text()) {
    send_error(protocol::kBinaryFrame, "events are JSON text frames; a binary frame was ignored", {});
  } else {
    const std::string text = beast::buffers_to_string(buffer_.data());
    handle_text(text);
  }
  buffer_.consume(buffer_.size());
  if (!closing_) do_read();
}

void WebSocketSession::handle_text(std::string_view text) {
  protocol::ParsedEvent parsed = protocol::parse_client_event(text, ctx_.options.default_max_output_tokens);
  if (!parsed.ok) {
    send_error(parsed.error.code, parsed.error.message, parsed.event.event_id);
    return;
  }
  if (ctx_.stopping.load()) {
    send_error(protocol::kShuttingDown, "the server is shutting down", parsed.event.event_id);
    return;
  }
  log::debug("websocket event", {{"connection", registry_id_}, {"type", parsed.event.type_name},
                                 {"session", parsed.event.session_id}, {"request", parsed.event.event_id}});
  calls_.post([self = shared_from_this(), event = std::move(parsed.event)] { self->execute(event); });
}

void WebSocketSession::execute(const protocol::ClientEvent& e) {
  agents::AgentRuntime& rt = ctx_.runtime;
  auto self = shared_from_this();
  const std::string& eid = e.event_id;
  const std::string& sid = e.session_id;
  auto fail = [&](const Status& status) { post_io([self, status, eid] { self->send_status_error(status, eid); }); };
  auto reply = [&](json::object event) {
    post_io([self, event = std::move(event), eid]() mutable { self->send(std::move(event), eid); });
  };
  auto refuse = [&](Refusal refusal) {
    post_io([self, refusal = std::move(refusal), eid] { self->send_refusal(refusal, eid); });
  };
  // Every event on an existing session first checks that it is this tenant's.
  if (e.type != protocol::ClientEventType::kSessionCreate) {
    if (Status owned = ctx_.access.check(rt, tenant_, sid); !owned.ok()) return fail(owned);
  }

  switch (e.type) {
    case protocol::ClientEventType::kSessionCreate: {
      Result<std::string> id = Status(ErrorCode::kInternal, "no session was created");
      if (auto refused = ctx_.limits.open_session(rt, tenant_, [&] { id = rt.create_session(e.settings, {}, tenant_.id); }))
        return refuse(std::move(*refused));
      if (!id.ok()) return fail(id.status());
      ctx_.access.remember(*id, tenant_.id);
      log::info("session created", {{"session", *id}, {"tenant", tenant_.name}, {"connection", registry_id_}});
      return reply(protocol::session_event("session.created", *id));
    }
    case protocol::ClientEventType::kSessionFork: {
      Result<std::string> id = Status(ErrorCode::kInternal, "no session was created");
      if (auto refused = ctx_.limits.open_session(rt, tenant_, [&] { id = rt.fork_session(sid); }))
        return refuse(std::move(*refused));
      if (!id.ok()) return fail(id.status());
      ctx_.access.remember(*id, tenant_.id);
      return reply(protocol::session_forked_event(*id, sid));
    }
    case protocol::ClientEventType::kSessionResume: {
      Result<agents::SessionView> view = rt.session(sid);
      if (!view.ok()) return fail(view.status());
      // The answer goes out before the replayed events, and says where the stream stands.
      Result<int64_t> attached = ctx_.streams.attach(sid, registry_id_, stream_deliver(), e.after_seq, [&](int64_t last) {
        json::object answer = protocol::session_view_event("session.resumed", *view);
        answer["session_seq"] = last;
        post_io([self, answer = std::move(answer), sid, eid]() mutable {
          self->attached_.insert(sid);
          self->send(std::move(answer), eid);
        });
      });
      if (!attached.ok()) {
        return post_io([self, message = attached.status().message(), eid] {
          self->send_error(protocol::kStreamGap, message, eid);
        });
      }
      return;
    }
    case protocol::ClientEventType::kInputAppend: {
      Status st = rt.append_input(sid, e.items);
      if (!st.ok()) return fail(st);
      return reply(protocol::input_appended_event(sid, e.items.size()));
    }
    case protocol::ClientEventType::kResponseCreate: {
      if (auto refused = ctx_.limits.admit_response(tenant_)) return refuse(std::move(*refused));
      const std::string rid = ctx_.new_response_id();
      // This connection reads the session's stream from here on.
      Result<int64_t> attached = ctx_.streams.attach(sid, registry_id_, stream_deliver(), std::nullopt, [&](int64_t) {
        post_io([self, sid] { self->attached_.insert(sid); });
      });
      if (!attached.ok()) return fail(attached.status());
      auto gate = std::make_shared<EventGate>([&ctx = ctx_, sid, rid, eid, tenant = tenant_](const agents::ResponseEvent& event) {
        const auto emitted = std::chrono::steady_clock::now();
        const bool last = event.kind == agents::ResponseEvent::Kind::kCompleted || event.kind == agents::ResponseEvent::Kind::kFailed;
        if (event.kind == agents::ResponseEvent::Kind::kCompleted) {
          ctx.counters.responses_completed_total.fetch_add(1);
          ctx.counters.output_tokens_total.fetch_add(event.usage.output_tokens);
        } else if (event.kind == agents::ResponseEvent::Kind::kFailed) {
          ctx.counters.responses_failed_total.fetch_add(1);
        }
        if (last) ctx.limits.charge(tenant, charged_tokens(event.usage));
        json::object out = protocol::response_event(event, sid, rid);
        if (!eid.empty()) out["event_id"] = eid;
        out[kEmitField] = std::chrono::duration_cast<std::chrono::nanoseconds>(emitted.time_since_epoch()).count();
        ctx.streams.publish(sid, std::move(out), last ? SessionStreams::Phase::kEnd : SessionStreams::Phase::kDuring);
        if (last) forget_finished_after_grace(ctx, sid);
      });
      agents::ResponseOptions options = e.response;
      options.max_prompt_tokens = tenant_.max_prompt_tokens;
      Status st = rt.create_response(sid, std::move(options), EventGate::sink(gate));
      if (!st.ok()) return fail(st);
      gate->open([&] {
        json::object created = protocol::response_created_event(sid, rid);
        if (!eid.empty()) created["event_id"] = eid;
        ctx_.streams.publish(sid, std::move(created), SessionStreams::Phase::kStart);
      });
      return;
    }
    case protocol::ClientEventType::kResponseCancel: {
      // The response ends with response.completed, finish_reason "cancelled".
      Status st = rt.cancel(sid);
      if (!st.ok()) return fail(st);
      return;
    }
    case protocol::ClientEventType::kSessionSnapshot: {
      Status st = rt.snapshot(sid);
      if (!st.ok()) return fail(st);
      Result<agents::SessionView> view = rt.session(sid);
      if (!view.ok()) return fail(view.status());
      return reply(protocol::session_view_event("session.snapshotted", *view));
    }
    case protocol::ClientEventType::kSessionClose: {
      Status st = rt.close_session(sid);
      if (!st.ok()) return fail(st);
      ctx_.streams.forget(sid);
      return reply(protocol::session_event("session.closed", sid));
    }
  }
}

SessionStreams::Deliver WebSocketSession::stream_deliver() {
  return [weak = weak_from_this(), exec = ws_.get_executor()](json::object event, bool replay) {
    net::post(exec, [weak, event = std::move(event), replay]() mutable {
      if (auto s = weak.lock()) s->send(std::move(event), {}, replay);  // event_id is in the event
    });
  };
}

void WebSocketSession::send(json::object event, const std::string& event_id, bool replay) {
  if (closing_) return;
  int64_t emitted_ns = 0;
  if (const json::value* t = event.if_contains(kEmitField)) {
    emitted_ns = t->to_number<int64_t>();
    if (!ctx_.options.emit_timestamps) event.erase(kEmitField);
  }
  event["seq"] = ++seq_;
  if (!event_id.empty()) event["event_id"] = event_id;
  enqueue(json::serialize(event), replay, replay ? 0 : emitted_ns);
}

void WebSocketSession::send_error(std::string_view code, std::string_view message, const std::string& event_id) {
  ctx_.counters.protocol_errors_total.fetch_add(1);
  send(protocol::error_event(code, message), event_id);
}

void WebSocketSession::send_status_error(const Status& status, const std::string& event_id) {
  send_error(error_code_name(status.code()), status.message(), event_id);
}

void WebSocketSession::send_refusal(const Refusal& refusal, const std::string& event_id) {
  ctx_.counters.protocol_errors_total.fetch_add(1);
  send(protocol::error_event(refusal.code, refusal.message, refusal.retry_after_seconds), event_id);
}

void WebSocketSession::enqueue(std::string frame, bool replay, int64_t emitted_ns) {
  // A replay (session.resume) comes all at once but is bounded by the replay buffer: only new
  // events count against the limit, so that a client catching up is not taken for a slow one.
  if (!replay && live_bytes_ + frame.size() > ctx_.options.max_outbound_bytes) {
    ctx_.counters.slow_client_closes_total.fetch_add(1);
    log::warn("websocket client reads too slowly; closing it with 1008",
              {{"connection", registry_id_}, {"queued_bytes", live_bytes_},
               {"limit_bytes", ctx_.options.max_outbound_bytes}});
    close(websocket::close_code::policy_error, "outbound queue full: the client reads too slowly", false);
    return;
  }
  if (!replay) live_bytes_ += frame.size();
  outbound_.push_back({std::move(frame), replay, emitted_ns});
  if (!writing_) do_write();
}

void WebSocketSession::do_write() {
  writing_ = true;
  if (outbound_.front().emitted_ns != 0) {  // the write starts now: its send follows at once
    const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
    ctx_.counters.stream_event_delay.observe(static_cast<double>(now - outbound_.front().emitted_ns) / 1e9);
  }
  ws_.text(true);
  ws_.async_write(net::buffer(outbound_.front().text),
                  beast::bind_front_handler(&WebSocketSession::on_write, shared_from_this()));
}

void WebSocketSession::drop_outbound(bool newest) {
  const Outbound& frame = newest ? outbound_.back() : outbound_.front();
  if (!frame.replay) live_bytes_ -= frame.text.size();
  if (newest) outbound_.pop_back();
  else outbound_.pop_front();
}

void WebSocketSession::on_write(beast::error_code ec, size_t) {
  writing_ = false;
  drop_outbound(false);
  if (ec) {
    log::debug("websocket write failed", {{"connection", registry_id_}, {"error", ec.message()}});
    outbound_.clear();
    live_bytes_ = 0;
    closing_ = true;
    finished();
    return;
  }
  if (!outbound_.empty()) {
    do_write();
  } else if (pending_close_) {
    start_close();
  }
}

void WebSocketSession::close(websocket::close_code code, std::string reason, bool drain) {
  if (closing_) return;
  closing_ = true;
  pending_close_ = websocket::close_reason(code, reason);
  // From here the client has 5 s to take what is queued and answer the close handshake. One that
  // reads nothing at all (the write in progress never completes) loses the socket then too.
  close_guard_.expires_after(std::chrono::seconds(5));
  close_guard_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (ec) return;
    beast::error_code ignored;
    beast::get_lowest_layer(self->ws_).socket().close(ignored);
  });
  if (!drain) {
    // Keep only the frame being written (Beast is in the middle of it).
    while (outbound_.size() > (writing_ ? 1u : 0u)) drop_outbound(true);
  }
  if (!writing_) start_close();
}

void WebSocketSession::start_close() {
  if (close_started_ || !pending_close_) return;
  close_started_ = true;
  ws_.async_close(*pending_close_, [self = shared_from_this()](beast::error_code ec) {
    self->close_guard_.cancel();
    if (ec) log::debug("websocket close failed", {{"connection", self->registry_id_}, {"error", ec.message()}});
    self->finished();
  });
}

void WebSocketSession::finished() {
  if (finished_) return;
  finished_ = true;
  closing_ = true;
  ctx_.registry.remove(registry_id_);
  size_t abandoned = 0;
  for (const std::string& sid : attached_) {
    if (!ctx_.streams.detach(sid, registry_id_)) continue;
    forget_finished_after_grace(ctx_, sid);
    if (!ctx_.streams.unattached_for(sid)) continue;
    ++abandoned;
    cancel_when_abandoned(ctx_, sid);
  }
  if (abandoned > 0)
    log::info("websocket client gone; its running responses wait for a reconnect, then are cancelled",
              {{"connection", registry_id_}, {"responses", abandoned},
               {"grace_ms", static_cast<int64_t>(ctx_.options.stream_grace.count())}});
  attached_.clear();
}

}  // namespace hippo::server
