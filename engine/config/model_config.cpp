// config.json <-> ModelConfig. Each struct has one field list (visit_* below) that both the reader and
// the writer walk, so a field cannot be parsed without being printed or the other way round.
#include "engine/config/model_config.h"

#include "engine/config/engram_primes.h"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>
#include <type_traits>

namespace hippo::engine {
namespace json = boost::json;

namespace {

// ---- The field lists, in the release's order. -------------------------------------------------

template <typename Self, typename V>
void visit_rope_scaling(Self& c, V& v) {
  v("rope_type", c.rope_type);
  v("factor", c.factor);
  v("beta_fast", c.beta_fast);
  v("beta_slow", c.beta_slow);
  v("original_max_position_embeddings", c.original_max_position_embeddings);
}

template <typename Self, typename V>
void visit_quantization(Self& c, V& v) {
  v("quant_method", c.quant_method);
  v("activation_scheme", c.activation_scheme);
  v("weight_block_size", c.weight_block_size);
  v("scale_fmt", c.scale_fmt);
  v("expert_dtype", c.expert_dtype);
}

template <typename Self, typename V>
void visit_text(Self& c, V& v) {
  v("model_type", c.model_type);
  v("vocab_size", c.vocab_size);
  v("hidden_size", c.hidden_size);
  v("moe_intermediate_size", c.moe_intermediate_size);
  v("num_hidden_layers", c.num_hidden_layers);
  v("num_attention_heads", c.num_attention_heads);
  v("num_key_value_heads", c.num_key_value_heads);
  v("head_dim", c.head_dim);
  v("qk_rope_head_dim", c.qk_rope_head_dim);
  v("q_lora_rank", c.q_lora_rank);
  v("o_lora_rank", c.o_lora_rank);
  v("o_groups", c.o_groups);
  v("hidden_act", c.hidden_act);
  v("swiglu_limit", c.swiglu_limit);
  v("rms_norm_eps", c.rms_norm_eps);
  v("tie_word_embeddings", c.tie_word_embeddings);
  v("max_position_embeddings", c.max_position_embeddings);
  v("rope_theta", c.rope_theta);
  v("rope_scaling", c.rope_scaling);
  v("n_routed_experts", c.n_routed_experts);
  v("n_shared_experts", c.n_shared_experts);
  v("num_experts_per_tok", c.num_experts_per_tok);
  v("scoring_func", c.scoring_func);
  v("topk_method", c.topk_method);
  v("norm_topk_prob", c.norm_topk_prob);
  v("routed_scaling_factor", c.routed_scaling_factor);
  v("gate_temp", c.gate_temp);
  v("sliding_window", c.sliding_window);
  v("compress_ratios", c.compress_ratios);
  v("compress_rope_theta", c.compress_rope_theta);
  v("kv_source_layer_ids", c.kv_source_layer_ids);
  v("index_source_layer_ids", c.index_source_layer_ids);
  v("index_n_heads", c.index_n_heads);
  v("index_head_dim", c.index_head_dim);
  v("index_topk", c.index_topk);
  v("candidate_source_layer_id", c.candidate_source_layer_id);
  v("candidate_topk_blocks", c.candidate_topk_blocks);
  v("candidate_block_size", c.candidate_block_size);
  v("hc_mult", c.hc_mult);
  v("hc_sinkhorn_iters", c.hc_sinkhorn_iters);
  v("hc_eps", c.hc_eps);
  v("engram_layer_ids", c.engram_layer_ids);
  v("engram_num_embeddings", c.engram_num_embeddings);
  v("engram_max_ngram_size", c.engram_max_ngram_size);
  v("engram_vocab_size", c.engram_vocab_size);
  v("engram_n_heads", c.engram_n_heads);
  v("engram_head_dim", c.engram_head_dim);
  v("engram_pad_token_id", c.engram_pad_token_id);
  v("engram_compressed_vocab_size", c.engram_compressed_vocab_size);
  v("num_nextn_predict_layers", c.num_nextn_predict_layers);
  v("dspark_block_size", c.dspark_block_size);
  v("dspark_noise_token_id", c.dspark_noise_token_id);
  v("dspark_target_layer_ids", c.dspark_target_layer_ids);
  v("dspark_markov_rank", c.dspark_markov_rank);
  v("dspark_n_routed_experts", c.dspark_n_routed_experts);
  v("dspark_num_experts_per_tok", c.dspark_num_experts_per_tok);
}

template <typename Self, typename V>
void visit_vision(Self& c, V& v) {
  v("model_type", c.model_type);
  v("num_hidden_layers", c.num_hidden_layers);
  v("hidden_size", c.hidden_size);
  v("num_attention_heads", c.num_attention_heads);
  v("intermediate_size", c.intermediate_size);
  v("patch_size", c.patch_size);
  v("rope_theta", c.rope_theta);
  v("downsample_ratio", c.downsample_ratio);
  v("max_image_tokens", c.max_image_tokens);
  v("min_pixels", c.min_pixels);
  v("max_wh_ratio", c.max_wh_ratio);
}

template <typename Self, typename V>
void visit_model(Self& c, V& v) {
  v("architectures", c.architectures);
  v("model_type", c.model_type);
  v("image_token_id", c.image_token_id);
  v("bos_token_id", c.bos_token_id);
  v("eos_token_id", c.eos_token_id);
  v("pad_token_id", c.pad_token_id);
  v("dtype", c.dtype);
  v("tie_word_embeddings", c.tie_word_embeddings);
  v("quantization_config", c.quantization_config);
  v("text_config", c.text_config);
  v("vision_config", c.vision_config);
}

// ---- Reading. ----------------------------------------------------------------------------------

Status type_error(const std::string& name, std::string_view expected, const json::value& got) {
  return make_error(ErrorCode::kCorrupt, "{}: expected {}, got {}", name, expected, json::serialize(got));
}

// Walks a field list over one JSON object; the first problem sticks and names the field by its path.
class FieldReader {
 public:
  FieldReader(const json::object& object, std::string path) : object_(object), path_(std::move(path)) {}

