// Every op of every backend in the registry against kernels/ref (test-backend-ops style): seeded
// random inputs with shapes off every tile, rows that are not vector-aligned and each format's edge
// values, compared with a per-op tolerance; the quantised KV entries, their decoders and table rows
// bit for bit. Then the invariants within each backend: a row's result is the same bits whether it
// comes alone or in a batch (linear, attention, indexer) and whatever the thread count, and a
// second run repeats the first.
//
// Tolerances: linear's error per output relative to Σ|x·w| (as tests/kernels/linear_test.cpp);
// the float ops' normalised mean squared error Σ(a - b)² / Σb²; the selections of the indexer and
// the router are exact up to near-ties (a pick whose reference score is within kTieTolerance of
// the other's k-th best is as good as the other's own, both ways).
#include "kernels/backend.h"
#include "kernels/backend_registry.h"
#include "kernels/ref/linear_ref.h"
#include "kernels/ref/numeric_formats.h"
#include "kernels/ref/ref_backend.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <ios>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace kernels = hippo::kernels;
using kernels::Backend;
using kernels::KvFormat;
using kernels::Op;
using kernels::TableFormat;
using kernels::WeightFormat;
using kernels::WeightView;

namespace {

constexpr double kLinearTolerance = 1e-6;  // per output, relative to Σ|x·w|: fp32 accumulation
constexpr double kNmseTolerance = 1e-10;   // the float ops, against reductions in double
constexpr double kTieTolerance = 1e-5;     // relative to the row's largest |score|

std::size_t size(std::int64_t n) { return static_cast<std::size_t>(n); }

class Random {
 public:
  explicit Random(std::uint32_t seed) : engine_(seed) {}
  float normal(float sigma = 1.0f) { return std::normal_distribution<float>(0.0f, sigma)(engine_); }
  float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(engine_); }
  std::int64_t integer(std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(engine_); }
  std::uint8_t byte(int lo = 0, int hi = 255) {
    return static_cast<std::uint8_t>(std::uniform_int_distribution<int>(lo, hi)(engine_));
  }
  std::vector<float> normals(std::int64_t n, float sigma = 1.0f) {
    std::vector<float> v(size(n));
    for (float& x : v) x = normal(sigma);
    return v;
  }

 private:
  std::mt19937 engine_;
};

// Floats one float past the start of their allocation: rows that are not vector-aligned.
class Misaligned {
 public:
  explicit Misaligned(const std::vector<float>& values) : storage_(values.size() + 1) {
    std::copy(values.begin(), values.end(), storage_.begin() + 1);
  }
  float* data() { return storage_.data() + 1; }
  std::vector<float> values() const { return {storage_.begin() + 1, storage_.end()}; }

 private:
  std::vector<float> storage_;
};

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// Σ(a - b)² / Σb² (Σ(a - b)² when b is all zeros); NaN anywhere fails every comparison with it.
double nmse(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
  double error = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double d = double{got[i]} - double{want[i]};
    error += d * d;
    norm += double{want[i]} * double{want[i]};
  }
  return norm > 0.0 ? error / norm : error;
}

// The error shown in scientific notation (Catch prints doubles in fixed notation).
void check_nmse(const std::vector<float>& got, const std::vector<float>& want) {
  const double error = nmse(got, want);
  INFO("nmse " << std::scientific << error << ", tolerance " << kNmseTolerance);
  CHECK(error <= kNmseTolerance);
}

bool bit_set(const std::vector<std::uint64_t>& bits, std::int64_t b) { return ((bits[size(b / 64)] >> (b % 64)) & 1) != 0; }

// Edge codes of the formats: zero, negative zero, the largest finite values, subnormals.
constexpr std::uint8_t kE4m3Edges[] = {0x00, 0x80, 0x7E, 0xFE, 0x01, 0x81, 0x07, 0x08, 0x87};
constexpr std::uint16_t kBf16Edges[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x0080, 0x5F80, 0xDF80, 0x3F80, 0x2000};

std::uint8_t random_e4m3(Random& rng) {
  std::uint8_t b;
  do b = rng.byte();
  while ((b & 0x7F) == 0x7F);  // NaN
  return b;
}

std::uint16_t random_bf16(Random& rng, float sigma) { return kernels::ref::f32_to_bf16(rng.normal(sigma)); }

// ---- linear

// Owns the bytes behind a WeightView: random, valid, every few elements an edge value, the data of
// the 8- and 16-bit formats at an offset that no SIMD load can assume aligned.
struct TestWeight {
  std::vector<float> f32;
  std::vector<std::uint16_t> bf16;
  std::vector<std::uint8_t> bytes, scales;
  WeightView view;
};

// record_pad >= 0: FP4 rows kept as records (codes, scales, record_pad bytes of junk), as the
// session's index keys are read.
TestWeight make_weight(WeightFormat format, std::int64_t rows, std::int64_t cols, Random& rng, std::int64_t record_pad = -1) {
  TestWeight w;
  w.view = {format, nullptr, nullptr, rows, cols, 32, 0};
  const std::int64_t n = rows * cols;
  switch (format) {
    case WeightFormat::kF32: {
      static constexpr float kEdges[] = {0.0f, -0.0f, 1e-30f, 1e-40f, 3e4f, -3e4f};
      w.f32.resize(size(n + 1));  // one float of offset
      for (std::int64_t i = 0; i < n; ++i) w.f32[size(i + 1)] = i % 5 == 0 ? kEdges[(i / 5) % 6] : rng.normal();
      w.view.data = w.f32.data() + 1;
      break;
    }
    case WeightFormat::kBF16:
      // One uint16 of offset: an odd byte offset would be a misaligned load in ref::weight_at.
      w.bf16.resize(size(n + 1));
      for (std::int64_t i = 0; i < n; ++i) w.bf16[size(i + 1)] = i % 5 == 0 ? kBf16Edges[(i / 5) % 9] : random_bf16(rng, 1.0f);
      w.view.data = w.bf16.data() + 1;
      break;
    case WeightFormat::kFp8Block: {
      w.bytes.resize(size(n + 1));
      for (std::int64_t i = 0; i < n; ++i) w.bytes[size(i + 1)] = i % 5 == 0 ? kE4m3Edges[(i / 5) % 9] : random_e4m3(rng);
      const std::int64_t blocks = ((rows + 31) / 32) * ((cols + 31) / 32);
      w.scales.resize(size(blocks + 1));
      for (auto& s : w.scales) s = rng.byte(112, 142);
      w.view.data = w.bytes.data() + 1;
      w.view.scales = w.scales.data() + 1;
      break;
    }
    case WeightFormat::kFp4Row32: {
      const std::int64_t code_bytes = cols / 2, scale_bytes = cols / 32;
      if (record_pad >= 0) {
        const std::int64_t stride = code_bytes + scale_bytes + record_pad;
        w.bytes.resize(size(rows * stride + 1));
        for (auto& b : w.bytes) b = rng.byte();  // codes and junk padding
        for (std::int64_t r = 0; r < rows; ++r)
          for (std::int64_t s = 0; s < scale_bytes; ++s) w.bytes[size(1 + r * stride + code_bytes + s)] = rng.byte(112, 142);
        w.view.data = w.bytes.data() + 1;
        w.view.scales = w.bytes.data() + 1 + code_bytes;
        w.view.row_stride = stride;
      } else {
        w.bytes.resize(size(rows * code_bytes + 1));
        for (auto& b : w.bytes) b = rng.byte();
        w.scales.resize(size(rows * scale_bytes + 1));
        for (auto& s : w.scales) s = rng.byte(112, 142);
        w.view.data = w.bytes.data() + 1;
        w.view.scales = w.scales.data() + 1;
      }
      // Row 0 starts with the edge nibbles: 0, -0, 6, -6.
      w.bytes[1] = 0x80;
      w.bytes[2] = 0xF7;
      break;
    }
  }
  return w;
}

// max over outputs of |got - want| / Σ_c |x_c · w_c|.
double linear_error(const float* x, std::int64_t m, const WeightView& w, const std::vector<float>& got,
                    const std::vector<float>& want) {
  double worst = 0.0;
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t r = 0; r < w.rows; ++r) {
      double magnitude = 1e-30;
      for (std::int64_t c = 0; c < w.cols; ++c) magnitude += std::fabs(double{x[i * w.cols + c]} * kernels::ref::weight_at(w, r, c));
      const std::size_t at = size(i * w.rows + r);
      worst = std::max(worst, std::fabs(double{got[at]} - double{want[at]}) / magnitude);
    }
  }
  return std::isnan(worst) ? std::numeric_limits<double>::infinity() : worst;
}

