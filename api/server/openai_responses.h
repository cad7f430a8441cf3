// OpenAI's Responses API (POST /v1/responses, GET and DELETE /v1/responses/{id}): request parsing
// into the agents layer's types, and a response's events as the response object or its SSE events.
// JSON only here; http_session.cpp does the I/O.
//
// Like a chat completion, a request carries its conversation (input items, after the conversation
// of previous_response_id when given) and the runtime continues the tenant's idle session holding
// the longest prefix of it. A stored response keeps its conversation with the answer, which is
// where a request naming it as previous_response_id starts.
#pragma once

#include "agents/agent_types.h"
#include "api/server/response_writer.h"
#include "base/status.h"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hippo::server::openai {

struct ResponsesRequest {
  std::string model;
  agents::SessionSettings settings;  // instructions, tools, tool_choice, reasoning
  boost::json::value input;          // a string or an array of items: build_conversation()
  agents::ResponseOptions options;
  bool stream = false;
  bool store = true;
  std::string previous_response_id;
  boost::json::object echo;  // the request's fields the response object repeats
};

// Errors as parse_chat_request's (request_error_status, request_error_code).
Result<ResponsesRequest> parse_responses_request(std::string_view body, const std::string& served_model,
                                                 int64_t default_max_tokens);

// The conversation to answer: `previous` (the stored conversation of previous_response_id) and then
// the request's input items. kInvalidArgument names the input item ("input[2]").
Status build_conversation(const ResponsesRequest& request, std::span<const agents::InputItem> previous,
                          agents::SessionSettings& settings, std::vector<agents::InputItem>& items);

// A conversation as a stored response keeps it (opaque JSON to storage).
std::string conversation_to_json(std::span<const agents::InputItem> items);
Result<std::vector<agents::InputItem>> conversation_from_json(std::string_view text);

// DELETE /v1/responses/{id}.
std::string deleted_body(std::string_view id);

class ResponseObject final : public ResponseWriter {
 public:
  ResponseObject(std::string id, std::string model, int64_t created_at, boost::json::object echo);

  std::string stream_start() override;  // response.created, response.in_progress
  std::string stream_event(const agents::ResponseEvent& event) override;
  void add(const agents::ResponseEvent& event) override;
  std::string body() const override;
  bool failed() const override { return !error_.ok(); }
  const Status& error() const override { return error_; }

  const std::string& id() const { return id_; }
  // The answer as the next item of its conversation: its text and its calls.
  agents::InputItem answer_item() const;

 private:
  // Applies the event to the output items; the SSE events it makes are appended to `sse`.
  void apply(const agents::ResponseEvent& event, std::string* sse);
  void send(std::string* sse, std::string_view type, boost::json::object fields);
  void open_item(std::string* sse, boost::json::object item);
  void close_item(std::string* sse);
  boost::json::object response(std::string_view status) const;

  std::string id_;
  std::string model_;
  int64_t created_at_ = 0;
  boost::json::object echo_;
  boost::json::array output_;  // closed items, then the open one (the last, while open_ is set)
  bool open_ = false;
  std::string open_type_;       // "message", "reasoning", "function_call"
  std::string open_text_;       // its text or arguments so far
  int64_t sequence_ = 0;
  std::string status_ = "in_progress";
  std::optional<std::string> incomplete_reason_;
  agents::Usage usage_;
  agents::InputItem answer_;
  Status error_;
};

}  // namespace hippo::server::openai
