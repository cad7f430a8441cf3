// `hippo bench agents`: the agent runtime on a real checkpoint and a real SQLite file (issue #6):
//   batching     aggregate decode tokens/s with 1, 8 and 64 concurrent sessions
//   latency      inter-token latency of decoding sessions, alone and while another session
//                prefills a long prompt (p50, p99)
//   resume       time to first token of a swapped-out session with a long context, against
//                prefilling the same context
//   idle         resident memory per idle, swapped-out session, over many sessions
//   swap         inter-token latency of decoding sessions, alone, while the memory manager swaps out
//                an idle session of about 1M tokens, and while it is read back (p50, p99)
#include "agents/agent_session.h"
#include "agents/response_job.h"
#include "agents/runtime.h"
#include "api/cli/cli.h"
#include "api/cli/process_memory.h"
#include "api/cli/synthetic_kv_state.h"
#include "engine/model/model.h"
#include "engine/tokenizer/tokenizer.h"
#include "storage/sqlite.h"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <random>
#include <set>

namespace hippo::cli {
namespace {

using agents::AgentRuntime;
using agents::InputItem;
using agents::ResponseEvent;
using Clock = std::chrono::steady_clock;

struct AgentsBenchOptions {
  std::string model_dir;
  int threads = 0;
  std::vector<int64_t> sessions = {1, 8, 64};
  int64_t decode_tokens = 64;
  int64_t repeats = 3;
  int64_t prefill_context = 32768;
  int64_t latency_decoders = 4;
  int64_t resume_context = 131072;
  int64_t idle_sessions = 10000;
  int64_t swap_context = 1'000'000;
  std::vector<std::string> sections = {"batching", "latency", "resume", "idle", "swap"};
  std::string speculative = "auto";
  bool json = false;
};

// One response's events, with the time each arrived.
struct Watch {
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<Clock::time_point> token_times;  // each text or reasoning delta
  ResponseEvent last;
  bool done = false;

  agents::EventSink sink() {
    return [this](const ResponseEvent& e) {
      std::lock_guard lock(mutex);
      if (e.kind == ResponseEvent::Kind::kTextDelta || e.kind == ResponseEvent::Kind::kReasoningDelta) {
        token_times.push_back(Clock::now());
      } else if (e.kind == ResponseEvent::Kind::kCompleted || e.kind == ResponseEvent::Kind::kFailed) {
        last = e;
        done = true;
        cv.notify_all();
      }
    };
  }
  Result<ResponseEvent> wait() {
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return done; });
    if (last.kind == ResponseEvent::Kind::kFailed) return last.error;
    return last;
  }
};

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
}

// A user message of about n tokens: numbered words, which the tokenizer keeps about one per token.
std::string text_of_tokens(const tokenizer::Tokenizer& tok, int64_t n) {
  std::string text;
  std::mt19937 rng(7);
  const char* words[] = {" river", " hippo", " agent", " memory", " token", " window", " stream", " cache"};
  while (true) {
    for (int i = 0; i < 256; ++i) text += words[rng() % 8];
    if (static_cast<int64_t>(tok.encode(text).size()) >= n - 16) break;
  }
  return text;
}

agents::ResponseOptions sampled(int64_t max_tokens, uint64_t seed) {
  agents::ResponseOptions o;
  o.max_output_tokens = max_tokens;
  o.sampling.temperature = 1.0;  // a random model would often end at once greedily; sampling keeps lengths full
  o.sampling.seed = seed;
  return o;
}

struct Bench {
  engine::Model& model;
  const tokenizer::Tokenizer& tok;
  std::filesystem::path dir;
  std::optional<engine::DraftMode> speculation;
  int db_counter = 0;

  Result<std::unique_ptr<AgentRuntime>> runtime(agents::RuntimeOptions options = {}) {
    options.db_path = (dir / fmt::format("bench-{}.db", db_counter++)).string();
    options.speculation = speculation;
    return AgentRuntime::open(model, tok, options);
  }

