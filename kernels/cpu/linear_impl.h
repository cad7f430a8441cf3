// The body of the CPU linear layer, written once with GCC vector extensions and compiled once
// per instruction set: linear_avx512vbmi.cpp, linear_avx512.cpp, linear_avx2.cpp and
// linear_generic.cpp each define HIPPO_LINEAR_TARGET (a target attribute, or nothing) before
// including this file, and compile with -ffp-contract=fast so that a*b+c becomes one FMA. The ISA
// goes on our functions only, never on the whole file: a -mavx512f file would also compile the
// std:: templates it uses for AVX-512, and the linker could hand those copies to every caller.
// Everything here has internal linkage.
//
// The reduction order (linear.h): 16 lane chains per output, lane l summing x[c] * W[r, c] for
// c = l, l + 16, l + 32, ... in order (one FMA each, from 0; a last step past k adds 0 * 0), then
// one fixed tree over the 16 lanes. Both kernels below keep it, so a row's result does not depend
// on which of them ran, nor on W (AVX2 and AVX-512 give the same bits):
//   - decode (m <= kSmallM = 8, and up to decode_passes_max rows in passes of at most 8): dot
//     products straight from the weight bytes. Each step decodes 16 columns of NR rows into
//     registers (exact: the values of kernels/ref; FP8: the values times
//     2^-8, against x scaled per block by 2^8 times the scale, the same products) and adds them
//     times the same 16 columns of every row of x, lane l of each vector being lane l's chain. No
//     transposes, no buffers: the weights stream from memory once, and about 8 accumulator
//     vectors hide the FMA latency. The tree: fold4, then reduce4 across four outputs. FP4 in
//     lane order (weight_view.h; the CPU backend's copies on AVX-512) holds lane l's codes for 8
//     steps in one 32-bit word, so that a step costs a shift and a permute per vector, no
//     broadcast. AVX2 reads packed FP4 a scale block at a time through byte lookups of each
//     code's BF16 bytes (fp4_block), whose lanes come out as a 4 x 4 transpose of each step's
//     columns: x is read so permuted, and the lane sums are put back before the tree. Where a
//     step's x values feed fewer weight rows than there are rows of x and those rows outgrow the
//     L1 (AVX2 and the generic path from three rows of x on, packed FP4 from four), a pass runs
//     over 16 weight rows in column blocks, carrying the lane chains from block to block
//     (dot_groups): the chains and the tree stay the same.
//     AVX-512 with VBMI (linear_avx512vbmi.cpp) reads FP8 64 columns at a time through byte
//     permutes of each code's BF16 bytes (fp8_group) for one or two rows of x; AVX2, and AVX-512
//     without VBMI for one or two rows, read the FP8 blocks the view does not mark as special
//     through one 16-entry byte table (fp8_tile); AVX-512 past two rows straight into fp32 bits
//     (fp8_normal_bits), as do the prefill panels on AVX-512 without VBMI.
//   - prefill: an outer-product GEMM over decoded panels, one lane at a time. x is repacked once
//     per call (pack_x) so that a tile's values for one lane are contiguous; a panel of kNr = 2W
//     weight rows is decoded kKc columns at a time and transposed lane-major (128 KB at most, in
//     L2: long chunks and up to kMc rows of x per decoded panel keep the decoding, and the lane
//     sums' round trips between chunks, small next to the FMAs); each MR-row tile then runs the
//     panel's 16 lanes one after another, MR x 2 accumulator vectors per lane, each lane's chain
//     the same as in the decode kernel. The 16 lane sums per output wait in a per-thread buffer
//     between chunks and meet in the same tree (reduce_lanes, element-wise).
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
#include <bit>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace hippo::kernels::cpu {
namespace {

// The largest E8M0 scale byte (2^119) for which 2^8 * scale is finite: fp8_vec's fast path.
constexpr int kFp8MaxFastScale = 246;

// Scalar decoders: the E8M0 scales, the tails, and FP8/FP4 altogether for 4-lane vectors (SSE2
// lacks the widening loads and permutes that the vector decoders below are made of).
struct DecodeTables {
  std::array<float, 256> e4m3, e8m0;
  std::array<float, 256> fp8_mult;  // 2^8 times the E8M0 scale where that is finite, else 0 (see fp8_vec)
  std::array<float, 256> fp8_inv;   // 1 / fp8_mult where fp8_mult is not 0 (exact: a power of two)
  std::array<float, 16> e2m1;
  DecodeTables() {
    for (int b = 0; b < 256; ++b) {
      const auto byte = static_cast<std::uint8_t>(b);
      e4m3[b] = ref::e4m3fn_to_f32(byte);
      e8m0[b] = ref::e8m0_to_f32(byte);
      fp8_mult[b] = b <= kFp8MaxFastScale ? e8m0[b] * 0x1p8f : 0.0f;
      fp8_inv[b] = b <= kFp8MaxFastScale ? 1.0f / fp8_mult[b] : 0.0f;
      if (b < 16) e2m1[b] = ref::e2m1_to_f32(byte);
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
  typedef std::int32_t IVec __attribute__((vector_size(W * sizeof(std::int32_t))));
  typedef float Vec4 __attribute__((vector_size(4 * sizeof(float))));
  static constexpr bool kVectorDecode = W >= 8;
  static constexpr int kV = 16 / W;  // vectors per 16 lanes: a step of 16 columns is Vec[kV]
  static_assert(32 % (2 * W) == 0, "vectors must not split an FP4 scale block");

  HIPPO_LINEAR_TARGET __attribute__((always_inline)) static Vec load(const float* p) {
    Vec v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }

  HIPPO_LINEAR_TARGET __attribute__((always_inline)) static void store(float* p, Vec v) { std::memcpy(p, &v, sizeof v); }

  // The vector decoders. Intrinsics only where the vector extensions have no equivalent (widening
  // loads, variable permutes); each is bit-identical to kernels/ref's scalar decoder times the
  // E8M0 scale, which the tests check for every code.

  // W BF16 values to f32: the bits move up 16.
  HIPPO_LINEAR_TARGET __attribute__((always_inline)) static Vec bf16_vec(const std::uint16_t* src) {
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
    return __builtin_bit_cast(Vec, v << 16);
  }

  // W E4M3FN bytes times an E8M0 scale, for codes that are not NaN (0x7F, 0xFF) and scales of at
  // most 2^119 (the callers check both). fp8_bits gives the E4M3 values times 2^-8, so one multiply
  // by mult = 2^8 times the scale (DecodeTables::fp8_mult), rounded once as ref's product is,
  // finishes the job.
  HIPPO_LINEAR_TARGET __attribute__((always_inline)) static Vec fp8_vec(const std::uint8_t* src, float mult) {
    return fp8_bits(src) * mult;
  }

  // The first half of fp8_vec: the E4M3 values times 2^-8 (NaN codes become numbers). The decode
  // kernel multiplies them with x scaled by 2^8 times the block's scale (scale_x_fp8): the product
  // is exactly x times the weight, one multiply fewer per vector. The byte's sign, exponent and
  // mantissa moved to where an fp16 keeps them are the E4M3 value times 2^-8, subnormals included
  // (fp16's exponent bias is 15, E4M3's 7), and the hardware's fp16 conversion makes that an fp32
  // exactly. No fp32 here is subnormal: Intel cores take a microcode assist for each subnormal an
  // FMA reads, which made this kernel 12 times slower with the bits placed straight into an fp32.
  HIPPO_LINEAR_TARGET __attribute__((always_inline)) static Vec fp8_bits(const std::uint8_t* src) {
#if defined(__x86_64__)
    if constexpr (W == 16) {
      const __m256i h = _mm256_and_si256(
          _mm256_slli_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src))), 7),
          _mm256_set1_epi16(static_cast<short>(0xBF80)));
      const __m512 f = _mm512_maskz_cvtph_ps(0xFFFF, h);  // (maskz: g++ 12 warns on the unmasked form)
      Vec v;
      std::memcpy(&v, &f, sizeof v);
      return v;
    } else if constexpr (W == 8) {
      const __m128i h = _mm_and_si128(_mm_slli_epi16(_mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(src))), 7),
                                      _mm_set1_epi16(static_cast<short>(0xBF80)));
      const __m256 f = _mm256_cvtph_ps(h);
      Vec v;
      std::memcpy(&v, &f, sizeof v);
      return v;
    } else
#endif
    {
      float lanes[W];
      for (int t = 0; t < W; ++t) {
        const float value = ref::e4m3fn_to_f32(src[t]);
        lanes[t] = std::isnan(value) ? 0.0f : value * 0x1p-8f;
      }
      Vec v;
      std::memcpy(&v, lanes, sizeof v);
      return v;
    }
  }

  // AVX2: fp8_bits of 16 bytes into two vectors, widened and shifted as one 256-bit vector (one
  // conversion from fp16 per half), where two calls of fp8_bits widen and shift 8 bytes each.
  template <class V>
  HIPPO_LINEAR_TARGET __attribute__((always_inline)) static void fp8_bits16(const std::uint8_t* src, V (&out)[kV]) {
#if defined(__x86_64__)
    if constexpr (W == 8) {
      const __m256i h = _mm256_and_si256(
          _mm256_slli_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src))), 7),
          _mm256_set1_epi16(static_cast<short>(0xBF80)));
      const __m256 f[2] = {_mm256_cvtph_ps(_mm256_castsi256_si128(h)), _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1))};
      std::memcpy(&out[0], &f[0], sizeof f[0]);
      std::memcpy(&out[1], &f[1], sizeof f[1]);
    }
#endif
  }

  // fp8_bits for W codes with exponent bits 1..15 (none zero, subnormal or NaN: a block that
  // fp8_special_blocks leaves unmarked), straight into fp32 bits without the fp16 conversion: the
  // code sign-extended and shifted so that its exponent and mantissa sit at fp32's bits 26..20,
  // the sign at 31, then bits 30..27 set to 0111 (an exponent of 112 + e: E4M3's 2^(e - 7) times
  // 2^-8). Three instructions where fp8_bits takes four and the NaN check three more.
