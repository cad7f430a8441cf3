// Engram's compressed token ids (engine/engram/engram_token_map.h): the map of the real tokenizer
// against the reference's own output (tests/data/golden/engram-compressed-ids.safetensors.zst, written
// by scripts/gen_model_golden.py --engram-map from transformers' DeepSeek-V4.1: a safetensors image in
// one zstd frame), and the normalisation rules one by one against what HF `tokenizers` 0.23.3 (the
// reference's normalizers) returns.
#include "engine/engram/engram_token_map.h"

#include "engine/config/presets.h"
#include "engine/engram/engram_hash.h"
#include "engine/weights/safetensors.h"
#include "tests/engine/engram_test_map.h"
#include "tests/engine/test_paths.h"

#include <catch2/catch.hpp>
#include <zstd.h>

#include <chrono>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

namespace hippo::engine {
namespace {

using testing::test_data;
using testing::tokenizer_dir;
using testing::real_engram_map;

// The reference's addressing: a safetensors image inside one zstd frame.
class GoldenAddressing {
 public:
  GoldenAddressing() {
    const std::string compressed = testing::read_file(test_data("golden/engram-compressed-ids.safetensors.zst"));
    REQUIRE(!compressed.empty());
    const unsigned long long size = ZSTD_getFrameContentSize(compressed.data(), compressed.size());
    REQUIRE(size != ZSTD_CONTENTSIZE_UNKNOWN);
    REQUIRE(size != ZSTD_CONTENTSIZE_ERROR);
    image_.resize(size);
    REQUIRE(ZSTD_decompress(image_.data(), image_.size(), compressed.data(), compressed.size()) == size);
    auto entries = parse_safetensors(image_, "engram-compressed-ids.safetensors");
    INFO(entries.status().to_string());
    REQUIRE(entries.ok());
    entries_ = std::move(entries).value();
  }

  template <typename T>
  std::vector<T> read(const std::string& name, DType dtype) const {
    for (const SafetensorsEntry& e : entries_) {
      if (e.name != name) continue;
      REQUIRE(e.dtype == dtype);
      std::vector<T> values(e.size / sizeof(T));
      std::memcpy(values.data(), image_.data() + e.offset, e.size);
      return values;
    }
    FAIL("tensor " << name << " missing from the golden Engram addressing");
    return {};
  }

