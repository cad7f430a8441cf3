// The CPU linear layer against kernels/ref for every weight format, over shapes that exercise
// every tail (k not a multiple of the vector width or the FP8 block, m and n not multiples of the
// tile), plus the bit-exactness invariant of kernels/cpu/linear.h.
#include "kernels/cpu/linear.h"
#include "kernels/ref/linear_ref.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace kernels = hippo::kernels;
using kernels::WeightFormat;
using kernels::WeightView;

namespace {

const WeightFormat kFormats[] = {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kFp8Block,
                                 WeightFormat::kFp4Row32};

// Owns the bytes behind a WeightView with random but valid contents.
struct TestWeight {
  std::vector<std::uint8_t> data, scales;
  WeightView view;

  TestWeight(WeightFormat format, std::int64_t rows, std::int64_t cols, std::mt19937& rng, std::int64_t block = 32) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_int_distribution<int> byte(0, 255), scale_byte(120, 130);
    view = {format, nullptr, nullptr, rows, cols, block};
    switch (format) {
      case WeightFormat::kF32:
      case WeightFormat::kBF16: {
        const std::size_t n = static_cast<std::size_t>(rows * cols);
        std::vector<float> values(n);
        for (auto& v : values) v = normal(rng);
        if (format == WeightFormat::kF32) {
          data.resize(n * 4);
          std::memcpy(data.data(), values.data(), n * 4);
        } else {
          data.resize(n * 2);
          for (std::size_t i = 0; i < n; ++i) {
            std::uint32_t bits;
            std::memcpy(&bits, &values[i], 4);
            auto half = static_cast<std::uint16_t>(bits >> 16);
            std::memcpy(&data[2 * i], &half, 2);
          }
        }
        break;
      }
      case WeightFormat::kFp8Block: {
        data.resize(static_cast<std::size_t>(rows * cols));
        for (auto& b : data) {
          do b = static_cast<std::uint8_t>(byte(rng));
          while ((b & 0x7F) == 0x7F);  // no NaN codes in a valid checkpoint
        }
        scales.resize(static_cast<std::size_t>(((rows + block - 1) / block) * ((cols + block - 1) / block)));
        break;
      }
      case WeightFormat::kFp4Row32:
        data.resize(static_cast<std::size_t>(rows * cols / 2));
        for (auto& b : data) b = static_cast<std::uint8_t>(byte(rng));
        scales.resize(static_cast<std::size_t>(rows * cols / 32));
        break;
    }
    for (auto& s : scales) s = static_cast<std::uint8_t>(scale_byte(rng));
    view.data = data.data();
    view.scales = scales.empty() ? nullptr : scales.data();
  }
};

std::vector<float> random_x(std::int64_t m, std::int64_t k, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(m * k));
  for (auto& v : x) v = normal(rng);
  return x;
}

// max |cpu - ref| / (sum |x_i w_i| + tiny): the error relative to the size of the terms.
double normalised_error(const std::vector<float>& x, const TestWeight& w, std::int64_t m, const std::vector<float>& got,
                        const std::vector<float>& want) {
  double worst = 0;
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t r = 0; r < w.view.rows; ++r) {
      double magnitude = 1e-30;
      for (std::int64_t c = 0; c < w.view.cols; ++c)
        magnitude += std::fabs(double{x[i * w.view.cols + c]} * kernels::ref::weight_at(w.view, r, c));
      const std::size_t at = static_cast<std::size_t>(i * w.view.rows + r);
      worst = std::max(worst, std::fabs(double{got[at]} - want[at]) / magnitude);
    }
  return worst;
}

}  // namespace

TEST_CASE("cpu linear matches the reference for every format, every tail and every runnable ISA", "[linear]") {
  std::mt19937 rng(42);
  kernels::cpu::ThreadPool pool(3);
  const auto isas = kernels::cpu::runnable_linear_isas();
  REQUIRE(isas.back() == "generic");
  for (WeightFormat format : kFormats) {
    for (std::int64_t k : {32, 64, 96, 160, 544}) {
      for (std::int64_t n : {1, 3, 4, 9, 33}) {
        for (std::int64_t m : {1, 2, 5, 8}) {
          if (format == WeightFormat::kFp8Block && k == 32 && n == 1) continue;  // covered by larger cases
          TestWeight w(format, n, k, rng);
          REQUIRE(w.view.validate().ok());
          auto x = random_x(m, k, rng);
          std::vector<float> got(static_cast<std::size_t>(m * n)), want(got.size());
          kernels::ref::linear(x.data(), m, w.view, want.data());
          for (const std::string& isa : isas) {
            REQUIRE(kernels::cpu::linear_with_isa(isa, x.data(), m, w.view, got.data(), pool).ok());
            INFO(isa << " " << kernels::weight_format_name(format) << " m=" << m << " n=" << n << " k=" << k);
            // fp32 accumulation of k terms: a few ulp per term at most.
            CHECK(normalised_error(x, w, m, got, want) < 1e-6);
          }
        }
      }
    }
  }
}

