#include "agents/response_job.h"

#include <algorithm>

namespace hippo::agents {

using tokenizer::DsmlEvent;

std::string call_id(int64_t number) { return "call_" + std::to_string(number); }

void AssistantTurn::apply(const DsmlEvent& event, const std::string& id) {
  switch (event.kind) {
    case DsmlEvent::Kind::kReasoning: reasoning += event.text; break;
    case DsmlEvent::Kind::kText: text += event.text; break;
    case DsmlEvent::Kind::kToolCallBegin: calls.push_back({id, event.name, ""}); break;
    case DsmlEvent::Kind::kToolCallArguments: break;
    case DsmlEvent::Kind::kToolCallEnd:
      if (!calls.empty()) calls.back().arguments = event.text;
      break;
    case DsmlEvent::Kind::kToolCallsEnd:
      raw_tool_calls += event.text;
      committed_calls = calls.size();
      break;
    case DsmlEvent::Kind::kMalformed:
      // The open block's calls are void and its bytes are answer text (dsml_parser.h (6)).
      calls.resize(committed_calls);
      text += event.text;
      break;
  }
}

tokenizer::Message AssistantTurn::message(bool thinking) const {
  tokenizer::Message m;
  m.role = tokenizer::Role::kAssistant;
  m.content = text;
  if (thinking) m.reasoning = reasoning;
  m.tool_calls = calls;
  if (!raw_tool_calls.empty()) m.raw_tool_calls = raw_tool_calls;
  return m;
}

tokenizer::ModelFamily chat_family(const tokenizer::Tokenizer& tokenizer) {
  return tokenizer.added_token_id("<｜System｜>") ? tokenizer::ModelFamily::kV41 : tokenizer::ModelFamily::kV4;
}

tokenizer::ChatOptions chat_options(const SessionSettings& settings, const tokenizer::Tokenizer& tokenizer) {
  tokenizer::ChatOptions options;
  options.family = chat_family(tokenizer);
  options.thinking = settings.thinking;
  options.effort = settings.effort;
  options.tools = settings.tools;
  options.tool_choice = settings.tool_choice;
  return options;
}

OutputStart output_start(const tokenizer::ChatOptions& options) {
  return {options.thinking, tokenizer::generation_prompt_opens_tool_calls(options)};
}

namespace {

tokenizer::DsmlStreamParser::Options parser_options(tokenizer::ModelFamily family, OutputStart start) {
  tokenizer::DsmlStreamParser::Options options;
  options.family = family;
  options.starts_in_reasoning = start.thinking;
  options.starts_in_tool_calls = start.in_tool_calls;
  return options;
}

}  // namespace

AssistantTurn parse_assistant_output(std::string_view output, tokenizer::ModelFamily family, OutputStart start,
                                     int64_t first_call_number) {
  tokenizer::DsmlStreamParser parser(parser_options(family, start));
  std::vector<DsmlEvent> events;
  parser.push(output, events);
  parser.finish(events);
  AssistantTurn turn;
  int64_t next = first_call_number;
  for (const DsmlEvent& e : events) turn.apply(e, e.kind == DsmlEvent::Kind::kToolCallBegin ? call_id(next++) : "");
  return turn;
}

ResponseJob::ResponseJob(const tokenizer::Tokenizer& tokenizer, int32_t eos_token_id, OutputStart start,
                         ResponseOptions options, EventSink sink, int64_t first_call_number)
    : sampler(options.sampling),
      tokenizer_(&tokenizer),
      eos_(eos_token_id),
      options_(std::move(options)),
      sink_(std::move(sink)),
      next_call_number_(first_call_number),
      detokenizer_(tokenizer),
      parser_(parser_options(chat_family(tokenizer), start)) {
  for (const std::string& s : options_.stop) longest_stop_ = std::max(longest_stop_, s.size());
}

void ResponseJob::emit(const ResponseEvent& event) const {
  if (sink_) sink_(event);
}

std::optional<int32_t> ResponseJob::forced_token() const {
  if (forced_.empty()) return std::nullopt;
  return forced_.front();
}

bool ResponseJob::accept(int32_t token) {
  if (finished_) return true;
  if (!forced_.empty() && forced_.front() == token) forced_.erase(forced_.begin());
  if (sampled_.empty()) first_token = std::chrono::steady_clock::now();
  sampled_.push_back(token);
  if (token == eos_) {
    ended_with_eos_ = true;
    feed_parser(true);
    finish_reason_ = turn_.calls.empty() ? "stop" : "tool_calls";
    finished_ = true;
    return true;
  }
  std::string piece;
  // Special tokens (the vocabulary's placeholders, BOS, image markers) never reach the text, as
  // with the reference tokenizer's skip_special_tokens; the ids stay in the log.
  const tokenizer::AddedToken* added = tokenizer_->added_vocabulary().by_id(token);
  if (added == nullptr || !added->special) detokenizer_.push(token, piece);
  output_ += piece;
  held_ += piece;
  // A stop sequence ends the answer before it; text that may still become one waits.
  for (const std::string& stop : options_.stop) {
    if (stop.empty()) continue;
    const size_t at = held_.find(stop);
    if (at == std::string::npos) continue;
    held_.resize(at);
    feed_parser(true);
    finish_reason_ = "stop";
    finished_ = true;
    return true;
  }
  if (static_cast<int64_t>(sampled_.size()) >= options_.max_output_tokens) {
    std::string tail;
    detokenizer_.finish(tail);
    output_ += tail;
    held_ += tail;
    feed_parser(true);
    finish_reason_ = "length";
    finished_ = true;
    return true;
  }
  feed_parser(false);
  return false;
}

void ResponseJob::finish_early() {
  if (finished_) return;
  std::string tail;
  detokenizer_.finish(tail);
  output_ += tail;
  held_ += tail;
  feed_parser(true);
  finished_ = true;
}

// Passes held text to the parser except a tail that could still grow into a stop sequence.
void ResponseJob::feed_parser(bool final) {
  size_t keep = final || longest_stop_ == 0 ? 0 : std::min(held_.size(), longest_stop_ - 1);
  // Never split a UTF-8 character between what goes and what stays.
  while (keep < held_.size() && keep > 0 && (static_cast<unsigned char>(held_[held_.size() - keep]) & 0xC0) == 0x80) ++keep;
  const size_t go = held_.size() - keep;
  if (go > 0) parser_.push(std::string_view(held_).substr(0, go), events_);
  held_.erase(0, go);
  if (final) parser_.finish(events_);
  emit_parser_events();
}

void ResponseJob::emit_parser_events() {
  for (const DsmlEvent& e : events_) {
    ResponseEvent out;
    std::string id;
    switch (e.kind) {
      case DsmlEvent::Kind::kReasoning:
        out.kind = ResponseEvent::Kind::kReasoningDelta;
        out.text = e.text;
        break;
      case DsmlEvent::Kind::kText:
      case DsmlEvent::Kind::kMalformed:
        out.kind = ResponseEvent::Kind::kTextDelta;
        out.text = e.text;
        break;
      case DsmlEvent::Kind::kToolCallBegin:
        id = call_id(next_call_number_++);
        out.kind = ResponseEvent::Kind::kToolCallBegin;
        out.call_id = id;
        out.name = e.name;
        break;
      case DsmlEvent::Kind::kToolCallArguments:
        out.kind = ResponseEvent::Kind::kToolCallArgumentsDelta;
        out.call_id = turn_.calls.empty() ? "" : turn_.calls.back().id;
        out.text = e.text;
        break;
      case DsmlEvent::Kind::kToolCallEnd:
        out.kind = ResponseEvent::Kind::kToolCallDone;
        out.call_id = turn_.calls.empty() ? "" : turn_.calls.back().id;
        out.name = e.name;
        out.text = e.text;
        if (!options_.parallel_tool_calls && forced_.empty()) {
          // One call only: the block closes here and the turn ends.
          std::string close(1, '\n');  // not "\n" + ...: g++ 12 -O3 reports a false -Wrestrict on it
          close += tokenizer::dsml_syntax(chat_family(*tokenizer_)).block_close;
          tokenizer_->encode(close, forced_);
          forced_.push_back(eos_);
        }
        break;
      case DsmlEvent::Kind::kToolCallsEnd:
        turn_.apply(e, id);
        continue;  // bytes for the log, no event
    }
    turn_.apply(e, id);
    if (!out.text.empty() || out.kind != ResponseEvent::Kind::kTextDelta) emit(out);
  }
  events_.clear();
}

}  // namespace hippo::agents