struct LinearCase {
  WeightFormat format;
  std::int64_t rows, cols, record_pad;
};

std::vector<LinearCase> linear_cases() {
  std::vector<LinearCase> cases;
  for (WeightFormat f : {WeightFormat::kF32, WeightFormat::kBF16})
    for (auto [rows, cols] : {std::pair{1, 1}, {3, 5}, {7, 33}, {65, 100}, {17, 257}}) cases.push_back({f, rows, cols, -1});
  for (auto [rows, cols] : {std::pair{1, 5}, {7, 33}, {45, 100}, {65, 70}}) cases.push_back({WeightFormat::kFp8Block, rows, cols, -1});
  for (std::int64_t pad : {-1, 0, 5})
    for (auto [rows, cols] : {std::pair{1, 32}, {3, 64}, {7, 96}, {65, 160}, {9, 544}})
      cases.push_back({WeightFormat::kFp4Row32, rows, cols, pad});
  return cases;
}

std::vector<float> run_linear(Backend& backend, const float* x, std::int64_t m, const WeightView& w) {
  std::vector<float> y(size(m * w.rows));
  backend.linear(x, m, w, y.data());
  return y;
}

void check_linear(Backend& ref, Backend& backend) {
  Random rng(101);
  for (const LinearCase& c : linear_cases()) {
    const TestWeight w = make_weight(c.format, c.rows, c.cols, rng, c.record_pad);
    REQUIRE(w.view.validate().ok());
    for (std::int64_t m : {1, 3, 7, 20, 65}) {  // 20: the CPU decode kernel in passes (but F32's on AVX-512)
      INFO(kernels::weight_format_name(c.format) << " [" << c.rows << ", " << c.cols << "] record pad " << c.record_pad
                                                 << ", m " << m);
      std::vector<float> values = rng.normals(m * c.cols);
      values[0] = -0.0f;
      Misaligned x(values);
      const std::vector<float> want = run_linear(ref, x.data(), m, w.view);
      const std::vector<float> got = run_linear(backend, x.data(), m, w.view);
      const double error = linear_error(x.data(), m, w.view, got, want);
      INFO("error " << std::scientific << error << ", tolerance " << kLinearTolerance);
      CHECK(error <= kLinearTolerance);
      CHECK(same_bits(got, run_linear(backend, x.data(), m, w.view)));
      // linear_rows: the rows in reverse order, with a gap after each; each row the same bits as linear's.
      for (Backend* b : {&ref, &backend}) {
        const std::int64_t stride = c.rows + 3;
        std::vector<float> scattered(size(m * stride), -1.0f);
        std::vector<float*> y_rows(size(m));
        for (std::int64_t i = 0; i < m; ++i) y_rows[size(i)] = &scattered[size((m - 1 - i) * stride)];
        b->linear_rows(x.data(), m, w.view, y_rows.data());
        const std::vector<float>& whole = b == &ref ? want : got;
        for (std::int64_t i = 0; i < m; ++i)
          CHECK(std::memcmp(y_rows[size(i)], &whole[size(i * c.rows)], size(c.rows) * sizeof(float)) == 0);
      }
    }
  }
}

// ---- the row-wise float ops

void check_rms_norm(Backend& ref, Backend& backend) {
  Random rng(102);
  for (std::int64_t rows : {1, 3, 7}) {
    for (std::int64_t n : {1, 7, 64, 257}) {
      std::vector<float> x = rng.normals(rows * n, 2.0f);
      if (rows > 1) std::fill(x.begin(), x.begin() + n, 0.0f);  // a zero row: 0 / sqrt(eps)
      if (rows > 2)  // a row whose mean square is eps's size, so that eps counts
        std::transform(x.begin() + n, x.begin() + 2 * n, x.begin() + n, [](float v) { return v * 5e-4f; });
      const std::vector<float> weight = rng.normals(n);
      for (bool weighted : {false, true}) {
        for (bool in_place : {false, true}) {
          INFO("rows " << rows << ", n " << n << ", weighted " << weighted << ", in place " << in_place);
          auto run = [&](Backend& b) {
            Misaligned in(x), out(std::vector<float>(x.size(), -1.0f));
            b.rms_norm(in.data(), rows, n, weighted ? weight.data() : nullptr, 1e-6f, in_place ? in.data() : out.data());
            return in_place ? in.values() : out.values();
          };
          const std::vector<float> got = run(backend);
          check_nmse(got, run(ref));
          CHECK(same_bits(got, run(backend)));
        }
      }
    }
  }
}

void check_rope(Backend& ref, Backend& backend) {
  Random rng(103);
  const std::int64_t rows = 3, heads = 3;
  for (const auto& shape : {std::pair{64, 64}, {64, 16}, {96, 64}, {10, 2}}) {
    const std::int64_t dim = shape.first, rope_dims = shape.second;
    const std::vector<float> x = rng.normals(rows * heads * dim);
    std::vector<float> cos(size(rows * rope_dims / 2)), sin(cos.size());
    for (std::size_t i = 0; i < cos.size(); ++i) {
      const float angle = rng.uniform(-10.0f, 10.0f);
      cos[i] = std::cos(angle);
      sin[i] = std::sin(angle);
    }
    for (bool inverse : {false, true}) {
      INFO("dim " << dim << ", rope dims " << rope_dims << ", inverse " << inverse);
      auto run = [&](Backend& b) {
        Misaligned v(x);
        b.rope(v.data(), rows, heads, dim, rope_dims, cos.data(), sin.data(), inverse);
        return v.values();
      };
      const std::vector<float> got = run(backend);
      check_nmse(got, run(ref));
      CHECK(same_bits(got, run(backend)));
      for (std::int64_t v = 0; v < rows * heads; ++v)  // the channels before the rope dims are untouched
        CHECK(std::memcmp(&got[size(v * dim)], &x[size(v * dim)], size(dim - rope_dims) * sizeof(float)) == 0);
    }
  }
}

void check_hc_mix(Backend& ref, Backend& backend) {
  Random rng(104);
  struct Case {
    std::int64_t hc, rows;
    float eps;  // 1e-2 makes a lost or misplaced eps show
  };
  for (const Case c : {Case{4, 1, 1e-6f}, {4, 5, 1e-6f}, {4, 9, 1e-2f}, {3, 1, 1e-2f}, {3, 5, 1e-6f}, {3, 9, 1e-2f}}) {
    INFO("hc " << c.hc << ", rows " << c.rows << ", eps " << c.eps);
    const std::int64_t used = 2 * c.hc + c.hc * c.hc, stride = used + 3;
    const std::vector<float> mixes = rng.normals(c.rows * stride);
    const std::vector<float> scale = {rng.uniform(0.5f, 2.0f), rng.uniform(0.5f, 2.0f), rng.uniform(0.5f, 2.0f)};
    const std::vector<float> base = rng.normals(used);
    auto run = [&](Backend& b) {
      Misaligned m(mixes);
      std::vector<float> pre(size(c.rows * c.hc)), post(pre.size()), comb(size(c.rows * c.hc * c.hc));
      kernels::HcMixArgs args;
      args.mixes = m.data();
      args.rows = c.rows;
      args.hc = c.hc;
      args.mix_stride = stride;
      args.scale = scale.data();
      args.base = base.data();
      args.eps = c.eps;
      args.sinkhorn_iters = 20;
      args.pre = pre.data();
      args.post = post.data();
      args.comb = comb.data();
      b.hc_mix(args);
      return std::vector<std::vector<float>>{pre, post, comb};
    };
    const auto got = run(backend), want = run(ref), again = run(backend);
    for (std::size_t i = 0; i < 3; ++i) {
      INFO("output " << (i == 0 ? "pre" : i == 1 ? "post" : "comb"));
      check_nmse(got[i], want[i]);
      CHECK(same_bits(got[i], again[i]));
    }
  }
}

