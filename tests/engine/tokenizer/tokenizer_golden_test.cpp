// Token ids identical to Hugging Face `tokenizers` on the same tokenizer.json, over the ≥ 5 MB
// generated corpus of scripts/gen_tokenizer_golden.py (prose, CJK, code, JSON, emoji, whitespace
// and digit runs, random Unicode, invalid UTF-8, special-token spellings, very long runs).
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8.h"
#include "tests/engine/tokenizer/test_data.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

namespace hippo::tokenizer {
namespace {

struct GoldenDocument {
  std::string text;
  std::vector<TokenId> ids;
};

std::vector<GoldenDocument> read_corpus() {
  const std::string data = testing::read_file(testing::golden_file("tokenizer_corpus.bin"));
  std::vector<GoldenDocument> docs;
  std::size_t pos = 0;
  const auto read_u32 = [&] {
    REQUIRE(pos + 4 <= data.size());
    std::uint32_t v;
    std::memcpy(&v, data.data() + pos, 4);
    pos += 4;
    return v;
  };
  while (pos < data.size()) {
    GoldenDocument doc;
    const std::uint32_t n_bytes = read_u32();
    REQUIRE(pos + n_bytes <= data.size());
    doc.text = data.substr(pos, n_bytes);
    pos += n_bytes;
    const std::uint32_t n_ids = read_u32();
    REQUIRE(pos + 4ull * n_ids <= data.size());
    doc.ids.resize(n_ids);
    if (n_ids > 0) std::memcpy(doc.ids.data(), data.data() + pos, 4ull * n_ids);
    pos += 4ull * n_ids;
    docs.push_back(std::move(doc));
  }
  return docs;
}

TEST_CASE("ids equal HF tokenizers over the golden corpus", "[tokenizer][golden]") {
  const Tokenizer& tok = testing::deepseek_tokenizer();
  const std::vector<GoldenDocument> docs = read_corpus();
  std::size_t total_bytes = 0;
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < docs.size(); ++i) {
    total_bytes += docs[i].text.size();
    const std::vector<TokenId> ids = tok.encode(docs[i].text);
    if (ids != docs[i].ids) {
      ++mismatches;
      if (mismatches <= 3) {
        std::size_t at = 0;
        while (at < ids.size() && at < docs[i].ids.size() && ids[at] == docs[i].ids[at]) ++at;
        UNSCOPED_INFO("document " << i << " (" << docs[i].text.size() << " bytes) differs at token " << at);
      }
    }
    // Decoding gives back the (repaired) text byte for byte.
    if (tok.decode(ids) != repair_utf8(docs[i].text)) ++mismatches;
  }
  CHECK(total_bytes >= 5u * 1024 * 1024);
  CHECK(mismatches == 0);
}

}  // namespace
}  // namespace hippo::tokenizer