  template <typename T>
  void operator()(std::string_view key, T& out) {
    if (!status_.ok()) return;
    std::string name = path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
    const json::value* value = object_.if_contains(key);
    if constexpr (is_optional<T>::value) {
      if (value == nullptr || value->is_null()) {
        out.reset();
        return;
      }
      out.emplace();
      status_ = read(*value, name, *out);
    } else {
      if (value == nullptr) {
        status_ = make_error(ErrorCode::kCorrupt, "{}: missing", name);
        return;
      }
      status_ = read(*value, name, out);
    }
  }

  const Status& status() const { return status_; }

 private:
  template <typename T>
  struct is_optional : std::false_type {};
  template <typename T>
  struct is_optional<std::optional<T>> : std::true_type {};

  static Status read(const json::value& v, const std::string& name, int64_t& out) {
    if (v.is_int64()) {
      out = v.get_int64();
      return {};
    }
    if (v.is_uint64() && v.get_uint64() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      out = static_cast<int64_t>(v.get_uint64());
      return {};
    }
    return type_error(name, "an integer", v);
  }
  static Status read(const json::value& v, const std::string& name, double& out) {
    if (v.is_double()) out = v.get_double();
    else if (v.is_int64()) out = static_cast<double>(v.get_int64());
    else if (v.is_uint64()) out = static_cast<double>(v.get_uint64());
    else return type_error(name, "a number", v);
    return {};
  }
  static Status read(const json::value& v, const std::string& name, bool& out) {
    if (!v.is_bool()) return type_error(name, "true or false", v);
    out = v.get_bool();
    return {};
  }
  static Status read(const json::value& v, const std::string& name, std::string& out) {
    if (!v.is_string()) return type_error(name, "a string", v);
    out = std::string(v.get_string());
    return {};
  }
  template <typename T>
  static Status read(const json::value& v, const std::string& name, std::vector<T>& out) {
    if (!v.is_array()) return type_error(name, "an array", v);
    out.clear();
    for (size_t i = 0; i < v.get_array().size(); ++i) {
      T element{};
      HIPPO_RETURN_IF_ERROR(read(v.get_array()[i], fmt::format("{}[{}]", name, i), element));
      out.push_back(std::move(element));
    }
    return {};
  }
  template <typename T>
    requires std::is_class_v<T> && (!std::is_same_v<T, std::string>)
  static Status read(const json::value& v, const std::string& name, T& out) {
    if (!v.is_object()) return type_error(name, "an object", v);
    FieldReader reader(v.get_object(), name);
    visit(out, reader);
    return reader.status();
  }

