// `hippo session list|show|verify|export|import|fork|rm|gc`: the session store from the command
// line. Every command takes --db (default hippo.db, or HIPPO_DB) and --json. The store is opened
// with a busy timeout in WAL mode, so these commands run while a server holds the database open;
// the read-only ones open it read-only.
#include "api/cli/cli.h"
#include "api/cli/clock.h"
#include "storage/store.h"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <ostream>
#include <unistd.h>

namespace hippo::cli {
namespace {

using storage::SessionStore;
using storage::SnapshotInfo;

struct SessionOptions {
  std::string db = "hippo.db";
  int busy_timeout_ms = 5000;
  bool json = false;
  bool progress = false;
  std::string id;
  std::string file;
  std::string new_id;
  std::string fingerprint;
  bool all = false;                        // list: the temporary sessions of chat completions too
  double completion_max_age_hours = 24;    // gc: the retention rule of those sessions (0: no bound)
  uint64_t completion_max_bytes = uint64_t{1} << 30;
};

enum class Access { kRead, kWrite, kCreate };

Result<std::unique_ptr<SessionStore>> open_store(const SessionOptions& options, Access access) {
  storage::StoreOptions store_options;
  store_options.read_only = access == Access::kRead;
  store_options.create = access == Access::kCreate;
  store_options.busy_timeout_ms = options.busy_timeout_ms;
  auto store = SessionStore::open(options.db, store_options);
  if (!store.ok() && store.status().code() == ErrorCode::kNotFound)
    return make_error(ErrorCode::kNotFound, "no session database at {} (set --db or HIPPO_DB)", options.db);
  return store;
}

std::string format_bytes(std::int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.1f} MB", b / 1e6);
  if (b >= 1e3) return fmt::format("{:.1f} kB", b / 1e3);
  return fmt::format("{} B", bytes);
}

double ratio(std::int64_t raw, std::int64_t stored) {
  return stored > 0 ? static_cast<double>(raw) / static_cast<double>(stored) : 0.0;
}

// A progress bar on stderr for long exports and imports: shown when stderr is a terminal or with
// --progress, redrawn at most ten times a second, finished with a newline.
class ProgressBar {
 public:
  ProgressBar(std::string label, bool forced) : label_(std::move(label)), enabled_(forced || isatty(STDERR_FILENO)) {}
  ~ProgressBar() {
    if (drawn_) std::cerr << "\n";
  }
  storage::ProgressFn callback() {
    if (!enabled_) return {};
    return [this](std::int64_t done, std::int64_t total) { draw(done, total); };
  }

