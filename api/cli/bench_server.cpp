// `hippo bench server`: the agent server (api/server/) with real WebSocket clients over real
// loopback sockets (issue #7). The bench starts the AgentRuntime and server::Server in-process, on
// 127.0.0.1 port 0, against a temporary SQLite database with auth on and a key of its own:
//   overhead  server overhead per streamed token: the time from the runtime handing a delta to the
//             server's sink (`t_emit_ns`, which ServerOptions::emit_timestamps adds) to a client
//             thread having read its frame, for N sessions streaming M tokens at once (p50/p99/max);
//             and the server's part alone, sink to the frame's write, from its /metrics histogram;
//             against the machine's floor for the one thread handoff the sink has to make
//   idle      the server's resident memory per idle, authenticated WebSocket connection; the
//             clients live in a child process forked before any thread starts, so that the
//             server process's RSS growth is the server's alone
//   resume    end-to-end time to first token of a swapped-out session with a long context
//             (session.resume + input.append + response.create sent at once → first delta frame),
//             against prefilling the same context over the same socket
//   conversation  a tool-calling conversation of --turns turns replayed statelessly over
//             POST /v1/chat/completions, as agent frameworks send it (the whole conversation each
//             turn, the answers as the server gave them): tokens prefilled and time to the first
//             token per turn, with prefix reuse and without (--max-prefix-sessions 0)
#include "agents/runtime.h"
#include "api/cli/cli.h"
#include "api/cli/process_memory.h"
#include "api/server/auth.h"
#include "api/server/server.h"
#include "engine/model/model.h"
#include "engine/tokenizer/tokenizer.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

namespace hippo::cli {
namespace {

namespace beast = boost::beast;
namespace websocket = beast::websocket;
namespace net = boost::asio;
namespace json = boost::json;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

struct ServerBenchOptions {
  std::string model_dir;
  int threads = 0;
  int64_t sessions = 8;
  int64_t tokens = 256;
  int64_t connections = 1000;
  int64_t resume_context = 131072;
  int64_t turns = 20;
  int64_t tool_result_tokens = 200;
  int io_threads = server::ServerOptions{}.io_threads;
  int64_t io_spin_us = 0;
  std::vector<std::string> sections = {"overhead", "idle", "resume"};
  bool json = false;
};

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
}

// A user message of about n tokens (as `hippo bench agents` builds its long contexts).
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

// ---- a blocking WebSocket client (one per thread; the idle clients share their process) ----

class WsClient {
 public:
  static Result<std::unique_ptr<WsClient>> open(net::io_context& ioc, uint16_t port, const std::string& key) {
    auto c = std::unique_ptr<WsClient>(new WsClient(ioc));
    beast::error_code ec;
    c->ws_.next_layer().connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port), ec);
    if (ec) return make_error(ErrorCode::kUnavailable, "connect to 127.0.0.1:{}: {}", port, ec.message());
    // A blocked read fails after a minute instead of hanging the bench.
    timeval tv{60, 0};
    ::setsockopt(c->ws_.next_layer().native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    c->ws_.set_option(websocket::stream_base::decorator(
        [key](websocket::request_type& req) { req.set(beast::http::field::authorization, "Bearer " + key); }));
    c->ws_.handshake(fmt::format("127.0.0.1:{}", port), "/v1/agents", ec);
    if (ec) return make_error(ErrorCode::kUnavailable, "WebSocket upgrade on 127.0.0.1:{}: {}", port, ec.message());
    return c;
  }

  Status send(const json::object& event) {
    beast::error_code ec;
    ws_.text(true);
    ws_.write(net::buffer(json::serialize(event)), ec);
    if (ec) return make_error(ErrorCode::kIoError, "WebSocket write: {}", ec.message());
    return Status::ok_status();
  }

  // The next event and the time its frame had been read; a server `error` event is an error.
  Result<std::pair<json::object, Clock::time_point>> receive() {
    buffer_.clear();
    beast::error_code ec;
    ws_.read(buffer_, ec);
    const Clock::time_point at = Clock::now();
    if (ec) return make_error(ErrorCode::kIoError, "WebSocket read: {}", ec.message());
    json::value v = json::parse(beast::buffers_to_string(buffer_.data()), ec);
    if (ec || !v.is_object()) return make_error(ErrorCode::kInternal, "the server sent a frame that is not a JSON object");
    json::object& o = v.as_object();
    if (o.at("type").as_string() == "error" || o.at("type").as_string() == "response.failed")
      return make_error(ErrorCode::kInternal, "the server answered {}", json::serialize(o));
    return std::pair{std::move(o), at};
  }

  // Reads until an event of the type, returning it.
  Result<std::pair<json::object, Clock::time_point>> until(std::string_view type) {
    for (;;) {
      HIPPO_ASSIGN_OR_RETURN(auto e, receive());
      if (e.first.at("type").as_string() == type) return e;
    }
  }

