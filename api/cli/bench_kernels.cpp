// `hippo bench kernels`: the CPU linear layer y = x · Wᵀ (kernels::cpu::linear) per weight format and
// batch size m, as weight GB/s and GFLOP/s and as ratios to this machine's limits, which the same
// run measures at the same thread count (read bandwidth and fp32 FMA peak, as `hippo bench machine`,
// before and after the kernels; the higher figure counts).
// Decode (small m) is bound by reading W, prefill (large m) by the FMAs.
//
// Method. W [rows, cols] holds random valid bytes of its format (f32 and bf16: normal values; fp8:
// normal values quantised as a checkpoint holds them, each 32 × 32 block to E4M3 under the E8M0
// scale that puts its largest magnitude in (224, 448], so that zeros and subnormals are as rare as
// there, with the special blocks marked where the CPU backend would mark them for the ISA; fp4 E2M1
// with an E8M0 scale per 32, scales 2^-7..2^3, codes as the CPU backend keeps them for the ISA),
// x [m, cols] random normal fp32, all seeded. Decode must read DRAM, not the
// cache: when W is smaller than 4x the L3 (its size from sysfs, 32 MiB when sysfs does not say),
// the bench keeps several distinct copies of W and rotates through them, call after call, so that
// each pass touches more than 4x the L3. Each timed run repeats the call for at least --min-time
// seconds (and one whole rotation); the best of --repetitions runs after a warm-up counts.
//
// Before timing, the result is checked against kernels::ref::linear on the first and the last 64
// output rows, for the first and the last 4 rows of x, with the normalised error of
// tests/kernels/linear_test.cpp (max |cpu - ref| / sum |x·w|) below 1e-5: a fast wrong answer is
// not a measurement, so a mismatch fails the command.
//
// scripts/bench_ggml_peer.sh times ggml's matrix product the same way for the formats of the same
// size (f32, bf16, q8_0 for fp8, mxfp4 for fp4) and prints JSON lines with the same field names.
#include "api/cli/bench_spread.h"
#include "api/cli/cli.h"
#include "api/cli/clock.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/machine_probe.h"
#include "kernels/cpu/thread_pool.h"
#ifdef HIPPO_HAVE_GPU
#include "kernels/cuda/linear_timing.h"
#endif
#include "kernels/ref/linear_ref.h"
#include "kernels/ref/numeric_formats.h"
#include "kernels/weight_view.h"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