void check_hc_collapse(Backend& ref, Backend& backend) {
  Random rng(105);
  for (std::int64_t hc : {4, 3}) {
    for (std::int64_t rows : {1, 3, 7}) {
      for (std::int64_t d : {1, 7, 100}) {
        INFO("hc " << hc << ", rows " << rows << ", d " << d);
        const std::vector<float> streams = rng.normals(rows * hc * d), pre = rng.normals(rows * hc);
        auto run = [&](Backend& b) {
          Misaligned s(streams), out(std::vector<float>(size(rows * d), -1.0f));
          b.hc_collapse(s.data(), pre.data(), rows, hc, d, out.data());
          return out.values();
        };
        const std::vector<float> got = run(backend);
        check_nmse(got, run(ref));
        CHECK(same_bits(got, run(backend)));
      }
    }
  }
}

void check_hc_expand(Backend& ref, Backend& backend) {
  Random rng(106);
  for (std::int64_t hc : {4, 3}) {
    for (std::int64_t rows : {1, 3, 7}) {
      for (std::int64_t d : {1, 7, 100}) {
        INFO("hc " << hc << ", rows " << rows << ", d " << d);
        const std::vector<float> streams = rng.normals(rows * hc * d), sub = rng.normals(rows * d);
        const std::vector<float> post = rng.normals(rows * hc), comb = rng.normals(rows * hc * hc, 0.5f);
        auto run = [&](Backend& b) {
          Misaligned s(streams), u(sub);
          b.hc_expand(s.data(), u.data(), post.data(), comb.data(), rows, hc, d);
          return s.values();
        };
        const std::vector<float> got = run(backend);
        check_nmse(got, run(ref));
        CHECK(same_bits(got, run(backend)));
      }
    }
  }
}

// ---- attention

// Window keys and selected entries each in their own rows of one buffer, one float apart from any
// alignment; per row a window range and (optionally) a list of selected entries.
struct AttentionInput {
  std::int64_t rows = 0, heads = 0, dim = 0, n_keys = 0;
  float scale = 0;
  std::vector<float> q, sinks, key_store, selected_store;
  std::vector<const float*> keys, selected;
  std::vector<std::int64_t> window_first, window_count, selected_offset;  // selected_offset empty: none
};

AttentionInput make_attention(std::int64_t heads, std::int64_t dim, float scale, bool with_selected, Random& rng) {
  AttentionInput in;
  in.heads = heads;
  in.dim = dim;
  in.scale = scale;
  in.n_keys = 45;
  // (first, count) per row: empty, one key, all of them, the last one, ranges in between.
  const std::pair<std::int64_t, std::int64_t> windows[] = {{0, 0}, {0, 1}, {3, 10}, {0, 45}, {44, 1}, {10, 35}, {7, 0}, {20, 17}};
  in.rows = static_cast<std::int64_t>(std::size(windows));
  for (auto [first, count] : windows) {
    in.window_first.push_back(first);
    in.window_count.push_back(count);
  }
  in.q = rng.normals(in.rows * heads * dim);
  in.sinks = rng.normals(heads);
  in.sinks[0] = 4.0f;  // a sink that dominates
  in.key_store = rng.normals(in.n_keys * (dim + 1) + 1);
  for (std::int64_t k = 0; k < in.n_keys; ++k) in.keys.push_back(in.key_store.data() + 1 + k * (dim + 1));
  if (with_selected) {
    const std::int64_t pool = 30;
    in.selected_store = rng.normals(pool * (dim + 1) + 1);
    const std::int64_t counts[] = {0, 3, 0, 7, 1, 20, 5, 2};  // row 6 has no window keys, only these
    in.selected_offset.push_back(0);
    for (std::int64_t r = 0; r < in.rows; ++r) {
      for (std::int64_t j = 0; j < counts[r]; ++j)
        in.selected.push_back(in.selected_store.data() + 1 + rng.integer(0, pool - 1) * (dim + 1));
      in.selected_offset.push_back(static_cast<std::int64_t>(in.selected.size()));
    }
  }
  return in;
}

// Rows [first, first + count) of the input in one call.
std::vector<float> run_attention(Backend& b, const AttentionInput& in, std::int64_t first, std::int64_t count) {
  std::vector<float> out(size(count * in.heads * in.dim), -1.0f);
  kernels::AttentionArgs args;
  args.rows = count;
  args.heads = in.heads;
  args.dim = in.dim;
  args.scale = in.scale;
  args.sinks = in.sinks.data();
  args.q = in.q.data() + first * in.heads * in.dim;
  args.keys = in.keys.data();
  args.n_keys = in.n_keys;
  args.window_first = in.window_first.data() + first;
  args.window_count = in.window_count.data() + first;
  if (!in.selected_offset.empty()) {
    args.selected = in.selected.data();
    args.selected_offset = in.selected_offset.data() + first;
  }
  args.out = out.data();
  b.attention(args);
  return out;
}

// Row r in a call of its own that has only the keys of its window, as a decode step has.
std::vector<float> run_attention_alone(Backend& b, const AttentionInput& in, std::int64_t r) {
  std::vector<float> out(size(in.heads * in.dim), -1.0f);
  const std::int64_t first = 0;
  kernels::AttentionArgs args;
  args.rows = 1;
  args.heads = in.heads;
  args.dim = in.dim;
  args.scale = in.scale;
  args.sinks = in.sinks.data();
  args.q = in.q.data() + r * in.heads * in.dim;
  args.keys = in.keys.data() + in.window_first[size(r)];
  args.n_keys = in.window_count[size(r)];
  args.window_first = &first;
  args.window_count = &in.window_count[size(r)];
  if (!in.selected_offset.empty()) {
    args.selected = in.selected.data();
    args.selected_offset = &in.selected_offset[size(r)];
  }
  args.out = out.data();
  b.attention(args);
  return out;
}

void check_attention(Backend& ref, Backend& backend) {
  Random rng(107);
  for (std::int64_t dim : {64, 96}) {
    for (bool with_selected : {false, true}) {
      for (float scale : {1.0f / std::sqrt(static_cast<float>(dim)), 0.5f}) {
        INFO("dim " << dim << ", selected " << with_selected << ", scale " << scale);
        const AttentionInput in = make_attention(3, dim, scale, with_selected, rng);
        const std::vector<float> got = run_attention(backend, in, 0, in.rows);
        const std::vector<float> want = run_attention(ref, in, 0, in.rows);
        check_nmse(got, want);
        CHECK(same_bits(got, run_attention(backend, in, 0, in.rows)));
        // A row with nothing to attend to is zero (only the sink in the denominator).
        CHECK(std::all_of(got.begin(), got.begin() + in.heads * dim, [](float v) { return v == 0.0f; }));
      }
    }
  }
}

// ---- the KV entry formats

std::int64_t scale_block(KvFormat format) {
  switch (format) {
    case KvFormat::kWindow: return kernels::kWindowScaleBlock;
    case KvFormat::kCompressed: return kernels::kCompressedScaleBlock;
    case KvFormat::kIndex: return kernels::kIndexScaleBlock;
  }
  return 0;
}

const char* kv_format_name(KvFormat format) {
  switch (format) {
    case KvFormat::kWindow: return "window";
    case KvFormat::kCompressed: return "compressed";
    case KvFormat::kIndex: return "index";
  }
  return "?";
}

