// Attention over a block of rows: each row's window keys and selected entries, the softmax with the
// sink and the weighted sum (contract in kernels/backend.h). The block's window keys are transposed
// once, so a row's window is a column range; its selected entries are gathered and transposed per
// row. Scores and the weighted sum are attention_ops.h's, whose every element is a fixed chain over d
// (scores) or over the keys in order (outputs): a row gets the same bits in any block, chunk or batch.
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
  pool.parallel_for(a.rows, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> probs(static_cast<size_t>(H * stride));                // [H][stride]: scores, then probabilities
    std::vector<float> selected_t(static_cast<size_t>(D * max_selected));    // [D][selected]
    std::vector<const float*> rows(static_cast<size_t>(stride));
    for (std::int64_t i = begin; i < end; ++i) {
      const float* q = a.q + i * H * D;
      const std::int64_t first = a.window_first[i], n_window = a.window_count[i];
      transposed_scores(q, H, D, keys_t.data() + first, a.n_keys, n_window, D, probs.data(), stride);
      std::copy_n(a.keys + first, n_window, rows.begin());
      std::int64_t n_selected = 0;
      if (a.selected_offset != nullptr) {
        n_selected = a.selected_offset[i + 1] - a.selected_offset[i];
        std::copy_n(a.selected + a.selected_offset[i], n_selected, rows.begin() + n_window);
        transpose_rows(rows.data() + n_window, n_selected, D, selected_t.data(), n_selected);
        transposed_scores(q, H, D, selected_t.data(), n_selected, n_selected, D, probs.data() + n_window, stride);
      }
      const std::int64_t n_attended = n_window + n_selected;
      softmax_with_sink(probs.data(), H, stride, n_attended, a.scale, a.sinks);
      weighted_rows(probs.data(), H, stride, rows.data(), n_attended, D, a.out + i * H * D, D);
    }
  });
}

}  // namespace hippo::kernels::cpu
