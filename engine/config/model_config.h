// ModelConfig: the DeepSeek-V4.1 `config.json` (design/deepseek-v41-architecture.md §1.3) as a typed
// struct, parsed from and printed to JSON by one field list per struct (model_config.cpp), and checked
// for consistency before anything is built from it.
//
// The release config is composite: top-level ids and `quantization_config`, a `text_config` with the
// text model (the only part the forward pass reads) and a `vision_config` for the vision tower. Every
// field the release carries is required (a missing or ill-typed one is an error naming it, e.g.
// "text_config.hidden_size: missing"); keys we do not model (e.g. `transformers_version`) are ignored.
// `quantization_config` is optional: present = quantised release layout (FP8 dense, FP4 experts),
// absent = plain layout (BF16/F32), see docs/model-checkpoint.md.
#pragma once

#include "base/status.h"

#include <boost/json/value.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hippo::engine {

inline constexpr std::string_view kModelType = "deepseek_v41";
inline constexpr std::string_view kTextModelType = "deepseek_v41_text";
inline constexpr std::string_view kVisionModelType = "deepseek_v41_vision";

struct RopeScaling {
  std::string rope_type;  // "yarn" (the only kind V4.1 uses)
  double factor = 0;
  double beta_fast = 0;
  double beta_slow = 0;
  int64_t original_max_position_embeddings = 0;
};

struct QuantizationConfig {
  std::string quant_method;                // "fp8": dense linears are F8_E4M3 with E8M0 block scales
  std::string activation_scheme;           // "dynamic"
  std::vector<int64_t> weight_block_size;  // [rows, cols] of one scale block, [32, 32] in V4.1
  std::string scale_fmt;                   // "ue8m0"
  std::string expert_dtype;                // "fp4": routed experts are packed E2M1 with per-32 E8M0 scales
};

struct TextConfig {
  std::string model_type;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;                 // d
  int64_t moe_intermediate_size = 0;       // routed and shared expert width
  int64_t num_hidden_layers = 0;           // trunk layers (DSpark stages come on top)
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;         // 1: one shared latent, K = V
  int64_t head_dim = 0;
  int64_t qk_rope_head_dim = 0;            // RoPE on the last dims of each head (and of each index key)
  int64_t q_lora_rank = 0;
  int64_t o_lora_rank = 0;
  int64_t o_groups = 0;
  std::string hidden_act;
  double swiglu_limit = 0;
  double rms_norm_eps = 0;
  bool tie_word_embeddings = false;
  int64_t max_position_embeddings = 0;
  double rope_theta = 0;
  RopeScaling rope_scaling;
  int64_t n_routed_experts = 0;
  int64_t n_shared_experts = 0;
  int64_t num_experts_per_tok = 0;
  std::string scoring_func;
  std::string topk_method;
  bool norm_topk_prob = false;
  double routed_scaling_factor = 0;
  std::optional<double> gate_temp;         // router logits are divided by it; absent = 1
  int64_t sliding_window = 0;
  std::vector<int64_t> compress_ratios;    // one per trunk layer, then one per DSpark stage
  double compress_rope_theta = 0;
  std::vector<int64_t> kv_source_layer_ids;     // the layers that own a compressor and write KV
  std::vector<int64_t> index_source_layer_ids;  // the layers that own indexer queries
  int64_t index_n_heads = 0;
  int64_t index_head_dim = 0;
  int64_t index_topk = 0;
  int64_t candidate_source_layer_id = 0;
  int64_t candidate_topk_blocks = 0;
  int64_t candidate_block_size = 0;
  int64_t hc_mult = 0;
  int64_t hc_sinkhorn_iters = 0;
  double hc_eps = 0;
  std::vector<int64_t> engram_layer_ids;
  std::vector<int64_t> engram_num_embeddings;   // rows of each Engram table (sum of its primes)
  int64_t engram_max_ngram_size = 0;
  int64_t engram_vocab_size = 0;                // where the search for the table primes starts
  int64_t engram_n_heads = 0;
  int64_t engram_head_dim = 0;
  int64_t engram_pad_token_id = 0;
  int64_t engram_compressed_vocab_size = 0;
  int64_t num_nextn_predict_layers = 0;         // DSpark stages
  int64_t dspark_block_size = 0;
  int64_t dspark_noise_token_id = 0;
  std::vector<int64_t> dspark_target_layer_ids;
  int64_t dspark_markov_rank = 0;
  int64_t dspark_n_routed_experts = 0;
  int64_t dspark_num_experts_per_tok = 0;
};

struct VisionConfig {
  std::string model_type;
  int64_t num_hidden_layers = 0;
  int64_t hidden_size = 0;
  int64_t num_attention_heads = 0;
  int64_t intermediate_size = 0;
  int64_t patch_size = 0;
  double rope_theta = 0;
  int64_t downsample_ratio = 0;
  int64_t max_image_tokens = 0;
  int64_t min_pixels = 0;
  std::optional<double> max_wh_ratio;  // null in the release
};

struct ModelConfig {
  std::vector<std::string> architectures;
  std::string model_type;
  int64_t image_token_id = 0;
  int64_t bos_token_id = 0;
  int64_t eos_token_id = 0;
  int64_t pad_token_id = 0;
  std::string dtype;
  bool tie_word_embeddings = false;
  std::optional<QuantizationConfig> quantization_config;
  TextConfig text_config;
  VisionConfig vision_config;

  bool quantised() const { return quantization_config.has_value(); }
};

// Parses and validates config.json text. `origin` names the file in error messages.
Result<ModelConfig> parse_model_config(std::string_view json_text, std::string_view origin);

// Reads and parses a config.json file.
Result<ModelConfig> load_model_config(const std::string& path);

// Consistency checks (layer schedule, KV/index sources, Engram table sizes, quantisation blocks);
// the message names the offending field.
Status validate_model_config(const ModelConfig& config);

// The config as JSON, in the release's field order (the same field list as parsing).
boost::json::object model_config_to_json(const ModelConfig& config);

// config.json text: pretty-printed, deterministic, newline-terminated.
std::string model_config_to_text(const ModelConfig& config);

// JSON with two-space indentation; arrays of scalars stay on one line. Deterministic.
std::string pretty_json(const boost::json::value& value);

}  // namespace hippo::engine
