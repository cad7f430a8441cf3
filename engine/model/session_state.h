// SessionState: everything the model remembers about one session, in its storage layout
// (product.md §5): the in-memory bytes are what a snapshot stores, and restore copies them back.
//
//   window rings     per trunk layer, the last `sliding_window` window-KV entries (FP8 E4M3 + UE8M0
//                    per 32); the entry of position p sits in slot p mod sliding_window.     frontier
//   stage windows    per DSpark stage, a ring like the trunk's of the context KV drafts attend to
//                    (../shared/design/dspark.md §1.4 step 3), valid from dspark_from().   frontier
//   compressed KV    per KV-writer layer, one FP4 entry per complete group.        stream kv.layerL
//   index keys       per KV-writer layer, one FP4 index key per complete group.    stream index.layerL
//   pending rows     per ratio>1 writer, the projected rows (kv, gate) of the incomplete group.
//                                                                                          frontier
//   Engram look-back the compressed ids of the last max_ngram_size - 1 tokens.              frontier
//   next-token logits after the last token (empty before the first, or dropped).            frontier
//   token ids        every token the session has seen.                             stream token_ids
//
// The model (model.h) is the only writer; everyone else reads, serialises and restores.
#pragma once

#include "base/status.h"
#include "engine/config/model_config.h"
#include "engine/engram/engram_hash.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hippo::engine {

// A named append-only stream of fixed-size entries, as the storage layer takes it.
struct StateStream {
  std::string name;
  size_t entry_bytes = 0;
  std::span<const std::byte> bytes;
};

// One stream's bytes, handed over to restore(): the compressed-KV and index-key buffers become the
// state's own (moved, never copied), so a restore holds one copy of a session, not two. Made by
// SessionState::stream_buffer(), they also keep the room to grow without moving.
struct StateStreamBuffer {
  std::string name;
  std::vector<std::uint8_t> bytes;
};

class SessionState {
 public:
  // An empty session for a model of this configuration.
  explicit SessionState(const TextConfig& text);

  int64_t n_tokens() const { return static_cast<int64_t>(token_ids_.size()); }
  const std::vector<int32_t>& token_ids() const { return token_ids_; }
  // The logits for the token after the last one; empty before any token, and after
  // drop_next_logits() until the next forward.
  const std::vector<float>& next_logits() const { return next_logits_; }
  // For a caller that feeds more tokens before it samples again: an idle agent session then keeps
  // (and snapshots) no logits, 4 x vocab bytes less (512 KB for DeepSeek-V4.1).
  void drop_next_logits() {
    next_logits_.clear();
    next_logits_.shrink_to_fit();
  }

  // Bytes held: rings, streams, pending rows, logits and token ids.
  uint64_t memory_bytes() const;
  // An upper bound of what memory_bytes() grows by over n_tokens, logits aside: a token id per token,
  // each writer's compressed-KV and index-key entry once per `ratio` tokens (a whole entry for every
  // started group) and its pending rows, so that budgets computed from it hold.
  static uint64_t growth_bytes(const TextConfig& text, int64_t n_tokens);
  // The next-token logits when present.
  static uint64_t logits_bytes(const TextConfig& text) { return static_cast<uint64_t>(text.vocab_size) * sizeof(float); }

  // The frontier blob and the streams (names "kv.layerL", "index.layerL", "token_ids"). The spans
  // point into this state and stay valid until it changes.
  std::vector<std::byte> frontier() const;
  std::vector<StateStream> streams() const;

  // A state from a frontier and its streams; any inconsistency (another model's shape, a truncated
  // blob, a stream of the wrong length) is an error, never a crash.
  static Result<SessionState> restore(const TextConfig& text, std::span<const std::byte> frontier,
                                      std::vector<StateStreamBuffer> streams);
  // A buffer of `bytes` zero bytes for the stream `name`, for a restore to read into: a compressed-KV
  // or index-key stream gets the room for the whole context that a new session's has (address space
  // only), so that the restored stream never moves as it grows.
  static std::vector<std::uint8_t> stream_buffer(const TextConfig& text, std::string_view name, size_t bytes);

