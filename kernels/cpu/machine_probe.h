// What this CPU can do at most: memory bandwidth and FMA throughput, measured, plus a description
// of the machine. Benchmarks state their results as ratios to these figures (docs/BENCHMARKS.md),
// so that "fast" always means "this close to the physical limit".
#pragma once

#include "base/status.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hippo::kernels::cpu {

struct MachineInfo {
  int logical_cpus = 0;
  std::string cpu_model;                // /proc/cpuinfo "model name"
  std::vector<std::string> simd_flags;  // the SIMD extensions hippo's kernels care about
  std::uint64_t memory_bytes = 0;       // MemTotal
};

MachineInfo describe_machine();

struct BandwidthOptions {
  std::size_t bytes_per_array = std::size_t{256} << 20;  // 256 MiB: 8× a 32 MiB L3, so DRAM is measured
  int threads = 0;                                        // 0 = every logical CPU
  int repetitions = 5;                                    // best of N after one warm-up
};

struct BandwidthResult {
  double read_bytes_per_second = 0;   // sum over one array: the limit for streaming weights and KV
  double triad_bytes_per_second = 0;  // STREAM triad a = b + s*c, counted as 3 arrays (no write-allocate)
  int threads = 0;
  std::size_t bytes_per_array = 0;
};

// Fails (kInternal) if a kernel's result does not verify: a fast wrong answer is not a measurement.
Result<BandwidthResult> measure_memory_bandwidth(const BandwidthOptions& options);

struct FmaOptions {
  int threads = 0;                  // 0 = every logical CPU
  std::uint64_t iterations = 1u << 22;  // per chain per thread; ~0.1 s on a 3 GHz core at 1 FMA/cycle/lane
};

struct FmaResult {
  double flops_per_second = 0;  // fp32, one FMA = 2 flops
  std::string isa;              // "avx512f", "avx2+fma" or "scalar"
  int threads = 0;
};

Result<FmaResult> measure_peak_fma(const FmaOptions& options);

// The widest fp32 FMA instruction set this CPU runs, as measure_peak_fma will use it.
std::string best_fma_isa();

}  // namespace hippo::kernels::cpu
