// DeepSeek V4 / V4.1 chat encoding: conversation -> prompt text -> token ids, byte-identical to
// DeepSeek's reference encoder (deepseek-recipe; docs/tokenizer.md), and an incremental form for
// live sessions.
//
// Rendering, as the reference does it:
//   BOS, then the system block: [effort text "\n\n"] + system contents joined by "\n\n"
//     [+ "\n\n" + tools section] [+ "\n\n" + response format]; V4.1 puts "<｜System｜>" before a
//     non-empty block. System messages anywhere in the conversation belong to this block.
//   user/tool turn: "<｜User｜>" + blocks joined by "\n\n"; tool results are "<tool_result>…</tool_result>"
//     in the order of the preceding assistant's written calls (when their ids are unique and known,
//     else as given), in the places where tool messages stand; in V4 a tool message right after a
//     user message starts a new turn.
//   latest_reminder: "<｜latest_reminder｜>" + content.
//   assistant: "<｜Assistant｜>" [+ "<think>" + reasoning] + "</think>" + content
//     [+ "\n\n" + DSML block; V4 sorts the calls by id] + EOS (no EOS for a prefix message). Without
//     tools, the reasoning of every closed assistant message is dropped.
//   generation prompt: "<｜Assistant｜>" + "<think>" (thinking) or "</think>" (chat)
//     [+ "\n\n<｜DSML｜tool_calls>\n" when a tool call is required].
// Only the special tokens the renderer places are special; all content (system, user, tool results,
// reasoning, answers, tool names and arguments, schemas) is encoded as plain text, so special-token
// spellings typed by users stay text (Tokenizer::encode_plain).
//
// Incremental (ChatEncoder): each call renders only the new messages, and the ids already given never
// change. That needs reasoning kept (dropping it would rewrite history), so a ChatEncoder renders
// as the reference does when tools are present. The tool results of one turn must come in one call.
// When the generation prompt opened the tool-call block (a call required), the model's answer starts
// inside it, and the answer is rendered as the model wrote it: the prompt, then raw_tool_calls (the
// block's bytes after that opening, DsmlStreamParser::Options::starts_in_tool_calls) or the calls,
// then the content; it has no reasoning (in thinking mode the block opens right after "<think>").
#pragma once

#include "base/status.h"
#include "engine/tokenizer/dsml_syntax.h"
#include "engine/tokenizer/tokenizer.h"

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hippo::tokenizer {

enum class Role { kSystem, kUser, kAssistant, kTool, kLatestReminder };

// An image in a prompt: one placeholder token, which the model's input expands into the image's
// span (expand_image_spans).
inline constexpr std::string_view kImagePlaceholder = "<｜image｜>";
// Every position of an image span carries this id (architecture spec §7.4).
inline constexpr TokenId kImageSpanTokenId = 129264;

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text; an object renders one parameter per member
};

struct Message {
  Role role = Role::kUser;
  std::string content;
  // user, tool: the first n_images occurrences of kImagePlaceholder in `content` stand for the
  // message's images (as in the reference); later ones are text.
  std::size_t n_images = 0;
  std::optional<std::string> reasoning;       // assistant
  std::vector<ToolCall> tool_calls;           // assistant
  std::optional<std::string> raw_tool_calls;  // assistant: the model's exact block bytes
                                              // (DsmlEvent::kToolCallsEnd), replayed instead of tool_calls;
                                              // in an answer that starts inside the block, those after
                                              // the prompt's opening
  std::string tool_call_id;                   // tool
  bool prefix = false;                        // assistant: an unfinished answer to continue
};

struct ToolDefinition {
  std::string name;
  std::optional<std::string> description;
  std::optional<std::string> parameters;  // JSON Schema text
};

enum class ReasoningEffort { kDefault, kLow, kHigh, kXHigh, kMax };
enum class ToolChoice { kAuto, kNone, kRequired };

struct ResponseFormat {
  enum class Kind { kText, kJsonObject, kJsonSchema };
  Kind kind = Kind::kText;
  std::string schema;  // JSON text, for kJsonSchema
};

struct ChatOptions {
  ModelFamily family = ModelFamily::kV41;
  bool thinking = true;
  ReasoningEffort effort = ReasoningEffort::kDefault;
  std::vector<ToolDefinition> tools;
  ToolChoice tool_choice = ToolChoice::kAuto;
  ResponseFormat response_format;
};

// A prompt as text pieces: a special piece is exactly one added token's spelling.
struct PromptSegment {
  std::string text;
  bool special = false;
};

struct RenderedPrompt {
  std::vector<PromptSegment> segments;
  std::string text() const;
};

// Whether the generation prompt opens the tool-call block ("\n\n" + block_open + "\n"): a tool call is
// required and tools are given. The model's output then starts inside the block.
bool generation_prompt_opens_tool_calls(const ChatOptions& options);

// The whole conversation, as the reference renders it (ends with the generation prompt unless the
// last message is a prefix assistant message).
Result<RenderedPrompt> render_chat(std::span<const Message> messages, const ChatOptions& options);

// Special pieces become their token (an error if the tokenizer lacks it, e.g. V4.1's "<｜System｜>"
// in the V4 tokenizer); plain pieces are encoded without the added vocabulary.
Result<std::vector<TokenId>> encode_prompt(const Tokenizer& tokenizer, const RenderedPrompt& prompt);

// The grid of one image after the vision aligner's 3×3 merge (⌈n_h/3⌉ × ⌈n_w/3⌉ patches).
struct ImageGrid {
  std::size_t n_rows = 0;
  std::size_t n_cols = 0;
};

// The model input for a prompt with images: each placeholder id becomes its image's span,
// [START] + ([IMAGE] × n_cols + [NEWLINE]) × n_rows + [END] = n_rows·(n_cols+1)+2 positions, all
// kImageSpanTokenId (the vision tower fills them). One grid per placeholder, in order.
Result<std::vector<TokenId>> expand_image_spans(std::span<const TokenId> ids, TokenId placeholder_id,
                                                std::span<const ImageGrid> grids);

class ChatRenderer;

// What one incremental step adds to a session: its text and its ids.
struct ChatSuffix {
  std::string text;
  std::vector<TokenId> ids;
};

// The incremental encoder of one live session.
class ChatEncoder {
 public:
  ChatEncoder(const Tokenizer& tokenizer, ChatOptions options);
  ~ChatEncoder();
  ChatEncoder(ChatEncoder&&) noexcept;
  ChatEncoder& operator=(ChatEncoder&&) noexcept;
  // A copy renders on from the same point, independently (try a suffix, keep it only if wanted).
  ChatEncoder(const ChatEncoder& other);
  ChatEncoder& operator=(const ChatEncoder& other);

  // The ids that extend the session by `messages` (BOS and the system block on the first call), and
  // by the generation prompt when `add_generation_prompt`. After a generation prompt, the next
  // message must be the assistant's answer; its ids then leave out the generation prompt, which is
  // already in the session (they are the ids of exactly what the model should have generated:
  // reasoning, "</think>", answer, tool calls, EOS; encoded on their own, after the prompt, as the
  // model's tokens follow it). Errors leave the encoder unchanged.
  Result<ChatSuffix> encode_chat_suffix(std::span<const Message> messages, bool add_generation_prompt);

  // Tokens given out so far.
  std::size_t n_tokens() const { return n_tokens_; }

 private:
  const Tokenizer* tokenizer_;
  std::unique_ptr<ChatRenderer> renderer_;
  std::vector<TokenId> pending_generation_prompt_;
  std::string pending_generation_text_;
  std::size_t n_tokens_ = 0;
};

}  // namespace hippo::tokenizer
