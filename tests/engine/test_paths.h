// Helpers shared by the engine tests: the committed test data, temporary directories that clean up
// after themselves, and checkpoints written by `model init` with the real tokenizer.
#pragma once

#include "engine/config/presets.h"
#include "engine/weights/init_checkpoint.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

namespace hippo::engine::testing {

inline std::string test_data(const std::string& name) { return std::string(HIPPO_TEST_DATA_DIR) + "/" + name; }

class TempDir {
 public:
  TempDir() {
    std::random_device device;  // only names the directory; nothing under test depends on it
    path_ = std::filesystem::temp_directory_path() / ("hippo-engine-test-" + std::to_string(device()) + std::to_string(device()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// The real DeepSeek V4 tokenizer that scripts/setup puts in .cache/deepseek-v4-tokenizer.
inline std::string tokenizer_dir() { return HIPPO_TOKENIZER_DIR; }

// Writes a preset checkpoint into dir / name, with the real tokenizer.
inline std::string init_preset(const TempDir& dir, const std::string& preset, bool quantised, uint64_t seed,
                               const std::string& name = "model") {
  const std::string tokenizer = tokenizer_dir();
  auto config = preset_config(preset, quantised);
  REQUIRE(config.ok());
  InitOptions options;
  options.seed = seed;
  options.out_dir = dir / name;
  options.tokenizer_dir = tokenizer;
  auto result = init_checkpoint(*config, options);
  INFO(result.status().to_string());
  REQUIRE(result.ok());
  return options.out_dir;
}

}  // namespace hippo::engine::testing
