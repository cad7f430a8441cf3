// Attention of one layer: projections, the window KV and its ring, the core softmax with the sink
// over the window and the selected compressed entries, the grouped output projection.
#include "engine/model/forward_pass.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace hippo::engine {

using kernels::KvFormat;

// Reference: DeepseekV41Attention.forward.
void ForwardPass::attention(const LayerWeights& lw, const std::vector<float>& u, std::vector<float>& out) {
  const LayerRole& role = lw.role;
  const int64_t H = t_.num_attention_heads, D = t_.head_dim, rq = t_.q_lora_rank;
  const float eps = static_cast<float>(t_.rms_norm_eps);
  const RopeAngles& angles = role.compress_ratio > 0 ? compress_angles_ : main_angles_;

  std::vector<float> q_residual(static_cast<size_t>(rows_ * rq));
  linear(u.data(), rows_, lw.wq_a, q_residual.data());
  ops_.rms_norm(q_residual.data(), rows_, rq, lw.q_norm.data(), eps, q_residual.data());
  std::vector<float> q(static_cast<size_t>(rows_ * H * D));
  linear(q_residual.data(), rows_, lw.wq_b, q.data());
  rope(angles, q.data(), 0, rows_, H, D);

  // The window KV: RMSNorm(W_kv u), RoPE, FP8 round trip (kept as the ring's codes).
  const int64_t entry_bytes = kernels::window_entry_bytes(D);
  std::vector<float> kv(static_cast<size_t>(rows_ * D));
  linear(u.data(), rows_, lw.wkv, kv.data());
  ops_.rms_norm(kv.data(), rows_, D, lw.kv_norm.data(), eps, kv.data());
  rope(angles, kv.data(), 0, rows_, 1, D);
  std::vector<std::uint8_t> kv_codes(static_cast<size_t>(rows_ * entry_bytes));
  ops_.kv_encode(KvFormat::kWindow, kv.data(), rows_, D, kv_codes.data());
  ops_.kv_decode(KvFormat::kWindow, kv_codes.data(), rows_, D, kv.data());

  if (role.compress_ratio > 0) {
    if (role.writes_kv) compress(lw, u);
    if (role.owns_index_query) index(lw, u, q_residual);
  }

  std::vector<float> o(static_cast<size_t>(rows_ * H * D));
  if (depth_ == Depth::kDspark) {
    attend_block(lw, q, kv, o);
  } else {
    attend(lw, q, kv, o);
  }
  rope(angles, o.data(), 0, rows_, H, D, /*inverse=*/true);

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

  // The chunk's window entries join the ring (slot = position mod window); a draft block's never do.
  if (depth_ == Depth::kDspark) return;
  for (const Segment& seg : segments_) {
    const int64_t n = static_cast<int64_t>(seg.tokens.size()), first = std::max<int64_t>(0, n - t_.sliding_window);
    store_window(seg.state->rings_[static_cast<size_t>(role.layer)], seg.pos0 + first, n - first,
                 &kv_codes[static_cast<size_t>((seg.row0 + first) * entry_bytes)]);
  }
}