  Result<std::string> session_with(AgentRuntime& rt, const std::string& text) {
    HIPPO_ASSIGN_OR_RETURN(std::string id, rt.create_session({}));
    HIPPO_RETURN_IF_ERROR(rt.append_input(id, {{InputItem::Kind::kUserMessage, text, ""}}));
    return id;
  }
};

struct DecodeRate {
  double tokens_per_second = 0;
  int64_t drafted = 0, accepted = 0;  // speculative decoding's drafts
};

// Aggregate decode rate of n sessions generating at once, from the first decode step to the last
// token.
Result<DecodeRate> decode_rate(Bench& b, const AgentsBenchOptions& o, int64_t n, int64_t& largest_batch) {
  HIPPO_ASSIGN_OR_RETURN(auto rt, b.runtime());
  std::vector<std::string> ids;
  for (int64_t i = 0; i < n; ++i) {
    HIPPO_ASSIGN_OR_RETURN(std::string id, b.session_with(*rt, fmt::format("Session {} says hello.", i)));
    ids.push_back(id);
  }
  std::vector<std::unique_ptr<Watch>> watches;
  for (int64_t i = 0; i < n; ++i) {
    watches.push_back(std::make_unique<Watch>());
    HIPPO_RETURN_IF_ERROR(rt->create_response(ids[static_cast<size_t>(i)], sampled(o.decode_tokens, static_cast<uint64_t>(i)),
                                              watches.back()->sink()));
  }
  int64_t tokens = 0;
  DecodeRate rate;
  Clock::time_point first = Clock::time_point::max(), last = Clock::time_point::min();
  for (auto& w : watches) {
    HIPPO_ASSIGN_OR_RETURN(ResponseEvent done, w->wait());
    tokens += done.usage.output_tokens - 1;  // the first token ends the prefill
    rate.drafted += done.usage.drafted_tokens;
    rate.accepted += done.usage.accepted_tokens;
    const Clock::time_point end = Clock::now();
    first = std::min(first, end - std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(done.usage.decode_seconds)));
    last = std::max(last, end);
  }
  largest_batch = std::max(largest_batch, rt->stats().largest_batch);
  rate.tokens_per_second = static_cast<double>(tokens) / seconds(last - first);
  return rate;
}

// The best of `repeats` runs per session count: other work on the machine only ever slows a run
// down, and a run of one session is short (decode_tokens steps).
Result<boost::json::object> bench_batching(Bench& b, const AgentsBenchOptions& o) {
  boost::json::array rows;
  double single = 0;
  for (int64_t n : o.sessions) {
    DecodeRate best;
    int64_t largest_batch = 0;
    for (int64_t r = 0; r < o.repeats; ++r) {
      HIPPO_ASSIGN_OR_RETURN(DecodeRate rate, decode_rate(b, o, n, largest_batch));
      if (rate.tokens_per_second > best.tokens_per_second) best = rate;
    }
    if (n == o.sessions.front()) single = best.tokens_per_second;
    rows.push_back(boost::json::object{{"sessions", n}, {"decode_tokens_per_second", best.tokens_per_second},
                                       {"over_first", best.tokens_per_second / single}, {"largest_batch", largest_batch},
                                       {"drafted_tokens", best.drafted}, {"accepted_tokens", best.accepted}});
  }
  return boost::json::object{{"rows", rows}, {"decode_tokens", o.decode_tokens}, {"repeats", o.repeats},
                             {"speculative", o.speculative}};
}

