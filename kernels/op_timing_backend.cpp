// Every op forwarded to the wrapped backend, timed whole (op_timing_backend.h).
#include "kernels/op_timing_backend.h"

namespace hippo::kernels {

void OpTimingBackend::linear(const float* x, std::int64_t m, const WeightView& w, float* y) {
  Timed timed(totals_, Op::kLinear);
  inner_->linear(x, m, w, y);
}

void OpTimingBackend::linear_rows(const float* x, std::int64_t m, const WeightView& w, float* const* y_rows) {
  Timed timed(totals_, Op::kLinear);
  inner_->linear_rows(x, m, w, y_rows);
}

void OpTimingBackend::rms_norm(const float* x, std::int64_t rows, std::int64_t n, const float* weight, float eps,
                               float* out) {
  Timed timed(totals_, Op::kRmsNorm);
  inner_->rms_norm(x, rows, n, weight, eps, out);
}

void OpTimingBackend::rope(float* x, std::int64_t rows, std::int64_t heads, std::int64_t dim, std::int64_t rope_dims,
                           const float* cos, const float* sin, bool inverse) {
  Timed timed(totals_, Op::kRope);
  inner_->rope(x, rows, heads, dim, rope_dims, cos, sin, inverse);
}

void OpTimingBackend::hc_mix(const HcMixArgs& args) {
  Timed timed(totals_, Op::kHcMix);
  inner_->hc_mix(args);
}

void OpTimingBackend::hc_collapse(const float* streams, const float* pre, std::int64_t rows, std::int64_t hc,
                                  std::int64_t d, float* out) {
  Timed timed(totals_, Op::kHcCollapse);
  inner_->hc_collapse(streams, pre, rows, hc, d, out);
}

void OpTimingBackend::hc_expand(float* streams, const float* sub, const float* post, const float* comb,
                                std::int64_t rows, std::int64_t hc, std::int64_t d) {
  Timed timed(totals_, Op::kHcExpand);
  inner_->hc_expand(streams, sub, post, comb, rows, hc, d);
}

void OpTimingBackend::attention(const AttentionArgs& args) {
  Timed timed(totals_, Op::kAttention);
  inner_->attention(args);
}

void OpTimingBackend::kv_encode(KvFormat format, const float* x, std::int64_t rows, std::int64_t dim,
                                std::uint8_t* entries) {
  Timed timed(totals_, Op::kKvEncode);
  inner_->kv_encode(format, x, rows, dim, entries);
}

void OpTimingBackend::kv_decode(KvFormat format, const std::uint8_t* entries, std::int64_t rows, std::int64_t dim,
                                float* x) {
  Timed timed(totals_, Op::kKvDecode);
  inner_->kv_decode(format, entries, rows, dim, x);
}

void OpTimingBackend::fp4_round_trip(float* x, std::int64_t rows, std::int64_t dim) {
  Timed timed(totals_, Op::kFp4RoundTrip);
  inner_->fp4_round_trip(x, rows, dim);
}

void OpTimingBackend::compressor_pool(const float* kv, const float* gate, std::int64_t groups, std::int64_t ratio,
                                      std::int64_t dim, float* latents) {
  Timed timed(totals_, Op::kCompressorPool);
  inner_->compressor_pool(kv, gate, groups, ratio, dim, latents);
}

void OpTimingBackend::indexer(const IndexerArgs& args) {
  Timed timed(totals_, Op::kIndexer);
  inner_->indexer(args);
}

void OpTimingBackend::router(const RouterArgs& args) {
  Timed timed(totals_, Op::kRouter);
  inner_->router(args);
}

void OpTimingBackend::swiglu(float* gate, const float* up, std::int64_t rows, std::int64_t width, float limit,
                             const float* row_weight) {
  Timed timed(totals_, Op::kSwiGlu);
  inner_->swiglu(gate, up, rows, width, limit, row_weight);
}

void OpTimingBackend::add_rows(const float* y, std::int64_t m, std::int64_t d, const std::int64_t* dst, float* out) {
  Timed timed(totals_, Op::kAddRows);
  inner_->add_rows(y, m, d, dst, out);
}

void OpTimingBackend::gather_rows(const RowTable& table, const std::int64_t* ids, std::int64_t n, float* out) {
  Timed timed(totals_, Op::kGatherRows);
  inner_->gather_rows(table, ids, n, out);
}

void OpTimingBackend::engram_fuse(float* streams, const float* kv, const float* gate_weight, std::int64_t rows,
                                  std::int64_t hc, std::int64_t d, float eps) {
  Timed timed(totals_, Op::kEngramFuse);
  inner_->engram_fuse(streams, kv, gate_weight, rows, hc, d, eps);
}

}  // namespace hippo::kernels
