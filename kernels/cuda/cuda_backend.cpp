#include "kernels/cuda/cuda_backend.h"

#include "base/check.h"
#include "kernels/cuda/device_memory.h"
#include "kernels/cuda/launch.h"
#include "kernels/top_k.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

namespace hippo::kernels::cuda {

void check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  std::fprintf(stderr, "hippo: GPU backend: %s: %s\n", what, cudaGetErrorString(status));
  std::abort();
}

namespace {

static_assert(static_cast<int>(WeightFormat::kF32) == static_cast<int>(DeviceWeightFormat::kF32) &&
              static_cast<int>(WeightFormat::kBF16) == static_cast<int>(DeviceWeightFormat::kBF16) &&
              static_cast<int>(WeightFormat::kFp8Block) == static_cast<int>(DeviceWeightFormat::kFp8Block) &&
              static_cast<int>(WeightFormat::kFp4Row32) == static_cast<int>(DeviceWeightFormat::kFp4Row32));
static_assert(static_cast<int>(KvFormat::kWindow) == static_cast<int>(DeviceKvFormat::kWindow) &&
              static_cast<int>(KvFormat::kCompressed) == static_cast<int>(DeviceKvFormat::kCompressed) &&
              static_cast<int>(KvFormat::kIndex) == static_cast<int>(DeviceKvFormat::kIndex));
static_assert(static_cast<int>(TableFormat::kBF16) == 0 && static_cast<int>(TableFormat::kFp8Row32) == 1);

// The host bytes a view's codes and its scales span.
struct ByteRange {
  const void* begin = nullptr;
  std::size_t bytes = 0;
};

ByteRange data_range(const WeightView& w) { return {w.data, static_cast<std::size_t>(code_span_bytes(w))}; }
ByteRange scales_range(const WeightView& w) { return {w.scales, static_cast<std::size_t>(scale_span_bytes(w))}; }

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, std::string name) : device_(device), name_(std::move(name)) {
    check(cudaSetDevice(device_), "select the device");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "create a stream");
  }
  ~CudaBackend() override {
    static_cast<void>(cudaSetDevice(device_));
    static_cast<void>(cudaStreamDestroy(stream_));
  }

  const char* name() const override { return name_.c_str(); }
  int threads() const override { return 1; }
  bool supports(Op) const override { return true; }
  bool supports(WeightFormat) const override { return true; }
  bool supports(TableFormat) const override { return true; }

  Result<bool> keep_weight(const WeightView& w) override {
    check(cudaSetDevice(device_), "select the device");
    for (const ByteRange range : {data_range(w), scales_range(w)}) {
      if (range.begin == nullptr || range.bytes == 0 || kept_device(range.begin, range.bytes) != nullptr) continue;
      DeviceBuffer copy;
      if (const cudaError_t status = copy.allocate(range.bytes); status != cudaSuccess)
        return Status(ErrorCode::kResourceExhausted,
                      fmt::format("CUDA backend: no device memory for a weight of {} bytes: {}", range.bytes,
                                  cudaGetErrorString(status)));
      check(cudaMemcpy(copy.data(), range.begin, range.bytes, cudaMemcpyHostToDevice), "upload a weight");
      kept_.emplace(reinterpret_cast<std::uintptr_t>(range.begin), Kept{range.bytes, std::move(copy)});
    }
    return false;  // the host's pages stay: untested on a device here
  }

  void linear(const float* x, std::int64_t m, const WeightView& w, float* y) override {
    if (m <= 0) return;
    run_linear(x, m, w);
    download(y, slot(kY), static_cast<std::size_t>(m * w.rows) * sizeof(float));
  }

  void linear_rows(const float* x, std::int64_t m, const WeightView& w, float* const* y_rows) override {
    if (m <= 0) return;
    run_linear(x, m, w);
    host_floats_.resize(static_cast<std::size_t>(m * w.rows));
    download(host_floats_.data(), slot(kY), host_floats_.size() * sizeof(float));
    for (std::int64_t i = 0; i < m; ++i) std::copy_n(&host_floats_[static_cast<std::size_t>(i * w.rows)], w.rows, y_rows[i]);
  }

  void rms_norm(const float* x, std::int64_t rows, std::int64_t n, const float* weight, float eps, float* out) override {
    if (rows <= 0) return;
    const std::size_t bytes = static_cast<std::size_t>(rows * n) * sizeof(float);
    auto* dx = static_cast<float*>(upload(kA, x, bytes));
    const float* dw = weight != nullptr ? static_cast<const float*>(upload(kB, weight, n * sizeof(float))) : nullptr;
    cuda::rms_norm(dx, rows, n, dw, eps, dx, stream_);
    download(out, dx, bytes);
  }

  void rope(float* x, std::int64_t rows, std::int64_t heads, std::int64_t dim, std::int64_t rope_dims, const float* cos,
            const float* sin, bool inverse) override {
    if (rows <= 0) return;
    const std::size_t bytes = static_cast<std::size_t>(rows * heads * dim) * sizeof(float);
    const std::size_t angle_bytes = static_cast<std::size_t>(rows * (rope_dims / 2)) * sizeof(float);
    auto* dx = static_cast<float*>(upload(kA, x, bytes));
    cuda::rope(dx, rows, heads, dim, rope_dims, static_cast<const float*>(upload(kB, cos, angle_bytes)),
               static_cast<const float*>(upload(kC, sin, angle_bytes)), inverse, stream_);
    download(x, dx, bytes);
  }

  void hc_mix(const HcMixArgs& a) override {
    if (a.rows <= 0) return;
    DeviceHcMix d;
    d.rows = a.rows;
    d.hc = a.hc;
    d.mix_stride = a.mix_stride;
    d.eps = a.eps;
    d.sinkhorn_iters = a.sinkhorn_iters;
    d.mixes = static_cast<const float*>(upload(kA, a.mixes, static_cast<std::size_t>(a.rows * a.mix_stride) * sizeof(float)));
    d.scale = static_cast<const float*>(upload(kB, a.scale, 3 * sizeof(float)));
    d.base = static_cast<const float*>(upload(kC, a.base, static_cast<std::size_t>(2 * a.hc + a.hc * a.hc) * sizeof(float)));
    const std::size_t pair_bytes = static_cast<std::size_t>(a.rows * a.hc) * sizeof(float);
    d.pre = static_cast<float*>(slot(kD, pair_bytes));
    d.post = static_cast<float*>(slot(kE, pair_bytes));
    d.comb = static_cast<float*>(slot(kF, pair_bytes * static_cast<std::size_t>(a.hc)));
    cuda::hc_mix(d, stream_);
    download(a.pre, d.pre, pair_bytes);
    download(a.post, d.post, pair_bytes);
    download(a.comb, d.comb, pair_bytes * static_cast<std::size_t>(a.hc));
  }

  void hc_collapse(const float* streams, const float* pre, std::int64_t rows, std::int64_t hc, std::int64_t d,
                   float* out) override {
    if (rows <= 0) return;
    const auto* ds = static_cast<const float*>(upload(kA, streams, static_cast<std::size_t>(rows * hc * d) * sizeof(float)));
    const auto* dp = static_cast<const float*>(upload(kB, pre, static_cast<std::size_t>(rows * hc) * sizeof(float)));
    auto* dout = static_cast<float*>(slot(kC, static_cast<std::size_t>(rows * d) * sizeof(float)));
    cuda::hc_collapse(ds, dp, rows, hc, d, dout, stream_);
    download(out, dout, static_cast<std::size_t>(rows * d) * sizeof(float));
  }

  void hc_expand(float* streams, const float* sub, const float* post, const float* comb, std::int64_t rows,
                 std::int64_t hc, std::int64_t d) override {
    if (rows <= 0) return;
    const std::size_t bytes = static_cast<std::size_t>(rows * hc * d) * sizeof(float);
    auto* ds = static_cast<float*>(upload(kA, streams, bytes));
    cuda::hc_expand(ds, static_cast<const float*>(upload(kB, sub, static_cast<std::size_t>(rows * d) * sizeof(float))),
                    static_cast<const float*>(upload(kC, post, static_cast<std::size_t>(rows * hc) * sizeof(float))),
                    static_cast<const float*>(upload(kD, comb, static_cast<std::size_t>(rows * hc * hc) * sizeof(float))),
                    rows, hc, d, stream_);
    download(streams, ds, bytes);
  }

  // The keys (window keys, then the selected entries) are gathered into one array on the host, each
  // row given its list of indices into it.
  void attention(const AttentionArgs& a) override {
    if (a.rows <= 0) return;
    const bool any_selected = a.selected_offset != nullptr;
    const std::int64_t sel_begin = any_selected ? a.selected_offset[0] : 0;
    const std::int64_t sel_end = any_selected ? a.selected_offset[a.rows] : 0;
    const std::int64_t n_keys = a.n_keys + (sel_end - sel_begin);
    host_floats_.resize(static_cast<std::size_t>(n_keys * a.dim));
    for (std::int64_t j = 0; j < a.n_keys; ++j) std::copy_n(a.keys[j], a.dim, &host_floats_[static_cast<std::size_t>(j * a.dim)]);
    for (std::int64_t j = sel_begin; j < sel_end; ++j)
      std::copy_n(a.selected[j], a.dim, &host_floats_[static_cast<std::size_t>((a.n_keys + j - sel_begin) * a.dim)]);
    std::vector<std::int64_t> index, offset{0};
    std::int64_t max_keys = 0;
    for (std::int64_t r = 0; r < a.rows; ++r) {
      for (std::int64_t j = 0; j < a.window_count[r]; ++j) index.push_back(a.window_first[r] + j);
      if (any_selected)
        for (std::int64_t j = a.selected_offset[r]; j < a.selected_offset[r + 1]; ++j) index.push_back(a.n_keys + j - sel_begin);
      max_keys = std::max(max_keys, static_cast<std::int64_t>(index.size()) - offset.back());
      offset.push_back(static_cast<std::int64_t>(index.size()));
    }
    index.push_back(0);  // never empty
    DeviceAttention d;
    d.rows = a.rows;
    d.heads = a.heads;
    d.dim = a.dim;
    d.scale = a.scale;
    d.sinks = static_cast<const float*>(upload(kA, a.sinks, static_cast<std::size_t>(a.heads) * sizeof(float)));
    const std::size_t out_bytes = static_cast<std::size_t>(a.rows * a.heads * a.dim) * sizeof(float);
    d.q = static_cast<const float*>(upload(kB, a.q, out_bytes));
    d.keys = static_cast<const float*>(upload(kC, host_floats_.data(), host_floats_.size() * sizeof(float)));
    d.key_index = static_cast<const std::int64_t*>(upload(kD, index.data(), index.size() * sizeof(std::int64_t)));
    d.key_offset = static_cast<const std::int64_t*>(upload(kE, offset.data(), offset.size() * sizeof(std::int64_t)));
    d.max_keys = std::max<std::int64_t>(max_keys, 1);
    d.scratch = static_cast<float*>(slot(kF, static_cast<std::size_t>(a.rows * a.heads * d.max_keys) * sizeof(float)));
    d.out = static_cast<float*>(slot(kY, out_bytes));
    cuda::attention(d, stream_);
    download(a.out, d.out, out_bytes);
  }

  void kv_encode(KvFormat format, const float* x, std::int64_t rows, std::int64_t dim, std::uint8_t* entries) override {
    if (rows <= 0) return;
    const auto* dx = static_cast<const float*>(upload(kA, x, static_cast<std::size_t>(rows * dim) * sizeof(float)));
    const auto bytes = static_cast<std::size_t>(rows * kv_entry_bytes(format, dim));
    auto* de = static_cast<std::uint8_t*>(slot(kB, bytes));
    cuda::kv_encode(static_cast<DeviceKvFormat>(format), dx, rows, dim, de, stream_);
    download(entries, de, bytes);
  }

  void kv_decode(KvFormat format, const std::uint8_t* entries, std::int64_t rows, std::int64_t dim, float* x) override {
    if (rows <= 0) return;
    const auto* de = static_cast<const std::uint8_t*>(upload(kA, entries, static_cast<std::size_t>(rows * kv_entry_bytes(format, dim))));
    const std::size_t bytes = static_cast<std::size_t>(rows * dim) * sizeof(float);
    auto* dx = static_cast<float*>(slot(kB, bytes));
    cuda::kv_decode(static_cast<DeviceKvFormat>(format), de, rows, dim, dx, stream_);
    download(x, dx, bytes);
  }

  void fp4_round_trip(float* x, std::int64_t rows, std::int64_t dim) override {
    if (rows <= 0) return;
    const std::size_t bytes = static_cast<std::size_t>(rows * dim) * sizeof(float);
    auto* dx = static_cast<float*>(upload(kA, x, bytes));
    cuda::fp4_round_trip(dx, rows, dim, stream_);
    download(x, dx, bytes);
  }

  void compressor_pool(const float* kv, const float* gate, std::int64_t groups, std::int64_t ratio, std::int64_t dim,
                       float* latents) override {
    if (groups <= 0) return;
    const std::size_t in_bytes = static_cast<std::size_t>(groups * ratio * dim) * sizeof(float);
    const std::size_t out_bytes = static_cast<std::size_t>(groups * dim) * sizeof(float);
    auto* dl = static_cast<float*>(slot(kC, out_bytes));
    cuda::compressor_pool(static_cast<const float*>(upload(kA, kv, in_bytes)), static_cast<const float*>(upload(kB, gate, in_bytes)),
                          groups, ratio, dim, dl, stream_);
    download(latents, dl, out_bytes);
  }

  // Scores on the device; each row's top-k and candidate blocks on the host, in key order with
  // kernels/top_k.h's order, as the CPU backend picks them.
  void indexer(const IndexerArgs& a) override {
    if (a.rows <= 0) return;
    const std::int64_t words = candidate_words(a.n_keys, a.block);
    const std::int64_t n_blocks = (a.n_keys + a.block - 1) / a.block;
    std::vector<float> scores(static_cast<std::size_t>(a.rows * a.n_keys));
    if (a.n_keys > 0) {
      DeviceIndexScores d;
      d.rows = a.rows;
      d.heads = a.heads;
      d.dim = a.dim;
      d.scale = a.scale;
      d.n_keys = a.n_keys;
      d.block = a.block;
      d.words = words;
      d.q = static_cast<const float*>(upload(kA, a.q, static_cast<std::size_t>(a.rows * a.heads * a.dim) * sizeof(float)));
      d.weights = static_cast<const float*>(upload(kB, a.weights, static_cast<std::size_t>(a.rows * a.heads) * sizeof(float)));
      d.keys = static_cast<const std::uint8_t*>(upload(kC, a.keys, static_cast<std::size_t>(a.n_keys * index_entry_bytes(a.dim))));
      d.visible = static_cast<const std::int64_t*>(upload(kD, a.visible, static_cast<std::size_t>(a.rows) * sizeof(std::int64_t)));
      if (a.candidates_in != nullptr) {
        std::vector<std::uint64_t> bits(static_cast<std::size_t>(a.rows * words));
        for (std::int64_t r = 0; r < a.rows; ++r) std::copy_n(a.candidates_in[r], words, &bits[static_cast<std::size_t>(r * words)]);
        d.candidates = static_cast<const std::uint64_t*>(upload(kE, bits.data(), bits.size() * sizeof(std::uint64_t)));
      }
      d.scores = static_cast<float*>(slot(kY, scores.size() * sizeof(float)));
      cuda::index_scores(d, stream_);
      download(scores.data(), d.scores, scores.size() * sizeof(float));
    }
    for (std::int64_t r = 0; r < a.rows; ++r) {
      const float* row = scores.data() + r * a.n_keys;
      const std::int64_t visible = a.visible[r];
      StreamingTopK picks(a.top_k);
      for (std::int64_t w = 0; w < visible; ++w) picks.push(static_cast<std::int32_t>(w), row[w]);
      a.selection[r] = picked_keys(picks);
      if (a.candidate_top_k <= 0) continue;
      StreamingTopK blocks(a.candidate_top_k);
      for (std::int64_t b = 0; b < n_blocks; ++b)
        blocks.push(static_cast<std::int32_t>(b), candidate_block_score(row, 0, a.n_keys, b, a.block, visible));
      set_picked_blocks(blocks, a.candidates_out[r], words);
    }
  }

  void router(const RouterArgs& a) override {
    if (a.rows <= 0 || a.top_k <= 0) return;
    DeviceRouter d;
    d.rows = a.rows;
    d.experts = a.experts;
    d.top_k = a.top_k;
    d.temperature = a.temperature;
    d.scaling = a.scaling;
    d.normalise = a.normalise;
    d.logits = static_cast<const float*>(upload(kA, a.logits, static_cast<std::size_t>(a.rows * a.experts) * sizeof(float)));
    d.bias = static_cast<const float*>(upload(kB, a.bias, static_cast<std::size_t>(a.experts) * sizeof(float)));
    // Picks past the expert count are never written: the outputs start as the caller's.
    const std::size_t picks = static_cast<std::size_t>(a.rows * a.top_k);
    d.expert = static_cast<std::int32_t*>(upload(kC, a.expert, picks * sizeof(std::int32_t)));
    d.weight = static_cast<float*>(upload(kD, a.weight, picks * sizeof(float)));
    cuda::router(d, stream_);
    download(a.expert, d.expert, picks * sizeof(std::int32_t));
    download(a.weight, d.weight, picks * sizeof(float));
  }

  void swiglu(float* gate, const float* up, std::int64_t rows, std::int64_t width, float limit,
              const float* row_weight) override {
    if (rows <= 0) return;
    const std::size_t bytes = static_cast<std::size_t>(rows * width) * sizeof(float);
    auto* dg = static_cast<float*>(upload(kA, gate, bytes));
    const float* dw =
        row_weight != nullptr ? static_cast<const float*>(upload(kC, row_weight, static_cast<std::size_t>(rows) * sizeof(float))) : nullptr;
    cuda::swiglu(dg, static_cast<const float*>(upload(kB, up, bytes)), rows, width, limit, dw, stream_);
    download(gate, dg, bytes);
  }

  // The rows of `out` up to the last one written travel.
  void add_rows(const float* y, std::int64_t m, std::int64_t d, const std::int64_t* dst, float* out) override {
    if (m <= 0) return;
    const std::size_t out_bytes = static_cast<std::size_t>((*std::max_element(dst, dst + m) + 1) * d) * sizeof(float);
    auto* dout = static_cast<float*>(upload(kA, out, out_bytes));
    cuda::add_rows(static_cast<const float*>(upload(kB, y, static_cast<std::size_t>(m * d) * sizeof(float))), m, d,
                   static_cast<const std::int64_t*>(upload(kC, dst, static_cast<std::size_t>(m) * sizeof(std::int64_t))), dout,
                   stream_);
    download(out, dout, out_bytes);
  }

  // The tables stay in host memory: the host gathers the rows' bytes, the device decodes them.
  void gather_rows(const RowTable& table, const std::int64_t* ids, std::int64_t n, float* out) override {
    if (n <= 0) return;
    const bool fp8 = table.format == TableFormat::kFp8Row32;
    const std::int64_t row_bytes = fp8 ? table.cols : table.cols * 2, scale_bytes = fp8 ? table.cols / 32 : 0;
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(n * row_bytes)), scales(static_cast<std::size_t>(n * scale_bytes));
    const auto* data = static_cast<const std::uint8_t*>(table.data);
    for (std::int64_t i = 0; i < n; ++i) {
      std::memcpy(&codes[static_cast<std::size_t>(i * row_bytes)], data + ids[i] * row_bytes, static_cast<std::size_t>(row_bytes));
      if (fp8)
        std::memcpy(&scales[static_cast<std::size_t>(i * scale_bytes)], table.scales + ids[i] * scale_bytes,
                    static_cast<std::size_t>(scale_bytes));
    }
    const std::size_t out_bytes = static_cast<std::size_t>(n * table.cols) * sizeof(float);
    auto* dout = static_cast<float*>(slot(kC, out_bytes));
    cuda::decode_table_rows(static_cast<int>(table.format), static_cast<const std::uint8_t*>(upload(kA, codes.data(), codes.size())),
                            fp8 ? static_cast<const std::uint8_t*>(upload(kB, scales.data(), scales.size())) : nullptr, n,
                            table.cols, dout, stream_);
    download(out, dout, out_bytes);
  }

  void engram_fuse(float* streams, const float* kv, const float* gate_weight, std::int64_t rows, std::int64_t hc,
                   std::int64_t d, float eps) override {
    if (rows <= 0) return;
    const std::size_t bytes = static_cast<std::size_t>(rows * hc * d) * sizeof(float);
    auto* ds = static_cast<float*>(upload(kA, streams, bytes));
    cuda::engram_fuse(ds, static_cast<const float*>(upload(kB, kv, static_cast<std::size_t>(rows * (hc + 1) * d) * sizeof(float))),
                      static_cast<const float*>(upload(kC, gate_weight, static_cast<std::size_t>(hc * d) * sizeof(float))), rows,
                      hc, d, eps, stream_);
    download(streams, ds, bytes);
  }

 private:
  // The staging buffers an op uses, each grown to the largest request it has seen.
  enum Slot { kA, kB, kC, kD, kE, kF, kY, kWeightData, kWeightScales, kSlots };

  struct Kept {
    std::size_t bytes;
    DeviceBuffer copy;
  };

  void* slot(Slot s, std::size_t bytes) {
    DeviceBuffer& buffer = slots_[s];
    if (buffer.bytes() < bytes || buffer.data() == nullptr) {
      // Grown by half again, so a sequence of slowly growing requests reallocates rarely.
      check(buffer.allocate(std::max(bytes, buffer.bytes() + buffer.bytes() / 2)), "allocate a staging buffer");
    }
    return buffer.data();
  }
  void* slot(Slot s) { return slots_[s].data(); }

  void* upload(Slot s, const void* host, std::size_t bytes) {
    void* device = slot(s, bytes);
    if (bytes > 0) check(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_), "copy to the device");
    return device;
  }

  // Waits for the op's kernels and copies its output back.
  void download(void* host, const void* device, std::size_t bytes) {
    if (bytes > 0) check(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_), "copy to the host");
    check(cudaStreamSynchronize(stream_), "run an op");
  }

  // The device copy of [host, host + bytes) when a kept weight holds all of it, else null.
  const void* kept_device(const void* host, std::size_t bytes) const {
    const auto address = reinterpret_cast<std::uintptr_t>(host);
    auto it = kept_.upper_bound(address);
    if (it == kept_.begin()) return nullptr;
    --it;
    const std::uintptr_t offset = address - it->first;
    if (offset + bytes > it->second.bytes) return nullptr;
    return static_cast<const std::uint8_t*>(it->second.copy.data()) + offset;
  }

  // The view's bytes on the device: a kept weight's copy, or this call's upload.
  const void* device_bytes(const ByteRange& range, Slot staging) {
    if (range.begin == nullptr || range.bytes == 0) return nullptr;
    if (const void* kept = kept_device(range.begin, range.bytes)) return kept;
    return upload(staging, range.begin, range.bytes);
  }

  void run_linear(const float* x, std::int64_t m, const WeightView& w) {
    HIPPO_CHECK(!w.lane_order, "CUDA linear: FP4 lane order is the CPU backend's own layout");
    DeviceWeight d;
    d.format = static_cast<DeviceWeightFormat>(w.format);
    d.rows = w.rows;
    d.cols = w.cols;
    d.block = w.block;
    if (w.format == WeightFormat::kFp4Row32) {
      d.code_stride = fp4_code_stride(w);
      d.scale_stride = fp4_scale_stride(w);
    }
    d.data = device_bytes(data_range(w), kWeightData);
    d.scales = static_cast<const std::uint8_t*>(device_bytes(scales_range(w), kWeightScales));
    const auto* dx = static_cast<const float*>(upload(kA, x, static_cast<std::size_t>(m * w.cols) * sizeof(float)));
    auto* dy = static_cast<float*>(slot(kY, static_cast<std::size_t>(m * w.rows) * sizeof(float)));
    cuda::linear(dx, m, d, dy, stream_);
  }

  int device_;
  std::string name_;
  cudaStream_t stream_{};
  DeviceBuffer slots_[kSlots];
  std::map<std::uintptr_t, Kept> kept_;
  std::vector<float> host_floats_;
};

}  // namespace

Result<std::unique_ptr<Backend>> make_cuda_backend(int device) {
#if defined(HIPPO_HIP)
  constexpr const char* kRuntime = "HIP";
#else
  constexpr const char* kRuntime = "CUDA";
#endif
  int count = 0;
  if (const cudaError_t status = cudaGetDeviceCount(&count); status != cudaSuccess)
    return Status(ErrorCode::kUnavailable, fmt::format("no {} device: {}", kRuntime, cudaGetErrorString(status)));
  if (device < 0 || device >= count)
    return Status(ErrorCode::kUnavailable, fmt::format("no {} device {} (this machine has {})", kRuntime, device, count));
#if defined(HIPPO_HIP)
  return std::unique_ptr<Backend>(new CudaBackend(device, fmt::format("hip:{}", device)));
#else
  return std::unique_ptr<Backend>(new CudaBackend(device, fmt::format("cuda:{}", device)));
#endif
}

}  // namespace hippo::kernels::cuda
