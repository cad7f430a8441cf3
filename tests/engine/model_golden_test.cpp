// The forward pass against golden data from Hugging Face transformers' DeepseekV41ForCausalLM
// (scripts/gen_model_golden.py; docs/reference-model.md): logits at every prompt position (on the
// stored top-K ids, the log-sum-exp and fixed probe ids) and a greedy continuation, for the plain and
// the quantised checkpoints that `model init` writes from each golden file's preset and seed (its
// shards' sha256 must equal the ones the reference read): `tiny`, the trained demo model committed in
// models/demo (trained weights reach value ranges random ones never do), and `wide` (the release's geometry
// at full width: head_dim 512 entries, top-512 saturated, 2,048 candidate blocks, reindex over
// hundreds of candidates; [.long], minutes).
//
// Tolerance (docs/engine.md, "Agreement with the reference"). Both sides compute in fp32 with the
// same dequantised weights and differ only in summation order, which moves values by ulps. Where
// such a difference lands on the other side of a QAT rounding boundary or reorders a near-tie of an
// indexer top-k, that one decision flips and the logits at that position move by up to ~0.1; torch
// run against itself (one-shot vs cached prefill) shows the same isolated flips. So, per golden file
// (Criteria below):
//   - every position of the short prompts, and at least 98% of the positions of the long one,
//     within the tolerance; the rest (flips) within the flip bound;
//   - top-1 identical at every position, except where the reference's top-1/top-2 margin is
//     smaller than twice that position's difference (a flip can explain the swap);
//   - the greedy continuation's 32 tokens identical (each step fed the reference's previous token).
#include "engine/model/model.h"
#include "engine/sampling/sampler.h"
#include "engine/weights/safetensors.h"
#include "tests/engine/golden_files.h"
#include "tests/engine/test_paths.h"

#include <fmt/format.h>
#include <boost/json/value.hpp>
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

namespace hippo::engine {
namespace {

constexpr double kMaxFlipFraction = 0.02;
constexpr int64_t kShortPrompt = 512;  // prompts up to this length allow no flip

struct Criteria {
  double tolerance = 0;   // a position within it agrees
  double flip_bound = 0;  // no position beyond it
  bool exact_greedy = true;  // else a greedy token may differ where the reference's top-2 margin allows
};
// tiny: 1e-3 (measured: 98% of positions within 1e-3, flips up to 0.14).
constexpr Criteria kTiny{1e-3, 0.25, true};
// wide sums 5,120-wide and 64 x 512-wide products, ~100x the terms of tiny's, so its summation-order
// noise is larger (measured: median 1.5e-3 before the top-512 saturates, 1e-2 after it), and the
// reference's own one-shot and cached prefills differ by up to 1.5e-2 once it saturates (the golden
// file's metadata); QAT flips reach 0.56 (docs/engine.md, "Agreement with the reference").
constexpr Criteria kWide{2e-2, 1.0, false};
// The trained demo model: its top logits are ~4x tiny's (median 14.2 against 3.3, up to 30) and its
// top-8 spread 15x (5.6 against 0.37), so summation-order noise and QAT flips are larger in absolute
// terms (measured on the model shipped 2026-12-07 15:40, its head tied to the embedding: 7.3e-4 on
// its tool-call prompt, 6.8e-3 on the multi-turn one, no flips, top-1 and greedy identical; the one
// of 12:45: 1.9e-5 and 5.8e-3, 6 flips of 1,463 positions up to 0.054; the one before: within 1e-2
// but for 17 positions, flips up to 0.34); the reference differs from itself (one-shot vs cached)
// by up to 2.7e-2.
constexpr Criteria kDemo{1e-2, 0.5, true};

struct GoldenPrompt {
  std::string name;
  std::vector<int32_t> ids;
  int64_t k = 0, j = 0;
  std::vector<int32_t> top_ids;
  std::vector<float> top_logits, lse, probe_logits;
  std::vector<int32_t> greedy_ids, greedy_top_ids;
  std::vector<float> greedy_top_logits, greedy_lse;
  std::optional<int64_t> first_unstable;  // where torch's one-shot and cached runs first differ (reported)
};

struct Golden {
  uint64_t seed = 0;
  std::string preset;     // the checkpoint `model init` writes from preset and seed, or
  std::string committed;  // a checkpoint committed in the source tree (the trained demo model)
  std::map<std::string, std::string> shard_sha256;  // of the plain checkpoint the reference read
  std::vector<GoldenPrompt> prompts;
};

Golden read_golden(const std::string& golden_file) {
  Golden out;
  const std::string path = testing::test_data(golden_file);
  auto file = SafetensorsFile::open(path);
  INFO(file.status().to_string());
  REQUIRE(file.ok());
  const boost::json::value meta = testing::golden_metadata(*file, "hippo_golden");
  // "hippo model init --preset tiny --seed 1 --format plain": the checkpoint the tests rebuild.
  const std::string made_by(meta.at("checkpoint").at("made_by").as_string());
  std::istringstream words(made_by);
  for (std::string word; words >> word;) {
    if (word == "--preset") words >> out.preset;
    if (word == "--seed") words >> out.seed;
  }
  // "models/demo (scripts/train_demo.py)": the committed checkpoint itself.
  if (made_by.starts_with("models/")) out.committed = made_by.substr(0, made_by.find(' '));
  REQUIRE((!out.preset.empty() || !out.committed.empty()));
  for (const auto& [shard, digest] : meta.at("checkpoint").at("load").at("shards").as_object()) {
    out.shard_sha256[std::string(shard)] = std::string(digest.as_string());
  }
  const auto& prompts = meta.at("prompts").as_array();
  for (size_t i = 0; i < prompts.size(); ++i) {
    GoldenPrompt p;
    const std::string key = fmt::format("p{}.", i);
    const auto& info = prompts[i].as_object();
    p.name = std::string(info.at("name").as_string());
    p.ids = testing::golden_tensor<int32_t>(*file, key + "ids");
    std::vector<int64_t> shape;
    p.top_ids = testing::golden_tensor<int32_t>(*file, key + "top_ids", &shape);
    p.k = shape[1];
    p.top_logits = testing::golden_tensor<float>(*file, key + "top_logits");
    p.lse = testing::golden_tensor<float>(*file, key + "lse");
    p.probe_logits = testing::golden_tensor<float>(*file, key + "probe_logits", &shape);
    p.j = shape[1];
    p.greedy_ids = testing::golden_tensor<int32_t>(*file, key + "greedy_ids");
    p.greedy_top_ids = testing::golden_tensor<int32_t>(*file, key + "greedy_top_ids");
    p.greedy_top_logits = testing::golden_tensor<float>(*file, key + "greedy_top_logits");
    p.greedy_lse = testing::golden_tensor<float>(*file, key + "greedy_lse");
    if (const auto* u = info.if_contains("first_unstable_position"); u != nullptr && !u->is_null()) {
      p.first_unstable = u->to_number<int64_t>();
    }
    out.prompts.push_back(std::move(p));
  }
  return out;
}

double log_sum_exp(const float* logits, int64_t n) {
  double m = -INFINITY;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, static_cast<double>(logits[i]));
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - m);
  return m + std::log(sum);
}

