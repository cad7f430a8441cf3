// The real DeepSeek V4 tokenizer that scripts/setup fetched, loaded once per test binary.
#pragma once

#include "engine/tokenizer/tokenizer.h"
#include "tests/engine/test_paths.h"

#include <catch2/catch.hpp>

#include <filesystem>

namespace hippo::agents::testing {

inline const tokenizer::Tokenizer& real_tokenizer() {
  static tokenizer::Tokenizer t = [] {
    auto loaded = tokenizer::Tokenizer::load(std::filesystem::path(engine::testing::tokenizer_dir()) / "tokenizer.json");
    REQUIRE(loaded.ok());
    return std::move(loaded.value());
  }();
  return t;
}

}  // namespace hippo::agents::testing
