#include "kernels/ref/ref_backend.h"

#include "kernels/ref/linear_ref.h"
#include "kernels/ref/numeric_formats.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

namespace hippo::kernels::ref {
namespace {

constexpr float kFp8Max = 448.0f;
constexpr float kFp4Max = 6.0f;
constexpr double kInf = std::numeric_limits<double>::infinity();

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

double dot(const float* a, const float* b, std::int64_t n) {
  double sum = 0.0;
  for (std::int64_t i = 0; i < n; ++i) sum += double{a[i]} * double{b[i]};
  return sum;
}

// The indices of the k best scores, higher first, ties to the lower index.
std::vector<std::int32_t> best_k(const std::vector<double>& scores, std::int64_t k) {
  std::vector<std::int32_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::int32_t a, std::int32_t b) { return scores[static_cast<std::size_t>(a)] > scores[static_cast<std::size_t>(b)]; });
  order.resize(std::min(order.size(), static_cast<std::size_t>(std::max<std::int64_t>(k, 0))));
  return order;
}

// ---- The KV entry formats (kv_entry_formats.h), exact quantisers: the snapshot format.

float block_amax(const float* x, std::int64_t n) {
  float amax = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  return amax;
}

// The UE8M0 byte of 2^ceil(log2(t)) for t > 0, from t's bits as the reference quantiser computes it:
// the exponent field, plus one when any mantissa bit is set.
std::uint8_t e8m0_pow2_ceil(float t) {
  const auto bits = std::bit_cast<std::uint32_t>(t);
  return static_cast<std::uint8_t>(((bits >> 23) & 0xFF) + ((bits & 0x7FFFFF) != 0 ? 1 : 0));
}

// The E2M1 code nearest to q (|q| <= 6), ties to the even code; the sign, also of -0, in bit 3.
std::uint8_t e2m1_nearest(float q) {
  const double magnitude = std::fabs(double{q});
  int best = 0;
  double best_distance = kInf;
  for (int code = 0; code < 8; ++code) {
    const double distance = std::fabs(magnitude - double{e2m1_to_f32(static_cast<std::uint8_t>(code))});
    if (distance < best_distance || (distance == best_distance && code % 2 == 0)) {
      best = code;
      best_distance = distance;
    }
  }
  return static_cast<std::uint8_t>(best | (std::signbit(q) ? 0x8 : 0x0));
}

std::uint8_t nibble(const std::uint8_t* codes, std::int64_t i) {
  return i % 2 == 0 ? (codes[i / 2] & 0xF) : static_cast<std::uint8_t>(codes[i / 2] >> 4);  // even element low
}

void set_nibble(std::uint8_t* codes, std::int64_t i, std::uint8_t code) {
  codes[i / 2] = static_cast<std::uint8_t>(codes[i / 2] | (i % 2 == 0 ? code : code << 4));
}

// E4M3 codes, then a UE8M0 scale per 32: scale = 2^ceil(log2(max(amax, 1e-4) / 448)).
void encode_window(const float* x, std::int64_t dim, std::uint8_t* entry) {
  std::uint8_t* scales = entry + dim;
  for (std::int64_t b = 0; b < dim / kWindowScaleBlock; ++b) {
    const float* block = x + b * kWindowScaleBlock;
    // Times the float reciprocal of 448, not divided by 448: the reference's rounding.
    scales[b] = e8m0_pow2_ceil(std::max(block_amax(block, kWindowScaleBlock), 1e-4f) * (1.0f / kFp8Max));
    const float scale = e8m0_to_f32(scales[b]);
    for (std::int64_t i = 0; i < kWindowScaleBlock; ++i)
      entry[b * kWindowScaleBlock + i] = f32_to_e4m3fn(std::clamp(block[i] / scale, -kFp8Max, kFp8Max));
  }
}

void decode_window(const std::uint8_t* entry, std::int64_t dim, float* x) {
  for (std::int64_t i = 0; i < dim; ++i) x[i] = e4m3fn_to_f32(entry[i]) * e8m0_to_f32(entry[dim + i / kWindowScaleBlock]);
}

