// DSpark, the release's draft model (../shared/design/dspark.md §1.4; docs/engine.md, "Speculative
// decoding"). The target's forward taps the block inputs of the target layers (the streams averaged
// over their hc copies) and writes each committed row's context KV into every stage's window; a
// draft runs the block [anchor, noise x (block - 1)] through the stages, each slot attending to its
// stage's window and to the whole block, then the shared head, the Markov head left to right and the
// confidence head.
#include "engine/model/forward_pass.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

namespace hippo::engine {

using kernels::KvFormat;

// Reference: the official Transformer.forward records h.mean(hc) of the streams entering each target
// layer (after its Engram, before the block), the targets' rows side by side in layer order.
void ForwardPass::tap_features(int64_t layer) {
  const std::vector<int64_t>& targets = t_.dspark_target_layer_ids;
  if (std::find(targets.begin(), targets.end(), layer) == targets.end()) return;
  const int64_t d = t_.hidden_size, hc = t_.hc_mult, n_targets = static_cast<int64_t>(targets.size());
  const int64_t column = std::count_if(targets.begin(), targets.end(), [&](int64_t t) { return t < layer; }) * d;
  if (features_.empty()) features_.assign(static_cast<size_t>(rows_ * n_targets * d), 0.0f);
  const std::vector<float> mean_weights(static_cast<size_t>(rows_ * hc), 1.0f / static_cast<float>(hc));
  std::vector<float> mean(static_cast<size_t>(rows_ * d));
  ops_.hc_collapse(streams_.data(), mean_weights.data(), rows_, hc, d, mean.data());
  for (int64_t r = 0; r < rows_; ++r) {
    std::memcpy(&features_[static_cast<size_t>(r * n_targets * d + column)], &mean[static_cast<size_t>(r * d)],
                static_cast<size_t>(d) * sizeof(float));
  }
}

// main_x = main_norm(main_proj(features)); per stage, its window entry: kv_norm(wkv main_x), RoPE at
// the row's position, the FP8 round trip (the ring keeps the codes). Only the rows a window keeps
// (each segment's last `window`) are projected.
void ForwardPass::write_stage_windows() {
  const DsparkWeights& ds = *model_.weights_.dspark;
  const int64_t d = t_.hidden_size, D = t_.head_dim, window = t_.sliding_window;
  const int64_t n_features = static_cast<int64_t>(t_.dspark_target_layer_ids.size()) * d;
  const int64_t entry_bytes = kernels::window_entry_bytes(D);
  const float eps = static_cast<float>(t_.rms_norm_eps);
  // Per segment: its rows kept (the last `keep`, from batch row `row` and position `position`) and
  // where they start among the compact rows.
  struct Kept {
    int64_t keep, row, position, compact;
  };
  std::vector<Kept> kept;
  std::vector<float> features;
  int64_t m = 0;
  for (const Segment& seg : segments_) {
    const int64_t n = static_cast<int64_t>(seg.tokens.size()), keep = std::min(n, window);
    kept.push_back({keep, seg.row0 + n - keep, seg.pos0 + n - keep, m});
    const auto begin = features_.begin() + kept.back().row * n_features;
    features.insert(features.end(), begin, begin + keep * n_features);
    m += keep;
  }
  std::vector<float> main_x(static_cast<size_t>(m * d));
  linear(features.data(), m, ds.main_proj, main_x.data());
  ops_.rms_norm(main_x.data(), m, d, ds.main_norm.data(), eps, main_x.data());
  std::vector<float> kv(static_cast<size_t>(m * D));
  std::vector<std::uint8_t> codes(static_cast<size_t>(m * entry_bytes));
  for (const LayerWeights& stage : ds.stages) {
    linear(main_x.data(), m, stage.wkv, kv.data());
    ops_.rms_norm(kv.data(), m, D, stage.kv_norm.data(), eps, kv.data());
    for (const Kept& k : kept) rope(main_angles_, &kv[static_cast<size_t>(k.compact * D)], k.row, k.keep, 1, D);
    ops_.kv_encode(KvFormat::kWindow, kv.data(), m, D, codes.data());
    for (size_t s = 0; s < segments_.size(); ++s) {
      store_window(segments_[s].state->rings_[static_cast<size_t>(stage.role.layer)], kept[s].position, kept[s].keep,
                   &codes[static_cast<size_t>(kept[s].compact * entry_bytes)]);
    }
  }
}

// Every slot of a block sees its stage's window (the last `window` positions before the block, from
// dspark_from() on) and all the block's slots, in both directions; the sink joins the denominator.
void ForwardPass::attend_block(const LayerWeights& lw, const std::vector<float>& q, const std::vector<float>& block_kv,
                               std::vector<float>& out) {
  const int64_t H = t_.num_attention_heads, D = t_.head_dim, window = t_.sliding_window;
  kernels::AttentionArgs args;
  args.heads = H;
  args.dim = D;
  args.scale = static_cast<float>(std::pow(static_cast<double>(D), -0.5));
  args.sinks = lw.attn_sink.data();
  std::vector<float> past;
  std::vector<const float*> keys;
  std::vector<int64_t> window_first, window_count;
  for (const Segment& seg : segments_) {
    const int64_t n = static_cast<int64_t>(seg.tokens.size());
    const int64_t from = std::max(seg.state->dspark_from(), seg.pos0 - window), previous = seg.pos0 - from;
    past.resize(static_cast<size_t>(previous * D));
    load_window(seg.state->rings_[static_cast<size_t>(lw.role.layer)], from, previous, past.data());
    keys.clear();
    for (int64_t k = 0; k < previous; ++k) keys.push_back(&past[static_cast<size_t>(k * D)]);
    for (int64_t i = 0; i < n; ++i) keys.push_back(&block_kv[static_cast<size_t>((seg.row0 + i) * D)]);
    window_first.assign(static_cast<size_t>(n), 0);
    window_count.assign(static_cast<size_t>(n), previous + n);
    args.rows = n;
    args.q = &q[static_cast<size_t>(seg.row0 * H * D)];
    args.keys = keys.data();
    args.n_keys = previous + n;
    args.window_first = window_first.data();
    args.window_count = window_count.data();
    args.out = &out[static_cast<size_t>(seg.row0 * H * D)];
    ops_.attention(args);
  }
}

// The streams collapse with the last stage's FFN pre-mix (V4.1 has no hc_head): that hidden, before
// the norm, feeds the confidence head; after the last stage's norm, the shared head gives the base
// logits.
void ForwardPass::draft_head() {
  const DsparkWeights& ds = *model_.weights_.dspark;
  const int64_t d = t_.hidden_size, V = t_.vocab_size;
  std::vector<float> x;
  collapse(pre_mix_, {}, x);
  std::vector<float> y(x.size());
  ops_.rms_norm(x.data(), rows_, d, ds.norm.data(), static_cast<float>(t_.rms_norm_eps), y.data());
  std::vector<float> logits(static_cast<size_t>(rows_ * V));
  linear(y.data(), rows_, model_.weights_.head, logits.data());
  for (const Segment& seg : segments_) {
    const auto n = static_cast<int64_t>(seg.tokens.size());
    seg.all_logits->assign(logits.begin() + seg.row0 * V, logits.begin() + (seg.row0 + n) * V);
    seg.draft_hidden->assign(x.begin() + seg.row0 * d, x.begin() + (seg.row0 + n) * d);
  }
}

namespace {

// The argmax of base + W2 · e (the lowest id of a tie) without every entry of W2 · e: by
// Cauchy-Schwarz |W2[v] · e| <= |W2[v]| |e|, so only the ids whose base logit plus that bound (and a
// margin for rounding) reaches the corrected logit of the base's argmax can win, and only their
// biases are computed, from W2's rows gathered by the backend. On `tiny` (a vocabulary-sized W2 of
// rank 8) that is about 25 rows instead of 129,280 (measured over the tests and the bench).
int64_t markov_argmax(kernels::Backend& ops, const DsparkWeights& ds, std::span<const float> base, const float* e, int64_t r,
                      std::vector<int64_t>& ids, std::vector<float>& rows) {
  double e_norm = 0;
  for (int64_t j = 0; j < r; ++j) e_norm += static_cast<double>(e[j]) * e[j];
  const auto bound = static_cast<float>(std::sqrt(e_norm) * (1 + 1e-4));
  auto corrected = [&](int64_t v, const float* w2_row) {
    float bias = 0;
    for (int64_t j = 0; j < r; ++j) bias += w2_row[j] * e[j];
    return base[static_cast<size_t>(v)] + bias;
  };
  const int64_t top = std::max_element(base.begin(), base.end()) - base.begin();
  rows.resize(static_cast<size_t>(r));
  ops.gather_rows(ds.markov_head, &top, 1, rows.data());
  const float reach = corrected(top, rows.data()) - 1e-6f;
  ids.clear();
  for (size_t v = 0; v < base.size(); ++v) {
    if (base[v] + ds.markov_head_norms[v] * bound >= reach) ids.push_back(static_cast<int64_t>(v));
  }
  rows.resize(ids.size() * static_cast<size_t>(r));
  ops.gather_rows(ds.markov_head, ids.data(), static_cast<int64_t>(ids.size()), rows.data());
  int64_t best = ids[0];
  float best_logit = corrected(ids[0], rows.data());
  for (size_t c = 1; c < ids.size(); ++c) {
    const float logit = corrected(ids[c], &rows[c * static_cast<size_t>(r)]);
    if (logit > best_logit) best = ids[c], best_logit = logit;
  }
  return best;
}

}  // namespace

// Slot k's distribution is softmax(U_k + W2 · W1[prev_k]) with prev_0 the anchor and prev_k the
// draft of slot k - 1, so the slots are drafted left to right; a draft is that distribution's
// argmax (markov_argmax). Its confidence is sigmoid(w · [x_k; W1[prev_k]]).
Status Model::draft_dspark(std::span<DsparkDraft> batch) {
  if (!weights_.dspark) return Status(ErrorCode::kFailedPrecondition, "DSpark: the checkpoint has no DSpark stages");
  const TextConfig& t = text();
  const int64_t B = t.dspark_block_size, V = t.vocab_size, d = t.hidden_size, r = t.dspark_markov_rank;
  const auto n = static_cast<int64_t>(batch.size());
  std::vector<std::vector<int32_t>> blocks(batch.size());
  std::vector<std::vector<float>> logits(batch.size()), hidden(batch.size());
  std::vector<ForwardPass::Segment> segments;
  for (size_t i = 0; i < batch.size(); ++i) {
    const DsparkDraft& request = batch[i];
    if (request.state == nullptr || request.state->has_draft()) {
      return Status(ErrorCode::kInvalidArgument, "DSpark: every draft needs a session without an unsettled draft");
    }
    if (request.anchor < 0 || request.anchor >= V) {
      return Status(ErrorCode::kInvalidArgument, fmt::format("DSpark: anchor {} is outside the vocabulary", request.anchor));
    }
    if (request.state->n_tokens() + B > t.max_position_embeddings) {
      return Status(ErrorCode::kResourceExhausted, "DSpark: the block would pass the model's context");
    }
    blocks[i].assign(static_cast<size_t>(B), static_cast<int32_t>(t.dspark_noise_token_id));
    blocks[i][0] = request.anchor;
    ForwardPass::Segment segment;
    segment.state = request.state;
    segment.tokens = blocks[i];
    segment.all_logits = &logits[i];
    segment.draft_hidden = &hidden[i];
    segments.push_back(segment);
  }
  if (segments.empty()) return Status::ok_status();
  const auto started = std::chrono::steady_clock::now();
  ForwardPass(*this, std::move(segments), ForwardPass::Depth::kDspark).run();

  const DsparkWeights& ds = *weights_.dspark;
  std::vector<int64_t> prev(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    prev[i] = batch[i].anchor;
    batch[i].tokens.assign(static_cast<size_t>(B), 0);
    batch[i].confidence.assign(static_cast<size_t>(B), 0.0f);
  }
  std::vector<float> embedded(static_cast<size_t>(n * r));
  std::vector<float> confidence_in(static_cast<size_t>(n * (d + r))), confidence(static_cast<size_t>(n));
  std::vector<int64_t> candidates;
  std::vector<float> candidate_rows;
  for (int64_t k = 0; k < B; ++k) {
    backend_->gather_rows(ds.markov_embed, prev.data(), n, embedded.data());
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(&confidence_in[static_cast<size_t>(i * (d + r))], &hidden[static_cast<size_t>(i)][static_cast<size_t>(k * d)],
                  static_cast<size_t>(d) * sizeof(float));
      std::memcpy(&confidence_in[static_cast<size_t>(i * (d + r) + d)], &embedded[static_cast<size_t>(i * r)],
                  static_cast<size_t>(r) * sizeof(float));
    }
    backend_->linear(confidence_in.data(), n, ds.confidence, confidence.data());
    for (int64_t i = 0; i < n; ++i) {
      const std::span<const float> base(&logits[static_cast<size_t>(i)][static_cast<size_t>(k * V)], static_cast<size_t>(V));
      const int64_t best = markov_argmax(*backend_, ds, base, &embedded[static_cast<size_t>(i * r)], r, candidates, candidate_rows);
      DsparkDraft& request = batch[static_cast<size_t>(i)];
      request.tokens[static_cast<size_t>(k)] = static_cast<int32_t>(best);
      request.confidence[static_cast<size_t>(k)] = 1.0f / (1.0f + std::exp(-confidence[static_cast<size_t>(i)]));
      prev[static_cast<size_t>(i)] = best;
    }
  }
  step_costs_.record_dspark(n, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  return Status::ok_status();
}

}  // namespace hippo::engine
