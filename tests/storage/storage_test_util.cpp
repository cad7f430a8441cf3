// The shared storage test fixtures.
#include "tests/storage/storage_test_util.h"

#include <random>

namespace hippo::storage::testing {

TempDir::TempDir() {
  std::random_device device;
  path_ = std::filesystem::temp_directory_path() / fmt::format("hippo-storage-test-{:08x}{:08x}", device(), device());
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

Result<Restored> restore_into_vectors(SessionStore& store, const SnapshotInfo& snapshot, std::string_view fingerprint) {
  Restored restored;
  std::vector<RestoreTarget> targets;
  for (const auto& s : snapshot.streams) restored.streams[s.name].resize(static_cast<std::size_t>(s.n_entries) * s.entry_bytes);
  for (auto& [name, bytes] : restored.streams) targets.push_back({name, bytes});
  HIPPO_ASSIGN_OR_RETURN(restored.frontier, store.restore_snapshot(snapshot, fingerprint, targets));
  return restored;
}

void require_restores_to(SessionStore& store, const std::string& session_id, const TestState& state) {
  auto latest = store.latest_snapshot(session_id);
  REQUIRE(latest.ok());
  REQUIRE(latest->has_value());
  const SnapshotInfo& snapshot = **latest;
  CHECK(snapshot.n_tokens == state.n_tokens());
  auto restored = restore_into_vectors(store, snapshot);
  INFO(restored.status().to_string());
  REQUIRE(restored.ok());
  CHECK(restored->frontier == state.frontier());
  REQUIRE(restored->streams.size() == state.streams().size());
  for (const auto& [name, bytes] : state.streams()) {
    INFO(name);
    CHECK(restored->streams.at(name) == bytes);
  }
}

std::unique_ptr<SessionStore> open_store(const std::string& path, StoreOptions options) {
  auto store = SessionStore::open(path, options);
  INFO(store.status().to_string());
  REQUIRE(store.ok());
  return std::move(store).value();
}

SessionInfo make_session(SessionStore& store, const std::string& id) {
  auto session = store.create_session({id, std::nullopt, std::string(kFingerprint)});
  INFO(session.status().to_string());
  REQUIRE(session.ok());
  return *session;
}

}  // namespace hippo::storage::testing
