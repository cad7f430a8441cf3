// Attention of one layer: projections, the window KV and its ring, the core softmax with the sink
// over the window and the selected compressed entries, the grouped output projection.
#include "engine/model/forward_pass.h"

#include "engine/model/forward_ops.h"
#include "engine/model/kv_formats.h"
#include "kernels/cpu/attention_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace hippo::engine {

using namespace ops;  // NOLINT: the shared scalar helpers of the forward pass

// Reference: DeepseekV41Attention.forward.
void ForwardPass::attention(const LayerWeights& lw, const std::vector<float>& u, std::vector<float>& out) {
  const LayerRole& role = lw.role;
  const int64_t H = t_.num_attention_heads, D = t_.head_dim, rq = t_.q_lora_rank;
  const float eps = static_cast<float>(t_.rms_norm_eps);
  const RopeAngles& rope = role.compress_ratio > 0 ? compress_angles_ : main_angles_;

  std::vector<float> q_residual(static_cast<size_t>(rows_ * rq));
  linear(u.data(), rows_, lw.wq_a, q_residual.data());
  rms_norm_rows(q_residual, rows_, rq, lw.q_norm, eps);
  std::vector<float> q(static_cast<size_t>(rows_ * H * D));
  linear(q_residual.data(), rows_, lw.wq_b, q.data());
  for (int64_t r = 0; r < rows_; ++r) rope.apply(&q[static_cast<size_t>(r * H * D)], H, D, r);

  // The window KV: RMSNorm(W_kv u), RoPE, FP8 round trip (kept as the ring's codes).
  const int64_t entry_bytes = window_entry_bytes(D);
  std::vector<float> kv(static_cast<size_t>(rows_ * D));
  linear(u.data(), rows_, lw.wkv, kv.data());
  rms_norm_rows(kv, rows_, D, lw.kv_norm, eps);
  std::vector<std::uint8_t> kv_codes(static_cast<size_t>(rows_ * entry_bytes));
  for (int64_t r = 0; r < rows_; ++r) {
    float* row = &kv[static_cast<size_t>(r * D)];
    rope.apply(row, 1, D, r);
    encode_window_entry(row, D, &kv_codes[static_cast<size_t>(r * entry_bytes)]);
    decode_window_entry(&kv_codes[static_cast<size_t>(r * entry_bytes)], D, row);
  }

  if (role.compress_ratio > 0) {
    if (role.writes_kv) compress(lw, u);
    if (role.owns_index_query) index(lw, u, q_residual);
  }

  std::vector<float> o(static_cast<size_t>(rows_ * H * D));
  attend(lw, q, kv, o);
  for (int64_t r = 0; r < rows_; ++r) rope.apply(&o[static_cast<size_t>(r * H * D)], H, D, r, /*inverse=*/true);

  // Grouped output projection: group g's heads through its block of wo_a, then wo_b over all groups.
  const int64_t G = t_.o_groups, ro = t_.o_lora_rank, group_width = H * D / G;
  std::vector<float> group_in(static_cast<size_t>(rows_ * group_width));
  std::vector<float> group_out(static_cast<size_t>(rows_ * ro));
  std::vector<float> low_rank(static_cast<size_t>(rows_ * G * ro));
  for (int64_t g = 0; g < G; ++g) {
    for (int64_t r = 0; r < rows_; ++r) {
      std::memcpy(&group_in[static_cast<size_t>(r * group_width)], &o[static_cast<size_t>(r * H * D + g * group_width)],
                  static_cast<size_t>(group_width) * sizeof(float));
    }
    linear(group_in.data(), rows_, kernels::weight_rows(lw.wo_a, g * ro, ro), group_out.data());
    for (int64_t r = 0; r < rows_; ++r) {
      std::memcpy(&low_rank[static_cast<size_t>(r * G * ro + g * ro)], &group_out[static_cast<size_t>(r * ro)],
                  static_cast<size_t>(ro) * sizeof(float));
    }
  }
  linear(low_rank.data(), rows_, lw.wo_b, out.data());

  // The chunk's window entries join the ring (slot = position mod window).
  const int64_t window = t_.sliding_window;
  for (const Segment& seg : segments_) {
    std::vector<std::uint8_t>& ring = seg.state->rings_[static_cast<size_t>(role.layer)];
    const int64_t n = static_cast<int64_t>(seg.tokens.size());
    for (int64_t i = std::max<int64_t>(0, n - window); i < n; ++i) {
      const int64_t slot = (seg.pos0 + i) % window;
      std::memcpy(&ring[static_cast<size_t>(slot * entry_bytes)], &kv_codes[static_cast<size_t>((seg.row0 + i) * entry_bytes)],
                  static_cast<size_t>(entry_bytes));
    }
  }
}

