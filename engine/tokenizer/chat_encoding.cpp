// Chat rendering and the incremental encoder (rules in chat_encoding.h, texts in chat_prompts.h).
#include "engine/tokenizer/chat_encoding.h"

#include "engine/tokenizer/chat_prompts.h"
#include "engine/tokenizer/python_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace hippo::tokenizer {
namespace {

constexpr std::string_view kBos = "<｜begin▁of▁sentence｜>";
constexpr std::string_view kEos = "<｜end▁of▁sentence｜>";
constexpr std::string_view kSystem = "<｜System｜>";
constexpr std::string_view kUser = "<｜User｜>";
constexpr std::string_view kAssistant = "<｜Assistant｜>";
constexpr std::string_view kLatestReminder = "<｜latest_reminder｜>";
constexpr std::string_view kBlockSeparator = "\n\n";
// The special tokens that appear inside fixed prompt texts.
constexpr std::string_view kTemplateSpecials[] = {kThinkStart, kThinkEnd, kDsmlToken};

void push_plain(std::string_view text, RenderedPrompt& out) {
  if (text.empty()) return;
  if (!out.segments.empty() && !out.segments.back().special) {
    out.segments.back().text.append(text);
  } else {
    out.segments.push_back({std::string(text), false});
  }
}

void push_special(std::string_view token, RenderedPrompt& out) { out.segments.push_back({std::string(token), true}); }

// Fixed text whose "<think>", "</think>" and "｜DSML｜" are special tokens.
void push_template(std::string_view text, RenderedPrompt& out) {
  while (!text.empty()) {
    std::size_t best = std::string_view::npos;
    std::string_view token;
    for (std::string_view special : kTemplateSpecials) {
      const std::size_t at = text.find(special);
      if (at < best) {
        best = at;
        token = special;
      }
    }
    if (best == std::string_view::npos) {
      push_plain(text, out);
      return;
    }
    push_plain(text.substr(0, best), out);
    push_special(token, out);
    text.remove_prefix(best + token.size());
  }
}

// The model's own tool-call bytes: only the "｜DSML｜" markers are special (as when rendered).
void push_raw_tool_calls(std::string_view raw, RenderedPrompt& out) {
  while (!raw.empty()) {
    const std::size_t at = raw.find(kDsmlToken);
    if (at == std::string_view::npos) {
      push_plain(raw, out);
      return;
    }
    push_plain(raw.substr(0, at), out);
    push_special(kDsmlToken, out);
    raw.remove_prefix(at + kDsmlToken.size());
  }
}

// User or tool content: the first `n_images` image placeholders are special, the rest is text.
void push_content(std::string_view content, std::size_t n_images, RenderedPrompt& out) {
  for (std::size_t i = 0; i < n_images; ++i) {
    const std::size_t at = content.find(kImagePlaceholder);
    if (at == std::string_view::npos) break;
    push_plain(content.substr(0, at), out);
    push_special(kImagePlaceholder, out);
    content.remove_prefix(at + kImagePlaceholder.size());
  }
  push_plain(content, out);
}

// The tag names inside the tools section: "tool_calls"/"invoke"/"parameter", or V4.1's " calls"/…
std::string_view tag_name(std::string_view tag) {
  const std::size_t at = tag.find(kDsmlToken) + kDsmlToken.size();
  std::string_view name = tag.substr(at);
  const std::size_t end = name.find_first_of(">");
  name = name.substr(0, end);
  if (const std::size_t space = name.find(" name=\""); space != std::string_view::npos) name = name.substr(0, space);
  return name;
}

Status tools_section(const ChatOptions& options, RenderedPrompt& out) {
  std::string lines;
  for (const ToolDefinition& tool : options.tools) {
    if (!lines.empty()) lines.push_back('\n');
    lines.append("{\"name\": ");
    append_python_json_string(tool.name, lines);
    lines.append(", \"description\": ");
    append_python_json_string(tool.description.value_or(""), lines);
    lines.append(", \"parameters\": ");
    if (tool.parameters) {
      Result<std::string> schema = to_python_json(*tool.parameters);
      if (!schema.ok()) return schema.status().with_context(fmt::format("tool {:?}: parameters", tool.name));
      lines.append(*schema);
    } else {
      lines.append("null");
    }
    lines.push_back('}');
  }
  const DsmlSyntax& syntax = dsml_syntax(options.family);
  const std::string_view format = prompts::kToolsFormat;
  const std::size_t schemas_at = format.find("{3}");
  push_template(fmt::format(fmt::runtime(format.substr(0, schemas_at)), tag_name(syntax.block_open),
                            tag_name(syntax.invoke_open), tag_name(syntax.param_open)),
                out);
  push_plain(lines, out);
  push_template(format.substr(schemas_at + 3), out);
  return {};
}

bool tools_active(const ChatOptions& options) {
  return !options.tools.empty() && options.tool_choice != ToolChoice::kNone;
}

std::string effort_text(const ChatOptions& options) {
  if (!options.thinking) return {};
  if (options.family == ModelFamily::kV4) {
    if (options.effort == ReasoningEffort::kLow) return {};
    return std::string(options.effort == ReasoningEffort::kMax ? prompts::kV4EffortMax : prompts::kV4EffortHigh);
  }
  const int budget = options.effort == ReasoningEffort::kLow ? 50 : options.effort == ReasoningEffort::kMax ? 100 : 75;
  return fmt::format(fmt::runtime(prompts::kV41EffortFormat), budget);
}

// The opening of the DSML block: "\n\n" + block_open + "\n".
void push_block_open(const DsmlSyntax& syntax, RenderedPrompt& out) {
  push_plain(kBlockSeparator, out);
  push_raw_tool_calls(syntax.block_open, out);
  push_plain("\n", out);
}

// The DSML block's content for structured tool calls: the invokes and the close tag.
void push_tool_call_invokes(const std::vector<ToolCall>& calls, ModelFamily family, RenderedPrompt& out) {
  const DsmlSyntax& syntax = dsml_syntax(family);
  const auto tag = [&](std::string_view t) { push_raw_tool_calls(t, out); };
  for (const ToolCall& call : calls) {
    tag(syntax.invoke_open);
    push_plain(call.name, out);
    push_plain("\">\n", out);
    const auto param = [&](std::string_view name, bool is_string, std::string_view value) {
      tag(syntax.param_open);
      push_plain(name, out);
      push_plain(is_string ? "\" string=\"true\">" : "\" string=\"false\">", out);
      push_plain(value, out);
      tag(syntax.param_close);
      push_plain("\n", out);
    };
    Result<std::vector<JsonMember>> members = json_object_members(call.arguments);
    if (!members.ok()) {
      param("arguments", true, call.arguments);  // not a JSON object: passed as written
    } else if (members->empty() && family == ModelFamily::kV41) {
      push_plain("\n", out);  // V4.1 writes an empty line for a call without parameters
    } else {
      for (const JsonMember& m : *members) param(m.key, m.is_string, m.value);
    }
    tag(syntax.invoke_close);
    push_plain("\n", out);
  }
  tag(syntax.block_close);
}

// The DSML block for structured tool calls, "\n\n" included.
void push_tool_calls(const std::vector<ToolCall>& calls, ModelFamily family, RenderedPrompt& out) {
  push_block_open(dsml_syntax(family), out);
  push_tool_call_invokes(calls, family, out);
}

}  // namespace

