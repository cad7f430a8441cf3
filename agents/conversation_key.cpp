#include "agents/conversation_key.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <cstdint>

namespace hippo::agents {

namespace {

// Each field as its length then its bytes, so that no two item lists share an encoding.
void put(std::string& out, std::string_view field) {
  const uint64_t n = field.size();
  out.append(reinterpret_cast<const char*>(&n), sizeof n);
  out.append(field);
}

std::string hash_hex(std::string_view bytes) {
  const XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  return fmt::format("{:016x}{:016x}", h.high64, h.low64);
}

}  // namespace

std::string conversation_root_key(const SessionSettings& settings) {
  std::string bytes;
  put(bytes, "hippo conversation 1");
  put(bytes, settings_to_json(settings));
  return hash_hex(bytes);
}

std::string extend_conversation_key(std::string_view key, const InputItem& item) {
  std::string bytes;
  put(bytes, key);
  put(bytes, std::to_string(static_cast<int>(item.kind)));
  put(bytes, item.content);
  put(bytes, item.tool_call_id);
  put(bytes, std::to_string(item.tool_calls.size()));
  for (const tokenizer::ToolCall& call : item.tool_calls) {
    put(bytes, call.id);
    put(bytes, call.name);
    put(bytes, call.arguments);
  }
  return hash_hex(bytes);
}

std::vector<std::string> conversation_keys(const SessionSettings& settings, std::span<const InputItem> items) {
  std::vector<std::string> keys;
  keys.reserve(items.size());
  std::string key = conversation_root_key(settings);
  for (const InputItem& item : items) {
    key = extend_conversation_key(key, item);
    keys.push_back(key);
  }
  return keys;
}

}  // namespace hippo::agents
