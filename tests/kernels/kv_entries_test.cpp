// The QAT round trips as the reference computes them (docs/reference-model.md D6) and the storage
// layouts they encode into.
#include "kernels/cpu/kv_entries.h"
#include "kernels/ref/numeric_formats.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace hippo::kernels::cpu {
namespace {

using kernels::ref::e4m3fn_to_f32;
using kernels::ref::f32_to_e4m3fn;

TEST_CASE("f32_to_e4m3fn rounds to nearest even and inverts the decoder", "[kv]") {
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7F) == 0x7F) continue;  // NaN
    const float value = e4m3fn_to_f32(static_cast<std::uint8_t>(code));
    const std::uint8_t back = f32_to_e4m3fn(value);
    CHECK(e4m3fn_to_f32(back) == value);
  }
  CHECK(e4m3fn_to_f32(f32_to_e4m3fn(1.0625f)) == 1.0f);    // halfway between 1 and 1.125: even
  CHECK(e4m3fn_to_f32(f32_to_e4m3fn(1.1875f)) == 1.25f);   // halfway between 1.125 and 1.25: even
  CHECK(e4m3fn_to_f32(f32_to_e4m3fn(0x1p-10f)) == 0.0f);   // half the smallest subnormal: even (0)
  CHECK(e4m3fn_to_f32(f32_to_e4m3fn(3 * 0x1p-10f)) == 0x1p-8f);
  CHECK(e4m3fn_to_f32(f32_to_e4m3fn(-448.0f)) == -448.0f);
  CHECK(e4m3fn_to_f32(f32_to_e4m3fn(0x1.ep-7f)) == 0x1p-6f);  // 0.9375 * 2^-6 rounds up to the smallest normal
}

TEST_CASE("window entries are FP8 with power-of-two scales per 32", "[kv]") {
  std::vector<float> x(64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(static_cast<double>(i))) * 3.0f;
  std::vector<std::uint8_t> bytes(static_cast<size_t>(window_entry_bytes(64)));
  encode_window_entry(x.data(), 64, bytes.data());
  std::vector<float> y(64);
  decode_window_entry(bytes.data(), 64, y.data());
  for (size_t i = 0; i < x.size(); ++i) CHECK(std::fabs(y[i] - x[i]) <= std::fabs(x[i]) / 16 + 1e-6);
  // amax 3 -> scale 2^ceil(log2(3/448)) = 2^-7 -> byte 120.
  CHECK(bytes[64] == 120);
  // Re-encoding the decoded values gives the same bytes: the state is exactly "code x scale".
  std::vector<std::uint8_t> again(bytes.size());
  encode_window_entry(y.data(), 64, again.data());
  CHECK(again == bytes);
}

TEST_CASE("compressed entries are FP4 with E4M3 scales per 16 and RNE ties on codes", "[kv]") {
  std::vector<float> x(16, 0.0f);
  x[0] = 6.0f;     // amax 6 -> scale e4m3(1.0) = 1
  x[1] = 0.25f;    // tie between 0 and 0.5 -> 0 (even code)
  x[2] = 0.75f;    // tie between 0.5 and 1 -> 1 (even code 2)
  x[3] = -2.5f;    // tie between 2 and 3 -> 2
  x[4] = 3.5f;     // tie between 3 and 4 -> 4
  x[5] = 5.0f;     // tie between 4 and 6 -> 4
  x[6] = 1.25f;    // tie between 1 and 1.5 -> 1
  std::vector<std::uint8_t> bytes(static_cast<size_t>(compressed_entry_bytes(16)));
  encode_compressed_entry(x.data(), 16, bytes.data());
  std::vector<float> y(16);
  decode_compressed_entry(bytes.data(), 16, y.data());
  CHECK(y[0] == 6.0f);
  CHECK(y[1] == 0.0f);
  CHECK(y[2] == 1.0f);
  CHECK(y[3] == -2.0f);
  CHECK(y[4] == 4.0f);
  CHECK(y[5] == 4.0f);
  CHECK(y[6] == 1.0f);
  CHECK(bytes[0] == (0x7 | (0x0 << 4)));  // even element in the low nibble
}

