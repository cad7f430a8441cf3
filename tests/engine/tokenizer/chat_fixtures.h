// The chat and completion fixtures that scripts/gen_chat_fixtures.py writes from DeepSeek's
// reference encoder (deepseek-recipe), read into hippo's types.
#pragma once

#include "engine/tokenizer/chat_encoding.h"

#include <optional>
#include <string>
#include <vector>

namespace hippo::tokenizer::testing {

struct ChatFixture {
  std::string name;
  ChatOptions options;
  std::vector<Message> messages;
  std::string prompt;                        // the reference's prompt text
  std::optional<std::vector<TokenId>> ids;   // nullopt: the reference refuses to encode it
};

struct ExpectedToolCall {
  std::string name;
  std::string arguments;  // JSON text
};

struct CompletionFixture {
  std::string name;
  ModelFamily family;
  bool thinking;
  std::string completion;  // what the model generates after the generation prompt (no EOS)
  std::string reasoning;
  std::string content;
  std::string raw_tool_calls;
  std::vector<ExpectedToolCall> tool_calls;
};

struct Fixtures {
  std::vector<ChatFixture> chats;
  std::vector<CompletionFixture> completions;
};

// Loaded once per test binary; FAILs the current test if the file is missing or malformed.
const Fixtures& chat_fixtures();

}  // namespace hippo::tokenizer::testing
