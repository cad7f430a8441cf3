// The CPU encoders and decoders of the session state's quantised entries (kv_entry_formats.h): table
// lookups instead of the reference decoders' ldexp (the tables are built from those decoders, so the
// values are the same), branch-free E2M1 rounding that vectorises.
#pragma once

#include "kernels/kv_entry_formats.h"

#include <cstdint>

namespace hippo::kernels::cpu {

void encode_window_entry(const float* x, std::int64_t dim, std::uint8_t* out);
void decode_window_entry(const std::uint8_t* in, std::int64_t dim, float* x);

void encode_compressed_entry(const float* x, std::int64_t dim, std::uint8_t* out);
void decode_compressed_entry(const std::uint8_t* in, std::int64_t dim, float* x);

void encode_index_entry(const float* x, std::int64_t dim, std::uint8_t* out);
void decode_index_entry(const std::uint8_t* in, std::int64_t dim, float* x);

// The index-query round trip in place (E2M1, UE8M0 scale per 32).
void fp4_ue8m0_round_trip(float* x, std::int64_t dim);

}  // namespace hippo::kernels::cpu
