// The CUDA runtime and device builtins emulated on CPU threads, so that scripts/gpu_emulate can run
// the GPU backend's real kernels and the op-parity tests on a machine without a GPU. It shadows
// kernels/cuda/gpu_runtime.h (it comes first on the include path). Each block runs on its own set of
// threads, one per GPU thread, blocks one after another: __syncthreads is a barrier, a warp shuffle
// a barrier and an exchange through memory, __shared__ a function-local static, device memory
// malloc. It checks the kernels' logic (indexing, reductions, exact codecs, the backend's staging),
// never the hardware: not the memory model, not speed, not the CUDA-only paths (the kernels are
// built with HIPPO_HIP, their portable branches).
#pragma once
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
#include <algorithm>
#define __device__
#define __global__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(x)
#define __shared__ static
struct uint4 { unsigned x, y, z, w; };
struct uint2 { unsigned x, y; };
struct float4 { float x, y, z, w; };
struct dim3 { unsigned x = 1, y = 1, z = 1; dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {} };
inline thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;
typedef int cudaError_t;
typedef void* cudaStream_t;
typedef void* cudaEvent_t;
constexpr int cudaSuccess = 0;
constexpr int cudaErrorInvalidValue = 1;
constexpr int cudaStreamNonBlocking = 1;
enum { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };
inline int cudaGetLastError() { return 0; }
inline const char* cudaGetErrorString(int e) { return e ? "emulated error" : "no error"; }
inline int cudaMalloc(void** p, std::size_t n) { *p = std::aligned_alloc(256, (n + 255) / 256 * 256); std::memset(*p, 0xCD, (n + 255) / 256 * 256); return 0; }
inline int cudaFree(void* p) { std::free(p); return 0; }
inline int cudaMemcpy(void* d, const void* s, std::size_t n, int) { std::memcpy(d, s, n); return 0; }
inline int cudaMemcpyAsync(void* d, const void* s, std::size_t n, int, cudaStream_t) { std::memcpy(d, s, n); return 0; }
inline int cudaSetDevice(int) { return 0; }
inline int cudaGetDeviceCount(int* n) { *n = 1; return 0; }
inline int cudaStreamCreateWithFlags(cudaStream_t* s, int) { *s = nullptr; return 0; }
inline int cudaStreamDestroy(cudaStream_t) { return 0; }
inline int cudaStreamSynchronize(cudaStream_t) { return 0; }
inline int cudaEventCreate(cudaEvent_t*) { return 0; }
inline int cudaEventDestroy(cudaEvent_t) { return 0; }
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline float __fmul_rn(float a, float b) { volatile float r = a * b; return r; }
inline float __fadd_rn(float a, float b) { volatile float r = a + b; return r; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
template <class T> T __ldg(const T* p) { return *p; }
using std::max; using std::min; using std::signbit;
inline float fmaxf(float a, float b) { return std::fmax(a, b); }
struct EmuBlock {
  std::barrier<>* block_barrier;
  std::vector<std::barrier<>*> warp_barrier;
  std::vector<float*> warp_vals;
  unsigned char* dynamic_shared;
};
inline thread_local EmuBlock* emu_block;
inline void __syncthreads() { emu_block->block_barrier->arrive_and_wait(); }
inline float emu_shfl_xor(float v, int offset) {
  int w = threadIdx.x / 32, l = threadIdx.x % 32;
  float* vals = emu_block->warp_vals[w];
  emu_block->warp_barrier[w]->arrive_and_wait();
  vals[l] = v;
  emu_block->warp_barrier[w]->arrive_and_wait();
  float r = vals[l ^ offset];
  emu_block->warp_barrier[w]->arrive_and_wait();
  return r;
}
inline float __shfl_xor(float v, int offset) { return emu_shfl_xor(v, offset); }
inline float __shfl_xor_sync(unsigned, float v, int offset) { return emu_shfl_xor(v, offset); }
template <class K, class... A>
void emu_launch(K kernel, dim3 grid, dim3 block, std::size_t shared, A... args) {
  std::vector<unsigned char> dyn(shared + 16);
  for (unsigned by = 0; by < grid.y; ++by)
    for (unsigned bx = 0; bx < grid.x; ++bx) {
      const unsigned n = block.x;
      std::barrier<> bb(n);
      const unsigned warps = (n + 31) / 32;
      std::vector<std::unique_ptr<std::barrier<>>> wbs;
      std::vector<std::barrier<>*> wb;
      std::vector<std::vector<float>> vals(warps, std::vector<float>(32));
      std::vector<float*> vp;
      for (unsigned w = 0; w < warps; ++w) { wbs.emplace_back(new std::barrier<>(std::min(32u, n - 32 * w))); wb.push_back(wbs.back().get()); vp.push_back(vals[w].data()); }
      EmuBlock eb{&bb, wb, vp, dyn.data()};
      std::vector<std::thread> ts;
      for (unsigned t = 0; t < n; ++t)
        ts.emplace_back([&, t] { threadIdx = dim3(t); blockIdx = dim3(bx, by); blockDim = block; gridDim = grid; emu_block = &eb; kernel(args...); });
      for (auto& t : ts) t.join();
    }
}
inline void* emu_dynamic_shared() { return emu_block->dynamic_shared; }
