// AgentRuntime: one model, many long-lived sessions (product.md §2, §9). Every session operation
// runs on one engine thread, which also runs the scheduler:
//
//   each step   decode: every running response that has prefilled its input adds one token;
//               prefill: the oldest response still prefilling adds a chunk (small while others
//               decode, so their inter-token latency stays bounded), the part before the decoder
//               tail through the encoder layers only (engine/model/model.h);
//               all of it in one batched forward, then each decoding response samples.
//   memory      resident model state plus what running responses may still add stays within
//               kv_memory_bytes: before a response is admitted, least-recently-used idle sessions
//               are snapshotted (incrementally) into SQLite and freed; sessions awaiting a tool
//               result are kept for tool_grace first. A swapped session's next response restores
//               its bytes, with no prefill.
//   snapshots   are written by storage's KvSnapshotWriter thread, not the engine thread, which
//               steps the other sessions meanwhile: a response waits only for the swap-outs that
//               make room for it, or for its own session's snapshot (the writer reads the state's
//               bytes, so nothing changes them until it is done). The writer also checkpoints the
//               WAL; the store lane's connection never does.
//   the disk   the engine thread never waits for SQLite. The conversation log, session rows,
//               loads (the log's replay) and retention run in order on the store lane
//               (store_lane.h, thread kStoreThreadName, its own connection); snapshots on the
//               writer's thread; read-backs on the restore thread. A response's last event is
//               sent by the lane once the log holds its answer.
//   durability  the conversation log is written as it happens; a session's state is snapshotted
//               after a response once snapshot_interval has passed, on swap-out and at shutdown.
//               After a crash a session resumes from its latest snapshot plus the ids its log has
//               past it; a corrupt or foreign snapshot means a rebuild from the whole log. A
//               failed log write fails what wrote it, and the session is loaded again from the
//               database when next used.
//
// Public methods are thread-safe and return once the operation is done and what it wrote is in
// the database (the caller's thread waits, not the engine thread). Response events reach the sink
// on the engine thread, the last one on the store lane's, once the log holds the turn; an error
// returned by create_response() after the response was queued (its prompt could not be logged)
// means the response ends kFailed.
#pragma once

#include "agents/agent_types.h"
#include "base/status.h"
#include "engine/speculative/session_drafter.h"
#include "storage/store.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace hippo::engine {
class Model;
}
namespace hippo::tokenizer {
class Tokenizer;
}

namespace hippo::agents {

// The runtime's threads (in top, gdb and perf): the engine thread, the one that reads swapped-out
// sessions back, and the one that does the rest of its SQLite work (storage's KvSnapshotWriter
// names the one that writes snapshots).
inline constexpr const char* kEngineThreadName = "hippo-engine";
inline constexpr const char* kRestoreThreadName = "hippo-restore";
inline constexpr const char* kStoreThreadName = "hippo-store";

struct RuntimeOptions {
  std::string db_path = "hippo.db";
  uint64_t kv_memory_bytes = uint64_t{8} << 30;
  int64_t max_context_tokens = 0;        // 0: the model's maximum
  int64_t max_output_tokens = 32768;     // the most a response may ask for
  int64_t max_queued_responses = 1024;
  int64_t prefill_chunk_tokens = 2048;   // per step when nobody decodes, at most
  // A step that only prefills is sized to take about this long (new requests and every other
  // call wait for the step in progress).
  std::chrono::duration<double> max_step_seconds{0.25};
  int64_t interleaved_prefill_tokens = 128;  // per step while others decode
  int64_t max_batch_sessions = 256;
  std::chrono::milliseconds tool_grace{2000};
  std::chrono::milliseconds snapshot_interval{30000};
  // Closed sessions of stateless requests (respond_to_conversation) are removed once older than
  // this, or beyond the newest ones that hold completion_max_bytes; checked at start and every
  // retention_interval. 0: no bound.
  std::chrono::seconds completion_max_age{std::chrono::hours(24)};
  uint64_t completion_max_bytes = uint64_t{1} << 30;
  std::chrono::seconds retention_interval{60};
  // Idle completion sessions kept per tenant for prefix reuse (respond_to_conversation); they are
  // also closed once unused for completion_max_age.
  int64_t max_prefix_sessions = 64;
  // Speculative decoding (none: off): drafts from the session's own tokens (context), the
  // checkpoint's DSpark stages (dspark) or per step the better of both, or none, for what it costs
  // (auto; engine/speculative/session_drafter.h), verified by the model in the decode step, the
  // output unchanged (docs/engine.md). DSpark takes part only where the checkpoint has its stages.
  std::optional<engine::DraftMode> speculation = engine::DraftMode::kAuto;
  // The costs auto mode weighs drafts by (outliving the runtime); none: the model's measurements
  // (Model::step_costs). A StepCosts that records nothing makes the choice independent of timing.
  const engine::StepCosts* draft_costs = nullptr;
};

class AgentRuntime {
 public:
  // model and tokenizer must outlive the runtime.
  static Result<std::unique_ptr<AgentRuntime>> open(engine::Model& model, const tokenizer::Tokenizer& tokenizer,
                                                    const RuntimeOptions& options);
  // Stops the engine thread after shutdown() (if not called already).
  ~AgentRuntime();