// Rows for the quantisers, block by block: zero blocks (with negative zeros), blocks whose values
// sit exactly on the rounding ties of the format's grid at an exact scale, tiny (subnormal) blocks
// under the scale floors, and normal values at magnitudes over the format's whole range.
std::vector<float> kv_values(KvFormat format, std::int64_t rows, std::int64_t dim, Random& rng) {
  const std::int64_t block = scale_block(format);
  // Midpoints of the E2M1 grid, of the E4M3 grid (subnormal and normal ones), and each grid's max.
  static constexpr float kFp4Ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  static constexpr float kFp8Ties[] = {0x1p-10f, 0x3p-10f, 0x1p-6f + 0x1p-10f, 1.0625f, 1.1875f, 17.0f, 432.0f, 0x15p-10f};
  std::vector<float> x(size(rows * dim));
  for (std::int64_t b = 0; b < rows * dim / block; ++b) {
    float* v = &x[size(b * block)];
    const std::int64_t kind = rng.integer(0, 6);
    if (kind == 0) {
      for (std::int64_t i = 0; i < block; ++i) v[i] = i % 3 == 0 ? -0.0f : 0.0f;
    } else if (kind == 1) {
      // amax = grid max × s with s exact, so that x / scale lands on the ties exactly.
      // (An E4M3 scale stays in E4M3's normal range, where it has all of its mantissa bits.)
      float s = std::ldexp(1.0f, static_cast<int>(rng.integer(format == KvFormat::kCompressed ? -6 : -10, 5)));
      if (format == KvFormat::kCompressed) s *= 1.0f + static_cast<float>(rng.integer(0, 7)) / 8.0f;
      const bool fp8 = format == KvFormat::kWindow;
      v[0] = (fp8 ? 448.0f : 6.0f) * s;
      for (std::int64_t i = 1; i < block; ++i) {
        const float tie = fp8 ? kFp8Ties[size(i) % std::size(kFp8Ties)] : kFp4Ties[size(i) % std::size(kFp4Ties)];
        v[i] = (i % 2 == 0 ? -tie : tie) * s;
      }
    } else if (kind == 2) {
      for (std::int64_t i = 0; i < block; ++i) v[i] = rng.normal(1e-39f);
    } else {
      const auto [lo, hi] = format == KvFormat::kCompressed ? std::pair{-12, 8} : std::pair{-40, 20};
      const float magnitude = std::ldexp(1.0f, static_cast<int>(rng.integer(lo, hi)));
      for (std::int64_t i = 0; i < block; ++i) v[i] = rng.normal(magnitude);
      v[rng.integer(0, block - 1)] = -0.0f;
    }
  }
  return x;
}

struct KvDims {
  KvFormat format;
  std::vector<std::int64_t> dims;
};
const KvDims kKvDims[] = {
    {KvFormat::kWindow, {32, 64, 96, 512}},
    {KvFormat::kCompressed, {16, 48, 64, 512}},
    {KvFormat::kIndex, {32, 64, 128}},
};

void check_kv_encode(Backend& ref, Backend& backend) {
  Random rng(108);
  const std::int64_t rows = 7;
  for (const KvDims& kv_dims : kKvDims) {
    const KvFormat format = kv_dims.format;
    for (std::int64_t dim : kv_dims.dims) {
      INFO(kv_format_name(format) << " dim " << dim);
      Misaligned x(kv_values(format, rows, dim, rng));
      auto run = [&](Backend& b) {
        std::vector<std::uint8_t> entries(size(rows * kernels::kv_entry_bytes(format, dim)), 0xA5);
        b.kv_encode(format, x.data(), rows, dim, entries.data());
        return entries;
      };
      const std::vector<std::uint8_t> got = run(backend);
      CHECK(same_bits(got, run(ref)));
      CHECK(same_bits(got, run(backend)));
    }
  }
}

// Random valid entries: codes of any value but the E4M3 NaNs, scales over the range the encoders write.
std::vector<std::uint8_t> random_entries(KvFormat format, std::int64_t rows, std::int64_t dim, Random& rng) {
  const std::int64_t bytes = kernels::kv_entry_bytes(format, dim);
  std::vector<std::uint8_t> entries(size(rows * bytes));
  for (std::int64_t r = 0; r < rows; ++r) {
    std::uint8_t* e = &entries[size(r * bytes)];
    switch (format) {
      case KvFormat::kWindow:
        for (std::int64_t i = 0; i < dim; ++i) e[i] = i < 9 ? kE4m3Edges[i] : random_e4m3(rng);
        for (std::int64_t b = 0; b < dim / 32; ++b) e[dim + b] = rng.byte(1, 240);
        break;
      case KvFormat::kCompressed:
        for (std::int64_t i = 0; i < dim / 2; ++i) e[i] = rng.byte();
        for (std::int64_t b = 0; b < dim / 16; ++b) e[dim / 2 + b] = b < 9 ? kE4m3Edges[b] : random_e4m3(rng);
        break;
      case KvFormat::kIndex:
        for (std::int64_t i = 0; i < dim / 2; ++i) e[i] = rng.byte();
        for (std::int64_t b = 0; b < dim / 32; ++b) e[dim / 2 + b] = rng.byte(1, 253);
        break;
    }
  }
  return entries;
}

void check_kv_decode(Backend& ref, Backend& backend) {
  Random rng(109);
  const std::int64_t rows = 7;
  for (const KvDims& kv_dims : kKvDims) {
    const KvFormat format = kv_dims.format;
    for (std::int64_t dim : kv_dims.dims) {
      std::vector<std::uint8_t> encoded(size(rows * kernels::kv_entry_bytes(format, dim)));
      std::vector<float> x = kv_values(format, rows, dim, rng);
      ref.kv_encode(format, x.data(), rows, dim, encoded.data());
      for (bool random : {true, false}) {
        INFO(kv_format_name(format) << " dim " << dim << (random ? ", random entries" : ", encoded entries"));
        const std::vector<std::uint8_t> entries = random ? random_entries(format, rows, dim, rng) : encoded;
        auto run = [&](Backend& b) {
          Misaligned out(std::vector<float>(size(rows * dim), -1.0f));
          b.kv_decode(format, entries.data(), rows, dim, out.data());
          return out.values();
        };
        const std::vector<float> got = run(backend);
        CHECK(same_bits(got, run(ref)));
        CHECK(same_bits(got, run(backend)));
      }
    }
  }
}

void check_fp4_round_trip(Backend& ref, Backend& backend) {
  Random rng(110);
  for (std::int64_t dim : {32, 64, 128}) {
    for (std::int64_t rows : {1, 7, 12}) {
      INFO("dim " << dim << ", rows " << rows);
      const std::vector<float> x = kv_values(KvFormat::kIndex, rows, dim, rng);
      auto run = [&](Backend& b) {
        Misaligned v(x);
        b.fp4_round_trip(v.data(), rows, dim);
        return v.values();
      };
      const std::vector<float> got = run(backend);
      CHECK(same_bits(got, run(ref)));
      CHECK(same_bits(got, run(backend)));
    }
  }
}

// ---- the compressor, the indexer

void check_compressor_pool(Backend& ref, Backend& backend) {
  Random rng(111);
  for (std::int64_t groups : {1, 3}) {
    for (std::int64_t ratio : {1, 2, 4, 32}) {
      for (std::int64_t dim : {7, 64, 100}) {
        INFO("groups " << groups << ", ratio " << ratio << ", dim " << dim);
        const std::vector<float> kv = rng.normals(groups * ratio * dim), gate = rng.normals(groups * ratio * dim, 3.0f);
        auto run = [&](Backend& b) {
          Misaligned k(kv), g(gate), out(std::vector<float>(size(groups * dim), -1.0f));
          b.compressor_pool(k.data(), g.data(), groups, ratio, dim, out.data());
          return out.values();
        };
        const std::vector<float> got = run(backend);
        check_nmse(got, run(ref));
        CHECK(same_bits(got, run(backend)));
      }
    }
  }
}

struct IndexerInput {
  std::int64_t rows = 0, heads = 0, dim = 0, n_keys = 0, top_k = 0, block = 0, candidate_top_k = 0;
  float scale = 0;
  std::vector<float> q, weights;
  std::vector<std::uint8_t> keys;
  std::vector<std::int64_t> visible;
  std::vector<std::vector<std::uint64_t>> candidates_in;  // [rows], or empty: every visible key
  std::vector<std::pair<std::int64_t, std::int64_t>> duplicates;  // (w, w') with w < w' the same key
  bool all_keys_equal = false;  // every score ties: the lowest indices win
};

struct IndexerOutput {
  std::vector<std::vector<std::int32_t>> selection;
  std::vector<std::vector<std::uint64_t>> candidates;  // empty unless a candidate source
  bool operator==(const IndexerOutput&) const = default;
};

