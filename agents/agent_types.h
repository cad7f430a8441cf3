// The vocabulary of the agents layer: session settings and states, input items, response options
// and the events a response streams. No sockets and no wire format: the api layer maps these to
// its protocol.
#pragma once

#include "base/status.h"
#include "engine/model/step_costs.h"
#include "engine/sampling/sampler.h"
#include "engine/speculative/context_drafter.h"
#include "engine/tokenizer/chat_encoding.h"

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hippo::agents {

// ready ⇄ running → awaiting_tool → ready → swapped (state only in storage) → resumed on use.
enum class SessionStatus { kReady, kRunning, kAwaitingTool, kSwapped, kClosed };
std::string_view status_name(SessionStatus status);

// Fixed for the life of a session (they shape the rendered prompt, which never changes once given).
struct SessionSettings {
  std::string instructions;  // the system message; empty: none
  std::vector<tokenizer::ToolDefinition> tools;
  tokenizer::ToolChoice tool_choice = tokenizer::ToolChoice::kAuto;
  bool thinking = false;
  tokenizer::ReasoningEffort effort = tokenizer::ReasoningEffort::kDefault;
};

// Settings as the JSON text the sessions table keeps (opaque to storage).
std::string settings_to_json(const SessionSettings& settings);
Result<SessionSettings> settings_from_json(std::string_view json);

struct InputItem {
  // kAssistantMessage: an earlier answer given by the client (a stateless request's history), rendered
  // as the chat encoding renders an assistant message; its calls then await their results.
  enum class Kind { kUserMessage, kToolResult, kAssistantMessage };
  Kind kind = Kind::kUserMessage;
  std::string content;
  std::string tool_call_id;                     // kToolResult: the call it answers
  std::optional<std::string> reasoning{};       // kAssistantMessage
  std::vector<tokenizer::ToolCall> tool_calls{};  // kAssistantMessage
};

// One token and its log-probability under the model (log-softmax of the raw logits: before
// temperature, top-k, top-p and min-p).
struct TokenLogprob {
  std::string token;  // its bytes (alone, a piece of a character is not valid UTF-8)
  double logprob = 0;
};

inline constexpr int kMaxTopLogprobs = 20;

struct ResponseOptions {
  engine::SamplingParams sampling;  // temperature 0: greedy
  int64_t max_output_tokens = 256;
  int64_t max_prompt_tokens = 0;    // the most tokens the response's new input may render to; 0: no limit
  // -1: none; 0 to kMaxTopLogprobs: a kTokenLogprob event per sampled token (EOS and special tokens
  // aside) with this many most likely alternatives.
  int top_logprobs = -1;
  std::vector<std::string> stop;    // the answer ends before the first of these (not included)
  // false: the answer ends after its first complete tool call (the runtime writes the block's
  // close and EOS in the model's place, so the turn stays well-formed DSML).
  bool parallel_tool_calls = true;
};

struct Usage {
  int64_t input_tokens = 0;   // the context the response was generated from
  int64_t cached_tokens = 0;  // of those, already in the session's state (not prefilled again)
  int64_t output_tokens = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
  double first_token_seconds = 0;  // from the request to the first sampled token
  // Speculative decoding: tokens drafted for verification, and of those taken as output.
  int64_t drafted_tokens = 0;
  int64_t accepted_tokens = 0;
};

struct ResponseEvent {
  enum class Kind {
    kReasoningDelta,          // text
    kTextDelta,               // text
    kToolCallBegin,           // call_id, name
    kToolCallArgumentsDelta,  // call_id, text
    kToolCallDone,            // call_id, name, text: the whole arguments JSON
    kTokenLogprob,            // text: a sampled token's bytes, logprob, top_logprobs (before its text's deltas)
    kCompleted,               // finish_reason, usage
    kFailed,                  // error
  };
  Kind kind = Kind::kTextDelta;
  std::string text;
  std::string name;
  std::string call_id;
  std::string finish_reason;  // "stop", "length", "tool_calls", "cancelled"
  Usage usage;
  uint64_t seed = 0;          // kCompleted, kFailed: the sampling seed the response used (given or drawn)
  double logprob = 0;                      // kTokenLogprob
  std::vector<TokenLogprob> top_logprobs;  // kTokenLogprob: most likely first
  Status error;
};

// Called on the runtime's engine thread, in order; it must not block for long.
using EventSink = std::function<void(const ResponseEvent&)>;

struct SessionView {
  std::string id;
  std::optional<int64_t> tenant;  // the tenant that owns it (none: made without one)
  SessionStatus status = SessionStatus::kReady;
  int64_t n_tokens = 0;          // in the model's state (or its snapshot when swapped)
  int64_t pending_tokens = 0;    // rendered, not yet prefilled
  uint64_t resident_bytes = 0;   // the model state held in memory (0 when swapped)
  std::vector<std::string> awaiting_call_ids;
};

// A session as the database lists it, read without loading it (closed sessions too).
struct SessionSummary {
  std::string id;
  std::optional<int64_t> tenant;
  // As session() would say for a session this runtime holds; one it has not loaded since it
  // started is kSwapped (its state is only in storage), or kClosed.
  SessionStatus status = SessionStatus::kSwapped;
  std::string forked_from;  // empty: not a fork
  bool completion = false;  // a stateless request's session (respond_to_conversation)
  int64_t created_at = 0;   // Unix seconds
  int64_t updated_at = 0;
};

// Whether the engine thread makes progress: `working` while it has something to do (a step, a
// call), and how long since it last finished one step or call.
struct EngineLiveness {
  bool working = false;
  double seconds_since_progress = 0;
};

struct RuntimeStats {
  int64_t sessions = 0;
  int64_t resident_sessions = 0;
  uint64_t resident_bytes = 0;      // model state of resident sessions
  uint64_t peak_committed_bytes = 0;  // the most that resident state plus running reservations reached
  int64_t swap_outs = 0;
  int64_t resumes = 0;
  int64_t rebuilds = 0;             // sessions re-prefilled from their log (corrupt or foreign snapshot)
  int64_t snapshots = 0;
  int64_t queued_responses = 0;
  int64_t running_responses = 0;
  int64_t largest_batch = 0;        // most sessions in one forward step so far
  std::array<int64_t, 5> sessions_by_status{};  // indexed by SessionStatus (kClosed: 0, they leave)
  // Summed over finished responses:
  int64_t input_tokens = 0;         // context each response was generated from
  int64_t cached_tokens = 0;        // of those, already in the session's state (not prefilled)
  int64_t output_tokens = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
  double snapshot_seconds = 0;      // writing snapshots, until durable
  double resume_seconds = 0;        // restoring snapshots into memory
  int64_t snapshot_bytes_written = 0;  // bytes the snapshots added to the database
  int64_t database_bytes = 0;       // the database file and its WAL on disk now
  // Speculative decoding, over every verified draft:
  int64_t drafted_tokens = 0;
  int64_t accepted_tokens = 0;
  std::array<int64_t, engine::kMaxDraftTokens + 1> drafts_by_accepted{};  // verifies by drafts accepted
  std::array<int64_t, 2> drafted_by{}, accepted_by{};  // the same, per engine::Drafter
  engine::StepCostEstimate step_costs;  // what auto speculation weighs drafts by (engine/model/step_costs.h)
};

}  // namespace hippo::agents
