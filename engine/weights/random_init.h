// Deterministic tensor contents for `hippo model init`: the same seed gives the same bytes on every
// machine. No std:: distributions (their output is implementation-defined) and no floating-point
// arithmetic that could round: values are built from integers and powers of two.
//
// The generator is counter-based, so any element can be computed alone and in any order:
//   key(seed, stream)  = splitmix64_mix(seed ^ fnv1a64(stream))
//   bits(key, i)       = splitmix64_mix(key + (i + 1) * 0x9E3779B97F4A7C15)
// where fnv1a64 is the 64-bit FNV-1a hash of the stream's bytes and splitmix64_mix is the output
// function of SplitMix64 (xor-shift 30, multiply 0xBF58476D1CE4E5B9, xor-shift 27, multiply
// 0x94D049BB133111EB, xor-shift 31). The stream of a tensor is the name of the matrix it stores; its
// scales use "<name>#scales", so a weight and its scales are independent streams and the plain and the
// quantised layouts of one seed hold the same values.
#pragma once

#include "engine/weights/tensor_table.h"

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace hippo::engine {

uint64_t splitmix64_mix(uint64_t z);
uint64_t fnv1a64(std::string_view bytes);
uint64_t stream_key(uint64_t seed, std::string_view stream);
inline uint64_t stream_bits(uint64_t key, uint64_t index) {
  return splitmix64_mix(key + (index + 1) * 0x9E3779B97F4A7C15ull);
}

// The bytes of one tensor (little-endian, spec.n_bytes() of them).
std::vector<std::byte> generate_tensor(const TensorSpec& spec, uint64_t seed);

}  // namespace hippo::engine
