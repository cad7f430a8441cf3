// The pre-tokenizer scanner (see pretokenizer.h for the regexes it reproduces).
#include "engine/tokenizer/pretokenizer.h"

#include "base/check.h"
#include "engine/tokenizer/unicode_classes.h"
#include "engine/tokenizer/utf8.h"

namespace hippo::tokenizer {
namespace {

// Extra per-character flags next to the unicode_class() bits (which use the low six bits).
constexpr std::uint8_t kCharCrLf = 64;  // \r or \n
constexpr std::uint8_t kCharCjk = 128;  // inside the ranges of split (2)
constexpr std::uint8_t kLetterOrMark = kClassLetter | kClassMark;
constexpr std::uint8_t kPunctOrSymbol = kClassPunct | kClassSymbol;

bool is_cjk(std::uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FA5) || (cp >= 0x3040 && cp <= 0x30FF);
}

// The bracket set of alternative (3a): ASCII punctuation and symbols.
bool is_ascii_punct(char c) {
  return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') || (c >= '{' && c <= '~');
}

bool is_ascii_alpha(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }

// Kinds that split stages (1) and (2) separate: digits, CJK, everything else.
enum class RunKind : std::uint8_t { kDigit, kCjk, kOther };

RunKind run_kind(std::uint8_t flags) {
  if (flags & kClassNumber) return RunKind::kDigit;
  if (flags & kCharCjk) return RunKind::kCjk;
  return RunKind::kOther;
}

constexpr std::size_t kMaxTextBytes = std::size_t{1} << 32;

// \p{N}{1,3}: a run of N digits becomes pieces of three, the last one shorter.
constexpr std::uint32_t kMaxDigitsPerPiece = 3;

}  // namespace

void Pretokenizer::classify(std::string_view text) {
  // Offsets are 32-bit; a context of 1,048,576 tokens is about 4 MB of text.
  HIPPO_CHECK(text.size() < kMaxTextBytes, "pre-tokenizer input over 4 GiB; callers bound their inputs");
  text_ = text;
  offsets_.clear();
  flags_.clear();
  for (std::size_t pos = 0; pos < text.size();) {
    offsets_.push_back(static_cast<std::uint32_t>(pos));
    const auto b = static_cast<unsigned char>(text[pos]);
    if (b < 0x80) {
      std::uint8_t f = unicode_class(b);
      if (b == '\r' || b == '\n') f |= kCharCrLf;
      flags_.push_back(f);
      ++pos;
      continue;
    }
    const Utf8Step step = decode_utf8(text, pos);
    std::uint8_t f = unicode_class(step.cp);
    if (is_cjk(step.cp)) f |= kCharCjk;
    flags_.push_back(f);
    pos += step.len;
  }
  offsets_.push_back(static_cast<std::uint32_t>(text.size()));
}

std::string_view Pretokenizer::chars(std::uint32_t begin, std::uint32_t end) const {
  return text_.substr(offsets_[begin], offsets_[end] - offsets_[begin]);
}

void Pretokenizer::split(std::string_view text, std::vector<std::string_view>& pieces) {
  pieces.clear();
  classify(text);
  const auto n = static_cast<std::uint32_t>(flags_.size());
  // Stages (1) and (2): maximal runs of one kind; digit runs cut every three characters.
  for (std::uint32_t begin = 0; begin < n;) {
    const RunKind kind = run_kind(flags_[begin]);
    std::uint32_t end = begin + 1;
    while (end < n && run_kind(flags_[end]) == kind) ++end;
    if (kind == RunKind::kDigit) {
      for (std::uint32_t p = begin; p < end; p += kMaxDigitsPerPiece) {
        split_stage3(p, p + kMaxDigitsPerPiece < end ? p + kMaxDigitsPerPiece : end, pieces);
      }
    } else {
      split_stage3(begin, end, pieces);
    }
    begin = end;
  }
}

// Stage (3) on one piece [begin, end): matches and the gaps between them.
void Pretokenizer::split_stage3(std::uint32_t begin, std::uint32_t end, std::vector<std::string_view>& pieces) const {
  std::uint32_t gap_begin = begin;
  for (std::uint32_t pos = begin; pos < end;) {
    const std::uint32_t len = match_at(pos, end);
    if (len == 0) {
      ++pos;
      continue;
    }
    if (gap_begin < pos) pieces.push_back(chars(gap_begin, pos));
    pieces.push_back(chars(pos, pos + len));
    pos += len;
    gap_begin = pos;
  }
  if (gap_begin < end) pieces.push_back(chars(gap_begin, end));
}

// The length (in characters) of the stage (3) match starting at `pos`, or 0 if none starts there.
std::uint32_t Pretokenizer::match_at(std::uint32_t pos, std::uint32_t end) const {
  const auto run = [&](std::uint32_t from, std::uint8_t mask) {
    while (from < end && (flags_[from] & mask)) ++from;
    return from;
  };
  const std::uint8_t f0 = flags_[pos];
  const char c0 = text_[offsets_[pos]];
  const bool has_next = pos + 1 < end;

  // (3a) ASCII punctuation followed by ASCII letters.
  if (is_ascii_punct(c0) && has_next && is_ascii_alpha(text_[offsets_[pos + 1]])) {
    std::uint32_t p = pos + 1;
    while (p < end && is_ascii_alpha(text_[offsets_[p]])) ++p;
    return p - pos;
  }
  // (3b) [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+: with the optional lead if letters follow it, else
  // (after backtracking) letters/marks from pos itself.
  const bool lead_ok = !(f0 & (kCharCrLf | kClassLetter | kPunctOrSymbol));
  if (lead_ok && has_next && (flags_[pos + 1] & kLetterOrMark)) return run(pos + 1, kLetterOrMark) - pos;
  if (f0 & kLetterOrMark) return run(pos, kLetterOrMark) - pos;
  // (3c) ` ?[\p{P}\p{S}]+[\r\n]*`.
  if (c0 == ' ' && has_next && (flags_[pos + 1] & kPunctOrSymbol)) {
    return run(run(pos + 1, kPunctOrSymbol), kCharCrLf) - pos;
  }
  if (f0 & kPunctOrSymbol) return run(run(pos, kPunctOrSymbol), kCharCrLf) - pos;
  if (!(f0 & kClassSpace)) return 0;
  const std::uint32_t space_end = run(pos, kClassSpace);
  // (3d) \s*[\r\n]+: \s* backs off until a line break follows, so the match ends just after the
  // last line break of the whitespace run.
  for (std::uint32_t p = space_end; p > pos; --p) {
    if (flags_[p - 1] & kCharCrLf) return p - pos;
  }
  // (3e) \s+(?!\S): the whole run at the end of the piece; otherwise all but its last character,
  // which must leave at least one.
  if (space_end == end) return space_end - pos;
  if (space_end - pos >= 2) return space_end - pos - 1;
  // (3f) \s+.
  return space_end - pos;
}

}  // namespace hippo::tokenizer
