// The op layer: every piece of arithmetic of the DeepSeek-V4.1 forward pass, as a table of named ops
// that a backend implements. engine/model calls these ops only; which backend runs them is chosen at
// load (backend_registry.h), and a checkpoint that needs an op or a weight format the backend lacks
// is refused there with both named.
//
// Each op's contract is the comment on it. kernels/ref/ref_backend.h is the scalar twin of every op
// (reductions in double), the truth the others are measured against op by op with a per-op tolerance
// (tests/kernels/backend_ops_test.cpp). Within one backend the engine's invariants hold bit for bit:
// each output row depends only on its own inputs (never on how many rows came with it, how they were
// split into calls, or the thread count), so a chunked prefill equals a one-shot one and a batch of
// sessions equals each session alone.
//
// Buffers are host memory here (the CPU backends read and write the caller's arrays), except the
// model's weights, which a device backend keeps a copy of from load on (keep_weight); a device
// backend stages everything else per op for now (kernels/cuda/cuda_backend.h).
#pragma once

#include "kernels/kv_entry_formats.h"
#include "kernels/weight_view.h"

#include <cstdint>
#include <vector>

namespace hippo::kernels {

enum class Op {
  kLinear,          // y = x · Wᵀ in every weight format (and linear_rows)
  kRmsNorm,         // RMSNorm of rows, weighted or not
  kRope,            // interleaved-pair rotary embedding by given angles
  kHcMix,           // the mHC mixes of a site: pre, post, Sinkhorn-projected comb
  kHcCollapse,      // Σ pre · stream
  kHcExpand,        // post · sub + comb-mixed streams
  kAttention,       // softmax with the sink over the window keys then the selected entries
  kKvEncode,        // rows to the session state's quantised entries (window FP8, compressed/index FP4)
  kKvDecode,        // entries back to floats
  kFp4RoundTrip,    // the index queries' FP4 round trip, in place
  kCompressorPool,  // per-channel softmax pooling of a compression group
  kIndexer,         // the lightning indexer: scores, top-k, candidate blocks
  kRouter,          // router scores, top-k experts and their weights
  kSwiGlu,          // the clamped SwiGLU of an expert, times its routing weight
  kAddRows,         // scatter-add of rows (expert outputs into their tokens' rows)
  kGatherRows,      // rows of an embedding or Engram table, decoded
  kEngramFuse,      // Engram's gated fusion into the streams
};
inline constexpr Op kAllOps[] = {Op::kLinear,    Op::kRmsNorm,  Op::kRope,           Op::kHcMix,    Op::kHcCollapse,
                                 Op::kHcExpand,  Op::kAttention, Op::kKvEncode,      Op::kKvDecode, Op::kFp4RoundTrip,
                                 Op::kCompressorPool, Op::kIndexer, Op::kRouter,     Op::kSwiGlu,   Op::kAddRows,
                                 Op::kGatherRows, Op::kEngramFuse};
const char* op_name(Op op);

// A table read row by row (the token embedding, an Engram table).
enum class TableFormat {
  kBF16,      // uint16 [rows, cols]
  kFp8Row32,  // E4M3FN [rows, cols] + E8M0 scales [rows, cols / 32]
};
const char* table_format_name(TableFormat format);

struct RowTable {
  TableFormat format = TableFormat::kBF16;
  const void* data = nullptr;
  const std::uint8_t* scales = nullptr;  // kFp8Row32 only
  std::int64_t rows = 0;
  std::int64_t cols = 0;
};

// kHcMix. From the site's projection `mixes` ([rows, mix_stride]; the first 2·hc + hc² columns used):
//   pre[r, i]  = sigmoid(m[i] · scale[0] + base[i]) + eps
//   post[r, i] = 2 · sigmoid(m[hc + i] · scale[1] + base[hc + i])
//   comb[r]    = Sinkhorn(softmax over each row j of (m[2hc + j·hc + k] · scale[2] + base[2hc + j·hc + k]) + eps):
//                normalise columns, then (rows, columns) sinkhorn_iters - 1 times, each c / (Σ + eps).
struct HcMixArgs {
  const float* mixes = nullptr;
  std::int64_t rows = 0, hc = 0, mix_stride = 0;
  const float* scale = nullptr;  // [3]
  const float* base = nullptr;   // [2·hc + hc²]
  float eps = 0;
  std::int64_t sinkhorn_iters = 0;
  float* pre = nullptr;   // [rows, hc]
  float* post = nullptr;  // [rows, hc]
  float* comb = nullptr;  // [rows, hc, hc]
};

// kAttention. Keys are values too (one shared latent per position). For row r and head h:
//   out[r, h] = Σ_j p_j · k_j,  p = exp(s_j - M) / (Σ_j exp(s_j - M) + exp(sink_h - M)),
//   s_j = scale · (q[r, h] · k_j),  M = max(sink_h, max_j s_j),
// over j: row r's window keys keys[window_first[r] .. window_first[r] + window_count[r]) in position
// order, then its selected entries selected[selected_offset[r] .. selected_offset[r + 1]).
struct AttentionArgs {
  std::int64_t rows = 0, heads = 0, dim = 0;
  float scale = 0;
  const float* sinks = nullptr;  // [heads]
  const float* q = nullptr;      // [rows, heads, dim]
  const float* const* keys = nullptr;  // the window keys of all these rows, in position order
  std::int64_t n_keys = 0;
  const std::int64_t* window_first = nullptr;  // [rows]
  const std::int64_t* window_count = nullptr;  // [rows]
  const float* const* selected = nullptr;       // may be null when no row selects anything
  const std::int64_t* selected_offset = nullptr;  // [rows + 1], or null
  float* out = nullptr;  // [rows, heads, dim]
};

// kIndexer. For row r and each visible key w < visible[r] (among those of the blocks in
// candidates_in[r] when that is set):
//   score(r, w) = Σ_h relu(q[r, h] · key_w) · scale · weights[r, h]
// with key_w the decoded index entry w. selection[r] = the top_k best keys (higher first, ties to the
// lower index), sorted ascending. A candidate source (candidate_top_k > 0) also sets in
// candidates_out[r] (a bitset, cleared first) its candidate_top_k best blocks of `block` keys, a
// block scoring the maximum of its visible keys' scores, +inf for the block of the last visible key,
// -inf (never picked) with no visible key. A reindex layer (candidates_in set) is never a candidate
// source.
struct IndexerArgs {
  std::int64_t rows = 0, heads = 0, dim = 0;
  const float* q = nullptr;        // [rows, heads, dim], already FP4 round-tripped
  const float* weights = nullptr;  // [rows, heads]
  float scale = 0;
  const std::uint8_t* keys = nullptr;  // n_keys entries of KvFormat::kIndex
  std::int64_t n_keys = 0;
  const std::int64_t* visible = nullptr;  // [rows], each <= n_keys
  std::int64_t top_k = 0;
  std::int64_t block = 0;
  std::int64_t candidate_top_k = 0;
  std::uint64_t* const* candidates_out = nullptr;     // [rows][candidate_words(n_keys, block)]
  const std::uint64_t* const* candidates_in = nullptr;  // [rows][...] or null: every visible key
  std::vector<std::int32_t>* selection = nullptr;       // [rows]
};
inline std::int64_t candidate_words(std::int64_t n_keys, std::int64_t block) {
  return ((n_keys + block - 1) / block + 63) / 64;
}

// kRouter. s = sqrt(softplus(logit / temperature)) (softplus(x) = x above 20); expert[r] = the top_k
// best of s + bias (higher first, ties to the lower index); weight = s_e, divided by (Σ chosen s +
// 1e-20) when normalise and top_k > 1, times scaling.
struct RouterArgs {
  const float* logits = nullptr;  // [rows, experts]
  std::int64_t rows = 0, experts = 0, top_k = 0;
  const float* bias = nullptr;  // [experts]
  float temperature = 1, scaling = 1;
  bool normalise = false;
  std::int32_t* expert = nullptr;  // [rows, top_k]
  float* weight = nullptr;         // [rows, top_k]
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual const char* name() const = 0;
  virtual int threads() const = 0;
  virtual bool supports(Op op) const = 0;
  // Which weight formats kLinear reads, which table formats kGatherRows reads.
  virtual bool supports(WeightFormat format) const = 0;
  virtual bool supports(TableFormat format) const = 0;