// E2M1 codes, then an E4M3 scale per 16: scale = e4m3(max(amax, 6·2⁻⁹) / 6).
void encode_compressed(const float* x, std::int64_t dim, std::uint8_t* entry) {
  std::uint8_t* scales = entry + dim / 2;
  std::fill(entry, scales, std::uint8_t{0});
  for (std::int64_t b = 0; b < dim / kCompressedScaleBlock; ++b) {
    const float* block = x + b * kCompressedScaleBlock;
    scales[b] = f32_to_e4m3fn(std::max(block_amax(block, kCompressedScaleBlock), kFp4Max * 0x1p-9f) / kFp4Max);
    const float scale = e4m3fn_to_f32(scales[b]);
    for (std::int64_t i = 0; i < kCompressedScaleBlock; ++i)
      set_nibble(entry, b * kCompressedScaleBlock + i, e2m1_nearest(std::clamp(block[i] / scale, -kFp4Max, kFp4Max)));
  }
}

void decode_compressed(const std::uint8_t* entry, std::int64_t dim, float* x) {
  for (std::int64_t i = 0; i < dim; ++i)
    x[i] = e2m1_to_f32(nibble(entry, i)) * e4m3fn_to_f32(entry[dim / 2 + i / kCompressedScaleBlock]);
}

// E2M1 codes, then a UE8M0 scale per 32: scale = 2^ceil(log2(max(amax, 6·2⁻¹²⁶) / 6)).
void encode_index(const float* x, std::int64_t dim, std::uint8_t* entry) {
  std::uint8_t* scales = entry + dim / 2;
  std::fill(entry, scales, std::uint8_t{0});
  for (std::int64_t b = 0; b < dim / kIndexScaleBlock; ++b) {
    const float* block = x + b * kIndexScaleBlock;
    // Times the float reciprocal of 6, not divided by 6: the reference's rounding.
    scales[b] = e8m0_pow2_ceil(std::max(block_amax(block, kIndexScaleBlock), kFp4Max * 0x1p-126f) * (1.0f / kFp4Max));
    const float scale = e8m0_to_f32(scales[b]);
    for (std::int64_t i = 0; i < kIndexScaleBlock; ++i)
      set_nibble(entry, b * kIndexScaleBlock + i, e2m1_nearest(std::clamp(block[i] / scale, -kFp4Max, kFp4Max)));
  }
}

void decode_index(const std::uint8_t* entry, std::int64_t dim, float* x) {
  for (std::int64_t i = 0; i < dim; ++i) x[i] = e2m1_to_f32(nibble(entry, i)) * e8m0_to_f32(entry[dim / 2 + i / kIndexScaleBlock]);
}

class RefBackend final : public Backend {
 public:
  const char* name() const override { return "ref"; }
  int threads() const override { return 1; }
  bool supports(Op) const override { return true; }
  bool supports(WeightFormat) const override { return true; }
  bool supports(TableFormat) const override { return true; }

  void linear(const float* x, std::int64_t m, const WeightView& w, float* y) override;
  void linear_rows(const float* x, std::int64_t m, const WeightView& w, float* const* y_rows) override;
  void rms_norm(const float* x, std::int64_t rows, std::int64_t n, const float* weight, float eps, float* out) override;
  void rope(float* x, std::int64_t rows, std::int64_t heads, std::int64_t dim, std::int64_t rope_dims, const float* cos,
            const float* sin, bool inverse) override;
  void hc_mix(const HcMixArgs& args) override;
  void hc_collapse(const float* streams, const float* pre, std::int64_t rows, std::int64_t hc, std::int64_t d,
                   float* out) override;
  void hc_expand(float* streams, const float* sub, const float* post, const float* comb, std::int64_t rows,
                 std::int64_t hc, std::int64_t d) override;
  void attention(const AttentionArgs& args) override;
  void kv_encode(KvFormat format, const float* x, std::int64_t rows, std::int64_t dim, std::uint8_t* entries) override;
  void kv_decode(KvFormat format, const std::uint8_t* entries, std::int64_t rows, std::int64_t dim, float* x) override;
  void fp4_round_trip(float* x, std::int64_t rows, std::int64_t dim) override;
  void compressor_pool(const float* kv, const float* gate, std::int64_t groups, std::int64_t ratio, std::int64_t dim,
                       float* latents) override;
  void indexer(const IndexerArgs& args) override;
  void router(const RouterArgs& args) override;
  void swiglu(float* gate, const float* up, std::int64_t rows, std::int64_t width, float limit,
              const float* row_weight) override;
  void add_rows(const float* y, std::int64_t m, std::int64_t d, const std::int64_t* dst, float* out) override;
  void gather_rows(const RowTable& table, const std::int64_t* ids, std::int64_t n, float* out) override;
  void engram_fuse(float* streams, const float* kv, const float* gate_weight, std::int64_t rows, std::int64_t hc,
                   std::int64_t d, float eps) override;
};

