// Deterministic test states (test_state.h).
#include "tests/storage/test_state.h"

namespace hippo::storage::testing {

std::vector<StreamShape> default_shapes() {
  return {{"kv.layer2", 288, 2}, {"index.layer2", 68, 2}, {"kv.layer20", 288, 1}, {"token_ids", 4, 1}};
}

namespace {

std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::uint64_t name_hash(std::string_view name) {
  std::uint64_t h = 1469598103934665603ull;
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

}  // namespace

TestState::TestState(std::vector<StreamShape> shapes, std::int64_t n_tokens, std::uint64_t seed)
    : shapes_(std::move(shapes)), n_tokens_(n_tokens) {
  for (const auto& shape : shapes_) {
    const std::int64_t n_entries = n_tokens / shape.tokens_per_entry;
    std::vector<std::byte> bytes(static_cast<std::size_t>(n_entries) * shape.entry_bytes);
    const std::uint64_t base = name_hash(shape.name) ^ (seed * 0x2545f4914f6cdd1dull);
    for (std::size_t i = 0; i < bytes.size(); i += 8) {
      const std::uint64_t r = splitmix(base + i / 8);
      for (std::size_t k = 0; k < 8 && i + k < bytes.size(); ++k) {
        const auto b = static_cast<unsigned char>(r >> (8 * k));
        const bool low_entropy = ((i + k) % shape.entry_bytes) * 2 >= shape.entry_bytes;
        bytes[i + k] = static_cast<std::byte>(low_entropy ? (b & 0x03) : b);
      }
    }
    streams_[shape.name] = std::move(bytes);
  }
  frontier_.resize(1000 + static_cast<std::size_t>(n_tokens % 97));
  for (std::size_t i = 0; i < frontier_.size(); ++i)
    frontier_[i] = static_cast<std::byte>(splitmix(seed + static_cast<std::uint64_t>(n_tokens) * 7919 + i) & 0x1f);
}

SnapshotRequest TestState::request(std::string session_id, Filter filter, std::string fingerprint) const {
  SnapshotRequest request;
  request.session_id = std::move(session_id);
  request.fingerprint = std::move(fingerprint);
  request.n_tokens = n_tokens_;
  request.frontier = frontier_;
  for (const auto& shape : shapes_)
    request.streams.push_back({shape.name, shape.entry_bytes, filter, streams_.at(shape.name)});
  return request;
}

}  // namespace hippo::storage::testing
