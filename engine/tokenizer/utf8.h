// UTF-8 decoding with the "maximal subpart" replacement rule (Unicode §3.9, WHATWG, Python's
// errors="replace", Rust's from_utf8_lossy): each maximal prefix of a valid sequence that cannot be
// completed becomes one U+FFFD. The tokenizer repairs invalid input this way before encoding (the
// reference, HF `tokenizers`, only accepts valid strings), and the streaming detokenizer uses the same
// rule, so that streamed text equals the lossy decode of the whole output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace hippo::tokenizer {

inline constexpr std::uint32_t kReplacementChar = 0xFFFD;
inline constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";

struct Utf8Step {
  std::uint32_t cp;   // the code point, or kReplacementChar when invalid
  std::uint32_t len;  // bytes consumed (>= 1)
  bool valid;
};

// Decodes one character at text[pos] (pos < text.size()).
Utf8Step decode_utf8(std::string_view text, std::size_t pos);

// True when `text` is valid UTF-8.
bool is_valid_utf8(std::string_view text);

// Appends the UTF-8 encoding of code point `cp` (at most U+10FFFF; surrogates are the caller's care).
void append_utf8(char32_t cp, std::string& out);

// `text` with every invalid sequence replaced by U+FFFD (the maximal subpart rule).
std::string repair_utf8(std::string_view text);
void append_repaired_utf8(std::string_view text, std::string& out);

// The length of the longest prefix of `text` after which no character is cut: a trailing incomplete
// but still valid-so-far sequence (at most 3 bytes) is excluded; invalid bytes are not held back.
std::size_t utf8_complete_prefix(std::string_view text);

}  // namespace hippo::tokenizer
