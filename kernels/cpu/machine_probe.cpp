// Memory-bandwidth and peak-FMA probes. Each thread touches its own slice first (so pages land
// on its NUMA node), runs one warm-up, then the best of N timed passes counts.
#include "kernels/cpu/machine_probe.h"

#include <algorithm>
#include <barrier>
#include <bit>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <thread>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace hippo::kernels::cpu {
namespace {

int resolve_threads(int requested) {
  if (requested > 0) return requested;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Runs body(thread_index) on n threads that start together; returns the slowest thread's time,
// which is the time the pass took.
template <typename Body>
double timed_parallel(int n, Body body) {
  std::barrier start_line(n + 1);
  std::vector<double> seconds(static_cast<std::size_t>(n));
  std::vector<std::jthread> workers;
  for (int t = 0; t < n; ++t) {
    workers.emplace_back([&, t] {
      start_line.arrive_and_wait();
      auto start = std::chrono::steady_clock::now();
      body(t);
      seconds[static_cast<std::size_t>(t)] = seconds_since(start);
    });
  }
  start_line.arrive_and_wait();
  workers.clear();  // joins
  return *std::max_element(seconds.begin(), seconds.end());
}

}  // namespace

MachineInfo describe_machine() {
  MachineInfo info;
  info.logical_cpus = resolve_threads(0);
  static const char* const kInteresting[] = {"sse4_2", "avx", "avx2", "fma", "f16c", "avx512f",
                                             "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
                                             "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8",
                                             "asimd", "sve"};
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (info.cpu_model.empty() && key == "model name") info.cpu_model = value;
    if (info.simd_flags.empty() && (key == "flags" || key == "Features")) {
      std::istringstream words(value);
      std::vector<std::string> present{std::istream_iterator<std::string>(words), {}};
      for (const char* flag : kInteresting)
        if (std::find(present.begin(), present.end(), flag) != present.end()) info.simd_flags.push_back(flag);
    }
  }
  std::ifstream meminfo("/proc/meminfo");
  for (std::string key; meminfo >> key;) {
    std::uint64_t kib = 0;
    meminfo >> kib;
    if (key == "MemTotal:") {
      info.memory_bytes = kib * 1024;
      break;
    }
    meminfo.ignore(256, '\n');
  }
  return info;
}

Result<BandwidthResult> measure_memory_bandwidth(const BandwidthOptions& options) {
  const int n_threads = resolve_threads(options.threads);
  const std::size_t n = options.bytes_per_array / sizeof(double);
  if (n < static_cast<std::size_t>(n_threads) * 1024)
    return make_error(ErrorCode::kInvalidArgument, "bandwidth probe: {} bytes per array is too small for {} threads",
                      options.bytes_per_array, n_threads);
  if (options.repetitions < 1)
    return make_error(ErrorCode::kInvalidArgument, "bandwidth probe: repetitions must be at least 1");

  // Uninitialised storage, so that each thread's first touch places its own slice.
  std::unique_ptr<double[]> a(new double[n]), b(new double[n]), c(new double[n]);
  auto slice = [&](int t) {
    std::size_t per = n / static_cast<std::size_t>(n_threads);
    std::size_t begin = per * static_cast<std::size_t>(t);
    return std::pair{begin, t == n_threads - 1 ? n : begin + per};
  };
  timed_parallel(n_threads, [&](int t) {
    auto [begin, end] = slice(t);
    for (std::size_t i = begin; i < end; ++i) {
      a[i] = 0.0;
      b[i] = 1.0;
      c[i] = 2.0;
    }
  });

  // Four quarters of the thread's slice at once (one stream per thread leaves the memory system
  // idle between the prefetcher's requests: the linear kernels, which read several weight rows at
  // once, measured more than that "limit"), summed as integers so that the adds may vectorise.
  std::vector<std::uint64_t> partial_sums(static_cast<std::size_t>(n_threads));
  auto read_pass = [&](int t) {
    auto [begin, end] = slice(t);
    const std::size_t quarter = (end - begin) / 4;
    const auto* q0 = reinterpret_cast<const std::uint64_t*>(b.get() + begin);
    const std::uint64_t *q1 = q0 + quarter, *q2 = q1 + quarter, *q3 = q2 + quarter;
    std::uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (std::size_t i = 0; i < quarter; ++i) {
      s0 += q0[i];
      s1 += q1[i];
      s2 += q2[i];
      s3 += q3[i];
    }
    for (std::size_t i = begin + 4 * quarter; i < end; ++i) s0 += std::bit_cast<std::uint64_t>(b[i]);
    partial_sums[static_cast<std::size_t>(t)] = s0 + s1 + s2 + s3;
  };
  constexpr double kScale = 3.0;
  auto triad_pass = [&](int t) {
    auto [begin, end] = slice(t);
    for (std::size_t i = begin; i < end; ++i) a[i] = b[i] + kScale * c[i];
  };

  double best_read = 1e30, best_triad = 1e30;
  for (int rep = 0; rep <= options.repetitions; ++rep) {  // rep 0 is the warm-up
    double r = timed_parallel(n_threads, read_pass);
    double tr = timed_parallel(n_threads, triad_pass);
    if (rep == 0) continue;
    best_read = std::min(best_read, r);
    best_triad = std::min(best_triad, tr);
  }

  std::uint64_t total = 0;  // n times the bits of 1.0, modulo 2^64
  for (std::uint64_t s : partial_sums) total += s;
  if (total != n * std::bit_cast<std::uint64_t>(1.0))
    return make_error(ErrorCode::kInternal, "bandwidth probe: read pass summed {:#x} instead of {:#x}", total,
                      n * std::bit_cast<std::uint64_t>(1.0));
  for (std::size_t i = 0; i < n; i += 4099)
    if (a[i] != 1.0 + kScale * 2.0)
      return make_error(ErrorCode::kInternal, "bandwidth probe: triad wrote {} at {}", a[i], i);

  const double bytes = static_cast<double>(n * sizeof(double));
  return BandwidthResult{bytes / best_read, 3 * bytes / best_triad, n_threads, n * sizeof(double)};
}