TEST_CASE("fp8 weights with a block that does not divide the shape", "[linear]") {
  std::mt19937 rng(7);
  kernels::cpu::ThreadPool pool(2);
  TestWeight w(WeightFormat::kFp8Block, 45, 100, rng, 32);  // scales [2, 4], last blocks partial
  REQUIRE(w.scales.size() == 8);
  auto x = random_x(3, 100, rng);
  std::vector<float> got(3 * 45), want(3 * 45);
  kernels::cpu::linear(x.data(), 3, w.view, got.data(), pool);
  kernels::ref::linear(x.data(), 3, w.view, want.data());
  CHECK(normalised_error(x, w, 3, got, want) < 1e-6);
}

TEST_CASE("a row's result is bit-identical whatever the batch and the thread count", "[linear]") {
  std::mt19937 rng(3);
  const std::int64_t m = 11, n = 37, k = 544;
  TestWeight w(WeightFormat::kFp4Row32, n, k, rng);
  auto x = random_x(m, k, rng);
  kernels::cpu::ThreadPool pool1(1), pool4(4);
  std::vector<float> batch(static_cast<std::size_t>(m * n));
  kernels::cpu::linear(x.data(), m, w.view, batch.data(), pool4);
  for (std::int64_t i = 0; i < m; ++i) {
    std::vector<float> alone(static_cast<std::size_t>(n));
    kernels::cpu::linear(&x[i * k], 1, w.view, alone.data(), pool1);
    CHECK(std::memcmp(alone.data(), &batch[i * n], n * sizeof(float)) == 0);
  }
  // And a middle slice of the batch equals the same rows inside the full batch.
  std::vector<float> slice(static_cast<std::size_t>(5 * n));
  kernels::cpu::linear(&x[3 * k], 5, w.view, slice.data(), pool4);
  CHECK(std::memcmp(slice.data(), &batch[3 * n], slice.size() * sizeof(float)) == 0);
}

// The same for every ISA and format, over shapes that take every path: the decode kernel (m <= 8,
// a partial group of weight rows at the end; and in passes up to decode_passes_max: m = 12, 13, 19
// and 23 here), the prefill kernel's tiles and their leftover rows,
// k split into chunks with a zero-padded last step, partial panels, and rows of x split into
// blocks across threads (few panels, many rows).
TEST_CASE("the bit-identical invariant holds for every ISA, format and path", "[linear]") {
  std::mt19937 rng(11);
  kernels::cpu::ThreadPool pool1(1), pool2(2), pool3(3);
  struct Case {
    WeightFormat format;
    std::int64_t n, k, m;
  };
  const Case cases[] = {
      {WeightFormat::kF32, 37, 1101, 35},   {WeightFormat::kF32, 21, 300, 12},   {WeightFormat::kBF16, 131, 97, 23},
      {WeightFormat::kBF16, 9, 256, 100},   {WeightFormat::kFp8Block, 45, 1100, 19},
      {WeightFormat::kFp8Block, 33, 33, 70}, {WeightFormat::kFp4Row32, 200, 1088, 13},
      {WeightFormat::kFp4Row32, 5, 64, 97},
  };
  for (const Case& c : cases) {
    TestWeight w(c.format, c.n, c.k, rng);
    REQUIRE(w.view.validate().ok());
    const auto x = random_x(c.m, c.k, rng);
    for (const std::string& isa : kernels::cpu::runnable_linear_isas()) {
      INFO(isa << " " << kernels::weight_format_name(c.format) << " m=" << c.m << " n=" << c.n << " k=" << c.k);
      std::vector<float> batch(static_cast<std::size_t>(c.m * c.n)), other(batch.size());
      REQUIRE(kernels::cpu::linear_with_isa(isa, x.data(), c.m, w.view, batch.data(), pool3).ok());
      REQUIRE(kernels::cpu::linear_with_isa(isa, x.data(), c.m, w.view, other.data(), pool1).ok());
      CHECK(std::memcmp(batch.data(), other.data(), batch.size() * sizeof(float)) == 0);
      for (std::int64_t i = 0; i < c.m; ++i) {
        for (kernels::cpu::ThreadPool* pool : {&pool1, &pool2}) {
          std::vector<float> alone(static_cast<std::size_t>(c.n));
          REQUIRE(kernels::cpu::linear_with_isa(isa, &x[i * c.k], 1, w.view, alone.data(), *pool).ok());
          CHECK(std::memcmp(alone.data(), &batch[i * c.n], c.n * sizeof(float)) == 0);
        }
      }
      // Rows 2 .. m-3 alone: every row moves to another tile position.
      const std::int64_t rows = c.m - 5;
      std::vector<float> slice(static_cast<std::size_t>(rows * c.n));
      REQUIRE(kernels::cpu::linear_with_isa(isa, &x[2 * c.k], rows, w.view, slice.data(), pool2).ok());
      CHECK(std::memcmp(slice.data(), &batch[2 * c.n], slice.size() * sizeof(float)) == 0);
    }
  }
}

