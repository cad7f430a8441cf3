// The forward pass's exact invariants on the tiny preset (bit-identical, not within a tolerance):
// chunked prefill at every split equals one-shot, decode after prefill equals one-shot, a batch of
// sessions equals each alone, serialise -> restore -> continue equals uninterrupted, the
// encoder/decoder plan equals running every layer, plain and quantised checkpoints agree.
#include "engine/model/model.h"
#include "tests/engine/snapshot_streams.h"
#include "tests/engine/test_paths.h"
#include "tests/engine/tiny_model.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <numeric>

namespace hippo::engine {
namespace {

using testing::same_bits;
using testing::TempDir;
using testing::tokens;

// The plain tiny checkpoint (seed 1), written and loaded once per test process (writing it takes a
// while); its quantised twin is tiny_model.h's tiny_model().
Model& plain_tiny() {
  static TempDir dir;
  static std::unique_ptr<Model> model;
  if (!model) {
    ModelOptions options;
    options.n_threads = 2;
    auto loaded = Model::load(testing::init_preset(dir, "tiny", false, 1, "plain"), options);
    INFO(loaded.status().to_string());
    REQUIRE(loaded.ok());
    model = std::move(loaded.value());
  }
  return *model;
}

ForwardRequest request(SessionState* state, std::span<const int32_t> tokens) {
  ForwardRequest r;
  r.state = state;
  r.tokens = tokens;
  return r;
}

PrefillOptions prefill_options(int64_t chunk, bool plan, PrefillProgress progress = {}) {
  PrefillOptions o;
  o.chunk_tokens = chunk;
  o.encoder_decoder_plan = plan;
  o.progress = std::move(progress);
  return o;
}

std::vector<float> row(const std::vector<float>& all, int64_t i, int64_t vocab) {
  return {all.begin() + i * vocab, all.begin() + (i + 1) * vocab};
}

TEST_CASE("one-shot prefill gives finite logits at every position", "[model]") {
  Model& model = plain_tiny();
  SessionState state = model.new_session();
  const auto ids = tokens(300);
  std::vector<float> logits;
  REQUIRE(model.forward(state, ids, &logits).ok());
  const int64_t vocab = model.text().vocab_size;
  REQUIRE(logits.size() == ids.size() * static_cast<size_t>(vocab));
  for (float x : logits) REQUIRE(std::isfinite(x));
  CHECK(state.n_tokens() == 300);
  CHECK(same_bits(state.next_logits(), row(logits, 299, vocab)));
}

TEST_CASE("chunked prefill equals one-shot at every split point", "[model]") {
  Model& model = plain_tiny();
  const auto ids = tokens(40);
  SessionState whole = model.new_session();
  std::vector<float> expected;
  REQUIRE(model.forward(whole, ids, &expected).ok());
  for (size_t split = 1; split < ids.size(); ++split) {
    SessionState chunked = model.new_session();
    std::vector<float> first, second;
    REQUIRE(model.forward(chunked, std::span(ids).first(split), &first).ok());
    REQUIRE(model.forward(chunked, std::span(ids).subspan(split), &second).ok());
    first.insert(first.end(), second.begin(), second.end());
    INFO("split " << split);
    CHECK(same_bits(first, expected));
    CHECK(chunked == whole);
  }
}

TEST_CASE("decode token by token equals one-shot logits", "[model]") {
  Model& model = plain_tiny();
  const auto ids = tokens(200, 1);
  const int64_t vocab = model.text().vocab_size;
  SessionState whole = model.new_session();
  std::vector<float> expected;
  REQUIRE(model.forward(whole, ids, &expected).ok());
  SessionState stepped = model.new_session();
  REQUIRE(model.forward(stepped, std::span(ids).first(150)).ok());
  for (size_t i = 150; i < ids.size(); ++i) {
    REQUIRE(model.forward(stepped, std::span(ids).subspan(i, 1)).ok());
    INFO("position " << i);
    REQUIRE(same_bits(stepped.next_logits(), row(expected, static_cast<int64_t>(i), vocab)));
  }
  CHECK(stepped == whole);
}

TEST_CASE("a batch of sessions equals each session alone", "[model]") {
  Model& model = plain_tiny();
  std::vector<std::vector<int32_t>> prompts = {tokens(17, 2), tokens(64, 3), tokens(1, 4), tokens(130, 5)};
  std::vector<SessionState> alone, batched;
  for (const auto& p : prompts) {
    alone.push_back(model.new_session());
    REQUIRE(model.forward(alone.back(), p).ok());
    batched.push_back(model.new_session());
  }
  std::vector<ForwardRequest> batch;
  for (size_t i = 0; i < prompts.size(); ++i) batch.push_back(request(&batched[i], prompts[i]));
  REQUIRE(model.forward(batch).ok());
  for (size_t i = 0; i < prompts.size(); ++i) CHECK(batched[i] == alone[i]);
  // Then a decode step for all of them together.
  const std::vector<int32_t> next = {5, 6, 7, 8};
  batch.clear();
  for (size_t i = 0; i < prompts.size(); ++i) {
    batch.push_back(request(&batched[i], std::span(next).subspan(i, 1)));
    REQUIRE(model.forward(alone[i], std::span(next).subspan(i, 1)).ok());
  }
  REQUIRE(model.forward(batch).ok());
  for (size_t i = 0; i < prompts.size(); ++i) CHECK(batched[i] == alone[i]);
}

TEST_CASE("serialise, restore and continue equals uninterrupted", "[model]") {
  Model& model = plain_tiny();
  const auto ids = tokens(180, 6);
  SessionState uninterrupted = model.new_session();
  REQUIRE(model.forward(uninterrupted, ids).ok());

  SessionState first = model.new_session();
  REQUIRE(model.forward(first, std::span(ids).first(91)).ok());
  const std::vector<std::byte> frontier = first.frontier();
  std::vector<StateStreamBuffer> streams = testing::snapshot_streams(model.text(), first);
  // The compressed-KV and index-key buffers become the state's own: no second copy.
  const std::uint8_t* first_kv = streams[0].bytes.data();
  REQUIRE(streams[0].name.starts_with("kv.layer"));
  auto restored = SessionState::restore(model.text(), frontier, streams);
  INFO(restored.status().to_string());
  REQUIRE(restored.ok());
  CHECK(restored.value() == first);
  const std::vector<StateStreamBuffer> kept = streams;  // copies, for the damaged cases below
  CHECK(reinterpret_cast<const std::uint8_t*>(restored.value().streams()[0].bytes.data()) != first_kv);
  auto moved = SessionState::restore(model.text(), frontier, std::move(streams));
  REQUIRE(moved.ok());
  CHECK(reinterpret_cast<const std::uint8_t*>(moved.value().streams()[0].bytes.data()) == first_kv);
  streams = kept;
  REQUIRE(model.forward(restored.value(), std::span(ids).subspan(91)).ok());
  CHECK(restored.value() == uninterrupted);

  SECTION("a damaged frontier or stream is an error") {
    std::vector<std::byte> truncated(frontier.begin(), frontier.end() - 5);
    CHECK_FALSE(SessionState::restore(model.text(), truncated, streams).ok());
    std::vector<StateStreamBuffer> short_streams = streams;
    short_streams[0].bytes.pop_back();
    CHECK_FALSE(SessionState::restore(model.text(), frontier, short_streams).ok());
    std::vector<std::byte> bad_magic = frontier;
    bad_magic[0] = std::byte{0};
    CHECK_FALSE(SessionState::restore(model.text(), bad_magic, streams).ok());
  }
}

TEST_CASE("a state restored into stream_buffer()s grows without moving its streams", "[model]") {
  Model& model = plain_tiny();
  const auto ids = tokens(120, 8);
  SessionState first = model.new_session();
  REQUIRE(model.forward(first, std::span(ids).first(60)).ok());
  std::vector<StateStreamBuffer> streams = testing::snapshot_streams(model.text(), first);
  for (size_t i = 0; i < streams.size(); ++i) REQUIRE(streams[i].bytes.size() == first.streams()[i].bytes.size());
  auto restored = SessionState::restore(model.text(), first.frontier(), std::move(streams));
  REQUIRE(restored.ok());
  // Where the compressed-KV and index-key streams live.
  auto addresses = [](const SessionState& state) {
    std::vector<const std::byte*> out;
    for (const StateStream& s : state.streams()) {
      if (s.name != "token_ids") out.push_back(s.bytes.data());
    }
    return out;
  };
  const std::vector<const std::byte*> before = addresses(restored.value());
  REQUIRE(model.forward(restored.value(), std::span(ids).subspan(60)).ok());
  CHECK(addresses(restored.value()) == before);
  SessionState uninterrupted = model.new_session();
  REQUIRE(model.forward(uninterrupted, ids).ok());
  CHECK(restored.value() == uninterrupted);
}

TEST_CASE("the encoder/decoder prefill plan equals running every layer", "[model]") {
  Model& model = plain_tiny();
  // tiny: candidate source 7 of 12 layers, window 128: the tail is 128 + 4 * 127 = 636 tokens.
  const auto ids = tokens(900, 7);
  SessionState full = model.new_session();
  REQUIRE(model.prefill(full, ids, prefill_options(256, false)).ok());
  SessionState planned = model.new_session();
  std::vector<int64_t> progress;
  REQUIRE(model.prefill(planned, ids, prefill_options(256, true, [&](int64_t done, int64_t) { progress.push_back(done); }))
              .ok());
  CHECK(planned == full);
  CHECK(progress.back() == 900);
  CHECK(progress.size() >= 4);
  // And it keeps going identically.
  const std::vector<int32_t> next = {42};
  REQUIRE(model.forward(full, next).ok());
  REQUIRE(model.forward(planned, next).ok());
  CHECK(planned == full);
}

TEST_CASE("plain and quantised checkpoints of one seed compute the same model", "[model]") {
  Model& plain = plain_tiny();
  Model& quant = testing::tiny_model();
  const auto ids = tokens(150, 8);
  SessionState a = plain.new_session(), b = quant.new_session();
  REQUIRE(plain.forward(a, ids).ok());
  REQUIRE(quant.forward(b, ids).ok());
  CHECK(a == b);
}

TEST_CASE("a checkpoint without its tokenizer is a clear error at load", "[model]") {
  TempDir dir;
  const std::string model_dir = testing::init_preset(dir, "tiny", false, 2);
  std::filesystem::remove(std::filesystem::path(model_dir) / "tokenizer.json");
  auto loaded = Model::load(model_dir);
  REQUIRE_FALSE(loaded.ok());
  CHECK_THAT(loaded.status().message(), Catch::Contains("tokenizer.json"));
}

TEST_CASE("bad requests are errors, not crashes", "[model]") {
  Model& model = plain_tiny();
  SessionState state = model.new_session();
  const std::vector<int32_t> out_of_range = {1, static_cast<int32_t>(model.text().vocab_size)};
  CHECK(model.forward(state, out_of_range).code() == ErrorCode::kInvalidArgument);
  CHECK(model.forward(state, std::span<const int32_t>()).code() == ErrorCode::kInvalidArgument);
  CHECK(state.n_tokens() == 0);
  std::vector<ForwardRequest> twice = {request(&state, std::span(out_of_range).first(1)),
                                       request(&state, std::span(out_of_range).first(1))};
  CHECK(model.forward(twice).code() == ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace hippo::engine
