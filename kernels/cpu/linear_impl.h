// The body of the CPU linear layer, written once with GCC vector extensions and compiled once
// per instruction set: linear_avx512.cpp, linear_avx2.cpp and linear_generic.cpp each define
// HIPPO_LINEAR_TARGET (a target attribute, or nothing) before including this file, and compile
// with -ffp-contract=fast so that a*b+c becomes one FMA. The ISA goes on our functions only, never
// on the whole file: a -mavx512f file would also compile the std:: templates it uses for AVX-512,
// and the linker could hand those copies to every caller. Everything here has internal linkage.
//
// Plan: threads take panels of kNr weight rows; a panel is decoded to f32 once (exact, the same
// values as kernels/ref) into a zero-padded buffer and then multiplied with all m rows of x in
// tiles of kMr x kNr. Every output element is accumulated lane-wise over k in the same order and
// reduced by the same tree whatever tile computed it, which keeps the invariant of linear.h.
#pragma once

#ifndef HIPPO_LINEAR_TARGET
#error "define HIPPO_LINEAR_TARGET before including linear_impl.h"
#endif

#include "kernels/cpu/thread_pool.h"
#include "kernels/ref/numeric_formats.h"
#include "kernels/weight_view.h"

#include <array>
#include <cstring>
#include <vector>

namespace hippo::kernels::cpu {
namespace {

constexpr int kNr = 4;             // weight rows per panel
constexpr std::int64_t kPad = 16;  // k is padded to the widest vector (16 floats), the same for every ISA

std::int64_t padded(std::int64_t k) { return (k + kPad - 1) / kPad * kPad; }

struct DecodeTables {
  std::array<float, 256> e4m3;
  std::array<std::array<float, 2>, 256> e2m1_pair;  // a packed byte -> {even (low nibble), odd (high nibble)}
  DecodeTables() {
    for (int b = 0; b < 256; ++b) {
      const auto byte = static_cast<std::uint8_t>(b);
      e4m3[b] = ref::e4m3fn_to_f32(byte);
      e2m1_pair[b] = {ref::e2m1_to_f32(byte & 0xF), ref::e2m1_to_f32(static_cast<std::uint8_t>(byte >> 4))};
    }
  }
};

const DecodeTables& decode_tables() {
  static const DecodeTables tables;
  return tables;
}

// Decodes W[row, :] into out[0, kp), zero beyond w.cols.
void decode_row(const WeightView& w, std::int64_t row, std::int64_t kp, float* out) {
  const std::int64_t k = w.cols;
  const auto* bytes = static_cast<const std::uint8_t*>(w.data);
  switch (w.format) {
    case WeightFormat::kF32:
      std::memcpy(out, static_cast<const float*>(w.data) + row * k, k * sizeof(float));
      break;
    case WeightFormat::kBF16: {
      const auto* src = static_cast<const std::uint16_t*>(w.data) + row * k;
      for (std::int64_t c = 0; c < k; ++c) out[c] = ref::bf16_to_f32(src[c]);
      break;
    }
    case WeightFormat::kFp8Block: {
      const auto& table = decode_tables().e4m3;
      const std::uint8_t* src = bytes + row * k;
      const std::uint8_t* scale_row = w.scales + (row / w.block) * ((k + w.block - 1) / w.block);
      for (std::int64_t c0 = 0, blk = 0; c0 < k; c0 += w.block, ++blk) {
        const float scale = ref::e8m0_to_f32(scale_row[blk]);
        const std::int64_t c1 = std::min(k, c0 + w.block);
        for (std::int64_t c = c0; c < c1; ++c) out[c] = table[src[c]] * scale;
      }
      break;
    }
    case WeightFormat::kFp4Row32: {
      const auto& table = decode_tables().e2m1_pair;
      const std::uint8_t* src = bytes + row * (k / 2);
      const std::uint8_t* scale_row = w.scales + row * (k / 32);
      for (std::int64_t blk = 0; blk < k / 32; ++blk) {
        const float scale = ref::e8m0_to_f32(scale_row[blk]);
        for (int j = 0; j < 16; ++j) {
          const auto& pair = table[src[blk * 16 + j]];
          out[blk * 32 + 2 * j] = pair[0] * scale;
          out[blk * 32 + 2 * j + 1] = pair[1] * scale;
        }
      }
      break;
    }
  }
  std::fill(out + k, out + kp, 0.0f);
}

template <int W>
struct Simd {
  typedef float Vec __attribute__((vector_size(W * sizeof(float))));

