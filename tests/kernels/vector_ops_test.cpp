#include "kernels/cpu/vector_ops.h"

#include <catch2/catch.hpp>

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

}  // namespace
}  // namespace hippo::kernels::cpu
