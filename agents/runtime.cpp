#include "agents/runtime.h"

#include "agents/agent_session.h"
#include "agents/conversation_key.h"
#include "agents/serial_thread.h"
#include "agents/session_render.h"
#include "agents/store_lane.h"
#include "base/log.h"
#include "engine/model/model.h"
#include "engine/speculative/verify_draft.h"
#include "engine/tokenizer/tokenizer.h"
#include "storage/kv_snapshot_writer.h"
#include "storage/store.h"
#include "storage/worker_pool.h"

#include <boost/json.hpp>
#include <pthread.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <thread>

namespace hippo::agents {

using Clock = std::chrono::steady_clock;
namespace json = boost::json;

namespace {

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return a == Clock::time_point{} || b == Clock::time_point{} ? 0.0 : std::chrono::duration<double>(b - a).count();
}

// The log's tool_calls column of an "assistant_input" row (agent_session.h).
std::string assistant_input_json(const InputItem& item) {
  json::array calls;
  for (const tokenizer::ToolCall& c : item.tool_calls)
    calls.push_back(json::object{{"id", c.id}, {"name", c.name}, {"arguments", c.arguments}});
  return json::serialize(json::object{{"reasoning", item.reasoning ? json::value(*item.reasoning) : json::value(nullptr)},
                                      {"calls", std::move(calls)}});
}

Result<InputItem> assistant_input_from_row(const storage::MessageRecord& row) {
  InputItem item;
  item.kind = InputItem::Kind::kAssistantMessage;
  item.content = row.content;
  boost::system::error_code ec;
  const json::value v = json::parse(row.tool_calls, ec);
  const json::object* o = ec ? nullptr : v.if_object();
  const json::value* calls = o ? o->if_contains("calls") : nullptr;
  const json::value* reasoning = o ? o->if_contains("reasoning") : nullptr;
  if (calls == nullptr || !calls->is_array() || reasoning == nullptr)
    return Status(ErrorCode::kCorrupt, fmt::format("log message {}: an assistant_input row without its calls", row.seq));
  if (reasoning->is_string()) item.reasoning = std::string(reasoning->get_string());
  for (const json::value& c : calls->get_array()) {
    const json::object* call = c.if_object();
    const json::value* id = call ? call->if_contains("id") : nullptr;
    const json::value* name = call ? call->if_contains("name") : nullptr;
    const json::value* arguments = call ? call->if_contains("arguments") : nullptr;
    if (!id || !name || !arguments || !id->is_string() || !name->is_string() || !arguments->is_string())
      return Status(ErrorCode::kCorrupt, fmt::format("log message {}: a malformed call of an assistant_input row", row.seq));
    item.tool_calls.push_back(
        {std::string(id->get_string()), std::string(name->get_string()), std::string(arguments->get_string())});
  }
  return item;
}

}  // namespace

class AgentRuntime::Engine {
 public:
  Engine(engine::Model& model, const tokenizer::Tokenizer& tokenizer, RuntimeOptions options,
         std::unique_ptr<storage::SessionStore> store, std::unique_ptr<storage::KvSnapshotWriter> writer,
         std::unique_ptr<storage::SessionStore> restore_store)
      : model_(model), tokenizer_(tokenizer), options_(std::move(options)), writer_(std::move(writer)),
        restore_store_(std::move(restore_store)),
        lane_(std::make_unique<StoreLane>(
            kStoreThreadName, std::move(store), [this](const std::string& id) { post([this, id] { log_broken(id); }); },
            [this] { note_storage_done(); })) {
    empty_state_bytes_ = model_.new_session().memory_bytes();
    if (options_.max_context_tokens <= 0 || options_.max_context_tokens > model_.text().max_position_embeddings)
      options_.max_context_tokens = model_.text().max_position_embeddings;
    restorer_.post([] { storage::lower_thread_priority(storage::kBackgroundNice); });
    thread_ = std::thread([this] { run(); });
  }

  ~Engine() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  // Runs fn on the engine thread and returns its result (never from the engine thread).
  template <typename Fn>
  auto call(Fn fn) -> decltype(fn()) {
    using R = decltype(fn());
    auto task = std::make_shared<std::packaged_task<R()>>(std::move(fn));
    std::future<R> result = task->get_future();
    {
      std::lock_guard lock(mutex_);
      if (stopped_) return R(Status(ErrorCode::kFailedPrecondition, "the agent runtime is shut down"));
      commands_.push_back([task] { (*task)(); });
    }
    wake_.notify_all();
    return result.get();
  }

  // --- operations (the caller's thread: they wait for the store lane and the engine thread) ---

  Result<std::string> create_session(const SessionSettings& settings, std::string id, std::optional<int64_t> tenant) {
    HIPPO_ASSIGN_OR_RETURN(storage::SessionInfo info, new_session_row(settings, std::move(id), tenant, storage::kSessionKindAgent));
    HIPPO_RETURN_IF_ERROR(call([&]() -> Status {
      add_session(info, settings, {});
      return Status::ok_status();
    }));
    return info.id;
  }

  // The session's row, made on the store lane; the lane holds it loaded (add_session() follows).
  Result<storage::SessionInfo> new_session_row(const SessionSettings& settings, std::string id,
                                               std::optional<int64_t> tenant, std::string_view kind) {
    storage::NewSession row;
    row.kind = std::string(kind);
    row.id = std::move(id);
    row.tenant_id = tenant;
    row.model_fingerprint = model_.fingerprint();
    row.settings = settings_to_json(settings);
    HIPPO_ASSIGN_OR_RETURN(storage::SessionInfo info,
                           lane_->post([row](storage::SessionStore& store) { return store.create_session(row); }).get());
    lane_->mark_loaded(info.id);
    return info;
  }

  // Runs fn(session) on the engine thread, the session loaded into its memory first if need be
  // (its log is read and replayed on the store lane, load()).
  template <typename Fn>
  auto with_session(const std::string& id, Fn fn) -> decltype(fn(std::declval<AgentSession&>())) {
    using R = decltype(fn(std::declval<AgentSession&>()));
    for (int attempt = 0;; ++attempt) {
      bool absent = false;
      R out = call([&]() -> R {
        auto it = sessions_.find(id);
        if (it != sessions_.end()) return fn(*it->second);
        absent = true;
        return R(Status(ErrorCode::kUnavailable, fmt::format("session {} was closed or dropped meanwhile", id)));
      });
      if (!absent || attempt == 1) return out;
      HIPPO_ASSIGN_OR_RETURN(std::optional<std::unique_ptr<AgentSession>> read,
                             lane_->load(id, [this, id](storage::SessionStore& store) { return load(store, id); }).get());
      if (!read) continue;  // loaded meanwhile
      HIPPO_RETURN_IF_ERROR(call([&]() -> Status {
        (*read)->last_used = ++clock_;
        sessions_.try_emplace(id, std::move(*read));
        return Status::ok_status();
      }));
    }
  }

  Status append_input(const std::string& id, std::vector<InputItem> items) {
    HIPPO_ASSIGN_OR_RETURN(std::shared_future<Status> logged,
                           with_session(id, [&](AgentSession& s) { return log_input(s, std::move(items)); }));
    return logged.get();
  }

  Status create_response(const std::string& id, ResponseOptions options, EventSink sink) {
    HIPPO_ASSIGN_OR_RETURN(std::shared_future<Status> logged, with_session(id, [&](AgentSession& s) {
                             return queue_response(s, std::move(options), std::move(sink));
                           }));
    return logged.get();
  }

  // One engine call per request: the session (a fork of the prefix session, or a new one) is
  // taken into memory, the items appended and the response queued together.
  Result<ConversationResponse> respond_to_conversation(const SessionSettings& settings, std::optional<int64_t> tenant,
                                                       std::vector<InputItem> items, ResponseOptions options,
                                                       EventSink sink) {
    const std::vector<std::string> keys = conversation_keys(settings, items);
    ConversationResponse out;
    std::string id;
    using Logged = std::pair<std::shared_future<Status>, std::shared_future<Status>>;  // the items', the prompt's
    Result<Logged> logged = Status(ErrorCode::kInternal, "no session");
    auto respond = [&](AgentSession& s, std::span<const InputItem> rest) -> Result<Logged> {
      HIPPO_ASSIGN_OR_RETURN(std::shared_future<Status> input, log_input(s, {rest.begin(), rest.end()}));
      HIPPO_ASSIGN_OR_RETURN(std::shared_future<Status> prompt, queue_response(s, std::move(options), std::move(sink)));
      return Logged{std::move(input), std::move(prompt)};
    };
    // A prefix leaves at least the last item new: the response answers it.
    std::optional<storage::PrefixMatch> match;
    if (items.size() > 1) {
      HIPPO_ASSIGN_OR_RETURN(match, lane_->post([&](storage::SessionStore& store) {
                                          return store.find_prefix_session(tenant, std::span(keys).first(items.size() - 1));
                                        }).get());
    }
    if (match) {
      // Storage copies the source's latest snapshot and its log past it; the fork then takes over the
      // source's conversation and model state (adopt_prefix_fork()).
      const std::string& source = match->session_id;
      Result<ForkCopy> fork = lane_->post([&](storage::SessionStore& store) -> Result<ForkCopy> {
                                     HIPPO_ASSIGN_OR_RETURN(storage::SessionInfo info, store.fork_session(source, {}));
                                     HIPPO_ASSIGN_OR_RETURN(std::optional<storage::SnapshotInfo> latest,
                                                            store.latest_snapshot(info.id));
                                     return ForkCopy{info.id, latest ? latest->n_tokens : 0};
                                   }).get();
      Status adopted = fork.status();
      if (fork.ok()) {
        lane_->mark_loaded(fork->id);
        std::optional<Status> adopting;  // unset: the source could not be loaded
        logged = with_session(source, [&](AgentSession& src) -> Result<Logged> {
          adopting = adopt_prefix_fork(src, *fork, keys[match->key_index]);
          if (!adopting->ok()) return *adopting;
          return respond(*sessions_.at(fork->id), std::span(items).subspan(match->key_index + 1));
        });
        adopted = adopting ? *adopting : logged.status();
        if (adopted.ok()) {
          id = fork->id;
          out.continued_from = source;
        } else {
          (void)close_in_store(fork->id);
        }
      }
      // A session that cannot be used (another model, a broken log, busy): start afresh.
      if (!adopted.ok()) log::warn("prefix session not continued", {{"session", source}, {"error", adopted.message()}});
    }
    if (id.empty()) {
      HIPPO_ASSIGN_OR_RETURN(storage::SessionInfo info,
                             new_session_row(settings, {}, tenant, storage::kSessionKindCompletion));
      id = info.id;
      logged = call([&]() -> Result<Logged> {
        return respond(add_session(info, settings, conversation_root_key(settings)), items);
      });
    }
    Status st = logged.status();
    if (st.ok()) st = logged->first.get();
    if (st.ok()) st = logged->second.get();
    if (!st.ok()) {
      Status closed = close(id);
      if (!closed.ok()) log::warn("session of a refused response not closed", {{"session", id}, {"error", closed.message()}});
      return st;
    }
    out.session_id = std::move(id);
    return out;
  }

