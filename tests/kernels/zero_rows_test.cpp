// The CPU backend's compact copies of mostly-zero F32/BF16 weights (kernels/cpu/zero_rows.h): the
// backend's products through them keep the bits of the plain kernels, the rows of zeros +0, and an
// x that is not finite takes the whole weight.
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/zero_rows.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace kernels = hippo::kernels;
using kernels::WeightFormat;
using kernels::WeightView;

namespace {

// An n x k weight of `format` whose rows are +0 bits except every `stride`-th (and row n - 1).
std::vector<std::uint8_t> sparse_weight(WeightFormat format, std::int64_t n, std::int64_t k, std::int64_t stride) {
  const std::int64_t size = format == WeightFormat::kF32 ? 4 : 2;
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(n * k * size), 0);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (std::int64_t r = 0; r < n; ++r) {
    if (r % stride != 0 && r != n - 1) continue;
    for (std::int64_t c = 0; c < k; ++c) {
      const float v = normal(rng);
      auto bits = __builtin_bit_cast(std::uint32_t, v);
      if (size == 2) {
        const auto b = static_cast<std::uint16_t>(bits >> 16);
        std::memcpy(&bytes[static_cast<std::size_t>((r * k + c) * 2)], &b, 2);
      } else {
        std::memcpy(&bytes[static_cast<std::size_t>((r * k + c) * 4)], &bits, 4);
      }
    }
  }
  return bytes;
}

}  // namespace

TEST_CASE("a mostly-zero weight is read from a copy of its other rows, with the same bits", "[linear]") {
  kernels::cpu::ThreadPool pool(2);
  const std::int64_t n = 1000, k = 72;
  for (WeightFormat format : {WeightFormat::kBF16, WeightFormat::kF32}) {
    INFO(kernels::weight_format_name(format));
    const std::vector<std::uint8_t> bytes = sparse_weight(format, n, k, 7);
    const WeightView w{format, bytes.data(), nullptr, n, k, 0};
    const auto backend = kernels::cpu::make_cpu_backend(2);
    REQUIRE(backend->keep_weight(w).value());  // kept: the caller may drop the original's pages

    for (std::int64_t m : {1, 3, 9, 40}) {
      INFO("m = " << m);
      std::vector<float> x(static_cast<std::size_t>(m * k));
      for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) * 2.0f - 0.5f;
      std::vector<float> plain(static_cast<std::size_t>(m * n)), got(plain.size(), 1.0f), by_rows(plain.size(), 1.0f);
      kernels::cpu::linear(x.data(), m, w, plain.data(), pool);
      backend->linear(x.data(), m, w, got.data());
      CHECK(std::memcmp(plain.data(), got.data(), plain.size() * sizeof(float)) == 0);
      std::vector<float*> rows;
      for (std::int64_t i = m - 1; i >= 0; --i) rows.push_back(by_rows.data() + i * n);  // rows reversed
      backend->linear_rows(x.data(), m, w, rows.data());
      for (std::int64_t i = 0; i < m; ++i)
        CHECK(std::memcmp(plain.data() + i * n, by_rows.data() + (m - 1 - i) * n, n * sizeof(float)) == 0);
      CHECK(std::signbit(got[1]) == false);  // a zero row: +0
      CHECK(got[1] == 0.0f);

      // An infinity in x: every row of zeros gives NaN, as the plain kernel's does.
      x[2] = std::numeric_limits<float>::infinity();
      kernels::cpu::linear(x.data(), m, w, plain.data(), pool);
      backend->linear(x.data(), m, w, got.data());
      CHECK(std::isnan(got[1]));
      CHECK(std::memcmp(plain.data(), got.data(), plain.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("dense weights and views of some rows are read in place", "[linear]") {
  kernels::cpu::ThreadPool pool(2);
  const std::int64_t n = 100, k = 32;
  kernels::cpu::ZeroRows zero_rows;
  const std::vector<std::uint8_t> dense = sparse_weight(WeightFormat::kBF16, n, k, 2);  // half the rows nonzero
  CHECK_FALSE(zero_rows.keep(WeightView{WeightFormat::kBF16, dense.data(), nullptr, n, k, 0}, pool));
  const std::vector<std::uint8_t> sparse = sparse_weight(WeightFormat::kBF16, n, k, 3);
  const WeightView w{WeightFormat::kBF16, sparse.data(), nullptr, n, k, 0};
  REQUIRE(zero_rows.keep(w, pool));
  REQUIRE(zero_rows.find(w) != nullptr);
  CHECK(zero_rows.find(w)->w.rows == 34);  // rows 0, 3, ..., 99
  CHECK(zero_rows.find(kernels::weight_rows(w, 0, 50)) == nullptr);
  WeightView other = w;
  other.format = WeightFormat::kF32;
  other.cols = k / 2;
  CHECK(zero_rows.find(other) == nullptr);
  std::vector<std::uint8_t> fp8(static_cast<std::size_t>(n * k), 0), scales(16, 127);
  CHECK_FALSE(zero_rows.keep(WeightView{WeightFormat::kFp8Block, fp8.data(), scales.data(), n, k, 32}, pool));
}
