// The DSML stream parser's state machine (invariants in dsml_parser.h).
//
//   kReasoning --"</think>"--> kText --[\n\n]<｜DSML｜tool_calls>--> kBlock
//   (a parser started inside the block, after the prompt's opening, starts in kBlock)
//   kBlock --invoke name="--> kInvokeName --NAME"--> kInvokeNameClose --">"--> kInvoke
//   kInvoke --parameter name="--> kParamName --NAME"--> kParamAttrs -- string="…">--> kParamValue
//   kParamValue --</｜DSML｜parameter>--> kInvoke --</｜DSML｜invoke>--> kBlock
//   kBlock --</｜DSML｜tool_calls>--> kText;   any grammar error --> kText (kMalformed)
// Whitespace between tags inside a block is accepted and kept in the raw bytes.
#include "engine/tokenizer/dsml_parser.h"

#include "engine/tokenizer/python_json.h"
#include "engine/tokenizer/utf8.h"

#include <algorithm>

namespace hippo::tokenizer {
namespace {

constexpr std::string_view kSeparator = "\n\n";
constexpr std::string_view kStringTrue = " string=\"true\">";
constexpr std::string_view kStringFalse = " string=\"false\">";
// Longer names are not names: the block is malformed instead of buffering without bound.
constexpr std::size_t kMaxNameBytes = 1024;

enum class Prefix { kNone, kPartial, kFull };

// Whether `input` starts with `tag`, or could still (it is a proper prefix of it).
Prefix prefix_state(std::string_view input, std::string_view tag) {
  if (input.size() >= tag.size()) return input.substr(0, tag.size()) == tag ? Prefix::kFull : Prefix::kNone;
  return tag.substr(0, input.size()) == input ? Prefix::kPartial : Prefix::kNone;
}

// The longest suffix of `text` that is a proper prefix of `tag`.
std::size_t partial_suffix(std::string_view text, std::string_view tag) {
  for (std::size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

bool is_delta(DsmlEvent::Kind kind) {
  return kind == DsmlEvent::Kind::kReasoning || kind == DsmlEvent::Kind::kText ||
         kind == DsmlEvent::Kind::kToolCallArguments;
}

}  // namespace

DsmlStreamParser::DsmlStreamParser(Options options)
    : syntax_(&dsml_syntax(options.family)),
      state_(options.starts_in_tool_calls ? State::kBlock
             : options.starts_in_reasoning  ? State::kReasoning
                                            : State::kText) {}

void DsmlStreamParser::push(std::string_view chunk, std::vector<DsmlEvent>& events) {
  input_.append(chunk);
  run(false, events);
}

void DsmlStreamParser::finish(std::vector<DsmlEvent>& events) { run(true, events); }

void DsmlStreamParser::run(bool final, std::vector<DsmlEvent>& events) {
  while (step(final, events)) {
  }
}

void DsmlStreamParser::consume(std::size_t n) {
  if (state_ != State::kReasoning && state_ != State::kText) raw_.append(input_, 0, n);
  input_.erase(0, n);
}

void DsmlStreamParser::emit(DsmlEvent::Kind kind, std::string_view text, std::vector<DsmlEvent>& events) {
  const int index = kind == DsmlEvent::Kind::kToolCallArguments ? call_index_ : -1;
  if (is_delta(kind)) {
    if (text.empty()) return;
    if (!events.empty() && events.back().kind == kind && events.back().call_index == index) {
      events.back().text.append(text);
      return;
    }
  }
  events.push_back(DsmlEvent{kind, std::string(text), {}, index});
}

void DsmlStreamParser::malformed(std::string_view what, std::vector<DsmlEvent>& events) {
  events.push_back(DsmlEvent{DsmlEvent::Kind::kMalformed, std::move(raw_), std::string(what), -1});
  raw_.clear();
  state_ = State::kText;
}

bool DsmlStreamParser::step(bool final, std::vector<DsmlEvent>& events) {
  switch (state_) {
    case State::kReasoning: return step_reasoning(final, events);
    case State::kText: return step_text(final, events);
    case State::kBlock: return step_block(final, events);
    case State::kInvokeName: return step_name(name_, State::kInvokeNameClose, final, events);
    case State::kInvokeNameClose: return step_invoke_name_close(final, events);
    case State::kInvoke: return step_invoke(final, events);
    case State::kParamName: return step_name(param_name_, State::kParamAttrs, final, events);
    case State::kParamAttrs: return step_param_attrs(final, events);
    case State::kParamValue: return step_param_value(final, events);
  }
  return false;
}

bool DsmlStreamParser::step_reasoning(bool final, std::vector<DsmlEvent>& events) {
  const std::size_t end = input_.find(kThinkEnd);
  if (end != std::string::npos) {
    std::string text;
    append_repaired_utf8(std::string_view(input_).substr(0, end), text);
    emit(DsmlEvent::Kind::kReasoning, text, events);
    consume(end + kThinkEnd.size());
    state_ = State::kText;
    return true;
  }
  const std::string_view in = input_;
  const std::size_t keep = final ? 0 : partial_suffix(in, kThinkEnd);
  const std::string_view region = in.substr(0, in.size() - keep);
  const std::size_t n = final ? region.size() : utf8_complete_prefix(region);
  std::string text;
  append_repaired_utf8(region.substr(0, n), text);
  emit(DsmlEvent::Kind::kReasoning, text, events);
  consume(n);
  return false;
}

bool DsmlStreamParser::step_text(bool final, std::vector<DsmlEvent>& events) {
  const std::string_view in = input_;
  const std::size_t open = in.find(syntax_->block_open);
  if (open != std::string_view::npos) {
    const std::size_t separator = in.substr(0, open).ends_with(kSeparator) ? kSeparator.size() : 0;
    std::string text;
    append_repaired_utf8(in.substr(0, open - separator), text);
    emit(DsmlEvent::Kind::kText, text, events);
    input_.erase(0, open - separator);
    state_ = State::kBlock;
    raw_.clear();
    consume(separator + syntax_->block_open.size());
    return true;
  }
  // Hold back what may still become "\n\n<｜DSML｜tool_calls>": a partial tag and up to two
  // newlines before it.
  std::size_t keep = 0;
  if (!final) {
    keep = partial_suffix(in, syntax_->block_open);
    for (int i = 0; i < 2 && keep < in.size() && in[in.size() - keep - 1] == '\n'; ++i) ++keep;
  }
  const std::string_view region = in.substr(0, in.size() - keep);
  const std::size_t n = final ? region.size() : utf8_complete_prefix(region);
  std::string text;
  append_repaired_utf8(region.substr(0, n), text);
  emit(DsmlEvent::Kind::kText, text, events);
  consume(n);
  return false;
}

bool DsmlStreamParser::step_block(bool final, std::vector<DsmlEvent>& events) {
  std::size_t spaces = 0;
  while (spaces < input_.size() && is_space(input_[spaces])) ++spaces;
  consume(spaces);
  const Prefix close = prefix_state(input_, syntax_->block_close);
  const Prefix invoke = prefix_state(input_, syntax_->invoke_open);
  if (close == Prefix::kFull) {
    consume(syntax_->block_close.size());
    events.push_back(DsmlEvent{DsmlEvent::Kind::kToolCallsEnd, std::move(raw_), {}, -1});
    raw_.clear();
    state_ = State::kText;
    return true;
  }
  if (invoke == Prefix::kFull) {
    consume(syntax_->invoke_open.size());
    name_.clear();
    state_ = State::kInvokeName;
    return true;
  }
  if (input_.empty() || close == Prefix::kPartial || invoke == Prefix::kPartial) return wait_or_unterminated(final, events);
  malformed("expected an invoke or the end of the tool calls", events);
  return true;
}

bool DsmlStreamParser::wait_or_unterminated(bool final, std::vector<DsmlEvent>& events) {
  if (!final) return false;
  consume(input_.size());
  malformed("the tool-call block is not closed", events);
  return true;
}

bool DsmlStreamParser::step_name(std::string& name, State next, bool final, std::vector<DsmlEvent>& events) {
  const std::size_t quote = input_.find('"');
  const std::size_t take = quote == std::string::npos ? input_.size() : quote;
  if (name.size() + take > kMaxNameBytes) {
    malformed("a tool or parameter name is too long", events);
    return true;
  }
  name.append(input_, 0, take);
  consume(take);
  if (quote == std::string::npos) return wait_or_unterminated(final, events);
  if (name.empty() || !is_valid_utf8(name)) {
    malformed("a tool or parameter name is empty or not UTF-8", events);
    return true;
  }
  consume(1);
  state_ = next;
  return true;
}

bool DsmlStreamParser::step_invoke_name_close(bool final, std::vector<DsmlEvent>& events) {
  const Prefix close = prefix_state(input_, ">");
  if (close == Prefix::kPartial) return wait_or_unterminated(final, events);
  if (close == Prefix::kNone) {
    malformed("expected '>' after the tool name", events);
    return true;
  }
  consume(1);
  events.push_back(DsmlEvent{DsmlEvent::Kind::kToolCallBegin, {}, name_, call_index_});
  arguments_.assign(1, '{');  // not = "{": g++ 12 -O3 reports a false -Wrestrict on it
  n_params_ = 0;
  emit(DsmlEvent::Kind::kToolCallArguments, "{", events);
  state_ = State::kInvoke;
  return true;
}

bool DsmlStreamParser::step_invoke(bool final, std::vector<DsmlEvent>& events) {
  std::size_t spaces = 0;
  while (spaces < input_.size() && is_space(input_[spaces])) ++spaces;
  consume(spaces);
  const Prefix close = prefix_state(input_, syntax_->invoke_close);
  const Prefix param = prefix_state(input_, syntax_->param_open);
  if (close == Prefix::kFull) {
    consume(syntax_->invoke_close.size());
    arguments_.push_back('}');
    emit(DsmlEvent::Kind::kToolCallArguments, "}", events);
    events.push_back(DsmlEvent{DsmlEvent::Kind::kToolCallEnd, arguments_, name_, call_index_});
    ++call_index_;
    state_ = State::kBlock;
    return true;
  }
  if (param == Prefix::kFull) {
    consume(syntax_->param_open.size());
    param_name_.clear();
    state_ = State::kParamName;
    return true;
  }
  if (input_.empty() || close == Prefix::kPartial || param == Prefix::kPartial) return wait_or_unterminated(final, events);
  malformed("expected a parameter or the end of the invoke", events);
  return true;
}

bool DsmlStreamParser::step_param_attrs(bool final, std::vector<DsmlEvent>& events) {
  const Prefix is_string = prefix_state(input_, kStringTrue);
  const Prefix not_string = prefix_state(input_, kStringFalse);
  if (is_string != Prefix::kFull && not_string != Prefix::kFull) {
    if (is_string == Prefix::kPartial || not_string == Prefix::kPartial) return wait_or_unterminated(final, events);
    malformed("expected string=\"true\" or string=\"false\" after the parameter name", events);
    return true;
  }
  string_value_ = is_string == Prefix::kFull;
  consume(string_value_ ? kStringTrue.size() : kStringFalse.size());
  std::string key = n_params_ > 0 ? ", " : "";
  append_python_json_string(param_name_, key);
  key.append(": ");
  if (string_value_) key.push_back('"');
  arguments_.append(key);
  emit(DsmlEvent::Kind::kToolCallArguments, key, events);
  ++n_params_;
  value_.clear();
  state_ = State::kParamValue;
  return true;
}

bool DsmlStreamParser::step_param_value(bool final, std::vector<DsmlEvent>& events) {
  const std::string_view in = input_;
  const std::size_t close = in.find(syntax_->param_close);
  const bool closed = close != std::string_view::npos;
  std::size_t n = 0;
  if (closed) {
    n = close;
  } else {
    const std::string_view region = in.substr(0, in.size() - partial_suffix(in, syntax_->param_close));
    n = utf8_complete_prefix(region);
  }
  if (string_value_) {
    std::string repaired;
    append_repaired_utf8(in.substr(0, n), repaired);
    std::string delta;
    append_python_json_string(repaired, delta);  // "…" — the quotes are not part of the delta
    const std::string_view body = std::string_view(delta).substr(1, delta.size() - 2);
    arguments_.append(body);
    emit(DsmlEvent::Kind::kToolCallArguments, body, events);
  } else {
    value_.append(in.substr(0, n));
  }
  consume(n);
  if (!closed) return wait_or_unterminated(final, events);
  consume(syntax_->param_close.size());
  std::string delta;
  if (string_value_) {
    delta = "\"";
  } else if (Result<std::string> json = to_python_json(value_); json.ok()) {
    delta = std::move(json).value();
  } else {
    append_python_json_string(repair_utf8(value_), delta);
  }
  arguments_.append(delta);
  emit(DsmlEvent::Kind::kToolCallArguments, delta, events);
  state_ = State::kInvoke;
  return true;
}

}  // namespace hippo::tokenizer
