// The arithmetic follows transformers' DeepseekV41ForCausalLM (docs/reference-model.md) step by step;
// comments name the reference's step where the order of operations matters for the last bit.
#include "engine/model/forward_pass.h"

#include "base/check.h"
#include "engine/model/engram_hashing.h"
#include "engine/model/kv_formats.h"
#include "kernels/cpu/linear.h"
#include "kernels/ref/numeric_formats.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

namespace hippo::engine {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// RMSNorm of one vector: weight * (x * rsqrt(mean(x²) + eps)); weight may be null (unweighted).
void rms_norm(const float* x, int64_t n, const float* weight, float eps, float* out) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += x[i] * x[i];
  const float r = 1.0f / std::sqrt(sum / static_cast<float>(n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = weight != nullptr ? weight[i] * (x[i] * r) : x[i] * r;
}

void rms_norm_rows(std::vector<float>& x, int64_t rows, int64_t n, const std::vector<float>& weight, float eps) {
  for (int64_t r = 0; r < rows; ++r) rms_norm(&x[r * n], n, weight.data(), eps, &x[r * n]);
}

float dot(const float* a, const float* b, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// The k best of `scores` (higher first, ties to the lower index), as indices in that order.
std::vector<int32_t> top_k(const float* scores, int64_t n, int64_t k) {
  std::vector<int32_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  auto better = [&](int32_t a, int32_t b) { return scores[a] > scores[b] || (scores[a] == scores[b] && a < b); };
  k = std::min(k, n);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), better);
  order.resize(static_cast<size_t>(k));
  return order;
}

}  // namespace

ForwardPass::ForwardPass(const Model& model, std::vector<Segment> segments, Depth depth)
    : model_(model), t_(model.text()), segments_(std::move(segments)), depth_(depth) {
  for (size_t s = 0; s < segments_.size(); ++s) {
    Segment& seg = segments_[s];
    seg.row0 = rows_;
    seg.pos0 = seg.state->n_tokens();
    for (size_t i = 0; i < seg.tokens.size(); ++i) {
      positions_.push_back(seg.pos0 + static_cast<int64_t>(i));
      segment_of_.push_back(static_cast<int64_t>(s));
    }
    rows_ += static_cast<int64_t>(seg.tokens.size());
  }
  shared_.resize(segments_.size());
}

ForwardPass::~ForwardPass() = default;

void ForwardPass::linear(const float* x, int64_t m, const kernels::WeightView& w, float* y) {
  if (m == 0) return;
  kernels::cpu::linear(x, m, w, y, *model_.pool_);
}

void ForwardPass::run() {
  engram_hashes();
  embed();
  const int64_t n_layers = depth_ == Depth::kEncoder ? t_.candidate_source_layer_id + 1 : t_.num_hidden_layers;
  for (int64_t l = 0; l < n_layers; ++l) layer(model_.weights_.layers[static_cast<size_t>(l)]);
  if (depth_ == Depth::kFull) head();
  commit_tokens();
}

// Reference: DeepseekV41NgramHashState — each position hashed with the compressed ids of the tokens
// before it, DEAD (then pad) past the sequence start.
void ForwardPass::engram_hashes() {
  const EngramHashing* hashing = model_.engram_.get();
  if (hashing == nullptr) return;
  const int64_t per_row = hashing->n_layers() * hashing->n_columns();
  engram_rows_.assign(static_cast<size_t>(rows_ * per_row), 0);
  for (const Segment& seg : segments_) {
    std::vector<int32_t>& lookback = seg.state->engram_lookback_;
    for (size_t i = 0; i < seg.tokens.size(); ++i) {
      const int32_t current = hashing->compressed_id(seg.tokens[i]);
      hashing->rows(current, lookback, &engram_rows_[static_cast<size_t>((seg.row0 + static_cast<int64_t>(i)) * per_row)]);
      if (!lookback.empty()) {
        std::copy_backward(lookback.begin(), lookback.end() - 1, lookback.end());
        lookback[0] = current;
      }
    }
  }
}

void ForwardPass::embed() {
  const int64_t d = t_.hidden_size, hc = t_.hc_mult;
  streams_.assign(static_cast<size_t>(rows_ * hc * d), 0.0f);
  pre_mix_.assign(static_cast<size_t>(rows_ * hc), 0.0f);
  const auto* table = reinterpret_cast<const std::uint8_t*>(model_.weights_.embed.bytes.data());
  for (int64_t r = 0; r < rows_; ++r) {
    const Segment& seg = segments_[static_cast<size_t>(segment_of_[static_cast<size_t>(r)])];
    const int64_t token = seg.tokens[static_cast<size_t>(r - seg.row0)];
    float* row = &streams_[static_cast<size_t>(r * hc * d)];
    for (int64_t i = 0; i < d; ++i) {
      std::uint16_t bits;
      std::memcpy(&bits, table + (token * d + i) * 2, 2);
      row[i] = kernels::ref::bf16_to_f32(bits);
    }
    for (int64_t k = 1; k < hc; ++k) std::memcpy(row + k * d, row, static_cast<size_t>(d) * sizeof(float));
    pre_mix_[static_cast<size_t>(r * hc)] = 1.0f;  // the first site collapses stream 0
  }
}

