// ggml's CPU matrix product y = x · Wᵀ timed the way `hippo bench kernels` times hippo's: a benchmark
// peer, built by scripts/bench_ggml_peer.sh against a ggml source tree that lives outside this
// repository (ggml is never vendored into hippo, and nothing in hippo links this program).
//
// For each (type, m): W [rows, cols] in ggml's format (f32, bf16, q8_0, mxfp4; random normal values,
// quantised by ggml_quantize_chunk), x [m, cols] f32 random normal, one ggml_mul_mat per call on the
// CPU backend at --threads threads. Like hippo's bench, it keeps several distinct copies of W and
// rotates through them, so that one pass touches more than 4x the L3 cache and decode reads DRAM,
// not cache. Best of --repetitions timed runs after a warm-up; each run repeats the call for at
// least --min-seconds. Before timing, the first 64 and last 64 output rows of the first few rows of
// x are checked against a double-precision product of ggml's own dequantised weights (ggml rounds
// x to bf16 or q8_0 for those weight types, so the tolerance is looser than hippo's: it only catches
// a broken setup).
//
// --buffer plain puts W in the CPU backend's ordinary buffer (as `test-backend-ops perf` does);
// --buffer repack in the CPU_REPACK buffer type where ggml has a repacked kernel for the type (on
// x86 with AVX2: mxfp4, q4_0, iq4_nl, q4_K), which is what llama.cpp uses by default on a CPU.
//
// Output: one JSON object per line and (type, m), fields named like `hippo bench kernels --json`.
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Options {
  int64_t rows = 14336, cols = 4096;
  std::vector<int64_t> ms = {1, 512};
  std::vector<std::string> types = {"f32", "bf16", "q8_0", "mxfp4"};
  int threads = 0;
  int repetitions = 3;
  double min_seconds = 0.2;
  std::string buffer = "plain";
  int copies = 0;  // 0: enough for 4x the L3
  bool skip_unrepacked = false;  // --buffer repack: skip types that ggml does not repack here
  std::string ggml_commit = "unknown";
};

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "ggml-peer-bench: %s\n", message.c_str());
  std::exit(1);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

int64_t parse_int(const std::string& s, const char* what) {
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (end == s.c_str() || *end != '\0' || v < 0) die(std::string("bad ") + what + ": " + s);
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) die("missing value after " + a);
      return argv[++i];
    };
    if (a == "--rows") o.rows = parse_int(value(), "--rows");
    else if (a == "--cols") o.cols = parse_int(value(), "--cols");
    else if (a == "--m") {
      o.ms.clear();
      for (const auto& s : split(value())) o.ms.push_back(parse_int(s, "--m"));
    } else if (a == "--types") o.types = split(value());
    else if (a == "--threads") o.threads = static_cast<int>(parse_int(value(), "--threads"));
    else if (a == "--repetitions") o.repetitions = static_cast<int>(parse_int(value(), "--repetitions"));
    else if (a == "--min-seconds") o.min_seconds = std::atof(value().c_str());
    else if (a == "--buffer") o.buffer = value();
    else if (a == "--copies") o.copies = static_cast<int>(parse_int(value(), "--copies"));
    else if (a == "--ggml-commit") o.ggml_commit = value();
    else if (a == "--skip-unrepacked") o.skip_unrepacked = true;
    else if (a == "-h" || a == "--help") {
      std::printf(
          "usage: ggml-peer-bench [--rows R] [--cols K] [--m 1,512] [--types f32,bf16,q8_0,mxfp4] [--threads N]\n"
          "                       [--repetitions N] [--min-seconds S] [--buffer plain|repack] [--copies N]\n"
          "                       [--ggml-commit SHA] [--skip-unrepacked]\n");
      std::exit(0);
    } else die("unknown argument " + a);
  }
  if (o.rows <= 0 || o.cols <= 0 || o.ms.empty() || o.repetitions <= 0) die("rows, cols, m and repetitions must be positive");
  for (int64_t m : o.ms)
    if (m <= 0) die("--m values must be positive");
  if (o.buffer != "plain" && o.buffer != "repack") die("--buffer is plain or repack");
  if (o.threads == 0) o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return o;
}

