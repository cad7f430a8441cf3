// The CPU backend's marks of the model's FP8 weights (weight_view.h's fp8_special_blocks): which
// scale blocks hold a code that the fast decodes of linear_impl.h (fp8_tile, fp8_normal_bits) do
// not take, made once at load (Backend::keep_weight) where the instruction set decodes so
// (linear.h's fp8_special_blocks_pay), then attached to any view of a kept weight's rows. Marked
// blocks are decoded the general way: the bits of every result are unchanged.
#pragma once

#include "kernels/cpu/thread_pool.h"
#include "kernels/weight_view.h"

#include <cstdint>
#include <map>
#include <memory>

namespace hippo::kernels::cpu {

class Fp8SpecialBlocks {
 public:
  // Marks w's blocks if w is an FP8 view not marked yet; other views are left. True when views of
  // w's rows get marks from now on.
  bool keep(const WeightView& w, ThreadPool& pool);

  // w with the marks of its rows where it lies inside a kept weight; else w.
  WeightView find(const WeightView& w) const;

 private:
  struct Marks {
    std::int64_t bytes = 0;  // as many as the weight's scales
    std::int64_t cols = 0;
    std::int64_t block = 0;
    std::unique_ptr<std::uint8_t[]> special;
  };
  std::map<std::uintptr_t, Marks> marks_;  // by the address of the weight's first scale byte
};

}  // namespace hippo::kernels::cpu
