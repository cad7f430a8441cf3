// Shared fixtures of the storage tests: temporary directories and helpers that snapshot and
// restore test states (test_state.h) through the real store, checking with Catch2.
#pragma once

#include "storage/store.h"
#include "tests/storage/test_state.h"

#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace hippo::storage::testing {

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