// The L3 size from sysfs ("32768K"), or 32 MiB when sysfs does not say.
uint64_t l3_bytes() {
  std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index3/size");
  std::string s;
  if (in >> s && !s.empty()) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
    uint64_t scale = 1;
    if (*end == 'K' || *end == 'k') scale = 1ull << 10;
    else if (*end == 'M' || *end == 'm') scale = 1ull << 20;
    else if (*end == 'G' || *end == 'g') scale = 1ull << 30;
    if (v > 0) return v * scale;
  }
  return 32ull << 20;
}

ggml_type type_of(const std::string& name) {
  if (name == "f32") return GGML_TYPE_F32;
  if (name == "f16") return GGML_TYPE_F16;
  if (name == "bf16") return GGML_TYPE_BF16;
  if (name == "q8_0") return GGML_TYPE_Q8_0;
  if (name == "mxfp4") return GGML_TYPE_MXFP4;
  if (name == "q4_0") return GGML_TYPE_Q4_0;
  die("unknown type " + name + " (f32, f16, bf16, q8_0, mxfp4, q4_0)");
}

// W's bytes in ggml's plain layout for `type`, from random normal values.
std::vector<uint8_t> make_weight(ggml_type type, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(rows * cols));
  for (auto& v : values) v = normal(rng);
  std::vector<uint8_t> bytes(ggml_row_size(type, cols) * static_cast<size_t>(rows));
  if (type == GGML_TYPE_F32) {
    std::memcpy(bytes.data(), values.data(), bytes.size());
  } else {
    const size_t written = ggml_quantize_chunk(type, values.data(), bytes.data(), 0, rows, cols, nullptr);
    if (written != bytes.size()) die("ggml_quantize_chunk wrote an unexpected size");
  }
  return bytes;
}

ggml_backend_buffer_type_t repack_buffer_type(ggml_backend_dev_t dev) {
  ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
  auto get = reinterpret_cast<ggml_backend_dev_get_extra_bufts_t>(
      ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts"));
  if (get == nullptr) return nullptr;
  for (ggml_backend_buffer_type_t* b = get(dev); b != nullptr && *b != nullptr; ++b)
    if (std::strcmp(ggml_backend_buft_name(*b), "CPU_REPACK") == 0) return *b;
  return nullptr;
}

// Whether the CPU backend runs y = x · Wᵀ with W in `repack` for this type and shape, asked the
// way llama.cpp decides where a weight goes (a zero-size buffer of that type, then supports_op);
// ggml's repack buffer cannot hold a type it has no repacked kernel for.
bool repack_supported(ggml_backend_dev_t dev, ggml_backend_buffer_type_t repack, ggml_type type, int64_t rows,
                      int64_t cols) {
  ggml_init_params params = {ggml_tensor_overhead() * 4, nullptr, true};
  ggml_context* ctx = ggml_init(params);
  ggml_tensor* w = ggml_new_tensor_2d(ctx, type, cols, rows);
  ggml_tensor* b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, cols, 1);
  ggml_tensor* op = ggml_mul_mat(ctx, w, b);
  ggml_backend_buffer_t dummy = ggml_backend_buft_alloc_buffer(repack, 0);
  w->buffer = dummy;
  const bool supported = ggml_backend_dev_supports_op(dev, op);
  w->buffer = nullptr;
  ggml_backend_buffer_free(dummy);
  ggml_free(ctx);
  return supported;
}

std::string cpu_features(ggml_backend_dev_t dev) {
  ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
  auto get = reinterpret_cast<ggml_backend_get_features_t>(ggml_backend_reg_get_proc_address(reg, "ggml_backend_get_features"));
  std::string out;
  if (get == nullptr) return out;
  for (ggml_backend_feature* f = get(reg); f != nullptr && f->name != nullptr; ++f) {
    if (std::strcmp(f->value, "1") != 0) continue;
    if (!out.empty()) out += ' ';
    out += f->name;
  }
  return out;
}

// ggml's warnings and errors go to stderr; its debug and info lines (one per repacked tensor) do not.
void quiet_log(ggml_log_level level, const char* text, void*) {
  static bool last_shown = false;
  const bool show = level == GGML_LOG_LEVEL_CONT ? last_shown : level >= GGML_LOG_LEVEL_WARN;
  if (show) std::fputs(text, stderr);
  last_shown = show;
}