 private:
  std::vector<std::byte> image_;
  std::vector<SafetensorsEntry> entries_;
};

std::string normalized(std::string_view text) {
  auto out = engram_normalize(text);
  INFO(out.status().to_string());
  REQUIRE(out.ok());
  return *out;
}

TEST_CASE("the real tokenizer compresses to the reference's 99,092 classes, id for id") {
  const EngramTokenMap& map = real_engram_map();
  CHECK(map.vocab_size() == 129280);
  CHECK(map.num_classes() == 99092);

  const std::vector<int32_t> reference = GoldenAddressing().read<int32_t>("engram.token_map", DType::kI32);
  REQUIRE(reference.size() == map.ids().size());
  std::size_t differing = 0;
  for (std::size_t v = 0; v < reference.size(); ++v) {
    if (reference[v] != map.ids()[v] && differing++ < 10) {
      UNSCOPED_INFO("token " << v << ": hippo " << map.ids()[v] << ", reference " << reference[v]);
    }
  }
  CHECK(differing == 0);
}

TEST_CASE("the tiny preset's multipliers, primes and offsets are the reference's") {
  auto config = preset_config("tiny", false);
  REQUIRE(config.ok());
  auto hasher = EngramHasher::create(config->text_config, real_engram_map());
  INFO(hasher.status().to_string());
  REQUIRE(hasher.ok());
  const GoldenAddressing golden;
  const std::vector<int64_t> multipliers = golden.read<int64_t>("engram.multipliers", DType::kI64);
  const std::vector<int64_t> primes = golden.read<int64_t>("engram.primes", DType::kI64);
  const std::vector<int64_t> offsets = golden.read<int64_t>("engram.offsets", DType::kI64);
  std::vector<int64_t> ours_multipliers, ours_primes, ours_offsets;
  for (int l = 0; l < hasher->n_layers(); ++l) {
    const EngramLayerAddressing& layer = hasher->layer(l);
    ours_multipliers.insert(ours_multipliers.end(), layer.multipliers.begin(), layer.multipliers.end());
    ours_primes.insert(ours_primes.end(), layer.primes.begin(), layer.primes.end());
    ours_offsets.insert(ours_offsets.end(), layer.offsets.begin(), layer.offsets.end());
  }
  CHECK(ours_multipliers == multipliers);
  CHECK(ours_primes == primes);
  CHECK(ours_offsets == offsets);
}

TEST_CASE("compressed ids are numbered by first appearance") {
  const EngramTokenMap& map = real_engram_map();
  int32_t next = 0;
  for (int32_t id : map.ids()) {
    REQUIRE(id <= next);
    if (id == next) ++next;
  }
  CHECK(next == map.num_classes());
}

TEST_CASE("the Engram map builds in well under a second") {
  auto tokenizer = tokenizer::Tokenizer::load(std::filesystem::path(tokenizer_dir()) / "tokenizer.json");
  REQUIRE(tokenizer.ok());
  const auto start = std::chrono::steady_clock::now();
  auto map = EngramTokenMap::build(*tokenizer);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE(map.ok());
  WARN("EngramTokenMap::build: " << seconds * 1e3 << " ms for " << map->vocab_size() << " ids");
  CHECK(seconds < 1.0);
}

TEST_CASE("tokens that normalise alike share a class and byte fragments keep their own") {
  const EngramTokenMap& map = real_engram_map();
  auto tokenizer = tokenizer::Tokenizer::load(std::filesystem::path(tokenizer_dir()) / "tokenizer.json");
  REQUIRE(tokenizer.ok());
  const auto single = [&](std::string_view text) {
    const std::vector<tokenizer::TokenId> ids = tokenizer->encode(text);
    REQUIRE(ids.size() == 1);
    return ids[0];
  };
  CHECK(map.compressed_id(single("The")) == map.compressed_id(single(" the")));
  CHECK(map.compressed_id(single(" THE")) == map.compressed_id(single("the")));
  CHECK(map.compressed_id(single("the")) != map.compressed_id(single("them")));
  // A lone space and a lone newline normalise to " " (the sentinel rule), not to "".
  CHECK(map.compressed_id(single(" ")) == map.compressed_id(single("\n")));
  // A byte fragment is keyed by its byte-level spelling, which can equal a normalised text: byte 0xA7
  // (id 103, spelled "§", not valid UTF-8 alone) shares the class of the text "§" (id 23280).
  REQUIRE(tokenizer->token_bytes(103) == "\xA7");
  REQUIRE(tokenizer->token_bytes(23280) == "\u00A7");
  CHECK(map.compressed_id(103) == map.compressed_id(23280));
  CHECK(map.compressed_id(103) != map.compressed_id(104));
}

TEST_CASE("the config's compressed vocabulary must match the map") {
  auto config = preset_config("tiny", false);
  REQUIRE(config.ok());
  TextConfig text = config->text_config;
  CHECK(check_engram_token_map(text, real_engram_map()).ok());

  text.engram_compressed_vocab_size = 99091;
  const Status wrong = check_engram_token_map(text, real_engram_map());
  CHECK(wrong.code() == ErrorCode::kInvalidArgument);
  CHECK_THAT(wrong.message(), Catch::Contains("engram_compressed_vocab_size is 99091") &&
                                  Catch::Contains("99092 classes"));

  text.engram_layer_ids.clear();  // no Engram layers: nothing to check
  CHECK(check_engram_token_map(text, real_engram_map()).ok());
}

// Expected values: HF tokenizers 0.23.3 with the reference's normalizer sequence.
TEST_CASE("normalisation follows the reference's normalizers") {
  CHECK(normalized("Hello") == "hello");
  CHECK(normalized("  The  ") == "the");
  CHECK(normalized("") == "");
  CHECK(normalized("x  y\t\tz") == "x y z");
  // Whitespace-only texts: [ \t\r\n] runs collapse to " ", which the sentinel keeps; other White_Space
  // (VT, U+2028) is stripped to nothing (the key then falls back to the raw text).
  CHECK(normalized(" ") == " ");
  CHECK(normalized("\t\n") == " ");
  CHECK(normalized("\t\r\n ") == " ");
  CHECK(normalized("\u3000") == " ");  // NFKC: ideographic space -> space
  CHECK(normalized("\x0b") == "");
  CHECK(normalized("\u2028") == "");
  CHECK(normalized("\u00A0x\u00A0") == "x");
  CHECK(normalized("a\xC2\x85") == "a");    // U+0085 is White_Space
  CHECK(normalized("\u1680" "b") == "b");
  CHECK(normalized("\x1c" "a\x1f") == "\x1c" "a\x1f");  // not White_Space (Python's str.strip would drop them)
  // Sentinel U+E000 of the text itself comes back as a space, after the strip.
  CHECK(normalized("\uE000") == " ");
  CHECK(normalized("a\uE000") == "a ");
  CHECK(normalized(" \uE000 ") == " ");
  CHECK(normalized("a \uE000") == "a  ");
  // NFKC, NFD, marks, lowercase.
  CHECK(normalized("Caf\u00E9") == "cafe");
  CHECK(normalized("\u00C5ngstr\u00F6m") == "angstrom");
  CHECK(normalized("\uFB01") == "fi");
  CHECK(normalized("\u2460") == "1");
  CHECK(normalized("\uFF48\uFF45\uFF4C\uFF4C\uFF4F") == "hello");
  CHECK(normalized("x\u0301\u0327") == "x");
  CHECK(normalized("\u0301") == "");
  CHECK(normalized("\u0130") == "i");
  CHECK(normalized("\u1E9E") == "\u00DF");
  CHECK(normalized("\u01C4") == "dz");
  CHECK(normalized("\uD55C") == "\u1112\u1161\u11AB");  // Hangul syllables end decomposed (NFD)
  // Lowercasing is per character: a final capital sigma becomes σ, not ς.
  CHECK(normalized("\u039F\u03A3") == "\u03BF\u03C3");
  CHECK(normalized("\u03A4\u0397\u03A3 \u0391\u03A3") == "\u03C4\u03B7\u03C3 \u03B1\u03C3");
  // Unicode 9.0 tables: a mark of Unicode 10 (U+0D00) stays, a compatibility character of Unicode 12
  // (U+1F16C) does not decompose, one of Unicode 6.1 (U+1F16A) does.
  CHECK(normalized("a\u0D00") == "a\u0D00");
  CHECK(normalized("\U0001F16C") == "\U0001F16C");
  CHECK(normalized("\U0001F16A") == "mc");
}

}  // namespace
}  // namespace hippo::engine
