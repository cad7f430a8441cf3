// Writing one safetensors shard. Deterministic: the same tensors give the same bytes.
//
// Layout choices (all allowed by the format, and read by the Python safetensors library):
//   - tensors are laid out by element size, largest first (I64, F32, BF16, then bytes), keeping the
//     order they were added within a size; with the data section starting 8-aligned this aligns
//     every tensor to its element size, so readers may use the mapping in place;
//   - the header lists them in data order, with `__metadata__ {"format": "pt"}` first (transformers
//     expects it), padded with spaces to a multiple of 8 bytes.
#pragma once

#include "base/status.h"
#include "engine/weights/dtype.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hippo::engine {

struct ShardTensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<std::byte> data;  // little-endian, elements x dtype size bytes
};

// Writes the shard to `path` (replacing it). The data sizes must match dtype and shape (checked).
Status write_safetensors(const std::string& path, std::vector<ShardTensor> tensors);

}  // namespace hippo::engine
