// The DeepSeek V4 pre-tokenizer, written by hand as a scanner over Unicode classes.
//
// tokenizer.json declares a Sequence of three regex Splits (behaviour "Isolated": matches and the
// gaps between them both become pieces) and a ByteLevel step without a regex:
//   (1) \p{N}{1,3}                  digits, in runs of at most three
//   (2) [一-龥぀-ゟ゠-ヿ]+            CJK ideographs U+4E00–9FA5, Hiragana, Katakana
//   (3) six alternatives, tried in order at each position (leftmost-first, as Oniguruma does):
//       [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+   ASCII punctuation + ASCII word
//       [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+              optional lead + letters and marks
//        ?[\p{P}\p{S}]+[\r\n]*                             optional space + punctuation/symbols
//       \s*[\r\n]+                                         whitespace ending in line breaks
//       \s+(?!\S)                                          whitespace not followed by non-space
//       \s+                                                any other whitespace
// Each split runs on each piece of the previous one on its own, so a lookahead never sees past the
// end of its piece. std::regex has no \p{..} and is slow; a regex library would add a dependency
// and a regex engine's cost for three fixed patterns. The scanner states each alternative's
// backtracking result in closed form (match_at in pretokenizer.cpp) and is checked against HF
// `tokenizers` over the golden corpus (tests/engine/tokenizer/tokenizer_golden_test.cpp).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace hippo::tokenizer {

class Pretokenizer {
 public:
  // Splits valid UTF-8 `text` (under 4 GiB, checked) into pieces: views into `text`, in order,
  // covering all of it. `pieces` is cleared first. Reuses its buffers between calls, so one instance per thread.
  void split(std::string_view text, std::vector<std::string_view>& pieces);

 private:
  void classify(std::string_view text);
  void split_stage3(std::uint32_t begin, std::uint32_t end, std::vector<std::string_view>& pieces) const;
  std::uint32_t match_at(std::uint32_t pos, std::uint32_t end) const;
  std::string_view chars(std::uint32_t begin, std::uint32_t end) const;

  std::string_view text_;
  std::vector<std::uint32_t> offsets_;  // byte offset of each character, plus one past the end
  std::vector<std::uint8_t> flags_;     // unicode_class() flags of each character, plus kCharCrLf/kCharCjk
};

}  // namespace hippo::tokenizer
