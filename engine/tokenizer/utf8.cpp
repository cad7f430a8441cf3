// UTF-8 decoding and repair (see utf8.h for the replacement rule).
#include "engine/tokenizer/utf8.h"

namespace hippo::tokenizer {
namespace {

// The valid range of the second byte for each lead byte (Unicode Table 3-7); later bytes are 80..BF.
struct LeadInfo {
  std::uint8_t n_bytes;  // 0 = the byte cannot start a sequence
  std::uint8_t second_lo;
  std::uint8_t second_hi;
};

LeadInfo lead_info(std::uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b < 0xC2) return {0, 0, 0};
  if (b < 0xE0) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b < 0xF0) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b < 0xF4) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

}  // namespace

Utf8Step decode_utf8(std::string_view text, std::size_t pos) {
  const auto b0 = static_cast<std::uint8_t>(text[pos]);
  if (b0 < 0x80) return {b0, 1, true};
  const LeadInfo info = lead_info(b0);
  if (info.n_bytes == 0) return {kReplacementChar, 1, false};
  std::uint32_t cp = b0 & (0xFFu >> (info.n_bytes + 1));
  for (std::uint32_t i = 1; i < info.n_bytes; ++i) {
    if (pos + i >= text.size()) return {kReplacementChar, i, false};
    const auto b = static_cast<std::uint8_t>(text[pos + i]);
    const std::uint8_t lo = i == 1 ? info.second_lo : 0x80;
    const std::uint8_t hi = i == 1 ? info.second_hi : 0xBF;
    if (b < lo || b > hi) return {kReplacementChar, i, false};
    cp = (cp << 6) | (b & 0x3Fu);
  }
  return {cp, info.n_bytes, true};
}

bool is_valid_utf8(std::string_view text) {
  for (std::size_t pos = 0; pos < text.size();) {
    if (static_cast<std::uint8_t>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const Utf8Step step = decode_utf8(text, pos);
    if (!step.valid) return false;
    pos += step.len;
  }
  return true;
}

std::string repair_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  append_repaired_utf8(text, out);
  return out;
}

void append_repaired_utf8(std::string_view text, std::string& out) {
  for (std::size_t pos = 0; pos < text.size();) {
    if (static_cast<std::uint8_t>(text[pos]) < 0x80) {
      out.push_back(text[pos++]);
      continue;
    }
    const Utf8Step step = decode_utf8(text, pos);
    if (step.valid) {
      out.append(text.substr(pos, step.len));
    } else {
      out.append(kReplacementUtf8);
    }
    pos += step.len;
  }
}

std::size_t utf8_complete_prefix(std::string_view text) {
  // Only the last 3 bytes can hold the start of an incomplete sequence.
  const std::size_t first = text.size() > 3 ? text.size() - 3 : 0;
  for (std::size_t start = first; start < text.size(); ++start) {
    const auto b = static_cast<std::uint8_t>(text[start]);
    if ((b & 0xC0) == 0x80) continue;  // a continuation byte cannot start a sequence
    const Utf8Step step = decode_utf8(text, start);
    // Ran out of input while every byte so far was valid: hold the sequence back.
    if (!step.valid && start + step.len == text.size() && lead_info(b).n_bytes > step.len) return start;
  }
  return text.size();
}

void append_utf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace hippo::tokenizer
