// DType: the safetensors element types a V4.1 checkpoint uses, with their on-disk names and sizes.
//
// Packed FP4 experts have no safetensors dtype of their own: the release stores them as I8 with two
// E2M1 codes per byte (shape [out, in/2]); see dequant.h for the bit layout.
#pragma once

#include "base/status.h"

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace hippo::engine {

enum class DType {
  kF32,      // IEEE binary32
  kBF16,     // bfloat16
  kF8E4M3,   // float8 e4m3fn: bias 7, no infinities, 0x7f/0xff are NaN, max 448
  kF8E8M0,   // unsigned power-of-two scale: 2^(byte - 127), 0xff is NaN
  kI8,       // int8; also two packed FP4 E2M1 codes per byte
  kU8,
  kI32,
  kI64,
};

std::string_view dtype_name(DType dtype);  // "F32", "BF16", "F8_E4M3", ...
Result<DType> parse_dtype(std::string_view name);
int64_t dtype_size(DType dtype);           // bytes per element

// Elements of a shape; -1 if a dimension is negative or the product overflows int64.
int64_t element_count(std::span<const int64_t> shape);

// "[129280, 5120]"
std::string shape_string(std::span<const int64_t> shape);

}  // namespace hippo::engine
