// Engram's compressed token ids: the reference's key rules (engram_token_map.h) on ICU.
//
// Versions: HF `tokenizers` normalises with tables of Unicode 9.0 (unicode-normalization-alignments)
// and lowercases with Rust's std (Unicode 16); Debian's ICU 72 knows Unicode 15. A filtered
// normaliser restricted to the characters assigned by Unicode 9.0 reproduces the old tables: a later
// character was unassigned there, so it neither decomposes nor composes nor counts as a mark.
// Normalisation of the characters of 9.0 is stable across versions, so the filter is exact for them.
#include "engine/engram/engram_token_map.h"

#include "engine/tokenizer/utf8.h"

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/uniset.h>
#include <unicode/unistr.h>
#include <unicode/ustring.h>
#include <unicode/utf16.h>

#include <fmt/format.h>

#include <array>
#include <memory>
#include <unordered_map>
#include <utility>

namespace hippo::engine {
namespace {

// GPT-2's byte-to-character alphabet, in which tokenizer.json spells its byte-level tokens: the
// printable Latin-1 bytes stand for themselves, the other 68 bytes for U+0100, U+0101, ... in order.
std::array<char32_t, 256> byte_level_alphabet() {
  std::array<char32_t, 256> alphabet{};
  char32_t next = 0x100;
  for (unsigned b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    alphabet[b] = printable ? b : next++;
  }
  return alphabet;
}

// The token as tokenizer.json spells it (what HF's `id_to_token` returns for a byte-level token).
void append_byte_level_spelling(std::string_view bytes, std::string& out) {
  static const std::array<char32_t, 256> alphabet = byte_level_alphabet();
  for (char c : bytes) tokenizer::append_utf8(alphabet[static_cast<unsigned char>(c)], out);
}

bool is_collapsed_space(char32_t cp) { return cp == ' ' || cp == '\t' || cp == '\r' || cp == '\n'; }

// normalize() of engram_token_map.h. One instance reuses its ICU objects and scratch buffers; not
// thread-safe (build() uses one per call). Pinned in memory: the filtered normalisers point at the
// set and the base normalisers.
class TextNormalizer {
 public:
  static Result<std::unique_ptr<TextNormalizer>> create() {
    UErrorCode error = U_ZERO_ERROR;
    const icu::Normalizer2* nfkc = icu::Normalizer2::getNFKCInstance(error);
    const icu::Normalizer2* nfd = icu::Normalizer2::getNFDInstance(error);
    auto normalizer = std::unique_ptr<TextNormalizer>(new TextNormalizer);
    normalizer->unicode9_.applyPattern(icu::UnicodeString(u"[:age=9.0:]"), error);
    if (U_FAILURE(error)) {
      return make_error(ErrorCode::kInternal, "Engram token map: ICU normalisation data unavailable ({})",
                        u_errorName(error));
    }
    normalizer->unicode9_.freeze();
    normalizer->nfkc9_ = std::make_unique<icu::FilteredNormalizer2>(*nfkc, normalizer->unicode9_);
    normalizer->nfd9_ = std::make_unique<icu::FilteredNormalizer2>(*nfd, normalizer->unicode9_);
    return normalizer;
  }

  // `out` = normalize(text) as UTF-8, possibly empty. `text` is valid UTF-8.
  Status normalize(std::string_view text, std::string& out) {
    chars_.clear();
    bool ascii = true;
    for (char c : text) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
    if (ascii) {  // NFKC and NFD leave ASCII alone and it has no marks
      for (char c : text) chars_.push_back(static_cast<char32_t>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c));
    } else {
      UErrorCode error = U_ZERO_ERROR;
      const icu::UnicodeString source =
          icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
      nfkc9_->normalize(source, composed_, error);
      nfd9_->normalize(composed_, decomposed_, error);
      if (U_FAILURE(error)) {
        return make_error(ErrorCode::kInternal, "Engram token map: ICU normalisation failed ({})", u_errorName(error));
      }
      for (int32_t i = 0; i < decomposed_.length();) {
        const UChar32 cp = decomposed_.char32At(i);
        i += U16_LENGTH(cp);
        if ((U_GET_GC_MASK(cp) & U_GC_M_MASK) != 0 && unicode9_.contains(cp)) continue;  // StripAccents
        HIPPO_RETURN_IF_ERROR(append_lowercase(cp));
      }
    }

    // Runs of [ \t\r\n] become one space.
    std::size_t n = 0;
    bool in_run = false;
    for (std::size_t i = 0; i < chars_.size(); ++i) {
      const bool space = is_collapsed_space(chars_[i]);
      if (!space || !in_run) chars_[n++] = space ? U' ' : chars_[i];
      in_run = space;
    }
    chars_.resize(n);

    out.clear();
    if (chars_.size() == 1 && chars_[0] == ' ') {  // the sentinel rule: " " survives the strip
      out.push_back(' ');
      return {};
    }
    std::size_t begin = 0;
    std::size_t end = chars_.size();
    while (begin < end && u_isUWhiteSpace(static_cast<UChar32>(chars_[begin]))) ++begin;
    while (end > begin && u_isUWhiteSpace(static_cast<UChar32>(chars_[end - 1]))) --end;
    // The reference's sentinel is U+E000, put back as " " after the strip: any U+E000 of the text
    // itself becomes a space too.
    for (std::size_t i = begin; i < end; ++i) tokenizer::append_utf8(chars_[i] == 0xE000 ? U' ' : chars_[i], out);
    return {};
  }