 private:
  explicit WsClient(net::io_context& ioc) : ws_(ioc) {}
  websocket::stream<tcp::socket> ws_;
  beast::flat_buffer buffer_;
};

json::object message_items(const std::string& text) {
  return {{"type", "input.append"}, {"items", json::array{json::object{{"type", "message"}, {"content", text}}}}};
}

Result<std::string> create_session(WsClient& c) {
  HIPPO_RETURN_IF_ERROR(c.send({{"type", "session.create"}}));
  HIPPO_ASSIGN_OR_RETURN(auto created, c.until("session.created"));
  return std::string(created.first.at("session_id").as_string());
}

// ---- the server under test, in this process ----

struct RunningServer {
  std::unique_ptr<agents::AgentRuntime> runtime;
  std::unique_ptr<server::Authenticator> auth;
  std::unique_ptr<server::Server> srv;
  std::thread thread;
  Status result;
  uint16_t port = 0;
  std::string key;

  ~RunningServer() { (void)stop(); }

  Status stop() {
    if (!srv) return Status::ok_status();
    srv->stop();
    if (thread.joinable()) thread.join();
    runtime.reset();  // as `hippo serve`: the runtime goes before the server's connections
    srv.reset();
    auth.reset();
    return result;
  }
};

struct Bench {
  engine::Model& model;
  const tokenizer::Tokenizer& tok;
  std::filesystem::path dir;
  const ServerBenchOptions& options;  // the server's I/O threads and polling
  int db_counter = 0;

  Result<std::unique_ptr<RunningServer>> start(int64_t max_output_tokens,
                                               int64_t max_prefix_sessions = agents::RuntimeOptions{}.max_prefix_sessions) {
    auto s = std::make_unique<RunningServer>();
    const std::string db = (dir / fmt::format("bench-{}.db", db_counter++)).string();
    HIPPO_ASSIGN_OR_RETURN(s->auth, server::Authenticator::open(db, server::AuthOptions{}));
    HIPPO_ASSIGN_OR_RETURN(std::optional<std::string> key, s->auth->make_first_key());
    if (!key) return make_error(ErrorCode::kInternal, "a new database got no API key");
    s->key = *key;
    agents::RuntimeOptions ro;
    ro.db_path = db;
    ro.max_prefix_sessions = max_prefix_sessions;
    HIPPO_ASSIGN_OR_RETURN(s->runtime, agents::AgentRuntime::open(model, tok, ro));
    server::ServerOptions so;
    so.port = 0;
    so.default_max_output_tokens = max_output_tokens;
    so.max_message_bytes = std::max<size_t>(so.max_message_bytes, size_t{64} << 20);  // the resume context's text
    so.emit_timestamps = true;
    so.io_threads = options.io_threads;
    so.io_spin = std::chrono::microseconds(options.io_spin_us);
    s->srv = std::make_unique<server::Server>(*s->runtime, *s->auth, so);
    HIPPO_ASSIGN_OR_RETURN(s->port, s->srv->listen());
    s->thread = std::thread([raw = s.get()] { raw->result = raw->srv->run(); });
    return s;
  }
};

// ---- overhead ----

struct StreamResult {
  std::vector<double> overhead_us;  // one per delta frame
  int64_t output_tokens = 0;
  Status status;
};

void stream_one(uint16_t port, const std::string& key, int64_t tokens, uint64_t seed, StreamResult& r) {
  r.status = [&]() -> Status {
    net::io_context ioc;
    HIPPO_ASSIGN_OR_RETURN(auto c, WsClient::open(ioc, port, key));
    HIPPO_ASSIGN_OR_RETURN(std::string sid, create_session(*c));
    json::object append = message_items(fmt::format("Session {} streams a long answer.", seed));
    append["session_id"] = sid;
    HIPPO_RETURN_IF_ERROR(c->send(append));
    // Sampling keeps a random model's answers at full length (greedy ones often end at once).
    HIPPO_RETURN_IF_ERROR(c->send({{"type", "response.create"}, {"session_id", sid}, {"max_output_tokens", tokens},
                                   {"temperature", 1.0}, {"seed", seed}}));
    for (;;) {
      HIPPO_ASSIGN_OR_RETURN(auto e, c->receive());
      const json::string& type = e.first.at("type").as_string();
      if (type == "response.output_text.delta" || type == "response.reasoning.delta") {
        const json::value* t = e.first.if_contains("t_emit_ns");
        if (!t) return make_error(ErrorCode::kInternal, "a delta without t_emit_ns");
        const int64_t received = std::chrono::duration_cast<std::chrono::nanoseconds>(e.second.time_since_epoch()).count();
        r.overhead_us.push_back(static_cast<double>(received - t->to_number<int64_t>()) / 1e3);
      } else if (type == "response.completed") {
        r.output_tokens = e.first.at("usage").as_object().at("output_tokens").to_number<int64_t>();
        return Status::ok_status();
      }
    }
  }();
}