void RefBackend::linear(const float* x, std::int64_t m, const WeightView& w, float* y) { ref::linear(x, m, w, y); }

void RefBackend::linear_rows(const float* x, std::int64_t m, const WeightView& w, float* const* y_rows) {
  std::vector<float> y(static_cast<std::size_t>(m * w.rows));
  ref::linear(x, m, w, y.data());
  for (std::int64_t i = 0; i < m; ++i) std::copy_n(&y[static_cast<std::size_t>(i * w.rows)], w.rows, y_rows[i]);
}

void RefBackend::rms_norm(const float* x, std::int64_t rows, std::int64_t n, const float* weight, float eps, float* out) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    const double inverse_rms = 1.0 / std::sqrt(dot(xr, xr, n) / static_cast<double>(n) + double{eps});
    for (std::int64_t i = 0; i < n; ++i) {
      const double scaled = double{xr[i]} * inverse_rms;
      out[r * n + i] = static_cast<float>(weight != nullptr ? double{weight[i]} * scaled : scaled);
    }
  }
}

void RefBackend::rope(float* x, std::int64_t rows, std::int64_t heads, std::int64_t dim, std::int64_t rope_dims,
                      const float* cos, const float* sin, bool inverse) {
  const std::int64_t pairs = rope_dims / 2;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t h = 0; h < heads; ++h) {
      float* v = x + (r * heads + h) * dim + (dim - rope_dims);
      for (std::int64_t i = 0; i < pairs; ++i) {
        const double c = cos[r * pairs + i], s = inverse ? -double{sin[r * pairs + i]} : double{sin[r * pairs + i]};
        const double even = v[2 * i], odd = v[2 * i + 1];
        v[2 * i] = static_cast<float>(even * c - odd * s);
        v[2 * i + 1] = static_cast<float>(even * s + odd * c);
      }
    }
  }
}

void RefBackend::hc_mix(const HcMixArgs& a) {
  const std::int64_t hc = a.hc;
  const double eps = a.eps;
  for (std::int64_t r = 0; r < a.rows; ++r) {
    const float* m = a.mixes + r * a.mix_stride;
    for (std::int64_t i = 0; i < hc; ++i) {
      a.pre[r * hc + i] = static_cast<float>(sigmoid(double{m[i]} * a.scale[0] + a.base[i]) + eps);
      a.post[r * hc + i] = static_cast<float>(2.0 * sigmoid(double{m[hc + i]} * a.scale[1] + a.base[hc + i]));
    }
    // c[j][k]: a softmax over each row j, plus eps.
    std::vector<double> c(static_cast<std::size_t>(hc * hc));
    auto at = [&](std::int64_t j, std::int64_t k) -> double& { return c[static_cast<std::size_t>(j * hc + k)]; };
    for (std::int64_t j = 0; j < hc; ++j) {
      double row_max = -kInf;
      for (std::int64_t k = 0; k < hc; ++k) {
        at(j, k) = double{m[2 * hc + j * hc + k]} * a.scale[2] + a.base[2 * hc + j * hc + k];
        row_max = std::max(row_max, at(j, k));
      }
      double sum = 0.0;
      for (std::int64_t k = 0; k < hc; ++k) {
        at(j, k) = std::exp(at(j, k) - row_max);
        sum += at(j, k);
      }
      for (std::int64_t k = 0; k < hc; ++k) at(j, k) = at(j, k) / sum + eps;
    }
    auto normalise_columns = [&] {
      for (std::int64_t k = 0; k < hc; ++k) {
        double sum = 0.0;
        for (std::int64_t j = 0; j < hc; ++j) sum += at(j, k);
        for (std::int64_t j = 0; j < hc; ++j) at(j, k) /= sum + eps;
      }
    };
    auto normalise_rows = [&] {
      for (std::int64_t j = 0; j < hc; ++j) {
        double sum = 0.0;
        for (std::int64_t k = 0; k < hc; ++k) sum += at(j, k);
        for (std::int64_t k = 0; k < hc; ++k) at(j, k) /= sum + eps;
      }
    };
    normalise_columns();
    for (std::int64_t it = 0; it + 1 < a.sinkhorn_iters; ++it) {
      normalise_rows();
      normalise_columns();
    }
    for (std::int64_t i = 0; i < hc * hc; ++i) a.comb[r * hc * hc + i] = static_cast<float>(c[static_cast<std::size_t>(i)]);
  }
}

