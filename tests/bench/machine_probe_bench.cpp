// Google Benchmark view of the machine probes: the same kernels, timed by the framework, so the
// figures in docs/BENCHMARKS.md can be cross-checked (`kernels_bench --benchmark_repetitions=5`).
#include "kernels/cpu/machine_probe.h"

#include <benchmark/benchmark.h>

namespace cpu = hippo::kernels::cpu;

static void BM_MemoryReadBandwidth(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0)) << 20;
  for (auto _ : state) {
    auto r = cpu::measure_memory_bandwidth({bytes, 0, 1});
    if (!r.ok()) {
      state.SkipWithError(r.status().message().c_str());
      break;
    }
    state.counters["read_GBps"] = r->read_bytes_per_second / 1e9;
    state.counters["triad_GBps"] = r->triad_bytes_per_second / 1e9;
  }
}
BENCHMARK(BM_MemoryReadBandwidth)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond)->Iterations(1);

static void BM_PeakFma(benchmark::State& state) {
  for (auto _ : state) {
    auto r = cpu::measure_peak_fma({static_cast<int>(state.range(0)), 1u << 20});
    if (!r.ok()) {
      state.SkipWithError(r.status().message().c_str());
      break;
    }
    state.counters["GFLOPps"] = r->flops_per_second / 1e9;
  }
}
BENCHMARK(BM_PeakFma)->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->Iterations(1);