 private:
  void draw(std::int64_t done, std::int64_t total) {
    const auto now = std::chrono::steady_clock::now();
    if (drawn_ && done < total && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    drawn_ = true;
    constexpr int kWidth = 30;
    const double fraction = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
    const int filled = static_cast<int>(fraction * kWidth);
    std::cerr << fmt::format("\r{} [{}{}] {:3.0f}% {} / {}", label_, std::string(static_cast<std::size_t>(filled), '#'),
                             std::string(static_cast<std::size_t>(kWidth - filled), '.'), fraction * 100,
                             format_bytes(done), format_bytes(total))
              << std::flush;
  }

  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_;
};

boost::json::object session_json(const storage::SessionInfo& s) {
  boost::json::object o{{"id", s.id},
                        {"model_fingerprint", s.model_fingerprint},
                        {"status", s.status},
                        {"settings", s.settings},
                        {"forked_from", s.forked_from},
                        {"created_at", s.created_at},
                        {"updated_at", s.updated_at},
                        {"kind", s.kind}};
  o["tenant_id"] = s.tenant_id ? boost::json::value(*s.tenant_id) : boost::json::value(nullptr);
  return o;
}

boost::json::object snapshot_json(const SnapshotInfo& s) {
  boost::json::array streams;
  for (const auto& stream : s.streams)
    streams.push_back(boost::json::object{{"name", stream.name},
                                          {"entry_bytes", stream.entry_bytes},
                                          {"filter", storage::filter_name(stream.filter)},
                                          {"n_entries", stream.n_entries},
                                          {"chunks", stream.n_chunks},
                                          {"raw_bytes", stream.raw_bytes},
                                          {"stored_bytes", stream.stored_bytes}});
  boost::json::object o{{"id", s.id},
                        {"n_tokens", s.n_tokens},
                        {"fingerprint", s.fingerprint},
                        {"created_at", s.created_at},
                        {"raw_bytes", s.raw_bytes()},
                        {"stored_bytes", s.stored_bytes()},
                        {"frontier_raw_bytes", s.frontier_raw_bytes},
                        {"streams", std::move(streams)}};
  o["parent_id"] = s.parent_id ? boost::json::value(*s.parent_id) : boost::json::value(nullptr);
  return o;
}

Status run_list(const SessionOptions& options, std::ostream& out) {
  HIPPO_ASSIGN_OR_RETURN(auto store, open_store(options, Access::kRead));
  HIPPO_ASSIGN_OR_RETURN(auto sessions, store->list_sessions());
  boost::json::array rows;
  if (!options.json)
    out << fmt::format("{:<24} {:<10} {:>10} {:>11} {:>6}  {}\n", "ID", "STATUS", "TOKENS", "STORED", "RATIO",
                       "UPDATED");
  for (const auto& s : sessions) {
    if (s.kind == storage::kSessionKindCompletion && !options.all) continue;
    HIPPO_ASSIGN_OR_RETURN(auto latest, store->latest_snapshot(s.id));
    const std::int64_t tokens = latest ? latest->n_tokens : 0;
    const std::int64_t stored = latest ? latest->stored_bytes() : 0;
    const std::int64_t raw = latest ? latest->raw_bytes() : 0;
    if (options.json) {
      auto o = session_json(s);
      o["n_tokens"] = tokens;
      o["stored_bytes"] = stored;
      o["raw_bytes"] = raw;
      rows.push_back(std::move(o));
    } else {
      out << fmt::format("{:<24} {:<10} {:>10} {:>11} {:>6.2f}  {}\n", s.id, s.status, tokens, format_bytes(stored),
                         ratio(raw, stored), format_time(s.updated_at));
    }
  }
  if (options.json) out << boost::json::serialize(rows) << "\n";
  return {};
}

Status run_show(const SessionOptions& options, std::ostream& out) {
  HIPPO_ASSIGN_OR_RETURN(auto store, open_store(options, Access::kRead));
  HIPPO_ASSIGN_OR_RETURN(auto session, store->get_session(options.id));
  HIPPO_ASSIGN_OR_RETURN(auto messages, store->list_messages(options.id));
  HIPPO_ASSIGN_OR_RETURN(auto snapshots, store->list_snapshots(options.id));
  if (options.json) {
    auto o = session_json(session);
    o["messages"] = messages.size();
    boost::json::array list;
    for (const auto& s : snapshots) list.push_back(snapshot_json(s));
    o["snapshots"] = std::move(list);
    out << boost::json::serialize(o) << "\n";
    return {};
  }
  out << fmt::format("session      {}\nstatus       {}\nfingerprint  {}\n", session.id, session.status,
                     session.model_fingerprint);
  if (!session.forked_from.empty()) out << fmt::format("forked from  {}\n", session.forked_from);
  out << fmt::format("created      {}\nupdated      {}\nmessages     {}\n", format_time(session.created_at),
                     format_time(session.updated_at), messages.size());
  for (const auto& s : snapshots) {
    out << fmt::format("\nsnapshot {}  {} tokens  {} stored of {} (ratio {:.2f})  {}\n", s.id, s.n_tokens,
                       format_bytes(s.stored_bytes()), format_bytes(s.raw_bytes()), ratio(s.raw_bytes(), s.stored_bytes()),
                       format_time(s.created_at));
    out << fmt::format("  {:<16} {:>6} {:>10} {:>11} {:>6} {:>7}  {}\n", "STREAM", "ENTRY", "ENTRIES", "STORED", "RATIO",
                       "CHUNKS", "FILTER");
    for (const auto& st : s.streams)
      out << fmt::format("  {:<16} {:>6} {:>10} {:>11} {:>6.2f} {:>7}  {}\n", st.name, st.entry_bytes, st.n_entries,
                         format_bytes(st.stored_bytes), ratio(st.raw_bytes, st.stored_bytes), st.n_chunks,
                         storage::filter_name(st.filter));
  }
  return {};
}

Status run_verify(const SessionOptions& options, std::ostream& out) {
  HIPPO_ASSIGN_OR_RETURN(auto store, open_store(options, Access::kRead));
  std::vector<std::string> ids;
  if (!options.id.empty()) {
    ids.push_back(options.id);
  } else {
    HIPPO_ASSIGN_OR_RETURN(auto sessions, store->list_sessions());
    for (const auto& s : sessions) ids.push_back(s.id);
  }
  boost::json::array results;
  std::size_t n_problems = 0;
  for (const auto& id : ids) {
    ProgressBar bar("verify " + id, options.progress);
    HIPPO_ASSIGN_OR_RETURN(auto report, store->verify_session(id, bar.callback()));
    n_problems += report.problems.size();
    if (options.json) {
      boost::json::array problems;
      for (const auto& p : report.problems) problems.emplace_back(p.message());
      results.push_back(boost::json::object{{"session", id},
                                            {"ok", report.problems.empty()},
                                            {"snapshots", report.snapshots},
                                            {"chunks", report.chunks},
                                            {"raw_bytes", report.raw_bytes},
                                            {"problems", std::move(problems)}});
    } else {
      out << fmt::format("{}: {} ({} snapshots, {} chunks, {} checked)\n", id,
                         report.problems.empty() ? "ok" : "DAMAGED", report.snapshots, report.chunks,
                         format_bytes(report.raw_bytes));
      for (const auto& p : report.problems) out << "  " << p.message() << "\n";
    }
  }
  if (options.json) out << boost::json::serialize(results) << "\n";
  if (n_problems > 0)
    return make_error(ErrorCode::kCorrupt, "verify: {} problem(s) in {}; damaged sessions must be rebuilt from their log",
                      n_problems, options.db);
  return {};
}

Status run_export(const SessionOptions& options, std::ostream& out) {
  HIPPO_ASSIGN_OR_RETURN(auto store, open_store(options, Access::kWrite));
  {
    ProgressBar bar("export " + options.id, options.progress);
    HIPPO_RETURN_IF_ERROR(store->export_session(options.id, options.file, bar.callback()));
  }
  if (options.json)
    out << boost::json::serialize(boost::json::object{{"session", options.id}, {"file", options.file}}) << "\n";
  else
    out << fmt::format("exported {} to {}\n", options.id, options.file);
  return {};
}

Status run_import(const SessionOptions& options, std::ostream& out) {
  HIPPO_ASSIGN_OR_RETURN(auto store, open_store(options, Access::kCreate));
  Result<storage::SessionInfo> imported = [&] {
    ProgressBar bar("import " + options.file, options.progress);
    return store->import_session(options.file, options.fingerprint, options.new_id, bar.callback());
  }();
  HIPPO_RETURN_IF_ERROR(imported.status());
  if (options.json)
    out << boost::json::serialize(session_json(*imported)) << "\n";
  else
    out << fmt::format("imported {} from {}\n", imported->id, options.file);
  return {};
}

Status run_fork(const SessionOptions& options, std::ostream& out) {
  HIPPO_ASSIGN_OR_RETURN(auto store, open_store(options, Access::kWrite));
  HIPPO_ASSIGN_OR_RETURN(auto fork, store->fork_session(options.id, options.new_id));
  if (options.json)
    out << boost::json::serialize(session_json(fork)) << "\n";
  else
    out << fmt::format("forked {} as {}\n", options.id, fork.id);
  return {};
}

Status run_rm(const SessionOptions& options, std::ostream& out) {
  HIPPO_ASSIGN_OR_RETURN(auto store, open_store(options, Access::kWrite));
  HIPPO_RETURN_IF_ERROR(store->remove_session(options.id));
  if (options.json)
    out << boost::json::serialize(boost::json::object{{"removed", options.id}}) << "\n";
  else
    out << fmt::format("removed {} (its unshared KV chunks go at the next `hippo session gc`)\n", options.id);
  return {};
}

// The retention rule of chat completions' closed sessions first (what `hippo serve` applies every
// minute), then the chunks nothing references.
Status run_gc(const SessionOptions& options, std::ostream& out) {
  HIPPO_ASSIGN_OR_RETURN(auto store, open_store(options, Access::kWrite));
  storage::RetentionRule rule;
  rule.max_age_seconds = static_cast<std::int64_t>(options.completion_max_age_hours * 3600);
  rule.max_bytes = static_cast<std::int64_t>(std::min<uint64_t>(options.completion_max_bytes, INT64_MAX));
  const std::int64_t now =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  HIPPO_ASSIGN_OR_RETURN(auto retention, store->apply_retention(storage::kSessionKindCompletion, rule, now));
  HIPPO_ASSIGN_OR_RETURN(auto stats, store->gc());
  if (options.json)
    out << boost::json::serialize(boost::json::object{{"completion_sessions_removed", retention.sessions_removed},
                                                      {"completion_sessions_kept", retention.sessions_kept},
                                                      {"chunks_removed", stats.chunks_removed},
                                                      {"bytes_removed", stats.bytes_removed}})
        << "\n";
  else
    out << fmt::format("removed {} closed chat-completion sessions past the retention rule ({} kept), and {} "
                       "unreferenced chunks ({})\n",
                       retention.sessions_removed, retention.sessions_kept, stats.chunks_removed,
                       format_bytes(stats.bytes_removed));
  return {};
}

}  // namespace

void add_session_commands(CLI::App& app, Invocation& inv) {
  CLI::App* family = app.add_subcommand("session", "Manage stored agent sessions");
  family->require_subcommand(1);

  using Runner = Status (*)(const SessionOptions&, std::ostream&);
  auto add = [&](const char* name, const char* description, Runner runner) {
    auto options = std::make_shared<SessionOptions>();
    CLI::App* sub = family->add_subcommand(name, description);
    sub->add_option("--db", options->db, "Session database")->capture_default_str();
    sub->add_flag("--json", options->json, "Machine-readable JSON on stdout");
    sub->add_option("--busy-timeout", options->busy_timeout_ms, "Milliseconds to wait while another process writes")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    sub->parse_complete_callback([&inv, options, runner] {
      inv.action = [&inv, options, runner] { return runner(*options, *inv.out); };
    });
    return std::pair{sub, options};
  };

  {
    auto [sub, o] = add("list", "List sessions with their latest snapshot", run_list);
    sub->add_flag("--all", o->all, "Also the temporary sessions of chat completions (kind completion)");
  }
  {
    auto [sub, o] = add("show", "Show one session, its snapshots and streams", run_show);
    sub->add_option("id", o->id, "Session id")->required();
  }
  {
    auto [sub, o] = add("verify", "Decode and check every chunk of a session (all sessions without an id)", run_verify);
    sub->add_option("id", o->id, "Session id");
    sub->add_flag("--progress", o->progress, "Show progress even when stderr is not a terminal");
  }
  {
    auto [sub, o] = add("export", "Write a session, its log and latest snapshot to a portable file", run_export);
    sub->add_option("id", o->id, "Session id")->required();
    sub->add_option("file", o->file, "New file to write (itself an SQLite database)")->required();
    sub->add_flag("--progress", o->progress, "Show progress even when stderr is not a terminal");
  }
  {
    auto [sub, o] = add("import", "Read a session from an exported file", run_import);
    sub->add_option("file", o->file, "Exported file")->required();
    sub->add_option("--as", o->new_id, "Import under this session id");
    sub->add_option("--fingerprint", o->fingerprint, "Refuse the file unless its model fingerprint is this one");
    sub->add_flag("--progress", o->progress, "Show progress even when stderr is not a terminal");
  }
  {
    auto [sub, o] = add("fork", "Copy a session; the copy shares its KV chunks", run_fork);
    sub->add_option("id", o->id, "Session to fork")->required();
    sub->add_option("--as", o->new_id, "Id of the new session (default: a fresh one)");
  }
  {
    auto [sub, o] = add("rm", "Delete a session, its log and snapshots", run_rm);
    sub->add_option("id", o->id, "Session id")->required();
  }
  {
    auto [sub, o] = add("gc",
                        "Remove closed chat-completion sessions past the retention rule, then KV chunks no "
                        "snapshot references",
                        run_gc);
    sub->add_option("--completion-max-age-hours", o->completion_max_age_hours,
                    "Remove closed chat-completion sessions older than this (0: no bound)")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    sub->add_option("--completion-max-bytes", o->completion_max_bytes,
                    "Keep only the newest closed chat-completion sessions that hold this much (e.g. 1GiB; 0: no bound)")
        ->transform(CLI::AsSizeValue(false))
        ->capture_default_str();
  }
}

}  // namespace hippo::cli
