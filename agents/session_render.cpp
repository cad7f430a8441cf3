#include "agents/session_render.h"

#include "agents/response_job.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

namespace hippo::agents {

std::vector<tokenizer::Message> prompt_messages(const SessionSettings& settings, bool first,
                                                const std::vector<tokenizer::Message>& inputs) {
  std::vector<tokenizer::Message> messages;
  if (first && !settings.instructions.empty()) {
    tokenizer::Message m;
    m.role = tokenizer::Role::kSystem;
    m.content = settings.instructions;
    messages.push_back(std::move(m));
  }
  messages.insert(messages.end(), inputs.begin(), inputs.end());
  return messages;
}

tokenizer::Message input_message(const InputItem& item) {
  tokenizer::Message m;
  m.content = item.content;
  switch (item.kind) {
    case InputItem::Kind::kUserMessage: m.role = tokenizer::Role::kUser; break;
    case InputItem::Kind::kToolResult:
      m.role = tokenizer::Role::kTool;
      m.tool_call_id = item.tool_call_id;
      break;
    case InputItem::Kind::kAssistantMessage:
      m.role = tokenizer::Role::kAssistant;
      m.reasoning = item.reasoning;
      m.tool_calls = item.tool_calls;
      break;
  }
  return m;
}

Result<RenderedSession> render_session(const tokenizer::Tokenizer& tokenizer, const SessionSettings& settings,
                                       std::span<const InputItem> items) {
  tokenizer::ChatEncoder encoder(tokenizer, chat_options(settings, tokenizer));
  RenderedSession out;
  std::vector<tokenizer::Message> inputs;
  std::vector<std::string> open_calls;  // of the latest answer, without a result yet
  for (std::size_t i = 0; i < items.size(); ++i) {
    const InputItem& item = items[i];
    if (item.kind != InputItem::Kind::kAssistantMessage) {
      if (item.kind == InputItem::Kind::kToolResult) {
        const auto open = std::find(open_calls.begin(), open_calls.end(), item.tool_call_id);
        if (open == open_calls.end())
          return Status(ErrorCode::kInvalidArgument,
                        fmt::format("item {}: a result for '{}', which is not a call of the answer before it", i,
                                    item.tool_call_id));
        open_calls.erase(open);
      }
      inputs.push_back(input_message(item));
      continue;
    }
    if (inputs.empty())
      return Status(ErrorCode::kInvalidArgument, fmt::format("item {}: an answer with no input before it", i));
    if (!open_calls.empty())
      return Status(ErrorCode::kInvalidArgument,
                    fmt::format("item {}: an answer while call '{}' has no result", i, open_calls.front()));
    HIPPO_ASSIGN_OR_RETURN(tokenizer::ChatSuffix prompt,
                           encoder.encode_chat_suffix(prompt_messages(settings, out.ids.empty(), inputs), true));
    out.ids.insert(out.ids.end(), prompt.ids.begin(), prompt.ids.end());
    inputs.clear();
    // As the runtime renders a turn it parsed (AssistantTurn::message): reasoning, possibly empty, in
    // thinking mode only.
    tokenizer::Message answer = input_message(item);
    if (settings.thinking) answer.reasoning = item.reasoning.value_or("");
    else answer.reasoning.reset();
    HIPPO_ASSIGN_OR_RETURN(tokenizer::ChatSuffix generated, encoder.encode_chat_suffix(std::span(&answer, 1), false));
    out.answers.push_back({out.ids.size(), out.ids.size() + generated.ids.size()});
    out.ids.insert(out.ids.end(), generated.ids.begin(), generated.ids.end());
    open_calls.clear();
    for (const tokenizer::ToolCall& call : item.tool_calls) open_calls.push_back(call.id);
  }
  if (!inputs.empty())
    return Status(ErrorCode::kInvalidArgument, "the conversation must end with an answer (an assistant item)");
  return out;
}

}  // namespace hippo::agents
