// Generation of the synthetic small-fullkv state described in synthetic_kv_state.h.
#include "api/cli/synthetic_kv_state.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <thread>

namespace hippo::cli {
namespace {

// splitmix64: a fast generator with good statistics; seeded per stream so streams are independent.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t x = (state_ += 0x9e3779b97f4a7c15ull);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  std::uint64_t state_;
};

// Standard normal quantiles at 4,096 evenly spaced probabilities: a 12-bit draw picks one. FP4 has
// eight magnitudes, so a finer normal would not change a single stored code.
class NormalTable {
 public:
  NormalTable() {
    for (std::size_t i = 0; i < values_.size(); ++i) {
      const double p = (static_cast<double>(i) + 0.5) / static_cast<double>(values_.size());
      double lo = -8, hi = 8;  // bisection on the CDF, 0.5 * erfc(-x / sqrt 2)
      for (int k = 0; k < 60; ++k) {
        const double mid = 0.5 * (lo + hi);
        (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
      }
      values_[i] = static_cast<float>(0.5 * (lo + hi));
    }
  }
  // Five normals from one 64-bit draw.
  void fill5(Rng& rng, float* out) const {
    std::uint64_t r = rng.next();
    for (int k = 0; k < 5; ++k, r >>= 12) out[k] = values_[r & 0xfff];
  }

 private:
  std::array<float, 4096> values_{};
};

const NormalTable& normal_table() {
  static const NormalTable table;
  return table;
}

// FP4 E2M1 magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6 are codes 0..7; bit 3 is the sign.
std::uint8_t fp4_code(float v) {
  const float a = std::fabs(v);
  std::uint8_t code;
  if (a < 0.25f) code = 0;
  else if (a < 0.75f) code = 1;
  else if (a < 1.25f) code = 2;
  else if (a < 1.75f) code = 3;
  else if (a < 2.5f) code = 4;
  else if (a < 3.5f) code = 5;
  else if (a < 5.0f) code = 6;
  else code = 7;
  return static_cast<std::uint8_t>(code | (v < 0 && code != 0 ? 8 : 0));
}

// E4M3 (bias 7, no infinities, max 448) of a positive value, rounded to nearest; returns the byte
// and the value it decodes to.
std::pair<std::uint8_t, float> e4m3(float v) {
  v = std::clamp(v, 0x1.0p-9f, 448.0f);
  int e = static_cast<int>(std::floor(std::log2(v)));
  if (e < -6) {  // subnormal: m x 2^-9
    const int m = std::clamp(static_cast<int>(std::lround(v * 512.0f)), 1, 7);
    return {static_cast<std::uint8_t>(m), static_cast<float>(m) * 0x1.0p-9f};
  }
  int m = static_cast<int>(std::lround((v / std::ldexp(1.0f, e) - 1.0f) * 8.0f));
  if (m == 8) {
    m = 0;
    ++e;
  }
  if (e > 8 || (e == 8 && m > 6)) {
    e = 8;
    m = 6;
  }
  return {static_cast<std::uint8_t>(((e + 7) << 3) | m), (1.0f + static_cast<float>(m) / 8.0f) * std::ldexp(1.0f, e)};
}

struct Geometry {
  std::size_t dims;         // values per entry
  std::size_t block;        // values per scale
  bool power_of_two_scale;  // UE8M0 (index keys) instead of E4M3 (latents)
};

constexpr Geometry kLatent{512, 16, false};   // 256 B codes + 32 B scales = 288 B
constexpr Geometry kIndexKey{128, 32, true};  // 64 B codes + 4 B scales = 68 B

// Fills n_entries quantised rows of one layer: FP4 codes (two per byte, low nibble first), then the
// block scales.
void fill_quantised(std::byte* out, std::size_t n_entries, const Geometry& g, std::uint64_t seed) {
  Rng rng(seed);
  const NormalTable& normal = normal_table();
  std::vector<float> z(g.dims + 5), sigma(g.dims + 5), x(g.dims);
  for (std::size_t i = 0; i < g.dims; i += 5) normal.fill5(rng, &z[i]);
  for (std::size_t i = 0; i < g.dims; ++i)
    sigma[i] = static_cast<float>(std::exp(0.5 * z[i]) * (rng.uniform() < 0.02 ? 8.0 : 1.0));
  const std::size_t code_bytes = g.dims / 2;
  const std::size_t entry_bytes = code_bytes + g.dims / g.block;
  double log_gain = 0;
  for (std::size_t e = 0; e < n_entries; ++e) {
    float step[5];
    normal.fill5(rng, step);
    log_gain = 0.9 * log_gain + 0.436 * 0.25 * step[0];  // AR(1): stationary sd 0.25 (0.436 = sqrt(1 - 0.9^2))
    const auto gain = static_cast<float>(std::exp(log_gain));
    for (std::size_t i = 0; i < g.dims; i += 5) normal.fill5(rng, &z[i]);
    for (std::size_t i = 0; i < g.dims; ++i) x[i] = sigma[i] * gain * z[i];
    std::byte* row = out + e * entry_bytes;
    std::memset(row, 0, code_bytes);
    for (std::size_t b = 0; b < g.dims / g.block; ++b) {
      float amax = 0;
      for (std::size_t i = b * g.block; i < (b + 1) * g.block; ++i) amax = std::max(amax, std::fabs(x[i]));
      float scale;
      if (g.power_of_two_scale) {
        const int exponent = amax > 0 ? static_cast<int>(std::ceil(std::log2(amax / 6.0f))) : -127;
        scale = std::ldexp(1.0f, exponent);
        row[code_bytes + b] = static_cast<std::byte>(std::clamp(exponent + 127, 0, 254));
      } else {
        auto [byte, value] = e4m3(amax / 6.0f);
        scale = value;
        row[code_bytes + b] = static_cast<std::byte>(byte);
      }
      const float inverse = 1.0f / scale;
      for (std::size_t i = b * g.block; i < (b + 1) * g.block; ++i) {
        const std::uint8_t code = fp4_code(x[i] * inverse);
        row[i / 2] |= static_cast<std::byte>(i % 2 == 0 ? code : code << 4);
      }
    }
  }
}

// Token ids: log-uniform ranks over the vocabulary, the shape of Zipf's law.
void fill_token_ids(std::byte* out, std::size_t n_tokens, std::uint64_t seed) {
  constexpr double kVocab = 129280;
  Rng rng(seed);
  for (std::size_t i = 0; i < n_tokens; ++i) {
    const auto id = static_cast<std::uint32_t>(std::exp(rng.uniform() * std::log(kVocab)) - 1.0);
    std::memcpy(out + 4 * i, &id, 4);  // little-endian hosts only, like the engine's layout
  }
}

// The frontier: 43 window rings (40 layers + 3 DSpark stages) of 128 latents, each 512 FP8 E4M3
// values + 16 UE8M0 scales (528 B), then the f32 next-token logits.
std::vector<std::byte> make_frontier(std::uint64_t seed) {
  constexpr std::size_t kRings = 43, kRows = 128, kDims = 512, kRowBytes = 528, kVocab = 129280;
  std::vector<std::byte> out(kRings * kRows * kRowBytes + kVocab * 4);
  Rng rng(seed);
  const NormalTable& normal = normal_table();
  float z[kDims + 5];
  for (std::size_t r = 0; r < kRings * kRows; ++r) {
    std::byte* row = out.data() + r * kRowBytes;
    for (std::size_t i = 0; i < kDims; i += 5) normal.fill5(rng, &z[i]);
    for (std::size_t b = 0; b < kDims / 32; ++b) {
      float amax = 0;
      for (std::size_t i = b * 32; i < (b + 1) * 32; ++i) amax = std::max(amax, std::fabs(z[i]));
      const int exponent = static_cast<int>(std::ceil(std::log2(amax / 448.0f)));
      row[kDims + b] = static_cast<std::byte>(exponent + 127);
      for (std::size_t i = b * 32; i < (b + 1) * 32; ++i) {
        const float v = std::ldexp(z[i], -exponent);
        const auto code = static_cast<std::uint8_t>(e4m3(std::fabs(v)).first | (v < 0 ? 0x80 : 0));
        row[i] = static_cast<std::byte>(code);
      }
    }
  }
  std::byte* logits = out.data() + kRings * kRows * kRowBytes;
  for (std::size_t i = 0; i < kVocab; i += 5) {
    float l[5];
    normal.fill5(rng, l);
    for (std::size_t k = 0; k < 5 && i + k < kVocab; ++k) {
      const float v = 3.0f * l[k];
      std::memcpy(logits + 4 * (i + k), &v, 4);
    }
  }
  return out;
}

}  // namespace

SyntheticKvState make_synthetic_kv_state(std::int64_t max_tokens, int threads) {
  SyntheticKvState state;
  state.max_tokens = max_tokens;
  for (int layer : {2, 8, 14, 20}) {
    const int ratio = layer == 20 ? 1 : 2;
    state.streams.push_back({"kv.layer" + std::to_string(layer), 288, ratio, {}});
    state.streams.push_back({"index.layer" + std::to_string(layer), 68, ratio, {}});
  }
  state.streams.push_back({"token_ids", 4, 1, {}});
  normal_table();  // built once, before the threads share it

  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i = next++; i < state.streams.size(); i = next++) {
      SyntheticStream& s = state.streams[i];
      const auto n_entries = static_cast<std::size_t>(max_tokens / s.tokens_per_entry);
      s.bytes.resize(n_entries * s.entry_bytes);
      const std::uint64_t seed = 0x5eed0000 + i;
      if (s.entry_bytes == 288) fill_quantised(s.bytes.data(), n_entries, kLatent, seed);
      else if (s.entry_bytes == 68) fill_quantised(s.bytes.data(), n_entries, kIndexKey, seed);
      else fill_token_ids(s.bytes.data(), n_entries, seed);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < std::max(1, threads); ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  state.frontier = make_frontier(0xf407);
  return state;
}

engine::SessionState::StreamFill synthetic_stream_fill(const SyntheticKvState& kv) {
  return [&kv](std::string_view name, std::span<std::uint8_t> bytes) {
    const SyntheticStream* source = &kv.streams.front();
    for (const SyntheticStream& s : kv.streams)
      if (s.name == name) source = &s;
    for (std::size_t at = 0; at < bytes.size();) {
      const std::size_t k = std::min(bytes.size() - at, source->bytes.size());
      std::memcpy(bytes.data() + at, source->bytes.data(), k);
      at += k;
    }
  };
}

}  // namespace hippo::cli
