#include "kernels/cpu/cpu_backend.h"

#include "kernels/cpu/fp4_lane_copies.h"
#include "kernels/cpu/fp8_special_blocks.h"
#include "kernels/cpu/kv_entries.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/model_ops.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/zero_rows.h"

#include <new>
#include <vector>

namespace hippo::kernels::cpu {
namespace {

// The encoder and decoder of one entry format (kv_entries.h).
struct EntryCodec {
  void (*encode)(const float* x, std::int64_t dim, std::uint8_t* out);
  void (*decode)(const std::uint8_t* in, std::int64_t dim, float* x);
};

EntryCodec entry_codec(KvFormat format) {
  switch (format) {
    case KvFormat::kWindow: return {encode_window_entry, decode_window_entry};
    case KvFormat::kCompressed: return {encode_compressed_entry, decode_compressed_entry};
    case KvFormat::kIndex: return {encode_index_entry, decode_index_entry};
  }
  return {};
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads) : pool_(threads) {}

  const char* name() const override { return "cpu"; }
  int threads() const override { return pool_.size(); }
  bool supports(Op) const override { return true; }
  bool supports(WeightFormat) const override { return true; }
  bool supports(TableFormat) const override { return true; }

  // FP4 weights are read from a copy in lane order (fp4_lane_copies.h) and FP8 weights in place with
  // their special blocks marked (fp8_special_blocks.h), where that pays; F32 and BF16 weights whose
  // rows are mostly zero from a copy of the others (zero_rows.h).
  Result<bool> keep_weight(const WeightView& w) override {
    const std::string isa = cpu::linear_isa();
    try {
      if (w.format == WeightFormat::kF32 || w.format == WeightFormat::kBF16) return zero_rows_.keep(w, pool_);
      if (w.format == WeightFormat::kFp8Block) {
        if (cpu::fp8_special_blocks_pay(isa)) fp8_blocks_.keep(w, pool_);
        return false;  // its codes are still read where they are
      }
      return cpu::fp4_lane_order_pays(isa) && fp4_copies_.keep(w, pool_);
    } catch (const std::bad_alloc&) {
      return make_error(ErrorCode::kResourceExhausted, "CPU backend: no memory for what it keeps of a {} x {} {} weight",
                        w.rows, w.cols, weight_format_name(w.format));
    }
  }
  void linear(const float* x, std::int64_t m, const WeightView& w, float* y) override {
    if (m <= 0) return;
    if (const ZeroRows::Compact* compact = zero_rows_.find(w)) {
      std::vector<float*> rows(static_cast<std::size_t>(m));
      for (std::int64_t i = 0; i < m; ++i) rows[static_cast<std::size_t>(i)] = y + i * w.rows;
      if (compact_linear(x, m, w, *compact, rows.data(), pool_)) return;
    }
    cpu::linear(x, m, kept(w), y, pool_);
  }
  void linear_rows(const float* x, std::int64_t m, const WeightView& w, float* const* y_rows) override {
    if (m <= 0) return;
    if (const ZeroRows::Compact* compact = zero_rows_.find(w))
      if (compact_linear(x, m, w, *compact, y_rows, pool_)) return;
    cpu::linear_rows(x, m, kept(w), y_rows, pool_);
  }
  void rms_norm(const float* x, std::int64_t rows, std::int64_t n, const float* weight, float eps, float* out) override {
    cpu::rms_norm(x, rows, n, weight, eps, out);
  }
  void rope(float* x, std::int64_t rows, std::int64_t heads, std::int64_t dim, std::int64_t rope_dims, const float* cos,
            const float* sin, bool inverse) override {
    cpu::rope(x, rows, heads, dim, rope_dims, cos, sin, inverse);
  }
  void hc_mix(const HcMixArgs& args) override { cpu::hc_mix(args); }
  void hc_collapse(const float* streams, const float* pre, std::int64_t rows, std::int64_t hc, std::int64_t d,
                   float* out) override {
    cpu::hc_collapse(streams, pre, rows, hc, d, out);
  }
  void hc_expand(float* streams, const float* sub, const float* post, const float* comb, std::int64_t rows,
                 std::int64_t hc, std::int64_t d) override {
    cpu::hc_expand(streams, sub, post, comb, rows, hc, d);
  }
  void attention(const AttentionArgs& args) override { cpu::attention(args, pool_); }

  void kv_encode(KvFormat format, const float* x, std::int64_t rows, std::int64_t dim, std::uint8_t* entries) override {
    const std::int64_t bytes = kv_entry_bytes(format, dim);
    const auto encode = entry_codec(format).encode;
    for (std::int64_t r = 0; r < rows; ++r) encode(x + r * dim, dim, entries + r * bytes);
  }
  void kv_decode(KvFormat format, const std::uint8_t* entries, std::int64_t rows, std::int64_t dim, float* x) override {
    const std::int64_t bytes = kv_entry_bytes(format, dim);
    const auto decode = entry_codec(format).decode;
    for (std::int64_t r = 0; r < rows; ++r) decode(entries + r * bytes, dim, x + r * dim);
  }
  void fp4_round_trip(float* x, std::int64_t rows, std::int64_t dim) override {
    for (std::int64_t r = 0; r < rows; ++r) fp4_ue8m0_round_trip(x + r * dim, dim);
  }

  void compressor_pool(const float* kv, const float* gate, std::int64_t groups, std::int64_t ratio, std::int64_t dim,
                       float* latents) override {
    cpu::compressor_pool(kv, gate, groups, ratio, dim, latents);
  }
  void indexer(const IndexerArgs& args) override { cpu::indexer(args, pool_); }
  void router(const RouterArgs& args) override { cpu::router(args); }
  void swiglu(float* gate, const float* up, std::int64_t rows, std::int64_t width, float limit,
              const float* row_weight) override {
    cpu::swiglu(gate, up, rows, width, limit, row_weight);
  }
  void add_rows(const float* y, std::int64_t m, std::int64_t d, const std::int64_t* dst, float* out) override {
    cpu::add_rows(y, m, d, dst, out);
  }
  void gather_rows(const RowTable& table, const std::int64_t* ids, std::int64_t n, float* out) override {
    cpu::gather_rows(table, ids, n, out);
  }
  void engram_fuse(float* streams, const float* kv, const float* gate_weight, std::int64_t rows, std::int64_t hc,
                   std::int64_t d, float eps) override {
    cpu::engram_fuse(streams, kv, gate_weight, rows, hc, d, eps);
  }

 private:
  ThreadPool pool_;
  // w as the kernels read it: from the lane-order copy, or with its FP8 blocks marked, where kept.
  WeightView kept(const WeightView& w) const {
    return w.format == WeightFormat::kFp8Block ? fp8_blocks_.find(w) : fp4_copies_.find(w);
  }

  Fp4LaneCopies fp4_copies_;
  Fp8SpecialBlocks fp8_blocks_;
  ZeroRows zero_rows_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int threads) { return std::make_unique<CpuBackend>(threads); }

}  // namespace hippo::kernels::cpu
