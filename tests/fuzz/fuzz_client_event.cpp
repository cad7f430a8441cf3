// libFuzzer target: one WebSocket text frame of the agents protocol through
// protocol::parse_client_event (docs/protocol.md, "Client events").
//
// Beyond "no crash, no exception, no sanitizer report":
// - a rejected frame has one of the protocol's error codes and a message, and the error event the
//   server sends for it is JSON;
// - an accepted event meets the constraints docs/protocol.md states for its type, its settings
//   survive the sessions table, and written back as JSON it parses again to the same event.
#include "agents/agent_types.h"
#include "api/server/protocol.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_common.h"

#include <boost/json/serialize.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace {

namespace json = boost::json;
namespace protocol = hippo::server::protocol;
using hippo::agents::InputItem;
using hippo::tokenizer::ReasoningEffort;
using hippo::tokenizer::ToolChoice;

constexpr int64_t kDefaultMaxOutputTokens = 256;  // ServerOptions' default

std::string_view choice_name(ToolChoice c) {
  switch (c) {
    case ToolChoice::kAuto: return "auto";
    case ToolChoice::kNone: return "none";
    case ToolChoice::kRequired: return "required";
  }
  return "?";
}

std::string_view effort_name(ReasoningEffort e) {
  switch (e) {
    case ReasoningEffort::kDefault: return "default";
    case ReasoningEffort::kLow: return "low";
    case ReasoningEffort::kHigh: return "high";
    case ReasoningEffort::kXHigh: return "xhigh";
    case ReasoningEffort::kMax: return "max";
  }
  return "?";
}

// The event as a client would write it, every field explicit.
json::object to_json(const protocol::ClientEvent& e) {
  json::object o{{"type", e.type_name}, {"event_id", e.event_id}};
  if (e.type != protocol::ClientEventType::kSessionCreate) o["session_id"] = e.session_id;
  switch (e.type) {
    case protocol::ClientEventType::kSessionCreate: {
      json::array tools;
      for (const hippo::tokenizer::ToolDefinition& t : e.settings.tools) {
        json::object tool{{"name", t.name}};
        if (t.description) tool["description"] = *t.description;
        if (t.parameters) tool["parameters"] = json::parse(*t.parameters);
        tools.push_back(std::move(tool));
      }
      o["instructions"] = e.settings.instructions;
      o["tools"] = std::move(tools);
      o["thinking"] = e.settings.thinking;
      o["tool_choice"] = choice_name(e.settings.tool_choice);
      o["reasoning_effort"] = effort_name(e.settings.effort);
      break;
    }
    case protocol::ClientEventType::kInputAppend: {
      json::array items;
      for (const InputItem& item : e.items) {
        if (item.kind == InputItem::Kind::kUserMessage)
          items.push_back(json::object{{"type", "message"}, {"role", "user"}, {"content", item.content}});
        else
          items.push_back(json::object{{"type", "tool_result"}, {"call_id", item.tool_call_id}, {"content", item.content}});
      }
      o["items"] = std::move(items);
      break;
    }
    case protocol::ClientEventType::kResponseCreate: {
      const hippo::agents::ResponseOptions& r = e.response;
      json::array stop;
      for (const std::string& s : r.stop) stop.emplace_back(s);
      o["max_output_tokens"] = r.max_output_tokens;
      o["temperature"] = r.sampling.temperature;
      o["top_p"] = r.sampling.top_p;
      o["top_k"] = r.sampling.top_k;
      o["min_p"] = r.sampling.min_p;
      if (r.sampling.seed) o["seed"] = *r.sampling.seed;
      if (r.top_logprobs >= 0) o["top_logprobs"] = r.top_logprobs;
      o["stop"] = std::move(stop);
      break;
    }
    default: break;
  }
  return o;
}

