// The CPU linear layer on V4.1-Flash shapes, per weight format and instruction set.
//   decode  (m = 1):  bound by reading the weights; counter weight_GBps, compare with
//                     `hippo bench machine` read bandwidth.
//   prefill (m = 64): bound by FMA throughput; counter GFLOPps, compare with the FMA peak.
// Run: build/release/tests/linear_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only
#include "kernels/cpu/linear.h"

#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

namespace kernels = hippo::kernels;
using kernels::WeightFormat;

namespace {

struct Shape {
  WeightFormat format;
  std::int64_t rows, cols;
  const char* what;
};

// wq_a of V4.1 (FP8, [1280, 5120]) and one routed expert's w1 (FP4, [2304, 2560]), plus the
// embedding-sized BF16 and F32 cases at the wq_a shape.
const Shape kShapes[] = {
    {WeightFormat::kFp8Block, 1280, 5120, "fp8 wq_a"},
    {WeightFormat::kFp4Row32, 2304, 2560, "fp4 expert w1"},
    {WeightFormat::kBF16, 1280, 5120, "bf16"},
    {WeightFormat::kF32, 1280, 5120, "f32"},
};

double weight_bytes(const Shape& s) {
  const double n = static_cast<double>(s.rows * s.cols);
  switch (s.format) {
    case WeightFormat::kF32: return 4 * n;
    case WeightFormat::kBF16: return 2 * n;
    case WeightFormat::kFp8Block: return n + n / (32.0 * 32.0);
    case WeightFormat::kFp4Row32: return n / 2 + n / 32;
  }
  return 0;
}

void run(benchmark::State& state, const Shape& shape, const std::string& isa, std::int64_t m) {
  std::mt19937 rng(1);
  std::uniform_int_distribution<int> byte(0, 0x7E), scale(120, 130);
  std::vector<std::uint8_t> data(static_cast<std::size_t>(weight_bytes(shape)) + 16), scales(shape.rows * shape.cols / 32 + 1);
  for (auto& b : data) b = static_cast<std::uint8_t>(byte(rng));
  for (auto& s : scales) s = static_cast<std::uint8_t>(scale(rng));
  kernels::WeightView w{shape.format, data.data(), scales.data(), shape.rows, shape.cols, 32};
  std::vector<float> x(static_cast<std::size_t>(m * shape.cols), 0.5f), y(static_cast<std::size_t>(m * shape.rows));
  kernels::cpu::ThreadPool pool(0);
  for (auto _ : state) {
    if (auto s = kernels::cpu::linear_with_isa(isa, x.data(), m, w, y.data(), pool); !s.ok()) {
      state.SkipWithError(s.message().c_str());
      break;
    }
    benchmark::DoNotOptimize(y.data());
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["weight_GBps"] = benchmark::Counter(weight_bytes(shape) * iters / 1e9, benchmark::Counter::kIsRate);
  state.counters["GFLOPps"] =
      benchmark::Counter(2.0 * static_cast<double>(m * shape.rows * shape.cols) * iters / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(std::string(shape.what) + " " + isa);
}

const bool linear_benchmarks_registered = [] {
  for (const std::string& isa : kernels::cpu::runnable_linear_isas())
    for (const Shape& shape : kShapes)
      for (std::int64_t m : {1, 64}) {
        const std::string name = std::string("linear/") + kernels::weight_format_name(shape.format) + "/" + isa +
                                 "/m" + std::to_string(m);
        benchmark::RegisterBenchmark(name.c_str(), [shape, isa, m](benchmark::State& s) { run(s, shape, isa, m); })
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
      }
  return true;
}();

}  // namespace
