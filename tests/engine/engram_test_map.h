// The Engram compressed-id map of the real DeepSeek V4 tokenizer, built once per test binary.
#pragma once

#include "engine/engram/engram_token_map.h"
#include "tests/engine/test_paths.h"

#include <catch2/catch.hpp>

#include <filesystem>

namespace hippo::engine::testing {

inline const EngramTokenMap& real_engram_map() {
  static const EngramTokenMap map = [] {
    auto built = EngramTokenMap::build(std::filesystem::path(tokenizer_dir()) / "tokenizer.json");
    INFO(built.status().to_string());
    REQUIRE(built.ok());
    return std::move(built).value();
  }();
  return map;
}

}  // namespace hippo::engine::testing
