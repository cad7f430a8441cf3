// What `hippo model inspect` reports about a config: parameter counts (total, backbone, Engram,
// DSpark, vision, active per token while reading and while generating) and the per-session state
// sizes (compressed KV bytes per token, fixed window bytes).
//
// Definitions (docs/model-checkpoint.md has the arithmetic for the release):
//   parameters   logical values: a linear [out, in] counts out x in however it is stored; scales
//                count nothing.
//   backbone     the text model without its Engram tables: embed, head, norms, every trunk layer
//                (Engram fusion projections included). DSpark stages and the vision tower apart.
//   engram       the Engram tables (layers.L.engram.embed).
//   active       parameters read per token: dense tensors, top-k of the routed experts, one embedding
//                row and the gathered Engram rows ((max_ngram - 1) x n_heads rows per Engram layer).
//     decode     every trunk layer, the final norm and the head.
//     prefill    the encoder/decoder plan (product.md §6): the layers below candidate_source_layer_id
//                on every prompt token, plus that layer's attn_norm, compressor and index keys; the
//                upper layers run on a bounded tail only and the head on the last token, so neither is
//                counted per token.
//   active bytes the stored bytes (scales included) of what is active per generated token: the decode
//                roof of a machine is active bytes / read bandwidth per token.
//   KV bytes     per token, only the KV writers store anything: (main + index entry) / ratio, with a
//                main entry of head_dim/2 (E2M1) + head_dim/16 (E4M3 scale per 16) bytes and an index
//                entry of index_head_dim/2 + index_head_dim/32 (UE8M0 per 32) bytes; 890 in the release.
//   window bytes sliding_window x (head_dim + head_dim/32) per layer and DSpark stage (FP8 + UE8M0 per 32).
#pragma once

#include "engine/config/model_config.h"
#include "engine/weights/tensor_table.h"

#include <cstdint>
#include <map>
#include <string>

namespace hippo::engine {

struct ParameterCounts {
  int64_t total = 0;
  int64_t backbone = 0;
  int64_t engram = 0;
  int64_t dspark = 0;
  int64_t vision = 0;
  int64_t active_decode = 0;
  int64_t active_prefill = 0;
  double active_decode_bytes = 0;
  std::map<std::string, int64_t> by_component;  // component_name -> parameters
};

ParameterCounts count_parameters(const ModelConfig& config, const TensorTable& table);

struct KvFootprint {
  double bytes_per_token = 0;           // compressed KV + index keys of the writer layers
  int64_t main_entry_bytes = 0;         // 288 for head_dim 512
  int64_t index_entry_bytes = 0;        // 68 for index_head_dim 128
  int64_t window_bytes_per_layer = 0;   // 128 x 528
  int64_t window_bytes = 0;             // all layers and DSpark stages
};

KvFootprint kv_footprint(const TextConfig& text);

}  // namespace hippo::engine
