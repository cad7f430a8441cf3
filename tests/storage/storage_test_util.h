// Shared fixtures of the storage tests: temporary directories, deterministic session states and
// helpers that snapshot and restore them through the real store.
#pragma once

#include "storage/store.h"

#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace hippo::storage::testing {

inline constexpr std::string_view kFingerprint = "test-model:v1:layout-a";

// A fresh directory under the system temp dir, removed with everything in it.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string file(std::string_view name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

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

// Restores a snapshot into freshly allocated buffers: the frontier and each stream by name.
struct Restored {
  std::vector<std::byte> frontier;
  std::map<std::string, std::vector<std::byte>> streams;
};
Result<Restored> restore_into_vectors(SessionStore& store, const SnapshotInfo& snapshot,
                                      std::string_view fingerprint = kFingerprint);

// Restores the session's latest snapshot and checks it equals `state` byte for byte.
void require_restores_to(SessionStore& store, const std::string& session_id, const TestState& state);

std::unique_ptr<SessionStore> open_store(const std::string& path, StoreOptions options = {});
SessionInfo make_session(SessionStore& store, const std::string& id);

}  // namespace hippo::storage::testing
