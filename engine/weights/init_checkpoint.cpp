// Shard planning (table order, closing a shard at max_shard_bytes), generation shard by shard (peak
// memory one shard), the index, config.json and the tokenizer copy. Inputs are checked before the
// first file is written.
#include "engine/weights/init_checkpoint.h"

#include "engine/tokenizer/tokenizer.h"

#include "engine/weights/checkpoint.h"
#include "engine/weights/random_init.h"
#include "engine/weights/safetensors_writer.h"
#include "engine/weights/tensor_table.h"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <map>

namespace hippo::engine {
namespace fs = std::filesystem;

std::string shard_file_name(int index, int n_shards) {
  return fmt::format("model-{:05d}-of-{:05d}.safetensors", index, n_shards);
}

namespace {

Status write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return make_error(ErrorCode::kIoError, "{}: write failed", path.string());
  return {};
}

Status prepare_out_dir(const fs::path& out) {
  std::error_code ec;
  if (fs::exists(out, ec)) {
    if (!fs::is_directory(out, ec)) return make_error(ErrorCode::kAlreadyExists, "{}: exists and is not a directory", out.string());
    if (!fs::is_empty(out, ec))
      return make_error(ErrorCode::kAlreadyExists, "{}: not empty; choose a new directory or remove this one", out.string());
    return {};
  }
  fs::create_directories(out, ec);
  if (ec) return make_error(ErrorCode::kIoError, "{}: cannot be created ({})", out.string(), ec.message());
  return {};
}

}  // namespace

Result<InitResult> init_checkpoint(const ModelConfig& config, const InitOptions& options) {
  const fs::path out(options.out_dir);
  const fs::path tokenizer(options.tokenizer_dir);
  std::error_code ec;
  if (!fs::is_regular_file(tokenizer / kTokenizerFiles[0], ec))
    return make_error(ErrorCode::kNotFound,
                      "{} not found in {}: the checkpoint needs the DeepSeek V4 tokenizer (scripts/setup puts it in "
                      ".cache/deepseek-v4-tokenizer/; or pass --tokenizer DIR)",
                      kTokenizerFiles[0], tokenizer.string());
  // The tokenizer must be one this model can run: it parses, and its ids fit the embedding.
  HIPPO_ASSIGN_OR_RETURN(const auto vocabulary, tokenizer::Tokenizer::load(tokenizer / kTokenizerFiles[0]));
  if (static_cast<int64_t>(vocabulary.n_vocab()) > config.text_config.vocab_size)
    return make_error(ErrorCode::kInvalidArgument, "{}: {} token ids do not fit the model's vocab_size {}",
                      (tokenizer / kTokenizerFiles[0]).string(), vocabulary.n_vocab(), config.text_config.vocab_size);
  HIPPO_RETURN_IF_ERROR(validate_model_config(config));
  HIPPO_RETURN_IF_ERROR(prepare_out_dir(out));

  const TensorTable table = TensorTable::build(config);
  // Plan: consecutive table tensors fill a shard until it reaches max_shard_bytes.
  std::vector<std::vector<const TensorSpec*>> shards(1);
  uint64_t shard_bytes = 0, total_bytes = 0;
  for (const TensorSpec& spec : table.tensors()) {
    const auto bytes = static_cast<uint64_t>(spec.n_bytes());
    if (shard_bytes > 0 && shard_bytes + bytes > options.max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(&spec);
    shard_bytes += bytes;
    total_bytes += bytes;
  }

  const int n_shards = static_cast<int>(shards.size());
  std::map<std::string, std::string> weight_map;  // sorted by tensor name, as transformers writes it
  InitProgress progress{0, n_shards, 0, total_bytes};
  for (int s = 0; s < n_shards; ++s) {
    const std::string name = shard_file_name(s + 1, n_shards);
    std::vector<ShardTensor> tensors;
    for (const TensorSpec* spec : shards[static_cast<size_t>(s)]) {
      tensors.push_back({spec->name, spec->dtype, spec->shape, generate_tensor(*spec, options.seed)});
      weight_map.emplace(spec->name, name);
      progress.bytes += static_cast<uint64_t>(spec->n_bytes());
    }
    HIPPO_RETURN_IF_ERROR(write_safetensors((out / name).string(), std::move(tensors)));
    progress.shard = s + 1;
    if (options.progress) options.progress(progress);
  }

  boost::json::object map;
  for (const auto& [tensor, shard] : weight_map) map[tensor] = shard;
  boost::json::object index{{"metadata", boost::json::object{{"total_size", total_bytes}}}, {"weight_map", std::move(map)}};
  HIPPO_RETURN_IF_ERROR(write_text(out / kIndexFile, pretty_json(index) + "\n"));
  HIPPO_RETURN_IF_ERROR(write_text(out / kConfigFile, model_config_to_text(config)));

  for (const std::string& file : kTokenizerFiles) {
    if (!fs::exists(tokenizer / file, ec)) continue;
    fs::copy_file(tokenizer / file, out / file, fs::copy_options::overwrite_existing, ec);
    if (ec) return make_error(ErrorCode::kIoError, "copying {} into {} failed ({})", (tokenizer / file).string(), out.string(), ec.message());
  }
  return InitResult{n_shards, total_bytes, table.tensors().size()};
}

}  // namespace hippo::engine
