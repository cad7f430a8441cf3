// tokenizer.json loading and validation, and the encode/decode paths (see tokenizer.h).
#include "engine/tokenizer/tokenizer.h"

#include "base/check.h"
#include "engine/tokenizer/pretokenizer.h"
#include "engine/tokenizer/utf8.h"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <atomic>
#include <fstream>
#include <sstream>
#include <unordered_map>

namespace hippo::tokenizer {
namespace {

namespace json = boost::json;

// The one pre-tokenizer that Pretokenizer implements (DeepSeek V4's), as tokenizer.json spells it.
constexpr std::string_view kExpectedPretokenizer = R"json({"type":"Sequence","pretokenizers":[
  {"type":"Split","pattern":{"Regex":"\\p{N}{1,3}"},"behavior":"Isolated","invert":false},
  {"type":"Split","pattern":{"Regex":"[一-龥぀-ゟ゠-ヿ]+"},"behavior":"Isolated","invert":false},
  {"type":"Split","pattern":{"Regex":"[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"},"behavior":"Isolated","invert":false},
  {"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false}]})json";

// Cache of encoded pieces, per thread: pieces repeat (words, indentation), and BPE merging is the
// costly step. 1 << 17 pieces ≈ 10 MB per thread before it is cleared.
constexpr std::size_t kMaxCachedPieces = 1u << 17;

struct PieceHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct EncodeScratch {
  std::uint64_t owner = 0;
  Pretokenizer pretokenizer;
  std::vector<std::string_view> pieces;
  std::vector<TextSegment> segments;
  std::unordered_map<std::string, std::pair<std::uint32_t, std::uint32_t>, PieceHash, std::equal_to<>> cache;
  std::vector<TokenId> cached_ids;  // the cache's values: [offset, offset + count)
};

EncodeScratch& scratch_for(std::uint64_t owner) {
  thread_local EncodeScratch scratch;
  if (scratch.owner != owner) {
    scratch.owner = owner;
    scratch.cache.clear();
    scratch.cached_ids.clear();
  }
  return scratch;
}

std::atomic<std::uint64_t> next_instance_id{1};

Status corrupt(std::string_view origin, std::string_view what) {
  return make_error(ErrorCode::kCorrupt, "{}: {}", origin, what);
}

const json::value* member(const json::value& v, std::string_view key) {
  const json::object* o = v.if_object();
  if (o == nullptr) return nullptr;
  return o->if_contains(key);
}

bool is_null_or_false(const json::value* v) { return v == nullptr || v->is_null() || (v->is_bool() && !v->get_bool()); }

}  // namespace

Result<Tokenizer> Tokenizer::load(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return make_error(ErrorCode::kNotFound, "{}: cannot open the tokenizer file (run scripts/setup to fetch it)",
                      path.string());
  }
  std::ostringstream contents;
  contents << in.rdbuf();
  if (!in && !in.eof()) return make_error(ErrorCode::kIoError, "{}: read failed", path.string());
  return parse(contents.str(), path.string());
}

Result<Tokenizer> Tokenizer::parse(std::string_view text, std::string_view origin) {
  boost::system::error_code ec;
  const json::value doc = json::parse(text, ec);
  if (ec) return corrupt(origin, fmt::format("not JSON: {}", ec.message()));

  const json::value* model = member(doc, "model");
  if (model == nullptr || !member(*model, "type") || *member(*model, "type") != "BPE") {
    return corrupt(origin, "model.type is not \"BPE\"");
  }
  for (std::string_view key : {"dropout", "continuing_subword_prefix", "end_of_word_suffix", "byte_fallback",
                               "ignore_merges", "unk_token"}) {
    if (!is_null_or_false(member(*model, key))) {
      return corrupt(origin, fmt::format("model.{} is set; hippo implements plain byte-level BPE only", key));
    }
  }
  const json::value* normalizer = member(doc, "normalizer");
  const json::value* normalizers = normalizer ? member(*normalizer, "normalizers") : nullptr;
  if (normalizer && !normalizer->is_null() && !(normalizers && normalizers->is_array() && normalizers->get_array().empty())) {
    return corrupt(origin, "the normalizer is not empty; hippo implements DeepSeek V4's (none)");
  }
  const json::value* pre = member(doc, "pre_tokenizer");
  if (pre == nullptr || json::serialize(*pre) != json::serialize(json::parse(kExpectedPretokenizer))) {
    return corrupt(origin, "the pre_tokenizer differs from DeepSeek V4's, the only one hippo implements");
  }
  const json::value* decoder = member(doc, "decoder");
  if (decoder == nullptr || !member(*decoder, "type") || *member(*decoder, "type") != "ByteLevel") {
    return corrupt(origin, "decoder.type is not \"ByteLevel\"");
  }

  const json::value* vocab = member(*model, "vocab");
  const json::value* merges = member(*model, "merges");
  if (vocab == nullptr || !vocab->is_object() || merges == nullptr || !merges->is_array()) {
    return corrupt(origin, "model.vocab must be an object and model.merges an array");
  }
  std::vector<std::pair<std::string, TokenId>> vocab_entries;
  vocab_entries.reserve(vocab->get_object().size());
  for (const auto& [spelling, id] : vocab->get_object()) {
    if (!id.is_int64() || id.get_int64() < 0 || id.get_int64() > INT32_MAX) {
      return corrupt(origin, fmt::format("model.vocab[{:?}] is not a valid id", std::string_view(spelling)));
    }
    vocab_entries.emplace_back(std::string(spelling), static_cast<TokenId>(id.get_int64()));
  }
  std::vector<std::pair<std::string, std::string>> merge_entries;
  merge_entries.reserve(merges->get_array().size());
  for (const json::value& m : merges->get_array()) {
    if (m.is_string()) {  // "left right" (byte-level spellings never contain a space)
      const std::string_view s = m.get_string();
      const std::size_t space = s.find(' ');
      if (space == std::string_view::npos || s.find(' ', space + 1) != std::string_view::npos) {
        return corrupt(origin, fmt::format("merge {:?} is not two tokens", s));
      }
      merge_entries.emplace_back(std::string(s.substr(0, space)), std::string(s.substr(space + 1)));
    } else if (m.is_array() && m.get_array().size() == 2 && m.get_array()[0].is_string() &&
               m.get_array()[1].is_string()) {
      merge_entries.emplace_back(std::string(m.get_array()[0].get_string()), std::string(m.get_array()[1].get_string()));
    } else {
      return corrupt(origin, "a merge is neither \"a b\" nor [\"a\", \"b\"]");
    }
  }
  std::vector<TokenId> foreign_ids;
  auto built = BpeModel::build(vocab_entries, merge_entries, foreign_ids);
  if (!built.ok()) return built.status().with_context(origin);

  Tokenizer tokenizer;
  tokenizer.model_ = std::move(built).value();
  tokenizer.n_vocab_ = tokenizer.model_.n_tokens();

  const json::value* added = member(doc, "added_tokens");
  if (added == nullptr || !added->is_array()) return corrupt(origin, "added_tokens is not an array");
  std::vector<AddedToken> added_tokens;
  for (const json::value& t : added->get_array()) {
    const json::value* content = member(t, "content");
    const json::value* id = member(t, "id");
    if (content == nullptr || !content->is_string() || content->get_string().empty() || id == nullptr ||
        !id->is_int64() || id->get_int64() < 0 || id->get_int64() > INT32_MAX) {
      return corrupt(origin, "an added token lacks a content string or a valid id");
    }
    for (std::string_view key : {"lstrip", "rstrip", "single_word"}) {
      if (!is_null_or_false(member(t, key))) {
        return corrupt(origin, fmt::format("added token {:?} sets {}, which hippo does not implement",
                                           std::string_view(content->get_string()), key));
      }
    }
    const json::value* special = member(t, "special");
    const json::value* normalized = member(t, "normalized");
    AddedToken token{std::string(content->get_string()), static_cast<TokenId>(id->get_int64()),
                     special && special->is_bool() && special->get_bool(),
                     normalized && normalized->is_bool() && normalized->get_bool()};
    tokenizer.n_vocab_ = std::max(tokenizer.n_vocab_, static_cast<std::size_t>(token.id) + 1);
    added_tokens.push_back(std::move(token));
  }
  tokenizer.added_ = AddedVocabulary(std::move(added_tokens));
  for (TokenId id : foreign_ids) {
    if (tokenizer.added_.by_id(id) == nullptr) {
      return corrupt(origin, fmt::format("model.vocab id {} is outside the byte-level alphabet and not an added token", id));
    }
  }
  tokenizer.instance_id_ = next_instance_id.fetch_add(1);
  return tokenizer;
}

void Tokenizer::encode_text(std::string_view text, std::vector<TokenId>& out) const {
  EncodeScratch& s = scratch_for(instance_id_);
  s.pretokenizer.split(text, s.pieces);
  for (std::string_view piece : s.pieces) {
    if (const auto it = s.cache.find(piece); it != s.cache.end()) {
      const auto [offset, count] = it->second;
      out.insert(out.end(), s.cached_ids.begin() + offset, s.cached_ids.begin() + offset + count);
      continue;
    }
    const std::size_t first = out.size();
    model_.encode_piece(piece, out);
    if (s.cache.size() >= kMaxCachedPieces) {
      s.cache.clear();
      s.cached_ids.clear();
    }
    const auto offset = static_cast<std::uint32_t>(s.cached_ids.size());
    s.cached_ids.insert(s.cached_ids.end(), out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
    s.cache.emplace(std::string(piece), std::pair{offset, static_cast<std::uint32_t>(out.size() - first)});
  }
}

void Tokenizer::encode(std::string_view text, std::vector<TokenId>& out) const {
  std::string repaired;
  if (!is_valid_utf8(text)) {
    repaired = repair_utf8(text);
    text = repaired;
  }
  std::vector<TextSegment> segments;
  added_.split(text, segments);
  for (const TextSegment& segment : segments) {
    if (segment.id >= 0) {
      out.push_back(segment.id);
    } else {
      encode_text(segment.text, out);
    }
  }
}

std::vector<TokenId> Tokenizer::encode(std::string_view text) const {
  std::vector<TokenId> ids;
  ids.reserve(text.size() / 3 + 4);
  encode(text, ids);
  return ids;
}

void Tokenizer::encode_plain(std::string_view text, std::vector<TokenId>& out) const {
  if (is_valid_utf8(text)) {
    encode_text(text, out);
  } else {
    encode_text(repair_utf8(text), out);
  }
}

bool Tokenizer::is_valid_id(TokenId id) const {
  return added_.by_id(id) != nullptr || model_.token_bytes(id) != nullptr;
}

std::string_view Tokenizer::token_bytes(TokenId id) const {
  if (const AddedToken* t = added_.by_id(id)) return t->content;
  const std::string* bytes = model_.token_bytes(id);
  HIPPO_CHECK(bytes != nullptr, "token id outside the vocabulary");
  return *bytes;
}

std::string Tokenizer::decode(std::span<const TokenId> ids) const {
  std::string out;
  for (TokenId id : ids) out.append(token_bytes(id));
  return out;
}

}  // namespace hippo::tokenizer
