// y [m, rows] = x [m, cols] · Wᵀ on the GPU, for the four weight formats of kernels/weight_view.h.
//
// Decode is weight streaming: every weight byte is read once per call, so the kernel is built to
// keep HBM busy. One 32-lane group (a warp; half a wave64 on HIP) owns R output rows of W and up to
// M = 8 rows of x, so each weight load serves M rows of x and each x load serves R rows of W.
//
// The reduction order, fixed by (format, cols) alone (and the FP8 block edge), whatever m, the
// tiling over m, R, or the alignment of W and x:
//   - a "piece" is 4 consecutive columns [4t, 4t + 4); piece t belongs to lane t % 32, and each
//     lane walks its pieces in increasing t;
//   - per piece and output, p = x0·w0, then p = fma(x1, w1, p), fma(x2, w2, p), fma(x3, w3, p)
//     (columns past cols are 0 · 0);
//   - the lane's accumulator takes p: acc + p (F32, BF16, FP8 with a block edge not a multiple of
//     4, where each weight carries its own scale), or fma(p, scale, acc) (FP8 with the block a
//     multiple of 4, FP4: the piece's one E8M0 scale, an exact power of two, is applied once);
//   - the 32 lane sums meet in a butterfly (xor 16, 8, 4, 2, 1); FP4 codes decode to E2M1 · 2^-6
//     (see decode_fp4), so its sum is multiplied by 64 (exact) at the end.
// Every operation is an explicit IEEE intrinsic (no contraction left to the compiler), so every
// template instance computes each output with the same bits.
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/formats.cuh"
#include "kernels/cuda/launch.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <type_traits>

