// The agent runtime's test fixture: the tiny checkpoint that `model init` writes, the real tokenizer,
// a runtime on a real SQLite file, and the exact reference (the log's ids prefilled directly).
#pragma once

#include "agents/runtime.h"
#include "engine/model/model.h"
#include "engine/tokenizer/tokenizer.h"
#include "storage/store.h"
#include "tests/engine/test_paths.h"

#include <catch2/catch.hpp>

#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace hippo::agents::testing {

using engine::testing::TempDir;

struct Fixture {
  Fixture() {
    static TempDir dir;
    static const std::string path = engine::testing::init_preset(dir, "tiny", false, 1, "tiny");
    model_dir = path;
  }
  std::string model_dir;
};

inline engine::Model& model() {
  static std::unique_ptr<engine::Model> m = [] {
    engine::ModelOptions options;
    options.n_threads = 2;
    auto loaded = engine::Model::load(Fixture().model_dir, options);
    REQUIRE(loaded.ok());
    return std::move(loaded.value());
  }();
  return *m;
}

inline const tokenizer::Tokenizer& tok() {
  static tokenizer::Tokenizer t = [] {
    auto loaded = tokenizer::Tokenizer::load(std::filesystem::path(Fixture().model_dir) / "tokenizer.json");
    REQUIRE(loaded.ok());
    return std::move(loaded.value());
  }();
  return t;
}

// Collects a response's events; wait() returns once the last one arrived.
struct Collector {
  std::mutex mutex;
  std::condition_variable done_cv;
  std::vector<ResponseEvent> events;
  bool done = false;

  EventSink sink() {
    return [this](const ResponseEvent& e) {
      std::lock_guard lock(mutex);
      events.push_back(e);
      if (e.kind == ResponseEvent::Kind::kCompleted || e.kind == ResponseEvent::Kind::kFailed) {
        done = true;
        done_cv.notify_all();
      }
    };
  }
  const ResponseEvent& wait() {
    std::unique_lock lock(mutex);
    done_cv.wait(lock, [&] { return done; });
    return events.back();
  }
  std::string text() {
    std::lock_guard lock(mutex);
    std::string out;
    for (const ResponseEvent& e : events)
      if (e.kind == ResponseEvent::Kind::kTextDelta || e.kind == ResponseEvent::Kind::kReasoningDelta) out += e.text;
    return out;
  }
};

inline std::unique_ptr<AgentRuntime> open_runtime(const std::string& db, RuntimeOptions options = {}) {
  options.db_path = db;
  auto runtime = AgentRuntime::open(model(), tok(), options);
  INFO(runtime.status().to_string());
  REQUIRE(runtime.ok());
  return std::move(runtime.value());
}

inline ResponseOptions greedy(int64_t max_tokens) {
  ResponseOptions o;
  o.max_output_tokens = max_tokens;
  return o;
}

// One user turn and its response, waited for.
inline ResponseEvent turn(AgentRuntime& rt, const std::string& id, const std::string& text, int64_t max_tokens = 6,
                   std::string* output = nullptr) {
  REQUIRE(rt.append_input(id, {{InputItem::Kind::kUserMessage, text, ""}}).ok());
  Collector c;
  const Status created = rt.create_response(id, greedy(max_tokens), c.sink());
  INFO(created.to_string());
  REQUIRE(created.ok());
  ResponseEvent last = c.wait();
  if (output != nullptr) *output = c.text();
  return last;
}

// The logits of all of the session's logged ids, prefilled directly through the engine: the exact reference for
// whatever the runtime did (swap-outs, batches, restarts, rebuilds).
inline std::vector<float> direct_logits(const std::string& db, const std::string& id) {
  auto store = storage::SessionStore::open(db);
  REQUIRE(store.ok());
  auto log = (*store)->list_messages(id);
  REQUIRE(log.ok());
  std::vector<int32_t> ids;
  for (const auto& row : *log) ids.insert(ids.end(), row.token_ids.begin(), row.token_ids.end());
  REQUIRE(!ids.empty());
  engine::SessionState state = model().new_session();
  REQUIRE(model().prefill(state, ids).ok());
  return state.next_logits();
}

inline void check_exact(AgentRuntime& rt, const std::string& db, const std::string& id) {
  auto logits = rt.next_logits(id);
  REQUIRE(logits.ok());
  CHECK(rt.session(id)->pending_tokens == 0);
  CHECK(*logits == direct_logits(db, id));
}

}  // namespace hippo::agents::testing
