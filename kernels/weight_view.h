// How a kernel sees one weight matrix: a borrowed view of its bytes (usually memory-mapped from a
// checkpoint) in one of the formats the release uses. Kernels never own weights.
#pragma once

#include "base/status.h"

#include <cstdint>

namespace hippo::kernels {

enum class WeightFormat {
  kF32,         // float [rows, cols]
  kBF16,        // uint16 [rows, cols]
  kFp8Block,    // E4M3FN [rows, cols] + E8M0 scales [ceil(rows/b), ceil(cols/b)], b = block (32 in V4.1)
  kFp4Row32,    // packed E2M1 [rows, cols/2] (even column in the low nibble) + E8M0 scales [rows, cols/32]
};

const char* weight_format_name(WeightFormat format);

// A matrix W [rows = out features, cols = in features]; y = x · Wᵀ.
struct WeightView {
  WeightFormat format = WeightFormat::kF32;
  const void* data = nullptr;
  const std::uint8_t* scales = nullptr;  // E8M0, for the quantised formats only
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t block = 0;  // kFp8Block: the square block edge of the scales
  // kFp4Row32: bytes from one row's codes (and from its scales) to the next row's; 0 means
  // packed (cols / 2 and cols / 32). Rows kept as whole records, codes then scales (the session's
  // FP4 index keys), are read in place with data = the first record, scales = data + cols / 2.
  std::int64_t row_stride = 0;
  // kFp4Row32, packed rows only: the codes in lane order (fp4_code below), the layout the CPU
  // backend keeps its copies of FP4 weights in (fp4_to_lane_order).
  bool lane_order = false;
  // kFp8Block, optional: one byte per scale block (laid out as the scales), nonzero where the block
  // holds a code whose exponent bits are 0 (zero, subnormals) or a NaN, which the CPU decode's byte
  // table does not take (mark_fp8_special_blocks below; the CPU backend keeps them for the model's
  // FP8 weights). Null: not known, and every block is decoded the general way.
  const std::uint8_t* fp8_special_blocks = nullptr;

  // Checks the view against its format's rules (positive shape, scales present, FP4 column count
  // a multiple of 32, FP8 block positive). Kernels assume a validated view.
  Status validate() const;
};

// Marks each scale block of an FP8 view that holds a special code (WeightView::fp8_special_blocks)
// in out, scale_span_bytes(w) bytes: kFp8SpecialBlock where it does, plus kFp8NanBlock where one
// of them is a NaN, 0 elsewhere. Rows [first, first + count) only (whole blocks of rows, or to the
// end), so that threads can share the work.
inline constexpr std::uint8_t kFp8SpecialBlock = 1;
inline constexpr std::uint8_t kFp8NanBlock = 2;
void mark_fp8_special_blocks(const WeightView& w, std::int64_t first, std::int64_t count, std::uint8_t* out);

// Bytes from one FP4 row's codes to the next's, and from its scales to the next's.
inline std::int64_t fp4_code_stride(const WeightView& w) { return w.row_stride != 0 ? w.row_stride : w.cols / 2; }
inline std::int64_t fp4_scale_stride(const WeightView& w) { return w.row_stride != 0 ? w.row_stride : w.cols / 32; }

// FP4 code (row, col) of a view, in either order. Packed: byte col / 2, even columns in the low
// nibble. Lane order, in each whole 128-column chunk of a row (the rest of the row as packed):
// column 16 s + l is nibble s of the little-endian 32-bit word l (byte 4 l + s / 2), so that one
// 64-byte load holds 16 lanes' codes for 8 steps of 16 columns, and a shift by 4 s gives step s.
inline std::uint8_t fp4_code(const WeightView& w, std::int64_t row, std::int64_t col) {
  const auto* codes = static_cast<const std::uint8_t*>(w.data) + row * fp4_code_stride(w);
  if (w.lane_order && col < w.cols / 128 * 128) {
    const std::int64_t step = col % 128 / 16;
    return static_cast<std::uint8_t>((codes[col / 128 * 64 + 4 * (col % 16) + step / 2] >> (4 * (step % 2))) & 0xF);
  }
  return static_cast<std::uint8_t>((codes[col / 2] >> (4 * (col % 2))) & 0xF);
}

// The codes of a packed FP4 view rewritten in lane order into `codes` (code_span_bytes(packed)
// bytes); returns the view of them, sharing packed's scales.
WeightView fp4_to_lane_order(const WeightView& packed, std::uint8_t* codes);

// The bytes from a view's first code byte (data) to just past its last, and the same for its scales
// (none for F32 and BF16): what a copy of the view must hold.
inline std::int64_t code_span_bytes(const WeightView& w) {
  switch (w.format) {
    case WeightFormat::kF32: return w.rows * w.cols * 4;
    case WeightFormat::kBF16: return w.rows * w.cols * 2;
    case WeightFormat::kFp8Block: return w.rows * w.cols;
    case WeightFormat::kFp4Row32: return (w.rows - 1) * fp4_code_stride(w) + w.cols / 2;
  }
  return 0;
}
inline std::int64_t scale_span_bytes(const WeightView& w) {
  switch (w.format) {
    case WeightFormat::kF32:
    case WeightFormat::kBF16: return 0;
    case WeightFormat::kFp8Block: return ((w.rows + w.block - 1) / w.block) * ((w.cols + w.block - 1) / w.block);
    case WeightFormat::kFp4Row32: return (w.rows - 1) * fp4_scale_stride(w) + w.cols / 32;
  }
  return 0;
}

// Rows [first, first + count) of W as a view of their own (the grouped output projection uses one
// per group; benchmarks check slices against kernels/ref). FP8 blocks of scales must not be cut:
// first is a multiple of the block, and so is count unless the slice ends at the last row (checked).
WeightView weight_rows(const WeightView& view, std::int64_t first, std::int64_t count);

}  // namespace hippo::kernels
