// `hippo chat`: an interactive terminal client of `hippo serve`'s agents protocol (docs/protocol.md)
// over one WebSocket. It creates a session (or resumes --session), and each line of input becomes a
// user message and a response whose text streams as it arrives. Lines that start with '/' are
// commands (/help lists them). With tools declared (--tools FILE), a response that ends in tool
// calls shows each call and takes the next lines as their results. stdin need not be a terminal:
// piped input runs as a script, each line after the previous response has ended.
//
// Only a terminal on stdout gets colour (reasoning dimmed); otherwise reasoning is marked
// "[reasoning] ", and the lines about the session ("[session] ...", "[usage] ...") are plain.
// Ctrl-C during a response cancels it (twice: quits); at the prompt it does nothing but say how to
// leave. Errors of the server go to stderr and the chat goes on; a lost connection ends it (exit 1).
#include "api/cli/chat_connection.h"
#include "api/cli/cli.h"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <deque>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <vector>

namespace hippo::cli {
namespace {

namespace json = boost::json;
using chat::Inbound;

struct ChatCommand {
  std::string url = "ws://127.0.0.1:8080/v1/agents";
  std::string api_key;
  std::string ca_file;
  std::string session;
  std::string instructions;
  std::string tools_file;
  std::string tool_choice;
  bool thinking = false;
  std::optional<int64_t> max_output_tokens;
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int64_t> top_k;
  std::optional<uint64_t> seed;
};

constexpr const char* kHelp =
    "Each line is a user message; the answer streams back. Commands:\n"
    "  /snapshot            snapshot the session (durable now) and show its state\n"
    "  /sessions            list the server's sessions (where it offers GET /v1/sessions)\n"
    "  /resume ID           continue session ID\n"
    "  /new                 start a new session (same instructions and tools)\n"
    "  /cancel              cancel the running response (Ctrl-C does the same)\n"
    "  /tool CALL_ID TEXT   give TEXT as the result of tool call CALL_ID\n"
    "  /help                this list\n"
    "  /quit                leave (Ctrl-D too); the session stays on the server\n"
    "While tool calls await results, a plain line is the result of the first one.\n"
    "A line that starts with '//' sends the text from its second '/'.\n";

// ---- small JSON reads of server events ----

std::string str(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->get_string()) : std::string();
}

double num(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr) return 0;
  if (v->is_int64()) return static_cast<double>(v->get_int64());
  if (v->is_uint64()) return static_cast<double>(v->get_uint64());
  if (v->is_double()) return v->get_double();
  return 0;
}

int64_t integer(const json::object& o, std::string_view key) { return static_cast<int64_t>(num(o, key)); }

std::string trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  const size_t e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

// "scalar" JSON values as text for one-line listings.
std::string scalar_text(const json::value& v) {
  if (v.is_string()) return std::string(v.get_string());
  return json::serialize(v);
}

struct ToolCall {
  std::string id;
  std::string name;  // empty when unknown (a resumed session says only which ids await)
  std::string arguments;
};

class Chat {
 public:
  Chat(const ChatCommand& cmd, const chat::Url& url, std::ostream& out, std::ostream& err, chat::Inbox& inbox,
       chat::Connection& connection, bool ansi, bool interactive)
      : cmd_(cmd), url_(url), out_(out), err_(err), inbox_(inbox), conn_(connection), ansi_(ansi),
        interactive_(interactive) {}

  Status run() {
    if (!cmd_.session.empty()) {
      HIPPO_ASSIGN_OR_RETURN(bool resumed, resume(cmd_.session));
      if (!resumed) return make_error(ErrorCode::kNotFound, "session {} could not be resumed (see the error above)", cmd_.session);
    } else {
      HIPPO_ASSIGN_OR_RETURN(bool created, create_session());
      if (!created) return make_error(ErrorCode::kFailedPrecondition, "the server did not create a session (see the error above)");
    }
    if (interactive_) info("chat", "type a message, or /help");
    while (!quit_) {
      if (interactive_ && deferred_.empty()) prompt();
      Inbound in = next_idle();
      switch (in.kind) {
        case Inbound::Kind::kLine: HIPPO_RETURN_IF_ERROR(handle_line(in.text)); break;
        case Inbound::Kind::kEndOfInput:
          if (interactive_) end_line_forced();
          quit_ = true;
          break;
        case Inbound::Kind::kClosed: return lost(in.text);
        default: break;
      }
    }
    return Status::ok_status();
  }

