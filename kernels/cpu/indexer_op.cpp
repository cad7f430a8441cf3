// The lightning indexer over the stored FP4 index keys (contract in kernels/backend.h).
#include "kernels/cpu/model_ops.h"

#include "kernels/cpu/attention_ops.h"
#include "kernels/cpu/kv_entries.h"
#include "kernels/cpu/linear.h"
#include "kernels/top_k.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <vector>

namespace hippo::kernels::cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Σ_h relu(dot)·scale·w_h from 0 in h order per key, keys side by side (dots [heads][ld]).
void score_keys(const float* dots, std::int64_t ld, std::int64_t n, const float* weights, std::int64_t heads, float scale,
                float* scores) {
  std::fill(scores, scores + n, 0.0f);
  for (std::int64_t h = 0; h < heads; ++h) {
    const float weight = weights[h];
    const float* head_dots = dots + h * ld;
    for (std::int64_t w = 0; w < n; ++w) scores[w] += std::max(head_dots[w], 0.0f) * scale * weight;
  }
}

// A reindex layer scores only the keys of each row's candidate blocks: per row, those keys are
// decoded and transposed, and attention_ops gives every head's dot products (each a fixed chain over
// the key's dims, so prefill, decode and batches agree). The best among them, in key order on ties,
// are what the masked full scoring would pick.
void index_candidates(const IndexerArgs& a, ThreadPool& pool) {
  const std::int64_t hI = a.heads, idh = a.dim, index_bytes = index_entry_bytes(idh);
  pool.parallel_for(a.rows, [&](std::int64_t begin, std::int64_t end) {
    std::vector<std::int32_t> ids;
    std::vector<const float*> rows;
    std::vector<float> decoded, keys_t, dots, scores;
    for (std::int64_t i = begin; i < end; ++i) {
      const std::int64_t visible = a.visible[i];
      const std::uint64_t* keep = a.candidates_in[i];
      ids.clear();
      for (std::int64_t word = 0; word < candidate_words(a.n_keys, a.block); ++word) {
        for (std::uint64_t bits = keep[word]; bits != 0; bits &= bits - 1) {
          const std::int64_t b = word * 64 + std::countr_zero(bits);
          for (std::int64_t w = b * a.block; w < std::min(visible, (b + 1) * a.block); ++w) ids.push_back(static_cast<std::int32_t>(w));
        }
      }
      const std::int64_t nc = static_cast<std::int64_t>(ids.size());
      rows.resize(ids.size());
      decoded.resize(ids.size() * static_cast<size_t>(idh));
      for (size_t c = 0; c < ids.size(); ++c) {
        rows[c] = &decoded[c * static_cast<size_t>(idh)];
        decode_index_entry(a.keys + std::int64_t{ids[c]} * index_bytes, idh, &decoded[c * static_cast<size_t>(idh)]);
      }
      keys_t.resize(static_cast<size_t>(idh * nc));
      dots.resize(static_cast<size_t>(hI * nc));
      scores.resize(ids.size());
      transpose_rows(rows.data(), nc, idh, keys_t.data(), nc);
      transposed_scores(a.q + i * hI * idh, hI, idh, keys_t.data(), nc, nc, idh, dots.data(), nc);
      score_keys(dots.data(), nc, nc, a.weights + i * hI, hI, a.scale, scores.data());
      std::vector<std::int32_t> picked = top_k(scores.data(), nc, a.top_k);
      std::erase_if(picked, [&](std::int32_t c) { return scores[static_cast<size_t>(c)] == kNegInf; });
      for (std::int32_t& c : picked) c = ids[static_cast<size_t>(c)];
      std::sort(picked.begin(), picked.end());
      a.selection[i] = std::move(picked);
    }
  });
}