#if defined(__x86_64__)
  HIPPO_LINEAR_TARGET __attribute__((always_inline)) static Vec fp8_normal_bits(const std::uint8_t* src, __m512i keep,
                                                                               __m512i exponent_top) {
    // (maskz forms: g++ 12 warns on the unmasked ones)
    const __m512i codes = _mm512_maskz_cvtepi8_epi32(0xFFFF, _mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
    const __m512i bits = _mm512_maskz_ternarylogic_epi32(0xFFFF, _mm512_maskz_slli_epi32(0xFFFF, codes, 20), keep,
                                                         exponent_top, 0xEA);  // (a & b) | c
    Vec v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  }
#endif

  // Whether any of n FP8 block marks has a bit of mask; the first marked block from b on (n if none).
  // Eight marks at a time: a decode group scans its row block's marks, one per 32 columns.
  static bool any_fp8_mark(const std::uint8_t* marks, std::int64_t n, std::uint8_t mask) {
    std::uint64_t any = 0, word = 0;
    std::int64_t b = 0;
    for (; b + 8 <= n; b += 8) {
      std::memcpy(&word, marks + b, 8);
      any |= word;
    }
    for (; b < n; ++b) any |= marks[b];
    return (any & (0x0101010101010101ull * mask)) != 0;
  }

  static std::int64_t next_fp8_mark(const std::uint8_t* marks, std::int64_t b, std::int64_t n) {
    for (std::uint64_t word = 0; b + 8 <= n; b += 8) {
      std::memcpy(&word, marks + b, 8);
      if (word != 0) return b + __builtin_ctzll(word) / 8;  // (little-endian: the lowest byte first)
    }
    while (b < n && marks[b] == 0) ++b;
    return b;
  }

  // 16 bytes at a time: lanes 0xFF where a byte is an E4M3 NaN code.
  typedef std::uint8_t Bytes16 __attribute__((vector_size(16)));

  __attribute__((always_inline)) static Bytes16 fp8_nan_lanes(const std::uint8_t* src) {
    Bytes16 b;
    std::memcpy(&b, src, sizeof b);
    return (b & 0x7F) == 0x7F;
  }

  __attribute__((always_inline)) static bool any_lane(Bytes16 b) {
    std::uint64_t half[2];
    std::memcpy(half, &b, sizeof half);
    return (half[0] | half[1]) != 0;
  }

  // For each E8M0 scale byte, the table fp4_vec permutes: 16 lanes hold all 16 codes times the
  // scale; 8 lanes hold the magnitudes (code & 7) times the scale, with the code's bits 0-2
  // pre-XORed into bits 28-30 so that fp4_vec's one XOR with (code << 28) both cancels them and
  // sets the sign. Exact: the scale is a power of two.
  struct Fp4Tables {
    alignas(64) float entries[256][W];
    Fp4Tables() {
      for (int b = 0; b < 256; ++b) {
        const float scale = ref::e8m0_to_f32(static_cast<std::uint8_t>(b));
        for (int code = 0; code < W; ++code) {
          const float value = ref::e2m1_to_f32(static_cast<std::uint8_t>(W == 16 ? code : code & 7)) * scale;
          std::uint32_t bits = __builtin_bit_cast(std::uint32_t, value);
          if (W == 8) bits ^= static_cast<std::uint32_t>(code) << 28;
          entries[b][code] = __builtin_bit_cast(float, bits);
        }
      }
    }
  };

  static const Fp4Tables& fp4_tables() {
    static const Fp4Tables tables;
    return tables;
  }

  HIPPO_LINEAR_TARGET __attribute__((always_inline)) static Vec fp4_table(const Fp4Tables& tables, std::uint8_t scale_byte) {
    return load(tables.entries[scale_byte]);
  }

  // W E2M1 codes, one in the low 4 bits of each lane (higher bits ignored), through the table of
  // fp4_table: one permute (AVX2: of the magnitudes, then the sign's XOR).
  HIPPO_LINEAR_TARGET __attribute__((always_inline)) static Vec fp4_lookup(UVec codes, Vec table) {
#if defined(__x86_64__)
    if constexpr (W == 16) {
      __m512i c;
      __m512 t;
      std::memcpy(&c, &codes, sizeof c);
      std::memcpy(&t, &table, sizeof t);
      const __m512 value = _mm512_maskz_permutexvar_ps(0xFFFF, c, t);
      Vec out;
      std::memcpy(&out, &value, sizeof out);
      return out;
    } else if constexpr (W == 8) {
      __m256i c;
      __m256 t;
      std::memcpy(&c, &codes, sizeof c);
      std::memcpy(&t, &table, sizeof t);
      const __m256 magnitude = _mm256_permutevar8x32_ps(t, c);  // the low 3 bits index
      const __m256 value = _mm256_xor_ps(magnitude, _mm256_castsi256_ps(_mm256_slli_epi32(c, 28)));
      Vec out;
      std::memcpy(&out, &value, sizeof out);
      return out;
    }
#endif
    float entries[W], lanes[W];  // the same lookup one lane at a time
    std::uint32_t code_lanes[W];
    std::memcpy(entries, &table, sizeof entries);
    std::memcpy(code_lanes, &codes, sizeof code_lanes);
    for (int t = 0; t < W; ++t) {
      const std::uint32_t code = code_lanes[t] & 0xFu;
      std::uint32_t bits = __builtin_bit_cast(std::uint32_t, entries[code % W]);
      if (W == 8) bits ^= code << 28;
      lanes[t] = __builtin_bit_cast(float, bits);
    }
    return load(lanes);
  }

  // W packed E2M1 nibbles (W / 2 bytes, low nibble first) through the table of fp4_table: each
  // lane shifts its nibble down from a broadcast word.
  HIPPO_LINEAR_TARGET __attribute__((always_inline)) static Vec fp4_vec(const std::uint8_t* src, Vec table) {
    UVec codes;
#if defined(__x86_64__)
    if constexpr (W == 16) {
      const __m512i words = _mm512_maskz_permutexvar_epi32(0xFFFF, _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
                                                     _mm512_zextsi128_si512(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(src))));
      const __m512i nibbles = _mm512_maskz_srlv_epi32(0xFFFF, words, _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28));
      std::memcpy(&codes, &nibbles, sizeof codes);
      return fp4_lookup(codes, table);
    } else if constexpr (W == 8) {
      std::int32_t word;
      std::memcpy(&word, src, sizeof word);
      const __m256i nibbles = _mm256_srlv_epi32(_mm256_set1_epi32(word), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
      std::memcpy(&codes, &nibbles, sizeof codes);
      return fp4_lookup(codes, table);
    }
#endif
    std::uint32_t code_lanes[W];
    for (int t = 0; t < W; ++t) code_lanes[t] = static_cast<std::uint32_t>(src[t / 2] >> (4 * (t & 1)));
    std::memcpy(&codes, code_lanes, sizeof codes);
    return fp4_lookup(codes, table);
  }

  // The 16 lanes' words of a lane-ordered 128-column chunk (weight_view.h's fp4_code): step s's
  // codes are words[q] >> 4 s.
  HIPPO_LINEAR_TARGET __attribute__((always_inline)) static void fp4_lane_words(const std::uint8_t* chunk, UVec (&words)[kV]) {
    std::memcpy(words, chunk, 64);
  }

  // AVX2's decode of packed FP4 (fp4_block below): for each E8M0 scale byte, the two bytes of the
  // BF16 pattern of every code times the scale. Every such product is a BF16 exactly (E2M1 has one
  // mantissa bit; even the fp32 subnormals, 2^-128 at the least, and inf and NaN keep their low 16
  // bits zero), so the two bytes and 16 zero bits are the fp32 value of kernels/ref.
  struct Fp4ByteTables {
    alignas(16) std::uint8_t lo[256][16];
    alignas(16) std::uint8_t hi[256][16];
    Fp4ByteTables() {
      for (int b = 0; b < 256; ++b)
        for (int code = 0; code < 16; ++code) {
          const float value =
              ref::e2m1_to_f32(static_cast<std::uint8_t>(code)) * ref::e8m0_to_f32(static_cast<std::uint8_t>(b));
          const auto bits = __builtin_bit_cast(std::uint32_t, value);
          lo[b][code] = static_cast<std::uint8_t>(bits >> 16);
          hi[b][code] = static_cast<std::uint8_t>(bits >> 24);
        }
    }
  };

  static const Fp4ByteTables& fp4_byte_tables() {
    static const Fp4ByteTables tables;
    return tables;
  }

  // Whether the decode reads packed FP4 with fp4_block: on AVX2, where it costs about 2.5 operations
  // per 8 values against fp4_vec's 4 (a permute reads only 8 entries there, so the sign takes a
  // shift and an XOR). The byte lookup lands the values in the lane order kFp4BlockLanes.
  static constexpr bool kFp4ByteDecode =
#if defined(__x86_64__)
      W == 8;
#else
      false;
#endif

  // Lane j of a 16-column step as fp4_block delivers it holds column 4 (j % 4) + j / 4 of the step
  // (a 4 x 4 transpose, its own inverse): the decode multiplies it by x permuted so (decode_format),
  // and the lane sums are put back in chain order before the tree (fp4_block_chains).
  static constexpr int kFp4BlockLanes[16] = {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15};

  // The decode kernels that read packed FP4 with fp4_block (dot_rows), against x so permuted (xs).
  template <WeightFormat F, bool Scalar, bool Lanes>
  static constexpr bool kFp4Blocks = F == WeightFormat::kFp4Row32 && !Scalar && !Lanes && kFp4ByteDecode;

  // A 16-column step's lane sums from kFp4BlockLanes order back to chain order (the same transpose).
  // (A template: g++ 12 drops the vector attribute of Vec from an array parameter, as for fold4.)
  template <class V>
  HIPPO_LINEAR_TARGET __attribute__((always_inline)) static void fp4_block_chains(V (&sums)[kV]) {
    static_assert(W == 8 && kFp4ByteDecode, "fp4_block is AVX2's");
    if constexpr (W == 8) {
      const V a = sums[0], b = sums[1];
      sums[0] = __builtin_shufflevector(a, b, 0, 4, 8, 12, 1, 5, 9, 13);
      sums[1] = __builtin_shufflevector(a, b, 2, 6, 10, 14, 3, 7, 11, 15);
    }
  }

  // One packed FP4 scale block (32 columns, 16 bytes) through the byte tables of its scale into
  // f[0..4): f[0], f[1] the 16 columns of its first step in kFp4BlockLanes order, f[2], f[3] its
  // second. Both halves of a vector take the same 16 bytes, the low nibbles in one, the high in the
  // other; two byte lookups give each code's two BF16 bytes, interleaved into 16-bit words, and each
  // 32-bit lane keeps one word in its high half.
  HIPPO_LINEAR_TARGET __attribute__((always_inline)) static void fp4_block(const std::uint8_t* src,
                                                                          const Fp4ByteTables& tables, std::uint8_t scale,
                                                                          Vec (&f)[4]) {
    static_assert(W == 8 && kFp4ByteDecode, "fp4_block is AVX2's");
#if defined(__x86_64__)
    if constexpr (W == 8) {
      const __m256i bytes = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
      const __m256i codes =
          _mm256_and_si256(_mm256_srlv_epi32(bytes, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)), _mm256_set1_epi8(0x0F));
      const __m256i lo = _mm256_shuffle_epi8(
          _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(tables.lo[scale]))), codes);
      const __m256i hi = _mm256_shuffle_epi8(
          _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(tables.hi[scale]))), codes);
      const __m256i words[2] = {_mm256_unpacklo_epi8(lo, hi), _mm256_unpackhi_epi8(lo, hi)};
      const __m256i high_word = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
      for (int h = 0; h < 2; ++h) {
        const __m256i even = _mm256_slli_epi32(words[h], 16), odd = _mm256_and_si256(words[h], high_word);
        std::memcpy(&f[2 * h], &even, sizeof even);
        std::memcpy(&f[2 * h + 1], &odd, sizeof odd);
      }
    }
#endif
  }

  // AVX-512 VBMI's FP8 decode (fp8_group): fp8_bits' value of every code (E4M3 times 2^-8) is a
  // BF16 exactly (three mantissa bits; 2^-17 at the least, a normal number), so two permutes of
  // 128-byte tables, by the code's low 7 bits, give its two BF16 bytes, and the code's bit 7 is the
  // sign. perm first moves each step's 16 codes to where the byte interleave and the 16-bit shift
  // after it deliver them in lane order: byte 16 L + 2 d of the permuted 64 holds column 4 L + d of
  // the first step, byte 16 L + 2 d + 1 the second step's, 16 L + 8 + 2 d the third's, 16 L + 9 + 2 d
  // the fourth's (L the 16-byte lane, d < 4).
  struct Fp8ByteTables {
    alignas(64) std::uint8_t perm[64];
    alignas(64) std::uint8_t lo[128];
    alignas(64) std::uint8_t hi[128];
    Fp8ByteTables() {
      for (int lane = 0; lane < 4; ++lane)
        for (int d = 0; d < 4; ++d)
          for (int step = 0; step < 4; ++step)
            perm[16 * lane + 8 * (step / 2) + 2 * d + step % 2] = static_cast<std::uint8_t>(16 * step + 4 * lane + d);
      for (int code = 0; code < 128; ++code) {
        const float value = ref::e4m3fn_to_f32(static_cast<std::uint8_t>(code)) * 0x1p-8f;
        const auto bits = __builtin_bit_cast(std::uint32_t, value);
        lo[code] = static_cast<std::uint8_t>(bits >> 16);
        hi[code] = static_cast<std::uint8_t>(bits >> 24);
      }
    }
  };

  static const Fp8ByteTables& fp8_byte_tables() {
    static const Fp8ByteTables tables;
    return tables;
  }

  static constexpr bool kFp8ByteDecode =
