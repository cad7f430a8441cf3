#include "kernels/cpu/zero_rows.h"

#include "kernels/cpu/linear.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace hippo::kernels::cpu {
namespace {

bool is_dense_float(const WeightView& w) {
  return w.format == WeightFormat::kF32 || w.format == WeightFormat::kBF16;
}

std::int64_t row_bytes(const WeightView& w) { return w.cols * (w.format == WeightFormat::kF32 ? 4 : 2); }

}  // namespace

bool is_zero_row(const WeightView& w, std::int64_t row) {
  const std::int64_t rb = row_bytes(w);
  const auto* p = static_cast<const std::uint8_t*>(w.data) + row * rb;
  return std::all_of(p, p + rb, [](std::uint8_t b) { return b == 0; });
}

bool ZeroRows::keep(const WeightView& w, ThreadPool& pool) {
  if (!is_dense_float(w) || w.rows < 2) return false;
  if (find(w) != nullptr) return true;
  const auto* bytes = static_cast<const std::uint8_t*>(w.data);
  const std::int64_t rb = row_bytes(w);
  // A dense weight shows itself within its first rows' first bytes: stop as soon as more than half
  // of the rows cannot be zero.
  std::vector<std::uint8_t> nonzero(static_cast<std::size_t>(w.rows));
  std::int64_t count = 0;
  for (std::int64_t r = 0; r < w.rows; ++r) {
    nonzero[static_cast<std::size_t>(r)] = !is_zero_row(w, r);
    count += nonzero[static_cast<std::size_t>(r)];
    if (2 * count > w.rows) return false;
  }
  Compact compact;
  compact.rows.reserve(static_cast<std::size_t>(count));
  for (std::int64_t r = 0; r < w.rows; ++r)
    if (nonzero[static_cast<std::size_t>(r)]) compact.rows.push_back(r);
  compact.data = std::make_unique<std::uint8_t[]>(static_cast<std::size_t>(std::max<std::int64_t>(1, count * rb)));
  pool.parallel_for(count, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i)
      std::memcpy(compact.data.get() + i * rb, bytes + compact.rows[static_cast<std::size_t>(i)] * rb,
                  static_cast<std::size_t>(rb));
  });
  compact.w = w;
  compact.w.data = compact.data.get();
  compact.w.rows = count;
  compact.weight_rows = w.rows;
  kept_.emplace(reinterpret_cast<std::uintptr_t>(w.data), std::move(compact));
  return true;
}

const ZeroRows::Compact* ZeroRows::find(const WeightView& w) const {
  if (kept_.empty() || !is_dense_float(w)) return nullptr;
  const auto it = kept_.find(reinterpret_cast<std::uintptr_t>(w.data));
  if (it == kept_.end() || it->second.w.format != w.format || it->second.w.cols != w.cols) return nullptr;
  return w.rows == it->second.weight_rows ? &it->second : nullptr;
}

bool compact_linear(const float* x, std::int64_t m, const WeightView& w, const ZeroRows::Compact& compact,
                    float* const* y_rows, ThreadPool& pool) {
  for (std::int64_t i = 0; i < m * w.cols; ++i)
    if (!std::isfinite(x[i])) return false;
  const std::int64_t n = compact.w.rows;
  thread_local std::vector<float> scratch;
  scratch.resize(static_cast<std::size_t>(std::max<std::int64_t>(1, m * n)));
  if (n > 0) linear(x, m, compact.w, scratch.data(), pool);
  for (std::int64_t i = 0; i < m; ++i) {
    float* y = y_rows[i];
    std::fill(y, y + w.rows, 0.0f);
    const float* s = scratch.data() + i * n;
    for (std::int64_t j = 0; j < n; ++j) y[compact.rows[static_cast<std::size_t>(j)]] = s[j];
  }
  return true;
}

}  // namespace hippo::kernels::cpu
