#include "kernels/cpu/kv_entries.h"

#include "kernels/ref/numeric_formats.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

namespace hippo::kernels::cpu {
namespace {

using ref::e2m1_to_f32;
using ref::e4m3fn_to_f32;
using ref::e8m0_to_f32;
using ref::f32_to_e4m3fn;

constexpr float kFp8Max = 448.0f;
constexpr float kFp4Max = 6.0f;

// Decoding runs for every entry attention or the indexer reads: table lookups instead of the
// reference decoders' ldexp (the tables are built from those decoders, so the values are the same).
struct DecodeTables {
  float e4m3[256];
  float e2m1[16];
  float e8m0[256];
  DecodeTables() {
    for (int i = 0; i < 256; ++i) {
      e4m3[i] = e4m3fn_to_f32(static_cast<std::uint8_t>(i));
      e8m0[i] = e8m0_to_f32(static_cast<std::uint8_t>(i));
    }
    for (int i = 0; i < 16; ++i) e2m1[i] = e2m1_to_f32(static_cast<std::uint8_t>(i));
  }
};
const DecodeTables kTables;

// E2M1 codes (two per byte, even element low) times one scale byte per block, decoded through
// `scale_table` (E4M3 for compressed KV, UE8M0 for index keys). The scales follow the codes.
void decode_fp4(const std::uint8_t* in, int64_t dim, int64_t block, const float* scale_table, float* x) {
  const std::uint8_t* scales = in + dim / 2;
  for (int64_t b = 0; b < dim / block; ++b) {
    const float scale = scale_table[scales[b]];
    for (int64_t i = b * block; i < (b + 1) * block; i += 2) {
      const std::uint8_t byte = in[i / 2];
      x[i] = kTables.e2m1[byte & 0xF] * scale;
      x[i + 1] = kTables.e2m1[byte >> 4] * scale;
    }
  }
}

float block_amax(const float* x, int64_t n) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  return amax;
}

// The UE8M0 byte of 2^ceil(log2(t)) for t > 0, from t's bits as the reference computes it: the
// exponent field minus 127, plus one if any mantissa bit is set.
std::uint8_t pow2_ceil_e8m0(float t) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(t);
  const int exponent = static_cast<int>((bits >> 23) & 0xFF) - 127 + ((bits & 0x7FFFFF) != 0 ? 1 : 0);
  return static_cast<std::uint8_t>(exponent + 127);
}

// Round-to-nearest-even onto the E2M1 magnitude grid {0, .5, 1, 1.5, 2, 3, 4, 6} of a value already
// clamped to ±6; the sign goes to bit 3 (also for -0). Ties at the boundaries between an even and an
// odd code go to the even code. Branch-free, so that loops over a block vectorise.
std::uint8_t e2m1_code(float q) {
  const float magnitude = std::fabs(q);
  const int code = static_cast<int>(magnitude > 0.25f) + static_cast<int>(magnitude >= 0.75f) +
                   static_cast<int>(magnitude > 1.25f) + static_cast<int>(magnitude >= 1.75f) +
                   static_cast<int>(magnitude > 2.5f) + static_cast<int>(magnitude >= 3.5f) +
                   static_cast<int>(magnitude > 5.0f);
  return static_cast<std::uint8_t>(code | (std::signbit(q) ? 0x8 : 0x0));
}

void put_nibble(std::uint8_t* packed, int64_t i, std::uint8_t code) {
  if (i % 2 == 0)
    packed[i / 2] = code;
  else
    packed[i / 2] = static_cast<std::uint8_t>(packed[i / 2] | (code << 4));
}

using F4 = float __attribute__((vector_size(16)));
using I4 = std::int32_t __attribute__((vector_size(16)));
using U4 = std::uint32_t __attribute__((vector_size(16)));

// One block of the FP4 power-of-two format: the scale byte and the E2M1 codes of kIndexScaleBlock
// values, four at a time with e2m1_code's comparisons and std::clamp's (a NaN passes through). The
// scale is a power of two in [2^-126, 2^126], so multiplying by its reciprocal (exact) rounds
// exactly as dividing by it.
std::uint8_t fp4_ue8m0_block(const float* block, std::uint8_t* code) {
  const float amax = std::max(block_amax(block, kIndexScaleBlock), kFp4Max * 0x1p-126f);
  const std::uint8_t scale_byte = pow2_ceil_e8m0(amax * (1.0f / kFp4Max));
  const float inverse = 1.0f / kTables.e8m0[scale_byte];
  const F4 lo = {-kFp4Max, -kFp4Max, -kFp4Max, -kFp4Max}, hi = -lo;
  for (int64_t i = 0; i < kIndexScaleBlock; i += 4) {
    F4 v;
    std::memcpy(&v, block + i, sizeof v);
    v *= inverse;
    v = v < lo ? lo : v;
    v = hi < v ? hi : v;
    const U4 bits = std::bit_cast<U4>(v);
    const F4 m = std::bit_cast<F4>(bits & 0x7FFFFFFFu);
    const I4 count = (m > 0.25f) + (m >= 0.75f) + (m > 1.25f) + (m >= 1.75f) + (m > 2.5f) + (m >= 3.5f) + (m > 5.0f);
    const U4 c = std::bit_cast<U4>(-count) | ((bits >> 28) & 8u);  // comparisons give -1 for true
    for (int64_t k = 0; k < 4; ++k) code[i + k] = static_cast<std::uint8_t>(c[k]);
  }
  return scale_byte;
}