namespace hippo::cli {
namespace {

using Clock = std::chrono::steady_clock;
using kernels::WeightFormat;
using kernels::WeightView;

constexpr std::int64_t kFp8Block = 32;
constexpr double kTolerance = 1e-5;
constexpr std::int64_t kCheckedRows = 64;  // output rows checked at each end of W
constexpr std::int64_t kCheckedX = 4;      // rows of x checked at each end

struct KernelsBenchOptions {
  std::int64_t rows = 14336;
  std::int64_t cols = 4096;
  std::vector<std::int64_t> ms = {1, 512};
  std::vector<std::string> formats = {"all"};
  int threads = 0;
  int repetitions = 3;
  double min_time = 0.2;          // seconds per timed run
  int copies = 0;                 // copies of W rotated; 0: enough to exceed 4x the L3
  std::size_t bandwidth_bytes = 0;  // 0: max(256 MiB, 8x the L3)
  std::string isa;                // empty: what linear() dispatches to
  std::string backend = "cpu";    // cpu, or cuda: the GPU kernel on device buffers
  std::uint64_t seed = 1;
  bool json = false;
};

struct FormatInfo {
  WeightFormat format;
  const char* name;       // as --format spells it
  const char* ggml_peer;  // ggml's type of the same size (scripts/bench_ggml_peer.sh)
};

constexpr FormatInfo kFormats[] = {
    {WeightFormat::kF32, "f32", "f32"},
    {WeightFormat::kBF16, "bf16", "bf16"},
    {WeightFormat::kFp8Block, "fp8", "q8_0"},
    {WeightFormat::kFp4Row32, "fp4", "mxfp4"},
};

struct L3Size {
  std::uint64_t bytes = std::uint64_t{32} << 20;
  bool from_sysfs = false;
};

// /sys/devices/system/cpu/cpu0/cache/index3/size reads like "32768K"; 32 MiB when it is missing or odd.
L3Size read_l3_size() {
  L3Size l3;
  std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index3/size");
  std::string text;
  if (!(in >> text)) return l3;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (end == text.c_str() || value == 0) return l3;
  std::uint64_t scale = 0;
  switch (*end) {
    case '\0': scale = 1; break;
    case 'K': case 'k': scale = std::uint64_t{1} << 10; break;
    case 'M': case 'm': scale = std::uint64_t{1} << 20; break;
    case 'G': case 'g': scale = std::uint64_t{1} << 30; break;
    default: return l3;
  }
  l3.bytes = value * scale;
  l3.from_sysfs = true;
  return l3;
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// The bytes of W's values and of its scales, as the kernels read them.
struct WeightSizes {
  std::size_t data = 0, scales = 0;
  std::size_t total() const { return data + scales; }
};

WeightSizes weight_sizes(WeightFormat format, std::int64_t rows, std::int64_t cols) {
  const auto n = static_cast<std::size_t>(rows * cols);
  switch (format) {
    case WeightFormat::kF32: return {4 * n, 0};
    case WeightFormat::kBF16: return {2 * n, 0};
    case WeightFormat::kFp8Block:
      return {n, static_cast<std::size_t>(ceil_div(rows, kFp8Block) * ceil_div(cols, kFp8Block))};
    case WeightFormat::kFp4Row32: return {n / 2, static_cast<std::size_t>(rows * cols / 32)};
  }
  return {};
}

// splitmix64: fast, seeded bytes for the quantised formats (hundreds of MB at the default shape).
struct SplitMix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
};

struct FreeDeleter {
  void operator()(std::uint8_t* p) const { std::free(p); }
};

// `copies` distinct copies of one random W, each page-aligned, and a view of each.
class WeightCopies {
 public:
  // FP4 in lane order where the CPU backend would keep it so for `isa` (linear.h's fp4_lane_order_pays).
  static Result<WeightCopies> make(WeightFormat format, std::int64_t rows, std::int64_t cols, int copies,
                                   std::uint64_t seed, const std::string& isa) {
    WeightCopies w;
    w.sizes_ = weight_sizes(format, rows, cols);
    const std::size_t page = 4096;
    const std::size_t data_stride = (w.sizes_.data + page - 1) / page * page;
    const std::size_t scale_stride = (w.sizes_.scales + page - 1) / page * page;
    w.stride_ = data_stride + scale_stride;
    const std::size_t total = w.stride_ * static_cast<std::size_t>(copies);
    w.bytes_.reset(static_cast<std::uint8_t*>(std::aligned_alloc(page, total)));
    if (!w.bytes_) {
      return make_error(ErrorCode::kResourceExhausted, "bench kernels: cannot allocate {} copies of W ({} bytes)",
                        copies, total);
    }
    std::uint8_t* data = w.bytes_.get();
    std::uint8_t* scales = data + data_stride;
    fill(format, rows, cols, seed, data, scales, w.sizes_);
    if (format == WeightFormat::kFp8Block && kernels::cpu::fp8_special_blocks_pay(isa)) {
      w.fp8_special_blocks_.resize(w.sizes_.scales);
      kernels::mark_fp8_special_blocks(WeightView{format, data, scales, rows, cols, kFp8Block}, 0, rows,
                                       w.fp8_special_blocks_.data());
    }
    const bool lane_order = format == WeightFormat::kFp4Row32 && kernels::cpu::fp4_lane_order_pays(isa);
    if (lane_order) {
      std::vector<std::uint8_t> packed(data, data + w.sizes_.data);
      kernels::fp4_to_lane_order(WeightView{format, packed.data(), scales, rows, cols}, data);
    }
    for (int c = 1; c < copies; ++c)
      std::memcpy(data + w.stride_ * static_cast<std::size_t>(c), data, w.stride_);
    for (int c = 0; c < copies; ++c) {
      std::uint8_t* base = data + w.stride_ * static_cast<std::size_t>(c);
      WeightView view{format, base, w.sizes_.scales > 0 ? base + data_stride : nullptr, rows, cols,
                      format == WeightFormat::kFp8Block ? kFp8Block : 0};
      view.lane_order = lane_order;
      if (!w.fp8_special_blocks_.empty()) view.fp8_special_blocks = w.fp8_special_blocks_.data();  // the copies' bytes are equal
      HIPPO_RETURN_IF_ERROR(view.validate());
      w.views_.push_back(view);
    }
    return w;
  }

