#include "api/server/protocol.h"

#include "api/server/json_fields.h"
#include "engine/tokenizer/utf8.h"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace hippo::server::protocol {

namespace json = boost::json;

namespace {

const std::map<std::string, ClientEventType, std::less<>>& event_types() {
  static const std::map<std::string, ClientEventType, std::less<>> types = {
      {"session.create", ClientEventType::kSessionCreate},   {"session.resume", ClientEventType::kSessionResume},
      {"input.append", ClientEventType::kInputAppend},       {"response.create", ClientEventType::kResponseCreate},
      {"response.cancel", ClientEventType::kResponseCancel}, {"session.snapshot", ClientEventType::kSessionSnapshot},
      {"session.close", ClientEventType::kSessionClose},     {"session.fork", ClientEventType::kSessionFork},
  };
  return types;
}

// tools: [{name, description?, parameters?}] or OpenAI's [{type:"function", function:{...}}].
bool parse_tools(const json::array& tools, std::vector<tokenizer::ToolDefinition>& out, JsonFields& fields) {
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string where = fmt::format("tools[{}]", i);
    if (!tools[i].is_object()) {
      fields.fail(fmt::format("{} must be an object", where));
      return false;
    }
    const json::object* tool = &tools[i].get_object();
    JsonFields outer(*tool, where + ".");
    if (const json::object* function = outer.object("function")) tool = function;
    if (!outer.ok()) {
      fields.fail(outer.error());
      return false;
    }
    JsonFields f(*tool, where + ".");
    tokenizer::ToolDefinition def;
    auto name = f.required_string("name");
    auto description = f.string("description");
    const json::value* parameters = tool->if_contains("parameters");
    if (parameters != nullptr && !parameters->is_null() && !parameters->is_object())
      f.fail(fmt::format("{}.parameters must be a JSON Schema object", where));
    if (!f.ok()) {
      fields.fail(f.error());
      return false;
    }
    def.name = *name;
    def.description = description;
    if (parameters != nullptr && parameters->is_object()) {
      def.parameters = finite_json_text(parameters->get_object());
      if (!def.parameters) {
        fields.fail(fmt::format("{}.parameters holds a number out of range (JSON numbers here must be finite doubles)", where));
        return false;
      }
    }
    out.push_back(std::move(def));
  }
  return true;
}

bool parse_session_create(JsonFields& f, ClientEvent& e) {
  if (auto v = f.string("instructions")) e.settings.instructions = *v;
  if (const json::array* tools = f.array("tools")) {
    if (!parse_tools(*tools, e.settings.tools, f)) return false;
  }
  if (auto v = f.boolean("thinking")) e.settings.thinking = *v;
  if (auto v = f.string("tool_choice")) {
    if (*v == "auto") e.settings.tool_choice = tokenizer::ToolChoice::kAuto;
    else if (*v == "none") e.settings.tool_choice = tokenizer::ToolChoice::kNone;
    else if (*v == "required") e.settings.tool_choice = tokenizer::ToolChoice::kRequired;
    else f.fail(fmt::format("tool_choice must be auto, none or required, not '{}'", *v));
  }
  if (auto v = f.string("reasoning_effort")) {
    if (*v == "default") e.settings.effort = tokenizer::ReasoningEffort::kDefault;
    else if (*v == "low") e.settings.effort = tokenizer::ReasoningEffort::kLow;
    else if (*v == "high") e.settings.effort = tokenizer::ReasoningEffort::kHigh;
    else if (*v == "xhigh") e.settings.effort = tokenizer::ReasoningEffort::kXHigh;
    else if (*v == "max") e.settings.effort = tokenizer::ReasoningEffort::kMax;
    else f.fail(fmt::format("reasoning_effort must be default, low, high, xhigh or max, not '{}'", *v));
  }
  return f.ok();
}