  static void visit(RopeScaling& c, FieldReader& r) { visit_rope_scaling(c, r); }
  static void visit(QuantizationConfig& c, FieldReader& r) { visit_quantization(c, r); }
  static void visit(TextConfig& c, FieldReader& r) { visit_text(c, r); }
  static void visit(VisionConfig& c, FieldReader& r) { visit_vision(c, r); }

  const json::object& object_;
  std::string path_;
  Status status_;
};

// ---- Writing. ----------------------------------------------------------------------------------

class FieldWriter {
 public:
  explicit FieldWriter(json::object& out) : out_(out) {}

  template <typename T>
  void operator()(std::string_view key, const T& field) {
    out_[key] = to_json(field);
  }
  // An absent optional field is left out (gate_temp, quantization_config of a plain checkpoint).
  template <typename T>
  void operator()(std::string_view key, const std::optional<T>& field) {
    if (field) out_[key] = to_json(*field);
  }

 private:
  static json::value to_json(int64_t v) { return v; }
  static json::value to_json(bool v) { return v; }
  static json::value to_json(const std::string& v) { return json::value(v); }
  // Every double field stays a JSON double, printed with a decimal point by pretty() ("rope_theta": 10000.0,
  // "gate_temp": 1.0): transformers' config classes are strict dataclasses and refuse an integral JSON number
  // in a float field (docs/reference-model.md, D14). The release writes some of them as integers; readers
  // accept both.
  static json::value to_json(double v) { return v; }
  template <typename T>
  static json::value to_json(const std::vector<T>& v) {
    json::array array;
    for (const auto& element : v) array.push_back(to_json(element));
    return array;
  }
  template <typename T>
    requires std::is_class_v<T> && (!std::is_same_v<T, std::string>)
  static json::value to_json(const T& v) {
    json::object object;
    FieldWriter writer(object);
    visit(v, writer);
    return object;
  }
  static void visit(const RopeScaling& c, FieldWriter& w) { visit_rope_scaling(c, w); }
  static void visit(const QuantizationConfig& c, FieldWriter& w) { visit_quantization(c, w); }
  static void visit(const TextConfig& c, FieldWriter& w) { visit_text(c, w); }
  static void visit(const VisionConfig& c, FieldWriter& w) { visit_vision(c, w); }

  json::object& out_;
};

// ---- Validation. -------------------------------------------------------------------------------

Status bad(std::string_view field, const std::string& why) {
  return make_error(ErrorCode::kCorrupt, "{}: {}", field, why);
}

Status check_positive(std::string_view field, int64_t value) {
  if (value <= 0) return bad(field, fmt::format("must be positive, got {}", value));
  return {};
}

Status check_layer_list(std::string_view field, const std::vector<int64_t>& ids, int64_t n_layers) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= n_layers)
      return bad(field, fmt::format("layer {} is outside 0..{}", ids[i], n_layers - 1));
    if (i > 0 && ids[i] <= ids[i - 1]) return bad(field, "layer ids must be strictly increasing");
  }
  return {};
}

bool contains(const std::vector<int64_t>& ids, int64_t id) { return std::find(ids.begin(), ids.end(), id) != ids.end(); }

