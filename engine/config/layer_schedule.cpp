// Derives LayerRole for every trunk layer from compress_ratios and the source id lists.
#include "engine/config/layer_schedule.h"

#include <fmt/format.h>

#include <algorithm>

namespace hippo::engine {

std::vector<LayerRole> layer_schedule(const TextConfig& text) {
  auto contains = [](const std::vector<int64_t>& ids, int64_t id) {
    return std::find(ids.begin(), ids.end(), id) != ids.end();
  };
  std::vector<LayerRole> roles;
  int64_t kv_source = -1;
  int64_t index_source = -1;
  for (int64_t layer = 0; layer < text.num_hidden_layers; ++layer) {
    LayerRole role;
    role.layer = layer;
    role.compress_ratio = text.compress_ratios[static_cast<size_t>(layer)];
    role.engram = contains(text.engram_layer_ids, layer);
    if (role.compress_ratio > 0) {
      if (contains(text.kv_source_layer_ids, layer)) kv_source = layer;
      if (contains(text.index_source_layer_ids, layer)) index_source = layer;
      role.kv_source = kv_source;
      role.index_source = index_source;
      role.writes_kv = kv_source == layer;
      role.owns_index_query = index_source == layer;
      role.candidate_source = layer == text.candidate_source_layer_id;
      role.reindex = role.owns_index_query && !role.writes_kv && layer > text.candidate_source_layer_id;
    }
    roles.push_back(role);
  }
  return roles;
}

std::string describe_role(const LayerRole& role) {
  std::string text;
  if (role.compress_ratio == 0) {
    text = "window";
  } else if (role.writes_kv) {
    text = fmt::format("{} r{} + index keys", role.candidate_source ? "candidate source" : "kv writer",
                       role.compress_ratio);
  } else if (role.reindex) {
    text = fmt::format("reindex (kv {})", role.kv_source);
  } else if (role.owns_index_query) {
    text = fmt::format("index source (kv {})", role.kv_source);
  } else {
    text = fmt::format("reuse kv {}, top-k {}", role.kv_source, role.index_source);
  }
  if (role.engram) text += " + engram";
  return text;
}

LayerRole dspark_stage_role(const TextConfig& text, int64_t stage) {
  LayerRole role;
  role.layer = text.num_hidden_layers + stage;
  return role;
}

}  // namespace hippo::engine