// Reference: DeepseekV41DecoderLayer.forward.
void ForwardPass::layer(const LayerWeights& lw) {
  const int64_t d = t_.hidden_size;
  const float eps = static_cast<float>(t_.rms_norm_eps);
  if (lw.has_engram) engram(lw);

  std::vector<float> attn_pre, attn_post, attn_comb;
  hc_mixes(lw.hc_attn_fn, lw.hc_attn_base, lw.hc_attn_scale, attn_pre, attn_post, attn_comb);
  std::vector<float> u;
  collapse(pre_mix_, lw.attn_norm, u);

  if (depth_ == Depth::kEncoder && lw.role.layer == t_.candidate_source_layer_id) {
    compress(lw, u);  // the decoder's shared KV and index keys see every token
    return;
  }

  std::vector<float> attn_out(static_cast<size_t>(rows_ * d));
  attention(lw, u, attn_out);
  expand(attn_out, attn_post, attn_comb);

  std::vector<float> ffn_pre, ffn_post, ffn_comb;
  hc_mixes(lw.hc_ffn_fn, lw.hc_ffn_base, lw.hc_ffn_scale, ffn_pre, ffn_post, ffn_comb);
  std::vector<float> v;
  collapse(attn_pre, lw.ffn_norm, v);
  std::vector<float> ffn_out(static_cast<size_t>(rows_ * d));
  moe(lw, v, ffn_out);
  expand(ffn_out, ffn_post, ffn_comb);
  pre_mix_ = std::move(ffn_pre);
  (void)eps;
}

// Reference: DeepseekV41Engram.forward.
void ForwardPass::engram(const LayerWeights& lw) {
  const EngramHashing& hashing = *model_.engram_;
  const int64_t d = t_.hidden_size, hc = t_.hc_mult, hd = t_.engram_head_dim;
  const int64_t cols = hashing.n_columns();
  const int64_t layer_index =
      std::find(t_.engram_layer_ids.begin(), t_.engram_layer_ids.end(), lw.role.layer) - t_.engram_layer_ids.begin();
  const EngramWeights& ew = lw.engram;
  const auto* table = reinterpret_cast<const std::uint8_t*>(ew.table.bytes.data());
  const auto* scales = reinterpret_cast<const std::uint8_t*>(ew.table_scales.bytes.data());
  const bool fp8 = ew.table.spec->storage == Storage::kFp8Codes;

  std::vector<float> gathered(static_cast<size_t>(rows_ * cols * hd));
  for (int64_t r = 0; r < rows_; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t row = engram_rows_[static_cast<size_t>((r * hashing.n_layers() + layer_index) * cols + c)];
      float* out = &gathered[static_cast<size_t>((r * cols + c) * hd)];
      for (int64_t i = 0; i < hd; ++i) {
        if (fp8) {
          out[i] = kernels::ref::e4m3fn_to_f32(table[row * hd + i]) *
                   kernels::ref::e8m0_to_f32(scales[row * (hd / 32) + i / 32]);
        } else {
          std::uint16_t bits;
          std::memcpy(&bits, table + (row * hd + i) * 2, 2);
          out[i] = kernels::ref::bf16_to_f32(bits);
        }
      }
    }
  }
  std::vector<float> kv(static_cast<size_t>(rows_ * (hc + 1) * d));
  linear(gathered.data(), rows_, ew.wkv, kv.data());

  const float eps = static_cast<float>(t_.rms_norm_eps);
  const float inv_sqrt_d = static_cast<float>(std::pow(static_cast<double>(d), -0.5));
  for (int64_t r = 0; r < rows_; ++r) {
    const float* key_row = &kv[static_cast<size_t>(r * (hc + 1) * d)];
    const float* value = key_row + hc * d;
    for (int64_t i = 0; i < hc; ++i) {
      float* h = &streams_[static_cast<size_t>((r * hc + i) * d)];
      const float* key = key_row + i * d;
      const float* weight = &ew.gate_weight[static_cast<size_t>(i * d)];
      float hh = 0.0f, kk = 0.0f, hk = 0.0f;
      for (int64_t j = 0; j < d; ++j) {
        hh += h[j] * h[j];
        kk += key[j] * key[j];
        hk += (h[j] * weight[j]) * key[j];
      }
      const float rstd = (1.0f / std::sqrt(hh / static_cast<float>(d) + eps)) *
                         (1.0f / std::sqrt(kk / static_cast<float>(d) + eps));
      const float g = hk * rstd * inv_sqrt_d;
      const float gate = sigmoid(std::copysign(std::sqrt(std::max(std::fabs(g), 1e-6f)), g));
      for (int64_t j = 0; j < d; ++j) h[j] = h[j] + gate * value[j];
    }
  }
}

