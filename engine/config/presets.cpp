// The two presets as field values. Fields not listed keep the release's values (release_defaults()).
#include "engine/config/presets.h"

#include "base/check.h"
#include "engine/config/engram_primes.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace hippo::engine {
namespace {

// The parts every preset shares with the release config.json (design/reference).
ModelConfig release_defaults() {
  ModelConfig c;
  c.architectures = {"DeepseekV41ForCausalLM"};
  c.model_type = std::string(kModelType);
  c.image_token_id = 129264;
  c.bos_token_id = 0;
  c.eos_token_id = 1;
  c.pad_token_id = 2;
  c.dtype = "bfloat16";
  c.tie_word_embeddings = false;

  TextConfig& t = c.text_config;
  t.model_type = std::string(kTextModelType);
  t.vocab_size = 129280;
  t.num_key_value_heads = 1;
  t.hidden_act = "silu";
  t.swiglu_limit = 10.0;
  t.rms_norm_eps = 1e-20;
  t.tie_word_embeddings = false;
  t.max_position_embeddings = 1048576;
  t.rope_theta = 10000;
  t.rope_scaling = {"yarn", 16, 32, 1, 65536};
  t.n_shared_experts = 1;
  t.scoring_func = "sqrtsoftplus";
  t.topk_method = "noaux_tc";
  t.norm_topk_prob = true;
  t.routed_scaling_factor = 1.5;
  t.gate_temp = 1.0;
  t.sliding_window = 128;
  t.compress_rope_theta = 160000;
  t.hc_mult = 4;
  t.hc_sinkhorn_iters = 20;
  t.hc_eps = 1e-6;
  t.engram_max_ngram_size = 4;
  t.engram_pad_token_id = 2;
  t.engram_compressed_vocab_size = 99092;
  t.num_nextn_predict_layers = 3;
  t.dspark_block_size = 5;
  t.dspark_noise_token_id = 128799;

  VisionConfig& v = c.vision_config;
  v.model_type = std::string(kVisionModelType);
  v.patch_size = 14;
  v.rope_theta = 10000;
  v.downsample_ratio = 3;
  v.max_image_tokens = 1024;
  v.min_pixels = 295936;  // 544^2
  return c;
}

// Engram table rows from the prime search, so that the hashing of §5.3 addresses them exactly.
void set_engram_rows(TextConfig& t) {
  t.engram_num_embeddings.clear();
  for (const auto& primes : engram_table_primes(t.engram_vocab_size, static_cast<int64_t>(t.engram_layer_ids.size()),
                                                t.engram_max_ngram_size, t.engram_n_heads)) {
    int64_t rows = 0;
    for (int64_t p : primes) rows += p;
    t.engram_num_embeddings.push_back(rows);
  }
}

// Engram at `layers` with small tables (1,000-row n-gram vocabulary, 2 heads x 32).
void small_engram(TextConfig& t, std::vector<int64_t> layers) {
  t.engram_layer_ids = std::move(layers);
  t.engram_vocab_size = 1000;
  t.engram_n_heads = 2;
  t.engram_head_dim = 32;
  set_engram_rows(t);
}

void small_vision(VisionConfig& v) {
  v.num_hidden_layers = 2;
  v.hidden_size = 32;
  v.num_attention_heads = 2;
  v.intermediate_size = 64;
}

ModelConfig tiny() {
  ModelConfig c = release_defaults();
  TextConfig& t = c.text_config;
  t.hidden_size = 32;
  t.moe_intermediate_size = 32;
  t.num_hidden_layers = 12;
  t.num_attention_heads = 4;
  t.head_dim = 64;
  t.qk_rope_head_dim = 16;
  t.q_lora_rank = 32;
  t.o_lora_rank = 32;
  t.o_groups = 2;
  t.n_routed_experts = 8;
  t.num_experts_per_tok = 2;
  // layers: 0 1 window | 2 3 ratio-2 (2 writes) | 4 5 6 ratio-2 (4 writes) | 7..11 ratio-1 (7 writes),
  // then 3 DSpark stages.
  t.compress_ratios = {0, 0, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 0, 0, 0};
  t.kv_source_layer_ids = {2, 4, 7};
  t.index_source_layer_ids = {2, 4, 7, 9, 11};
  t.candidate_source_layer_id = 7;
  t.candidate_topk_blocks = 4;  // small, so that the candidate mask bites on short prompts
  t.candidate_block_size = 4;
  t.index_n_heads = 8;  // >= 8: fewer exact index-score ties, so the reference agrees with itself (docs/reference-model.md)
  t.index_head_dim = 32;
  t.index_topk = 16;
  small_engram(t, {1, 4});
  t.dspark_target_layer_ids = {9, 10, 11};
  t.dspark_markov_rank = 8;
  t.dspark_n_routed_experts = 4;
  t.dspark_num_experts_per_tok = 2;
  small_vision(c.vision_config);
  return c;
}

ModelConfig small_fullkv() {
  ModelConfig c = release_defaults();
  TextConfig& t = c.text_config;
  t.hidden_size = 64;
  t.moe_intermediate_size = 32;
  t.num_hidden_layers = 40;
  t.num_attention_heads = 4;
  t.head_dim = 512;
  t.qk_rope_head_dim = 64;
  t.q_lora_rank = 64;
  t.o_lora_rank = 64;
  t.o_groups = 2;
  t.n_routed_experts = 8;
  t.num_experts_per_tok = 2;
  t.compress_ratios.assign(43, 0);  // the release schedule: [0,0] + [2]*18 + [1]*20 + [0,0,0]
  for (int layer = 2; layer < 20; ++layer) t.compress_ratios[static_cast<size_t>(layer)] = 2;
  for (int layer = 20; layer < 40; ++layer) t.compress_ratios[static_cast<size_t>(layer)] = 1;
  t.kv_source_layer_ids = {2, 8, 14, 20};
  t.index_source_layer_ids = {2, 8, 14, 20, 24, 28, 32, 36};
  t.candidate_source_layer_id = 20;
  t.candidate_topk_blocks = 2048;
  t.candidate_block_size = 8;
  t.index_n_heads = 4;
  t.index_head_dim = 128;
  t.index_topk = 512;
  small_engram(t, {1, 14});
  t.dspark_target_layer_ids = {37, 38, 39};
  t.dspark_markov_rank = 8;
  t.dspark_n_routed_experts = 4;
  t.dspark_num_experts_per_tok = 2;
  small_vision(c.vision_config);
  return c;
}

// The release's attention, indexer, compressor and expert shapes on four layers: a window layer with
// Engram, a ratio-2 KV writer, the ratio-1 candidate source and a reindex layer reading it; four
// routed experts (top 2) + the shared one; no DSpark stages (each would be a release-width layer).
// About 2.3 G parameters, 3.3 GB quantised, most of them the 129,280 x 5,120 embedding and head.
ModelConfig wide() {
  ModelConfig c = release_defaults();
  TextConfig& t = c.text_config;
  t.hidden_size = 5120;
  t.moe_intermediate_size = 2304;
  t.num_hidden_layers = 4;
  t.num_attention_heads = 64;
  t.head_dim = 512;
  t.qk_rope_head_dim = 64;
  t.q_lora_rank = 1280;
  t.o_lora_rank = 1024;
  t.o_groups = 8;
  t.n_routed_experts = 4;
  t.num_experts_per_tok = 2;
  t.compress_ratios = {0, 2, 1, 1, 0, 0, 0};  // then 3 DSpark stages
  t.kv_source_layer_ids = {1, 2};
  t.index_source_layer_ids = {1, 2, 3};
  t.candidate_source_layer_id = 2;
  t.candidate_topk_blocks = 2048;
  t.candidate_block_size = 8;
  t.index_n_heads = 32;
  t.index_head_dim = 128;
  t.index_topk = 512;
  small_engram(t, {0});
  // The release's DSpark stages at full width (its Markov rank), with as few routed experts as the
  // trunk: what a draft pass costs against a decode step at the release's shapes.
  t.dspark_target_layer_ids = {1, 2, 3};
  t.dspark_markov_rank = 256;
  t.dspark_n_routed_experts = 4;
  t.dspark_num_experts_per_tok = 2;
  small_vision(c.vision_config);
  return c;
}

// The shapes of the trained demo model (scripts/train_demo.py): tiny's layer schedule and every
// structural feature at hidden 64, with 8 heads, wider experts, and an indexer that keeps 64 of the
// compressed entries within the 8 x 16 candidate blocks (the demo's conversations reach ~2K tokens).
// Embedding and head (2 x 16.5 MB in BF16) are most of it.
ModelConfig demo() {
  ModelConfig c = tiny();
  TextConfig& t = c.text_config;
  t.hidden_size = 64;
  t.moe_intermediate_size = 128;
  t.num_attention_heads = 8;
  t.q_lora_rank = 64;
  t.o_lora_rank = 64;
  t.index_topk = 64;
  t.candidate_topk_blocks = 8;
  t.candidate_block_size = 16;
  return c;
}

}  // namespace

std::vector<std::string_view> preset_names() { return {"tiny", "small-fullkv", "wide", "demo"}; }

Result<ModelConfig> preset_config(std::string_view name, bool quantised) {
  ModelConfig config;
  if (name == "tiny") config = tiny();
  else if (name == "small-fullkv") config = small_fullkv();
  else if (name == "wide") config = wide();
  else if (name == "demo") config = demo();
  else return make_error(ErrorCode::kInvalidArgument, "unknown preset '{}' (known: {})", name, fmt::join(preset_names(), ", "));
  if (quantised) config.quantization_config = QuantizationConfig{"fp8", "dynamic", {32, 32}, "ue8m0", "fp4"};
  Status valid = validate_model_config(config);
  HIPPO_CHECK(valid.ok(), "a built-in preset fails validation");
  return config;
}

}  // namespace hippo::engine