// GET /metrics from the running server, as a scraper would.
Result<std::string> scrape_metrics(const RunningServer& s) {
  net::io_context ioc;
  beast::tcp_stream stream(ioc);
  beast::error_code ec;
  stream.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), s.port), ec);
  if (ec) return make_error(ErrorCode::kUnavailable, "connect to 127.0.0.1:{}: {}", s.port, ec.message());
  beast::http::request<beast::http::empty_body> req{beast::http::verb::get, "/metrics", 11};
  req.set(beast::http::field::host, "127.0.0.1");
  req.set(beast::http::field::authorization, "Bearer " + s.key);
  beast::http::write(stream, req, ec);
  beast::flat_buffer buffer;
  beast::http::response<beast::http::string_body> res;
  if (!ec) beast::http::read(stream, buffer, res, ec);
  if (ec || res.result() != beast::http::status::ok)
    return make_error(ErrorCode::kIoError, "GET /metrics: {}", ec ? ec.message() : std::to_string(res.result_int()));
  return std::move(res.body());
}

// The server's own share of the overhead: hippo_stream_event_delay_seconds, the time from the
// runtime's sink to the write of the frame. From its cumulative buckets: the share of
// frames within 100 µs, and the bucket bound under which half and 99% of them fall.
Result<json::object> server_side_delay(const std::string& metrics) {
  std::vector<std::pair<double, double>> buckets;  // (upper bound s, cumulative count)
  std::istringstream lines(metrics);
  std::string line;
  constexpr std::string_view kPrefix = "hippo_stream_event_delay_seconds_bucket{le=\"";
  while (std::getline(lines, line)) {
    if (!line.starts_with(kPrefix)) continue;
    const size_t quote = line.find('"', kPrefix.size());
    const std::string le = line.substr(kPrefix.size(), quote - kPrefix.size());
    buckets.emplace_back(le == "+Inf" ? std::numeric_limits<double>::infinity() : std::stod(le),
                         std::stod(line.substr(line.rfind(' ') + 1)));
  }
  if (buckets.empty() || buckets.back().second <= 0)
    return make_error(ErrorCode::kInternal, "/metrics has no hippo_stream_event_delay_seconds samples");
  const double total = buckets.back().second;
  auto bound_us = [&](double q) {
    for (const auto& [le, count] : buckets)
      if (count >= q * total) return le * 1e6;
    return std::numeric_limits<double>::infinity();
  };
  double within_100us = 0;
  for (const auto& [le, count] : buckets)
    if (le <= 100e-6) within_100us = count / total;
  return json::object{{"frames", total}, {"p50_at_most_us", bound_us(0.5)}, {"p99_at_most_us", bound_us(0.99)},
                      {"share_within_100us", within_100us}};
}