  // id empty: one is made. Sessions of the database made with another model stay listed but
  // cannot be used (kFailedPrecondition).
  Result<std::string> create_session(const SessionSettings& settings, std::string id = {},
                                     std::optional<int64_t> tenant = std::nullopt);
  Status append_input(const std::string& session_id, std::vector<InputItem> items);
  // Queues a response to everything appended so far. Events go to sink; the last is kCompleted
  // (finish_reason "cancelled" after cancel()) or kFailed.
  Status create_response(const std::string& session_id, ResponseOptions options, EventSink sink);
  // A stateless request's whole conversation (not its system messages: they are in settings), in
  // one call: the tenant's idle completion session whose conversation is the longest prefix of
  // `items` (same settings, conversation_key.h) is forked, its model state moved to the fork (the
  // source stays as it was, in storage), and only the items past that prefix are appended; without
  // one, a new session of kind completion takes them all. Then a response is created. When it
  // completes, the session is keyed with its conversation and the answer and kept, idle, for the
  // next turn (at most max_prefix_sessions per tenant, the least recently used closed first);
  // cancelled or failed, it is closed. Refused, nothing stored changes.
  struct ConversationResponse {
    std::string session_id;
    std::string continued_from;  // the prefix session forked (empty: none)
  };
  Result<ConversationResponse> respond_to_conversation(const SessionSettings& settings, std::optional<int64_t> tenant,
                                                       std::vector<InputItem> items, ResponseOptions options,
                                                       EventSink sink);
  Status cancel(const std::string& session_id);
  // Snapshots the session now (durable when it returns).
  Status snapshot(const std::string& session_id);
  // Snapshots and frees the session's model state (for tests and the admin API; the caller waits
  // for it, unlike for the swap-outs of the memory manager).
  Status swap_out(const std::string& session_id);
  Status close_session(const std::string& session_id);
  // A new session of the same tenant with an exact copy of the source's conversation and model
  // state (the source is snapshotted first; the copy shares its KV chunks): a response on either
  // continues exactly as the other would. Not while the source runs a response.
  Result<std::string> fork_session(const std::string& source_id, std::string new_id = {});
  Result<SessionView> session(const std::string& session_id);
  // Without loading the session (kNotFound when there is none; closed ones are found).
  Result<SessionSummary> session_summary(const std::string& session_id);
  // The sessions of the database, closed ones included; of one tenant when given; the temporary
  // sessions of stateless requests only with include_completions.
  Result<std::vector<SessionSummary>> list_sessions(std::optional<int64_t> tenant = std::nullopt,
                                                    bool include_completions = false);
  // Sessions of the tenant that are not closed (read from the database without waiting for the
  // engine thread).
  Result<int64_t> count_open_sessions(int64_t tenant);
  // Stored Responses-API objects (opaque JSON here), in the database without waiting for the engine
  // thread; removed once older than completion_max_age.
  Status put_response(const storage::StoredResponse& response);
  Result<std::optional<storage::StoredResponse>> get_response(const std::string& id, std::optional<int64_t> tenant);
  Result<bool> delete_response(const std::string& id, std::optional<int64_t> tenant);
  RuntimeStats stats();
  // Without waiting for the engine thread (so it answers while a step runs).
  EngineLiveness liveness() const;
  // Logits after every id the session has (resuming it and prefilling its pending ids if needed):
  // the exact-resume tests compare them.
  Result<std::vector<float>> next_logits(const std::string& session_id);
  // Cancels running responses, snapshots every resident session, stops the engine thread.
  Status shutdown();

 private:
  class Engine;
  explicit AgentRuntime(std::unique_ptr<Engine> engine);
  std::unique_ptr<Engine> engine_;
};

}  // namespace hippo::agents
