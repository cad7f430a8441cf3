// The body of the CPU linear layer, written once with GCC vector extensions and compiled once
// per instruction set: linear_avx512.cpp, linear_avx2.cpp and linear_generic.cpp each define
// HIPPO_LINEAR_TARGET (a target attribute, or nothing) before including this file, and compile
// with -ffp-contract=fast so that a*b+c becomes one FMA. The ISA goes on our functions only, never
// on the whole file: a -mavx512f file would also compile the std:: templates it uses for AVX-512,
// and the linker could hand those copies to every caller. Everything here has internal linkage.
//
// Plan: an outer-product (register-blocked GEMM) kernel, so that every y[i, r] is one sequential
// FMA chain over c = 0..k-1, whoever computes it: the invariant of linear.h, without the
// horizontal reductions of the old dot-product kernel that dominated for small k.
//   - Threads take panels of kNr = 2 vectors of weight rows (and, when there are few panels, also
//     blocks of rows of x). A panel is decoded to f32 (exact: the values of kernels/ref) kKc
//     columns at a time, W rows at once transposed in registers into panel[c * kNr + j], 16 KB
//     that stay in L1 while all the rows of x go past them.
//   - tile<MR> keeps MR x 2 accumulator vectors in registers; per column c it loads the two panel
//     vectors and adds x[i, c] * panel[c] (one FMA) to each. Between chunks the accumulators go
//     through y unrounded, so chunking changes nothing; leftover rows use tile<rows % MR>.
//   - m = 1 (decode) would have only two chains per panel in flight, latency-bound, so
//     panel_row takes several panels at once and feeds the transposed blocks straight from
//     registers into the same per-element chains.
#pragma once

#ifndef HIPPO_LINEAR_TARGET
#error "define HIPPO_LINEAR_TARGET before including linear_impl.h"
#endif

#include "kernels/cpu/linear.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/ref/numeric_formats.h"
#include "kernels/weight_view.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace hippo::kernels::cpu {
namespace {

// Scalar decoders: the E8M0 scales, the tail of an FP8 block that is not a whole number of
// vectors, and FP8/FP4 altogether for 4-lane vectors (SSE2 lacks the widening and compares that
// make the arithmetic decoders below pay off).
struct DecodeTables {
  std::array<float, 256> e4m3, e8m0;
  std::array<std::array<float, 2>, 256> e2m1_pair;  // a packed byte -> {even (low nibble), odd (high nibble)}
  DecodeTables() {
    for (int b = 0; b < 256; ++b) {
      const auto byte = static_cast<std::uint8_t>(b);
      e4m3[b] = ref::e4m3fn_to_f32(byte);
      e8m0[b] = ref::e8m0_to_f32(byte);
      e2m1_pair[b] = {ref::e2m1_to_f32(byte & 0xF), ref::e2m1_to_f32(static_cast<std::uint8_t>(byte >> 4))};
    }
  }
};

const DecodeTables& decode_tables() {
  static const DecodeTables tables;
  return tables;
}

template <int W>
struct Simd {
  typedef float Vec __attribute__((vector_size(W * sizeof(float))));
  typedef std::uint32_t UVec __attribute__((vector_size(W * sizeof(std::uint32_t))));
  static constexpr bool kVectorDecode = W >= 8;
  static constexpr int kNr = 2 * W;                // weight rows (outputs) per panel: two vectors
  static constexpr std::int64_t kKc = 4096 / kNr;  // columns per chunk: a panel chunk is 16 KB of f32, in L1
  static_assert(kKc % 32 == 0 && 32 % (2 * W) == 0, "chunks and vectors must not split an FP4 scale block");