// The floor under the server's share on this machine: what the sink does before any server code
// runs, a handoff from a thread that is computing (as the engine thread is when it emits a token)
// to an idle io_context run by `io_threads` other threads waiting in the reactor on a socket (as
// the server's I/O threads do). `samples` times, one per `interval` of computing, timed from the post
// to the handler running. Measured alone, before the sessions stream, so it takes no CPU from them.
json::object wake_floor(int io_threads, int samples, std::chrono::microseconds interval) {
  net::io_context ioc;
  tcp::acceptor acceptor(ioc, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
  acceptor.async_accept([](const beast::error_code&, tcp::socket) {});
  std::vector<std::thread> io;
  for (int i = 0; i < io_threads; ++i) io.emplace_back([&] { ioc.run(); });
  std::vector<double> delay_us(static_cast<size_t>(samples));
  std::atomic<int> done{0};
  for (int i = 0; i < samples; ++i) {
    for (const Clock::time_point until = Clock::now() + interval; Clock::now() < until;) {
    }
    const Clock::time_point posted = Clock::now();
    net::post(ioc, [&, i, posted] {
      delay_us[static_cast<size_t>(i)] = std::chrono::duration<double, std::micro>(Clock::now() - posted).count();
      done.fetch_add(1);
    });
  }
  while (done.load() < samples) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  acceptor.close();
  ioc.stop();
  for (std::thread& t : io) t.join();
  return json::object{{"frames", samples}, {"p50_us", percentile(delay_us, 0.5)}, {"p99_us", percentile(delay_us, 0.99)}};
}

Result<json::object> bench_overhead(Bench& b, const ServerBenchOptions& o) {
  HIPPO_ASSIGN_OR_RETURN(auto s, b.start(o.tokens));
  std::vector<StreamResult> results(static_cast<size_t>(o.sessions));
  std::vector<std::thread> clients;
  const json::object floor = wake_floor(o.io_threads, 500, std::chrono::microseconds(2000));
  const Clock::time_point start = Clock::now();
  for (int64_t i = 0; i < o.sessions; ++i)
    clients.emplace_back(stream_one, s->port, s->key, o.tokens, static_cast<uint64_t>(i), std::ref(results[static_cast<size_t>(i)]));
  for (std::thread& t : clients) t.join();
  const double wall = seconds(Clock::now() - start);
  HIPPO_ASSIGN_OR_RETURN(std::string metrics, scrape_metrics(*s));
  HIPPO_ASSIGN_OR_RETURN(json::object server_side, server_side_delay(metrics));
  HIPPO_RETURN_IF_ERROR(s->stop());
  std::vector<double> all;
  int64_t output_tokens = 0;
  for (StreamResult& r : results) {
    HIPPO_RETURN_IF_ERROR(r.status);
    all.insert(all.end(), r.overhead_us.begin(), r.overhead_us.end());
    output_tokens += r.output_tokens;
  }
  double mean = 0;
  for (double v : all) mean += v;
  mean = all.empty() ? 0 : mean / static_cast<double>(all.size());
  return json::object{
      {"sessions", o.sessions},
      {"tokens_per_session", o.tokens},
      {"frames_measured", all.size()},
      {"output_tokens", output_tokens},
      {"p50_us", percentile(all, 0.5)},
      {"p99_us", percentile(all, 0.99)},
      {"max_us", all.empty() ? 0.0 : *std::max_element(all.begin(), all.end())},
      {"mean_us", mean},
      {"threshold_p99_us", 100},
      {"seconds", wall},
      {"server_side", server_side},
      {"wake_floor", floor},
  };
}

// ---- idle: the clients in a child process ----

// The child's side: reads "connect PORT KEY N" lines (each opens N more connections and answers
// "ok TOTAL" or "error MESSAGE"); closes everything and exits at "close" or end of input.
[[noreturn]] void idle_client_main(int in_fd, int out_fd) {
  FILE* in = ::fdopen(in_fd, "r");
  FILE* out = ::fdopen(out_fd, "w");
  net::io_context ioc;
  std::vector<std::unique_ptr<WsClient>> conns;
  char line[512];
  while (in && out && std::fgets(line, sizeof line, in)) {
    unsigned port = 0;
    char key[256] = {0};
    long long n = 0;
    if (std::sscanf(line, "connect %u %255s %lld", &port, key, &n) != 3) break;
    std::string error;
    for (long long i = 0; i < n && error.empty(); ++i) {
      Result<std::unique_ptr<WsClient>> c = WsClient::open(ioc, static_cast<uint16_t>(port), key);
      if (c.ok()) conns.push_back(std::move(*c));
      else error = c.status().message();
    }
    if (error.empty()) std::fprintf(out, "ok %zu\n", conns.size());
    else std::fprintf(out, "error after %zu connections: %s\n", conns.size(), error.c_str());
    std::fflush(out);
  }
  conns.clear();
  std::_Exit(0);
}

struct IdleClients {
  pid_t pid = -1;
  FILE* to = nullptr;
  FILE* from = nullptr;

  ~IdleClients() { finish(); }

  // The child closes its connections and exits.
  void finish() {
    if (to) std::fclose(to);
    if (from) std::fclose(from);
    if (pid > 0) ::waitpid(pid, nullptr, 0);
    to = from = nullptr;
    pid = -1;
  }

  Result<int64_t> connect(uint16_t port, const std::string& key, int64_t n) {
    std::fprintf(to, "connect %u %s %lld\n", static_cast<unsigned>(port), key.c_str(), static_cast<long long>(n));
    std::fflush(to);
    char line[1024];
    if (!std::fgets(line, sizeof line, from))
      return make_error(ErrorCode::kInternal, "the idle clients' process ended without an answer");
    long long total = 0;
    if (std::sscanf(line, "ok %lld", &total) == 1) return static_cast<int64_t>(total);
    std::string why(line);
    while (!why.empty() && why.back() == '\n') why.pop_back();
    return make_error(ErrorCode::kUnavailable, "idle clients: {}", why);
  }
};

// Forks the clients' process; call before any thread starts (the child only opens sockets).
Result<std::unique_ptr<IdleClients>> fork_idle_clients() {
  int down[2], up[2];
  if (::pipe(down) != 0 || ::pipe(up) != 0) return make_error(ErrorCode::kIoError, "pipe: {}", std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) return make_error(ErrorCode::kIoError, "fork: {}", std::strerror(errno));
  if (pid == 0) {
    ::close(down[1]);
    ::close(up[0]);
    idle_client_main(down[0], up[1]);
  }
  ::close(down[0]);
  ::close(up[1]);
  auto c = std::make_unique<IdleClients>();
  c->pid = pid;
  c->to = ::fdopen(down[1], "w");
  c->from = ::fdopen(up[0], "r");
  return c;
}

// Raises the soft descriptor limit to the hard one; returns the limit in force.
int64_t raise_fd_limit() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return 0;
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    (void)::setrlimit(RLIMIT_NOFILE, &lim);
    (void)::getrlimit(RLIMIT_NOFILE, &lim);
  }
  return lim.rlim_cur == RLIM_INFINITY ? INT64_MAX : static_cast<int64_t>(lim.rlim_cur);
}

