// The CPU backend's copies of the model's FP4 weights in lane order (weight_view.h's fp4_code): made
// once at load (Backend::keep_weight) where the instruction set gains by them (linear.h's
// fp4_lane_order_pays), then found for any view inside a kept weight's codes. AVX-512's decode
// kernel reads lane order with one load and a shift per 16 columns where packed codes take a
// broadcast and a variable shift (linear_impl.h), the same values in the same order: the bits of
// every result are unchanged.
#pragma once

#include "kernels/cpu/thread_pool.h"
#include "kernels/weight_view.h"

#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>

namespace hippo::kernels::cpu {

class Fp4LaneCopies {
 public:
  // Copies w's codes in lane order if w is a packed FP4 view not kept yet; other views are left.
  // True when w's codes are read from a copy from now on.
  bool keep(const WeightView& w, ThreadPool& pool);

  // The same rows in the kept copy (lane order) where w lies inside a kept weight; else w.
  WeightView find(const WeightView& w) const;

 private:
  struct Free {
    void operator()(std::uint8_t* p) const { std::free(p); }
  };
  struct Copy {
    std::int64_t bytes = 0;
    std::int64_t cols = 0;
    std::unique_ptr<std::uint8_t[], Free> codes;
  };
  std::map<std::uintptr_t, Copy> copies_;  // by the address of the original's first code byte
};

}  // namespace hippo::kernels::cpu
