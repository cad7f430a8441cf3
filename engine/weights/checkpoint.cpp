// Opening a checkpoint directory: config, index, shards, then checks (2) and (3) of checkpoint.h.
#include "engine/weights/checkpoint.h"

#include "base/check.h"

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace hippo::engine {
namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

Result<std::string> read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::kNotFound, "{}: cannot be opened", path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// weight_map of model.safetensors.index.json: tensor name -> shard file name.
Result<std::map<std::string, std::string>> read_index(const fs::path& path) {
  HIPPO_ASSIGN_OR_RETURN(std::string text, read_text(path));
  boost::system::error_code ec;
  json::value root = json::parse(text, ec);
  const std::string name = path.filename().string();
  if (ec) return make_error(ErrorCode::kCorrupt, "{}: not valid JSON ({})", name, ec.message());
  const json::value* map = root.is_object() ? root.get_object().if_contains("weight_map") : nullptr;
  if (map == nullptr || !map->is_object())
    return make_error(ErrorCode::kCorrupt, "{}: weight_map missing or not an object", name);
  std::map<std::string, std::string> weight_map;
  for (const auto& kv : map->get_object()) {
    if (!kv.value().is_string())
      return make_error(ErrorCode::kCorrupt, "{}: weight_map entry {} is not a file name", name, std::string_view(kv.key()));
    std::string shard(kv.value().get_string());
    if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..")
      return make_error(ErrorCode::kCorrupt, "{}: tensor {} maps to '{}', which is not a file name in the checkpoint",
                        name, std::string_view(kv.key()), shard);
    weight_map.emplace(std::string(kv.key()), std::move(shard));
  }
  return weight_map;
}

}  // namespace

Result<Checkpoint> load_checkpoint(const std::string& dir) {
  const fs::path root(dir);
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    return make_error(ErrorCode::kNotFound, "{}: not a checkpoint directory", dir);
  Checkpoint checkpoint;
  checkpoint.dir_ = dir;
  HIPPO_ASSIGN_OR_RETURN(checkpoint.config_, load_model_config((root / kConfigFile).string()));
  checkpoint.table_ = std::make_unique<TensorTable>(TensorTable::build(checkpoint.config_));

  // Which tensors the directory claims, and where.
  std::map<std::string, std::string> weight_map;
  const bool indexed = fs::exists(root / kIndexFile, ec);
  if (indexed) {
    HIPPO_ASSIGN_OR_RETURN(weight_map, read_index(root / kIndexFile));
  } else if (!fs::exists(root / kSingleShardFile, ec)) {
    return make_error(ErrorCode::kNotFound, "{}: neither {} nor {} is there", dir, kIndexFile, kSingleShardFile);
  }

  // Open every shard once, in name order. (1)
  std::map<std::string, size_t> shard_index;
  if (indexed) {
    for (const auto& [tensor, shard] : weight_map) shard_index.emplace(shard, 0);
  } else {
    shard_index.emplace(std::string(kSingleShardFile), 0);
  }
  for (auto& [name, index] : shard_index) {
    HIPPO_ASSIGN_OR_RETURN(SafetensorsFile shard, SafetensorsFile::open((root / name).string()));
    index = checkpoint.shards_.size();
    checkpoint.shards_.push_back(std::move(shard));
    checkpoint.shard_names_.push_back(name);
  }

  // (2) The index and the shards agree.
  for (size_t s = 0; s < checkpoint.shards_.size(); ++s) {
    const std::string& shard_name = checkpoint.shard_names_[s];
    const auto& entries = checkpoint.shards_[s].entries();
    for (size_t e = 0; e < entries.size(); ++e) {
      const std::string& tensor = entries[e].name;
      if (indexed) {
        auto it = weight_map.find(tensor);
        if (it == weight_map.end() || it->second != shard_name)
          return make_error(ErrorCode::kCorrupt, "{}: tensor {} is in the shard but {} {}", shard_name, tensor, kIndexFile,
                            it == weight_map.end() ? "does not list it" : "places it in " + it->second);
      }
      if (!checkpoint.locations_.emplace(tensor, Checkpoint::Location{s, e}).second)
        return make_error(ErrorCode::kCorrupt, "{}: tensor {} appears twice", shard_name, tensor);
    }
  }
  for (const auto& [tensor, shard] : weight_map)
    if (checkpoint.locations_.find(tensor) == checkpoint.locations_.end())
      return make_error(ErrorCode::kCorrupt, "{}: {} places tensor {} in {}, which does not contain it", dir, kIndexFile,
                        tensor, shard);

  // (3) Exactly the table's tensors, with its dtypes and shapes.
  const char* hint = "the checkpoint does not match its config.json";
  for (const TensorSpec& spec : checkpoint.table_->tensors()) {
    auto it = checkpoint.locations_.find(spec.name);
    if (it == checkpoint.locations_.end())
      return make_error(ErrorCode::kCorrupt, "{}: tensor {} ({} {}) is missing; {}", dir, spec.name,
                        dtype_name(spec.dtype), shape_string(spec.shape), hint);
    const SafetensorsEntry& entry = checkpoint.shards_[it->second.shard].entries()[it->second.entry];
    const std::string& shard_name = checkpoint.shard_names_[it->second.shard];
    if (entry.dtype != spec.dtype)
      return make_error(ErrorCode::kCorrupt, "{}: tensor {}: dtype {}, expected {}; {}", shard_name, spec.name,
                        dtype_name(entry.dtype), dtype_name(spec.dtype), hint);
    if (entry.shape != spec.shape)
      return make_error(ErrorCode::kCorrupt, "{}: tensor {}: shape {}, expected {}; {}", shard_name, spec.name,
                        shape_string(entry.shape), shape_string(spec.shape), hint);
  }
  if (checkpoint.locations_.size() != checkpoint.table_->tensors().size()) {
    for (const auto& [tensor, location] : checkpoint.locations_)
      if (checkpoint.table_->find(tensor) == nullptr)
        return make_error(ErrorCode::kCorrupt, "{}: tensor {} is not part of the layout config.json describes; {}",
                          checkpoint.shard_names_[location.shard], tensor, hint);
  }
  return checkpoint;
}

TensorView Checkpoint::tensor(std::string_view name) const {
  auto it = locations_.find(std::string(name));
  const TensorSpec* spec = table_->find(name);
  HIPPO_CHECK(it != locations_.end() && spec != nullptr, "Checkpoint::tensor: name outside the tensor table");
  const SafetensorsFile& shard = shards_[it->second.shard];
  return {spec, shard.data(shard.entries()[it->second.entry]), &shard_names_[it->second.shard]};
}

uint64_t Checkpoint::mapped_bytes() const {
  uint64_t total = 0;
  for (const SafetensorsFile& shard : shards_) total += shard.file().size();
  return total;
}

void Checkpoint::drop_pages(const void* begin, size_t bytes) const {
  const auto* first = static_cast<const std::byte*>(begin);
  for (const SafetensorsFile& shard : shards_) {
    const std::span<const std::byte> mapped = shard.file().bytes();
    if (first >= mapped.data() && first + bytes <= mapped.data() + mapped.size()) shard.file().drop_pages(first, bytes);
  }
}

uint64_t Checkpoint::resident_bytes() const {
  uint64_t total = 0;
  for (const SafetensorsFile& shard : shards_) total += shard.file().resident_bytes();
  return total;
}

}  // namespace hippo::engine
