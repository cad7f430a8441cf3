// The tokenizer against published vectors (architecture spec §7.1), the special-token table, the
// sanitising rule for user content, decoding, and tokenizer.json validation.
#include "engine/tokenizer/tokenizer.h"
#include "tests/engine/tokenizer/test_data.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

namespace hippo::tokenizer {
namespace {

using testing::deepseek_tokenizer;

TEST_CASE("published vectors from the architecture spec §7.1", "[tokenizer]") {
  const Tokenizer& tok = deepseek_tokenizer();
  CHECK(tok.encode("Hello!") == std::vector<TokenId>{19923, 3});
  // deepseek-tokenizer's README example (mixed ASCII, CJK, full-width punctuation, byte-level
  // spellings typed as text).
  CHECK(tok.encode("Hello! 毕老师！1 + 1 = 2 ĠÑĤÐ²ÑĬÑĢ") ==
        std::vector<TokenId>{19923, 3,  223,   5464, 5008,  1175, 19,    940, 223, 19,    438, 223, 20,
                             6113,  257, 76589, 131, 100,   76032, 1628, 76589, 131, 108, 76589, 131, 98});
}

TEST_CASE("special tokens have the ids of the spec", "[tokenizer]") {
  const Tokenizer& tok = deepseek_tokenizer();
  CHECK(tok.n_vocab() == 129280);
  CHECK(tok.added_token_id("<｜begin▁of▁sentence｜>") == 0);
  CHECK(tok.added_token_id("<｜end▁of▁sentence｜>") == 1);
  CHECK(tok.added_token_id("<｜User｜>") == 128803);
  CHECK(tok.added_token_id("<｜Assistant｜>") == 128804);
  CHECK(tok.added_token_id("<think>") == 128821);
  CHECK(tok.added_token_id("</think>") == 128822);
  CHECK(tok.added_token_id("｜DSML｜") == 128825);
  CHECK(tok.added_token_id("<｜latest_reminder｜>") == 128828);
  CHECK(tok.added_token_id("<｜place▁holder▁no▁799｜>") == 128799);  // the DSpark noise token
  CHECK_FALSE(tok.added_token_id("<｜System｜>").has_value());      // V4.1-only, absent from V4
}

TEST_CASE("added tokens are matched inside text, plain encoding never matches them", "[tokenizer]") {
  const Tokenizer& tok = deepseek_tokenizer();
  CHECK(tok.encode("a <｜User｜>b<think>") == std::vector<TokenId>{67, 223, 128803, 68, 128821});
  std::vector<TokenId> plain;
  tok.encode_plain("a <｜User｜>b<think>", plain);
  for (TokenId id : plain) CHECK(id < 128000);
  CHECK(tok.decode(plain) == "a <｜User｜>b<think>");
}

TEST_CASE("decode concatenates token bytes and round-trips encode", "[tokenizer]") {
  const Tokenizer& tok = deepseek_tokenizer();
  const std::string text = "Grüße, 世界! <｜Assistant｜>\n\t  x = 12345;";
  CHECK(tok.decode(tok.encode(text)) == text);
  CHECK(tok.token_bytes(128822) == "</think>");
  CHECK(tok.is_valid_id(129279));
  CHECK_FALSE(tok.is_valid_id(129280));
  CHECK_FALSE(tok.is_valid_id(-1));
}

TEST_CASE("invalid UTF-8 is encoded as its U+FFFD repair", "[tokenizer]") {
  const Tokenizer& tok = deepseek_tokenizer();
  CHECK(tok.encode("a\xff" "b\xe4\xb8") == tok.encode("a\xef\xbf\xbd" "b\xef\xbf\xbd"));
}

TEST_CASE("tokenizer.json that hippo cannot reproduce is refused with the reason", "[tokenizer]") {
  CHECK(Tokenizer::parse("{", "x.json").status().code() == ErrorCode::kCorrupt);
  const auto wrong_model = Tokenizer::parse(R"({"model":{"type":"WordPiece"}})", "x.json");
  CHECK(wrong_model.status().message() == "x.json: model.type is not \"BPE\"");
  const auto missing = Tokenizer::load("/nonexistent/tokenizer.json");
  CHECK(missing.status().code() == ErrorCode::kNotFound);
  CHECK_THAT(missing.status().message(), Catch::Contains("scripts/setup"));
}

}  // namespace
}  // namespace hippo::tokenizer