// FP4 with power-of-two scales per 32: writes codes and scale bytes.
void encode_fp4_ue8m0(const float* x, int64_t dim, std::uint8_t* codes, std::uint8_t* scales) {
  for (int64_t b = 0; b < dim / kIndexScaleBlock; ++b) {
    std::uint8_t code[kIndexScaleBlock];
    scales[b] = fp4_ue8m0_block(x + b * kIndexScaleBlock, code);
    std::uint8_t* packed = codes + b * kIndexScaleBlock / 2;
    for (int64_t i = 0; i < kIndexScaleBlock / 2; ++i) packed[i] = static_cast<std::uint8_t>(code[2 * i] | (code[2 * i + 1] << 4));
  }
}

}  // namespace

void encode_window_entry(const float* x, int64_t dim, std::uint8_t* out) {
  std::uint8_t* scales = out + dim;
  for (int64_t b = 0; b < dim / kWindowScaleBlock; ++b) {
    const float* block = x + b * kWindowScaleBlock;
    const float amax = std::max(block_amax(block, kWindowScaleBlock), 1e-4f);
    const std::uint8_t scale_byte = pow2_ceil_e8m0(amax * (1.0f / kFp8Max));
    const float scale = e8m0_to_f32(scale_byte);
    scales[b] = scale_byte;
    for (int64_t i = 0; i < kWindowScaleBlock; ++i) {
      out[b * kWindowScaleBlock + i] = f32_to_e4m3fn(std::clamp(block[i] / scale, -kFp8Max, kFp8Max));
    }
  }
}

void decode_window_entry(const std::uint8_t* in, int64_t dim, float* x) {
  const std::uint8_t* scales = in + dim;
  for (int64_t b = 0; b < dim / kWindowScaleBlock; ++b) {
    const float scale = kTables.e8m0[scales[b]];
    for (int64_t i = b * kWindowScaleBlock; i < (b + 1) * kWindowScaleBlock; ++i) x[i] = kTables.e4m3[in[i]] * scale;
  }
}

void encode_compressed_entry(const float* x, int64_t dim, std::uint8_t* out) {
  std::uint8_t* scales = out + dim / 2;
  for (int64_t b = 0; b < dim / kCompressedScaleBlock; ++b) {
    const float* block = x + b * kCompressedScaleBlock;
    const float amax = std::max(block_amax(block, kCompressedScaleBlock), kFp4Max * 0x1p-9f);
    const std::uint8_t scale_byte = f32_to_e4m3fn(amax / kFp4Max);
    const float scale = e4m3fn_to_f32(scale_byte);
    scales[b] = scale_byte;
    for (int64_t i = 0; i < kCompressedScaleBlock; ++i) {
      const float q = std::clamp(block[i] / scale, -kFp4Max, kFp4Max);
      put_nibble(out, b * kCompressedScaleBlock + i, e2m1_code(q));
    }
  }
}

void decode_compressed_entry(const std::uint8_t* in, int64_t dim, float* x) {
  decode_fp4(in, dim, kCompressedScaleBlock, kTables.e4m3, x);
}

void encode_index_entry(const float* x, int64_t dim, std::uint8_t* out) {
  encode_fp4_ue8m0(x, dim, out, out + dim / 2);
}

void decode_index_entry(const std::uint8_t* in, int64_t dim, float* x) {
  decode_fp4(in, dim, kIndexScaleBlock, kTables.e8m0, x);
}

void fp4_ue8m0_round_trip(float* x, int64_t dim) {  // decode(encode(x)) without the bytes
  for (int64_t b = 0; b < dim / kIndexScaleBlock; ++b) {
    float* block = x + b * kIndexScaleBlock;
    std::uint8_t code[kIndexScaleBlock];
    const float scale = kTables.e8m0[fp4_ue8m0_block(block, code)];
    for (int64_t i = 0; i < kIndexScaleBlock; ++i) block[i] = kTables.e2m1[code[i]] * scale;
  }
}

}  // namespace hippo::kernels::cpu