// Reference: hc_mixes — one projection of the normalised flattened streams gives pre, post and the
// Sinkhorn-projected comb.
void ForwardPass::hc_mixes(const kernels::WeightView& fn, const std::vector<float>& base,
                           const std::vector<float>& scale, std::vector<float>& pre, std::vector<float>& post,
                           std::vector<float>& comb) {
  const int64_t d = t_.hidden_size, hc = t_.hc_mult, mix = fn.rows;
  const float eps = static_cast<float>(t_.rms_norm_eps);
  const float hc_eps = static_cast<float>(t_.hc_eps);
  std::vector<float> flat(streams_.size());
  for (int64_t r = 0; r < rows_; ++r) {
    rms_norm(&streams_[static_cast<size_t>(r * hc * d)], hc * d, nullptr, eps, &flat[static_cast<size_t>(r * hc * d)]);
  }
  std::vector<float> mixes(static_cast<size_t>(rows_ * mix));
  linear(flat.data(), rows_, fn, mixes.data());
  pre.assign(static_cast<size_t>(rows_ * hc), 0.0f);
  post.assign(static_cast<size_t>(rows_ * hc), 0.0f);
  comb.assign(static_cast<size_t>(rows_ * hc * hc), 0.0f);
  for (int64_t r = 0; r < rows_; ++r) {
    const float* m = &mixes[static_cast<size_t>(r * mix)];
    for (int64_t i = 0; i < hc; ++i) {
      pre[static_cast<size_t>(r * hc + i)] = sigmoid(m[i] * scale[0] + base[static_cast<size_t>(i)]) + hc_eps;
      post[static_cast<size_t>(r * hc + i)] = 2.0f * sigmoid(m[hc + i] * scale[1] + base[static_cast<size_t>(hc + i)]);
    }
    float* c = &comb[static_cast<size_t>(r * hc * hc)];
    for (int64_t i = 0; i < hc; ++i) {  // softmax over each row, then + eps
      float row_max = kNegInf;
      for (int64_t j = 0; j < hc; ++j) {
        c[i * hc + j] = m[2 * hc + i * hc + j] * scale[2] + base[static_cast<size_t>(2 * hc + i * hc + j)];
        row_max = std::max(row_max, c[i * hc + j]);
      }
      float sum = 0.0f;
      for (int64_t j = 0; j < hc; ++j) {
        c[i * hc + j] = std::exp(c[i * hc + j] - row_max);
        sum += c[i * hc + j];
      }
      for (int64_t j = 0; j < hc; ++j) c[i * hc + j] = c[i * hc + j] / sum + hc_eps;
    }
    auto normalise_columns = [&] {
      for (int64_t j = 0; j < hc; ++j) {
        float sum = 0.0f;
        for (int64_t i = 0; i < hc; ++i) sum += c[i * hc + j];
        for (int64_t i = 0; i < hc; ++i) c[i * hc + j] /= (sum + hc_eps);
      }
    };
    auto normalise_rows = [&] {
      for (int64_t i = 0; i < hc; ++i) {
        float sum = 0.0f;
        for (int64_t j = 0; j < hc; ++j) sum += c[i * hc + j];
        for (int64_t j = 0; j < hc; ++j) c[i * hc + j] /= (sum + hc_eps);
      }
    };
    normalise_columns();
    for (int64_t it = 0; it + 1 < t_.hc_sinkhorn_iters; ++it) {
      normalise_rows();
      normalise_columns();
    }
  }
}

// Σ_i pre_i · X_i, then RMSNorm with `norm`.
void ForwardPass::collapse(const std::vector<float>& pre, const std::vector<float>& norm, std::vector<float>& out) {
  const int64_t d = t_.hidden_size, hc = t_.hc_mult;
  out.assign(static_cast<size_t>(rows_ * d), 0.0f);
  for (int64_t r = 0; r < rows_; ++r) {
    float* y = &out[static_cast<size_t>(r * d)];
    for (int64_t i = 0; i < hc; ++i) {
      const float p = pre[static_cast<size_t>(r * hc + i)];
      const float* x = &streams_[static_cast<size_t>((r * hc + i) * d)];
      for (int64_t j = 0; j < d; ++j) y[j] += p * x[j];
    }
    if (!norm.empty()) rms_norm(y, d, norm.data(), static_cast<float>(t_.rms_norm_eps), y);
  }
}

// out_k = post_k · sub + Σ_j comb[j][k] · X_j.
void ForwardPass::expand(const std::vector<float>& sub, const std::vector<float>& post, const std::vector<float>& comb) {
  const int64_t d = t_.hidden_size, hc = t_.hc_mult;
  std::vector<float> mixed(static_cast<size_t>(hc * d));
  for (int64_t r = 0; r < rows_; ++r) {
    float* x = &streams_[static_cast<size_t>(r * hc * d)];
    const float* c = &comb[static_cast<size_t>(r * hc * hc)];
    for (int64_t k = 0; k < hc; ++k) {
      for (int64_t e = 0; e < d; ++e) {
        float sum = 0.0f;
        for (int64_t j = 0; j < hc; ++j) sum += c[j * hc + k] * x[j * d + e];
        mixed[static_cast<size_t>(k * d + e)] = post[static_cast<size_t>(r * hc + k)] * sub[static_cast<size_t>(r * d + e)] + sum;
      }
    }
    std::memcpy(x, mixed.data(), mixed.size() * sizeof(float));
  }
}

