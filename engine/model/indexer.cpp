// The lightning indexer of an index source: queries and head weights, then the backend's indexer op
// over the writer's stored index keys (scores, the candidate blocks, the top-k selection).
#include "engine/model/forward_pass.h"

#include <algorithm>
#include <cmath>

namespace hippo::engine {

// Reference: DeepseekV41Indexer steps 2-5 and select_candidate_blocks.
void ForwardPass::index(const LayerWeights& lw, const std::vector<float>& u, const std::vector<float>& q_residual) {
  const LayerRole& role = lw.role;
  const int64_t hI = t_.index_n_heads, idh = t_.index_head_dim, ratio = role.compress_ratio;
  std::vector<float> q(static_cast<size_t>(rows_ * hI * idh));
  linear(q_residual.data(), rows_, lw.index_wq_b, q.data());
  rope(compress_angles_, q.data(), 0, rows_, hI, idh);
  ops_.fp4_round_trip(q.data(), rows_ * hI, idh);
  std::vector<float> weights(static_cast<size_t>(rows_ * hI));
  linear(u.data(), rows_, lw.index_weights_proj, weights.data());
  const float heads_scaling = static_cast<float>(std::pow(static_cast<double>(hI), -0.5));
  for (float& w : weights) w *= heads_scaling;

  kernels::IndexerArgs args;
  args.heads = hI;
  args.dim = idh;
  args.scale = static_cast<float>(std::pow(static_cast<double>(idh), -0.5));
  args.top_k = t_.index_topk;
  args.block = t_.candidate_block_size;
  args.candidate_top_k = role.candidate_source ? t_.candidate_topk_blocks : 0;
  for (size_t s = 0; s < segments_.size(); ++s) {
    const Segment& seg = segments_[s];
    Shared& shared = shared_[s];
    const int64_t n = static_cast<int64_t>(seg.tokens.size());
    const int64_t T = shared.n_entries;
    if (T == 0) continue;  // nothing to score yet; the reference publishes nothing
    // The keys row i sees: entry w is visible to position t iff w < (t + 1) / ratio.
    std::vector<int64_t> visible(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) visible[static_cast<size_t>(i)] = std::min(T, (seg.pos0 + i + 1) / ratio);
    const bool uses_candidates = role.reindex && shared.has_candidates;
    std::vector<std::vector<int32_t>> selection(static_cast<size_t>(n));
    std::vector<std::vector<uint64_t>> candidates;
    std::vector<uint64_t*> candidates_out;
    std::vector<const uint64_t*> candidates_in;
    if (role.candidate_source) {
      candidates.assign(static_cast<size_t>(n), std::vector<uint64_t>(static_cast<size_t>(kernels::candidate_words(T, args.block))));
      for (std::vector<uint64_t>& bits : candidates) candidates_out.push_back(bits.data());
    }
    if (uses_candidates)
      for (const std::vector<uint64_t>& bits : shared.candidates) candidates_in.push_back(bits.data());
    args.rows = n;
    args.q = &q[static_cast<size_t>(seg.row0 * hI * idh)];
    args.weights = &weights[static_cast<size_t>(seg.row0 * hI)];
    args.keys = shared.index_codes;
    args.n_keys = T;
    args.visible = visible.data();
    args.candidates_out = role.candidate_source ? candidates_out.data() : nullptr;
    args.candidates_in = uses_candidates ? candidates_in.data() : nullptr;
    args.selection = selection.data();
    ops_.indexer(args);
    shared.selection = std::move(selection);
    shared.has_selection = true;
    if (role.candidate_source) {
      shared.candidates = std::move(candidates);
      shared.has_candidates = true;
    }
  }
}

}  // namespace hippo::engine