  const std::vector<WeightView>& views() const { return views_; }
  const WeightSizes& sizes() const { return sizes_; }

 private:
  static void fill(WeightFormat format, std::int64_t rows, std::int64_t cols, std::uint64_t seed, std::uint8_t* data,
                   std::uint8_t* scales, const WeightSizes& sizes) {
    const auto n = static_cast<std::size_t>(rows * cols);
    if (format == WeightFormat::kF32 || format == WeightFormat::kBF16) {
      std::mt19937_64 rng(seed);
      std::normal_distribution<float> normal(0.0f, 1.0f);
      for (std::size_t i = 0; i < n; ++i) {
        const float v = normal(rng);
        if (format == WeightFormat::kF32) {
          std::memcpy(data + 4 * i, &v, 4);
        } else {
          std::uint32_t bits;
          std::memcpy(&bits, &v, 4);
          const auto half = static_cast<std::uint16_t>(bits >> 16);
          std::memcpy(data + 2 * i, &half, 2);
        }
      }
      return;
    }
    if (format == WeightFormat::kFp8Block) return fill_fp8(rows, cols, seed, data, scales);
    SplitMix64 rng{seed};
    for (std::size_t i = 0; i < sizes.data; i += 8) {
      const std::uint64_t r = rng.next();
      std::memcpy(data + i, &r, std::min<std::size_t>(8, sizes.data - i));
    }
    for (std::size_t i = 0; i < sizes.scales; ++i) scales[i] = static_cast<std::uint8_t>(120 + rng.next() % 11);
  }

  static void fill_fp8(std::int64_t rows, std::int64_t cols, std::uint64_t seed, std::uint8_t* data, std::uint8_t* scales) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> values(static_cast<std::size_t>(rows * cols));
    for (float& v : values) v = normal(rng);
    const std::int64_t scale_cols = ceil_div(cols, kFp8Block);
    for (std::int64_t rb = 0; rb < ceil_div(rows, kFp8Block); ++rb)
      for (std::int64_t cb = 0; cb < scale_cols; ++cb) {
        const std::int64_t r1 = std::min(rows, (rb + 1) * kFp8Block), c1 = std::min(cols, (cb + 1) * kFp8Block);
        float amax = 0;
        for (std::int64_t r = rb * kFp8Block; r < r1; ++r)
          for (std::int64_t c = cb * kFp8Block; c < c1; ++c) amax = std::max(amax, std::fabs(values[r * cols + c]));
        const int exponent = static_cast<int>(std::ceil(std::log2(amax / 448.0f)));
        scales[rb * scale_cols + cb] = static_cast<std::uint8_t>(127 + exponent);
        for (std::int64_t r = rb * kFp8Block; r < r1; ++r)
          for (std::int64_t c = cb * kFp8Block; c < c1; ++c)
            data[r * cols + c] = kernels::ref::f32_to_e4m3fn(std::ldexp(values[r * cols + c], -exponent));
      }
  }

