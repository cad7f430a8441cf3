// The CPU backend's ops beyond the linear layer (contracts in kernels/backend.h). Row loops are
// plain scalar code in the order the contracts state, so a row's bits never depend on the rows
// beside it; the attention and indexer inner loops use attention_ops.h and the linear layer.
#pragma once

#include "kernels/backend.h"
#include "kernels/cpu/thread_pool.h"

#include <cstdint>

namespace hippo::kernels::cpu {

// norm_rope.cpp
void rms_norm(const float* x, std::int64_t rows, std::int64_t n, const float* weight, float eps, float* out);
void rope(float* x, std::int64_t rows, std::int64_t heads, std::int64_t dim, std::int64_t rope_dims, const float* cos,
          const float* sin, bool inverse);

// mhc_ops.cpp
void hc_mix(const HcMixArgs& args);
void hc_collapse(const float* streams, const float* pre, std::int64_t rows, std::int64_t hc, std::int64_t d, float* out);
void hc_expand(float* streams, const float* sub, const float* post, const float* comb, std::int64_t rows,
               std::int64_t hc, std::int64_t d);

// attention_op.cpp, indexer_op.cpp
void attention(const AttentionArgs& args, ThreadPool& pool);
void indexer(const IndexerArgs& args, ThreadPool& pool);

// compressor_pool.cpp; router, swiglu, add_rows: moe_ops.cpp; gather_rows, engram_fuse: engram_ops.cpp
void compressor_pool(const float* kv, const float* gate, std::int64_t groups, std::int64_t ratio, std::int64_t dim,
                     float* latents);
void router(const RouterArgs& args);
void swiglu(float* gate, const float* up, std::int64_t rows, std::int64_t width, float limit, const float* row_weight);
void add_rows(const float* y, std::int64_t m, std::int64_t d, const std::int64_t* dst, float* out);
void gather_rows(const RowTable& table, const std::int64_t* ids, std::int64_t n, float* out);
void engram_fuse(float* streams, const float* kv, const float* gate_weight, std::int64_t rows, std::int64_t hc,
                 std::int64_t d, float eps);

}  // namespace hippo::kernels::cpu