// max |Δ| over the stored top-K logits, the log-sum-exp and (prompt positions only) the probes.
double compare_position(const float* logits, int64_t vocab, const int32_t* top_ids, const float* top_logits,
                        int64_t k, float lse, const float* probes, int64_t j, int64_t position) {
  double worst = std::fabs(log_sum_exp(logits, vocab) - lse);
  for (int64_t i = 0; i < k; ++i) worst = std::max(worst, std::fabs(static_cast<double>(logits[top_ids[i]]) - top_logits[i]));
  for (int64_t i = 0; probes != nullptr && i < j; ++i) {
    const int64_t id = (position * 131 + i * 8081 + 7) % vocab;
    worst = std::max(worst, std::fabs(static_cast<double>(logits[id]) - probes[i]));
  }
  return worst;
}

void check_against_golden(const std::string& file, const Criteria& criteria, bool quantised) {
  const Golden g = read_golden(file);
  testing::TempDir dir;
  const std::string model_dir =
      g.committed.empty() ? testing::init_preset(dir, g.preset, quantised, g.seed) : testing::copy_committed(dir, g.committed);
  if (!quantised || !g.committed.empty()) {  // the golden file must describe exactly the weights tested
    for (const auto& [shard, digest] : g.shard_sha256) {
      INFO("shard " << shard << ": not the checkpoint the golden data came from (model init writes another, or "
                    "the committed one changed); regenerate it (tests/data/golden/README.md)");
      CHECK(testing::sha256_of_file(model_dir + "/" + shard) == digest);
    }
  }
  ModelOptions options;
  options.n_threads = 2;
  // HIPPO_TEST_BACKEND runs the comparison on another backend of the op layer (e.g. cuda on a GPU
  // machine); the default is the engine's own default.
  if (const char* backend = std::getenv("HIPPO_TEST_BACKEND"); backend != nullptr && *backend != '\0') options.backend = backend;
  auto loaded = Model::load(model_dir, options);
  INFO("backend " << options.backend << ": " << loaded.status().to_string());
  REQUIRE(loaded.ok());
  Model& model = *loaded.value();
  const int64_t vocab = model.text().vocab_size;

  for (const GoldenPrompt& p : g.prompts) {
    const int64_t s = static_cast<int64_t>(p.ids.size());
    SessionState state = model.new_session();
    std::vector<float> logits;
    REQUIRE(model.forward(state, p.ids, &logits).ok());
    double worst = 0, worst_flip = 0;
    int64_t flips = 0, explained_swaps = 0;
    for (int64_t pos = 0; pos < s; ++pos) {
      const float* row = &logits[static_cast<size_t>(pos * vocab)];
      const double d = compare_position(row, vocab, &p.top_ids[static_cast<size_t>(pos * p.k)],
                                        &p.top_logits[static_cast<size_t>(pos * p.k)], p.k, p.lse[static_cast<size_t>(pos)],
                                        &p.probe_logits[static_cast<size_t>(pos * p.j)], p.j, pos);
      INFO(p.name << " position " << pos << " max |d| " << d);
      CHECK(d <= criteria.flip_bound);
      if (d > criteria.tolerance) {
        ++flips;
        worst_flip = std::max(worst_flip, d);
      } else {
        worst = std::max(worst, d);
      }
      const float margin = p.top_logits[static_cast<size_t>(pos * p.k)] - p.top_logits[static_cast<size_t>(pos * p.k + 1)];
      if (argmax(std::span(row, static_cast<size_t>(vocab))) != p.top_ids[static_cast<size_t>(pos * p.k)]) {
        CHECK(margin <= 2 * std::max(d, criteria.tolerance));
        ++explained_swaps;
      }
    }
    // Greedy continuation, fed the reference's tokens so that one difference cannot cascade.
    double worst_decode = 0;
    for (size_t n = 0; n < p.greedy_ids.size(); ++n) {
      if (n > 0) REQUIRE(model.forward(state, std::span(&p.greedy_ids[n - 1], 1)).ok());
      const std::vector<float>& next = state.next_logits();
      const double d = compare_position(next.data(), vocab, &p.greedy_top_ids[n * static_cast<size_t>(p.k)],
                                        &p.greedy_top_logits[n * static_cast<size_t>(p.k)], p.k, p.greedy_lse[n],
                                        nullptr, 0, 0);
      INFO(p.name << " greedy step " << n << " max |d| " << d);
      if (criteria.exact_greedy || argmax(next) != p.greedy_ids[n]) {
        const float margin = p.greedy_top_logits[n * static_cast<size_t>(p.k)] - p.greedy_top_logits[n * static_cast<size_t>(p.k) + 1];
        INFO("the reference's top-2 margin " << margin);
        CHECK((criteria.exact_greedy ? argmax(next) == p.greedy_ids[n] : margin <= 2 * std::max(d, criteria.tolerance)));
      }
      CHECK(d <= criteria.flip_bound);
      if (d > criteria.tolerance) ++flips;
      worst_decode = std::max(worst_decode, d);
    }
    const int64_t compared = s + static_cast<int64_t>(p.greedy_ids.size());
    std::cout << (quantised ? "quantised " : "plain     ") << p.name << ": " << s << " positions + "
              << p.greedy_ids.size() << " greedy steps; within " << criteria.tolerance << ": max |d| " << worst << "; flips " << flips
              << " (max |d| " << worst_flip << "), top-1 swaps " << explained_swaps << ", greedy max |d| "
              << worst_decode << "; the reference's own first unstable position: "
              << (p.first_unstable ? std::to_string(*p.first_unstable) : std::string("none")) << "\n";
    INFO(p.name << ": " << flips << " flips in " << compared << " positions");
    if (s <= kShortPrompt) {
      CHECK(flips == 0);
    } else {
      CHECK(static_cast<double>(flips) <= kMaxFlipFraction * static_cast<double>(compared));
    }
  }
}

TEST_CASE("tiny plain checkpoint matches the reference's logits", "[model][golden]") {
  check_against_golden("golden/tiny-seed1.safetensors", kTiny, false);
}

TEST_CASE("tiny quantised checkpoint matches the reference's logits", "[model][golden]") {
  check_against_golden("golden/tiny-seed1.safetensors", kTiny, true);
}

TEST_CASE("the trained demo checkpoint (the default model) matches the reference's logits", "[model][golden]") {
  check_against_golden("golden/demo.safetensors", kDemo, true);
}

TEST_CASE("wide plain checkpoint matches the reference's logits", "[.long][model][golden]") {
  check_against_golden("golden/wide-seed1.safetensors", kWide, false);
}

TEST_CASE("wide quantised checkpoint matches the reference's logits", "[.long][model][golden]") {
  check_against_golden("golden/wide-seed1.safetensors", kWide, true);
}

}  // namespace
}  // namespace hippo::engine
