// The streaming DSML parser: reference completions (the reference encoder's rendering of assistant
// turns) parse back to their reasoning, answer, tool calls and exact bytes, for every way of cutting
// the stream; malformed and unterminated markup end in one kMalformed event.
#include "engine/tokenizer/dsml_parser.h"
#include "engine/tokenizer/incremental_detokenizer.h"
#include "engine/tokenizer/python_json.h"
#include "engine/tokenizer/utf8.h"
#include "tests/engine/tokenizer/chat_fixtures.h"
#include "tests/engine/tokenizer/test_data.h"

#include <catch2/catch.hpp>

#include <random>

namespace hippo::tokenizer {
namespace {

using Kind = DsmlEvent::Kind;

// Events with adjacent deltas of one kind (and call) joined: what invariant (1) compares.
std::vector<DsmlEvent> parse(const DsmlStreamParser::Options& options, const std::vector<std::string_view>& chunks) {
  DsmlStreamParser parser(options);
  std::vector<DsmlEvent> events;
  for (std::string_view chunk : chunks) parser.push(chunk, events);
  parser.finish(events);
  std::vector<DsmlEvent> joined;
  for (DsmlEvent& e : events) {
    const bool delta = e.kind == Kind::kReasoning || e.kind == Kind::kText || e.kind == Kind::kToolCallArguments;
    if (delta) CHECK(is_valid_utf8(e.text));  // invariant (2)
    if (delta && !joined.empty() && joined.back().kind == e.kind && joined.back().call_index == e.call_index) {
      joined.back().text += e.text;
    } else {
      joined.push_back(std::move(e));
    }
  }
  return joined;
}

std::vector<DsmlEvent> parse_whole(const DsmlStreamParser::Options& options, std::string_view text) {
  return parse(options, {text});
}

std::string joined_text(const std::vector<DsmlEvent>& events, Kind kind) {
  std::string text;
  for (const DsmlEvent& e : events) {
    if (e.kind == kind) text += e.text;
  }
  return text;
}

DsmlStreamParser::Options options_for(const testing::CompletionFixture& f) {
  return {f.family, f.thinking};
}

std::string normalized_json(const std::string& json) {
  const Result<std::string> r = to_python_json(json);
  REQUIRE(r.ok());
  return *r;
}

TEST_CASE("reference completions parse back to what was rendered", "[dsml]") {
  const auto& completions = testing::chat_fixtures().completions;
  REQUIRE(completions.size() >= 100);
  for (const testing::CompletionFixture& f : completions) {
    INFO(f.name);
    const std::vector<DsmlEvent> events = parse_whole(options_for(f), f.completion);
    CHECK(joined_text(events, Kind::kReasoning) == f.reasoning);
    CHECK(joined_text(events, Kind::kText) == f.content);
    std::vector<const DsmlEvent*> begins, ends, blocks;
    for (const DsmlEvent& e : events) {
      CHECK(e.kind != Kind::kMalformed);
      if (e.kind == Kind::kToolCallBegin) begins.push_back(&e);
      if (e.kind == Kind::kToolCallEnd) ends.push_back(&e);
      if (e.kind == Kind::kToolCallsEnd) blocks.push_back(&e);
    }
    REQUIRE(ends.size() == f.tool_calls.size());
    REQUIRE(begins.size() == f.tool_calls.size());
    for (std::size_t i = 0; i < ends.size(); ++i) {
      CHECK(begins[i]->name == f.tool_calls[i].name);
      CHECK(ends[i]->name == f.tool_calls[i].name);
      CHECK(ends[i]->call_index == static_cast<int>(i));
      CHECK(normalized_json(ends[i]->text) == normalized_json(f.tool_calls[i].arguments));
      // The streamed argument deltas add up to the final arguments.
      std::string streamed;
      for (const DsmlEvent& e : events) {
        if (e.kind == Kind::kToolCallArguments && e.call_index == static_cast<int>(i)) streamed += e.text;
      }
      CHECK(streamed == ends[i]->text);
    }
    REQUIRE(blocks.size() == 1);
    CHECK(blocks[0]->text == f.raw_tool_calls);  // invariant (5): replayable byte for byte
  }
}

TEST_CASE("every two-piece split of short completions gives the same events", "[dsml]") {
  std::size_t n_checked = 0;
  for (const testing::CompletionFixture& f : testing::chat_fixtures().completions) {
    if (f.completion.size() > 700) continue;
    INFO(f.name);
    const std::vector<DsmlEvent> whole = parse_whole(options_for(f), f.completion);
    const std::string_view c = f.completion;
    for (std::size_t cut = 1; cut < c.size(); ++cut) {
      const bool same = parse(options_for(f), {c.substr(0, cut), c.substr(cut)}) == whole;
      if (!same) FAIL_CHECK("split at byte " << cut);
    }
    // One byte per push: every boundary at once, inside every bar and character.
    std::vector<std::string_view> bytes;
    for (std::size_t i = 0; i < c.size(); ++i) bytes.push_back(c.substr(i, 1));
    CHECK(parse(options_for(f), bytes) == whole);
    ++n_checked;
  }
  CHECK(n_checked >= 20);
}

TEST_CASE("random many-piece splits of every completion give the same events", "[dsml]") {
  std::mt19937 rng(7);
  for (const testing::CompletionFixture& f : testing::chat_fixtures().completions) {
    INFO(f.name);
    const std::vector<DsmlEvent> whole = parse_whole(options_for(f), f.completion);
    const std::string_view c = f.completion;
    for (int trial = 0; trial < 8; ++trial) {
      std::vector<std::string_view> chunks;
      for (std::size_t pos = 0; pos < c.size();) {
        const std::size_t n = std::min<std::size_t>(c.size() - pos, 1 + rng() % 9);
        chunks.push_back(c.substr(pos, n));
        pos += n;
      }
      CHECK(parse(options_for(f), chunks) == whole);
    }
  }
}

TEST_CASE("every three-piece split of short completions gives the same events", "[dsml][.slow]") {
  for (const testing::CompletionFixture& f : testing::chat_fixtures().completions) {
    if (f.completion.size() > 260) continue;
    INFO(f.name);
    const std::vector<DsmlEvent> whole = parse_whole(options_for(f), f.completion);
    const std::string_view c = f.completion;
    for (std::size_t a = 1; a < c.size(); ++a) {
      for (std::size_t b = a + 1; b < c.size(); ++b) {
        if (parse(options_for(f), {c.substr(0, a), c.substr(a, b - a), c.substr(b)}) != whole) {
          FAIL_CHECK("split at bytes " << a << " and " << b);
        }
      }
    }
  }
}

TEST_CASE("a block cut off anywhere ends in one kMalformed with its bytes", "[dsml]") {
  for (const testing::CompletionFixture& f : testing::chat_fixtures().completions) {
    if (f.completion.size() > 1500) continue;
    INFO(f.name);
    const std::string_view syntax_open = dsml_syntax(f.family).block_open;
    const std::size_t block = f.completion.size() - f.raw_tool_calls.size();  // where "\n\n<｜DSML｜…" starts
    const std::size_t first_cut = f.completion.find(syntax_open, block) + syntax_open.size();
    for (std::size_t cut = first_cut; cut < f.completion.size(); ++cut) {
      const std::vector<DsmlEvent> events = parse_whole(options_for(f), std::string_view(f.completion).substr(0, cut));
      REQUIRE(!events.empty());
      CHECK(events.back().kind == Kind::kMalformed);
      CHECK(events.back().text == f.completion.substr(block, cut - block));
      CHECK(joined_text(events, Kind::kText) == f.content);
      for (std::size_t i = 0; i + 1 < events.size(); ++i) CHECK(events[i].kind != Kind::kMalformed);
    }
  }
}

// A parser started inside the block that the generation prompt opened (a tool call required).
DsmlStreamParser::Options in_block(ModelFamily family, bool thinking) {
  DsmlStreamParser::Options options;
  options.family = family;
  options.starts_in_reasoning = thinking;
  options.starts_in_tool_calls = true;
  return options;
}

// The opening the generation prompt writes: "\n\n" + block_open + "\n".
std::string block_opening(ModelFamily family) { return "\n\n" + std::string(dsml_syntax(family).block_open) + "\n"; }

std::vector<DsmlEvent> call_events(const std::vector<DsmlEvent>& events) {
  std::vector<DsmlEvent> calls;
  for (const DsmlEvent& e : events) {
    if (e.kind == Kind::kToolCallBegin || e.kind == Kind::kToolCallArguments || e.kind == Kind::kToolCallEnd) calls.push_back(e);
  }
  return calls;
}

TEST_CASE("a parser started inside the tool-call block reads the same calls as one that saw it open", "[dsml]") {
  std::size_t n_checked = 0;
  std::mt19937 rng(11);
  for (const testing::CompletionFixture& f : testing::chat_fixtures().completions) {
    INFO(f.name);
    const std::string opening = block_opening(f.family);
    REQUIRE(f.raw_tool_calls.starts_with(opening));
    const std::string body = f.raw_tool_calls.substr(opening.size());  // what the model writes after the prompt
    const std::vector<DsmlEvent> seen_open = parse_whole(options_for(f), f.completion);
    for (const bool thinking : {false, true}) {
      const std::vector<DsmlEvent> events = parse_whole(in_block(f.family, thinking), body);
      CHECK(call_events(events) == call_events(seen_open));
      REQUIRE(!events.empty());
      // The block's bytes are the model's, after the prompt's opening: together, the whole block.
      CHECK(events.back() == DsmlEvent{Kind::kToolCallsEnd, body, {}, -1});
      CHECK(opening + events.back().text == f.raw_tool_calls);
      CHECK(joined_text(events, Kind::kText).empty());
      CHECK(joined_text(events, Kind::kReasoning).empty());
    }
    // Split invariance holds from inside the block too.
    const std::vector<DsmlEvent> whole = parse_whole(in_block(f.family, false), body);
    const std::string_view c = body;
    if (c.size() <= 700) {
      for (std::size_t cut = 1; cut < c.size(); ++cut) {
        if (parse(in_block(f.family, false), {c.substr(0, cut), c.substr(cut)}) != whole) FAIL_CHECK("split at byte " << cut);
      }
    }
    std::vector<std::string_view> chunks;
    for (std::size_t pos = 0; pos < c.size();) {
      const std::size_t n = std::min<std::size_t>(c.size() - pos, 1 + rng() % 9);
      chunks.push_back(c.substr(pos, n));
      pos += n;
    }
    CHECK(parse(in_block(f.family, false), chunks) == whole);
    ++n_checked;
  }
  CHECK(n_checked >= 100);
}

TEST_CASE("inside the prompt's block: text after it is the answer, a broken or unclosed block is kMalformed", "[dsml]") {
  const std::string invoke = "<｜DSML｜ invoke name=\"f\">\n<｜DSML｜ parameter name=\"s\" string=\"true\">hi</｜DSML｜ parameter>\n"
                             "</｜DSML｜ invoke>\n";
  const std::string body = invoke + "</｜DSML｜ calls>";
  for (const bool thinking : {false, true}) {
    // After the block, answer text (in thinking mode too: the prompt opened the block in place of
    // reasoning), where a later block is found as usual.
    const std::vector<DsmlEvent> after = parse_whole(in_block(ModelFamily::kV41, thinking), body + "Done.");
    REQUIRE(after.size() == 5);
    CHECK(after[0] == DsmlEvent{Kind::kToolCallBegin, {}, "f", 0});
    CHECK(after[1] == DsmlEvent{Kind::kToolCallArguments, R"({"s": "hi"})", {}, 0});
    CHECK(after[2] == DsmlEvent{Kind::kToolCallEnd, R"({"s": "hi"})", "f", 0});
    CHECK(after[3] == DsmlEvent{Kind::kToolCallsEnd, body, {}, -1});
    CHECK(after[4] == DsmlEvent{Kind::kText, "Done.", {}, -1});
    const std::vector<DsmlEvent> twice = parse_whole(in_block(ModelFamily::kV41, thinking), body + "\n\n<｜DSML｜ calls>\n" + body);
    CHECK(twice.back() == DsmlEvent{Kind::kToolCallsEnd, "\n\n<｜DSML｜ calls>\n" + body, {}, -1});
    CHECK(twice.back().text.size() > body.size());
    CHECK(call_events(twice).size() == 2 * call_events(after).size());
  }

  // Output that is no invoke: malformed at once (the prompt's opening is not the model's bytes),
  // and the rest is answer text.
  const std::vector<DsmlEvent> bad = parse_whole(in_block(ModelFamily::kV41, false), "<｜DSML｜ invokX name=\"f\">\nhello");
  REQUIRE(bad.size() == 2);
  CHECK(bad[0].kind == Kind::kMalformed);
  CHECK(bad[0].text.empty());
  CHECK(bad[1] == DsmlEvent{Kind::kText, "<｜DSML｜ invokX name=\"f\">\nhello", {}, -1});
  // Broken inside a call: the block's bytes up to the offending byte; its calls are void.
  const std::vector<DsmlEvent> broken = parse_whole(in_block(ModelFamily::kV41, false), invoke + "<｜DSML｜ invoke name=\"g\" x");
  CHECK(broken[broken.size() - 2] == DsmlEvent{Kind::kMalformed, invoke + "<｜DSML｜ invoke name=\"g\"", "expected '>' after the tool name", -1});
  CHECK(broken.back() == DsmlEvent{Kind::kText, " x", {}, -1});
  // Nothing at all, or the block cut off anywhere: one kMalformed with the bytes so far, last.
  for (std::size_t cut = 0; cut < body.size(); ++cut) {
    const std::vector<DsmlEvent> events = parse_whole(in_block(ModelFamily::kV41, false), std::string_view(body).substr(0, cut));
    REQUIRE(!events.empty());
    CHECK(events.back() == DsmlEvent{Kind::kMalformed, body.substr(0, cut), "the tool-call block is not closed", -1});
    for (std::size_t i = 0; i + 1 < events.size(); ++i) CHECK(events[i].kind != Kind::kMalformed);
    CHECK(joined_text(events, Kind::kText).empty());
  }
}

TEST_CASE("malformed markup is reported and the rest is answer text", "[dsml]") {
  const DsmlStreamParser::Options v4{ModelFamily::kV4, false};
  const std::string bad = "ok\n\n<｜DSML｜tool_calls>\n<｜DSML｜invokX name=\"f\">\n</｜DSML｜tool_calls> tail";
  const std::vector<DsmlEvent> events = parse_whole(v4, bad);
  REQUIRE(events.size() == 3);
  CHECK(events[0] == DsmlEvent{Kind::kText, "ok", {}, -1});
  CHECK(events[1].kind == Kind::kMalformed);
  CHECK(events[1].text == "\n\n<｜DSML｜tool_calls>\n");
  CHECK(events[2] == DsmlEvent{Kind::kText, "<｜DSML｜invokX name=\"f\">\n</｜DSML｜tool_calls> tail", {}, -1});

  // A second block after a malformed one is parsed normally.
  const std::string twice = "<｜DSML｜tool_calls>\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"g\">\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
  const std::vector<DsmlEvent> again = parse_whole(v4, twice);
  CHECK(again.front().kind == Kind::kMalformed);
  CHECK(again.back().kind == Kind::kToolCallsEnd);
  CHECK(joined_text(again, Kind::kText).empty());
}

TEST_CASE("DSML inside reasoning is reasoning, string=\"false\" values are JSON or passed as strings", "[dsml]") {
  const DsmlStreamParser::Options v41{ModelFamily::kV41, true};
  const std::string text =
      "I could write <｜DSML｜ calls>\n<｜DSML｜ invoke name=\"x\"> here</think>Done.\n\n<｜DSML｜ calls>\n"
      "<｜DSML｜ invoke name=\"f\">\n<｜DSML｜ parameter name=\"n\" string=\"false\">[1, 2.5, {\"a\":null}]</｜DSML｜ parameter>\n"
      "<｜DSML｜ parameter name=\"bad\" string=\"false\">not json</｜DSML｜ parameter>\n"
      "<｜DSML｜ parameter name=\"s\" string=\"true\">say \"hi\"\n</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n</｜DSML｜ calls>";
  const std::vector<DsmlEvent> events = parse_whole(v41, text);
  CHECK(joined_text(events, Kind::kReasoning) == "I could write <｜DSML｜ calls>\n<｜DSML｜ invoke name=\"x\"> here");
  CHECK(joined_text(events, Kind::kText) == "Done.");
  const auto end = std::find_if(events.begin(), events.end(), [](const DsmlEvent& e) { return e.kind == Kind::kToolCallEnd; });
  REQUIRE(end != events.end());
  CHECK(end->name == "f");
  CHECK(end->text == R"({"n": [1, 2.5, {"a": null}], "bad": "not json", "s": "say \"hi\"\n"})");
}

TEST_CASE("detokenizer and parser together: token by token equals the whole text", "[dsml][detokenizer]") {
  const Tokenizer& tok = testing::deepseek_tokenizer();
  std::size_t n = 0;
  for (const testing::CompletionFixture& f : testing::chat_fixtures().completions) {
    if (++n > 60) break;
    INFO(f.name);
    std::vector<TokenId> ids;
    tok.encode(f.completion, ids);  // the model writes "｜DSML｜", "</think>" as their tokens
    IncrementalDetokenizer detok(tok);
    DsmlStreamParser parser(options_for(f));
    std::vector<DsmlEvent> events;
    std::string piece;
    for (TokenId id : ids) {
      piece.clear();
      detok.push(id, piece);
      parser.push(piece, events);
    }
    piece.clear();
    detok.finish(piece);
    parser.push(piece, events);
    parser.finish(events);
    CHECK(joined_text(events, Kind::kText) == f.content);
    CHECK(joined_text(events, Kind::kReasoning) == f.reasoning);
  }
}

}  // namespace
}  // namespace hippo::tokenizer