  // The model's weight `w`, whose bytes stay unchanged while the backend lives (Model::load calls it
  // for every matrix it will pass to linear). A device backend uploads it once and from then on
  // reads its own copy for any view inside those bytes; the CPU backend does the same for FP4 codes
  // (in lane order, fp4_lane_copies.h), marks FP8 weights' special blocks (fp8_special_blocks.h) and
  // reads the others, and FP8 codes, in place. True when the backend will
  // not read w's codes (w.data) again, so that the caller may drop their pages. Views never kept
  // are read where they are, every call.
  virtual Result<bool> keep_weight(const WeightView& w) {
    static_cast<void>(w);
    return false;
  }

  // kLinear: y [m, w.rows] = x [m, w.cols] · Wᵀ; linear_rows writes row i of y to y_rows[i]. The view
  // is validated (WeightView::validate).
  virtual void linear(const float* x, std::int64_t m, const WeightView& w, float* y) = 0;
  virtual void linear_rows(const float* x, std::int64_t m, const WeightView& w, float* const* y_rows) = 0;

  // kRmsNorm: out[r] = weight ⊙ x[r] / sqrt(mean(x[r]²) + eps) (x, out [rows, n]; no weight when
  // null; out may be x).
  virtual void rms_norm(const float* x, std::int64_t rows, std::int64_t n, const float* weight, float eps,
                        float* out) = 0;

