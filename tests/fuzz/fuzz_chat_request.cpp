// libFuzzer target: one POST /v1/chat/completions body through openai::parse_chat_request
// (docs/protocol.md, "The OpenAI-compatible API").
//
// Beyond "no crash, no exception, no sanitizer report":
// - a rejected body is a 400, 404 or 501 with a message, and the error body the server sends for
//   it is JSON carrying that message;
// - an accepted request is for the served model, is a conversation the agents layer takes (it ends
//   with a user message or tool results, each of which answers an open call), has sampling values in the
//   documented ranges and settings that survive the sessions table, and written back as a request
//   it parses again to the same request;
// - the same body as a finished conversation (parse_chat_transcript) ends with the answer if it
//   parses, and never parses both ways.
#include "agents/agent_types.h"
#include "api/server/openai_chat.h"
#include "base/status.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_common.h"

#include <boost/json/serialize.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace {

namespace json = boost::json;
namespace openai = hippo::server::openai;
using hippo::ErrorCode;
using hippo::agents::InputItem;
using hippo::tokenizer::ReasoningEffort;
using hippo::tokenizer::ToolChoice;

const std::string kModel = "hippo";               // ServerOptions' default model id
constexpr int64_t kDefaultMaxOutputTokens = 256;  // ServerOptions' default