// Reference: eager_attention_forward over the window (the positions t-window+1..t) and the selected
// compressed entries, with the sink in the denominator only. Per segment the window keys (the ring's
// entries before the chunk, then the chunk's) are laid out once as rows and transposed, so a row's
// window is a column range; its selected entries are gathered and transposed per row. Scores and the
// weighted sum are kernels/cpu/attention_ops, whose every element is a fixed chain over d (scores) or
// over the keys in position order, then selection order (outputs): a row gets the same bits in any
// chunk, decode step or batch.
void ForwardPass::attend(const LayerWeights& lw, const std::vector<float>& q, const std::vector<float>& window_kv,
                         std::vector<float>& out) {
  const LayerRole& role = lw.role;
  const int64_t H = t_.num_attention_heads, D = t_.head_dim, window = t_.sliding_window;
  const float scaling = static_cast<float>(std::pow(static_cast<double>(D), -0.5));
  std::vector<float> past, keys_t;
  std::vector<const float*> key_rows;
  for (size_t s = 0; s < segments_.size(); ++s) {
    const Segment& seg = segments_[s];
    const Shared& shared = shared_[s];
    const int64_t n = static_cast<int64_t>(seg.tokens.size());
    // Ring entries of the positions before this chunk that a window can reach.
    const int64_t previous = std::min(seg.pos0, window - 1);
    past.resize(static_cast<size_t>(previous * D));
    const std::vector<std::uint8_t>& ring = seg.state->rings_[static_cast<size_t>(role.layer)];
    for (int64_t k = 0; k < previous; ++k) {
      const int64_t position = seg.pos0 - previous + k;
      decode_window_entry(&ring[static_cast<size_t>((position % window) * window_entry_bytes(D))], D,
                          &past[static_cast<size_t>(k * D)]);
    }
    // Key k of the segment is position pos0 - previous + k.
    const int64_t n_keys = previous + n;
    key_rows.resize(static_cast<size_t>(n_keys));
    for (int64_t k = 0; k < n_keys; ++k) {
      key_rows[static_cast<size_t>(k)] = k < previous ? &past[static_cast<size_t>(k * D)]
                                                      : &window_kv[static_cast<size_t>((seg.row0 + k - previous) * D)];
    }
    keys_t.resize(static_cast<size_t>(D * n_keys));
    kernels::cpu::transpose_rows(key_rows.data(), n_keys, D, keys_t.data(), n_keys);

    const bool compressed = role.compress_ratio > 0 && shared.n_entries > 0 && shared.has_selection;
    size_t max_selected = 0;
    if (compressed)
      for (const std::vector<int32_t>& picked : shared.selection) max_selected = std::max(max_selected, picked.size());
    const int64_t stride = window + static_cast<int64_t>(max_selected);  // a row's keys at most
    // Blocks of rows: each block's selected entries are decoded (those not decoded yet), then its
    // rows attend in parallel.
    for (int64_t i0 = 0; i0 < n; i0 += kAttentionRowsPerBlock) {
      const int64_t i1 = std::min(n, i0 + kAttentionRowsPerBlock);
      if (compressed) decode_selected(shared_[s], i0, i1, D);
      model_.pool_->parallel_for(i1 - i0, [&](int64_t begin, int64_t end) {
        std::vector<float> probs(static_cast<size_t>(H * stride));      // [H][stride]: scores, then probabilities
        std::vector<float> selected_t(static_cast<size_t>(D) * max_selected);  // [D][selected]
        std::vector<const float*> rows(static_cast<size_t>(stride));
        for (int64_t i = i0 + begin; i < i0 + end; ++i) {
          const int64_t r = seg.row0 + i;
          const int64_t t = positions_[static_cast<size_t>(r)];
          const int64_t first = std::max<int64_t>(0, t - window + 1) - (seg.pos0 - previous);  // key index
          const int64_t n_window = i + previous - first + 1;
          const float* qr = &q[static_cast<size_t>(r * H * D)];
          kernels::cpu::transposed_scores(qr, H, D, keys_t.data() + first, n_keys, n_window, D, probs.data(), stride);
          std::copy_n(key_rows.begin() + first, n_window, rows.begin());
          int64_t n_selected = 0;
          if (compressed) {
            const std::vector<int32_t>& picked = shared.selection[static_cast<size_t>(i)];
            n_selected = static_cast<int64_t>(picked.size());
            for (int64_t c = 0; c < n_selected; ++c) {
              const int32_t slot = shared.kv_slot[static_cast<size_t>(picked[static_cast<size_t>(c)])];
              rows[static_cast<size_t>(n_window + c)] = &shared.kv[static_cast<size_t>(slot) * static_cast<size_t>(D)];
            }
            const float* const* selected_rows = &rows[static_cast<size_t>(n_window)];
            kernels::cpu::transpose_rows(selected_rows, n_selected, D, selected_t.data(), n_selected);
            kernels::cpu::transposed_scores(qr, H, D, selected_t.data(), n_selected, n_selected, D,
                                            &probs[static_cast<size_t>(n_window)], stride);
          }
          const int64_t n_attended = n_window + n_selected;
          kernels::cpu::softmax_with_sink(probs.data(), H, stride, n_attended, scaling, lw.attn_sink.data());
          kernels::cpu::weighted_rows(probs.data(), H, stride, rows.data(), n_attended, D, &out[static_cast<size_t>(r * H * D)], D);
        }
      });
    }
  }
}

