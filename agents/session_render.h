// How a session's conversation becomes token ids: the runtime's rendering (a response's prompt, the
// log's replay) and the same rendering of a whole finished conversation, which says which ids the
// model generated (`hippo model render`, the training corpus of scripts/gen_agent_corpus.py). Both go
// through the functions here, so a model trained on rendered conversations sees what serving gives it.
#pragma once

#include "agents/agent_types.h"
#include "base/status.h"
#include "engine/tokenizer/chat_encoding.h"
#include "engine/tokenizer/tokenizer.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace hippo::agents {

// What one response renders: the inputs, after the system block when they are the session's first.
std::vector<tokenizer::Message> prompt_messages(const SessionSettings& settings, bool first,
                                                const std::vector<tokenizer::Message>& inputs);

// The chat-encoding message of an input item.
tokenizer::Message input_message(const InputItem& item);

// A finished conversation as a live session holds it: every run of user messages and tool results
// rendered with the generation prompt, and every assistant item as the model's answer to it (its
// reasoning kept in thinking mode, its calls in the tool-call block, then EOS).
struct RenderedSession {
  struct Span {
    std::size_t begin = 0;
    std::size_t end = 0;
  };
  std::vector<int32_t> ids;
  std::vector<Span> answers;  // [begin, end) of each answer's ids: what the model generated
};

// The items must alternate as a session's turns do: one or more inputs, then the assistant's answer;
// it ends with an answer, and a tool result answers a call of the answer before it (else
// kInvalidArgument naming the item).
Result<RenderedSession> render_session(const tokenizer::Tokenizer& tokenizer, const SessionSettings& settings,
                                       std::span<const InputItem> items);

}  // namespace hippo::agents
