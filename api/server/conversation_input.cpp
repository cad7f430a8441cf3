#include "api/server/conversation_input.h"

#include <boost/json/parse.hpp>
#include <fmt/format.h>

#include <algorithm>

namespace hippo::server {

Status invalid_request(std::string message) { return Status(ErrorCode::kInvalidArgument, std::move(message)); }

Status ConversationInput::system(std::string_view text, std::string_view where) {
  if (!items_.empty())
    return invalid_request(fmt::format(
        "{}: system messages must come before the conversation (they are the session's instructions)", where));
  if (!instructions_.empty()) instructions_ += "\n\n";
  instructions_ += text;
  return Status::ok_status();
}

Status ConversationInput::no_open_calls(std::string_view where) const {
  if (open_calls_.empty()) return Status::ok_status();
  return invalid_request(
      fmt::format("{}: tool call{} {} of the assistant turn at {} {} no result yet (each call needs its "
                  "tool result before the next message)",
                  where, open_calls_.size() == 1 ? "" : "s", fmt::join(open_calls_, ", "), turn_where_,
                  open_calls_.size() == 1 ? "has" : "have"));
}

void ConversationInput::add(agents::InputItem item, std::string_view where) {
  last_where_ = where;
  if (item.kind == agents::InputItem::Kind::kAssistantMessage) turn_where_ = where;
  items_.push_back(std::move(item));
}

Status ConversationInput::user(std::string text, std::string_view where) {
  HIPPO_RETURN_IF_ERROR(no_open_calls(where));
  agents::InputItem item;
  item.kind = agents::InputItem::Kind::kUserMessage;
  item.content = std::move(text);
  add(std::move(item), where);
  return Status::ok_status();
}

Status ConversationInput::assistant(std::string text, std::optional<std::string> reasoning, std::string_view where) {
  HIPPO_RETURN_IF_ERROR(no_open_calls(where));
  agents::InputItem item;
  item.kind = agents::InputItem::Kind::kAssistantMessage;
  item.content = std::move(text);
  item.reasoning = std::move(reasoning);
  add(std::move(item), where);
  return Status::ok_status();
}

Status ConversationInput::call(tokenizer::ToolCall call, std::string_view where) {
  if (call.id.empty()) return invalid_request(fmt::format("{}: a tool call needs an id", where));
  if (call.name.empty())
    return invalid_request(fmt::format("{}: tool call '{}' needs a function name", where, call.id));
  boost::system::error_code ec;
  const boost::json::value arguments = boost::json::parse(call.arguments, ec);
  if (ec || !arguments.is_object())
    return invalid_request(fmt::format("{}: the arguments of tool call '{}' are not a JSON object", where, call.id));
  if (!call_ids_.insert(call.id).second)
    return invalid_request(fmt::format("{}: tool call id '{}' is used twice in the conversation", where, call.id));
  if (!assistant_open()) HIPPO_RETURN_IF_ERROR(assistant("", std::nullopt, where));
  open_calls_.push_back(call.id);
  items_.back().tool_calls.push_back(std::move(call));
  return Status::ok_status();
}

Status ConversationInput::tool_result(std::string call_id, std::string output, std::string_view where) {
  auto open = std::find(open_calls_.begin(), open_calls_.end(), call_id);
  if (open == open_calls_.end()) {
    return invalid_request(
        fmt::format("{}: tool result for '{}', which matches no call of the latest assistant turn that is "
                    "still without a result",
                    where, call_id));
  }
  open_calls_.erase(open);
  agents::InputItem item;
  item.kind = agents::InputItem::Kind::kToolResult;
  item.tool_call_id = std::move(call_id);
  item.content = std::move(output);
  add(std::move(item), where);
  return Status::ok_status();
}

Status ConversationInput::finish(agents::SessionSettings& settings, std::vector<agents::InputItem>& items,
                                 Ending ending) {
  if (items_.empty()) return invalid_request("the conversation needs at least one user message");
  HIPPO_RETURN_IF_ERROR(no_open_calls("the end of the conversation"));
  const bool answered = items_.back().kind == agents::InputItem::Kind::kAssistantMessage;
  if (ending == Ending::kAwaitingAnswer && answered)
    return invalid_request(
        fmt::format("{}: the conversation must end with a user message or tool results for the model to "
                    "answer, not an assistant message",
                    last_where_));
  if (ending == Ending::kAnswered && !answered)
    return invalid_request(
        fmt::format("{}: a finished conversation must end with the assistant's answer", last_where_));
  if (!instructions_.empty()) {
    if (!settings.instructions.empty()) settings.instructions += "\n\n";
    settings.instructions += instructions_;
  }
  items = std::move(items_);
  return Status::ok_status();
}

}  // namespace hippo::server