// Every height of the decode kernel (m = 1 .. 8: one pass over x's rows, or several over the same
// weight rows) and the first of the prefill kernel (m = 9) give each row what it gets alone.
TEST_CASE("the decode kernel's every height equals each row alone", "[linear]") {
  std::mt19937 rng(13);
  kernels::cpu::ThreadPool pool(2);
  for (WeightFormat format : kFormats) {
    // k over 2,048, as the model's projections have (eight rows of x then outgrow the L1), and
    // over 2,730, where three rows of x take AVX2's column blocks.
    const std::int64_t n = 29, k = format == WeightFormat::kFp4Row32 ? 2784 : 2771;
    TestWeight w(format, n, k, rng);
    const auto x = random_x(9, k, rng);
    for (const std::string& isa : kernels::cpu::runnable_linear_isas()) {
      std::vector<std::vector<float>> alone(9, std::vector<float>(static_cast<std::size_t>(n)));
      for (std::int64_t i = 0; i < 9; ++i)
        REQUIRE(kernels::cpu::linear_with_isa(isa, &x[i * k], 1, w.view, alone[i].data(), pool).ok());
      for (std::int64_t m = 2; m <= 9; ++m) {
        INFO(isa << " " << kernels::weight_format_name(format) << " m=" << m);
        std::vector<float> batch(static_cast<std::size_t>(m * n));
        REQUIRE(kernels::cpu::linear_with_isa(isa, x.data(), m, w.view, batch.data(), pool).ok());
        for (std::int64_t i = 0; i < m; ++i) CHECK(std::memcmp(alone[i].data(), &batch[i * n], n * sizeof(float)) == 0);
      }
    }
  }
}

// The instruction sets with FMA run the same chains and tree (linear.h), each its own decoders
// (AVX2's FP4 byte tables, AVX-512 VBMI's FP8 byte permutes): the same bits at every decode height
// and in the prefill kernel. (generic multiplies then adds, so its bits differ.)
TEST_CASE("every instruction set with FMA gives the same bits", "[linear]") {
  std::mt19937 rng(37);
  kernels::cpu::ThreadPool pool(2);
  std::vector<std::string> isas = kernels::cpu::runnable_linear_isas();
  isas.pop_back();  // generic
  for (WeightFormat format : kFormats) {
    const std::int64_t n = 37, k = format == WeightFormat::kFp4Row32 ? 2080 : 2083;
    TestWeight w(format, n, k, rng);
    const auto x = random_x(13, k, rng);
    for (std::int64_t m : {1, 2, 4, 7, 8, 13}) {
      std::vector<float> first(static_cast<std::size_t>(m * n)), other(first.size());
      for (std::size_t i = 0; i < isas.size(); ++i) {
        INFO(isas[i] << " against " << isas[0] << " " << kernels::weight_format_name(format) << " m=" << m);
        REQUIRE(kernels::cpu::linear_with_isa(isas[i], x.data(), m, w.view, (i == 0 ? first : other).data(), pool).ok());
        if (i > 0) CHECK(std::memcmp(first.data(), other.data(), first.size() * sizeof(float)) == 0);
      }
    }
  }
}

// The FP8 decode kernel's fast path takes neither NaN codes nor scales above 2^7 (their 2^120 * scale
// overflows); a group of rows with either is redone one value at a time. Both must still give
// ref's values, in the decode and the prefill kernel alike.
TEST_CASE("fp8 rows with NaN codes or scales above 2^7 decode as the reference does", "[linear]") {
  std::mt19937 rng(17);
  kernels::cpu::ThreadPool pool(2);
  const std::int64_t n = 40, k = 96;
  TestWeight w(WeightFormat::kFp8Block, n, k, rng);
  w.scales[1 * 3 + 0] = 140;  // rows 32..39, columns 0..31: a scale of 2^13
  w.scales[0 * 3 + 2] = 200;  // rows 0..31, columns 64..95: 2^73
  w.data[5 * k + 7] = 0x7F;   // row 5: NaN
  w.data[38 * k + 90] = 0xFF; // row 38: NaN
  for (const std::string& isa : kernels::cpu::runnable_linear_isas()) {
    for (std::int64_t m : {1, 3, 9, 56}) {  // 56: the prefill kernel (FP8's decode passes end at 48 rows)
      INFO(isa << " m=" << m);
      auto x = random_x(m, k, rng);
      std::vector<float> got(static_cast<std::size_t>(m * n)), want(got.size());
      REQUIRE(kernels::cpu::linear_with_isa(isa, x.data(), m, w.view, got.data(), pool).ok());
      kernels::ref::linear(x.data(), m, w.view, want.data());
      for (std::int64_t i = 0; i < m; ++i) {
        for (std::int64_t r = 0; r < n; ++r) {
          const float g = got[static_cast<std::size_t>(i * n + r)], v = want[static_cast<std::size_t>(i * n + r)];
          if (r == 5 || r == 38) {
            CHECK(std::isnan(g));
            continue;
          }
          double magnitude = 1e-30;
          for (std::int64_t c = 0; c < k; ++c) magnitude += std::fabs(double{x[i * k + c]} * kernels::ref::weight_at(w.view, r, c));
          CHECK(std::fabs(double{g} - v) / magnitude < 1e-6);
        }
      }
      std::vector<float> alone(static_cast<std::size_t>(n));
      REQUIRE(kernels::cpu::linear_with_isa(isa, &x[(m - 1) * k], 1, w.view, alone.data(), pool).ok());
      for (std::int64_t r = 0; r < n; ++r)
        if (r != 5 && r != 38) CHECK(alone[r] == got[static_cast<std::size_t>((m - 1) * n + r)]);
    }
  }
}

