#include "kernels/ref/numeric_formats.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace hippo::kernels::ref;

TEST_CASE("bf16 is the upper half of a float, and encoding rounds to nearest even", "[formats]") {
  CHECK(bf16_to_f32(0x3F80) == 1.0f);
  CHECK(bf16_to_f32(0xC040) == -3.0f);
  CHECK(bf16_to_f32(0x0000) == 0.0f);
  CHECK(std::isinf(bf16_to_f32(0x7F80)));
  CHECK(f32_to_bf16(1.0f) == 0x3F80);
  CHECK(f32_to_bf16(1.0f + 1.0f / 256) == 0x3F80);                    // exactly half an ulp: ties to even (down)
  CHECK(f32_to_bf16(1.0f + 3.0f / 256) == 0x3F82);                    // 1.5 ulp: ties to even (up)
  CHECK(f32_to_bf16(1.0f + 1.0f / 256 + 1.0f / 65536) == 0x3F81);     // above half: up
  CHECK(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
}

TEST_CASE("e8m0 is 2^(byte-127), 255 is NaN", "[formats]") {
  CHECK(e8m0_to_f32(127) == 1.0f);
  CHECK(e8m0_to_f32(128) == 2.0f);
  CHECK(e8m0_to_f32(120) == 1.0f / 128);
  CHECK(e8m0_to_f32(254) == std::ldexp(1.0f, 127));
  CHECK(e8m0_to_f32(0) == std::ldexp(1.0f, -127));
  CHECK(e8m0_to_f32(0) > 0.0f);
  CHECK(std::isnan(e8m0_to_f32(255)));
}

TEST_CASE("e4m3fn decodes normals, subnormals, the maximum and NaN", "[formats]") {
  CHECK(e4m3fn_to_f32(0x00) == 0.0f);
  CHECK(std::signbit(e4m3fn_to_f32(0x80)));
  CHECK(e4m3fn_to_f32(0x38) == 1.0f);           // e=7, m=0
  CHECK(e4m3fn_to_f32(0x3C) == 1.5f);           // e=7, m=4
  CHECK(e4m3fn_to_f32(0xC0) == -2.0f);          // sign, e=8
  CHECK(e4m3fn_to_f32(0x39) == 1.125f);         // 1 + 1/8
  CHECK(e4m3fn_to_f32(0xC4) == -3.0f);          // sign, e=8, m=4: -(1 + 4/8) * 2
  CHECK(e4m3fn_to_f32(0x78) == 256.0f);         // e=15, m=0 is a number in e4m3fn
  CHECK(e4m3fn_to_f32(0xFE) == -448.0f);
  CHECK(e4m3fn_to_f32(0x7E) == 448.0f);         // largest finite
  CHECK(e4m3fn_to_f32(0x01) == std::ldexp(1.0f, -9));  // smallest subnormal: 1/8 * 2^-6
  CHECK(e4m3fn_to_f32(0x07) == 7 * std::ldexp(1.0f, -9));
  CHECK(e4m3fn_to_f32(0x08) == std::ldexp(1.0f, -6));  // smallest normal
  CHECK(std::isnan(e4m3fn_to_f32(0x7F)));
  CHECK(std::isnan(e4m3fn_to_f32(0xFF)));
  // Monotone over the positive codes: each code decodes above the one before.
  for (int b = 1; b < 0x7F; ++b)
    CHECK(e4m3fn_to_f32(static_cast<std::uint8_t>(b)) > e4m3fn_to_f32(static_cast<std::uint8_t>(b - 1)));
}

TEST_CASE("e2m1 decodes the eight magnitudes with a sign bit", "[formats]") {
  const float expected[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (std::uint8_t code = 0; code < 8; ++code) {
    CHECK(e2m1_to_f32(code) == expected[code]);
    CHECK(e2m1_to_f32(static_cast<std::uint8_t>(code | 8)) == -expected[code]);
  }
  CHECK(e2m1_to_f32(0xF7) == 6.0f);  // only the low nibble counts
}