Status validate_text(const TextConfig& t, bool quantised) {
  if (t.model_type != kTextModelType)
    return bad("text_config.model_type", fmt::format("'{}', expected '{}'", t.model_type, kTextModelType));
  for (const auto& [field, value] : std::initializer_list<std::pair<std::string_view, int64_t>>{
           {"text_config.vocab_size", t.vocab_size},
           {"text_config.hidden_size", t.hidden_size},
           {"text_config.moe_intermediate_size", t.moe_intermediate_size},
           {"text_config.num_hidden_layers", t.num_hidden_layers},
           {"text_config.num_attention_heads", t.num_attention_heads},
           {"text_config.head_dim", t.head_dim},
           {"text_config.qk_rope_head_dim", t.qk_rope_head_dim},
           {"text_config.q_lora_rank", t.q_lora_rank},
           {"text_config.o_lora_rank", t.o_lora_rank},
           {"text_config.o_groups", t.o_groups},
           {"text_config.n_routed_experts", t.n_routed_experts},
           {"text_config.num_experts_per_tok", t.num_experts_per_tok},
           {"text_config.sliding_window", t.sliding_window},
           {"text_config.index_n_heads", t.index_n_heads},
           {"text_config.index_head_dim", t.index_head_dim},
           {"text_config.index_topk", t.index_topk},
           {"text_config.candidate_topk_blocks", t.candidate_topk_blocks},
           {"text_config.candidate_block_size", t.candidate_block_size},
           {"text_config.hc_mult", t.hc_mult},
           {"text_config.hc_sinkhorn_iters", t.hc_sinkhorn_iters},
           {"text_config.max_position_embeddings", t.max_position_embeddings},
       })
    HIPPO_RETURN_IF_ERROR(check_positive(field, value));
  if (t.n_shared_experts < 0) return bad("text_config.n_shared_experts", "must not be negative");
  if (t.num_key_value_heads != 1)
    return bad("text_config.num_key_value_heads", fmt::format("{}; V4.1 has one shared latent (K = V), 1", t.num_key_value_heads));
  if (t.qk_rope_head_dim % 2 != 0) return bad("text_config.qk_rope_head_dim", "must be even (RoPE rotates pairs)");
  if (t.qk_rope_head_dim >= t.head_dim) return bad("text_config.qk_rope_head_dim", "must be smaller than head_dim");
  if (t.qk_rope_head_dim >= t.index_head_dim) return bad("text_config.qk_rope_head_dim", "must be smaller than index_head_dim");
  // Window KV is FP8 per 32 dims, compressed KV FP4 per 16, index keys FP4 per 32 (§2.13 items 5-6).
  if (t.head_dim % 32 != 0) return bad("text_config.head_dim", "must be a multiple of 32 (FP8 KV blocks of 32)");
  if (t.index_head_dim % 32 != 0) return bad("text_config.index_head_dim", "must be a multiple of 32 (FP4 key blocks of 32)");
  if (t.num_attention_heads % t.o_groups != 0) return bad("text_config.o_groups", "must divide num_attention_heads");
  if (t.num_experts_per_tok > t.n_routed_experts)
    return bad("text_config.num_experts_per_tok", "must not exceed n_routed_experts");
  if (t.rms_norm_eps <= 0) return bad("text_config.rms_norm_eps", "must be positive");
  if (t.gate_temp && *t.gate_temp <= 0) return bad("text_config.gate_temp", "must be positive");
  if (t.rope_scaling.rope_type != "yarn")
    return bad("text_config.rope_scaling.rope_type", fmt::format("'{}', expected 'yarn'", t.rope_scaling.rope_type));
  if (t.rope_scaling.factor < 1) return bad("text_config.rope_scaling.factor", "must be at least 1");
  if (t.hidden_act != "silu") return bad("text_config.hidden_act", fmt::format("'{}', expected 'silu'", t.hidden_act));
  if (t.scoring_func != "sqrtsoftplus")
    return bad("text_config.scoring_func", fmt::format("'{}', expected 'sqrtsoftplus'", t.scoring_func));
  if (quantised && (t.hidden_size % 32 != 0 || t.moe_intermediate_size % 32 != 0))
    return bad("text_config.hidden_size", "hidden_size and moe_intermediate_size must be multiples of 32 for FP4 experts");

  // Layer schedule: trunk layers, then DSpark stages (window-only).
  const int64_t n_layers = t.num_hidden_layers;
  if (t.num_nextn_predict_layers < 0) return bad("text_config.num_nextn_predict_layers", "must not be negative");
  if (static_cast<int64_t>(t.compress_ratios.size()) != n_layers + t.num_nextn_predict_layers)
    return bad("text_config.compress_ratios",
               fmt::format("{} entries, expected num_hidden_layers + num_nextn_predict_layers = {}",
                           t.compress_ratios.size(), n_layers + t.num_nextn_predict_layers));
  for (size_t i = 0; i < t.compress_ratios.size(); ++i) {
    int64_t ratio = t.compress_ratios[i];
    if (ratio < 0) return bad("text_config.compress_ratios", fmt::format("entry {} is negative", i));
    if (static_cast<int64_t>(i) >= n_layers && ratio != 0)
      return bad("text_config.compress_ratios", fmt::format("entry {} (a DSpark stage) must be 0", i));
  }
  HIPPO_RETURN_IF_ERROR(check_layer_list("text_config.kv_source_layer_ids", t.kv_source_layer_ids, n_layers));
  HIPPO_RETURN_IF_ERROR(check_layer_list("text_config.index_source_layer_ids", t.index_source_layer_ids, n_layers));
  // Every compressed layer reads the KV of the nearest source at or below it, at the same ratio.
  int64_t source = -1;
  for (int64_t layer = 0; layer < n_layers; ++layer) {
    int64_t ratio = t.compress_ratios[static_cast<size_t>(layer)];
    if (contains(t.kv_source_layer_ids, layer)) {
      if (ratio == 0) return bad("text_config.kv_source_layer_ids", fmt::format("layer {} has compress ratio 0", layer));
      source = layer;
    } else if (ratio != 0) {
      if (source < 0)
        return bad("text_config.kv_source_layer_ids",
                   fmt::format("layer {} compresses (ratio {}) but no KV source is at or below it", layer, ratio));
      if (t.compress_ratios[static_cast<size_t>(source)] != ratio)
        return bad("text_config.compress_ratios",
                   fmt::format("layer {} has ratio {} but reads layer {}'s KV, ratio {}", layer, ratio, source,
                               t.compress_ratios[static_cast<size_t>(source)]));
    }
  }
  for (int64_t layer : t.index_source_layer_ids)
    if (t.compress_ratios[static_cast<size_t>(layer)] == 0)
      return bad("text_config.index_source_layer_ids", fmt::format("layer {} has compress ratio 0", layer));
  for (int64_t layer : t.kv_source_layer_ids)
    if (!contains(t.index_source_layer_ids, layer))
      return bad("text_config.index_source_layer_ids",
                 fmt::format("KV source layer {} must also be an index source (it writes the index keys)", layer));
  if (!t.kv_source_layer_ids.empty()) {
    if (!contains(t.kv_source_layer_ids, t.candidate_source_layer_id) ||
        t.candidate_source_layer_id != t.kv_source_layer_ids.back())
      return bad("text_config.candidate_source_layer_id",
                 fmt::format("{} must be the last KV source ({})", t.candidate_source_layer_id, t.kv_source_layer_ids.back()));
  }

  // Engram.
  HIPPO_RETURN_IF_ERROR(check_layer_list("text_config.engram_layer_ids", t.engram_layer_ids, n_layers));
  if (t.engram_num_embeddings.size() != t.engram_layer_ids.size())
    return bad("text_config.engram_num_embeddings", "needs one entry per engram_layer_ids entry");
  if (!t.engram_layer_ids.empty()) {
    if (t.engram_max_ngram_size < 2) return bad("text_config.engram_max_ngram_size", "must be at least 2");
    HIPPO_RETURN_IF_ERROR(check_positive("text_config.engram_n_heads", t.engram_n_heads));
    HIPPO_RETURN_IF_ERROR(check_positive("text_config.engram_head_dim", t.engram_head_dim));
    HIPPO_RETURN_IF_ERROR(check_positive("text_config.engram_vocab_size", t.engram_vocab_size));
    if (quantised && t.engram_head_dim % 32 != 0)
      return bad("text_config.engram_head_dim", "must be a multiple of 32 (FP8 rows with a scale per 32)");
    auto primes = engram_table_primes(t.engram_vocab_size, static_cast<int64_t>(t.engram_layer_ids.size()),
                                      t.engram_max_ngram_size, t.engram_n_heads);
    for (size_t i = 0; i < primes.size(); ++i) {
      int64_t rows = 0;
      for (int64_t p : primes[i]) rows += p;
      if (rows != t.engram_num_embeddings[i])
        return bad(fmt::format("text_config.engram_num_embeddings[{}]", i),
                   fmt::format("{} rows, but the prime-sized tables for engram_vocab_size {} sum to {}",
                               t.engram_num_embeddings[i], t.engram_vocab_size, rows));
    }
  }

  // DSpark.
  if (t.num_nextn_predict_layers > 0) {
    if (t.dspark_target_layer_ids.empty()) return bad("text_config.dspark_target_layer_ids", "must not be empty");
    HIPPO_RETURN_IF_ERROR(check_layer_list("text_config.dspark_target_layer_ids", t.dspark_target_layer_ids, n_layers));
    HIPPO_RETURN_IF_ERROR(check_positive("text_config.dspark_block_size", t.dspark_block_size));
    HIPPO_RETURN_IF_ERROR(check_positive("text_config.dspark_markov_rank", t.dspark_markov_rank));
    HIPPO_RETURN_IF_ERROR(check_positive("text_config.dspark_n_routed_experts", t.dspark_n_routed_experts));
    HIPPO_RETURN_IF_ERROR(check_positive("text_config.dspark_num_experts_per_tok", t.dspark_num_experts_per_tok));
    if (t.dspark_num_experts_per_tok > t.dspark_n_routed_experts)
      return bad("text_config.dspark_num_experts_per_tok", "must not exceed dspark_n_routed_experts");
    if (t.dspark_noise_token_id < 0 || t.dspark_noise_token_id >= t.vocab_size)
      return bad("text_config.dspark_noise_token_id", "must be a token id below vocab_size");
  }
  for (auto [field, id] : std::initializer_list<std::pair<std::string_view, int64_t>>{
           {"text_config.engram_pad_token_id", t.engram_pad_token_id}})
    if (id < 0 || id >= t.vocab_size) return bad(field, "must be a token id below vocab_size");
  return {};
}