// Reference: DeepseekV41Attention.forward.
void ForwardPass::attention(const LayerWeights& lw, const std::vector<float>& u, std::vector<float>& out) {
  const LayerRole& role = lw.role;
  const int64_t d = t_.hidden_size, H = t_.num_attention_heads, D = t_.head_dim, rq = t_.q_lora_rank;
  const float eps = static_cast<float>(t_.rms_norm_eps);
  const Rope& rope = role.compress_ratio > 0 ? model_.compress_rope_ : model_.main_rope_;

  std::vector<float> q_residual(static_cast<size_t>(rows_ * rq));
  linear(u.data(), rows_, lw.wq_a, q_residual.data());
  rms_norm_rows(q_residual, rows_, rq, lw.q_norm, eps);
  std::vector<float> q(static_cast<size_t>(rows_ * H * D));
  linear(q_residual.data(), rows_, lw.wq_b, q.data());
  for (int64_t r = 0; r < rows_; ++r) {
    for (int64_t h = 0; h < H; ++h) rope.apply(&q[static_cast<size_t>((r * H + h) * D)], D, positions_[static_cast<size_t>(r)]);
  }

  // The window KV: RMSNorm(W_kv u), RoPE, FP8 round trip (kept as the ring's codes).
  const int64_t entry_bytes = window_entry_bytes(D);
  std::vector<float> kv(static_cast<size_t>(rows_ * D));
  linear(u.data(), rows_, lw.wkv, kv.data());
  rms_norm_rows(kv, rows_, D, lw.kv_norm, eps);
  std::vector<std::uint8_t> kv_codes(static_cast<size_t>(rows_ * entry_bytes));
  for (int64_t r = 0; r < rows_; ++r) {
    float* row = &kv[static_cast<size_t>(r * D)];
    rope.apply(row, D, positions_[static_cast<size_t>(r)]);
    encode_window_entry(row, D, &kv_codes[static_cast<size_t>(r * entry_bytes)]);
    decode_window_entry(&kv_codes[static_cast<size_t>(r * entry_bytes)], D, row);
  }

  if (role.compress_ratio > 0) {
    if (role.writes_kv) compress(lw, u);
    if (role.owns_index_query) index(lw, u, q_residual);
  }

  std::vector<float> o(static_cast<size_t>(rows_ * H * D));
  attend(lw, q, kv, o);
  for (int64_t r = 0; r < rows_; ++r) {
    for (int64_t h = 0; h < H; ++h) {
      rope.apply(&o[static_cast<size_t>((r * H + h) * D)], D, positions_[static_cast<size_t>(r)], /*inverse=*/true);
    }
  }

  // Grouped output projection: group g's heads through its block of wo_a, then wo_b over all groups.
  const int64_t G = t_.o_groups, ro = t_.o_lora_rank, group_width = H * D / G;
  std::vector<float> group_in(static_cast<size_t>(rows_ * group_width));
  std::vector<float> group_out(static_cast<size_t>(rows_ * ro));
  std::vector<float> low_rank(static_cast<size_t>(rows_ * G * ro));
  for (int64_t g = 0; g < G; ++g) {
    for (int64_t r = 0; r < rows_; ++r) {
      std::memcpy(&group_in[static_cast<size_t>(r * group_width)], &o[static_cast<size_t>(r * H * D + g * group_width)],
                  static_cast<size_t>(group_width) * sizeof(float));
    }
    linear(group_in.data(), rows_, weight_rows(lw.wo_a, g * ro, ro), group_out.data());
    for (int64_t r = 0; r < rows_; ++r) {
      std::memcpy(&low_rank[static_cast<size_t>(r * G * ro + g * ro)], &group_out[static_cast<size_t>(r * ro)],
                  static_cast<size_t>(ro) * sizeof(float));
    }
  }
  linear(low_rank.data(), rows_, lw.wo_b, out.data());
  (void)d;

  // The chunk's window entries join the ring (slot = position mod window).
  const int64_t window = t_.sliding_window;
  for (const Segment& seg : segments_) {
    std::vector<std::uint8_t>& ring = seg.state->rings_[static_cast<size_t>(role.layer)];
    const int64_t n = static_cast<int64_t>(seg.tokens.size());
    for (int64_t i = std::max<int64_t>(0, n - window); i < n; ++i) {
      const int64_t slot = (seg.pos0 + i) % window;
      std::memcpy(&ring[static_cast<size_t>(slot * entry_bytes)], &kv_codes[static_cast<size_t>((seg.row0 + i) * entry_bytes)],
                  static_cast<size_t>(entry_bytes));
    }
  }
}