#if defined(__x86_64__) && defined(HIPPO_LINEAR_VBMI)
      W == 16;
#else
      false;
#endif

  // 64 FP8 codes (4 steps of 16 columns) into f[0..4), each step's values as fp8_bits gives them, in
  // lane order; nan gets a bit for each E4M3 NaN code (0x7F, 0xFF), whose rows the caller redoes.
  HIPPO_LINEAR_TARGET __attribute__((always_inline)) static void fp8_group(const std::uint8_t* src,
                                                                          const Fp8ByteTables& t, std::uint64_t& nan,
                                                                          Vec (&f)[4]) {
    static_assert(W == 16 && kFp8ByteDecode, "fp8_group is AVX-512 VBMI's");
#if defined(__x86_64__) && defined(HIPPO_LINEAR_VBMI)
    if constexpr (W == 16) {
      const __m512i raw = _mm512_loadu_si512(src);
      const __m512i low7 = _mm512_set1_epi8(0x7F);
      nan |= _mm512_cmpeq_epi8_mask(_mm512_and_si512(raw, low7), low7);
      // (maskz forms: g++ 12 warns on the unmasked ones)
      constexpr __mmask64 all = ~__mmask64{0};
      const __m512i codes = _mm512_maskz_permutexvar_epi8(all, _mm512_load_si512(t.perm), raw);
      const __m512i lo =
          _mm512_maskz_permutex2var_epi8(all, _mm512_load_si512(t.lo), codes, _mm512_load_si512(t.lo + 64));
      const __m512i hi = _mm512_ternarylogic_epi32(  // the magnitude's high byte | (code & 0x80)
          _mm512_maskz_permutex2var_epi8(all, _mm512_load_si512(t.hi), codes, _mm512_load_si512(t.hi + 64)), codes,
          _mm512_set1_epi8(static_cast<char>(0x80)), 0xF8);
      const __m512i words[2] = {_mm512_unpacklo_epi8(lo, hi), _mm512_unpackhi_epi8(lo, hi)};
      const __m512i high_word = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
      for (int h = 0; h < 2; ++h) {
        const __m512i even = _mm512_maskz_slli_epi32(0xFFFF, words[h], 16), odd = _mm512_and_si512(words[h], high_word);
        std::memcpy(&f[2 * h], &even, sizeof even);
        std::memcpy(&f[2 * h + 1], &odd, sizeof odd);
      }
    }
#endif
  }

  // The FP8 decode through one 16-entry byte table (fp8_tile; AVX2, and AVX-512 without VBMI for
  // one or two rows of x): fp8_bits' value of a code with exponent bits 1..15 (E4M3 times 2^-8; its fp32
  // exponent is 112 + e) is a BF16 whose high byte is the sign, 0x38 and e >> 1, a function of the
  // code's high nibble, and whose low byte is the code's low nibble (e's bit 0 and the mantissa)
  // times 16. Exponent 0 (zero, subnormals) and the NaN codes come out wrong: the view's
  // fp8_special_blocks marks the scale blocks that hold any, whose columns go through decode16.
  static constexpr bool kFp8TileDecode =
#if defined(__x86_64__)
      W == 8 || W == 16;
#else
      false;
#endif
  // The decode's constants, loaded from memory (a broadcast from an immediate takes three
  // instructions where the registers run short). table: the high byte per high nibble; order:
  // within each 16-byte lane, the byte shuffle that (with a qword permute on AVX2, after a dword
  // permute on AVX-512) puts the codes of one vector at even bytes and of the next at odd ones,
  // which the byte interleave and the 16-bit shift then deliver in column order.
  struct Fp8TileConstants {
    alignas(64) std::uint8_t table[64];
    alignas(64) std::uint8_t order[64];
    alignas(64) std::uint8_t low_nibble[64];
    alignas(64) std::uint32_t high_word[16];
    Fp8TileConstants() {
      constexpr std::uint8_t kOrder[16] = {0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15};
      constexpr std::uint8_t kOrder512[16] = {0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15};
      for (int b = 0; b < 64; ++b) {
        const int nibble = b % 16;
        table[b] = static_cast<std::uint8_t>((nibble & 8) << 4 | 0x38 | (nibble & 7));
        order[b] = W == 8 ? kOrder[nibble] : kOrder512[nibble];
        low_nibble[b] = 0x0F;
      }
      for (std::uint32_t& word : high_word) word = 0xFFFF0000u;
    }
  };

  static const Fp8TileConstants& fp8_tile_constants() {
    static const Fp8TileConstants constants;
    return constants;
  }

  // 4 W FP8 codes (columns c .. c + 4 W, none special) into f[0..4), f[v] the values fp8_bits gives
  // for columns c + v W ..: the codes placed (fp8_tile_constants' order), one table lookup by the
  // high nibble and a shift of the low one give their BF16 bytes, interleaved into 16-bit words,
  // and each 32-bit lane keeps one word in its high half.
  HIPPO_LINEAR_TARGET __attribute__((always_inline)) static void fp8_tile(const std::uint8_t* src,
                                                                         const Fp8TileConstants& constants, Vec (&f)[4]) {
    static_assert(kFp8TileDecode, "fp8_tile is AVX2's and AVX-512's");
#if defined(__x86_64__)
    if constexpr (W == 8) {
      // AVX2: lane 0 ends with columns 0-3 and 8-11 of both 16-column steps, lane 1 with 4-7 and 12-15.
      const __m256i placed = _mm256_permute4x64_epi64(
          _mm256_shuffle_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src)),
                              _mm256_load_si256(reinterpret_cast<const __m256i*>(constants.order))),
          0xD8);
      const __m256i low_nibble = _mm256_load_si256(reinterpret_cast<const __m256i*>(constants.low_nibble));
      const __m256i hi = _mm256_shuffle_epi8(_mm256_load_si256(reinterpret_cast<const __m256i*>(constants.table)),
                                             _mm256_and_si256(_mm256_srli_epi16(placed, 4), low_nibble));
      const __m256i lo = _mm256_slli_epi16(_mm256_and_si256(placed, low_nibble), 4);
      const __m256i words[2] = {_mm256_unpacklo_epi8(lo, hi), _mm256_unpackhi_epi8(lo, hi)};
      const __m256i high_word = _mm256_load_si256(reinterpret_cast<const __m256i*>(constants.high_word));
      for (int h = 0; h < 2; ++h) {
        const __m256i even = _mm256_slli_epi32(words[h], 16), odd = _mm256_and_si256(words[h], high_word);
        std::memcpy(&f[2 * h], &even, sizeof even);
        std::memcpy(&f[2 * h + 1], &odd, sizeof odd);
      }
    } else if constexpr (W == 16) {
      // AVX-512: lane L gathers columns 4 L .. 4 L + 3 of each of the four steps.
      // (maskz forms: g++ 12 warns on the unmasked ones)
      constexpr __mmask64 all = ~__mmask64{0};
      const __m512i dwords = _mm512_maskz_permutexvar_epi32(
          0xFFFF, _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), _mm512_loadu_si512(src));
      const __m512i placed = _mm512_maskz_shuffle_epi8(all, dwords, _mm512_load_si512(constants.order));
      const __m512i low_nibble = _mm512_load_si512(constants.low_nibble);
      const __m512i hi = _mm512_maskz_shuffle_epi8(
          all, _mm512_load_si512(constants.table), _mm512_and_si512(_mm512_maskz_srli_epi16(0xFFFFFFFF, placed, 4), low_nibble));
      const __m512i lo = _mm512_maskz_slli_epi16(0xFFFFFFFF, _mm512_and_si512(placed, low_nibble), 4);
      const __m512i words[2] = {_mm512_unpacklo_epi8(lo, hi), _mm512_unpackhi_epi8(lo, hi)};
      const __m512i high_word = _mm512_load_si512(constants.high_word);
      for (int h = 0; h < 2; ++h) {
        const __m512i even = _mm512_maskz_slli_epi32(0xFFFF, words[h], 16), odd = _mm512_and_si512(words[h], high_word);
        std::memcpy(&f[2 * h], &even, sizeof even);
        std::memcpy(&f[2 * h + 1], &odd, sizeof odd);
      }
    }