Status validate_vision(const VisionConfig& v) {
  if (v.model_type != kVisionModelType)
    return bad("vision_config.model_type", fmt::format("'{}', expected '{}'", v.model_type, kVisionModelType));
  for (const auto& [field, value] : std::initializer_list<std::pair<std::string_view, int64_t>>{
           {"vision_config.num_hidden_layers", v.num_hidden_layers},
           {"vision_config.hidden_size", v.hidden_size},
           {"vision_config.num_attention_heads", v.num_attention_heads},
           {"vision_config.intermediate_size", v.intermediate_size},
           {"vision_config.patch_size", v.patch_size},
           {"vision_config.downsample_ratio", v.downsample_ratio},
       })
    HIPPO_RETURN_IF_ERROR(check_positive(field, value));
  if (v.hidden_size % v.num_attention_heads != 0)
    return bad("vision_config.num_attention_heads", "must divide hidden_size");
  return {};
}

}  // namespace

Status validate_model_config(const ModelConfig& config) {
  if (config.model_type != kModelType)
    return bad("model_type", fmt::format("'{}' is not supported; hippo runs '{}'", config.model_type, kModelType));
  if (const auto& q = config.quantization_config) {
    if (q->quant_method != "fp8")
      return bad("quantization_config.quant_method", fmt::format("'{}', expected 'fp8'", q->quant_method));
    if (q->scale_fmt != "ue8m0")
      return bad("quantization_config.scale_fmt", fmt::format("'{}', expected 'ue8m0'", q->scale_fmt));
    if (q->expert_dtype != "fp4")
      return bad("quantization_config.expert_dtype", fmt::format("'{}', expected 'fp4'", q->expert_dtype));
    if (q->weight_block_size.size() != 2 || q->weight_block_size[0] <= 0 || q->weight_block_size[1] <= 0)
      return bad("quantization_config.weight_block_size", "expected two positive integers [rows, cols]");
  }
  HIPPO_RETURN_IF_ERROR(validate_text(config.text_config, config.quantised()));
  HIPPO_RETURN_IF_ERROR(validate_vision(config.vision_config));
  // A tied head is stored once, as embed.weight (TensorTable::build); both levels must say so.
  if (config.tie_word_embeddings != config.text_config.tie_word_embeddings)
    return bad("tie_word_embeddings", "must equal text_config.tie_word_embeddings");
  const int64_t vocab = config.text_config.vocab_size;
  for (auto [field, id] : std::initializer_list<std::pair<std::string_view, int64_t>>{
           {"bos_token_id", config.bos_token_id},
           {"eos_token_id", config.eos_token_id},
           {"pad_token_id", config.pad_token_id},
           {"image_token_id", config.image_token_id}})
    if (id < 0 || id >= vocab) return bad(field, fmt::format("{} is not a token id below vocab_size {}", id, vocab));
  return {};
}