bool parse_items(JsonFields& f, ClientEvent& e) {
  const json::array* items = f.array("items");
  if (!f.ok()) return false;
  if (items == nullptr || items->empty()) {
    f.fail("items is required: a non-empty array of input items");
    return false;
  }
  for (size_t i = 0; i < items->size(); ++i) {
    const std::string where = fmt::format("items[{}]", i);
    if (!(*items)[i].is_object()) {
      f.fail(fmt::format("{} must be an object", where));
      return false;
    }
    JsonFields item(( *items)[i].get_object(), where + ".");
    auto type = item.required_string("type");
    agents::InputItem input;
    if (type && *type == "message") {
      if (auto role = item.string("role"); role && *role != "user")
        item.fail(fmt::format("{}.role must be user (instructions are the session's system message), not '{}'", where, *role));
      input.kind = agents::InputItem::Kind::kUserMessage;
      if (auto content = item.required_string("content")) input.content = *content;
    } else if (type && *type == "tool_result") {
      input.kind = agents::InputItem::Kind::kToolResult;
      if (auto id = item.required_string("call_id")) input.tool_call_id = *id;
      if (auto content = item.required_string("content")) input.content = *content;
    } else if (type) {
      item.fail(fmt::format("{}.type must be message or tool_result, not '{}'", where, *type));
    }
    if (!item.ok()) {
      f.fail(item.error());
      return false;
    }
    e.items.push_back(std::move(input));
  }
  return true;
}

bool parse_response_create(JsonFields& f, ClientEvent& e, int64_t default_max_output_tokens) {
  agents::ResponseOptions& r = e.response;
  r.max_output_tokens = default_max_output_tokens;
  if (auto v = f.integer("max_output_tokens")) r.max_output_tokens = *v;
  if (auto v = f.number("temperature")) r.sampling.temperature = *v;
  if (auto v = f.number("top_p")) r.sampling.top_p = *v;
  if (auto v = f.integer("top_k")) r.sampling.top_k = *v;
  if (auto v = f.number("min_p")) r.sampling.min_p = *v;
  if (auto v = f.unsigned_integer("seed")) r.sampling.seed = *v;
  if (auto v = f.strings("stop")) r.stop = *v;
  if (auto v = f.integer("top_logprobs")) r.top_logprobs = static_cast<int>(std::clamp<int64_t>(*v, -2, 100));
  if (!f.ok()) return false;
  if (r.max_output_tokens <= 0) f.fail("max_output_tokens must be positive");
  else if (!(r.sampling.temperature >= 0 && std::isfinite(r.sampling.temperature))) f.fail("temperature must be >= 0");
  else if (!(r.sampling.top_p > 0 && r.sampling.top_p <= 1)) f.fail("top_p must be in (0, 1]");
  else if (r.sampling.top_k < 0) f.fail("top_k must be >= 0 (0: off)");
  else if (!(r.sampling.min_p >= 0 && r.sampling.min_p <= 1)) f.fail("min_p must be in [0, 1]");
  else if (r.top_logprobs < -1 || r.top_logprobs > agents::kMaxTopLogprobs)
    f.fail(fmt::format("top_logprobs must be in [0, {}]", agents::kMaxTopLogprobs));
  for (const std::string& s : r.stop)
    if (s.empty()) f.fail("stop strings must not be empty");
  return f.ok();
}

ParsedEvent failure(ParsedEvent p, std::string_view code, std::string message) {
  p.ok = false;
  p.error = {std::string(code), std::move(message)};
  return p;
}

}  // namespace

ParsedEvent parse_client_event(std::string_view text, int64_t default_max_output_tokens) {
  ParsedEvent p;
  boost::system::error_code ec;
  json::value doc = json::parse(text, ec);
  if (ec) return failure(std::move(p), kInvalidJson, fmt::format("the frame is not JSON: {}", ec.message()));
  if (!doc.is_object()) return failure(std::move(p), kInvalidJson, "an event must be a JSON object");
  JsonFields f(doc.get_object());
  if (auto id = f.string("event_id")) p.event.event_id = *id;
  if (!f.ok()) return failure(std::move(p), kInvalidField, f.error());
  auto type = f.string("type");
  if (!f.ok() || !type) return failure(std::move(p), kInvalidEvent, "an event needs a string field \"type\"");
  auto it = event_types().find(*type);
  if (it == event_types().end())
    return failure(std::move(p), kUnknownType, fmt::format("unknown event type '{}'", *type));
  ClientEvent& e = p.event;
  e.type = it->second;
  e.type_name = *type;
  if (e.type != ClientEventType::kSessionCreate) {
    if (auto id = f.required_string("session_id")) e.session_id = *id;
    if (f.ok() && e.session_id.empty()) f.fail("session_id must not be empty");
  }
  bool ok = f.ok();
  if (ok) {
    switch (e.type) {
      case ClientEventType::kSessionCreate: ok = parse_session_create(f, e); break;
      case ClientEventType::kInputAppend: ok = parse_items(f, e); break;
      case ClientEventType::kResponseCreate: ok = parse_response_create(f, e, default_max_output_tokens); break;
      case ClientEventType::kSessionResume:
        e.after_seq = f.integer("after_seq");
        if (f.ok() && e.after_seq && *e.after_seq < 0) f.fail("after_seq must be >= 0");
        ok = f.ok();
        break;
      default: break;
    }
  }
  if (!ok || !f.ok()) return failure(std::move(p), kInvalidField, f.error());
  p.ok = true;
  return p;
}