  WeightSizes sizes_;
  std::size_t stride_ = 0;
  std::unique_ptr<std::uint8_t, FreeDeleter> bytes_;
  std::vector<WeightView> views_;
  std::vector<std::uint8_t> fp8_special_blocks_;
};

struct Check {
  double max_error = 0;
  std::int64_t checked_outputs = 0;
};

// y (from kernels::cpu::linear, all m rows) against kernels::ref::linear on the first and last
// kCheckedRows rows of W and the first and last kCheckedX rows of x.
Check check_against_ref(const std::vector<float>& x, std::int64_t m, const WeightView& w, const std::vector<float>& y) {
  std::vector<std::int64_t> x_rows;
  for (std::int64_t i = 0; i < m; ++i)
    if (i < kCheckedX || i >= m - kCheckedX) x_rows.push_back(i);
  std::vector<float> xs;
  for (std::int64_t i : x_rows) xs.insert(xs.end(), x.begin() + i * w.cols, x.begin() + (i + 1) * w.cols);
  const auto mx = static_cast<std::int64_t>(x_rows.size());

  // Row ranges of W: [0, a) and [b, rows), b rounded down to the fp8 block so that it is a view.
  const std::int64_t a = std::min(w.rows, kCheckedRows);
  std::int64_t b = std::max(a, w.rows - kCheckedRows);
  if (w.format == WeightFormat::kFp8Block) b = std::max(a, b / w.block * w.block);
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges = {{0, a}};
  if (b < w.rows) ranges.emplace_back(b, w.rows - b);

  Check check;
  for (const auto& [begin, count] : ranges) {
    const WeightView slice = kernels::weight_rows(w, begin, count);
    std::vector<float> want(static_cast<std::size_t>(mx * count));
    kernels::ref::linear(xs.data(), mx, slice, want.data());
    for (std::int64_t r = 0; r < count; ++r) {
      for (std::int64_t j = 0; j < mx; ++j) {
        double magnitude = 1e-30;
        for (std::int64_t c = 0; c < w.cols; ++c)
          magnitude += std::fabs(double{xs[static_cast<std::size_t>(j * w.cols + c)]} *
                                 kernels::ref::weight_at(slice, r, c));
        const float got = y[static_cast<std::size_t>(x_rows[static_cast<std::size_t>(j)] * w.rows + begin + r)];
        const double error = std::fabs(double{got} - want[static_cast<std::size_t>(j * count + r)]) / magnitude;
        check.max_error = std::max(check.max_error, std::isnan(error) ? INFINITY : error);
        ++check.checked_outputs;
      }
    }
  }
  return check;
}

struct Measurement {
  const FormatInfo* format = nullptr;
  std::int64_t m = 0;
  std::uint64_t weight_bytes = 0;
  int copies = 0;
  double best_s = 0, median_s = 0;  // seconds per call
  std::int64_t calls = 0;           // calls in the best run
  Check check;
};

class KernelsBench {
 public:
  KernelsBench(const KernelsBenchOptions& options, kernels::cpu::ThreadPool& pool) : options_(options), pool_(pool) {}

  Status call(const float* x, std::int64_t m, const WeightView& w, float* y) {
    if (options_.isa.empty()) {
      kernels::cpu::linear(x, m, w, y, pool_);
      return {};
    }
    return kernels::cpu::linear_with_isa(options_.isa, x, m, w, y, pool_);
  }

