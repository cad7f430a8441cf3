// Which compressed entries a forward has decoded, and where: entry id -> row of its decoded copy. An
// open-addressing table sized by what is decoded (a forward's cache holds a few thousand entries at
// most), so that neither a lookup nor emptying it costs in proportion to the session's entries: a
// table with a slot per entry, reset per forward, took about 2% of a decode step at 1M tokens.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace hippo::engine {

class EntrySlots {
 public:
  // The row of entry `id`, or -1 when it is not here.
  std::int32_t find(std::int32_t id) const {
    if (keys_.empty()) return -1;
    for (std::size_t i = home(id);; i = (i + 1) & mask()) {
      if (keys_[i] == id) return rows_[i];
      if (keys_[i] == kEmpty) return -1;
    }
  }

  // Adds `id` (not here yet) at `row`.
  void insert(std::int32_t id, std::int32_t row) {
    if (2 * (size_ + 1) > keys_.size()) grow();
    std::size_t i = home(id);
    while (keys_[i] != kEmpty) i = (i + 1) & mask();
    keys_[i] = id;
    rows_[i] = row;
    ++size_;
  }

  // Forgets every entry; keeps the table's room.
  void clear() {
    if (size_ == 0) return;
    std::fill(keys_.begin(), keys_.end(), kEmpty);
    size_ = 0;
  }

  std::size_t size() const { return size_; }

 private:
  static constexpr std::int32_t kEmpty = -1;

  std::size_t mask() const { return keys_.size() - 1; }
  // Fibonacci hashing: consecutive ids spread over the table.
  std::size_t home(std::int32_t id) const {
    return static_cast<std::size_t>((static_cast<std::uint64_t>(static_cast<std::uint32_t>(id)) * 0x9E3779B97F4A7C15ull) >>
                                    (64 - shift_));
  }

  void grow() {
    std::vector<std::int32_t> keys = std::move(keys_), rows = std::move(rows_);
    shift_ = keys.empty() ? 10 : shift_ + 1;
    keys_.assign(std::size_t{1} << shift_, kEmpty);
    rows_.assign(keys_.size(), 0);
    size_ = 0;
    for (std::size_t i = 0; i < keys.size(); ++i)
      if (keys[i] != kEmpty) insert(keys[i], rows[i]);
  }

  std::vector<std::int32_t> keys_, rows_;
  std::size_t size_ = 0;
  int shift_ = 0;  // keys_.size() == 2^shift_
};

}  // namespace hippo::engine