  Status cancel(const std::string& id) {
    return with_session(id, [&](AgentSession& s) -> Status {
      if (s.job) finish(s, "cancelled");
      return Status::ok_status();
    });
  }

  // Snapshots the session (then_free: a swap-out) and waits until it is written and settled.
  Status snapshot(const std::string& id, bool then_free) {
    using Written = std::optional<std::shared_future<Result<storage::SnapshotWriteStats>>>;
    HIPPO_ASSIGN_OR_RETURN(Written written, with_session(id, [&](AgentSession& s) -> Result<Written> {
                             if (s.job) {
                               return Status(ErrorCode::kFailedPrecondition,
                                             fmt::format("session {}: a response is in progress", id));
                             }
                             HIPPO_RETURN_IF_ERROR(start_snapshot(s, then_free));
                             return s.snapshot ? Written(s.snapshot->written) : Written();
                           }));
    if (!written) return Status::ok_status();
    written->wait();
    HIPPO_RETURN_IF_ERROR(call([&]() -> Status {
      auto it = sessions_.find(id);
      if (it != sessions_.end()) (void)settle_snapshot(*it->second);  // its error is the future's
      return Status::ok_status();
    }));
    return written->get().status();
  }

  Status close(const std::string& id) {
    HIPPO_ASSIGN_OR_RETURN(std::shared_future<Status> closed,
                           with_session(id, [&](AgentSession& s) -> Result<std::shared_future<Status>> {
                             if (s.job) finish(s, "cancelled");
                             sessions_.erase(id);
                             return close_in_store(id);
                           }));
    return closed.get();
  }

  Result<std::string> fork(const std::string& source_id, std::string new_id) {
    // The fork is the source's latest snapshot plus the log past it (storage copies both), so the
    // snapshot must hold the state as it is now; the fork loads like any session of the database.
    Status snapshotted = snapshot(source_id, false);
    if (snapshotted.code() == ErrorCode::kFailedPrecondition) {
      return Status(ErrorCode::kFailedPrecondition,
                    fmt::format("session {}: a response is in progress; fork it once the response has ended", source_id));
    }
    HIPPO_RETURN_IF_ERROR(snapshotted);
    HIPPO_ASSIGN_OR_RETURN(storage::SessionInfo info, lane_->post([&](storage::SessionStore& store) {
                                                          return store.fork_session(source_id, new_id);
                                                        }).get());
    log::info("session forked", {{"session", info.id}, {"from", source_id}});
    return info.id;
  }

  Result<SessionView> view(const std::string& id) {
    return with_session(id, [&](AgentSession& s) -> Result<SessionView> {
      SessionView v;
      v.id = s.id;
      v.tenant = s.tenant;
      v.status = live_status(s);
      v.n_tokens = s.n_tokens();
      v.pending_tokens = static_cast<int64_t>(s.pending.size());
      v.resident_bytes = s.resident_bytes();
      v.awaiting_call_ids = s.open_calls;
      return v;
    });
  }

  Result<SessionSummary> summary(const std::string& id) {
    HIPPO_ASSIGN_OR_RETURN(storage::SessionInfo info,
                           lane_->post([&](storage::SessionStore& store) { return store.get_session(id); }).get());
    return call([&]() -> Result<SessionSummary> { return summarize(info); });
  }

  Result<std::vector<SessionSummary>> list(std::optional<int64_t> tenant, bool include_completions) {
    HIPPO_ASSIGN_OR_RETURN(std::vector<storage::SessionInfo> rows, lane_->post([&](storage::SessionStore& store) {
                                                                      return tenant ? store.list_tenant_sessions(*tenant)
                                                                                    : store.list_sessions();
                                                                    }).get());
    return call([&]() -> Result<std::vector<SessionSummary>> {
      std::vector<SessionSummary> out;
      out.reserve(rows.size());
      for (const storage::SessionInfo& row : rows) {
        if (include_completions || row.kind != storage::kSessionKindCompletion) out.push_back(summarize(row));
      }
      return out;
    });
  }

  Result<std::vector<float>> next_logits(const std::string& id) {
    return with_session(id, [&](AgentSession& s) { return next_logits_now(s); });
  }

  // Any thread.
  Result<int64_t> count_open(int64_t tenant) { return lane_->store().count_open_sessions(tenant); }
  storage::SessionStore& store() { return lane_->store(); }

  // --- operations (engine thread) ---

  // A session whose row new_session_row() made, in memory; no model state until its first
  // response needs one.
  AgentSession& add_session(const storage::SessionInfo& info, const SessionSettings& settings,
                            std::string conversation_key) {
    auto [it, added] = sessions_.try_emplace(info.id);
    if (!added) return *it->second;  // loaded by a call that guessed its id
    it->second = std::make_unique<AgentSession>(info.id, settings,
                                                tokenizer::ChatEncoder(tokenizer_, chat_options(settings, tokenizer_)));
    AgentSession& s = *it->second;
    s.tenant = info.tenant_id;
    s.completion = info.kind == storage::kSessionKindCompletion;
    s.conversation_key = std::move(conversation_key);
    s.last_used = ++clock_;
    return s;
  }

  // Appends the items to the session, checked in order before anything changes (a tool result
  // answers a call still open at its place; an assistant item's calls open there). The log rows
  // are written on the store lane: the future says when.
  Result<std::shared_future<Status>> log_input(AgentSession& s, std::vector<InputItem> items) {
    std::vector<std::string> open = s.open_calls;
    for (const InputItem& item : items) {
      if (item.kind == InputItem::Kind::kAssistantMessage) {
        open.clear();
        for (const tokenizer::ToolCall& call : item.tool_calls) open.push_back(call.id);
      } else if (item.kind == InputItem::Kind::kToolResult) {
        if (std::find(open.begin(), open.end(), item.tool_call_id) == open.end()) {
          return Status(ErrorCode::kInvalidArgument,
                        fmt::format("session {}: tool result for '{}', which is not a call awaiting a result", s.id,
                                    item.tool_call_id));
        }
        std::erase(open, item.tool_call_id);
      }
    }
    const bool unkey = s.keyed;  // no longer the conversation its key names
    s.keyed = false;
    if (!s.conversation_key.empty()) {
      for (const InputItem& item : items) s.conversation_key = extend_conversation_key(s.conversation_key, item);
    }
    std::vector<storage::MessageRecord> rows;
    for (const InputItem& item : items) {
      storage::MessageRecord row;
      row.content = item.content;
      tokenizer::Message m = input_message(item);
      switch (item.kind) {
        case InputItem::Kind::kUserMessage: row.role = kRoleUser; break;
        case InputItem::Kind::kToolResult:
          row.role = kRoleTool;
          row.tool_calls = item.tool_call_id;
          std::erase(s.open_calls, item.tool_call_id);
          break;
        case InputItem::Kind::kAssistantMessage:
          row.role = kRoleAssistantInput;
          row.tool_calls = assistant_input_json(item);
          open_assistant_calls(s, item.tool_calls);
          break;
      }
      row.first_token = log_tokens(s);
      rows.push_back(std::move(row));
      s.inputs.push_back(std::move(m));
    }
    if (s.open_calls.empty() && s.status == SessionStatus::kAwaitingTool) s.status = SessionStatus::kReady;
    s.last_used = ++clock_;
    return lane_->append(s.id, std::move(rows), unkey);
  }

  // An assistant item's calls await their results; later calls of the model are numbered past them.
  static void open_assistant_calls(AgentSession& s, const std::vector<tokenizer::ToolCall>& calls) {
    s.open_calls.clear();
    for (const tokenizer::ToolCall& call : calls) {
      s.open_calls.push_back(call.id);
      const std::string_view id = call.id;  // call_id(n) names the runtime's own calls
      if (id.starts_with("call_") && id.size() > 5 && id.size() < 15 &&
          std::all_of(id.begin() + 5, id.end(), [](char c) { return c >= '0' && c <= '9'; }))
        s.n_calls = std::max<int64_t>(s.n_calls, std::stoll(std::string(id.substr(5))) + 1);
    }
  }