// Inter-token gaps of `decoders` sessions until `until` returns true.
Result<std::vector<double>> decode_gaps(Bench& b, AgentRuntime& rt, int64_t decoders, const std::function<Status()>& load,
                                        const std::function<bool()>& until) {
  std::vector<std::string> ids;
  std::vector<std::unique_ptr<Watch>> watches;
  for (int64_t i = 0; i < decoders; ++i) {
    HIPPO_ASSIGN_OR_RETURN(std::string id, b.session_with(rt, fmt::format("Decoder {} keeps talking.", i)));
    ids.push_back(id);
    watches.push_back(std::make_unique<Watch>());
    HIPPO_RETURN_IF_ERROR(rt.create_response(id, sampled(32768, static_cast<uint64_t>(i)), watches.back()->sink()));
  }
  // Let every decoder reach decoding, then start the load and measure until it ends.
  for (;;) {
    bool all = true;
    for (auto& w : watches) {
      std::lock_guard lock(w->mutex);
      all = all && w->token_times.size() >= 4;
    }
    if (all) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const Clock::time_point start = Clock::now();
  HIPPO_RETURN_IF_ERROR(load());
  while (!until()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const Clock::time_point end = Clock::now();
  for (const std::string& id : ids) HIPPO_RETURN_IF_ERROR(rt.cancel(id));
  std::vector<double> gaps;
  for (auto& w : watches) {
    (void)w->wait();
    std::lock_guard lock(w->mutex);
    for (size_t i = 1; i < w->token_times.size(); ++i) {
      if (w->token_times[i - 1] >= start && w->token_times[i] <= end)
        gaps.push_back(seconds(w->token_times[i] - w->token_times[i - 1]));
    }
  }
  return gaps;
}

Result<boost::json::object> bench_latency(Bench& b, const AgentsBenchOptions& o) {
  HIPPO_ASSIGN_OR_RETURN(auto rt, b.runtime());
  const std::string long_text = text_of_tokens(b.tok, o.prefill_context);
  // Unloaded: the decoders alone for a fixed time.
  Clock::time_point stop_at;
  HIPPO_ASSIGN_OR_RETURN(std::vector<double> alone, decode_gaps(b, *rt, o.latency_decoders, [&] {
    stop_at = Clock::now() + std::chrono::seconds(3);
    return Status::ok_status();
  }, [&] { return Clock::now() >= stop_at; }));
  // Loaded: the same while another session prefills the long prompt (until its first token).
  Watch prefill;
  std::string prefill_id;
  HIPPO_ASSIGN_OR_RETURN(prefill_id, b.session_with(*rt, long_text));
  HIPPO_ASSIGN_OR_RETURN(std::vector<double> loaded, decode_gaps(b, *rt, o.latency_decoders, [&] {
    return rt->create_response(prefill_id, sampled(1, 0), prefill.sink());
  }, [&] {
    std::lock_guard lock(prefill.mutex);
    return prefill.done;
  }));
  HIPPO_ASSIGN_OR_RETURN(ResponseEvent done, prefill.wait());
  const double p99_alone = percentile(alone, 0.99);
  return boost::json::object{
      {"decoders", o.latency_decoders},
      {"prefill_tokens", done.usage.input_tokens},
      {"prefill_seconds", done.usage.first_token_seconds},
      {"alone_p50_ms", 1e3 * percentile(alone, 0.5)},
      {"alone_p99_ms", 1e3 * p99_alone},
      {"loaded_p50_ms", 1e3 * percentile(loaded, 0.5)},
      {"loaded_p99_ms", 1e3 * percentile(loaded, 0.99)},
      {"p99_ratio", percentile(loaded, 0.99) / p99_alone},
      {"samples_alone", alone.size()},
      {"samples_loaded", loaded.size()},
  };
}

Result<boost::json::object> bench_resume(Bench& b, const AgentsBenchOptions& o) {
  HIPPO_ASSIGN_OR_RETURN(auto rt, b.runtime());
  HIPPO_ASSIGN_OR_RETURN(std::string id, b.session_with(*rt, text_of_tokens(b.tok, o.resume_context)));
  Watch first;
  HIPPO_RETURN_IF_ERROR(rt->create_response(id, sampled(1, 0), first.sink()));
  HIPPO_ASSIGN_OR_RETURN(ResponseEvent prefilled, first.wait());
  const auto swap_start = Clock::now();
  HIPPO_RETURN_IF_ERROR(rt->swap_out(id));
  const double swap_s = seconds(Clock::now() - swap_start);
  HIPPO_RETURN_IF_ERROR(rt->append_input(id, {{InputItem::Kind::kUserMessage, "And now?", ""}}));
  Watch resumed;
  HIPPO_RETURN_IF_ERROR(rt->create_response(id, sampled(1, 0), resumed.sink()));
  HIPPO_ASSIGN_OR_RETURN(ResponseEvent done, resumed.wait());
  return boost::json::object{
      {"context_tokens", prefilled.usage.input_tokens},
      {"prefill_ttft_seconds", prefilled.usage.first_token_seconds},
      {"swap_out_seconds", swap_s},
      {"resume_ttft_seconds", done.usage.first_token_seconds},
      {"resume_cached_tokens", done.usage.cached_tokens},
      {"speedup", prefilled.usage.first_token_seconds / done.usage.first_token_seconds},
  };
}

Result<boost::json::object> bench_idle(Bench& b, const AgentsBenchOptions& o) {
  HIPPO_ASSIGN_OR_RETURN(auto rt, b.runtime());
  const int64_t rss_before = proc_status_bytes("VmRSS:"), heap_before = heap_bytes_in_use();
  for (int64_t i = 0; i < o.idle_sessions; ++i) {
    HIPPO_ASSIGN_OR_RETURN(std::string id, b.session_with(*rt, fmt::format("Idle session {} checks in.", i)));
    Watch w;
    HIPPO_RETURN_IF_ERROR(rt->create_response(id, sampled(2, static_cast<uint64_t>(i)), w.sink()));
    HIPPO_RETURN_IF_ERROR(w.wait().status());
    HIPPO_RETURN_IF_ERROR(rt->swap_out(id));
  }
  const int64_t rss_delta = proc_status_bytes("VmRSS:") - rss_before, heap_delta = heap_bytes_in_use() - heap_before;
  const agents::RuntimeStats stats = rt->stats();
  // The larger of the two: RSS misses what reuses memory freed by earlier sections, the heap misses
  // mappings outside malloc.
  return boost::json::object{
      {"sessions", o.idle_sessions},
      {"resident_sessions", stats.resident_sessions},
      {"rss_delta_bytes", rss_delta},
      {"heap_delta_bytes", heap_delta},
      {"bytes_per_session", static_cast<double>(std::max(rss_delta, heap_delta)) / static_cast<double>(o.idle_sessions)},
  };
}

// An idle session of n_tokens written straight into a new database: its log (one user message and
// its prompt, rendered as the runtime renders them) and a snapshot of a synthetic state of those
// ids (SessionState::synthetic, its streams filled from the synthetic KV of `hippo bench storage`:
// the sizes and layout of the model's state, values modelled on a real model's KV). Prefilling
// 1M tokens would take hours here; what the swap-out costs depends on the bytes only.
struct LongSession {
  std::string id;
  int64_t n_tokens = 0;
  uint64_t state_bytes = 0;
};

Result<LongSession> write_long_session(Bench& b, const std::string& db, int64_t n_tokens) {
  // Within the model's context, with room for the turns the section adds.
  n_tokens = std::min(n_tokens, b.model.text().max_position_embeddings - 4096);
  // Random words, as many as make about n_tokens (their tokens per word measured on a sample).
  std::mt19937 rng(7);
  const char* words[] = {" river", " hippo", " agent", " memory", " token", " window", " stream", " cache"};
  auto random_words = [&](int64_t count) {
    std::string out;
    for (int64_t i = 0; i < count; ++i) out += words[rng() % 8];
    return out;
  };
  const double per_word = static_cast<double>(b.tok.encode(random_words(10000)).size()) / 10000.0;
  const std::string text = random_words(static_cast<int64_t>(static_cast<double>(n_tokens - 16) / per_word));
  const agents::SessionSettings settings;
  tokenizer::ChatEncoder encoder(b.tok, agents::chat_options(settings, b.tok));
  std::vector<tokenizer::Message> messages(1);
  messages[0].role = tokenizer::Role::kUser;
  messages[0].content = text;
  HIPPO_ASSIGN_OR_RETURN(tokenizer::ChatSuffix prompt, encoder.encode_chat_suffix(messages, true));
  const auto n = static_cast<int64_t>(prompt.ids.size());
  if (n > b.model.text().max_position_embeddings)
    return make_error(ErrorCode::kInvalidArgument, "bench agents swap: {} tokens exceed the model's context of {}", n,
                      b.model.text().max_position_embeddings);

  const SyntheticKvState kv = make_synthetic_kv_state(n, 2);
  const engine::SessionState state = engine::SessionState::synthetic(b.model.text(), prompt.ids, synthetic_stream_fill(kv));

  HIPPO_ASSIGN_OR_RETURN(auto store, storage::SessionStore::open(db));
  storage::NewSession row;
  row.model_fingerprint = b.model.fingerprint();
  row.settings = agents::settings_to_json(settings);
  HIPPO_ASSIGN_OR_RETURN(storage::SessionInfo info, store->create_session(row));
  storage::MessageRecord user;
  user.role = agents::kRoleUser;
  user.content = text;
  HIPPO_RETURN_IF_ERROR(store->append_message(info.id, user).status());
  storage::MessageRecord rendered;
  rendered.role = agents::kRolePrompt;
  rendered.n_tokens = n;
  rendered.token_ids = prompt.ids;
  HIPPO_RETURN_IF_ERROR(store->append_message(info.id, rendered).status());
  HIPPO_RETURN_IF_ERROR(store->write_snapshot(agents::snapshot_request(info.id, b.model.fingerprint(), state)).status());
  return LongSession{info.id, n, state.memory_bytes()};
}

// The decoders' inter-token gaps alone, then while a new response needs the memory an idle session
// of swap_context tokens holds: the memory manager swaps that session out (off the engine thread)
// and the new response runs once it is written.
Result<boost::json::object> bench_swap(Bench& b, const AgentsBenchOptions& o) {
  const std::string db = (b.dir / "bench-swap.db").string();
  const auto written_start = Clock::now();
  HIPPO_ASSIGN_OR_RETURN(LongSession long_session, write_long_session(b, db, o.swap_context));
  const double setup_s = seconds(Clock::now() - written_start);
  // Unloaded: the decoders alone, in a runtime of their own.
  std::vector<double> alone;
  {
    HIPPO_ASSIGN_OR_RETURN(auto solo, b.runtime());
    Clock::time_point stop_at;
    HIPPO_ASSIGN_OR_RETURN(alone, decode_gaps(b, *solo, o.latency_decoders, [&] {
      stop_at = Clock::now() + std::chrono::seconds(5);
      return Status::ok_status();
    }, [&] { return Clock::now() >= stop_at; }));
  }
  // Room for the long session and the decoders' reservations (decode_gaps asks for 32,768 tokens
  // each), and half of one more: the new response fits only once the long session is out.
  const engine::TextConfig& text = b.model.text();
  const uint64_t logits = engine::SessionState::logits_bytes(text);
  const uint64_t fresh = b.model.new_session().memory_bytes() + engine::SessionState::growth_bytes(text, 0) + logits;
  const uint64_t response = fresh + engine::SessionState::growth_bytes(text, 32768 + 64) + logits;
  agents::RuntimeOptions options;
  options.db_path = db;
  options.kv_memory_bytes =
      long_session.state_bytes + static_cast<uint64_t>(o.latency_decoders) * response + response / 2;
  HIPPO_ASSIGN_OR_RETURN(auto rt, AgentRuntime::open(b.model, b.tok, options));
  // Restored, then one short turn (its state is now ahead of its snapshot), and its snapshots
  // removed behind the runtime's back: the swap-out writes the whole state, as for a session whose
  // context was computed since its last snapshot, not just the chunks past it.
  HIPPO_RETURN_IF_ERROR(rt->append_input(long_session.id, {{InputItem::Kind::kUserMessage, "One more thing.", ""}}));
  Watch turn;
  HIPPO_RETURN_IF_ERROR(rt->create_response(long_session.id, sampled(1, 0), turn.sink()));
  HIPPO_RETURN_IF_ERROR(turn.wait().status());
  {
    HIPPO_ASSIGN_OR_RETURN(storage::Db conn, storage::Db::open(db, storage::Db::Mode::kReadWrite, 5000));
    HIPPO_RETURN_IF_ERROR(conn.exec(
        fmt::format("PRAGMA foreign_keys = ON; DELETE FROM snapshots WHERE session_id = '{}'", long_session.id)));
  }
  const agents::RuntimeStats before = rt->stats();
  Watch arrival;
  std::string arrival_id;
  HIPPO_ASSIGN_OR_RETURN(arrival_id, b.session_with(*rt, "A new request arrives."));
  Clock::time_point swap_start;
  HIPPO_ASSIGN_OR_RETURN(std::vector<double> during, decode_gaps(b, *rt, o.latency_decoders, [&] {
    swap_start = Clock::now();
    return rt->create_response(arrival_id, sampled(32768, 0), arrival.sink());
  }, [&] {
    std::lock_guard lock(arrival.mutex);
    return !arrival.token_times.empty() || arrival.done;
  }));
  const double window_s = seconds(Clock::now() - swap_start);
  HIPPO_RETURN_IF_ERROR(rt->cancel(arrival_id));
  HIPPO_RETURN_IF_ERROR(arrival.wait().status());
  const agents::RuntimeStats after = rt->stats();
  if (after.swap_outs == before.swap_outs)
    return make_error(ErrorCode::kInternal, "bench agents swap: the long session was not swapped out");
  // And back: a response on the long session has it read back (off the engine thread) while
  // decoders run, until the runtime counts the resume.
  HIPPO_RETURN_IF_ERROR(rt->append_input(long_session.id, {{InputItem::Kind::kUserMessage, "Back again.", ""}}));
  Watch back;
  HIPPO_ASSIGN_OR_RETURN(std::vector<double> restoring, decode_gaps(b, *rt, o.latency_decoders, [&] {
    return rt->create_response(long_session.id, sampled(1, 0), back.sink());
  }, [&] { return rt->stats().resumes > after.resumes; }));
  const double restore_s = rt->stats().resume_seconds - after.resume_seconds;
  HIPPO_RETURN_IF_ERROR(back.wait().status());
  const double p99_alone = percentile(alone, 0.99);
  return boost::json::object{
      {"decoders", o.latency_decoders},
      {"context_tokens", long_session.n_tokens},
      {"state_bytes", long_session.state_bytes},
      {"setup_seconds", setup_s},
      {"swap_out_seconds", after.snapshot_seconds - before.snapshot_seconds},
      {"swap_out_stored_bytes", after.snapshot_bytes_written - before.snapshot_bytes_written},
      {"window_seconds", window_s},
      {"alone_p50_ms", 1e3 * percentile(alone, 0.5)},
      {"alone_p99_ms", 1e3 * p99_alone},
      {"during_p50_ms", 1e3 * percentile(during, 0.5)},
      {"during_p99_ms", 1e3 * percentile(during, 0.99)},
      {"during_max_ms", 1e3 * percentile(during, 1.0)},
      {"p99_ratio", percentile(during, 0.99) / p99_alone},
      {"samples_alone", alone.size()},
      {"samples_during", during.size()},
      {"restore_seconds", restore_s},
      {"restore_p50_ms", 1e3 * percentile(restoring, 0.5)},
      {"restore_p99_ms", 1e3 * percentile(restoring, 0.99)},
      {"restore_max_ms", 1e3 * percentile(restoring, 1.0)},
      {"restore_p99_ratio", percentile(restoring, 0.99) / p99_alone},
      {"samples_restore", restoring.size()},
  };
}

Status run_agents_bench(const AgentsBenchOptions& o, std::ostream& out) {
  engine::ModelOptions mo;
  mo.n_threads = o.threads;
  HIPPO_ASSIGN_OR_RETURN(std::unique_ptr<engine::Model> model, engine::Model::load(o.model_dir, mo));
  HIPPO_ASSIGN_OR_RETURN(tokenizer::Tokenizer tok,
                         tokenizer::Tokenizer::load(std::filesystem::path(o.model_dir) / "tokenizer.json"));
  std::error_code ec;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / fmt::format("hippo-bench-agents-{}", std::random_device{}());
  std::filesystem::create_directories(dir, ec);
  HIPPO_ASSIGN_OR_RETURN(const std::optional<engine::DraftMode> drafts, draft_mode(o.speculative, *model));
  Bench b{*model, tok, dir, drafts};
  const std::set<std::string> wanted(o.sections.begin(), o.sections.end());
  boost::json::object doc{{"model", o.model_dir}, {"threads", model->n_threads()}};
  Status status;
  auto section = [&](const std::string& name, auto fn) {
    if (!status.ok() || !wanted.count(name)) return;
    Result<boost::json::object> r = fn(b, o);
    if (!r.ok()) {
      status = r.status().with_context("bench agents " + name);
      return;
    }
    doc[name] = std::move(*r);
  };
  section("batching", bench_batching);
  section("latency", bench_latency);
  section("resume", bench_resume);
  section("idle", bench_idle);
  section("swap", bench_swap);
  std::filesystem::remove_all(dir, ec);
  HIPPO_RETURN_IF_ERROR(status);

  if (o.json) {
    out << boost::json::serialize(doc) << "\n";
    return {};
  }
  out << fmt::format("model    {} ({} threads)\n", o.model_dir, model->n_threads());
  if (auto* s = doc.if_contains("batching")) {
    out << fmt::format("\nbatching: {} sampled tokens per session, best of {} runs, --speculative {}\n"
                       "{:>9} | {:>10} {:>9} {:>6} | {:>8} {:>8}\n",
                       s->at("decode_tokens").as_int64(), s->at("repeats").as_int64(), s->at("speculative").as_string(),
                       "sessions", "decode/s", "x first", "batch", "drafted", "accepted");
    for (const auto& row : s->at("rows").as_array()) {
      out << fmt::format("{:>9} | {:>10.1f} {:>9.2f} {:>6} | {:>8} {:>8}\n", row.at("sessions").as_int64(),
                         row.at("decode_tokens_per_second").as_double(), row.at("over_first").as_double(),
                         row.at("largest_batch").as_int64(), row.at("drafted_tokens").as_int64(),
                         row.at("accepted_tokens").as_int64());
    }
  }
  if (auto* s = doc.if_contains("latency")) {
    out << fmt::format(
        "\nlatency: {} decoding sessions; inter-token p50/p99 alone {:.2f}/{:.2f} ms ({} gaps), while a {}-token "
        "prefill runs ({:.1f} s) {:.2f}/{:.2f} ms ({} gaps): p99 {:.2f}x\n",
        s->at("decoders").as_int64(), s->at("alone_p50_ms").as_double(), s->at("alone_p99_ms").as_double(),
        s->at("samples_alone").as_uint64(), s->at("prefill_tokens").as_int64(), s->at("prefill_seconds").as_double(),
        s->at("loaded_p50_ms").as_double(), s->at("loaded_p99_ms").as_double(), s->at("samples_loaded").as_uint64(),
        s->at("p99_ratio").as_double());
  }
  if (auto* s = doc.if_contains("resume")) {
    out << fmt::format("\nresume: {} context tokens; first token after prefill {:.2f} s; swap-out {:.2f} s; first token "
                       "after resume {:.3f} s ({} tokens cached): {:.1f}x faster than prefilling\n",
                       s->at("context_tokens").as_int64(), s->at("prefill_ttft_seconds").as_double(),
                       s->at("swap_out_seconds").as_double(), s->at("resume_ttft_seconds").as_double(),
                       s->at("resume_cached_tokens").as_int64(), s->at("speedup").as_double());
  }
  if (auto* s = doc.if_contains("idle")) {
    out << fmt::format("\nidle: {} swapped-out sessions ({} resident): RSS grew {:.1f} MB, heap in use {:.1f} MB; "
                       "{:.0f} bytes per session\n",
                       s->at("sessions").as_int64(), s->at("resident_sessions").as_int64(),
                       static_cast<double>(s->at("rss_delta_bytes").as_int64()) / 1e6,
                       static_cast<double>(s->at("heap_delta_bytes").as_int64()) / 1e6, s->at("bytes_per_session").as_double());
  }
  if (auto* s = doc.if_contains("swap")) {
    out << fmt::format(
        "\nswap: {} decoding sessions; inter-token p50/p99 alone {:.2f}/{:.2f} ms ({} gaps), while an idle {}-token "
        "session ({:.0f} MB) is swapped out ({:.1f} s, {:.0f} MB written) {:.2f}/{:.2f} ms, max {:.1f} ms ({} gaps): "
        "p99 {:.2f}x\n",
        s->at("decoders").as_int64(), s->at("alone_p50_ms").as_double(), s->at("alone_p99_ms").as_double(),
        s->at("samples_alone").as_uint64(), s->at("context_tokens").as_int64(),
        static_cast<double>(s->at("state_bytes").as_uint64()) / 1e6, s->at("swap_out_seconds").as_double(),
        static_cast<double>(s->at("swap_out_stored_bytes").as_int64()) / 1e6, s->at("during_p50_ms").as_double(),
        s->at("during_p99_ms").as_double(), s->at("during_max_ms").as_double(), s->at("samples_during").as_uint64(),
        s->at("p99_ratio").as_double());
    out << fmt::format("      and while it is read back ({:.1f} s) {:.2f}/{:.2f} ms, max {:.1f} ms ({} gaps): p99 {:.2f}x\n",
                       s->at("restore_seconds").as_double(), s->at("restore_p50_ms").as_double(),
                       s->at("restore_p99_ms").as_double(), s->at("restore_max_ms").as_double(),
                       s->at("samples_restore").as_uint64(), s->at("restore_p99_ratio").as_double());
  }
  return {};
}

}  // namespace

void add_bench_agents_command(CLI::App& bench, Invocation& inv) {
  auto o = std::make_shared<AgentsBenchOptions>();
  CLI::App* cmd = bench.add_subcommand("agents", "The agent runtime: batching, latency under prefill, resume, idle memory, latency during a swap-out");
  cmd->add_option("--model", o->model_dir, "Checkpoint directory (hippo model init writes one)")->required();
  add_engine_threads_option(*cmd, o->threads);
  cmd->add_option("--sessions", o->sessions, "Concurrent sessions for the batching section")->delimiter(',')->capture_default_str();
  cmd->add_option("--decode-tokens", o->decode_tokens, "Tokens each session samples (batching)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--repeats", o->repeats, "Runs per session count; the best is reported (batching)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--prefill-context", o->prefill_context, "Prompt tokens of the prefill that runs beside decoders (latency)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--latency-decoders", o->latency_decoders, "Decoding sessions measured (latency)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--resume-context", o->resume_context, "Context tokens of the swapped-out session (resume)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--idle-sessions", o->idle_sessions, "Swapped-out sessions (idle)")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--swap-context", o->swap_context,
                  "Context tokens of the session swapped out, at most the model's context less 4,096 (swap)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--sections", o->sections, "Which sections to run")
      ->delimiter(',')
      ->check(CLI::IsMember({"batching", "latency", "resume", "idle", "swap"}))
      ->capture_default_str();
  add_speculative_option(*cmd, o->speculative);
  cmd->add_flag("--json", o->json, "One JSON object instead of a table");
  cmd->parse_complete_callback([&inv, o] { inv.action = [&inv, o] { return run_agents_bench(*o, *inv.out); }; });
}

}  // namespace hippo::cli
