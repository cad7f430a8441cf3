// tiny at a 262,144-token context (HIPPO_LONG_CONTEXT_TOKENS=1048576 for the full 1M context, less
// the 16 tokens decoded after the prompt): the prefill (encoder/decoder plan) reaches the end, the
// session's memory is what growth_bytes() promises, and a snapshot of it restores and decodes
// exactly as the uninterrupted session does; the prefill's and the decode's times go to stderr.
// Minutes on two cores (an hour at 1M), so it is [.long], in its own CTest entry outside the default
// run (docs/ARCHITECTURE.md, "Tests"); its speed is `hippo bench model --contexts 32768,262144`.
#include "engine/model/model.h"
#include "tests/engine/snapshot_streams.h"
#include "tests/engine/test_paths.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <string>

namespace hippo::engine {
namespace {

using testing::TempDir;

// Greedy tokens after the state's last one, each fed back.
std::vector<int32_t> greedy(Model& model, SessionState& state, int n) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    const std::vector<float>& logits = state.next_logits();
    const auto best = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(best);
    REQUIRE(model.forward(state, std::span(&out.back(), 1)).ok());
  }
  return out;
}

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

TEST_CASE("tiny prefills 262,144 tokens, snapshots, restores and decodes exactly", "[.long][model]") {
  TempDir dir;
  ModelOptions options;
  options.n_threads = 0;
  auto loaded = Model::load(testing::init_preset(dir, "tiny", true, 1), options);
  REQUIRE(loaded.ok());
  Model& model = **loaded;
  // At most the model's context less the 16 tokens decoded after it (a 1M prompt fills tiny's whole
  // context: nothing could follow it).
  const char* tokens_env = std::getenv("HIPPO_LONG_CONTEXT_TOKENS");
  const int64_t kTokens = std::min<int64_t>(tokens_env != nullptr ? std::stoll(tokens_env) : int64_t{1} << 18,
                                            model.text().max_position_embeddings - 16);
  std::vector<int32_t> ids(static_cast<size_t>(kTokens));
  for (int64_t i = 0; i < kTokens; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919 + (i / 4099) * 104729 + 13) % 120000);

  SessionState state = model.new_session();
  PrefillOptions prefill;
  prefill.progress = [](int64_t done, int64_t total) {
    if (done % 16384 == 0 || done == total) std::cerr << "prefill " << done << "/" << total << "\n";
  };
  const Clock::time_point prefill_start = Clock::now();
  REQUIRE(model.prefill(state, ids, prefill).ok());
  std::cerr << "prefill of " << kTokens << " tokens: " << seconds_since(prefill_start) / 60 << " minutes\n";
  REQUIRE(state.n_tokens() == kTokens);
  for (float x : state.next_logits()) REQUIRE(std::isfinite(x));
  CHECK(state.memory_bytes() <= model.new_session().memory_bytes() + SessionState::growth_bytes(model.text(), kTokens) +
                                    SessionState::logits_bytes(model.text()));

  // The snapshot's bytes, as the runtime reads them back.
  auto restored = SessionState::restore(model.text(), state.frontier(), testing::snapshot_streams(model.text(), state));
  REQUIRE(restored.ok());
  CHECK(*restored == state);

  const Clock::time_point decode_start = Clock::now();
  const std::vector<int32_t> uninterrupted = greedy(model, state, 8);
  std::cerr << "decode at " << kTokens << " tokens: " << seconds_since(decode_start) * 1000 / 8 << " ms/token\n";
  CHECK(greedy(model, *restored, 8) == uninterrupted);
  CHECK(*restored == state);
}

}  // namespace
}  // namespace hippo::engine
