// The scalar decoders against values computed by hand from the format definitions (dequant.h).
#include "engine/weights/dequant.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

using namespace hippo::engine;

TEST_CASE("E4M3 codes decode exactly", "[dequant]") {
  CHECK(e4m3_to_float(0x00) == 0.0f);
  CHECK(std::signbit(e4m3_to_float(0x80)));
  CHECK(e4m3_to_float(0x38) == 1.0f);          // e = 7, m = 0
  CHECK(e4m3_to_float(0x39) == 1.125f);        // 1 + 1/8
  CHECK(e4m3_to_float(0x40) == 2.0f);          // e = 8
  CHECK(e4m3_to_float(0xC4) == -3.0f);         // sign, e = 8, m = 4: -(1 + 4/8) * 2
  CHECK(e4m3_to_float(0x7E) == 448.0f);        // max: e = 15, m = 6: 1.75 * 2^8
  CHECK(e4m3_to_float(0xFE) == -448.0f);
  CHECK(e4m3_to_float(0x08) == 0.015625f);     // smallest normal 2^-6
  CHECK(e4m3_to_float(0x01) == 0.001953125f);  // smallest subnormal 2^-9
  CHECK(e4m3_to_float(0x07) == 7.0f / 512);    // largest subnormal 7 * 2^-9
  CHECK(std::isnan(e4m3_to_float(0x7F)));
  CHECK(std::isnan(e4m3_to_float(0xFF)));
  CHECK(e4m3_to_float(0x78) == 256.0f);        // e = 15, m = 0 is a number in e4m3fn
}

TEST_CASE("E8M0 scales are powers of two", "[dequant]") {
  CHECK(e8m0_to_float(127) == 1.0f);
  CHECK(e8m0_to_float(128) == 2.0f);
  CHECK(e8m0_to_float(120) == 1.0f / 128);
  CHECK(e8m0_to_float(254) == std::ldexp(1.0f, 127));
  CHECK(e8m0_to_float(0) == std::ldexp(1.0f, -127));  // a float subnormal, still exact
  CHECK(e8m0_to_float(0) > 0.0f);
  CHECK(std::isnan(e8m0_to_float(255)));
}

TEST_CASE("E2M1 nibbles decode to the eight magnitudes with a sign bit", "[dequant]") {
  const float expected[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (uint8_t code = 0; code < 8; ++code) {
    CHECK(e2m1_to_float(code) == expected[code]);
    CHECK(e2m1_to_float(static_cast<uint8_t>(code | 0x8)) == -expected[code]);
  }
  CHECK(e2m1_to_float(0xF7) == 6.0f);  // only the low nibble counts
}

TEST_CASE("BF16 conversions round to nearest even", "[dequant]") {
  CHECK(bf16_to_float(0x3F80) == 1.0f);
  CHECK(bf16_to_float(0xC040) == -3.0f);
  CHECK(float_to_bf16(1.0f) == 0x3F80);
  CHECK(float_to_bf16(1.0f + 1.0f / 256) == 0x3F80);          // exactly half an ulp: ties to even (down)
  CHECK(float_to_bf16(1.0f + 3.0f / 256) == 0x3F82);          // 1.5 ulp: ties to even (up)
  CHECK(float_to_bf16(1.0f + 1.0f / 256 + 1.0f / 65536) == 0x3F81);  // above half: up
  CHECK(std::isnan(bf16_to_float(float_to_bf16(NAN))));
}

TEST_CASE("FP8 block dequantisation applies the scale of each block", "[dequant]") {
  // A 3 x 5 matrix in blocks of 2 x 2: scales [2, 3], the last row and column blocks partial.
  const std::vector<uint8_t> codes(15, 0x38);  // all 1.0
  const std::vector<uint8_t> scales = {127, 128, 129,   // 1, 2, 4 for rows 0-1
                                       126, 125, 124};  // 1/2, 1/4, 1/8 for row 2
  std::vector<float> out(15);
  dequantize_fp8(codes, scales, 3, 5, 2, 2, out);
  const std::vector<float> expected = {1, 1, 2, 2, 4,  //
                                       1, 1, 2, 2, 4,  //
                                       0.5f, 0.5f, 0.25f, 0.25f, 0.125f};
  CHECK(out == expected);
  // One code that is not 1: -3 * 2 at (1, 3).
  std::vector<uint8_t> one = codes;
  one[1 * 5 + 3] = 0xC4;
  dequantize_fp8(one, scales, 3, 5, 2, 2, out);
  CHECK(out[8] == -6.0f);
}

TEST_CASE("FP4 dequantisation reads the even element from the low nibble", "[dequant]") {
  // One row of 64 elements: two blocks of 32 with scales 2^0 and 2^-1.
  std::vector<uint8_t> packed(32, 0x00);
  packed[0] = 0x71;   // element 0 = code 1 (0.5), element 1 = code 7 (6)
  packed[1] = 0xA9;   // element 2 = code 9 (-0.5), element 3 = code 10 (-1)
  packed[16] = 0x5C;  // element 32 = code 12 (-2), element 33 = code 5 (3); block scale 1/2
  const std::vector<uint8_t> scales = {127, 126};
  std::vector<float> out(64);
  dequantize_fp4(packed, scales, 1, 64, out);
  CHECK(out[0] == 0.5f);
  CHECK(out[1] == 6.0f);
  CHECK(out[2] == -0.5f);
  CHECK(out[3] == -1.0f);
  CHECK(out[4] == 0.0f);
  CHECK(out[32] == -1.0f);
  CHECK(out[33] == 1.5f);
}
