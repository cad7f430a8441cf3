// Checkpoint: a V4.1 checkpoint directory opened for reading (config.json, model.safetensors.index.json
// and its shards, or a single model.safetensors), every shard memory-mapped and validated against the
// TensorTable of the config before any tensor is handed out:
//   (1) every shard is well-formed (safetensors.h checks (1)-(4));
//   (2) the index and the shards agree: every tensor the index names is in its shard, every tensor of
//       a shard is in the index under that shard, shard names are plain file names;
//   (3) the tensors are exactly the table's: none missing, none extra, each with the table's dtype
//       and shape.
// Errors name the tensor and the shard and say what was expected.
#pragma once

#include "base/status.h"
#include "engine/config/model_config.h"
#include "engine/weights/safetensors.h"
#include "engine/weights/tensor_table.h"

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace hippo::engine {

inline constexpr std::string_view kConfigFile = "config.json";
inline constexpr std::string_view kIndexFile = "model.safetensors.index.json";
inline constexpr std::string_view kSingleShardFile = "model.safetensors";

struct TensorView {
  const TensorSpec* spec = nullptr;  // dtype, shape, layout (points into the checkpoint's table)
  std::span<const std::byte> bytes;  // in the shard's mapping
  const std::string* shard = nullptr;
};

class Checkpoint {
 public:
  const std::string& dir() const { return dir_; }
  const ModelConfig& config() const { return config_; }
  const TensorTable& table() const { return *table_; }
  size_t n_shards() const { return shards_.size(); }

  // A table tensor; asking for a name outside the table is a bug (checked).
  TensorView tensor(std::string_view name) const;

  uint64_t mapped_bytes() const;    // size of all shard mappings
  uint64_t resident_bytes() const;  // of those, the pages in memory now

  // MappedFile::drop_pages on the shard that maps [begin, begin + bytes), if one does.
  void drop_pages(const void* begin, size_t bytes) const;

 private:
  friend Result<Checkpoint> load_checkpoint(const std::string& dir);
  struct Location {
    size_t shard;
    size_t entry;
  };

  std::string dir_;
  ModelConfig config_;
  std::unique_ptr<TensorTable> table_;  // stable address for TensorView::spec across moves
  std::vector<SafetensorsFile> shards_;
  std::vector<std::string> shard_names_;
  std::unordered_map<std::string, Location> locations_;
};

Result<Checkpoint> load_checkpoint(const std::string& dir);

}  // namespace hippo::engine
