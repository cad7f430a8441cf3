// Byte-plane filter, zstd and xxh3 behind storage/chunk_codec.h.
#include "storage/chunk_codec.h"

#include "base/check.h"

#include <xxhash.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>

namespace hippo::storage {

Result<Filter> filter_from_int(std::int64_t value) {
  if (value == 0 || value == 1) return static_cast<Filter>(value);
  return make_error(ErrorCode::kCorrupt, "unknown filter {}", value);
}

Result<Codec> codec_from_int(std::int64_t value) {
  if (value == 0 || value == 1) return static_cast<Codec>(value);
  return make_error(ErrorCode::kCorrupt, "unknown codec {}", value);
}

const char* filter_name(Filter filter) { return filter == Filter::kBytePlane ? "byte_plane" : "none"; }

std::uint64_t checksum_bytes(std::span<const std::byte> bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

namespace {

// Tiles of 32 entries x 32 bytes: both the 32 source rows and the 32 destination planes stay in L1
// (2 x 32 x 64 B lines), so the transpose runs near memory speed instead of one cache miss per byte.
constexpr std::size_t kTile = 32;

void transpose(const std::byte* in, std::size_t rows, std::size_t cols, std::byte* out) {
  // in is [rows, cols], out is [cols, rows].
  for (std::size_t r0 = 0; r0 < rows; r0 += kTile) {
    const std::size_t r1 = std::min(rows, r0 + kTile);
    for (std::size_t c0 = 0; c0 < cols; c0 += kTile) {
      const std::size_t c1 = std::min(cols, c0 + kTile);
      for (std::size_t c = c0; c < c1; ++c)
        for (std::size_t r = r0; r < r1; ++r) out[c * rows + r] = in[r * cols + c];
    }
  }
}

}  // namespace

void byte_plane_shuffle(std::span<const std::byte> in, std::size_t entry_bytes, std::span<std::byte> out) {
  HIPPO_CHECK(in.size() == out.size() && entry_bytes > 0 && in.size() % entry_bytes == 0, "shuffle sizes");
  transpose(in.data(), in.size() / entry_bytes, entry_bytes, out.data());
}

void byte_plane_unshuffle(std::span<const std::byte> in, std::size_t entry_bytes, std::span<std::byte> out) {
  HIPPO_CHECK(in.size() == out.size() && entry_bytes > 0 && in.size() % entry_bytes == 0, "unshuffle sizes");
  transpose(in.data(), entry_bytes, in.size() / entry_bytes, out.data());
}

struct ChunkEncoder::Impl {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  std::vector<std::byte> filtered;
  ~Impl() { ZSTD_freeCCtx(cctx); }
};

ChunkEncoder::ChunkEncoder() : impl_(new Impl) { HIPPO_CHECK(impl_->cctx != nullptr, "ZSTD_createCCtx"); }
ChunkEncoder::~ChunkEncoder() { delete impl_; }

Result<ChunkEncoder::Encoded> ChunkEncoder::encode(std::span<const std::byte> raw, std::size_t entry_bytes,
                                                   Filter filter, int level, std::vector<std::byte>& compressed) {
  HIPPO_CHECK(entry_bytes > 0 && raw.size() % entry_bytes == 0, "chunk must hold whole entries");
  const std::uint64_t checksum = checksum_bytes(raw);
  std::span<const std::byte> input = raw;
  if (filter == Filter::kBytePlane) {
    impl_->filtered.resize(raw.size());
    byte_plane_shuffle(raw, entry_bytes, impl_->filtered);
    input = impl_->filtered;
  }
  compressed.resize(ZSTD_compressBound(input.size()));
  const std::size_t n =
      ZSTD_compressCCtx(impl_->cctx, compressed.data(), compressed.size(), input.data(), input.size(), level);
  if (ZSTD_isError(n)) return make_error(ErrorCode::kInternal, "zstd compression failed: {}", ZSTD_getErrorName(n));
  if (n >= raw.size()) {  // incompressible: keep the raw, unfiltered bytes
    compressed.clear();
    return Encoded{Codec::kStored, checksum};
  }
  compressed.resize(n);
  return Encoded{Codec::kZstd, checksum};
}

struct ChunkDecoder::Impl {
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  std::vector<std::byte> filtered;
  ~Impl() { ZSTD_freeDCtx(dctx); }
};

ChunkDecoder::ChunkDecoder() : impl_(new Impl) { HIPPO_CHECK(impl_->dctx != nullptr, "ZSTD_createDCtx"); }
ChunkDecoder::~ChunkDecoder() { delete impl_; }

Status ChunkDecoder::decode(std::span<const std::byte> blob, Codec codec, Filter filter, std::size_t entry_bytes,
                            std::uint64_t checksum, std::span<std::byte> out) {
  if (entry_bytes == 0 || out.size() % entry_bytes != 0)
    return make_error(ErrorCode::kCorrupt, "raw size {} is not a multiple of the entry size {}", out.size(), entry_bytes);
  if (codec == Codec::kStored) {
    if (blob.size() != out.size())
      return make_error(ErrorCode::kCorrupt, "truncated: stored {} of {} bytes", blob.size(), out.size());
    std::memcpy(out.data(), blob.data(), blob.size());
  } else {
    std::span<std::byte> target = out;
    if (filter == Filter::kBytePlane) {
      impl_->filtered.resize(out.size());
      target = impl_->filtered;
    }
    const std::size_t n = ZSTD_decompressDCtx(impl_->dctx, target.data(), target.size(), blob.data(), blob.size());
    if (ZSTD_isError(n)) return make_error(ErrorCode::kCorrupt, "zstd: {}", ZSTD_getErrorName(n));
    if (n != out.size()) return make_error(ErrorCode::kCorrupt, "decoded {} of {} bytes", n, out.size());
    if (filter == Filter::kBytePlane) byte_plane_unshuffle(target, entry_bytes, out);
  }
  const std::uint64_t actual = checksum_bytes(out);
  if (actual != checksum)
    return make_error(ErrorCode::kCorrupt, "checksum mismatch (stored {:016x}, computed {:016x})", checksum, actual);
  return {};
}

}  // namespace hippo::storage