// The request as a client would write it, every field explicit.
json::object to_json(const openai::ChatRequest& r) {
  json::array messages;
  if (!r.settings.instructions.empty()) messages.push_back(json::object{{"role", "system"}, {"content", r.settings.instructions}});
  for (const InputItem& item : r.inputs) {
    switch (item.kind) {
      case InputItem::Kind::kUserMessage:
        messages.push_back(json::object{{"role", "user"}, {"content", item.content}});
        break;
      case InputItem::Kind::kToolResult:
        messages.push_back(json::object{{"role", "tool"}, {"tool_call_id", item.tool_call_id}, {"content", item.content}});
        break;
      case InputItem::Kind::kAssistantMessage: {
        json::object m{{"role", "assistant"}, {"content", item.content}};
        if (item.reasoning) m["reasoning_content"] = *item.reasoning;
        json::array calls;
        for (const hippo::tokenizer::ToolCall& c : item.tool_calls)
          calls.push_back(json::object{{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
        if (!calls.empty()) m["tool_calls"] = std::move(calls);
        messages.push_back(std::move(m));
        break;
      }
    }
  }
  json::array tools;
  for (const hippo::tokenizer::ToolDefinition& t : r.settings.tools) {
    json::object function{{"name", t.name}};
    if (t.description) function["description"] = *t.description;
    if (t.parameters) function["parameters"] = json::parse(*t.parameters);
    tools.push_back(json::object{{"type", "function"}, {"function", std::move(function)}});
  }
  json::array stop;
  for (const std::string& s : r.options.stop) stop.emplace_back(s);
  json::object o{{"model", r.model},
                 {"messages", std::move(messages)},
                 {"tools", std::move(tools)},
                 {"stream", r.stream},
                 {"stream_options", {{"include_usage", r.include_usage}}},
                 {"max_completion_tokens", r.options.max_output_tokens},
                 {"temperature", r.options.sampling.temperature},
                 {"top_p", r.options.sampling.top_p},
                 {"stop", std::move(stop)},
                 {"n", 1},
                 {"parallel_tool_calls", r.options.parallel_tool_calls}};
  // The parser reads seed as a signed integer and keeps its bits.
  if (r.options.sampling.seed) o["seed"] = static_cast<int64_t>(*r.options.sampling.seed);
  if (r.options.top_logprobs >= 0) {
    o["logprobs"] = true;
    o["top_logprobs"] = r.options.top_logprobs;
  }
  switch (r.settings.tool_choice) {
    case ToolChoice::kAuto: o["tool_choice"] = "auto"; break;
    case ToolChoice::kNone: o["tool_choice"] = "none"; break;
    case ToolChoice::kRequired: o["tool_choice"] = "required"; break;
  }
  if (r.settings.thinking) {
    switch (r.settings.effort) {
      case ReasoningEffort::kLow: o["reasoning_effort"] = "low"; break;
      case ReasoningEffort::kDefault: o["reasoning_effort"] = "medium"; break;
      case ReasoningEffort::kHigh: o["reasoning_effort"] = "high"; break;
      default: HIPPO_FUZZ_CHECK(false, "a reasoning effort the OpenAI API cannot name was accepted");
    }
  }
  return o;
}

void check_rejected(const hippo::Status& st, std::string_view body) {
  const int http = openai::request_error_status(st);
  HIPPO_FUZZ_CHECK(st.code() == ErrorCode::kInvalidArgument || st.code() == ErrorCode::kNotFound ||
                       st.code() == ErrorCode::kUnavailable,
                   "unexpected error " + st.to_string() + " for: " + std::string(body));
  HIPPO_FUZZ_CHECK(http == 400 || http == 404, "HTTP status " + std::to_string(http) + " for " + st.to_string());
  HIPPO_FUZZ_CHECK(!st.message().empty(), "an error without a message for: " + std::string(body));
  // What http_session.cpp sends.
  const std::string sent = openai::error_body(st.message(), "invalid_request_error", "invalid_request");
  const json::value v = hippo::fuzz::parse_json_or_die(sent, "the error body");
  HIPPO_FUZZ_CHECK(v.at("error").at("message").as_string() == st.message(), "the error message changed on the wire: " + sent);
}

void check_accepted(const openai::ChatRequest& r, std::string_view body) {
  const std::string input(body);
  HIPPO_FUZZ_CHECK(r.model == kModel, "a request for model '" + r.model + "' accepted: " + input);
  HIPPO_FUZZ_CHECK(!r.inputs.empty(), "accepted without a user message: " + input);
  // The conversation as the agents layer takes it: the model answers a user message or tool
  // results, and every tool result answers an open call of the assistant turn before it.
  HIPPO_FUZZ_CHECK(r.inputs.back().kind != InputItem::Kind::kAssistantMessage, "ends with an assistant message: " + input);
  std::vector<std::string> open;
  for (const InputItem& item : r.inputs) {
    if (item.kind == InputItem::Kind::kToolResult) {
      auto it = std::find(open.begin(), open.end(), item.tool_call_id);
      HIPPO_FUZZ_CHECK(it != open.end(), "a tool result for no open call: " + input);
      open.erase(it);
      continue;
    }
    HIPPO_FUZZ_CHECK(open.empty(), "a message before every call has its result: " + input);
    for (const hippo::tokenizer::ToolCall& c : item.tool_calls) {
      HIPPO_FUZZ_CHECK(hippo::fuzz::parse_json_or_die(c.arguments, "a call's arguments").is_object(),
                       "a call's arguments are not an object: " + input);
      open.push_back(c.id);
    }
  }
  HIPPO_FUZZ_CHECK(open.empty(), "calls without results at the end: " + input);
  const hippo::agents::ResponseOptions& o = r.options;
  HIPPO_FUZZ_CHECK(o.max_output_tokens > 0, "max_tokens <= 0 accepted: " + input);
  HIPPO_FUZZ_CHECK(o.sampling.temperature >= 0 && o.sampling.temperature <= 2, "temperature outside [0, 2] accepted: " + input);
  HIPPO_FUZZ_CHECK(o.sampling.top_p > 0 && o.sampling.top_p <= 1, "top_p outside (0, 1] accepted: " + input);
  HIPPO_FUZZ_CHECK(o.sampling.top_k == 0 && o.sampling.min_p == 0, "top_k or min_p set by the OpenAI API: " + input);
  for (const std::string& s : o.stop) HIPPO_FUZZ_CHECK(!s.empty(), "an empty stop string accepted: " + input);
  hippo::fuzz::check_settings(r.settings);

  // Written back as a request, it parses again, to the same request.
  const std::string again = json::serialize(to_json(r));
  hippo::Result<openai::ChatRequest> r2 = openai::parse_chat_request(again, kModel, kDefaultMaxOutputTokens);
  HIPPO_FUZZ_CHECK(r2.ok(), "the request written back is rejected (" + (r2.ok() ? std::string() : r2.status().to_string()) +
                                "): " + again + "\n  from: " + input);
  HIPPO_FUZZ_CHECK(r2->model == r.model && r2->stream == r.stream && r2->include_usage == r.include_usage,
                   "model or stream flags changed: " + again + "\n  from: " + input);
  HIPPO_FUZZ_CHECK(hippo::fuzz::same_settings(r2->settings, r.settings), "the settings changed: " + again + "\n  from: " + input);
  HIPPO_FUZZ_CHECK(hippo::fuzz::same_items(r2->inputs, r.inputs), "the messages changed: " + again + "\n  from: " + input);
  HIPPO_FUZZ_CHECK(hippo::fuzz::same_options(r2->options, r.options), "the sampling options changed: " + again + "\n  from: " + input);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body = hippo::fuzz::as_text(data, size);
  hippo::Result<openai::ChatRequest> r = openai::parse_chat_request(body, kModel, kDefaultMaxOutputTokens);
  if (r.ok()) check_accepted(*r, body);
  else check_rejected(r.status(), body);
  // The same bytes as a finished conversation (`hippo model render`): one that parses ends with the
  // assistant's answer, and a request never parses as one (they end differently).
  hippo::Result<openai::ChatRequest> transcript = openai::parse_chat_transcript(body);
  if (transcript.ok()) {
    HIPPO_FUZZ_CHECK(!transcript->inputs.empty() && transcript->inputs.back().kind == InputItem::Kind::kAssistantMessage,
                     "a parsed finished conversation does not end with the answer");
    HIPPO_FUZZ_CHECK(!r.ok(), "a body parses both as a request and as a finished conversation");
  } else {
    HIPPO_FUZZ_CHECK(!transcript.status().message().empty(), "a refused finished conversation without a message");
  }
  return 0;
}