constexpr int64_t kSpareDescriptors = 64;  // the database, the model, the listener, stdio

Result<json::object> bench_idle(Bench& b, const ServerBenchOptions& o, IdleClients& clients, int64_t fd_limit) {
  HIPPO_ASSIGN_OR_RETURN(auto s, b.start(16));
  // One connection first, so that what the first one allocates once is not counted per connection.
  HIPPO_RETURN_IF_ERROR(clients.connect(s->port, s->key, 1).status());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const int64_t before = proc_status_bytes("VmRSS:");
  const Clock::time_point start = Clock::now();
  HIPPO_ASSIGN_OR_RETURN(int64_t total, clients.connect(s->port, s->key, o.connections));
  const double open_s = seconds(Clock::now() - start);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the server's side of the last upgrades settles
  const int64_t after = proc_status_bytes("VmRSS:");
  clients.finish();  // before the server stops, which would wait for their closing handshakes
  HIPPO_RETURN_IF_ERROR(s->stop());
  return json::object{
      {"connections", total - 1},
      {"fd_limit", fd_limit},
      {"open_seconds", open_s},
      {"rss_before_bytes", before},
      {"rss_after_bytes", after},
      {"bytes_per_connection", static_cast<double>(after - before) / static_cast<double>(total - 1)},
      {"threshold_bytes", 50 * 1024},
  };
}

// ---- resume ----

Result<json::object> bench_resume(Bench& b, const ServerBenchOptions& o) {
  HIPPO_ASSIGN_OR_RETURN(auto s, b.start(16));
  net::io_context ioc;
  HIPPO_ASSIGN_OR_RETURN(auto c, WsClient::open(ioc, s->port, s->key));
  HIPPO_ASSIGN_OR_RETURN(std::string sid, create_session(*c));
  json::object response{{"type", "response.create"}, {"session_id", sid}, {"max_output_tokens", 4},
                        {"temperature", 1.0}, {"seed", 1}};
  // The context, prefilled over the socket: the time a client waits without a resumable session.
  json::object append = message_items(text_of_tokens(b.tok, o.resume_context));
  append["session_id"] = sid;
  const Clock::time_point prefill_start = Clock::now();
  HIPPO_RETURN_IF_ERROR(c->send(append));
  HIPPO_RETURN_IF_ERROR(c->send(response));
  std::optional<Clock::time_point> prefill_first;
  json::object prefilled;
  for (;;) {
    HIPPO_ASSIGN_OR_RETURN(auto e, c->receive());
    const json::string& type = e.first.at("type").as_string();
    if (type == "response.output_text.delta" && !prefill_first) prefill_first = e.second;
    if (type == "response.completed") {
      if (!prefill_first) prefill_first = e.second;
      prefilled = std::move(e.first);
      break;
    }
  }
  const Clock::time_point swap_start = Clock::now();
  HIPPO_RETURN_IF_ERROR(s->runtime->swap_out(sid));
  const double swap_s = seconds(Clock::now() - swap_start);
  c.reset();

  // A new connection resumes it: three events at once, then the first delta.
  HIPPO_ASSIGN_OR_RETURN(c, WsClient::open(ioc, s->port, s->key));
  json::object again = message_items("And now?");
  again["session_id"] = sid;
  const Clock::time_point resume_start = Clock::now();
  HIPPO_RETURN_IF_ERROR(c->send({{"type", "session.resume"}, {"session_id", sid}}));
  HIPPO_RETURN_IF_ERROR(c->send(again));
  HIPPO_RETURN_IF_ERROR(c->send(response));
  std::optional<Clock::time_point> resume_first;
  json::object resumed;
  for (;;) {
    HIPPO_ASSIGN_OR_RETURN(auto e, c->receive());
    const json::string& type = e.first.at("type").as_string();
    if (type == "response.output_text.delta" && !resume_first) resume_first = e.second;
    if (type == "response.completed") {
      if (!resume_first) resume_first = e.second;  // no text before the end: the end is the first answer
      resumed = std::move(e.first);
      break;
    }
  }
  c.reset();
  HIPPO_RETURN_IF_ERROR(s->stop());
  const json::object& pu = prefilled.at("usage").as_object();
  const json::object& ru = resumed.at("usage").as_object();
  const double prefill_ttft = seconds(*prefill_first - prefill_start);
  const double resume_ttft = seconds(*resume_first - resume_start);
  return json::object{
      {"context_tokens", pu.at("input_tokens").to_number<int64_t>()},
      {"prefill_ttft_seconds", prefill_ttft},
      {"prefill_engine_first_token_ms", pu.at("first_token_ms").to_number<double>()},
      {"swap_out_seconds", swap_s},
      {"resume_ttft_seconds", resume_ttft},
      {"resume_engine_first_token_ms", ru.at("first_token_ms").to_number<double>()},
      {"resume_input_tokens", ru.at("input_tokens").to_number<int64_t>()},
      {"resume_cached_tokens", ru.at("cached_tokens").to_number<int64_t>()},
      {"speedup", prefill_ttft / resume_ttft},
  };
}

