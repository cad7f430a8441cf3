// Reading safetensors shards: an 8-byte little-endian header length, a JSON header mapping tensor
// names to {dtype, shape, data_offsets}, then the data section. The shard stays memory-mapped and
// tensors are spans into it.
//
// A shard comes from outside and is validated before any tensor is handed out (every failure names
// the shard and, where there is one, the tensor):
//   (1) the file holds the 8-byte length and the whole header; the header is a JSON object;
//   (2) every entry has a supported dtype, a shape of non-negative integers and data_offsets [b, e]
//       with e - b == elements x dtype size;
//   (3) every tensor lies inside the data section (a truncated shard fails here);
//   (4) the tensors tile the data section exactly: sorted by offset, no overlap, no gap, nothing after
//       the last one (the format's rule; the Python safetensors library enforces it too).
#pragma once

#include "base/status.h"
#include "engine/weights/dtype.h"
#include "engine/weights/mapped_file.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hippo::engine {

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // from the start of the file
  uint64_t size = 0;    // bytes
};

// Parses and validates a whole shard image (header and data). `shard` names it in messages. Entries
// come back in file order.
Result<std::vector<SafetensorsEntry>> parse_safetensors(std::span<const std::byte> file, std::string_view shard);

class SafetensorsFile {
 public:
  static Result<SafetensorsFile> open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  std::span<const std::byte> data(const SafetensorsEntry& entry) const {
    return file_.bytes().subspan(entry.offset, entry.size);
  }
  const MappedFile& file() const { return file_; }

 private:
  SafetensorsFile(MappedFile file, std::vector<SafetensorsEntry> entries)
      : file_(std::move(file)), entries_(std::move(entries)) {}

  MappedFile file_;
  std::vector<SafetensorsEntry> entries_;
};

}  // namespace hippo::engine
