// Attention of one layer: projections, the window KV and its ring, the core softmax with the sink
// over the window and the selected compressed entries, the grouped output projection.
#include "engine/model/forward_pass.h"

#include "engine/model/forward_ops.h"
#include "engine/model/kv_formats.h"
#include "kernels/cpu/vector_ops.h"

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
    linear(group_in.data(), rows_, weight_rows(lw.wo_a, g * ro, ro), group_out.data());
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
// compressed entries, with the sink in the denominator only.
void ForwardPass::attend(const LayerWeights& lw, const std::vector<float>& q, const std::vector<float>& window_kv,
                         std::vector<float>& out) {
  const LayerRole& role = lw.role;
  const int64_t H = t_.num_attention_heads, D = t_.head_dim, window = t_.sliding_window;
  const float scaling = static_cast<float>(std::pow(static_cast<double>(D), -0.5));
  for (size_t s = 0; s < segments_.size(); ++s) {
    const Segment& seg = segments_[s];
    const Shared& shared = shared_[s];
    const int64_t n = static_cast<int64_t>(seg.tokens.size());
    // Ring entries of the positions before this chunk that a window can reach.
    const int64_t previous = std::min(seg.pos0, window - 1);
    std::vector<float> past(static_cast<size_t>(previous * D));
    const std::vector<std::uint8_t>& ring = seg.state->rings_[static_cast<size_t>(role.layer)];
    for (int64_t k = 0; k < previous; ++k) {
      const int64_t position = seg.pos0 - previous + k;
      decode_window_entry(&ring[static_cast<size_t>((position % window) * window_entry_bytes(D))], D,
                          &past[static_cast<size_t>(k * D)]);
    }
    const bool compressed = role.compress_ratio > 0 && shared.n_entries > 0 && shared.has_selection;
    if (compressed) {  // decode the selected entries this group has not decoded yet
      Shared& group = shared_[s];
      const int64_t kv_bytes = compressed_entry_bytes(D);
      for (const std::vector<int32_t>& picked : group.selection) {
        for (int32_t w : picked) {
          int32_t& slot = group.kv_slot[static_cast<size_t>(w)];
          if (slot >= 0) continue;
          slot = static_cast<int32_t>(group.kv.size() / static_cast<size_t>(D));
          group.kv.resize(group.kv.size() + static_cast<size_t>(D));
          decode_compressed_entry(group.kv_codes + w * kv_bytes, D, &group.kv[static_cast<size_t>(slot) * static_cast<size_t>(D)]);
        }
      }
    }
    model_.pool_->parallel_for(n, [&](int64_t begin, int64_t end) {
      std::vector<const float*> keys;
      std::vector<float> logits;
      for (int64_t i = begin; i < end; ++i) {
        const int64_t r = seg.row0 + i;
        const int64_t t = positions_[static_cast<size_t>(r)];
        keys.clear();
        for (int64_t p = std::max<int64_t>(0, t - window + 1); p <= t; ++p) {
          keys.push_back(p >= seg.pos0 ? &window_kv[static_cast<size_t>((seg.row0 + p - seg.pos0) * D)]
                                       : &past[static_cast<size_t>((p - (seg.pos0 - previous)) * D)]);
        }
        if (compressed) {
          for (int32_t w : shared.selection[static_cast<size_t>(i)]) {
            keys.push_back(&shared.kv[static_cast<size_t>(shared.kv_slot[static_cast<size_t>(w)]) * static_cast<size_t>(D)]);
          }
        }
        logits.resize(keys.size());
        for (int64_t h = 0; h < H; ++h) {
          const float* qh = &q[static_cast<size_t>((r * H + h) * D)];
          const float sink = lw.attn_sink[static_cast<size_t>(h)];
          float m = sink;
          for (size_t j = 0; j < keys.size(); ++j) {
            logits[j] = dot(qh, keys[j], D) * scaling;
            m = std::max(m, logits[j]);
          }
          float denom = 0.0f;
          for (size_t j = 0; j < keys.size(); ++j) {
            logits[j] = std::exp(logits[j] - m);
            denom += logits[j];
          }
          denom += std::exp(sink - m);
          float* o = &out[static_cast<size_t>((r * H + h) * D)];
          std::fill(o, o + D, 0.0f);
          for (size_t j = 0; j < keys.size(); ++j) {
            const float p = logits[j] / denom;
            kernels::cpu::axpy(p, keys[j], o, D);
          }
        }
      }
    });
  }
}

}  // namespace hippo::engine
