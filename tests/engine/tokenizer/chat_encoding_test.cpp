// The chat encoding against DeepSeek's reference encoder (deepseek-recipe) on generated fixtures:
// prompt text byte for byte and token ids; the incremental encoder against the same reference.
#include "engine/tokenizer/chat_encoding.h"
#include "tests/engine/tokenizer/chat_fixtures.h"
#include "tests/engine/tokenizer/test_data.h"

#include <catch2/catch.hpp>

#include <algorithm>

namespace hippo::tokenizer {
namespace {

using testing::chat_fixtures;
using testing::deepseek_tokenizer;

Message message(Role role, std::string content, std::optional<std::string> reasoning = std::nullopt) {
  Message m;
  m.role = role;
  m.content = std::move(content);
  m.reasoning = std::move(reasoning);
  return m;
}

Message user(std::string content) { return message(Role::kUser, std::move(content)); }

Message answer(std::string content, std::optional<std::string> reasoning = std::nullopt) {
  return message(Role::kAssistant, std::move(content), std::move(reasoning));
}

// "at byte N: ours …| reference …" around the first difference, for readable failures.
std::string first_difference(const std::string& ours, const std::string& reference) {
  std::size_t at = 0;
  while (at < ours.size() && at < reference.size() && ours[at] == reference[at]) ++at;
  const std::size_t from = at > 60 ? at - 60 : 0;
  return "at byte " + std::to_string(at) + ": ours «" + ours.substr(from, 120) + "» reference «" +
         reference.substr(from, 120) + "»";
}

TEST_CASE("prompts are byte-identical to the reference and ids equal its encoding", "[chat]") {
  const Tokenizer& tok = deepseek_tokenizer();
  std::size_t n_with_ids = 0;
  for (const testing::ChatFixture& f : chat_fixtures().chats) {
    INFO(f.name);
    const Result<RenderedPrompt> prompt = render_chat(f.messages, f.options);
    REQUIRE(prompt.ok());
    const std::string text = prompt->text();
    INFO(first_difference(text, f.prompt));
    CHECK(text == f.prompt);
    const Result<std::vector<TokenId>> ids = encode_prompt(tok, *prompt);
    if (f.ids) {
      ++n_with_ids;
      REQUIRE(ids.ok());
      CHECK(*ids == *f.ids);
    } else {
      CHECK_FALSE(ids.ok());  // V4.1's <｜System｜> is not in the V4 tokenizer, for the reference too
    }
  }
  CHECK(chat_fixtures().chats.size() >= 90);
  CHECK(n_with_ids >= 40);
}

TEST_CASE("the V4.1 chat-mode vector of the architecture spec §7.1", "[chat]") {
  const std::vector<Message> messages{user("Say hello and tell me what model you are.")};
  ChatOptions options;
  options.family = ModelFamily::kV41;
  options.thinking = false;
  const Result<RenderedPrompt> prompt = render_chat(messages, options);
  REQUIRE(prompt.ok());
  const Result<std::vector<TokenId>> ids = encode_prompt(deepseek_tokenizer(), *prompt);
  REQUIRE(ids.ok());
  CHECK(*ids == std::vector<TokenId>{0, 128803, 63006, 44388, 305, 4575, 678, 1205, 2645, 440, 477, 16, 128804, 128822});
}

// A session that the reference renders without dropping reasoning (tools present), fed turn by
// turn: each model answer follows the generation prompt it answers.
bool is_incremental_candidate(const testing::ChatFixture& f) {
  if (f.options.tools.empty() || f.options.tool_choice == ToolChoice::kRequired) return false;
  for (const Message& m : f.messages) {
    if (m.role != Role::kAssistant) continue;
    if (m.prefix || m.reasoning.has_value() != f.options.thinking) return false;
  }
  return true;
}

TEST_CASE("incremental encoding renders only suffixes and equals the reference", "[chat]") {
  // The V4 tokenizer lacks V4.1's <｜System｜>; a copy with it added stands in for V4.1's, so that
  // V4.1 sessions are checked too (ids of everything else are the V4 ones).
  const std::string json = testing::read_file(std::filesystem::path(HIPPO_TOKENIZER_DIR) / "tokenizer.json");
  const std::size_t added = json.find('[', json.find("\"added_tokens\"")) + 1;
  REQUIRE(added > 1);
  std::string with_system = json;
  with_system.insert(added, R"({"id":129280,"content":"<｜System｜>","single_word":false,"lstrip":false,)"
                            R"("rstrip":false,"normalized":false,"special":true},)");
  const Result<Tokenizer> v41_tokenizer = Tokenizer::parse(with_system, "tokenizer.json + <｜System｜>");
  REQUIRE(v41_tokenizer.ok());

  std::size_t n_sessions = 0;
  for (const testing::ChatFixture& f : chat_fixtures().chats) {
    if (!is_incremental_candidate(f)) continue;
    INFO(f.name);
    ++n_sessions;
    ChatEncoder encoder(*v41_tokenizer, f.options);
    std::string text;
    std::vector<TokenId> ids;
    // Calls: [system…, user turn] + prompt, then [answer, next user turn] + prompt, …
    std::size_t begin = 0;
    while (begin < f.messages.size()) {
      std::size_t end = begin + 1;
      while (end < f.messages.size() && f.messages[end].role != Role::kAssistant) ++end;
      const Result<ChatSuffix> suffix =
          encoder.encode_chat_suffix(std::span(f.messages).subspan(begin, end - begin), /*add_generation_prompt=*/true);
      REQUIRE(suffix.ok());
      text += suffix->text;
      ids.insert(ids.end(), suffix->ids.begin(), suffix->ids.end());
      begin = end;
    }
    INFO(first_difference(text, f.prompt));
    CHECK(text == f.prompt);
    const Result<RenderedPrompt> full = render_chat(f.messages, f.options);
    REQUIRE(full.ok());
    const Result<std::vector<TokenId>> full_ids = encode_prompt(*v41_tokenizer, *full);
    REQUIRE(full_ids.ok());
    CHECK(ids == *full_ids);
    if (f.ids) CHECK(ids == *f.ids);
    CHECK(encoder.n_tokens() == ids.size());
  }
  CHECK(n_sessions >= 20);
}

TEST_CASE("incremental misuse is refused and leaves the encoder usable", "[chat]") {
  ChatOptions options;
  options.family = ModelFamily::kV4;
  options.thinking = true;
  ChatEncoder encoder(deepseek_tokenizer(), options);
  const std::vector<Message> hi{user("hi")};
  REQUIRE(encoder.encode_chat_suffix(hi, true).ok());
  const std::size_t n = encoder.n_tokens();
  // After a generation prompt, a user message cannot come before the answer.
  CHECK(encoder.encode_chat_suffix(hi, true).status().code() == ErrorCode::kFailedPrecondition);
  // Thinking mode: an answer without reasoning does not continue "<think>".
  const std::vector<Message> bare_answer{answer("hello")};
  CHECK(encoder.encode_chat_suffix(bare_answer, false).status().code() == ErrorCode::kFailedPrecondition);
  CHECK(encoder.n_tokens() == n);
  const std::vector<Message> reasoned{answer("hello", "r")};
  const Result<ChatSuffix> ok = encoder.encode_chat_suffix(reasoned, false);
  REQUIRE(ok.ok());
  CHECK(ok->text == "r</think>hello<｜end▁of▁sentence｜>");
  const std::vector<Message> late_system{message(Role::kSystem, "late")};
  CHECK(encoder.encode_chat_suffix(late_system, false).status().code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("replayed tool-call bytes are rendered verbatim with DSML markers as special tokens", "[chat]") {
  ChatOptions options;
  options.family = ModelFamily::kV4;
  options.thinking = false;
  options.tools.push_back({"f", std::nullopt, std::nullopt});
  const std::string raw = "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
  Message from_model = answer("");
  from_model.raw_tool_calls = raw;
  Message structured = answer("");
  structured.tool_calls = {{"1", "f", "{}"}};
  const std::vector<Message> a{user("q"), from_model};
  const std::vector<Message> b{user("q"), structured};
  const Result<RenderedPrompt> pa = render_chat(a, options);
  const Result<RenderedPrompt> pb = render_chat(b, options);
  REQUIRE(pa.ok());
  REQUIRE(pb.ok());
  CHECK(pa->text() == pb->text());
  CHECK(*encode_prompt(deepseek_tokenizer(), *pa) == *encode_prompt(deepseek_tokenizer(), *pb));
}

// A tool call required: the generation prompt opens the block, and the model's answer is its content.
TEST_CASE("an answer to a prompt that opened the tool-call block continues it as the model wrote it", "[chat]") {
  const Tokenizer& tok = deepseek_tokenizer();
  const TokenId eos = *tok.added_token_id("<｜end▁of▁sentence｜>");
  const std::string invoke = "<｜DSML｜invoke name=\"f\">\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
  for (const bool thinking : {false, true}) {
    INFO("thinking " << thinking);
    ChatOptions options;
    options.family = ModelFamily::kV4;
    options.thinking = thinking;
    options.tools.push_back({"f", std::nullopt, std::nullopt});
    options.tool_choice = ToolChoice::kRequired;
    CHECK(generation_prompt_opens_tool_calls(options));
    ChatEncoder encoder(tok, options);
    const Result<ChatSuffix> prompt = encoder.encode_chat_suffix(std::vector{user("q")}, true);
    REQUIRE(prompt.ok());
    CHECK(prompt->text.ends_with(std::string(thinking ? "<think>" : "</think>") + "\n\n<｜DSML｜tool_calls>\n"));
    // The answer's ids are those of the model's bytes after the prompt, encoded on their own: a
    // leading newline stays a token of its own (encoded with the prompt's ">\n" it would merge).
    for (const std::string& body : {invoke, "\n" + invoke, std::string()}) {
      INFO(body);
      ChatEncoder copy = encoder;
      Message from_model = answer("");
      if (thinking) from_model.reasoning = "";
      if (!body.empty()) {
        from_model.raw_tool_calls = body;
        from_model.tool_calls = {{"call_0", "f", "{}"}};
      }
      const Result<ChatSuffix> a = copy.encode_chat_suffix(std::vector{from_model}, false);
      INFO(a.status().to_string());
      REQUIRE(a.ok());
      CHECK(a->text == body + "<｜end▁of▁sentence｜>");
      std::vector<TokenId> expected = tok.encode(body);
      expected.push_back(eos);
      CHECK(a->ids == expected);
    }
    // Structured calls render as the canonical block content; reasoning cannot precede it.
    Message structured = answer("");
    structured.tool_calls = {{"call_0", "f", "{}"}};
    ChatEncoder copy = encoder;
    const Result<ChatSuffix> s = copy.encode_chat_suffix(std::vector{structured}, false);
    REQUIRE(s.ok());
    CHECK(s->text == invoke + "<｜end▁of▁sentence｜>");
    Message reasoned = structured;
    reasoned.reasoning = "first, think";
    CHECK(encoder.encode_chat_suffix(std::vector{reasoned}, false).status().code() == ErrorCode::kFailedPrecondition);
    CHECK(encoder.encode_chat_suffix(std::vector{structured}, false).ok());  // the refusal changed nothing
  }

  // Chat mode: turn by turn equals the whole conversation as the reference renders it.
  ChatOptions options;
  options.family = ModelFamily::kV4;
  options.thinking = false;
  options.tools.push_back({"f", std::nullopt, std::nullopt});
  options.tool_choice = ToolChoice::kRequired;
  Message call = answer("");
  call.tool_calls = {{"call_0", "f", "{}"}};
  Message result = message(Role::kTool, "done");
  result.tool_call_id = "call_0";
  const std::vector<Message> conversation{user("q"), call, result};
  const Result<RenderedPrompt> whole = render_chat(conversation, options);
  REQUIRE(whole.ok());
  ChatEncoder encoder(tok, options);
  std::string text;
  std::vector<TokenId> ids;
  for (const auto& [batch, prompt] : {std::pair{std::vector{conversation[0]}, true}, std::pair{std::vector{call}, false},
                                      std::pair{std::vector{result}, true}}) {
    const Result<ChatSuffix> part = encoder.encode_chat_suffix(batch, prompt);
    REQUIRE(part.ok());
    text += part->text;
    ids.insert(ids.end(), part->ids.begin(), part->ids.end());
  }
  CHECK(text == whole->text());
  CHECK(ids == *encode_prompt(tok, *whole));
}

}  // namespace
}  // namespace hippo::tokenizer

namespace hippo::tokenizer {
namespace {

TEST_CASE("image placeholders expand into spans of the spec's length", "[chat]") {
  const TokenId placeholder = *deepseek_tokenizer().added_token_id(kImagePlaceholder);
  const std::vector<TokenId> ids{0, 5, placeholder, 7, placeholder};
  const std::vector<ImageGrid> grids{{2, 3}, {1, 1}};
  const Result<std::vector<TokenId>> expanded = expand_image_spans(ids, placeholder, grids);
  REQUIRE(expanded.ok());
  // 2·(3+1)+2 = 10 and 1·(1+1)+2 = 4 positions.
  CHECK(expanded->size() == 3 + 10 + 4);
  CHECK(std::count(expanded->begin(), expanded->end(), kImageSpanTokenId) == 14);
  CHECK((*expanded)[2] == kImageSpanTokenId);
  CHECK((*expanded)[12] == 7);
  CHECK(expand_image_spans(ids, placeholder, std::span(grids).first(1)).status().code() == ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace hippo::tokenizer