// Keys are real index entries (the ref encoder's, with a few exact duplicates so that scores tie),
// queries FP4 round-tripped, head weights of both signs.
IndexerInput make_indexer(Backend& ref, std::int64_t dim, std::int64_t n_keys, std::vector<std::int64_t> visible,
                          std::int64_t top_k, std::int64_t block, std::int64_t candidate_top_k, Random& rng) {
  IndexerInput in;
  in.rows = static_cast<std::int64_t>(visible.size());
  in.heads = 4;
  in.dim = dim;
  in.n_keys = n_keys;
  in.top_k = top_k;
  in.block = block;
  in.candidate_top_k = candidate_top_k;
  in.scale = 1.0f / std::sqrt(static_cast<float>(dim));
  in.visible = std::move(visible);
  const std::int64_t bytes = kernels::index_entry_bytes(dim);
  const std::vector<float> key_values = rng.normals(n_keys * dim);
  in.keys.resize(size(n_keys * bytes));
  ref.kv_encode(KvFormat::kIndex, key_values.data(), n_keys, dim, in.keys.data());
  for (std::int64_t w = 7; w < n_keys; w += 13) {  // duplicates of earlier keys
    std::memcpy(&in.keys[size(w * bytes)], &in.keys[size((w / 3) * bytes)], size(bytes));
    in.duplicates.emplace_back(w / 3, w);
  }
  in.q = rng.normals(in.rows * in.heads * dim);
  ref.fp4_round_trip(in.q.data(), in.rows * in.heads, dim);
  in.weights = rng.normals(in.rows * in.heads);
  return in;
}

IndexerOutput run_indexer(Backend& b, const IndexerInput& in, std::int64_t first, std::int64_t count) {
  const std::int64_t words = kernels::candidate_words(in.n_keys, in.block);
  IndexerOutput out;
  out.selection.assign(size(count), {-1});                                           // overwritten
  out.candidates.assign(size(count), std::vector<std::uint64_t>(size(words), ~std::uint64_t{0}));  // cleared first
  std::vector<std::uint64_t*> candidates_out(size(count));
  std::vector<const std::uint64_t*> candidates_in(size(count));
  for (std::int64_t i = 0; i < count; ++i) {
    candidates_out[size(i)] = out.candidates[size(i)].data();
    if (!in.candidates_in.empty()) candidates_in[size(i)] = in.candidates_in[size(first + i)].data();
  }
  kernels::IndexerArgs args;
  args.rows = count;
  args.heads = in.heads;
  args.dim = in.dim;
  args.q = in.q.data() + first * in.heads * in.dim;
  args.weights = in.weights.data() + first * in.heads;
  args.scale = in.scale;
  args.keys = in.keys.data();
  args.n_keys = in.n_keys;
  args.visible = in.visible.data() + first;
  args.top_k = in.top_k;
  args.block = in.block;
  args.candidate_top_k = in.candidate_top_k;
  args.candidates_out = in.candidate_top_k > 0 ? candidates_out.data() : nullptr;
  args.candidates_in = in.candidates_in.empty() ? nullptr : candidates_in.data();
  args.selection = out.selection.data();
  b.indexer(args);
  if (in.candidate_top_k <= 0) out.candidates.clear();
  return out;
}

// The contract's scores of row r's visible keys, in double (-inf where candidates_in leaves a key out).
std::vector<double> indexer_scores(Backend& ref, const IndexerInput& in, std::int64_t r) {
  const std::int64_t visible = in.visible[size(r)];
  std::vector<float> keys(size(visible * in.dim));
  ref.kv_decode(KvFormat::kIndex, in.keys.data(), visible, in.dim, keys.data());
  std::vector<double> scores(size(visible), -std::numeric_limits<double>::infinity());
  for (std::int64_t w = 0; w < visible; ++w) {
    if (!in.candidates_in.empty() && !bit_set(in.candidates_in[size(r)], w / in.block)) continue;
    double score = 0.0;
    for (std::int64_t h = 0; h < in.heads; ++h) {
      double dot = 0.0;
      for (std::int64_t c = 0; c < in.dim; ++c)
        dot += double{in.q[size((r * in.heads + h) * in.dim + c)]} * double{keys[size(w * in.dim + c)]};
      score += std::max(dot, 0.0) * double{in.scale} * double{in.weights[size(r * in.heads + h)]};
    }
    scores[size(w)] = score;
  }
  return scores;
}

// Picks are ascending and distinct, each of a key (or block) with a finite score.
void check_valid_picks(const std::vector<std::int32_t>& picks, const std::vector<double>& scores) {
  CHECK(std::adjacent_find(picks.begin(), picks.end(), [](std::int32_t a, std::int32_t b) { return a >= b; }) == picks.end());
  for (std::int32_t w : picks) {
    INFO("pick " << w << " of " << scores.size());
    REQUIRE((w >= 0 && size(w) < scores.size()));
    CHECK(scores[size(w)] > -std::numeric_limits<double>::infinity());
  }
}

double worst_score(const std::vector<std::int32_t>& picks, const std::vector<double>& scores) {
  double worst = std::numeric_limits<double>::infinity();
  for (std::int32_t w : picks) worst = std::min(worst, scores[size(w)]);
  return worst;
}

// `got` is as good a choice as `want` (the reference's) and the other way round: as many, each pick
// scoring at least the other's worst less the tie tolerance.
void check_same_picks(const std::vector<std::int32_t>& got, const std::vector<std::int32_t>& want, const std::vector<double>& scores,
                      double tolerance) {
  CHECK(got.size() == want.size());
  if (got == want) return;
  const double got_worst = worst_score(got, scores), want_worst = worst_score(want, scores);
  for (std::int32_t w : got) {
    INFO("backend's pick " << w << " scores " << scores[size(w)] << ", the reference's worst " << want_worst << ", tolerance " << tolerance);
    CHECK(scores[size(w)] >= want_worst - tolerance);
  }
  for (std::int32_t w : want) {
    INFO("reference's pick " << w << " scores " << scores[size(w)] << ", the backend's worst " << got_worst << ", tolerance " << tolerance);
    CHECK(scores[size(w)] >= got_worst - tolerance);
  }
}

std::vector<std::int32_t> set_blocks(const std::vector<std::uint64_t>& bits) {
  std::vector<std::int32_t> set;
  for (std::int64_t b = 0; b < static_cast<std::int64_t>(bits.size()) * 64; ++b)
    if (bit_set(bits, b)) set.push_back(static_cast<std::int32_t>(b));
  return set;
}

// Both outputs obey the contract on their own (the reference included), and choose alike up to near-ties.
void check_indexer_output(Backend& ref, const IndexerInput& in, const IndexerOutput& got, const IndexerOutput& want) {
  REQUIRE(got.selection.size() == want.selection.size());
  constexpr double kMinusInf = -std::numeric_limits<double>::infinity();
  for (std::int64_t r = 0; r < in.rows; ++r) {
    const std::int64_t visible = in.visible[size(r)], n_blocks = (in.n_keys + in.block - 1) / in.block;
    INFO("row " << r << ", visible " << visible);
    const std::vector<double> scores = indexer_scores(ref, in, r);
    const std::int64_t scored = std::count_if(scores.begin(), scores.end(), [&](double s) { return s > kMinusInf; });
    double largest = 1e-30;
    for (double s : scores)
      if (std::isfinite(s)) largest = std::max(largest, std::fabs(s));
    const double tolerance = kTieTolerance * largest;
    std::vector<double> block_scores(size(n_blocks), kMinusInf);
    for (std::int64_t w = 0; w < visible; ++w) block_scores[size(w / in.block)] = std::max(block_scores[size(w / in.block)], scores[size(w)]);
    if (visible > 0) block_scores[size((visible - 1) / in.block)] = std::numeric_limits<double>::infinity();

    for (const IndexerOutput* out : {&got, &want}) {
      INFO((out == &got ? "the backend" : "ref"));
      const std::vector<std::int32_t>& picked = out->selection[size(r)];
      check_valid_picks(picked, scores);
      CHECK(static_cast<std::int64_t>(picked.size()) == std::min(in.top_k, scored));
      // Equal keys score the same in any backend, and the tie goes to the lower index.
      auto has = [&](std::int64_t w) { return std::binary_search(picked.begin(), picked.end(), static_cast<std::int32_t>(w)); };
      for (auto [w, copy] : in.duplicates) {
        if (copy >= visible || scores[size(w)] == kMinusInf || !has(copy)) continue;
        INFO("key " << copy << " picked, its equal " << w << " not");
        CHECK(has(w));
      }
      std::vector<std::int32_t> lowest(size(std::min(in.top_k, visible)));
      std::iota(lowest.begin(), lowest.end(), 0);
      if (in.all_keys_equal) CHECK(picked == lowest);
      if (in.candidate_top_k <= 0) continue;
      INFO("candidate blocks");
      const std::vector<std::int32_t> blocks = set_blocks(out->candidates[size(r)]);
      check_valid_picks(blocks, block_scores);
      if (visible > 0) CHECK(bit_set(out->candidates[size(r)], (visible - 1) / in.block));
      if (in.all_keys_equal && visible > 0) {  // the last visible key's block, then the lowest
        const std::int32_t last = static_cast<std::int32_t>((visible - 1) / in.block);
        std::vector<std::int32_t> expected(size(std::min<std::int64_t>(in.candidate_top_k - 1, last)));
        std::iota(expected.begin(), expected.end(), 0);
        expected.push_back(last);
        CHECK(blocks == expected);
      }
    }
    {
      INFO("selection");
      check_same_picks(got.selection[size(r)], want.selection[size(r)], scores, tolerance);
    }
    if (in.candidate_top_k > 0) {
      INFO("candidate blocks");
      check_same_picks(set_blocks(got.candidates[size(r)]), set_blocks(want.candidates[size(r)]), block_scores, tolerance);
    }
  }
}