// Reference: DeepseekV41Compressor + the index-key half of DeepseekV41Indexer + the compressed-cache
// update of DeepseekV41Attention. Groups completed by this chunk are appended to the writer's streams;
// the group's shared context is refreshed from the streams.
void ForwardPass::compress(const LayerWeights& lw, const std::vector<float>& u) {
  const LayerRole& role = lw.role;
  const int64_t D = t_.head_dim, idh = t_.index_head_dim, ratio = role.compress_ratio;
  const float eps = static_cast<float>(t_.rms_norm_eps);
  const Rope& rope = model_.compress_rope_;

  std::vector<float> kv(static_cast<size_t>(rows_ * D)), gate;
  linear(u.data(), rows_, lw.compressor_wkv, kv.data());
  if (ratio > 1) {
    gate.resize(static_cast<size_t>(rows_ * D));
    linear(u.data(), rows_, lw.compressor_wgate, gate.data());
  }

  // Latents of the completed groups of every segment, back to back, with their positions.
  std::vector<float> latents;
  std::vector<int64_t> group_positions;
  std::vector<int64_t> groups_per_segment(segments_.size(), 0);
  for (size_t s = 0; s < segments_.size(); ++s) {
    const Segment& seg = segments_[s];
    auto& writer = *std::find_if(seg.state->writers_.begin(), seg.state->writers_.end(),
                                 [&](const auto& w) { return w.layer == role.layer; });
    const int64_t n = static_cast<int64_t>(seg.tokens.size());
    const int64_t first_entry = static_cast<int64_t>(writer.kv.size()) / compressed_entry_bytes(D);
    if (ratio == 1) {
      for (int64_t i = 0; i < n; ++i) {
        latents.insert(latents.end(), &kv[static_cast<size_t>((seg.row0 + i) * D)], &kv[static_cast<size_t>((seg.row0 + i + 1) * D)]);
        group_positions.push_back(first_entry + i);
      }
      groups_per_segment[s] = n;
      continue;
    }
    // Ratio > 1: the pending rows of the incomplete group come first.
    std::vector<float> rows_kv = writer.pending_kv, rows_gate = writer.pending_gate;
    rows_kv.insert(rows_kv.end(), &kv[static_cast<size_t>(seg.row0 * D)], &kv[static_cast<size_t>((seg.row0 + n) * D)]);
    rows_gate.insert(rows_gate.end(), &gate[static_cast<size_t>(seg.row0 * D)], &gate[static_cast<size_t>((seg.row0 + n) * D)]);
    const int64_t total = static_cast<int64_t>(rows_kv.size()) / D;
    const int64_t groups = total / ratio;
    std::vector<float> latent(static_cast<size_t>(D));
    for (int64_t g = 0; g < groups; ++g) {
      for (int64_t c = 0; c < D; ++c) {  // per-channel softmax over the group's tokens (fp32)
        float m = kNegInf;
        for (int64_t j = 0; j < ratio; ++j) m = std::max(m, rows_gate[static_cast<size_t>((g * ratio + j) * D + c)]);
        float sum = 0.0f;
        float e[64];
        for (int64_t j = 0; j < ratio; ++j) {
          e[j] = std::exp(rows_gate[static_cast<size_t>((g * ratio + j) * D + c)] - m);
          sum += e[j];
        }
        float acc = 0.0f;
        for (int64_t j = 0; j < ratio; ++j) acc += rows_kv[static_cast<size_t>((g * ratio + j) * D + c)] * (e[j] / sum);
        latent[static_cast<size_t>(c)] = acc;
      }
      latents.insert(latents.end(), latent.begin(), latent.end());
      group_positions.push_back((first_entry + g) * ratio);
    }
    writer.pending_kv.assign(rows_kv.begin() + groups * ratio * D, rows_kv.end());
    writer.pending_gate.assign(rows_gate.begin() + groups * ratio * D, rows_gate.end());
    groups_per_segment[s] = groups;
  }
  const int64_t n_groups = static_cast<int64_t>(group_positions.size());
  rms_norm_rows(latents, n_groups, D, lw.compressor_norm, eps);

  // Index keys from the pre-RoPE latents; main entries from the RoPE'd ones.
  std::vector<float> keys(static_cast<size_t>(n_groups * idh));
  linear(latents.data(), n_groups, lw.index_wk, keys.data());
  rms_norm_rows(keys, n_groups, idh, lw.index_k_norm, eps);
  const int64_t kv_bytes = compressed_entry_bytes(D), index_bytes = index_entry_bytes(idh);
  std::vector<std::uint8_t> kv_codes(static_cast<size_t>(n_groups * kv_bytes));
  std::vector<std::uint8_t> index_codes(static_cast<size_t>(n_groups * index_bytes));
  for (int64_t g = 0; g < n_groups; ++g) {
    float* key = &keys[static_cast<size_t>(g * idh)];
    rope.apply(key, idh, group_positions[static_cast<size_t>(g)]);
    encode_index_entry(key, idh, &index_codes[static_cast<size_t>(g * index_bytes)]);
    float* latent = &latents[static_cast<size_t>(g * D)];
    rope.apply(latent, D, group_positions[static_cast<size_t>(g)]);
    encode_compressed_entry(latent, D, &kv_codes[static_cast<size_t>(g * kv_bytes)]);
  }

  int64_t g0 = 0;
  for (size_t s = 0; s < segments_.size(); ++s) {
    const Segment& seg = segments_[s];
    auto& writer = *std::find_if(seg.state->writers_.begin(), seg.state->writers_.end(),
                                 [&](const auto& w) { return w.layer == role.layer; });
    const int64_t n = groups_per_segment[s];
    writer.kv.insert(writer.kv.end(), kv_codes.begin() + g0 * kv_bytes, kv_codes.begin() + (g0 + n) * kv_bytes);
    writer.index.insert(writer.index.end(), index_codes.begin() + g0 * index_bytes,
                        index_codes.begin() + (g0 + n) * index_bytes);
    g0 += n;

    Shared& shared = shared_[s];
    shared.n_entries = static_cast<int64_t>(writer.kv.size()) / kv_bytes;
    shared.kv.resize(static_cast<size_t>(shared.n_entries * D));
    shared.index.resize(static_cast<size_t>(shared.n_entries * idh));
    for (int64_t e = 0; e < shared.n_entries; ++e) {
      decode_compressed_entry(&writer.kv[static_cast<size_t>(e * kv_bytes)], D, &shared.kv[static_cast<size_t>(e * D)]);
      decode_index_entry(&writer.index[static_cast<size_t>(e * index_bytes)], idh, &shared.index[static_cast<size_t>(e * idh)]);
    }
  }
}

