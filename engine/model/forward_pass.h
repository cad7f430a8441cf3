// ForwardPass: one step of the text model over a batch of sessions (model.h). Rows are the requests'
// tokens back to back; projections run over all rows at once, attention, compressors and indexers per
// session. Every piece of arithmetic is an op of the model's backend (kernels/backend.h); what is
// here is the model's structure and the session state's bookkeeping. Internal to engine/model.
#pragma once

#include "engine/model/entry_slots.h"
#include "engine/model/model.h"

#include <cstdint>
#include <span>
#include <vector>

namespace hippo::engine {

class ForwardPass {
 public:
  struct Segment {
    SessionState* state = nullptr;
    std::span<const int32_t> tokens;
    std::vector<float>* all_logits = nullptr;  // kDspark: the slots' base logits
    std::vector<float>* draft_hidden = nullptr;  // kDspark: the slots' collapsed pre-norm hidden, [tokens, d]
    int64_t row0 = 0;  // first row of the batch
    int64_t pos0 = 0;  // position of its first token
  };

  // kEncoder runs the layers below the candidate source and that layer's compressor and index keys
  // only (the encoder part of the prefill plan); the upper layers' rings and the logits stay as
  // they were. kDspark runs the DSpark stages over each segment's draft block (at the positions
  // after the state's tokens) and changes nothing in the state (dspark.cpp).
  enum class Depth { kFull, kEncoder, kDspark };

  ForwardPass(const Model& model, std::vector<Segment> segments, Depth depth);
  ~ForwardPass();
  void run();

 private:
  // Attention's rows per block, and the bound of a forward's cache of decoded compressed entries
  // (attend, decode_selected). Small on purpose: decoding an entry again costs D steps, against
  // about 4·H·D for each row that attends to it.
  static constexpr int64_t kAttentionRowsPerBlock = 64;
  static constexpr size_t kSelectedCacheBytes = size_t{256} << 10;

  // What the layers of one forward share per session: the current KV group's compressed entries
  // (those attention selected decoded), its index keys as stored (the indexer reads the FP4 codes in
  // place), the latest top-k selection and the candidate blocks (per row).
  struct Shared {
    int64_t n_entries = 0;
    const std::uint8_t* kv_codes = nullptr;  // the writer's compressed-KV stream
    EntrySlots kv_slots;                     // the decoded entries' rows in kv
    std::vector<float> kv;                   // decoded selected entries, [slots, head_dim] (decode_selected)
    const std::uint8_t* index_codes = nullptr;  // the writer's index keys, [n_entries, index_entry_bytes]
    bool has_selection = false;
    std::vector<std::vector<int32_t>> selection;   // per row: attended compressed entries, ascending
    bool has_candidates = false;
    std::vector<std::vector<uint64_t>> candidates;  // per row: bitset over candidate blocks
  };

  void linear(const float* x, int64_t m, const kernels::WeightView& w, float* y);
  // A window ring (a trunk layer's or a DSpark stage's; slot = position mod sliding_window): the
  // entries of `count` positions from `first` stored from `codes`, or decoded into `out` [count, D].
  void store_window(std::vector<std::uint8_t>& ring, int64_t first, int64_t count, const std::uint8_t* codes) const;
  void load_window(const std::vector<std::uint8_t>& ring, int64_t first, int64_t count, float* out);
  // RoPE by `angles` of rows [row0, row0 + rows) on x's rows (heads vectors of dim floats each).
  void rope(const RopeAngles& angles, float* x, int64_t row0, int64_t rows, int64_t heads, int64_t dim,
            bool inverse = false);
  void engram_hashes();
  void embed();
  void layer(const LayerWeights& lw);
  void engram(const LayerWeights& lw);
  void hc_mixes(const kernels::WeightView& fn, const std::vector<float>& base, const std::vector<float>& scale,
                std::vector<float>& pre, std::vector<float>& post, std::vector<float>& comb);
  void collapse(const std::vector<float>& pre, const std::vector<float>& norm, std::vector<float>& out);
  void expand(const std::vector<float>& sub, const std::vector<float>& post, const std::vector<float>& comb);
  void attention(const LayerWeights& lw, const std::vector<float>& u, std::vector<float>& out);
  void compress(const LayerWeights& lw, const std::vector<float>& u);
  void index(const LayerWeights& lw, const std::vector<float>& u, const std::vector<float>& q_residual);
  void attend(const LayerWeights& lw, const std::vector<float>& q, const std::vector<float>& window_kv,
              std::vector<float>& out);
  void decode_selected(Shared& group, int64_t i0, int64_t i1, int64_t D);
  void moe(const LayerWeights& lw, const std::vector<float>& v, std::vector<float>& out);
  void head();
  // DSpark (dspark.cpp): the context features of the target layers' block inputs, the stage windows
  // they feed, and the draft block's attention and head.
  void tap_features(int64_t layer);
  void write_stage_windows();
  void attend_block(const LayerWeights& lw, const std::vector<float>& q, const std::vector<float>& block_kv,
                    std::vector<float>& out);
  void draft_head();
  void commit_tokens();

  const Model& model_;
  const TextConfig& t_;
  kernels::Backend& ops_;
  std::vector<Segment> segments_;
  Depth depth_;
  int64_t rows_ = 0;
  std::vector<int64_t> positions_;  // per row
  RopeAngles main_angles_;           // the model's main RoPE at positions_
  RopeAngles compress_angles_;       // its compress RoPE at positions_
  std::vector<int64_t> segment_of_;  // per row
  std::vector<int64_t> engram_rows_;  // [rows, engram layers, columns]
  std::vector<float> streams_;       // [rows, hc, d]
  std::vector<float> pre_mix_;       // [rows, hc]: the collapse weights for the next site
  std::vector<float> features_;      // [rows, targets d]: DSpark's context features (kFull)
  std::vector<Shared> shared_;       // per segment
};

}  // namespace hippo::engine