// ---- conversation ----

// POST /v1/chat/completions on a new connection: the answer and how long it took.
Result<std::pair<json::object, double>> post_chat(const RunningServer& s, const json::object& request) {
  net::io_context ioc;
  beast::tcp_stream stream(ioc);
  beast::error_code ec;
  stream.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), s.port), ec);
  if (ec) return make_error(ErrorCode::kUnavailable, "connect to 127.0.0.1:{}: {}", s.port, ec.message());
  beast::http::request<beast::http::string_body> req{beast::http::verb::post, "/v1/chat/completions", 11};
  req.set(beast::http::field::host, "127.0.0.1");
  req.set(beast::http::field::authorization, "Bearer " + s.key);
  req.set(beast::http::field::content_type, "application/json");
  req.body() = json::serialize(request);
  req.prepare_payload();
  const Clock::time_point start = Clock::now();
  beast::http::write(stream, req, ec);
  beast::flat_buffer buffer;
  beast::http::response<beast::http::string_body> res;
  if (!ec) beast::http::read(stream, buffer, res, ec);
  const double took = seconds(Clock::now() - start);
  if (ec) return make_error(ErrorCode::kIoError, "POST /v1/chat/completions: {}", ec.message());
  if (res.result_int() != 200)
    return make_error(ErrorCode::kInternal, "POST /v1/chat/completions answered {}: {}", res.result_int(), res.body());
  json::value v = json::parse(res.body(), ec);
  if (ec || !v.is_object()) return make_error(ErrorCode::kInternal, "the answer is not a JSON object");
  return std::pair{std::move(v.as_object()), took};
}

// One run of the conversation: per turn, the prompt tokens, those prefilled, and the seconds to
// the answer's one token (the whole request: connect, prefill, one decode step, the answer).
Result<json::array> replay_conversation(Bench& b, const ServerBenchOptions& o, int64_t max_prefix_sessions) {
  HIPPO_ASSIGN_OR_RETURN(auto s, b.start(16, max_prefix_sessions));
  const json::value tools = json::parse(
      R"([{"type": "function", "function": {"name": "read_file", "description": "Reads a file of the project",
           "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}])");
  json::array messages{json::object{{"role", "system"}, {"content", "You are a coding agent. Read files with read_file."}},
                       json::object{{"role", "user"}, {"content", "Find where the river cache is flushed."}}};
  const std::string file_text = text_of_tokens(b.tok, o.tool_result_tokens);
  json::array turns;
  for (int64_t turn = 0; turn < o.turns; ++turn) {
    json::object request{{"model", server::ServerOptions{}.model_id},
                         {"messages", messages},
                         {"tools", tools},
                         {"max_completion_tokens", 1},
                         {"temperature", 0}};
    HIPPO_ASSIGN_OR_RETURN(auto answered, post_chat(*s, request));
    const json::object& usage = answered.first.at("usage").as_object();
    const int64_t prompt = usage.at("prompt_tokens").to_number<int64_t>();
    const int64_t cached = usage.at("prompt_tokens_details").as_object().at("cached_tokens").to_number<int64_t>();
    turns.push_back(json::object{{"prompt_tokens", prompt}, {"prefilled_tokens", prompt - cached}, {"seconds", answered.second}});
    // The answer as the server gave it, then the agent's next tool call and its result.
    json::object answer = answered.first.at("choices").as_array().at(0).as_object().at("message").as_object();
    messages.push_back(json::object{{"role", "assistant"}, {"content", answer.at("content")}});
    const std::string call_id = fmt::format("call_bench_{}", turn);
    messages.push_back(json::object{
        {"role", "assistant"},
        {"content", nullptr},
        {"tool_calls", json::array{json::object{{"id", call_id},
                                                {"type", "function"},
                                                {"function", {{"name", "read_file"},
                                                              {"arguments", fmt::format(R"({{"path": "src/file{}.txt"}})", turn)}}}}}}});
    messages.push_back(json::object{{"role", "tool"}, {"tool_call_id", call_id},
                                    {"content", fmt::format("file {}:{}", turn, file_text)}});
  }
  HIPPO_RETURN_IF_ERROR(s->stop());
  return turns;
}