bool generation_prompt_opens_tool_calls(const ChatOptions& options) {
  return options.tool_choice == ToolChoice::kRequired && tools_active(options);
}

std::string RenderedPrompt::text() const {
  std::string text;
  for (const PromptSegment& s : segments) text.append(s.text);
  return text;
}

// Renders messages in order, keeping what later messages depend on: the open user turn, the
// preceding assistant's call ids (for sorting tool results), whether the system block is written.
class ChatRenderer {
 public:
  ChatRenderer(ChatOptions options, bool keep_reasoning)
      : options_(std::move(options)), keep_reasoning_(keep_reasoning), syntax_(&dsml_syntax(options_.family)) {}

  bool begun() const { return begun_; }
  bool turn_open() const { return turn_open_; }

  Status begin(const std::vector<std::string_view>& system_contents, RenderedPrompt& out) {
    begun_ = true;
    push_special(kBos, out);
    RenderedPrompt block;
    std::string system_text;
    for (std::size_t i = 0; i < system_contents.size(); ++i) {
      if (i > 0) system_text.append(kBlockSeparator);
      system_text.append(system_contents[i]);
    }
    const std::string effort = effort_text(options_);
    if (!effort.empty()) {
      push_plain(effort, block);
      push_plain(kBlockSeparator, block);
    }
    push_plain(system_text, block);
    if (tools_active(options_)) {
      push_plain(kBlockSeparator, block);
      HIPPO_RETURN_IF_ERROR(tools_section(options_, block));
    }
    const ResponseFormat& format = options_.response_format;
    if (format.kind == ResponseFormat::Kind::kJsonObject) {
      push_plain(kBlockSeparator, block);
      if (options_.family == ModelFamily::kV4) {
        push_plain(prompts::kV4JsonObject, block);
      } else {
        push_plain(prompts::kJsonSchemaPrefix, block);
        push_plain("{\"type\": \"json_object\"}", block);
      }
    } else if (format.kind == ResponseFormat::Kind::kJsonSchema) {
      Result<std::string> schema = to_python_json(format.schema);
      if (!schema.ok()) return schema.status().with_context("response format schema");
      push_plain(kBlockSeparator, block);
      push_plain(prompts::kJsonSchemaPrefix, block);
      push_plain(*schema, block);
    }
    if (options_.family == ModelFamily::kV41 && !block.segments.empty()) push_special(kSystem, out);
    for (PromptSegment& s : block.segments) {
      if (s.special) {
        push_special(s.text, out);
      } else {
        push_plain(s.text, out);
      }
    }
    return {};
  }

