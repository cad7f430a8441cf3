// Streaming parser of model output: reasoning, answer text and DSML tool calls, as events.
//
// Invariants (tests/engine/tokenizer/dsml_parser_test.cpp checks each):
//  (1) Split invariance: every way of cutting the output into push() chunks, including cuts inside
//      the three-byte fullwidth bars and inside any UTF-8 character, gives the same events once
//      adjacent deltas of one kind (and call) are joined. Decisions depend on bytes, never on where
//      a chunk ends: text that may still turn out to be markup, and incomplete UTF-8, wait.
//  (2) Deltas are valid UTF-8 (invalid input bytes become U+FFFD by utf8.h's rule).
//  (3) Reasoning runs until "</think>"; DSML inside it is reasoning text.
//  (4) A tool call is announced (kToolCallBegin) as soon as its name is complete; its arguments
//      stream as a JSON object text (kToolCallArguments): string="true" values character by
//      character, other values once their parameter closes (they must be complete to be checked
//      as JSON; a value that is not JSON is passed as a string, as written). kToolCallEnd carries
//      the whole arguments text, which equals the concatenated deltas.
//  (5) kToolCallsEnd carries the exact bytes of the block, with the "\n\n" that separated it from
//      the answer text if the model wrote one, so the next turn replays them unchanged. A parser
//      started inside the block (Options::starts_in_tool_calls) records only what follows the
//      prompt's opening: the block the model wrote is that opening plus these bytes.
//  (6) Markup that breaks the grammar, or a block still open at finish(), ends in one kMalformed
//      event with the block's bytes so far; the calls begun in that block are void; parsing goes
//      on as answer text from the offending byte. Nothing is dropped or silently repaired.
#pragma once

#include "engine/tokenizer/dsml_syntax.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hippo::tokenizer {

struct DsmlEvent {
  enum class Kind {
    kReasoning,          // text: delta of the reasoning
    kText,               // text: delta of the answer
    kToolCallBegin,      // call_index, name
    kToolCallArguments,  // call_index, text: delta of the arguments JSON
    kToolCallEnd,        // call_index, name, text: the whole arguments JSON
    kToolCallsEnd,       // text: the block's exact bytes
    kMalformed,          // name: what was wrong; text: the block's bytes up to the offending byte
  };
  Kind kind;
  std::string text;
  std::string name;
  int call_index = -1;

  bool operator==(const DsmlEvent&) const = default;
};

class DsmlStreamParser {
 public:
  struct Options {
    ModelFamily family = ModelFamily::kV41;
    // True when the prompt ended with "<think>" (thinking mode): output starts as reasoning.
    bool starts_in_reasoning = false;
    // True when the prompt ended by opening the tool-call block ("\n\n" + block_open + "\n", the
    // generation prompt when a tool call is required; chat_encoding.h): output starts as the block's
    // content, and what follows the block is answer text. It takes precedence over
    // starts_in_reasoning (in thinking mode the prompt opens the block right after "<think>").
    bool starts_in_tool_calls = false;
  };

  explicit DsmlStreamParser(Options options);

  // Consumes `chunk` and appends the events it completes.
  void push(std::string_view chunk, std::vector<DsmlEvent>& events);
  // End of output: flushes held-back text; an open block becomes kMalformed.
  void finish(std::vector<DsmlEvent>& events);

 private:
  enum class State {
    kReasoning, kText, kBlock, kInvokeName, kInvokeNameClose, kInvoke, kParamName, kParamAttrs, kParamValue
  };

  void run(bool final, std::vector<DsmlEvent>& events);
  bool step(bool final, std::vector<DsmlEvent>& events);
  bool step_reasoning(bool final, std::vector<DsmlEvent>& events);
  bool step_text(bool final, std::vector<DsmlEvent>& events);
  bool step_block(bool final, std::vector<DsmlEvent>& events);
  bool step_name(std::string& name, State next, bool final, std::vector<DsmlEvent>& events);
  bool step_invoke_name_close(bool final, std::vector<DsmlEvent>& events);
  bool step_invoke(bool final, std::vector<DsmlEvent>& events);
  bool step_param_attrs(bool final, std::vector<DsmlEvent>& events);
  bool step_param_value(bool final, std::vector<DsmlEvent>& events);

  bool wait_or_unterminated(bool final, std::vector<DsmlEvent>& events);
  void consume(std::size_t n);  // drops n bytes of input, recording them in the block's raw bytes
  void emit(DsmlEvent::Kind kind, std::string_view text, std::vector<DsmlEvent>& events);
  void malformed(std::string_view what, std::vector<DsmlEvent>& events);

  const DsmlSyntax* syntax_;
  State state_;
  std::string input_;        // bytes not yet consumed
  std::string raw_;          // the current block's bytes so far
  std::string name_;         // tool name being read
  std::string param_name_;   // parameter name being read
  std::string value_;        // a non-string parameter's value being read
  std::string arguments_;    // the current call's arguments JSON so far
  bool string_value_ = false;
  int n_params_ = 0;
  int call_index_ = 0;
};

}  // namespace hippo::tokenizer
