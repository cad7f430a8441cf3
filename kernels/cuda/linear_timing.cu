// time_linear: the CUDA linear kernel on random weights, timed with GPU events over copies of W
// that together exceed the L2, and checked against a host double-precision product of the same
// bytes. Every runtime call is checked and reported in LinearTiming::error.
#include "kernels/cuda/linear_timing.h"

#include "kernels/cuda/device_memory.h"
#include "kernels/cuda/launch.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace hippo::kernels::cuda {
namespace {

std::uint64_t next(std::uint64_t& state) {  // splitmix64
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
float uniform(std::uint64_t& state) {  // [-1, 1)
  return static_cast<float>(static_cast<double>(next(state) >> 40) * 0x1p-23 - 1.0);
}

// Host decoders of the same formats (kernels/ref/numeric_formats.h is C++20; this file is C++17).
double e8m0(std::uint8_t b) { return b == 0xFF ? std::nan("") : std::ldexp(1.0, int{b} - 127); }
double e4m3(std::uint8_t b) {
  const int e = (b >> 3) & 0xF, mant = b & 7;
  double v = (e == 0xF && mant == 7) ? std::nan("") : e == 0 ? std::ldexp(mant, -9) : std::ldexp(8 + mant, e - 10);
  return (b & 0x80) ? -v : v;
}
double e2m1(std::uint8_t nibble) {
  static constexpr double kMagnitudes[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  return (nibble & 8) ? -kMagnitudes[nibble & 7] : kMagnitudes[nibble & 7];
}

std::int64_t round_up(std::int64_t n, std::int64_t to) { return (n + to - 1) / to * to; }

}  // namespace

LinearTiming time_linear(int format, std::int64_t rows, std::int64_t cols, std::int64_t m, int repetitions,
                         std::uint64_t seed) {
  LinearTiming out;
  auto ok = [&](cudaError_t e, const char* call) {
    if (e != cudaSuccess && out.error.empty()) out.error = std::string(call) + ": " + cudaGetErrorString(e);
    return e == cudaSuccess;
  };
  if (format < 0 || format > 3 || rows <= 0 || cols <= 0 || m <= 0 || repetitions <= 0 ||
      (format == 3 && cols % 32 != 0)) {
    out.error = "bad arguments (format 0..3, positive shape, fp4 cols a multiple of 32)";
    return out;
  }

  cudaDeviceProp prop{};
  if (!ok(cudaGetDeviceProperties(&prop, 0), "no GPU device")) return out;
  out.device_name = prop.name;

  // Device-to-device copy bandwidth, the ceiling the call's speed is read against.
  {
    const std::size_t bytes = std::size_t{1} << 30;
    DeviceBuffer src, dst;
    Event start, stop;
    if (!ok(src.allocate(bytes), "allocate copy buffer") || !ok(dst.allocate(bytes), "allocate copy buffer") ||
        !ok(start.create(), "event") || !ok(stop.create(), "event"))
      return out;
    float best_ms = std::numeric_limits<float>::max();
    for (int rep = 0; rep <= 3; ++rep) {  // rep 0 is the warm-up
      float ms = 0;
      if (!ok(cudaEventRecord(start.get()), "record") ||
          !ok(cudaMemcpy(dst.as<std::uint8_t>(), src.as<std::uint8_t>(), bytes, cudaMemcpyDeviceToDevice), "copy") ||
          !ok(cudaEventRecord(stop.get()), "record") || !ok(cudaEventSynchronize(stop.get()), "copy") ||
          !ok(cudaEventElapsedTime(&ms, start.get(), stop.get()), "elapsed time"))
        return out;
      if (rep > 0) best_ms = std::min(best_ms, ms);
    }
    out.copy_bytes_per_second = 2.0 * static_cast<double>(bytes) / (best_ms * 1e-3);
  }

  // One copy of W on the host: codes then scales.
  std::uint64_t state = seed;
  std::int64_t code_bytes = 0, scale_bytes = 0;
  switch (format) {
    case 0: code_bytes = rows * cols * 4; break;
    case 1: code_bytes = rows * cols * 2; break;
    case 2: code_bytes = rows * cols, scale_bytes = ((rows + 31) / 32) * ((cols + 31) / 32); break;
    case 3: code_bytes = rows * cols / 2, scale_bytes = rows * cols / 32; break;
  }
  std::vector<std::uint8_t> codes(static_cast<std::size_t>(code_bytes)), scales(static_cast<std::size_t>(scale_bytes));
  if (format == 0) {
    for (std::int64_t k = 0; k < rows * cols; ++k) {
      const float v = uniform(state);
      std::memcpy(&codes[static_cast<std::size_t>(k) * 4], &v, 4);
    }
  } else if (format == 1) {
    for (std::int64_t k = 0; k < rows * cols; ++k) {
      const float v = uniform(state);
      std::uint32_t bits;
      std::memcpy(&bits, &v, 4);
      const std::uint16_t h = static_cast<std::uint16_t>(bits >> 16);
      std::memcpy(&codes[static_cast<std::size_t>(k) * 2], &h, 2);
    }
  } else {
    for (auto& b : codes) {
      b = static_cast<std::uint8_t>(next(state));
      if (format == 2 && (b & 0x7F) == 0x7F) b ^= 1;  // no NaN codes
    }
    for (auto& b : scales) b = static_cast<std::uint8_t>(120 + next(state) % 10);
  }
  out.weight_bytes = static_cast<double>(code_bytes + scale_bytes);

  // Copies enough to exceed the L2 several times over; each copy's pieces 256-byte aligned.
  const std::int64_t code_span = round_up(code_bytes, 256), scale_span = round_up(std::max<std::int64_t>(scale_bytes, 1), 256);
  const std::int64_t copy_span = code_span + scale_span;
  const std::int64_t copies = std::clamp<std::int64_t>((4 * 60'000'000 + copy_span - 1) / copy_span, 1, 65536);
  DeviceBuffer weights, xs, ys;
  if (!ok(weights.allocate(static_cast<std::size_t>(copies * copy_span)), "allocate weights") ||
      !ok(xs.allocate(static_cast<std::size_t>(m * cols) * sizeof(float)), "allocate x") ||
      !ok(ys.allocate(static_cast<std::size_t>(m * rows) * sizeof(float)), "allocate y"))
    return out;
  for (std::int64_t c = 0; c < copies; ++c) {
    std::uint8_t* base = weights.as<std::uint8_t>() + c * copy_span;
    if (!ok(cudaMemcpy(base, codes.data(), codes.size(), cudaMemcpyHostToDevice), "upload weights")) return out;
    if (scale_bytes > 0 &&
        !ok(cudaMemcpy(base + code_span, scales.data(), scales.size(), cudaMemcpyHostToDevice), "upload scales"))
      return out;
  }
  std::vector<float> x(static_cast<std::size_t>(m * cols));
  for (auto& v : x) v = uniform(state);
  if (!ok(cudaMemcpy(xs.as<float>(), x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice), "upload x")) return out;

  auto weight = [&](std::int64_t c) {
    DeviceWeight w;
    w.format = static_cast<DeviceWeightFormat>(format);
    w.data = weights.as<std::uint8_t>() + c * copy_span;
    w.scales = scale_bytes > 0 ? weights.as<std::uint8_t>() + c * copy_span + code_span : nullptr;
    w.rows = rows;
    w.cols = cols;
    w.block = format == 2 ? 32 : 0;
    return w;
  };

  // Timing: a warm-up pass, then passes over all copies; the best pass counts.
  Event start, stop;
  if (!ok(start.create(), "event") || !ok(stop.create(), "event") || !ok(cudaGetLastError(), "before the kernel"))
    return out;
  double best_seconds = std::numeric_limits<double>::max();
  for (int rep = 0; rep <= repetitions; ++rep) {
    if (!ok(cudaEventRecord(start.get(), nullptr), "record")) return out;
    for (std::int64_t c = 0; c < copies; ++c) linear(xs.as<float>(), m, weight(c), ys.as<float>(), nullptr);
    float ms = 0;
    if (!ok(cudaEventRecord(stop.get(), nullptr), "record") || !ok(cudaEventSynchronize(stop.get()), "linear") ||
        !ok(cudaEventElapsedTime(&ms, start.get(), stop.get()), "elapsed time"))
      return out;
    if (rep > 0) best_seconds = std::min(best_seconds, ms * 1e-3 / static_cast<double>(copies));
  }
  out.seconds_per_call = best_seconds;

  // Accuracy: copy 0 against the host, on a sample of outputs (all of them when few).
  linear(xs.as<float>(), m, weight(0), ys.as<float>(), nullptr);
  std::vector<float> y(static_cast<std::size_t>(m * rows));
  if (!ok(cudaMemcpy(y.data(), ys.as<float>(), y.size() * sizeof(float), cudaMemcpyDeviceToHost), "download y"))
    return out;
  auto w_at = [&](std::int64_t r, std::int64_t c) -> double {
    switch (format) {
      case 0: {
        float v;
        std::memcpy(&v, &codes[static_cast<std::size_t>((r * cols + c) * 4)], 4);
        return v;
      }
      case 1: {
        std::uint16_t h;
        std::memcpy(&h, &codes[static_cast<std::size_t>((r * cols + c) * 2)], 2);
        const std::uint32_t bits = std::uint32_t{h} << 16;
        float v;
        std::memcpy(&v, &bits, 4);
        return v;
      }
      case 2:
        return e4m3(codes[static_cast<std::size_t>(r * cols + c)]) *
               e8m0(scales[static_cast<std::size_t>((r / 32) * ((cols + 31) / 32) + c / 32)]);
      default: {
        const std::uint8_t byte = codes[static_cast<std::size_t>(r * (cols / 2) + c / 2)];
        return e2m1(c % 2 == 0 ? byte & 0xF : byte >> 4) * e8m0(scales[static_cast<std::size_t>(r * (cols / 32) + c / 32)]);
      }
    }
  };
  const std::int64_t outputs = m * rows;
  const std::int64_t samples = std::min<std::int64_t>(outputs, 256);
  for (std::int64_t s = 0; s < samples; ++s) {
    const std::int64_t o = samples == outputs ? s : static_cast<std::int64_t>(next(state) % static_cast<std::uint64_t>(outputs));
    const std::int64_t i = o / rows, r = o % rows;
    double sum = 0, magnitude = 0;
    for (std::int64_t c = 0; c < cols; ++c) {
      const double term = double{x[static_cast<std::size_t>(i * cols + c)]} * w_at(r, c);
      sum += term;
      magnitude += std::fabs(term);
    }
    const double error = std::fabs(double{y[static_cast<std::size_t>(o)]} - sum) / (magnitude > 0 ? magnitude : 1.0);
    out.max_error = std::max(out.max_error, std::isnan(error) ? std::numeric_limits<double>::infinity() : error);
  }
  out.ok = true;
  return out;
}

}  // namespace hippo::kernels::cuda
