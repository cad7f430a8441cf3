// The lightning indexer over the stored FP4 index keys (contract in kernels/backend.h).
#include "kernels/cpu/model_ops.h"

#include "kernels/cpu/attention_ops.h"
#include "kernels/cpu/kv_entries.h"
#include "kernels/cpu/linear.h"
#include "kernels/top_k.h"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <limits>
#include <vector>

namespace hippo::kernels::cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// best.push(first + j, scores[j]) for j < n, in order. Once k keys are held, almost every key of a
// long context is below the worst of them, so 16 scores at a time are first compared with it (SSE's
// ordered compare: a NaN, which push() refuses too, is not above).
void push_scores(StreamingTopK& best, std::int32_t first, const float* scores, std::int64_t n) {
  std::int64_t j = 0;
  for (; j < n && !best.full(); ++j) best.push(first + static_cast<std::int32_t>(j), scores[j]);
  for (; j + 16 <= n; j += 16) {
    const __m128 worst = _mm_set1_ps(best.worst());
    __m128 above = _mm_cmpgt_ps(_mm_loadu_ps(scores + j), worst);
    for (int l = 4; l < 16; l += 4) above = _mm_or_ps(above, _mm_cmpgt_ps(_mm_loadu_ps(scores + j + l), worst));
    if (_mm_movemask_ps(above) == 0) continue;
    for (std::int64_t t = j; t < j + 16; ++t) best.push(first + static_cast<std::int32_t>(t), scores[t]);
  }
  for (; j < n; ++j) best.push(first + static_cast<std::int32_t>(j), scores[j]);
}

// A reindex layer scores only the keys of each row's candidate blocks: per row, those keys are
// decoded and transposed, and attention_ops' index_scores scores them (each score a fixed sequence, so
// prefill, decode and batches agree). The best among them, in key order on ties, are what the masked
// full scoring would pick.
void index_candidates(const IndexerArgs& a, ThreadPool& pool) {
  const std::int64_t hI = a.heads, idh = a.dim, index_bytes = index_entry_bytes(idh);
  pool.parallel_for(a.rows, [&](std::int64_t begin, std::int64_t end) {
    std::vector<std::int32_t> ids;
    std::vector<const float*> rows;
    std::vector<float> decoded, keys_t, scores;
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
      const std::int64_t ld = nc + 16;  // off multiples of 4 KiB, as in index_all
      keys_t.resize(static_cast<size_t>(idh * ld));
      scores.resize(ids.size());
      transpose_rows(rows.data(), nc, idh, keys_t.data(), ld);
      index_scores(a.q + i * hI * idh, hI, idh, keys_t.data(), ld, nc, a.weights + i * hI, a.scale, scores.data());
      std::vector<std::int32_t> picked = top_k(scores.data(), nc, a.top_k);
      std::erase_if(picked, [&](std::int32_t c) { return scores[static_cast<size_t>(c)] == kNegInf; });
      for (std::int32_t& c : picked) c = ids[static_cast<size_t>(c)];
      std::sort(picked.begin(), picked.end());
      a.selection[i] = std::move(picked);
    }
  });
}

// Tile by tile in key order (whole candidate blocks, about 1,024 keys; 8,192 for a few rows): the
// tile's FP4 keys decoded once and transposed, then each row that sees some of them scores them
// (index_scores: each score a fixed sequence, so a row's scores do not depend on the rows that came
// with it), split over the threads by rows and, for a few rows, by groups of keys (so one decode row
// uses them all); then each row feeds its running top-k (and, in a candidate source, the maxima of
// the tile's candidate blocks). The picks are top_k()'s over all keys, with no per-row array of
// n_keys scores.
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
  constexpr std::int64_t kKeyGroup = 256;
  const bool split_keys = n < 2 * pool.size();
  // Few rows (decode) take longer tiles: fewer hand-offs to the pool per pass over the keys.
  const std::int64_t tile = std::max<std::int64_t>(block, (split_keys ? 8192 : 1024) / block * block);
  // A row of the transposed keys a little longer than the tile: at a multiple of 4 KiB, the dims of
  // one key would all fall in the same L1 cache set.
  const std::int64_t ld = tile + 16;
  const std::int64_t seen = *std::max_element(a.visible, a.visible + n);
  // The calling thread's buffers (also read by the pool's workers): the tile's keys, transposed
  // [idh][ld], and for split keys the rows' scores [n][tile].
  thread_local std::vector<float> kept_keys, kept_scores;
  std::vector<float>& keys_t = kept_keys;
  std::vector<float>& split_scores = kept_scores;
  keys_t.resize(static_cast<size_t>(idh * ld));
  if (split_keys) split_scores.resize(static_cast<size_t>(n * tile));
  std::vector<StreamingTopK> picks, block_picks;
  for (std::int64_t i = 0; i < n; ++i) {
    picks.emplace_back(a.top_k);
    if (candidate_source) block_picks.emplace_back(a.candidate_top_k);
  }
  for (std::int64_t w0 = 0; w0 < seen; w0 += tile) {
    const std::int64_t w1 = std::min(seen, w0 + tile), width = w1 - w0;
    const std::int64_t groups = (width + kKeyGroup - 1) / kKeyGroup;
    auto decode = [&](std::int64_t j0, std::int64_t j1) {
      decode_rows_transposed(keys, w0 + j0, j1 - j0, keys_t.data() + j0, ld);
    };
    auto n_visible = [&](std::int64_t i) { return std::clamp<std::int64_t>(a.visible[i] - w0, 0, width); };
    // Row i's scores of the tile's keys [j0, j0 + len) into scores[j0 ..].
    auto score = [&](std::int64_t i, std::int64_t j0, std::int64_t len, float* scores) {
      index_scores(a.q + i * hI * idh, hI, idh, keys_t.data() + j0, ld, len, a.weights + i * hI, a.scale, scores + j0);
    };
    if (split_keys) {
      // Each thread decodes its groups of keys and scores them for every row while they are in its
      // cache: one hand-off per tile.
      pool.parallel_for(groups, [&](std::int64_t g0, std::int64_t g1) {
        for (std::int64_t g = g0; g < g1; ++g) {
          const std::int64_t j0 = g * kKeyGroup;
          decode(j0, std::min(width, j0 + kKeyGroup));
          for (std::int64_t i = 0; i < n; ++i)
            score(i, j0, std::min(kKeyGroup, n_visible(i) - j0), split_scores.data() + i * tile);
        }
      });
    } else {
      pool.parallel_for(groups, [&](std::int64_t g0, std::int64_t g1) {
        decode(g0 * kKeyGroup, std::min(width, g1 * kKeyGroup));
      });
    }
    pool.parallel_for(n, [&](std::int64_t begin, std::int64_t end) {
      std::vector<float> own(split_keys ? 0 : static_cast<size_t>(width));
      for (std::int64_t i = begin; i < end; ++i) {
        const std::int64_t visible = a.visible[i], nv = n_visible(i);
        float* scores = split_keys ? split_scores.data() + i * tile : own.data();
        if (!split_keys) score(i, 0, nv, scores);
        push_scores(picks[static_cast<size_t>(i)], static_cast<std::int32_t>(w0), scores, nv);
        if (candidate_source) {  // keys past `visible` count as -inf
          for (std::int64_t b = w0 / block; b < (w1 + block - 1) / block; ++b)
            block_picks[static_cast<size_t>(i)].push(static_cast<std::int32_t>(b),
                                                     candidate_block_score(scores, w0, w1, b, block, visible));
        }
      }
    });
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
