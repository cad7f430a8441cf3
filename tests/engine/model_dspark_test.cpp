// DSpark on the tiny preset (three stages, block 5): a draft is a fixed function of the state and the
// anchor, changes nothing, and is the same in a batch as alone; the stage windows hold only committed
// rows (a rejected verify leaves them as if never seen, a chunked prefill as a one-shot one); greedy
// output with DSpark's drafts, or the better of both drafters, is the output without; a snapshot
// written before the stage windows existed (frontier version 1) restores, and drafting goes on.
#include "engine/model/model.h"
#include "engine/sampling/sampler.h"
#include "engine/speculative/decode_loop.h"
#include "kernels/kv_entry_formats.h"
#include "tests/engine/golden_files.h"
#include "tests/engine/snapshot_streams.h"
#include "tests/engine/tiny_model.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

namespace hippo::engine {
namespace {

using testing::tiny_model;
using testing::tokens;

DsparkDraft draft_of(Model& model, SessionState& state, int32_t anchor) {
  DsparkDraft d{&state, anchor, {}, {}};
  REQUIRE(model.draft_dspark(std::span(&d, 1)).ok());
  return d;
}

std::vector<int32_t> decode(Model& model, SessionState& state, int64_t n, const DraftSource& drafts, DecodeCounts* counts,
                            const SamplingParams& params) {
  Sampler sampler(params);
  std::vector<int32_t> out;
  auto result = decode_tokens(model, state, sampler, drafts, n, [&](int32_t t) {
    out.push_back(t);
    return true;
  });
  INFO(result.status().to_string());
  REQUIRE(result.ok());
  if (counts != nullptr) *counts = result.value();
  return out;
}

std::vector<int32_t> greedy(Model& model, SessionState& state, int64_t n, const DraftSource& drafts, DecodeCounts* counts) {
  return decode(model, state, n, drafts, counts, SamplingParams{});
}

TEST_CASE("a DSpark draft is a function of the state and the anchor and changes nothing", "[model][dspark]") {
  Model& model = tiny_model();
  REQUIRE(model.has_dspark());
  const int64_t B = model.text().dspark_block_size;
  SessionState state = model.new_session();
  REQUIRE(model.forward(state, tokens(200, 3)).ok());  // past the 128-row stage windows
  const SessionState before = state;
  const DsparkDraft a = draft_of(model, state, 4242);
  const DsparkDraft b = draft_of(model, state, 4242);
  CHECK(state == before);
  REQUIRE(a.tokens.size() == static_cast<size_t>(B));
  REQUIRE(a.confidence.size() == static_cast<size_t>(B));
  CHECK(a.tokens == b.tokens);
  CHECK(std::memcmp(a.confidence.data(), b.confidence.data(), a.confidence.size() * sizeof(float)) == 0);
  for (int32_t t : a.tokens) CHECK((t >= 0 && t < model.text().vocab_size));
  for (float c : a.confidence) CHECK((c >= 0.0f && c <= 1.0f));
  // The anchor is the block's first input: another anchor, another block.
  CHECK(draft_of(model, state, 4243).confidence != a.confidence);
  // Another context, another block (the stage windows carry it).
  SessionState other = model.new_session();
  REQUIRE(model.forward(other, tokens(200, 4)).ok());
  CHECK(draft_of(model, other, 4242).confidence != a.confidence);
}

TEST_CASE("DSpark drafts of a batch are those of each session alone", "[model][dspark]") {
  Model& model = tiny_model();
  std::vector<SessionState> states;
  for (int64_t n : {1, 60, 300}) {
    states.push_back(model.new_session());
    REQUIRE(model.forward(states.back(), tokens(n, static_cast<int32_t>(n))).ok());
  }
  std::vector<DsparkDraft> batch;
  for (size_t i = 0; i < states.size(); ++i) batch.push_back({&states[i], static_cast<int32_t>(100 + i), {}, {}});
  REQUIRE(model.draft_dspark(batch).ok());
  for (size_t i = 0; i < states.size(); ++i) {
    INFO("session " << i);
    const DsparkDraft alone = draft_of(model, states[i], static_cast<int32_t>(100 + i));
    CHECK(alone.tokens == batch[i].tokens);
    CHECK(std::memcmp(alone.confidence.data(), batch[i].confidence.data(), alone.confidence.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("the stage windows of a chunked prefill and of the encoder/decoder plan are those of a one-shot one",
          "[model][dspark]") {
  Model& model = tiny_model();
  const auto ids = tokens(700, 9);
  SessionState one_shot = model.new_session();
  REQUIRE(model.forward(one_shot, ids).ok());
  SessionState chunked = model.new_session();
  for (size_t i = 0; i < ids.size(); i += 97) {
    REQUIRE(model.forward(chunked, std::span(ids).subspan(i, std::min<size_t>(97, ids.size() - i))).ok());
  }
  SessionState planned = model.new_session();
  PrefillOptions options;
  options.chunk_tokens = 128;
  REQUIRE(model.prefill(planned, ids, options).ok());
  CHECK(chunked.frontier() == one_shot.frontier());
  CHECK(planned.frontier() == one_shot.frontier());
  CHECK(draft_of(model, planned, 7).tokens == draft_of(model, one_shot, 7).tokens);
}

TEST_CASE("greedy output with DSpark drafts, and with the better drafter per step, is the output without",
          "[model][dspark][speculative]") {
  Model& model = tiny_model();
  SessionState start = model.new_session();
  // A prompt that repeats itself, so that the context drafter has matches in auto mode.
  auto ids = tokens(90, 5);
  const auto again = tokens(90, 5);
  ids.insert(ids.end(), again.begin(), again.end());
  REQUIRE(model.forward(start, ids).ok());
  const int64_t n = 48;
  SessionState plain = start;
  const std::vector<int32_t> expected = greedy(model, plain, n, DraftSource{}, nullptr);
  // Auto mode weighs drafts by step costs; unmeasured ones (free) make it draft whatever the timing.
  const StepCosts unmeasured;
  for (DraftMode mode : {DraftMode::kDspark, DraftMode::kAuto}) {
    INFO((mode == DraftMode::kDspark ? "dspark" : "auto"));
    SessionState drafted = start;
    DecodeCounts counts;
    CHECK(greedy(model, drafted, n, session_draft_source(model, drafted, mode, unmeasured), &counts) == expected);
    CHECK(counts.drafted > 0);
    CHECK(drafted.frontier() == plain.frontier());
  }
}

TEST_CASE("DSpark runs between verified drafts that are all accepted, and the state stays plain decoding's",
          "[model][dspark][speculative]") {
  // Random weights rarely draft right, so the drafts here are an oracle's (the plain run's next
  // tokens), with DSpark run before each verify: its stage windows must follow every settle.
  Model& model = tiny_model();
  SessionState start = model.new_session();
  REQUIRE(model.forward(start, tokens(150, 8)).ok());
  const int64_t n = 30;
  SessionState plain = start;
  const std::vector<int32_t> expected = greedy(model, plain, n, DraftSource{}, nullptr);
  SessionState drafted = start;
  int64_t dspark_runs = 0;
  DraftSource oracle = [&](std::span<const int32_t> seen, int32_t last) -> Result<std::vector<int32_t>> {
    DsparkDraft block{&drafted, last, {}, {}};
    HIPPO_RETURN_IF_ERROR(model.draft_dspark(std::span(&block, 1)));
    ++dspark_runs;
    std::vector<int32_t> d;
    for (auto i = static_cast<size_t>(static_cast<int64_t>(seen.size()) - 150 + 1); i < expected.size() && d.size() < 5; ++i)
      d.push_back(expected[i]);
    return d;
  };
  DecodeCounts counts;
  CHECK(greedy(model, drafted, n, oracle, &counts) == expected);
  CHECK(counts.accepted == counts.drafted);
  CHECK(dspark_runs > 3);
  CHECK(drafted.frontier() == plain.frontier());
}

TEST_CASE("a seeded sampled output is the same with drafts as without, whoever drafts", "[model][dspark][speculative]") {
  // The verify walk draws each token as plain decoding does (verify_draft.h), so drafts change
  // neither the tokens nor the generator's state; oracle drafts make sure some are taken.
  Model& model = tiny_model();
  SessionState start = model.new_session();
  REQUIRE(model.forward(start, tokens(140, 13)).ok());
  SamplingParams params;
  params.temperature = 1.0;
  params.top_p = 0.95;
  params.seed = 5;
  const int64_t n = 40;
  SessionState plain = start;
  const std::vector<int32_t> expected = decode(model, plain, n, DraftSource{}, nullptr, params);
  auto oracle = [&](std::span<const int32_t> seen, int32_t) -> Result<std::vector<int32_t>> {
    std::vector<int32_t> d;
    for (auto i = static_cast<size_t>(static_cast<int64_t>(seen.size()) - 140 + 1); i < expected.size() && d.size() < 5; ++i)
      d.push_back(expected[i]);
    return d;
  };
  const StepCosts unmeasured;  // auto mode drafts whatever the timing (see above)
  for (int source = 0; source < 3; ++source) {
    INFO("source " << source);
    SessionState drafted = start;
    const DraftSource drafts = source == 0   ? DraftSource(oracle)
                               : source == 1 ? session_draft_source(model, drafted, DraftMode::kDspark)
                                             : session_draft_source(model, drafted, DraftMode::kAuto, unmeasured);
    DecodeCounts counts;
    CHECK(decode(model, drafted, n, drafts, &counts, params) == expected);
    CHECK(counts.drafted > 0);
    if (source == 0) CHECK(counts.accepted == counts.drafted);
    CHECK(drafted.frontier() == plain.frontier());
  }
}

// A version-2 frontier as version 1 wrote it: no stage-window count or start in the header, no
// stage windows after the trunk's rings.
std::vector<std::byte> as_version_1(const SessionState& state, const TextConfig& t) {
  std::vector<std::byte> v2 = state.frontier();
  const size_t header = 4 + 4 + 8 * 8;
  const size_t ring_bytes = static_cast<size_t>(t.sliding_window * kernels::window_entry_bytes(t.head_dim));
  std::vector<std::byte> v1(v2.begin(), v2.begin() + static_cast<std::ptrdiff_t>(header));
  const std::uint32_t version = 1;
  std::memcpy(v1.data() + 4, &version, 4);
  const size_t rings = header + 16;
  const size_t trunk = static_cast<size_t>(t.num_hidden_layers) * ring_bytes;
  const size_t stages = static_cast<size_t>(t.num_nextn_predict_layers) * ring_bytes;
  v1.insert(v1.end(), v2.begin() + static_cast<std::ptrdiff_t>(rings), v2.begin() + static_cast<std::ptrdiff_t>(rings + trunk));
  v1.insert(v1.end(), v2.begin() + static_cast<std::ptrdiff_t>(rings + trunk + stages), v2.end());
  return v1;
}

TEST_CASE("a snapshot from before the stage windows restores; DSpark drafts from the rows committed since",
          "[model][dspark][speculative]") {
  Model& model = tiny_model();
  SessionState state = model.new_session();
  REQUIRE(model.forward(state, tokens(300, 12)).ok());
  auto restored = SessionState::restore(model.text(), as_version_1(state, model.text()), testing::snapshot_streams(model.text(), state));
  INFO(restored.status().to_string());
  REQUIRE(restored.ok());
  SessionState& old = restored.value();
  CHECK(old.dspark_from() == 300);
  CHECK(old.token_ids() == state.token_ids());
  // It drafts from an empty window at first, and decodes as the current state does, with drafts.
  SessionState plain = state;
  const std::vector<int32_t> expected = greedy(model, plain, 24, DraftSource{}, nullptr);
  DecodeCounts counts;
  CHECK(greedy(model, old, 24, session_draft_source(model, old, DraftMode::kDspark), &counts) == expected);
  CHECK(counts.drafted > 0);
  // A version-2 frontier carries the start on.
  auto again = SessionState::restore(model.text(), old.frontier(), testing::snapshot_streams(model.text(), old));
  REQUIRE(again.ok());
  CHECK(again.value().dspark_from() == 300);
  CHECK(again.value() == old);
}

// The trained demo model's drafts against its torch twin (scripts/dspark_twin.py, built on the
// reference's blocks; Hugging Face has no DSpark): for each prompt and anchor position p, the state
// holds ids[:p] and the anchor is ids[p]. Both compute in fp32 with the same dequantised weights, so
// only summation order differs: the drafts must be the same tokens, the confidences (probabilities)
// within 1e-2, the tolerance of the demo model's logits (model_golden_test.cpp). Measured: 2.3e-5
// (the model shipped 2026-12-07 15:40), 1.6e-4 (12:45), 2.5e-3 (the one before), 4.1e-5 with the
// stages' random init.
TEST_CASE("the demo model's DSpark drafts match its torch twin's", "[model][dspark][golden]") {
  auto file = SafetensorsFile::open(testing::test_data("golden/demo-dspark.safetensors"));
  INFO(file.status().to_string());
  REQUIRE(file.ok());
  const boost::json::value meta = testing::golden_metadata(*file, "hippo_dspark_golden");
  testing::TempDir dir;
  const std::string model_dir = testing::copy_committed(dir, std::string(meta.at("committed").as_string()));
  for (const auto& [name, digest] : meta.at("checkpoint").as_object()) {
    INFO(name << ": not the checkpoint the golden data came from; regenerate it (tests/data/golden/README.md)");
    CHECK(testing::sha256_of_file(model_dir + "/" + std::string(name)) == std::string(digest.as_string()));
  }
  ModelOptions options;
  options.n_threads = 2;
  auto loaded = Model::load(model_dir, options);
  INFO(loaded.status().to_string());
  REQUIRE(loaded.ok());
  Model& model = *loaded.value();
  const auto B = static_cast<size_t>(model.text().dspark_block_size);
  double worst = 0;
  const auto& prompts = meta.at("prompts").as_array();
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::string key = fmt::format("p{}.", i);
    const auto ids = testing::golden_tensor<int32_t>(*file, key + "ids");
    const auto anchors = testing::golden_tensor<int32_t>(*file, key + "anchors");
    const auto drafts = testing::golden_tensor<int32_t>(*file, key + "drafts");
    const auto confidence = testing::golden_tensor<float>(*file, key + "confidence");
    for (size_t a = 0; a < anchors.size(); ++a) {
      const auto p = static_cast<size_t>(anchors[a]);
      INFO(prompts[i].at("name").as_string() << ", anchor at " << p);
      SessionState state = model.new_session();
      REQUIRE(model.forward(state, std::span(ids).first(p)).ok());
      const DsparkDraft d = draft_of(model, state, ids[p]);
      CHECK(d.tokens == std::vector<int32_t>(drafts.begin() + static_cast<std::ptrdiff_t>(a * B),
                                             drafts.begin() + static_cast<std::ptrdiff_t>((a + 1) * B)));
      for (size_t k = 0; k < B; ++k) worst = std::max(worst, static_cast<double>(std::fabs(d.confidence[k] - confidence[a * B + k])));
    }
  }
  INFO("largest confidence difference " << worst);
  CHECK(worst <= 1e-2);
}

}  // namespace
}  // namespace hippo::engine