  // A state of these token ids with the layout and sizes the model gives them but not its values:
  // the compressed-KV and index-key streams hold what `fill` writes into them (by stream name), the
  // rings, pending rows and Engram look-back are zero. For benchmarks of what scales with the bytes
  // (swap-out, restore) at contexts too long to prefill here.
  using StreamFill = std::function<void(std::string_view stream, std::span<std::uint8_t> bytes)>;
  static SessionState synthetic(const TextConfig& text, std::vector<int32_t> token_ids, const StreamFill& fill);

  // The first position whose entries the DSpark stage windows hold: 0, or where a state restored
  // from a snapshot written before the stage windows existed (frontier version 1) resumed; drafts
  // attend to the window's positions from here on (the windows refill as tokens commit).
  int64_t dspark_from() const { return dspark_from_; }

  // True between a forward of draft tokens and Model::settle() (model.h); such a state may not be
  // serialised or stepped again until settled.
  bool has_draft() const { return draft_.has_value(); }

  bool operator==(const SessionState& other) const = default;

 private:
  friend class Model;
  friend class ForwardPass;

  struct Writer {
    int64_t layer = 0;
    int64_t ratio = 0;
    std::vector<std::uint8_t> kv;     // n_entries x compressed_entry_bytes(head_dim)
    std::vector<std::uint8_t> index;  // n_entries x index_entry_bytes(index_head_dim)
    std::vector<float> pending_kv;    // n_pending x head_dim (ratio > 1)
    std::vector<float> pending_gate;  // n_pending x head_dim (ratio > 1)
    bool operator==(const Writer&) const = default;
  };

  // What a forward of draft tokens changed in place, so that Model::settle() can keep any prefix of
  // them by a length reset: the ring entries the drafts overwrote, the pending rows and Engram
  // look-back from before, and the rows the drafts projected for each compressor. Everything else
  // (streams, token ids) is indexed by position and is cut to length.
  struct DraftRecord {
    int64_t first = 0;  // n_tokens() before the draft's forward
    int64_t count = 0;  // its tokens
    std::vector<std::vector<std::uint8_t>> overwritten;  // per layer: `count` ring entries, in position order
    std::vector<std::vector<float>> pending_kv, pending_gate;  // per writer, as they were
    std::vector<std::vector<float>> draft_kv, draft_gate;      // per writer (ratio > 1): the drafts' rows
    std::optional<EngramLookback> engram_lookback;
    bool operator==(const DraftRecord&) const = default;
  };

  // The bytes a writer's stream of `entry_bytes` entries reserves: room for the whole context.
  static size_t stream_capacity(const TextConfig& text, int64_t ratio, int64_t entry_bytes);

  // The writer of KV-source layer `layer` (the state was built from the same config: it exists).
  Writer& writer(int64_t layer) {
    return *std::find_if(writers_.begin(), writers_.end(), [&](const Writer& w) { return w.layer == layer; });
  }

  // Shape (from the config; checked on restore).
  int64_t n_layers_ = 0;
  int64_t n_stages_ = 0;  // DSpark stages
  int64_t window_ = 0;
  int64_t head_dim_ = 0;
  int64_t index_head_dim_ = 0;
  int64_t vocab_ = 0;
  int64_t engram_classes_ = 0;

  // Per trunk layer, then per DSpark stage: window_ x window_entry_bytes(head_dim).
  std::vector<std::vector<std::uint8_t>> rings_;
  int64_t dspark_from_ = 0;
  std::vector<Writer> writers_;
  std::optional<EngramLookback> engram_lookback_;  // configs with Engram layers only
  std::vector<float> next_logits_;
  std::vector<int32_t> token_ids_;
  std::optional<DraftRecord> draft_;
};

}  // namespace hippo::engine
