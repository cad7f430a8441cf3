// Whole-tensor dequantisation against values computed by hand (dequant.h); the scalar decoders
// are tested in tests/kernels/numeric_formats_test.cpp.
#include "engine/weights/dequant.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

using namespace hippo::engine;

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
