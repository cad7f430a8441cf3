// The OpenAI-compatible chat completions API (POST /v1/chat/completions, GET /v1/models): request
// parsing into the agents layer's types, and the agents layer's response events as
// chat.completion / chat.completion.chunk objects. JSON only here; http_session.cpp does the I/O.
//
// A request is stateless: it carries the whole conversation (system messages become the session's
// instructions, the tools its tools, the rest its input items). The runtime continues the tenant's
// idle session that holds the longest prefix of it, or starts one (respond_to_conversation).
#pragma once

#include "agents/agent_types.h"
#include "api/server/response_writer.h"
#include "base/status.h"

#include <boost/json/array.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hippo::server::openai {

struct ChatRequest {
  std::string model;
  agents::SessionSettings settings;
  std::vector<agents::InputItem> inputs;
  agents::ResponseOptions options;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
};

// kInvalidArgument: a 400 with the message; kUnavailable: a field or value hippo does not support
// (also 400: the client sent something to fix, never to retry); kNotFound: the model is not served
// here (404).
Result<ChatRequest> parse_chat_request(std::string_view body, const std::string& served_model,
                                       int64_t default_max_tokens);
// A finished conversation in a request's form (messages ending with the assistant's answer, tools,
// tool_choice, reasoning_effort; other fields ignored), for `hippo model render`. Checked as a
// request's messages are.
Result<ChatRequest> parse_chat_transcript(std::string_view body);
// A request body: a JSON object (else kInvalidArgument saying why).
Result<boost::json::value> parse_body(std::string_view body);
// tool_choice, shared by both endpoints: auto, none, required, or a named function
// ({"type": "function", "function": {"name"}}, or the Responses API's {"type", "name"}), for which
// the tools are narrowed to that one and a call is required (DeepSeek's encoding has no named choice).
Status apply_tool_choice(const boost::json::value& choice, agents::SessionSettings& settings);
// temperature in [0, 2], top_p in (0, 1], seed, stop strings (not empty), shared by both endpoints.
Status apply_sampling(std::optional<double> temperature, std::optional<double> top_p, std::optional<int64_t> seed,
                      const std::optional<std::vector<std::string>>& stop, agents::ResponseOptions& options);
// The HTTP status and error code sent for a request parse_chat_request() refused with status:
// 400 invalid_request or unsupported, 404 model_not_found.
int request_error_status(const Status& status);
std::string_view request_error_code(const Status& status);

// {"error": {"message", "type", "param", "code"}}; invalid UTF-8 in the message becomes U+FFFD.
std::string error_body(std::string_view message, std::string_view type, std::string_view code);
// The HTTP status for an agents-layer error.
int http_status_for(const Status& status);
std::string models_body(const std::string& model_id, int64_t created);
// GET /v1/models/{id}: the model object.
std::string model_body(const std::string& model_id, int64_t created);

// Turns one response's events into the chat.completion object, or into SSE `data:` lines.
class ChatCompletion final : public ResponseWriter {
 public:
  // logprobs: the request asked for them (choices[].logprobs is then an object, else null).
  ChatCompletion(std::string id, std::string model, int64_t created, bool include_usage, bool logprobs = false);

  // Streaming: the SSE data lines ("data: {...}\n\n") the start of the response sends.
  std::string stream_start() override;
  // Streaming: the lines an event sends (possibly none); the last event also sends "data: [DONE]".
  std::string stream_event(const agents::ResponseEvent& event) override;

  // Non-streaming: collects an event; after the last, body() is the chat.completion object.
  void add(const agents::ResponseEvent& event) override;
  std::string body() const override;
  bool failed() const override { return !error_.ok(); }
  const Status& error() const override { return error_; }

 private:
  // seed: only on the chunk with the finish_reason. Carries the logprobs not sent yet.
  std::string chunk(std::string_view delta_json, std::string_view finish_reason,
                    std::optional<uint64_t> seed = std::nullopt);
  int tool_index(const std::string& call_id);

  std::string id_;
  std::string model_;
  int64_t created_ = 0;
  bool include_usage_ = false;
  bool logprobs_requested_ = false;
  boost::json::array logprobs_;  // non-streaming: every entry; streaming: those not sent yet
  std::string content_;
  std::string reasoning_;
  struct ToolCall {
    std::string id, name, arguments;
  };
  std::vector<ToolCall> tool_calls_;
  std::string finish_reason_;
  agents::Usage usage_;
  uint64_t seed_ = 0;
  Status error_;
};

}  // namespace hippo::server::openai