// Reference: DeepseekV41Indexer steps 2-5 and select_candidate_blocks.
void ForwardPass::index(const LayerWeights& lw, const std::vector<float>& u, const std::vector<float>& q_residual) {
  const LayerRole& role = lw.role;
  const int64_t hI = t_.index_n_heads, idh = t_.index_head_dim, ratio = role.compress_ratio;
  std::vector<float> q(static_cast<size_t>(rows_ * hI * idh));
  linear(q_residual.data(), rows_, lw.index_wq_b, q.data());
  for (int64_t r = 0; r < rows_; ++r) {
    for (int64_t h = 0; h < hI; ++h) {
      float* head = &q[static_cast<size_t>((r * hI + h) * idh)];
      model_.compress_rope_.apply(head, idh, positions_[static_cast<size_t>(r)]);
      fp4_ue8m0_round_trip(head, idh);
    }
  }
  std::vector<float> weights(static_cast<size_t>(rows_ * hI));
  linear(u.data(), rows_, lw.index_weights_proj, weights.data());
  const float heads_scaling = static_cast<float>(std::pow(static_cast<double>(hI), -0.5));
  const float softmax_scale = static_cast<float>(std::pow(static_cast<double>(idh), -0.5));
  for (float& w : weights) w *= heads_scaling;

  for (size_t s = 0; s < segments_.size(); ++s) {
    const Segment& seg = segments_[s];
    Shared& shared = shared_[s];
    const int64_t n = static_cast<int64_t>(seg.tokens.size());
    const int64_t T = shared.n_entries;
    if (T == 0) continue;  // nothing to score yet; the reference publishes nothing
    const int64_t block = t_.candidate_block_size;
    const int64_t n_blocks = (T + block - 1) / block;
    const int64_t words = (n_blocks + 63) / 64;
    const bool uses_candidates = role.reindex && shared.has_candidates;
    std::vector<std::vector<int32_t>> selection(static_cast<size_t>(n));
    std::vector<std::vector<uint64_t>> candidates;
    if (role.candidate_source) candidates.assign(static_cast<size_t>(n), std::vector<uint64_t>(static_cast<size_t>(words), 0));

    model_.pool_->parallel_for(n, [&](int64_t begin, int64_t end) {
      std::vector<float> scores(static_cast<size_t>(T));
      std::vector<float> block_scores(static_cast<size_t>(n_blocks));
      for (int64_t i = begin; i < end; ++i) {
        const int64_t r = seg.row0 + i;
        const int64_t visible = std::min(T, (positions_[static_cast<size_t>(r)] + 1) / ratio);
        for (int64_t w = 0; w < T; ++w) {
          if (w >= visible) {
            scores[static_cast<size_t>(w)] = kNegInf;
            continue;
          }
          const float* key = &shared.index[static_cast<size_t>(w * idh)];
          float total = 0.0f;
          for (int64_t h = 0; h < hI; ++h) {
            const float score = std::max(dot(&q[static_cast<size_t>((r * hI + h) * idh)], key, idh), 0.0f) * softmax_scale;
            total += score * weights[static_cast<size_t>(r * hI + h)];
          }
          scores[static_cast<size_t>(w)] = total;
        }
        if (role.candidate_source) {
          for (int64_t b = 0; b < n_blocks; ++b) {
            float m = kNegInf;
            for (int64_t w = b * block; w < std::min(T, (b + 1) * block); ++w) m = std::max(m, scores[static_cast<size_t>(w)]);
            block_scores[static_cast<size_t>(b)] = m;
          }
          if (visible > 0) block_scores[static_cast<size_t>((visible - 1) / block)] = std::numeric_limits<float>::infinity();
          for (int32_t b : top_k(block_scores.data(), n_blocks, t_.candidate_topk_blocks)) {
            if (block_scores[static_cast<size_t>(b)] > kNegInf) candidates[static_cast<size_t>(i)][static_cast<size_t>(b / 64)] |= uint64_t{1} << (b % 64);
          }
        } else if (uses_candidates) {
          const std::vector<uint64_t>& keep = shared.candidates[static_cast<size_t>(i)];
          for (int64_t w = 0; w < T; ++w) {
            const int64_t b = w / block;
            if (!((keep[static_cast<size_t>(b / 64)] >> (b % 64)) & 1)) scores[static_cast<size_t>(w)] = kNegInf;
          }
        }
        std::vector<int32_t> picked = top_k(scores.data(), T, t_.index_topk);
        std::erase_if(picked, [&](int32_t w) { return scores[static_cast<size_t>(w)] == kNegInf; });
        std::sort(picked.begin(), picked.end());
        selection[static_cast<size_t>(i)] = std::move(picked);
      }
    });
    shared.selection = std::move(selection);
    shared.has_selection = true;
    if (role.candidate_source) {
      shared.candidates = std::move(candidates);
      shared.has_candidates = true;
    }
  }
}