TEST_CASE("index keys and queries share the FP4 power-of-two round trip", "[kv]") {
  std::vector<float> x(32);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) - 10.0f;  // amax 21 -> scale 4
  std::vector<float> q = x;
  fp4_ue8m0_round_trip(q.data(), 32);
  std::vector<std::uint8_t> bytes(static_cast<size_t>(index_entry_bytes(32)));
  encode_index_entry(x.data(), 32, bytes.data());
  std::vector<float> k(32);
  decode_index_entry(bytes.data(), 32, k.data());
  CHECK(k == q);
  CHECK(bytes[16] == 127 + 2);
  CHECK(k[31] == 24.0f);  // 21 / 4 = 5.25 -> 6 x 4
}

// The FP4 power-of-two encoder written as the reference states it: divide by the scale, then count
// the E2M1 boundaries passed (ties to the even code).
std::vector<std::uint8_t> reference_fp4_ue8m0(const std::vector<float>& x) {
  const int64_t dim = static_cast<int64_t>(x.size());
  std::vector<std::uint8_t> out(static_cast<size_t>(index_entry_bytes(dim)), 0);
  for (int64_t b = 0; b < dim / 32; ++b) {
    float amax = 0.0f;
    for (int64_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[static_cast<size_t>(b * 32 + i)]));
    amax = std::max(amax, 6.0f * 0x1p-126f);
    const int exponent = static_cast<int>(std::ceil(std::log2(static_cast<double>(amax / 6.0f))));
    out[static_cast<size_t>(dim / 2 + b)] = static_cast<std::uint8_t>(exponent + 127);
    const float scale = std::ldexp(1.0f, exponent);
    for (int64_t i = 0; i < 32; ++i) {
      const float q = std::clamp(x[static_cast<size_t>(b * 32 + i)] / scale, -6.0f, 6.0f);
      static constexpr float kBoundaries[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
      std::uint8_t code = 0;
      for (int k = 0; k < 7; ++k) code = static_cast<std::uint8_t>(code + ((k % 2 == 1) ? std::fabs(q) >= kBoundaries[k] : std::fabs(q) > kBoundaries[k]));
      if (std::signbit(q)) code |= 0x8;
      const size_t e = static_cast<size_t>(b * 32 + i);
      out[e / 2] = static_cast<std::uint8_t>(out[e / 2] | (e % 2 == 0 ? code : code << 4));
    }
  }
  return out;
}

TEST_CASE("the FP4 power-of-two encoder and round trip agree with the reference's division on awkward values", "[kv]") {
  // Ties on every E2M1 boundary at several scales, signed zeros, tiny and huge blocks, and noise.
  std::vector<std::vector<float>> blocks;
  for (float scale : {0x1p-126f, 0x1p-60f, 0.5f, 1.0f, 4.0f, 0x1p100f}) {
    std::vector<float> x;
    for (float v : {0.0f, -0.0f, 0.25f, -0.25f, 0.75f, 1.25f, -1.75f, 2.5f, 3.5f, -5.0f, 6.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f}) {
      x.push_back(v * scale);
      x.push_back(std::nextafter(v * scale, 1e30f));
    }
    blocks.push_back(x);
  }
  blocks.push_back(blocks[2]);  // NaNs take code 0 with their sign bit and do not count for the scale
  blocks.back()[3] = std::numeric_limits<float>::quiet_NaN();
  blocks.back()[4] = -std::numeric_limits<float>::quiet_NaN();
  uint32_t seed = 7;
  for (int n = 0; n < 200; ++n) {
    std::vector<float> x(64);
    const float magnitude = std::ldexp(1.0f, n % 40 - 20);
    for (float& v : x) {
      seed = seed * 1664525u + 1013904223u;
      v = (static_cast<float>(seed >> 8) / 16777216.0f - 0.5f) * magnitude;
    }
    blocks.push_back(x);
  }
  for (const std::vector<float>& x : blocks) {
    const int64_t dim = static_cast<int64_t>(x.size());
    std::vector<std::uint8_t> bytes(static_cast<size_t>(index_entry_bytes(dim)));
    encode_index_entry(x.data(), dim, bytes.data());
    CHECK(bytes == reference_fp4_ue8m0(x));
    std::vector<float> decoded(x.size()), round_trip = x;
    decode_index_entry(bytes.data(), dim, decoded.data());
    fp4_ue8m0_round_trip(round_trip.data(), dim);
    for (size_t i = 0; i < x.size(); ++i) {
      INFO("x " << x[i]);
      CHECK(std::memcmp(&decoded[i], &round_trip[i], sizeof(float)) == 0);
    }
  }
}

}  // namespace
}  // namespace hippo::kernels::cpu