// Tile by tile in key order (whole candidate blocks, about 1,024 keys; 8,192 for a few rows): the
// tile's FP4 keys decoded once and transposed, then per-head dot products of every row that sees
// some of them (transposed_scores: each a fixed chain over the key's dims, so a row's dots do not
// depend on the rows that came with it), 64 rows at a time, split over the threads by rows and, for
// a few rows, by groups of keys (so one decode row uses them all); then each row scores the tile's
// keys and feeds its running top-k (and, in a candidate source, the maxima of the tile's candidate
// blocks). The picks are top_k()'s over all keys, with no per-row array of n_keys scores.
void index_all(const IndexerArgs& a, ThreadPool& pool) {
  static_assert(kIndexScaleBlock == 32, "the index keys' layout is the linear layer's FP4 rows");
  const std::int64_t hI = a.heads, idh = a.dim, block = a.block, n = a.rows;
  const std::int64_t n_blocks = (a.n_keys + block - 1) / block;
  const bool candidate_source = a.candidate_top_k > 0;
  WeightView keys;
  keys.format = WeightFormat::kFp4Row32;
  keys.data = a.keys;
  keys.scales = a.keys + idh / 2;
  keys.cols = idh;
  keys.rows = a.n_keys;
  keys.row_stride = index_entry_bytes(idh);
  constexpr std::int64_t kRowsPerBlock = 64, kKeyGroup = 256;
  // Few rows (decode) take longer tiles: fewer hand-offs to the pool per pass over the keys.
  const std::int64_t tile = std::max<std::int64_t>(block, (n < kRowsPerBlock / 4 ? 8192 : 1024) / block * block);
  const std::int64_t seen = *std::max_element(a.visible, a.visible + n);
  // The calling thread's buffers (also read by the pool's workers): the tile's keys, transposed
  // [idh][tile], and a block of rows' dots [rows][hI][tile].
  thread_local std::vector<float> kept_keys, kept_dots;
  std::vector<float>& keys_t = kept_keys;
  std::vector<float>& dots = kept_dots;
  keys_t.resize(static_cast<size_t>(idh * tile));
  dots.resize(static_cast<size_t>(std::min(n, kRowsPerBlock) * hI * tile));
  std::vector<StreamingTopK> picks, block_picks;
  for (std::int64_t i = 0; i < n; ++i) {
    picks.emplace_back(a.top_k);
    if (candidate_source) block_picks.emplace_back(a.candidate_top_k);
  }
  for (std::int64_t w0 = 0; w0 < seen; w0 += tile) {
    const std::int64_t w1 = std::min(seen, w0 + tile), width = w1 - w0;
    const std::int64_t groups = (width + kKeyGroup - 1) / kKeyGroup;
    pool.parallel_for(groups, [&](std::int64_t g0, std::int64_t g1) {
      const std::int64_t j0 = g0 * kKeyGroup, j1 = std::min(width, g1 * kKeyGroup);
      decode_rows_transposed(keys, w0 + j0, j1 - j0, keys_t.data() + j0, tile);
    });
    auto n_visible = [&](std::int64_t i) { return std::clamp<std::int64_t>(a.visible[i] - w0, 0, width); };
    auto dots_of = [&](std::int64_t i, std::int64_t j0, float* out) {
      const std::int64_t len = std::min(kKeyGroup, n_visible(i) - j0);
      if (len > 0) transposed_scores(a.q + i * hI * idh, hI, idh, keys_t.data() + j0, tile, len, idh, out + j0, tile);
    };
    for (std::int64_t i0 = 0; i0 < n; i0 += kRowsPerBlock) {
      const std::int64_t i1 = std::min(n, i0 + kRowsPerBlock);
      // Few rows: their dots first, split by rows and groups of keys; many: each row's in the scoring task.
      const bool split_keys = (i1 - i0) < 2 * pool.size();
      if (split_keys) {
        pool.parallel_for((i1 - i0) * groups, [&](std::int64_t t0, std::int64_t t1) {
          for (std::int64_t t = t0; t < t1; ++t)
            dots_of(i0 + t / groups, t % groups * kKeyGroup, dots.data() + (t / groups) * hI * tile);
        });
      }
      pool.parallel_for(i1 - i0, [&](std::int64_t begin, std::int64_t end) {
        std::vector<float> scores(static_cast<size_t>(width));
        for (std::int64_t i = i0 + begin; i < i0 + end; ++i) {
          const std::int64_t visible = a.visible[i], nv = n_visible(i);
          float* row_dots = dots.data() + (i - i0) * hI * tile;
          if (!split_keys)
            for (std::int64_t j0 = 0; j0 < nv; j0 += kKeyGroup) dots_of(i, j0, row_dots);
          score_keys(row_dots, tile, nv, a.weights + i * hI, hI, a.scale, scores.data());
          StreamingTopK& row_picks = picks[static_cast<size_t>(i)];
          for (std::int64_t w = 0; w < nv; ++w) row_picks.push(static_cast<std::int32_t>(w0 + w), scores[static_cast<size_t>(w)]);
          if (candidate_source) {  // keys past `visible` count as -inf
            for (std::int64_t b = w0 / block; b < (w1 + block - 1) / block; ++b)
              block_picks[static_cast<size_t>(i)].push(static_cast<std::int32_t>(b),
                                                       candidate_block_score(scores.data(), w0, w1, b, block, visible));
          }
        }
      });
    }
  }
  for (std::int64_t i = 0; i < n; ++i) {
    if (candidate_source) {
      StreamingTopK& best_blocks = block_picks[static_cast<size_t>(i)];
      for (std::int64_t b = (seen + block - 1) / block; b < n_blocks; ++b)  // blocks no tile reached
        best_blocks.push(static_cast<std::int32_t>(b), candidate_block_score(nullptr, seen, seen, b, block, a.visible[i]));
      set_picked_blocks(best_blocks, a.candidates_out[i], candidate_words(a.n_keys, block));
    }
    a.selection[i] = picked_keys(picks[static_cast<size_t>(i)]);
  }
}

}  // namespace

void indexer(const IndexerArgs& a, ThreadPool& pool) {
  if (a.candidates_in != nullptr)
    index_candidates(a, pool);
  else
    index_all(a, pool);
}

}  // namespace hippo::kernels::cpu