Result<json::object> bench_conversation(Bench& b, const ServerBenchOptions& o) {
  HIPPO_ASSIGN_OR_RETURN(json::array reused, replay_conversation(b, o, agents::RuntimeOptions{}.max_prefix_sessions));
  HIPPO_ASSIGN_OR_RETURN(json::array anew, replay_conversation(b, o, 0));
  auto total = [](const json::array& turns, std::string_view field) {
    double sum = 0;
    for (const json::value& t : turns) sum += t.at(field).to_number<double>();
    return sum;
  };
  return json::object{{"turns", o.turns},
                      {"tool_result_tokens", o.tool_result_tokens},
                      {"with_reuse", reused},
                      {"without_reuse", anew},
                      {"prefilled_with_reuse", total(reused, "prefilled_tokens")},
                      {"prefilled_without_reuse", total(anew, "prefilled_tokens")},
                      {"seconds_with_reuse", total(reused, "seconds")},
                      {"seconds_without_reuse", total(anew, "seconds")}};
}

// ---- the command ----

Status run_server_bench(const ServerBenchOptions& o, std::ostream& out) {
  const std::set<std::string> wanted(o.sections.begin(), o.sections.end());
  // Fork the idle clients before the model's threads exist.
  std::unique_ptr<IdleClients> idle_clients;
  int64_t fd_limit = 0;
  if (wanted.count("idle")) {
    fd_limit = raise_fd_limit();
    if (o.connections + kSpareDescriptors > fd_limit) {
      return make_error(ErrorCode::kInvalidArgument,
                        "--connections {} needs {} file descriptors in the server and in its clients' process, but "
                        "the limit (RLIMIT_NOFILE, raised to its hard limit) is {}: raise it (ulimit -Hn) or ask for "
                        "fewer connections",
                        o.connections, o.connections + kSpareDescriptors, fd_limit);
    }
    HIPPO_ASSIGN_OR_RETURN(idle_clients, fork_idle_clients());
  }
  engine::ModelOptions mo;
  mo.n_threads = o.threads;
  HIPPO_ASSIGN_OR_RETURN(std::unique_ptr<engine::Model> model, engine::Model::load(o.model_dir, mo));
  HIPPO_ASSIGN_OR_RETURN(tokenizer::Tokenizer tok,
                         tokenizer::Tokenizer::load(std::filesystem::path(o.model_dir) / "tokenizer.json"));
  std::error_code ec;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / fmt::format("hippo-bench-server-{}", std::random_device{}());
  std::filesystem::create_directories(dir, ec);
  Bench b{*model, tok, dir, o};
  json::object doc{{"model", o.model_dir}, {"threads", model->n_threads()}, {"io_threads", o.io_threads}, {"io_spin_us", o.io_spin_us}};
  Status status;
  auto section = [&](const std::string& name, auto fn) {
    if (!status.ok() || !wanted.count(name)) return;
    Result<json::object> r = fn();
    if (!r.ok()) {
      status = r.status().with_context("bench server " + name);
      return;
    }
    doc[name] = std::move(*r);
  };
  section("overhead", [&] { return bench_overhead(b, o); });
  section("idle", [&] { return bench_idle(b, o, *idle_clients, fd_limit); });
  idle_clients.reset();
  section("resume", [&] { return bench_resume(b, o); });
  section("conversation", [&] { return bench_conversation(b, o); });
  std::filesystem::remove_all(dir, ec);
  HIPPO_RETURN_IF_ERROR(status);

  if (o.json) {
    out << json::serialize(doc) << "\n";
    return {};
  }
  out << fmt::format("model     {} ({} engine threads); server: {} I/O threads, polling {} µs before they sleep\n",
                     o.model_dir, model->n_threads(), o.io_threads, o.io_spin_us);
  if (auto* s = doc.if_contains("overhead")) {
    out << fmt::format(
        "\noverhead: {} sessions x {} tokens over WebSocket; server time per streamed token (sink → client read), "
        "{} frames:\n  p50 {:.1f} µs   p99 {:.1f} µs   max {:.1f} µs   (issue #7: p99 < 100 µs)\n",
        s->at("sessions").as_int64(), s->at("tokens_per_session").as_int64(), s->at("frames_measured").as_uint64(),
        s->at("p50_us").as_double(), s->at("p99_us").as_double(), s->at("max_us").as_double());
    const json::object& side = s->at("server_side").as_object();
    out << fmt::format(
        "  in the server alone (sink → the frame's write begins; hippo_stream_event_delay_seconds, {} frames):\n"
        "  p50 ≤ {:g} µs   p99 ≤ {:g} µs   {:.1f}% within 100 µs\n",
        side.at("frames").to_number<double>(), side.at("p50_at_most_us").as_double(), side.at("p99_at_most_us").as_double(),
        100 * side.at("share_within_100us").as_double());
    const json::object& floor = s->at("wake_floor").as_object();
    out << fmt::format("  floor on this machine, just before (a computing thread posts to an idle io_context, as the sink "
                       "does, {} times):\n  p50 {:.1f} µs   p99 {:.1f} µs\n",
                       floor.at("frames").to_number<int64_t>(), floor.at("p50_us").as_double(), floor.at("p99_us").as_double());
  }
  if (auto* s = doc.if_contains("idle")) {
    out << fmt::format(
        "\nidle: {} authenticated WebSocket connections (clients in another process, opened in {:.2f} s): server "
        "RSS grew {:.2f} MB,\n  {:.1f} KB per connection   (issue #7: < 50 KB)\n",
        s->at("connections").as_int64(), s->at("open_seconds").as_double(),
        static_cast<double>(s->at("rss_after_bytes").as_int64() - s->at("rss_before_bytes").as_int64()) / 1e6,
        s->at("bytes_per_connection").as_double() / 1024);
  }
  if (auto* s = doc.if_contains("resume")) {
    out << fmt::format(
        "\nresume: {} context tokens; first token over WebSocket after prefilling {:.3f} s; swap-out {:.3f} s;\n"
        "  first token after session.resume {:.3f} s ({} of {} tokens cached): {:.1f}x faster than prefilling\n",
        s->at("context_tokens").as_int64(), s->at("prefill_ttft_seconds").as_double(),
        s->at("swap_out_seconds").as_double(), s->at("resume_ttft_seconds").as_double(),
        s->at("resume_cached_tokens").as_int64(), s->at("resume_input_tokens").as_int64(),
        s->at("speedup").as_double());
  }
  if (auto* s = doc.if_contains("conversation")) {
    const json::array& reused = s->at("with_reuse").as_array();
    const json::array& anew = s->at("without_reuse").as_array();
    out << fmt::format(
        "\nconversation: {} turns over /v1/chat/completions, each re-sending the whole conversation (a tool call and "
        "its ~{}-token result per turn, one output token):\n  turn  prompt   prefilled (reuse / none)   first token s "
        "(reuse / none)\n",
        s->at("turns").as_int64(), s->at("tool_result_tokens").as_int64());
    for (size_t i = 0; i < reused.size() && i < anew.size(); ++i) {
      out << fmt::format("  {:4}  {:6}   {:9} / {:<9}       {:7.3f} / {:.3f}\n", i + 1,
                         reused[i].at("prompt_tokens").as_int64(), reused[i].at("prefilled_tokens").as_int64(),
                         anew[i].at("prefilled_tokens").as_int64(), reused[i].at("seconds").as_double(),
                         anew[i].at("seconds").as_double());
    }
    out << fmt::format("  total prefilled {:.0f} / {:.0f} tokens, {:.2f} / {:.2f} s ({:.1f}x less time with reuse)\n",
                       s->at("prefilled_with_reuse").as_double(), s->at("prefilled_without_reuse").as_double(),
                       s->at("seconds_with_reuse").as_double(), s->at("seconds_without_reuse").as_double(),
                       s->at("seconds_without_reuse").as_double() / s->at("seconds_with_reuse").as_double());
  }
  return {};
}

}  // namespace