void RefBackend::hc_collapse(const float* streams, const float* pre, std::int64_t rows, std::int64_t hc, std::int64_t d,
                             float* out) {
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t e = 0; e < d; ++e) {
      double sum = 0.0;
      for (std::int64_t i = 0; i < hc; ++i) sum += double{pre[r * hc + i]} * streams[(r * hc + i) * d + e];
      out[r * d + e] = static_cast<float>(sum);
    }
  }
}

void RefBackend::hc_expand(float* streams, const float* sub, const float* post, const float* comb, std::int64_t rows,
                           std::int64_t hc, std::int64_t d) {
  for (std::int64_t r = 0; r < rows; ++r) {
    float* x = streams + r * hc * d;
    const std::vector<float> old(x, x + hc * d);  // every new stream reads all the old ones
    for (std::int64_t k = 0; k < hc; ++k) {
      for (std::int64_t e = 0; e < d; ++e) {
        double sum = double{post[r * hc + k]} * sub[r * d + e];
        for (std::int64_t j = 0; j < hc; ++j) sum += double{comb[(r * hc + j) * hc + k]} * old[static_cast<std::size_t>(j * d + e)];
        x[k * d + e] = static_cast<float>(sum);
      }
    }
  }
}

void RefBackend::attention(const AttentionArgs& a) {
  for (std::int64_t r = 0; r < a.rows; ++r) {
    std::vector<const float*> keys;
    for (std::int64_t j = 0; j < a.window_count[r]; ++j) keys.push_back(a.keys[a.window_first[r] + j]);
    if (a.selected_offset != nullptr)
      for (std::int64_t j = a.selected_offset[r]; j < a.selected_offset[r + 1]; ++j) keys.push_back(a.selected[j]);
    for (std::int64_t h = 0; h < a.heads; ++h) {
      const float* q = a.q + (r * a.heads + h) * a.dim;
      std::vector<double> p(keys.size());
      double top = a.sinks[h];
      for (std::size_t j = 0; j < keys.size(); ++j) {
        p[j] = double{a.scale} * dot(q, keys[j], a.dim);
        top = std::max(top, p[j]);
      }
      double denominator = std::exp(double{a.sinks[h]} - top);
      for (double& s : p) {
        s = std::exp(s - top);
        denominator += s;
      }
      float* out = a.out + (r * a.heads + h) * a.dim;
      for (std::int64_t e = 0; e < a.dim; ++e) {
        double sum = 0.0;
        for (std::size_t j = 0; j < keys.size(); ++j) sum += p[j] / denominator * keys[j][e];
        out[e] = static_cast<float>(sum);
      }
    }
  }
}

void RefBackend::kv_encode(KvFormat format, const float* x, std::int64_t rows, std::int64_t dim, std::uint8_t* entries) {
  const std::int64_t bytes = kv_entry_bytes(format, dim);
  for (std::int64_t r = 0; r < rows; ++r) {
    switch (format) {
      case KvFormat::kWindow: encode_window(x + r * dim, dim, entries + r * bytes); break;
      case KvFormat::kCompressed: encode_compressed(x + r * dim, dim, entries + r * bytes); break;
      case KvFormat::kIndex: encode_index(x + r * dim, dim, entries + r * bytes); break;
    }
  }
}

