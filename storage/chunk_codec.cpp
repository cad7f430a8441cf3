// Byte-plane filter, zstd and xxh3 behind storage/chunk_codec.h.
#include "storage/chunk_codec.h"

#include "base/check.h"

#include <xxhash.h>
#include <zstd.h>

#include <emmintrin.h>

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

// Scalar transpose for the edges: in is [rows, cols], out is [cols, rows].
void transpose_scalar(const std::byte* in, std::size_t rows, std::size_t cols, std::size_t r0, std::size_t r1,
                      std::size_t c0, std::size_t c1, std::byte* out) {
  for (std::size_t c = c0; c < c1; ++c)
    for (std::size_t r = r0; r < r1; ++r) out[c * rows + r] = in[r * cols + c];
}

// 16 x 16 byte blocks transposed in SSE2 registers (four rounds of unpacks: bytes, 16-, 32- and
// 64-bit lanes), so each byte is loaded and stored once in 16-byte vectors; the scalar loop does
// the remainder. SSE2 is part of x86-64, so there is no dispatch. This makes the filter several
// times cheaper than zstd itself (bench storage reports the end-to-end cost).
void transpose(const std::byte* in, std::size_t rows, std::size_t cols, std::byte* out) {
  const std::size_t rows16 = rows / 16 * 16, cols16 = cols / 16 * 16;
  for (std::size_t r = 0; r < rows16; r += 16) {
    for (std::size_t c = 0; c < cols16; c += 16) {
      __m128i a[16];
      for (std::size_t i = 0; i < 16; ++i)
        a[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + (r + i) * cols + c));
      // b[2k], b[2k+1]: 16-bit lanes hold rows 2k, 2k+1 of columns 0..7 and 8..15.
      __m128i b[16];
      for (std::size_t k = 0; k < 8; ++k) {
        b[2 * k] = _mm_unpacklo_epi8(a[2 * k], a[2 * k + 1]);
        b[2 * k + 1] = _mm_unpackhi_epi8(a[2 * k], a[2 * k + 1]);
      }
      // g[4 * group + q]: 32-bit lanes hold rows 4 group .. 4 group + 3 of columns 4q .. 4q + 3.
      __m128i g[16];
      for (std::size_t group = 0; group < 4; ++group) {
        const __m128i* p = b + 4 * group;  // rows 4 group .. + 1 in p[0], p[1]; + 2 .. + 3 in p[2], p[3]
        g[4 * group + 0] = _mm_unpacklo_epi16(p[0], p[2]);
        g[4 * group + 1] = _mm_unpackhi_epi16(p[0], p[2]);
        g[4 * group + 2] = _mm_unpacklo_epi16(p[1], p[3]);
        g[4 * group + 3] = _mm_unpackhi_epi16(p[1], p[3]);
      }
      // h[8 * half + 2q + s]: 64-bit lanes hold rows 8 half .. + 7 of columns 4q + 2s, 4q + 2s + 1.
      __m128i h[16];
      for (std::size_t half = 0; half < 2; ++half)
        for (std::size_t q = 0; q < 4; ++q) {
          h[8 * half + 2 * q] = _mm_unpacklo_epi32(g[8 * half + q], g[8 * half + 4 + q]);
          h[8 * half + 2 * q + 1] = _mm_unpackhi_epi32(g[8 * half + q], g[8 * half + 4 + q]);
        }
      for (std::size_t q = 0; q < 4; ++q)
        for (std::size_t s = 0; s < 2; ++s) {
          const std::size_t col = c + 4 * q + 2 * s;
          const __m128i lo = h[2 * q + s], hi = h[8 + 2 * q + s];
          _mm_storeu_si128(reinterpret_cast<__m128i*>(out + col * rows + r), _mm_unpacklo_epi64(lo, hi));
          _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (col + 1) * rows + r), _mm_unpackhi_epi64(lo, hi));
        }
    }
    transpose_scalar(in, rows, cols, r, r + 16, cols16, cols, out);
  }
  transpose_scalar(in, rows, cols, rows16, rows, 0, cols, out);
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
    if (!blob.empty()) std::memcpy(out.data(), blob.data(), blob.size());
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