json::object error_event(std::string_view code, std::string_view message) {
  return {{"type", "error"}, {"code", code}, {"message", message}};
}

json::object error_event(std::string_view code, std::string_view message, int64_t retry_after_seconds) {
  json::object event = error_event(code, message);
  if (retry_after_seconds > 0) event["retry_after"] = retry_after_seconds;
  return event;
}

json::object session_forked_event(const std::string& session_id, const std::string& forked_from) {
  return {{"type", "session.forked"}, {"session_id", session_id}, {"forked_from", forked_from}};
}

json::object session_event(std::string_view type, const std::string& session_id) {
  return {{"type", type}, {"session_id", session_id}};
}

json::object session_view_event(std::string_view type, const agents::SessionView& view) {
  json::array awaiting;
  for (const std::string& id : view.awaiting_call_ids) awaiting.emplace_back(id);
  return {{"type", type},
          {"session_id", view.id},
          {"status", agents::status_name(view.status)},
          {"n_tokens", view.n_tokens},
          {"pending_tokens", view.pending_tokens},
          {"awaiting_call_ids", std::move(awaiting)}};
}

json::object input_appended_event(const std::string& session_id, size_t n_items) {
  return {{"type", "input.appended"}, {"session_id", session_id}, {"items", n_items}};
}

json::object response_created_event(const std::string& session_id, const std::string& response_id) {
  return {{"type", "response.created"}, {"session_id", session_id}, {"response_id", response_id}};
}

json::object usage_json(const agents::Usage& u) {
  return {{"input_tokens", u.input_tokens},
          {"cached_tokens", u.cached_tokens},
          {"output_tokens", u.output_tokens},
          {"prefill_ms", u.prefill_seconds * 1e3},
          {"decode_ms", u.decode_seconds * 1e3},
          {"first_token_ms", u.first_token_seconds * 1e3},
          {"drafted_tokens", u.drafted_tokens},
          {"accepted_tokens", u.accepted_tokens}};
}

json::object response_event(const agents::ResponseEvent& e, const std::string& session_id,
                            const std::string& response_id) {
  using Kind = agents::ResponseEvent::Kind;
  json::object o{{"type", ""}, {"session_id", session_id}, {"response_id", response_id}};
  switch (e.kind) {
    case Kind::kTextDelta:
      o["type"] = "response.output_text.delta";
      o["delta"] = e.text;
      break;
    case Kind::kReasoningDelta:
      o["type"] = "response.reasoning.delta";
      o["delta"] = e.text;
      break;
    case Kind::kToolCallBegin:
      o["type"] = "response.function_call.begin";
      o["call_id"] = e.call_id;
      o["name"] = e.name;
      break;
    case Kind::kToolCallArgumentsDelta:
      o["type"] = "response.function_call_arguments.delta";
      o["call_id"] = e.call_id;
      o["delta"] = e.text;
      break;
    case Kind::kToolCallDone:
      o["type"] = "response.function_call.done";
      o["call_id"] = e.call_id;
      o["name"] = e.name;
      o["arguments"] = e.text;
      break;
    case Kind::kTokenLogprob: {
      o["type"] = "response.logprob";
      o["token"] = tokenizer::repair_utf8(e.text);
      o["logprob"] = e.logprob;
      json::array top;
      for (const agents::TokenLogprob& t : e.top_logprobs)
        top.push_back(json::object{{"token", tokenizer::repair_utf8(t.token)}, {"logprob", t.logprob}});
      o["top_logprobs"] = std::move(top);
      break;
    }
    case Kind::kCompleted:
      o["type"] = "response.completed";
      o["finish_reason"] = e.finish_reason;
      o["usage"] = usage_json(e.usage);
      o["seed"] = e.seed;
      break;
    case Kind::kFailed:
      o["type"] = "response.failed";
      o["error"] = {{"code", error_code_name(e.error.code())}, {"message", e.error.message()}};
      break;
  }
  return o;
}

}  // namespace hippo::server::protocol