void check_indexer(Backend& ref, Backend& backend) {
  Random rng(112);
  std::vector<IndexerInput> inputs;
  // Small: fewer visible keys than top_k, one, none, all.
  inputs.push_back(make_indexer(ref, 64, 100, {0, 1, 10, 17, 100, 64, 99}, 16, 16, 3, rng));
  // Large enough for an optimised backend's key tiles, visible counts per row from all to none.
  inputs.push_back(make_indexer(ref, 128, 3000, {3000, 2999, 1500, 17, 0, 2048, 1, 1025}, 64, 16, 8, rng));
  // A reindex: only the keys of each row's candidate blocks (random sets, one empty).
  IndexerInput reindex = make_indexer(ref, 64, 3000, {3000, 2500, 40, 0, 1000, 3000}, 64, 16, 0, rng);
  const std::int64_t words = kernels::candidate_words(reindex.n_keys, reindex.block);
  for (std::int64_t r = 0; r < reindex.rows; ++r) {
    std::vector<std::uint64_t> bits(size(words), 0);
    for (std::int64_t b = 0; b < (reindex.n_keys + reindex.block - 1) / reindex.block; ++b)
      if (r != 4 && rng.integer(0, 3) == 0) bits[size(b / 64)] |= std::uint64_t{1} << (b % 64);
    reindex.candidates_in.push_back(bits);
  }
  inputs.push_back(std::move(reindex));
  // Every key the same: the picks and the blocks are decided by the ties alone.
  IndexerInput equal = make_indexer(ref, 64, 200, {200, 150, 37, 5, 0, 16, 17}, 16, 16, 4, rng);
  for (std::int64_t w = 1; w < equal.n_keys; ++w)
    std::copy_n(equal.keys.begin(), kernels::index_entry_bytes(equal.dim), equal.keys.begin() + w * kernels::index_entry_bytes(equal.dim));
  equal.duplicates.clear();
  equal.all_keys_equal = true;
  inputs.push_back(std::move(equal));
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const IndexerInput& in = inputs[i];
    INFO("case " << i << ": " << in.n_keys << " keys, dim " << in.dim << ", top " << in.top_k << ", candidate blocks "
                 << in.candidate_top_k << (in.candidates_in.empty() ? "" : ", candidates in"));
    const IndexerOutput got = run_indexer(backend, in, 0, in.rows);
    check_indexer_output(ref, in, got, run_indexer(ref, in, 0, in.rows));
    CHECK(got == run_indexer(backend, in, 0, in.rows));
  }
}

// ---- the MoE ops

void check_router(Backend& ref, Backend& backend) {
  Random rng(113);
  const std::int64_t rows = 7;
  for (std::int64_t experts : {8, 64, 256}) {
    for (std::int64_t top_k : {1, 6}) {
      for (bool normalise : {false, true}) {
        for (float temperature : {1.0f, 0.7f}) {
          INFO(experts << " experts, top " << top_k << ", normalise " << normalise << ", temperature " << temperature);
          std::vector<float> logits = rng.normals(rows * experts, 3.0f);
          logits[1] = 25.0f;  // softplus's linear branch
          logits[2] = 60.0f;
          logits[3] = -30.0f;
          std::vector<float> bias = rng.normals(experts, 0.05f);
          // Experts 3 and 5 tie exactly in every row (the best two in row 4): 3 goes first.
          bias[5] = bias[3];
          for (std::int64_t r = 0; r < rows; ++r) logits[size(r * experts + 5)] = logits[size(r * experts + 3)];
          logits[size(4 * experts + 3)] = logits[size(4 * experts + 5)] = 40.0f;
          auto run = [&](Backend& b) {
            std::vector<std::int32_t> expert(size(rows * top_k), -1);
            std::vector<float> weight(size(rows * top_k), -1.0f);
            kernels::RouterArgs args;
            args.logits = logits.data();
            args.rows = rows;
            args.experts = experts;
            args.top_k = top_k;
            args.bias = bias.data();
            args.temperature = temperature;
            args.scaling = 2.5f;
            args.normalise = normalise;
            args.expert = expert.data();
            args.weight = weight.data();
            b.router(args);
            return std::pair{expert, weight};
          };
          const auto [got_expert, got_weight] = run(backend);
          const auto [want_expert, want_weight] = run(ref);
          const auto [again_expert, again_weight] = run(backend);
          CHECK(same_bits(got_expert, again_expert));
          CHECK(same_bits(got_weight, again_weight));
          std::vector<float> tie_free_got, tie_free_want;
          for (std::int64_t r = 0; r < rows; ++r) {
            INFO("row " << r);
            auto biased = [&](std::int32_t e) {
              const double x = double{logits[size(r * experts + e)]} / double{temperature};
              return std::sqrt(x > 20.0 ? x : std::log1p(std::exp(x))) + double{bias[size(e)]};
            };
            const auto row_experts = got_expert.begin() + r * top_k;
            const auto three = std::find(row_experts, row_experts + top_k, 3), five = std::find(row_experts, row_experts + top_k, 5);
            if (five != row_experts + top_k) CHECK(three < five);
            if (r == 4) CHECK(*row_experts == 3);
            if (r == 4) CHECK(want_expert[size(r * top_k)] == 3);
            bool tie = false;
            for (std::int64_t i = 0; i < top_k; ++i) {
              const std::int32_t g = got_expert[size(r * top_k + i)], w = want_expert[size(r * top_k + i)];
              if (g == w) continue;
              tie = true;
              REQUIRE((g >= 0 && g < experts));
              INFO("expert " << g << " for " << w << " at " << i);
              CHECK(std::fabs(biased(g) - biased(w)) <= kTieTolerance * (1.0 + std::fabs(biased(w))));
            }
            if (tie) continue;
            tie_free_got.insert(tie_free_got.end(), &got_weight[size(r * top_k)], &got_weight[size((r + 1) * top_k)]);
            tie_free_want.insert(tie_free_want.end(), &want_weight[size(r * top_k)], &want_weight[size((r + 1) * top_k)]);
          }
          check_nmse(tie_free_got, tie_free_want);
        }
      }
    }
  }
}

void check_swiglu(Backend& ref, Backend& backend) {
  Random rng(114);
  const std::int64_t rows = 3;
  for (std::int64_t width : {1, 7, 100, 257}) {
    for (float limit : {10.0f, 0.0f, -1.0f}) {
      for (bool weighted : {false, true}) {
        INFO("width " << width << ", limit " << limit << ", weighted " << weighted);
        const std::vector<float> gate = rng.normals(rows * width, 8.0f), up = rng.normals(rows * width, 8.0f);
        const std::vector<float> row_weight = rng.normals(rows);
        auto run = [&](Backend& b) {
          Misaligned g(gate), u(up);
          b.swiglu(g.data(), u.data(), rows, width, limit, weighted ? row_weight.data() : nullptr);
          return g.values();
        };
        const std::vector<float> got = run(backend);
        check_nmse(got, run(ref));
        CHECK(same_bits(got, run(backend)));
      }
    }
  }
}

// One IEEE addition per element: the same bits from any correct backend.
void check_add_rows(Backend& ref, Backend& backend) {
  Random rng(115);
  for (std::int64_t d : {1, 7, 100}) {
    INFO("d " << d);
    const std::int64_t m = 5, out_rows = 9;
    const std::vector<std::int64_t> dst = {8, 0, 3, 4, 7};
    const std::vector<float> y = rng.normals(m * d), out = rng.normals(out_rows * d);
    auto run = [&](Backend& b) {
      Misaligned yy(y), o(out);
      b.add_rows(yy.data(), m, d, dst.data(), o.data());
      return o.values();
    };
    const std::vector<float> got = run(backend);
    CHECK(same_bits(got, run(ref)));
    CHECK(same_bits(got, run(backend)));
  }
}