Result<ModelConfig> parse_model_config(std::string_view json_text, std::string_view origin) {
  boost::system::error_code ec;
  json::value root = json::parse(json_text, ec);
  if (ec) return make_error(ErrorCode::kCorrupt, "{}: not valid JSON ({})", origin, ec.message());
  if (!root.is_object()) return make_error(ErrorCode::kCorrupt, "{}: expected a JSON object", origin);
  // The model type first, so that another model's config gets the message that matters.
  const json::value* model_type = root.get_object().if_contains("model_type");
  if (model_type == nullptr || !model_type->is_string())
    return make_error(ErrorCode::kCorrupt, "{}: model_type: missing", origin);
  if (model_type->get_string() != kModelType)
    return make_error(ErrorCode::kCorrupt, "{}: model_type '{}' is not supported; hippo runs '{}' checkpoints", origin,
                      std::string_view(model_type->get_string()), kModelType);
  ModelConfig config;
  FieldReader reader(root.get_object(), "");
  visit_model(config, reader);
  if (!reader.status().ok()) return reader.status().with_context(origin);
  HIPPO_RETURN_IF_ERROR(validate_model_config(config).with_context(origin));
  return config;
}

Result<ModelConfig> load_model_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::kNotFound, "{}: cannot be opened", path);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return make_error(ErrorCode::kIoError, "{}: read failed", path);
  return parse_model_config(text.str(), path);
}

