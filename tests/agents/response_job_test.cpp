// ResponseJob on the real tokenizer: sampled ids of a known output in, events out — DSML tool calls,
// stop sequences, the token limit — and the log's replay of the same output.
#include "agents/response_job.h"
#include "engine/tokenizer/dsml_syntax.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/engine/test_paths.h"

#include <catch2/catch.hpp>

#include <filesystem>

namespace hippo::agents {
namespace {

const tokenizer::Tokenizer& tok() {
  static tokenizer::Tokenizer t = [] {
    auto loaded = tokenizer::Tokenizer::load(std::filesystem::path(engine::testing::tokenizer_dir()) / "tokenizer.json");
    REQUIRE(loaded.ok());
    return std::move(loaded.value());
  }();
  return t;
}

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
  const tokenizer::DsmlSyntax& x = tokenizer::dsml_syntax(chat_family(tok()));
  return "Let me compute.\n\n" + std::string(x.block_open) + "\n" + std::string(x.invoke_open) + "calc\">\n" +
         std::string(x.param_open) + "expr\" string=\"true\">2+2" + std::string(x.param_close) + "\n" +
         std::string(x.invoke_close) + "\n" + std::string(x.block_close);
}

}  // namespace

TEST_CASE("a DSML tool call streams as events and ends the response with tool_calls", "[agents]") {
  std::vector<ResponseEvent> events;
  ResponseJob job(tok(), kEos, false, {}, [&](const ResponseEvent& e) { events.push_back(e); }, 7);
  const std::string output_text = tool_output();
  std::vector<int32_t> ids = tok().encode(output_text);
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
  CHECK(job.turn().raw_tool_calls.find(tokenizer::dsml_syntax(chat_family(tok())).block_open) != std::string::npos);
  const AssistantTurn replayed = parse_assistant_output(job.output(), chat_family(tok()), false, 7);
  CHECK(replayed.text == job.turn().text);
  CHECK(replayed.raw_tool_calls == job.turn().raw_tool_calls);
  REQUIRE(replayed.calls.size() == 1);
  CHECK(replayed.calls[0].id == "call_7");
  CHECK(replayed.calls[0].arguments == job.turn().calls[0].arguments);
}

TEST_CASE("a stop sequence ends the answer before it; the limit ends it with length", "[agents]") {
  std::string text;
  ResponseOptions options;
  options.stop = {"STOP"};
  ResponseJob job(tok(), kEos, false, options, [&](const ResponseEvent& e) { text += e.text; }, 0);
  Run r = run(job, tok().encode("Hello world. STOP and more"));
  CHECK(r.finished);
  CHECK(job.finish_reason() == "stop");
  CHECK(text == "Hello world. ");

  std::string limited;
  options = {};
  options.max_output_tokens = 3;
  ResponseJob capped(tok(), kEos, false, options, [&](const ResponseEvent& e) { limited += e.text; }, 0);
  const std::vector<int32_t> ids = tok().encode("one two three four five six");
  Run c = run(capped, ids);
  CHECK(c.finished);
  CHECK(capped.finish_reason() == "length");
  CHECK(capped.sampled().size() == 3);
  CHECK(limited == tok().decode(std::vector<int32_t>(ids.begin(), ids.begin() + 3)));
}

TEST_CASE("thinking output streams reasoning, then the answer", "[agents]") {
  std::string reasoning, answer;
  ResponseJob job(tok(), kEos, true, {}, [&](const ResponseEvent& e) {
    if (e.kind == ResponseEvent::Kind::kReasoningDelta) reasoning += e.text;
    if (e.kind == ResponseEvent::Kind::kTextDelta) answer += e.text;
  }, 0);
  std::vector<int32_t> ids = tok().encode("Think first.</think>The answer.");
  ids.push_back(kEos);
  run(job, ids);
  CHECK(reasoning == "Think first.");
  CHECK(answer == "The answer.");
  CHECK(job.finish_reason() == "stop");
}

}  // namespace hippo::agents