  Status render(const Message& m, RenderedPrompt& out) {
    if (prefix_written_) return make_error(ErrorCode::kInvalidArgument, "a prefix assistant message must be the last");
    switch (m.role) {
      case Role::kSystem:
        return make_error(ErrorCode::kInvalidArgument, "a system message after the first turn");
      case Role::kUser:
      case Role::kTool:
        turn_.push_back(TurnBlock{m.role == Role::kTool, m.tool_call_id, m.content, m.n_images});
        return {};
      case Role::kLatestReminder:
        flush_turn(out);
        turn_open_ = false;
        push_special(kLatestReminder, out);
        push_plain(m.content, out);
        return {};
      case Role::kAssistant:
        flush_turn(out);
        turn_open_ = false;
        return render_assistant(m, out);
    }
    return {};
  }

  // Ends a batch of messages: the pending user turn is written (and stays open).
  void end_batch(RenderedPrompt& out) { flush_turn(out); }

  void generation_prompt(RenderedPrompt& out) {
    flush_turn(out);
    turn_open_ = false;
    push_special(kAssistant, out);
    push_special(options_.thinking ? kThinkStart : kThinkEnd, out);
    answer_in_block_ = generation_prompt_opens_tool_calls(options_);
    if (answer_in_block_) push_block_open(*syntax_, out);
  }

  bool prefix_written() const { return prefix_written_; }

 private:
  struct TurnBlock {
    bool tool = false;
    std::string id;
    std::string content;
    std::size_t n_images = 0;
  };

  // The order of the tool results `blocks` (indices into it): by the preceding assistant's written
  // call order when every id is unique and one of its calls, else as given.
  std::vector<std::size_t> tool_order(const std::vector<TurnBlock>& blocks, std::size_t begin, std::size_t end) const {
    std::vector<std::size_t> order, call_index;
    for (std::size_t i = begin; i < end; ++i) {
      if (blocks[i].tool) order.push_back(i);
    }
    bool sortable = true;
    for (std::size_t i : order) {
      const auto it = std::find(last_call_ids_.begin(), last_call_ids_.end(), blocks[i].id);
      const auto same_id = [&](std::size_t j) { return blocks[j].id == blocks[i].id; };
      if (blocks[i].id.empty() || it == last_call_ids_.end() || std::count_if(order.begin(), order.end(), same_id) > 1) {
        sortable = false;
        break;
      }
      call_index.push_back(static_cast<std::size_t>(it - last_call_ids_.begin()));
    }
    if (!sortable) return order;
    std::vector<std::size_t> by_call(order.size());
    for (std::size_t k = 0; k < by_call.size(); ++k) by_call[k] = k;
    std::stable_sort(by_call.begin(), by_call.end(), [&](std::size_t a, std::size_t b) { return call_index[a] < call_index[b]; });
    std::vector<std::size_t> sorted;
    for (std::size_t k : by_call) sorted.push_back(order[k]);
    return sorted;
  }

