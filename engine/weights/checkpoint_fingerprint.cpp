#include "engine/weights/checkpoint_fingerprint.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>

namespace hippo::engine {

Result<std::string> checkpoint_fingerprint(const Checkpoint& checkpoint) {
  const std::filesystem::path config = std::filesystem::path(checkpoint.dir()) / kConfigFile;
  std::ifstream in(config, std::ios::binary);
  if (!in) return Status(ErrorCode::kNotFound, fmt::format("{}: cannot be read", config.string()));
  const std::string config_bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());

  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(), &XXH3_freeState);
  XXH3_64bits_reset(state.get());
  XXH3_64bits_update(state.get(), config_bytes.data(), config_bytes.size());
  constexpr size_t kSample = 64;
  for (const TensorSpec& spec : checkpoint.table().tensors()) {
    const TensorView view = checkpoint.tensor(spec.name);
    XXH3_64bits_update(state.get(), spec.name.data(), spec.name.size() + 1);
    const auto dtype = static_cast<int>(spec.dtype);
    XXH3_64bits_update(state.get(), &dtype, sizeof dtype);
    XXH3_64bits_update(state.get(), spec.shape.data(), spec.shape.size() * sizeof(int64_t));
    const size_t head = std::min(kSample, view.bytes.size());
    XXH3_64bits_update(state.get(), view.bytes.data(), head);
    XXH3_64bits_update(state.get(), view.bytes.data() + (view.bytes.size() - head), head);
  }
  return fmt::format("{:016x}", XXH3_64bits_digest(state.get()));
}

}  // namespace hippo::engine
