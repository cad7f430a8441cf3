// Deterministic session states for the storage tests and the e2e fixture: byte streams shaped like
// the engine's, whose bytes depend only on (stream, entry index, seed). No Catch2 here, so that
// the fixture executable can use it too.
#pragma once

#include "storage/store.h"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace hippo::storage::testing {

inline constexpr std::string_view kFingerprint = "test-model:v1:layout-a";

// One stream's geometry in a test state.
struct StreamShape {
  std::string name;
  std::size_t entry_bytes;
  int tokens_per_entry;  // 2 for a ratio-2 compressed layer, 1 otherwise
};

// Four streams shaped like the engine's (two ratio-2 layers' KV and index keys, token ids).
std::vector<StreamShape> default_shapes();

// A session state whose bytes depend only on (stream, entry index, seed): the state at n tokens is
// a prefix of the state at n + k tokens, like the engine's append-only streams. Half of each entry
// is low-entropy so that zstd has something to do.
class TestState {
 public:
  TestState(std::vector<StreamShape> shapes, std::int64_t n_tokens, std::uint64_t seed = 1);
  std::int64_t n_tokens() const { return n_tokens_; }
  const std::map<std::string, std::vector<std::byte>>& streams() const { return streams_; }
  std::vector<std::byte>& stream(const std::string& name) { return streams_.at(name); }
  const std::vector<std::byte>& frontier() const { return frontier_; }
  SnapshotRequest request(std::string session_id, Filter filter = Filter::kBytePlane,
                          std::string fingerprint = std::string(kFingerprint)) const;

 private:
  std::vector<StreamShape> shapes_;
  std::int64_t n_tokens_;
  std::map<std::string, std::vector<std::byte>> streams_;
  std::vector<std::byte> frontier_;
};

}  // namespace hippo::storage::testing
