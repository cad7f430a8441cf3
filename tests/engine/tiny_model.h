// The quantised tiny checkpoint (seed 1), loaded once per test binary with two threads, and what the
// model tests share: synthetic token ids (long enough to cross tiny's window of 128, its compression
// groups and candidate blocks) and a bit-for-bit comparison.
#pragma once

#include "engine/model/model.h"
#include "tests/engine/test_paths.h"

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
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

inline std::vector<int32_t> tokens(int64_t n, int32_t salt = 0) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919 + salt * 104729 + 13) % 120000);
  return ids;
}

inline bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace hippo::engine::testing
