// The per-layer roles that a V4.1 config implies (design/deepseek-v41-architecture.md §2.13 item 6):
// which layers are window-only, which own a compressor and write compressed KV ("Full"), which read a
// source's KV ("Reuse"), which own indexer queries, which re-score inside the candidate mask
// ("Reindex"), and where Engram sits. The tensor table, `model inspect` and the forward pass all read
// the schedule from here instead of re-deriving it from the raw id lists.
#pragma once

#include "engine/config/model_config.h"

#include <cstdint>
#include <string>
#include <vector>

namespace hippo::engine {

struct LayerRole {
  int64_t layer = 0;
  int64_t compress_ratio = 0;     // 0 = window only
  int64_t kv_source = -1;         // layer whose compressed KV this layer attends; -1 = none
  int64_t index_source = -1;      // layer whose top-k selection this layer uses; -1 = none
  bool writes_kv = false;         // owns the compressor and the index keys (kv_source == layer)
  bool owns_index_query = false;  // owns indexer.wq_b and weights_proj (index_source == layer)
  bool candidate_source = false;  // two-level top-k: builds the candidate mask
  bool reindex = false;           // an index source above the candidate source: scores inside its mask
  bool engram = false;            // Engram applied at the start of this layer
};

// One entry per trunk layer (DSpark stages are window-only blocks and not listed). The config must
// have passed validate_model_config.
std::vector<LayerRole> layer_schedule(const TextConfig& text);

// DSpark stage `stage` as the forward pass runs it: a window-only block numbered after the trunk.
LayerRole dspark_stage_role(const TextConfig& text, int64_t stage);

// "window", "kv writer r2 + index", "reuse kv 2, top-k 2", "candidate source r1 + index", "reindex
// (kv 20)", with " + engram" where it applies.
std::string describe_role(const LayerRole& role);

}  // namespace hippo::engine
