#include "kernels/cpu/vector_ops.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

namespace hippo::kernels::cpu {
namespace {

TEST_CASE("dot agrees with a double-precision sum at every length", "[kernels]") {
  for (int64_t n : {0, 1, 7, 15, 16, 17, 31, 32, 64, 100, 512}) {
    std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
    double expected = 0;
    for (int64_t i = 0; i < n; ++i) {
      a[static_cast<size_t>(i)] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)));
      b[static_cast<size_t>(i)] = static_cast<float>(std::cos(0.11 * static_cast<double>(i)) * 3);
      expected += static_cast<double>(a[static_cast<size_t>(i)]) * b[static_cast<size_t>(i)];
    }
    INFO("n = " << n);
    CHECK(std::fabs(dot(a.data(), b.data(), n) - expected) <= 1e-5 * (1 + std::fabs(expected)));
  }
}

TEST_CASE("dot is exact on integers and ignores alignment", "[kernels]") {
  std::vector<float> a(70), b(70);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<float>(i % 5);
    b[i] = static_cast<float>(i % 3);
  }
  float expected = 0;
  for (size_t i = 1; i < a.size(); ++i) expected += a[i] * b[i];
  CHECK(dot(a.data() + 1, b.data() + 1, 69) == expected);  // unaligned starts
}

TEST_CASE("axpy adds a scaled vector", "[kernels]") {
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17};
  std::vector<float> y(x.size(), 1.0f);
  axpy(0.5f, x.data(), y.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) CHECK(y[i] == 1.0f + 0.5f * x[i]);
}

std::vector<float> exps(const std::vector<float>& x, float shift, float scale, std::vector<float>* sums = nullptr) {
  std::vector<float> out(x.size()), block_sums((x.size() + kExpBlock - 1) / kExpBlock);
  exp_block_sums(x.data(), shift, scale, out.data(), static_cast<int64_t>(x.size()), block_sums.data());
  if (sums != nullptr) *sums = block_sums;
  return out;
}

TEST_CASE("exp_block_sums is within 4 ulp of double-precision exp, with its clamps", "[kernels]") {
  std::vector<float> x;
  for (double t = -100.0; t <= 20.0; t += 0.0137) x.push_back(static_cast<float>(t));
  const float shift = 3.0f, scale = 0.75f;
  const std::vector<float> out = exps(x, shift, scale);
  for (size_t i = 0; i < x.size(); ++i) {
    const float arg = (x[i] - shift) * scale;
    INFO("x = " << x[i]);
    if (arg < -87.3f) {
      CHECK(out[i] == 0.0f);
      continue;
    }
    const auto expected = static_cast<float>(std::exp(static_cast<double>(arg)));
    const float ulp = std::nextafter(expected, INFINITY) - expected;
    CHECK(std::fabs(out[i] - expected) <= 4 * ulp);
  }
  CHECK(exps({1000.0f}, 0.0f, 1.0f)[0] == std::exp(88.0f));
}

TEST_CASE("exp_block_sums: the same value at every length and offset, and sums of whole and short blocks", "[kernels]") {
  std::vector<float> x(150);
  for (size_t i = 0; i < x.size(); ++i) x[i] = -0.05f * static_cast<float>(i);
  std::vector<float> sums;
  const std::vector<float> whole = exps(x, 0.0f, 1.0f, &sums);
  CHECK(whole[0] == 1.0f);
  for (size_t start = 0; start < x.size(); ++start) {
    CHECK(exps({x[start]}, 0.0f, 1.0f)[0] == whole[start]);
  }
  REQUIRE(sums.size() == 3);  // 64 + 64 + 22
  for (size_t b = 0; b < sums.size(); ++b) {
    double expected = 0;
    for (size_t i = b * 64; i < std::min(x.size(), (b + 1) * 64); ++i) expected += whole[i];
    INFO("block " << b);
    CHECK(std::fabs(sums[b] - expected) <= 1e-6 * expected);
  }
}

}  // namespace
}  // namespace hippo::kernels::cpu