  // Queues a response to the inputs appended so far; the future says when its prompt row is in the
  // log (should that fail, the response fails: log_broken()). Refused, nothing changes.
  Result<std::shared_future<Status>> queue_response(AgentSession& s, ResponseOptions options, EventSink sink) {
    const std::string& id = s.id;
    if (s.job) return Status(ErrorCode::kFailedPrecondition, fmt::format("session {}: a response is already in progress", id));
    if (!s.open_calls.empty()) {
      return Status(ErrorCode::kFailedPrecondition,
                    fmt::format("session {}: awaiting tool results for {}", id, fmt::join(s.open_calls, ", ")));
    }
    if (options.max_output_tokens <= 0 || options.max_output_tokens > options_.max_output_tokens) {
      return Status(ErrorCode::kInvalidArgument, fmt::format("max_output_tokens must be in [1, {}], not {}",
                                                             options_.max_output_tokens, options.max_output_tokens));
    }
    if (options.top_logprobs < -1 || options.top_logprobs > kMaxTopLogprobs) {
      return Status(ErrorCode::kInvalidArgument,
                    fmt::format("top_logprobs must be in [0, {}], not {}", kMaxTopLogprobs, options.top_logprobs));
    }
    if (static_cast<int64_t>(queue_.size()) >= options_.max_queued_responses) {
      return Status(ErrorCode::kResourceExhausted,
                    fmt::format("{} responses are queued already (the limit); try again later", queue_.size()));
    }
    const std::vector<tokenizer::Message> messages =
        prompt_messages(s.settings, s.n_tokens() == 0 && s.pending.empty(), s.inputs);
    // Render on a copy: a response refused for its length leaves the session as it was.
    tokenizer::ChatEncoder encoder = s.encoder;
    HIPPO_ASSIGN_OR_RETURN(tokenizer::ChatSuffix suffix, encoder.encode_chat_suffix(messages, true));
    const int64_t prompt = static_cast<int64_t>(suffix.ids.size());
    if (options.max_prompt_tokens > 0 && prompt > options.max_prompt_tokens) {
      return Status(ErrorCode::kInvalidArgument,
                    fmt::format("session {}: the new input renders to {} prompt tokens, over the limit of {} per "
                                "request",
                                id, prompt, options.max_prompt_tokens));
    }
    const int64_t context = log_tokens(s) + prompt;
    if (context + options.max_output_tokens > options_.max_context_tokens) {
      return Status(ErrorCode::kResourceExhausted,
                    fmt::format("session {}: {} context tokens + max_output_tokens {} exceed the context limit of {}", id,
                                context, options.max_output_tokens, options_.max_context_tokens));
    }
    storage::MessageRecord row;
    row.role = kRolePrompt;
    row.first_token = log_tokens(s);
    row.n_tokens = static_cast<int64_t>(suffix.ids.size());
    row.token_ids = suffix.ids;
    std::shared_future<Status> logged = lane_->append(id, {std::move(row)});
    s.encoder = std::move(encoder);
    s.inputs.clear();
    s.pending.insert(s.pending.end(), suffix.ids.begin(), suffix.ids.end());
    s.job = std::make_unique<ResponseJob>(tokenizer_, static_cast<int32_t>(model_.config().eos_token_id),
                                          output_start(chat_options(s.settings, tokenizer_)), std::move(options),
                                          std::move(sink), s.n_calls);
    s.prefill_wait_steps = 0;
    s.job->input_tokens = context;
    s.job->cached_tokens = s.n_tokens();
    s.status = SessionStatus::kRunning;
    s.last_used = ++clock_;
    queue_.push_back(&s);
    return logged;
  }

  // A prefix session's fork as storage made it: its id, and the tokens of the snapshot it copied.
  struct ForkCopy {
    std::string id;
    int64_t snapshot_tokens = 0;
  };

  // The fork that respond_to_conversation() made in storage takes over the idle source's
  // conversation and model state. The source's snapshot holds that state before the fork changes it: the fork's
  // next response waits for it to be written, as for a snapshot of its own.
  Status adopt_prefix_fork(AgentSession& source, const ForkCopy& copy, const std::string& key) {
    AgentSession* src = &source;
    const std::string source_id = source.id;
    const std::string& fork_id = copy.id;
    if (src->job) return Status(ErrorCode::kFailedPrecondition, fmt::format("session {}: a response is in progress", source_id));
    if (src->state) HIPPO_RETURN_IF_ERROR(start_snapshot(*src, false));
    auto f = std::make_unique<AgentSession>(fork_id, src->settings, src->encoder);
    f->tenant = src->tenant;
    f->completion = true;
    f->conversation_key = key;
    f->open_calls = src->open_calls;
    f->n_calls = src->n_calls;
    f->pending = src->pending;
    f->status = src->open_calls.empty() ? SessionStatus::kReady : SessionStatus::kAwaitingTool;
    f->snapshot_tokens = copy.snapshot_tokens > 0 ? copy.snapshot_tokens : -1;
    f->snapshot_time = src->snapshot_time;
    f->last_used = ++clock_;
    if (src->state) {
      f->state = std::move(src->state);
      if (src->snapshot) {
        f->snapshot = std::move(src->snapshot);
        f->snapshot->then_free = false;
        src->snapshot.reset();
        writing_.push_back(fork_id);
      }
      src->stored_tokens = f->state->n_tokens();
      store_status(source_id, SessionStatus::kSwapped);
      store_status(fork_id, SessionStatus::kReady);
    } else {
      f->stored_tokens = src->stored_tokens;
      f->expected_prefix = src->expected_prefix;
      // The copy was taken before the snapshot of the state another fork took over was written (two
      // continuations of one prefix at once): it holds an older snapshot, so the fork is rebuilt.
      f->needs_rebuild = src->needs_rebuild || copy.snapshot_tokens != src->stored_tokens;
    }
    src->last_used = ++clock_;
    lane_->post([source_id, key](storage::SessionStore& store) {  // used now: last to be closed
      Status st = store.set_prefix_key(source_id, key);
      if (!st.ok()) log::warn("prefix session not marked used", {{"session", source_id}, {"error", st.message()}});
    });
    log::debug("prefix session continued", {{"session", fork_id}, {"from", source_id}, {"tokens", f->n_tokens()}});
    sessions_[fork_id] = std::move(f);
    return Status::ok_status();
  }

  // Logits after every id the session has, resuming it and prefilling its pending ids if needed
  // (the engine thread waits for the read-back: for the exact-resume tests, not for serving).
  Result<std::vector<float>> next_logits_now(AgentSession& s) {
    if (s.job) return Status(ErrorCode::kFailedPrecondition, fmt::format("session {}: a response is in progress", s.id));
    HIPPO_RETURN_IF_ERROR(settle_snapshot(s));  // the prefill below changes the state
    HIPPO_RETURN_IF_ERROR(make_resident(s));
    if (!s.pending.empty()) {  // fed now rather than with the next input: the same state either way
      HIPPO_RETURN_IF_ERROR(model_.prefill(*s.state, s.pending));
      s.pending.clear();
    }
    return s.state->next_logits();
  }

  RuntimeStats stats() {
    RuntimeStats out = stats_;
    out.sessions = static_cast<int64_t>(sessions_.size());
    for (const auto& [id, s] : sessions_) {
      ++out.sessions_by_status[static_cast<size_t>(live_status(*s))];
      if (!s->state) continue;
      ++out.resident_sessions;
      out.resident_bytes += s->state->memory_bytes();
    }
    out.queued_responses = static_cast<int64_t>(queue_.size());
    out.running_responses = static_cast<int64_t>(running_.size());
    out.step_costs = draft_costs().estimate();
    std::error_code ec;
    for (const char* suffix : {"", "-wal"}) {
      const auto bytes = std::filesystem::file_size(options_.db_path + suffix, ec);
      if (!ec) out.database_bytes += static_cast<int64_t>(bytes);
    }
    return out;
  }

  Status shutdown() {
    for (auto& [id, s] : sessions_) {
      if (s->job) finish(*s, "cancelled");
    }
    Status first;
    for (auto& [id, s] : sessions_) {
      if (!s->state) continue;
      Status st = snapshot_waiting(*s);
      if (!st.ok() && first.ok()) first = st;
    }
    // Every row posted is written, and the responses just cancelled have had their last events.
    lane_->barrier().wait();
    std::lock_guard lock(mutex_);
    stopped_ = true;
    return first;
  }

  // Any thread.
  EngineLiveness liveness() const {
    EngineLiveness out;
    out.working = working_.load();
    if (out.working) {
      const Clock::time_point last{Clock::duration(progress_ns_.load())};
      out.seconds_since_progress = std::max(0.0, std::chrono::duration<double>(Clock::now() - last).count());
    }
    return out;
  }

 private:
  // --- the loop ---

  // Queues fn for the engine thread without waiting (the store lane's outcomes come back this way).
  void post(std::function<void()> fn) {
    {
      std::lock_guard lock(mutex_);
      commands_.push_back(std::move(fn));
    }
    wake_.notify_all();
  }

  void run() {
    pthread_setname_np(pthread_self(), kEngineThreadName);
    for (;;) {
      std::deque<std::function<void()>> commands;
      if (Clock::now() >= next_retention_) apply_retention();
      bool storage_done = false;
      {
        std::unique_lock lock(mutex_);
        // Work: commands, running responses, queued ones that may be admitted now, and written
        // snapshots or restored states to take note of (they may let queued responses in).
        auto has_work = [&] {
          return stopping_ || storage_done_ || !commands_.empty() || !running_.empty() ||
                 (!queue_.empty() && !admission_waits_);
        };
        const bool idle = !has_work();
        if (idle) working_.store(false);
        wake_.wait_until(lock, next_retention_, has_work);
        if (idle) note_progress();
        working_.store(true);
        commands.swap(commands_);
        storage_done = storage_done_;
        if (stopping_ && commands.empty()) break;
      }
      if (storage_done) {
        reap_storage();
        admission_waits_ = false;
      }
      for (auto& command : commands) {
        command();
        note_progress();
        admission_waits_ = false;  // a new request may be admitted where the waiting ones are not
      }
      if (!running_.empty() || (!queue_.empty() && !admission_waits_)) {
        step();
        note_progress();
      }
    }
    working_.store(false);
    // Anyone still waiting gets an answer.
    std::deque<std::function<void()>> left;
    {
      std::lock_guard lock(mutex_);
      stopped_ = true;
      left.swap(commands_);
    }
    for (auto& command : left) command();
  }

  // On the store lane: idle prefix sessions unused for completion_max_age are closed, then closed
  // sessions of stateless requests past the retention rule removed, and the chunks only they held.
  void apply_retention() {
    next_retention_ = Clock::now() + options_.retention_interval;
    storage::RetentionRule rule;
    rule.max_age_seconds = options_.completion_max_age.count();
    rule.max_bytes = static_cast<int64_t>(std::min<uint64_t>(options_.completion_max_bytes, INT64_MAX));
    const int64_t now =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    lane_->post([this, rule, now](storage::SessionStore& store) {
      if (rule.max_age_seconds > 0) {
        // Keyed, they are idle (a session's key goes when something is appended).
        Result<std::vector<std::string>> unused = store.prefix_sessions_unused_since(now - rule.max_age_seconds);
        if (unused.ok() && !unused->empty()) {
          for (const std::string& id : *unused) (void)mark_closed(store, id);
          post([this, ids = std::move(*unused)] { drop_closed(ids); });
        }
        Result<int64_t> responses = store.remove_responses_before(now - rule.max_age_seconds);
        if (!responses.ok()) log::warn("removing old stored responses failed", {{"error", responses.status().message()}});
      }
      Result<storage::RetentionStats> removed = store.apply_retention(storage::kSessionKindCompletion, rule, now);
      if (!removed.ok()) {
        log::warn("retention of completion sessions failed", {{"error", removed.status().message()}});
        return;
      }
      if (removed->sessions_removed == 0) return;
      Result<storage::GcStats> collected = store.gc();
      log::info("completion sessions removed under the retention rule",
                {{"sessions", removed->sessions_removed}, {"bytes", removed->bytes_removed},
                 {"chunks", collected.ok() ? collected->chunks_removed : 0}, {"kept", removed->sessions_kept}});
    });
  }