void check_gather_rows(Backend& ref, Backend& backend) {
  Random rng(116);
  const std::int64_t table_rows = 40;
  const std::vector<std::int64_t> ids = {0, 39, 5, 5, 17, 2, 38, 0, 21};
  for (TableFormat format : {TableFormat::kBF16, TableFormat::kFp8Row32}) {
    const std::vector<std::int64_t> widths = format == TableFormat::kBF16 ? std::vector<std::int64_t>{1, 7, 64, 100}
                                                                          : std::vector<std::int64_t>{32, 64, 96};
    for (std::int64_t cols : widths) {
      INFO(kernels::table_format_name(format) << " cols " << cols);
      const std::int64_t n = table_rows * cols;
      std::vector<std::uint16_t> bf16(size(n + 1));  // one uint16 of offset
      std::vector<std::uint8_t> fp8(size(n + 1)), scales(size(table_rows * cols / 32 + 1));  // odd byte offsets
      for (std::int64_t i = 0; i < n; ++i) {
        bf16[size(i + 1)] = i % 4 == 0 ? kBf16Edges[(i / 4) % 9] : random_bf16(rng, 1e3f);
        fp8[size(i + 1)] = i % 4 == 0 ? kE4m3Edges[(i / 4) % 9] : random_e4m3(rng);
      }
      for (auto& s : scales) s = rng.byte(100, 154);
      kernels::RowTable table;
      table.format = format;
      table.data = format == TableFormat::kBF16 ? static_cast<const void*>(bf16.data() + 1) : fp8.data() + 1;
      table.scales = format == TableFormat::kFp8Row32 ? scales.data() + 1 : nullptr;
      table.rows = table_rows;
      table.cols = cols;
      auto run = [&](Backend& b) {
        Misaligned out(std::vector<float>(ids.size() * size(cols), -1.0f));
        b.gather_rows(table, ids.data(), static_cast<std::int64_t>(ids.size()), out.data());
        return out.values();
      };
      const std::vector<float> got = run(backend);
      CHECK(same_bits(got, run(ref)));
      CHECK(same_bits(got, run(backend)));
    }
  }
}

void check_engram_fuse(Backend& ref, Backend& backend) {
  Random rng(117);
  const std::int64_t rows = 3;
  for (std::int64_t hc : {4, 3}) {
    for (std::int64_t d : {7, 64, 100}) {
      INFO("hc " << hc << ", d " << d);
      std::vector<float> streams = rng.normals(rows * hc * d), kv = rng.normals(rows * (hc + 1) * d);
      std::vector<float> gate_weight = rng.normals(hc * d);
      // Mean squares of eps's size in row 1 (a stream, then a key), so that eps counts; a zero gate
      // weight (g = +0, where the clamp to 1e-6 decides) for stream 1.
      for (std::int64_t e = 0; e < d; ++e) {
        streams[size((1 * hc + 0) * d + e)] *= 1e-3f;
        kv[size((1 * (hc + 1) + 1) * d + e)] *= 1e-3f;
        gate_weight[size(1 * d + e)] = 0.0f;
      }
      auto run = [&](Backend& b) {
        Misaligned s(streams), k(kv);
        b.engram_fuse(s.data(), k.data(), gate_weight.data(), rows, hc, d, 1e-6f);
        return s.values();
      };
      const std::vector<float> got = run(backend);
      check_nmse(got, run(ref));
      CHECK(same_bits(got, run(backend)));
    }
  }
}

using OpCheck = void (*)(Backend& ref, Backend& backend);

const std::map<Op, OpCheck>& op_checks() {
  static const std::map<Op, OpCheck> checks = {
      {Op::kLinear, check_linear},
      {Op::kRmsNorm, check_rms_norm},
      {Op::kRope, check_rope},
      {Op::kHcMix, check_hc_mix},
      {Op::kHcCollapse, check_hc_collapse},
      {Op::kHcExpand, check_hc_expand},
      {Op::kAttention, check_attention},
      {Op::kKvEncode, check_kv_encode},
      {Op::kKvDecode, check_kv_decode},
      {Op::kFp4RoundTrip, check_fp4_round_trip},
      {Op::kCompressorPool, check_compressor_pool},
      {Op::kIndexer, check_indexer},
      {Op::kRouter, check_router},
      {Op::kSwiGlu, check_swiglu},
      {Op::kAddRows, check_add_rows},
      {Op::kGatherRows, check_gather_rows},
      {Op::kEngramFuse, check_engram_fuse},
  };
  return checks;
}

// The compiled backends other than ref that this machine can run. A compiled backend whose device
// is missing (a CUDA build without a GPU) is left out with a warning in the test's output, and
// the ctest entry gpu_device_check reports it as not run.
std::vector<std::string> non_ref_backends() {
  std::vector<std::string> names;
  for (const std::string& name : kernels::backend_names()) {
    if (name == "ref") continue;
    auto made = kernels::make_backend(name, 1);
    if (!made.ok() && made.status().code() == hippo::ErrorCode::kUnavailable) {
      WARN("backend " << name << " NOT TESTED: " << made.status().to_string());
      continue;
    }
    names.push_back(name);
  }
  return names;
}

}  // namespace

TEST_CASE("every op of backend.h has a check here", "[backend]") {
  for (Op op : kernels::kAllOps) {
    INFO(kernels::op_name(op));
    CHECK(op_checks().count(op) == 1);
  }
  CHECK(op_checks().size() == std::size(kernels::kAllOps));
}

TEST_CASE("ref is in the registry and supports every op and format", "[backend]") {
  const std::vector<std::string> names = kernels::backend_names();
  CHECK(std::count(names.begin(), names.end(), "ref") == 1);
  auto made = kernels::make_backend("ref", 4);
  REQUIRE(made.ok());
  Backend& ref = **made;
  CHECK(std::string(ref.name()) == "ref");
  CHECK(ref.threads() == 1);
  for (Op op : kernels::kAllOps) CHECK(ref.supports(op));
  for (WeightFormat f : {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kFp8Block, WeightFormat::kFp4Row32})
    CHECK(ref.supports(f));
  for (TableFormat f : {TableFormat::kBF16, TableFormat::kFp8Row32}) CHECK(ref.supports(f));
  CHECK_FALSE(kernels::make_backend("no-such-backend").ok());
}

