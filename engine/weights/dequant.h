// Whole-tensor dequantisation of the checkpoint's quantised formats (design/deepseek-v41-architecture.md
// §4.3), built on the exact scalar decoders of kernels/ref/numeric_formats.h: every value produced is
// representable in float, and no rounding happens.
//
//   BF16      upper half of an IEEE binary32.
//   F8_E4M3   e4m3fn: sign | 4 exponent bits (bias 7) | 3 mantissa bits; exponent 0 is subnormal
//             (m * 2^-9); 0x7f and 0xff are NaN; no infinities; max 448.
//   F8_E8M0   an exponent byte: 2^(byte - 127); 0xff is NaN. Used for every block scale.
//   FP4 E2M1  a nibble: bit 3 = sign, bits 0-2 = magnitude code {0, 0.5, 1, 1.5, 2, 3, 4, 6}. Two per
//             byte: element k of a row is in byte k/2, even k in the LOW nibble.
//
// Quantised linears: an F8_E4M3 weight [out, in] with E8M0 scales [ceil(out/br), ceil(in/bc)]
// (block br x bc, [32, 32] in V4.1; Engram tables use [1, 32]); a packed FP4 expert weight
// [out, in/2] (I8) with E8M0 scales [out, in/32].
#pragma once

#include <cstdint>
#include <span>

namespace hippo::engine {

inline constexpr int64_t kFp4BlockSize = 32;  // E2M1 elements per E8M0 scale (MXFP4)

// out[r * cols + c] = e4m3(codes[r * cols + c]) * e8m0(scales[(r / block_rows) * scale_cols + c / block_cols])
// with scale_cols = ceil(cols / block_cols). Sizes are checked (a mismatch is a bug).
void dequantize_fp8(std::span<const uint8_t> codes, std::span<const uint8_t> scales, int64_t rows, int64_t cols,
                    int64_t block_rows, int64_t block_cols, std::span<float> out);

// out[r * cols + k] = e2m1(nibble k of row r) * e8m0(scales[r * cols / 32 + k / 32]); packed holds
// rows * cols / 2 bytes, cols is a multiple of 32.
void dequantize_fp4(std::span<const uint8_t> packed, std::span<const uint8_t> scales, int64_t rows, int64_t cols,
                    std::span<float> out);

}  // namespace hippo::engine
