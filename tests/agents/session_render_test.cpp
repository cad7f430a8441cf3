// render_session on the real tokenizer: a finished conversation renders as the whole conversation
// renders in the reference's encoding, and its answer spans are exactly what the model generated.
#include "agents/response_job.h"
#include "agents/session_render.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/agents/test_tokenizer.h"

#include <catch2/catch.hpp>


namespace hippo::agents {
namespace {

using testing::real_tokenizer;

InputItem item(InputItem::Kind kind, std::string content, std::string call_id = {}) {
  InputItem i;
  i.kind = kind;
  i.content = std::move(content);
  i.tool_call_id = std::move(call_id);
  return i;
}

SessionSettings calculator_settings() {
  SessionSettings settings;
  settings.instructions = "You are a careful assistant with tools.";
  settings.tools.push_back({"calculator", "Evaluates an arithmetic expression.",
                            R"({"type": "object", "properties": {"expression": {"type": "string"}}})"});
  return settings;
}

std::vector<InputItem> calculator_conversation() {
  InputItem call = item(InputItem::Kind::kAssistantMessage, "");
  call.tool_calls.push_back({"call_0", "calculator", R"({"expression": "17 * 23"})"});
  return {item(InputItem::Kind::kUserMessage, "What is 17 * 23?"), call,
          item(InputItem::Kind::kToolResult, "391", "call_0"),
          item(InputItem::Kind::kAssistantMessage, "17 * 23 = 391.")};
}

std::string decode(const RenderedSession& r, size_t begin, size_t end) {
  return real_tokenizer().decode(std::span(r.ids).subspan(begin, end - begin));
}

TEST_CASE("a finished conversation renders as the reference renders it whole, answers marked", "[agents][render]") {
  const SessionSettings settings = calculator_settings();
  auto rendered = render_session(real_tokenizer(), settings, calculator_conversation());
  INFO(rendered.status().to_string());
  REQUIRE(rendered.ok());
  const RenderedSession& r = *rendered;
  REQUIRE(r.answers.size() == 2);
  CHECK(decode(r, r.answers[0].begin, r.answers[0].end) ==
        "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"calculator\">\n<｜DSML｜parameter name=\"expression\" "
        "string=\"true\">17 * 23</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls><｜end▁of▁sentence｜>");
  CHECK(decode(r, r.answers[1].begin, r.answers[1].end) == "17 * 23 = 391.<｜end▁of▁sentence｜>");
  CHECK(r.answers[1].end == r.ids.size());
  // Each answer follows the generation prompt; nothing between the answers is generated.
  for (const RenderedSession::Span& a : r.answers) CHECK(decode(r, 0, a.begin).ends_with("<｜Assistant｜></think>"));
  CHECK(decode(r, r.answers[0].end, r.answers[1].begin) == "<｜User｜><tool_result>391</tool_result><｜Assistant｜></think>");

  // The whole conversation at once (the reference's renderer), up to its final generation prompt.
  std::vector<tokenizer::Message> messages{prompt_messages(settings, true, {})};
  for (const InputItem& i : calculator_conversation()) messages.push_back(input_message(i));
  auto whole = tokenizer::render_chat(messages, chat_options(settings, real_tokenizer()));
  REQUIRE(whole.ok());
  const std::string text = whole->text();
  CHECK(text.starts_with(decode(r, 0, r.ids.size())));
  CHECK(text.substr(decode(r, 0, r.ids.size()).size()) == "<｜Assistant｜></think>");
}

TEST_CASE("thinking keeps an answer's reasoning; chat mode drops it", "[agents][render]") {
  SessionSettings settings = calculator_settings();
  std::vector<InputItem> items = calculator_conversation();
  items.back().reasoning = "The tool said 391.";
  auto chat = render_session(real_tokenizer(), settings, items);
  REQUIRE(chat.ok());
  CHECK(decode(*chat, chat->answers[1].begin, chat->answers[1].end) == "17 * 23 = 391.<｜end▁of▁sentence｜>");
  settings.thinking = true;
  auto thinking = render_session(real_tokenizer(), settings, items);
  INFO(thinking.status().to_string());
  REQUIRE(thinking.ok());
  CHECK(decode(*thinking, thinking->answers[1].begin, thinking->answers[1].end) ==
        "The tool said 391.</think>17 * 23 = 391.<｜end▁of▁sentence｜>");
}

TEST_CASE("conversations that a session could not hold are refused, naming the item", "[agents][render]") {
  const SessionSettings settings = calculator_settings();
  std::vector<InputItem> items = calculator_conversation();

  SECTION("it must end with an answer") {
    items.pop_back();
    auto r = render_session(real_tokenizer(), settings, items);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("must end with an answer") != std::string::npos);
  }
  SECTION("a result must answer a call of the answer before it") {
    items[2].tool_call_id = "call_9";
    auto r = render_session(real_tokenizer(), settings, items);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("item 2: a result for 'call_9'") != std::string::npos);
  }
  SECTION("an answer needs its calls' results first") {
    items.erase(items.begin() + 2);
    auto r = render_session(real_tokenizer(), settings, items);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("item 2: an answer with no input before it") != std::string::npos);
  }
  SECTION("an answer cannot come first") {
    items.erase(items.begin());
    auto r = render_session(real_tokenizer(), settings, items);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("item 0: an answer with no input before it") != std::string::npos);
  }
}

}  // namespace
}  // namespace hippo::agents