#endif
  }

  // W[row, c0 .. c1) into out[0, c1 - c0), one value at a time: tails and odd FP8 blocks.
  static void decode_scalar(const WeightView& w, const DecodeTables& tables, std::int64_t row, std::int64_t c0,
                            std::int64_t c1, float* out) {
    const std::int64_t k = w.cols;
    const auto* bytes = static_cast<const std::uint8_t*>(w.data);
    for (std::int64_t c = c0; c < c1; ++c) {
      float v = 0;
      switch (w.format) {
        case WeightFormat::kF32: v = static_cast<const float*>(w.data)[row * k + c]; break;
        case WeightFormat::kBF16: v = ref::bf16_to_f32(static_cast<const std::uint16_t*>(w.data)[row * k + c]); break;
        case WeightFormat::kFp8Block:
          v = tables.e4m3[bytes[row * k + c]] *
              tables.e8m0[w.scales[(row / w.block) * ((k + w.block - 1) / w.block) + c / w.block]];
          break;
        case WeightFormat::kFp4Row32:
          v = tables.e2m1[fp4_code(w, row, c)] * tables.e8m0[w.scales[row * fp4_scale_stride(w) + c / 32]];
          break;
      }
      out[c - c0] = v;
    }
  }

  // log2 of an FP8 view's block where it is a power of two of at least 16 columns (no 16-column step
  // then straddles two blocks), else -1.
  static int fp8_block_shift(const WeightView& w) {
    return w.block >= 16 && (w.block & (w.block - 1)) == 0 ? __builtin_ctzll(static_cast<unsigned long long>(w.block))
                                                           : -1;
  }

  // The marks (WeightView::fp8_special_blocks) of the scale blocks of W's row `row`; blocks of
  // 2^shift columns (fp8_block_shift).
  static const std::uint8_t* fp8_marks_of_row(const WeightView& w, std::int64_t row, int shift) {
    return w.fp8_special_blocks + (row >> shift) * ((w.cols + w.block - 1) >> shift);
  }

  // One row of W as the decode kernel walks it: its bytes, its row of E8M0 scales, and the shift
  // from a column to its scale (FP8 blocks of 2^shift columns, at least 16; FP4: 32). shift < 0:
  // an FP8 block that is not such a power of two, decoded one value at a time.
  struct RowCursor {
    const std::uint8_t* bytes;
    const std::uint8_t* scales;
    int shift;
    const Fp4Tables* fp4;  // fetched once per row, not per step (a function-local static checks its guard)
  };

  static RowCursor row_cursor(const WeightView& w, std::int64_t row) {
    const std::int64_t k = w.cols;
    const auto* data = static_cast<const std::uint8_t*>(w.data);
    switch (w.format) {
      case WeightFormat::kF32: return {data + row * k * 4, nullptr, 0, nullptr};
      case WeightFormat::kBF16: return {data + row * k * 2, nullptr, 0, nullptr};
      case WeightFormat::kFp8Block:
        return {data + row * k, w.scales + (row / w.block) * ((k + w.block - 1) / w.block), fp8_block_shift(w), nullptr};
      case WeightFormat::kFp4Row32:
        return {data + row * fp4_code_stride(w), w.scales + row * fp4_scale_stride(w), 5, &fp4_tables()};
    }
    return {};
  }

  // Columns c .. c + 16 of W[row] (c a multiple of 16, c + 16 <= k) into out[0 .. kV); with
  // Scalar, one value at a time (FP8 blocks that are not a power of two of at least 16 columns).
  template <WeightFormat F, bool Scalar>
  HIPPO_LINEAR_TARGET __attribute__((always_inline)) static void decode16(const WeightView& w, const DecodeTables& tables,
                                                                         std::int64_t row, const RowCursor& r,
                                                                         std::int64_t c, Vec (&out)[kV]) {
    if constexpr (Scalar) {
      float values[16];
      decode_scalar(w, tables, row, c, c + 16, values);
#pragma GCC unroll 4
      for (int q = 0; q < kV; ++q) out[q] = load(values + q * W);
    } else if constexpr (F == WeightFormat::kF32) {
      const float* src = reinterpret_cast<const float*>(r.bytes) + c;
#pragma GCC unroll 4
      for (int q = 0; q < kV; ++q) out[q] = load(src + q * W);
    } else if constexpr (F == WeightFormat::kBF16) {
      const auto* src = reinterpret_cast<const std::uint16_t*>(r.bytes) + c;
#pragma GCC unroll 4
      for (int q = 0; q < kV; ++q) out[q] = bf16_vec(src + q * W);
    } else if constexpr (F == WeightFormat::kFp8Block) {
      static_assert(kVectorDecode, "4-lane vectors decode FP8 one value at a time");
      // Without the scale: dot_rows multiplies by x scaled (scale_x_fp8) and checks the codes.
      if constexpr (W == 8) {
        fp8_bits16(r.bytes + c, out);
      } else {
#pragma GCC unroll 4
        for (int q = 0; q < kV; ++q) out[q] = fp8_bits(r.bytes + c + q * W);
      }
    } else {
      static_assert(F == WeightFormat::kFp4Row32 && kVectorDecode, "4-lane vectors decode FP4 one value at a time");
      const Vec table = fp4_table(*r.fp4, r.scales[c >> 5]);
#pragma GCC unroll 4
      for (int q = 0; q < kV; ++q) out[q] = fp4_vec(r.bytes + (c + q * W) / 2, table);
    }
  }

  // 16 FP8 columns of a row from c (inside one scale block of multiplier mult, fp8_mult's) into out:
  // through fp8_vec, or one value at a time where a code is NaN or the scale above 2^119 (mult 0).
  HIPPO_LINEAR_TARGET static void decode_fp8_16(const WeightView& w, const DecodeTables& tables, std::int64_t row,
                                                std::int64_t c, float mult, float* out) {
    const auto* bytes = static_cast<const std::uint8_t*>(w.data) + row * w.cols;
    if (mult != 0 && !any_lane(fp8_nan_lanes(bytes + c)))
      for (int q = 0; q < 16; q += W) store(out + q, fp8_vec(bytes + c + q, mult));
    else
      decode_scalar(w, tables, row, c, c + 16, out);
  }

  // decode_row's FP8 fast part on AVX-512 VBMI: W[row, c0 .. c1 rounded down to 64) into out through
  // fp8_group, each vector times its block's multiplier (exact, as fp8_vec); a group with a NaN code
  // or a scale above 2^119 goes 16 columns at a time (decode_fp8_16). Returns where it stopped (c0
  // where block edges are not multiples of 16). (AVX2's fp8_tile made the panels slower here.)
  HIPPO_LINEAR_TARGET static std::int64_t decode_fp8_groups(const WeightView& w, const DecodeTables& tables,
                                                            std::int64_t row, const std::uint8_t* scale_row,
                                                            std::int64_t c0, std::int64_t c1, float* out) {
    static_assert(W == 16 && kFp8ByteDecode, "fp8_group is AVX-512 VBMI's");
    if (w.block % 16 != 0) return c0;
    const auto* bytes = static_cast<const std::uint8_t*>(w.data) + row * w.cols;
    std::int64_t c = c0;
    for (; c + 64 <= c1; c += 64) {
      float mult[4];
      for (int v = 0; v < 4; ++v) mult[v] = tables.fp8_mult[scale_row[(c + 16 * v) / w.block]];
      std::uint64_t nan = 0;
      Vec f[4];
      fp8_group(bytes + c, fp8_byte_tables(), nan, f);
      if (nan == 0 && mult[0] != 0 && mult[1] != 0 && mult[2] != 0 && mult[3] != 0) {
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) store(out + (c - c0) + 16 * v, f[v] * mult[v]);
      } else {
        for (int v = 0; v < 4; ++v) decode_fp8_16(w, tables, row, c + 16 * v, mult[v], out + (c - c0) + 16 * v);
      }
    }
    return c;
  }

#if defined(__x86_64__)
  // decode_row's FP8 fast part on AVX-512 without VBMI where the view marks its blocks (a power of
  // two of at least 16 columns): W[row, c0 .. c1 rounded down to 16) into out, 16 columns at a time, the
  // unmarked blocks through fp8_normal_bits times the block's multiplier (exact, as fp8_vec), the
  // marked ones through decode_fp8_16. Returns where it stopped.
  HIPPO_LINEAR_TARGET static std::int64_t decode_fp8_normals(const WeightView& w, const DecodeTables& tables,
                                                             std::int64_t row, const std::uint8_t* scale_row,
                                                             std::int64_t c0, std::int64_t c1, float* out) {
    static_assert(W == 16, "fp8_normal_bits is AVX-512's");
    const int shift = fp8_block_shift(w);
    const std::uint8_t* marks = fp8_marks_of_row(w, row, shift);
    const auto* bytes = static_cast<const std::uint8_t*>(w.data) + row * w.cols;
    const __m512i keep = _mm512_set1_epi32(static_cast<int>(0x87F00000u)), top = _mm512_set1_epi32(0x38000000);
    std::int64_t c = c0;
    for (; c + 16 <= c1; c += 16) {
      const float mult = tables.fp8_mult[scale_row[c >> shift]];
      if (marks[c >> shift] == 0 && mult != 0) store(out + (c - c0), fp8_normal_bits(bytes + c, keep, top) * mult);
      else decode_fp8_16(w, tables, row, c, mult, out + (c - c0));
    }
    return c;
  }
#endif

  // W[row, c0 .. c1) into out[0, c1 - c0), vectorised (the panels of the prefill kernel). For FP4,
  // c0 and c1 are multiples of 32.
  HIPPO_LINEAR_TARGET static void decode_row(const WeightView& w, const DecodeTables& tables, std::int64_t row,
                                             std::int64_t c0, std::int64_t c1, float* out) {
    const std::int64_t k = w.cols;
    const auto* bytes = static_cast<const std::uint8_t*>(w.data);
    std::int64_t c = c0;
    switch (w.format) {
      case WeightFormat::kF32:
        std::memcpy(out, static_cast<const float*>(w.data) + row * k + c0, (c1 - c0) * sizeof(float));
        return;
      case WeightFormat::kBF16: {
        const auto* src = static_cast<const std::uint16_t*>(w.data) + row * k;
        for (; c + W <= c1; c += W) store(out + (c - c0), bf16_vec(src + c));
        break;
      }
      case WeightFormat::kFp8Block: {
        if (!kVectorDecode) break;
        const std::uint8_t* scale_row = w.scales + (row / w.block) * ((k + w.block - 1) / w.block);
        bool normals = false;
#if defined(__x86_64__)
        if constexpr (W == 16 && !kFp8ByteDecode)  // (VBMI's byte permutes were as fast)
          if (w.fp8_special_blocks != nullptr && fp8_block_shift(w) >= 0 && c0 % 16 == 0) {
            c = decode_fp8_normals(w, tables, row, scale_row, c0, c1, out);
            normals = true;
          }
#endif
        if constexpr (kFp8ByteDecode)
          if (!normals) c = decode_fp8_groups(w, tables, row, scale_row, c0, c1, out);
        for (std::int64_t blk = c / w.block; c < c1; ++blk) {
          const std::int64_t end = std::min(c1, (blk + 1) * w.block);
          const float mult = tables.fp8_mult[scale_row[blk]];
          for (; c + 16 <= end; c += 16) decode_fp8_16(w, tables, row, c, mult, out + (c - c0));
          decode_scalar(w, tables, row, c, end, out + (c - c0));
          c = end;
        }
        return;
      }
      case WeightFormat::kFp4Row32: {
        if (!kVectorDecode) break;
        const std::uint8_t* codes = bytes + row * fp4_code_stride(w);
        const std::uint8_t* scales = w.scales + row * fp4_scale_stride(w);
        const std::int64_t lanes_end = w.lane_order ? std::min(c1, k / 128 * 128) : c0;
        for (; c + 128 <= lanes_end && c % 128 == 0; c += 128) {
          UVec words[kV];
          fp4_lane_words(codes + c / 2, words);
#pragma GCC unroll 8
          for (int step = 0; step < 8; ++step) {
            const Vec table = fp4_table(fp4_tables(), scales[c / 32 + step / 2]);
#pragma GCC unroll 4
            for (int q = 0; q < kV; ++q)
              store(out + (c - c0 + 16 * step + q * W), fp4_lookup(words[q] >> (4 * step), table));
          }
        }
        if (c < lanes_end) break;  // a lane-ordered chunk cut by c0 or c1: one value at a time
        for (; c < c1; c += 32) {
          const Vec table = fp4_table(fp4_tables(), w.scales[row * fp4_scale_stride(w) + c / 32]);
          for (int t = 0; t < 32; t += W)
            store(out + (c - c0 + t), fp4_vec(bytes + row * fp4_code_stride(w) + (c + t) / 2, table));
        }
        return;
      }
    }
    decode_scalar(w, tables, row, c, c1, out + (c - c0));
  }

  // ---- the reduction tree ----

  // The first two levels: s4[l] = (p[l] + p[l + 8]) + (p[l + 4] + p[l + 12]).
  // (A template: g++ 12 drops the vector attribute of Vec from a `const Vec*` parameter.)
  template <class V>
  HIPPO_LINEAR_TARGET __attribute__((always_inline)) static Vec4 fold4(const V (&a)[kV]) {
    if constexpr (W == 4) {
      return (a[0] + a[2]) + (a[1] + a[3]);
    } else {
      typedef float Vec8 __attribute__((vector_size(8 * sizeof(float))));
      Vec8 s8;
      if constexpr (W == 8) s8 = a[0] + a[1];
      else s8 = __builtin_shufflevector(a[0], a[0], 0, 1, 2, 3, 4, 5, 6, 7) +
                __builtin_shufflevector(a[0], a[0], 8, 9, 10, 11, 12, 13, 14, 15);
      return __builtin_shufflevector(s8, s8, 0, 1, 2, 3) + __builtin_shufflevector(s8, s8, 4, 5, 6, 7);
    }
  }

  // The last two levels for four outputs at once: lane o is (s4[0] + s4[2]) + (s4[1] + s4[3]) of
  // output o, the same sum reduce1 forms alone.
  HIPPO_LINEAR_TARGET __attribute__((always_inline)) static Vec4 reduce4(Vec4 a, Vec4 b, Vec4 c, Vec4 d) {
    const Vec4 ab = __builtin_shufflevector(a, b, 0, 1, 4, 5) + __builtin_shufflevector(a, b, 2, 3, 6, 7);
    const Vec4 cd = __builtin_shufflevector(c, d, 0, 1, 4, 5) + __builtin_shufflevector(c, d, 2, 3, 6, 7);
    return __builtin_shufflevector(ab, cd, 0, 2, 4, 6) + __builtin_shufflevector(ab, cd, 1, 3, 5, 7);
  }

  HIPPO_LINEAR_TARGET __attribute__((always_inline)) static float reduce1(Vec4 a) { return (a[0] + a[2]) + (a[1] + a[3]); }

  // out[j] = the tree over the lanes of acc[j].
  template <int N, class V>
  HIPPO_LINEAR_TARGET __attribute__((always_inline)) static void reduce_all(const V (&acc)[N][kV], float (&out)[N]) {
#pragma GCC unroll 8
    for (int j = 0; j + 4 <= N; j += 4) {
      const Vec4 s = reduce4(fold4(acc[j]), fold4(acc[j + 1]), fold4(acc[j + 2]), fold4(acc[j + 3]));
      std::memcpy(out + j, &s, sizeof s);
    }
#pragma GCC unroll 4
    for (int j = N / 4 * 4; j < N; ++j) out[j] = reduce1(fold4(acc[j]));
  }

  // ---- decode: m <= kSmallM rows of x, dot products straight from the weight bytes ----

  // Columns begin .. end of a decode group's rows (dot_groups' column blocks), the lane chains
  // carried in from the block before and out to the next through carry (MR x NR x kV vectors).
  struct ColumnBlock {
    std::int64_t begin = 0, end = 0;
    Vec* carry = nullptr;
  };

  // dot_rows' software prefetch: into the L1 for the next group, which the next steps read; for
  // column blocks, into the L2 for the next super group, which would not fit beside them in the L1.
  template <bool Blocked>
  __attribute__((always_inline)) static void prefetch_ahead(const std::uint8_t* p) {
    if constexpr (Blocked) __builtin_prefetch(p, 0, 2);
    else __builtin_prefetch(p);
  }

  // The decode paths that may run in column blocks (dot_groups): those that read x column after
  // column, with no fallback that starts a row over: F32, BF16 and packed FP4 on AVX2. (Not AVX2's
  // FP8 through fp8_tile: on an Intel Xeon VM, one thread, 512 rows, that took 1.12-1.15x the time
  // at m = 3, 4, and 1.10-1.18x at m = 8 on matrices in DRAM.)
  template <WeightFormat F, bool Scalar, bool Lanes>
  static constexpr bool kColumnBlocks =
      !Scalar && !Lanes && (F == WeightFormat::kF32 || F == WeightFormat::kBF16 || kFp4Blocks<F, Scalar, Lanes>);

  // Rows r0 .. r0 + NR of W against the MR rows of x (row i at x + i * k; x_tail: their last
  // k % 16 columns, zero-padded to 16 each). FP8 (not Scalar) reads xs instead of x for the
  // first k / 16 * 16 columns: x scaled per block by scale_x_fp8 for these rows; packed FP4 on
  // AVX2 (kFp4Blocks) reads xs, x in fp4_block's lane order. Lanes: FP4 in lane order, whose
  // whole 128-column chunks take one load and eight shifts, not eight broadcasts (a permute
  // each) and eight variable shifts.
  template <WeightFormat F, bool Scalar, int MR, int NR, bool Lanes = false, bool Blocked = false>
  HIPPO_LINEAR_TARGET static void dot_rows(const float* x, const float* xs, const float* x_tail, const WeightView& w,
                                           std::int64_t r0, const LinearOut& y, const ColumnBlock& block = {}) {
    const DecodeTables& tables = decode_tables();
    const std::int64_t k = w.cols, full = k / 16 * 16;
    RowCursor rows[NR];
    for (int j = 0; j < NR; ++j) rows[j] = row_cursor(w, r0 + j);
    // The hardware prefetchers stop at page boundaries, and a row is often a page or less (FP8 and
    // FP4 at k = 4096): so each step also fetches the same place in the next group's rows, whose
    // streams would otherwise start cold. Not F32 in groups of 4 rows or more (16 KB rows at k =
    // 4096, whose streams the hardware keeps up): on an Intel Xeon VM that ran in 0.84-0.99x the
    // time (m = 1..4, AVX-512 and AVX2), where groups of 1 or 2 rows still gain from it.
    constexpr int kBits = F == WeightFormat::kF32 ? 32 : F == WeightFormat::kBF16 ? 16 : F == WeightFormat::kFp8Block ? 8 : 4;
    constexpr std::int64_t kStepsPerLine = 64 * 8 / (16 * kBits);
    // Column blocks fetch the same place in the next super group's rows, which the next blocks read.
    const std::int64_t ahead =
        (Blocked ? kSuperRows : NR) * (F == WeightFormat::kFp4Row32 ? fp4_code_stride(w) : k * kBits / 8);
    // FP8's fast path takes no NaN codes (checked as the bytes pass); rows with any are done one
    // value at a time.
    constexpr bool kFastFp8 = F == WeightFormat::kFp8Block && !Scalar;
    // Packed FP4 on AVX2: a scale block at a time through fp4_block, against x in its lane order (xs).
    constexpr bool kBlocks = kFp4Blocks<F, Scalar, Lanes>;
    const float* xv = kFastFp8 || kBlocks ? xs : x;
    Bytes16 fp8_nan{};  // kFastFp8: NaN codes seen
    Vec acc[MR][NR][kV] = {};
    static_assert(!Blocked || kColumnBlocks<F, Scalar, Lanes>, "this decode path reads whole rows");
    if constexpr (Blocked)
      if (block.begin > 0) std::memcpy(acc, block.carry, sizeof acc);
    const std::int64_t lanes_end = Lanes ? k / 128 * 128 : 0;
    for (std::int64_t c = 0; c < lanes_end; c += 128) {
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j) __builtin_prefetch(rows[j].bytes + ahead + c / 2);
      UVec words[NR][kV];
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j) fp4_lane_words(rows[j].bytes + c / 2, words[j]);
      // Steps outside, rows inside: each step feeds all MR x NR accumulators, whose chains then
      // overlap (rows outside gave each row's 8 steps to only MR chains, one after another).
