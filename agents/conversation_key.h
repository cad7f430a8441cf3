// Keys that name a conversation prefix, so that a stateless request (the whole conversation sent
// each turn) continues the idle session that already holds the longest prefix of it (storage's
// prefix keys). A key covers the session settings and every item so far: role, content, tool-call
// ids, names and arguments, byte for byte. Reasoning is left out: a client rarely sends it back,
// and the session keeps the model's own.
//
// Items are compared, not token ids: a session holds the ids the model sampled, which need not be
// how the tokenizer would encode the same text again.
#pragma once

#include "agents/agent_types.h"

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hippo::agents {

// The key of a session with these settings and nothing in it yet.
std::string conversation_root_key(const SessionSettings& settings);
// The key after one more item.
std::string extend_conversation_key(std::string_view key, const InputItem& item);
// keys[i]: the key after items[0..i].
std::vector<std::string> conversation_keys(const SessionSettings& settings, std::span<const InputItem> items);

}  // namespace hippo::agents
