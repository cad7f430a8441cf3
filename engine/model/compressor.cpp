// The compressor of a KV writer: completed groups become compressed-KV entries and index keys.
#include "engine/model/forward_pass.h"

#include <algorithm>

namespace hippo::engine {

using kernels::compressed_entry_bytes;
using kernels::index_entry_bytes;
using kernels::KvFormat;

// Reference: DeepseekV41Compressor + the index-key half of DeepseekV41Indexer + the compressed-cache
// update of DeepseekV41Attention. Groups completed by this chunk are appended to the writer's streams;
// the group's shared context is refreshed from the streams.
void ForwardPass::compress(const LayerWeights& lw, const std::vector<float>& u) {
  const LayerRole& role = lw.role;
  const int64_t D = t_.head_dim, idh = t_.index_head_dim, ratio = role.compress_ratio;
  const float eps = static_cast<float>(t_.rms_norm_eps);

  std::vector<float> kv(static_cast<size_t>(rows_ * D)), gate;
  linear(u.data(), rows_, lw.compressor_wkv, kv.data());
  if (ratio > 1) {
    gate.resize(static_cast<size_t>(rows_ * D));
    linear(u.data(), rows_, lw.compressor_wgate, gate.data());
  }

  // Latents of the completed groups of every segment, back to back, with their positions.
  std::vector<float> latents;
  std::vector<int64_t> group_positions;
  std::vector<int64_t> groups_per_segment(segments_.size(), 0);
  for (size_t s = 0; s < segments_.size(); ++s) {
    const Segment& seg = segments_[s];
    auto& writer = seg.state->writer(role.layer);
    const int64_t n = static_cast<int64_t>(seg.tokens.size());
    const int64_t first_entry = static_cast<int64_t>(writer.kv.size()) / compressed_entry_bytes(D);
    if (ratio == 1) {
      for (int64_t i = 0; i < n; ++i) {
        latents.insert(latents.end(), &kv[static_cast<size_t>((seg.row0 + i) * D)], &kv[static_cast<size_t>((seg.row0 + i + 1) * D)]);
        group_positions.push_back(first_entry + i);
      }
      groups_per_segment[s] = n;
      continue;
    }
    if (auto& draft = seg.state->draft_) {  // settle() may need them back as pending rows
      const auto w = static_cast<size_t>(&writer - seg.state->writers_.data());
      draft->draft_kv[w].assign(&kv[static_cast<size_t>(seg.row0 * D)], &kv[static_cast<size_t>((seg.row0 + n) * D)]);
      draft->draft_gate[w].assign(&gate[static_cast<size_t>(seg.row0 * D)], &gate[static_cast<size_t>((seg.row0 + n) * D)]);
    }
    // Ratio > 1: the pending rows of the incomplete group come first.
    std::vector<float> rows_kv = writer.pending_kv, rows_gate = writer.pending_gate;
    rows_kv.insert(rows_kv.end(), &kv[static_cast<size_t>(seg.row0 * D)], &kv[static_cast<size_t>((seg.row0 + n) * D)]);
    rows_gate.insert(rows_gate.end(), &gate[static_cast<size_t>(seg.row0 * D)], &gate[static_cast<size_t>((seg.row0 + n) * D)]);
    const int64_t total = static_cast<int64_t>(rows_kv.size()) / D;
    const int64_t groups = total / ratio;
    const size_t at = latents.size();
    latents.resize(at + static_cast<size_t>(groups * D));
    ops_.compressor_pool(rows_kv.data(), rows_gate.data(), groups, ratio, D, latents.data() + at);
    for (int64_t g = 0; g < groups; ++g) group_positions.push_back((first_entry + g) * ratio);
    writer.pending_kv.assign(rows_kv.begin() + groups * ratio * D, rows_kv.end());
    writer.pending_gate.assign(rows_gate.begin() + groups * ratio * D, rows_gate.end());
    groups_per_segment[s] = groups;
  }
  const int64_t n_groups = static_cast<int64_t>(group_positions.size());
  ops_.rms_norm(latents.data(), n_groups, D, lw.compressor_norm.data(), eps, latents.data());

  // Index keys from the pre-RoPE latents; main entries from the RoPE'd ones.
  std::vector<float> keys(static_cast<size_t>(n_groups * idh));
  linear(latents.data(), n_groups, lw.index_wk, keys.data());
  ops_.rms_norm(keys.data(), n_groups, idh, lw.index_k_norm.data(), eps, keys.data());
  const RopeAngles angles(model_.compress_rope_, group_positions);
  rope(angles, keys.data(), 0, n_groups, 1, idh);
  rope(angles, latents.data(), 0, n_groups, 1, D);
  const int64_t kv_bytes = compressed_entry_bytes(D), index_bytes = index_entry_bytes(idh);
  std::vector<std::uint8_t> kv_codes(static_cast<size_t>(n_groups * kv_bytes));
  std::vector<std::uint8_t> index_codes(static_cast<size_t>(n_groups * index_bytes));
  ops_.kv_encode(KvFormat::kIndex, keys.data(), n_groups, idh, index_codes.data());
  ops_.kv_encode(KvFormat::kCompressed, latents.data(), n_groups, D, kv_codes.data());

  int64_t g0 = 0;
  for (size_t s = 0; s < segments_.size(); ++s) {
    const Segment& seg = segments_[s];
    auto& writer = seg.state->writer(role.layer);
    const int64_t n = groups_per_segment[s];
    writer.kv.insert(writer.kv.end(), kv_codes.begin() + g0 * kv_bytes, kv_codes.begin() + (g0 + n) * kv_bytes);
    writer.index.insert(writer.index.end(), index_codes.begin() + g0 * index_bytes,
                        index_codes.begin() + (g0 + n) * index_bytes);
    g0 += n;

    Shared& shared = shared_[s];
    shared.n_entries = static_cast<int64_t>(writer.kv.size()) / kv_bytes;
    shared.kv_codes = writer.kv.data();
    shared.kv_slots.clear();
    shared.kv.clear();
    shared.index_codes = writer.index.data();
  }
}

}  // namespace hippo::engine