// The compressed entries that rows i0 .. i1 selected, decoded into the group's cache where missing.
// The cache serves every layer that reads the writer in this forward; it is emptied first when these
// rows' entries would take it past kSelectedCacheBytes, so it holds at most that plus one block's
// selections (a long prefill chunk's union of selections is not decoded all at once).
void ForwardPass::decode_selected(Shared& group, int64_t i0, int64_t i1, int64_t D) {
  const int64_t kv_bytes = compressed_entry_bytes(D);
  size_t missing = 0;  // an upper bound: an entry two rows picked counts twice
  for (int64_t i = i0; i < i1; ++i)
    for (int32_t w : group.selection[static_cast<size_t>(i)]) missing += group.kv_slot[static_cast<size_t>(w)] < 0 ? 1 : 0;
  if (!group.kv.empty() && (group.kv.size() + missing * static_cast<size_t>(D)) * sizeof(float) > kSelectedCacheBytes) {
    group.kv_slot.assign(group.kv_slot.size(), -1);
    group.kv.clear();
  }
  for (int64_t i = i0; i < i1; ++i) {
    for (int32_t w : group.selection[static_cast<size_t>(i)]) {
      int32_t& slot = group.kv_slot[static_cast<size_t>(w)];
      if (slot >= 0) continue;
      slot = static_cast<int32_t>(group.kv.size() / static_cast<size_t>(D));
      group.kv.resize(group.kv.size() + static_cast<size_t>(D));
      decode_compressed_entry(group.kv_codes + w * kv_bytes, D, &group.kv[static_cast<size_t>(slot) * static_cast<size_t>(D)]);
    }
  }
}

}  // namespace hippo::engine