void check_rejected(const protocol::ParsedEvent& p, std::string_view text) {
  const std::string& code = p.error.code;
  HIPPO_FUZZ_CHECK(code == protocol::kInvalidJson || code == protocol::kInvalidEvent || code == protocol::kUnknownType ||
                       code == protocol::kInvalidField,
                   "unexpected error code '" + code + "' for: " + std::string(text));
  HIPPO_FUZZ_CHECK(!p.error.message.empty(), "an error without a message (" + code + ") for: " + std::string(text));
  // What websocket_session.cpp sends (it adds seq and event_id).
  json::object event = protocol::error_event(p.error.code, p.error.message);
  event["seq"] = 1;
  if (!p.event.event_id.empty()) event["event_id"] = p.event.event_id;
  const json::value sent = hippo::fuzz::parse_json_or_die(json::serialize(event), "the error event");
  HIPPO_FUZZ_CHECK(sent.at("message").as_string() == p.error.message, "the error message changed on the wire");
}

void check_accepted(const protocol::ClientEvent& e, std::string_view text) {
  const std::string input(text);
  if (e.type != protocol::ClientEventType::kSessionCreate)
    HIPPO_FUZZ_CHECK(!e.session_id.empty(), "accepted without a session_id: " + input);
  switch (e.type) {
    case protocol::ClientEventType::kSessionCreate: hippo::fuzz::check_settings(e.settings); break;
    case protocol::ClientEventType::kInputAppend:
      HIPPO_FUZZ_CHECK(!e.items.empty(), "input.append accepted without items: " + input);
      for (const InputItem& item : e.items)
        if (item.kind == InputItem::Kind::kUserMessage)
          HIPPO_FUZZ_CHECK(item.tool_call_id.empty(), "a message item with a call_id: " + input);
      break;
    case protocol::ClientEventType::kResponseCreate: {
      const hippo::agents::ResponseOptions& r = e.response;
      HIPPO_FUZZ_CHECK(r.max_output_tokens > 0, "max_output_tokens <= 0 accepted: " + input);
      HIPPO_FUZZ_CHECK(r.sampling.temperature >= 0 && std::isfinite(r.sampling.temperature), "bad temperature accepted: " + input);
      HIPPO_FUZZ_CHECK(r.sampling.top_p > 0 && r.sampling.top_p <= 1, "top_p outside (0, 1] accepted: " + input);
      HIPPO_FUZZ_CHECK(r.sampling.top_k >= 0, "top_k < 0 accepted: " + input);
      HIPPO_FUZZ_CHECK(r.sampling.min_p >= 0 && r.sampling.min_p <= 1, "min_p outside [0, 1] accepted: " + input);
      for (const std::string& s : r.stop) HIPPO_FUZZ_CHECK(!s.empty(), "an empty stop string accepted: " + input);
      break;
    }
    default: break;
  }

  // Written back as JSON, the event parses again, to the same event.
  const std::string again = json::serialize(to_json(e));
  const protocol::ParsedEvent p2 = protocol::parse_client_event(again, kDefaultMaxOutputTokens);
  HIPPO_FUZZ_CHECK(p2.ok, "the event written back is rejected (" + p2.error.message + "): " + again + "\n  from: " + input);
  const protocol::ClientEvent& e2 = p2.event;
  HIPPO_FUZZ_CHECK(e2.type == e.type && e2.type_name == e.type_name && e2.event_id == e.event_id &&
                       e2.session_id == e.session_id,
                   "the event's type or ids changed: " + again + "\n  from: " + input);
  HIPPO_FUZZ_CHECK(hippo::fuzz::same_settings(e2.settings, e.settings), "the settings changed: " + again + "\n  from: " + input);
  HIPPO_FUZZ_CHECK(hippo::fuzz::same_items(e2.items, e.items), "the items changed: " + again + "\n  from: " + input);
  HIPPO_FUZZ_CHECK(hippo::fuzz::same_options(e2.response, e.response), "the response options changed: " + again + "\n  from: " + input);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = hippo::fuzz::as_text(data, size);
  const protocol::ParsedEvent p = protocol::parse_client_event(text, kDefaultMaxOutputTokens);
  if (p.ok) check_accepted(p.event, text);
  else check_rejected(p, text);
  return 0;
}