  Result<Measurement> run(const FormatInfo& format, const WeightCopies& weights, std::int64_t m,
                          const std::vector<float>& x) {
    Measurement r;
    r.format = &format;
    r.m = m;
    r.weight_bytes = weights.sizes().total();
    const auto& views = weights.views();
    r.copies = static_cast<int>(views.size());
    std::vector<float> y(static_cast<std::size_t>(m * options_.rows));

    // Warm-up: every copy once; then the check on copy 0.
    for (const WeightView& w : views) HIPPO_RETURN_IF_ERROR(call(x.data(), m, w, y.data()));
    HIPPO_RETURN_IF_ERROR(call(x.data(), m, views.front(), y.data()));
    r.check = check_against_ref(x, m, views.front(), y);
    if (!(r.check.max_error < kTolerance)) {
      return make_error(ErrorCode::kInternal,
                        "bench kernels: {} m={} ({} x {}, ISA {}): the result differs from kernels/ref, normalised "
                        "error {:.3g} (limit {:.0e}); a wrong answer is not a measurement",
                        format.name, m, options_.rows, options_.cols, isa(), r.check.max_error, kTolerance);
    }

    std::vector<double> per_call;
    std::size_t next = 0;
    for (int rep = 0; rep < options_.repetitions; ++rep) {
      std::int64_t calls = 0;
      double elapsed = 0;
      const auto start = Clock::now();
      do {
        HIPPO_RETURN_IF_ERROR(call(x.data(), m, views[next], y.data()));
        next = (next + 1) % views.size();
        ++calls;
        elapsed = std::chrono::duration<double>(Clock::now() - start).count();
      } while (elapsed < options_.min_time || calls < static_cast<std::int64_t>(views.size()));
      per_call.push_back(elapsed / static_cast<double>(calls));
      if (per_call.back() <= *std::min_element(per_call.begin(), per_call.end())) r.calls = calls;
    }
    const Spread spread = spread_of(per_call);
    r.best_s = spread.min;
    r.median_s = spread.median;
    return r;
  }

  std::string isa() const { return options_.isa.empty() ? kernels::cpu::linear_isa() : options_.isa; }

