#include "kernels/cpu/fp4_lane_copies.h"

#include <new>

namespace hippo::kernels::cpu {
namespace {

bool is_packed_fp4(const WeightView& w) {
  return w.format == WeightFormat::kFp4Row32 && w.row_stride == 0 && !w.lane_order;
}

}  // namespace

bool Fp4LaneCopies::keep(const WeightView& w, ThreadPool& pool) {
  if (!is_packed_fp4(w)) return false;
  if (find(w).lane_order) return true;
  const std::int64_t bytes = code_span_bytes(w), row_bytes = w.cols / 2;
  // Rows start on cache lines where the packed rows do (64-byte multiples, as at every release shape).
  auto* codes = static_cast<std::uint8_t*>(std::aligned_alloc(64, static_cast<std::size_t>((bytes + 63) / 64 * 64)));
  if (codes == nullptr) throw std::bad_alloc();
  Copy copy{bytes, w.cols, std::unique_ptr<std::uint8_t[], Free>(codes)};
  pool.parallel_for(w.rows, [&](std::int64_t r0, std::int64_t r1) {
    WeightView rows = weight_rows(w, r0, r1 - r0);
    fp4_to_lane_order(rows, codes + r0 * row_bytes);
  });
  copies_.emplace(reinterpret_cast<std::uintptr_t>(w.data), std::move(copy));
  return true;
}

WeightView Fp4LaneCopies::find(const WeightView& w) const {
  if (!is_packed_fp4(w) || copies_.empty()) return w;
  const auto address = reinterpret_cast<std::uintptr_t>(w.data);
  auto it = copies_.upper_bound(address);
  if (it == copies_.begin()) return w;
  --it;
  const Copy& copy = it->second;
  const auto offset = static_cast<std::int64_t>(address - it->first);
  if (w.cols != copy.cols || offset % (w.cols / 2) != 0 || offset + code_span_bytes(w) > copy.bytes) return w;
  WeightView out = w;
  out.data = copy.codes.get() + offset;
  out.lane_order = true;
  return out;
}

}  // namespace hippo::kernels::cpu
