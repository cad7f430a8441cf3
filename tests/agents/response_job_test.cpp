// ResponseJob on the real tokenizer: sampled ids of a known output in, events out — DSML tool calls,
// stop sequences, the token limit — and the log's replay of the same output.
#include "agents/response_job.h"
#include "engine/tokenizer/dsml_syntax.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/agents/test_tokenizer.h"

#include <catch2/catch.hpp>


namespace hippo::agents {
namespace {

using testing::real_tokenizer;

constexpr int32_t kEos = 1;

struct Run {
  std::vector<ResponseEvent> events;
  bool finished = false;
  std::string joined(ResponseEvent::Kind kind) const {
    std::string out;
    for (const ResponseEvent& e : events)
      if (e.kind == kind) out += e.text;
    return out;
  }
};

Run run(ResponseJob& job, const std::vector<int32_t>& ids) {
  Run r;
  for (int32_t id : ids) {
    if (job.accept(id)) {
      r.finished = true;
      break;
    }
  }
  return r;
}

// A tool call in the markup of the tokenizer's chat family (dsml_syntax.h).
std::string tool_output() {
  const tokenizer::DsmlSyntax& x = tokenizer::dsml_syntax(chat_family(real_tokenizer()));
  return "Let me compute.\n\n" + std::string(x.block_open) + "\n" + std::string(x.invoke_open) + "calc\">\n" +
         std::string(x.param_open) + "expr\" string=\"true\">2+2" + std::string(x.param_close) + "\n" +
         std::string(x.invoke_close) + "\n" + std::string(x.block_close);
}

// The same call as the model writes it after a generation prompt that opened the block (a tool
// call required): the block's content only.
std::string in_block_output() {
  const tokenizer::DsmlSyntax& x = tokenizer::dsml_syntax(chat_family(real_tokenizer()));
  return std::string(x.invoke_open) + "calc\">\n" + std::string(x.param_open) + "expr\" string=\"true\">2+2" +
         std::string(x.param_close) + "\n" + std::string(x.invoke_close) + "\n" + std::string(x.block_close);
}

// Feeds a job the ids of `text` and EOS.
void feed(ResponseJob& job, const std::string& text) {
  std::vector<int32_t> ids = real_tokenizer().encode(text);
  ids.push_back(kEos);
  for (size_t i = 0; i < ids.size(); ++i) REQUIRE(job.accept(ids[i]) == (i + 1 == ids.size()));
}

}  // namespace

TEST_CASE("a DSML tool call streams as events and ends the response with tool_calls", "[agents]") {
  std::vector<ResponseEvent> events;
  ResponseJob job(
      real_tokenizer(), kEos, OutputStart{}, {}, [&](const ResponseEvent& e) { events.push_back(e); }, 7);
  const std::string output_text = tool_output();
  std::vector<int32_t> ids = real_tokenizer().encode(output_text);
  ids.push_back(kEos);
  for (size_t i = 0; i < ids.size(); ++i) REQUIRE(job.accept(ids[i]) == (i + 1 == ids.size()));
  CHECK(job.finish_reason() == "tool_calls");
  CHECK(job.ended_with_eos());
  CHECK(job.output() == output_text);
  std::string text, args;
  std::vector<ResponseEvent> begins, dones;
  for (const ResponseEvent& e : events) {
    if (e.kind == ResponseEvent::Kind::kTextDelta) text += e.text;
    if (e.kind == ResponseEvent::Kind::kToolCallArgumentsDelta) args += e.text;
    if (e.kind == ResponseEvent::Kind::kToolCallBegin) begins.push_back(e);
    if (e.kind == ResponseEvent::Kind::kToolCallDone) dones.push_back(e);
  }
  CHECK(text == "Let me compute.");
  REQUIRE(begins.size() == 1);
  CHECK(begins[0].name == "calc");
  CHECK(begins[0].call_id == "call_7");
  REQUIRE(dones.size() == 1);
  CHECK(dones[0].call_id == "call_7");
  CHECK(dones[0].text == args);
  CHECK(args == "{\"expr\": \"2+2\"}");
  // The exact block bytes stay in the turn; the log's replay of the output gives the same turn.
  CHECK(job.turn().raw_tool_calls.find(tokenizer::dsml_syntax(chat_family(real_tokenizer())).block_open) !=
        std::string::npos);
  const AssistantTurn replayed = parse_assistant_output(job.output(), chat_family(real_tokenizer()), OutputStart{}, 7);
  CHECK(replayed.text == job.turn().text);
  CHECK(replayed.raw_tool_calls == job.turn().raw_tool_calls);
  REQUIRE(replayed.calls.size() == 1);
  CHECK(replayed.calls[0].id == "call_7");
  CHECK(replayed.calls[0].arguments == job.turn().calls[0].arguments);
}

TEST_CASE("a stop sequence ends the answer before it, the limit ends it with length", "[agents]") {
  std::string text;
  ResponseOptions options;
  options.stop = {"STOP"};
  ResponseJob job(
      real_tokenizer(), kEos, OutputStart{}, options, [&](const ResponseEvent& e) { text += e.text; }, 0);
  Run r = run(job, real_tokenizer().encode("Hello world. STOP and more"));
  CHECK(r.finished);
  CHECK(job.finish_reason() == "stop");
  CHECK(text == "Hello world. ");

  std::string limited;
  options = {};
  options.max_output_tokens = 3;
  ResponseJob capped(
      real_tokenizer(), kEos, OutputStart{}, options, [&](const ResponseEvent& e) { limited += e.text; }, 0);
  const std::vector<int32_t> ids = real_tokenizer().encode("one two three four five six");
  Run c = run(capped, ids);
  CHECK(c.finished);
  CHECK(capped.finish_reason() == "length");
  CHECK(capped.sampled().size() == 3);
  CHECK(limited == real_tokenizer().decode(std::vector<int32_t>(ids.begin(), ids.begin() + 3)));
}

TEST_CASE("special tokens are left out of the text, as skip_special_tokens does, the ids are kept", "[agents]") {
  const std::optional<int32_t> placeholder = real_tokenizer().added_token_id("<｜place▁holder▁no▁7｜>");
  REQUIRE(placeholder.has_value());
  REQUIRE(real_tokenizer().added_vocabulary().by_id(*placeholder)->special);
  std::string text;
  ResponseJob job(
      real_tokenizer(), kEos, OutputStart{}, ResponseOptions{}, [&](const ResponseEvent& e) { text += e.text; }, 0);
  std::vector<int32_t> ids = real_tokenizer().encode("Hello");
  ids.push_back(*placeholder);
  for (int32_t id : real_tokenizer().encode(" world")) ids.push_back(id);
  ids.push_back(kEos);
  Run r = run(job, ids);
  CHECK(r.finished);
  CHECK(text == "Hello world");
  CHECK(job.output() == "Hello world");
  CHECK(job.sampled() == ids);
  // Text that spells a special token is the model's words, not the token: it stays.
  std::string spelled;
  ResponseJob words(
      real_tokenizer(), kEos, OutputStart{}, ResponseOptions{}, [&](const ResponseEvent& e) { spelled += e.text; }, 0);
  std::vector<int32_t> plain;
  real_tokenizer().encode_plain("a <｜place▁holder▁no▁7｜> b", plain);
  plain.push_back(kEos);
  run(words, plain);
  CHECK(spelled == "a <｜place▁holder▁no▁7｜> b");
}

TEST_CASE("thinking output streams reasoning, then the answer", "[agents]") {
  std::string reasoning, answer;
  ResponseJob job(
      real_tokenizer(), kEos, OutputStart{true, false}, {},
      [&](const ResponseEvent& e) {
        if (e.kind == ResponseEvent::Kind::kReasoningDelta) reasoning += e.text;
        if (e.kind == ResponseEvent::Kind::kTextDelta) answer += e.text;
      },
      0);
  std::vector<int32_t> ids = real_tokenizer().encode("Think first.</think>The answer.");
  ids.push_back(kEos);
  run(job, ids);
  CHECK(reasoning == "Think first.");
  CHECK(answer == "The answer.");
  CHECK(job.finish_reason() == "stop");
}

TEST_CASE("with a tool call required, the output starts inside the block and is a call", "[agents]") {
  const tokenizer::DsmlSyntax& x = tokenizer::dsml_syntax(chat_family(real_tokenizer()));
  const std::string opening = "\n\n" + std::string(x.block_open) + "\n";  // the generation prompt's end
  // A job that saw the block open gives the reference events.
  std::vector<ResponseEvent> reference;
  ResponseJob saw_open(
      real_tokenizer(), kEos, OutputStart{}, {}, [&](const ResponseEvent& e) { reference.push_back(e); }, 3);
  feed(saw_open, opening + in_block_output());
  REQUIRE(saw_open.finish_reason() == "tool_calls");
  for (const bool thinking : {false, true}) {
    INFO("thinking " << thinking);
    std::vector<ResponseEvent> events;
    ResponseJob job(
        real_tokenizer(), kEos, OutputStart{thinking, true}, {}, [&](const ResponseEvent& e) { events.push_back(e); },
        3);
    feed(job, in_block_output());
    CHECK(job.finish_reason() == "tool_calls");
    CHECK(job.output() == in_block_output());
    REQUIRE(events.size() == reference.size());
    for (size_t i = 0; i < events.size(); ++i) {
      CHECK(events[i].kind == reference[i].kind);
      CHECK(events[i].call_id == reference[i].call_id);
      CHECK(events[i].name == reference[i].name);
      CHECK(events[i].text == reference[i].text);
    }
    CHECK(events.front().kind == ResponseEvent::Kind::kToolCallBegin);
    CHECK(events.front().call_id == "call_3");
    CHECK(events.back().text == R"({"expr": "2+2"})");
    const AssistantTurn& turn = job.turn();
    CHECK(turn.text.empty());
    CHECK(turn.reasoning.empty());
    CHECK(turn.raw_tool_calls == in_block_output());  // the model's bytes; the prompt holds the opening
    CHECK(opening + turn.raw_tool_calls == saw_open.turn().raw_tool_calls);
    REQUIRE(turn.calls.size() == 1);
    CHECK(turn.calls[0].name == "calc");
    // The log's replay of the output gives the same turn; without the option it would be text.
    const AssistantTurn replayed =
        parse_assistant_output(job.output(), chat_family(real_tokenizer()), OutputStart{thinking, true}, 3);
    CHECK(replayed.raw_tool_calls == turn.raw_tool_calls);
    CHECK(replayed.text == turn.text);
    REQUIRE(replayed.calls.size() == 1);
    CHECK(replayed.calls[0].id == "call_3");
    CHECK(replayed.calls[0].arguments == turn.calls[0].arguments);
    CHECK(parse_assistant_output(job.output(), chat_family(real_tokenizer()), OutputStart{thinking, false}, 3)
              .calls.empty());
  }
  // Output that is no call: answer text, and the response stops.
  std::string text;
  ResponseJob job(
      real_tokenizer(), kEos, OutputStart{false, true}, {}, [&](const ResponseEvent& e) { text += e.text; }, 0);
  feed(job, "I would rather not.");
  CHECK(job.finish_reason() == "stop");
  CHECK(text == "I would rather not.");
  CHECK(job.turn().calls.empty());
}

}  // namespace hippo::agents