// Reference: eager_attention_forward over the window (the positions t-window+1..t) and the selected
// compressed entries, with the sink in the denominator only.
void ForwardPass::attend(const LayerWeights& lw, const std::vector<float>& q, const std::vector<float>& window_kv,
                         std::vector<float>& out) {
  const LayerRole& role = lw.role;
  const int64_t H = t_.num_attention_heads, D = t_.head_dim, window = t_.sliding_window;
  const float scaling = static_cast<float>(std::pow(static_cast<double>(D), -0.5));
  for (size_t s = 0; s < segments_.size(); ++s) {
    const Segment& seg = segments_[s];
    const Shared& shared = shared_[s];
    const int64_t n = static_cast<int64_t>(seg.tokens.size());
    // Ring entries of the positions before this chunk that a window can reach.
    const int64_t previous = std::min(seg.pos0, window - 1);
    std::vector<float> past(static_cast<size_t>(previous * D));
    const std::vector<std::uint8_t>& ring = seg.state->rings_[static_cast<size_t>(role.layer)];
    for (int64_t k = 0; k < previous; ++k) {
      const int64_t position = seg.pos0 - previous + k;
      decode_window_entry(&ring[static_cast<size_t>((position % window) * window_entry_bytes(D))], D,
                          &past[static_cast<size_t>(k * D)]);
    }
    const bool compressed = role.compress_ratio > 0 && shared.n_entries > 0 && shared.has_selection;
    model_.pool_->parallel_for(n, [&](int64_t begin, int64_t end) {
      std::vector<const float*> keys;
      std::vector<float> logits;
      for (int64_t i = begin; i < end; ++i) {
        const int64_t r = seg.row0 + i;
        const int64_t t = positions_[static_cast<size_t>(r)];
        keys.clear();
        for (int64_t p = std::max<int64_t>(0, t - window + 1); p <= t; ++p) {
          keys.push_back(p >= seg.pos0 ? &window_kv[static_cast<size_t>((seg.row0 + p - seg.pos0) * D)]
                                       : &past[static_cast<size_t>((p - (seg.pos0 - previous)) * D)]);
        }
        if (compressed) {
          for (int32_t w : shared.selection[static_cast<size_t>(i)]) keys.push_back(&shared.kv[static_cast<size_t>(w * D)]);
        }
        logits.resize(keys.size());
        for (int64_t h = 0; h < H; ++h) {
          const float* qh = &q[static_cast<size_t>((r * H + h) * D)];
          const float sink = lw.attn_sink[static_cast<size_t>(h)];
          float m = sink;
          for (size_t j = 0; j < keys.size(); ++j) {
            logits[j] = dot(qh, keys[j], D) * scaling;
            m = std::max(m, logits[j]);
          }
          float denom = 0.0f;
          for (size_t j = 0; j < keys.size(); ++j) {
            logits[j] = std::exp(logits[j] - m);
            denom += logits[j];
          }
          denom += std::exp(sink - m);
          float* o = &out[static_cast<size_t>((r * H + h) * D)];
          std::fill(o, o + D, 0.0f);
          for (size_t j = 0; j < keys.size(); ++j) {
            const float p = logits[j] / denom;
            for (int64_t c = 0; c < D; ++c) o[c] += p * keys[j][c];
          }
        }
      }
    });
  }
}

