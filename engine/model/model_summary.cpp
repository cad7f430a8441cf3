// Parameter accounting over the tensor table, and the KV arithmetic of §3.3.
#include "engine/model/model_summary.h"

#include "engine/config/layer_schedule.h"

#include <string_view>

namespace hippo::engine {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Read per prefill token at the candidate source layer: what its compressor and index keys need.
bool candidate_prefill_tensor(const TensorSpec& spec) {
  return spec.component == Component::kCompressor || spec.component == Component::kEngram ||
         spec.component == Component::kEngramTable || ends_with(spec.name, ".attn_norm.weight") ||
         spec.name.find(".attn.indexer.wk.") != std::string::npos ||
         spec.name.find(".attn.indexer.k_norm.") != std::string::npos;
}

}  // namespace

ParameterCounts count_parameters(const ModelConfig& config, const TensorTable& table) {
  const TextConfig& t = config.text_config;
  const int64_t candidate = t.candidate_source_layer_id;
  // Rows gathered per token per Engram layer, each engram_head_dim wide.
  const int64_t engram_row_params = (t.engram_max_ngram_size - 1) * t.engram_n_heads * t.engram_head_dim;
  ParameterCounts counts;
  for (const TensorSpec& spec : table.tensors()) {
    // The share of this tensor's bytes (its scales' too) that a generated token reads.
    double read = 0;
    switch (spec.component) {
      case Component::kDspark:
      case Component::kVision: break;
      case Component::kEmbedding: read = 1.0 / static_cast<double>(spec.shape[0]); break;
      case Component::kEngramTable:
        read = static_cast<double>((t.engram_max_ngram_size - 1) * t.engram_n_heads) / static_cast<double>(spec.shape[0]);
        break;
      case Component::kRoutedExperts: read = static_cast<double>(t.num_experts_per_tok) / static_cast<double>(t.n_routed_experts); break;
      default: read = 1; break;
    }
    // A head tied to the embedding reads all of it per generated token, as an own head would.
    const bool tied_head = spec.component == Component::kEmbedding && t.tie_word_embeddings;
    if (tied_head) read += 1;
    if (spec.layer < t.num_hidden_layers) counts.active_decode_bytes += read * static_cast<double>(spec.n_bytes());
    const int64_t n = spec.n_params;
    if (n == 0) continue;
    if (tied_head) counts.active_decode += n;
    counts.total += n;
    counts.by_component[std::string(component_name(spec.component))] += n;
    switch (spec.component) {
      case Component::kEngramTable: counts.engram += n; break;
      case Component::kDspark: counts.dspark += n; break;
      case Component::kVision: counts.vision += n; break;
      default: counts.backbone += n; break;
    }
    // Per-token share of this tensor.
    int64_t active = 0;
    switch (spec.component) {
      case Component::kDspark:
      case Component::kVision: break;
      case Component::kEmbedding: active = t.hidden_size; break;  // one row
      case Component::kEngramTable: active = engram_row_params; break;
      // top_k of n_routed same-sized experts per layer; exact for the sizes configs allow.
      case Component::kRoutedExperts: active = n * t.num_experts_per_tok / t.n_routed_experts; break;
      default: active = n; break;
    }
    if (active == 0) continue;
    counts.active_decode += active;
    const bool trunk = spec.layer >= 0 && spec.layer < t.num_hidden_layers;
    if ((trunk && spec.layer < candidate) || spec.component == Component::kEmbedding ||
        (trunk && spec.layer == candidate && candidate_prefill_tensor(spec)))
      counts.active_prefill += active;
  }
  return counts;
}

KvFootprint kv_footprint(const TextConfig& text) {
  KvFootprint kv;
  kv.main_entry_bytes = text.head_dim / 2 + text.head_dim / 16;              // E2M1 codes + E4M3 per 16
  kv.index_entry_bytes = text.index_head_dim / 2 + text.index_head_dim / 32;  // E2M1 codes + UE8M0 per 32
  for (const LayerRole& role : layer_schedule(text))
    if (role.writes_kv)
      kv.bytes_per_token += static_cast<double>(kv.main_entry_bytes + kv.index_entry_bytes) /
                            static_cast<double>(role.compress_ratio);
  kv.window_bytes_per_layer = text.sliding_window * (text.head_dim + text.head_dim / 32);  // FP8 + UE8M0 per 32
  kv.window_bytes = kv.window_bytes_per_layer * (text.num_hidden_layers + text.num_nextn_predict_layers);
  return kv;
}

}  // namespace hippo::engine
