// The frontier blob: a fixed header that names the shape it was written for, then the rings (the
// trunk's, then the DSpark stages'), the writers' entry counts and pending rows, the Engram
// look-back, the logits. Little-endian, packed. Version 1 had no stage windows (nor their count and
// dspark_from in the header); it still restores, with the stage windows empty from its last token.
#include "engine/model/session_state.h"

#include "base/check.h"
#include "engine/config/layer_schedule.h"
#include "kernels/kv_entry_formats.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace hippo::engine {

using kernels::compressed_entry_bytes;
using kernels::index_entry_bytes;
using kernels::window_entry_bytes;
namespace {

constexpr std::uint32_t kFrontierMagic = 0x54535048;  // "HPST"
constexpr std::uint32_t kFrontierVersion = 2;

class ByteWriter {
 public:
  template <typename T>
  void put(const T& value) {
    const auto* p = reinterpret_cast<const std::byte*>(&value);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
  }
  template <typename T>
  void put_array(const std::vector<T>& values) {
    const auto* p = reinterpret_cast<const std::byte*>(values.data());
    bytes_.insert(bytes_.end(), p, p + values.size() * sizeof(T));
  }
  std::vector<std::byte> take() { return std::move(bytes_); }

 private:
  std::vector<std::byte> bytes_;
};

class ByteReader {
 public:
  explicit ByteReader(std::span<const std::byte> bytes) : bytes_(bytes) {}
  template <typename T>
  bool get(T& value) {
    if (bytes_.size() - offset_ < sizeof(T)) return false;
    std::memcpy(&value, bytes_.data() + offset_, sizeof(T));
    offset_ += sizeof(T);
    return true;
  }
  template <typename T>
  bool get_array(std::vector<T>& values, size_t count) {
    if ((bytes_.size() - offset_) / sizeof(T) < count) return false;
    values.resize(count);
    if (count == 0) return true;  // memcpy must not see the null data() of an empty vector
    std::memcpy(values.data(), bytes_.data() + offset_, count * sizeof(T));
    offset_ += count * sizeof(T);
    return true;
  }
  bool at_end() const { return offset_ == bytes_.size(); }

 private:
  std::span<const std::byte> bytes_;
  size_t offset_ = 0;
};

template <typename T>
std::span<const std::byte> as_bytes_of(const std::vector<T>& v) {
  return std::as_bytes(std::span<const T>(v));
}

}  // namespace

SessionState::SessionState(const TextConfig& text)
    : n_layers_(text.num_hidden_layers),
      n_stages_(text.num_nextn_predict_layers),
      window_(text.sliding_window),
      head_dim_(text.head_dim),
      index_head_dim_(text.index_head_dim),
      vocab_(text.vocab_size),
      engram_classes_(text.engram_layer_ids.empty() ? 0 : text.engram_compressed_vocab_size) {
  rings_.assign(static_cast<size_t>(n_layers_ + n_stages_),
                std::vector<std::uint8_t>(static_cast<size_t>(window_ * window_entry_bytes(head_dim_))));
  for (const LayerRole& role : layer_schedule(text)) {
    if (!role.writes_kv) continue;
    Writer writer;
    writer.layer = role.layer;
    writer.ratio = role.compress_ratio;
    writer.kv.reserve(stream_capacity(text, role.compress_ratio, compressed_entry_bytes(head_dim_)));
    writer.index.reserve(stream_capacity(text, role.compress_ratio, index_entry_bytes(index_head_dim_)));
    writers_.push_back(std::move(writer));
  }
  if (!text.engram_layer_ids.empty()) engram_lookback_.emplace(static_cast<int>(text.engram_max_ngram_size));
}

// Room for the whole context up front: address space only until written (the pages are touched as
// entries are appended), so that a growing stream never moves. Growing by doubling copied a whole
// stream at each doubling, inside one decode step (at 1M tokens up to 373 MB on small-fullkv), with
// both copies held meanwhile (docs/BENCHMARKS.md, --op-times).
size_t SessionState::stream_capacity(const TextConfig& text, int64_t ratio, int64_t entry_bytes) {
  const int64_t entries = (text.max_position_embeddings + ratio - 1) / ratio + 1;
  return static_cast<size_t>(entries * entry_bytes);
}

