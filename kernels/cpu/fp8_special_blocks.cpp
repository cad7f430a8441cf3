#include "kernels/cpu/fp8_special_blocks.h"

#include <algorithm>

namespace hippo::kernels::cpu {

bool Fp8SpecialBlocks::keep(const WeightView& w, ThreadPool& pool) {
  if (w.format != WeightFormat::kFp8Block) return false;
  if (w.fp8_special_blocks != nullptr || find(w).fp8_special_blocks != nullptr) return true;
  Marks marks{scale_span_bytes(w), w.cols, w.block, std::make_unique<std::uint8_t[]>(static_cast<std::size_t>(scale_span_bytes(w)))};
  const std::int64_t block_rows = (w.rows + w.block - 1) / w.block;
  pool.parallel_for(block_rows, [&](std::int64_t b0, std::int64_t b1) {
    mark_fp8_special_blocks(w, b0 * w.block, std::min(w.rows, b1 * w.block) - b0 * w.block, marks.special.get());
  });
  marks_.emplace(reinterpret_cast<std::uintptr_t>(w.scales), std::move(marks));
  return true;
}

WeightView Fp8SpecialBlocks::find(const WeightView& w) const {
  if (w.format != WeightFormat::kFp8Block || w.fp8_special_blocks != nullptr || marks_.empty()) return w;
  const auto address = reinterpret_cast<std::uintptr_t>(w.scales);
  auto it = marks_.upper_bound(address);
  if (it == marks_.begin()) return w;
  --it;
  const Marks& marks = it->second;
  const auto offset = static_cast<std::int64_t>(address - it->first);
  const std::int64_t scale_cols = (w.cols + w.block - 1) / w.block;
  if (w.cols != marks.cols || w.block != marks.block || offset % scale_cols != 0 ||
      offset + scale_span_bytes(w) > marks.bytes)
    return w;
  WeightView out = w;
  out.fp8_special_blocks = marks.special.get() + offset;
  return out;
}

}  // namespace hippo::kernels::cpu