boost::json::object model_config_to_json(const ModelConfig& config) {
  json::object out;
  FieldWriter writer(out);
  visit_model(config, writer);
  return out;
}

namespace {

void pretty(const json::value& v, int indent, std::string& out) {
  auto scalar_array = [](const json::array& a) {
    return std::all_of(a.begin(), a.end(), [](const json::value& e) { return !e.is_object() && !e.is_array(); });
  };
  if (v.is_object() && !v.get_object().empty()) {
    out += "{\n";
    const auto& object = v.get_object();
    size_t i = 0;
    for (const auto& entry : object) {
      out.append(static_cast<size_t>(indent + 2), ' ');
      out += json::serialize(json::value(entry.key()));
      out += ": ";
      pretty(entry.value(), indent + 2, out);
      out += ++i < object.size() ? ",\n" : "\n";
    }
    out.append(static_cast<size_t>(indent), ' ');
    out += "}";
  } else if (v.is_array() && !scalar_array(v.get_array())) {
    out += "[\n";
    const auto& array = v.get_array();
    for (size_t i = 0; i < array.size(); ++i) {
      out.append(static_cast<size_t>(indent + 2), ' ');
      pretty(array[i], indent + 2, out);
      out += i + 1 < array.size() ? ",\n" : "\n";
    }
    out.append(static_cast<size_t>(indent), ' ');
    out += "]";
  } else if (v.is_array()) {
    out += "[";
    const auto& array = v.get_array();
    for (size_t i = 0; i < array.size(); ++i) {
      if (i > 0) out += ", ";
      pretty(array[i], indent, out);
    }
    out += "]";
  } else if (v.is_double()) {
    // Shortest round-trip form (1.5, 1e-20; Boost.JSON would write 1.5E0), with a decimal point on integral
    // values (10.0, not 10) so that a float field reads back as a float in Python.
    std::string number = fmt::format("{}", v.get_double());
    if (number.find_first_of(".eEn") == std::string::npos) number += ".0";
    out += number;
  } else {
    out += json::serialize(v);
  }
}

}  // namespace

std::string pretty_json(const boost::json::value& value) {
  std::string out;
  pretty(value, 0, out);
  return out;
}

std::string model_config_to_text(const ModelConfig& config) {
  return pretty_json(model_config_to_json(config)) + "\n";
}

}  // namespace hippo::engine