// The FP8 decode kernel multiplies the weights' codes (times 2^-120) with x times 2^120 times the
// block's scale, which is exact only while that product stays a normal float: x near either end of
// the float range, zeros of either sign, NaN and infinities, and scales from 2^-127 to 2^8 must
// give each row the bits the prefill kernel gives it (the batch of 56, past FP8's decode passes' 48
// rows; a NaN in x makes its row NaN).
TEST_CASE("fp8 decode equals the prefill kernel bit for bit with x at the ends of the float range", "[linear]") {
  std::mt19937 rng(19);
  kernels::cpu::ThreadPool pool(2);
  const std::int64_t n = 64, k = 1200;  // two row blocks, 38 column blocks (the last partial), a tail
  TestWeight w(WeightFormat::kFp8Block, n, k, rng);
  const std::uint8_t scales[] = {0, 1, 100, 127, 130, 134, 135};
  for (std::size_t b = 0; b < w.scales.size(); ++b) w.scales[b] = scales[b % std::size(scales)];
  const float ends[] = {3.0e38f, -1.0e30f, 7.0e20f, 1.0e-38f, -2.0e-40f, 1.0e-45f, 0.0f, -0.0f, 1.5f, -300.0f};
  constexpr std::int64_t kBatch = 56;
  auto x = random_x(kBatch, k, rng);
  for (std::int64_t i = 1; i < 9; ++i)  // row 0 and rows 9.. stay ordinary
    for (std::int64_t c = 0; c < k; ++c)
      if (c % i == 0) x[static_cast<std::size_t>(i * k + c)] = ends[(c + i) % std::size(ends)];
  x[7 * k + 3] = std::numeric_limits<float>::quiet_NaN();
  x[8 * k + 150] = std::numeric_limits<float>::infinity();
  for (const std::string& isa : kernels::cpu::runnable_linear_isas()) {
    std::vector<float> batch(static_cast<std::size_t>(kBatch * n));
    REQUIRE(kernels::cpu::linear_with_isa(isa, x.data(), kBatch, w.view, batch.data(), pool).ok());
    for (std::int64_t r = 0; r < n; ++r) CHECK(std::isnan(batch[static_cast<std::size_t>(7 * n + r)]));
    for (std::int64_t m : {1, 3, 8}) {
      for (std::int64_t i0 = 0; i0 + m <= 9; i0 += m) {
        INFO(isa << " m=" << m << " rows " << i0 << "..");
        std::vector<float> got(static_cast<std::size_t>(m * n));
        REQUIRE(kernels::cpu::linear_with_isa(isa, &x[i0 * k], m, w.view, got.data(), pool).ok());
        for (std::size_t at = 0; at < got.size(); ++at) {  // the same bits, or NaN in both (its sign may differ)
          const float want = batch[static_cast<std::size_t>(i0 * n) + at];
          if (std::isnan(want)) CHECK(std::isnan(got[at]));
          else CHECK(std::memcmp(&got[at], &want, sizeof want) == 0);
        }
      }
    }
  }
}

// x = the identity picks out single weights: y[c, r] = 0 + ... + 1 * W[r, c] + 0 + ..., exactly
// W[r, c], so each ISA's decoders (vectorised or not) must give kernels/ref's values bit for bit.
TEST_CASE("every ISA decodes every weight exactly", "[linear]") {
  std::mt19937 rng(5);
  kernels::cpu::ThreadPool pool(2);
  for (WeightFormat format : kFormats) {
    const std::int64_t n = 70, k = format == WeightFormat::kFp4Row32 ? 160 : 150;
    TestWeight w(format, n, k, rng);
    std::vector<float> eye(static_cast<std::size_t>(k * k), 0.0f), y(static_cast<std::size_t>(k * n));
    for (std::int64_t c = 0; c < k; ++c) eye[c * k + c] = 1.0f;
    for (const std::string& isa : kernels::cpu::runnable_linear_isas()) {
      INFO(isa << " " << kernels::weight_format_name(format));
      REQUIRE(kernels::cpu::linear_with_isa(isa, eye.data(), k, w.view, y.data(), pool).ok());
      std::int64_t wrong = 0;
      for (std::int64_t c = 0; c < k; ++c)
        for (std::int64_t r = 0; r < n; ++r)
          if (y[c * n + r] != kernels::ref::weight_at(w.view, r, c)) ++wrong;  // -0 == +0: the sum drops the sign
      CHECK(wrong == 0);
    }
  }
}

