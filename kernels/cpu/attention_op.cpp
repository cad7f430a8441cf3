// Attention over a block of rows: each row's window keys and selected entries, the softmax with the
// sink and the weighted sum (contract in kernels/backend.h). The block's window keys are transposed
// once, so a row's window is a column range (the rows of a block share most of their window); its
// selected entries, which rows share far less, are scored as rows (row_scores). Scores and the
// weighted sum are attention_ops.h's, whose every element is a fixed function of its query and key
// (scores) or a fixed chain over the keys in order (outputs): a row gets the same bits in any block,
// chunk or batch.
#include "kernels/cpu/model_ops.h"

#include "kernels/cpu/attention_ops.h"

#include <algorithm>
#include <vector>

namespace hippo::kernels::cpu {

void attention(const AttentionArgs& a, ThreadPool& pool) {
  const std::int64_t H = a.heads, D = a.dim;
  std::vector<float> keys_t(static_cast<size_t>(D * a.n_keys));
  transpose_rows(a.keys, a.n_keys, D, keys_t.data(), a.n_keys);
  std::int64_t max_window = 0, max_selected = 0;
  for (std::int64_t i = 0; i < a.rows; ++i) {
    max_window = std::max(max_window, a.window_count[i]);
    if (a.selected_offset != nullptr) max_selected = std::max(max_selected, a.selected_offset[i + 1] - a.selected_offset[i]);
  }
  const std::int64_t stride = max_window + max_selected;  // a row's keys at most
  // One row's heads h0 .. h1: scores, softmax with the sink, weighted sum. rows holds its window keys
  // then its selected entries.
  auto attend_heads = [&](std::int64_t i, std::int64_t h0, std::int64_t h1, const float* const* rows, float* probs) {
    const std::int64_t first = a.window_first[i], n_window = a.window_count[i];
    const std::int64_t n_selected = a.selected_offset != nullptr ? a.selected_offset[i + 1] - a.selected_offset[i] : 0;
    const float* q = a.q + (i * H + h0) * D;
    transposed_scores(q, h1 - h0, D, keys_t.data() + first, a.n_keys, n_window, D, probs, stride);
    row_scores(q, h1 - h0, D, rows + n_window, n_selected, D, probs + n_window, stride);
    softmax_with_sink(probs, h1 - h0, stride, n_window + n_selected, a.scale, a.sinks + h0);
    weighted_rows(probs, h1 - h0, stride, rows, n_window + n_selected, D, a.out + (i * H + h0) * D, D);
  };
  auto gather_row = [&](std::int64_t i, std::vector<const float*>& rows) {
    const std::int64_t first = a.window_first[i], n_window = a.window_count[i];
    std::copy_n(a.keys + first, n_window, rows.begin());
    if (a.selected_offset == nullptr) return;
    const std::int64_t n_selected = a.selected_offset[i + 1] - a.selected_offset[i];
    std::copy_n(a.selected + a.selected_offset[i], n_selected, rows.begin() + n_window);
  };
  // Fewer rows than threads (a decode step): the row's heads are split across the threads instead,
  // in groups of kHeadGroup so that the score kernels keep their 4-head register tiles (4 heads split
  // two ways ran slower than on one thread). Every element is the same chain either way
  // (attention_ops.h), so the bits do not change.
  if (a.rows < pool.size()) {
    constexpr std::int64_t kHeadGroup = 4;
    std::vector<const float*> rows(static_cast<size_t>(stride));
    for (std::int64_t i = 0; i < a.rows; ++i) {
      gather_row(i, rows);
      pool.parallel_for((H + kHeadGroup - 1) / kHeadGroup, [&](std::int64_t g0, std::int64_t g1) {
        const std::int64_t h0 = g0 * kHeadGroup, h1 = std::min(H, g1 * kHeadGroup);
        std::vector<float> probs(static_cast<size_t>((h1 - h0) * stride));
        attend_heads(i, h0, h1, rows.data(), probs.data());
      });
    }
    return;
  }
  pool.parallel_for(a.rows, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> probs(static_cast<size_t>(H * stride));              // [H][stride]: scores, then probabilities
    std::vector<const float*> rows(static_cast<size_t>(stride));
    for (std::int64_t i = begin; i < end; ++i) {
      gather_row(i, rows);
      attend_heads(i, 0, H, rows.data(), probs.data());
    }
  });
}

}  // namespace hippo::kernels::cpu