namespace hippo::kernels::cuda {
namespace {

constexpr int kLanes = 32;          // the reduction unit, also on wave64 hardware
constexpr int kGroupsPerBlock = 4;  // 128 threads: a multiple of 64 for HIP's wave64
constexpr int kThreads = kLanes * kGroupsPerBlock;

enum Format : int { kF32 = 0, kBF16 = 1, kFp8 = 2, kFp4 = 3 };

// The raw bytes of one piece (4 columns) of one row: F32 16 bytes, BF16 8, FP8 4, FP4 2.
template <int F>
struct Piece {
  static constexpr int kWords = F == kF32 ? 4 : F == kBF16 ? 2 : 1;
  static constexpr int kBytes = F == kF32 ? 16 : F == kBF16 ? 8 : F == kFp8 ? 4 : 2;
  static constexpr bool kScaled = F == kFp8 || F == kFp4;
};

struct Params {
  const float* x;
  float* y;
  const std::uint8_t* data;
  const std::uint8_t* scales;
  std::int64_t m, rows, cols;
  std::int64_t row_bytes;    // bytes from one row of W's data to the next
  std::int64_t scale_rows;   // FP8: bytes from one row-block of scales to the next; FP4: per row
  std::int64_t block;        // FP8 block edge
  std::uint32_t block32;     // min(block, cols): c / block32 == c / block for every column c
  std::int64_t m_tiles;      // tiles of M rows of x; the fastest-varying part of blockIdx.x
  std::uint32_t pieces;      // ceil(cols / 4)
  int fp8_fold;              // FP8: block % 4 == 0, one scale per piece
  int bytewise;              // slow path: W is not even element aligned, read it byte by byte
};

// ---- loads -------------------------------------------------------------------------------------

// Weights are read once per call: keep them out of L1 so that x (reused by every group) stays.
#if defined(HIPPO_HIP)
__device__ __forceinline__ uint4 ld_w16(const std::uint8_t* p) { return *reinterpret_cast<const uint4*>(p); }
__device__ __forceinline__ uint2 ld_w8(const std::uint8_t* p) { return *reinterpret_cast<const uint2*>(p); }
__device__ __forceinline__ std::uint32_t ld_w4(const std::uint8_t* p) {
  return *reinterpret_cast<const std::uint32_t*>(p);
}
__device__ __forceinline__ std::uint32_t ld_w2(const std::uint8_t* p) {
  return *reinterpret_cast<const std::uint16_t*>(p);
}
__device__ __forceinline__ float4 ld_x4(const float* p) { return *reinterpret_cast<const float4*>(p); }
#else
__device__ __forceinline__ uint4 ld_w16(const std::uint8_t* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}
__device__ __forceinline__ uint2 ld_w8(const std::uint8_t* p) {
  uint2 v;
  asm("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
  return v;
}
__device__ __forceinline__ std::uint32_t ld_w4(const std::uint8_t* p) {
  std::uint32_t v;
  asm("ld.global.nc.L1::no_allocate.u32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ std::uint32_t ld_w2(const std::uint8_t* p) {
  unsigned short v;
  asm("ld.global.nc.L1::no_allocate.u16 %0, [%1];" : "=h"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ float4 ld_x4(const float* p) { return __ldg(reinterpret_cast<const float4*>(p)); }
#endif

__device__ __forceinline__ std::uint32_t ld_u32_bytes(const std::uint8_t* p) {
  return std::uint32_t{p[0]} | std::uint32_t{p[1]} << 8 | std::uint32_t{p[2]} << 16 | std::uint32_t{p[3]} << 24;
}

// Fast path: one whole, aligned piece.
template <int F>
__device__ __forceinline__ void load_piece_fast(const std::uint8_t* at, std::uint32_t (&raw)[Piece<F>::kWords]) {
  if constexpr (F == kF32) {
    const uint4 v = ld_w16(at);
    raw[0] = v.x, raw[1] = v.y, raw[2] = v.z, raw[3] = v.w;
  } else if constexpr (F == kBF16) {
    const uint2 v = ld_w8(at);
    raw[0] = v.x, raw[1] = v.y;
  } else if constexpr (F == kFp8) {
    raw[0] = ld_w4(at);
  } else {
    raw[0] = ld_w2(at);
  }
}

// Slow path: the raw piece t of one row, element by element (or byte by byte), the columns past
// cols left 0. The same bytes land in the same words as the vector loads of the fast path.
template <int F>
__device__ __forceinline__ void load_piece_slow(const std::uint8_t* row, std::uint32_t t, const Params& p,
                                                std::uint32_t (&raw)[Piece<F>::kWords]) {
  const std::uint8_t* at = row + std::int64_t{t} * Piece<F>::kBytes;
  for (int k = 0; k < Piece<F>::kWords; ++k) raw[k] = 0;
  if constexpr (F == kFp4) {  // cols is a multiple of 32: pieces are whole
    raw[0] = p.bytewise ? (std::uint32_t{at[0]} | std::uint32_t{at[1]} << 8)
                        : std::uint32_t{*reinterpret_cast<const std::uint16_t*>(at)};
  } else {
    const std::int64_t c0 = std::int64_t{t} * 4;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      if (c0 + q >= p.cols) break;
      if constexpr (F == kF32) {
        const std::uint8_t* e = at + 4 * q;
        raw[q] = p.bytewise ? ld_u32_bytes(e) : *reinterpret_cast<const std::uint32_t*>(e);
      } else if constexpr (F == kBF16) {
        const std::uint8_t* e = at + 2 * q;
        const std::uint32_t h = p.bytewise ? (std::uint32_t{e[0]} | std::uint32_t{e[1]} << 8)
                                           : std::uint32_t{*reinterpret_cast<const std::uint16_t*>(e)};
        raw[q / 2] |= h << (16 * (q % 2));
      } else {
        raw[0] |= std::uint32_t{at[q]} << (8 * q);
      }
    }
  }
}

// Slow path: the scale bytes of piece t. FP4 and folded FP8 (block % 4 == 0): one byte; unfolded
// FP8: one byte per column (127, i.e. 1.0, past cols, where the weight is 0).
template <int F>
__device__ __forceinline__ std::uint32_t load_scale_slow(const std::uint8_t* srow, std::uint32_t t, const Params& p) {
  if constexpr (F == kFp4) {
    return srow[t >> 3];
  } else if constexpr (F == kFp8) {
    if (p.fp8_fold) return srow[t * 4 / p.block32];
    std::uint32_t bytes = 0;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const std::uint32_t c = t * 4 + q;
      bytes |= (c < p.cols ? std::uint32_t{srow[c / p.block32]} : 127u) << (8 * q);
    }
    return bytes;
  } else {
    static_cast<void>(srow), static_cast<void>(t), static_cast<void>(p);
    return 0;
  }
}

template <int M>
__device__ __forceinline__ void load_x_slow(const float* const (&xrow)[M], std::uint32_t t, std::int64_t cols,
                                            float4 (&xv)[M]) {
  const std::int64_t c0 = std::int64_t{t} * 4;
#pragma unroll
  for (int i = 0; i < M; ++i) {
    const float* at = xrow[i] + c0;
    xv[i].x = at[0];
    xv[i].y = c0 + 1 < cols ? at[1] : 0.0f;
    xv[i].z = c0 + 2 < cols ? at[2] : 0.0f;
    xv[i].w = c0 + 3 < cols ? at[3] : 0.0f;
  }
}

// ---- decoders (exact) --------------------------------------------------------------------------

#if defined(HIPPO_HIP)
// Four E4M3 bytes (byte k -> out[k]).
__device__ __forceinline__ void e4m3x4(std::uint32_t w, float (&out)[4]) {
  for (int k = 0; k < 4; ++k) out[k] = e4m3fn_to_f32(static_cast<std::uint8_t>(w >> (8 * k)));
}
// Two E4M3 bytes (low byte -> lo).
__device__ __forceinline__ void e4m3x2(std::uint32_t w, float& lo, float& hi) {
  lo = e4m3fn_to_f32(static_cast<std::uint8_t>(w));
  hi = e4m3fn_to_f32(static_cast<std::uint8_t>(w >> 8));
}
#else
// The hardware conversion (sm_89+): E4M3 -> f16 is exact, f16 -> f32 is exact, NaN stays NaN.
__device__ __forceinline__ void e4m3x4(std::uint32_t w, float (&out)[4]) {
  asm("{\n\t.reg .b16 l, h, a, b, c, d;\n\t.reg .b32 p, q;\n\t"
      "mov.b32 {l, h}, %4;\n\t"
      "cvt.rn.f16x2.e4m3x2 p, l;\n\t"
      "cvt.rn.f16x2.e4m3x2 q, h;\n\t"
      "mov.b32 {a, b}, p;\n\t"
      "mov.b32 {c, d}, q;\n\t"
      "cvt.f32.f16 %0, a;\n\tcvt.f32.f16 %1, b;\n\tcvt.f32.f16 %2, c;\n\tcvt.f32.f16 %3, d;\n\t}"
      : "=f"(out[0]), "=f"(out[1]), "=f"(out[2]), "=f"(out[3])
      : "r"(w));
}
__device__ __forceinline__ void e4m3x2(std::uint32_t w, float& lo, float& hi) {
  asm("{\n\t.reg .b16 l, h, a, b;\n\t.reg .b32 p;\n\t"
      "mov.b32 {l, h}, %2;\n\t"
      "cvt.rn.f16x2.e4m3x2 p, l;\n\t"
      "mov.b32 {a, b}, p;\n\t"
      "cvt.f32.f16 %0, a;\n\tcvt.f32.f16 %1, b;\n\t}"
      : "=f"(lo), "=f"(hi)
      : "r"(w));
}
#endif

// FP4 piece: 2 bytes, columns 0 and 1 in byte 0 (even column in the low nibble), 2 and 3 in byte 1.
// An E2M1 nibble s|e1 e0|m becomes the E4M3 byte s|0 0 e1 e0|m 0 0, whose value is exactly
// E2M1 · 2^-6 (normal and subnormal alike), so one hardware conversion decodes two columns.
// Two rows' pieces share the bit work: a in the low half of the word, b in the high half.
__device__ __forceinline__ void decode_fp4_pair(std::uint32_t a, std::uint32_t b, float (&wa)[4], float (&wb)[4]) {
  const std::uint32_t codes = a | b << 16;
  const std::uint32_t even = ((codes & 0x07070707u) << 2) | ((codes & 0x08080808u) << 4);  // columns 0, 2
  const std::uint32_t odd = ((codes >> 2) & 0x1C1C1C1Cu) | (codes & 0x80808080u);           // columns 1, 3
  float e[4], o[4];
  e4m3x4(even, e);
  e4m3x4(odd, o);
  wa[0] = e[0], wa[1] = o[0], wa[2] = e[1], wa[3] = o[1];
  wb[0] = e[2], wb[1] = o[2], wb[2] = e[3], wb[3] = o[3];
}
__device__ __forceinline__ void decode_fp4(std::uint32_t codes, float (&w)[4]) {
  const std::uint32_t even = ((codes & 0x0707u) << 2) | ((codes & 0x0808u) << 4);
  const std::uint32_t odd = ((codes >> 2) & 0x1C1Cu) | (codes & 0x8080u);
  e4m3x2(even, w[0], w[2]);
  e4m3x2(odd, w[1], w[3]);
}

// The 4 weights of a piece of each of the R rows, and the scale each partial sum takes (FP8
// fold, FP4). e8m0_table: the 256 E8M0 values (block shared memory).
template <int F, int R>
__device__ __forceinline__ void decode(const std::uint32_t (&raw)[R][Piece<F>::kWords], const std::uint32_t (&sraw)[R],
                                       bool fp8_fold, const float* e8m0_table, float (&w)[R][4], float (&scale)[R]) {
#pragma unroll
  for (int k = 0; k < R; ++k) {
    scale[k] = 1.0f;
    if constexpr (F == kF32) {
      for (int q = 0; q < 4; ++q) w[k][q] = __uint_as_float(raw[k][q]);
    } else if constexpr (F == kBF16) {
      w[k][0] = __uint_as_float(raw[k][0] << 16);
      w[k][1] = __uint_as_float(raw[k][0] & 0xFFFF0000u);
      w[k][2] = __uint_as_float(raw[k][1] << 16);
      w[k][3] = __uint_as_float(raw[k][1] & 0xFFFF0000u);
    } else if constexpr (F == kFp8) {
      e4m3x4(raw[k][0], w[k]);
      if (fp8_fold) {
        scale[k] = e8m0_table[sraw[k]];
      } else {
        for (int q = 0; q < 4; ++q) w[k][q] = __fmul_rn(w[k][q], e8m0_table[(sraw[k] >> (8 * q)) & 0xFF]);
      }
    } else {
      scale[k] = e8m0_table[sraw[k]];
      if constexpr (R % 2 == 0) {
        if (k % 2 == 1) decode_fp4_pair(raw[k - 1][0], raw[k][0], w[k - 1], w[k]);
      } else {
        decode_fp4(raw[k][0], w[k]);
      }
    }
  }
  static_cast<void>(sraw), static_cast<void>(fp8_fold), static_cast<void>(e8m0_table);
}

// One piece of R rows against M rows of x, into acc: the only arithmetic of the kernel.
template <int F, int M, int R>
__device__ __forceinline__ void accumulate(const std::uint32_t (&raw)[R][Piece<F>::kWords],
                                           const std::uint32_t (&sraw)[R], bool fp8_fold, const float* e8m0_table,
                                           const float4 (&xv)[M], float (&acc)[M][R]) {
  float w[R][4], scale[R];
  decode<F, R>(raw, sraw, fp8_fold, e8m0_table, w, scale);
#pragma unroll
  for (int k = 0; k < R; ++k) {
#pragma unroll
    for (int i = 0; i < M; ++i) {
      float part = __fmul_rn(xv[i].x, w[k][0]);
      part = __fmaf_rn(xv[i].y, w[k][1], part);
      part = __fmaf_rn(xv[i].z, w[k][2], part);
      part = __fmaf_rn(xv[i].w, w[k][3], part);
      if (F == kFp4 || (F == kFp8 && fp8_fold))
        acc[i][k] = __fmaf_rn(part, scale[k], acc[i][k]);
      else
        acc[i][k] = __fadd_rn(acc[i][k], part);
    }
  }
}

// Pieces in flight per lane and row: 32 to 48 registers of loaded weights per lane. FP8 and FP4
// pieces are small (4 and 2 bytes, plus a scale byte), so they get the larger budget.
template <int F, int M, int R>
struct Unroll {
  static constexpr int kRegs = Piece<F>::kWords + (Piece<F>::kScaled ? 1 : 0);
  static constexpr int kBudget = (Piece<F>::kScaled ? (M >= 4 ? 32 : 48) : (M >= 8 ? 24 : 32));
  static constexpr int value = kBudget / (kRegs * R) < 1 ? 1 : kBudget / (kRegs * R);
};

// One 32-lane group: rows [r0, r0 + R) of W, rows [i0, i0 + M) of x. kFast: whole aligned pieces
// (cols % 4 == 0, W and x aligned for vector loads, FP8 block 32), read U pieces ahead with
// vector loads at constant offsets; else R = 1 and element loads with the tail masked.
template <int F, int M, int R, bool kFast>
__global__ void __launch_bounds__(kThreads) linear_kernel(const Params p) {
  const int lane = static_cast<int>(threadIdx.x) % kLanes;
  const std::uint32_t m_tiles = static_cast<std::uint32_t>(p.m_tiles);  // the grid fits 31 bits
  const std::int64_t group = std::int64_t{blockIdx.x / m_tiles} * kGroupsPerBlock + threadIdx.x / kLanes;
  const std::int64_t i0 = std::int64_t{blockIdx.x % m_tiles} * M;
  const std::int64_t r0 = group * R;

  // The E8M0 decoder as a table: one shared-memory load instead of a few integer operations.
  __shared__ float e8m0_shared[Piece<F>::kScaled ? 256 : 1];
  const float* e8m0_table = e8m0_shared;
  if constexpr (Piece<F>::kScaled) {
    for (int b = static_cast<int>(threadIdx.x); b < 256; b += kThreads) e8m0_shared[b] = e8m0_to_f32(static_cast<std::uint8_t>(b));
    __syncthreads();
  }
  if (r0 >= p.rows) return;  // the whole 32-lane group leaves together

  const std::uint8_t* wrow[R];
  const std::uint8_t* srow[R];
#pragma unroll
  for (int k = 0; k < R; ++k) {
    const std::int64_t r = r0 + k < p.rows ? r0 + k : p.rows - 1;  // rows past the end: read, not written
    wrow[k] = p.data + r * p.row_bytes;
    srow[k] = F == kFp8 ? p.scales + (r / p.block) * p.scale_rows : F == kFp4 ? p.scales + r * p.scale_rows : nullptr;
  }
  const float* xrow[M];
#pragma unroll
  for (int i = 0; i < M; ++i) xrow[i] = p.x + (i0 + i < p.m ? i0 + i : p.m - 1) * p.cols;

  float acc[M][R];
#pragma unroll
  for (int i = 0; i < M; ++i)
#pragma unroll
    for (int k = 0; k < R; ++k) acc[i][k] = 0.0f;

  const std::uint32_t pieces = p.pieces;
  if constexpr (kFast) {
    constexpr int U = Unroll<F, M, R>::value;
    constexpr int kBytes = Piece<F>::kBytes;
    // Lane pointers; piece t0 + 32u sits u * 32 pieces further (its scale, FP4 and FP8 block 32
    // alike, 4u bytes further).
#pragma unroll
    for (int k = 0; k < R; ++k) {
      wrow[k] += lane * kBytes;
      if (srow[k] != nullptr) srow[k] += lane >> 3;
    }
#pragma unroll
    for (int i = 0; i < M; ++i) xrow[i] += 4 * lane;

    std::uint32_t t0 = lane;
    // One batch of U pieces per row: all loads first (U·R weight loads in flight), then the math.
    // kGuard: the lane's last batch, cut at pieces.
    auto batch = [&](auto guard) {
      constexpr bool kGuard = decltype(guard)::value;
      std::uint32_t raw[U][R][Piece<F>::kWords];
      std::uint32_t sraw[U][R];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const bool live = !kGuard || t0 + u * kLanes < pieces;
#pragma unroll
        for (int k = 0; k < R; ++k) {
#pragma unroll
          for (int j = 0; j < Piece<F>::kWords; ++j) raw[u][k][j] = 0;
          sraw[u][k] = 0;
          if (live) {
            load_piece_fast<F>(wrow[k] + u * kLanes * kBytes, raw[u][k]);
            if constexpr (Piece<F>::kScaled) sraw[u][k] = srow[k][4 * u];
          }
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (kGuard && t0 + u * kLanes >= pieces) break;
        float4 xv[M];
#pragma unroll
        for (int i = 0; i < M; ++i) xv[i] = ld_x4(xrow[i] + u * kLanes * 4);
        accumulate<F, M, R>(raw[u], sraw[u], true, e8m0_table, xv, acc);
      }
    };
    for (; t0 < pieces; t0 += kLanes * U) {
      if (t0 + (U - 1) * kLanes < pieces)
        batch(std::false_type{});
      else
        batch(std::true_type{});
#pragma unroll
      for (int k = 0; k < R; ++k) {
        wrow[k] += kLanes * U * kBytes;
        if constexpr (Piece<F>::kScaled) srow[k] += 4 * U;
      }
#pragma unroll
      for (int i = 0; i < M; ++i) xrow[i] += kLanes * U * 4;
    }
  } else {
    static_assert(R == 1, "the slow path reads one row per group");
    for (std::uint32_t t = lane; t < pieces; t += kLanes) {
      std::uint32_t raw[1][Piece<F>::kWords];
      std::uint32_t sraw[1];
      load_piece_slow<F>(wrow[0], t, p, raw[0]);
      sraw[0] = load_scale_slow<F>(srow[0], t, p);
      float4 xv[M];
      load_x_slow<M>(xrow, t, p.cols, xv);
      accumulate<F, M, R>(raw, sraw, p.fp8_fold != 0, e8m0_table, xv, acc);
    }
  }

#pragma unroll
  for (int i = 0; i < M; ++i) {
#pragma unroll
    for (int k = 0; k < R; ++k) {
      float sum = lane_group_sum(acc[i][k]);
      if (F == kFp4) sum = __fmul_rn(sum, 64.0f);  // the 2^-6 of decode_fp4
      if (lane == 0 && i0 + i < p.m && r0 + k < p.rows) p.y[(i0 + i) * p.rows + r0 + k] = sum;
    }
  }
}

template <int F, int M, int R, bool kFast>
void launch(const Params& p, std::int64_t blocks, cudaStream_t stream) {
  linear_kernel<F, M, R, kFast><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(p);
}

template <int F, int M>
void launch_rows(const Params& p, int r, bool fast, std::int64_t blocks, cudaStream_t stream) {
  if (!fast) return launch<F, M, 1, false>(p, blocks, stream);
  if constexpr (M < 8) {
    if (r == 4) return launch<F, M, 4, true>(p, blocks, stream);
  }
  if (r == 2) return launch<F, M, 2, true>(p, blocks, stream);
  launch<F, M, 1, true>(p, blocks, stream);
}

template <int F>
void launch_format(const Params& p, int tile, int r, bool fast, std::int64_t blocks, cudaStream_t stream) {
  switch (tile) {
    case 1: return launch_rows<F, 1>(p, r, fast, blocks, stream);
    case 2: return launch_rows<F, 2>(p, r, fast, blocks, stream);
    case 4: return launch_rows<F, 4>(p, r, fast, blocks, stream);
    default: return launch_rows<F, 8>(p, r, fast, blocks, stream);
  }
}

[[noreturn]] void fail(const char* what, const char* detail) {
  std::fprintf(stderr, "hippo: cuda linear: %s: %s\n", what, detail);
  std::abort();
}

bool aligned(const void* ptr, std::int64_t bytes) {
  return reinterpret_cast<std::uintptr_t>(ptr) % static_cast<std::uintptr_t>(bytes) == 0;
}

// Rows of W per 32-lane group: more rows reuse each x load more often, fewer rows make more groups
// to keep the memory system busy. Speed only: R never changes a result.
int rows_per_group(std::int64_t rows, int tile) {
  constexpr std::int64_t kWantGroups = 2048;  // ~16 groups per SM on a 132-SM part
  int r = 1;
  while (r < 4 && rows / (2 * r) >= kWantGroups) r *= 2;
  if (tile >= 8 && r > 2) r = 2;
  return r;
}

}  // namespace

void linear(const float* x, std::int64_t m, const DeviceWeight& w, float* y, cudaStream_t stream) {
  if (m <= 0 || w.rows <= 0) return;
  if (w.cols <= 0) fail("bad shape", "cols must be positive");

  Params p{};
  p.x = x;
  p.y = y;
  p.data = static_cast<const std::uint8_t*>(w.data);
  p.scales = w.scales;
  p.m = m;
  p.rows = w.rows;
  p.cols = w.cols;
  p.block = 1;
  p.block32 = 1;
  p.pieces = static_cast<std::uint32_t>((w.cols + 3) / 4);
  if (w.cols > 0x7FFFFFFF) fail("bad shape", "too many columns");

  int piece_bytes = 0, element_bytes = 1;
  switch (w.format) {
    case DeviceWeightFormat::kF32:
      p.row_bytes = w.cols * 4, piece_bytes = 16, element_bytes = 4;
      break;
    case DeviceWeightFormat::kBF16:
      p.row_bytes = w.cols * 2, piece_bytes = 8, element_bytes = 2;
      break;
    case DeviceWeightFormat::kFp8Block:
      if (w.block <= 0 || w.scales == nullptr) fail("bad FP8 weight", "block or scales missing");
      p.row_bytes = w.cols, piece_bytes = 4, element_bytes = 1;
      p.block = w.block;
      p.block32 = static_cast<std::uint32_t>(w.block < w.cols ? w.block : w.cols);  // c / block32 == c / block
      p.scale_rows = (w.cols + w.block - 1) / w.block;
      p.fp8_fold = w.block % 4 == 0;
      break;
    case DeviceWeightFormat::kFp4Row32:
      if (w.cols % 32 != 0 || w.scales == nullptr) fail("bad FP4 weight", "cols % 32 or scales missing");
      p.row_bytes = w.code_stride != 0 ? w.code_stride : w.cols / 2;
      p.scale_rows = w.scale_stride != 0 ? w.scale_stride : w.cols / 32;
      piece_bytes = 2, element_bytes = 2;
      break;
  }

  // Whole, aligned pieces of W and x: vector loads. Anything else reads the same bytes one element
  // (or one byte) at a time, into the same arithmetic.
  const bool fast = w.cols % 4 == 0 && aligned(x, 16) && aligned(w.data, piece_bytes) &&
                    p.row_bytes % piece_bytes == 0 && (w.format != DeviceWeightFormat::kFp8Block || w.block == 32);
  p.bytewise = !(aligned(w.data, element_bytes) && p.row_bytes % element_bytes == 0);

  const int tile = m >= 5 ? 8 : m >= 3 ? 4 : static_cast<int>(m);
  const int r = fast ? rows_per_group(w.rows, tile) : 1;
  p.m_tiles = (m + tile - 1) / tile;
  const std::int64_t groups = (w.rows + r - 1) / r;
  const std::int64_t blocks = (groups + kGroupsPerBlock - 1) / kGroupsPerBlock * p.m_tiles;
  if (blocks > 0x7FFFFFFF) fail("bad shape", "grid too large");

  switch (w.format) {
    case DeviceWeightFormat::kF32: launch_format<kF32>(p, tile, r, fast, blocks, stream); break;
    case DeviceWeightFormat::kBF16: launch_format<kBF16>(p, tile, r, fast, blocks, stream); break;
    case DeviceWeightFormat::kFp8Block: launch_format<kFp8>(p, tile, r, fast, blocks, stream); break;
    case DeviceWeightFormat::kFp4Row32: launch_format<kFp4>(p, tile, r, fast, blocks, stream); break;
  }
  check(cudaGetLastError(), "linear");
}

}  // namespace hippo::kernels::cuda
