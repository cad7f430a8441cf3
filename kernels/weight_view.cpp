// Validation of weight views: the one place that knows each format's shape rules.
#include "kernels/weight_view.h"

#include "base/check.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace hippo::kernels {

const char* weight_format_name(WeightFormat format) {
  switch (format) {
    case WeightFormat::kF32: return "f32";
    case WeightFormat::kBF16: return "bf16";
    case WeightFormat::kFp8Block: return "fp8-e4m3-block";
    case WeightFormat::kFp4Row32: return "fp4-e2m1-row32";
  }
  return "unknown";
}

Status WeightView::validate() const {
  const char* name = weight_format_name(format);
  if (rows <= 0 || cols <= 0)
    return make_error(ErrorCode::kInvalidArgument, "{} weight: shape [{}, {}] is empty", name, rows, cols);
  if (data == nullptr) return make_error(ErrorCode::kInvalidArgument, "{} weight: no data", name);
  if (lane_order && (format != WeightFormat::kFp4Row32 || row_stride != 0))
    return make_error(ErrorCode::kInvalidArgument, "{} weight: only packed FP4 rows come in lane order", name);
  if (fp8_special_blocks != nullptr && format != WeightFormat::kFp8Block)
    return make_error(ErrorCode::kInvalidArgument, "{} weight: only FP8 views mark special blocks", name);
  if (row_stride != 0 && format != WeightFormat::kFp4Row32)
    return make_error(ErrorCode::kInvalidArgument, "{} weight: only FP4 rows take a row stride", name);
  switch (format) {
    case WeightFormat::kF32:
    case WeightFormat::kBF16:
      return {};
    case WeightFormat::kFp8Block:
      if (block <= 0) return make_error(ErrorCode::kInvalidArgument, "{} weight: block size {} is not positive", name, block);
      break;
    case WeightFormat::kFp4Row32:
      if (cols % 32 != 0)
        return make_error(ErrorCode::kInvalidArgument, "{} weight: {} columns is not a multiple of 32", name, cols);
      if (row_stride != 0 && row_stride < cols / 2)
        return make_error(ErrorCode::kInvalidArgument, "{} weight: row stride {} is shorter than a row's {} code bytes", name,
                          row_stride, cols / 2);
      break;
  }
  if (scales == nullptr) return make_error(ErrorCode::kInvalidArgument, "{} weight: no scales", name);
  return {};
}

WeightView fp4_to_lane_order(const WeightView& packed, std::uint8_t* codes) {
  static_assert(std::endian::native == std::endian::little, "lane order is defined on little-endian words");
  HIPPO_CHECK(packed.format == WeightFormat::kFp4Row32 && packed.row_stride == 0 && !packed.lane_order,
              "fp4_to_lane_order: a packed FP4 view");
  const std::int64_t row_bytes = packed.cols / 2, chunks = packed.cols / 128;
  const auto* src = static_cast<const std::uint8_t*>(packed.data);
  for (std::int64_t r = 0; r < packed.rows; ++r) {
    const std::uint8_t* in = src + r * row_bytes;
    std::uint8_t* out = codes + r * row_bytes;
    for (std::int64_t chunk = 0; chunk < chunks; ++chunk, in += 64, out += 64) {
      std::uint32_t words[16] = {};
      for (int col = 0; col < 128; ++col)
        words[col % 16] |= static_cast<std::uint32_t>((in[col / 2] >> (4 * (col % 2))) & 0xF) << (4 * (col / 16));
      std::memcpy(out, words, sizeof words);
    }
    std::copy(in, src + (r + 1) * row_bytes, out);
  }
  WeightView out = packed;
  out.data = codes;
  out.lane_order = true;
  return out;
}

WeightView weight_rows(const WeightView& view, std::int64_t first, std::int64_t count) {
  WeightView rows = view;
  rows.rows = count;
  const auto* bytes = static_cast<const std::uint8_t*>(view.data);
  switch (view.format) {
    case WeightFormat::kF32: rows.data = bytes + first * view.cols * 4; break;
    case WeightFormat::kBF16: rows.data = bytes + first * view.cols * 2; break;
    case WeightFormat::kFp8Block: {
      HIPPO_CHECK(first % view.block == 0 && (count % view.block == 0 || first + count == view.rows),
                  "weight_rows: FP8 blocks stay whole");
      const std::int64_t scale_cols = (view.cols + view.block - 1) / view.block;
      rows.data = bytes + first * view.cols;
      rows.scales = view.scales + (first / view.block) * scale_cols;
      if (view.fp8_special_blocks != nullptr) rows.fp8_special_blocks = view.fp8_special_blocks + (first / view.block) * scale_cols;
      break;
    }
    case WeightFormat::kFp4Row32:
      rows.data = bytes + first * fp4_code_stride(view);
      rows.scales = view.scales + first * fp4_scale_stride(view);
      break;
  }
  return rows;
}

namespace {

constexpr std::uint64_t kLow7 = 0x7F7F7F7F7F7F7F7Full;

// Whether any of the eight bytes of v is zero (each byte's top bit clear, so adding 0x7F to a byte
// carries into no other: its top bit ends set unless it was zero).
bool has_zero_byte(std::uint64_t v) { return ((v + kLow7) & 0x8080808080808080ull) != 0x8080808080808080ull; }

}  // namespace

void mark_fp8_special_blocks(const WeightView& w, std::int64_t first, std::int64_t count, std::uint8_t* out) {
  HIPPO_CHECK(w.format == WeightFormat::kFp8Block && first % w.block == 0 && first + count <= w.rows,
              "mark_fp8_special_blocks: whole blocks of an FP8 view's rows");
  const std::int64_t scale_cols = (w.cols + w.block - 1) / w.block;
  const auto* bytes = static_cast<const std::uint8_t*>(w.data);
  for (std::int64_t rb = first / w.block; rb * w.block < first + count; ++rb)
    for (std::int64_t cb = 0; cb < scale_cols; ++cb) {
      bool exponent_zero = false, nan = false;
      const std::int64_t c0 = cb * w.block, c1 = std::min(w.cols, (cb + 1) * w.block);
      for (std::int64_t r = rb * w.block; r < std::min(w.rows, (rb + 1) * w.block); ++r) {
        const std::uint8_t* row = bytes + r * w.cols;
        std::int64_t c = c0;
        for (; c + 8 <= c1; c += 8) {  // eight codes at a time: a byte of zero in either word
          std::uint64_t codes;
          std::memcpy(&codes, row + c, 8);
          const std::uint64_t exponents = codes & 0x7878787878787878ull, not_nan = (codes & kLow7) ^ kLow7;
          exponent_zero |= has_zero_byte(exponents);
          nan |= has_zero_byte(not_nan);
        }
        for (; c < c1; ++c) {
          const std::uint8_t magnitude = row[c] & 0x7F;
          exponent_zero |= magnitude < 0x08;
          nan |= magnitude == 0x7F;
        }
      }
      out[rb * scale_cols + cb] =
          static_cast<std::uint8_t>((exponent_zero || nan ? kFp8SpecialBlock : 0) | (nan ? kFp8NanBlock : 0));
    }
}

}  // namespace hippo::kernels
