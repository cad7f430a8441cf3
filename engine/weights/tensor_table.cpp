// The release layout, tensor by tensor, in the order: embed, trunk layers, final norm, head, DSpark
// stages, vision tower. Shapes follow §4.4 of the spec; init magnitudes keep activations O(1) through
// RMSNorms (uniform half-width about 1/sqrt(fan_in), norms about 1).
#include "engine/weights/tensor_table.h"

#include "engine/config/layer_schedule.h"
#include "engine/weights/dequant.h"

#include <fmt/format.h>

#include <bit>

namespace hippo::engine {

std::string_view component_name(Component component) {
  switch (component) {
    case Component::kEmbedding: return "embedding";
    case Component::kHead: return "head";
    case Component::kNorm: return "norms";
    case Component::kMhc: return "mhc";
    case Component::kAttention: return "attention";
    case Component::kCompressor: return "compressor";
    case Component::kIndexer: return "indexer";
    case Component::kRouter: return "router";
    case Component::kRoutedExperts: return "routed_experts";
    case Component::kSharedExperts: return "shared_experts";
    case Component::kEngramTable: return "engram_tables";
    case Component::kEngram: return "engram_fusion";
    case Component::kDspark: return "dspark";
    case Component::kVision: return "vision";
  }
  return "?";
}

std::string_view head_weight_prefix(const TextConfig& text) { return text.tie_word_embeddings ? "embed" : "head"; }

namespace {

// Half-width exponent for a fan-in n: 2^-floor(log2(n)/2), about 1/sqrt(n).
int fan_in_exponent(int64_t fan_in) {
  const int log2 = static_cast<int>(std::bit_width(static_cast<uint64_t>(fan_in))) - 1;
  return -(log2 / 2);
}

// The projections that write into the residual streams (attention wo_b, expert w2, Engram wkv) start
// this many binades below fan-in scale, as in a trained model whose blocks make small updates to the
// streams. A random model at full gain amplifies every one-step rounding of the QAT quantisers
// (window FP8, compressed and index FP4) into logit changes above the reference's own run-to-run
// agreement (docs/reference-model.md, "Sensitivity"), which would leave nothing comparable.
constexpr int kResidualWriteShift = 4;

class Builder {
 public:
  explicit Builder(const ModelConfig& config) : quantised_(config.quantised()) {
    // A plain checkpoint is generated through the same 32x32 FP8 blocks as V4.1's quantised one, so
    // that one seed gives the same model in both layouts.
    fp8_block_ = quantised_ ? config.quantization_config->weight_block_size : std::vector<int64_t>{32, 32};
  }

  std::vector<TensorSpec> take() { return std::move(tensors_); }

  void set_scope(Component component, int64_t layer) {
    component_ = component;
    layer_ = layer;
  }

  // A tensor stored as its values.
  void values(const std::string& name, DType dtype, std::vector<int64_t> shape, InitRule init) {
    TensorSpec spec;
    spec.name = name;
    spec.dtype = dtype;
    spec.logical_shape = shape;
    spec.shape = std::move(shape);
    spec.weight_name = name;
    spec.n_params = element_count(spec.shape);
    spec.init = std::move(init);
    add(std::move(spec));
  }

  void norm(const std::string& name, int64_t dim) {
    values(name, DType::kBF16, {dim}, {InitRule::Kind::kUniform, 1.0, -4, 4});  // 1 + k/128, |k| <= 8
  }
  void bf16_linear(const std::string& prefix, int64_t out, int64_t in) {
    values(prefix + ".weight", DType::kBF16, {out, in}, uniform(fan_in_exponent(in), 8));
  }
  void bias(const std::string& name, int64_t dim) { values(name, DType::kBF16, {dim}, uniform(-4, 8)); }
  void f32(const std::string& name, std::vector<int64_t> shape, InitRule init) {
    values(name, DType::kF32, std::move(shape), std::move(init));
  }