void add_bench_server_command(CLI::App& bench, Invocation& inv) {
  auto o = std::make_shared<ServerBenchOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "server", "The agent server over real sockets: overhead per streamed token, idle connections, resume, a stateless conversation");
  cmd->add_option("--model", o->model_dir, "Checkpoint directory (hippo model init writes one)")->required();
  add_engine_threads_option(*cmd, o->threads);
  cmd->add_option("--sessions", o->sessions, "Sessions streaming at once (overhead)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--tokens", o->tokens, "Tokens each session streams (overhead)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--connections", o->connections, "Idle WebSocket connections (idle)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--resume-context", o->resume_context, "Context tokens of the swapped-out session (resume)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--turns", o->turns, "Turns of the replayed conversation (conversation)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--tool-result-tokens", o->tool_result_tokens, "Tokens of each tool result (conversation)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--io-threads", o->io_threads, "The server's I/O threads (hippo serve --io-threads)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--io-spin-us", o->io_spin_us, "How long its I/O threads poll before they sleep (hippo serve --io-spin-us)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd->add_option("--sections", o->sections, "Which sections to run")
      ->delimiter(',')
      ->check(CLI::IsMember({"overhead", "idle", "resume", "conversation"}))
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "One JSON object instead of a table");
  cmd->parse_complete_callback([&inv, o] { inv.action = [&inv, o] { return run_server_bench(*o, *inv.out); }; });
}

}  // namespace hippo::cli
