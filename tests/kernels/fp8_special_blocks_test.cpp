// The CPU backend's FP8 block marks (kernels/cpu/fp8_special_blocks.h): kept once per weight, found
// again for any view of its rows, never attached to a view they do not describe.
#include "kernels/cpu/fp8_special_blocks.h"
#include "kernels/cpu/linear.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

namespace kernels = hippo::kernels;
using kernels::WeightFormat;
using kernels::WeightView;

TEST_CASE("fp8 special blocks are kept once and found for every view of the weight's rows", "[linear]") {
  kernels::cpu::ThreadPool pool(2);
  const std::int64_t n = 80, k = 100, scale_cols = 4;  // 3 row blocks (the last partial), 4 column blocks
  std::vector<std::uint8_t> codes(static_cast<std::size_t>(n * k), 0x38), scales(3 * scale_cols, 127);
  codes[70 * k + 99] = 0x03;  // a subnormal: row block 2, column block 3
  codes[5 * k + 40] = 0x00;   // a zero: row block 0, column block 1
  const WeightView w{WeightFormat::kFp8Block, codes.data(), scales.data(), n, k, 32};
  kernels::cpu::Fp8SpecialBlocks blocks;
  CHECK(blocks.find(w).fp8_special_blocks == nullptr);
  REQUIRE(blocks.keep(w, pool));
  REQUIRE(blocks.keep(w, pool));  // kept already

  const WeightView whole = blocks.find(w);
  REQUIRE(whole.fp8_special_blocks != nullptr);
  std::vector<std::uint8_t> want(scales.size(), 0);
  want[1] = want[2 * scale_cols + 3] = 1;
  CHECK(std::memcmp(whole.fp8_special_blocks, want.data(), want.size()) == 0);
  const WeightView tail = blocks.find(kernels::weight_rows(w, 64, 16));
  CHECK(tail.fp8_special_blocks == whole.fp8_special_blocks + 2 * scale_cols);

  // Views the marks do not describe come back as they were.
  WeightView other_shape = w;
  other_shape.cols = 64;
  CHECK(blocks.find(other_shape).fp8_special_blocks == nullptr);
  const std::vector<std::uint8_t> other_scales(scales);
  WeightView elsewhere = w;
  elsewhere.scales = other_scales.data();
  CHECK(blocks.find(elsewhere).fp8_special_blocks == nullptr);
  const WeightView fp4{WeightFormat::kFp4Row32, codes.data(), scales.data(), 2, 64, 0};
  CHECK_FALSE(blocks.keep(fp4, pool));
  CHECK(blocks.find(fp4).fp8_special_blocks == nullptr);

  // Marked or not, the same bits.
  std::vector<float> x(static_cast<std::size_t>(k)), plain(static_cast<std::size_t>(n)), marked(plain.size());
  for (std::int64_t c = 0; c < k; ++c) x[static_cast<std::size_t>(c)] = static_cast<float>(c % 7) - 3.0f;
  for (const std::string& isa : kernels::cpu::runnable_linear_isas()) {
    INFO(isa);
    REQUIRE(kernels::cpu::linear_with_isa(isa, x.data(), 1, w, plain.data(), pool).ok());
    REQUIRE(kernels::cpu::linear_with_isa(isa, x.data(), 1, whole, marked.data(), pool).ok());
    CHECK(std::memcmp(plain.data(), marked.data(), plain.size() * sizeof(float)) == 0);
  }
}
