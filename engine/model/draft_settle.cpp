// Drafts and their settlement (model.h): speculative decoding feeds a session tokens it may take
// back. Before the forward, record_draft() keeps what the forward overwrites in place; settle() keeps
// a prefix of the drafts by cutting everything indexed by position to length and putting the
// overwritten bytes back, so the state is the one a forward of the kept tokens alone leaves.
#include "engine/engram/engram_token_map.h"
#include "engine/model/model.h"
#include "kernels/kv_entry_formats.h"

#include <fmt/format.h>

#include <cstring>

namespace hippo::engine {

void Model::record_draft(SessionState& state, int64_t count) const {
  SessionState::DraftRecord record;
  record.first = state.n_tokens();
  record.count = count;
  const auto entry = static_cast<size_t>(kernels::window_entry_bytes(state.head_dim_));
  for (const std::vector<std::uint8_t>& ring : state.rings_) {
    std::vector<std::uint8_t>& saved = record.overwritten.emplace_back(static_cast<size_t>(count) * entry);
    for (int64_t j = 0; j < count; ++j) {
      const auto slot = static_cast<size_t>((record.first + j) % state.window_);
      std::memcpy(&saved[static_cast<size_t>(j) * entry], &ring[slot * entry], entry);
    }
  }
  for (const SessionState::Writer& w : state.writers_) {
    record.pending_kv.push_back(w.pending_kv);
    record.pending_gate.push_back(w.pending_gate);
  }
  record.draft_kv.resize(state.writers_.size());
  record.draft_gate.resize(state.writers_.size());
  record.engram_lookback = state.engram_lookback_;
  state.draft_ = std::move(record);
}

Status Model::settle(SessionState& state, int64_t keep, std::span<const float> all_logits) const {
  if (!state.draft_) return Status(ErrorCode::kFailedPrecondition, "settle: the session has no draft");
  SessionState::DraftRecord& d = *state.draft_;
  const auto V = static_cast<size_t>(text().vocab_size);
  if (keep < 1 || keep > d.count || all_logits.size() != static_cast<size_t>(d.count) * V) {
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("settle: keep {} of a draft of {} tokens with {} logits", keep, d.count, all_logits.size()));
  }
  const int64_t n = d.first + keep;

  // Ring slots of the dropped positions get back the entries they held.
  const auto entry = static_cast<size_t>(kernels::window_entry_bytes(state.head_dim_));
  for (size_t l = 0; l < state.rings_.size(); ++l) {
    for (int64_t j = keep; j < d.count; ++j) {
      const auto slot = static_cast<size_t>((d.first + j) % state.window_);
      std::memcpy(&state.rings_[l][slot * entry], &d.overwritten[l][static_cast<size_t>(j) * entry], entry);
    }
  }

  // Streams: one entry per complete group. Pending rows: those of the incomplete group at n, taken
  // from the rows pending before the draft (positions from the start of the group at d.first) and
  // the drafts' own.
  const auto D = static_cast<size_t>(state.head_dim_);
  const auto kv_bytes = static_cast<size_t>(kernels::compressed_entry_bytes(state.head_dim_));
  const auto index_bytes = static_cast<size_t>(kernels::index_entry_bytes(state.index_head_dim_));
  for (size_t w = 0; w < state.writers_.size(); ++w) {
    SessionState::Writer& writer = state.writers_[w];
    const auto entries = static_cast<size_t>(n / writer.ratio);
    writer.kv.resize(entries * kv_bytes);
    writer.index.resize(entries * index_bytes);
    if (writer.ratio == 1) continue;
    auto rebuild = [&](const std::vector<float>& before, const std::vector<float>& drafted, std::vector<float>& out) {
      std::vector<float> rows = before;
      rows.insert(rows.end(), drafted.begin(), drafted.end());
      const int64_t base = d.first - static_cast<int64_t>(before.size() / D);  // position of rows[0]
      const int64_t from = static_cast<int64_t>(entries) * writer.ratio - base;
      out.assign(rows.begin() + from * static_cast<int64_t>(D), rows.begin() + (n - base) * static_cast<int64_t>(D));
    };
    rebuild(d.pending_kv[w], d.draft_kv[w], writer.pending_kv);
    rebuild(d.pending_gate[w], d.draft_gate[w], writer.pending_gate);
  }

  // The Engram look-back from before, advanced by the kept tokens.
  if (state.engram_lookback_) {
    state.engram_lookback_ = std::move(d.engram_lookback);
    for (int64_t j = 0; j < keep; ++j) {
      state.engram_lookback_->push(engram_map_->compressed_id(state.token_ids_[static_cast<size_t>(d.first + j)]));
    }
  }

  state.token_ids_.resize(static_cast<size_t>(n));
  state.next_logits_.assign(all_logits.begin() + static_cast<std::ptrdiff_t>((keep - 1) * static_cast<int64_t>(V)),
                            all_logits.begin() + static_cast<std::ptrdiff_t>(keep * static_cast<int64_t>(V)));
  state.draft_.reset();
  return Status::ok_status();
}

}  // namespace hippo::engine