  // Zero-extends W bytes to the 32-bit lanes of a UVec. The one place with intrinsics: the
  // vector extensions have no widening load, and g++ 12 rejects __builtin_convertvector on these
  // dependent types while its byte shuffles without AVX512BW come out as byte inserts.
  HIPPO_LINEAR_TARGET static void widen(const std::uint8_t* src, UVec& out) {
#if defined(__x86_64__)
    if constexpr (W == 16) {
      const __m512i v = _mm512_maskz_cvtepu8_epi32(0xFFFF, _mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
      std::memcpy(&out, &v, sizeof out);
      return;
    } else if constexpr (W == 8) {
      const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(src)));
      std::memcpy(&out, &v, sizeof out);
      return;
    } else if constexpr (W == 4) {
      std::int32_t word;
      std::memcpy(&word, src, sizeof word);
      const __m128i zero = _mm_setzero_si128();
      const __m128i v = _mm_unpacklo_epi16(_mm_unpacklo_epi8(_mm_cvtsi32_si128(word), zero), zero);
      std::memcpy(&out, &v, sizeof out);
      return;
    }
#endif
    std::uint32_t lanes[W];
    for (int t = 0; t < W; ++t) lanes[t] = src[t];
    std::memcpy(&out, lanes, sizeof out);
  }

  // W BF16 values to f32 (exact: the bits move up 16), as ref::bf16_to_f32.
  HIPPO_LINEAR_TARGET static void bf16_vec(const std::uint16_t* src, float* out) {
    UVec v;
#if defined(__x86_64__)
    if constexpr (W == 16) {
      const __m512i wide = _mm512_maskz_cvtepu16_epi32(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src)));
      std::memcpy(&v, &wide, sizeof v);
    } else if constexpr (W == 8) {
      const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
      std::memcpy(&v, &wide, sizeof v);
    } else {
      const __m128i wide = _mm_unpacklo_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(src)), _mm_setzero_si128());
      std::memcpy(&v, &wide, sizeof v);
    }
#else
    std::uint32_t lanes[W];
    for (int t = 0; t < W; ++t) lanes[t] = src[t];
    std::memcpy(&v, lanes, sizeof v);