 private:
  // ---- output ----

  void raw(std::string_view s) {
    if (s.empty()) return;
    out_ << s;
    at_line_start_ = s.back() == '\n';
  }
  void style(const char* code) {
    if (ansi_) out_ << code;
  }
  // Ends a partly written line (of answer text, reasoning, a prompt).
  void end_line() {
    if (mode_ == Mode::kReasoning) style("\x1b[0m");
    mode_ = Mode::kNone;
    if (!at_line_start_) raw("\n");
  }
  void end_line_forced() {
    raw("\n");
  }
  // A line about the chat, not the model's words: "[usage] ...".
  void info(std::string_view tag, const std::string& line) {
    end_line();
    style("\x1b[2m");
    raw(fmt::format("[{}] {}", tag, line));
    style("\x1b[0m");
    raw("\n");
    out_.flush();
  }
  void error(const std::string& line) {
    end_line();
    out_.flush();
    err_ << "error: " << line << std::endl;
  }
  void error_event(const json::object& e) {
    const json::object* body = &e;
    if (const json::value* inner = e.if_contains("error"); inner && inner->is_object()) body = &inner->get_object();
    error(fmt::format("{}: {}", str(*body, "code"), str(*body, "message")));
  }
  void prompt() {
    end_line();
    if (!pending_.empty()) {
      const ToolCall& c = pending_.front();
      raw(fmt::format("result of {}{}> ", c.id, c.name.empty() ? "" : " (" + c.name + ")"));
    } else {
      raw("> ");
    }
    at_line_start_ = true;  // the user's Enter ends the line
    out_.flush();
  }
  void text(const std::string& s) {
    if (mode_ == Mode::kReasoning) {  // the answer starts on a line of its own
      style("\x1b[0m");
      if (!at_line_start_) raw("\n");
    }
    mode_ = Mode::kText;
    raw(s);
    out_.flush();
  }
  void reasoning(const std::string& s) {
    if (mode_ != Mode::kReasoning) {
      end_line();
      style("\x1b[2m");
      if (!ansi_) raw("[reasoning] ");
      mode_ = Mode::kReasoning;
    }
    raw(s);
    out_.flush();
  }
  // "[session] s_1 resumed: status ready, n_tokens 27, pending_tokens 2".
  void show_view(std::string_view tag, std::string_view what, const json::object& e) {
    std::string line = fmt::format("{} {}: status {}, n_tokens {}, pending_tokens {}", str(e, "session_id"), what,
                                   str(e, "status"), integer(e, "n_tokens"), integer(e, "pending_tokens"));
    if (const json::value* ids = e.if_contains("awaiting_call_ids"); ids && ids->is_array() && !ids->get_array().empty()) {
      line += ", awaiting";
      for (const json::value& id : ids->get_array()) line += " " + scalar_text(id);
    }
    info(tag, line);
  }

  // ---- events ----

  std::string send(json::object event) {
    std::string id = fmt::format("c{}", ++next_event_);
    event["event_id"] = id;
    conn_.send(event);
    return id;
  }

  Status lost(const std::string& why) {
    end_line();
    return make_error(ErrorCode::kIoError, "{}: {}", url_.text, why.empty() ? "the connection ended" : why);
  }

  // A server event that answers nothing we wait for: errors are shown, the rest ignored.
  void stray(const json::object& e) {
    if (str(e, "type") == "error") error_event(e);
  }

  // The next input while no request is outstanding; server events that arrive meanwhile are strays.
  Inbound next_idle() {
    if (!deferred_.empty()) {
      Inbound in = std::move(deferred_.front());
      deferred_.pop_front();
      return in;
    }
    for (;;) {
      Inbound in = inbox_.pop();
      switch (in.kind) {
        case Inbound::Kind::kEvent: stray(in.event); break;
        case Inbound::Kind::kInterrupt:
          end_line_forced();
          info("chat", "no response is running; /quit or Ctrl-D leaves");
          if (interactive_) prompt();
          break;
        default: return in;
      }
    }
  }