double load_average() {
  double load[1] = {0};
  return getloadavg(load, 1) == 1 ? load[0] : -1.0;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  ggml_log_set(quiet_log, nullptr);
  ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
  if (dev == nullptr) die("no CPU backend in this ggml build");
  ggml_backend_t backend = ggml_backend_dev_init(dev, nullptr);
  auto set_threads = reinterpret_cast<ggml_backend_set_n_threads_t>(
      ggml_backend_reg_get_proc_address(ggml_backend_dev_backend_reg(dev), "ggml_backend_set_n_threads"));
  if (set_threads == nullptr) die("the CPU backend has no ggml_backend_set_n_threads");
  set_threads(backend, o.threads);
  const std::string features = cpu_features(dev);
  const uint64_t l3 = l3_bytes();
  const int64_t max_m = *std::max_element(o.ms.begin(), o.ms.end());

  std::mt19937 rng(1234);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(max_m * o.cols));
  for (auto& v : x) v = normal(rng);

  for (const std::string& type_name : o.types) {
    const ggml_type type = type_of(type_name);
    if (o.cols % ggml_blck_size(type) != 0) die(type_name + " needs --cols to be a multiple of its block");
    ggml_backend_buffer_type_t buft = ggml_backend_get_default_buffer_type(backend);
    std::string buffer_used = "plain";
    if (o.buffer == "repack") {
      ggml_backend_buffer_type_t r = repack_buffer_type(dev);
      if (r == nullptr) die("this ggml build has no CPU_REPACK buffer type");
      if (repack_supported(dev, r, type, o.rows, o.cols)) {
        buft = r;
        buffer_used = "repack";
      } else if (o.skip_unrepacked) {
        continue;
      } else {
        buffer_used = "plain (no repacked kernel for this type here)";
      }
    }
    const std::vector<uint8_t> host = make_weight(type, o.rows, o.cols, rng);
    const double weight_bytes = static_cast<double>(host.size());
    // Copies of W so that the weights one rotation touches exceed 4x the L3 (or --copies).
    int copies = o.copies;
    if (copies <= 0) copies = static_cast<int>(std::max<uint64_t>(1, (4 * l3 + host.size() - 1) / host.size()));

    ggml_init_params wparams = {ggml_tensor_overhead() * static_cast<size_t>(copies + 1), nullptr, true};
    ggml_context* wctx = ggml_init(wparams);
    std::vector<ggml_tensor*> w(static_cast<size_t>(copies));
    for (auto& t : w) t = ggml_new_tensor_2d(wctx, type, o.cols, o.rows);
    ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors_from_buft(wctx, buft);
    if (wbuf == nullptr) die("cannot allocate the weights");
    ggml_backend_buffer_set_usage(wbuf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    for (auto* t : w) ggml_backend_tensor_set(t, host.data(), 0, host.size());

    for (int64_t m : o.ms) {
      ggml_init_params params = {ggml_tensor_overhead() * static_cast<size_t>(2 * copies + 4) +
                                     ggml_graph_overhead() * static_cast<size_t>(copies),
                                 nullptr, true};
      ggml_context* ctx = ggml_init(params);
      ggml_tensor* b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, o.cols, m);
      std::vector<ggml_cgraph*> graphs;
      std::vector<ggml_tensor*> outs;
      for (auto* wt : w) {
        ggml_tensor* out = ggml_mul_mat(ctx, wt, b);
        ggml_cgraph* gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, out);
        graphs.push_back(gf);
        outs.push_back(out);
      }
      // x and one output buffer that every copy's product writes.
      const size_t x_bytes = ggml_nbytes(b), y_bytes = ggml_nbytes(outs[0]);
      const size_t align = 256;
      const size_t y_offset = (x_bytes + align - 1) / align * align;
      ggml_backend_buffer_t io = ggml_backend_buft_alloc_buffer(ggml_backend_cpu_buffer_type(), y_offset + y_bytes + align);
      if (io == nullptr) die("cannot allocate x and y");
      char* base = static_cast<char*>(ggml_backend_buffer_get_base(io));
      if (ggml_backend_tensor_alloc(io, b, base) != GGML_STATUS_SUCCESS) die("cannot place x");
      for (auto* out : outs)
        if (ggml_backend_tensor_alloc(io, out, base + y_offset) != GGML_STATUS_SUCCESS) die("cannot place y");
      ggml_backend_tensor_set(b, x.data(), 0, x_bytes);

      // Warm-up (every copy once) and the check against ggml's dequantised weights in double.
      for (auto* gf : graphs)
        if (ggml_backend_graph_compute(backend, gf) != GGML_STATUS_SUCCESS) die("graph compute failed");
      std::vector<float> y(static_cast<size_t>(m * o.rows));
      ggml_backend_tensor_get(outs.back(), y.data(), 0, y_bytes);
      const ggml_type_traits* traits = ggml_get_type_traits(type);
      std::vector<float> wrow(static_cast<size_t>(o.cols));
      double worst = 0;
      const int64_t check_m = std::min<int64_t>(m, 4);
      for (int64_t r = 0; r < o.rows; ++r) {
        if (r >= 64 && r < o.rows - 64) continue;
        const uint8_t* row_bytes = host.data() + static_cast<size_t>(r) * ggml_row_size(type, o.cols);
        if (type == GGML_TYPE_F32) std::memcpy(wrow.data(), row_bytes, wrow.size() * 4);
        else traits->to_float(row_bytes, wrow.data(), o.cols);
        for (int64_t i = 0; i < check_m; ++i) {
          double sum = 0, magnitude = 1e-30;
          for (int64_t c = 0; c < o.cols; ++c) {
            const double t = double{x[static_cast<size_t>(i * o.cols + c)]} * wrow[static_cast<size_t>(c)];
            sum += t;
            magnitude += std::fabs(t);
          }
          worst = std::max(worst, std::fabs(y[static_cast<size_t>(i * o.rows + r)] - sum) / magnitude);
        }
      }
      const double tolerance = type == GGML_TYPE_F32 ? 1e-5 : 2e-2;
      if (!(worst < tolerance)) {
        std::fprintf(stderr, "ggml-peer-bench: %s m=%lld: normalised error %g against the dequantised weights (limit %g)\n",
                     type_name.c_str(), static_cast<long long>(m), worst, tolerance);
        return 1;
      }

      // Timed runs: rotate through the copies; best run's seconds per call.
      double best = 1e30;
      int64_t calls_in_best = 0;
      size_t next = 0;
      for (int rep = 0; rep < o.repetitions; ++rep) {
        int64_t calls = 0;
        const double start = now_s();
        double elapsed = 0;
        do {
          if (ggml_backend_graph_compute(backend, graphs[next]) != GGML_STATUS_SUCCESS) die("graph compute failed");
          next = (next + 1) % graphs.size();
          ++calls;
          elapsed = now_s() - start;
        } while (elapsed < o.min_seconds || calls < static_cast<int64_t>(graphs.size()));
        if (elapsed / static_cast<double>(calls) < best) {
          best = elapsed / static_cast<double>(calls);
          calls_in_best = calls;
        }
      }
      const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(o.rows) * static_cast<double>(o.cols);
      std::printf(
          "{\"peer\":\"ggml\",\"ggml_commit\":%s,\"backend\":\"CPU\",\"cpu_features\":%s,\"buffer\":%s,"
          "\"type\":%s,\"rows\":%lld,\"cols\":%lld,\"m\":%lld,\"threads\":%d,\"copies\":%d,\"l3_bytes\":%llu,"
          "\"weight_bytes\":%.0f,\"ms_per_call\":%.6g,\"weight_gb_per_s\":%.6g,\"gflop_per_s\":%.6g,"
          "\"calls\":%lld,\"repetitions\":%d,\"max_normalised_error\":%.3g,\"load_average\":%.2f}\n",
          json_string(o.ggml_commit).c_str(), json_string(features).c_str(), json_string(buffer_used).c_str(),
          json_string(type_name).c_str(), static_cast<long long>(o.rows), static_cast<long long>(o.cols),
          static_cast<long long>(m), o.threads, copies, static_cast<unsigned long long>(l3), weight_bytes,
          best * 1e3, weight_bytes / best / 1e9, flops / best / 1e9, static_cast<long long>(calls_in_best),
          o.repetitions, worst, load_average());
      std::fflush(stdout);
      ggml_backend_buffer_free(io);
      ggml_free(ctx);
    }
    ggml_backend_buffer_free(wbuf);
    ggml_free(wctx);
  }
  ggml_backend_free(backend);
  return 0;
}
