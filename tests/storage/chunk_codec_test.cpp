// The chunk codec on its own: the byte-plane filter, zstd round trips and the checks on decode.
#include "storage/chunk_codec.h"

#include <catch2/catch.hpp>

#include <numeric>
#include <random>

using namespace hippo;
using namespace hippo::storage;

namespace {

std::vector<std::byte> random_bytes(std::size_t n, std::uint32_t seed, unsigned mask = 0xff) {
  std::mt19937 rng(seed);
  std::vector<std::byte> out(n);
  for (auto& b : out) b = static_cast<std::byte>(rng() & mask);
  return out;
}

}  // namespace

TEST_CASE("byte-plane shuffle puts byte j of every entry in plane j and unshuffles back", "[storage][codec]") {
  for (std::size_t entry_bytes : {1u, 3u, 4u, 31u, 32u, 33u, 68u, 288u}) {
    for (std::size_t n_entries : {1u, 2u, 31u, 32u, 33u, 100u}) {
      INFO(entry_bytes << " x " << n_entries);
      const auto raw = random_bytes(entry_bytes * n_entries, static_cast<std::uint32_t>(entry_bytes * 1000 + n_entries));
      std::vector<std::byte> shuffled(raw.size()), back(raw.size());
      byte_plane_shuffle(raw, entry_bytes, shuffled);
      for (std::size_t e = 0; e < n_entries; ++e)
        for (std::size_t j = 0; j < entry_bytes; ++j) REQUIRE(shuffled[j * n_entries + e] == raw[e * entry_bytes + j]);
      byte_plane_unshuffle(shuffled, entry_bytes, back);
      REQUIRE(back == raw);
    }
  }
}

TEST_CASE("chunks round-trip through every filter and both codecs", "[storage][codec]") {
  ChunkEncoder encoder;
  ChunkDecoder decoder;
  std::vector<std::byte> compressed;
  for (Filter filter : {Filter::kNone, Filter::kBytePlane}) {
    // Compressible (4 significant bits per byte) and incompressible data.
    for (unsigned mask : {0x0fu, 0xffu}) {
      const auto raw = random_bytes(288 * 1000, mask, mask);
      auto encoded = encoder.encode(raw, 288, filter, 3, compressed);
      REQUIRE(encoded.ok());
      CHECK(encoded->codec == (mask == 0xff ? Codec::kStored : Codec::kZstd));
      CHECK(encoded->checksum == checksum_bytes(raw));
      const std::span<const std::byte> blob = encoded->codec == Codec::kStored ? std::span<const std::byte>(raw)
                                                                               : std::span<const std::byte>(compressed);
      if (mask == 0x0f) CHECK(blob.size() < raw.size() * 6 / 10);
      std::vector<std::byte> out(raw.size());
      REQUIRE(decoder.decode(blob, encoded->codec, encoded->codec == Codec::kStored ? Filter::kNone : filter, 288,
                             encoded->checksum, out)
                  .ok());
      CHECK(out == raw);
    }
  }
}

TEST_CASE("decode rejects flipped bits, truncation and wrong checksums with kCorrupt", "[storage][codec]") {
  ChunkEncoder encoder;
  ChunkDecoder decoder;
  std::vector<std::byte> compressed;
  const auto raw = random_bytes(68 * 5000, 7, 0x07);
  auto encoded = encoder.encode(raw, 68, Filter::kBytePlane, 3, compressed);
  REQUIRE(encoded.ok());
  REQUIRE(encoded->codec == Codec::kZstd);
  std::vector<std::byte> out(raw.size());

  auto truncated = std::span<const std::byte>(compressed).first(compressed.size() / 2);
  Status s = decoder.decode(truncated, Codec::kZstd, Filter::kBytePlane, 68, encoded->checksum, out);
  CHECK(s.code() == ErrorCode::kCorrupt);

  s = decoder.decode(compressed, Codec::kZstd, Filter::kBytePlane, 68, encoded->checksum ^ 1, out);
  CHECK(s.code() == ErrorCode::kCorrupt);
  CHECK_THAT(s.message(), Catch::Contains("checksum mismatch"));

  // A stored chunk whose bytes changed: only the checksum can tell.
  auto changed = raw;
  changed[100] ^= std::byte{1};
  s = decoder.decode(changed, Codec::kStored, Filter::kNone, 68, checksum_bytes(raw), out);
  CHECK_THAT(s.message(), Catch::Contains("checksum mismatch"));
  s = decoder.decode(std::span<const std::byte>(raw).first(100), Codec::kStored, Filter::kNone, 68, checksum_bytes(raw),
                     out);
  CHECK_THAT(s.message(), Catch::Contains("truncated"));
}