  // A dense linear: FP8 + block scales when quantised, BF16 otherwise.
  void dense(const std::string& prefix, int64_t out, int64_t in, int shift = 0) {
    block_quantised(prefix, out, in, fp8_block_, fan_in_exponent(in) - shift);
  }
  // An Engram table: FP8 rows with one scale per 32 when quantised.
  void engram_rows(const std::string& prefix, int64_t rows, int64_t dim) {
    block_quantised(prefix, rows, dim, {1, 32}, fan_in_exponent(dim));
  }
  // A routed expert's linear: packed FP4 + per-32 scales when quantised, BF16 otherwise.
  void expert(const std::string& prefix, int64_t out, int64_t in, int shift = 0) {
    // E2M1 magnitudes reach 6 (vs about 1 for the FP8 codes used here): two binades lower scales.
    const InitRule init{InitRule::Kind::kFp4, 0, fan_in_exponent(in) - 2 - shift, 0};
    const std::vector<int64_t> block{1, kFp4BlockSize};
    const std::string weight = prefix + ".weight";
    if (!quantised_) {
      plain_matrix(weight, out, in, init, block);
      return;
    }
    TensorSpec codes = matrix(weight, DType::kI8, {out, in / 2}, out, in, Storage::kFp4Codes, init, block);
    codes.n_params = out * in;
    add(std::move(codes));
    add(matrix(prefix + ".scale", DType::kF8E8M0, {out, in / kFp4BlockSize}, out, in, Storage::kFp4Scales, init,
               block, weight));
  }

 private:
  static InitRule uniform(int exponent, int bits) { return {InitRule::Kind::kUniform, 0, exponent, bits}; }

  void block_quantised(const std::string& prefix, int64_t out, int64_t in, std::vector<int64_t> block, int exponent) {
    const InitRule init{InitRule::Kind::kFp8, 0, exponent, 0};
    const std::string weight = prefix + ".weight";
    if (!quantised_) {
      plain_matrix(weight, out, in, init, block);
      return;
    }
    TensorSpec codes = matrix(weight, DType::kF8E4M3, {out, in}, out, in, Storage::kFp8Codes, init, block);
    codes.n_params = out * in;
    add(std::move(codes));
    const int64_t scale_rows = (out + block[0] - 1) / block[0];
    const int64_t scale_cols = (in + block[1] - 1) / block[1];
    add(matrix(prefix + ".scale", DType::kF8E8M0, {scale_rows, scale_cols}, out, in, Storage::kFp8Scales, init, block,
               weight));
  }

  void plain_matrix(const std::string& name, int64_t out, int64_t in, const InitRule& init,
                    const std::vector<int64_t>& block) {
    TensorSpec spec = matrix(name, DType::kBF16, {out, in}, out, in, Storage::kValues, init, block);
    spec.n_params = out * in;
    add(std::move(spec));
  }

  TensorSpec matrix(const std::string& name, DType dtype, std::vector<int64_t> shape, int64_t out, int64_t in,
                    Storage storage, const InitRule& init, const std::vector<int64_t>& block,
                    const std::string& weight_name = {}) {
    TensorSpec spec;
    spec.name = name;
    spec.dtype = dtype;
    spec.shape = std::move(shape);
    spec.logical_shape = {out, in};
    spec.storage = storage;
    spec.block = block;
    spec.weight_name = weight_name.empty() ? name : weight_name;
    spec.init = init;
    return spec;
  }

  void add(TensorSpec spec) {
    spec.component = component_;
    spec.layer = layer_;
    tensors_.push_back(std::move(spec));
  }

