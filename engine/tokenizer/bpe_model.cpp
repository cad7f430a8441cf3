// Byte-level BPE merging (see bpe_model.h).
#include "engine/tokenizer/bpe_model.h"

#include "engine/tokenizer/utf8.h"

#include <algorithm>
#include <array>
#include <queue>

namespace hippo::tokenizer {
namespace {

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves, the other 68 bytes map
// to U+0100 upwards in byte order. Returns code point -> byte (-1 if not in the alphabet).
std::array<int, 324> byte_level_decoding_table() {
  std::array<int, 324> table;
  table.fill(-1);
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    table[static_cast<std::size_t>(printable ? b : next++)] = b;
  }
  return table;
}

// A byte-level spelling ("Ġthe") back to raw bytes (" the"); an error for foreign characters.
Result<std::string> byte_level_to_bytes(std::string_view spelling) {
  static const std::array<int, 324> table = byte_level_decoding_table();
  std::string bytes;
  for (std::size_t pos = 0; pos < spelling.size();) {
    const Utf8Step step = decode_utf8(spelling, pos);
    if (!step.valid || step.cp >= table.size() || table[step.cp] < 0) {
      return make_error(ErrorCode::kCorrupt, "token {:?} is not in the byte-level alphabet", std::string(spelling));
    }
    bytes.push_back(static_cast<char>(table[step.cp]));
    pos += step.len;
  }
  return bytes;
}

std::uint64_t pair_key(TokenId left, TokenId right) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) | static_cast<std::uint32_t>(right);
}

std::uint64_t hash_key(std::uint64_t key) {
  key ^= key >> 29;
  key *= 0xBF58476D1CE4E5B9ull;
  key ^= key >> 32;
  return key;
}

constexpr std::uint32_t kNoRank = ~std::uint32_t{0};

// Words up to this many symbols use the quadratic scan (no allocation, cache-friendly); longer ones
// a heap, so that a 100 KB run of letters stays O(n log n).
constexpr std::size_t kShortWordSymbols = 48;

}  // namespace

Result<BpeModel> BpeModel::build(const std::vector<std::pair<std::string, TokenId>>& vocab,
                                 const std::vector<std::pair<std::string, std::string>>& merges,
                                 std::vector<TokenId>& foreign_ids) {
  BpeModel model;
  std::unordered_map<std::string_view, TokenId> by_spelling;
  by_spelling.reserve(vocab.size());
  TokenId max_id = -1;
  for (const auto& [spelling, id] : vocab) max_id = std::max(max_id, id);
  if (max_id < 0) return make_error(ErrorCode::kCorrupt, "the BPE vocabulary is empty");
  model.id_to_bytes_.resize(static_cast<std::size_t>(max_id) + 1);
  std::vector<bool> seen(model.id_to_bytes_.size());
  std::fill(std::begin(model.byte_token_), std::end(model.byte_token_), -1);
  for (const auto& [spelling, id] : vocab) {
    if (id < 0 || seen[static_cast<std::size_t>(id)]) {
      return make_error(ErrorCode::kCorrupt, "BPE vocabulary: id {} is negative or used twice", id);
    }
    seen[static_cast<std::size_t>(id)] = true;
    Result<std::string> decoded = byte_level_to_bytes(spelling);
    if (!decoded.ok()) {
      foreign_ids.push_back(id);
      continue;
    }
    std::string bytes = std::move(decoded).value();
    if (bytes.empty()) return make_error(ErrorCode::kCorrupt, "BPE vocabulary: token {} is empty", id);
    if (bytes.size() == 1) model.byte_token_[static_cast<unsigned char>(bytes[0])] = id;
    model.id_to_bytes_[static_cast<std::size_t>(id)] = std::move(bytes);
    by_spelling.emplace(spelling, id);
  }
  for (int b = 0; b < 256; ++b) {
    if (model.byte_token_[b] < 0) return make_error(ErrorCode::kCorrupt, "BPE vocabulary lacks byte 0x{:02X}", b);
  }

  std::size_t capacity = 1;
  while (capacity < merges.size() * 2) capacity <<= 1;
  model.merges_.assign(capacity, MergeEntry{kEmptyKey, 0, 0});
  model.merge_mask_ = capacity - 1;
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    const auto l = by_spelling.find(left);
    const auto r = by_spelling.find(right);
    const auto m = by_spelling.find(left + right);
    if (l == by_spelling.end() || r == by_spelling.end() || m == by_spelling.end()) {
      return make_error(ErrorCode::kCorrupt, "merge {} ({:?} {:?}) names a token outside the vocabulary", rank, left,
                        right);
    }
    const std::uint64_t key = pair_key(l->second, r->second);
    std::uint64_t slot = hash_key(key) & model.merge_mask_;
    while (model.merges_[slot].key != kEmptyKey) {
      if (model.merges_[slot].key == key) break;  // a repeated merge keeps its first (lowest) rank
      slot = (slot + 1) & model.merge_mask_;
    }
    if (model.merges_[slot].key == kEmptyKey) {
      model.merges_[slot] = MergeEntry{key, static_cast<std::uint32_t>(rank), m->second};
    }
  }
  return model;
}

