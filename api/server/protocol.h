// The agents protocol on /v1/agents (docs/protocol.md): client events parsed into the agents
// layer's types, and the agents layer's results and response events as server events. JSON only
// here; the WebSocket session adds `seq` and `event_id` and does the I/O.
#pragma once

#include "agents/agent_types.h"

#include <boost/json/object.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hippo::server::protocol {

// Error codes of protocol errors (the agents layer's errors use error_code_name()).
inline constexpr std::string_view kInvalidJson = "invalid_json";      // not JSON, or not an object
inline constexpr std::string_view kInvalidEvent = "invalid_event";    // no string "type"
inline constexpr std::string_view kUnknownType = "unknown_type";      // a type this server does not know
inline constexpr std::string_view kInvalidField = "invalid_field";    // a field missing or of the wrong type/value
inline constexpr std::string_view kBinaryFrame = "binary_frame";      // events are text frames
inline constexpr std::string_view kShuttingDown = "shutting_down";    // the server is stopping
inline constexpr std::string_view kStreamGap = "stream_gap";          // session.resume's after_seq cannot be replayed

enum class ClientEventType {
  kSessionCreate,
  kSessionResume,
  kInputAppend,
  kResponseCreate,
  kResponseCancel,
  kSessionSnapshot,
  kSessionClose,
  kSessionFork,
};

struct ClientEvent {
  ClientEventType type = ClientEventType::kSessionCreate;
  std::string type_name;
  std::string event_id;                  // echoed in every server event that answers this one
  std::string session_id;                // all but session.create
  agents::SessionSettings settings;      // session.create
  std::vector<agents::InputItem> items;  // input.append
  agents::ResponseOptions response;      // response.create
  std::optional<int64_t> after_seq;      // session.resume: replay the session's stream after this session_seq
};

struct ParseError {
  std::string code;
  std::string message;
};

struct ParsedEvent {
  bool ok = false;
  ClientEvent event;  // event.event_id is filled when it could be read, also on error
  ParseError error;
};

// Parses one text frame. default_max_output_tokens applies when response.create has none.
ParsedEvent parse_client_event(std::string_view text, int64_t default_max_output_tokens);

// Server events, without `seq` and `event_id`.
boost::json::object error_event(std::string_view code, std::string_view message);
// `rate_limited`: retry_after (seconds) says when the tenant may try again.
boost::json::object error_event(std::string_view code, std::string_view message, int64_t retry_after_seconds);
boost::json::object session_forked_event(const std::string& session_id, const std::string& forked_from);
boost::json::object session_event(std::string_view type, const std::string& session_id);
boost::json::object session_view_event(std::string_view type, const agents::SessionView& view);
boost::json::object input_appended_event(const std::string& session_id, size_t n_items);
boost::json::object response_created_event(const std::string& session_id, const std::string& response_id);
// The event a response event becomes.
boost::json::object response_event(const agents::ResponseEvent& event, const std::string& session_id,
                                   const std::string& response_id);
boost::json::object usage_json(const agents::Usage& usage);

}  // namespace hippo::server::protocol