  // Sends a request and waits for the server event that answers it (or an error with its id).
  // Input that arrives meanwhile waits its turn.
  Result<json::object> request(json::object event) {
    const std::string id = send(std::move(event));
    bool interrupted = false;
    for (;;) {
      Inbound in = inbox_.pop();
      switch (in.kind) {
        case Inbound::Kind::kEvent:
          if (str(in.event, "event_id") == id) return std::move(in.event);
          stray(in.event);
          break;
        case Inbound::Kind::kLine:
        case Inbound::Kind::kEndOfInput: deferred_.push_back(std::move(in)); break;
        case Inbound::Kind::kInterrupt:
          if (interrupted) {
            quit_ = true;
            return json::object{{"type", "interrupted"}};
          }
          interrupted = true;
          info("chat", "waiting for the server; Ctrl-C again quits");
          break;
        case Inbound::Kind::kClosed: return lost(in.text);
      }
    }
  }

  json::object session_settings() const {
    json::object e{{"type", "session.create"}};
    if (!cmd_.instructions.empty()) e["instructions"] = cmd_.instructions;
    if (tools_) e["tools"] = *tools_;
    if (!cmd_.tool_choice.empty()) e["tool_choice"] = cmd_.tool_choice;
    if (cmd_.thinking) e["thinking"] = true;
    return e;
  }

 public:
  void set_tools(json::array tools) { tools_ = std::move(tools); }

 private:
  Result<bool> create_session() {
    HIPPO_ASSIGN_OR_RETURN(json::object reply, request(session_settings()));
    if (str(reply, "type") != "session.created") {
      if (str(reply, "type") == "error") error_event(reply);
      return false;
    }
    session_ = str(reply, "session_id");
    pending_.clear();
    info("session", session_ + " created");
    return true;
  }

  Result<bool> resume(const std::string& id) {
    HIPPO_ASSIGN_OR_RETURN(json::object reply, request({{"type", "session.resume"}, {"session_id", id}}));
    if (str(reply, "type") != "session.resumed") {
      if (str(reply, "type") == "error") error_event(reply);
      return false;
    }
    session_ = id;
    pending_.clear();
    if (const json::value* ids = reply.if_contains("awaiting_call_ids"); ids && ids->is_array()) {
      for (const json::value& call : ids->get_array())
        if (call.is_string()) pending_.push_back({std::string(call.get_string()), "", ""});
    }
    show_view("session", "resumed", reply);
    return true;
  }

  Status snapshot() {
    HIPPO_ASSIGN_OR_RETURN(json::object reply, request({{"type", "session.snapshot"}, {"session_id", session_}}));
    if (str(reply, "type") == "session.snapshotted") show_view("snapshot", "snapshotted", reply);
    else if (str(reply, "type") == "error") error_event(reply);
    return Status::ok_status();
  }

  void list_sessions() {
    auto reply = chat::http_get(url_, chat::TlsTrust{cmd_.ca_file}, "/v1/sessions", cmd_.api_key);
    if (!reply.ok()) {
      error(reply.status().message());
      return;
    }
    if (reply->status == 404 || reply->status == 405 || reply->status == 501) {
      info("sessions", fmt::format("unavailable: this server does not list sessions (GET /v1/sessions answered {})",
                                   reply->status));
      return;
    }
    boost::system::error_code ec;
    json::value doc = json::parse(reply->body, ec);
    if (reply->status != 200) {
      std::string message = reply->body;
      if (!ec && doc.is_object()) {
        if (const json::value* e = doc.get_object().if_contains("error"); e && e->is_object())
          message = str(e->get_object(), "message");
      }
      error(fmt::format("GET /v1/sessions: HTTP {}: {}", reply->status, trim(message)));
      return;
    }
    const json::array* list = nullptr;
    if (!ec && doc.is_array()) list = &doc.get_array();
    if (!ec && doc.is_object()) {
      for (const char* key : {"data", "sessions"})
        if (const json::value* v = doc.get_object().if_contains(key); v && v->is_array()) list = &v->get_array();
    }
    if (list == nullptr) {
      info("sessions", trim(reply->body));
      return;
    }
    info("sessions", fmt::format("{} session{}", list->size(), list->size() == 1 ? "" : "s"));
    for (const json::value& s : *list) {
      if (!s.is_object()) {
        raw("  " + scalar_text(s) + "\n");
        continue;
      }
      const json::object& o = s.get_object();
      std::string id = str(o, "id").empty() ? str(o, "session_id") : str(o, "id");
      std::string line = "  " + id;
      for (const auto& [key, value] : o) {
        if (key == "id" || key == "session_id" || value.is_object() || value.is_array()) continue;
        line += fmt::format(" {}={}", std::string_view(key), scalar_text(value));
      }
      if (id == session_) line += "  (this chat)";
      raw(line + "\n");
    }
    out_.flush();
  }

