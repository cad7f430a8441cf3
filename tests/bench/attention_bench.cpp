// The CPU attention op (kernels/cpu/attention_op.cpp) on the shapes a long prefill gives it: a
// block of 64 rows with a 128-key window each and 512 selected compressed entries each, drawn from a
// pool of decoded entries (1,330 per block: the mean union of a block's selections measured on a
// 4K-token small-fullkv prefill); and one decode row. Counter GFLOPps: the scores' and the
// weighted sum's multiply-adds (4·heads·dim per key of a row), against the FMA peak of
// `hippo bench machine`.
// Run: build/release/tests/kernels_bench --benchmark_filter=attention --benchmark_repetitions=3
#include "kernels/cpu/model_ops.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace kernels = hippo::kernels;

namespace {

constexpr std::int64_t kWindow = 128, kSelected = 512, kPool = 1330;

void run(benchmark::State& state, std::int64_t rows, std::int64_t heads, std::int64_t dim, int threads) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto fill = [&](std::vector<float>& v) { std::generate(v.begin(), v.end(), [&] { return normal(rng); }); };
  const std::int64_t n_keys = kWindow - 1 + rows;  // the first row's window and one more key per row
  std::vector<float> q(static_cast<size_t>(rows * heads * dim)), keys(static_cast<size_t>(n_keys * dim)),
      pool_rows(static_cast<size_t>(kPool * dim)), out(static_cast<size_t>(rows * heads * dim));
  std::vector<float> sinks(static_cast<size_t>(heads), 0.5f);
  fill(q);
  fill(keys);
  fill(pool_rows);
  std::vector<const float*> key_rows, selected;
  for (std::int64_t k = 0; k < n_keys; ++k) key_rows.push_back(&keys[static_cast<size_t>(k * dim)]);
  std::vector<std::int64_t> window_first, window_count, selected_offset{0};
  std::vector<std::int64_t> entries(static_cast<size_t>(kPool));
  std::iota(entries.begin(), entries.end(), 0);
  for (std::int64_t i = 0; i < rows; ++i) {
    window_first.push_back(i);
    window_count.push_back(kWindow);
    std::shuffle(entries.begin(), entries.end(), rng);
    std::vector<std::int64_t> pick(entries.begin(), entries.begin() + kSelected);
    std::sort(pick.begin(), pick.end());  // a selection is ascending
    for (std::int64_t e : pick) selected.push_back(&pool_rows[static_cast<size_t>(e * dim)]);
    selected_offset.push_back(static_cast<std::int64_t>(selected.size()));
  }
  kernels::AttentionArgs a;
  a.rows = rows;
  a.heads = heads;
  a.dim = dim;
  a.scale = 1.0f / std::sqrt(static_cast<float>(dim));
  a.sinks = sinks.data();
  a.q = q.data();
  a.keys = key_rows.data();
  a.n_keys = n_keys;
  a.window_first = window_first.data();
  a.window_count = window_count.data();
  a.selected = selected.data();
  a.selected_offset = selected_offset.data();
  a.out = out.data();
  kernels::cpu::ThreadPool pool(threads);
  for (auto _ : state) {
    kernels::cpu::attention(a, pool);
    benchmark::DoNotOptimize(out.data());
  }
  const double flops = 4.0 * static_cast<double>(rows * heads * dim * (kWindow + kSelected));
  state.counters["GFLOPps"] =
      benchmark::Counter(flops * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
  state.counters["rows_per_s"] =
      benchmark::Counter(static_cast<double>(rows) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

struct Case {
  const char* name;
  std::int64_t rows, heads, dim;
};

// small-fullkv (4 heads of 512) and the release (64 heads of 512): a prefill block and a decode row.
const Case kCases[] = {{"small_fullkv/prefill_block", 64, 4, 512}, {"small_fullkv/decode_row", 1, 4, 512},
                       {"release/prefill_block", 64, 64, 512},     {"release/decode_row", 1, 64, 512}};

const bool attention_benchmarks_registered = [] {
  for (const Case& c : kCases) {
    for (int threads : {1, 2}) {
      const std::string name = std::string("attention/") + c.name + "/threads" + std::to_string(threads);
      benchmark::RegisterBenchmark(name.c_str(), [c, threads](benchmark::State& s) { run(s, c.rows, c.heads, c.dim, threads); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
  return true;
}();

}  // namespace
