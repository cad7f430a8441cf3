// A stateless request's conversation, item by item, as the OpenAI endpoints send it (chat messages,
// Responses input items): checked as it is built, then handed to the agents layer as session
// instructions plus input items (AgentRuntime::respond_to_conversation).
//
// What is refused, each error naming the item (`where`: "messages[3]", "input[2]"):
//   - a system message after the conversation began (system messages are the session's instructions);
//   - a tool call whose arguments are not a JSON object, or whose id repeats an earlier call's;
//   - a tool result for no open call of the latest assistant turn, or answered already;
//   - a user or assistant message while calls of the latest assistant turn have no result yet;
//   - a conversation that does not end with a user message or tool results (the model answers it),
//     or, for a finished conversation, with an assistant message.
#pragma once

#include "agents/agent_types.h"
#include "base/status.h"

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace hippo::server {

class ConversationInput {
 public:
  Status system(std::string_view text, std::string_view where);
  Status user(std::string text, std::string_view where);
  // One assistant turn's text; its calls follow with call() (a chat message gives both at once).
  Status assistant(std::string text, std::optional<std::string> reasoning, std::string_view where);
  // A call of the assistant turn just given; with no such turn, it starts one without text (the
  // Responses API lists an answer's function calls as items of their own).
  Status call(tokenizer::ToolCall call, std::string_view where);
  Status tool_result(std::string call_id, std::string output, std::string_view where);

  // How a conversation must end: with inputs for the model to answer (a request), or with the
  // model's answer (a finished conversation, as `hippo model render` takes it).
  enum class Ending { kAwaitingAnswer, kAnswered };

  // The instructions and items, once the conversation ends as it must.
  Status finish(agents::SessionSettings& settings, std::vector<agents::InputItem>& items,
                Ending ending = Ending::kAwaitingAnswer);

 private:
  Status no_open_calls(std::string_view where) const;
  void add(agents::InputItem item, std::string_view where);
  // The last item is an assistant turn, which may take more calls.
  bool assistant_open() const {
    return !items_.empty() && items_.back().kind == agents::InputItem::Kind::kAssistantMessage;
  }

  std::string instructions_;
  std::vector<agents::InputItem> items_;
  std::vector<std::string> open_calls_;  // of the latest assistant turn, without a result yet
  std::set<std::string> call_ids_;       // every call so far
  std::string last_where_;               // the last item, for errors about the end
  std::string turn_where_;               // the latest assistant turn
};

// A request the parsers refuse (the conversation, OpenAI chat and Responses bodies): kInvalidArgument.
Status invalid_request(std::string message);

}  // namespace hippo::server