  // kRope: in each of the `heads` vectors of `dim` floats of row r, the pairs (2i, 2i + 1) of the last
  // rope_dims channels rotate by the angle whose cos and sin are cos[r, i], sin[r, i] ([rows,
  // rope_dims / 2]); inverse rotates by minus the angle.
  virtual void rope(float* x, std::int64_t rows, std::int64_t heads, std::int64_t dim, std::int64_t rope_dims,
                    const float* cos, const float* sin, bool inverse) = 0;

  virtual void hc_mix(const HcMixArgs& args) = 0;
  // kHcCollapse: out[r] = Σ_i pre[r, i] · streams[r, i] (streams [rows, hc, d], out [rows, d]).
  virtual void hc_collapse(const float* streams, const float* pre, std::int64_t rows, std::int64_t hc, std::int64_t d,
                           float* out) = 0;
  // kHcExpand: streams[r, k] <- post[r, k] · sub[r] + Σ_j comb[r, j, k] · streams[r, j].
  virtual void hc_expand(float* streams, const float* sub, const float* post, const float* comb, std::int64_t rows,
                         std::int64_t hc, std::int64_t d) = 0;

  virtual void attention(const AttentionArgs& args) = 0;

  // kKvEncode / kKvDecode: `rows` vectors of `dim` floats to and from entries of `format`
  // (kv_entry_formats.h), kv_entry_bytes(format, dim) each, back to back.
  virtual void kv_encode(KvFormat format, const float* x, std::int64_t rows, std::int64_t dim, std::uint8_t* entries) = 0;
  virtual void kv_decode(KvFormat format, const std::uint8_t* entries, std::int64_t rows, std::int64_t dim,
                         float* x) = 0;
  // kFp4RoundTrip: x <- decode(encode(x)) in KvFormat::kIndex, rows of dim floats, in place.
  virtual void fp4_round_trip(float* x, std::int64_t rows, std::int64_t dim) = 0;

  // kCompressorPool: latents[g, c] = Σ_j kv[g·ratio + j, c] · softmax_j(gate[g·ratio + j, c]) over the
  // group's j < ratio (kv, gate [groups·ratio, dim]; latents [groups, dim]).
  virtual void compressor_pool(const float* kv, const float* gate, std::int64_t groups, std::int64_t ratio,
                               std::int64_t dim, float* latents) = 0;

  virtual void indexer(const IndexerArgs& args) = 0;
  virtual void router(const RouterArgs& args) = 0;

  // kSwiGlu: gate[r, j] <- silu(min(gate, limit)) · clamp(up, -limit, limit) (no clamps when limit <=
  // 0), then times row_weight[r] when row_weight is set (gate, up [rows, width]).
  virtual void swiglu(float* gate, const float* up, std::int64_t rows, std::int64_t width, float limit,
                      const float* row_weight) = 0;

  // kAddRows: out[dst[i]] += y[i] for i < m (rows of d floats; dst has no repeats).
  virtual void add_rows(const float* y, std::int64_t m, std::int64_t d, const std::int64_t* dst, float* out) = 0;

  // kGatherRows: out[i] = row ids[i] of the table, decoded (out [n, table.cols]).
  virtual void gather_rows(const RowTable& table, const std::int64_t* ids, std::int64_t n, float* out) = 0;

  // kEngramFuse: for row r and stream i, with h = streams[r, i], k = kv[r, i], v = kv[r, hc] (kv [rows,
  // hc + 1, d]) and w = gate_weight[i]:
  //   g = (Σ (h ⊙ w) · k) · rsqrt(mean(h²) + eps) · rsqrt(mean(k²) + eps) / sqrt(d)
  //   h <- h + sigmoid(sign(g) · sqrt(max(|g|, 1e-6))) · v
  virtual void engram_fuse(float* streams, const float* kv, const float* gate_weight, std::int64_t rows,
                           std::int64_t hc, std::int64_t d, float eps) = 0;
};

}  // namespace hippo::kernels