  Status give_tool_result(const std::string& call_id, const std::string& content) {
    HIPPO_ASSIGN_OR_RETURN(
        json::object reply,
        request({{"type", "input.append"},
                 {"session_id", session_},
                 {"items", json::array{json::object{{"type", "tool_result"}, {"call_id", call_id}, {"content", content}}}}}));
    if (str(reply, "type") != "input.appended") {
      if (str(reply, "type") == "error") error_event(reply);
      return Status::ok_status();
    }
    const bool was_pending = !pending_.empty();
    std::erase_if(pending_, [&](const ToolCall& c) { return c.id == call_id; });
    if (was_pending && pending_.empty()) return respond();
    return Status::ok_status();
  }

  Status user_message(const std::string& content) {
    HIPPO_ASSIGN_OR_RETURN(
        json::object reply,
        request({{"type", "input.append"},
                 {"session_id", session_},
                 {"items", json::array{json::object{{"type", "message"}, {"content", content}}}}}));
    if (str(reply, "type") != "input.appended") {
      if (str(reply, "type") == "error") error_event(reply);
      return Status::ok_status();
    }
    return respond();
  }

  void show_usage(const json::object& done) {
    const json::value* u = done.if_contains("usage");
    if (u == nullptr || !u->is_object()) return;
    const json::object& usage = u->get_object();
    const double output = num(usage, "output_tokens"), decode_ms = num(usage, "decode_ms");
    std::string rate = decode_ms > 0 && output > 1 ? fmt::format(" ({:.1f} tokens/s)", (output - 1) * 1e3 / decode_ms) : "";
    info("usage", fmt::format("input_tokens {} (cached {}), output_tokens {}, finish {}; first token {:.1f} ms, "
                              "prefill {:.1f} ms, decode {:.1f} ms{}",
                              integer(usage, "input_tokens"), integer(usage, "cached_tokens"), integer(usage, "output_tokens"),
                              str(done, "finish_reason"), num(usage, "first_token_ms"), num(usage, "prefill_ms"), decode_ms,
                              rate));
  }