// Known answers of ref's quantisers, independent of any other backend: the E2M1 and E4M3 ties go to
// the even code, the sign of -0 is kept, and amax at the grid maximum gives the scale 1.
TEST_CASE("ref's KV quantisers round ties to even and keep the sign of zero", "[backend]") {
  auto ref = kernels::ref::make_ref_backend();
  SECTION("index (E2M1, UE8M0 scales)") {
    const std::vector<float> x = {6, .25f, .75f, 1.25f, 1.75f, 2.5f, 3.5f, 5, -.25f, -.75f, -1.25f, -1.75f, -2.5f, -3.5f, -5, -6,
                                  0, -0.0f, .3f, .7f, 1.3f, 1.7f, 2.6f, 3.4f, 5.1f, 4.9f, .1f, .5f, 1, 1.5f, 2, 3};
    const std::uint8_t codes[32] = {7, 0, 2, 2, 4, 4, 6, 6, 8, 10, 10, 12, 12, 14, 14, 15,
                                    0, 8, 1, 1, 3, 3, 5, 5, 7, 6, 0, 1, 2, 3, 4, 5};
    std::vector<std::uint8_t> entry(size(kernels::index_entry_bytes(32)));
    ref->kv_encode(KvFormat::kIndex, x.data(), 1, 32, entry.data());
    for (std::size_t i = 0; i < 16; ++i) {
      INFO("byte " << i);
      CHECK(int{entry[i]} == (codes[2 * i] | codes[2 * i + 1] << 4));
    }
    CHECK(int{entry[16]} == 127);  // 2^0
    // Rounding is idempotent: the decoded values encode to the same entry.
    std::vector<float> decoded(32);
    ref->kv_decode(KvFormat::kIndex, entry.data(), 1, 32, decoded.data());
    std::vector<std::uint8_t> again(entry.size());
    ref->kv_encode(KvFormat::kIndex, decoded.data(), 1, 32, again.data());
    CHECK(same_bits(entry, again));
    std::vector<float> trip = x;
    ref->fp4_round_trip(trip.data(), 1, 32);
    CHECK(same_bits(trip, decoded));
  }
  SECTION("compressed (E2M1, E4M3 scales)") {
    std::vector<float> x = {3, .125f, .375f, .625f, .875f, 1.25f, 1.75f, 2.5f, -0.0f, 0, -3, -.125f, 1, .5f, 2, 1.5f};
    const std::uint8_t codes[16] = {7, 0, 2, 2, 4, 4, 6, 6, 8, 0, 15, 8, 4, 2, 6, 5};
    std::vector<std::uint8_t> entry(size(kernels::compressed_entry_bytes(16)));
    ref->kv_encode(KvFormat::kCompressed, x.data(), 1, 16, entry.data());
    for (std::size_t i = 0; i < 8; ++i) {
      INFO("byte " << i);
      CHECK(int{entry[i]} == (codes[2 * i] | codes[2 * i + 1] << 4));
    }
    CHECK(int{entry[8]} == 0x30);  // E4M3 0.5
  }
  SECTION("window (E4M3, UE8M0 scales)") {
    std::vector<float> x(32, 0.0f);
    const std::vector<std::pair<float, std::uint8_t>> known = {
        {448, 0x7E}, {-448, 0xFE}, {432, 0x7E},          {1.0625f, 0x38}, {1.1875f, 0x3A}, {0x1p-10f, 0x00},
        {0x3p-10f, 0x02}, {-0.0f, 0x80}, {17, 0x58}, {0x1p-9f, 0x01}, {-0x1p-10f, 0x80}, {0x1p-6f + 0x1p-10f, 0x08}};
    for (std::size_t i = 0; i < known.size(); ++i) x[i] = known[i].first;
    std::vector<std::uint8_t> entry(size(kernels::window_entry_bytes(32)));
    ref->kv_encode(KvFormat::kWindow, x.data(), 1, 32, entry.data());
    for (std::size_t i = 0; i < known.size(); ++i) {
      INFO("value " << known[i].first);
      CHECK(int{entry[i]} == int{known[i].second});
    }
    CHECK(int{entry[32]} == 127);
  }
}

TEST_CASE("every backend's ops match ref", "[backend]") {
  auto ref = kernels::ref::make_ref_backend();
  for (const std::string& name : non_ref_backends()) {
    auto made = kernels::make_backend(name, 2);
    REQUIRE(made.ok());
    Backend& backend = **made;
    for (WeightFormat f : {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kFp8Block, WeightFormat::kFp4Row32})
      CHECK(backend.supports(f));
    for (TableFormat f : {TableFormat::kBF16, TableFormat::kFp8Row32}) CHECK(backend.supports(f));
    for (Op op : kernels::kAllOps) {
      DYNAMIC_SECTION(name << " " << kernels::op_name(op)) {
        REQUIRE(backend.supports(op));
        const auto check = op_checks().find(op);
        REQUIRE(check != op_checks().end());
        check->second(*ref, backend);
      }
    }
  }
}

// Model::load hands every weight to keep_weight (a device backend uploads it; the CPU backend keeps
// FP4 in lane order): from then on a view of the weight, or of some of its rows, gives the same bits
// as before it was kept.
TEST_CASE("every backend gives a kept weight's results the same bits as before", "[backend]") {
  Random rng(151);
  std::vector<TestWeight> weights;  // outlive the backends, as a model's weights do
  for (const LinearCase& c : linear_cases())
    if (c.record_pad < 0) weights.push_back(make_weight(c.format, c.rows, c.cols, rng));
  weights.push_back(make_weight(WeightFormat::kFp4Row32, 40, 4096, rng));
  // The last rows (FP8: its last block of rows, which slices keep whole).
  auto last_rows = [](const WeightView& w) {
    const std::int64_t first = w.format == WeightFormat::kFp8Block ? (w.rows - 1) / w.block * w.block : w.rows - 1;
    return kernels::weight_rows(w, first, w.rows - first);
  };
  for (const std::string& name : non_ref_backends()) {
    auto made = kernels::make_backend(name, 2);
    REQUIRE(made.ok());
    Backend& backend = **made;
    std::vector<std::vector<float>> before, rows_before;
    std::vector<Misaligned> xs;
    for (const TestWeight& w : weights) {
      xs.emplace_back(rng.normals(5 * w.view.cols));
      before.push_back(run_linear(backend, xs.back().data(), 5, w.view));
      rows_before.push_back(run_linear(backend, xs.back().data(), 1, last_rows(w.view)));
    }
    for (const TestWeight& w : weights) REQUIRE(backend.keep_weight(w.view).ok());
    for (std::size_t i = 0; i < weights.size(); ++i) {
      const WeightView& w = weights[i].view;
      INFO(name << " " << kernels::weight_format_name(w.format) << " [" << w.rows << ", " << w.cols << "]");
      CHECK(same_bits(before[i], run_linear(backend, xs[i].data(), 5, w)));
      CHECK(same_bits(rows_before[i], run_linear(backend, xs[i].data(), 1, last_rows(w))));
    }
  }
}

// A row's result depends only on its own inputs: the batch's rows against each row alone, on a
// backend with one thread (so the thread count changes too).
TEST_CASE("every backend gives a row the same bits alone as in a batch", "[backend]") {
  auto ref = kernels::ref::make_ref_backend();
  for (const std::string& name : non_ref_backends()) {
    auto batch_made = kernels::make_backend(name, 2);
    auto alone_made = kernels::make_backend(name, 1);
    REQUIRE(batch_made.ok());
    REQUIRE(alone_made.ok());
    Backend& batch = **batch_made;
    Backend& alone = **alone_made;

    DYNAMIC_SECTION(name << " linear") {
      Random rng(201);
      for (const LinearCase& c : linear_cases()) {
        INFO(kernels::weight_format_name(c.format) << " [" << c.rows << ", " << c.cols << "] record pad " << c.record_pad);
        const TestWeight w = make_weight(c.format, c.rows, c.cols, rng, c.record_pad);
        const std::int64_t m = 37;
        Misaligned x(rng.normals(m * c.cols));
        const std::vector<float> together = run_linear(batch, x.data(), m, w.view);
        for (std::int64_t i = 0; i < m; ++i) {
          INFO("row " << i);
          const std::vector<float> one = run_linear(alone, x.data() + i * c.cols, 1, w.view);
          CHECK(std::memcmp(one.data(), &together[size(i * c.rows)], size(c.rows) * sizeof(float)) == 0);
        }
      }
    }
    DYNAMIC_SECTION(name << " attention") {
      Random rng(202);
      for (bool with_selected : {false, true}) {
        const AttentionInput in = make_attention(3, 96, 0.1f, with_selected, rng);
        const std::vector<float> together = run_attention(batch, in, 0, in.rows);
        const std::int64_t row_floats = in.heads * in.dim;
        for (std::int64_t r = 0; r < in.rows; ++r) {
          INFO("selected " << with_selected << ", row " << r);
          const std::vector<float> one = run_attention_alone(alone, in, r);
          CHECK(std::memcmp(one.data(), &together[size(r * row_floats)], size(row_floats) * sizeof(float)) == 0);
        }
      }
    }
    DYNAMIC_SECTION(name << " indexer") {
      Random rng(203);
      IndexerInput in = make_indexer(*ref, 128, 3000, {3000, 1, 0, 2999, 1500, 640, 3000}, 64, 16, 8, rng);
      for (bool reindex : {false, true}) {
        if (reindex) {  // the candidate source's own blocks as a reindex layer's candidates
          in.candidates_in = run_indexer(batch, in, 0, in.rows).candidates;
          in.candidate_top_k = 0;
        }
        const IndexerOutput together = run_indexer(batch, in, 0, in.rows);
        for (std::int64_t r = 0; r < in.rows; ++r) {
          INFO((reindex ? "reindex" : "candidate source") << ", row " << r);
          const IndexerOutput one = run_indexer(alone, in, r, 1);
          CHECK(one.selection[0] == together.selection[size(r)]);
          if (!reindex) CHECK(one.candidates[0] == together.candidates[size(r)]);
        }
      }
    }
  }
}