  // One "<｜User｜>" turn from blocks [begin, end): user texts where they stand, tool results in the
  // tool-result places, in tool_order().
  void write_turn(std::size_t begin, std::size_t end, RenderedPrompt& out) {
    const std::vector<std::size_t> tools = tool_order(turn_, begin, end);
    std::size_t next_tool = 0;
    push_special(kUser, out);
    for (std::size_t i = begin; i < end; ++i) {
      if (i > begin) push_plain(kBlockSeparator, out);
      if (!turn_[i].tool) {
        push_content(turn_[i].content, turn_[i].n_images, out);
        continue;
      }
      const TurnBlock& result = turn_[tools[next_tool++]];
      push_plain("<tool_result>", out);
      push_content(result.content, result.n_images, out);
      push_plain("</tool_result>", out);
    }
  }

  // V4 starts a new turn where a tool result follows a user text; V4.1 keeps one turn.
  void flush_turn(RenderedPrompt& out) {
    if (turn_.empty()) return;
    std::size_t begin = 0;
    for (std::size_t i = 1; i < turn_.size(); ++i) {
      if (options_.family == ModelFamily::kV4 && turn_[i].tool && !turn_[i - 1].tool) {
        write_turn(begin, i, out);
        begin = i;
      }
    }
    write_turn(begin, turn_.size(), out);
    turn_.clear();
    turn_open_ = true;
  }

  Status render_assistant(const Message& m, RenderedPrompt& out) {
    if (std::exchange(answer_in_block_, false)) return render_answer_in_block(m, out);
    const bool drop = !keep_reasoning_ && options_.tools.empty() && !m.prefix;
    push_special(kAssistant, out);
    if (m.reasoning && !drop) {
      push_special(kThinkStart, out);
      push_plain(*m.reasoning, out);
    }
    push_special(kThinkEnd, out);
    push_plain(m.content, out);
    const std::vector<ToolCall> calls = written_order(m.tool_calls);
    if (m.raw_tool_calls) {
      push_raw_tool_calls(*m.raw_tool_calls, out);
    } else if (!calls.empty()) {
      push_tool_calls(calls, options_.family, out);
    }
    last_call_ids_.clear();
    for (const ToolCall& call : calls) last_call_ids_.push_back(call.id);
    end_assistant(m, out);
    return {};
  }

  // The answer to a generation prompt that opened the tool-call block, in the order the model wrote
  // it: the prompt again, the rest of the block (raw_tool_calls, or the calls), the content.
  Status render_answer_in_block(const Message& m, RenderedPrompt& out) {
    if (m.reasoning && !m.reasoning->empty()) {
      return make_error(ErrorCode::kFailedPrecondition,
                        "the generation prompt opened the tool-call block: its answer has no reasoning");
    }
    push_special(kAssistant, out);
    push_special(options_.thinking ? kThinkStart : kThinkEnd, out);
    push_block_open(*syntax_, out);
    const std::vector<ToolCall> calls = written_order(m.tool_calls);
    if (m.raw_tool_calls) {
      push_raw_tool_calls(*m.raw_tool_calls, out);
    } else if (!calls.empty()) {
      push_tool_call_invokes(calls, options_.family, out);
    }
    push_plain(m.content, out);
    last_call_ids_.clear();
    for (const ToolCall& call : calls) last_call_ids_.push_back(call.id);
    end_assistant(m, out);
    return {};
  }

  // V4 writes calls sorted by id (byte order, stable), V4.1 as given; tool results follow the
  // written order in both.
  std::vector<ToolCall> written_order(std::vector<ToolCall> calls) const {
    if (options_.family == ModelFamily::kV4) {
      std::stable_sort(calls.begin(), calls.end(), [](const ToolCall& a, const ToolCall& b) { return a.id < b.id; });
    }
    return calls;
  }

