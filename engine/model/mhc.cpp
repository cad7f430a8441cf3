// Single-pass mHC: the mixes of a site, the collapse of the streams and their expansion.
#include "engine/model/forward_pass.h"

namespace hippo::engine {

// Reference: hc_mixes — one projection of the normalised flattened streams gives pre, post and the
// Sinkhorn-projected comb.
void ForwardPass::hc_mixes(const kernels::WeightView& fn, const std::vector<float>& base,
                           const std::vector<float>& scale, std::vector<float>& pre, std::vector<float>& post,
                           std::vector<float>& comb) {
  const int64_t d = t_.hidden_size, hc = t_.hc_mult, mix = fn.rows;
  std::vector<float> flat(streams_.size());
  ops_.rms_norm(streams_.data(), rows_, hc * d, nullptr, static_cast<float>(t_.rms_norm_eps), flat.data());
  std::vector<float> mixes(static_cast<size_t>(rows_ * mix));
  linear(flat.data(), rows_, fn, mixes.data());
  pre.assign(static_cast<size_t>(rows_ * hc), 0.0f);
  post.assign(static_cast<size_t>(rows_ * hc), 0.0f);
  comb.assign(static_cast<size_t>(rows_ * hc * hc), 0.0f);
  kernels::HcMixArgs args;
  args.mixes = mixes.data();
  args.rows = rows_;
  args.hc = hc;
  args.mix_stride = mix;
  args.scale = scale.data();
  args.base = base.data();
  args.eps = static_cast<float>(t_.hc_eps);
  args.sinkhorn_iters = t_.hc_sinkhorn_iters;
  args.pre = pre.data();
  args.post = post.data();
  args.comb = comb.data();
  ops_.hc_mix(args);
}

// Σ_i pre_i · X_i, then RMSNorm with `norm` (none when empty).
void ForwardPass::collapse(const std::vector<float>& pre, const std::vector<float>& norm, std::vector<float>& out) {
  const int64_t d = t_.hidden_size;
  out.resize(static_cast<size_t>(rows_ * d));
  ops_.hc_collapse(streams_.data(), pre.data(), rows_, t_.hc_mult, d, out.data());
  if (!norm.empty()) ops_.rms_norm(out.data(), rows_, d, norm.data(), static_cast<float>(t_.rms_norm_eps), out.data());
}

// out_k = post_k · sub + Σ_j comb[j][k] · X_j.
void ForwardPass::expand(const std::vector<float>& sub, const std::vector<float>& post, const std::vector<float>& comb) {
  ops_.hc_expand(streams_.data(), sub.data(), post.data(), comb.data(), rows_, t_.hc_mult, t_.hidden_size);
}

}  // namespace hippo::engine