#pragma GCC unroll 8
      for (int step = 0; step < 8; ++step) {
#pragma GCC unroll 8
        for (int j = 0; j < NR; ++j) {
          const Vec table = fp4_table(*rows[j].fp4, rows[j].scales[c / 32 + step / 2]);
#pragma GCC unroll 8
          for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
            for (int q = 0; q < kV; ++q)
              acc[i][j][q] += load(xv + i * k + c + 16 * step + q * W) * fp4_lookup(words[j][q] >> (4 * step), table);
        }
      }
    }
    // FP8 on AVX-512 VBMI: 64 columns at a time through fp8_group, for one or two rows of x (more
    // take more accumulators than the registers hold beside its tables, and ran slower).
    constexpr bool kFp8Groups = kFastFp8 && kFp8ByteDecode && MR <= 2;
    std::uint64_t fp8_nan64 = 0;  // kFp8Groups: NaN codes seen
    const std::int64_t groups_end = kFp8Groups ? full / 64 * 64 : 0;
    if constexpr (kFp8Groups) {
      const Fp8ByteTables& byte_tables = fp8_byte_tables();
      for (std::int64_t c = 0; c < groups_end; c += 64) {
#pragma GCC unroll 8
        for (int j = 0; j < NR; ++j) __builtin_prefetch(rows[j].bytes + ahead + c);
#pragma GCC unroll 8
        for (int j = 0; j < NR; ++j) {
          Vec f[4];
          fp8_group(rows[j].bytes + c, byte_tables, fp8_nan64, f);
#pragma GCC unroll 8
          for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
            for (int v = 0; v < 4; ++v) acc[i][j][0] += load(xv + i * k + c + 16 * v) * f[v];
        }
      }
    }
    // FP8 through fp8_tile, 4 W columns at a time, where the view marks the scale blocks it cannot
    // take (block edges of 32 columns or a multiple: a group then spans two blocks at most); the
    // columns of a marked block go through decode16, NaN codes noted. Not for AVX-512 past two rows
    // of x, where 16 accumulators beside its constants ran slower than fp8_bits.
    constexpr bool kFp8Tiles = kFastFp8 && !kFp8Groups && kFp8TileDecode && (W == 8 || MR <= 2);
    const std::int64_t tiles_end =
        kFp8Tiles && w.fp8_special_blocks != nullptr && w.block % 32 == 0 ? full / (4 * W) * (4 * W) : 0;
    if constexpr (kFp8Tiles) {
      const Fp8TileConstants& constants = fp8_tile_constants();
      const int shift = rows[0].shift;
      const std::uint8_t* special = tiles_end > 0 ? fp8_marks_of_row(w, r0, shift) : nullptr;
      for (std::int64_t c = 0; c < tiles_end; c += 4 * W) {
        if (c % 64 == 0)
#pragma GCC unroll 8
          for (int j = 0; j < NR; ++j) __builtin_prefetch(rows[j].bytes + ahead + c);
        if (__builtin_expect((special[c >> shift] | special[(c + 4 * W - 1) >> shift]) == 0, 1)) {
#pragma GCC unroll 8
          for (int j = 0; j < NR; ++j) {
            Vec f[4];
            fp8_tile(rows[j].bytes + c, constants, f);
            // AVX2 reads x again for each weight row (from the L1), as the FMAs' memory operands:
            // held in registers across the rows, it pushed the accumulators out to the stack.
            const float* xj = xv;
            if constexpr (W == 8) __asm__ volatile("" : "+r"(xj));
#pragma GCC unroll 8
            for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
              for (int v = 0; v < 4; ++v) acc[i][j][v % kV] += load(xj + i * k + c + v * W) * f[v];
          }
        } else {  // a marked block: 16 columns at a time through decode16, as the loop below
#pragma GCC unroll 4
          for (std::int64_t s = c; s < c + 4 * W; s += 16)
#pragma GCC unroll 8
            for (int j = 0; j < NR; ++j) {
              fp8_nan |= fp8_nan_lanes(rows[j].bytes + s);
              Vec wv[kV];
              decode16<F, false>(w, tables, r0 + j, rows[j], s, wv);
#pragma GCC unroll 8
              for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
                for (int q = 0; q < kV; ++q) acc[i][j][q] += load(xv + i * k + s + q * W) * wv[q];
            }
        }
      }
    }
    // FP8 on AVX-512 past two rows of x, where the view marks its blocks: the unmarked ones through
    // fp8_normal_bits, the marked ones through fp8_bits, each in a loop of its own (one loop with a
    // branch per step, or with the NaN check in it, spilled accumulators to the stack); rows whose
    // marks say NaN go one value at a time.
    constexpr bool kFp8Normals = kFastFp8 && !kFp8Groups && !kFp8Tiles && kFp8TileDecode && W == 16;
    const std::int64_t normals_end = kFp8Normals && w.fp8_special_blocks != nullptr && w.block % 16 == 0 ? full : 0;
#if defined(__x86_64__)
    if constexpr (kFp8Normals) {
      const int shift = rows[0].shift;
      const std::int64_t blocks = (normals_end + w.block - 1) >> shift;
      const std::uint8_t* marks = normals_end > 0 ? fp8_marks_of_row(w, r0, shift) : nullptr;
      if (any_fp8_mark(marks, blocks, kFp8NanBlock)) return dot_rows<F, true, MR, NR>(x, xs, x_tail, w, r0, y);
      const __m512i keep = _mm512_set1_epi32(static_cast<int>(0x87F00000u)), top = _mm512_set1_epi32(0x38000000);
      for (std::int64_t b = 0; b < blocks;) {
        const std::int64_t e = next_fp8_mark(marks, b, blocks);  // [b, e): unmarked blocks; e, if any, a marked one
        for (std::int64_t c = b << shift, c_end = std::min(normals_end, e << shift); c < c_end; c += 16) {
          if (c / 16 % kStepsPerLine == 0)
#pragma GCC unroll 8
            for (int j = 0; j < NR; ++j) __builtin_prefetch(rows[j].bytes + ahead + c);
#pragma GCC unroll 8
          for (int j = 0; j < NR; ++j) {
            const Vec wv = fp8_normal_bits(rows[j].bytes + c, keep, top);
#pragma GCC unroll 8
            for (int i = 0; i < MR; ++i) acc[i][j][0] += load(xv + i * k + c) * wv;
          }
        }
        if (e == blocks) break;
        for (std::int64_t c = e << shift, c_end = std::min(normals_end, (e + 1) << shift); c < c_end; c += 16) {
          if (c / 16 % kStepsPerLine == 0)
#pragma GCC unroll 8
            for (int j = 0; j < NR; ++j) __builtin_prefetch(rows[j].bytes + ahead + c);
#pragma GCC unroll 8
          for (int j = 0; j < NR; ++j) {
            const Vec wv = fp8_bits(rows[j].bytes + c);
#pragma GCC unroll 8
            for (int i = 0; i < MR; ++i) acc[i][j][0] += load(xv + i * k + c) * wv;
          }
        }
        b = e + 1;
      }
    }
