// Engram fusion: gathered table rows -> keys and a value -> one gate per stream.
#include "engine/model/forward_pass.h"

#include "engine/engram/engram_hash.h"

#include <algorithm>

namespace hippo::engine {

// Reference: DeepseekV41Engram.forward.
void ForwardPass::engram(const LayerWeights& lw) {
  const EngramHasher& hasher = *model_.engram_hasher_;
  const int64_t d = t_.hidden_size, hc = t_.hc_mult, hd = t_.engram_head_dim;
  const int64_t cols = hasher.rows_per_position();
  const int64_t layer_index =
      std::find(t_.engram_layer_ids.begin(), t_.engram_layer_ids.end(), lw.role.layer) - t_.engram_layer_ids.begin();
  const EngramWeights& ew = lw.engram;
  std::vector<int64_t> ids(static_cast<size_t>(rows_ * cols));
  for (int64_t r = 0; r < rows_; ++r) {
    const auto first = engram_rows_.begin() + (r * hasher.n_layers() + layer_index) * cols;
    std::copy(first, first + cols, ids.begin() + r * cols);
  }
  std::vector<float> gathered(static_cast<size_t>(rows_ * cols * hd));
  ops_.gather_rows(ew.table, ids.data(), rows_ * cols, gathered.data());
  std::vector<float> kv(static_cast<size_t>(rows_ * (hc + 1) * d));
  linear(gathered.data(), rows_, ew.wkv, kv.data());
  ops_.engram_fuse(streams_.data(), kv.data(), ew.gate_weight.data(), rows_, hc, d, static_cast<float>(t_.rms_norm_eps));
}

}  // namespace hippo::engine
