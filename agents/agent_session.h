// One agent session as the runtime holds it: its settings, its chat encoder, the model state when
// resident, the rendered ids not yet prefilled, and the response in flight. Owned and touched only
// by the runtime's engine thread (the store lane builds a loaded one before handing it over).
#pragma once

#include "agents/agent_types.h"
#include "agents/response_job.h"
#include "engine/model/session_state.h"
#include "engine/speculative/session_drafter.h"
#include "engine/tokenizer/chat_encoding.h"
#include "storage/store.h"

#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace hippo::agents {

// Roles of the conversation log (storage `messages`), beside "user" and "tool":
//   "prompt"     the ids rendered for the inputs before it, generation prompt included
//   "assistant"  content: every byte the model wrote; tool_calls: its DSML block; token_ids: the
//                sampled ids and the EOS that closes the turn
//   "assistant_input"  an earlier answer the client gave (InputItem::kAssistantMessage): content
//                its text; tool_calls {"reasoning": text or null, "calls": [{id, name, arguments}]}
// The concatenated token_ids of a session's log are exactly the ids its model state has seen or
// will see next, so a lost or foreign snapshot is rebuilt by prefilling them.
inline constexpr std::string_view kRolePrompt = "prompt";
inline constexpr std::string_view kRoleAssistant = "assistant";
inline constexpr std::string_view kRoleUser = "user";
inline constexpr std::string_view kRoleTool = "tool";
inline constexpr std::string_view kRoleAssistantInput = "assistant_input";

// A snapshot of a session's state as storage takes it (the streams point into the state).
inline storage::SnapshotRequest snapshot_request(const std::string& session_id, const std::string& fingerprint,
                                                 const engine::SessionState& state) {
  storage::SnapshotRequest request;
  request.session_id = session_id;
  request.fingerprint = fingerprint;
  request.n_tokens = state.n_tokens();
  request.frontier = state.frontier();
  for (const engine::StateStream& stream : state.streams())
    request.streams.push_back({stream.name, stream.entry_bytes, storage::Filter::kBytePlane, stream.bytes});
  return request;
}

// A snapshot of the session being written by the runtime's snapshot writer, off the engine thread.
// The writer co-owns the state and reads its bytes meanwhile, so nothing may change the state
// until it is written: the session's next response is admitted only then.
struct SnapshotInFlight {
  std::shared_future<Result<storage::SnapshotWriteStats>> written;  // a caller waiting for it shares it
  std::string session_id;  // whose snapshot it is: a prefix fork waits for its source's
  int64_t n_tokens = 0;
  std::chrono::steady_clock::time_point started{};
  bool then_free = false;  // a swap-out: the state is dropped once written, unless used again first
};

// What the restore thread brings back: the state of the session's latest snapshot; or, where that
// cannot be used, a new state and every id of the log, to prefill again (a rebuild).
struct RestoredState {
  std::shared_ptr<engine::SessionState> state;
  std::optional<std::vector<int32_t>> rebuild_ids;
  Status rebuild_reason;
};

// A swapped session's state being brought back by the runtime's restore thread; its bytes are
// counted as committed meanwhile.
struct RestoreInFlight {
  std::future<Result<RestoredState>> restored;
  std::chrono::steady_clock::time_point started{};
};

struct AgentSession {
  AgentSession(std::string session_id, SessionSettings session_settings, tokenizer::ChatEncoder chat_encoder)
      : id(std::move(session_id)), settings(std::move(session_settings)), encoder(std::move(chat_encoder)) {}

  std::string id;
  std::optional<int64_t> tenant;
  bool completion = false;  // of kind completion (a stateless request's): keyed or closed when its response ends
  // Completion sessions: the conversation key of the items rendered so far (conversation_key.h).
  std::string conversation_key;
  bool keyed = false;  // storage holds conversation_key as its prefix key (it is idle and unchanged)
  SessionSettings settings;
  SessionStatus status = SessionStatus::kReady;
  tokenizer::ChatEncoder encoder;
  std::shared_ptr<engine::SessionState> state;  // absent: swapped out (or not loaded since start)
  std::optional<SnapshotInFlight> snapshot;     // being written
  std::chrono::steady_clock::time_point swap_failed_at{};  // its last swap-out failed then
  std::optional<RestoreInFlight> restoring;     // being read back
  int64_t stored_tokens = 0;                  // tokens of the state when it is not resident
  std::vector<int32_t> pending;               // rendered ids not yet prefilled
  std::vector<tokenizer::Message> inputs;     // appended, rendered at the next response
  std::vector<std::string> open_calls;        // tool calls without a result yet
  int64_t n_calls = 0;                        // calls so far: the next id is call_<n_calls>
  int64_t snapshot_tokens = -1;               // tokens in the latest snapshot (-1: none)
  std::chrono::steady_clock::time_point snapshot_time{};
  std::chrono::steady_clock::time_point awaiting_since{};
  uint64_t last_used = 0;                     // LRU clock
  std::unique_ptr<ResponseJob> job;           // queued or running
  bool job_active = false;                    // admitted: memory reserved, in the batch
  uint64_t reserved_bytes = 0;                // state bytes its running job may reach
  int64_t prefill_wait_steps = 0;             // decode steps its prefill sits out (pace_prefill)
  // Loaded from the database: the ids its snapshot must hold (checked at restore, then dropped),
  // or a snapshot that cannot be right (a rebuild from the log).
  std::vector<int32_t> expected_prefix;
  bool needs_rebuild = false;
  // Speculative decoding while a response runs: its drafter (built at its first decode step, over
  // every token of the session; its guards pause drafts that keep failing).
  std::unique_ptr<engine::SessionDrafter> drafter;

  int64_t n_tokens() const { return state ? state->n_tokens() : stored_tokens; }
  uint64_t resident_bytes() const { return state ? state->memory_bytes() : 0; }
};

}  // namespace hippo::agents