// The decode kernel's FP4 lookups (AVX-512's permutes of lane-order words, AVX2's byte tables of
// packed codes) at every scale byte the format has: x = eight unit rows picks out single weights,
// which must be kernels/ref's values bit for bit; the last row's scales 2^126 .. NaN give inf and
// NaN weights, whose products with x's zeros make that row NaN, as in ref::linear.
TEST_CASE("the fp4 decode gives every code at every scale as the reference does", "[linear]") {
  kernels::cpu::ThreadPool pool(2);
  const std::int64_t n = 32, k = 256;  // 32 rows x 8 scale blocks: every scale byte once at least
  std::vector<std::uint8_t> codes(static_cast<std::size_t>(n * k / 2)), scales(static_cast<std::size_t>(n * k / 32));
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t c = 0; c < k; c += 2)
      codes[r * k / 2 + c / 2] = static_cast<std::uint8_t>(((c + r) % 16) | ((c + r + 7) % 16) << 4);
  for (std::size_t i = 0; i < scales.size(); ++i) scales[i] = static_cast<std::uint8_t>(i);
  const WeightView packed{WeightFormat::kFp4Row32, codes.data(), scales.data(), n, k, 0};
  std::vector<std::uint8_t> lane_codes(codes.size());
  const WeightView lanes = kernels::fp4_to_lane_order(packed, lane_codes.data());
  std::vector<float> x(static_cast<std::size_t>(8 * k)), y(static_cast<std::size_t>(8 * n)), want(y.size());
  for (const std::string& isa : kernels::cpu::runnable_linear_isas()) {
    for (const WeightView& w : {packed, lanes}) {
      INFO(isa << (w.lane_order ? " lane order" : " packed"));
      std::int64_t wrong = 0, nan = 0;
      for (std::int64_t c0 = 0; c0 < k; c0 += 8) {
        std::fill(x.begin(), x.end(), 0.0f);
        for (std::int64_t i = 0; i < 8; ++i) x[i * k + c0 + i] = 1.0f;
        REQUIRE(kernels::cpu::linear_with_isa(isa, x.data(), 8, w, y.data(), pool).ok());
        kernels::ref::linear(x.data(), 8, packed, want.data());
        for (std::int64_t i = 0; i < 8; ++i)
          for (std::int64_t r = 0; r < n; ++r) {
            const float got = y[i * n + r], expected = want[i * n + r];
            if (r < n - 1 && expected != kernels::ref::weight_at(packed, r, c0 + i)) ++wrong;  // the test's own premise
            if (std::isnan(expected)) ++nan;
            if (std::isnan(expected) ? !std::isnan(got) : got != expected) ++wrong;
          }
      }
      CHECK(wrong == 0);
      CHECK(nan == 8 * k / 8);  // the last row, and only it
    }
  }
}

namespace {

// Normal E4M3 codes only (exponent 1..15, not NaN), both signs, every one of them in turn: the
// codes the FP8 byte table decodes (linear_impl.h's fp8_tile).
void fill_normal_fp8(std::vector<std::uint8_t>& codes) {
  for (std::size_t i = 0; i < codes.size(); ++i) {
    const auto magnitude = static_cast<std::uint8_t>(0x08 + (i * 7) % 0x77);  // 0x08 .. 0x7E
    codes[i] = static_cast<std::uint8_t>(magnitude | ((i / 3) % 2) << 7);
  }
}

}  // namespace

