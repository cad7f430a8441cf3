// A Backend that runs another one and adds up the wall time of every op call, per op: where a
// forward's time goes (`hippo bench model --op-times`). The engine calls ops one at a time, each
// running its own threads inside, so an op's wall time is its whole cost; time between op calls is
// the engine's own work (bookkeeping, gathers), which the caller gets as its total minus the ops'.
#pragma once

#include "kernels/backend.h"

#include <array>
#include <chrono>
#include <cstddef>
#include <memory>

namespace hippo::kernels {

inline constexpr std::size_t kOpCount = std::size(kAllOps);

struct OpTotals {
  std::array<double, kOpCount> seconds{};  // indexed by static_cast<size_t>(Op)
  std::array<std::int64_t, kOpCount> calls{};
};

class OpTimingBackend final : public Backend {
 public:
  explicit OpTimingBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}

  // The sums since construction or the last reset().
  const OpTotals& totals() const { return totals_; }
  void reset() { totals_ = {}; }

  const char* name() const override { return inner_->name(); }
  int threads() const override { return inner_->threads(); }
  bool supports(Op op) const override { return inner_->supports(op); }
  bool supports(WeightFormat format) const override { return inner_->supports(format); }
  bool supports(TableFormat format) const override { return inner_->supports(format); }
  Result<bool> keep_weight(const WeightView& w) override { return inner_->keep_weight(w); }

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

 private:
  // Adds the time from its construction to its destruction to op's total.
  class Timed {
   public:
    Timed(OpTotals& totals, Op op) : totals_(totals), op_(static_cast<std::size_t>(op)) {}
    ~Timed() {
      totals_.seconds[op_] += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      ++totals_.calls[op_];
    }
    Timed(const Timed&) = delete;
    Timed& operator=(const Timed&) = delete;

   private:
    OpTotals& totals_;
    std::size_t op_;
    std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  };

  std::unique_ptr<Backend> inner_;
  OpTotals totals_;
};

}  // namespace hippo::kernels
