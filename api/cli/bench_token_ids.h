// The token ids `hippo bench model` and `hippo bench speculative` feed, reproducible outside hippo:
// a 64-bit LCG (state = state * 6364136223846793005 + 1442695040888963407 mod 2^64, from state
// 12345), id = 3 + (state >> 33) mod (min(vocab, 128000) - 3).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace hippo::cli {

inline std::vector<int32_t> bench_token_ids(int64_t n, int64_t vocab) {
  const uint64_t range = static_cast<uint64_t>(std::min<int64_t>(vocab, 128000) - 3);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  uint64_t state = 12345;
  for (auto& id : ids) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    id = static_cast<int32_t>(3 + (state >> 33) % range);
  }
  return ids;
}

}  // namespace hippo::cli
