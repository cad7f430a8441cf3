// MappedFile: a read-only memory mapping of a whole file. Checkpoint shards are mapped, never read
// into buffers: the page cache is the only copy of the weights, pages come in when first touched, and
// resident_bytes() says how much of the mapping is in RAM right now.
#pragma once

#include "base/status.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace hippo::engine {

class MappedFile {
 public:
  static Result<MappedFile> open(const std::string& path);

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const std::string& path() const { return path_; }
  std::span<const std::byte> bytes() const { return {data_, size_}; }
  uint64_t size() const { return size_; }

  // Bytes of the mapping whose pages are in memory (mincore), rounded to whole pages.
  uint64_t resident_bytes() const;

  // Takes the whole pages inside [begin, begin + bytes) of the mapping out of this process's memory
  // (madvise MADV_DONTNEED): bytes a backend keeps its own copy of. They are still mapped, and come
  // back from the file if read again.
  void drop_pages(const std::byte* begin, size_t bytes) const;

 private:
  MappedFile(std::string path, const std::byte* data, size_t size) : path_(std::move(path)), data_(data), size_(size) {}
  void release();

  std::string path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace hippo::engine