 private:
  const KernelsBenchOptions& options_;
  kernels::cpu::ThreadPool& pool_;
};

// --backend cuda: the CUDA linear kernel on weights and activations already in device memory (the
// kernel alone, no host copies), against the device's copy bandwidth measured in the same run
// (kernels/cuda/linear_timing.h says how).
Status run_gpu_kernels_bench(const KernelsBenchOptions& options, const std::vector<const FormatInfo*>& formats,
                             std::ostream& out) {
#ifdef HIPPO_HAVE_GPU
  struct Row {
    const FormatInfo* format;
    std::int64_t m;
    kernels::cuda::LinearTiming t;
  };
  std::vector<Row> rows;
  for (const FormatInfo* f : formats) {
    for (std::int64_t m : options.ms) {
      kernels::cuda::LinearTiming t = kernels::cuda::time_linear(static_cast<int>(f->format), options.rows, options.cols, m,
                                                                 options.repetitions, options.seed);
      if (!t.ok) return make_error(ErrorCode::kUnavailable, "bench kernels --backend cuda: {}", t.error);
      if (!(t.max_error < kTolerance))
        return make_error(ErrorCode::kInternal, "bench kernels --backend cuda: {} m={} is wrong: error {:.2e} against the host's double sum",
                          f->name, m, t.max_error);
      rows.push_back({f, m, std::move(t)});
    }
  }
  if (options.json) {
    for (const Row& r : rows) {
      boost::json::object doc{{"backend", "cuda"},
                              {"device", r.t.device_name},
                              {"format", r.format->name},
                              {"rows", options.rows},
                              {"cols", options.cols},
                              {"m", r.m},
                              {"seconds_per_call", r.t.seconds_per_call},
                              {"weight_bytes_per_second", r.t.weight_bytes / r.t.seconds_per_call},
                              {"copy_bytes_per_second", r.t.copy_bytes_per_second},
                              {"max_error", r.t.max_error}};
      out << boost::json::serialize(doc) << "\n";
    }
    return {};
  }
  const double copy = rows.empty() ? 0 : rows.front().t.copy_bytes_per_second;
  out << fmt::format("device   {}\n", rows.empty() ? "" : rows.front().t.device_name);
  out << fmt::format("limit    device-to-device copy {:.0f} GB/s (read + write bytes)\n", copy / 1e9);
  out << fmt::format("method   W {} x {}, rotated over copies that exceed the L2; best of {} passes (GPU events); "
                     "sampled outputs checked against a double sum on the host (error < {:.0e})\n\n",
                     options.rows, options.cols, options.repetitions, kTolerance);
  out << fmt::format("{:<6} {:>5} | {:>10} {:>11} {:>8} | {:>9} | {:>10}\n", "format", "m", "us/call", "weight GB/s",
                     "of copy", "GFLOP/s", "max error");
  for (const Row& r : rows) {
    const double gbps = r.t.weight_bytes / r.t.seconds_per_call / 1e9;
    const double gflops = 2.0 * static_cast<double>(r.m * options.rows * options.cols) / r.t.seconds_per_call / 1e9;
    out << fmt::format("{:<6} {:>5} | {:>10.2f} {:>11.1f} {:>7.1f}% | {:>9.1f} | {:>10.1e}\n", r.format->name, r.m,
                       1e6 * r.t.seconds_per_call, gbps, 100 * gbps * 1e9 / r.t.copy_bytes_per_second, gflops,
                       r.t.max_error);
  }
  return {};
#else
  static_cast<void>(options);
  static_cast<void>(formats);
  static_cast<void>(out);
  return make_error(ErrorCode::kUnavailable, "bench kernels --backend cuda: this build has no CUDA kernels (build the cuda preset)");
#endif
}

Status run_kernels_bench(const KernelsBenchOptions& options, std::ostream& out) {
  std::vector<const FormatInfo*> formats;
  for (const std::string& name : options.formats) {
    bool known = false;
    for (const FormatInfo& f : kFormats) {
      if (name != "all" && name != f.name) continue;
      known = true;
      if (std::find(formats.begin(), formats.end(), &f) == formats.end()) formats.push_back(&f);
    }
    if (!known) return make_error(ErrorCode::kInvalidArgument, "--format {}: not f32, bf16, fp8, fp4 or all", name);
  }
  if (options.ms.empty()) return make_error(ErrorCode::kInvalidArgument, "--m: give at least one batch size");
  if (!options.isa.empty()) {
    const auto isas = kernels::cpu::runnable_linear_isas();
    if (std::find(isas.begin(), isas.end(), options.isa) == isas.end())
      return make_error(ErrorCode::kInvalidArgument, "--isa {}: runnable here are {} (this CPU's, up to --cpu-isa)",
                        options.isa, fmt::join(isas, ", "));
  }
  for (const FormatInfo* f : formats) {
    static const std::uint8_t kSomeByte = 0;
    WeightView probe{f->format, &kSomeByte, &kSomeByte, options.rows, options.cols, kFp8Block};
    if (Status s = probe.validate(); !s.ok())
      return make_error(ErrorCode::kInvalidArgument, "--rows {} --cols {} for {}: {}", options.rows, options.cols,
                        f->name, s.message());
  }
  if (options.backend == "cuda") return run_gpu_kernels_bench(options, formats, out);

  kernels::cpu::ThreadPool pool(options.threads);
  const int threads = pool.size();
  const kernels::cpu::MachineInfo machine = kernels::cpu::describe_machine();
  const L3Size l3 = read_l3_size();

  // The limits, at the same thread count, in the same run: measured before and after the kernels,
  // the higher of the two counts (a busy moment lowers a limit and would flatter the ratios).
  kernels::cpu::BandwidthOptions bandwidth_options;
  bandwidth_options.threads = threads;
  bandwidth_options.bytes_per_array =
      options.bandwidth_bytes > 0 ? options.bandwidth_bytes
                                  : std::max<std::size_t>(bandwidth_options.bytes_per_array, 8 * l3.bytes);
  const double load_at_start = load_average();
  HIPPO_ASSIGN_OR_RETURN(auto bandwidth, kernels::cpu::measure_memory_bandwidth(bandwidth_options));
  HIPPO_ASSIGN_OR_RETURN(auto fma, kernels::cpu::measure_peak_fma({threads}));

  const std::int64_t max_m = *std::max_element(options.ms.begin(), options.ms.end());
  std::vector<float> x(static_cast<std::size_t>(max_m * options.cols));
  {
    std::mt19937_64 rng(options.seed ^ 0x5851F42D4C957F2Dull);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float& v : x) v = normal(rng);
  }