#endif
    const Vec value = __builtin_bit_cast(Vec, v << 16);
    std::memcpy(out, &value, sizeof value);
  }

  // Lane t of the result is lane H * W / 2 + t / 2 of v: one lane per FP4 nibble of half H.
  template <int H, int... T>
  HIPPO_LINEAR_TARGET static void pairs(const UVec& v, UVec& out, std::integer_sequence<int, T...>) {
    out = __builtin_shufflevector(v, v, (H * W / 2 + T / 2)...);
  }

  // Lane t of the result is lo[t] for even t, hi[t] for odd t.
  template <int... T>
  HIPPO_LINEAR_TARGET static void odd_from(const UVec& lo, const UVec& hi, UVec& out, std::integer_sequence<int, T...>) {
    out = __builtin_shufflevector(lo, hi, ((T & 1) ? W + T : T)...);
  }

  // W E4M3FN bytes to f32 times scale, bit-identical to ref::e4m3fn_to_f32(b) * scale: normal
  // codes move exponent and mantissa into place and rebias (+120); a subnormal m * 2^-9 is
  // (1 + m/8) * 2^-6 - 2^-6, exact; 0x7F is NaN; then the sign.
  HIPPO_LINEAR_TARGET static void fp8_vec(const std::uint8_t* src, float scale, float* out) {
    UVec v;
    widen(src, v);
    const UVec mag = v & 0x7Fu, placed = mag << 20;
    const Vec subnormal = __builtin_bit_cast(Vec, placed | (121u << 23)) - 0x1p-6f;
    UVec bits = mag >= 8u ? placed + (120u << 23) : __builtin_bit_cast(UVec, subnormal);
    bits = mag == 0x7Fu ? UVec{} + 0x7FC00000u : bits;
    bits |= (v & 0x80u) << 24;
    const Vec value = __builtin_bit_cast(Vec, bits) * scale;
    std::memcpy(out, &value, sizeof value);
  }

  // 2W E2M1 nibbles (W bytes, low nibble first) to f32 times scale, bit-identical to
  // ref::e2m1_to_f32(n) * scale: codes 2..7 are normal (exponent and mantissa bit into place,
  // rebias +126), 1 is 0.5, 0 is 0; then the sign.
  HIPPO_LINEAR_TARGET static void fp4_vecs(const std::uint8_t* src, float scale, float* out) {
    UVec bytes;
    widen(src, bytes);
    fp4_half<0>(bytes, scale, out);
    fp4_half<1>(bytes, scale, out + W);
  }

  template <int H>
  HIPPO_LINEAR_TARGET static void fp4_half(const UVec& bytes, float scale, float* out) {
    UVec v, nib;
    pairs<H>(bytes, v, std::make_integer_sequence<int, W>{});
    odd_from(v & 0xFu, v >> 4, nib, std::make_integer_sequence<int, W>{});
    const UVec code = nib & 7u;
    UVec bits = code >= 2u ? (code << 22) + (126u << 23) : (code == 1u ? UVec{} + 0x3F000000u : UVec{});
    bits |= (nib & 8u) << 28;
    const Vec value = __builtin_bit_cast(Vec, bits) * scale;
    std::memcpy(out, &value, sizeof value);
  }

  // Decodes W[row, c0:c1) into out[0, c1 - c0). For FP4, c0 and c1 are multiples of 32. Inlined:
  // for short rows (k = 32 in the tiny model's 129280-row head) a call per row costs as much as
  // the decode.
  HIPPO_LINEAR_TARGET __attribute__((always_inline)) static void decode_row(const WeightView& w, const DecodeTables& tables,
                                                                           std::int64_t row, std::int64_t c0,
                                                                           std::int64_t c1, float* out) {
    const std::int64_t k = w.cols;
    const auto* bytes = static_cast<const std::uint8_t*>(w.data);
    switch (w.format) {
      case WeightFormat::kF32:
        std::memcpy(out, static_cast<const float*>(w.data) + row * k + c0, (c1 - c0) * sizeof(float));
        break;
      case WeightFormat::kBF16: {
        const auto* src = static_cast<const std::uint16_t*>(w.data) + row * k + c0;
        std::int64_t c = 0;
        for (; c + W <= c1 - c0; c += W) bf16_vec(src + c, out + c);
        for (; c < c1 - c0; ++c) out[c] = ref::bf16_to_f32(src[c]);
        break;
      }
      case WeightFormat::kFp8Block: {
        const std::uint8_t* src = bytes + row * k;
        const std::uint8_t* scale_row = w.scales + (row / w.block) * ((k + w.block - 1) / w.block);
        for (std::int64_t c = c0, blk = c0 / w.block; c < c1; ++blk) {
          const std::int64_t end = std::min(c1, (blk + 1) * w.block);
          const float scale = tables.e8m0[scale_row[blk]];
          if constexpr (kVectorDecode)
            for (; c + W <= end; c += W) fp8_vec(src + c, scale, out + (c - c0));
          for (; c < end; ++c) out[c - c0] = tables.e4m3[src[c]] * scale;
        }
        break;
      }
      case WeightFormat::kFp4Row32: {
        const std::uint8_t* src = bytes + row * (k / 2);
        const std::uint8_t* scale_row = w.scales + row * (k / 32);
        for (std::int64_t c = c0; c < c1; c += 2 * W) {
          const float scale = tables.e8m0[scale_row[c / 32]];
          if constexpr (kVectorDecode) {
            fp4_vecs(src + c / 2, scale, out + (c - c0));
          } else {
            for (int j = 0; j < W; ++j) {
              const auto& pair = tables.e2m1_pair[src[c / 2 + j]];
              out[c - c0 + 2 * j] = pair[0] * scale;
              out[c - c0 + 2 * j + 1] = pair[1] * scale;
            }
          }
        }
        break;
      }
    }
  }

  // The W x W transpose in two kinds of step, each shuffle one instruction on SSE, AVX2 and
  // AVX-512 alike: a 4 x 4 transpose inside every 128-bit lane for each group of four rows
  // (_MM_TRANSPOSE4_PS: unpcklps/unpckhps, then movlhps/movhlps), then for each B = W/2 .. 4
  // rows r[i], r[i + B] swap their off-diagonal B x B blocks of whole 128-bit lanes.
  template <int... T>
  HIPPO_LINEAR_TARGET static void transpose4_in_lanes(Vec* r, std::integer_sequence<int, T...>) {
    // Lane t = 4L + e: unpack takes element L*4 + e/2 (+2 for hi) from a (e even) or b (e odd);
    // the second step takes pairs 0-1 (lo) or 2-3 (hi) of a then b.
    const Vec t0 = __builtin_shufflevector(r[0], r[1], (T / 4 * 4 + T % 4 / 2 + (T % 2) * W)...);
    const Vec t1 = __builtin_shufflevector(r[2], r[3], (T / 4 * 4 + T % 4 / 2 + (T % 2) * W)...);
    const Vec t2 = __builtin_shufflevector(r[0], r[1], (T / 4 * 4 + 2 + T % 4 / 2 + (T % 2) * W)...);
    const Vec t3 = __builtin_shufflevector(r[2], r[3], (T / 4 * 4 + 2 + T % 4 / 2 + (T % 2) * W)...);
    r[0] = __builtin_shufflevector(t0, t1, (T / 4 * 4 + T % 2 + (T % 4 / 2) * W)...);
    r[1] = __builtin_shufflevector(t0, t1, (T / 4 * 4 + 2 + T % 2 + (T % 4 / 2) * W)...);
    r[2] = __builtin_shufflevector(t2, t3, (T / 4 * 4 + T % 2 + (T % 4 / 2) * W)...);
    r[3] = __builtin_shufflevector(t2, t3, (T / 4 * 4 + 2 + T % 2 + (T % 4 / 2) * W)...);
  }

  template <int B, int... T>
  HIPPO_LINEAR_TARGET static void swap_blocks(Vec& a, Vec& b, std::integer_sequence<int, T...>) {
    const Vec lo = __builtin_shufflevector(a, b, ((T & B) ? W + T - B : T)...);
    const Vec hi = __builtin_shufflevector(a, b, ((T & B) ? W + T : T + B)...);
    a = lo;
    b = hi;
  }

  template <int B>
  HIPPO_LINEAR_TARGET static void swap_lane_blocks(Vec* r) {
    if constexpr (B >= 4) {
#pragma GCC unroll 16
      for (int i = 0; i < W; ++i)
        if ((i & B) == 0) swap_blocks<B>(r[i], r[i + B], std::make_integer_sequence<int, W>{});
      swap_lane_blocks<B / 2>(r);
    }
  }

  HIPPO_LINEAR_TARGET static void transpose(Vec* r) {
#pragma GCC unroll 16
    for (int g = 0; g < W; g += 4) transpose4_in_lanes(r + g, std::make_integer_sequence<int, W>{});
    swap_lane_blocks<W / 2>(r);
  }

  // Rows r0 .. r0+nr of W, columns c0 .. c0+kc, decoded (vectorised) into rows[j * stride + c]
  // for j < R; zero for rows >= nr and up to kc rounded up to W.
  HIPPO_LINEAR_TARGET static void decode_rows(const WeightView& w, std::int64_t r0, int R, int nr, std::int64_t c0,
                                              std::int64_t kc, float* rows, std::int64_t stride) {
    const std::int64_t kc_up = (kc + W - 1) / W * W;
    const DecodeTables& tables = decode_tables();
    for (int j = 0; j < R; ++j) {
      float* row = rows + j * stride;
      if (j < nr) {
        decode_row(w, tables, r0 + j, c0, c0 + kc, row);
        if (kc < kc_up) std::fill(row + kc, row + kc_up, 0.0f);
      } else {
        std::fill(row, row + kc_up, 0.0f);
      }
    }
  }

  // The same W columns of W rows, rows[j * stride + c] for j, c < W, transposed into r[c] (lane j).
  HIPPO_LINEAR_TARGET static void load_transposed(const float* rows, std::int64_t stride, Vec* r) {
#pragma GCC unroll 16
    for (int j = 0; j < W; ++j) std::memcpy(&r[j], rows + j * stride, sizeof(Vec));
    transpose(r);
  }

  // Accumulates MR rows of x (x[i * x_stride + c], c < kc) times a transposed panel chunk
  // (panel[c * kNr + j]) into y[i][j], j < nr; the accumulators start at zero for
  // the first chunk and from y after it.
  template <int MR>
  HIPPO_LINEAR_TARGET static void tile(const float* x, std::int64_t x_stride, const float* panel, std::int64_t kc,
                                       float* const* y, int nr, bool first) {
    Vec acc[MR][2];
    for (int i = 0; i < MR; ++i) load_acc(y[i], nr, first, acc[i]);
    for (std::int64_t c = 0; c < kc; ++c) {
      Vec w0, w1;
      std::memcpy(&w0, panel + c * kNr, sizeof(Vec));
      std::memcpy(&w1, panel + c * kNr + W, sizeof(Vec));
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) {
        const float xv = x[i * x_stride + c];
        acc[i][0] += xv * w0;
        acc[i][1] += xv * w1;
      }
    }
    for (int i = 0; i < MR; ++i) store_acc(acc[i], nr, y[i]);
  }

  // A whole panel goes straight between y and the registers; a partial one through a buffer.
  HIPPO_LINEAR_TARGET static void load_acc(const float* y, int nr, bool first, Vec* acc) {
    if (nr == kNr && !first) {
      std::memcpy(&acc[0], y, sizeof(Vec));
      std::memcpy(&acc[1], y + W, sizeof(Vec));
      return;
    }
    float buf[kNr] = {};
    if (!first) std::memcpy(buf, y, nr * sizeof(float));
    std::memcpy(&acc[0], buf, sizeof(Vec));
    std::memcpy(&acc[1], buf + W, sizeof(Vec));
  }

  HIPPO_LINEAR_TARGET static void store_acc(const Vec* acc, int nr, float* y) {
    if (nr == kNr) {
      std::memcpy(y, &acc[0], sizeof(Vec));
      std::memcpy(y + W, &acc[1], sizeof(Vec));
      return;
    }
    float buf[kNr];
    std::memcpy(buf, &acc[0], sizeof(Vec));
    std::memcpy(buf + W, &acc[1], sizeof(Vec));
    std::memcpy(y, buf, nr * sizeof(float));
  }

  // The last rows % MR rows, through the tile of that height (the same per-element sequence).
  template <int R>
  HIPPO_LINEAR_TARGET static void tail(int rows, const float* x, std::int64_t x_stride, const float* panel, std::int64_t kc,
                                       float* const* y, int nr, bool first) {
    if constexpr (R > 0) {
      if (rows == R) return tile<R>(x, x_stride, panel, kc, y, nr, first);
      tail<R - 1>(rows, x, x_stride, panel, kc, y, nr, first);
    }
  }

  // y[i, r0 .. r0 + nr) for rows i0 .. i1 of x: the panel chunk by chunk, each chunk decoded,
  // transposed into panel[] and run through all the rows.
  template <int MR>
  HIPPO_LINEAR_TARGET static void panel_rows(const float* x, const WeightView& w, std::int64_t r0, std::int64_t i0,
                                             std::int64_t i1, const LinearOut& y) {
    alignas(64) float rows[kNr * kKc];
    alignas(64) float panel[kKc * kNr];
    const std::int64_t k = w.cols, n = w.rows;
    const int nr = static_cast<int>(std::min<std::int64_t>(kNr, n - r0));
    for (std::int64_t c0 = 0; c0 < k; c0 += kKc) {
      const std::int64_t kc = std::min(kKc, k - c0);
      decode_rows(w, r0, kNr, nr, c0, kc, rows, kKc);
      for (std::int64_t c = 0; c < kc; c += W) {
        for (int g = 0; g < 2; ++g) {
          Vec r[W];
          load_transposed(rows + g * W * kKc + c, kKc, r);
          for (int t = 0; t < W; ++t) std::memcpy(panel + (c + t) * kNr + g * W, &r[t], sizeof(Vec));
        }
      }
      float* out[MR];
      std::int64_t i = i0;
      for (; i + MR <= i1; i += MR) {
        for (int j = 0; j < MR; ++j) out[j] = y.row(i + j, n) + r0;
        tile<MR>(x + i * k + c0, k, panel, kc, out, nr, c0 == 0);
      }
      for (int j = 0; j < i1 - i; ++j) out[j] = y.row(i + j, n) + r0;
      tail<MR - 1>(static_cast<int>(i1 - i), x + i * k + c0, k, panel, kc, out, nr, c0 == 0);
    }
  }

  // A single row of x (decode) has only two FMA chains per panel, each k long: latency-bound.
  // So it takes G panels at once (2G chains, kGroup * kNr = 64 weight rows in flight), and keeps
  // no panel: each W x W block of decoded rows is transposed in registers and consumed at once,
  // the chains taking turns block by block so that their latency hides under the shuffles. Every
  // output is still the same chain as in tile<1>.
  static constexpr int kGroup = kNr < 64 ? 64 / kNr : 1;
  static constexpr std::int64_t kRowChunk = 128;  // columns per chunk; 32 KB of decoded rows

  template <int G>
  HIPPO_LINEAR_TARGET static void panel_row(const float* x, const WeightView& w, std::int64_t r0, float* y) {  // y: row 0
    constexpr int kRows = G * kNr;
    alignas(64) float rows[kRows * kRowChunk];
    const std::int64_t k = w.cols;
    const int nr = static_cast<int>(std::min<std::int64_t>(kRows, w.rows - r0));
    Vec acc[2 * G] = {};
    for (std::int64_t c0 = 0; c0 < k; c0 += kRowChunk) {
      const std::int64_t kc = std::min(kRowChunk, k - c0);
      decode_rows(w, r0, kRows, nr, c0, kc, rows, kRowChunk);
      for (std::int64_t c = 0; c < kc; c += W) {
        const int lanes = static_cast<int>(std::min<std::int64_t>(W, kc - c));
#pragma GCC unroll 16
        for (int g = 0; g < 2 * G; ++g) {
          Vec r[W];
          load_transposed(rows + g * W * kRowChunk + c, kRowChunk, r);
          if (lanes == W) {
#pragma GCC unroll 16
            for (int t = 0; t < W; ++t) acc[g] += x[c0 + c + t] * r[t];
          } else {
            for (int t = 0; t < lanes; ++t) acc[g] += x[c0 + c + t] * r[t];
          }
        }
      }
    }
    for (int q = 0; q < G && q * kNr < nr; ++q) store_acc(acc + 2 * q, std::min(kNr, nr - q * kNr), y + r0 + q * kNr);
  }
};

