// The QAT round trips as the reference computes them (docs/reference-model.md D6) and the storage
// layouts they encode into.
#include "engine/model/kv_formats.h"
#include "kernels/ref/numeric_formats.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

namespace hippo::engine {
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

}  // namespace
}  // namespace hippo::engine
