#include "api/server/session_admin.h"

#include "api/server/http_routes.h"
#include "api/server/openai_chat.h"
#include "base/log.h"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <fmt/format.h>

namespace hippo::server::admin {

namespace json = boost::json;
namespace http = boost::beast::http;

namespace {

Answer error(unsigned status, std::string_view message, std::string_view code) {
  const std::string_view type = status >= 500 ? "server_error" : "invalid_request_error";
  return {status, openai::error_body(message, type, code), 0};
}

Answer error(const Status& st) {
  return error(static_cast<unsigned>(openai::http_status_for(st)), st.message(), error_code_name(st.code()));
}

Answer refused(const Refusal& r) {
  Answer a = error(r.http_status, r.message, r.code);
  a.retry_after_seconds = r.retry_after_seconds;
  return a;
}

Answer ok(unsigned status, const json::object& body) { return {status, json::serialize(body), 0}; }

json::object summary_json(const agents::SessionSummary& s) {
  json::object o{{"id", s.id},
                 {"object", "session"},
                 {"status", agents::status_name(s.status)},
                 {"kind", s.completion ? "completion" : "agent"},
                 {"created_at", s.created_at},
                 {"updated_at", s.updated_at}};
  o["forked_from"] = s.forked_from.empty() ? json::value(nullptr) : json::value(s.forked_from);
  return o;
}

// A session with its state as the runtime holds it (not for closed sessions: they have none).
json::object add_view(json::object o, const agents::SessionView& v) {
  json::array awaiting;
  for (const std::string& id : v.awaiting_call_ids) awaiting.emplace_back(id);
  o["status"] = agents::status_name(v.status);
  o["n_tokens"] = v.n_tokens;
  o["pending_tokens"] = v.pending_tokens;
  o["resident_bytes"] = v.resident_bytes;
  o["awaiting_call_ids"] = std::move(awaiting);
  return o;
}

// The session's summary, and its state unless it is closed.
Answer describe(agents::AgentRuntime& rt, const std::string& id, unsigned status) {
  Result<agents::SessionSummary> summary = rt.session_summary(id);
  if (!summary.ok()) return error(summary.status());
  json::object o = summary_json(*summary);
  if (summary->status != agents::SessionStatus::kClosed) {
    Result<agents::SessionView> view = rt.session(id);
    if (!view.ok()) return error(view.status());
    o = add_view(std::move(o), *view);
  }
  return ok(status, o);
}

// ?kind=completion lists the temporary sessions of chat completions too (kept under the retention
// rule); by default they are left out.
Answer list(agents::AgentRuntime& rt, const Tenant& tenant, std::string_view query) {
  bool include_completions = false;
  for (std::string_view rest = query; !rest.empty();) {
    const size_t amp = rest.find('&');
    const std::string_view param = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    if (param == "kind=completion" || param == "kind=all") include_completions = true;
    else if (param.starts_with("kind=") && param != "kind=agent")
      return error(400, fmt::format("kind must be agent, completion or all, not '{}'", param.substr(5)), "invalid_request");
  }
  Result<std::vector<agents::SessionSummary>> sessions = rt.list_sessions(tenant.id, include_completions);
  if (!sessions.ok()) return error(sessions.status());
  json::array data;
  for (const agents::SessionSummary& s : *sessions) data.push_back(summary_json(s));
  return ok(200, json::object{{"object", "list"}, {"data", std::move(data)}});
}

Answer method_not_allowed(std::string_view target, std::string_view allowed) {
  return error(405, fmt::format("{} takes {} only", target, allowed), "method_not_allowed");
}

}  // namespace

Answer handle(ServerContext& ctx, const Tenant& tenant, http::verb method, std::string_view target,
              std::string_view query) {
  agents::AgentRuntime& rt = ctx.runtime;
  if (target == kSessionsPath) {
    if (method != http::verb::get) return method_not_allowed(target, "GET");
    return list(rt, tenant, query);
  }
  // /v1/sessions/{id} or /v1/sessions/{id}/{action}
  std::string_view rest = target.substr(kSessionsPath.size() + 1);
  std::string_view action;
  if (auto slash = rest.find('/'); slash != std::string_view::npos) {
    action = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
  }
  const std::string id(rest);
  if (id.empty() || (!action.empty() && action != "snapshot" && action != "fork"))
    return error(404, fmt::format("no endpoint at {}", target), "not_found");
  if (action.empty() && method != http::verb::get && method != http::verb::delete_)
    return method_not_allowed(target, "GET and DELETE");
  if (!action.empty() && method != http::verb::post) return method_not_allowed(target, "POST");

  if (Status owned = ctx.access.check(rt, tenant, id); !owned.ok()) return error(owned);
  if (action.empty() && method == http::verb::get) return describe(rt, id, 200);
  if (action.empty()) {  // DELETE
    if (Status st = rt.close_session(id); !st.ok()) return error(st);
    log::info("session closed", {{"session", id}, {"tenant", tenant.name}});
    return describe(rt, id, 200);
  }
  if (action == "snapshot") {
    if (Status st = rt.snapshot(id); !st.ok()) return error(st);
    return describe(rt, id, 200);
  }
  // fork: a new session, counted against the tenant's open sessions like any other.
  Result<std::string> fork = Status(ErrorCode::kInternal, "no session was created");
  if (auto refusal = ctx.limits.open_session(rt, tenant, [&] { fork = rt.fork_session(id); })) return refused(*refusal);
  if (!fork.ok()) return error(fork.status());
  ctx.access.remember(*fork, tenant.id);
  return describe(rt, *fork, 201);
}

}  // namespace hippo::server::admin