#endif
    const std::int64_t blocks_end =
        kBlocks ? k : kFp8Groups ? groups_end : kFp8Tiles ? tiles_end : kFp8Normals && normals_end > 0 ? normals_end : lanes_end;
    if constexpr (kBlocks) {
      const Fp4ByteTables& byte_tables = fp4_byte_tables();
      for (std::int64_t c = Blocked ? block.begin : 0; c < (Blocked ? block.end : k); c += 32) {
        if (c % 128 == 0)
#pragma GCC unroll 8
          for (int j = 0; j < NR; ++j) prefetch_ahead<Blocked>(rows[j].bytes + ahead + c / 2);
#pragma GCC unroll 8
        for (int j = 0; j < NR; ++j) {
          Vec f[4];
          fp4_block(rows[j].bytes + c / 2, byte_tables, rows[j].scales[c >> 5], f);
#pragma GCC unroll 8
          for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
            for (int v = 0; v < 4; ++v) acc[i][j][v % 2] += load(xv + i * k + c + v * W) * f[v];
        }
      }
    }
    for (std::int64_t c = Blocked ? std::max(blocks_end, block.begin) : blocks_end;
         c < (Blocked ? std::min(full, block.end) : full); c += 16) {
      if constexpr (kFastFp8)
#pragma GCC unroll 8
        for (int j = 0; j < NR; ++j) fp8_nan |= fp8_nan_lanes(rows[j].bytes + c);
      if ((F != WeightFormat::kF32 || NR <= 2) && c / 16 % kStepsPerLine == 0)
#pragma GCC unroll 8
        for (int j = 0; j < NR; ++j) prefetch_ahead<Blocked>(rows[j].bytes + ahead + c * kBits / 8);
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j) {
        Vec wv[kV];
        decode16<F, Scalar>(w, tables, r0 + j, rows[j], c, wv);
#pragma GCC unroll 8
        for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
          for (int q = 0; q < kV; ++q) acc[i][j][q] += load(xv + i * k + c + q * W) * wv[q];
      }
    }
    if constexpr (Blocked)
      if (block.end < k) {  // the lane chains go on in the next column block
        std::memcpy(block.carry, acc, sizeof acc);
        return;
      }
    if (full < k) {  // the last step: x and W zero past k
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j) {
        alignas(64) float tail[16] = {};
        decode_scalar(w, tables, r0 + j, full, k, tail);
#pragma GCC unroll 8
        for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
          for (int q = 0; q < kV; ++q) acc[i][j][q] += load(x_tail + 16 * i + q * W) * load(tail + q * W);
      }
    }
    if constexpr (kFastFp8)
      if (any_lane(fp8_nan) || fp8_nan64 != 0) return dot_rows<F, true, MR, NR>(x, xs, x_tail, w, r0, y);
    if constexpr (kBlocks)  // the lanes back in chain order (kFp4BlockLanes is its own inverse)
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
        for (int j = 0; j < NR; ++j) fp4_block_chains(acc[i][j]);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      float out[NR];
      reduce_all<NR>(acc[i], out);
      std::memcpy(y.row(i, w.rows) + r0, out, sizeof out);
    }
  }

  // The last n % NR rows, through dot_rows of that height.
  template <WeightFormat F, bool Scalar, int MR, int R, bool Lanes, bool Blocked = false>
  HIPPO_LINEAR_TARGET static void dot_rows_tail(int rows, const float* x, const float* xs, const float* x_tail,
                                                const WeightView& w, std::int64_t r0, const LinearOut& y,
                                                const ColumnBlock& block = {}) {
    if constexpr (R > 0) {
      if (rows == R) return dot_rows<F, Scalar, MR, R, Lanes, Blocked>(x, xs, x_tail, w, r0, y, block);
      dot_rows_tail<F, Scalar, MR, R - 1, Lanes, Blocked>(rows, x, xs, x_tail, w, r0, y, block);
    }
  }

  // Weight rows per decode step (a power of two: FP8 groups stay inside a scale block). One row of
  // x: about 8 accumulator vectors (the FMA latency times the FMA ports), so that the chains hide
  // one another's latency. AVX-512 with one or two rows of x of FP8 or FP4 runs fewer streams at
  // once faster: 4 weight rows (on an AMD EPYC VM, against 8: lane-ordered FP4 at m = 2 0.78x the
  // time, FP8 at m = 1 0.86-0.90x; F32 did not gain; AVX2 keeps 4 of its 8-lane vector pairs, its
  // best). More rows of x: as many accumulators as the registers hold (16 of AVX-512's 32), since
  // every step loads each row of x once for all NR weight rows, and x (16 KB per row at k = 4096)
  // falls out of the L1. BF16 with one or two rows of x takes one weight row: its decode is a
  // shift, so even a single chain of FMAs outruns the bus, and on an AMD EPYC VM one row's stream
  // read BF16 about 1.3x faster than 8 rows' (docs/BENCHMARKS.md).
  template <WeightFormat F, int MR>
  static constexpr int kDotRows = static_cast<int>(std::bit_floor(
      F == WeightFormat::kBF16 && MR <= 2             ? 1u
      : W == 16 && MR <= 2 && F != WeightFormat::kF32 ? 4u
      : MR == 1                                       ? std::max(1u, 8u / kV)
                                                      : std::max(1u, (W == 16 ? 16u : 8u) / (MR * kV))));

  // Rows of x per pass over a group's weight rows (decode_format): 4, whose accumulators fill half
  // of AVX-512's registers; AVX2 (16 registers) gets half as many weight rows per step. (AVX2's F32
  // and BF16 once took passes of 2, whose x rows stay in the L1: on an AMD EPYC VM passes of 4 took
  // 0.69-0.76x their time at m = 6..16.)
  static constexpr int kPassRows = 4;

  // Rows of W that each pass of kPassRows rows of x runs over before the next pass starts
  // (dot_groups) in column blocks, so that the later passes read them from the L2.
  static constexpr int kSuperRows = 16;

  // Column blocks (dot_groups): a pass whose rows of x take more than kL1XBytes, with fewer weight
  // rows per group than rows of x (AVX2 and the generic 4-lane path from three rows of x on: one
  // weight row per group, so each x value loaded feeds one FMA), runs over its super group
  // kXBlockBytes of x at a time, which then stay in the 32-48 KB L1 instead of streaming from the
  // L2 for every weight row. On an Intel Xeon VM (AVX2, one thread, 512 rows of k = 4096) that
  // took 0.59-0.66x the time for F32 and BF16 at m = 3, 4, 8, and 0.78-0.88x for packed FP4 at
  // m = 4, 8, whose m = 3 took 1.18x (so FP4 starts at 4 rows). Not at m = 2 (32 KB of x), nor on
  // AVX-512, whose groups of 4 weight rows past two rows of x did not gain (0.96-1.10x). The
  // generic path: 0.88-1.03x.
  static constexpr std::int64_t kL1XBytes = 32 * 1024, kXBlockBytes = 16 * 1024;

  template <WeightFormat F, bool Scalar, bool Lanes, int MA, int NR>
  static bool column_blocks_pay(std::int64_t k) {
    return kColumnBlocks<F, Scalar, Lanes> && NR < MA && MA >= (F == WeightFormat::kFp4Row32 ? 4 : 3) &&
           MA * k * static_cast<std::int64_t>(sizeof(float)) > kL1XBytes;
  }

  // Groups g0 .. g1 (one super group at most) against the MA rows of x, kXBlockBytes of x at a
  // time, each group's lane chains carried from one column block to the next.
  template <WeightFormat F, bool Scalar, int MA, int NR, bool Lanes>
  HIPPO_LINEAR_TARGET static void dot_column_blocks(std::int64_t g0, std::int64_t g1, const float* x, const float* xs,
                                                    const float* x_tail, const WeightView& w, const LinearOut& y) {
    const std::int64_t k = w.cols;
    // Blocks of whole 128-column lines of FP4 (the prefetch's unit).
    const std::int64_t width = kXBlockBytes / (MA * static_cast<std::int64_t>(sizeof(float))) / 128 * 128;
    Vec carry[kSuperRows][MA][NR][kV];  // (kSuperRows / NR groups at most)
    for (std::int64_t c = 0; c < k; c += width) {
      ColumnBlock block{c, std::min(k, c + width), nullptr};
      for (std::int64_t g = g0; g < g1; ++g) {
        block.carry = carry[g - g0][0][0];
        const int nr = static_cast<int>(std::min<std::int64_t>(NR, w.rows - g * NR));
        if (nr == NR) dot_rows<F, Scalar, MA, NR, Lanes, true>(x, xs, x_tail, w, g * NR, y, block);
        else dot_rows_tail<F, Scalar, MA, NR - 1, Lanes, true>(nr, x, xs, x_tail, w, g * NR, y, block);
      }
    }
  }

  // Groups g0 .. g1 of NR rows of W (the last maybe fewer; one super group at most) against the MR
  // rows of x, kPassRows rows of x at a time, each pass over all the groups before the next; in
  // column blocks where column_blocks_pay (a later pass, with fewer rows of x, only where the first
  // pays, which is when decode_format hands out super groups of more than one group).
  template <WeightFormat F, bool Scalar, int MR, int NR, bool Lanes>
  HIPPO_LINEAR_TARGET static void dot_groups(std::int64_t g0, std::int64_t g1, const float* x, const float* xs,
                                             const float* x_tail, const WeightView& w, const LinearOut& y) {
    constexpr int MA = std::min(MR, kPassRows);
    bool blocked = false;
    if constexpr (kColumnBlocks<F, Scalar, Lanes> && NR < MA) {
      blocked = column_blocks_pay<F, Scalar, Lanes, MA, NR>(w.cols);
      if (blocked) dot_column_blocks<F, Scalar, MA, NR, Lanes>(g0, g1, x, xs, x_tail, w, y);
    }
    for (std::int64_t g = g0; g < g1 && !blocked; ++g) {
      const int nr = static_cast<int>(std::min<std::int64_t>(NR, w.rows - g * NR));
      if (nr == NR) dot_rows<F, Scalar, MA, NR, Lanes>(x, xs, x_tail, w, g * NR, y);
      else dot_rows_tail<F, Scalar, MA, NR - 1, Lanes>(nr, x, xs, x_tail, w, g * NR, y);
    }
    if constexpr (MR > MA) {
      const LinearOut y_b = y.rows != nullptr ? LinearOut{nullptr, y.rows + MA} : LinearOut{y.y + MA * w.rows, nullptr};
      dot_groups<F, Scalar, MR - MA, NR, Lanes>(g0, g1, x + MA * w.cols, xs != nullptr ? xs + MA * w.cols : nullptr,
                                                x_tail + MA * 16, w, y_b);
    }
  }

  // The FP8 decode's x for the rows of scale block rb: each of the first k / 16 * 16 columns of
  // the m rows of x times 2^8 times its block's scale, into out [m, k]. Then x · W is, product
  // for product and bit for bit, xs times fp8_bits' values (E4M3 times 2^-8), one multiply fewer
  // per weight vector. False when a value does not scale exactly (past the float range, into its
  // subnormals, a NaN, or a scale above 2^119): those rows go one value at a time.
  // (Not a template: g++ 12 gives vector comparisons in member templates the type bool.)
  HIPPO_LINEAR_TARGET static bool scale_x_fp8(const float* x, int m, const WeightView& w, const DecodeTables& tables,
                                              std::int64_t rb, float* out) {
    const std::int64_t k = w.cols, full = k / 16 * 16;
    const int shift = __builtin_ctzll(static_cast<unsigned long long>(w.block));
    const std::uint8_t* scales = w.scales + rb * ((k + w.block - 1) / w.block);
    IVec inexact = {};
    for (std::int64_t c = 0; c < full; c += 16) {
      const std::uint8_t scale = scales[c >> shift];
      if (scale > kFp8MaxFastScale) return false;
      const float mult = tables.fp8_mult[scale], inv = tables.fp8_inv[scale];
      for (int i = 0; i < m; ++i)
#pragma GCC unroll 4
        for (int q = 0; q < kV; ++q) {
          const Vec v = load(x + i * k + c + q * W), scaled = v * mult;
          inexact |= scaled * inv != v;  // NaN differs from everything
          store(out + i * k + c + q * W, scaled);
        }
    }
    std::int32_t lanes[W];
    std::memcpy(lanes, &inexact, sizeof lanes);
    return std::all_of(lanes, lanes + W, [](std::int32_t lane) { return lane == 0; });
  }

  template <WeightFormat F, bool Scalar, int MR, bool Lanes = false>
  HIPPO_LINEAR_TARGET static void decode_format(const float* x, const WeightView& w, const LinearOut& y, ThreadPool& pool) {
    constexpr int NR = kDotRows<F, std::min(MR, kPassRows)>;
    const std::int64_t k = w.cols, full = k / 16 * 16;
    // Super groups of kSuperRows weight rows where the first pass runs in column blocks (dot_groups);
    // otherwise each group's passes run back to back (its weight rows still in the L1).
    const std::int64_t super_groups =
        column_blocks_pay<F, Scalar, Lanes, std::min(MR, kPassRows), NR>(k) ? std::max(1, kSuperRows / NR) : 1;
    alignas(64) float x_tail[MR * 16] = {};
    for (int i = 0; i < MR; ++i) std::copy(x + i * k + full, x + (i + 1) * k, x_tail + 16 * i);
    const std::int64_t groups = (w.rows + NR - 1) / NR;
    // Packed FP4 on AVX2 (kFp4Blocks) reads x with each step's columns in kFp4BlockLanes order.
    const float* x_lanes = nullptr;  // (the workers' own thread_local would be another vector)
    if constexpr (kFp4Blocks<F, Scalar, Lanes>) {
      thread_local std::vector<float> x_lanes_buffer;
      x_lanes_buffer.resize(static_cast<std::size_t>(MR * k));
      for (std::int64_t c = 0; c < MR * k; c += 16)
        for (int j = 0; j < 16; ++j) x_lanes_buffer[c + j] = x[c + kFp4BlockLanes[j]];
      x_lanes = x_lanes_buffer.data();
    }
    pool.parallel_for(groups, [&](std::int64_t g0, std::int64_t g1) {
      if constexpr (F == WeightFormat::kFp8Block && !Scalar) {
        // A group's NR rows lie in one scale block (a power of two of at least 16 rows): x is
        // scaled once per block, in this thread's buffer, bounded by 8 rows of x.
        static_assert(16 % NR == 0, "a decode group must not straddle FP8 scale blocks");
        thread_local std::vector<float> scaled;
        scaled.resize(static_cast<std::size_t>(MR * k));
        const DecodeTables& tables = decode_tables();
        std::int64_t block = -1;
        bool exact = false;
        for (std::int64_t g = g0; g < g1; ++g) {
          if (g * NR / w.block != block) {
            block = g * NR / w.block;
            exact = scale_x_fp8(x, MR, w, tables, block, scaled.data());
          }
          if (exact) dot_groups<F, false, MR, NR, false>(g, g + 1, x, scaled.data(), x_tail, w, y);
          else dot_groups<F, true, MR, NR, false>(g, g + 1, x, nullptr, x_tail, w, y);
        }
      } else {
        for (std::int64_t g = g0; g < g1;) {
          const std::int64_t g_end = std::min(g1, (g / super_groups + 1) * super_groups);
          dot_groups<F, Scalar, MR, NR, Lanes>(g, g_end, x, x_lanes, x_tail, w, y);
          g = g_end;
        }
      }
    });
  }

  template <int MR>
  HIPPO_LINEAR_TARGET static void decode_linear(const float* x, const WeightView& w, const LinearOut& y, ThreadPool& pool) {
    switch (w.format) {
      case WeightFormat::kF32: return decode_format<WeightFormat::kF32, false, MR>(x, w, y, pool);
      case WeightFormat::kBF16: return decode_format<WeightFormat::kBF16, false, MR>(x, w, y, pool);
      case WeightFormat::kFp8Block:
        if constexpr (kVectorDecode)
          if (row_cursor(w, 0).shift >= 0) return decode_format<WeightFormat::kFp8Block, false, MR>(x, w, y, pool);
        return decode_format<WeightFormat::kFp8Block, true, MR>(x, w, y, pool);
      case WeightFormat::kFp4Row32:
        if constexpr (kVectorDecode)
          if (w.lane_order) return decode_format<WeightFormat::kFp4Row32, false, MR, true>(x, w, y, pool);
        return decode_format<WeightFormat::kFp4Row32, !kVectorDecode, MR>(x, w, y, pool);
    }
  }

  // ---- prefill: decoded panels, one lane at a time through register tiles ----

  static constexpr int kNr = 2 * W;             // weight rows (outputs) per panel: two vectors
  static constexpr std::int64_t kKc = 1024;     // columns per chunk at most (a multiple of 32: FP4 scale blocks)
  static constexpr std::int64_t kMc = 512;      // rows of x per task
  static_assert(kKc % 32 == 0, "chunks must not split an FP4 scale block");

  // Columns per chunk for k columns: kKc, or k rounded up to 32 where that is less, so that a short
  // k (the indexer's 32-dim keys) packs and runs no columns of zeros.
  static std::int64_t chunk_columns(std::int64_t k) { return std::min(kKc, (k + 31) / 32 * 32); }

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


  // Rows r0 .. r0+nr of W, columns c0 .. c0+kc, decoded into rows[j * stride + c] for j < R;
  // zero for rows >= nr and up to kc rounded up to 16.
  HIPPO_LINEAR_TARGET static void decode_rows(const WeightView& w, std::int64_t r0, int R, int nr, std::int64_t c0,
                                              std::int64_t kc, float* rows, std::int64_t stride) {
    const std::int64_t kc_up = (kc + 15) / 16 * 16;
    const DecodeTables& tables = decode_tables();
    for (int j = 0; j < R; ++j) {
      float* row = rows + j * stride;
      if (j < nr) {
        decode_row(w, tables, r0 + j, c0, c0 + kc, row);
        std::fill(row + kc, row + kc_up, 0.0f);
      } else {
        std::fill(row, row + kc_up, 0.0f);
      }
    }
  }

  // decode_transposed for packed FP4 (the indexer's keys, a few dozen columns a row): W columns of
  // each of W rows decoded straight into registers (one scale's table per 32 columns), transposed,
  // stored; no row buffer and no call per row.
  HIPPO_LINEAR_TARGET static void decode_fp4_transposed(const WeightView& w, std::int64_t r0, std::int64_t n, float* kt,
                                                        std::int64_t ld) {
    const Fp4Tables& tables = fp4_tables();
    const auto* codes = static_cast<const std::uint8_t*>(w.data);
    const std::int64_t code_stride = fp4_code_stride(w), scale_stride = fp4_scale_stride(w);
    for (std::int64_t j0 = 0; j0 < n; j0 += W) {
      const std::int64_t nj = std::min<std::int64_t>(W, n - j0);
      for (std::int64_t c = 0; c < w.cols; c += W) {
        Vec r[W];
#pragma GCC unroll 16
        for (int t = 0; t < W; ++t) {
          const std::int64_t row = r0 + j0 + t;
          r[t] = t < nj ? fp4_vec(codes + row * code_stride + c / 2, fp4_table(tables, w.scales[row * scale_stride + c / 32]))
                        : Vec{};
        }
        transpose(r);  // r[u]: column c + u of the W rows
#pragma GCC unroll 16
        for (int u = 0; u < W; ++u) {
          if (nj == W) store(kt + (c + u) * ld + j0, r[u]);
          else std::memcpy(kt + (c + u) * ld + j0, &r[u], static_cast<std::size_t>(nj) * sizeof(float));
        }
      }
    }
  }

  // decode_rows_transposed (linear.h): W rows decoded, then each W x W block through transpose().
  HIPPO_LINEAR_TARGET static void decode_transposed(const WeightView& w, std::int64_t r0, std::int64_t n, float* kt,
                                                    std::int64_t ld) {
    if constexpr (kVectorDecode)
      if (w.format == WeightFormat::kFp4Row32 && !w.lane_order) return decode_fp4_transposed(w, r0, n, kt, ld);
    const DecodeTables& tables = decode_tables();
    const std::int64_t k = w.cols;
    thread_local std::vector<float> rows;
    rows.resize(static_cast<std::size_t>(W * k));
    for (std::int64_t j0 = 0; j0 < n; j0 += W) {
      const std::int64_t nj = std::min<std::int64_t>(W, n - j0);
      for (std::int64_t t = 0; t < W; ++t) {
        float* row = rows.data() + t * k;
        if (t < nj) decode_row(w, tables, r0 + j0 + t, 0, k, row);
        else std::fill(row, row + k, 0.0f);
      }
      for (std::int64_t c = 0; c < k; c += W) {
        Vec r[W];
#pragma GCC unroll 16
        for (int t = 0; t < W; ++t) r[t] = load(rows.data() + t * k + c);
        transpose(r);  // r[u]: column c + u of the W rows
#pragma GCC unroll 16
        for (int u = 0; u < W; ++u) {
          if (nj == W) store(kt + (c + u) * ld + j0, r[u]);
          else std::memcpy(kt + (c + u) * ld + j0, &r[u], static_cast<std::size_t>(nj) * sizeof(float));
        }
      }
    }
  }

  // The decoded rows (kNr x kc, row stride kKc) lane-major, with `lane_steps` = chunk / 16:
  // panel[(l * lane_steps + s) * kNr + j] = W[j, 16 s + l], so that lane l's chain over s reads one
  // contiguous run.
  HIPPO_LINEAR_TARGET static void build_panel(const float* rows, std::int64_t kc, std::int64_t lane_steps, float* panel) {
    const std::int64_t steps = (kc + 15) / 16;
    for (std::int64_t s = 0; s < steps; ++s) {
      for (int g = 0; g < kNr; g += W) {      // W weight rows
        for (int h = 0; h < 16; h += W) {     // W columns of the step
          Vec r[W];
#pragma GCC unroll 16
          for (int t = 0; t < W; ++t) r[t] = load(rows + (g + t) * kKc + 16 * s + h);
          transpose(r);  // r[u]: column 16 s + h + u of rows g .. g + W
#pragma GCC unroll 16
          for (int u = 0; u < W; ++u) store(panel + ((h + u) * lane_steps + s) * kNr + g, r[u]);
        }
      }
    }
  }

  // x repacked for the lane passes: per chunk of columns (chunk_columns) and tile of MR rows, lane
  // by lane, step by step, the MR rows' values side by side (zero past m and past k), so that a
  // lane pass reads one contiguous run. One pass over x: cheap next to the product.
  template <int MR>
  static std::int64_t packed_x_floats(std::int64_t m, std::int64_t k) {
    const std::int64_t chunk = chunk_columns(k);
    return (k + chunk - 1) / chunk * chunk * ((m + MR - 1) / MR * MR);
  }

  template <int MR>
  static void pack_x(const float* x, std::int64_t m, std::int64_t k, std::int64_t t0, std::int64_t t1, float* xp) {
    const std::int64_t chunk = chunk_columns(k), lane_steps = chunk / 16;
    const std::int64_t tiles = (m + MR - 1) / MR, chunks = (k + chunk - 1) / chunk;
    for (std::int64_t ch = 0; ch < chunks; ++ch) {
      for (std::int64_t t = t0; t < t1; ++t) {
        float* out = xp + (ch * tiles + t) * chunk * MR;
        for (int u = 0; u < MR; ++u) {
          const std::int64_t i = t * MR + u;
          for (std::int64_t c = 0; c < chunk; ++c) {
            const std::int64_t col = ch * chunk + c;
            out[((c % 16) * lane_steps + c / 16) * MR + u] = i < m && col < k ? x[i * k + col] : 0.0f;
          }
        }
      }
    }
  }

  // Lane l of one tile against the panel's kNr outputs, `steps` steps: each step broadcasts the
  // MR packed values against the panel's two vectors. The accumulators start from sums, or from 0
  // in the first chunk.
  template <int MR>
  HIPPO_LINEAR_TARGET static void lane_tile(const float* xp_lane, const float* panel_lane, std::int64_t steps,
                                            bool first, float* sums) {
    Vec acc[MR][2];
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      acc[i][0] = first ? Vec{} : load(sums + i * kNr);
      acc[i][1] = first ? Vec{} : load(sums + i * kNr + W);
    }
    for (std::int64_t s = 0; s < steps; ++s) {
      const Vec w0 = load(panel_lane + s * kNr), w1 = load(panel_lane + s * kNr + W);
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) {
        const float xv = xp_lane[s * MR + i];
        acc[i][0] += xv * w0;
        acc[i][1] += xv * w1;
      }
    }
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      store(sums + i * kNr, acc[i][0]);
      store(sums + i * kNr + W, acc[i][1]);
    }
  }

  // The tree over sums[l][i][j] (MR rows of x of which R are real, nr outputs) into y[i][j]:
  // element-wise, the same additions as fold4 / reduce4 make across the lanes of one vector.
  template <int MR>
  HIPPO_LINEAR_TARGET static void reduce_lanes(const float* sums, int R, int nr, float* const* y) {
    for (int i = 0; i < R; ++i) {
      for (int v = 0; v < 2; ++v) {
        Vec p[16];
#pragma GCC unroll 16
        for (int l = 0; l < 16; ++l) p[l] = load(sums + (l * MR + i) * kNr + v * W);
#pragma GCC unroll 8
        for (int l = 0; l < 8; ++l) p[l] += p[l + 8];
#pragma GCC unroll 4
        for (int l = 0; l < 4; ++l) p[l] += p[l + 4];
        const Vec out = (p[0] + p[2]) + (p[1] + p[3]);
        const int n = std::min(W, nr - v * W);
        if (n == W) store(y[i] + v * W, out);
        else if (n > 0) std::memcpy(y[i] + v * W, &out, n * sizeof(float));
      }
    }
  }

  // The codes of W[r0 .. r0 + nr, c0 .. c1) fetched into the L2 a few lines at a time (`issue`),
  // spread over the tiles that run while the chunk before it is multiplied: the chunk's rows are
  // 32 short runs that the hardware prefetchers pick up late, and decode_rows would otherwise
  // wait for DRAM. The scales (a byte per 32 or 32 x 32 values) follow on their own.
  struct ChunkPrefetch {
    const char* first = nullptr;  // the chunk's first byte in its first row
    std::int64_t stride = 0, bytes = 0, line = 0, lines = 0;  // per row; next line to fetch; all lines

    ChunkPrefetch() = default;
    ChunkPrefetch(const WeightView& w, std::int64_t r0, int nr, std::int64_t c0, std::int64_t c1) {
      // Bits per value, and bytes per row: a lane-ordered FP4 chunk of whole 128 columns is the
      // same bytes as packed.
      const int bits = w.format == WeightFormat::kF32 ? 32 : w.format == WeightFormat::kBF16 ? 16
                       : w.format == WeightFormat::kFp8Block ? 8 : 4;
      stride = w.format == WeightFormat::kFp4Row32 ? fp4_code_stride(w) : w.cols * bits / 8;
      first = static_cast<const char*>(w.data) + r0 * stride + c0 * bits / 8;
      bytes = (c1 - c0) * bits / 8;
      lines = nr * ((bytes + 63) / 64);
    }

    void issue(std::int64_t n) {
      const std::int64_t per_row = (bytes + 63) / 64;
      for (const std::int64_t end = std::min(lines, line + n); line < end; ++line)
        __builtin_prefetch(first + line / per_row * stride + line % per_row * 64, 0, 2);
    }
  };

  // y[tiles t0 .. t1, r0 .. r0 + kNr): chunk by chunk, the panel decoded and every tile run
  // through it lane by lane; each tile's lane sums (16 x MR x kNr) wait in `sums` between chunks.
  // While a chunk's tiles run, the next chunk's codes are fetched (ChunkPrefetch): the panel's next
  // chunk, or after its last the next panel's first, which is mostly this thread's next task.
  template <int MR>
  HIPPO_LINEAR_TARGET static void gemm_panel(const float* xp, std::int64_t m, const WeightView& w, std::int64_t r0,
                                             std::int64_t t0, std::int64_t t1, const LinearOut& y,
                                             std::vector<float>& sums) {
    alignas(64) float rows[kNr * kKc];
    alignas(64) float panel[kKc * kNr];
    const std::int64_t k = w.cols, n = w.rows, tiles = (m + MR - 1) / MR;
    const int nr = static_cast<int>(std::min<std::int64_t>(kNr, n - r0));
    const std::int64_t chunk = chunk_columns(k), lane_steps = chunk / 16;
    constexpr std::int64_t kTileSums = 16 * MR * kNr;
    // Each tile's sums wait between chunks; with one chunk, each tile is done before the next
    // starts, and they all take the same (cache-warm) place.
    const bool one_chunk = k <= chunk;
    sums.resize(static_cast<std::size_t>((one_chunk ? 1 : t1 - t0) * kTileSums));  // the first chunk writes them all
    for (std::int64_t c0 = 0; c0 < k; c0 += chunk) {
      const std::int64_t kc = std::min(chunk, k - c0), steps = (kc + 15) / 16;
      decode_rows(w, r0, kNr, nr, c0, kc, rows, kKc);
      build_panel(rows, kc, lane_steps, panel);
      ChunkPrefetch next;
      if (c0 + kc < k) next = ChunkPrefetch(w, r0, nr, c0 + kc, std::min(k, c0 + kc + chunk));
      else if (r0 + kNr < n)
        next = ChunkPrefetch(w, r0 + kNr, static_cast<int>(std::min<std::int64_t>(kNr, n - r0 - kNr)), 0, std::min(k, chunk));
      const std::int64_t per_tile = (next.lines + 16 * (t1 - t0) - 1) / (16 * (t1 - t0));
      for (std::int64_t t = t0; t < t1; ++t) {
        const float* xp_tile = xp + (c0 / chunk * tiles + t) * chunk * MR;
        float* tile_sums = sums.data() + (one_chunk ? 0 : (t - t0) * kTileSums);
        for (int l = 0; l < 16; ++l) {
          next.issue(per_tile);
          lane_tile<MR>(xp_tile + l * lane_steps * MR, panel + l * lane_steps * kNr, steps, c0 == 0, tile_sums + l * MR * kNr);
        }
        if (c0 + kc == k) {
          const int R = static_cast<int>(std::min<std::int64_t>(MR, m - t * MR));
          float* out[MR];
          for (int u = 0; u < R; ++u) out[u] = y.row(t * MR + u, n) + r0;
          reduce_lanes<MR>(tile_sums, R, nr, out);
        }
      }
    }
  }
};

