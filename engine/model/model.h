// Model: the DeepSeek-V4.1 text model, behind the narrow API the agents layer uses. It owns the
// memory-mapped checkpoint, the weight views, the Engram token map and the backend that runs its ops
// (kernels/backend.h; "cpu" unless ModelOptions names another); the per-session memory lives in
// SessionState, which the caller owns.
//
//   forward()  one step for many sessions at once: each request appends its tokens to its session
//              (a prefill chunk of any size or one decode token) and leaves the next-token logits in
//              the state. Every row is computed independently of the others, so a batch equals each
//              session alone and a chunked prefill equals a one-shot one, bit for bit.
//   prefill()  a long prompt through the encoder/decoder plan (product.md §6): the layers below the
//              candidate source (plus its compressor and index keys) see every token, the layers
//              from it upward only the tail that fills their windows. Same state and next-token
//              logits as forward() on every token.
//
// Numerics follow the reference (docs/reference-model.md): fp32 activations, dequantised weights,
// the QAT round trips of window KV, compressed KV and index keys/queries, top-k ties broken by the
// lower index.
#pragma once

#include "base/status.h"
#include "engine/model/model_weights.h"
#include "engine/model/rope.h"
#include "engine/model/session_state.h"
#include "engine/model/step_costs.h"
#include "engine/weights/checkpoint.h"
#include "kernels/backend.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace hippo::engine {

class EngramTokenMap;
class EngramHasher;

struct ModelOptions {
  int n_threads = 0;              // 0: one per logical CPU
  std::string tokenizer_dir;      // where tokenizer.json is; empty: the checkpoint directory
  std::string backend = "cpu";    // kernels/backend_registry.h
};

struct ForwardRequest {
  SessionState* state = nullptr;
  std::span<const int32_t> tokens;
  // When set, receives the logits after every token of the request, [tokens, vocab].
  std::vector<float>* all_logits = nullptr;
  // The tokens are a draft under verification (at most sliding_window of them, all_logits set):
  // Model::settle() then keeps a prefix of them, as if the rest had never been seen.
  bool draft = false;
};

// One DSpark draft (../shared/design/dspark.md): after the session's tokens and `anchor` (the token
// chosen next, not yet fed to the model), the block [anchor, noise x (dspark_block_size - 1)] at the
// positions from n_tokens() on runs through the stages; every slot proposes a token.
struct DsparkDraft {
  SessionState* state = nullptr;
  int32_t anchor = 0;
  // Out: dspark_block_size drafts (slot k: the token at n_tokens() + 1 + k), each the argmax of the
  // Markov-corrected draft distribution given the drafts before it, and per slot the confidence
  // head's estimate that it is accepted if all before it are.
  std::vector<int32_t> tokens;
  std::vector<float> confidence;
};

// Called with (tokens done, tokens total) as a prefill advances.
using PrefillProgress = std::function<void(int64_t, int64_t)>;

struct PrefillOptions {
  int64_t chunk_tokens = 2048;  // tokens per forward step
  bool encoder_decoder_plan = true;
  PrefillProgress progress;
};

class Model {
 public:
  // Fails when the backend lacks an op the forward pass calls or a weight format the checkpoint
  // needs, naming both.
  static Result<std::unique_ptr<Model>> load(const std::string& dir, const ModelOptions& options = {});
  // The same on a backend made by the caller (options.backend and n_threads unused).
  static Result<std::unique_ptr<Model>> load(const std::string& dir, std::unique_ptr<kernels::Backend> backend,
                                             const ModelOptions& options = {});
  ~Model();

  const ModelConfig& config() const { return checkpoint_.config(); }
  const TextConfig& text() const { return checkpoint_.config().text_config; }
  const Checkpoint& checkpoint() const { return checkpoint_; }
  int n_threads() const { return backend_->threads(); }
  const char* backend_name() const { return backend_->name(); }

  SessionState new_session() const { return SessionState(text()); }

  // Token ids must be in [0, vocab); a request with no tokens is an error.
  Status forward(std::span<ForwardRequest> batch);
  Status forward(SessionState& state, std::span<const int32_t> tokens, std::vector<float>* all_logits = nullptr);

  // After a forward of a draft: keeps its first `keep` tokens (1 <= keep <= its tokens) and leaves the
  // state byte for byte as a forward of only those would have, without computing anything again;
  // `all_logits` is what that forward returned, whose row keep - 1 becomes the next-token logits.
  Status settle(SessionState& state, int64_t keep, std::span<const float> all_logits) const;

  Status prefill(SessionState& state, std::span<const int32_t> tokens, const PrefillOptions& options = {});

  // Whether the checkpoint has DSpark stages; then every forward keeps each session's stage windows
  // up to date, and draft_dspark() drafts for many sessions at once (dspark.cpp). It changes no
  // state.
  bool has_dspark() const { return weights_.dspark.has_value(); }
  Status draft_dspark(std::span<DsparkDraft> batch);

  // What decode steps, verify rows and DSpark passes have cost lately, measured by forward() and
  // draft_dspark().
  const StepCosts& step_costs() const { return step_costs_; }

  // The plan's parts, for a scheduler that interleaves a long prefill with other work: of a prompt
  // of n tokens, all but the last decoder_tail_tokens() may go through forward_encoder() (the
  // layers below the candidate source, plus its compressor and index keys; no logits), the tail
  // through forward(). Any split of the same tokens gives the state of prefill().
  int64_t decoder_tail_tokens() const;
  Status forward_encoder(SessionState& state, std::span<const int32_t> tokens);

  // Identifies the checkpoint: its config and every tensor's name, dtype, shape and first and last
  // bytes (xxh3-64, 16 hex digits). Snapshots made with one model are refused by another.
  const std::string& fingerprint() const { return fingerprint_; }

 private:
  friend class ForwardPass;
  Model(Checkpoint checkpoint, std::unique_ptr<kernels::Backend> backend);
  // Before a draft's forward: what settle() needs to take its tokens back (draft_settle.cpp).
  void record_draft(SessionState& state, int64_t count) const;

  Checkpoint checkpoint_;
  ModelWeights weights_;
  Rope main_rope_;
  Rope compress_rope_;
  std::unique_ptr<EngramTokenMap> engram_map_;  // configs with Engram layers only
  std::unique_ptr<EngramHasher> engram_hasher_;
  std::unique_ptr<kernels::Backend> backend_;
  std::string fingerprint_;
  StepCosts step_costs_;
};

}  // namespace hippo::engine