// W lanes per vector, MR rows of x per tile.
template <int W, int MR>
void linear_impl(const float* x, std::int64_t m, const WeightView& w, const LinearOut& y, ThreadPool& pool) {
  using S = Simd<W>;
  const std::int64_t n_panels = (w.rows + S::kNr - 1) / S::kNr;
  // Few panels (small n) and many rows of x: split the rows too, in blocks of at least 32 rows
  // (so a panel decoded once per block costs little). Tasks run panel-major, so a thread's
  // contiguous range of tasks covers, per panel, one contiguous range of rows.
  const std::int64_t threads = pool.size();
  std::int64_t row_blocks = 1;
  if (threads > 1 && n_panels < 2 * threads)
    row_blocks = std::max<std::int64_t>(1, std::min((2 * threads + n_panels - 1) / n_panels, m / 32));
  const std::int64_t block_rows = ((m + row_blocks - 1) / row_blocks + MR - 1) / MR * MR;
  pool.parallel_for(n_panels * row_blocks, [&](std::int64_t t_begin, std::int64_t t_end) {
    if (m == 1) {  // row_blocks is 1: tasks are panels
      std::int64_t p = t_begin;
      float* const y0 = y.row(0, w.rows);
      for (; p + S::kGroup <= t_end; p += S::kGroup) S::template panel_row<S::kGroup>(x, w, p * S::kNr, y0);
      for (; p < t_end; ++p) S::template panel_row<1>(x, w, p * S::kNr, y0);
      return;
    }
    for (std::int64_t p = t_begin / row_blocks; p * row_blocks < t_end; ++p) {
      const std::int64_t b_begin = std::max(t_begin, p * row_blocks) - p * row_blocks;
      const std::int64_t b_end = std::min(t_end, (p + 1) * row_blocks) - p * row_blocks;
      const std::int64_t i0 = std::min(m, b_begin * block_rows), i1 = std::min(m, b_end * block_rows);
      if (i0 < i1) S::template panel_rows<MR>(x, w, p * S::kNr, i0, i1, y);
    }
  });
}

}  // namespace
}  // namespace hippo::kernels::cpu