std::vector<std::uint8_t> SessionState::stream_buffer(const TextConfig& text, std::string_view name, size_t bytes) {
  std::vector<std::uint8_t> buffer;
  for (const LayerRole& role : layer_schedule(text)) {
    if (!role.writes_kv) continue;
    if (name == fmt::format("kv.layer{}", role.layer)) {
      buffer.reserve(std::max(bytes, stream_capacity(text, role.compress_ratio, compressed_entry_bytes(text.head_dim))));
    } else if (name == fmt::format("index.layer{}", role.layer)) {
      buffer.reserve(
          std::max(bytes, stream_capacity(text, role.compress_ratio, index_entry_bytes(text.index_head_dim))));
    }
  }
  buffer.resize(bytes);
  return buffer;
}

uint64_t SessionState::memory_bytes() const {
  uint64_t total = 0;
  for (const auto& ring : rings_) total += ring.size();
  for (const Writer& w : writers_) {
    total += w.kv.size() + w.index.size() + (w.pending_kv.size() + w.pending_gate.size()) * sizeof(float);
  }
  if (engram_lookback_) total += engram_lookback_->history().size() * sizeof(int32_t);
  return total + next_logits_.size() * sizeof(float) + token_ids_.size() * sizeof(int32_t);
}

uint64_t SessionState::growth_bytes(const TextConfig& text, int64_t n_tokens) {
  uint64_t total = static_cast<uint64_t>(n_tokens) * sizeof(int32_t);
  for (const LayerRole& role : layer_schedule(text)) {
    if (!role.writes_kv) continue;
    const int64_t entries = (n_tokens + role.compress_ratio - 1) / role.compress_ratio + 1;
    total += static_cast<uint64_t>(entries * (compressed_entry_bytes(text.head_dim) + index_entry_bytes(text.index_head_dim)));
    total += static_cast<uint64_t>(2 * role.compress_ratio * text.head_dim) * sizeof(float);  // pending rows
  }
  return total;
}

SessionState SessionState::synthetic(const TextConfig& text, std::vector<int32_t> token_ids, const StreamFill& fill) {
  SessionState state(text);
  const auto n = static_cast<int64_t>(token_ids.size());
  for (Writer& w : state.writers_) {
    const int64_t entries = n / w.ratio;
    w.kv.resize(static_cast<size_t>(entries * compressed_entry_bytes(state.head_dim_)));
    w.index.resize(static_cast<size_t>(entries * index_entry_bytes(state.index_head_dim_)));
    fill(fmt::format("kv.layer{}", w.layer), w.kv);
    fill(fmt::format("index.layer{}", w.layer), w.index);
    const int64_t pending = n % w.ratio;
    w.pending_kv.assign(static_cast<size_t>(pending * state.head_dim_), 0.0f);
    w.pending_gate.assign(static_cast<size_t>(pending * state.head_dim_), 0.0f);
  }
  state.token_ids_ = std::move(token_ids);
  state.dspark_from_ = n;  // no context features behind the stage windows
  return state;
}

std::vector<std::byte> SessionState::frontier() const {
  HIPPO_CHECK(!draft_, "SessionState: a state with an unsettled draft is not serialised");
  ByteWriter out;
  out.put(kFrontierMagic);
  out.put(kFrontierVersion);
  for (int64_t v : {n_layers_, window_, head_dim_, index_head_dim_, vocab_, engram_classes_,
                    static_cast<int64_t>(writers_.size()), n_tokens(), n_stages_, dspark_from_}) {
    out.put(v);
  }
  for (const auto& ring : rings_) out.put_array(ring);
  for (const Writer& w : writers_) {
    out.put(w.layer);
    out.put(static_cast<int64_t>(w.kv.size() / static_cast<size_t>(compressed_entry_bytes(head_dim_))));
    out.put(static_cast<int64_t>(w.pending_kv.size() / static_cast<size_t>(head_dim_)));
    out.put_array(w.pending_kv);
    out.put_array(w.pending_gate);
  }
  const std::string lookback = engram_lookback_ ? engram_lookback_->serialize() : std::string();
  out.put(static_cast<int64_t>(lookback.size()));
  out.put_array(std::vector<char>(lookback.begin(), lookback.end()));
  out.put(static_cast<int64_t>(next_logits_.size()));
  out.put_array(next_logits_);
  return out.take();
}