void RefBackend::kv_decode(KvFormat format, const std::uint8_t* entries, std::int64_t rows, std::int64_t dim, float* x) {
  const std::int64_t bytes = kv_entry_bytes(format, dim);
  for (std::int64_t r = 0; r < rows; ++r) {
    switch (format) {
      case KvFormat::kWindow: decode_window(entries + r * bytes, dim, x + r * dim); break;
      case KvFormat::kCompressed: decode_compressed(entries + r * bytes, dim, x + r * dim); break;
      case KvFormat::kIndex: decode_index(entries + r * bytes, dim, x + r * dim); break;
    }
  }
}

void RefBackend::fp4_round_trip(float* x, std::int64_t rows, std::int64_t dim) {
  std::vector<std::uint8_t> entry(static_cast<std::size_t>(index_entry_bytes(dim)));
  for (std::int64_t r = 0; r < rows; ++r) {
    encode_index(x + r * dim, dim, entry.data());
    decode_index(entry.data(), dim, x + r * dim);
  }
}

void RefBackend::compressor_pool(const float* kv, const float* gate, std::int64_t groups, std::int64_t ratio,
                                 std::int64_t dim, float* latents) {
  for (std::int64_t g = 0; g < groups; ++g) {
    for (std::int64_t c = 0; c < dim; ++c) {
      auto at = [&](std::int64_t j) { return (g * ratio + j) * dim + c; };
      double top = -kInf;
      for (std::int64_t j = 0; j < ratio; ++j) top = std::max(top, double{gate[at(j)]});
      double denominator = 0.0, sum = 0.0;
      for (std::int64_t j = 0; j < ratio; ++j) {
        const double e = std::exp(gate[at(j)] - top);
        denominator += e;
        sum += e * kv[at(j)];
      }
      latents[g * dim + c] = static_cast<float>(sum / denominator);
    }
  }
}

void RefBackend::indexer(const IndexerArgs& a) {
  const std::int64_t entry_bytes = index_entry_bytes(a.dim);
  const std::int64_t n_blocks = (a.n_keys + a.block - 1) / a.block;
  std::vector<float> key(static_cast<std::size_t>(a.dim));
  for (std::int64_t r = 0; r < a.rows; ++r) {
    const std::int64_t visible = a.visible[r];
    auto in_candidates = [&](std::int64_t w) {
      const std::int64_t b = w / a.block;
      return a.candidates_in == nullptr || ((a.candidates_in[r][b / 64] >> (b % 64)) & 1) != 0;
    };
    // A key that is not scored stays at -inf, which is never picked.
    std::vector<double> scores(static_cast<std::size_t>(visible), -kInf);
    for (std::int64_t w = 0; w < visible; ++w) {
      if (!in_candidates(w)) continue;
      decode_index(a.keys + w * entry_bytes, a.dim, key.data());
      double score = 0.0;
      for (std::int64_t h = 0; h < a.heads; ++h) {
        const double relu = std::max(dot(a.q + (r * a.heads + h) * a.dim, key.data(), a.dim), 0.0);
        score += relu * a.scale * a.weights[r * a.heads + h];
      }
      scores[static_cast<std::size_t>(w)] = score;
    }
    std::vector<std::int32_t>& picked = a.selection[r];
    picked = best_k(scores, a.top_k);
    std::erase_if(picked, [&](std::int32_t w) { return scores[static_cast<std::size_t>(w)] == -kInf; });
    std::sort(picked.begin(), picked.end());

    if (a.candidate_top_k <= 0) continue;
    std::vector<double> block_scores(static_cast<std::size_t>(n_blocks), -kInf);
    for (std::int64_t w = 0; w < visible; ++w) {
      double& best = block_scores[static_cast<std::size_t>(w / a.block)];
      best = std::max(best, scores[static_cast<std::size_t>(w)]);
    }
    if (visible > 0) block_scores[static_cast<std::size_t>((visible - 1) / a.block)] = kInf;
    std::uint64_t* bits = a.candidates_out[r];
    std::fill(bits, bits + candidate_words(a.n_keys, a.block), std::uint64_t{0});
    for (std::int32_t b : best_k(block_scores, a.candidate_top_k))
      if (block_scores[static_cast<std::size_t>(b)] != -kInf) bits[b / 64] |= std::uint64_t{1} << (b % 64);
  }
}