const BpeModel::MergeEntry* BpeModel::find_merge(TokenId left, TokenId right) const {
  const std::uint64_t key = pair_key(left, right);
  for (std::uint64_t slot = hash_key(key) & merge_mask_;; slot = (slot + 1) & merge_mask_) {
    const MergeEntry& e = merges_[slot];
    if (e.key == key) return &e;
    if (e.key == kEmptyKey) return nullptr;
  }
}

const std::string* BpeModel::token_bytes(TokenId id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= id_to_bytes_.size()) return nullptr;
  const std::string& bytes = id_to_bytes_[static_cast<std::size_t>(id)];
  return bytes.empty() ? nullptr : &bytes;
}

void BpeModel::encode_piece(std::string_view piece, std::vector<TokenId>& out) const {
  std::vector<TokenId> symbols(piece.size());
  for (std::size_t i = 0; i < piece.size(); ++i) symbols[i] = byte_token_[static_cast<unsigned char>(piece[i])];
  if (symbols.size() <= kShortWordSymbols) {
    merge_short(symbols);
  } else {
    merge_long(symbols);
  }
  out.insert(out.end(), symbols.begin(), symbols.end());
}

void BpeModel::merge_short(std::vector<TokenId>& symbols) const {
  // ranks[i]: rank of the pair (symbols[i], symbols[i+1]).
  std::uint32_t ranks[kShortWordSymbols];
  TokenId merged[kShortWordSymbols];
  std::size_t n = symbols.size();
  const auto rank_at = [&](std::size_t i) {
    const MergeEntry* e = find_merge(symbols[i], symbols[i + 1]);
    ranks[i] = e ? e->rank : kNoRank;
    merged[i] = e ? e->merged : -1;
  };
  for (std::size_t i = 0; i + 1 < n; ++i) rank_at(i);
  while (n > 1) {
    std::size_t best = 0;
    for (std::size_t i = 1; i + 1 < n; ++i) {
      if (ranks[i] < ranks[best]) best = i;
    }
    if (ranks[best] == kNoRank) break;
    symbols[best] = merged[best];
    for (std::size_t i = best + 1; i + 1 < n; ++i) symbols[i] = symbols[i + 1];
    for (std::size_t i = best + 1; i + 2 < n; ++i) {
      ranks[i] = ranks[i + 1];
      merged[i] = merged[i + 1];
    }
    --n;
    if (best + 1 < n) rank_at(best);
    if (best > 0) rank_at(best - 1);
  }
  symbols.resize(n);
}

void BpeModel::merge_long(std::vector<TokenId>& symbols) const {
  const std::size_t n = symbols.size();
  std::vector<std::size_t> prev(n), next(n);  // doubly linked list over positions; n = none
  for (std::size_t i = 0; i < n; ++i) {
    prev[i] = i == 0 ? n : i - 1;
    next[i] = i + 1;
  }
  struct Candidate {
    std::uint32_t rank;
    std::size_t pos;
    TokenId left, right, merged;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  const auto push = [&](std::size_t i) {
    if (i >= n || next[i] >= n) return;
    if (const MergeEntry* e = find_merge(symbols[i], symbols[next[i]])) {
      queue.push({e->rank, i, symbols[i], symbols[next[i]], e->merged});
    }
  };
  for (std::size_t i = 0; i + 1 < n; ++i) push(i);
  std::vector<bool> alive(n, true);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    // Stale entries: the left symbol was absorbed, or either side changed since the push.
    if (!alive[c.pos] || symbols[c.pos] != c.left || next[c.pos] >= n || symbols[next[c.pos]] != c.right) continue;
    const std::size_t gone = next[c.pos];
    symbols[c.pos] = c.merged;
    alive[gone] = false;
    next[c.pos] = next[gone];
    if (next[gone] < n) prev[next[gone]] = c.pos;
    push(c.pos);
    if (prev[c.pos] < n) push(prev[c.pos]);
  }
  std::size_t out = 0;
  for (std::size_t i = 0; i < n; i = next[i]) symbols[out++] = symbols[i];
  symbols.resize(out);
}

}  // namespace hippo::tokenizer