  void note_progress() { progress_ns_.store(Clock::now().time_since_epoch().count()); }

  // One scheduler step: admit what fits, then one batched forward: a token for every decoding
  // response and prefill chunks up to the step's prefill budget, the response with the least
  // prompt left first (a short request is never stuck behind a long one; the long one gets what
  // the short ones leave of each step).
  void step() {
    admit();
    std::vector<AgentSession*> decoders;
    std::vector<AgentSession*> prefilling;
    for (AgentSession* s : running_) {
      (s->job->sampled().empty() ? prefilling : decoders).push_back(s);
    }
    std::stable_sort(prefilling.begin(), prefilling.end(),
                     [](const AgentSession* a, const AgentSession* b) { return a->pending.size() < b->pending.size(); });
    std::vector<engine::ForwardRequest> batch;
    // Per decoder: its sampled token and the drafts behind it, with the logits of every row; a
    // decoder without drafts feeds its token alone.
    std::vector<Verification> verifying(decoders.size());
    draft(decoders, verifying);
    for (size_t i = 0; i < decoders.size(); ++i) {
      AgentSession& s = *decoders[i];
      Verification& v = verifying[i];
      if (v.drafts.empty()) {
        batch.push_back({&*s.state, s.pending, nullptr});
        continue;
      }
      v.tokens = s.pending;
      v.tokens.insert(v.tokens.end(), v.drafts.begin(), v.drafts.end());
      batch.push_back({&*s.state, v.tokens, &v.logits, true});
    }

    const auto started = Clock::now();
    int64_t budget = decoders.empty() ? std::max<int64_t>(1, static_cast<int64_t>(prefill_budget_))
                                      : std::max<int64_t>(1, static_cast<int64_t>(interleaved_budget_));
    const int64_t tail = model_.decoder_tail_tokens();
    std::vector<std::pair<AgentSession*, int64_t>> prefills;  // full-depth chunks in the batch
    std::vector<std::pair<AgentSession*, Status>> failed;
    bool encoder_pass = false;
    int64_t prefilled = 0;
    std::vector<AgentSession*> prefilled_sessions;
    for (AgentSession* s : prefilling) {
      if (budget <= 0) break;
      if (!decoders.empty() && s->prefill_wait_steps > 0) {
        --s->prefill_wait_steps;
        continue;
      }
      if (s->job->prefill_started == Clock::time_point{}) s->job->prefill_started = Clock::now();
      const int64_t remaining = static_cast<int64_t>(s->pending.size());
      if (remaining > tail) {  // before the decoder tail: the encoder layers only, in a pass of its own
        if (encoder_pass) continue;
        encoder_pass = true;
        prefilled_sessions.push_back(s);
        const int64_t n = std::min(budget, remaining - tail);
        Status st = model_.forward_encoder(*s->state, std::span(s->pending).first(static_cast<size_t>(n)));
        if (!st.ok()) {
          failed.emplace_back(s, st);
          continue;
        }
        s->pending.erase(s->pending.begin(), s->pending.begin() + n);
        budget -= n;
        prefilled += n;
      } else {
        const int64_t n = std::min(budget, remaining);
        prefilled_sessions.push_back(s);
        batch.push_back({&*s->state, std::span(s->pending).first(static_cast<size_t>(n)), nullptr});
        prefills.emplace_back(s, n);
        budget -= n;
        prefilled += n;
        // It decodes from the next step on: the rest of this step is sized as if it did already,
        // so that a long prompt's chunk does not hold back its first token.
        if (n == remaining) budget = std::min(budget, static_cast<int64_t>(interleaved_budget_));
      }
    }
    for (auto& [s, st] : failed) fail(*s, st);
    if (!batch.empty()) {
      stats_.largest_batch = std::max(stats_.largest_batch, static_cast<int64_t>(batch.size()));
      Status st = model_.forward(batch);
      if (!st.ok()) {
        for (AgentSession* s : decoders) fail(*s, st);
        for (auto& [s, n] : prefills) fail(*s, st);
        return;
      }
      for (size_t i = 0; i < decoders.size(); ++i) {
        decoders[i]->pending.clear();
        if (verifying[i].drafts.empty()) {
          sample(*decoders[i]);
        } else {
          verify(*decoders[i], verifying[i]);
        }
      }
      for (auto& [s, n] : prefills) {
        s->pending.erase(s->pending.begin(), s->pending.begin() + n);
        if (s->pending.empty()) sample(*s);
      }
      note_commitment();
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
    if (!decoders.empty()) pace_prefill(seconds, prefilled_sessions);
    else pace_prefill_only(seconds, prefilled);
  }

  // Sizes the chunk of a step that only prefills so that it takes about max_step_seconds: the
  // cost of a token grows with the context, and between steps the engine admits new requests and
  // answers every other call, so a step must stay short even deep into a 1M-token prompt.
  void pace_prefill_only(double seconds, int64_t tokens) {
    if (tokens <= 0 || seconds <= 0) return;
    const double target = options_.max_step_seconds.count();
    const double fitting = static_cast<double>(tokens) * target / seconds;
    prefill_budget_ = std::clamp(0.5 * prefill_budget_ + 0.5 * fitting, static_cast<double>(kMinPrefillChunk),
                                 static_cast<double>(options_.prefill_chunk_tokens));
  }

  // Sizes the prefill that rides along with decoding: a step with prefill may take about
  // kPrefillStepRatio times a decode-only step, whatever the model, the batch or the context.
  // Where even one token of a session's prefill costs more (deep in a long prompt, a step has a
  // cost that grows with the context), that session then sits out decode-only steps until
  // prefill has had no more than about half of the time, so decoding responses keep their pace.
  void pace_prefill(double seconds, const std::vector<AgentSession*>& prefilled) {
    constexpr double kPrefillStepRatio = 2.0;
    if (prefilled.empty()) {
      decode_step_seconds_ = decode_step_seconds_ == 0 ? seconds : 0.9 * decode_step_seconds_ + 0.1 * seconds;
      return;
    }
    if (decode_step_seconds_ == 0) {  // measure a decode-only step first
      for (AgentSession* s : prefilled) s->prefill_wait_steps = 1;
      return;
    }
    const double max_budget = static_cast<double>(options_.interleaved_prefill_tokens);
    if (seconds > kPrefillStepRatio * decode_step_seconds_) {
      interleaved_budget_ = std::max(1.0, interleaved_budget_ * 0.75);
      const auto wait = static_cast<int64_t>(seconds / decode_step_seconds_) - 2;
      for (AgentSession* s : prefilled) s->prefill_wait_steps = std::max<int64_t>(0, wait);
    } else {
      interleaved_budget_ = std::min(max_budget, interleaved_budget_ * 1.1 + 1.0);
    }
  }

  void sample(AgentSession& s) {
    const int32_t token = choose(s, s.state->next_logits());
    if (s.job->accept(token)) {
      finish(s, s.job->finish_reason());
    } else {
      s.pending.assign(1, token);
    }
  }

  // The response's next token from these logits: the one it must take, or the sampler's.
  int32_t choose(AgentSession& s, std::span<const float> logits) {
    const std::optional<int32_t> forced = s.job->forced_token();
    const int32_t token = forced ? *forced : s.job->sampler.next(logits);
    if (s.job->options().top_logprobs >= 0 && !forced) emit_logprob(*s.job, logits, token);
    return token;
  }

  // A decoder's sampled token and the drafts fed behind it.
  struct Verification {
    std::vector<int32_t> drafts;
    std::vector<int32_t> tokens;
    std::vector<float> logits;  // [tokens, vocab]
  };

  const engine::StepCosts& draft_costs() const {
    return options_.draft_costs ? *options_.draft_costs : model_.step_costs();
  }

  // Drafts for the decoding sessions: each session's drafter proposes its context drafts or asks
  // for DSpark, whose blocks then run for all that asked in one pass. None for a session where
  // speculation is off, the response must take a given token next, a guard pauses the drafter, or
  // the response has no room left.
  void draft(const std::vector<AgentSession*>& decoders, std::vector<Verification>& verifying) {
    if (!options_.speculation) return;
    const engine::DraftMode mode = *options_.speculation;
    const int64_t dspark_block = model_.has_dspark() ? model_.text().dspark_block_size : 0;
    std::vector<engine::DsparkDraft> blocks;
    std::vector<size_t> block_of;  // the decoder of each block
    auto room = [](const AgentSession& s) {
      return std::min(engine::kMaxDraftTokens,
                      s.job->options().max_output_tokens - static_cast<int64_t>(s.job->sampled().size()) - 1);
    };
    for (size_t i = 0; i < decoders.size(); ++i) {
      AgentSession& s = *decoders[i];
      if (s.job->forced_token()) continue;
      if (!s.drafter) {
        s.drafter = std::make_unique<engine::SessionDrafter>(mode, dspark_block, dspark_guard_, draft_costs());
      }
      verifying[i].drafts = s.drafter->propose(s.state->token_ids(), s.pending.back(), room(s));
      if (s.drafter->wants_dspark()) {
        blocks.push_back({&*s.state, s.pending.back(), {}, {}});
        block_of.push_back(i);
      }
    }
    if (blocks.empty()) return;
    if (Status st = model_.draft_dspark(blocks); !st.ok()) {
      log::warn("DSpark drafts failed; this step decodes without them", {{"error", st.message()}});
      return;
    }
    for (size_t b = 0; b < blocks.size(); ++b) {
      AgentSession& s = *decoders[block_of[b]];
      verifying[block_of[b]].drafts = s.drafter->take_dspark(blocks[b], room(s));
    }
  }

  // The verify rows walked left to right (engine/speculative/verify_draft.h): the output is what
  // decoding one token at a time gives (greedy: the same tokens; sampled: the same distribution),
  // the state keeps what was taken.
  void verify(AgentSession& s, Verification& v) {
    ResponseJob& job = *s.job;
    bool ended = false;
    int32_t last = 0;
    const engine::DraftVerdict verdict = engine::verify_draft(
        v.logits, model_.text().vocab_size, v.drafts,
        [&](std::span<const float> row) { return choose(s, row); },
        [&](int32_t token) {
          last = token;
          ended = job.accept(token);
          return !ended;
        });
    Status settled = model_.settle(*s.state, verdict.keep, v.logits);
    if (!settled.ok()) {
      fail(s, settled);
      return;
    }
    const auto drafted = static_cast<int64_t>(v.drafts.size());
    job.drafted_tokens += drafted;
    job.accepted_tokens += verdict.accepted;
    ++stats_.drafts_by_accepted[static_cast<size_t>(verdict.accepted)];
    const auto by = static_cast<size_t>(*s.drafter->last_drafter());
    stats_.drafted_by[by] += drafted;
    stats_.accepted_by[by] += verdict.accepted;
    if (ended) {
      finish(s, job.finish_reason());
    } else {
      s.pending.assign(1, last);
    }
  }

  // The sampled token's log-probability under the model and the most likely alternatives.
  void emit_logprob(const ResponseJob& job, std::span<const float> logits, int32_t token) const {
    if (token == model_.config().eos_token_id) return;
    if (const tokenizer::AddedToken* added = tokenizer_.added_vocabulary().by_id(token); added && added->special) return;
    const float max = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (float l : logits) sum += std::exp(static_cast<double>(l - max));
    const double log_total = static_cast<double>(max) + std::log(sum);
    auto entry = [&](int32_t id) {
      return TokenLogprob{tokenizer_.decode(std::span(&id, 1)), static_cast<double>(logits[static_cast<size_t>(id)]) - log_total};
    };
    ResponseEvent e;
    e.kind = ResponseEvent::Kind::kTokenLogprob;
    const TokenLogprob sampled = entry(token);
    e.text = sampled.token;
    e.logprob = sampled.logprob;
    const size_t k = std::min<size_t>(static_cast<size_t>(job.options().top_logprobs), logits.size());
    if (k > 0) {
      std::vector<int32_t> ids(logits.size());
      for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
      std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(), [&](int32_t a, int32_t b) {
        return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)] ||
               (logits[static_cast<size_t>(a)] == logits[static_cast<size_t>(b)] && a < b);
      });
      for (size_t i = 0; i < k; ++i) e.top_logprobs.push_back(entry(ids[i]));
    }
    job.emit(e);
  }

  // Admits queued responses in order while memory allows: resident state plus every running
  // response's reservation stays within the budget. A response whose session's snapshot is being
  // written waits for it (without holding up the others); all wait while swap-outs that make room
  // are written (admission_waits_ until one is).
  void admit() {
    admission_waits_ = false;
    for (size_t i = 0; i < queue_.size() && static_cast<int64_t>(running_.size()) < options_.max_batch_sessions;) {
      AgentSession& s = *queue_[i];
      if (s.restoring) {  // admitted once read back (reap_storage())
        admission_waits_ = true;
        ++i;
        continue;
      }
      if (s.snapshot) {
        s.snapshot->then_free = false;  // used again: the state stays
        admission_waits_ = true;
        ++i;
        continue;
      }
      const int64_t grow = static_cast<int64_t>(s.pending.size()) + s.job->options().max_output_tokens;
      const uint64_t reserve =
          engine::SessionState::growth_bytes(model_.text(), grow) + engine::SessionState::logits_bytes(model_.text());
      const uint64_t resident = s.state ? 0 : restored_bytes(s);
      if (reserve + resident + (s.state ? s.state->memory_bytes() : 0) > options_.kv_memory_bytes) {
        fail(s, Status(ErrorCode::kResourceExhausted,
                       fmt::format("session {}: the response may need {} bytes of model state, more than the whole "
                                   "KV memory budget of {} bytes",
                                   s.id, reserve + resident, options_.kv_memory_bytes)));
        continue;  // fail() took it off the queue
      }
      Status fits = fit_budget(reserve + resident, &s);
      if (fits.code() == ErrorCode::kUnavailable) {
        admission_waits_ = true;
        return;
      }
      if (!fits.ok()) {
        if (running_.empty() && writing_.empty()) {  // nothing will free memory by finishing: only idle sessions could
          std::string why = fmt::format("session {}: not enough KV memory for the response", s.id);
          if (!swap_error_.ok()) why += fmt::format(" (the last swap-out failed: {})", swap_error_.message());
          fail(s, Status(ErrorCode::kResourceExhausted, why));
          continue;
        }
        admission_waits_ = running_.empty();
        return;  // wait for running responses to finish, or snapshots to be written
      }
      if (!s.state && (s.stored_tokens > 0 || s.needs_rebuild)) {  // brought back off the engine thread
        start_restore(s);
        admission_waits_ = true;
        ++i;
        continue;
      }
      if (!s.state) s.state = std::make_shared<engine::SessionState>(model_.new_session());  // nothing computed yet
      queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(i));
      s.reserved_bytes = s.state->memory_bytes() + reserve;
      s.job_active = true;
      running_.push_back(&s);
      note_commitment();
    }
  }

  // Bytes promised: resident idle state, and for running responses the larger of their state and
  // what was reserved for them.
  uint64_t committed() const {
    uint64_t total = 0;
    for (const auto& [id, s] : sessions_) {
      const uint64_t bytes = s->restoring ? restored_bytes(*s) : s->resident_bytes();
      total += s->job_active ? std::max(bytes, s->reserved_bytes) : bytes;
    }
    return total;
  }

  void note_commitment() { stats_.peak_committed_bytes = std::max(stats_.peak_committed_bytes, committed()); }

  // Swaps out least-recently-used idle sessions until `extra` more bytes fit; `keep` stays. The
  // swap-outs are written off the engine thread: while they are, kUnavailable (the bytes fit once
  // they are written; with wait, the engine thread waits for them instead).
  Status fit_budget(uint64_t extra, const AgentSession* keep = nullptr, bool wait = false) {
    uint64_t total = committed();
    if (total + extra <= options_.kv_memory_bytes) return Status::ok_status();
    uint64_t freeing = 0;  // of swap-outs being written
    std::vector<AgentSession*> idle;
    const auto now = Clock::now();
    for (auto& [id, s] : sessions_) {
      if (!s->state || s->job_active || s.get() == keep) continue;  // a queued response's state can go
      if (s->snapshot && s->snapshot->then_free) {
        freeing += s->resident_bytes();
        continue;
      }
      if (s->status == SessionStatus::kAwaitingTool && now - s->awaiting_since < options_.tool_grace) continue;
      if (s->swap_failed_at != Clock::time_point{} && now - s->swap_failed_at < kSwapRetry) continue;
      idle.push_back(s.get());
    }
    std::sort(idle.begin(), idle.end(), [](const AgentSession* a, const AgentSession* b) { return a->last_used < b->last_used; });
    for (AgentSession* s : idle) {
      if (total - freeing + extra <= options_.kv_memory_bytes) break;
      const uint64_t bytes = s->resident_bytes();
      Status started = start_snapshot(*s, true);
      if (!started.ok()) {
        log::warn("swap-out not started", {{"session", s->id}, {"error", started.message()}});
        break;
      }
      if (s->state) freeing += bytes; else total -= bytes;
    }
    if (total + extra <= options_.kv_memory_bytes) return Status::ok_status();
    if (freeing == 0 || total - freeing + extra > options_.kv_memory_bytes)
      return Status(ErrorCode::kResourceExhausted, "KV memory budget");
    if (!wait) return Status(ErrorCode::kUnavailable, "swap-outs being written");
    reap_storage(true);
    return committed() + extra <= options_.kv_memory_bytes ? Status::ok_status()
                                                           : Status(ErrorCode::kResourceExhausted, "KV memory budget");
  }

  // Ends the session's response: the ids that close the turn go to pending (they are prefilled
  // with the next input), and the turn is logged. Its last event (kFailed when `error`) is sent once
  // the log holds the turn (turn_logged()).
  void finish(AgentSession& s, const std::string& reason, const Status* error = nullptr) {
    ResponseJob& job = *s.job;
    if (reason == "cancelled") job.finish_early();
    const AssistantTurn& turn = job.turn();
    const std::vector<tokenizer::Message> answer{turn.message(s.settings.thinking)};
    Result<tokenizer::ChatSuffix> rendered = s.encoder.encode_chat_suffix(answer, false);
    storage::MessageRecord row;
    row.role = kRoleAssistant;
    if (job.sampled().empty()) {
      // No output: the turn is an empty answer, as the chat encoding renders it, after whatever
      // of the prompt is still pending.
      row.first_token = log_tokens(s);
      if (rendered.ok()) row.token_ids = rendered->ids;
      s.pending.insert(s.pending.end(), row.token_ids.begin(), row.token_ids.end());
    } else {
      // Every sampled id but the last is in the state; the last and the closing EOS wait.
      const size_t fed = job.sampled().size() - 1;
      row.first_token = s.state->n_tokens() - static_cast<int64_t>(fed);
      row.token_ids = job.sampled();
      if (!job.ended_with_eos()) row.token_ids.push_back(static_cast<int32_t>(model_.config().eos_token_id));
      s.pending.assign(row.token_ids.begin() + static_cast<std::ptrdiff_t>(fed), row.token_ids.end());
    }
    // The turn's last ids are fed before anything is sampled again: idle, the state needs no logits.
    if (s.state && !s.pending.empty()) s.state->drop_next_logits();
    row.content = job.output();
    row.tool_calls = turn.raw_tool_calls;
    row.n_tokens = static_cast<int64_t>(row.token_ids.size());

    const std::string finish_reason = reason == "cancelled" ? reason : job.finish_reason();
    s.n_calls += job.n_calls();
    // Every complete call of the turn awaits its result, however the turn ended: a replay of the
    // log (load) parses the same calls from the same output.
    s.open_calls.clear();
    for (const tokenizer::ToolCall& call : turn.calls) s.open_calls.push_back(call.id);
    s.status = s.open_calls.empty() ? SessionStatus::kReady : SessionStatus::kAwaitingTool;
    s.awaiting_since = Clock::now();
    s.last_used = ++clock_;

    ResponseEvent done;
    if (error != nullptr) {
      done.kind = ResponseEvent::Kind::kFailed;
      done.error = *error;
    } else {
      done.kind = ResponseEvent::Kind::kCompleted;
    }
    done.finish_reason = finish_reason;
    // A completion session that completed is kept, keyed with its conversation and the answer as
    // the client got it, so that the next turn continues it; otherwise nobody can continue it.
    std::optional<PrefixKey> keep;
    if (s.completion && error == nullptr && finish_reason != "cancelled" && !s.conversation_key.empty()) {
      InputItem given;  // the answer as the client got it
      given.kind = InputItem::Kind::kAssistantMessage;
      given.content = turn.text;
      given.tool_calls = turn.calls;
      s.conversation_key = extend_conversation_key(s.conversation_key, given);
      keep = PrefixKey{s.conversation_key, s.tenant, options_.max_prefix_sessions};
    }
    done.seed = job.sampler.seed();
    done.usage.input_tokens = job.input_tokens;
    done.usage.cached_tokens = job.cached_tokens;
    done.usage.output_tokens = static_cast<int64_t>(job.sampled().size());
    done.usage.prefill_seconds = seconds_between(job.prefill_started, job.first_token);
    done.usage.decode_seconds = seconds_between(job.first_token, Clock::now());
    done.usage.first_token_seconds = seconds_between(job.created, job.first_token);
    done.usage.drafted_tokens = job.drafted_tokens;
    done.usage.accepted_tokens = job.accepted_tokens;
    stats_.drafted_tokens += job.drafted_tokens;
    stats_.accepted_tokens += job.accepted_tokens;
    stats_.input_tokens += done.usage.input_tokens;
    stats_.cached_tokens += done.usage.cached_tokens;
    stats_.output_tokens += done.usage.output_tokens;
    stats_.prefill_seconds += done.usage.prefill_seconds;
    stats_.decode_seconds += done.usage.decode_seconds;
    remove_job(s);
    std::shared_ptr<ResponseJob> ended = std::move(s.job);
    // The last event goes out from the lane, once the log holds the turn: no wait for a step of
    // the engine thread, which hears of it first (a call the event prompts comes after).
    lane_->append(s.id, {std::move(row)}, false,
                  [this, id = s.id, completion = s.completion, keep = std::move(keep), ended,
                   done = std::move(done)](storage::SessionStore& store, const Status& logged) mutable {
                    if (!logged.ok()) {
                      log::error("conversation log write failed", {{"session", id}, {"error", logged.message()}});
                      if (done.kind != ResponseEvent::Kind::kFailed) {
                        done.kind = ResponseEvent::Kind::kFailed;
                        done.error = logged.with_context(fmt::format("session {}: the turn could not be logged", id));
                      }
                    }
                    bool keyed = false;
                    std::vector<std::string> closed;
                    if (completion) closed = keep_or_close(store, id, logged.ok() ? keep : std::nullopt, keyed);
                    post([this, id, logged, keyed, closed] { turn_logged(id, logged, keyed, closed); });
                    ended->emit(done);
                  });
  }

  void fail(AgentSession& s, const Status& error) { finish(s, "cancelled", &error); }

  // What keeps a completion session for prefix reuse (finish()).
  struct PrefixKey {
    std::string key;
    std::optional<int64_t> tenant;
    int64_t max_sessions = 0;  // of the tenant, the least recently used closed first
  };

  // On the store lane, a completion session's response ended: kept (keyed; the tenant's excess
  // prefix sessions closed) or closed. Returns the sessions closed.
  static std::vector<std::string> keep_or_close(storage::SessionStore& store, const std::string& id,
                                                const std::optional<PrefixKey>& keep, bool& keyed) {
    std::vector<std::string> close{id};
    if (keep) {
      Status st = store.set_prefix_key(id, keep->key);
      if (st.ok()) {
        keyed = true;
        Result<std::vector<std::string>> excess = store.excess_prefix_sessions(keep->tenant, keep->max_sessions);
        close = excess.ok() ? std::move(*excess) : std::vector<std::string>{};
      } else {
        log::warn("prefix session not kept", {{"session", id}, {"error", st.message()}});
      }
    }
    for (const std::string& c : close) (void)mark_closed(store, c);
    return close;
  }

  // On the store lane: the session marked closed in storage (a failure is logged, and returned).
  static Status mark_closed(storage::SessionStore& store, const std::string& id) {
    Status st = store.set_session_status(id, status_name(SessionStatus::kClosed));
    if (!st.ok()) log::warn("session not closed", {{"session", id}, {"error", st.message()}});
    return st;
  }

  // Sessions the store lane has closed leave memory.
  void drop_closed(const std::vector<std::string>& ids) {
    for (const std::string& id : ids) {
      auto it = sessions_.find(id);
      if (it != sessions_.end()) {
        if (it->second->job) finish(*it->second, "cancelled");
        sessions_.erase(it);
      }
      lane_->forget(id);
    }
  }

  // The engine thread's part of a turn's end (finish()): the sessions the lane closed leave memory,
  // and the state is snapshotted if it is time (written off the engine thread; a completion session
  // given up is not worth it). A turn not logged leaves with its session (log_broken()).
  void turn_logged(const std::string& id, const Status& logged, bool keyed, const std::vector<std::string>& closed) {
    drop_closed(closed);
    auto it = sessions_.find(id);
    if (it == sessions_.end() || !logged.ok()) return;
    AgentSession& s = *it->second;
    s.keyed = keyed;
    if (!s.state || s.job_active || (s.completion && !keyed)) return;
    if (Clock::now() - s.snapshot_time >= options_.snapshot_interval) {
      Status st = start_snapshot(s, false);
      if (!st.ok()) log::warn("periodic snapshot not started", {{"session", s.id}, {"error", st.message()}});
    }
  }

  // The store lane could not write the session's log (StoreLane): its response, if any, fails
  // (nothing it writes can be logged now), and the session leaves memory; the next call loads it
  // from the log.
  void log_broken(const std::string& id) {
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return;
    if (it->second->job) fail(*it->second, Status(ErrorCode::kUnavailable, fmt::format("session {}: a write of its log failed", id)));
    sessions_.erase(it);
    lane_->forget(id);
  }

  // Closes the session in storage (the engine thread has dropped it); the future has the outcome.
  std::shared_future<Status> close_in_store(const std::string& id) {
    std::shared_future<Status> closed =
        lane_->post([id](storage::SessionStore& store) { return mark_closed(store, id); }).share();
    lane_->forget(id);
    return closed;
  }

  // Stores the session's status on the lane; a failure is only logged (the status is a hint for
  // listings: the log and snapshots are the truth).
  void store_status(const std::string& id, SessionStatus status) {
    lane_->post([id, status](storage::SessionStore& store) {
      Status st = store.set_session_status(id, status_name(status));
      if (!st.ok()) log::warn("session status not stored", {{"session", id}, {"error", st.message()}});
    });
  }

  void remove_job(AgentSession& s) {
    std::erase(running_, &s);
    std::erase(queue_, &s);
    s.job_active = false;
    s.reserved_bytes = 0;
    s.drafter.reset();
  }

  // --- residency ---

  // Starts writing the session's state off the engine thread (SnapshotInFlight); then_free: a
  // swap-out, the state is dropped once written. Nothing to write (no state, or the latest snapshot
  // holds it): done now. The writer's queue full: kResourceExhausted, nothing started.
  Status start_snapshot(AgentSession& s, bool then_free) {
    if (!s.state) return Status::ok_status();  // its latest snapshot is its state
    if (s.snapshot) {
      s.snapshot->then_free = s.snapshot->then_free || then_free;
      return Status::ok_status();
    }
    if (s.snapshot_tokens == s.state->n_tokens()) {
      if (then_free) free_state(s);
      return Status::ok_status();
    }
    storage::SnapshotRequest request = snapshot_request(s.id, model_.fingerprint(), *s.state);
    request.owner = s.state;
    HIPPO_ASSIGN_OR_RETURN(auto written, writer_->submit(std::move(request), [this](const auto&) { note_storage_done(); }));
    s.snapshot = SnapshotInFlight{written.share(), s.id, s.state->n_tokens(), Clock::now(), then_free};
    writing_.push_back(s.id);
    return Status::ok_status();
  }

  // Writer or restore thread: a snapshot is written or a state read back; the engine thread takes
  // note in reap_storage().
  void note_storage_done() {
    {
      std::lock_guard lock(mutex_);
      storage_done_ = true;
    }
    wake_.notify_all();
  }

  // Takes note of the snapshots written and the states read back since the last call (with
  // wait_all: of every snapshot in flight, waiting for them).
  void reap_storage(bool wait_all = false) {
    {
      std::lock_guard lock(mutex_);
      storage_done_ = false;
    }
    std::erase_if(restoring_, [&](const std::string& id) {
      auto it = sessions_.find(id);
      if (it == sessions_.end() || !it->second->restoring) return true;
      AgentSession& s = *it->second;
      if (s.restoring->restored.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return false;
      Status st = settle_restore(s);
      if (!st.ok()) {
        log::warn("session not resumed", {{"session", s.id}, {"error", st.message()}});
        if (s.job && !s.job_active) fail(s, st.with_context(fmt::format("session {} could not be resumed", s.id)));
      }
      return true;
    });
    std::erase_if(writing_, [&](const std::string& id) {
      auto it = sessions_.find(id);
      if (it == sessions_.end() || !it->second->snapshot) return true;  // closed meanwhile: nobody to tell
      AgentSession& s = *it->second;
      if (!wait_all && s.snapshot->written.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return false;
      (void)settle_snapshot(s);
      return true;
    });
  }

  // Waits for the session's snapshot in flight, if any, and applies its outcome (the error when it
  // failed; a swap-out then keeps the state).
  Status settle_snapshot(AgentSession& s) {
    if (!s.snapshot) return Status::ok_status();
    SnapshotInFlight done = std::move(*s.snapshot);
    s.snapshot.reset();
    const Result<storage::SnapshotWriteStats>& written = done.written.get();
    if (!written.ok()) {
      log::warn("snapshot failed", {{"session", done.session_id}, {"error", written.status().message()}});
      Status failed = written.status().with_context("snapshot of session " + done.session_id);
      if (done.then_free) {  // fit_budget() leaves it alone for a while
        s.swap_failed_at = Clock::now();
        swap_error_ = failed;
      }
      return failed;
    }
    stats_.snapshot_seconds += seconds_between(done.started, Clock::now());
    stats_.snapshot_bytes_written += written->written_stored_bytes;
    ++stats_.snapshots;
    if (done.session_id != s.id) return Status::ok_status();  // a prefix fork waited for its source's
    s.snapshot_tokens = done.n_tokens;
    s.snapshot_time = Clock::now();
    if (done.then_free && !s.job_active) free_state(s);
    return Status::ok_status();
  }

  // Drops the state its latest snapshot holds.
  void free_state(AgentSession& s) {
    s.stored_tokens = s.state->n_tokens();
    s.state.reset();
    ++stats_.swap_outs;
    store_status(s.id, SessionStatus::kSwapped);
  }

  // The session's state snapshotted now, the engine thread waiting for it (shutdown only).
  Status snapshot_waiting(AgentSession& s) {
    HIPPO_RETURN_IF_ERROR(settle_snapshot(s));
    HIPPO_RETURN_IF_ERROR(start_snapshot(s, false));
    return settle_snapshot(s);
  }

  // An upper bound of a swapped session's state once restored (a snapshot may hold logits).
  uint64_t restored_bytes(const AgentSession& s) const {
    return empty_state_bytes_ + engine::SessionState::growth_bytes(model_.text(), s.stored_tokens) +
           engine::SessionState::logits_bytes(model_.text());
  }

  // Starts bringing the session's model state back on the restore thread (RestoreInFlight): its
  // latest snapshot's bytes, checked against the ids its log says they hold; when that snapshot
  // is missing, corrupt, of another model or ahead of the log, a new state and the whole log to
  // prefill again (a rebuild), read once the store lane has written every row posted so far.
  void start_restore(AgentSession& s) {
    auto task = std::make_shared<std::packaged_task<Result<RestoredState>()>>(
        [this, id = s.id, stored = s.stored_tokens, ahead = s.needs_rebuild, expected = s.expected_prefix,
         logged = lane_->barrier()]() -> Result<RestoredState> {
          Status why = ahead ? Status(ErrorCode::kCorrupt, "its snapshot is ahead of its log") : Status::ok_status();
          if (why.ok()) {
            Result<engine::SessionState> state = read_state(*restore_store_, id, stored);
            if (state.ok() && !expected.empty() && state->token_ids() != expected)
              state = Status(ErrorCode::kCorrupt, fmt::format("session {}: the snapshot's token ids differ from its log", id));
            if (state.ok()) return RestoredState{std::make_shared<engine::SessionState>(std::move(*state)), {}, {}};
            why = state.status();
          }
          logged.wait();
          HIPPO_ASSIGN_OR_RETURN(std::vector<storage::MessageRecord> log, restore_store_->list_messages(id));
          std::vector<int32_t> ids;  // the log holds every id of the session, the pending ones last
          for (const storage::MessageRecord& row : log) ids.insert(ids.end(), row.token_ids.begin(), row.token_ids.end());
          return RestoredState{std::make_shared<engine::SessionState>(model_.new_session()), std::move(ids), why};
        });
    s.restoring = RestoreInFlight{task->get_future(), Clock::now()};
    restoring_.push_back(s.id);
    restorer_.post([this, task] {
      (*task)();
      note_storage_done();  // once the future is ready
    });
  }

  // Takes the state brought back (waiting for it).
  Status settle_restore(AgentSession& s) {
    RestoreInFlight done = std::move(*s.restoring);
    s.restoring.reset();
    HIPPO_ASSIGN_OR_RETURN(RestoredState restored, done.restored.get());
    s.expected_prefix.clear();
    s.expected_prefix.shrink_to_fit();
    if (restored.rebuild_ids) {
      log::warn("session snapshot unusable; rebuilding from the conversation log",
                {{"session", s.id}, {"error", restored.rebuild_reason.message()}});
      ++stats_.rebuilds;
      s.pending = std::move(*restored.rebuild_ids);
      s.snapshot_tokens = -1;
    } else {
      ++stats_.resumes;
      stats_.resume_seconds += seconds_between(done.started, Clock::now());
      log::debug("session resumed", {{"session", s.id}, {"tokens", restored.state->n_tokens()},
                                     {"seconds", seconds_between(done.started, Clock::now())}});
      s.snapshot_tokens = restored.state->n_tokens();
      s.snapshot_time = Clock::now();
    }
    s.state = std::move(restored.state);
    s.last_used = ++clock_;
    s.needs_rebuild = false;
    s.stored_tokens = 0;
    store_status(s.id, SessionStatus::kReady);
    return Status::ok_status();
  }

  // Brings the session's model state back now, the engine thread waiting for the restore thread
  // (next_logits_now() only: a response's is brought back off the engine thread, admit()).
  Status make_resident(AgentSession& s) {
    if (!s.state && !s.restoring) {
      HIPPO_RETURN_IF_ERROR(fit_budget(restored_bytes(s), &s, true));
      if (s.stored_tokens > 0 || s.needs_rebuild) start_restore(s);
      else s.state = std::make_shared<engine::SessionState>(model_.new_session());  // nothing computed yet
    }
    if (s.restoring) HIPPO_RETURN_IF_ERROR(settle_restore(s));
    if (s.snapshot) s.snapshot->then_free = false;  // used again: the state stays
    s.last_used = ++clock_;
    return Status::ok_status();
  }

  // The session's latest snapshot read back into a state (any thread, on its own store).
  Result<engine::SessionState> read_state(storage::SessionStore& store, const std::string& id, int64_t stored_tokens) const {
    HIPPO_ASSIGN_OR_RETURN(std::optional<storage::SnapshotInfo> latest, store.latest_snapshot(id));
    if (!latest) return Status(ErrorCode::kNotFound, fmt::format("session {} has no snapshot", id));
    if (latest->n_tokens != stored_tokens) {
      return Status(ErrorCode::kCorrupt, fmt::format("session {}: the latest snapshot has {} tokens, the session {}",
                                                     id, latest->n_tokens, stored_tokens));
    }
    // The store decompresses into the buffers that become the state's streams: one copy of the session,
    // with the room to grow that a new session's streams have.
    std::vector<engine::StateStreamBuffer> streams;
    std::vector<storage::RestoreTarget> targets;
    streams.reserve(latest->streams.size());
    for (const storage::StreamInfo& stream : latest->streams) {
      streams.push_back({stream.name, engine::SessionState::stream_buffer(
                                          model_.text(), stream.name, static_cast<size_t>(stream.n_entries) * stream.entry_bytes)});
      targets.push_back({stream.name, std::as_writable_bytes(std::span(streams.back().bytes))});
    }
    HIPPO_ASSIGN_OR_RETURN(std::vector<std::byte> frontier, store.restore_snapshot(*latest, model_.fingerprint(), targets));
    return engine::SessionState::restore(model_.text(), frontier, std::move(streams));
  }

  // --- sessions ---

  static SessionStatus live_status(const AgentSession& s) {
    return !s.state && s.status == SessionStatus::kReady ? SessionStatus::kSwapped : s.status;
  }

  SessionSummary summarize(const storage::SessionInfo& info) const {
    SessionSummary out;
    out.id = info.id;
    out.tenant = info.tenant_id;
    out.forked_from = info.forked_from;
    out.completion = info.kind == storage::kSessionKindCompletion;
    out.created_at = info.created_at;
    out.updated_at = info.updated_at;
    if (info.status == status_name(SessionStatus::kClosed)) {
      out.status = SessionStatus::kClosed;
    } else if (auto it = sessions_.find(info.id); it != sessions_.end()) {
      out.status = live_status(*it->second);
    }
    return out;
  }

  static int64_t log_tokens(const AgentSession& s) { return s.n_tokens() + static_cast<int64_t>(s.pending.size()); }

  // A session in the engine thread's memory (with_session() loads one that is not).
  Result<AgentSession*> find(const std::string& id) {
    auto it = sessions_.find(id);
    if (it != sessions_.end()) return it->second.get();
    return Status(ErrorCode::kUnavailable, fmt::format("session {} was closed or dropped meanwhile", id));
  }

  // A session of the database that this process has not used yet: its settings, its chat encoder
  // rebuilt by replaying the log (no model work), and what to restore. On the store lane.
  Result<std::unique_ptr<AgentSession>> load(storage::SessionStore& store, const std::string& id) const {
    HIPPO_ASSIGN_OR_RETURN(storage::SessionInfo info, store.get_session(id));
    if (info.status == status_name(SessionStatus::kClosed))
      return Status(ErrorCode::kFailedPrecondition, fmt::format("session {} is closed", id));
    if (info.model_fingerprint != model_.fingerprint()) {
      return Status(ErrorCode::kFailedPrecondition,
                    fmt::format("session {} belongs to model {}, this runtime serves {}", id, info.model_fingerprint,
                                model_.fingerprint()));
    }
    HIPPO_ASSIGN_OR_RETURN(SessionSettings settings, settings_from_json(info.settings));
    auto s = std::make_unique<AgentSession>(id, settings, tokenizer::ChatEncoder(tokenizer_, chat_options(settings, tokenizer_)));
    s->tenant = info.tenant_id;
    s->completion = info.kind == storage::kSessionKindCompletion;
    s->keyed = s->completion;  // it may hold a prefix key: cleared if anything is appended
    HIPPO_ASSIGN_OR_RETURN(std::vector<storage::MessageRecord> log, store.list_messages(id));
    std::vector<int32_t> ids;
    std::vector<tokenizer::Message> group;
    bool awaiting_answer = false;
    const OutputStart start = output_start(chat_options(settings, tokenizer_));
    for (const storage::MessageRecord& row : log) {
      if (row.role == kRoleUser || row.role == kRoleTool) {
        InputItem item;
        item.kind = row.role == kRoleUser ? InputItem::Kind::kUserMessage : InputItem::Kind::kToolResult;
        item.content = row.content;
        if (row.role == kRoleTool) {
          item.tool_call_id = row.tool_calls;
          std::erase(s->open_calls, row.tool_calls);
        }
        group.push_back(input_message(item));
      } else if (row.role == kRoleAssistantInput) {
        HIPPO_ASSIGN_OR_RETURN(InputItem item, assistant_input_from_row(row));
        open_assistant_calls(*s, item.tool_calls);
        group.push_back(input_message(item));
      } else if (row.role == kRolePrompt) {
        const std::vector<tokenizer::Message> messages = prompt_messages(settings, ids.empty(), group);
        HIPPO_ASSIGN_OR_RETURN(tokenizer::ChatSuffix suffix, s->encoder.encode_chat_suffix(messages, true));
        if (suffix.ids != row.token_ids) {
          return Status(ErrorCode::kCorrupt,
                        fmt::format("session {}: message {} of the log does not render to the ids it recorded", id, row.seq));
        }
        group.clear();
        awaiting_answer = true;
        ids.insert(ids.end(), row.token_ids.begin(), row.token_ids.end());
      } else if (row.role == kRoleAssistant) {
        const AssistantTurn turn = parse_assistant_output(row.content, chat_family(tokenizer_), start, s->n_calls);
        const std::vector<tokenizer::Message> answer{turn.message(settings.thinking)};
        HIPPO_RETURN_IF_ERROR(s->encoder.encode_chat_suffix(answer, false).status());
        s->n_calls += static_cast<int64_t>(turn.calls.size());
        s->open_calls.clear();
        for (const tokenizer::ToolCall& call : turn.calls) s->open_calls.push_back(call.id);
        awaiting_answer = false;
        ids.insert(ids.end(), row.token_ids.begin(), row.token_ids.end());
      }
    }
    if (awaiting_answer) {
      // The process ended during a response: the turn closes as an empty answer, as after a cancel.
      const std::vector<tokenizer::Message> empty_answer{AssistantTurn{}.message(settings.thinking)};
      HIPPO_ASSIGN_OR_RETURN(tokenizer::ChatSuffix suffix, s->encoder.encode_chat_suffix(empty_answer, false));
      storage::MessageRecord row;
      row.role = kRoleAssistant;
      row.first_token = static_cast<int64_t>(ids.size());
      row.n_tokens = static_cast<int64_t>(suffix.ids.size());
      row.token_ids = suffix.ids;
      HIPPO_RETURN_IF_ERROR(store.append_message(id, row).status());
      ids.insert(ids.end(), suffix.ids.begin(), suffix.ids.end());
    }
    s->inputs = std::move(group);
    s->status = s->open_calls.empty() ? SessionStatus::kReady : SessionStatus::kAwaitingTool;
    HIPPO_ASSIGN_OR_RETURN(std::optional<storage::SnapshotInfo> latest, store.latest_snapshot(id));
    int64_t stored = latest ? latest->n_tokens : 0;
    if (stored > static_cast<int64_t>(ids.size())) {
      s->needs_rebuild = true;
      s->stored_tokens = stored;
    } else {
      s->stored_tokens = stored;
      s->expected_prefix.assign(ids.begin(), ids.begin() + stored);
      s->pending.assign(ids.begin() + stored, ids.end());
    }
    s->snapshot_tokens = latest ? stored : -1;
    return s;
  }

  engine::Model& model_;
  const tokenizer::Tokenizer& tokenizer_;
  RuntimeOptions options_;
  uint64_t empty_state_bytes_ = 0;

  std::map<std::string, std::unique_ptr<AgentSession>> sessions_;
  std::vector<std::string> writing_;    // sessions with a snapshot in flight
  std::vector<std::string> restoring_;  // sessions with a restore in flight
  bool admission_waits_ = false;        // queued responses wait for snapshots in flight (admit())
  Status swap_error_;                   // of the last swap-out that failed
  // A session whose swap-out failed is not swapped out again for this long (the disk may be full).
  static constexpr std::chrono::seconds kSwapRetry{5};
  std::deque<AgentSession*> queue_;     // responses waiting for admission
  std::vector<AgentSession*> running_;  // admitted, in admission order
  uint64_t clock_ = 0;
  RuntimeStats stats_;
  engine::DraftGuard dspark_guard_{engine::kDsparkGuard};  // the model's DSpark, for every session
  static constexpr int64_t kMinPrefillChunk = 16;
  double prefill_budget_ = kMinPrefillChunk;  // prefill tokens of a step nobody decodes in (pace_prefill_only)
  double interleaved_budget_ = 16;   // prefill tokens per step while others decode (pace_prefill)
  double decode_step_seconds_ = 0;   // moving average of decode-only steps

  Clock::time_point next_retention_{};  // apply_retention() at start, then every retention_interval
  std::atomic<bool> working_{false};
  std::atomic<Clock::rep> progress_ns_{0};  // Clock's ticks when a step or call last ended

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> commands_;
  bool storage_done_ = false;  // set by the writer and restore threads (note_storage_done)
  bool stopping_ = false;
  bool stopped_ = false;
  std::thread thread_;
  // Declared last: destroyed first, once the engine thread has stopped; they finish what is queued
  // and tell note_storage_done(), whose mutex and condition are still there.
  std::unique_ptr<storage::KvSnapshotWriter> writer_;
  std::unique_ptr<storage::SessionStore> restore_store_;  // the restore thread's connection
  SerialThread restorer_{kRestoreThreadName};
  std::unique_ptr<StoreLane> lane_;  // the engine's connection, on a thread of its own
};

Result<std::unique_ptr<AgentRuntime>> AgentRuntime::open(engine::Model& model, const tokenizer::Tokenizer& tokenizer,
                                                         const RuntimeOptions& options) {
  // The store lane's connection never checkpoints the WAL (a commit of the conversation log would
  // copy the WAL into the database file, hundreds of MB after a long session's snapshot, and hold
  // up the log): the snapshot writer's thread does it.
  storage::StoreOptions engine_store;
  engine_store.auto_checkpoint = false;
  HIPPO_ASSIGN_OR_RETURN(std::unique_ptr<storage::SessionStore> store,
                         storage::SessionStore::open(options.db_path, engine_store));
  HIPPO_ASSIGN_OR_RETURN(std::unique_ptr<storage::KvSnapshotWriter> writer, storage::KvSnapshotWriter::open(options.db_path));
  storage::StoreOptions restore_options = engine_store;
  restore_options.codec_nice = storage::kBackgroundNice;
  HIPPO_ASSIGN_OR_RETURN(std::unique_ptr<storage::SessionStore> restore_store,
                         storage::SessionStore::open(options.db_path, restore_options));
  return std::unique_ptr<AgentRuntime>(new AgentRuntime(std::make_unique<Engine>(
      model, tokenizer, options, std::move(store), std::move(writer), std::move(restore_store))));
}

AgentRuntime::AgentRuntime(std::unique_ptr<Engine> engine) : engine_(std::move(engine)) {}

AgentRuntime::~AgentRuntime() {
  if (engine_) (void)engine_->call([this]() -> Status { return engine_->shutdown(); });
}

Result<std::string> AgentRuntime::create_session(const SessionSettings& settings, std::string id,
                                                 std::optional<int64_t> tenant) {
  return engine_->create_session(settings, std::move(id), tenant);
}

Status AgentRuntime::append_input(const std::string& session_id, std::vector<InputItem> items) {
  return engine_->append_input(session_id, std::move(items));
}

Status AgentRuntime::create_response(const std::string& session_id, ResponseOptions options, EventSink sink) {
  return engine_->create_response(session_id, std::move(options), std::move(sink));
}

Result<AgentRuntime::ConversationResponse> AgentRuntime::respond_to_conversation(
    const SessionSettings& settings, std::optional<int64_t> tenant, std::vector<InputItem> items, ResponseOptions options,
    EventSink sink) {
  return engine_->respond_to_conversation(settings, tenant, std::move(items), std::move(options), std::move(sink));
}

Status AgentRuntime::cancel(const std::string& session_id) { return engine_->cancel(session_id); }

Status AgentRuntime::snapshot(const std::string& session_id) { return engine_->snapshot(session_id, false); }

Status AgentRuntime::swap_out(const std::string& session_id) { return engine_->snapshot(session_id, true); }

Status AgentRuntime::close_session(const std::string& session_id) { return engine_->close(session_id); }

Result<std::string> AgentRuntime::fork_session(const std::string& source_id, std::string new_id) {
  return engine_->fork(source_id, std::move(new_id));
}

Result<SessionView> AgentRuntime::session(const std::string& session_id) { return engine_->view(session_id); }

Result<SessionSummary> AgentRuntime::session_summary(const std::string& session_id) {
  return engine_->summary(session_id);
}

Result<std::vector<SessionSummary>> AgentRuntime::list_sessions(std::optional<int64_t> tenant,
                                                                bool include_completions) {
  return engine_->list(tenant, include_completions);
}

Result<int64_t> AgentRuntime::count_open_sessions(int64_t tenant) {
  return engine_->count_open(tenant);  // the store locks itself
}

Status AgentRuntime::put_response(const storage::StoredResponse& response) { return engine_->store().put_response(response); }

Result<std::optional<storage::StoredResponse>> AgentRuntime::get_response(const std::string& id,
                                                                          std::optional<int64_t> tenant) {
  return engine_->store().get_response(id, tenant);
}

Result<bool> AgentRuntime::delete_response(const std::string& id, std::optional<int64_t> tenant) {
  return engine_->store().delete_response(id, tenant);
}

EngineLiveness AgentRuntime::liveness() const { return engine_->liveness(); }

RuntimeStats AgentRuntime::stats() {
  Result<RuntimeStats> r = engine_->call([&]() -> Result<RuntimeStats> { return engine_->stats(); });
  return r.ok() ? *r : RuntimeStats{};
}

Result<std::vector<float>> AgentRuntime::next_logits(const std::string& session_id) {
  return engine_->next_logits(session_id);
}

Status AgentRuntime::shutdown() {
  return engine_->call([&]() -> Status { return engine_->shutdown(); });
}

}  // namespace hippo::agents
