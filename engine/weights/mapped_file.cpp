// POSIX mmap/mincore behind MappedFile. An empty file maps to an empty span (mmap refuses length 0).
#include "engine/weights/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace hippo::engine {

Result<MappedFile> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    ErrorCode code = errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIoError;
    return make_error(code, "{}: cannot be opened ({})", path, std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return make_error(ErrorCode::kIoError, "{}: stat failed ({})", path, std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(ErrorCode::kCorrupt, "{}: not a regular file", path);
  }
  const auto size = static_cast<size_t>(st.st_size);
  void* data = nullptr;
  if (size > 0) {
    data = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (data == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return make_error(ErrorCode::kIoError, "{}: mmap of {} bytes failed ({})", path, size, std::strerror(err));
    }
  }
  ::close(fd);  // the mapping keeps the file open
  return MappedFile(path, static_cast<const std::byte*>(data), size);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    data_ = other.data_;
    size_ = other.size_;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

MappedFile::~MappedFile() { release(); }

void MappedFile::release() {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

void MappedFile::drop_pages(const std::byte* begin, size_t bytes) const {
  if (begin < data_ || begin + bytes > data_ + size_ || bytes == 0) return;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = (reinterpret_cast<uintptr_t>(begin) + page - 1) / page * page;
  const uintptr_t last = (reinterpret_cast<uintptr_t>(begin) + bytes) / page * page;
  if (first < last) static_cast<void>(::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED));
}

uint64_t MappedFile::resident_bytes() const {
  if (size_ == 0) return 0;
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t pages = (size_ + page - 1) / page;
  std::vector<unsigned char> in_core(pages);
  if (::mincore(const_cast<std::byte*>(data_), size_, in_core.data()) != 0) return 0;
  uint64_t resident = 0;
  for (unsigned char flag : in_core)
    if (flag & 1) resident += page;
  return resident;
}

}  // namespace hippo::engine