std::vector<StateStream> SessionState::streams() const {
  std::vector<StateStream> out;
  for (const Writer& w : writers_) {
    out.push_back({fmt::format("kv.layer{}", w.layer), static_cast<size_t>(compressed_entry_bytes(head_dim_)),
                   as_bytes_of(w.kv)});
    out.push_back({fmt::format("index.layer{}", w.layer),
                   static_cast<size_t>(index_entry_bytes(index_head_dim_)), as_bytes_of(w.index)});
  }
  out.push_back({"token_ids", sizeof(int32_t), as_bytes_of(token_ids_)});
  return out;
}

Result<SessionState> SessionState::restore(const TextConfig& text, std::span<const std::byte> frontier,
                                           std::vector<StateStreamBuffer> streams) {
  SessionState state(text);
  ByteReader in(frontier);
  auto corrupt = [](std::string_view what) {
    return Status(ErrorCode::kCorrupt, fmt::format("session state frontier: {}", what));
  };
  std::uint32_t magic = 0, version = 0;
  if (!in.get(magic) || magic != kFrontierMagic) return corrupt("not a hippo session state (bad magic)");
  if (!in.get(version) || version < 1 || version > kFrontierVersion) {
    return corrupt(fmt::format("unsupported version {}", version));
  }
  int64_t shape[10];
  for (int i = 0; i < (version == 1 ? 8 : 10); ++i) {
    if (!in.get(shape[i])) return corrupt("truncated header");
  }
  const int64_t expected[7] = {state.n_layers_, state.window_, state.head_dim_, state.index_head_dim_,
                               state.vocab_, state.engram_classes_, static_cast<int64_t>(state.writers_.size())};
  for (int i = 0; i < 7; ++i) {
    if (shape[i] != expected[i]) {
      return Status(ErrorCode::kFailedPrecondition,
          "session state belongs to a model of another shape (layers, window, head_dim, index_head_dim, vocab, "
          "Engram classes or KV writers differ); it cannot be restored into this model");
    }
  }
  const int64_t n_tokens = shape[7];
  const bool has_stage_windows = version >= 2;
  if (has_stage_windows && shape[8] != state.n_stages_) {
    return Status(ErrorCode::kFailedPrecondition,
                  fmt::format("session state has {} DSpark stage windows, this model {} stages", shape[8], state.n_stages_));
  }
  if (has_stage_windows && (shape[9] < 0 || shape[9] > n_tokens)) return corrupt("bad DSpark window start");
  state.dspark_from_ = has_stage_windows ? shape[9] : n_tokens;
  const size_t n_rings = static_cast<size_t>(has_stage_windows ? state.n_layers_ + state.n_stages_ : state.n_layers_);
  for (size_t l = 0; l < n_rings; ++l) {
    if (!in.get_array(state.rings_[l], state.rings_[l].size())) return corrupt("truncated window rings");
  }
  for (Writer& w : state.writers_) {
    int64_t layer = 0, n_entries = 0, n_pending = 0;
    if (!in.get(layer) || !in.get(n_entries) || !in.get(n_pending)) return corrupt("truncated writer header");
    if (layer != w.layer) return corrupt(fmt::format("writer layer {} where {} was expected", layer, w.layer));
    const int64_t max_pending = w.ratio > 1 ? w.ratio - 1 : 0;
    if (n_entries < 0 || n_pending < 0 || n_pending > max_pending ||
        (w.ratio > 0 && n_entries * w.ratio + n_pending != n_tokens)) {
      return corrupt(fmt::format("layer {}: {} entries and {} pending rows do not make {} tokens", layer, n_entries,
                                 n_pending, n_tokens));
    }
    if (!in.get_array(w.pending_kv, static_cast<size_t>(n_pending * state.head_dim_)) ||
        !in.get_array(w.pending_gate, static_cast<size_t>(n_pending * state.head_dim_))) {
      return corrupt("truncated pending rows");
    }
    auto find_stream = [&](const std::string& name) -> StateStreamBuffer* {
      for (StateStreamBuffer& s : streams) {
        if (s.name == name) return &s;
      }
      return nullptr;
    };
    const std::string kv_name = fmt::format("kv.layer{}", layer);
    const std::string index_name = fmt::format("index.layer{}", layer);
    StateStreamBuffer* kv = find_stream(kv_name);
    StateStreamBuffer* index = find_stream(index_name);
    if (kv == nullptr || index == nullptr) {
      return Status(ErrorCode::kCorrupt, fmt::format("session state: stream {} missing", kv == nullptr ? kv_name : index_name));
    }
    const size_t kv_bytes = static_cast<size_t>(n_entries * compressed_entry_bytes(state.head_dim_));
    const size_t index_bytes = static_cast<size_t>(n_entries * index_entry_bytes(state.index_head_dim_));
    if (kv->bytes.size() != kv_bytes || index->bytes.size() != index_bytes) {
      return Status(ErrorCode::kCorrupt, fmt::format(
          "session state: streams of layer {} hold {} and {} bytes; {} entries need {} and {}", layer,
          kv->bytes.size(), index->bytes.size(), n_entries, kv_bytes, index_bytes));
    }
    // The buffers become the state's own, without a copy (made by stream_buffer(), they never move).
    w.kv = std::move(kv->bytes);
    w.index = std::move(index->bytes);
  }
  int64_t lookback_bytes = 0;
  std::vector<char> lookback;
  if (!in.get(lookback_bytes) || lookback_bytes < 0 || !in.get_array(lookback, static_cast<size_t>(lookback_bytes))) {
    return corrupt("truncated Engram look-back");
  }
  if (state.engram_lookback_) {
    auto restored = EngramLookback::restore(std::string_view(lookback.data(), lookback.size()),
                                            state.engram_lookback_->max_ngram_size(),
                                            static_cast<int32_t>(state.engram_classes_));
    if (!restored.ok()) return restored.status().with_context("session state frontier");
    state.engram_lookback_ = std::move(restored.value());
  } else if (lookback_bytes != 0) {
    return corrupt("an Engram look-back for a model without Engram");
  }
  int64_t n_logits = 0;
  if (!in.get(n_logits) || (n_logits != 0 && n_logits != state.vocab_)) return corrupt("bad logits length");
  if (!in.get_array(state.next_logits_, static_cast<size_t>(n_logits))) return corrupt("truncated logits");
  if (!in.at_end()) return corrupt("trailing bytes");

  const StateStreamBuffer* tokens = nullptr;
  for (const StateStreamBuffer& s : streams) {
    if (s.name == "token_ids") tokens = &s;
  }
  if (tokens == nullptr) return Status(ErrorCode::kCorrupt, "session state: stream token_ids missing");
  if (tokens->bytes.size() != static_cast<size_t>(n_tokens) * sizeof(int32_t)) {
    return Status(ErrorCode::kCorrupt, fmt::format("session state: token_ids holds {} bytes; {} tokens need {}",
                                                tokens->bytes.size(), n_tokens, n_tokens * 4));
  }
  state.token_ids_.resize(static_cast<size_t>(n_tokens));
  if (n_tokens > 0) std::memcpy(state.token_ids_.data(), tokens->bytes.data(), tokens->bytes.size());
  if (n_tokens == 0 && n_logits != 0) return corrupt("logits present without tokens");
  return state;
}

}  // namespace hippo::engine
