// A session state's streams as the runtime's restore reads a snapshot back: copied into
// SessionState::stream_buffer()s, ready to hand to SessionState::restore().
#pragma once

#include "engine/model/session_state.h"

#include <cstdint>
#include <cstring>
#include <vector>

namespace hippo::engine::testing {

inline std::vector<StateStreamBuffer> snapshot_streams(const TextConfig& text, const SessionState& state) {
  std::vector<StateStreamBuffer> out;
  for (const StateStream& s : state.streams()) {
    std::vector<std::uint8_t> bytes = SessionState::stream_buffer(text, s.name, s.bytes.size());
    if (!bytes.empty()) std::memcpy(bytes.data(), s.bytes.data(), bytes.size());
    out.push_back({s.name, std::move(bytes)});
  }
  return out;
}

}  // namespace hippo::engine::testing
