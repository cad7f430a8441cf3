// The weights of the text model as the forward pass reads them: kernel views into the memory-mapped
// checkpoint (nothing large is copied) plus small float vectors for norms, sinks and router biases.
// Built once per loaded checkpoint; plain and quantised layouts give the same logical values.
#pragma once

#include "engine/config/layer_schedule.h"
#include "engine/weights/checkpoint.h"
#include "kernels/backend.h"
#include "kernels/weight_view.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hippo::engine {

struct ExpertWeights {
  kernels::WeightView w1;  // gate
  kernels::WeightView w2;  // down
  kernels::WeightView w3;  // up
};

struct EngramWeights {
  kernels::RowTable table;           // [n, head_dim]: FP8 with E8M0 scales per 32, or BF16 (the plain layout)
  kernels::WeightView wkv;           // [(hc + 1) d, (max_ngram - 1) heads head_dim]: keys, then the value
  std::vector<float> gate_weight;    // q_weight * k_weight [hc, d] (only ever used as a product)
};

struct LayerWeights {
  LayerRole role;
  // mHC: fn as a linear [mix, hc d] (F32), base [mix], scale [3]
  kernels::WeightView hc_attn_fn, hc_ffn_fn;
  std::vector<float> hc_attn_base, hc_attn_scale, hc_ffn_base, hc_ffn_scale;
  std::vector<float> attn_norm, ffn_norm;

  kernels::WeightView wq_a, wq_b, wkv, wo_a, wo_b;
  std::vector<float> q_norm, kv_norm, attn_sink;

  // KV writers only
  kernels::WeightView compressor_wkv, compressor_wgate;  // wgate: ratio > 1 only
  std::vector<float> compressor_norm;
  kernels::WeightView index_wk;
  std::vector<float> index_k_norm;
  // index sources only
  kernels::WeightView index_wq_b, index_weights_proj;

  kernels::WeightView router;
  std::vector<float> router_bias, router_bias_vl;
  std::vector<ExpertWeights> experts;
  int64_t experts_per_token = 0;
  ExpertWeights shared_expert;
  bool has_shared_expert = false;

  bool has_engram = false;
  EngramWeights engram;
};

// The DSpark draft (../shared/design/dspark.md §1.3): the context features' projection (stage 0),
// the stages (window-only blocks), and the last stage's norm, Markov head and confidence head. The
// draft shares the target's embedding and head.
struct DsparkWeights {
  kernels::WeightView main_proj;    // [d, targets d]
  std::vector<float> main_norm;     // [d]
  std::vector<LayerWeights> stages;
  std::vector<float> norm;          // [d]
  kernels::RowTable markov_embed;   // W1, BF16 [vocab, rank]
  kernels::RowTable markov_head;    // W2, BF16 [vocab, rank]: the bias W2 · W1[prev], read by rows
  std::vector<float> markov_head_norms;  // [vocab]: |W2[v]|, which bounds the bias of v
  kernels::WeightView confidence;   // BF16 [1, d + rank]: over [pre-norm hidden; W1 row of the previous token]
};

struct ModelWeights {
  kernels::RowTable embed;  // BF16 [vocab, d]
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;
  kernels::WeightView head;
  std::optional<DsparkWeights> dspark;  // checkpoints with DSpark stages
};

// The checkpoint must outlive the result (views point into its mappings).
ModelWeights bind_model_weights(const Checkpoint& checkpoint);

}  // namespace hippo::engine