// The FP8 decode reads blocks of normal codes through a byte table (AVX2; AVX-512 for one or two
// rows of x) or straight into fp32 bits (AVX-512 past two) where the view marks the blocks that are
// not (zero, subnormals, NaN: WeightView::fp8_special_blocks); marked or not, every row must come
// out with the same bits, for every ISA and decode height, and every code exactly.
TEST_CASE("fp8 weights with their special blocks marked give the same bits", "[linear]") {
  std::mt19937 rng(41);
  kernels::cpu::ThreadPool pool(2);
  const std::int64_t n = 70, k = 2083;  // 3 row blocks (the last partial), 66 column blocks, a tail
  TestWeight w(WeightFormat::kFp8Block, n, k, rng);
  fill_normal_fp8(w.data);
  const std::int64_t scale_cols = 66;
  const struct {
    std::int64_t row, col;
    std::uint8_t code;
  } specials[] = {{3, 40, 0x00}, {40, 1000, 0x80}, {33, 70, 0x01}, {69, 2082, 0x87}, {10, 600, 0x7F}};
  for (const auto& s : specials) w.data[static_cast<std::size_t>(s.row * k + s.col)] = s.code;
  std::vector<std::uint8_t> marks(w.scales.size(), 0xAA);
  kernels::mark_fp8_special_blocks(w.view, 0, 32, marks.data());
  kernels::mark_fp8_special_blocks(w.view, 32, n - 32, marks.data());
  std::vector<std::uint8_t> want_marks(w.scales.size(), 0);
  for (const auto& s : specials)
    want_marks[static_cast<std::size_t>(s.row / 32 * scale_cols + s.col / 32)] =
        (s.code & 0x7F) == 0x7F ? kernels::kFp8SpecialBlock | kernels::kFp8NanBlock : kernels::kFp8SpecialBlock;
  CHECK(marks == want_marks);
  WeightView marked = w.view;
  marked.fp8_special_blocks = marks.data();
  REQUIRE(marked.validate().ok());
  CHECK(kernels::weight_rows(marked, 32, 38).fp8_special_blocks == marks.data() + scale_cols);

  const auto x = random_x(56, k, rng);
  for (const std::string& isa : kernels::cpu::runnable_linear_isas())
    for (std::int64_t m : {1, 2, 3, 4, 8, 13, 56}) {  // 13: decode passes; 56: the prefill kernel
      INFO(isa << " m=" << m);
      std::vector<float> plain(static_cast<std::size_t>(m * n)), got(plain.size());
      REQUIRE(kernels::cpu::linear_with_isa(isa, x.data(), m, w.view, plain.data(), pool).ok());
      REQUIRE(kernels::cpu::linear_with_isa(isa, x.data(), m, marked, got.data(), pool).ok());
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t r = 0; r < n; ++r) {
          const std::size_t at = static_cast<std::size_t>(i * n + r);
          if (r == 10) CHECK(std::isnan(got[at]));  // its NaN code
          else CHECK(std::memcmp(&got[at], &plain[at], sizeof(float)) == 0);
        }
    }

  // x = unit rows picks out single weights: every normal code, at several scales, exactly.
  const std::int64_t kn = 40, kk = 192;
  TestWeight small(WeightFormat::kFp8Block, kn, kk, rng);
  fill_normal_fp8(small.data);
  std::vector<std::uint8_t> small_marks(small.scales.size());
  kernels::mark_fp8_special_blocks(small.view, 0, kn, small_marks.data());
  CHECK(std::all_of(small_marks.begin(), small_marks.end(), [](std::uint8_t b) { return b == 0; }));
  WeightView small_marked = small.view;
  small_marked.fp8_special_blocks = small_marks.data();
  std::vector<float> eye(static_cast<std::size_t>(kk * kk), 0.0f), y(static_cast<std::size_t>(kk * kn));
  for (std::int64_t c = 0; c < kk; ++c) eye[c * kk + c] = 1.0f;
  for (const std::string& isa : kernels::cpu::runnable_linear_isas())
    for (std::int64_t m : {1, 2, 3, 4, 8, 64}) {  // 64: the prefill kernel's panels
      INFO(isa << " unit rows, m=" << m);
      std::int64_t wrong = 0;
      for (std::int64_t c0 = 0; c0 < kk; c0 += m) {
        REQUIRE(kernels::cpu::linear_with_isa(isa, &eye[c0 * kk], m, small_marked, y.data(), pool).ok());
        for (std::int64_t i = 0; i < m; ++i)
          for (std::int64_t r = 0; r < kn; ++r)
            if (y[i * kn + r] != kernels::ref::weight_at(small.view, r, c0 + i)) ++wrong;
      }
      CHECK(wrong == 0);
    }
}