  void end_assistant(const Message& m, RenderedPrompt& out) {
    if (m.prefix) {
      prefix_written_ = true;
    } else {
      push_special(kEos, out);
    }
  }

  ChatOptions options_;
  bool keep_reasoning_;
  const DsmlSyntax* syntax_;
  bool begun_ = false;
  bool prefix_written_ = false;
  bool turn_open_ = false;               // the last thing written is a user turn
  bool answer_in_block_ = false;         // the generation prompt written last opened the tool-call block
  std::vector<TurnBlock> turn_;            // the user turn being collected
  std::vector<std::string> last_call_ids_; // the preceding assistant's calls, in written order
};

Result<RenderedPrompt> render_chat(std::span<const Message> messages, const ChatOptions& options) {
  ChatRenderer renderer(options, /*keep_reasoning=*/false);
  RenderedPrompt out;
  std::vector<std::string_view> system_contents;
  for (const Message& m : messages) {
    if (m.role == Role::kSystem) system_contents.push_back(m.content);
  }
  HIPPO_RETURN_IF_ERROR(renderer.begin(system_contents, out));
  for (const Message& m : messages) {
    if (m.role != Role::kSystem) HIPPO_RETURN_IF_ERROR(renderer.render(m, out));
  }
  renderer.end_batch(out);
  if (!renderer.prefix_written()) renderer.generation_prompt(out);
  return out;
}

Result<std::vector<TokenId>> encode_prompt(const Tokenizer& tokenizer, const RenderedPrompt& prompt) {
  std::vector<TokenId> ids;
  for (const PromptSegment& s : prompt.segments) {
    if (!s.special) {
      tokenizer.encode_plain(s.text, ids);
      continue;
    }
    const std::optional<TokenId> id = tokenizer.added_token_id(s.text);
    if (!id) {
      return make_error(ErrorCode::kInvalidArgument, "special token {:?} is not in the tokenizer's added vocabulary",
                        s.text);
    }
    ids.push_back(*id);
  }
  return ids;
}

Result<std::vector<TokenId>> expand_image_spans(std::span<const TokenId> ids, TokenId placeholder_id,
                                                std::span<const ImageGrid> grids) {
  std::vector<TokenId> out;
  out.reserve(ids.size());
  std::size_t next = 0;
  for (TokenId id : ids) {
    if (id != placeholder_id) {
      out.push_back(id);
      continue;
    }
    if (next == grids.size()) {
      return make_error(ErrorCode::kInvalidArgument, "the prompt has more image placeholders than the {} images given",
                        grids.size());
    }
    const ImageGrid& g = grids[next++];
    if (g.n_rows == 0 || g.n_cols == 0) return make_error(ErrorCode::kInvalidArgument, "image {} has an empty grid", next - 1);
    out.insert(out.end(), g.n_rows * (g.n_cols + 1) + 2, kImageSpanTokenId);
  }
  if (next != grids.size()) {
    return make_error(ErrorCode::kInvalidArgument, "{} images given for {} placeholders", grids.size(), next);
  }
  return out;
}

namespace {

// Cuts `prompt` after its first `n` bytes: it keeps them, the rest is returned. Empty when the cut
// falls inside a special piece.
std::optional<RenderedPrompt> split_prompt(RenderedPrompt& prompt, std::size_t n) {
  RenderedPrompt rest;
  std::size_t at = 0;
  std::size_t i = 0;
  for (; i < prompt.segments.size() && at + prompt.segments[i].text.size() <= n; ++i) at += prompt.segments[i].text.size();
  if (i < prompt.segments.size() && at < n) {
    PromptSegment& s = prompt.segments[i];
    if (s.special) return std::nullopt;
    rest.segments.push_back({s.text.substr(n - at), false});
    s.text.resize(n - at);
    ++i;
  }
  for (std::size_t j = i; j < prompt.segments.size(); ++j) rest.segments.push_back(std::move(prompt.segments[j]));
  prompt.segments.resize(i);
  return rest;
}

}  // namespace

ChatEncoder::ChatEncoder(const Tokenizer& tokenizer, ChatOptions options)
    : tokenizer_(&tokenizer), renderer_(std::make_unique<ChatRenderer>(std::move(options), /*keep_reasoning=*/true)) {}
