// TensorTable: every tensor of a V4.1 checkpoint in the release layout, derived from the config
// (design/deepseek-v41-architecture.md §4.1, §4.4), with its dtype and shape on disk. One table drives
// loading (missing, extra or mis-shaped tensors are errors, checkpoint.h), `model init` (what to write
// and how to fill it, random_init.h) and `model inspect` (parameter counts, model_summary.h).
//
// Two storage layouts share the names:
//   quantised (config has quantization_config): dense linears are F8_E4M3 `.weight` + F8_E8M0 `.scale`
//     with weight_block_size blocks; routed experts (trunk and DSpark) are packed FP4 `.weight` (I8
//     [out, in/2]) + per-32 E8M0 `.scale`; Engram tables are F8_E4M3 rows with one E8M0 per 32;
//   plain (no quantization_config): the same linears as BF16 `.weight` only.
// Everything else (norms, embeddings, compressors, routers, mHC, vision) is BF16 or F32 in both.
#pragma once

#include "engine/config/model_config.h"
#include "engine/weights/dtype.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace hippo::engine {

// What a tensor belongs to, for parameter accounting.
enum class Component {
  kEmbedding,      // embed.weight
  kHead,           // head.weight (none where the head is tied to embed.weight)
  kNorm,           // RMSNorm weights of the trunk (attn_norm, ffn_norm, final norm)
  kMhc,            // hc_{attn,ffn}_{fn,base,scale}
  kAttention,      // wq_a, q_norm, wq_b, wkv, kv_norm, wo_a, wo_b, attn_sink
  kCompressor,     // attn.compressor.* (KV sources only)
  kIndexer,        // attn.indexer.* (index keys at KV sources, queries at index sources)
  kRouter,         // ffn.gate.{weight,bias,bias_vl}
  kRoutedExperts,  // ffn.experts.E.*
  kSharedExperts,  // ffn.shared_experts.*
  kEngramTable,    // layers.L.engram.embed.* (hash-addressed rows)
  kEngram,         // layers.L.engram.{wkv,q_weight,k_weight}
  kDspark,         // mtp.K.*
  kVision,         // vision.*, aligner.*, image_{start,end,newline}
};
std::string_view component_name(Component component);

// The prefix of the tensor the head reads: "head", or "embed" where text_config ties them (a small
// model trained with one tensor for both stores it once).
std::string_view head_weight_prefix(const TextConfig& text);

enum class Storage {
  kValues,     // the values themselves (BF16, F32, ...)
  kFp8Codes,   // F8_E4M3 codes of a block-quantised matrix
  kFp8Scales,  // F8_E8M0 block scales of the matrix named by weight_name
  kFp4Codes,   // two E2M1 codes per byte (I8 [out, in/2])
  kFp4Scales,  // F8_E8M0 scale per 32 codes of the matrix named by weight_name
};

// How `model init` fills a tensor (random_init.cpp has the arithmetic).
//   kUniform: center + k * 2^(exponent - bits + 1), k uniform in [-2^(bits-1), 2^(bits-1)): values
//             exactly representable in the tensor's dtype (bits <= 8 for BF16, <= 24 for F32).
//   kFp8:     random E4M3 codes times E8M0 block scales 2^(exponent) or 2^(exponent - 1), in the
//             spec's blocks; a plain (BF16) tensor holds the exact dequantised values, so a plain and a
//             quantised checkpoint of one seed are the same model.
//   kFp4:     random E2M1 codes times per-32 scales 2^(exponent) or 2^(exponent - 1), likewise.
struct InitRule {
  enum class Kind { kUniform, kFp8, kFp4 };
  Kind kind = Kind::kUniform;
  double center = 0;
  int exponent = 0;
  int bits = 8;
};

struct TensorSpec {
  std::string name;
  DType dtype = DType::kBF16;
  std::vector<int64_t> shape;          // on disk
  std::vector<int64_t> logical_shape;  // of the values it stands for: [out, in] of a linear
  Storage storage = Storage::kValues;
  std::vector<int64_t> block;          // FP8/FP4 matrices (also plain ones, for init): [rows, cols] per scale
  std::string weight_name;             // the matrix this tensor stores or scales (PRNG stream of init)
  int64_t n_params = 0;                // logical parameters it carries; 0 for scales
  Component component = Component::kAttention;
  int64_t layer = -1;                  // trunk layer; n_layers + k for DSpark stage k; -1 otherwise
  InitRule init;

  int64_t n_bytes() const { return element_count(shape) * dtype_size(dtype); }
};

class TensorTable {
 public:
  // The config must have passed validate_model_config.
  static TensorTable build(const ModelConfig& config);

  const std::vector<TensorSpec>& tensors() const { return tensors_; }
  const TensorSpec* find(std::string_view name) const;
  int64_t total_bytes() const;

 private:
  std::vector<TensorSpec> tensors_;
  std::unordered_map<std::string, size_t> by_name_;
};

}  // namespace hippo::engine
