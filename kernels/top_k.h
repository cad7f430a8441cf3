// Top-k selection with the reference's order: higher scores first, ties to the lower index. The
// router's experts and the indexer's keys and candidate blocks (the CPU backend's streaming form),
// and what the indexer makes of its picks, for every backend that picks on the host.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

namespace hippo::kernels {

// The k best of a sequence of scores fed in index order (higher first, ties to the lower index).
// The order is total, so the answer is unique: a heap holds the best k so far, its worst on top, and
// entries come in index order, so a later entry displaces the worst only with a higher score. Fed
// in pieces (the indexer's key tiles), it keeps exactly what top_k() over the whole array picks.
class StreamingTopK {
 public:
  explicit StreamingTopK(std::int64_t k) : k_(std::max<std::int64_t>(0, k)) { best_.reserve(static_cast<size_t>(k_)); }

  void push(std::int32_t index, float score) {
    if (static_cast<std::int64_t>(best_.size()) < k_) {
      best_.push_back({score, index});
      if (static_cast<std::int64_t>(best_.size()) == k_) std::make_heap(best_.begin(), best_.end(), better);
      return;
    }
    if (k_ == 0 || !(score > best_.front().score)) return;
    std::pop_heap(best_.begin(), best_.end(), better);
    best_.back() = {score, index};
    std::push_heap(best_.begin(), best_.end(), better);
  }

  // Whether k entries are held: then only a score above worst() can enter (with k = 0, none can).
  bool full() const { return static_cast<std::int64_t>(best_.size()) == k_; }
  float worst() const { return k_ == 0 ? std::numeric_limits<float>::infinity() : best_.front().score; }

  // The picks, best first, with their scores; the object is spent.
  struct Entry {
    float score;
    std::int32_t index;
  };
  std::vector<Entry> take() {
    if (static_cast<std::int64_t>(best_.size()) == k_) std::sort_heap(best_.begin(), best_.end(), better);
    else std::sort(best_.begin(), best_.end(), better);  // fewer than k fed: all of them, in order
    return std::move(best_);
  }

 private:
  static bool better(const Entry& a, const Entry& b) { return a.score > b.score || (a.score == b.score && a.index < b.index); }
  std::int64_t k_;
  std::vector<Entry> best_;
};

// The k best of `scores` (higher first, ties to the lower index), as indices in that order.
inline std::vector<std::int32_t> top_k(const float* scores, std::int64_t n, std::int64_t k) {
  StreamingTopK best(std::min(k, n));
  for (std::int32_t i = 0; i < static_cast<std::int32_t>(n); ++i) best.push(i, scores[i]);
  std::vector<std::int32_t> out;
  for (const StreamingTopK::Entry& e : best.take()) out.push_back(e.index);
  return out;
}

// The indexer's picks of one row from its top-k: the keys, in ascending order, without those scored
// -inf (not visible, or outside the row's candidate blocks). `best` is spent.
inline std::vector<std::int32_t> picked_keys(StreamingTopK& best) {
  std::vector<std::int32_t> picked;
  for (const StreamingTopK::Entry& e : best.take())
    if (e.score != -std::numeric_limits<float>::infinity()) picked.push_back(e.index);
  std::sort(picked.begin(), picked.end());
  return picked;
}

// A candidate block's score for one row: the best score among its keys that the row sees (keys at
// or past `visible` score -inf; scores holds keys w0 .. w1), +inf for the block of the row's last
// visible key, which is always kept.
inline float candidate_block_score(const float* scores, std::int64_t w0, std::int64_t w1, std::int64_t b, std::int64_t block,
                                   std::int64_t visible) {
  if (visible > 0 && b == (visible - 1) / block) return std::numeric_limits<float>::infinity();
  float m = -std::numeric_limits<float>::infinity();
  for (std::int64_t w = std::max(w0, b * block); w < std::min({w1, (b + 1) * block, visible}); ++w)
    m = std::max(m, scores[w - w0]);
  return m;
}

// The candidate source's bitset of one row (`words` long, cleared first): the blocks `best` picked
// with a score above -inf. `best` is spent.
inline void set_picked_blocks(StreamingTopK& best, std::uint64_t* bits, std::int64_t words) {
  std::fill(bits, bits + words, std::uint64_t{0});
  for (const StreamingTopK::Entry& e : best.take())
    if (e.score > -std::numeric_limits<float>::infinity()) bits[e.index / 64] |= std::uint64_t{1} << (e.index % 64);
}

}  // namespace hippo::kernels
