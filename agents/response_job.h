// One response being generated: sampled tokens in, events out. It detokenizes, applies stop
// sequences, runs the streaming DSML parser (reasoning, answer text, tool calls) and collects the
// assistant turn that the conversation keeps. It knows nothing of the model or the scheduler.
#pragma once

#include "agents/agent_types.h"
#include "engine/tokenizer/dsml_parser.h"
#include "engine/tokenizer/incremental_detokenizer.h"
#include "engine/tokenizer/tokenizer.h"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hippo::agents {

// The assistant's side of one turn, built from parser events: what the chat encoder renders and
// what the log replays.
struct AssistantTurn {
  std::string reasoning;
  std::string text;
  std::vector<tokenizer::ToolCall> calls;
  std::string raw_tool_calls;  // the DSML block's exact bytes (kToolCallsEnd)
  size_t committed_calls = 0;  // calls of closed blocks; a malformed block voids the ones after

  // Applies one parser event; a call's id is next_call_id() when it begins.
  void apply(const tokenizer::DsmlEvent& event, const std::string& call_id);
  tokenizer::Message message(bool thinking) const;
};

// The chat encoding a tokenizer speaks: V4.1's needs its "<｜System｜>" token; the DeepSeek V4
// tokenizer (which the V4.1 checkpoints of `model init` carry) speaks V4's.
tokenizer::ModelFamily chat_family(const tokenizer::Tokenizer& tokenizer);

// How a session of these settings renders (its chat encoder's options).
tokenizer::ChatOptions chat_options(const SessionSettings& settings, const tokenizer::Tokenizer& tokenizer);

// Where the model's output starts: in reasoning (thinking mode), and inside the tool-call block that
// the generation prompt opened (a tool call required); see DsmlStreamParser::Options.
struct OutputStart {
  bool thinking = false;
  bool in_tool_calls = false;
};

// The output start of a session's responses (its chat options decide the generation prompt).
OutputStart output_start(const tokenizer::ChatOptions& options);

// Parses a whole output text (as the log keeps it) into its turn; call ids "call_<first>", ...
AssistantTurn parse_assistant_output(std::string_view output, tokenizer::ModelFamily family, OutputStart start,
                                     int64_t first_call_number);

std::string call_id(int64_t number);

class ResponseJob {
 public:
  ResponseJob(const tokenizer::Tokenizer& tokenizer, int32_t eos_token_id, OutputStart start, ResponseOptions options,
              EventSink sink, int64_t first_call_number);

  const ResponseOptions& options() const { return options_; }

  // Takes one sampled token; true when the response is complete (EOS, a stop sequence, the token
  // limit). The caller feeds the token to the model only when the response goes on.
  bool accept(int32_t token);
  // Ends the response early (cancelled, failed): flushes what the parser holds.
  void finish_early();
  // The next token the response must take instead of a sampled one (closing a tool-call block
  // when parallel_tool_calls is false), if any.
  std::optional<int32_t> forced_token() const;

  const std::vector<int32_t>& sampled() const { return sampled_; }
  bool ended_with_eos() const { return ended_with_eos_; }
  // The text of every sampled token but EOS and special tokens (what the log keeps as content).
  const std::string& output() const { return output_; }
  const AssistantTurn& turn() const { return turn_; }
  int64_t n_calls() const { return static_cast<int64_t>(turn_.calls.size()); }
  // "stop", "length" or "tool_calls", once accept() returned true.
  const std::string& finish_reason() const { return finish_reason_; }

  void emit(const ResponseEvent& event) const;

  engine::Sampler sampler;
  // Timing, for usage.
  std::chrono::steady_clock::time_point created = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point prefill_started{}, first_token{};
  int64_t input_tokens = 0, cached_tokens = 0;
  int64_t drafted_tokens = 0, accepted_tokens = 0;  // speculative decoding

 private:
  void feed_parser(bool final);
  void emit_parser_events();

  const tokenizer::Tokenizer* tokenizer_;
  int32_t eos_;
  ResponseOptions options_;
  EventSink sink_;
  int64_t next_call_number_;
  tokenizer::IncrementalDetokenizer detokenizer_;
  tokenizer::DsmlStreamParser parser_;
  std::vector<tokenizer::DsmlEvent> events_;
  std::vector<int32_t> sampled_;
  std::vector<int32_t> forced_;  // still to take, in order
  std::string output_;
  std::string held_;  // text held back while it may be the start of a stop sequence
  size_t longest_stop_ = 0;
  AssistantTurn turn_;
  bool ended_with_eos_ = false;
  bool finished_ = false;
  std::string finish_reason_;
};

}  // namespace hippo::agents