  // Creates a response and shows its events until it ends. /cancel and Ctrl-C cancel it; other
  // input waits until it has ended.
  Status respond() {
    json::object create{{"type", "response.create"}, {"session_id", session_}};
    if (cmd_.max_output_tokens) create["max_output_tokens"] = *cmd_.max_output_tokens;
    if (cmd_.temperature) create["temperature"] = *cmd_.temperature;
    if (cmd_.top_p) create["top_p"] = *cmd_.top_p;
    if (cmd_.top_k) create["top_k"] = *cmd_.top_k;
    if (cmd_.seed) create["seed"] = *cmd_.seed;
    // A /cancel typed while the request was on its way is for this response; one that follows other
    // queued input is for a later one.
    bool cancelling = false;
    while (!deferred_.empty() && deferred_.front().kind == Inbound::Kind::kLine && trim(deferred_.front().text) == "/cancel") {
      deferred_.pop_front();
      cancelling = true;
    }
    const std::string id = send(std::move(create));
    if (cancelling) conn_.send({{"type", "response.cancel"}, {"session_id", session_}});
    std::vector<ToolCall> calls;
    for (;;) {
      Inbound in = inbox_.pop();
      switch (in.kind) {
        case Inbound::Kind::kEvent: {
          const json::object& e = in.event;
          if (str(e, "event_id") != id) {
            stray(e);
            break;
          }
          const std::string type = str(e, "type");
          if (type == "response.output_text.delta") {
            text(str(e, "delta"));
          } else if (type == "response.reasoning.delta") {
            reasoning(str(e, "delta"));
          } else if (type == "response.function_call.done") {
            calls.push_back({str(e, "call_id"), str(e, "name"), str(e, "arguments")});
            end_line();
            style("\x1b[36m");
            raw(fmt::format("[tool call] {} {} {}", calls.back().id, calls.back().name, calls.back().arguments));
            style("\x1b[0m");
            raw("\n");
            out_.flush();
          } else if (type == "response.completed") {
            show_usage(e);
            if (str(e, "finish_reason") == "tool_calls" && !calls.empty()) {
              pending_ = calls;
              info("chat", fmt::format("{} tool call{} await{} a result: type it, or /tool CALL_ID RESULT",
                                       calls.size(), calls.size() == 1 ? "" : "s", calls.size() == 1 ? "s" : ""));
            }
            return Status::ok_status();
          } else if (type == "response.failed" || type == "error") {
            error_event(e);
            return Status::ok_status();
          }
          // response.created, function_call.begin and argument deltas: shown by the events above.
          break;
        }
        case Inbound::Kind::kLine:
          if (trim(in.text) == "/cancel" && deferred_.empty()) {
            if (!cancelling) conn_.send({{"type", "response.cancel"}, {"session_id", session_}});
            cancelling = true;
          } else {
            deferred_.push_back(std::move(in));
          }
          break;
        case Inbound::Kind::kEndOfInput: deferred_.push_back(std::move(in)); break;
        case Inbound::Kind::kInterrupt:
          if (cancelling) {  // the server does not answer; leave (closing the connection cancels)
            quit_ = true;
            end_line_forced();
            return Status::ok_status();
          }
          conn_.send({{"type", "response.cancel"}, {"session_id", session_}});
          cancelling = true;
          end_line_forced();
          info("chat", "cancelling the response; Ctrl-C again quits");
          break;
        case Inbound::Kind::kClosed: return lost(in.text);
      }
    }
  }

  Status handle_line(const std::string& line) {
    if (line.starts_with("//")) return pending_.empty() ? user_message(line.substr(1)) : give_tool_result(pending_.front().id, line.substr(1));
    if (!line.starts_with("/")) {
      if (trim(line).empty()) return Status::ok_status();
      if (!pending_.empty()) return give_tool_result(pending_.front().id, line);
      return user_message(line);
    }
    std::istringstream words(line);
    std::string command, arg;
    words >> command;
    if (command == "/quit" || command == "/exit") {
      quit_ = true;
    } else if (command == "/help") {
      end_line();
      raw(kHelp);
      out_.flush();
    } else if (command == "/snapshot") {
      return snapshot();
    } else if (command == "/sessions") {
      list_sessions();
    } else if (command == "/resume") {
      words >> arg;
      if (arg.empty()) error("/resume needs a session id: /resume s_...");
      else return resume(arg).status();
    } else if (command == "/new") {
      return create_session().status();
    } else if (command == "/cancel") {
      info("chat", "no response is running");
    } else if (command == "/tool") {
      words >> arg;
      std::string rest;
      std::getline(words, rest);
      if (arg.empty()) error("/tool needs a call id and the result: /tool call_0 {\"temperature\": 21}");
      else return give_tool_result(arg, rest.empty() ? rest : rest.substr(1));
    } else {
      error(fmt::format("unknown command {}; /help lists them (start a message with // to send a '/')", command));
    }
    return Status::ok_status();
  }

  enum class Mode { kNone, kText, kReasoning };

  const ChatCommand& cmd_;
  const chat::Url& url_;
  std::ostream& out_;
  std::ostream& err_;
  chat::Inbox& inbox_;
  chat::Connection& conn_;
  const bool ansi_;
  const bool interactive_;
  std::optional<json::array> tools_;
  std::string session_;
  std::vector<ToolCall> pending_;
  std::deque<Inbound> deferred_;
  int next_event_ = 0;
  bool quit_ = false;
  bool at_line_start_ = true;
  Mode mode_ = Mode::kNone;
};