// Reference: eager_attention_forward over the window (the positions t-window+1..t) and the selected
// compressed entries, with the sink in the denominator only. Per segment the window keys (the ring's
// entries before the chunk, then the chunk's) are laid out once as rows; rows attend in blocks, each
// block's selected entries decoded first (decode_selected), through the backend's attention op.
void ForwardPass::attend(const LayerWeights& lw, const std::vector<float>& q, const std::vector<float>& window_kv,
                         std::vector<float>& out) {
  const LayerRole& role = lw.role;
  const int64_t H = t_.num_attention_heads, D = t_.head_dim, window = t_.sliding_window;
  std::vector<float> past;
  std::vector<const float*> key_rows, selected;
  std::vector<int64_t> window_first, window_count, selected_offset;
  kernels::AttentionArgs args;
  args.heads = H;
  args.dim = D;
  args.scale = static_cast<float>(std::pow(static_cast<double>(D), -0.5));
  args.sinks = lw.attn_sink.data();
  for (size_t s = 0; s < segments_.size(); ++s) {
    const Segment& seg = segments_[s];
    const Shared& shared = shared_[s];
    const int64_t n = static_cast<int64_t>(seg.tokens.size());
    // Ring entries of the positions before this chunk that a window can reach.
    const int64_t previous = std::min(seg.pos0, window - 1);
    past.resize(static_cast<size_t>(previous * D));
    load_window(seg.state->rings_[static_cast<size_t>(role.layer)], seg.pos0 - previous, previous, past.data());
    // Key k of the segment is position pos0 - previous + k.
    const int64_t n_keys = previous + n;
    key_rows.resize(static_cast<size_t>(n_keys));
    for (int64_t k = 0; k < n_keys; ++k) {
      key_rows[static_cast<size_t>(k)] = k < previous ? &past[static_cast<size_t>(k * D)]
                                                      : &window_kv[static_cast<size_t>((seg.row0 + k - previous) * D)];
    }
    // The first window key of row i, as a key index.
    auto first_key = [&](int64_t i) { return std::max<int64_t>(0, seg.pos0 + i - window + 1) - (seg.pos0 - previous); };
    const bool compressed = role.compress_ratio > 0 && shared.n_entries > 0 && shared.has_selection;
    for (int64_t i0 = 0; i0 < n; i0 += kAttentionRowsPerBlock) {
      const int64_t i1 = std::min(n, i0 + kAttentionRowsPerBlock), k0 = first_key(i0);
      window_first.clear();
      window_count.clear();
      for (int64_t i = i0; i < i1; ++i) {
        window_first.push_back(first_key(i) - k0);
        window_count.push_back(i + previous - first_key(i) + 1);
      }
      selected.clear();
      selected_offset.assign(1, 0);
      if (compressed) {
        decode_selected(shared_[s], i0, i1, D);
        for (int64_t i = i0; i < i1; ++i) {
          for (int32_t w : shared.selection[static_cast<size_t>(i)])
            selected.push_back(&shared.kv[static_cast<size_t>(shared.kv_slots.find(w)) * static_cast<size_t>(D)]);
          selected_offset.push_back(static_cast<int64_t>(selected.size()));
        }
      }
      args.rows = i1 - i0;
      args.q = &q[static_cast<size_t>((seg.row0 + i0) * H * D)];
      args.keys = &key_rows[static_cast<size_t>(k0)];
      args.n_keys = i1 - 1 + previous + 1 - k0;
      args.window_first = window_first.data();
      args.window_count = window_count.data();
      args.selected = compressed ? selected.data() : nullptr;
      args.selected_offset = compressed ? selected_offset.data() : nullptr;
      args.out = &out[static_cast<size_t>((seg.row0 + i0) * H * D)];
      ops_.attention(args);
    }
  }
}

// The compressed entries that rows i0 .. i1 selected, decoded into the group's cache where missing.
// The cache serves every layer that reads the writer in this forward; it is emptied first when these
// rows' entries would take it past kSelectedCacheBytes, so it holds at most that plus one block's
// selections (a long prefill chunk's union of selections is not decoded all at once).
void ForwardPass::decode_selected(Shared& group, int64_t i0, int64_t i1, int64_t D) {
  const int64_t kv_bytes = kernels::compressed_entry_bytes(D);
  size_t missing = 0;  // an upper bound: an entry two rows picked counts twice
  for (int64_t i = i0; i < i1; ++i)
    for (int32_t w : group.selection[static_cast<size_t>(i)]) missing += group.kv_slots.find(w) < 0 ? 1 : 0;
  if (!group.kv.empty() && (group.kv.size() + missing * static_cast<size_t>(D)) * sizeof(float) > kSelectedCacheBytes) {
    group.kv_slots.clear();
    group.kv.clear();
  }
  for (int64_t i = i0; i < i1; ++i) {
    for (int32_t w : group.selection[static_cast<size_t>(i)]) {
      if (group.kv_slots.find(w) >= 0) continue;
      const auto slot = static_cast<int32_t>(group.kv.size() / static_cast<size_t>(D));
      group.kv_slots.insert(w, slot);
      group.kv.resize(group.kv.size() + static_cast<size_t>(D));
      ops_.kv_decode(KvFormat::kCompressed, group.kv_codes + w * kv_bytes, 1, D,
                     &group.kv[static_cast<size_t>(slot) * static_cast<size_t>(D)]);
    }
  }
}

}  // namespace hippo::engine
