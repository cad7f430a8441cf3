// The quantised tiny checkpoint (seed 1), loaded once per test binary with two threads, and the
// synthetic token ids the draft tests feed it.
#pragma once

#include "engine/model/model.h"
#include "tests/engine/test_paths.h"

#include <catch2/catch.hpp>

#include <cstdint>
#include <memory>
#include <vector>

namespace hippo::engine::testing {

inline Model& tiny_model() {
  static TempDir dir;
  static std::unique_ptr<Model> model;
  if (!model) {
    ModelOptions options;
    options.n_threads = 2;
    auto loaded = Model::load(init_preset(dir, "tiny", true, 1, "quantised"), options);
    INFO(loaded.status().to_string());
    REQUIRE(loaded.ok());
    model = std::move(loaded.value());
  }
  return *model;
}

inline std::vector<int32_t> tokens(int64_t n, int32_t salt) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919 + salt * 104729 + 13) % 120000);
  return ids;
}

}  // namespace hippo::engine::testing
