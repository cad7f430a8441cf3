// Streaming detokenisation never emits half a character and adds up to the whole-output decode.
#include "engine/tokenizer/incremental_detokenizer.h"
#include "engine/tokenizer/utf8.h"
#include "tests/engine/tokenizer/test_data.h"

#include <catch2/catch.hpp>

#include <random>

namespace hippo::tokenizer {
namespace {

std::string stream(const Tokenizer& tok, const std::vector<TokenId>& ids) {
  IncrementalDetokenizer detok(tok);
  std::string all;
  for (TokenId id : ids) {
    std::string piece;
    detok.push(id, piece);
    CHECK(is_valid_utf8(piece));
    all += piece;
  }
  std::string tail;
  detok.finish(tail);
  CHECK(is_valid_utf8(tail));
  return all + tail;
}

TEST_CASE("encoded text streams back byte for byte", "[detokenizer]") {
  const Tokenizer& tok = testing::deepseek_tokenizer();
  const std::string text = "emoji 😀👩‍👩‍👧 split over byte tokens, 中文，ｶﾀｶﾅ <think>and specials</think> ok";
  CHECK(stream(tok, tok.encode(text)) == text);
}

TEST_CASE("random token sequences stream to the U+FFFD repair of their bytes", "[detokenizer]") {
  const Tokenizer& tok = testing::deepseek_tokenizer();
  std::mt19937 rng(11);
  // Byte tokens (ids of single bytes 0x80..0xFF included) make incomplete and invalid sequences.
  std::vector<TokenId> byte_ids;
  for (TokenId id = 0; id < 128000; ++id) {
    if (tok.is_valid_id(id) && tok.token_bytes(id).size() == 1) byte_ids.push_back(id);
  }
  REQUIRE(byte_ids.size() == 256);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<TokenId> ids;
    const int n = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      const unsigned r = rng() % 4;
      ids.push_back(r == 0 ? static_cast<TokenId>(rng() % tok.n_vocab()) : byte_ids[rng() % byte_ids.size()]);
      if (!tok.is_valid_id(ids.back())) ids.pop_back();
    }
    CHECK(stream(tok, ids) == repair_utf8(tok.decode(ids)));
  }
}

}  // namespace
}  // namespace hippo::tokenizer