 private:
  TextNormalizer() = default;

  // Rust's char::to_lowercase: the full mapping of one character, without context (root locale).
  Status append_lowercase(UChar32 cp) {
    if (cp < 0x80) {
      chars_.push_back(static_cast<char32_t>(cp >= 'A' && cp <= 'Z' ? cp - 'A' + 'a' : cp));
      return {};
    }
    if (!u_hasBinaryProperty(cp, UCHAR_CHANGES_WHEN_LOWERCASED)) {
      chars_.push_back(static_cast<char32_t>(cp));
      return {};
    }
    UChar source[2];
    int32_t length = 0;
    U16_APPEND_UNSAFE(source, length, cp);
    UChar lowered[8];
    UErrorCode error = U_ZERO_ERROR;
    const int32_t lowered_length = u_strToLower(lowered, 8, source, length, "", &error);
    if (U_FAILURE(error)) {
      return make_error(ErrorCode::kInternal, "Engram token map: ICU lowercasing of U+{:04X} failed ({})",
                        static_cast<uint32_t>(cp), u_errorName(error));
    }
    for (int32_t i = 0; i < lowered_length;) {
      UChar32 c = 0;
      U16_NEXT(lowered, i, lowered_length, c);
      chars_.push_back(static_cast<char32_t>(c));
    }
    return {};
  }

  icu::UnicodeSet unicode9_;  // the characters assigned by Unicode 9.0
  std::unique_ptr<icu::FilteredNormalizer2> nfkc9_;
  std::unique_ptr<icu::FilteredNormalizer2> nfd9_;
  icu::UnicodeString composed_;
  icu::UnicodeString decomposed_;
  std::u32string chars_;
};

}  // namespace

Result<EngramTokenMap> EngramTokenMap::build(const tokenizer::Tokenizer& tokenizer) {
  HIPPO_ASSIGN_OR_RETURN(std::unique_ptr<TextNormalizer> normalizer, TextNormalizer::create());
  const std::size_t n_vocab = tokenizer.n_vocab();
  EngramTokenMap map;
  map.ids_.resize(n_vocab);
  std::unordered_map<std::string, int32_t> classes;
  classes.reserve(n_vocab);
  std::string key;
  for (std::size_t v = 0; v < n_vocab; ++v) {
    const auto id = static_cast<tokenizer::TokenId>(v);
    if (!tokenizer.is_valid_id(id)) {
      return make_error(ErrorCode::kInvalidArgument,
                        "Engram token map: the tokenizer has no token with id {} (below its {} ids)", v, n_vocab);
    }
    const std::string_view text = tokenizer.token_bytes(id);
    if (!tokenizer::is_valid_utf8(text) || text.find(tokenizer::kReplacementUtf8) != std::string_view::npos) {
      // A partial UTF-8 sequence: nothing to normalise; keyed by the raw token string.
      key.clear();
      if (const tokenizer::AddedToken* added = tokenizer.added_vocabulary().by_id(id)) {
        key = added->content;
      } else {
        append_byte_level_spelling(text, key);
      }
    } else {
      HIPPO_RETURN_IF_ERROR(normalizer->normalize(text, key));
      if (key.empty()) key.assign(text);
    }
    const auto [it, inserted] = classes.try_emplace(key, static_cast<int32_t>(classes.size()));
    map.ids_[v] = it->second;
  }
  map.num_classes_ = static_cast<int32_t>(classes.size());
  return map;
}

Result<EngramTokenMap> EngramTokenMap::build(const std::filesystem::path& tokenizer_json) {
  HIPPO_ASSIGN_OR_RETURN(tokenizer::Tokenizer tokenizer, tokenizer::Tokenizer::load(tokenizer_json));
  return build(tokenizer);
}

Status check_engram_token_map(const TextConfig& config, const EngramTokenMap& map) {
  if (config.engram_layer_ids.empty()) return {};
  if (map.num_classes() != config.engram_compressed_vocab_size) {
    return make_error(ErrorCode::kInvalidArgument,
                      "text_config.engram_compressed_vocab_size is {}, but the tokenizer's Engram token map has {} "
                      "classes: the hash multipliers derive from this count, so every Engram row would be wrong "
                      "(is tokenizer.json the one this checkpoint was trained with?)",
                      config.engram_compressed_vocab_size, map.num_classes());
  }
  if (map.vocab_size() < config.vocab_size) {
    return make_error(ErrorCode::kInvalidArgument,
                      "text_config.vocab_size is {}, but the tokenizer's Engram token map covers only {} ids",
                      config.vocab_size, map.vocab_size());
  }
  return {};
}

Result<std::string> engram_normalize(std::string_view valid_utf8) {
  HIPPO_ASSIGN_OR_RETURN(std::unique_ptr<TextNormalizer> normalizer, TextNormalizer::create());
  std::string out;
  HIPPO_RETURN_IF_ERROR(normalizer->normalize(valid_utf8, out));
  return out;
}

}  // namespace hippo::engine
