// Writing a deterministic random checkpoint in the release layout (`hippo model init`): config.json,
// sharded safetensors with model.safetensors.index.json, and the tokenizer files. The tensors and
// their contents come from the TensorTable and random_init.h, so the bytes depend only on the config
// and the seed (docs/model-checkpoint.md).
#pragma once

#include "base/status.h"
#include "engine/config/model_config.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace hippo::engine {

// The files copied from the tokenizer directory: the first is required.
inline const std::vector<std::string> kTokenizerFiles = {"tokenizer.json", "tokenizer_config.json"};

// Shards close once they reach this size (a bigger tensor gets a shard of its own). Small enough that
// the test checkpoints are sharded like the release (48 shards) and every test reads through the index.
inline constexpr uint64_t kDefaultMaxShardBytes = uint64_t{8} << 20;  // 8 MiB

struct InitProgress {
  int shard = 0;  // shards written so far
  int n_shards = 0;
  uint64_t bytes = 0;  // tensor bytes written so far
  uint64_t total_bytes = 0;
};

struct InitOptions {
  uint64_t seed = 0;
  std::string out_dir;          // created; must not exist or be empty
  std::string tokenizer_dir;    // holds tokenizer.json
  uint64_t max_shard_bytes = kDefaultMaxShardBytes;
  std::function<void(const InitProgress&)> progress;  // after each shard; may be empty
};

struct InitResult {
  int n_shards = 0;
  uint64_t tensor_bytes = 0;
  size_t n_tensors = 0;
};

Result<InitResult> init_checkpoint(const ModelConfig& config, const InitOptions& options);

// "model-00003-of-00009.safetensors"
std::string shard_file_name(int index, int n_shards);

}  // namespace hippo::engine