// Reference: DeepseekV41SparseMoeBlock, DeepseekV41TopKRouter, DeepseekV41Expert.
void ForwardPass::moe(const LayerWeights& lw, const std::vector<float>& v, std::vector<float>& out) {
  const int64_t d = t_.hidden_size, E = t_.n_routed_experts, k = t_.num_experts_per_tok, I = t_.moe_intermediate_size;
  std::vector<float> scores(static_cast<size_t>(rows_ * E));
  linear(v.data(), rows_, lw.router, scores.data());
  const float temp = static_cast<float>(t_.gate_temp.value_or(1.0));
  for (float& s : scores) {
    const float x = s / temp;
    const float softplus = x > 20.0f ? x : std::log1p(std::exp(x));
    s = std::sqrt(softplus);
  }
  // Per row: the chosen experts and their weights.
  std::vector<std::vector<std::pair<int64_t, float>>> by_expert(static_cast<size_t>(E));
  std::vector<float> biased(static_cast<size_t>(E));
  for (int64_t r = 0; r < rows_; ++r) {
    const float* s = &scores[static_cast<size_t>(r * E)];
    for (int64_t e = 0; e < E; ++e) biased[static_cast<size_t>(e)] = s[e] + lw.router_bias[static_cast<size_t>(e)];
    const std::vector<int32_t> chosen = top_k(biased.data(), E, k);
    float sum = 0.0f;
    for (int32_t e : chosen) sum += s[e];
    for (int32_t e : chosen) {
      float w = s[e];
      if (t_.norm_topk_prob && k > 1) w = w / (sum + 1e-20f);
      by_expert[static_cast<size_t>(e)].push_back({r, w * static_cast<float>(t_.routed_scaling_factor)});
    }
  }
  std::fill(out.begin(), out.end(), 0.0f);
  const float limit = static_cast<float>(t_.swiglu_limit);
  auto run_expert = [&](const ExpertWeights& ew, const std::vector<std::pair<int64_t, float>>& rows, bool weighted) {
    const int64_t m = static_cast<int64_t>(rows.size());
    std::vector<float> x(static_cast<size_t>(m * d)), gate(static_cast<size_t>(m * I)), up(static_cast<size_t>(m * I)),
        y(static_cast<size_t>(m * d));
    for (int64_t i = 0; i < m; ++i) {
      std::memcpy(&x[static_cast<size_t>(i * d)], &v[static_cast<size_t>(rows[static_cast<size_t>(i)].first * d)],
                  static_cast<size_t>(d) * sizeof(float));
    }
    linear(x.data(), m, ew.w1, gate.data());
    linear(x.data(), m, ew.w3, up.data());
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < I; ++j) {
        float& g = gate[static_cast<size_t>(i * I + j)];
        float u = up[static_cast<size_t>(i * I + j)];
        if (limit > 0) {
          u = std::clamp(u, -limit, limit);
          g = std::min(g, limit);
        }
        float h = (g / (1.0f + std::exp(-g))) * u;
        if (weighted) h = rows[static_cast<size_t>(i)].second * h;
        g = h;
      }
    }
    linear(gate.data(), m, ew.w2, y.data());
    for (int64_t i = 0; i < m; ++i) {
      float* o = &out[static_cast<size_t>(rows[static_cast<size_t>(i)].first * d)];
      for (int64_t j = 0; j < d; ++j) o[j] += y[static_cast<size_t>(i * d + j)];
    }
  };
  for (int64_t e = 0; e < E; ++e) {
    if (!by_expert[static_cast<size_t>(e)].empty()) run_expert(lw.experts[static_cast<size_t>(e)], by_expert[static_cast<size_t>(e)], true);
  }
  if (lw.has_shared_expert) {
    std::vector<std::pair<int64_t, float>> all(static_cast<size_t>(rows_));
    for (int64_t r = 0; r < rows_; ++r) all[static_cast<size_t>(r)] = {r, 1.0f};
    run_expert(lw.shared_expert, all, false);
  }
}

// Final collapse with the last site's pre mix, the norm and the head: every row of a request that
// wants all logits, otherwise its last row.
void ForwardPass::head() {
  const int64_t d = t_.hidden_size, V = t_.vocab_size;
  std::vector<float> y;
  collapse(pre_mix_, model_.weights_.final_norm, y);
  for (const Segment& seg : segments_) {
    const int64_t n = static_cast<int64_t>(seg.tokens.size());
    const int64_t first = seg.all_logits != nullptr ? 0 : n - 1;
    std::vector<float> logits(static_cast<size_t>((n - first) * V));
    linear(&y[static_cast<size_t>((seg.row0 + first) * d)], n - first, model_.weights_.head, logits.data());
    seg.state->next_logits_.assign(logits.end() - V, logits.end());
    if (seg.all_logits != nullptr) *seg.all_logits = std::move(logits);
  }
}

void ForwardPass::commit_tokens() {
  for (const Segment& seg : segments_) {
    seg.state->token_ids_.insert(seg.state->token_ids_.end(), seg.tokens.begin(), seg.tokens.end());
  }
}

}  // namespace hippo::engine
