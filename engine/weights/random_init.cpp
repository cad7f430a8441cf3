// Element generators per InitRule kind and storage (tensor_table.h describes the rules).
//
//   kUniform: k = (bits >> (64 - b)) - 2^(b-1), value = center + k * 2^(exponent - b + 1); exact in
//             the target dtype by construction, so the dtype conversion does not round.
//   kFp8 code: sign = bit 0, exponent field 4..7 (bits 1-2), mantissa bits 3-5: magnitudes
//             (1 + m/8) * 2^(e-7) in [0.125, 1.875]; never NaN.
//   kFp4 code: the low 4 bits (all 16 E2M1 codes, -0 included).
//   scales:   E8M0 byte 127 + exponent - (bit 0): 2^exponent or 2^(exponent - 1).
#include "engine/weights/random_init.h"

#include "base/check.h"
#include "engine/weights/dequant.h"
#include "kernels/ref/numeric_formats.h"

#include <bit>
#include <cmath>
#include <cstring>

namespace hippo::engine {

uint64_t splitmix64_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t fnv1a64(std::string_view bytes) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

uint64_t stream_key(uint64_t seed, std::string_view stream) { return splitmix64_mix(seed ^ fnv1a64(stream)); }

namespace {

std::string scales_stream(const std::string& weight_name) { return weight_name + "#scales"; }

uint8_t fp8_code(uint64_t bits) {
  const auto sign = static_cast<uint8_t>(bits & 1);
  const auto exponent = static_cast<uint8_t>(4 + ((bits >> 1) & 3));
  const auto mantissa = static_cast<uint8_t>((bits >> 3) & 7);
  return static_cast<uint8_t>(sign << 7 | exponent << 3 | mantissa);
}

uint8_t scale_code(uint64_t bits, int exponent) { return static_cast<uint8_t>(127 + exponent - static_cast<int>(bits & 1)); }

void put(std::vector<std::byte>& out, size_t index, DType dtype, float value) {
  if (dtype == DType::kF32) {
    std::memcpy(out.data() + index * 4, &value, 4);
  } else {
    HIPPO_CHECK(dtype == DType::kBF16, "generate_tensor: values must be F32 or BF16");
    const uint16_t bits = kernels::ref::f32_to_bf16(value);
    std::memcpy(out.data() + index * 2, &bits, 2);
  }
}

std::vector<std::byte> uniform_values(const TensorSpec& spec, uint64_t seed) {
  const InitRule& rule = spec.init;
  const uint64_t key = stream_key(seed, spec.weight_name);
  const auto n = static_cast<size_t>(element_count(spec.shape));
  std::vector<std::byte> out(static_cast<size_t>(spec.n_bytes()));
  const int64_t half = int64_t{1} << (rule.bits - 1);
  for (size_t i = 0; i < n; ++i) {
    const auto k = static_cast<int64_t>(stream_bits(key, i) >> (64 - rule.bits)) - half;
    const double value = rule.center + std::ldexp(static_cast<double>(k), rule.exponent - rule.bits + 1);
    put(out, i, spec.dtype, static_cast<float>(value));
  }
  return out;
}

// The scale of element (r, c) of a block-quantised matrix.
struct BlockScales {
  uint64_t key;
  int exponent;
  int64_t block_rows, block_cols, scale_cols;
  uint8_t at(int64_t r, int64_t c) const {
    return scale_code(stream_bits(key, static_cast<uint64_t>((r / block_rows) * scale_cols + c / block_cols)), exponent);
  }
};

BlockScales block_scales(const TensorSpec& spec, uint64_t seed) {
  const int64_t cols = spec.logical_shape[1];
  const int64_t block_cols = spec.block[1];
  return {stream_key(seed, scales_stream(spec.weight_name)), spec.init.exponent, spec.block[0], block_cols,
          (cols + block_cols - 1) / block_cols};
}

std::vector<std::byte> fp8_tensor(const TensorSpec& spec, uint64_t seed) {
  const int64_t rows = spec.logical_shape[0], cols = spec.logical_shape[1];
  const uint64_t key = stream_key(seed, spec.weight_name);
  const BlockScales scales = block_scales(spec, seed);
  std::vector<std::byte> out(static_cast<size_t>(spec.n_bytes()));
  switch (spec.storage) {
    case Storage::kFp8Codes:
      for (int64_t i = 0; i < rows * cols; ++i)
        out[static_cast<size_t>(i)] = static_cast<std::byte>(fp8_code(stream_bits(key, static_cast<uint64_t>(i))));
      break;
    case Storage::kFp8Scales: {
      const int64_t scale_rows = spec.shape[0];
      for (int64_t r = 0; r < scale_rows; ++r)
        for (int64_t c = 0; c < scales.scale_cols; ++c)
          out[static_cast<size_t>(r * scales.scale_cols + c)] =
              static_cast<std::byte>(scales.at(r * scales.block_rows, c * scales.block_cols));
      break;
    }
    case Storage::kValues:  // plain layout: the exact dequantised values
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          const auto i = static_cast<size_t>(r * cols + c);
          put(out, i, spec.dtype, kernels::ref::e4m3fn_to_f32(fp8_code(stream_bits(key, i))) * kernels::ref::e8m0_to_f32(scales.at(r, c)));
        }
      break;
    default: HIPPO_CHECK(false, "generate_tensor: FP8 rule on a non-FP8 tensor");
  }
  return out;
}

std::vector<std::byte> fp4_tensor(const TensorSpec& spec, uint64_t seed) {
  const int64_t rows = spec.logical_shape[0], cols = spec.logical_shape[1];
  const uint64_t key = stream_key(seed, spec.weight_name);
  const BlockScales scales = block_scales(spec, seed);
  std::vector<std::byte> out(static_cast<size_t>(spec.n_bytes()));
  auto nibble = [&](int64_t i) { return static_cast<uint8_t>(stream_bits(key, static_cast<uint64_t>(i)) & 0xf); };
  switch (spec.storage) {
    case Storage::kFp4Codes:
      for (int64_t i = 0; i < rows * cols; i += 2)  // even element in the low nibble
        out[static_cast<size_t>(i / 2)] = static_cast<std::byte>(nibble(i) | nibble(i + 1) << 4);
      break;
    case Storage::kFp4Scales:
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < scales.scale_cols; ++c)
          out[static_cast<size_t>(r * scales.scale_cols + c)] = static_cast<std::byte>(scales.at(r, c * kFp4BlockSize));
      break;
    case Storage::kValues:
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          const int64_t i = r * cols + c;
          put(out, static_cast<size_t>(i), spec.dtype, kernels::ref::e2m1_to_f32(nibble(i)) * kernels::ref::e8m0_to_f32(scales.at(r, c)));
        }
      break;
    default: HIPPO_CHECK(false, "generate_tensor: FP4 rule on a non-FP4 tensor");
  }
  return out;
}

}  // namespace

std::vector<std::byte> generate_tensor(const TensorSpec& spec, uint64_t seed) {
  switch (spec.init.kind) {
    case InitRule::Kind::kUniform: return uniform_values(spec, seed);
    case InitRule::Kind::kFp8: return fp8_tensor(spec, seed);
    case InitRule::Kind::kFp4: return fp4_tensor(spec, seed);
  }
  return {};
}

}  // namespace hippo::engine
