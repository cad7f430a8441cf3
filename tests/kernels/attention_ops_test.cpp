#include "kernels/cpu/attention_ops.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

namespace hippo::kernels::cpu {
namespace {

float value(int64_t i, double f, double scale) { return static_cast<float>(std::sin(f * static_cast<double>(i) + 0.3) * scale); }

// A float sum of `terms` rounded terms is within terms · 2^-23 · Σ|term| of the exact one.
double error_bound(int64_t terms, double magnitude) { return static_cast<double>(terms + 1) * FLT_EPSILON * magnitude; }

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// The definition the kernels promise: one chain per element, in order, fused where the clone has FMA.
bool uses_fma() { return __builtin_cpu_supports("x86-64-v3"); }
float chain_step(float acc, float a, float b) { return uses_fma() ? std::fma(a, b, acc) : acc + a * b; }

struct Keys {
  int64_t n, dim, ld;
  std::vector<float> rows;  // [n][dim]
  std::vector<float> kt;    // [dim][ld]
  std::vector<const float*> pointers;
  Keys(int64_t n_, int64_t dim_, int64_t ld_) : n(n_), dim(dim_), ld(ld_), rows(static_cast<size_t>(n_ * dim_)),
                                                kt(static_cast<size_t>(dim_ * ld_), -7.0f) {
    for (int64_t i = 0; i < n * dim; ++i) rows[static_cast<size_t>(i)] = value(i, 0.37, 2.0);
    for (int64_t j = 0; j < n; ++j) pointers.push_back(&rows[static_cast<size_t>(j * dim)]);
    transpose_rows(pointers.data(), n, dim, kt.data(), ld);
  }
  float at(int64_t j, int64_t d) const { return rows[static_cast<size_t>(j * dim + d)]; }
};

TEST_CASE("transpose_rows puts row j in column j and leaves the rest", "[kernels]") {
  for (auto [n, dim, ld] : {std::array<int64_t, 3>{37, 19, 40}, {48, 64, 53}, {16, 16, 16}, {5, 70, 5}, {0, 8, 1}}) {
    Keys keys(n, dim, ld);
    for (int64_t d = 0; d < dim; ++d) {
      for (int64_t j = 0; j < ld; ++j) {
        INFO("n " << n << " dim " << dim << " d " << d << " j " << j);
        const float got = keys.kt[static_cast<size_t>(d * ld + j)];
        CHECK(got == (j < n ? keys.at(j, d) : -7.0f));
      }
    }
  }
}

// Runs `score(q, heads, q_stride, keys, n, dim, scores, stride)` (a kernel's scores of q's heads
// against the keys) over every shape given and checks each score: within the float bound of the
// exact dot, the bits of `definition(qh, keys, j, dim)`, and nothing written past n.
template <typename Score, typename Definition>
void check_scores(std::initializer_list<int64_t> dims, std::initializer_list<int64_t> head_counts,
                  std::initializer_list<int64_t> key_counts, int64_t extra_ld, Score score, Definition definition) {
  for (int64_t dim : dims) {
    for (int64_t heads : head_counts) {
      for (int64_t n : key_counts) {
        Keys keys(n, dim, n + extra_ld);
        std::vector<float> q(static_cast<size_t>(heads * (dim + 2)));
        for (size_t i = 0; i < q.size(); ++i) q[i] = value(static_cast<int64_t>(i), 0.11, 1.5);
        const int64_t stride = n + 5;
        std::vector<float> scores(static_cast<size_t>(heads * stride), -1.0f);
        score(q.data(), heads, dim + 2, keys, n, dim, scores.data(), stride);
        for (int64_t h = 0; h < heads; ++h) {
          const float* qh = &q[static_cast<size_t>(h * (dim + 2))];
          for (int64_t j = 0; j < stride; ++j) {
            INFO("dim " << dim << " heads " << heads << " n " << n << " h " << h << " j " << j);
            const float got = scores[static_cast<size_t>(h * stride + j)];
            if (j >= n) {
              CHECK(got == -1.0f);  // nothing written past n
              continue;
            }
            double expected = 0, magnitude = 0;
            for (int64_t d = 0; d < dim; ++d) {
              expected += static_cast<double>(qh[d]) * keys.at(j, d);
              magnitude += std::fabs(static_cast<double>(qh[d]) * keys.at(j, d));
            }
            CHECK(std::fabs(got - expected) <= error_bound(dim, magnitude));
            CHECK(same_bits(got, definition(qh, keys, j, dim)));
          }
        }
      }
    }
  }
}

TEST_CASE("transposed_scores agrees with a double-precision reference", "[kernels]") {
  check_scores(
      {1, 8, 16, 20, 64, 100}, {1, 3, 4, 5, 9}, {0, 1, 5, 15, 16, 17, 31, 32, 33, 100, 144}, 3,
      [](const float* q, int64_t heads, int64_t q_stride, const Keys& keys, int64_t n, int64_t dim, float* scores,
         int64_t stride) { transposed_scores(q, heads, q_stride, keys.kt.data(), keys.ld, n, dim, scores, stride); },
      [](const float* qh, const Keys& keys, int64_t j, int64_t dim) {
        float chain = 0.0f;  // one chain over d
        for (int64_t d = 0; d < dim; ++d) chain = chain_step(chain, qh[d], keys.at(j, d));
        return chain;
      });
}

TEST_CASE("a score depends only on its query and key, not on the range or the heads around it", "[kernels]") {
  const int64_t dim = 64, heads = 5, n = 150;
  Keys keys(n, dim, n);
  std::vector<float> q(static_cast<size_t>(heads * dim));
  for (size_t i = 0; i < q.size(); ++i) q[i] = value(static_cast<int64_t>(i), 0.23, 1.0);
  std::vector<float> all(static_cast<size_t>(heads * n));
  transposed_scores(q.data(), heads, dim, keys.kt.data(), keys.ld, n, dim, all.data(), n);
  for (int64_t first : {0, 1, 7, 16, 33, 100}) {
    for (int64_t count : {1, 3, 16, 17, 40}) {
      if (first + count > n) continue;
      for (int64_t h0 : {0, 2, 4}) {
        const int64_t nh = heads - h0;
        std::vector<float> part(static_cast<size_t>(nh * count));
        transposed_scores(&q[static_cast<size_t>(h0 * dim)], nh, dim, keys.kt.data() + first, keys.ld, count, dim, part.data(), count);
        for (int64_t h = 0; h < nh; ++h) {
          for (int64_t j = 0; j < count; ++j) {
            INFO("first " << first << " count " << count << " h " << h0 + h << " j " << j);
            CHECK(same_bits(part[static_cast<size_t>(h * count + j)], all[static_cast<size_t>((h0 + h) * n + first + j)]));
          }
        }
      }
    }
  }
}

// row_scores' definition: 16 lane chains over d ≡ l (mod 16), each step fused or a multiply then an
// add, then the fixed tree.
float row_score_definition(const float* q, const float* k, int64_t dim, bool fused) {
  std::array<float, 16> lane{};
  for (int64_t d = 0; d < dim; ++d) {
    float& chain = lane[static_cast<size_t>(d % 16)];
    chain = fused ? std::fma(q[d], k[d], chain) : chain + q[d] * k[d];
  }
  for (size_t width = 8; width >= 1; width /= 2) {
    for (size_t l = 0; l < width; ++l) lane[l] += lane[l + width];
  }
  return lane[0];
}

TEST_CASE("row_scores is its lane chains and tree, bit for bit, and near the exact dot", "[kernels]") {
  // Heads and keys below, at and past the register tiles (4 × 4, 2 × 2); dims below, at and past a vector.
  auto check = [](auto score, bool fused) {
    check_scores(
        {1, 8, 16, 20, 64, 100, 512}, {1, 3, 4, 5, 9}, {0, 1, 3, 4, 5, 17, 100}, 0, score,
        [fused](const float* qh, const Keys& keys, int64_t j, int64_t dim) {
          return row_score_definition(qh, keys.pointers[static_cast<size_t>(j)], dim, fused);
        });
  };
  SECTION("as dispatched") {
    check([](const float* q, int64_t heads, int64_t q_stride, const Keys& keys, int64_t n, int64_t dim, float* scores,
             int64_t stride) { row_scores(q, heads, q_stride, keys.pointers.data(), n, dim, scores, stride); },
          uses_fma());
  }
  // Every version this CPU runs: an AVX-512 machine checks the AVX2 path too.
  for (const char* isa : {"avx512", "avx2", "generic"}) {
    SECTION(std::string("forced onto ") + isa) {
      const float q = 1.0f, k = 1.0f;
      const float* rows[] = {&k};
      float out = 0.0f;
      if (!row_scores_with_isa(isa, &q, 1, 1, rows, 1, 1, &out, 1).ok()) {
        WARN("row_scores: this CPU does not run the " << isa << " version; it was not checked here");
        CHECK(std::string(isa) != "generic");
        continue;
      }
      check([isa](const float* qp, int64_t heads, int64_t q_stride, const Keys& keys, int64_t n, int64_t dim,
                  float* scores, int64_t stride) {
              REQUIRE(row_scores_with_isa(isa, qp, heads, q_stride, keys.pointers.data(), n, dim, scores, stride).ok());
            },
            std::string(isa) != "generic");
    }
  }
}

TEST_CASE("a row score depends only on its query and key, not on the keys or heads around it or where they live", "[kernels]") {
  const int64_t dim = 72, heads = 6, n = 23;
  Keys keys(n, dim, n);
  std::vector<float> q(static_cast<size_t>(heads * dim));
  for (size_t i = 0; i < q.size(); ++i) q[i] = value(static_cast<int64_t>(i), 0.29, 1.0);
  std::vector<float> all(static_cast<size_t>(heads * n));
  row_scores(q.data(), heads, dim, keys.pointers.data(), n, dim, all.data(), n);
  std::vector<float> copy(keys.rows.size() + 3);  // misaligned by 3 floats
  std::memcpy(copy.data() + 3, keys.rows.data(), keys.rows.size() * sizeof(float));
  std::vector<const float*> moved;
  for (int64_t j = n - 1; j >= 0; --j) moved.push_back(&copy[static_cast<size_t>(3 + j * dim)]);  // reversed
  for (int64_t h0 : {0, 1, 5}) {
    const int64_t nh = heads - h0;
    std::vector<float> part(static_cast<size_t>(nh * n));
    row_scores(&q[static_cast<size_t>(h0 * dim)], nh, dim, moved.data(), n, dim, part.data(), n);
    for (int64_t h = 0; h < nh; ++h) {
      for (int64_t j = 0; j < n; ++j) {
        INFO("h " << h0 + h << " j " << j);
        CHECK(same_bits(part[static_cast<size_t>(h * n + n - 1 - j)], all[static_cast<size_t>((h0 + h) * n + j)]));
      }
    }
  }
}

TEST_CASE("index_scores is the chain of dots, relu and the weighted head sum, bit for bit", "[kernels]") {
  // Heads below, at and past a register tile of 8 (and 4); keys below 16, at tile edges and ragged;
  // dims past the 64-dim slab of the few-keys path.
  for (int64_t dim : {1, 16, 32, 70, 128}) {
    for (int64_t heads : {1, 3, 8, 9, 17}) {
      for (int64_t n : {0, 1, 15, 16, 17, 32, 33, 47, 100}) {
        Keys keys(n, dim, n + 21);
        std::vector<float> q(static_cast<size_t>(heads * dim)), weights(static_cast<size_t>(heads));
        for (size_t i = 0; i < q.size(); ++i) q[i] = value(static_cast<int64_t>(i), 0.19, 1.3);
        for (size_t h = 0; h < weights.size(); ++h) weights[h] = value(static_cast<int64_t>(h), 0.7, 0.9);
        const float scale = 0.125f;
        std::vector<float> scores(static_cast<size_t>(n + 4), -1.0f);
        index_scores(q.data(), heads, dim, keys.kt.data(), keys.ld, n, weights.data(), scale, scores.data());
        for (int64_t j = 0; j < n + 4; ++j) {
          INFO("dim " << dim << " heads " << heads << " n " << n << " j " << j);
          if (j >= n) {
            CHECK(scores[static_cast<size_t>(j)] == -1.0f);  // nothing written past n
            continue;
          }
          float expected = 0.0f;
          for (int64_t h = 0; h < heads; ++h) {
            float dot = 0.0f;
            for (int64_t d = 0; d < dim; ++d) dot = chain_step(dot, q[static_cast<size_t>(h * dim + d)], keys.at(j, d));
            expected = chain_step(expected, std::max(dot, 0.0f) * scale, weights[static_cast<size_t>(h)]);
          }
          CHECK(same_bits(scores[static_cast<size_t>(j)], expected));
        }
      }
    }
  }
}

TEST_CASE("weighted_rows agrees with a double-precision reference", "[kernels]") {
  for (int64_t dim : {1, 8, 16, 20, 64, 100, 512}) {
    for (int64_t heads : {1, 3, 4, 5, 9}) {
      for (int64_t n : {0, 1, 7, 128, 144}) {
        Keys keys(n, dim, n);
        const int64_t p_stride = n + 1, out_stride = dim + 3;
        std::vector<float> p(static_cast<size_t>(heads * p_stride));
        for (size_t i = 0; i < p.size(); ++i) p[i] = std::fabs(value(static_cast<int64_t>(i), 0.07, 0.1));
        std::vector<float> out(static_cast<size_t>(heads * out_stride), -1.0f);
        weighted_rows(p.data(), heads, p_stride, keys.pointers.data(), n, dim, out.data(), out_stride);
        for (int64_t h = 0; h < heads; ++h) {
          for (int64_t d = 0; d < out_stride; ++d) {
            INFO("dim " << dim << " heads " << heads << " n " << n << " h " << h << " d " << d);
            const float got = out[static_cast<size_t>(h * out_stride + d)];
            if (d >= dim) {
              CHECK(got == -1.0f);
              continue;
            }
            double expected = 0, magnitude = 0;
            float chain = 0.0f;
            for (int64_t j = 0; j < n; ++j) {
              const float a = p[static_cast<size_t>(h * p_stride + j)], b = keys.at(j, d);
              expected += static_cast<double>(a) * b;
              magnitude += std::fabs(static_cast<double>(a) * b);
              chain = chain_step(chain, a, b);
            }
            CHECK(std::fabs(got - expected) <= error_bound(n, magnitude));
            CHECK(same_bits(got, chain));
          }
        }
      }
    }
  }
}

TEST_CASE("a weighted sum depends only on its weights and rows, not on the heads around it or where rows live", "[kernels]") {
  const int64_t dim = 80, heads = 6, n = 130;
  Keys keys(n, dim, n);
  std::vector<float> p(static_cast<size_t>(heads * n));
  for (size_t i = 0; i < p.size(); ++i) p[i] = std::fabs(value(static_cast<int64_t>(i), 0.19, 0.05));
  std::vector<float> all(static_cast<size_t>(heads * dim));
  weighted_rows(p.data(), heads, n, keys.pointers.data(), n, dim, all.data(), dim);
  // The same rows copied elsewhere (misaligned), one head at a time and heads 1..5.
  std::vector<float> copy(keys.rows.size() + 1);
  std::memcpy(copy.data() + 1, keys.rows.data(), keys.rows.size() * sizeof(float));
  std::vector<const float*> moved;
  for (int64_t j = 0; j < n; ++j) moved.push_back(&copy[static_cast<size_t>(1 + j * dim)]);
  for (int64_t h0 : {0, 1, 3, 5}) {
    for (int64_t nh : {int64_t{1}, heads - h0}) {
      std::vector<float> part(static_cast<size_t>(nh * dim));
      weighted_rows(&p[static_cast<size_t>(h0 * n)], nh, n, moved.data(), n, dim, part.data(), dim);
      for (int64_t h = 0; h < nh; ++h) {
        for (int64_t d = 0; d < dim; ++d) {
          INFO("h " << h0 + h << " d " << d);
          CHECK(same_bits(part[static_cast<size_t>(h * dim + d)], all[static_cast<size_t>((h0 + h) * dim + d)]));
        }
      }
    }
  }
}

TEST_CASE("exp_floats gives std::exp's bits", "[kernels]") {
  // Every 4099th bit pattern (all signs, exponents, NaNs and infinities), then every float in short
  // ranges around glibc's special cases and the softmax's usual arguments.
  std::vector<float> x;
  for (uint64_t bits = 0; bits <= 0xFFFFFFFFu; bits += 4099) {
    float v;
    const auto b32 = static_cast<uint32_t>(bits);
    std::memcpy(&v, &b32, sizeof v);
    x.push_back(v);
  }
  for (float lo : {-104.0f, -88.5f, -20.0f, -1.0f, 88.0f}) {
    for (float v = lo, end = lo + 0.25f; v < end; v = std::nextafter(v, 1e30f)) x.push_back(v);
  }
  std::vector<float> y(x.size());
  exp_floats(x.data(), y.data(), static_cast<int64_t>(x.size()));
  size_t mismatches = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float expected = std::exp(x[i]);
    if (!(same_bits(y[i], expected) || (std::isnan(y[i]) && std::isnan(expected)))) {
      if (++mismatches <= 5) FAIL_CHECK("exp(" << x[i] << ") = " << y[i] << ", std::exp " << expected);
    }
  }
  CHECK(mismatches == 0);
  for (int64_t n : {1, 7, 9}) {  // partial groups, in place
    std::vector<float> z(x.begin() + 1000, x.begin() + 1000 + n);
    exp_floats(z.data(), z.data(), n);
    for (int64_t i = 0; i < n; ++i) CHECK(same_bits(z[static_cast<size_t>(i)], y[static_cast<size_t>(1000 + i)]));
  }
}

TEST_CASE("softmax_with_sink is the plain scalar softmax, bit for bit", "[kernels]") {
  for (int64_t heads : {1, 3, 4, 9}) {
    for (int64_t n : {0, 1, 5, 15, 16, 17, 31, 32, 100, 144}) {
      const int64_t stride = n + 3;
      std::vector<float> x(static_cast<size_t>(heads * stride), 123.0f), sinks;
      for (int64_t h = 0; h < heads; ++h) {
        sinks.push_back(std::vector<float>{-30.0f, 0.0f, 2.5f, 40.0f}[static_cast<size_t>(h % 4)]);
        for (int64_t j = 0; j < n; ++j) x[static_cast<size_t>(h * stride + j)] = value(j + 7 * h, 0.9, 25.0 + 30.0 * static_cast<double>(h));
      }
      const float scale = 0.125f;
      std::vector<float> expected = x;
      for (int64_t h = 0; h < heads; ++h) {
        // The reference: scale, max with the sink, exp, the sum in order with the sink's term last.
        float* e = &expected[static_cast<size_t>(h * stride)];
        const float sink = sinks[static_cast<size_t>(h)];
        float m = sink;
        for (int64_t j = 0; j < n; ++j) {
          e[j] *= scale;
          m = std::max(m, e[j]);
        }
        float denom = 0.0f;
        for (int64_t j = 0; j < n; ++j) {
          e[j] = std::exp(e[j] - m);
          denom += e[j];
        }
        denom += std::exp(sink - m);
        for (int64_t j = 0; j < n; ++j) e[j] /= denom;
      }
      softmax_with_sink(x.data(), heads, stride, n, scale, sinks.data());
      for (size_t i = 0; i < x.size(); ++i) {
        INFO("heads " << heads << " n " << n << " element " << i);
        CHECK(same_bits(x[i], expected[i]));  // including the untouched padding between heads
      }
    }
  }
}

}  // namespace
}  // namespace hippo::kernels::cpu