  HIPPO_LINEAR_TARGET static Vec load(const float* p) {
    Vec v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }

  // A fixed pairwise tree: lanes (0+W/2, 1+W/2, ...), then halves again.
  HIPPO_LINEAR_TARGET static float reduce(Vec v) {
    float lanes[W];
    std::memcpy(lanes, &v, sizeof lanes);
    for (int half = W / 2; half >= 1; half /= 2)
      for (int i = 0; i < half; ++i) lanes[i] += lanes[i + half];
    return lanes[0];
  }

  // y[i * y_stride + j] for i < MR rows of x (stride kp) and j < kNr panel rows (stride kp).
  template <int MR>
  HIPPO_LINEAR_TARGET static void tile(const float* x, const float* panel, std::int64_t kp, float* y, std::int64_t y_stride, int nr) {
    Vec acc[MR][kNr] = {};
    for (std::int64_t c = 0; c < kp; c += W) {
      Vec wv[kNr];
      for (int j = 0; j < kNr; ++j) wv[j] = load(panel + j * kp + c);
      for (int i = 0; i < MR; ++i) {
        const Vec xv = load(x + i * kp + c);
        for (int j = 0; j < kNr; ++j) acc[i][j] += xv * wv[j];
      }
    }
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < nr; ++j) y[i * y_stride + j] = reduce(acc[i][j]);
  }
};

// W lanes per vector, MR rows of x per tile.
template <int W, int MR>
void linear_impl(const float* x, std::int64_t m, const WeightView& w, float* y, ThreadPool& pool) {
  static_assert(kPad % W == 0, "the padding must be a whole number of vectors");
  const std::int64_t k = w.cols, kp = padded(k), n = w.rows;
  // x rows copied with zero padding, so the inner loop has no tail.
  std::vector<float> xp(static_cast<std::size_t>(m * kp), 0.0f);
  for (std::int64_t i = 0; i < m; ++i) std::memcpy(&xp[i * kp], x + i * k, k * sizeof(float));

  const std::int64_t n_panels = (n + kNr - 1) / kNr;
  pool.parallel_for(n_panels, [&](std::int64_t p_begin, std::int64_t p_end) {
    std::vector<float> panel(static_cast<std::size_t>(kNr * kp));
    float out[MR * kNr];
    for (std::int64_t p = p_begin; p < p_end; ++p) {
      const std::int64_t r0 = p * kNr;
      const int nr = static_cast<int>(std::min<std::int64_t>(kNr, n - r0));
      for (int j = 0; j < kNr; ++j) {
        if (j < nr)
          decode_row(w, r0 + j, kp, &panel[j * kp]);
        else
          std::fill(&panel[j * kp], &panel[(j + 1) * kp], 0.0f);
      }
      std::int64_t i = 0;
      for (; i + MR <= m; i += MR) {
        Simd<W>::template tile<MR>(&xp[i * kp], panel.data(), kp, out, kNr, nr);
        for (int a = 0; a < MR; ++a)
          for (int j = 0; j < nr; ++j) y[(i + a) * n + r0 + j] = out[a * kNr + j];
      }
      for (; i < m; ++i) {  // leftover rows, one at a time, through the same per-element sequence
        Simd<W>::template tile<1>(&xp[i * kp], panel.data(), kp, out, kNr, nr);
        for (int j = 0; j < nr; ++j) y[i * n + r0 + j] = out[j];
      }
    }
  });
}

}  // namespace
}  // namespace hippo::kernels::cpu
