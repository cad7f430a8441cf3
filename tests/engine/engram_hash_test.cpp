// Engram hashing (engine/engram/engram_hash.h): the rows of every prompt position against the
// reference's (transformers' DeepSeek-V4.1 `DeepseekV41NgramHashState`, stored as p{i}.engram_hash in
// tests/data/golden/tiny-seed1.safetensors by scripts/gen_model_golden.py --with-hashes, for the
// `tiny` preset) and for DEAD positions (tests/data/golden/engram-dead-mask.safetensors), the release's
// multipliers and table sizes (docs/reference-model.md D16), and the look-back's bytes.
#include "engine/engram/engram_hash.h"

#include "engine/config/presets.h"
#include "engine/engram/engram_token_map.h"
#include "engine/weights/safetensors.h"
#include "tests/engine/engram_test_map.h"
#include "tests/engine/test_paths.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstring>
#include <string>
#include <vector>

namespace hippo::engine {
namespace {

using testing::test_data;
using testing::tokenizer_dir;
using testing::real_engram_map;

EngramHasher hasher_for(const TextConfig& config) {
  auto hasher = EngramHasher::create(config, real_engram_map());
  INFO(hasher.status().to_string());
  REQUIRE(hasher.ok());
  return std::move(hasher).value();
}

TextConfig preset_text(const std::string& name) {
  auto config = preset_config(name, false);
  REQUIRE(config.ok());
  return config->text_config;
}

const SafetensorsEntry* find(const SafetensorsFile& file, const std::string& name) {
  for (const SafetensorsEntry& e : file.entries())
    if (e.name == name) return &e;
  return nullptr;
}

std::vector<int32_t> read_i32(const SafetensorsFile& file, const SafetensorsEntry& e) {
  REQUIRE(e.dtype == DType::kI32);
  std::vector<int32_t> values(e.size / 4);
  std::memcpy(values.data(), file.data(e).data(), e.size);
  return values;
}

// Rows of a whole sequence from a fresh look-back: [S, L, C].
std::vector<int64_t> hash_sequence(const EngramHasher& hasher, std::span<const int32_t> ids) {
  std::vector<int64_t> rows(ids.size() * static_cast<size_t>(hasher.n_layers() * hasher.rows_per_position()));
  EngramLookback state(hasher.max_ngram_size());
  hasher.hash_tokens(real_engram_map(), ids, state, rows);
  return rows;
}

TEST_CASE("hashing reproduces the reference's rows for every golden prompt (tiny preset)") {
  const EngramHasher hasher = hasher_for(preset_text("tiny"));
  auto golden = SafetensorsFile::open(test_data("golden/tiny-seed1.safetensors"));
  INFO(golden.status().to_string());
  REQUIRE(golden.ok());

  int prompts = 0;
  for (;; ++prompts) {
    const std::string prefix = fmt::format("p{}.", prompts);
    const SafetensorsEntry* ids_entry = find(*golden, prefix + "ids");
    if (ids_entry == nullptr) break;
    const SafetensorsEntry* hash_entry = find(*golden, prefix + "engram_hash");
    INFO("prompt " << prompts);
    REQUIRE(hash_entry != nullptr);
    const std::vector<int32_t> ids = read_i32(*golden, *ids_entry);
    const std::vector<int32_t> expected = read_i32(*golden, *hash_entry);
    REQUIRE(hash_entry->shape == std::vector<int64_t>{static_cast<int64_t>(ids.size()), hasher.n_layers(),
                                                      hasher.rows_per_position()});

    const std::vector<int64_t> rows = hash_sequence(hasher, ids);
    REQUIRE(rows.size() == expected.size());
    std::size_t differing = 0;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (rows[i] != expected[i] && differing++ < 10) {
        UNSCOPED_INFO("entry " << i << ": " << rows[i] << " vs " << expected[i]);
      }
    }
    CHECK(differing == 0);

    // The same prompt in chunks, the look-back carried through its bytes between them, as the
    // engine's per-session state does between a prefill and decode steps.
    std::vector<int64_t> chunked;
    EngramLookback state(hasher.max_ngram_size());
    const std::size_t per_position = static_cast<size_t>(hasher.n_layers() * hasher.rows_per_position());
    for (std::size_t begin = 0; begin < ids.size();) {
      const std::size_t end = std::min(ids.size(), begin + 1 + begin % 5);
      std::vector<int64_t> part((end - begin) * per_position);
      hasher.hash_tokens(real_engram_map(), std::span(ids).subspan(begin, end - begin), state, part);
      chunked.insert(chunked.end(), part.begin(), part.end());
      auto restored =
          EngramLookback::restore(state.serialize(), hasher.max_ngram_size(), hasher.compressed_vocab_size());
      REQUIRE(restored.ok());
      state = *restored;
      begin = end;
    }
    CHECK(chunked == rows);
  }
  CHECK(prompts >= 1);
}

TEST_CASE("the release config's multipliers, primes and table sizes") {
  auto config = load_model_config(test_data("deepseek-v41-flash.config.json"));
  INFO(config.status().to_string());
  REQUIRE(config.ok());
  const EngramHasher hasher = hasher_for(config->text_config);
  REQUIRE(hasher.n_layers() == 2);
  CHECK(hasher.max_ngram_size() == 4);
  CHECK(hasher.rows_per_position() == 24);
  CHECK(hasher.compressed_vocab_size() == 99092);
  CHECK(hasher.pad_id() == real_engram_map().compressed_id(2));

  const EngramLayerAddressing& first = hasher.layer(0);
  const EngramLayerAddressing& second = hasher.layer(1);
  CHECK(first.layer_id == 1);
  CHECK(second.layer_id == 14);
  CHECK(first.multipliers == std::vector<int64_t>{76632096046245, 4839876093313, 35959672319349, 73987337458391});
  CHECK(second.multipliers == std::vector<int64_t>{67716810739261, 51510806800915, 30921347202721, 82619226485591});
  CHECK(first.rows == 384006168);
  CHECK(second.rows == 384016682);
  REQUIRE(first.primes.size() == 24);
  CHECK(first.primes[0] == 16000057);
  CHECK(first.primes[1] == 16000079);
  CHECK(first.primes[2] == 16000081);
  CHECK(first.offsets[0] == 0);
  CHECK(first.offsets[1] == 16000057);
  CHECK(first.offsets[23] + first.primes[23] == first.rows);
  CHECK(second.primes[0] > first.primes[23]);  // primes are never reused across layers
}

TEST_CASE("a hand-computed position of the release config") {
  const EngramHasher hasher = hasher_for(load_model_config(test_data("deepseek-v41-flash.config.json"))->text_config);
  const EngramLayerAddressing& layer = hasher.layer(0);
  const std::vector<int32_t> lookback = {7, 11, 13, 17};
  std::vector<int64_t> rows(24);
  hasher.hash(0, lookback, rows);
  const int64_t h1 = (7 * layer.multipliers[0]) ^ (11 * layer.multipliers[1]);
  const int64_t h2 = h1 ^ (13 * layer.multipliers[2]);
  const int64_t h3 = h2 ^ (17 * layer.multipliers[3]);
  for (int k = 0; k < 8; ++k) {
    CHECK(rows[k] == h1 % layer.primes[k] + layer.offsets[k]);
    CHECK(rows[8 + k] == h2 % layer.primes[8 + k] + layer.offsets[8 + k]);
    CHECK(rows[16 + k] == h3 % layer.primes[16 + k] + layer.offsets[16 + k]);
    CHECK(rows[16 + k] >= layer.offsets[16 + k]);
    CHECK(rows[16 + k] < layer.offsets[16 + k] + layer.primes[16 + k]);
  }
}

TEST_CASE("DEAD look-back entries pad from the first DEAD shift on") {
  const EngramHasher hasher = hasher_for(preset_text("tiny"));
  const int32_t pad = hasher.pad_id();
  const auto rows_of = [&](std::vector<int32_t> lookback) {
    std::vector<int64_t> rows(static_cast<size_t>(hasher.rows_per_position()));
    hasher.hash(1, lookback, rows);
    return rows;
  };
  // A DEAD entry hides everything older than it, even live ids.
  CHECK(rows_of({5, 6, kEngramDead, 8}) == rows_of({5, 6, pad, pad}));
  CHECK(rows_of({5, kEngramDead, 7, 8}) == rows_of({5, pad, pad, pad}));
  CHECK(rows_of({kEngramDead, 6, 7, 8}) == rows_of({pad, pad, pad, pad}));
  // The first positions of a sequence: everything before the start is DEAD.
  const std::vector<int32_t> ids = {100, 200, 300};
  const std::vector<int64_t> all = hash_sequence(hasher, ids);
  const auto c = static_cast<size_t>(hasher.rows_per_position());
  const auto per_position = static_cast<size_t>(hasher.n_layers()) * c;
  const int32_t x0 = real_engram_map().compressed_id(100);
  const int32_t x1 = real_engram_map().compressed_id(200);
  const std::vector<int64_t> second_position(all.begin() + static_cast<std::ptrdiff_t>(per_position + c),
                                             all.begin() + static_cast<std::ptrdiff_t>(per_position + 2 * c));
  CHECK(second_position == rows_of({x1, x0, pad, pad}));
  // A DEAD token (an image position) in a chunk: its own window is all pad, and later windows stop at it.
  std::vector<int64_t> masked(3 * per_position);
  EngramLookback state(hasher.max_ngram_size());
  const std::vector<uint8_t> dead = {0, 1, 0};
  hasher.hash_tokens(real_engram_map(), ids, state, masked, dead);
  const auto layer1 = [&](size_t position) {
    return std::vector<int64_t>(masked.begin() + static_cast<std::ptrdiff_t>(position * per_position + c),
                                masked.begin() + static_cast<std::ptrdiff_t>(position * per_position + 2 * c));
  };
  CHECK(layer1(1) == rows_of({pad, pad, pad, pad}));
  CHECK(layer1(2) == rows_of({real_engram_map().compressed_id(300), pad, pad, pad}));
  CHECK(state.history()[1] == kEngramDead);
}

// tests/data/golden/engram-dead-mask.safetensors (scripts/gen_engram_golden.py): the reference's rows
// for a prompt with DEAD positions (attention_mask 0) at the start, inside, in a run and at the end.
TEST_CASE("DEAD positions hash as the reference's masked ones, whole and token by token") {
  const EngramHasher hasher = hasher_for(preset_text("tiny"));
  auto golden = SafetensorsFile::open(test_data("golden/engram-dead-mask.safetensors"));
  INFO(golden.status().to_string());
  REQUIRE(golden.ok());
  const SafetensorsEntry* ids_entry = find(*golden, "ids");
  const SafetensorsEntry* dead_entry = find(*golden, "dead");
  const SafetensorsEntry* hash_entry = find(*golden, "engram_hash");
  REQUIRE(ids_entry != nullptr);
  REQUIRE(dead_entry != nullptr);
  REQUIRE(hash_entry != nullptr);
  const std::vector<int32_t> ids = read_i32(*golden, *ids_entry);
  REQUIRE(dead_entry->dtype == DType::kU8);
  REQUIRE(dead_entry->size == ids.size());
  std::vector<uint8_t> dead(ids.size());
  std::memcpy(dead.data(), golden->data(*dead_entry).data(), dead.size());
  const std::vector<int32_t> expected = read_i32(*golden, *hash_entry);
  const auto per_position = static_cast<size_t>(hasher.n_layers() * hasher.rows_per_position());
  REQUIRE(expected.size() == ids.size() * per_position);
  const std::vector<int64_t> expected64(expected.begin(), expected.end());

  std::vector<int64_t> whole(expected.size());
  EngramLookback state(hasher.max_ngram_size());
  hasher.hash_tokens(real_engram_map(), ids, state, whole, dead);
  CHECK(whole == expected64);

  // A prefill of 30 tokens, then one decode step at a time.
  std::vector<int64_t> stepped(expected.size());
  EngramLookback carried(hasher.max_ngram_size());
  const std::span<const int32_t> all_ids(ids);
  const std::span<const uint8_t> all_dead(dead);
  hasher.hash_tokens(real_engram_map(), all_ids.first(30), carried, std::span(stepped).first(30 * per_position),
                     all_dead.first(30));
  for (std::size_t t = 30; t < ids.size(); ++t) {
    hasher.hash_tokens(real_engram_map(), all_ids.subspan(t, 1), carried,
                       std::span(stepped).subspan(t * per_position, per_position), all_dead.subspan(t, 1));
  }
  CHECK(stepped == expected64);
}

TEST_CASE("the look-back's bytes round-trip and are validated") {
  EngramLookback state(4);
  CHECK(state.history().size() == 3);
  for (int32_t id : state.history()) CHECK(id == kEngramDead);
  state.push(5);
  state.push(kEngramDead);
  state.push(99091);
  CHECK(std::vector<int32_t>(state.history().begin(), state.history().end()) ==
        std::vector<int32_t>{99091, kEngramDead, 5});
  std::vector<int32_t> window(4);
  state.window(42, window);
  CHECK(window == std::vector<int32_t>{42, 99091, kEngramDead, 5});

  const std::string bytes = state.serialize();
  CHECK(bytes.size() == 8 + 3 * 4);
  auto restored = EngramLookback::restore(bytes, 4, 99092);
  REQUIRE(restored.ok());
  CHECK(*restored == state);

  CHECK(EngramLookback::restore(bytes, 3, 99092).status().code() == ErrorCode::kCorrupt);  // count
  CHECK(EngramLookback::restore(bytes, 4, 99091).status().code() == ErrorCode::kCorrupt);  // id range
  CHECK(EngramLookback::restore(bytes.substr(0, 19), 4, 99092).status().code() == ErrorCode::kCorrupt);
  CHECK(EngramLookback::restore(bytes + "x", 4, 99092).status().code() == ErrorCode::kCorrupt);
  CHECK(EngramLookback::restore("", 4, 99092).status().code() == ErrorCode::kCorrupt);
  std::string other_format = bytes;
  other_format[0] = 2;
  CHECK(EngramLookback::restore(other_format, 4, 99092).status().code() == ErrorCode::kCorrupt);

  state.reset();
  CHECK(state == EngramLookback(4));
}

TEST_CASE("hasher creation refuses inconsistent configs") {
  TextConfig config = preset_text("tiny");
  CHECK(EngramHasher::create(config, 0).ok());
  TextConfig wrong_rows = config;
  wrong_rows.engram_num_embeddings[1] += 1;
  CHECK_THAT(EngramHasher::create(wrong_rows, 0).status().message(), Catch::Contains("engram_num_embeddings[1]"));
  TextConfig no_layers = config;
  no_layers.engram_layer_ids.clear();
  no_layers.engram_num_embeddings.clear();
  CHECK(EngramHasher::create(no_layers, 0).status().code() == ErrorCode::kInvalidArgument);
  CHECK(EngramHasher::create(config, 99092).status().code() == ErrorCode::kInvalidArgument);  // pad out of range
  TextConfig other_vocab = config;
  other_vocab.engram_compressed_vocab_size = 1234;
  CHECK(EngramHasher::create(other_vocab, 0).status().code() == ErrorCode::kNotFound);  // no multipliers
  CHECK(EngramHasher::create(other_vocab, real_engram_map()).status().code() == ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace hippo::engine