ChatEncoder::~ChatEncoder() = default;
ChatEncoder::ChatEncoder(ChatEncoder&&) noexcept = default;
ChatEncoder& ChatEncoder::operator=(ChatEncoder&&) noexcept = default;

ChatEncoder::ChatEncoder(const ChatEncoder& other)
    : tokenizer_(other.tokenizer_),
      renderer_(std::make_unique<ChatRenderer>(*other.renderer_)),
      pending_generation_prompt_(other.pending_generation_prompt_),
      pending_generation_text_(other.pending_generation_text_),
      n_tokens_(other.n_tokens_) {}

ChatEncoder& ChatEncoder::operator=(const ChatEncoder& other) {
  if (this != &other) *this = ChatEncoder(other);
  return *this;
}

Result<ChatSuffix> ChatEncoder::encode_chat_suffix(std::span<const Message> messages, bool add_generation_prompt) {
  ChatRenderer renderer = *renderer_;  // committed only on success
  RenderedPrompt out;
  std::size_t first = 0;
  if (!renderer.begun()) {
    std::vector<std::string_view> system_contents;
    while (first < messages.size() && messages[first].role == Role::kSystem) {
      system_contents.push_back(messages[first++].content);
    }
    HIPPO_RETURN_IF_ERROR(renderer.begin(system_contents, out));
  }
  const bool answers_prompt = !pending_generation_prompt_.empty();
  if (answers_prompt && (first >= messages.size() || messages[first].role != Role::kAssistant)) {
    return make_error(ErrorCode::kFailedPrecondition,
                      "the session ends with a generation prompt: append the assistant's answer first");
  }
  if (first < messages.size() && renderer.turn_open() &&
      (messages[first].role == Role::kUser || messages[first].role == Role::kTool)) {
    return make_error(ErrorCode::kFailedPrecondition,
                      "a user turn cannot continue across calls (its text would be re-tokenized); append the "
                      "whole turn with its generation prompt in one call");
  }
  for (std::size_t i = first; i < messages.size(); ++i) HIPPO_RETURN_IF_ERROR(renderer.render(messages[i], out));
  renderer.end_batch(out);
  std::vector<TokenId> generation_prompt;
  std::string generation_text;
  if (add_generation_prompt) {
    if (renderer.prefix_written()) {
      return make_error(ErrorCode::kInvalidArgument, "no generation prompt after a prefix assistant message");
    }
    RenderedPrompt prompt;
    renderer.generation_prompt(prompt);
    HIPPO_ASSIGN_OR_RETURN(generation_prompt, encode_prompt(*tokenizer_, prompt));
    generation_text = prompt.text();
    for (PromptSegment& s : prompt.segments) out.segments.push_back(std::move(s));
  }
  std::string text = out.text();
  if (answers_prompt) {
    // The answer must start with the prompt it answers; what follows is encoded on its own, as the
    // model's tokens follow the prompt's (a prompt may end inside plain text: the open tool-call block).
    std::optional<RenderedPrompt> answer;
    if (text.starts_with(pending_generation_text_)) answer = split_prompt(out, pending_generation_text_.size());
    bool continues = false;
    if (answer) {
      HIPPO_ASSIGN_OR_RETURN(std::vector<TokenId> prompt_ids, encode_prompt(*tokenizer_, out));
      continues = prompt_ids == pending_generation_prompt_;
    }
    if (!continues) {
      return make_error(ErrorCode::kFailedPrecondition,
                        "the assistant message does not continue the generation prompt (thinking mode needs "
                        "reasoning, chat mode none)");
    }
    out = std::move(*answer);
    text.erase(0, pending_generation_text_.size());
  }
  HIPPO_ASSIGN_OR_RETURN(std::vector<TokenId> ids, encode_prompt(*tokenizer_, out));
  *renderer_ = std::move(renderer);
  pending_generation_prompt_ = std::move(generation_prompt);
  pending_generation_text_ = std::move(generation_text);
  n_tokens_ += ids.size();
  return ChatSuffix{std::move(text), std::move(ids)};
}

}  // namespace hippo::tokenizer