Result<json::array> read_tools(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::kInvalidArgument, "--tools {}: cannot be read", path);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  boost::system::error_code ec;
  json::value doc = json::parse(bytes.str(), ec);
  if (ec) return make_error(ErrorCode::kInvalidArgument, "--tools {}: not JSON: {}", path, ec.message());
  if (!doc.is_array())
    return make_error(ErrorCode::kInvalidArgument,
                      "--tools {}: must be a JSON array of tools, e.g. [{{\"name\": \"calc\", \"parameters\": {{...}}}}]", path);
  return std::move(doc.get_array());
}

bool use_ansi() {
  const char* term = std::getenv("TERM");
  return ::isatty(STDOUT_FILENO) && std::getenv("NO_COLOR") == nullptr && !(term && std::string_view(term) == "dumb");
}

Status run_chat(const ChatCommand& cmd, std::ostream& out) {
  HIPPO_ASSIGN_OR_RETURN(chat::Url url, chat::parse_ws_url(cmd.url));
  std::optional<json::array> tools;
  if (!cmd.tools_file.empty()) {
    HIPPO_ASSIGN_OR_RETURN(json::array t, read_tools(cmd.tools_file));
    tools = std::move(t);
  }
  chat::Inbox inbox;
  HIPPO_ASSIGN_OR_RETURN(std::unique_ptr<chat::Connection> connection, chat::Connection::open(url, chat::TlsTrust{cmd.ca_file}, cmd.api_key, inbox));
  Status result;
  {
    chat::InputReader input(inbox);
    Chat chat(cmd, url, out, std::cerr, inbox, *connection, use_ansi(), ::isatty(STDIN_FILENO) != 0);
    if (tools) chat.set_tools(std::move(*tools));
    result = chat.run();
    connection->close();
  }  // the reader stops here
  out.flush();
  return result;
}

}  // namespace

void add_chat_command(CLI::App& app, Invocation& inv) {
  auto cmd = std::make_shared<ChatCommand>();
  CLI::App* chat = app.add_subcommand("chat", "Interactive terminal client for a running server");
  chat->add_option("--url", cmd->url, "The server's agents endpoint (wss:// for a server with --tls-cert)")
      ->capture_default_str();
  chat->add_option("--ca-file", cmd->ca_file, "PEM certificate(s) to trust for wss:// (default: the system's)");
  chat->add_option("--api-key", cmd->api_key, "API key, sent as `Authorization: Bearer KEY`");
  chat->add_option("--session", cmd->session, "Resume this session instead of creating one");
  chat->add_option("--instructions", cmd->instructions, "Instructions (system message) of a new session");
  chat->add_option("--tools", cmd->tools_file, "JSON file: an array of tools a new session declares");
  chat->add_option("--tool-choice", cmd->tool_choice, "auto, none or required (new sessions; default: auto)")
      ->check(CLI::IsMember({"auto", "none", "required"}));
  chat->add_flag("--thinking", cmd->thinking, "New sessions answer after reasoning (shown dimmed)");
  chat->add_option("--max-output-tokens", cmd->max_output_tokens, "Output tokens of each response (default: the server's)")
      ->check(CLI::PositiveNumber);
  chat->add_option("--temperature", cmd->temperature, "Sampling temperature (default 0: greedy)")->check(CLI::NonNegativeNumber);
  chat->add_option("--top-p", cmd->top_p, "Nucleus sampling: keep the top tokens of this probability mass")
      ->check(CLI::Range(0.0, 1.0));
  chat->add_option("--top-k", cmd->top_k, "Sample from the k most likely tokens (0: off)")->check(CLI::NonNegativeNumber);
  chat->add_option("--seed", cmd->seed, "Sampling seed");
  chat->parse_complete_callback([&inv, cmd] {
    inv.action = [&inv, cmd] { return run_chat(*cmd, *inv.out); };
  });
}

}  // namespace hippo::cli
