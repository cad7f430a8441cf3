#include "kernels/backend.h"

namespace hippo::kernels {

const char* op_name(Op op) {
  switch (op) {
    case Op::kLinear: return "linear";
    case Op::kRmsNorm: return "rms_norm";
    case Op::kRope: return "rope";
    case Op::kHcMix: return "hc_mix";
    case Op::kHcCollapse: return "hc_collapse";
    case Op::kHcExpand: return "hc_expand";
    case Op::kAttention: return "attention";
    case Op::kKvEncode: return "kv_encode";
    case Op::kKvDecode: return "kv_decode";
    case Op::kFp4RoundTrip: return "fp4_round_trip";
    case Op::kCompressorPool: return "compressor_pool";
    case Op::kIndexer: return "indexer";
    case Op::kRouter: return "router";
    case Op::kSwiGlu: return "swiglu";
    case Op::kAddRows: return "add_rows";
    case Op::kGatherRows: return "gather_rows";
    case Op::kEngramFuse: return "engram_fuse";
  }
  return "?";
}

const char* table_format_name(TableFormat format) {
  switch (format) {
    case TableFormat::kBF16: return "bf16";
    case TableFormat::kFp8Row32: return "fp8_row32";
  }
  return "?";
}

}  // namespace hippo::kernels