void RefBackend::router(const RouterArgs& a) {
  for (std::int64_t r = 0; r < a.rows; ++r) {
    std::vector<double> s(static_cast<std::size_t>(a.experts)), biased(s.size());
    for (std::int64_t e = 0; e < a.experts; ++e) {
      const double x = double{a.logits[r * a.experts + e]} / a.temperature;
      s[static_cast<std::size_t>(e)] = std::sqrt(x > 20.0 ? x : std::log1p(std::exp(x)));
      biased[static_cast<std::size_t>(e)] = s[static_cast<std::size_t>(e)] + a.bias[e];
    }
    const std::vector<std::int32_t> chosen = best_k(biased, a.top_k);
    double sum = 0.0;
    for (std::int32_t e : chosen) sum += s[static_cast<std::size_t>(e)];
    for (std::size_t i = 0; i < chosen.size(); ++i) {
      double w = s[static_cast<std::size_t>(chosen[i])];
      if (a.normalise && a.top_k > 1) w /= sum + 1e-20;
      a.expert[r * a.top_k + static_cast<std::int64_t>(i)] = chosen[i];
      a.weight[r * a.top_k + static_cast<std::int64_t>(i)] = static_cast<float>(w * a.scaling);
    }
  }
}

void RefBackend::swiglu(float* gate, const float* up, std::int64_t rows, std::int64_t width, float limit,
                        const float* row_weight) {
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t j = 0; j < width; ++j) {
      double g = gate[r * width + j], u = up[r * width + j];
      if (limit > 0) {
        g = std::min(g, double{limit});
        u = std::clamp(u, -double{limit}, double{limit});
      }
      double h = g * sigmoid(g) * u;
      if (row_weight != nullptr) h *= row_weight[r];
      gate[r * width + j] = static_cast<float>(h);
    }
  }
}

void RefBackend::add_rows(const float* y, std::int64_t m, std::int64_t d, const std::int64_t* dst, float* out) {
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t e = 0; e < d; ++e) out[dst[i] * d + e] += y[i * d + e];
}

void RefBackend::gather_rows(const RowTable& table, const std::int64_t* ids, std::int64_t n, float* out) {
  const auto* bytes = static_cast<const std::uint8_t*>(table.data);
  const std::int64_t cols = table.cols;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t row = ids[i];
    for (std::int64_t c = 0; c < cols; ++c) {
      float value = 0.0f;
      switch (table.format) {
        case TableFormat::kBF16: {
          std::uint16_t code;
          std::memcpy(&code, bytes + (row * cols + c) * 2, sizeof code);
          value = bf16_to_f32(code);
          break;
        }
        case TableFormat::kFp8Row32:
          value = e4m3fn_to_f32(bytes[row * cols + c]) * e8m0_to_f32(table.scales[row * (cols / 32) + c / 32]);
          break;
      }
      out[i * cols + c] = value;
    }
  }
}

void RefBackend::engram_fuse(float* streams, const float* kv, const float* gate_weight, std::int64_t rows,
                             std::int64_t hc, std::int64_t d, float eps) {
  const double n = static_cast<double>(d);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* v = kv + (r * (hc + 1) + hc) * d;
    for (std::int64_t i = 0; i < hc; ++i) {
      float* h = streams + (r * hc + i) * d;
      const float* k = kv + (r * (hc + 1) + i) * d;
      const float* w = gate_weight + i * d;
      double hwk = 0.0;
      for (std::int64_t e = 0; e < d; ++e) hwk += double{h[e]} * w[e] * k[e];
      const double g = hwk / std::sqrt(dot(h, h, d) / n + eps) / std::sqrt(dot(k, k, d) / n + eps) / std::sqrt(n);
      // sign(g) as copysign: g = ±0 counts as ±1, as the forward pass has always taken it.
      const double gate = sigmoid(std::copysign(std::sqrt(std::max(std::fabs(g), 1e-6)), g));
      for (std::int64_t e = 0; e < d; ++e) h[e] = static_cast<float>(h[e] + gate * v[e]);
    }
  }
}

}  // namespace

std::unique_ptr<Backend> make_ref_backend() { return std::make_unique<RefBackend>(); }

}  // namespace hippo::kernels::ref
