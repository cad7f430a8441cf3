// The chunk codec: how the raw bytes of a run of stream entries become a stored blob and back
// (docs/storage-format.md, "Chunk codec").
//
//   raw entries --filter--> filtered bytes --zstd--> blob        checksum = xxh3-64(raw)
//
// Filters are per stream. kBytePlane transposes the chunk as an [n_entries, entry_bytes] byte
// matrix into [entry_bytes, n_entries]: byte j of every entry lands in plane j, so the FP8/UE8M0
// scale bytes of a quantised row sit apart from its FP4 code bytes and each plane holds one
// channel's values across tokens, which zstd models far better (bench storage measures it).
// A chunk that zstd cannot shrink is stored as is (codec kStored) and costs nothing to restore.
#pragma once

#include "base/status.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace hippo::storage {

enum class Filter : std::int64_t { kNone = 0, kBytePlane = 1 };
enum class Codec : std::int64_t { kStored = 0, kZstd = 1 };

Result<Filter> filter_from_int(std::int64_t value);
Result<Codec> codec_from_int(std::int64_t value);
const char* filter_name(Filter filter);

std::uint64_t checksum_bytes(std::span<const std::byte> bytes);

// Reusable per-thread encoder state (a zstd context and the filter's scratch buffer): allocate once per
// thread, not per chunk. Its memory is O(chunk size), never O(snapshot size).
class ChunkEncoder {
 public:
  ChunkEncoder();
  ~ChunkEncoder();
  ChunkEncoder(const ChunkEncoder&) = delete;
  ChunkEncoder& operator=(const ChunkEncoder&) = delete;

  struct Encoded {
    Codec codec;             // kStored: the blob is raw itself; kZstd: the blob is `compressed`
    std::uint64_t checksum;  // of the raw bytes
  };
  // raw.size() must be a multiple of entry_bytes. `compressed` is resized to the zstd output.
  Result<Encoded> encode(std::span<const std::byte> raw, std::size_t entry_bytes, Filter filter, int level,
                         std::vector<std::byte>& compressed);

 private:
  struct Impl;
  Impl* impl_;
};

class ChunkDecoder {
 public:
  ChunkDecoder();
  ~ChunkDecoder();
  ChunkDecoder(const ChunkDecoder&) = delete;
  ChunkDecoder& operator=(const ChunkDecoder&) = delete;

  // Decodes blob into out (exactly the raw size) and checks the checksum. Errors are kCorrupt with a
  // message saying what failed ("checksum mismatch", "zstd: ...", "decoded 10 of 20 bytes");
  // callers prefix the session, stream and chunk.
  Status decode(std::span<const std::byte> blob, Codec codec, Filter filter, std::size_t entry_bytes,
                std::uint64_t checksum, std::span<std::byte> out);

 private:
  struct Impl;
  Impl* impl_;
};

// The byte-plane filter and its inverse, exposed for tests and the benchmark.
void byte_plane_shuffle(std::span<const std::byte> in, std::size_t entry_bytes, std::span<std::byte> out);
void byte_plane_unshuffle(std::span<const std::byte> in, std::size_t entry_bytes, std::span<std::byte> out);

}  // namespace hippo::storage