// Rows of x up to which linear() takes the decode kernel.
constexpr std::int64_t kSmallM = 8;

// Rows of x up to which linear() still takes the decode kernel, in passes of at most kSmallM rows
// that each read W again, rather than the prefill GEMM: its panels' decoding and transposing cost a
// W-sized pass of their own, about what 16 (F32 on AVX-512), 32 (F32 on AVX2, BF16), 40-48 (FP8)
// or 64 (FP4) rows of decode cost (`hippo bench kernels --m 8,9,16,32,64`, docs/BENCHMARKS.md).
// The bits are the same either way.
template <int W>
constexpr std::int64_t decode_passes_max(WeightFormat format) {
  switch (format) {
    case WeightFormat::kF32: return W == 8 ? 32 : 16;
    case WeightFormat::kBF16: return 32;
    case WeightFormat::kFp8Block: return W == 16 ? 48 : 40;
    case WeightFormat::kFp4Row32: return 64;
  }
  return kSmallM;
}

// W lanes per vector; prefill tiles of MR rows of x.
template <int W, int MR>
void linear_impl(const float* x, std::int64_t m, const WeightView& w, const LinearOut& y, ThreadPool& pool) {
  using S = Simd<W>;
  if (m > kSmallM && m <= decode_passes_max<W>(w.format)) {
    // Passes of equal height (9 rows: 5 + 4, not 8 + 1), each streaming W once.
    const std::int64_t passes = (m + kSmallM - 1) / kSmallM;
    for (std::int64_t p = 0, i0 = 0; p < passes; ++p) {
      const std::int64_t rows = (m - i0) / (passes - p);
      const LinearOut part = y.rows != nullptr ? LinearOut{nullptr, y.rows + i0} : LinearOut{y.y + i0 * w.rows, nullptr};
      linear_impl<W, MR>(x + i0 * w.cols, rows, w, part, pool);
      i0 += rows;
    }
    return;
  }
  static_assert(kSmallM == 8, "the switch below covers m = 1 .. kSmallM");
  switch (m) {
    case 1: return S::template decode_linear<1>(x, w, y, pool);
    case 2: return S::template decode_linear<2>(x, w, y, pool);
    case 3: return S::template decode_linear<3>(x, w, y, pool);
    case 4: return S::template decode_linear<4>(x, w, y, pool);
    case 5: return S::template decode_linear<5>(x, w, y, pool);
    case 6: return S::template decode_linear<6>(x, w, y, pool);
    case 7: return S::template decode_linear<7>(x, w, y, pool);
    case 8: return S::template decode_linear<8>(x, w, y, pool);
    default: break;
  }
  const std::int64_t n_panels = (w.rows + S::kNr - 1) / S::kNr;
  // Rows of x per task: kMc (each decoded panel serves them all), fewer where the panels are too few
  // to give every thread a task.
  const std::int64_t tiles = (m + MR - 1) / MR, min_blocks = (pool.size() + n_panels - 1) / n_panels;
  const std::int64_t tiles_per_block = std::min(S::kMc / MR, std::max<std::int64_t>(1, (tiles + min_blocks - 1) / min_blocks));
  const std::int64_t blocks = (tiles + tiles_per_block - 1) / tiles_per_block;
  // The caller's thread's buffer (a lambda on a worker thread would name that thread's own).
  thread_local std::vector<float> packed;
  packed.resize(static_cast<std::size_t>(S::template packed_x_floats<MR>(m, w.cols)));
  float* const xp = packed.data();
  pool.parallel_for(tiles, [&](std::int64_t t0, std::int64_t t1) { S::template pack_x<MR>(x, m, w.cols, t0, t1, xp); });
  // Tasks run panel-major: a thread's contiguous range covers, per panel, a contiguous range of
  // row blocks.
  pool.parallel_for(n_panels * blocks, [&](std::int64_t t_begin, std::int64_t t_end) {
    thread_local std::vector<float> sums;
    for (std::int64_t t = t_begin; t < t_end; ++t) {
      const std::int64_t p = t / blocks, b = t % blocks;
      S::template gemm_panel<MR>(xp, m, w, p * S::kNr, b * tiles_per_block,
                                 std::min(tiles, (b + 1) * tiles_per_block), y, sums);
    }
  });
}

}  // namespace
}  // namespace hippo::kernels::cpu
