// Test fixture for the end-to-end CLI tests (tests/e2e/test_session_cli.py): writes a session with
// a short conversation log and snapshots of a deterministic state through the real store API, the
// way the agents layer will. Usage: make_session_db DB SESSION_ID N_TOKENS [N_SNAPSHOTS]
#include "storage/store.h"
#include "tests/storage/test_state.h"

#include <iostream>
#include <string>

using namespace hippo::storage;

namespace {

int fail(const hippo::Status& status) {
  std::cerr << "make_session_db: " << status.to_string() << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || argc > 5) {
    std::cerr << "usage: make_session_db DB SESSION_ID N_TOKENS [N_SNAPSHOTS]\n";
    return 2;
  }
  const std::string db = argv[1], id = argv[2];
  const std::int64_t n_tokens = std::stoll(argv[3]);
  const int n_snapshots = argc == 5 ? std::stoi(argv[4]) : 1;
  auto store = SessionStore::open(db);
  if (!store.ok()) return fail(store.status());
  auto session = (*store)->create_session({id, std::nullopt, std::string(testing::kFingerprint)});
  if (!session.ok()) return fail(session.status());
  for (const MessageRecord& m : {MessageRecord{0, "user", "Read the repository and fix the bug.", "", 0, 9, 0, {}},
                                 MessageRecord{0, "assistant", "",
                                               "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"read\">{\"path\": "
                                               "\"a.c\"}</｜DSML｜invoke>\n</｜DSML｜function_calls>",
                                               9, 30, 0, {}}}) {
    auto seq = (*store)->append_message(id, m);
    if (!seq.ok()) return fail(seq.status());
  }
  // Snapshots at n_tokens / n_snapshots, 2 x that, ..., n_tokens: incremental, like a growing agent.
  for (int k = 1; k <= n_snapshots; ++k) {
    testing::TestState state(testing::default_shapes(), n_tokens * k / n_snapshots);
    auto written = (*store)->write_snapshot(state.request(id));
    if (!written.ok()) return fail(written.status());
  }
  return 0;
}
