// The lightning indexer of an index source: scores, the candidate blocks, the top-k selection.
#include "engine/model/forward_pass.h"

#include "engine/model/forward_ops.h"
#include "engine/model/kv_formats.h"
#include "kernels/cpu/attention_ops.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace hippo::engine {

using namespace ops;  // NOLINT: the shared scalar helpers of the forward pass

namespace {

// A candidate block's score for one row: the best score among its keys that the row sees (keys at
// or past `visible` score -inf; scores holds keys w0 .. w1), +inf for the block of the row's last
// visible key, which is always kept.
float candidate_block_score(const float* scores, int64_t w0, int64_t w1, int64_t b, int64_t block, int64_t visible) {
  if (visible > 0 && b == (visible - 1) / block) return std::numeric_limits<float>::infinity();
  float m = kNegInf;
  for (int64_t w = std::max(w0, b * block); w < std::min({w1, (b + 1) * block, visible}); ++w)
    m = std::max(m, scores[static_cast<size_t>(w - w0)]);
  return m;
}

}  // namespace

// Reference: DeepseekV41Indexer steps 2-5 and select_candidate_blocks.
void ForwardPass::index(const LayerWeights& lw, const std::vector<float>& u, const std::vector<float>& q_residual) {
  const LayerRole& role = lw.role;
  const int64_t hI = t_.index_n_heads, idh = t_.index_head_dim, ratio = role.compress_ratio;
  const int64_t index_bytes = index_entry_bytes(idh);
  std::vector<float> q(static_cast<size_t>(rows_ * hI * idh));
  linear(q_residual.data(), rows_, lw.index_wq_b, q.data());
  for (int64_t r = 0; r < rows_; ++r) {
    compress_angles_.apply(&q[static_cast<size_t>(r * hI * idh)], hI, idh, r);
    for (int64_t h = 0; h < hI; ++h) fp4_ue8m0_round_trip(&q[static_cast<size_t>((r * hI + h) * idh)], idh);
  }
  std::vector<float> weights(static_cast<size_t>(rows_ * hI));
  linear(u.data(), rows_, lw.index_weights_proj, weights.data());
  const float heads_scaling = static_cast<float>(std::pow(static_cast<double>(hI), -0.5));
  const float softmax_scale = static_cast<float>(std::pow(static_cast<double>(idh), -0.5));
  for (float& w : weights) w *= heads_scaling;

  for (size_t s = 0; s < segments_.size(); ++s) {
    const Segment& seg = segments_[s];
    Shared& shared = shared_[s];
    const int64_t n = static_cast<int64_t>(seg.tokens.size());
    const int64_t T = shared.n_entries;
    if (T == 0) continue;  // nothing to score yet; the reference publishes nothing
    const int64_t block = t_.candidate_block_size;
    const int64_t n_blocks = (T + block - 1) / block;
    const int64_t words = (n_blocks + 63) / 64;
    // The keys row i of the segment sees: entry w is visible to position t iff w < (t + 1) / ratio.
    auto visible_keys = [&](int64_t i) { return std::min(T, (positions_[static_cast<size_t>(seg.row0 + i)] + 1) / ratio); };
    const bool uses_candidates = role.reindex && shared.has_candidates;
    std::vector<std::vector<int32_t>> selection(static_cast<size_t>(n));
    std::vector<std::vector<uint64_t>> candidates;
    if (role.candidate_source) candidates.assign(static_cast<size_t>(n), std::vector<uint64_t>(static_cast<size_t>(words), 0));

    if (uses_candidates) {
      // A reindex layer scores only the keys of each row's candidate blocks: per row, those keys
      // are decoded and transposed, and kernels/cpu/attention_ops gives every head's dot products
      // (each a fixed chain over the key's dims, so prefill, decode and batches agree). The best
      // among them, in key order on ties, are what the masked full scoring would pick.
      model_.pool_->parallel_for(n, [&](int64_t begin, int64_t end) {
        std::vector<int32_t> ids;
        std::vector<const float*> rows;
        std::vector<float> decoded, keys_t, dots, scores;
        for (int64_t i = begin; i < end; ++i) {
          const int64_t r = seg.row0 + i;
          const int64_t visible = visible_keys(i);
          const std::vector<uint64_t>& keep = shared.candidates[static_cast<size_t>(i)];
          ids.clear();
          for (size_t word = 0; word < keep.size(); ++word) {
            for (uint64_t bits = keep[word]; bits != 0; bits &= bits - 1) {
              const int64_t b = static_cast<int64_t>(word) * 64 + std::countr_zero(bits);
              for (int64_t w = b * block; w < std::min(visible, (b + 1) * block); ++w) ids.push_back(static_cast<int32_t>(w));
            }
          }
          const int64_t nc = static_cast<int64_t>(ids.size());
          rows.resize(ids.size());
          decoded.resize(ids.size() * static_cast<size_t>(idh));
          for (size_t c = 0; c < ids.size(); ++c) {
            rows[c] = &decoded[c * static_cast<size_t>(idh)];
            decode_index_entry(shared.index_codes + static_cast<int64_t>(ids[c]) * index_bytes, idh, &decoded[c * static_cast<size_t>(idh)]);
          }
          keys_t.resize(static_cast<size_t>(idh * nc));
          dots.resize(static_cast<size_t>(hI * nc));
          kernels::cpu::transpose_rows(rows.data(), nc, idh, keys_t.data(), nc);
          kernels::cpu::transposed_scores(&q[static_cast<size_t>(r * hI * idh)], hI, idh, keys_t.data(), nc, nc, idh,
                                          dots.data(), nc);
          scores.assign(ids.size(), 0.0f);  // Σ_h relu(dot)·scale·w_h from 0 in h order per key
          for (int64_t h = 0; h < hI; ++h) {
            const float weight = weights[static_cast<size_t>(r * hI + h)];
            for (int64_t c = 0; c < nc; ++c) scores[static_cast<size_t>(c)] += std::max(dots[static_cast<size_t>(h * nc + c)], 0.0f) * softmax_scale * weight;
          }
          std::vector<int32_t> picked = top_k(scores.data(), nc, t_.index_topk);
          std::erase_if(picked, [&](int32_t c) { return scores[static_cast<size_t>(c)] == kNegInf; });
          for (int32_t& c : picked) c = ids[static_cast<size_t>(c)];
          std::sort(picked.begin(), picked.end());
          selection[static_cast<size_t>(i)] = std::move(picked);
        }
      });
      shared.selection = std::move(selection);
      shared.has_selection = true;
      continue;
    }

    // Per-head dot products of a block of query rows with a tile of the keys its last row can see
    // (the others see fewer): one GEMM with the stored FP4 keys as the weight matrix, read in place
    // (each output depends only on its query and key, and the kernel's FP4 values are the decoded
    // keys exactly, linear.h), then each row scores the tile's keys and feeds its running top-k
    // (and, in a candidate source, the maxima of the tile's candidate blocks), tile after tile in
    // key order: the picks are top_k()'s over all keys, with no per-row array of T scores.
    static_assert(kIndexScaleBlock == 32, "the index keys' layout is the kernels' FP4 rows");
    kernels::WeightView keys;
    keys.format = kernels::WeightFormat::kFp4Row32;
    keys.data = shared.index_codes;
    keys.scales = shared.index_codes + idh / 2;
    keys.cols = idh;
    keys.rows = T;
    keys.row_stride = index_bytes;
    // Up to 64 query rows per block (many rows per pass over a tile), tiles of about 1,024 keys
    // (whole candidate blocks; their FP4 codes stay in L2 while the rows pass) and at most 16 MB of
    // dots.
    const int64_t rows_per_block = std::min<int64_t>(n, 64);
    const int64_t tile =
        std::max<int64_t>(block, std::min<int64_t>(1024, (int64_t{1} << 22) / (rows_per_block * hI)) / block * block);
    std::vector<float>& dots = index_dots_;
    for (int64_t i0 = 0; i0 < n; i0 += rows_per_block) {
      const int64_t i1 = std::min(n, i0 + rows_per_block);
      const int64_t seen = visible_keys(i1 - 1);
      std::vector<ops::StreamingTopK> picks, block_picks;
      for (int64_t i = i0; i < i1; ++i) {
        picks.emplace_back(t_.index_topk);
        if (role.candidate_source) block_picks.emplace_back(t_.candidate_topk_blocks);
      }
      for (int64_t w0 = 0; w0 < seen; w0 += tile) {
        const int64_t w1 = std::min(seen, w0 + tile), width = w1 - w0;
        dots.resize(static_cast<size_t>((i1 - i0) * hI * width));
        linear(&q[static_cast<size_t>((seg.row0 + i0) * hI * idh)], (i1 - i0) * hI, kernels::weight_rows(keys, w0, width),
               dots.data());
        model_.pool_->parallel_for(i1 - i0, [&](int64_t begin, int64_t end) {
          std::vector<float> scores(static_cast<size_t>(width));
          for (int64_t i = i0 + begin; i < i0 + end; ++i) {
            const int64_t r = seg.row0 + i;
            const float* row_dots = dots.data() + (i - i0) * hI * width;
            const int64_t visible = visible_keys(i);
            const int64_t n_visible = std::clamp<int64_t>(visible - w0, 0, width);
            // Σ_h relu(dot)·scale·w_h from 0 in h order per key, keys side by side.
            std::fill(scores.begin(), scores.begin() + n_visible, 0.0f);
            for (int64_t h = 0; h < hI; ++h) {
              const float weight = weights[static_cast<size_t>(r * hI + h)];
              const float* head_dots = row_dots + h * width;
              for (int64_t w = 0; w < n_visible; ++w) scores[static_cast<size_t>(w)] += std::max(head_dots[w], 0.0f) * softmax_scale * weight;
            }
            for (int64_t w = 0; w < n_visible; ++w) picks[static_cast<size_t>(i - i0)].push(static_cast<int32_t>(w0 + w), scores[static_cast<size_t>(w)]);
            if (role.candidate_source) {  // keys past `visible` count as -inf
              for (int64_t b = w0 / block; b < (w1 + block - 1) / block; ++b)
                block_picks[static_cast<size_t>(i - i0)].push(static_cast<int32_t>(b), candidate_block_score(scores.data(), w0, w1, b, block, visible));
            }
          }
        });
      }
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t visible = visible_keys(i);
        if (role.candidate_source) {
          ops::StreamingTopK& best_blocks = block_picks[static_cast<size_t>(i - i0)];
          for (int64_t b = (seen + block - 1) / block; b < n_blocks; ++b)  // blocks no tile reached
            best_blocks.push(static_cast<int32_t>(b), candidate_block_score(nullptr, seen, seen, b, block, visible));
          for (const ops::StreamingTopK::Entry& e : best_blocks.take())
            if (e.score > kNegInf) candidates[static_cast<size_t>(i)][static_cast<size_t>(e.index / 64)] |= uint64_t{1} << (e.index % 64);
        }
        // -inf picks are dropped.
        std::vector<int32_t> picked;
        for (const ops::StreamingTopK::Entry& e : picks[static_cast<size_t>(i - i0)].take())
          if (e.score != kNegInf) picked.push_back(e.index);
        std::sort(picked.begin(), picked.end());
        selection[static_cast<size_t>(i)] = std::move(picked);
      }
    }
    shared.selection = std::move(selection);
    shared.has_selection = true;
    if (role.candidate_source) {
      shared.candidates = std::move(candidates);
      shared.has_candidates = true;
    }
  }
}

}  // namespace hippo::engine
