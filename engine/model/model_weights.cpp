#include "engine/model/model_weights.h"

#include "base/check.h"
#include "engine/weights/float_tensor.h"

#include <fmt/format.h>

#include <cmath>

namespace hippo::engine {
namespace {

using kernels::WeightFormat;
using kernels::WeightView;

// The view of a linear named `prefix` (".weight", and ".scale" when quantised).
WeightView linear_view(const Checkpoint& checkpoint, const std::string& prefix) {
  const TensorView weight = checkpoint.tensor(prefix + ".weight");
  const TensorSpec& spec = *weight.spec;
  WeightView view;
  view.data = weight.bytes.data();
  view.rows = spec.logical_shape[0];
  view.cols = spec.logical_shape[1];
  switch (spec.storage) {
    case Storage::kValues:
      HIPPO_CHECK(spec.dtype == DType::kBF16 || spec.dtype == DType::kF32, "a linear's values are BF16 or F32");
      view.format = spec.dtype == DType::kBF16 ? WeightFormat::kBF16 : WeightFormat::kF32;
      break;
    case Storage::kFp8Codes:
      HIPPO_CHECK(spec.block.size() == 2 && spec.block[0] == spec.block[1], "FP8 scale blocks are square");
      view.format = WeightFormat::kFp8Block;
      view.block = spec.block[0];
      view.scales = reinterpret_cast<const std::uint8_t*>(checkpoint.tensor(prefix + ".scale").bytes.data());
      break;
    case Storage::kFp4Codes:
      view.format = WeightFormat::kFp4Row32;
      view.scales = reinterpret_cast<const std::uint8_t*>(checkpoint.tensor(prefix + ".scale").bytes.data());
      break;
    default: HIPPO_CHECK(false, "a linear's weight holds values or codes");
  }
  HIPPO_CHECK(view.validate().ok(), "checkpoint validation admits only well-formed linears");
  return view;
}

// An F32 matrix tensor (mHC fn) viewed as a linear.
WeightView f32_matrix_view(const Checkpoint& checkpoint, const std::string& name) {
  const TensorView tensor = checkpoint.tensor(name);
  HIPPO_CHECK(tensor.spec->dtype == DType::kF32 && tensor.spec->shape.size() == 2, "mHC fn is an F32 matrix");
  WeightView view;
  view.format = WeightFormat::kF32;
  view.data = tensor.bytes.data();
  view.rows = tensor.spec->shape[0];
  view.cols = tensor.spec->shape[1];
  return view;
}

// A table gathered row by row: BF16, or FP8 codes with their E8M0 scales per 32 columns.
kernels::RowTable row_table(const Checkpoint& checkpoint, const std::string& name, const std::string& scales_name) {
  const TensorView codes = checkpoint.tensor(name);
  kernels::RowTable table;
  table.data = codes.bytes.data();
  table.rows = codes.spec->shape[0];
  table.cols = codes.spec->shape[1];
  if (codes.spec->storage == Storage::kFp8Codes) {
    table.format = kernels::TableFormat::kFp8Row32;
    table.scales = reinterpret_cast<const std::uint8_t*>(checkpoint.tensor(scales_name).bytes.data());
  }
  return table;
}

ExpertWeights expert_views(const Checkpoint& checkpoint, const std::string& prefix) {
  return {linear_view(checkpoint, prefix + "w1"), linear_view(checkpoint, prefix + "w2"),
          linear_view(checkpoint, prefix + "w3")};
}

// A trunk layer or a DSpark stage: the mHC sites, attention, and the MoE with `n_experts` routed
// experts of which `per_token` are chosen.
LayerWeights bind_block(const Checkpoint& checkpoint, const std::string& p, const LayerRole& role, int64_t n_experts,
                        int64_t per_token) {
  const TextConfig& t = checkpoint.config().text_config;
  LayerWeights l;
  l.role = role;
  l.hc_attn_fn = f32_matrix_view(checkpoint, p + "hc_attn_fn");
  l.hc_ffn_fn = f32_matrix_view(checkpoint, p + "hc_ffn_fn");
  l.hc_attn_base = tensor_to_float(checkpoint, p + "hc_attn_base");
  l.hc_attn_scale = tensor_to_float(checkpoint, p + "hc_attn_scale");
  l.hc_ffn_base = tensor_to_float(checkpoint, p + "hc_ffn_base");
  l.hc_ffn_scale = tensor_to_float(checkpoint, p + "hc_ffn_scale");
  l.attn_norm = tensor_to_float(checkpoint, p + "attn_norm.weight");
  l.ffn_norm = tensor_to_float(checkpoint, p + "ffn_norm.weight");

  l.wq_a = linear_view(checkpoint, p + "attn.wq_a");
  l.wq_b = linear_view(checkpoint, p + "attn.wq_b");
  l.wkv = linear_view(checkpoint, p + "attn.wkv");
  l.wo_a = linear_view(checkpoint, p + "attn.wo_a");
  l.wo_b = linear_view(checkpoint, p + "attn.wo_b");
  l.q_norm = tensor_to_float(checkpoint, p + "attn.q_norm.weight");
  l.kv_norm = tensor_to_float(checkpoint, p + "attn.kv_norm.weight");
  l.attn_sink = tensor_to_float(checkpoint, p + "attn.attn_sink");

  if (role.writes_kv) {
    l.compressor_wkv = linear_view(checkpoint, p + "attn.compressor.wkv");
    if (role.compress_ratio > 1) l.compressor_wgate = linear_view(checkpoint, p + "attn.compressor.wgate");
    l.compressor_norm = tensor_to_float(checkpoint, p + "attn.compressor.norm.weight");
    l.index_wk = linear_view(checkpoint, p + "attn.indexer.wk");
    l.index_k_norm = tensor_to_float(checkpoint, p + "attn.indexer.k_norm.weight");
  }
  if (role.owns_index_query) {
    l.index_wq_b = linear_view(checkpoint, p + "attn.indexer.wq_b");
    l.index_weights_proj = linear_view(checkpoint, p + "attn.indexer.weights_proj");
  }

  l.router = linear_view(checkpoint, p + "ffn.gate");
  l.router_bias = tensor_to_float(checkpoint, p + "ffn.gate.bias");
  if (role.layer < t.num_hidden_layers) l.router_bias_vl = tensor_to_float(checkpoint, p + "ffn.gate.bias_vl");
  for (int64_t e = 0; e < n_experts; ++e) {
    l.experts.push_back(expert_views(checkpoint, fmt::format("{}ffn.experts.{}.", p, e)));
  }
  l.experts_per_token = per_token;
  l.has_shared_expert = t.n_shared_experts > 0;
  if (l.has_shared_expert) l.shared_expert = expert_views(checkpoint, p + "ffn.shared_experts.");

  l.has_engram = role.engram;
  if (role.engram) {
    EngramWeights& e = l.engram;
    e.table = row_table(checkpoint, p + "engram.embed.weight", p + "engram.embed.scale");
    e.wkv = linear_view(checkpoint, p + "engram.wkv");
    const std::vector<float> q = tensor_to_float(checkpoint, p + "engram.q_weight");
    const std::vector<float> k = tensor_to_float(checkpoint, p + "engram.k_weight");
    e.gate_weight.resize(q.size());
    for (size_t i = 0; i < q.size(); ++i) e.gate_weight[i] = q[i] * k[i];
  }
  return l;
}

DsparkWeights bind_dspark(const Checkpoint& checkpoint) {
  const TextConfig& t = checkpoint.config().text_config;
  DsparkWeights w;
  w.main_proj = linear_view(checkpoint, "mtp.0.main_proj");
  w.main_norm = tensor_to_float(checkpoint, "mtp.0.main_norm.weight");
  for (int64_t s = 0; s < t.num_nextn_predict_layers; ++s) {
    w.stages.push_back(bind_block(checkpoint, fmt::format("mtp.{}.", s), dspark_stage_role(t, s),
                                  t.dspark_n_routed_experts, t.dspark_num_experts_per_tok));
  }
  const std::string last = fmt::format("mtp.{}.", t.num_nextn_predict_layers - 1);
  w.norm = tensor_to_float(checkpoint, last + "norm.weight");
  w.markov_embed = row_table(checkpoint, last + "markov_head.embed.weight", "");
  w.markov_head = row_table(checkpoint, last + "markov_head.head.weight", "");
  const std::vector<float> w2 = tensor_to_float(checkpoint, last + "markov_head.head.weight");
  const auto r = static_cast<size_t>(t.dspark_markov_rank);
  w.markov_head_norms.resize(w2.size() / r);
  for (size_t v = 0; v < w.markov_head_norms.size(); ++v) {
    double sum = 0;
    for (size_t j = 0; j < r; ++j) sum += static_cast<double>(w2[v * r + j]) * w2[v * r + j];
    w.markov_head_norms[v] = static_cast<float>(std::sqrt(sum));
  }
  w.confidence = linear_view(checkpoint, last + "confidence_head.proj");
  return w;
}

}  // namespace

ModelWeights bind_model_weights(const Checkpoint& checkpoint) {
  const TextConfig& t = checkpoint.config().text_config;
  ModelWeights w;
  w.embed = row_table(checkpoint, "embed.weight", "");
  for (const LayerRole& role : layer_schedule(t)) {
    w.layers.push_back(bind_block(checkpoint, fmt::format("layers.{}.", role.layer), role, t.n_routed_experts,
                                  t.num_experts_per_tok));
  }
  w.final_norm = tensor_to_float(checkpoint, "norm.weight");
  w.head = linear_view(checkpoint, std::string(head_weight_prefix(t)));
  if (t.num_nextn_predict_layers > 0) w.dspark = bind_dspark(checkpoint);
  return w;
}

}  // namespace hippo::engine