  KernelsBench bench(options, pool);
  std::vector<Measurement> results;
  for (const FormatInfo* f : formats) {
    const std::size_t bytes = weight_sizes(f->format, options.rows, options.cols).total();
    int copies = options.copies;
    if (copies <= 0) copies = static_cast<int>(std::max<std::uint64_t>(1, (4 * l3.bytes + bytes - 1) / bytes));
    HIPPO_ASSIGN_OR_RETURN(WeightCopies weights,
                           WeightCopies::make(f->format, options.rows, options.cols, copies, options.seed,
                                              bench.isa()));
    for (std::int64_t m : options.ms) {
      HIPPO_ASSIGN_OR_RETURN(Measurement r, bench.run(*f, weights, m, x));
      results.push_back(r);
    }
  }

  {
    HIPPO_ASSIGN_OR_RETURN(auto again, kernels::cpu::measure_memory_bandwidth(bandwidth_options));
    HIPPO_ASSIGN_OR_RETURN(auto fma_again, kernels::cpu::measure_peak_fma({threads}));
    bandwidth.read_bytes_per_second = std::max(bandwidth.read_bytes_per_second, again.read_bytes_per_second);
    bandwidth.triad_bytes_per_second = std::max(bandwidth.triad_bytes_per_second, again.triad_bytes_per_second);
    fma.flops_per_second = std::max(fma.flops_per_second, fma_again.flops_per_second);
  }
  const double load_at_end = load_average();
  const double read_bw = bandwidth.read_bytes_per_second;
  const double fma_peak = fma.flops_per_second;
  auto bytes = [](const Measurement& r) { return static_cast<double>(r.weight_bytes); };
  auto flops = [&](const Measurement& r) {
    return 2.0 * static_cast<double>(r.m) * static_cast<double>(options.rows) * static_cast<double>(options.cols);
  };

  if (options.json) {
    boost::json::array flags;
    for (const auto& f : machine.simd_flags) flags.emplace_back(f);
    boost::json::array entries;
    for (const Measurement& r : results) {
      entries.push_back(boost::json::object{
          {"format", r.format->name},
          {"ggml_peer_type", r.format->ggml_peer},
          {"m", r.m},
          {"rows", options.rows},
          {"cols", options.cols},
          {"threads", threads},
          {"weight_bytes", r.weight_bytes},
          {"copies", r.copies},
          {"rotation_bytes", r.weight_bytes * static_cast<std::uint64_t>(r.copies)},
          {"ms_per_call", 1e3 * r.best_s},
          {"ms_per_call_median", 1e3 * r.median_s},
          {"calls", r.calls},
          {"weight_gb_per_s", bytes(r) / r.best_s / 1e9},
          {"gflop_per_s", flops(r) / r.best_s / 1e9},
          {"read_bandwidth_ratio", bytes(r) / r.best_s / read_bw},
          {"fma_peak_ratio", flops(r) / r.best_s / fma_peak},
          {"max_normalised_error", r.check.max_error},
          {"checked_outputs", r.check.checked_outputs},
      });
    }
    boost::json::object doc{
        {"cpu_model", machine.cpu_model},
        {"logical_cpus", machine.logical_cpus},
        {"simd_flags", std::move(flags)},
        {"linear_isa", bench.isa()},
        {"threads", threads},
        {"l3_bytes", l3.bytes},
        {"l3_from_sysfs", l3.from_sysfs},
        {"rows", options.rows},
        {"cols", options.cols},
        {"repetitions", options.repetitions},
        {"min_time_s", options.min_time},
        {"seed", options.seed},
        {"load_average_at_start", load_at_start},
        {"load_average_at_end", load_at_end},
        {"tolerance", kTolerance},
        {"limits",
         boost::json::object{
             {"read_bytes_per_second", read_bw},
             {"triad_bytes_per_second", bandwidth.triad_bytes_per_second},
             {"bandwidth_bytes_per_array", bandwidth.bytes_per_array},
             {"fma_flops_per_second", fma_peak},
             {"fma_isa", fma.isa},
         }},
        {"results", std::move(entries)},
    };
    out << boost::json::serialize(doc) << "\n";
    return {};
  }