namespace {

// Each kernel runs kChains independent multiply-add chains, enough to cover the FMA latency
// (4 cycles) times the FMA ports (2) with room to spare: 12 >= 4 × 2.
constexpr int kChains = 12;
constexpr float kMul = 0.999999f, kAdd = 1e-6f;  // converges towards 1: no overflow, no denormals

#if defined(__x86_64__)
__attribute__((target("avx512f"))) float fma_chains_avx512(std::uint64_t iterations) {
  __m512 acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm512_set1_ps(static_cast<float>(k));
  const __m512 m = _mm512_set1_ps(kMul), a = _mm512_set1_ps(kAdd);
  for (std::uint64_t i = 0; i < iterations; ++i)
    for (int k = 0; k < kChains; ++k) acc[k] = _mm512_fmadd_ps(acc[k], m, a);
  __m512 s = acc[0];
  for (int k = 1; k < kChains; ++k) s = _mm512_add_ps(s, acc[k]);
  // Not _mm512_reduce_add_ps: g++ 12's header trips -Wuninitialized inside it.
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  float total = 0;
  for (float v : lanes) total += v;
  return total;
}

__attribute__((target("avx2,fma"))) float fma_chains_avx2(std::uint64_t iterations) {
  __m256 acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm256_set1_ps(static_cast<float>(k));
  const __m256 m = _mm256_set1_ps(kMul), a = _mm256_set1_ps(kAdd);
  for (std::uint64_t i = 0; i < iterations; ++i)
    for (int k = 0; k < kChains; ++k) acc[k] = _mm256_fmadd_ps(acc[k], m, a);
  __m256 s = acc[0];
  for (int k = 1; k < kChains; ++k) s = _mm256_add_ps(s, acc[k]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  float total = 0;
  for (float v : lanes) total += v;
  return total;
}
#endif

float fma_chains_scalar(std::uint64_t iterations) {
  float acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = static_cast<float>(k);
  for (std::uint64_t i = 0; i < iterations; ++i)
    for (int k = 0; k < kChains; ++k) acc[k] = std::fma(acc[k], kMul, kAdd);
  float total = 0;
  for (float v : acc) total += v;
  return total;
}

}  // namespace

std::string best_fma_isa() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f")) return "avx512f";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "avx2+fma";
#endif
  return "scalar";
}

Result<FmaResult> measure_peak_fma(const FmaOptions& options) {
  const int n_threads = resolve_threads(options.threads);
  if (options.iterations == 0) return make_error(ErrorCode::kInvalidArgument, "FMA probe: iterations must be positive");
  const std::string isa = best_fma_isa();
  float (*kernel)(std::uint64_t) = fma_chains_scalar;
  int lanes = 1;
#if defined(__x86_64__)
  if (isa == "avx512f") kernel = fma_chains_avx512, lanes = 16;
  if (isa == "avx2+fma") kernel = fma_chains_avx2, lanes = 8;
#endif
  std::vector<float> results(static_cast<std::size_t>(n_threads));
  auto pass = [&](int t) { results[static_cast<std::size_t>(t)] = kernel(options.iterations); };
  timed_parallel(n_threads, pass);  // warm-up: lets the clock settle at its vector frequency
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) best = std::min(best, timed_parallel(n_threads, pass));

  // Every lane of chain k runs the same recurrence, so a thread's total must match the scalar one.
  const float expected = fma_chains_scalar(options.iterations) * static_cast<float>(lanes);
  for (float r : results)
    if (!(std::fabs(r - expected) <= 1e-3f * std::fabs(expected)))
      return make_error(ErrorCode::kInternal, "FMA probe: {} kernel computed {} instead of {}", isa, r, expected);

  const double flops = 2.0 * lanes * kChains * static_cast<double>(options.iterations) * n_threads;
  return FmaResult{flops / best, isa, n_threads};
}

}  // namespace hippo::kernels::cpu
