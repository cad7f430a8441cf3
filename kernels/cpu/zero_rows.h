// The CPU backend's compact copies of F32 and BF16 weights whose rows are mostly zero: a head
// trained on part of the vocabulary (models/demo: 2,992 of 129,280 rows), made once at load
// (Backend::keep_weight). The product reads only the copy's rows and writes +0 for the rest, which
// is what the kernels give a row of +0 bits against a finite x (their sums start at +0, and
// +0 + -0 = +0), so every result keeps its bits; an x with an infinity or a NaN, whose product with
// 0 is NaN, takes the whole weight.
#pragma once

#include "kernels/cpu/thread_pool.h"
#include "kernels/weight_view.h"

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

namespace hippo::kernels::cpu {

class ZeroRows {
 public:
  // Copies w's rows that are not all +0 bits if w is an F32 or BF16 view not kept yet and at most
  // half of its rows are such; other views are left. True when w is read from a copy from now on.
  bool keep(const WeightView& w, ThreadPool& pool);

  // The kept copy of w, the whole weight only (a view of some of its rows is read in place); null
  // where there is none.
  struct Compact {
    WeightView w;                    // the rows that are not zero, in order
    std::vector<std::int64_t> rows;  // their rows in the weight
    std::int64_t weight_rows = 0;    // the weight's
    std::unique_ptr<std::uint8_t[]> data;
  };
  const Compact* find(const WeightView& w) const;

 private:
  std::map<std::uintptr_t, Compact> kept_;  // by the address of the weight's first byte
};

// Whether row `row` of an F32 or BF16 view is all +0 bits (ZeroRows keeps the others; `hippo bench
// model` leaves such rows of the head out of its roof).
bool is_zero_row(const WeightView& w, std::int64_t row);

// y [m, w.rows] = x · Wᵀ through the compact copy: its products into scratch, then scattered, the
// other columns +0. False (y untouched) where x holds a value that is not finite.
bool compact_linear(const float* x, std::int64_t m, const WeightView& w, const ZeroRows::Compact& compact,
                    float* const* y_rows, ThreadPool& pool);

}  // namespace hippo::kernels::cpu