  out << fmt::format("machine  {}, {} logical CPUs; linear ISA {}; {} threads\n", machine.cpu_model,
                     machine.logical_cpus, bench.isa(), threads);
  out << fmt::format("limits   read {:.2f} GB/s ({} MiB array), fp32 FMA peak {:.1f} GFLOP/s ({}), {} threads; the "
                     "better of before and after the kernels\n",
                     read_bw / 1e9, bandwidth.bytes_per_array >> 20, fma_peak / 1e9, fma.isa, fma.threads);
  out << fmt::format("load     {:.2f} at start, {:.2f} at end (1-minute load average: another program running "
                     "skews every figure)\n",
                     load_at_start, load_at_end);
  out << fmt::format("method   W {} x {}; best of {} runs of >= {} s after a warm-up; W rotated over copies that touch "
                     ">= 4x the L3 ({} MiB{}); checked against kernels/ref (error < {:.0e})\n\n",
                     options.rows, options.cols, options.repetitions, options.min_time, l3.bytes >> 20,
                     l3.from_sysfs ? " from sysfs" : ", assumed: sysfs does not say", kTolerance);
  out << fmt::format("{:<6} {:>5} | {:>10} {:>11} {:>8} | {:>9} {:>8} | {:>6} {:>10}\n", "format", "m", "ms/call",
                     "weight GB/s", "of read", "GFLOP/s", "of FMA", "copies", "max error");
  for (const Measurement& r : results) {
    const double gbps = bytes(r) / r.best_s / 1e9, gflops = flops(r) / r.best_s / 1e9;
    out << fmt::format("{:<6} {:>5} | {:>10.3f} {:>11.2f} {:>7.1f}% | {:>9.1f} {:>7.1f}% | {:>6} {:>10.1e}\n",
                       r.format->name, r.m, 1e3 * r.best_s, gbps, 100 * gbps * 1e9 / read_bw, gflops,
                       100 * gflops * 1e9 / fma_peak, r.copies, r.check.max_error);
  }
  return {};
}

}  // namespace

void add_bench_kernels_command(CLI::App& bench, Invocation& inv) {
  auto options = std::make_shared<KernelsBenchOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "kernels", "Linear layer per weight format (CPU, or --backend cuda): weight GB/s and GFLOP/s against this machine's limits");
  cmd->add_option("--rows", options->rows, "Rows of W (output features)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 24))
      ->capture_default_str();
  cmd->add_option("--cols", options->cols, "Columns of W (input features; a multiple of 32 for fp4)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 24))
      ->capture_default_str();
  cmd->add_option("--m", options->ms, "Rows of x, the batch (e.g. 1,2,4,8,512)")
      ->delimiter(',')
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20))
      ->capture_default_str();
  cmd->add_option("--format", options->formats, "Weight formats: f32, bf16, fp8 (E4M3, 32x32 blocks), fp4 (E2M1, row-32) or all")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--threads", options->threads, "Threads (0 = every logical CPU)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--repetitions", options->repetitions, "Timed runs after one warm-up; the best counts")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--min-time", options->min_time, "Seconds each timed run lasts at least")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  cmd->add_option("--copies", options->copies,
                  "Copies of W rotated through (0 = enough to touch 4x the L3, so decode reads DRAM)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--bandwidth-bytes", options->bandwidth_bytes,
                  "Array size of the read-bandwidth probe (0 = max(256MiB, 8x the L3))")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  cmd->add_option("--isa", options->isa,
                  "Force one of the CPU's linear ISAs (avx512vbmi, avx512, avx2, generic); default: dispatch");
  cmd->add_option("--backend", options->backend,
                  "cpu, or cuda: the GPU kernel on device-resident W and x, against the device's copy bandwidth")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  cmd->add_option("--seed", options->seed, "Seed of W and x")->capture_default_str();
  cmd->add_flag("--json", options->json, "One JSON object instead of a table");
  cmd->parse_complete_callback([&inv, options] {
    inv.action = [&inv, options] { return run_kernels_bench(*options, *inv.out); };
  });
}

}  // namespace hippo::cli