  bool quantised_;
  std::vector<int64_t> fp8_block_;
  Component component_ = Component::kEmbedding;
  int64_t layer_ = -1;
  std::vector<TensorSpec> tensors_;
};

// The block every trunk layer and DSpark stage shares: mHC sites, norms, attention projections, the
// router and the experts. Compressors, indexers and Engram are added by the caller.
void add_block(Builder& b, const TextConfig& t, const std::string& p, int64_t layer, Component scope,
               int64_t n_experts, bool vision_bias) {
  const int64_t d = t.hidden_size;
  const int64_t mix = (2 + t.hc_mult) * t.hc_mult;  // pre (n) + post (n) + comb (n x n) = 24 for n = 4
  auto in_scope = [&](Component c) { b.set_scope(scope == Component::kDspark ? scope : c, layer); };

  in_scope(Component::kMhc);
  for (const char* site : {"attn", "ffn"}) {
    b.f32(fmt::format("{}hc_{}_fn", p, site), {mix, t.hc_mult * d},
          {InitRule::Kind::kUniform, 0, fan_in_exponent(t.hc_mult * d), 24});
    b.f32(fmt::format("{}hc_{}_base", p, site), {mix}, {InitRule::Kind::kUniform, 0, -2, 24});
    b.f32(fmt::format("{}hc_{}_scale", p, site), {3}, {InitRule::Kind::kUniform, 0, -2, 24});
  }
  in_scope(Component::kNorm);
  b.norm(p + "attn_norm.weight", d);
  b.norm(p + "ffn_norm.weight", d);

  in_scope(Component::kAttention);
  const int64_t heads_dim = t.num_attention_heads * t.head_dim;
  b.dense(p + "attn.wq_a", t.q_lora_rank, d);
  b.norm(p + "attn.q_norm.weight", t.q_lora_rank);
  b.dense(p + "attn.wq_b", heads_dim, t.q_lora_rank);
  b.dense(p + "attn.wkv", t.head_dim, d);
  b.norm(p + "attn.kv_norm.weight", t.head_dim);
  // wo_a: o_groups blocks of [o_lora_rank, heads_dim / o_groups], stacked.
  b.dense(p + "attn.wo_a", t.o_groups * t.o_lora_rank, heads_dim / t.o_groups);
  b.dense(p + "attn.wo_b", d, t.o_groups * t.o_lora_rank, kResidualWriteShift);
  b.f32(p + "attn.attn_sink", {t.num_attention_heads}, {InitRule::Kind::kUniform, 0, 0, 24});

  in_scope(Component::kRouter);
  b.bf16_linear(p + "ffn.gate", n_experts, d);
  b.f32(p + "ffn.gate.bias", {n_experts}, {InitRule::Kind::kUniform, 0, -4, 24});
  if (vision_bias) b.f32(p + "ffn.gate.bias_vl", {n_experts}, {InitRule::Kind::kUniform, 0, -4, 24});

  in_scope(Component::kRoutedExperts);
  const int64_t width = t.moe_intermediate_size;
  for (int64_t e = 0; e < n_experts; ++e) {
    const std::string expert = fmt::format("{}ffn.experts.{}.", p, e);
    b.expert(expert + "w1", width, d);  // gate
    b.expert(expert + "w2", d, width, kResidualWriteShift);  // down
    b.expert(expert + "w3", width, d);  // up
  }
  if (t.n_shared_experts > 0) {
    in_scope(Component::kSharedExperts);
    const int64_t shared = width * t.n_shared_experts;
    b.dense(p + "ffn.shared_experts.w1", shared, d);
    b.dense(p + "ffn.shared_experts.w2", d, shared, kResidualWriteShift);
    b.dense(p + "ffn.shared_experts.w3", shared, d);
  }
}

void add_trunk_layer(Builder& b, const TextConfig& t, const LayerRole& role) {
  const std::string p = fmt::format("layers.{}.", role.layer);
  const int64_t d = t.hidden_size;
  add_block(b, t, p, role.layer, Component::kAttention, t.n_routed_experts, /*vision_bias=*/true);
  if (role.writes_kv) {
    b.set_scope(Component::kCompressor, role.layer);
    b.bf16_linear(p + "attn.compressor.wkv", t.head_dim, d);
    if (role.compress_ratio > 1) b.bf16_linear(p + "attn.compressor.wgate", t.head_dim, d);  // ratio 1: no pooling
    b.norm(p + "attn.compressor.norm.weight", t.head_dim);
    b.set_scope(Component::kIndexer, role.layer);
    b.bf16_linear(p + "attn.indexer.wk", t.index_head_dim, t.head_dim);
    b.norm(p + "attn.indexer.k_norm.weight", t.index_head_dim);
  }
  if (role.owns_index_query) {
    b.set_scope(Component::kIndexer, role.layer);
    b.dense(p + "attn.indexer.wq_b", t.index_n_heads * t.index_head_dim, t.q_lora_rank);
    b.bf16_linear(p + "attn.indexer.weights_proj", t.index_n_heads, d);
  }
  if (role.engram) {
    size_t index = 0;
    while (t.engram_layer_ids[index] != role.layer) ++index;
    const int64_t rows = t.engram_num_embeddings[index];
    const int64_t gathered = (t.engram_max_ngram_size - 1) * t.engram_n_heads * t.engram_head_dim;  // 6144
    b.set_scope(Component::kEngramTable, role.layer);
    b.engram_rows(p + "engram.embed", rows, t.engram_head_dim);
    b.set_scope(Component::kEngram, role.layer);
    b.dense(p + "engram.wkv", (t.hc_mult + 1) * d, gathered, kResidualWriteShift);  // n keys, then the value
    b.f32(p + "engram.q_weight", {t.hc_mult, d}, {InitRule::Kind::kUniform, 1.0, -4, 16});
    b.f32(p + "engram.k_weight", {t.hc_mult, d}, {InitRule::Kind::kUniform, 1.0, -4, 16});
  }
}

void add_dspark_stage(Builder& b, const TextConfig& t, int64_t stage) {
  const std::string p = fmt::format("mtp.{}.", stage);
  const int64_t layer = t.num_hidden_layers + stage;
  const int64_t d = t.hidden_size;
  b.set_scope(Component::kDspark, layer);
  if (stage == 0) {  // context features from the target layers' attention inputs
    b.dense(p + "main_proj", d, static_cast<int64_t>(t.dspark_target_layer_ids.size()) * d);
    b.norm(p + "main_norm.weight", d);
  }
  add_block(b, t, p, layer, Component::kDspark, t.dspark_n_routed_experts, /*vision_bias=*/false);
  b.set_scope(Component::kDspark, layer);
  if (stage == t.num_nextn_predict_layers - 1) {  // the last stage carries the draft head
    // V4.1 names (../shared/design/dspark.md §1.3): the Markov head's embed (W1) and head (W2, used
    // as W2ᵀ), the confidence projection over [hidden; W1 row]; no hc_head (the streams collapse with
    // the last stage's FFN pre-mix).
    b.norm(p + "norm.weight", d);
    b.bf16_linear(p + "markov_head.embed", t.vocab_size, t.dspark_markov_rank);
    b.bf16_linear(p + "markov_head.head", t.vocab_size, t.dspark_markov_rank);
    b.bf16_linear(p + "confidence_head.proj", 1, d + t.dspark_markov_rank);
  }
}

void add_vision(Builder& b, const VisionConfig& v, int64_t d) {
  b.set_scope(Component::kVision, -1);
  const int64_t h = v.hidden_size;
  b.bf16_linear("vision.patch_embed.proj", h, 3 * v.patch_size * v.patch_size);  // RGB patch, channel-major
  b.bias("vision.patch_embed.proj.bias", h);
  for (int64_t n = 0; n < v.num_hidden_layers; ++n) {
    const std::string p = fmt::format("vision.blocks.{}.", n);
    b.bf16_linear(p + "attn.wqkv", 3 * h, h);
    b.bias(p + "attn.wqkv.bias", 3 * h);
    b.bf16_linear(p + "attn.wo", h, h);
    b.bias(p + "attn.wo.bias", h);
    b.bf16_linear(p + "mlp.w1", 2 * v.intermediate_size, h);  // gate | up, fused
    b.bf16_linear(p + "mlp.w2", h, v.intermediate_size);
    b.norm(p + "norm1.weight", h);
    b.norm(p + "norm2.weight", h);
  }
  b.norm("vision.norm.weight", h);
  const int64_t unfolded = h * v.downsample_ratio * v.downsample_ratio;  // 3x3 patches, channel-major
  b.bf16_linear("aligner.w1", d, unfolded);
  b.bias("aligner.w1.bias", d);
  b.bf16_linear("aligner.w2", d, d);
  b.bias("aligner.w2.bias", d);
  for (const char* name : {"image_start", "image_end", "image_newline"}) b.norm(name, d);
}

}  // namespace

TensorTable TensorTable::build(const ModelConfig& config) {
  const TextConfig& t = config.text_config;
  Builder b(config);
  b.set_scope(Component::kEmbedding, -1);
  b.bf16_linear("embed", t.vocab_size, t.hidden_size);
  for (const LayerRole& role : layer_schedule(t)) add_trunk_layer(b, t, role);
  b.set_scope(Component::kNorm, -1);
  b.norm("norm.weight", t.hidden_size);
  if (!t.tie_word_embeddings) {  // (tied: the head reads embed.weight, head_weight_prefix)
    b.set_scope(Component::kHead, -1);
    b.bf16_linear("head", t.vocab_size, t.hidden_size);
  }
  for (int64_t stage = 0; stage < t.num_nextn_predict_layers; ++stage) add_dspark_stage(b, t, stage);
  add_vision(b, config.vision_config, t.hidden_size);

  TensorTable table;
  table.tensors_ = b.take();
  table.by_name_.reserve(table.tensors_.size());
  for (size_t i = 0; i < table.tensors_.size(); ++i) table.by_name_.emplace(table.tensors_[i].name, i);
  return table;
}

const TensorSpec* TensorTable::find(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

int64_t TensorTable::total_bytes() const {
  int64_t total = 0;
  for (const TensorSpec& spec : tensors_) total += spec.n_bytes();
  return total;
}

}  // namespace hippo::engine