TEST_CASE("weight_rows slices give the rows of the whole matrix", "[linear]") {
  std::mt19937 rng(19);
  kernels::cpu::ThreadPool pool(2);
  for (WeightFormat format : kFormats) {
    const std::int64_t n = 75, k = 64;  // FP8: two whole blocks of rows, then a partial one
    TestWeight w(format, n, k, rng);
    const auto x = random_x(3, k, rng);
    std::vector<float> whole(static_cast<std::size_t>(3 * n));
    kernels::cpu::linear(x.data(), 3, w.view, whole.data(), pool);
    for (auto [first, count] : {std::pair<std::int64_t, std::int64_t>{0, 32}, {32, 32}, {64, 11}}) {
      INFO(kernels::weight_format_name(format) << " rows " << first << " +" << count);
      const kernels::WeightView rows = kernels::weight_rows(w.view, first, count);
      REQUIRE(rows.validate().ok());
      std::vector<float> part(static_cast<std::size_t>(3 * count));
      kernels::cpu::linear(x.data(), 3, rows, part.data(), pool);
      for (std::int64_t i = 0; i < 3; ++i)
        CHECK(std::memcmp(&part[i * count], &whole[i * n + first], count * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("weight views are validated with clear messages", "[linear]") {
  std::uint8_t bytes[64] = {};
  WeightView fp4{WeightFormat::kFp4Row32, bytes, bytes, 2, 48, 0};
  auto s = fp4.validate();
  REQUIRE_FALSE(s.ok());
  CHECK(s.message() == "fp4-e2m1-row32 weight: 48 columns is not a multiple of 32");
  WeightView fp8{WeightFormat::kFp8Block, bytes, nullptr, 2, 32, 32};
  CHECK(fp8.validate().message() == "fp8-e4m3-block weight: no scales");
  WeightView empty{WeightFormat::kF32, bytes, nullptr, 0, 4, 0};
  CHECK(empty.validate().message() == "f32 weight: shape [0, 4] is empty");
  CHECK_FALSE(WeightView{WeightFormat::kFp8Block, bytes, bytes, 2, 32, 0}.validate().ok());
  CHECK(WeightView{WeightFormat::kF32, bytes, nullptr, 2, 4, 0, 32}.validate().message() ==
        "f32 weight: only FP4 rows take a row stride");
  CHECK(WeightView{WeightFormat::kFp4Row32, bytes, bytes, 2, 64, 0, 20}.validate().message() ==
        "fp4-e2m1-row32 weight: row stride 20 is shorter than a row's 32 code bytes");
  WeightView marked_fp4{WeightFormat::kFp4Row32, bytes, bytes, 2, 64, 0};
  marked_fp4.fp8_special_blocks = bytes;
  CHECK(marked_fp4.validate().message() == "fp4-e2m1-row32 weight: only FP8 views mark special blocks");
}

// FP4 rows kept as records (codes, then scales, then anything: the session's index keys) are read
// in place through row_stride and give the packed matrix's results bit for bit, on every path.
TEST_CASE("fp4 rows read through a row stride equal the packed rows", "[linear]") {
  std::mt19937 rng(23);
  kernels::cpu::ThreadPool pool(2);
  const std::int64_t n = 45, k = 96, stride = k / 2 + k / 32 + 5;  // 5 bytes of something else per record
  TestWeight packed(WeightFormat::kFp4Row32, n, k, rng);
  std::vector<std::uint8_t> records(static_cast<std::size_t>(n * stride), 0xAB);
  for (std::int64_t r = 0; r < n; ++r) {
    std::memcpy(&records[r * stride], &packed.data[r * k / 2], k / 2);
    std::memcpy(&records[r * stride + k / 2], &packed.scales[r * k / 32], k / 32);
  }
  WeightView strided{WeightFormat::kFp4Row32, records.data(), records.data() + k / 2, n, k, 0, stride};
  REQUIRE(strided.validate().ok());
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t c = 0; c < k; ++c) REQUIRE(kernels::ref::weight_at(strided, r, c) == kernels::ref::weight_at(packed.view, r, c));
  const auto x = random_x(20, k, rng);
  for (const std::string& isa : kernels::cpu::runnable_linear_isas()) {
    for (std::int64_t m : {1, 4, 20}) {
      INFO(isa << " m=" << m);
      std::vector<float> want(static_cast<std::size_t>(m * n)), got(want.size());
      REQUIRE(kernels::cpu::linear_with_isa(isa, x.data(), m, packed.view, want.data(), pool).ok());
      REQUIRE(kernels::cpu::linear_with_isa(isa, x.data(), m, strided, got.data(), pool).ok());
      CHECK(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0);
    }
    const WeightView tail = kernels::weight_rows(strided, 40, 5);
    std::vector<float> want(5), got(5);
    REQUIRE(kernels::cpu::linear_with_isa(isa, x.data(), 1, kernels::weight_rows(packed.view, 40, 5), want.data(), pool).ok());
    REQUIRE(kernels::cpu::linear_with_isa(isa, x.data(), 1, tail, got.data(), pool).ok());
    CHECK(want == got);
  }
}

// The CPU backend keeps FP4 weights in lane order (weight_view.h's fp4_code): the same codes, and on
// every ISA and path (decode heights, the prefill kernel, a chunk cut by a slice of rows) the same
// results bit for bit as the packed weight, rows that are not whole 128-column chunks included.
TEST_CASE("fp4 weights in lane order hold the same codes and give the packed results bit for bit", "[linear]") {
  std::mt19937 rng(29);
  kernels::cpu::ThreadPool pool(2);
  for (const std::int64_t k : {32, 96, 128, 416, 2080}) {
    const std::int64_t n = 21;
    TestWeight packed(WeightFormat::kFp4Row32, n, k, rng);
    std::vector<std::uint8_t> codes(packed.data.size());
    const WeightView lanes = kernels::fp4_to_lane_order(packed.view, codes.data());
    REQUIRE(lanes.lane_order);
    REQUIRE(lanes.validate().ok());
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t c = 0; c < k; ++c) REQUIRE(kernels::fp4_code(lanes, r, c) == kernels::fp4_code(packed.view, r, c));
    if (k % 128 == 0) CHECK(codes != packed.data);  // the chunks did move
    const auto x = random_x(13, k, rng);
    for (const std::string& isa : kernels::cpu::runnable_linear_isas()) {
      for (std::int64_t m : {1, 2, 3, 4, 5, 8, 13}) {
        INFO(isa << " k=" << k << " m=" << m);
        std::vector<float> want(static_cast<std::size_t>(m * n)), got(want.size());
        REQUIRE(kernels::cpu::linear_with_isa(isa, x.data(), m, packed.view, want.data(), pool).ok());
        REQUIRE(kernels::cpu::linear_with_isa(isa, x.data(), m, lanes, got.data(), pool).ok());
        CHECK(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0);
      }
      std::vector<float> want(3), got(3);
      REQUIRE(kernels::cpu::linear_with_isa(isa, x.data(), 1, kernels::weight_rows(packed.view, 17, 3), want.data(), pool).ok());
      REQUIRE(kernels::cpu::linear_with_isa(isa, x.data(), 1, kernels::weight_rows(lanes, 17, 3), got.data(), pool).ok());
      CHECK(want == got);
    }
  }
  std::uint8_t bytes[64] = {};
  WeightView bf16{WeightFormat::kBF16, bytes, nullptr, 2, 16, 0};
  bf16.lane_order = true;
  CHECK(bf16.validate().message() == "bf16 weight: only packed FP4 rows come in lane order");
  WeightView strided{WeightFormat::kFp4Row32, bytes, bytes, 1, 32, 0, 20};
  strided.lane_order = true;
  CHECK_FALSE(strided.validate().ok());
}

// The indexer's keys (FP4 records with a row stride) decoded transposed, on every instruction set:
// exactly the reference's values, a partial group of rows at the end, and nothing written past n in
// a row of kt.
TEST_CASE("decode_rows_transposed gives the reference's values, transposed", "[linear]") {
  std::mt19937 rng(31);
  for (const std::int64_t k : {32, 64, 128}) {
    const std::int64_t n = 37, stride = k / 2 + k / 32, ld = 41;
    TestWeight packed(WeightFormat::kFp4Row32, n, k, rng);
    std::vector<std::uint8_t> records(static_cast<std::size_t>(n * stride));
    for (std::int64_t r = 0; r < n; ++r) {
      std::memcpy(&records[r * stride], &packed.data[r * k / 2], k / 2);
      std::memcpy(&records[r * stride + k / 2], &packed.scales[r * k / 32], k / 32);
    }
    const WeightView keys{WeightFormat::kFp4Row32, records.data(), records.data() + k / 2, n, k, 0, stride};
    for (const std::string& isa : kernels::cpu::runnable_linear_isas()) {
      for (const std::int64_t first : {0, 2}) {
        INFO("isa " << isa << " k " << k << " first row " << first);
        std::vector<float> kt(static_cast<std::size_t>(k * ld), -7.0f);
        REQUIRE(kernels::cpu::decode_rows_transposed_with_isa(isa, keys, first, n - first, kt.data(), ld).ok());
        for (std::int64_t d = 0; d < k; ++d) {
          for (std::int64_t j = 0; j < ld; ++j) {
            const float want = j < n - first ? kernels::ref::weight_at(packed.view, first + j, d) : -7.0f;
            REQUIRE(kt[static_cast<std::size_t>(d * ld + j)] == want);
          }
        }
      }
    }
  }
  std::vector<float> kt(1);
  CHECK_FALSE(kernels::cpu::decode_rows_transposed_with_isa("sse9", WeightView{}, 0, 0, kt.data(), 1).ok());
}

TEST_CASE("the dispatcher names the instruction set it chose and refuses ones it cannot run", "[linear]") {
  const std::string isa = kernels::cpu::linear_isa();
  CHECK(kernels::cpu::runnable_linear_isas().front() == isa);
  kernels::cpu::ThreadPool pool(1);
  auto s = kernels::cpu::linear_with_isa("sse9", nullptr, 0, {}, nullptr, pool);
  CHECK(s.message() == "linear: instruction set 'sse9' does not run on this CPU");
#if defined(__x86_64__)
  if (__builtin_cpu_supports("x86-64-v4") && __builtin_cpu_supports("avx512vbmi")) CHECK(isa == "avx512vbmi");
  else if (__builtin_cpu_supports("avx512f")) CHECK(isa == "avx512");
  else if (__builtin_cpu_supports("avx2")) CHECK(isa == "avx2");
  else CHECK(isa == "generic");
#else
  CHECK(isa == "generic");
#endif
}
