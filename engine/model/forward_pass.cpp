// One forward step: embedding, the layer loop and the head; the blocks are in their own files
// (mhc, engram_fusion, attention, compressor, indexer, moe). The arithmetic follows transformers'
// DeepseekV41ForCausalLM step by step (docs/reference-model.md).
#include "engine/model/forward_pass.h"

#include "engine/engram/engram_hash.h"
#include "engine/engram/engram_token_map.h"

#include <cstring>

namespace hippo::engine {

ForwardPass::ForwardPass(const Model& model, std::vector<Segment> segments, Depth depth)
    : model_(model), t_(model.text()), ops_(*model.backend_), segments_(std::move(segments)), depth_(depth) {
  for (size_t s = 0; s < segments_.size(); ++s) {
    Segment& seg = segments_[s];
    seg.row0 = rows_;
    seg.pos0 = seg.state->n_tokens();
    for (size_t i = 0; i < seg.tokens.size(); ++i) {
      positions_.push_back(seg.pos0 + static_cast<int64_t>(i));
      segment_of_.push_back(static_cast<int64_t>(s));
    }
    rows_ += static_cast<int64_t>(seg.tokens.size());
  }
  main_angles_ = RopeAngles(model_.main_rope_, positions_);
  compress_angles_ = RopeAngles(model_.compress_rope_, positions_);
  shared_.resize(segments_.size());
}

ForwardPass::~ForwardPass() = default;

void ForwardPass::linear(const float* x, int64_t m, const kernels::WeightView& w, float* y) {
  ops_.linear(x, m, w, y);
}

void ForwardPass::store_window(std::vector<std::uint8_t>& ring, int64_t first, int64_t count,
                               const std::uint8_t* codes) const {
  const int64_t window = t_.sliding_window, entry_bytes = kernels::window_entry_bytes(t_.head_dim);
  for (int64_t i = 0; i < count; ++i) {
    std::memcpy(&ring[static_cast<size_t>(((first + i) % window) * entry_bytes)], codes + i * entry_bytes,
                static_cast<size_t>(entry_bytes));
  }
}

void ForwardPass::load_window(const std::vector<std::uint8_t>& ring, int64_t first, int64_t count, float* out) {
  const int64_t window = t_.sliding_window, D = t_.head_dim, entry_bytes = kernels::window_entry_bytes(D);
  for (int64_t i = 0; i < count; ++i) {
    ops_.kv_decode(kernels::KvFormat::kWindow, &ring[static_cast<size_t>(((first + i) % window) * entry_bytes)], 1, D,
                   out + i * D);
  }
}

void ForwardPass::rope(const RopeAngles& angles, float* x, int64_t row0, int64_t rows, int64_t heads, int64_t dim,
                       bool inverse) {
  ops_.rope(x, rows, heads, dim, angles.rope_dims(), angles.cos(row0), angles.sin(row0), inverse);
}

void ForwardPass::run() {
  if (depth_ == Depth::kDspark) {
    embed();
    for (const LayerWeights& stage : model_.weights_.dspark->stages) layer(stage);
    draft_head();
    return;
  }
  engram_hashes();
  embed();
  const int64_t n_layers = depth_ == Depth::kEncoder ? t_.candidate_source_layer_id + 1 : t_.num_hidden_layers;
  for (int64_t l = 0; l < n_layers; ++l) layer(model_.weights_.layers[static_cast<size_t>(l)]);
  if (depth_ == Depth::kFull) {
    head();
    if (model_.weights_.dspark) write_stage_windows();
  }
  commit_tokens();
}

// Reference: DeepseekV41NgramHashState — each position hashed with the compressed ids of the tokens
// before it, DEAD (then pad) past the sequence start.
void ForwardPass::engram_hashes() {
  const EngramHasher* hasher = model_.engram_hasher_.get();
  if (hasher == nullptr) return;
  const int64_t per_row = hasher->n_layers() * hasher->rows_per_position();
  engram_rows_.assign(static_cast<size_t>(rows_ * per_row), 0);
  for (const Segment& seg : segments_) {
    const std::span<int64_t> rows(&engram_rows_[static_cast<size_t>(seg.row0 * per_row)], seg.tokens.size() * static_cast<size_t>(per_row));
    hasher->hash_tokens(*model_.engram_map_, seg.tokens, *seg.state->engram_lookback_, rows);
  }
}

void ForwardPass::embed() {
  const int64_t d = t_.hidden_size, hc = t_.hc_mult;
  streams_.assign(static_cast<size_t>(rows_ * hc * d), 0.0f);
  pre_mix_.assign(static_cast<size_t>(rows_ * hc), 0.0f);
  std::vector<int64_t> tokens;
  for (const Segment& seg : segments_) tokens.insert(tokens.end(), seg.tokens.begin(), seg.tokens.end());
  std::vector<float> embedded(static_cast<size_t>(rows_ * d));
  ops_.gather_rows(model_.weights_.embed, tokens.data(), rows_, embedded.data());
  for (int64_t r = 0; r < rows_; ++r) {
    float* row = &streams_[static_cast<size_t>(r * hc * d)];
    std::memcpy(row, &embedded[static_cast<size_t>(r * d)], static_cast<size_t>(d) * sizeof(float));
    for (int64_t k = 1; k < hc; ++k) std::memcpy(row + k * d, row, static_cast<size_t>(d) * sizeof(float));
    pre_mix_[static_cast<size_t>(r * hc)] = 1.0f;  // the first site collapses stream 0
  }
}

// Reference: DeepseekV41DecoderLayer.forward.
void ForwardPass::layer(const LayerWeights& lw) {
  const int64_t d = t_.hidden_size;
  if (lw.has_engram) engram(lw);
  if (depth_ == Depth::kFull && model_.weights_.dspark) tap_features(lw.role.layer);

  std::vector<float> attn_pre, attn_post, attn_comb;
  hc_mixes(lw.hc_attn_fn, lw.hc_attn_base, lw.hc_attn_scale, attn_pre, attn_post, attn_comb);
  std::vector<float> u;
  collapse(pre_mix_, lw.attn_norm, u);

  if (depth_ == Depth::kEncoder && lw.role.layer == t_.candidate_source_layer_id) {
    compress(lw, u);  // the decoder's shared KV and index keys see every token
    return;
  }

  std::vector<float> attn_out(static_cast<size_t>(rows_ * d));
  attention(lw, u, attn_out);
  expand(attn_out, attn_post, attn_comb);

  std::vector<float> ffn_pre, ffn_post, ffn_comb;
  hc_mixes(lw.hc_ffn_fn, lw.hc_ffn_base, lw.hc_ffn_scale, ffn_pre, ffn_post, ffn_comb);
  std::vector<float> v;
  collapse(attn_pre, lw.ffn_norm, v);
  std::vector<float> ffn_out(static_cast<size_t>(rows_ * d));
  moe(lw, v, ffn_out);
  expand(ffn_out, ffn_post, ffn_comb);
  pre_mix_ = std::move(ffn_pre);
}

// Final collapse with the last site's pre mix, the norm and the head: every row of a request that
// wants all logits, otherwise its last row. The last rows of all such requests go through the head
// as one matrix, each straight into its state's next-token logits, so a decode batch reads the
// head's weights once rather than once per session.
void ForwardPass::head() {
  const int64_t d = t_.hidden_size, V = t_.vocab_size;
  std::vector<float> y;
  collapse(pre_mix_, model_.weights_.final_norm, y);
  std::vector<float> last_rows;
  std::vector<float*> next_logits;
  for (const Segment& seg : segments_) {
    const int64_t n = static_cast<int64_t>(seg.tokens.size());
    std::vector<float>& next = seg.state->next_logits_;
    if (seg.all_logits == nullptr) {
      const auto last = y.begin() + (seg.row0 + n - 1) * d;
      last_rows.insert(last_rows.end(), last, last + d);
      next.resize(static_cast<size_t>(V));  // zero-filled once, then overwritten in place
      next_logits.push_back(next.data());
      continue;
    }
    std::vector<float> logits(static_cast<size_t>(n * V));
    linear(&y[static_cast<size_t>(seg.row0 * d)], n, model_.weights_.head, logits.data());
    next.assign(logits.end() - V, logits.end());
    *seg.all_logits = std::move(logits);
  }
  ops_.linear_rows(last_rows.data(), static_cast<int64_t>(next_logits.size()), model_.weights_.head, next_logits.data());
}

void ForwardPass::commit_tokens() {
  for (const Segment& seg : segments_) {
    seg.state->token_ids_.insert(seg.state->token_ids_.end(), seg.tokens.begin(), seg.tokens.end());
  }
}

}  // namespace hippo::engine
